//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runbox-mcp/runbox/contract"
)

// workspaceAnswer is the structured answer of the workspace tools.
type workspaceAnswer struct {
	Status     string                   `json:"status"`
	Workspaces []contract.WorkspaceInfo `json:"workspaces"`
	Deleted    string                   `json:"deleted"`
	Error      *contract.ErrorInfo      `json:"error"`
}

func workspaceTool(t *testing.T, c *client.Client, name string, args map[string]any) workspaceAnswer {
	t.Helper()
	return structuredCall[workspaceAnswer](t, c, time.Minute, true, name, args)
}

// workspacesDir is a fresh directory of workspaces whose mounts and loop
// devices are checked gone at the test's end (after its servers closed:
// cleanups run last first).
func workspacesDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "runbox-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(30 * time.Second)
		for {
			left := leftMounts(dir)
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("workspaces left mounted: %v", left)
				for _, mp := range left {
					_ = exec.Command("umount", "-l", mp).Run()
				}
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The kernel detaches a loop device a moment after its last
		// mount went.
		imgs, _ := filepath.Glob(filepath.Join(dir, "*", "*", "disk.img"))
		for _, img := range imgs {
			for {
				out, _ := exec.Command("losetup", "-j", img).Output()
				if strings.TrimSpace(string(out)) == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("a loop device still holds %s: %s", img, out)
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		os.RemoveAll(dir)
	})
	return dir
}

func leftMounts(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			out = append(out, f[4])
		}
	}
	return out
}

// mountOptions are the per-mount options of mountinfo's line whose mount
// point is mp.
func mountOptions(mp string) string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 5 && f[4] == mp {
			return f[5]
		}
	}
	return ""
}

func workspaceManifest(dir string) string {
	return "workspaces:\n  enabled: true\n  quota: 32MiB\n  max_per_client: 3\n  dir: " + dir + "\n"
}

// The setup cell: a file, a wheel written by hand and installed with pip
// install --user (offline), and an npm package packed from a folder and
// installed into node_modules; the packed folder is removed, so the next
// session finds the installed copy only.
const workspaceSetup = `
import os, subprocess, zipfile, json, errno
open('keep.txt', 'w').write('kept across sessions')
whl = '/tmp/wsdemo-1.0-py3-none-any.whl'
with zipfile.ZipFile(whl, 'w') as z:
    z.writestr('wsdemo/__init__.py', 'ANSWER = 42\n')
    z.writestr('wsdemo-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\nName: wsdemo\nVersion: 1.0\n')
    z.writestr('wsdemo-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
    z.writestr('wsdemo-1.0.dist-info/RECORD', '')
p = subprocess.run(['pip', 'install', '--user', '--no-index', whl], capture_output=True, text=True)
print('pip', p.returncode, p.stderr[-500:])
os.makedirs('/tmp/jsdemo', exist_ok=True)
open('/tmp/jsdemo/package.json', 'w').write(json.dumps({'name': 'jsdemo', 'version': '1.0.0', 'main': 'index.js'}))
open('/tmp/jsdemo/index.js', 'w').write('module.exports = { answer: 43 }\n')
p = subprocess.run(['npm', 'pack', '/tmp/jsdemo', '--pack-destination', '/tmp'], capture_output=True, text=True)
print('pack', p.returncode, p.stderr[-300:])
p = subprocess.run(['npm', 'install', '--offline', '/tmp/jsdemo-1.0.0.tgz'], capture_output=True, text=True)
print('npm', p.returncode, p.stderr[-500:])
`

// TestWorkspacesKept: a named workspace keeps files and installed
// packages from one session to the next, on Docker (runc), gVisor, oci and
// Kubernetes (a PersistentVolumeClaim of the test cluster's provisioner);
// its quota is the file system's (ENOSPC in the box, the session lives
// on); it is mounted nosuid,nodev; a second session of it is refused while
// the first lives; workspace_list and workspace_delete see and delete it.
func TestWorkspacesKept(t *testing.T) {
	for _, b := range []struct {
		name  string
		start func(*testing.T, string) *server
	}{{"docker", dockerServer}, {"gvisor", gvisorServer}, {"oci", ociServer}, {"kubernetes", kubeWorkspaceServer}} {
		t.Run(b.name, func(t *testing.T) {
			dir := workspacesDir(t)
			workspacesKept(t, b.start(t, workspaceManifest(dir)), dir, b.name)
		})
	}
}

