package linuxbox

import (
	"maps"
	"slices"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// TestSyscallNamesAreTheContracts: the kernel log names exactly the calls
// the profile kills.
func TestSyscallNamesAreTheContracts(t *testing.T) {
	got := slices.Sorted(maps.Values(syscallNames))
	want := slices.Sorted(slices.Values(contract.ForbiddenSyscallNames()))
	if !slices.Equal(got, want) {
		t.Fatalf("names %v\ncontract %v", got, want)
	}
}
