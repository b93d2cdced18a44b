package sandbox

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

func encoded(t *testing.T, enc func(*bytes.Buffer, image.Image) error, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.White)
	var b bytes.Buffer
	if err := enc(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestImageSizesFromHeaders(t *testing.T) {
	p := encoded(t, func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) }, 123, 45)
	if w, h, ok := pngSize(p); !ok || w != 123 || h != 45 {
		t.Errorf("png: %d %d %v", w, h, ok)
	}
	j := encoded(t, func(b *bytes.Buffer, i image.Image) error { return jpeg.Encode(b, i, nil) }, 64, 33)
	if w, h, ok := jpegSize(j); !ok || w != 64 || h != 33 {
		t.Errorf("jpeg: %d %d %v", w, h, ok)
	}
	for _, bad := range [][]byte{nil, []byte("GIF89a"), j[:20], p[:20], append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 16)...)} {
		if _, _, ok := pngSize(bad); ok {
			t.Errorf("png from %q", bad)
		}
		if _, _, ok := jpegSize(bad); ok && !bytes.Equal(bad, j[:20]) {
			t.Errorf("jpeg from %q", bad)
		}
	}
	for svg, want := range map[string][2]int{
		`<svg xmlns="http://www.w3.org/2000/svg" width="30" height="20px">`:    {30, 20},
		`<?xml version="1.0"?><svg height='12pt' viewBox="0 0 1 1" width='6'>`: {6, 16},
		`<svg width="100%" height="50%">`:                                      {0, 0},
		`<svg>`:                                                                {0, 0},
	} {
		if w, h := svgSize([]byte(svg)); w != want[0] || h != want[1] {
			t.Errorf("%s: %dx%d, want %v", svg, w, h, want)
		}
	}
}

func TestBuildDisplays(t *testing.T) {
	pngData := encoded(t, func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) }, 10, 7)
	rep := &initproto.Report{Displays: []initproto.Display{
		{Source: "show", Stdout: 4, Stderr: 1, Mimes: []initproto.DisplayMime{{Mime: "image/png", Name: "image.png", Size: int64(len(pngData)), Sent: true}}},
		{Source: "display", Mimes: []initproto.DisplayMime{{Mime: "image/png", Name: "image.png", Size: 9, Sent: true}, {Mime: "text/plain", Name: "text.txt", Size: 6, Sent: true}}},
		{Source: "result", Mimes: []initproto.DisplayMime{{Mime: contract.TableMime, Name: "table.json", Size: 10, Sent: true}}},
		{Source: "display", Cut: initproto.DisplayCutBytes, Mimes: []initproto.DisplayMime{{Mime: "text/html", Name: "index.html", Size: 1 << 30}, {Mime: "application/json", Name: "data.json", Size: 5, Sent: true}}},
		{Source: "display", Mimes: []initproto.DisplayMime{{Mime: "text/markdown", Name: "text.md", Size: 5, Sent: true}, {Mime: "text/html", Name: "index.html", Size: 3, Sent: true}}},
	}}
	data := map[string][]byte{
		"0/image.png":  pngData,
		"1/image.png":  []byte("GIF89a..."),
		"1/text.txt":   []byte("ok \xff!"),
		"2/table.json": []byte(`{"columns":["a"],"rows":[[1],[2]],"shape":[1000000,1]}`),
		"3/data.json":  []byte(`{"a":`),
		"4/text.md":    []byte("# hi"),
		"4/index.html": []byte("<b>"),
	}
	ds := buildDisplays("r_1", rep, data)
	if len(ds) != 5 {
		t.Fatalf("%d displays", len(ds))
	}
	if m := ds[0].Mimes["image/png"]; m.Width != 10 || m.Height != 7 || m.URI != "runbox://runs/r_1/displays/0/image.png" || ds[0].After != (contract.After{Stdout: 4, Stderr: 1}) || ds[0].Cut != "" {
		t.Errorf("png: %+v", ds[0])
	}
	if m := ds[1].Mimes["image/png"]; m.URI != "" || m.Data != nil || m.Bytes != 9 || !strings.Contains(ds[1].Cut, contract.DisplayCutInvalidData) {
		t.Errorf("a lying png is refused: %+v", ds[1])
	}
	if m := ds[1].Mimes["text/plain"]; m.Text != "ok \uFFFD!" || m.URI == "" || !strings.Contains(ds[1].Cut, contract.DisplayCutInvalidUTF8) {
		t.Errorf("invalid UTF-8 is mended and said: %+v %q", m, ds[1].Cut)
	}
	if m := ds[2].Mimes[contract.TableMime]; m.Rows == nil || *m.Rows != 1000000 || *m.Columns != 1 || !strings.HasSuffix(m.Markdown, "| 2 |\n(first 2 rows and 1 columns of 1000000 rows x 1 columns)") {
		t.Errorf("table: %+v", m)
	}
	if ds[3].Cut != "bytes,invalid_data" || ds[3].Mimes["text/html"].Bytes != 1<<30 || ds[3].Mimes["text/html"].URI != "" {
		t.Errorf("cuts add up: %+v", ds[3])
	}
	if m := ds[4].Mimes; m["text/markdown"].Text != "# hi" || m["text/html"].Text != "" || m["text/html"].URI == "" {
		t.Errorf("markdown as text, HTML only by its resource: %+v", m)
	}
}
