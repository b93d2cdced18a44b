//go:build linux

package boxinit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

func TestCaptureStripsDisplayMarks(t *testing.T) {
	mark := func(name string) string { return initproto.DisplayMark + name + "\a" }
	for _, tc := range []struct {
		name   string
		writes []string
		out    string
		marks  []displayMark
	}{
		{"none", []string{"plain \x1b[1mbold\x1b[0m\n"}, "plain \x1b[1mbold\x1b[0m\n", nil},
		{"one", []string{"ab" + mark("7-1") + "cd"}, "abcd", []displayMark{{name: "7-1", stdout: 2}}},
		{"split", []string{"ab" + mark("7-1")[:5], mark("7-1")[5:12], mark("7-1")[12:] + "cd" + mark("7-2")}, "abcd",
			[]displayMark{{name: "7-1", stdout: 2}, {name: "7-2", stdout: 4}}},
		{"not a name", []string{"x" + initproto.DisplayMark + "a;b\a" + "y"}, "x" + initproto.DisplayMark + "a;b\ay", nil},
		{"no end", []string{"x" + initproto.DisplayMark + strings.Repeat("1", maxMarkName+5) + "y"}, "x" + initproto.DisplayMark + strings.Repeat("1", maxMarkName+5) + "y", nil},
		{"held back at the end", []string{"x" + initproto.DisplayMark[:4]}, "x" + initproto.DisplayMark[:4], nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &initproto.Job{MaxOutputBytes: 1 << 20}
			res := newRunResult(job)
			_, _ = res.stderr.Write([]byte("err"))
			for _, w := range tc.writes {
				if n, err := res.stdout.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("write %d, %v", n, err)
				}
			}
			out, _, total := res.stdout.bytes()
			if string(out) != tc.out || total != int64(len(tc.out)) {
				t.Errorf("out %q (%d bytes), want %q", out, total, tc.out)
			}
			got := res.stdout.displayMarks()
			if len(got) != len(tc.marks) {
				t.Fatalf("marks %+v, want %+v", got, tc.marks)
			}
			for i, m := range tc.marks {
				if got[i].name != m.name || got[i].stdout != m.stdout || got[i].stderr != 3 {
					t.Errorf("mark %d: %+v, want %+v with stderr 3", i, got[i], m)
				}
			}
		})
	}
}

func TestCaptureKeepsBoundedMarks(t *testing.T) {
	res := newRunResult(&initproto.Job{MaxOutputBytes: 1 << 10})
	for i := 0; i < maxMarks+50; i++ {
		_, _ = res.stdout.Write([]byte(initproto.DisplayMark + "1\a"))
	}
	if n := len(res.stdout.displayMarks()); n != maxMarks {
		t.Errorf("%d marks kept, want %d", n, maxMarks)
	}
}

