//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// Declared folders: read-only at /mnt/<name> in one-off runs and sessions,
// links inside never reach the host outside them, a files entry may name a
// file in one, and artifacts can be saved in the outputs folder.
func TestDeclaredFolders(t *testing.T) {
	top := t.TempDir()
	data, outputs := filepath.Join(top, "data"), filepath.Join(top, "outputs")
	for _, d := range []string{filepath.Join(data, "sub"), outputs} {
		must(t, os.MkdirAll(d, 0o755))
	}
	must(t, os.Chmod(top, 0o755))
	must(t, os.WriteFile(filepath.Join(top, "secret.txt"), []byte("HOST-SECRET"), 0o644))
	must(t, os.WriteFile(filepath.Join(data, "sub", "sales.csv"), []byte("region,amount\nnorth,3\nsouth,4\n"), 0o644))
	must(t, os.Symlink(filepath.Join(top, "secret.txt"), filepath.Join(data, "abs")))
	must(t, os.Symlink("../secret.txt", filepath.Join(data, "rel")))
	must(t, os.Chmod(outputs, 0o777))
	s := dockerServer(t, "mounts:\n  - name: data\n    path: "+data+"\noutputs: "+outputs+"\n")

	t.Run("read-only, named in the description", func(t *testing.T) {
		r := runOn(t, s, "python", `
import csv, os
rows = list(csv.DictReader(open('/mnt/data/sub/sales.csv')))
print(sum(int(r['amount']) for r in rows))
try:
    open('/mnt/data/new.txt', 'w')
    print('WROTE')
except OSError as e:
    print('refused', e.errno)
print([l.split()[3].split(',')[0] for l in open('/proc/mounts') if ' /mnt/data ' in l])
`)
		mustOK(t, r)
		if !strings.HasPrefix(r.Stdout, "7\nrefused 30\n['ro']") {
			t.Fatalf("stdout %q", r.Stdout)
		}
		if desc := toolDescriptions(t, s.c)["run_code"]; !strings.Contains(desc, "/mnt/data") {
			t.Fatalf("run_code's description does not name /mnt/data:\n%s", desc)
		}
	})
	t.Run("links inside never reach the host outside the folder", func(t *testing.T) {
		r := runOn(t, s, "bash", "cat /mnt/data/abs /mnt/data/rel 2>&1; ls -la /mnt/data/ >/dev/null; echo done")
		if strings.Contains(r.Stdout, "HOST-SECRET") || !strings.Contains(r.Stdout, "done") {
			t.Fatalf("a link reached the host: %q", r.Stdout)
		}
		r = runOn(t, s, "python", "print(open('s.csv').read())", "files", []map[string]any{{"path": "s.csv", "source": "/mnt/data/abs"}})
		wantError(t, r, contract.KindInvalidRequest, "")
	})
	t.Run("a files entry names a file in a folder", func(t *testing.T) {
		r := runOn(t, s, "bash", "wc -l < in/s.csv", "files", []map[string]any{{"path": "in/s.csv", "source": "/mnt/data/sub/sales.csv"}})
		if mustOK(t, r); r.Stdout != "3\n" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	})
	t.Run("artifacts saved in the outputs folder, never overwriting", func(t *testing.T) {
		r := runOn(t, s, "bash", "mkdir -p out && echo result > out/r.txt", "save_artifacts", true)
		mustOK(t, r)
		want := filepath.Join(outputs, r.RunID, "out", "r.txt")
		if len(r.Artifacts) != 1 || r.Artifacts[0].SavedTo != want {
			t.Fatalf("artifacts %+v", r.Artifacts)
		}
		if got, _ := os.ReadFile(want); string(got) != "result\n" {
			t.Fatalf("saved %q", got)
		}
	})
	t.Run("in a session too", func(t *testing.T) {
		id := s.open(t, "python")
		mustOK(t, s.in(t, id, "python", "rows = open('/mnt/data/sub/sales.csv').read().splitlines()"))
		if r := s.in(t, id, "python", "len(rows)"); r.Stdout != "3\n" {
			t.Fatalf("session: %+v", r)
		}
		s.tool(t, "session_close", map[string]any{"session_id": id})
	})
}

func runOn(t *testing.T, s *server, language, code string, extra ...any) contract.Result {
	t.Helper()
	args := map[string]any{"language": language, "code": code}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	r, _ := s.call(t, args)
	return r
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
