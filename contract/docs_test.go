package contract

import (
	"os"
	"strings"
	"testing"
)

// TestSecurityDocNamesEveryForbiddenSyscall: docs/security.md lists the
// calls that kill a program, from the one list.
func TestSecurityDocNamesEveryForbiddenSyscall(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ForbiddenSyscallNames() {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/security.md does not name `%s`", name)
		}
	}
}
