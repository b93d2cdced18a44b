//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
)

// TestDisplays: what code displays (plt.show(), display(), the _repr_*_
// protocol, a frame, console.table, a session cell's last value) comes
// back in order, as images the model sees and tables it reads, each kept
// whole as a resource; hostile displays are cut with their reason while
// the run's other results survive. On Docker (runc), gVisor and the oci
// backend, one-off and session.
func TestDisplays(t *testing.T) {
	for _, b := range []struct {
		name  string
		start func(*testing.T, string) *server
	}{{"docker", dockerServer}, {"gvisor", gvisorServer}, {"oci", ociServer}} {
		t.Run(b.name, func(t *testing.T) {
			s := b.start(t, "limits:\n  memory: 1GiB\n  tmp_size: 320MiB\n")
			t.Run("figures", func(t *testing.T) { displayFigures(t, s, "") })
			t.Run("reprs", func(t *testing.T) { displayReprs(t, s, "") })
			t.Run("javascript", func(t *testing.T) { displayJavaScript(t, s, "") })
			t.Run("hostile", func(t *testing.T) { displayHostile(t, s) })
			t.Run("session", func(t *testing.T) {
				py := s.open(t, "python")
				displayFigures(t, s, py)
				displayReprs(t, s, py)
				displaySessionResult(t, s, py)
				displayJavaScript(t, s, s.open(t, "javascript"))
			})
		})
	}
}

// runDisplay runs code, one-off or in session id, and returns the result
// with the answer's text and its image blocks.
func runDisplay(t *testing.T, s *server, id, language, code string) (contract.Result, string, []mcp.ImageContent) {
	t.Helper()
	args := map[string]any{"language": language, "code": code}
	if id != "" {
		args["session_id"] = id
	}
	r, raw := s.call(t, args)
	mustOK(t, r)
	var text string
	var images []mcp.ImageContent
	for _, c := range raw.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			text += c.Text
		case mcp.ImageContent:
			images = append(images, c)
		}
	}
	return r, text, images
}

func readDisplay(t *testing.T, s *server, uri string) []byte {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	got, err := s.c.ReadResource(context.Background(), req)
	if err != nil || len(got.Contents) != 1 {
		t.Fatalf("reading %s: %v %+v", uri, err, got)
	}
	switch c := got.Contents[0].(type) {
	case mcp.TextResourceContents:
		return []byte(c.Text)
	case mcp.BlobResourceContents:
		b, err := base64.StdEncoding.DecodeString(c.Blob)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("%s: contents %T", uri, got.Contents[0])
	return nil
}

func displayFigures(t *testing.T, s *server, id string) {
	r, text, images := runDisplay(t, s, id, "python", `
import matplotlib.pyplot as plt
print("before")
plt.figure(figsize=(4, 3), dpi=100); plt.plot([1, 2, 3])
plt.show()
print("between")
plt.figure(figsize=(3, 3), dpi=100); plt.plot([0, 1])
plt.savefig("saved.png")  # saved and left open: a file, not shown again
plt.figure(figsize=(2, 2), dpi=100); _ = plt.plot([3, 2, 1])  # left open: shown at the end
`)
	// The two shown figures' images, then saved.png's (an artifact's).
	if len(r.Displays) != 2 || len(images) != 3 {
		t.Fatalf("want 2 displays and 3 images, got %d and %d: %+v\n%s", len(r.Displays), len(images), r.Displays, text)
	}
	if r.Stdout != "before\nbetween\n" {
		t.Errorf("stdout %q: the display marks must not show", r.Stdout)
	}
	for i, want := range [][2]int{{400, 300}, {200, 200}} {
		d := r.Displays[i]
		if d.Source != "show" || d.Index != i {
			t.Errorf("display %d: %+v", i, d)
		}
		b, err := base64.StdEncoding.DecodeString(images[i].Data)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("image %d does not decode: %v", i, err)
		}
		if sz := img.Bounds().Size(); sz.X != want[0] || sz.Y != want[1] {
			t.Errorf("image %d is %v, want %v", i, sz, want)
		}
		m := d.Mimes["image/png"]
		if m.Width != want[0] || m.Height != want[1] || m.URI == "" {
			t.Errorf("display %d's png: %+v", i, m)
		}
		if whole := readDisplay(t, s, m.URI); !bytes.Equal(whole, b) {
			t.Errorf("display %d's resource differs from its image block", i)
		}
	}
	if r.Displays[0].After.Stdout != int64(len("before\n")) || r.Displays[1].After.Stdout != int64(len("before\nbetween\n")) {
		t.Errorf("displays' places in stdout: %+v %+v", r.Displays[0].After, r.Displays[1].After)
	}
	if !hasArtifact(r, "saved.png") {
		t.Errorf("savefig still makes an artifact: %+v", r.Artifacts)
	}
}

