//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	corev1 "k8s.io/api/core/v1"

	"github.com/runbox-mcp/runbox/sandbox"
)

// Declared folders and a client's roots on Kubernetes: read-only hostPath
// volumes (the single-node cluster's node is this host) at /mnt/<name> and
// /mnt/roots/<name>, links inside never reaching outside, in one-off runs
// and sessions, the pod otherwise as hardened as ever.
func TestKubeFolders(t *testing.T) {
	kubeSetup(t)
	top, proj, _, _ := rootsTree(t)
	data := filepath.Join(top, "data")
	must(t, os.MkdirAll(filepath.Join(data, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(data, "sub", "sales.csv"), []byte("region,amount\nnorth,3\nsouth,4\n"), 0o644))
	must(t, os.Symlink(filepath.Join(top, "secret.txt"), filepath.Join(data, "abs")))
	must(t, os.Symlink("../secret.txt", filepath.Join(data, "rel")))
	h := &roots{}
	h.set(fileRoot("proj", proj))
	s := startWithRoots(t, kubeManifest(t, "mounts:\n  - name: data\n    path: "+data+"\nroots:\n  mount: true\n  under: ["+top+"]\n"), h)
	t.Cleanup(func() { kubeNoPods(t) })

	t.Run("read-only, links stay inside", func(t *testing.T) {
		r := runOn(t, s, "python", `
import csv
rows = list(csv.DictReader(open('/mnt/data/sub/sales.csv')))
print(sum(int(r['amount']) for r in rows))
print(open('/mnt/roots/proj/data/sales.csv').read().count('\n'))
for p in ('/mnt/data/new.txt', '/mnt/roots/proj/new.txt'):
    try:
        open(p, 'w')
        print('WROTE', p)
    except OSError as e:
        print('refused', e.errno)
for p in ('/mnt/data/abs', '/mnt/data/rel', '/mnt/roots/proj/abs', '/mnt/roots/proj/rel'):
    try:
        print('READ', open(p).read())
    except OSError as e:
        print('no', e.errno)
print(sorted(l.split()[1] + ' ' + l.split()[3].split(',')[0] for l in open('/proc/mounts') if l.split()[1].startswith('/mnt/')))
`)
		mustOK(t, r)
		want := "7\n3\nrefused 30\nrefused 30\nno 2\nno 2\nno 2\nno 2\n['/mnt/data ro', '/mnt/roots/proj ro']\n"
		if r.Stdout != want || strings.Contains(r.Stdout, "HOST-SECRET") {
			t.Fatalf("stdout %q, want %q\n%s", r.Stdout, want, s.stderr)
		}
		if len(r.Roots) != 1 || r.Roots[0].Path != "/mnt/roots/proj" {
			t.Fatalf("roots %+v", r.Roots)
		}
		// Kubernetes has no nosuid, nodev or noexec for a volume: what the
		// runtime gives is logged, and a setuid binary gains nothing.
		must(t, os.WriteFile(filepath.Join(data, "id"), mustRead(t, "/usr/bin/id"), 0o4755))
		must(t, os.Chmod(filepath.Join(data, "id"), 0o4755))
		r = runOn(t, s, "bash", "grep ' /mnt/data ' /proc/self/mountinfo | cut -d' ' -f6; /mnt/data/id -u 2>&1")
		t.Logf("mount options and a setuid id: %q", r.Stdout)
		if mustOK(t, r); !strings.HasSuffix(r.Stdout, "\n1000\n") {
			t.Fatalf("setuid binary: %q", r.Stdout)
		}
	})
	t.Run("a files entry names a file in a folder", func(t *testing.T) {
		r := runOn(t, s, "bash", "wc -l < in/s.csv", "files", []map[string]any{{"path": "in/s.csv", "source": "/mnt/data/sub/sales.csv"}})
		if mustOK(t, r); r.Stdout != "3\n" {
			t.Fatalf("stdout %q", r.Stdout)
		}
	})
	t.Run("in a session, the pod hardened", func(t *testing.T) {
		id := s.open(t, "python")
		if r := s.in(t, id, "python", "len(open('/mnt/data/sub/sales.csv').read().splitlines()) + len(open('/mnt/roots/proj/data/sales.csv').read().splitlines())"); r.Stdout != "6\n" {
			t.Fatalf("session: %+v", r)
		}
		pods := kubePods(t)
		if len(pods) != 1 {
			t.Fatalf("pods %d", len(pods))
		}
		p := pods[0]
		var folders []corev1.Volume
		vols := p.Spec.Volumes[:0:0]
		for _, v := range p.Spec.Volumes {
			if v.HostPath != nil {
				folders = append(folders, v)
			} else {
				vols = append(vols, v)
			}
		}
		if len(folders) != 2 || folders[0].HostPath.Path != data || folders[1].HostPath.Path != proj ||
			*folders[0].HostPath.Type != corev1.HostPathDirectory {
			t.Fatalf("folder volumes %+v", folders)
		}
		for _, m := range p.Spec.Containers[0].VolumeMounts {
			if strings.HasPrefix(m.MountPath, "/mnt/") && (!m.ReadOnly || m.RecursiveReadOnly == nil || *m.RecursiveReadOnly != corev1.RecursiveReadOnlyIfPossible) {
				t.Errorf("mount %+v", m)
			}
		}
		for _, c := range p.Spec.InitContainers {
			for _, m := range c.VolumeMounts {
				if strings.HasPrefix(m.Name, "folder-") {
					t.Errorf("init container %s mounts %s", c.Name, m.Name)
				}
			}
		}
		p.Spec.Volumes = vols
		p.Spec.Containers[0].StdinOnce = true
		checkHardened(t, p)
		if p.Labels[sandbox.LabelSession] == "" {
			t.Errorf("not the session's pod: %v", p.Labels)
		}
		s.tool(t, "session_close", map[string]any{"session_id": id})
	})
	t.Run("roots changed", func(t *testing.T) {
		h.set(mcp.Root{URI: "https://example.com"})
		r := runOn(t, s, "bash", "test -e /mnt/roots/proj && echo present || echo absent")
		if mustOK(t, r); r.Stdout != "absent\n" || len(r.Roots) != 0 {
			t.Fatalf("stdout %q, roots %+v", r.Stdout, r.Roots)
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	must(t, err)
	return b
}