// workspacesKept drives one server through a workspace's life; backend
// says what the host can see of it (gVisor lists its gofer mount without
// flags; on Kubernetes the claim's volume is the provisioner's, and its
// usage is not known).
func workspacesKept(t *testing.T, s *server, dir string, backend string) {
	sentry, kube := backend == "gvisor", backend == "kubernetes"
	id := s.open(t, "python", "workspace", "proj")
	r := s.in(t, id, "python", workspaceSetup, "timeout_seconds", 120)
	if mustOK(t, r); !strings.Contains(r.Stdout, "pip 0") || !strings.Contains(r.Stdout, "pack 0") || !strings.Contains(r.Stdout, "npm 0") {
		t.Fatalf("setup: %s\n%s", r.Stdout, r.Stderr)
	}
	if r := s.in(t, id, "python", "import wsdemo, site\nprint(wsdemo.ANSWER, site.USER_BASE)"); r.Stdout != "42 /workspace/.local\n" {
		t.Fatalf("the package in its own session: %+v %q %q", r.Error, r.Stdout, r.Stderr)
	}
	// The mount's flags: on the host, where the kernel holds the file
	// system, and as the box sees them. gVisor's own kernel lists its
	// gofer mount without them (it reaches the files through the host's
	// nosuid,nodev mount, and no-new-privileges holds there as here).
	if host := leftMounts(dir); !kube && len(host) != 1 {
		t.Fatalf("host mounts of the workspace: %v", host)
	} else if kube && len(host) != 0 {
		t.Fatalf("a workspace on Kubernetes mounted by the server: %v", host)
	} else if !kube {
		for _, flag := range []string{"nosuid", "nodev"} {
			if !strings.Contains(","+mountOptions(host[0])+",", ","+flag+",") {
				t.Errorf("the host's mount of the workspace is not %s: %s", flag, mountOptions(host[0]))
			}
		}
	}
	r = s.in(t, id, "python", "print([l for l in open('/proc/mounts') if ' /workspace ' in l])")
	mustOK(t, r)
	for _, flag := range []string{"nosuid", "nodev"} {
		if !sentry && !strings.Contains(r.Stdout, flag) {
			t.Errorf("/workspace is not %s in the box: %s", flag, r.Stdout)
		}
	}
	// Nor can the box make a device or a set-user-ID file of another
	// user there.
	r = s.in(t, id, "python", `
import os, stat
for what, f in [('mknod', lambda: os.mknod('dev0', 0o600 | stat.S_IFCHR, os.makedev(1, 3))),
                ('chown', lambda: (open('suid', 'w').close(), os.chown('suid', 0, 0)))]:
    try:
        f(); print(what, 'done')
    except OSError as e:
        print(what, 'refused')
`)
	if r.Stdout != "mknod refused\nchown refused\n" {
		t.Errorf("a device or a root file in the workspace: %q %q", r.Stdout, r.Stderr)
	}
	// One writer: a second session of the workspace is refused, and so
	// is its deletion.
	if a := s.tool(t, "session_open", map[string]any{"language": "python", "workspace": "proj"}); a.Error == nil || a.Error.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("a second writer: %+v", a)
	}
	l := workspaceTool(t, s.c, "workspace_list", map[string]any{})
	if len(l.Workspaces) != 1 || l.Workspaces[0].Name != "proj" || !l.Workspaces[0].InUse || l.Workspaces[0].Quota != 32<<20 ||
		(kube != (l.Workspaces[0].BytesUsed == 0)) || (kube != (l.Workspaces[0].Note != "")) {
		t.Fatalf("workspace_list while in use: %+v", l)
	}
	if d := workspaceTool(t, s.c, "workspace_delete", map[string]any{"name": "proj"}); d.Error == nil || d.Error.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("deleted while in use: %+v", d)
	}
	// The quota: writes past it fail with ENOSPC, and the session lives.
	r = s.in(t, id, "python", `
import errno, os
os.makedirs('fill', exist_ok=True)
n = 0
try:
    while n < 200:
        with open('fill/%d' % n, 'wb') as f:
            f.write(b'x' * (1 << 20))
        n += 1
    print('no error after', n)
except OSError as e:
    print('errno', errno.errorcode[e.errno], 'after', n)
`)
	if mustOK(t, r); !strings.Contains(r.Stdout, "errno ENOSPC") {
		t.Fatalf("past the quota: %q %q", r.Stdout, r.Stderr)
	}
	if r := s.in(t, id, "python", "import shutil; shutil.rmtree('fill'); print(open('keep.txt').read())"); r.Stdout != "kept across sessions\n" {
		t.Fatalf("after the quota: %+v %q", r.Error, r.Stdout)
	}
	s.tool(t, "session_close", map[string]any{"session_id": id})

	// The next sessions find the file and both packages; the workspace is
	// free again once the first closed.
	id = openWhenFree(t, s, "python", "proj")
	r = s.in(t, id, "python", "import wsdemo\nprint(wsdemo.ANSWER, open('keep.txt').read())")
	if r.Stdout != "42 kept across sessions\n" {
		t.Fatalf("the next session: %+v %q %q", r.Error, r.Stdout, r.Stderr)
	}
	s.tool(t, "session_close", map[string]any{"session_id": id})
	id = openWhenFree(t, s, "javascript", "proj")
	if r := s.in(t, id, "javascript", "console.log(require('jsdemo').answer)"); r.Stdout != "43\n" {
		t.Fatalf("npm's package in the next session: %+v %q %q", r.Error, r.Stdout, r.Stderr)
	}
	s.tool(t, "session_close", map[string]any{"session_id": id})

	waitFree(t, s, "proj")
	if d := workspaceTool(t, s.c, "workspace_delete", map[string]any{"name": "proj"}); d.Error != nil || d.Deleted != "proj" {
		t.Fatalf("workspace_delete: %+v", d)
	}
	if l := workspaceTool(t, s.c, "workspace_list", map[string]any{}); len(l.Workspaces) != 0 {
		t.Fatalf("listed after its deletion: %+v", l)
	}
	if a := s.tool(t, "session_open", map[string]any{"language": "python", "workspace": "../etc"}); a.Error == nil || a.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("a bad name: %+v", a)
	}
}