func hasArtifact(r contract.Result, p string) bool {
	for _, a := range r.Artifacts {
		if a.Path == p {
			return true
		}
	}
	return false
}

func displayReprs(t *testing.T, s *server, id string) {
	r, text, _ := runDisplay(t, s, id, "python", `
import pandas as pd, numpy as np
class Rich:
    def _repr_html_(self): return "<b>bold</b>"
    def _repr_markdown_(self): return "**md**"
    def _repr_svg_(self): return '<svg xmlns="http://www.w3.org/2000/svg" width="30" height="20"></svg>'
    def _repr_latex_(self): return r"$\alpha$"
    def _repr_json_(self): return {"k": [1, 2]}
    def _repr_jpeg_(self): return bytes.fromhex("ffd8ffc0001108000a001403012200021101031101ffd9")
class Bundle:
    def _repr_mimebundle_(self, **kw): return {"text/markdown": "from a bundle", "text/plain": "plain"}
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()) as buf:
    display(Rich(), Bundle())
assert buf.getvalue() == "", repr(buf.getvalue())
df = pd.DataFrame({"a": np.arange(1_000_000), "b": 0.5, "c": "x"})
display(df)
display(df["a"].head(3))
try:
    display(df.head(2).style)
except ImportError:  # the image has no jinja2, which Styler needs
    display(df.head(2))
`)
	if len(r.Displays) != 5 {
		t.Fatalf("want 5 displays, got %d: %+v", len(r.Displays), r.Displays)
	}
	rich := r.Displays[0].Mimes
	for _, mime := range []string{"text/html", "text/markdown", "image/svg+xml", "text/latex", "application/json", "image/jpeg", "text/plain"} {
		if m, ok := rich[mime]; !ok || m.URI == "" {
			t.Errorf("Rich has no %s: %+v", mime, rich)
		}
	}
	if m := rich["image/svg+xml"]; m.Width != 30 || m.Height != 20 {
		t.Errorf("svg size %dx%d", m.Width, m.Height)
	}
	if m := rich["image/jpeg"]; m.Width != 20 || m.Height != 10 {
		t.Errorf("jpeg size %dx%d", m.Width, m.Height)
	}
	if rich["text/markdown"].Text != "**md**" || rich["text/html"].Text != "" {
		t.Errorf("markdown text %q, html text %q (html never as text)", rich["text/markdown"].Text, rich["text/html"].Text)
	}
	if string(readDisplay(t, s, rich["text/html"].URI)) != "<b>bold</b>" {
		t.Error("html resource")
	}
	if strings.Contains(text, "<b>bold</b>") {
		t.Error("the model's text carries HTML")
	}
	if r.Displays[1].Mimes["text/markdown"].Text != "from a bundle" {
		t.Errorf("bundle: %+v", r.Displays[1])
	}
	tab := r.Displays[2].Mimes[contract.TableMime]
	if tab.Rows == nil || *tab.Rows != 1_000_000 || *tab.Columns != 3 {
		t.Fatalf("frame's table: %+v", tab)
	}
	if !strings.Contains(text, "of 1000000 rows x 3 columns)") || !strings.Contains(text, "| a | b | c |") {
		t.Errorf("the model's text has no markdown table with the shape:\n%s", text)
	}
	var whole contract.Table
	if err := json.Unmarshal(readDisplay(t, s, tab.URI), &whole); err != nil || len(whole.Rows) != 1000 || whole.Cut == "" || whole.Shape[0] != 1_000_000 {
		t.Errorf("table resource: %v rows %d cut %q shape %v", err, len(whole.Rows), whole.Cut, whole.Shape)
	}
	if m := r.Displays[3].Mimes[contract.TableMime]; m.Rows == nil || *m.Rows != 3 || *m.Columns != 1 {
		t.Errorf("series: %+v", r.Displays[3])
	}
	if m := r.Displays[4].Mimes[contract.TableMime]; m.Rows == nil || *m.Rows != 2 || *m.Columns != 3 {
		t.Errorf("styler: %+v", r.Displays[4])
	}
}

