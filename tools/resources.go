package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/sandbox"
)

// ManifestURI is the resource holding the effective manifest.
const ManifestURI = "runbox://manifest"

// ManifestResource publishes the effective manifest as JSON, as current
// says it at each read.
func ManifestResource(current func() *manifest.Manifest) server.ServerResource {
	res := mcp.NewResource(ManifestURI, "runbox manifest",
		mcp.WithResourceDescription("The sandbox's rules: languages and installed packages, limits, isolation level, network (none)."),
		mcp.WithMIMEType("application/json"))
	return server.ServerResource{Resource: res, Handler: func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		b, err := json.MarshalIndent(current(), "", "  ")
		if err != nil {
			return nil, err
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: ManifestURI, MIMEType: "application/json", Text: string(b)}}, nil
	}}
}

// ArtifactTemplate serves the files of the caller's recent runs.
func ArtifactTemplate(store *runs.ArtifactStore, m *manifest.Manifest) server.ServerResourceTemplate {
	tmpl := mcp.NewResourceTemplate(contract.ArtifactURITemplate, "run artifact",
		mcp.WithTemplateDescription(fmt.Sprintf("A file a run created or changed in /workspace, readable for %s after the run.", m.Artifacts.TTL())))
	return server.ServerResourceTemplate{Template: tmpl, Handler: func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		runID, path, ok := contract.ParseArtifactURI(uri)
		if !ok {
			return nil, fmt.Errorf("%w: %s is not runbox://runs/{run_id}/files/{path}", server.ErrResourceNotFound, uri)
		}
		a, err := store.Get(PrincipalOf(ctx), runID, path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", server.ErrResourceNotFound, err)
		}
		if isText(a.MimeType) && utf8.Valid(a.Data) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: a.MimeType, Text: string(a.Data)}}, nil
		}
		return []mcp.ResourceContents{mcp.BlobResourceContents{URI: uri, MIMEType: a.MimeType, Blob: base64.StdEncoding.EncodeToString(a.Data)}}, nil
	}}
}

// StreamTemplate serves the stdout and stderr of the caller's recent runs
// whose answer showed only part of them.
func StreamTemplate(store *runs.ArtifactStore, m *manifest.Manifest) server.ServerResourceTemplate {
	tmpl := mcp.NewResourceTemplate(contract.StreamURITemplate, "run output",
		mcp.WithTemplateDescription(fmt.Sprintf("All that runbox kept of a run's stdout or stderr (up to the first and last %s) when its answer showed only part of it; readable for %s after the run.",
			m.Limits.OutputBytes/2, m.Artifacts.TTL())),
		mcp.WithTemplateMIMEType("text/plain"))
	return server.ServerResourceTemplate{Template: tmpl, Handler: func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		runID, stream, ok := contract.ParseStreamURI(uri)
		if !ok {
			return nil, fmt.Errorf("%w: %s is not runbox://runs/{run_id}/stdout or /stderr", server.ErrResourceNotFound, uri)
		}
		text, err := store.Stream(PrincipalOf(ctx), runID, stream)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", server.ErrResourceNotFound, err)
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: text}}, nil
	}}
}

func isText(mime string) bool {
	return strings.HasPrefix(mime, "text/") || mime == "application/json" || mime == "application/xml" || mime == "application/yaml" || mime == "image/svg+xml"
}

// SessionCellsTemplate serves the caller's open sessions' cells so far:
// what the view draws above a session's latest cell.
func SessionCellsTemplate(log sandbox.CellLog) server.ServerResourceTemplate {
	tmpl := mcp.NewResourceTemplate(contract.SessionCellsURITemplate, "session cells",
		mcp.WithTemplateDescription("The cells of one of your open sessions so far, oldest first: each one's number, run id, code (its first 4 KiB), status, error, the head of its output and links to its run's files. Gone when the session closes."),
		mcp.WithTemplateMIMEType("application/json"))
	return server.ServerResourceTemplate{Template: tmpl, Handler: func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		uri := req.Params.URI
		id, ok := contract.ParseSessionCellsURI(uri)
		if !ok {
			return nil, fmt.Errorf("%w: %s is not runbox://sessions/{session_id}/cells", server.ErrResourceNotFound, uri)
		}
		cells, ok := log.SessionCells(id, PrincipalOf(ctx))
		if !ok {
			// Another client's session reads as no session at all.
			return nil, fmt.Errorf("%w: no open session %s of yours", server.ErrResourceNotFound, id)
		}
		b, err := json.Marshal(cells)
		if err != nil {
			return nil, err
		}
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "application/json", Text: string(b)}}, nil
	}}
}

// CellLogOf is the runner's log of session cells, when it keeps sessions
// and such a log.
func CellLogOf(d Deps) sandbox.CellLog {
	sr := d.Runner.Sessions()
	if d.Manifest == nil || !d.Manifest.Sessions.Enabled || sr == nil {
		return nil
	}
	log, _ := sr.(sandbox.CellLog)
	return log
}
