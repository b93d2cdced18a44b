package tools

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
)

func pngDisplay(i, w, h int, data []byte) contract.Display {
	return contract.Display{Index: i, Source: "show", Mimes: map[string]contract.DisplayMime{
		"image/png": {Bytes: int64(len(data)), Width: w, Height: h, URI: contract.DisplayURI("r_1", i, "image.png"), Data: data}}}
}

func TestBoundDisplays(t *testing.T) {
	m := manifest.Default()
	m.Limits.ImageBytes = 10
	var ds []contract.Display
	ds = append(ds, pngDisplay(0, 9000, 10, []byte("a")), pngDisplay(1, 10, 10, []byte("too many bytes")))
	for i := 2; i < 2+maxAnswerImages+1; i++ {
		ds = append(ds, pngDisplay(i, 10, 10, []byte("ok")))
	}
	out, images := boundDisplays(m, ds)
	if len(images) != maxAnswerImages {
		t.Errorf("%d images, want %d", len(images), maxAnswerImages)
	}
	if out[0].Cut != contract.DisplayCutPixels || out[1].Cut != contract.DisplayCutImageBytes || out[len(out)-1].Cut != contract.DisplayCutAnswerImages || out[2].Cut != "" {
		t.Errorf("cuts: %q %q %q %q", out[0].Cut, out[1].Cut, out[len(out)-1].Cut, out[2].Cut)
	}
	if ds[0].Cut != "" {
		t.Error("the stored result's displays are not changed")
	}
	m.Artifacts.ImageDelivery = manifest.ImagesResourceLink
	if _, images := boundDisplays(m, ds); len(images) != 0 {
		t.Error("resource_link delivery sends no image blocks")
	}
}

func TestDisplayResources(t *testing.T) {
	m := manifest.Default()
	store := runs.NewArtifactStore(time.Hour, 1<<20)
	res := contract.Result{RunID: "r_1", Status: contract.StatusOK, Displays: []contract.Display{
		pngDisplay(0, 1, 1, []byte("\x89PNG")),
		{Index: 1, Source: "display", Mimes: map[string]contract.DisplayMime{"text/html": {Bytes: 3, URI: contract.DisplayURI("r_1", 1, "index.html"), Data: []byte("<b>")}}},
	}}
	store.Put("alice", res, res)
	tmpl := DisplayTemplate(store, m)
	read := func(who, uri string) ([]mcp.ResourceContents, error) {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		return tmpl.Handler(WithPrincipal(context.Background(), who), req)
	}
	got, err := read("alice", "runbox://runs/r_1/displays/1/index.html")
	if err != nil || got[0].(mcp.TextResourceContents).Text != "<b>" || got[0].(mcp.TextResourceContents).MIMEType != "text/html" {
		t.Errorf("html: %+v %v", got, err)
	}
	got, err = read("alice", "runbox://runs/r_1/displays/0/image.png")
	if err != nil || got[0].(mcp.BlobResourceContents).MIMEType != "image/png" {
		t.Errorf("png: %+v %v", got, err)
	}
	for _, c := range []struct{ who, uri string }{
		{"mallory", "runbox://runs/r_1/displays/0/image.png"},
		{"alice", "runbox://runs/r_1/displays/2/image.png"},
		{"alice", "runbox://runs/r_1/displays/0/evil.exe"},
		{"alice", "runbox://runs/r_1/files/displays/0/image.png"},
	} {
		if _, err := read(c.who, c.uri); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("%s reading %s: %v", c.who, c.uri, err)
		}
	}
	// A display's data is not a workspace file.
	if _, err := store.Get("alice", "r_1", "displays/0/image.png"); err == nil {
		t.Error("display data read as an artifact")
	}
}
