//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/contract"
)

// The box's user in the default manifest: what it may read decides what a
// source may hand it.
const boxUID, boxGID = 1000, 1000

// hostileFolder makes a declared folder as a hostile (or careless) host
// could have it: files the box's user may not read, links out, special
// files. The tests run as root, which owns what the box may not read.
func hostileFolder(t *testing.T) (top, data string) {
	t.Helper()
	if os.Geteuid() != 0 {
		absent(t, "making files the box's user may not read needs root")
	}
	top = t.TempDir()
	must(t, os.Chmod(top, 0o755))
	data = filepath.Join(top, "data")
	write := func(rel, content string, mode os.FileMode, uid, gid int) {
		p := filepath.Join(data, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), mode))
		must(t, os.Chmod(p, mode))
		must(t, os.Chown(p, uid, gid))
	}
	write("public.txt", "PUBLIC", 0o644, 0, 0)
	write("private.txt", "ROOT-ONLY-SECRET", 0o600, 0, 0)
	write("mine.txt", "BOX-OWNED", 0o600, boxUID, 0)
	write("group.txt", "BOX-GROUP", 0o640, 0, boxGID)
	write("othergroup.txt", "OTHER-GROUP-SECRET", 0o640, 0, 4242)
	write("closed/inside.txt", "CLOSED-DIR-SECRET", 0o644, 0, 0)
	must(t, os.Chmod(filepath.Join(data, "closed"), 0o700))
	write("new\nline.txt", "NEWLINE-NAME", 0o644, 0, 0)
	write("uni\u202etxt.sh", "BIDI-NAME", 0o644, 0, 0)
	write("acl_denied.txt", "ACL-DENIED-SECRET", 0o644, 0, 0)
	write("acl_granted.txt", "ACL-GRANTED", 0o640, 0, 0)
	// POSIX ACLs as the kernel stores them: a version, then (tag, perm, id)
	// entries: user::, user:<box>:, group::, mask::, other::.
	acl := func(rel string, box, mask, other uint16) {
		b := binary.LittleEndian.AppendUint32(nil, 2)
		for _, e := range []struct {
			tag, perm uint16
			id        uint32
		}{{0x01, 6, 0}, {0x02, box, boxUID}, {0x04, 0, 0}, {0x10, mask, 0}, {0x20, other, 0}} {
			b = binary.LittleEndian.AppendUint16(b, e.tag)
			b = binary.LittleEndian.AppendUint16(b, e.perm)
			b = binary.LittleEndian.AppendUint32(b, e.id)
		}
		must(t, unix.Setxattr(filepath.Join(data, rel), "system.posix_acl_access", b, 0))
	}
	acl("acl_denied.txt", 0, 4, 4)
	acl("acl_granted.txt", 4, 4, 0)
	must(t, os.WriteFile(filepath.Join(top, "secret.txt"), []byte("HOST-SECRET"), 0o644))
	must(t, os.Link(filepath.Join(data, "private.txt"), filepath.Join(data, "hardlink.txt")))
	must(t, os.Symlink("private.txt", filepath.Join(data, "link_private")))
	must(t, os.Symlink(filepath.Join(top, "secret.txt"), filepath.Join(data, "abs_out")))
	must(t, os.Symlink("../secret.txt", filepath.Join(data, "rel_out")))
	must(t, os.Symlink("/mnt/data/public.txt", filepath.Join(data, "abs_in")))
	must(t, os.Symlink("/mnt/open/public.txt", filepath.Join(data, "abs_other_folder")))
	must(t, os.Symlink("loop", filepath.Join(data, "loop")))
	must(t, os.Symlink("closed/inside.txt", filepath.Join(data, "via_closed")))
	must(t, os.Symlink("closed", filepath.Join(data, "closed_dir_link")))
	must(t, os.Symlink("/etc/shadow", filepath.Join(data, "shadow")))
	must(t, os.Symlink("/proc/1/environ", filepath.Join(data, "environ")))
	must(t, syscall.Mkfifo(filepath.Join(data, "fifo"), 0o666))
	must(t, syscall.Mknod(filepath.Join(data, "zero"), syscall.S_IFCHR|0o666, 1<<8|5)) // /dev/zero
	l, err := net.Listen("unix", filepath.Join(data, "sock"))
	must(t, err)
	t.Cleanup(func() { _ = l.Close() })
	huge, err := os.Create(filepath.Join(data, "huge.bin"))
	must(t, err)
	must(t, huge.Truncate(8<<30)) // sparse: 8 GiB the host never had to store
	must(t, huge.Close())
	must(t, os.Chmod(filepath.Join(data, "huge.bin"), 0o644))
	// A fifo the server could block on must never outlive the test.
	t.Cleanup(func() {
		if f, err := os.OpenFile(filepath.Join(data, "fifo"), os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
			_ = f.Close()
		}
	})
	return top, data
}

