package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/runbox-mcp/runbox/"

// goList runs go list -deps on pkgs as for a Linux server (the drivers'
// Linux-only files included) and returns what format prints, one entry
// a line.
func goList(t *testing.T, format string, pkgs ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-f", format}, pkgs...)...)
	cmd.Env = append(os.Environ(), "GOOS=linux")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", pkgs, err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// The import graph points down (doc.go): sandbox knows no engine client,
// no MCP, no driver, neither egress nor upstream, whose pieces a run gets
// from its caller; and upstream and egress, which serve a run's streams,
// know the channel's types (initproto), not the run algorithm.
func TestImportsPointDown(t *testing.T) {
	banned := []string{module + "egress", module + "upstream", module + "tools", module + "sandbox/",
		"github.com/docker/", "github.com/moby/", "k8s.io/", "github.com/mark3labs/mcp-go"}
	for _, p := range goList(t, "{{join .Deps \"\\n\"}}", ".") {
		for _, b := range banned {
			if strings.HasPrefix(p, b) {
				t.Errorf("sandbox imports %s", p)
			}
		}
	}
	for _, p := range goList(t, "{{join .Deps \"\\n\"}}", "../upstream", "../egress") {
		if strings.HasPrefix(p, module+"sandbox") {
			t.Errorf("upstream or egress imports %s", p)
		}
	}
}

// No driver imports another: what two drivers share lives in a package
// that imports no driver (sandbox/linuxbox), as containerd's runtimes share
// pkg/oci. The drivers are what sandbox/backend chooses from, read from
// its imports, so a new driver is checked as soon as it can be chosen.
func TestDriversImportNoDriver(t *testing.T) {
	var drivers []string
	for _, p := range goList(t, "{{join .Imports \"\\n\"}}", "./backend") {
		if strings.HasPrefix(p, module+"sandbox/") {
			drivers = append(drivers, p)
		}
	}
	if len(drivers) < 3 {
		t.Fatalf("sandbox/backend chooses from %v: fewer drivers than docker, kube and oci", drivers)
	}
	for _, line := range goList(t, "{{.ImportPath}} {{join .Deps \" \"}}", "./...") {
		pkg, deps, _ := strings.Cut(line, " ")
		if pkg == module+"sandbox/backend" {
			continue
		}
		for _, d := range strings.Fields(deps) {
			if d != pkg && slices.Contains(drivers, d) {
				t.Errorf("%s imports the driver %s", strings.TrimPrefix(pkg, module), strings.TrimPrefix(d, module))
			}
		}
	}
}
