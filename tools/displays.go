package tools

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
)

// What an answer shows the model of a run's display images: at most
// maxAnswerImages of them, none wider or taller than maxImageSide pixels
// (what model APIs take), each within limits.max_image_bytes. The rest
// stay readable as resources, with the reason in the display's cut.
const (
	maxAnswerImages = 8
	maxImageSide    = 8000
)

// displayMimeTypes are the mimes of the displays' resource names.
var displayMimeTypes = map[string]string{
	"image.png": "image/png", "image.jpg": "image/jpeg", "image.svg": "image/svg+xml",
	"index.html": "text/html", "text.md": "text/markdown", "text.tex": "text/latex",
	"text.txt": "text/plain", "data.json": "application/json", "table.json": contract.TableMime,
}

// boundDisplays picks the display images the answer shows as image
// blocks, within the answer's bounds, and says in the displays' cuts
// (of a copy: res's are the stored result's) why the others are not.
func boundDisplays(m *manifest.Manifest, displays []contract.Display) ([]contract.Display, []mcp.Content) {
	if len(displays) == 0 {
		return displays, nil
	}
	out := make([]contract.Display, len(displays))
	copy(out, displays)
	var images []mcp.Content
	for i := range out {
		d := &out[i]
		for _, mime := range []string{"image/png", "image/jpeg"} {
			im, ok := d.Mimes[mime]
			if !ok || im.Data == nil || m.Artifacts.ImageDelivery != manifest.ImagesInline {
				continue
			}
			switch {
			case im.Width > maxImageSide || im.Height > maxImageSide:
				d.AddCut(contract.DisplayCutPixels)
			case im.Bytes > int64(m.Limits.ImageBytes):
				d.AddCut(contract.DisplayCutImageBytes)
			case len(images) >= maxAnswerImages:
				d.AddCut(contract.DisplayCutAnswerImages)
			default:
				images = append(images, mcp.NewImageContent(encodeBase64(im.Data), mime))
			}
			break // one image per display
		}
	}
	return out, images
}

// DisplayTemplate serves the displays' data of the caller's recent runs.
func DisplayTemplate(store *runs.ArtifactStore, m *manifest.Manifest) server.ServerResourceTemplate {
	tmpl := mcp.NewResourceTemplate(contract.DisplayURITemplate, "run display",
		mcp.WithTemplateDescription(fmt.Sprintf("The whole data of one representation of something a run displayed (image.png, table.json, index.html, text.md...), readable for %s after the run.", m.Artifacts.TTL())))
	return server.ServerResourceTemplate{Template: tmpl, Handler: func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		runID, index, name, ok := contract.ParseDisplayURI(uri)
		mime, known := displayMimeTypes[path.Base(name)]
		if !ok || !known {
			return nil, fmt.Errorf("%w: %s is not runbox://runs/{run_id}/displays/{index}/{name}", server.ErrResourceNotFound, uri)
		}
		a, err := store.Get(PrincipalOf(ctx), runID, runs.DisplayKey(index, name))
		if err != nil {
			return nil, fmt.Errorf("%w: %s", server.ErrResourceNotFound, err)
		}
		if (isText(mime) || mime == contract.TableMime) && utf8.Valid(a.Data) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: mime, Text: string(a.Data)}}, nil
		}
		return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: mime, Blob: base64.StdEncoding.EncodeToString(a.Data)}}, nil
	}}
}