// callWithin calls run_code and fails the test if no answer comes within
// d (a hung call), returning the result.
func callWithin(t *testing.T, s *server, d time.Duration, args map[string]any) contract.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res, err := s.c.CallTool(ctx, newCall(args))
	if err != nil {
		t.Fatalf("no answer within %s: %v\nserver stderr:\n%.3000s", d, err, s.stderr)
	}
	r, err := decodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// answersNormally: the call after an attack runs code as ever.
func answersNormally(t *testing.T, s *server) {
	t.Helper()
	r := callWithin(t, s, 3*time.Minute, map[string]any{"language": "python", "code": "print(6 * 7)"})
	if r.Status != contract.StatusOK || r.Stdout != "42\n" {
		t.Fatalf("the next call: status %s %+v stdout %q\n%.3000s", r.Status, r.Error, r.Stdout, s.stderr)
	}
}

// sourceCall hands src to the box as in.txt and prints what it got.
func sourceCall(src string) map[string]any {
	return map[string]any{"language": "bash", "code": "cat in.txt",
		"files": []map[string]any{{"path": "in.txt", "source": src}}}
}

// A defect once found: a source read with the server's privileges gave
// the box a root-owned 0600 file it may not read at /mnt/<name>/..., and
// the same through a hardlink.
func TestSourceGivesOnlyWhatTheBoxMayRead(t *testing.T) {
	_, data := hostileFolder(t)
	s := dockerServer(t, "mounts:\n  - name: data\n    path: "+data+"\n")
	if r := runOn(t, s, "bash", "cat /mnt/data/private.txt /mnt/data/hardlink.txt 2>&1; true"); strings.Contains(r.Stdout, "ROOT-ONLY-SECRET") {
		t.Fatalf("the box itself reads the private file: %q (the test's premise is wrong)", r.Stdout)
	}
	for _, src := range []string{"/mnt/data/private.txt", "/mnt/data/hardlink.txt"} {
		r := callWithin(t, s, 3*time.Minute, sourceCall(src))
		if strings.Contains(r.Stdout, "ROOT-ONLY-SECRET") {
			t.Fatalf("%s: the box got a file its user may not read", src)
		}
		if e := wantError(t, r, contract.KindInvalidRequest, ""); !strings.Contains(e.Message, "may not read") {
			t.Errorf("%s: the message does not say why: %q", src, e.Message)
		}
		answersNormally(t, s)
	}
	if r := callWithin(t, s, 3*time.Minute, sourceCall("/mnt/data/mine.txt")); r.Status != contract.StatusOK || r.Stdout != "BOX-OWNED" {
		t.Fatalf("a file the box's user owns: %s %+v %q", r.Status, r.Error, r.Stdout)
	}
}

// A defect once found: a source naming a FIFO blocked the call forever in
// the open, before the type was checked.
func TestSourceFIFONeverHangs(t *testing.T) {
	_, data := hostileFolder(t)
	s := dockerServer(t, "mounts:\n  - name: data\n    path: "+data+"\n")
	start := time.Now()
	r := callWithin(t, s, 60*time.Second, sourceCall("/mnt/data/fifo"))
	if e := wantError(t, r, contract.KindInvalidRequest, ""); !strings.Contains(e.Message, "regular file") {
		t.Errorf("the message does not say why: %q", e.Message)
	}
	t.Logf("a FIFO source refused in %s", time.Since(start).Round(time.Millisecond))
	answersNormally(t, s)
}