// openWhenFree opens a session of workspace, waiting for the session that
// held it to be gone (its box is removed in the background).
func openWhenFree(t *testing.T, s *server, language, workspace string) string {
	t.Helper()
	waitFree(t, s, workspace)
	return s.open(t, language, "workspace", workspace)
}

func waitFree(t *testing.T, s *server, workspace string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l := workspaceTool(t, s.c, "workspace_list", map[string]any{})
		busy := false
		for _, w := range l.Workspaces {
			busy = busy || w.Name == workspace && w.InUse
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workspace %s still in use: %+v", workspace, l)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWorkspaceLockAfterKill9: a server killed with SIGKILL leaves its
// session box running, and the box holds the workspace (another server
// refuses it) until the session ends: the new server adopts and closes it,
// and the workspace is free and whole. A dead server's mount whose box is
// gone does not hold the workspace at all.
func TestWorkspaceLockAfterKill9(t *testing.T) {
	dir := workspacesDir(t)
	manifest := writeManifest(t, "audit:\n  enabled: false\n"+workspaceManifest(dir))
	kill9 := func(s *server) {
		_ = s.cmd.Process.Kill()
		_, _ = s.cmd.Process.Wait()
		_ = s.c.Close()
	}
	a := startServer(t, secretEnv, "--manifest", manifest)
	id := a.open(t, "python", "workspace", "w")
	mustOK(t, a.in(t, id, "python", "open('a.txt', 'w').write('from a')"))
	kill9(a)

	b := startServer(t, secretEnv, "--manifest", manifest)
	defer b.close()
	if o := b.tool(t, "session_open", map[string]any{"language": "python", "workspace": "w"}); o.Error == nil || o.Error.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("a workspace a live box holds, after its server's kill -9: %+v", o)
	}
	// The session lives on in its box, and its caller ends it here.
	if r := b.in(t, id, "python", "print(open('a.txt').read())"); r.Stdout != "from a\n" {
		t.Fatalf("the adopted session: %+v %q", r.Error, r.Stdout)
	}
	if c := b.tool(t, "session_close", map[string]any{"session_id": id}); !c.Closed {
		t.Fatalf("close: %+v", c.Error)
	}
	id = openWhenFree(t, b, "python", "w")
	mustOK(t, b.in(t, id, "python", "open('b.txt', 'w').write('from b')"))

	// Killed again, and this time its box goes too (as the reaper or an
	// operator would remove it): its mount is stale, workspace_list takes
	// it down, and the next open mounts the workspace again.
	c := startServer(t, secretEnv, "--manifest", manifest)
	defer c.close()
	kill9(b)
	if left := sessionBox(id); len(left) != 1 {
		t.Fatalf("session boxes after kill -9: %v", left)
	} else if out, err := exec.Command("docker", "rm", "-f", left[0]).CombinedOutput(); err != nil {
		t.Fatalf("docker rm: %v %s", err, out)
	}
	// workspace_list takes the dead server's mount down (no box holds it).
	if l := workspaceTool(t, c.c, "workspace_list", map[string]any{}); len(l.Workspaces) != 1 || l.Workspaces[0].InUse {
		t.Fatalf("list after the box went: %+v", l)
	}
	if left := leftMounts(dir); len(left) != 0 {
		t.Fatalf("a dead server's mount stays after workspace_list: %v", left)
	}
	id = openWhenFree(t, c, "python", "w")
	if r := c.in(t, id, "python", "print(open('a.txt').read(), open('b.txt').read())"); r.Stdout != "from a from b\n" {
		t.Fatalf("after a stale mount: %+v %q", r.Error, r.Stdout)
	}
	c.tool(t, "session_close", map[string]any{"session_id": id})
	waitFree(t, c, "w")
}

// TestWorkspacesBoundToTokens: over HTTP a workspace is its token's. With
// another token it is not listed, not deleted, and its name opens that
// token's own workspace, which does not see the first one's files (and is
// not busy while the first is held).
func TestWorkspacesBoundToTokens(t *testing.T) {
	tokens := "http:\n  tokens:\n    - {name: alice, env: RBX_E2E_ALICE}\n    - {name: bob, env: RBX_E2E_BOB}\n"
	t.Run("docker", func(t *testing.T) {
		dir := workspacesDir(t)
		workspacesBoundToTokens(t, writeManifest(t, "audit:\n  enabled: false\n"+tokens+workspaceManifest(dir)))
	})
	t.Run("kubernetes", func(t *testing.T) {
		// Each caller's workspace "data" is a claim of its own; both are
		// deleted at the end.
		kubeClaimsGone(t, kubeSetup(t), false)
		workspacesBoundToTokens(t, kubeManifest(t, tokens+workspaceManifest(workspacesDir(t))))
	})
}

func workspacesBoundToTokens(t *testing.T, m string) {
	alice, bob := "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"
	t.Setenv("RBX_E2E_ALICE", alice)
	t.Setenv("RBX_E2E_BOB", bob)
	s := startNetServer(t, "http", "--manifest", m)
	ca, cb := tokenClient(t, s, alice), tokenClient(t, s, bob)

	open := toolOn(t, ca, "session_open", map[string]any{"language": "python", "workspace": "data"})
	if open.Session == nil {
		t.Fatalf("alice's session_open: %+v", open.Error)
	}
	if r := callOn(t, ca, map[string]any{"language": "python", "code": "open('secret.txt', 'w').write('alice data')", "session_id": open.Session.ID}); r.Status != contract.StatusOK {
		t.Fatalf("alice: %+v", r.Error)
	}
	if l := workspaceTool(t, cb, "workspace_list", map[string]any{}); len(l.Workspaces) != 0 {
		t.Fatalf("bob sees %+v", l.Workspaces)
	}
	if d := workspaceTool(t, cb, "workspace_delete", map[string]any{"name": "data"}); d.Error == nil || d.Error.Kind != contract.KindInvalidRequest {
		t.Fatalf("bob deleted alice's workspace: %+v", d)
	}
	bo := toolOn(t, cb, "session_open", map[string]any{"language": "python", "workspace": "data"})
	if bo.Session == nil {
		t.Fatalf("bob's own workspace of the same name: %+v", bo.Error)
	}
	r := callOn(t, cb, map[string]any{"language": "python", "code": "import os; print(os.path.exists('secret.txt'))", "session_id": bo.Session.ID})
	if r.Stdout != "False\n" {
		t.Fatalf("bob's workspace holds %q %+v", r.Stdout, r.Error)
	}
	for _, c := range []struct {
		c  *client.Client
		id string
	}{{ca, open.Session.ID}, {cb, bo.Session.ID}} {
		toolOn(t, c.c, "session_close", map[string]any{"session_id": c.id})
	}
	if l := workspaceTool(t, ca, "workspace_list", map[string]any{}); len(l.Workspaces) != 1 || l.Workspaces[0].Name != "data" {
		t.Fatalf("alice's list: %+v", l)
	}
}

// kubeWorkspaceServer is a server on the kubernetes backend whose named
// workspaces are claims of the test cluster's provisioner. At the test's
// end no claim of it is left (a failed test's are deleted), and every
// volume provisioned for them is reclaimed: unmounted, its image removed.
func kubeWorkspaceServer(t *testing.T, extra string) *server {
	t.Helper()
	kubeClaimsGone(t, kubeSetup(t), true)
	return kubeServer(t, extra)
}

// kubeClaimsGone deletes, at the test's end, the workspace claims made in
// the test namespace since now (failing the test for them when strict),
// and waits for the provisioner to reclaim their volumes. It runs after
// the test's servers closed (cleanups run last first), once no pod holds
// a claim.
func kubeClaimsGone(t *testing.T, cs *kubernetes.Clientset, strict bool) {
	t.Helper()
	since := time.Now().Add(-time.Second)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		claims := func() []corev1.PersistentVolumeClaim {
			l, err := cs.CoreV1().PersistentVolumeClaims(kubeNS).List(ctx, metav1.ListOptions{LabelSelector: "io.runbox.workspace.claim"})
			if err != nil {
				t.Errorf("listing claims: %v", err)
				return nil
			}
			return slices.DeleteFunc(l.Items, func(c corev1.PersistentVolumeClaim) bool { return c.CreationTimestamp.Time.Before(since) })
		}
		for _, c := range claims() {
			if strict && c.DeletionTimestamp == nil {
				t.Errorf("claim %s left behind", c.Name)
			}
			_ = cs.CoreV1().PersistentVolumeClaims(kubeNS).Delete(ctx, c.Name, metav1.DeleteOptions{})
		}
		// Every volume of a claim of this namespace made since the test
		// began is reclaimed by the provisioner.
		for {
			l, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Errorf("listing volumes: %v", err)
				return
			}
			left := slices.DeleteFunc(l.Items, func(pv corev1.PersistentVolume) bool {
				return pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Namespace != kubeNS || pv.CreationTimestamp.Time.Before(since)
			})
			if len(left) == 0 {
				return
			}
			if ctx.Err() != nil {
				t.Errorf("volumes not reclaimed: %d (%s)", len(left), left[0].Name)
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

// TestKubeWorkspaceAfterKill9: on Kubernetes a server killed with SIGKILL
// leaves its session pod running, and the pod holds the workspace's claim
// (another server refuses it, found by the pod's label) until the session
// ends: the new server adopts and closes it, and the workspace is free and
// whole.
func TestKubeWorkspaceAfterKill9(t *testing.T) {
	cs := kubeSetup(t)
	kubeClaimsGone(t, cs, true)
	extra := workspaceManifest(workspacesDir(t))
	a := kubeServer(t, extra)
	id := a.open(t, "python", "workspace", "w")
	mustOK(t, a.in(t, id, "python", "open('a.txt', 'w').write('from a')"))
	_ = a.cmd.Process.Kill()
	_, _ = a.cmd.Process.Wait()
	_ = a.c.Close()

	b := kubeServer(t, extra)
	if o := b.tool(t, "session_open", map[string]any{"language": "python", "workspace": "w"}); o.Error == nil || o.Error.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("a workspace a live pod holds, after its server's kill -9: %+v", o)
	}
	if l := workspaceTool(t, b.c, "workspace_list", map[string]any{}); len(l.Workspaces) != 1 || !l.Workspaces[0].InUse {
		t.Fatalf("listed while the pod holds it: %+v", l)
	}
	if r := b.in(t, id, "python", "print(open('a.txt').read())"); r.Stdout != "from a\n" {
		t.Fatalf("the adopted session: %+v %q", r.Error, r.Stdout)
	}
	if c := b.tool(t, "session_close", map[string]any{"session_id": id}); !c.Closed {
		t.Fatalf("close: %+v", c.Error)
	}
	id = openWhenFree(t, b, "python", "w")
	if r := b.in(t, id, "python", "print(open('a.txt').read())"); r.Stdout != "from a\n" {
		t.Fatalf("the next session: %+v %q", r.Error, r.Stdout)
	}
	b.tool(t, "session_close", map[string]any{"session_id": id})
	waitFree(t, b, "w")
	if d := workspaceTool(t, b.c, "workspace_delete", map[string]any{"name": "w"}); d.Error != nil {
		t.Fatalf("workspace_delete: %+v", d)
	}
}
