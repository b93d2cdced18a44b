package sandbox

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/ext4img"
	"github.com/runbox-mcp/runbox/manifest"
)

func TestWorkspaceEnv(t *testing.T) {
	got := workspaceEnv([]string{"HOME=/tmp", "PATH=/usr/bin:/tmp/.local/bin"})
	want := []string{"HOME=/tmp", "PATH=/usr/bin:/tmp/.local/bin:/workspace/.local/bin", "PYTHONUSERBASE=/workspace/.local"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// ext4Free reads a real file system's superblock, and nothing else.
func TestExt4Free(t *testing.T) {
	sb := make([]byte, 2048)
	binary.LittleEndian.PutUint16(sb[1024+0x38:], 0xEF53)
	binary.LittleEndian.PutUint32(sb[1024+0x18:], 2)
	binary.LittleEndian.PutUint32(sb[1024+0x0C:], 10)
	if got := ext4Free(bytes.NewReader(sb)); got != 10*4096 {
		t.Errorf("free %d, want %d", got, 10*4096)
	}
	binary.LittleEndian.PutUint32(sb[1024+0x18:], 40)
	if got := ext4Free(bytes.NewReader(sb)); got != 0 {
		t.Errorf("an absurd block size read as %d free", got)
	}
	binary.LittleEndian.PutUint16(sb[1024+0x38:], 0)
	if got := ext4Free(bytes.NewReader(sb)); got != 0 {
		t.Errorf("no magic read as %d free", got)
	}
	if got := ext4Free(bytes.NewReader(sb[:100])); got != 0 {
		t.Errorf("a short file read as %d free", got)
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4 on this machine for the real image")
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	if err := ext4img.Make(context.Background(), img, 16<<20, 0, 0); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if free := ext4Free(f); free < 8<<20 || free >= 16<<20 {
		t.Errorf("a new 16 MiB file system has %d bytes free", free)
	}
}

// Workspaces are refused with a clear invalid_request where they cannot
// be: off, no directory, Kubernetes, a bad name.
func TestWorkspaceRefusals(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, ws, want string
		edit           func(*manifest.Manifest)
		dir            string
	}{
		{"off", "w", "workspaces are off", func(m *manifest.Manifest) {}, "/nonexistent"},
		{"no directory", "w", "no state directory", func(m *manifest.Manifest) { m.Workspaces.Enabled = true }, ""},
		{"kubernetes", "w", "kubernetes backend", func(m *manifest.Manifest) { m.Workspaces.Enabled = true; m.Backend = manifest.BackendKubernetes }, "/nonexistent"},
		{"bad name", "../etc", "not a valid name", func(m *manifest.Manifest) { m.Workspaces.Enabled = true }, "/nonexistent"},
		{"long name", strings.Repeat("a", 33), "not a valid name", func(m *manifest.Manifest) { m.Workspaces.Enabled = true }, "/nonexistent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &fakeSessionDriver{}
			m := testManifest(t, func(m *manifest.Manifest) { m.Sessions.Enabled = true; c.edit(m) })
			r := New(d, Options{Manifest: m, Workspaces: c.dir})
			defer r.Close()
			lang, _ := m.Language("python")
			_, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "alice", Limits: m.SessionLimits(), Workspace: c.ws})
			if fail == nil || fail.Kind != contract.KindInvalidRequest || !strings.Contains(fail.Message, c.want) {
				t.Fatalf("got %+v, want invalid_request saying %q", fail, c.want)
			}
			if d.started.Load() != 0 {
				t.Fatal("a box started")
			}
		})
	}
}