// TestHostileFolders: declared folders and files[].source as an attacker
// uses them. Each case names a source and whether it may be handed over;
// whatever is handed over must be what the box itself reads at that path
// (checked in the box, as the oracle), nothing may hang, and the server
// answers the next call normally.
func TestHostileFolders(t *testing.T) {
	top, data := hostileFolder(t)
	open := filepath.Join(top, "open")
	must(t, os.MkdirAll(open, 0o755))
	must(t, os.WriteFile(filepath.Join(open, "public.txt"), []byte("OPEN-PUBLIC"), 0o644))
	shut := filepath.Join(top, "shut")
	must(t, os.MkdirAll(shut, 0o700))
	must(t, os.WriteFile(filepath.Join(shut, "public.txt"), []byte("SHUT-SECRET"), 0o644))
	linkRoot := filepath.Join(top, "linkroot")
	must(t, os.Symlink(data, linkRoot))
	manifest := "mounts:\n  - name: data\n    path: " + data + "\n  - name: open\n    path: " + open +
		"\n  - name: shut\n    path: " + shut + "\n  - name: linked\n    path: " + linkRoot + "\n"
	// Each backend shows the box the folder its own way (a volume, a
	// Binds entry, gVisor's gofer): the box's own reads are the oracle on
	// each. Kubernetes mounts folders of its node, not of this host.
	for _, b := range backends() {
		if b.name == "kubernetes" {
			continue
		}
		t.Run(b.name, func(t *testing.T) { hostileFoldersOn(t, b.start(t, manifest), top, data) })
	}
}

