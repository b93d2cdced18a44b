//go:build linux

package boxinit

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// displayLibraries are the in-box display libraries (initproto.DisplayLib):
// Python's sitecustomize with display() and the matplotlib backend, and
// Node's preload with display() and console.table.
//
//go:embed displaylib
var displayLibraries embed.FS

// runners are the language runners (initproto.RunnerLib): TypeScript's.
//
//go:embed runners
var runners embed.FS

// writeDisplayLibraries puts the display libraries in initproto.DisplayLib
// and the language runners in initproto.RunnerLib, and makes the empty
// spool, before an interpreter starts.
func writeDisplayLibraries() error {
	if err := writeEmbedded(displayLibraries, "displaylib", initproto.DisplayLib); err != nil {
		return err
	}
	if err := writeEmbedded(runners, "runners", initproto.RunnerLib); err != nil {
		return err
	}
	return clearDisplays(initproto.DisplaySpool)
}

// writeEmbedded copies the files of fsys's directory dir into dest.
func writeEmbedded(fsys embed.FS, dir, dest string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := fsys.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dest, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// onPythonPath says whether env's PYTHONPATH names dir.
func onPythonPath(env []string, dir string) bool {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PYTHONPATH="); ok {
			return slices.Contains(strings.Split(v, ":"), dir)
		}
	}
	return false
}

// clearDisplays empties the spool: a session's call reports only its own.
func clearDisplays(spool string) error {
	// Twice a call, and the spool is most often an empty directory:
	// rmdir and mkdir are two system calls where RemoveAll and MkdirAll
	// make five. Anything else (displays in it, a file or a link in its
	// place, no parent) goes the long way.
	if err := unix.Rmdir(spool); err != nil && !errors.Is(err, unix.ENOENT) {
		_ = os.RemoveAll(spool)
	}
	if unix.Mkdir(spool, 0o777) == nil {
		return nil
	}
	return os.MkdirAll(spool, 0o777)
}

// displayMark is where a display fell in the output: its directory's name
// and the bytes each stream held then.
type displayMark struct {
	name           string
	stdout, stderr int64
}

// maxMarkName bounds a mark's name: longer is not a mark.
const maxMarkName = 40

// maxMarks bounds the marks a capture keeps (the code writes them).
const maxMarks = 4 * initproto.MaxDisplays

// stripMarks takes the display marks out of p, noting each with the
// output's size at its place; a possible start of a mark at p's end is held
// back until the next write (or bytes). The caller holds c.mu.
func (c *capture) stripMarks(p []byte) []byte {
	if len(c.pend) == 0 && bytes.IndexByte(p, 0x1b) < 0 {
		return p
	}
	buf := append(c.pend, p...)
	c.pend = nil
	prefix := []byte(initproto.DisplayMark)
	var out []byte
	for {
		i := bytes.Index(buf, prefix)
		if i < 0 {
			break
		}
		rest := buf[i+len(prefix):]
		end := bytes.IndexByte(rest, '\a')
		if end < 0 && len(rest) <= maxMarkName {
			out = append(out, buf[:i]...)
			c.pend = append([]byte(nil), buf[i:]...)
			return out
		}
		if end < 0 || end > maxMarkName || !markName(rest[:end]) {
			out = append(out, buf[:i+1]...)
			buf = buf[i+1:]
			continue
		}
		out = append(out, buf[:i]...)
		if len(c.marks) < maxMarks {
			m := displayMark{name: string(rest[:end]), stdout: c.total + int64(len(out))}
			if c.peer != nil {
				m.stderr = c.peer.size()
			}
			c.marks = append(c.marks, m)
		}
		buf = rest[end+1:]
	}
	keep := markerStart(buf, prefix)
	out = append(out, buf[:len(buf)-keep]...)
	if keep > 0 {
		c.pend = append([]byte(nil), buf[len(buf)-keep:]...)
	}
	return out
}

func markName(b []byte) bool {
	for _, ch := range b {
		if (ch < '0' || ch > '9') && ch != '-' {
			return false
		}
	}
	return len(b) > 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// size is the bytes written to c so far.
func (c *capture) size() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// displayMarks are the marks c saw, in order.
func (c *capture) displayMarks() []displayMark {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]displayMark(nil), c.marks...)
}