// TestWorkspaceOnTheHost mounts a real workspace (root only): the quota
// is the kernel's ENOSPC, one session holds it, another client's is
// another, and closing the session unmounts it and frees its loop device.
func TestWorkspaceOnTheHost(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	ctx := context.Background()
	dir := t.TempDir()
	d := &fakeSessionDriver{}
	m := testManifest(t, func(m *manifest.Manifest) {
		m.Sessions.Enabled = true
		m.Workspaces = manifest.Workspaces{Enabled: true, Quota: 16 * manifest.MiB, MaxPerClient: 1}
	})
	r := New(d, Options{Manifest: m, Workspaces: dir})
	r.grace = 300 * time.Millisecond
	mp := filepath.Join(dir, clientKey("alice"), "w", workspaceMount)
	t.Cleanup(func() {
		_ = r.Close()
		if mounted(mp) {
			t.Errorf("%s still mounted after Close", mp)
			_ = unmountWorkspace(mp)
		}
	})
	lang, _ := m.Language("python")
	open := func(client, ws string) (contract.SessionInfo, *contract.ErrorInfo) {
		return r.OpenSession(ctx, SessionRequest{Language: lang, Client: client, Limits: m.SessionLimits(), Workspace: ws})
	}
	info, fail := open("alice", "w")
	if fail != nil || info.Workspace != "w" {
		t.Fatalf("open: %+v %+v", info, fail)
	}
	if !mounted(mp) {
		t.Fatal("the workspace is not mounted")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(mp, &st); err != nil || int(st.Uid) != 1000 {
		t.Fatalf("the workspace's root is uid %d (%v), want the box user's", st.Uid, err)
	}
	var err error
	for i := 0; i < 64 && err == nil; i++ {
		err = os.WriteFile(filepath.Join(mp, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), make([]byte, 1<<20), 0o644)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("past the quota: %v", err)
	}
	if _, fail := open("alice", "w"); fail == nil || fail.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("a second writer: %+v", fail)
	}
	if _, fail := open("alice", "other"); fail == nil || fail.Kind != contract.KindResourceLimit {
		t.Fatalf("past max_per_client: %+v", fail)
	}
	bob, fail := open("bob", "w")
	if fail != nil {
		t.Fatalf("bob's own w: %+v", fail)
	}
	list, _ := r.ListWorkspaces(ctx, "alice")
	if len(list) != 1 || !list[0].InUse || list[0].Quota != 16<<20 || list[0].BytesUsed < 12<<20 {
		t.Fatalf("list: %+v", list)
	}
	if fail := r.DeleteWorkspace(ctx, "alice", "w"); fail == nil || fail.Kind != contract.KindWorkspaceBusy {
		t.Fatalf("deleted in use: %+v", fail)
	}
	for _, c := range []struct{ id, client string }{{info.ID, "alice"}, {bob.ID, "bob"}} {
		if fail := r.CloseSession(ctx, c.id, c.client); fail != nil {
			t.Fatal(fail)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, _ = r.ListWorkspaces(ctx, "alice")
		if len(list) == 1 && !list[0].InUse {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still in use after close: %+v", list)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if mounted(mp) || attached(ctx, filepath.Join(dir, clientKey("alice"), "w", workspaceImage)) {
		t.Fatal("still mounted or attached after close")
	}
	// Read from the superblock now: the files are still there.
	if list[0].BytesUsed < 12<<20 {
		t.Errorf("bytes used after close: %d", list[0].BytesUsed)
	}
	if fail := r.DeleteWorkspace(ctx, "alice", "w"); fail != nil {
		t.Fatal(fail)
	}
	if fail := r.DeleteWorkspace(ctx, "alice", "w"); fail == nil || fail.Kind != contract.KindInvalidRequest {
		t.Fatalf("deleted twice: %+v", fail)
	}
	if list, _ := r.ListWorkspaces(ctx, "alice"); len(list) != 0 {
		t.Fatalf("listed after delete: %+v", list)
	}
}

// A link planted in place of a workspace's mount point is never
// followed: the open fails, and nothing is mounted there.
func TestWorkspaceLinksNotFollowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	ctx := context.Background()
	dir := t.TempDir()
	d := &fakeSessionDriver{}
	m := testManifest(t, func(m *manifest.Manifest) {
		m.Sessions.Enabled = true
		m.Workspaces = manifest.Workspaces{Enabled: true, Quota: 16 * manifest.MiB, MaxPerClient: 2}
	})
	r := New(d, Options{Manifest: m, Workspaces: dir})
	t.Cleanup(func() { _ = r.Close() })
	lang, _ := m.Language("python")
	info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "alice", Limits: m.SessionLimits(), Workspace: "w"})
	if fail != nil {
		t.Fatal(fail)
	}
	if fail := r.CloseSession(ctx, info.ID, "alice"); fail != nil {
		t.Fatal(fail)
	}
	mp := filepath.Join(dir, clientKey("alice"), "w", workspaceMount)
	deadline := time.Now().Add(10 * time.Second)
	for mounted(mp) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	target := t.TempDir()
	t.Cleanup(func() { _ = unmountWorkspace(target) })
	if err := os.Remove(mp); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, mp); err != nil {
		t.Fatal(err)
	}
	var err *contract.ErrorInfo
	for time.Now().Before(deadline) {
		if _, err = r.OpenSession(ctx, SessionRequest{Language: lang, Client: "alice", Limits: m.SessionLimits(), Workspace: "w"}); err == nil || err.Kind != contract.KindWorkspaceBusy {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err == nil || err.Kind != contract.KindSandbox || mounted(target) {
		t.Fatalf("through a link: %+v, mounted at its target: %v", err, mounted(target))
	}
}