// spoolDisplay writes a display as the in-box libraries do.
func spoolDisplay(t *testing.T, spool, name, meta string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(spool, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if meta != "" {
		if err := os.WriteFile(filepath.Join(dir, initproto.DisplayMeta), []byte(meta), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCollectDisplays(t *testing.T) {
	spool := t.TempDir()
	spoolDisplay(t, spool, "5-2", `{"source":"show","mimes":{"image/png":"image.png"}}`, map[string]string{"image.png": "PNGDATA"})
	spoolDisplay(t, spool, "5-1", `{"source":"display","mimes":{"text/plain":"text.txt","text/html":"index.html"}}`, map[string]string{"text.txt": "hi", "index.html": strings.Repeat("h", 100)})
	spoolDisplay(t, spool, "5-3", `{"source":"evil","mimes":{"text/x-evil":"../../etc/passwd","text/plain":"text.txt"},"refused":{"image/png":300000000}}`, map[string]string{"text.txt": "x"})
	spoolDisplay(t, spool, "5-4", `not json`, nil)
	spoolDisplay(t, spool, "5-5", "", map[string]string{"text.txt": "unfinished"}) // no display.json: not a display
	if err := os.Symlink("/etc/passwd", filepath.Join(spool, "5-3", "text.md")); err != nil {
		t.Fatal(err)
	}
	spoolDisplay(t, spool, "5-6", `{"source":"display","mimes":{"text/markdown":"text.md"}}`, nil)
	if err := os.Symlink("/etc/hostname", filepath.Join(spool, "5-6", "text.md")); err != nil {
		t.Fatal(err)
	}

	job := &initproto.Job{MaxArtifacts: 10, MaxArtifactBytes: 50}
	rep := &initproto.Report{Artifacts: []initproto.Artifact{{Path: "data.csv", Size: 10, Sent: true}}}
	marks := []displayMark{{name: "5-1", stdout: 3, stderr: 1}, {name: "5-2", stdout: 9}}
	contents, spooled := collectDisplays(spool, job, marks, 20, 5, rep)
	if !spooled {
		t.Error("a spool with displays in it was said to be empty")
	}

	if len(rep.Displays) != 5 {
		t.Fatalf("displays %+v", rep.Displays)
	}
	d := rep.Displays[0] // 5-1, in the marks' order
	if d.Source != "display" || d.Stdout != 3 || d.Stderr != 1 || len(d.Mimes) != 2 || d.Cut != initproto.DisplayCutBytes {
		t.Errorf("first: %+v", d)
	}
	if html := d.Mimes[0]; html.Mime != "text/html" || html.Sent || html.Size != 100 {
		t.Errorf("html past the byte budget: %+v", html)
	}
	if plain := d.Mimes[1]; !plain.Sent || plain.Size != 2 {
		t.Errorf("plain: %+v", plain)
	}
	if d := rep.Displays[1]; d.Source != "show" || d.Stdout != 9 || !d.Mimes[0].Sent {
		t.Errorf("second: %+v", d)
	}
	// Unmarked ones come after, at the output's end, by name.
	if d := rep.Displays[2]; d.Source != "display" || d.Stdout != 20 || d.Stderr != 5 || d.Cut != initproto.DisplayCutBytes ||
		len(d.Mimes) != 2 || d.Mimes[1].Mime != "image/png" || d.Mimes[1].Size != 300000000 || d.Mimes[1].Sent {
		t.Errorf("a display with an unknown mime and a refused one: %+v", d)
	}
	if d := rep.Displays[3]; d.Cut != initproto.DisplayCutInvalid || len(d.Mimes) != 0 {
		t.Errorf("malformed: %+v", d)
	}
	if d := rep.Displays[4]; d.Cut != initproto.DisplayCutInvalid || len(d.Mimes) != 0 {
		t.Errorf("a link is never read: %+v", d)
	}
	var sent []string
	for _, a := range rep.Artifacts[1:] {
		if !a.Display {
			t.Errorf("not marked a display: %+v", a)
		}
		sent = append(sent, a.Path)
	}
	if strings.Join(sent, " ") != "0/text.txt 1/image.png 2/text.txt" || len(contents) != 3 || string(contents[1]) != "PNGDATA" {
		t.Errorf("sent %v, contents %q", sent, contents)
	}
}

func TestCollectDisplaysCaps(t *testing.T) {
	spool := t.TempDir()
	for i := 0; i < initproto.MaxDisplays+3; i++ {
		spoolDisplay(t, spool, fmt.Sprintf("1-%03d", i), `{"source":"display","mimes":{"text/plain":"text.txt"}}`, map[string]string{"text.txt": "x"})
	}
	job := &initproto.Job{MaxArtifacts: 5, MaxArtifactBytes: 1 << 20}
	rep := &initproto.Report{}
	contents, _ := collectDisplays(spool, job, nil, 0, 0, rep)
	if len(rep.Displays) != initproto.MaxDisplays || rep.DisplaysOmitted != 3 {
		t.Errorf("displays %d, omitted %d", len(rep.Displays), rep.DisplaysOmitted)
	}
	if len(contents) != 5 || rep.Displays[5].Cut != initproto.DisplayCutCount || rep.Displays[5].Mimes[0].Sent {
		t.Errorf("the artifact count cap: %d sent, sixth %+v", len(contents), rep.Displays[5])
	}
}

// TestCollectDisplaysEmpty says an empty spool needs no clearing, and
// one it cannot read does.
func TestCollectDisplaysEmpty(t *testing.T) {
	job := &initproto.Job{MaxArtifacts: 5, MaxArtifactBytes: 1 << 20}
	for name, tc := range map[string]struct {
		spool   string
		spooled bool
	}{
		"empty":   {t.TempDir(), false},
		"missing": {filepath.Join(t.TempDir(), "gone"), true},
	} {
		contents, spooled := collectDisplays(tc.spool, job, nil, 0, 0, &initproto.Report{})
		if contents != nil || spooled != tc.spooled {
			t.Errorf("%s: contents %q, spooled %v; want spooled %v", name, contents, spooled, tc.spooled)
		}
	}
}

// TestClearDisplays leaves an empty directory in the spool's place
// whatever was there, and never follows a link in its place.
func TestClearDisplays(t *testing.T) {
	outside := t.TempDir()
	keep := filepath.Join(outside, "keep.png")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(spool string) error{
		"missing": func(string) error { return nil },
		"empty":   func(spool string) error { return os.Mkdir(spool, 0o755) },
		"displays": func(spool string) error {
			if err := os.MkdirAll(filepath.Join(spool, "d1"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(spool, "d1", "figure.png"), []byte("png"), 0o644)
		},
		"a file":       func(spool string) error { return os.WriteFile(spool, []byte("x"), 0o644) },
		"a link":       func(spool string) error { return os.Symlink(outside, spool) },
		"no parent":    func(string) error { return nil },
		"read-only":    func(spool string) error { return os.Mkdir(spool, 0o500) },
		"link to file": func(spool string) error { return os.Symlink(keep, spool) },
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			spool := filepath.Join(t.TempDir(), "spool")
			if name == "no parent" {
				spool = filepath.Join(t.TempDir(), "a", "b", "spool")
			}
			if err := setup(spool); err != nil {
				t.Fatal(err)
			}
			if err := clearDisplays(spool); err != nil {
				t.Fatalf("clearDisplays: %v", err)
			}
			st, err := os.Lstat(spool)
			if err != nil || !st.IsDir() {
				t.Fatalf("spool after clearing: %v, %v; want a directory", st, err)
			}
			if want := 0o777 &^ umask(); st.Mode().Perm() != want {
				t.Errorf("spool mode %v, want %v", st.Mode().Perm(), want)
			}
			if entries, _ := os.ReadDir(spool); len(entries) != 0 {
				t.Errorf("spool holds %d entries, want none", len(entries))
			}
			if b, err := os.ReadFile(keep); err != nil || string(b) != "x" {
				t.Errorf("a file a link pointed at: %q, %v", b, err)
			}
		})
	}
}

// umask is the process's file mode creation mask.
func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}