// displayFile is how an in-box library describes a display (DisplayMeta).
type displayFile struct {
	Source string            `json:"source"`
	Mimes  map[string]string `json:"mimes"`
	// Refused are the mimes whose data the library could not write (the
	// box's file size limit, its space), with their size.
	Refused map[string]int64 `json:"refused"`
}

// collectDisplays reports the displays in spool, in the order of
// their marks (those without one, e.g. from a program whose stdout went
// elsewhere, after them by name, at the output's end), and returns their
// data to send after the artifacts' contents: within what the artifacts
// left of the job's count and byte caps. Nothing in the spool is trusted:
// only regular files are read, never through links, never past the budget.
// spooled says whether the spool held anything (or could not be read): an
// empty one needs no clearing after the call.
func collectDisplays(spool string, job *initproto.Job, marks []displayMark, out, errs int64, rep *initproto.Report) (contents [][]byte, spooled bool) {
	entries, err := os.ReadDir(spool)
	if err != nil || len(entries) == 0 {
		return nil, err != nil
	}
	at := map[string]displayMark{}
	var order []displayMark
	for _, m := range marks {
		if _, dup := at[m.name]; !dup {
			at[m.name] = m
			order = append(order, m)
		}
	}
	var unmarked []displayMark
	for _, e := range entries {
		if _, ok := at[e.Name()]; !ok && e.IsDir() && markName([]byte(e.Name())) {
			unmarked = append(unmarked, displayMark{name: e.Name(), stdout: out, stderr: errs})
		}
	}
	sort.Slice(unmarked, func(i, j int) bool { return unmarked[i].name < unmarked[j].name })
	order = append(order, unmarked...)

	budget := job.MaxArtifactBytes
	count := len(rep.Artifacts)
	for _, a := range rep.Artifacts {
		if a.Sent {
			budget -= a.Size
		}
	}
	for _, m := range order {
		dir := filepath.Join(spool, m.name)
		meta, _, _, ok := readRegular(filepath.Join(dir, initproto.DisplayMeta), 1<<16)
		if !ok || meta == nil {
			continue // not (yet) a display: its writer failed or is still at it
		}
		if len(rep.Displays) >= initproto.MaxDisplays {
			rep.DisplaysOmitted++
			continue
		}
		d := initproto.Display{Source: "display", Stdout: m.stdout, Stderr: m.stderr}
		var f displayFile
		if json.Unmarshal(meta, &f) != nil {
			d.Cut = initproto.DisplayCutInvalid
			rep.Displays = append(rep.Displays, d)
			continue
		}
		switch f.Source {
		case "display", "show", "result", "table":
			d.Source = f.Source
		}
		index := len(rep.Displays)
		for _, mime := range sortedKeys(f.Mimes) {
			name, known := initproto.DisplayNames[mime]
			if !known || f.Mimes[mime] != name {
				d.Cut = initproto.DisplayCutInvalid
				continue
			}
			data, size, sum, ok := readRegular(filepath.Join(dir, name), budget)
			if !ok {
				d.Cut = initproto.DisplayCutInvalid
				continue
			}
			dm := initproto.DisplayMime{Mime: mime, Name: name, Size: size}
			switch {
			case count >= job.MaxArtifacts:
				d.Cut = initproto.DisplayCutCount
			case data == nil:
				d.Cut = initproto.DisplayCutBytes
			default:
				dm.Sent = true
				budget -= size
				count++
				contents = append(contents, data)
				rep.Artifacts = append(rep.Artifacts, initproto.Artifact{
					Path: strconv.Itoa(index) + "/" + name, Size: size, SHA256: sum, Sent: true, Display: true})
			}
			d.Mimes = append(d.Mimes, dm)
		}
		for _, mime := range sortedKeys(f.Refused) {
			name, known := initproto.DisplayNames[mime]
			if _, twice := f.Mimes[mime]; !known || twice || f.Refused[mime] < 0 {
				d.Cut = initproto.DisplayCutInvalid
				continue
			}
			d.Mimes = append(d.Mimes, initproto.DisplayMime{Mime: mime, Name: name, Size: f.Refused[mime]})
			d.Cut = initproto.DisplayCutBytes
		}
		rep.Displays = append(rep.Displays, d)
	}
	return contents, true
}