func hostileFoldersOn(t *testing.T, s *server, top, data string) {

	// What the box itself reads at each path (regular files only: a FIFO
	// would block the box's own open, which is the box's business).
	type seen struct {
		OK   bool   `json:"ok"`
		Data string `json:"data"`
	}
	var inBox map[string]seen
	probe := runOn(t, s, "python", `
import json, os, stat, sys
out = {}
for p in json.load(sys.stdin):
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > 1 << 20:
                raise OSError('not a small regular file')
            out[p] = {'ok': True, 'data': os.read(fd, 1 << 20).decode('utf-8', 'replace')}
        finally:
            os.close(fd)
    except OSError:
        out[p] = {'ok': False, 'data': ''}
print(json.dumps(out))
`, "stdin", sourceJSON(t, probePaths()))
	mustOK(t, probe)
	if err := json.Unmarshal([]byte(probe.Stdout), &inBox); err != nil {
		t.Fatalf("the probe: %v %q", err, probe.Stdout)
	}
	t.Logf("the box itself reads: a file whose ACL denies it %v, one only an ACL grants %v",
		inBox["/mnt/data/acl_denied.txt"].OK, inBox["/mnt/data/acl_granted.txt"].OK)

	for _, c := range []struct {
		name, src string
		// ok: the source must be handed over (the box reads it too).
		ok bool
	}{
		{"a world-readable file", "/mnt/data/public.txt", true},
		{"a file the box's user owns (0600)", "/mnt/data/mine.txt", true},
		{"a file of the box's group (0640)", "/mnt/data/group.txt", true},
		{"a link inside to a readable file", "/mnt/data/abs_in", true},
		{"a name with a newline", "/mnt/data/new\nline.txt", true},
		{"a name with a bidi override", "/mnt/data/uni\u202etxt.sh", true},
		{"a folder whose declared path is a link", "/mnt/linked/public.txt", true},
		{"a root-owned 0600 file", "/mnt/data/private.txt", false},
		{"a hardlink to a root-owned 0600 file", "/mnt/data/hardlink.txt", false},
		{"a relative link to a 0600 file", "/mnt/data/link_private", false},
		{"another group's 0640 file", "/mnt/data/othergroup.txt", false},
		{"a world-readable file whose ACL denies the box's user", "/mnt/data/acl_denied.txt", false},
		// The box's runtime may not apply ACLs (gVisor): what only an ACL
		// grants is not handed over.
		{"a file only an ACL lets the box's user read", "/mnt/data/acl_granted.txt", false},
		{"a file in a directory the box may not enter", "/mnt/data/closed/inside.txt", false},
		{"a link through a directory the box may not enter", "/mnt/data/via_closed", false},
		{"a link to a directory the box may not enter", "/mnt/data/closed_dir_link/inside.txt", false},
		{"a folder the box may not enter", "/mnt/shut/public.txt", false},
		{"a 0600 file through a folder whose path is a link", "/mnt/linked/private.txt", false},
		{"an absolute link out of the folder", "/mnt/data/abs_out", false},
		{"a relative link out of the folder", "/mnt/data/rel_out", false},
		{"a link to another declared folder", "/mnt/data/abs_other_folder", false},
		{"a link to /etc/shadow", "/mnt/data/shadow", false},
		{"a link to /proc", "/mnt/data/environ", false},
		{"a link loop", "/mnt/data/loop", false},
		{"a FIFO", "/mnt/data/fifo", false},
		{"a character device", "/mnt/data/zero", false},
		{"a socket", "/mnt/data/sock", false},
		{"an 8 GiB file", "/mnt/data/huge.bin", false},
		{"the folder itself", "/mnt/data", false},
		{"the folder with a slash", "/mnt/data/", false},
		{"a directory", "/mnt/data/closed", false},
		{"a trailing slash", "/mnt/data/public.txt/", false},
		{"dot-dot out", "/mnt/data/../../etc/passwd", false},
		{"dot-dot to the host's file", "/mnt/data/../secret.txt", false},
		{"dot-dot inside, unclean", "/mnt/data/closed/../public.txt", false},
		{"a dot component", "/mnt/data/./public.txt", false},
		{"a double slash", "/mnt/data//public.txt", false},
		{"a leading double slash", "//mnt/data/public.txt", false},
		{"a folder not declared", "/mnt/nothere/public.txt", false},
		{"the roots folder, not declared", "/mnt/roots/x/public.txt", false},
		{"a host path", top + "/secret.txt", false},
		{"/etc/passwd", "/etc/passwd", false},
		{"a relative path", "data/public.txt", false},
		{"a NUL byte", "/mnt/data/public.txt\x00/../private.txt", false},
		{"a backslash", "/mnt/data\\..\\secret.txt", false},
		{"percent-encoded dot-dot", "/mnt/data/%2e%2e/secret.txt", false},
		{"a fullwidth solidus", "/mnt/data\uff0f..\uff0fsecret.txt", false},
		{"a Cyrillic letter in the folder's name", "/mnt/d\u0430ta/public.txt", false},
		{"a name of 5000 bytes", "/mnt/data/" + strings.Repeat("a", 5000), false},
		{"4096 nested dot-dots", "/mnt/data/" + strings.Repeat("../", 4096) + "etc/passwd", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := callWithin(t, s, 90*time.Second, sourceCall(c.src))
			for _, secret := range []string{"ACL-DENIED-SECRET", "ROOT-ONLY-SECRET", "OTHER-GROUP-SECRET", "CLOSED-DIR-SECRET", "HOST-SECRET", "SHUT-SECRET", "root:"} {
				if strings.Contains(r.Stdout, secret) {
					t.Fatalf("the box got %s", secret)
				}
			}
			switch {
			case c.ok && (r.Status != contract.StatusOK || r.Stdout == ""):
				t.Fatalf("refused a file the box may read: %s %+v", r.Status, r.Error)
			case !c.ok:
				wantError(t, r, contract.KindInvalidRequest, "")
			}
			if r.Status == contract.StatusOK {
				if b, probed := inBox[c.src]; probed && (!b.OK || b.Data != r.Stdout) {
					t.Fatalf("handed the box %q, which it reads itself as %+v", r.Stdout, b)
				}
			}
			answersNormally(t, s)
		})
	}

	// A file rewritten the whole time a source is read: what is handed
	// over is a state the file truly had at one instant, or refused. A
	// write in progress is such a state (a truncated file partly written
	// again holds a part of one content; one overwritten in place holds
	// the new content up to some point and the old after it), but a read
	// that spans several writes holds more than one change: never handed.
	// The files are large, so that a read and a write overlap often; the
	// box reports the content's runs of one byte ([[byte, count], ...]).
	a, b := strings.Repeat("a", 3<<20), strings.Repeat("b", 6<<20)
	type run struct {
		Byte  string
		Count int
	}
	single := func(runs []run, c string, most int) bool {
		return len(runs) == 1 && runs[0].Byte == c && runs[0].Count <= most
	}
	for _, w := range []struct {
		name  string
		write func(f *os.File, content string)
		state func(runs []run) bool
	}{
		{"truncated and written", func(f *os.File, content string) {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(content), 0)
		}, func(runs []run) bool {
			return len(runs) == 0 || single(runs, "a", len(a)) || single(runs, "b", len(b))
		}},
		{"overwritten in place", func(f *os.File, content string) {
			_, _ = f.WriteAt([]byte(strings.Repeat(content[:1], len(b))), 0)
		}, func(runs []run) bool {
			total := 0
			for _, r := range runs {
				total += r.Count
			}
			return total == len(b) && len(runs) <= 2
		}},
	} {
		t.Run("a file "+w.name+" while it is read", func(t *testing.T) {
			p := filepath.Join(data, "changing.txt")
			must(t, os.WriteFile(p, []byte(b), 0o644))
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			must(t, err)
			defer f.Close()
			stop, done := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					w.write(f, [2]string{a, b}[i%2])
				}
			}()
			var got []string
			for range 10 {
				r := callWithin(t, s, 90*time.Second, map[string]any{"language": "python",
					"code":  "import itertools, json\nd = open('in.txt', 'rb').read()\nprint(json.dumps([[chr(k), len(list(g))] for k, g in itertools.groupby(d)]))",
					"files": []map[string]any{{"path": "in.txt", "source": "/mnt/data/changing.txt"}}})
				var runs []run
				if r.Status == contract.StatusOK {
					var raw [][2]any
					if err := json.Unmarshal([]byte(r.Stdout), &raw); err != nil {
						t.Fatalf("the box's report: %v %.300q", err, r.Stdout)
					}
					for _, e := range raw {
						runs = append(runs, run{e[0].(string), int(e[1].(float64))})
					}
				}
				switch {
				case r.Status == contract.StatusOK && !w.state(runs):
					t.Errorf("handed the box what the file never held at one instant: runs %.10v", runs)
				case r.Status != contract.StatusOK && (r.Error == nil || r.Error.Kind != contract.KindInvalidRequest):
					t.Errorf("status %s %+v", r.Status, r.Error)
				}
				got = append(got, string(r.Status))
			}
			close(stop)
			<-done
			t.Logf("while rewritten: %v", got)
			answersNormally(t, s)
		})
	}
}

// probePaths are the declared-folder paths the box is asked to read.
func probePaths() []string {
	return []string{"/mnt/data/public.txt", "/mnt/data/mine.txt", "/mnt/data/group.txt", "/mnt/data/abs_in",
		"/mnt/data/new\nline.txt", "/mnt/data/uni\u202etxt.sh", "/mnt/linked/public.txt", "/mnt/data/private.txt",
		"/mnt/data/hardlink.txt", "/mnt/data/othergroup.txt", "/mnt/data/closed/inside.txt", "/mnt/shut/public.txt",
		"/mnt/data/acl_denied.txt", "/mnt/data/acl_granted.txt"}
}

func sourceJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}
