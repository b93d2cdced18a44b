//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
)

// roots is a client's roots/list answer, which a test changes.
type roots struct {
	mu    sync.Mutex
	list  []mcp.Root
	asked int
}

func (r *roots) set(list ...mcp.Root) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = list
}

func (r *roots) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	return &mcp.ListRootsResult{Roots: append([]mcp.Root{}, r.list...)}, nil
}

func fileRoot(name, dir string) mcp.Root {
	return mcp.Root{Name: name, URI: (&url.URL{Scheme: "file", Path: dir}).String()}
}

// startWithRoots is startServer for a client that declares roots.
func startWithRoots(t *testing.T, manifestPath string, h client.RootsHandler) *server {
	t.Helper()
	return startWithOptions(t, manifestPath, client.WithRootsHandler(h))
}

// rootsTree is a folder roots may be under: two projects, a secret beside
// them that links inside a project point at, and a folder outside it.
func rootsTree(t *testing.T) (top, proj, proj2, outside string) {
	top, outside = t.TempDir(), t.TempDir()
	proj, proj2 = filepath.Join(top, "My Project"), filepath.Join(top, "other")
	for _, d := range []string{filepath.Join(proj, "data"), proj2} {
		must(t, os.MkdirAll(d, 0o755))
	}
	for _, d := range []string{top, outside} {
		must(t, os.Chmod(d, 0o755))
	}
	must(t, os.WriteFile(filepath.Join(proj, "data", "sales.csv"), []byte("region,amount\nnorth,3\nsouth,4\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(proj2, "b.txt"), []byte("B\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(top, "secret.txt"), []byte("HOST-SECRET"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "o.txt"), []byte("OUTSIDE"), 0o644))
	must(t, os.Symlink(filepath.Join(top, "secret.txt"), filepath.Join(proj, "abs")))
	must(t, os.Symlink("../secret.txt", filepath.Join(proj, "rel")))
	// A root that is itself a link to a folder outside the allowed one.
	must(t, os.Symlink(outside, filepath.Join(top, "sneaky")))
	return top, proj, proj2, outside
}

// MCP roots: mounted read-only at /mnt/roots/<name> when the manifest
// allows it, only folders under roots.under, links inside never reaching
// outside, named in the result; a changed list counts from the next call.
func TestFoldersRoots(t *testing.T) {
	top, proj, proj2, outside := rootsTree(t)
	h := &roots{}
	h.set(fileRoot("My Project", proj), fileRoot("outside", outside), fileRoot("sneaky", filepath.Join(top, "sneaky")),
		mcp.Root{Name: "web", URI: "https://example.com/repo"}, fileRoot("gone", filepath.Join(top, "nope")))
	s := startWithRoots(t, writeManifest(t, "audit:\n  enabled: false\nroots:\n  mount: true\n  under: ["+top+"]\nsessions:\n  enabled: true\n"), h)

	t.Run("mounted read-only, named in the result", func(t *testing.T) {
		r := runOn(t, s, "python", `
import csv, os
rows = list(csv.DictReader(open('/mnt/roots/my-project/data/sales.csv')))
print(sum(int(r['amount']) for r in rows))
try:
    open('/mnt/roots/my-project/new.txt', 'w')
    print('WROTE')
except OSError as e:
    print('refused', e.errno)
print(sorted(os.listdir('/mnt/roots')))
print([l.split()[3] for l in open('/proc/mounts') if ' /mnt/roots/my-project ' in l])
`)
		mustOK(t, r)
		lines := strings.Split(r.Stdout, "\n")
		if len(lines) < 4 || lines[0] != "7" || lines[1] != "refused 30" || lines[2] != "['my-project']" || !strings.HasPrefix(lines[3], "['ro,") {
			t.Fatalf("stdout %q\n%s", r.Stdout, s.stderr)
		}
		if len(r.Roots) != 1 || r.Roots[0].Path != "/mnt/roots/my-project" || r.Roots[0].URI != fileRoot("", proj).URI {
			t.Fatalf("roots %+v", r.Roots)
		}
		// A client that shows the model only the text sees them too.
		_, raw := s.call(t, map[string]any{"language": "bash", "code": "true"})
		if text := raw.Content[0].(mcp.TextContent).Text; !strings.Contains(text, "/mnt/roots/my-project ← "+fileRoot("", proj).URI) {
			t.Errorf("the text does not name the root: %q", text)
		}
		for _, why := range []string{"not a file:// URI", "outside the manifest's roots.under folders", "not on this host"} {
			if !strings.Contains(s.stderr.String(), why) {
				t.Errorf("no log line says a root was skipped as %q:\n%s", why, s.stderr)
			}
		}
	})
	t.Run("links inside never reach the host outside the root", func(t *testing.T) {
		r := runOn(t, s, "bash", "cat /mnt/roots/my-project/abs /mnt/roots/my-project/rel 2>&1; echo done")
		if strings.Contains(r.Stdout, "HOST-SECRET") || !strings.Contains(r.Stdout, "done") {
			t.Fatalf("a link reached the host: %q", r.Stdout)
		}
	})
	t.Run("in a session, listed by session_open", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = "session_open", map[string]any{"language": "python"}
		res, err := s.c.CallTool(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Session struct {
				ID    string          `json:"session_id"`
				Roots []contract.Root `json:"roots"`
			} `json:"session"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		must(t, json.Unmarshal(raw, &a))
		if len(a.Session.Roots) != 1 || a.Session.Roots[0].Path != "/mnt/roots/my-project" {
			t.Fatalf("session_open: %s", raw)
		}
		if r := s.in(t, a.Session.ID, "python", "open('/mnt/roots/my-project/data/sales.csv').read().count('\\n')"); r.Stdout != "3\n" {
			t.Fatalf("session: %+v", r)
		}
		s.tool(t, "session_close", map[string]any{"session_id": a.Session.ID})
	})
	t.Run("a changed list counts from the next call", func(t *testing.T) {
		h.set(fileRoot("", proj2))
		if err := s.c.RootListChanges(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := runOn(t, s, "bash", "ls /mnt/roots; cat /mnt/roots/other/b.txt")
		if mustOK(t, r); r.Stdout != "other\nB\n" || len(r.Roots) != 1 || r.Roots[0].Path != "/mnt/roots/other" {
			t.Fatalf("after list_changed: %q %+v", r.Stdout, r.Roots)
		}
		h.set()
		r = runOn(t, s, "bash", "ls /mnt/roots 2>&1; echo end")
		if strings.Contains(r.Stdout, "other") || len(r.Roots) != 0 {
			t.Fatalf("with no roots: %q %+v", r.Stdout, r.Roots)
		}
	})
}

// Roots are not asked for, nor mounted, when the manifest does not allow
// it; a client without the roots capability gets none.
func TestFoldersRootsNotAllowed(t *testing.T) {
	top, proj, _, _ := rootsTree(t)
	h := &roots{}
	h.set(fileRoot("p", proj))
	s := startWithRoots(t, writeManifest(t, "audit:\n  enabled: false\n"), h)
	r := runOn(t, s, "bash", "ls /mnt/roots 2>&1; echo end")
	if strings.Contains(r.Stdout, "p\n") || len(r.Roots) != 0 || h.asked != 0 {
		t.Fatalf("roots off: %q %+v asked %d", r.Stdout, r.Roots, h.asked)
	}
	plain := startServer(t, nil, "--manifest", writeManifest(t, "audit:\n  enabled: false\nroots:\n  mount: true\n  under: ["+top+"]\n"))
	t.Cleanup(plain.close)
	r = runOn(t, plain, "bash", "ls /mnt/roots 2>&1; echo end")
	if mustOK(t, r); len(r.Roots) != 0 || !strings.HasSuffix(r.Stdout, "end\n") {
		t.Fatalf("no roots capability: %q %+v", r.Stdout, r.Roots)
	}
}

// Over HTTP each client's roots reach only its own calls.
func TestFoldersRootsHTTPClients(t *testing.T) {
	top, proj, proj2, _ := rootsTree(t)
	m := writeManifest(t, "audit:\n  enabled: false\nroots:\n  mount: true\n  under: ["+top+"]\n")
	s := startNetServer(t, "http", "--manifest", m)
	rootsClient := func(h *roots) *client.Client {
		tr, err := transport.NewStreamableHTTP(s.url("http"), transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + testToken}))
		must(t, err)
		c := client.NewClient(tr, client.WithRootsHandler(h))
		must(t, c.Start(context.Background()))
		if err := initialize(c); err != nil {
			t.Fatalf("initialize: %v\n%s", err, s.stderr)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	ha, hb := &roots{}, &roots{}
	ha.set(fileRoot("a", proj))
	hb.set(fileRoot("b", proj2))
	ca, cb := rootsClient(ha), rootsClient(hb)
	var wg sync.WaitGroup
	got := make([]contract.Result, 2)
	for i, c := range []*client.Client{ca, cb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = callOn(t, c, map[string]any{"language": "bash", "code": "ls /mnt/roots"})
		}()
	}
	wg.Wait()
	if got[0].Stdout != "a\n" || got[1].Stdout != "b\n" {
		t.Fatalf("a saw %q, b saw %q\n%s", got[0].Stdout, got[1].Stdout, s.stderr)
	}
}

// TestFoldersRootsTypeScript: the reference TypeScript SDK client, which
// speaks an earlier protocol (roots/list sent by runbox), declares roots.
func TestFoldersRootsTypeScript(t *testing.T) {
	top, proj, proj2, _ := rootsTree(t)
	m := writeManifest(t, "audit:\n  enabled: false\nroots:\n  mount: true\n  under: ["+top+"]\n")
	cmd := exec.Command("node", "roots.mjs", runboxBin, m, proj, proj2)
	cmd.Dir = "ts"
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ts roots:") {
		t.Fatalf("TypeScript client: %v\n%s", err, out)
	}
	t.Log(strings.TrimSpace(string(out)))
}