func displaySessionResult(t *testing.T, s *server, id string) {
	runDisplay(t, s, id, "python", "import pandas as pd\ndf = pd.DataFrame({'x': [1, 2], 'y': ['p', 'q']})\n")
	r, text, _ := runDisplay(t, s, id, "python", "df")
	if len(r.Displays) != 1 || r.Displays[0].Source != "result" || !strings.Contains(text, "(2 rows x 2 columns)") {
		t.Fatalf("a cell's last frame: %+v\n%s", r.Displays, text)
	}
	r, text, _ = runDisplay(t, s, id, "python", "df.groupby('y').x.sum()")
	if len(r.Displays) != 1 || !strings.Contains(text, "| y | x |\n| --- | --- |\n| p | 1 |") {
		t.Errorf("a cell's last Series, by its named index: %+v\n%s", r.Displays, text)
	}
	if strings.Contains(r.Stdout, "x  y") {
		t.Errorf("a displayed value is not printed too: %q", r.Stdout)
	}
	r, _, _ = runDisplay(t, s, id, "python", "41 + 1")
	if r.Stdout != "42\n" || len(r.Displays) != 0 {
		t.Errorf("a plain value prints as before: %q %+v", r.Stdout, r.Displays)
	}
	r, _, images := runDisplay(t, s, id, "python", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nNone")
	if len(r.Displays) != 1 || r.Displays[0].Source != "show" || len(images) != 1 {
		t.Errorf("a figure left open at the cell's end: %+v", r.Displays)
	}
	r, _, _ = runDisplay(t, s, id, "python", "print(1)")
	if len(r.Displays) != 0 {
		t.Errorf("a cell reports only its own displays: %+v", r.Displays)
	}
}

func displayJavaScript(t *testing.T, s *server, id string) {
	onePixel := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	r, text, images := runDisplay(t, s, id, "javascript", `
console.log("first");
display({"image/png": "`+onePixel+`", "text/plain": "a pixel"});
console.table([{a: 1, b: "x"}, {a: 2, b: "y"}, {a: 3}]);
`)
	if len(r.Displays) != 2 || len(images) != 1 {
		t.Fatalf("want 2 displays, 1 image: %+v", r.Displays)
	}
	if d := r.Displays[0]; d.Source != "display" || d.Mimes["image/png"].Width != 1 || d.After.Stdout != int64(len("first\n")) {
		t.Errorf("display(): %+v", d)
	}
	tab := r.Displays[1]
	if tab.Source != "table" || tab.Mimes[contract.TableMime].Rows == nil || *tab.Mimes[contract.TableMime].Rows != 3 || *tab.Mimes[contract.TableMime].Columns != 2 {
		t.Errorf("console.table: %+v", tab)
	}
	if !strings.Contains(r.Stdout, "│ (index) │") || !strings.Contains(text, "(3 rows x 2 columns)") {
		t.Errorf("console.table keeps Node's text and gives the model a table:\n%s\n%s", r.Stdout, text)
	}
}

func displayHostile(t *testing.T, s *server) {
	r, text, images := runDisplay(t, s, "", "python", `
import os
open("kept.txt", "w").write("still here")
display({"image/png": b"GIF89a not a png"}, raw=True)
display({"text/plain": b"bad \xff\xfe utf-8"}, raw=True)
head = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x01\x00"
big = head + bytes(200 << 20)
display({"image/png": big}, raw=True)
del big
display({"image/png": head + bytes(40 << 20)}, raw=True)
wide = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x01\x00\x00\x00\x00\x00\x10" + bytes(64)
display({"image/png": wide}, raw=True)
for i in range(70):
    display(i)
print("done")
`)
	if r.Stdout != "done\n" || !hasArtifact(r, "kept.txt") {
		t.Fatalf("the run's other results: %q %+v", r.Stdout, r.Artifacts)
	}
	if len(r.Displays) != 64 || r.DisplaysOmitted != 11 || !strings.Contains(text, "11 more displays omitted") {
		t.Errorf("displays %d, omitted %d", len(r.Displays), r.DisplaysOmitted)
	}
	cases := []struct {
		mime, cut string
		uri       bool
	}{
		{"image/png", contract.DisplayCutInvalidData, false},
		{"text/plain", contract.DisplayCutInvalidUTF8, true},
		{"image/png", contract.DisplayCutBytes, false},
		{"image/png", contract.DisplayCutBytes, false},
		{"image/png", contract.DisplayCutPixels, true},
	}
	for i, c := range cases {
		d := r.Displays[i]
		m, ok := d.Mimes[c.mime]
		if !ok || !strings.Contains(d.Cut, c.cut) || (m.URI != "") != c.uri {
			t.Errorf("display %d: want cut %s, uri %v: %+v", i, c.cut, c.uri, d)
		}
	}
	if r.Displays[2].Mimes["image/png"].Bytes != 200<<20+24 || r.Displays[3].Mimes["image/png"].Bytes != 40<<20+24 {
		t.Errorf("the refused PNGs' sizes: %+v %+v", r.Displays[2], r.Displays[3])
	}
	if !strings.Contains(r.Stderr, "image/png display not kept (209715224 bytes)") {
		t.Errorf("the PNG past the box's file size limit is said on stderr: %q", r.Stderr)
	}
	if !strings.Contains(r.Displays[1].Mimes["text/plain"].Text, "bad \uFFFD utf-8") {
		t.Errorf("invalid UTF-8: %q", r.Displays[1].Mimes["text/plain"].Text)
	}
	if len(images) != 0 {
		t.Errorf("no hostile image reaches the model: %d", len(images))
	}
}

// TestDisplaysPooled: a pooled box's prestarted interpreter (started
// before its job, with the display library already on its path) displays
// as a cold one does.
func TestDisplaysPooled(t *testing.T) {
	s := dockerServer(t, "pool:\n  size: 1\n")
	pid := s.cmd.Process.Pid
	waitRunningPooled(t, pid, "python")
	r, _, _ := runDisplay(t, s, "", "python", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\ndisplay({'text/markdown': '**hi**'}, raw=True)\n")
	if !r.Metrics.Pooled {
		t.Fatalf("the run did not take the pooled box: %+v", r.Metrics)
	}
	if len(r.Displays) != 2 || r.Displays[0].Mimes["image/png"].Width != 640 || r.Displays[1].Mimes["text/markdown"].Text != "**hi**" {
		t.Errorf("pooled displays: %+v", r.Displays)
	}
	waitRunningPooled(t, pid, "javascript")
	r, _, _ = runDisplay(t, s, "", "javascript", "console.table([[1, 2]])\n")
	if !r.Metrics.Pooled || len(r.Displays) != 1 || r.Displays[0].Source != "table" {
		t.Errorf("pooled console.table: pooled %v, %+v", r.Metrics.Pooled, r.Displays)
	}
}
