package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/icon"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
)

// A client hands its model either the structured content (as JSON text)
// or the content blocks, never both in full (docs/clients.md has what each
// client tried does). runbox answers so that either one carries every
// fact the agent acts on, and the streams within the manifest's
// limits.answer_output_chars, under every client's own cut.

// MaxResultSizeMeta is the tool _meta key with which Claude Code takes a
// result of up to that many characters whole instead of saving it to a
// file and showing its model a preview.
const MaxResultSizeMeta = "anthropic/maxResultSizeChars"

// maxResultSize is what runbox declares under MaxResultSizeMeta: more than
// an answer's text (the streams' budget, the result's other fields and a
// second copy) ever is with the default budget.
func maxResultSize(m *manifest.Manifest) int {
	return max(4*m.Limits.AnswerChars, 50000)
}

// contentOnlyClients read the structured content whenever a result has
// one and drop its content blocks, images included: to them runbox lists
// its tools without an output schema and answers with content alone (the
// text summary and the images). Matched against the name a client gives
// in initialize, as a prefix.
var contentOnlyClients = []string{"codex"}

// contentOnly reports whether the calling client is one of
// contentOnlyClients.
func contentOnly(ctx context.Context) bool {
	return isContentOnly(ClientOf(ctx).Name)
}

func isContentOnly(name string) bool {
	name = strings.ToLower(name)
	for _, p := range contentOnlyClients {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ToolsForClient is the server's tool filter: a content-only client sees
// every tool without its output schema, since it gets no structured
// content to check against one.
func ToolsForClient(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if !contentOnly(ctx) {
		return tools
	}
	out := make([]mcp.Tool, len(tools))
	for i, t := range tools {
		t.RawOutputSchema = nil
		t.OutputSchema = mcp.ToolOutputSchema{}
		out[i] = t
	}
	return out
}

// Icons are runbox's icon as MCP icons: the server's and its tools'.
var Icons = []mcp.Icon{{Src: icon.DataURI(48), MIMEType: "image/png", Sizes: []string{"48x48"}}}

// withSizeHint declares the answer's largest size on a tool.
func withSizeHint(m *manifest.Manifest, t mcp.Tool) mcp.Tool {
	if t.Meta == nil {
		t.Meta = &mcp.Meta{}
	}
	if t.Meta.AdditionalFields == nil {
		t.Meta.AdditionalFields = map[string]any{}
	}
	t.Meta.AdditionalFields[MaxResultSizeMeta] = maxResultSize(m)
	t.Icons = Icons
	return t
}

// answer renders a result for the calling client's model: cut to the
// budget (the whole streams kept in the store for their resources, the
// caller's: PrincipalOf(ctx)), the structured content and a text summary
// with every fact, an image block per image artifact under the cap, and a
// link per artifact.
func answer(ctx context.Context, m *manifest.Manifest, store *runs.ArtifactStore, res contract.Result) *mcp.CallToolResult {
	shown := contract.ForModel(res, m.Limits.AnswerChars)
	if store != nil {
		store.Put(PrincipalOf(ctx), res, shown)
	}
	return rendered(ctx, m, shown)
}

// render is the answer of a result whose resources were kept already (by
// the registry of runs in flight, runs/inflight): a call's, or a long
// run's when its client collects it.
func render(ctx context.Context, m *manifest.Manifest, res contract.Result) *mcp.CallToolResult {
	return rendered(ctx, m, contract.ForModel(res, m.Limits.AnswerChars))
}

// rendered is the answer of a result cut ForModel, for the calling
// client (which may read content only).
func rendered(ctx context.Context, m *manifest.Manifest, shown contract.Result) *mcp.CallToolResult {
	out := ToCallToolResult(m, shown)
	if contentOnly(ctx) {
		out.StructuredContent = nil
	}
	return out
}

// ToCallToolResult renders a result as it is (render it ForModel first):
// the structured content, a text summary for clients that read content,
// an image block per image artifact under the cap, and a resource link per
// artifact.
func ToCallToolResult(m *manifest.Manifest, res contract.Result) *mcp.CallToolResult {
	var images []mcp.Content
	res.Displays, images = boundDisplays(m, res.Displays)
	out := &mcp.CallToolResult{
		StructuredContent: res,
		IsError:           res.Status == contract.StatusError,
		Content:           append([]mcp.Content{mcp.NewTextContent(contract.Summary(res))}, images...),
	}
	for _, a := range res.Artifacts {
		if m.Artifacts.ImageDelivery == manifest.ImagesInline && isInlineImage(a.MimeType) && a.Data != nil && a.SizeBytes <= int64(m.Limits.ImageBytes) {
			out.Content = append(out.Content, mcp.NewImageContent(encodeBase64(a.Data), a.MimeType))
		}
	}
	for _, a := range res.Artifacts {
		if a.Data != nil {
			out.Content = append(out.Content, mcp.NewResourceLink(a.URI, a.Path, fmt.Sprintf("%d bytes, from run %s", a.SizeBytes, res.RunID), a.MimeType))
		}
	}
	return out
}

func isInlineImage(mime string) bool {
	switch mime {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return true
	}
	return false
}
