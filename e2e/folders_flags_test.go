//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/sandbox"
)

// Declared folders are mounted read-only, nosuid, nodev and noexec on
// every engine: a program or a setuid binary in one does not run. On
// Docker a folder is a volume of this server's (folders.go), gone once the
// server is.
func TestFoldersMountFlags(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	must(t, os.MkdirAll(data, 0o755))
	must(t, os.Chmod(filepath.Dir(data), 0o755))
	for name, mode := range map[string]os.FileMode{"prog": 0o755, "suid": 0o4755} {
		b, err := os.ReadFile("/bin/bash")
		must(t, err)
		must(t, os.WriteFile(filepath.Join(data, name), b, 0o644))
		must(t, os.Chmod(filepath.Join(data, name), mode))
	}
	must(t, os.WriteFile(filepath.Join(data, "script.py"), []byte("print('read ok')\n"), 0o644))
	manifest := "mounts:\n  - name: data\n    path: " + data + "\n"
	// The fields of the folder's line in mountinfo: its options, then
	// whether the program and the setuid binary ran, and a script read.
	code := `
grep ' /mnt/data ' /proc/self/mountinfo | cut -d' ' -f6
/mnt/data/prog -c 'echo RAN' 2>/dev/null || echo "prog refused $?"
/mnt/data/suid -p -c 'echo RAN euid=$(id -u)' 2>/dev/null || echo "suid refused $?"
python3 /mnt/data/script.py
`
	for _, engine := range []struct {
		name  string
		start func(*testing.T, string) *server
		// flags: the engine shows them in the box's mountinfo (gVisor's
		// own kernel does not; the host's mount refuses the exec).
		flags bool
	}{
		{"runc", dockerServer, true},
		{"gvisor", gvisorServer, false},
		{"podman", podmanServer, true},
		{"oci", ociServer, true},
	} {
		t.Run(engine.name, func(t *testing.T) {
			s := engine.start(t, manifest)
			r := runOn(t, s, "bash", code)
			mustOK(t, r)
			t.Logf("%q", r.Stdout)
			lines := strings.Split(r.Stdout, "\n")
			if len(lines) < 4 || strings.Contains(r.Stdout, "RAN") || !strings.HasPrefix(lines[1], "prog refused") ||
				!strings.HasPrefix(lines[2], "suid refused") || lines[3] != "read ok" {
				t.Fatalf("stdout %q\n%s", r.Stdout, s.stderr)
			}
			opts := strings.Split(lines[0], ",")
			want := []string{"ro"}
			if engine.flags {
				want = append(want, "nosuid", "nodev", "noexec")
			}
			for _, o := range want {
				if !contains(opts, o) {
					t.Errorf("mount options %q lack %s", lines[0], o)
				}
			}
			if engine.name == "podman" || engine.name == "oci" {
				return // no folder volumes: the bind carries the flags
			}
			if vols := folderVolumes(data); len(vols) != 1 {
				t.Errorf("folder volumes while the server runs: %v", vols)
			}
			s.close()
			deadline := time.Now().Add(10 * time.Second)
			for len(folderVolumes(data)) > 0 && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			if vols := folderVolumes(data); len(vols) > 0 {
				t.Errorf("folder volumes left after the server closed: %v", vols)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// folderVolumes lists the Docker engine's volumes that bind folder.
func folderVolumes(folder string) []string {
	out, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label="+sandbox.LabelFolder+"="+folder).Output()
	return strings.Fields(string(out))
}

// A killed server's folder volume is reaped by the next server on the
// engine, once no box uses it.
func TestFoldersVolumeReaped(t *testing.T) {
	data := t.TempDir()
	must(t, os.Chmod(data, 0o755))
	manifest := "mounts:\n  - name: data\n    path: " + data + "\n"
	a := dockerServer(t, manifest)
	mustOK(t, runOn(t, a, "bash", "ls /mnt/data"))
	if vols := folderVolumes(data); len(vols) != 1 {
		t.Fatalf("folder volumes: %v", vols)
	}
	must(t, a.cmd.Process.Kill())
	_, _ = a.cmd.Process.Wait()
	dockerServer(t, manifest)
	deadline := time.Now().Add(20 * time.Second)
	for len(folderVolumes(data)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if vols := folderVolumes(data); len(vols) > 0 {
		t.Fatalf("the killed server's folder volume was not reaped: %v", vols)
	}
}
