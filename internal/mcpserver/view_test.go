package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/view"
)

// viewClient is an in-process client that declares caps at initialize.
func viewClient(t *testing.T, caps mcp.ClientCapabilities) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClient(New(manifest.Default(), &echoRunner{}, Options{Version: "test"}).MCP())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.Capabilities = caps
	if _, err := c.Initialize(context.Background(), init); err != nil {
		t.Fatal(err)
	}
	return c
}

// A client that declares the MCP Apps extension at initialize sees the
// run-drawing tools point to the view and reads it; one that does not sees
// the tools as before; both get the same answer to the same call.
func TestViewNegotiated(t *testing.T) {
	apps := viewClient(t, mcp.ClientCapabilities{Extensions: map[string]any{view.Extension: map[string]any{"mimeTypes": []any{view.MIMEType}}}})
	plain := viewClient(t, mcp.ClientCapabilities{})
	uris := func(c *client.Client) map[string]any {
		res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]any{}
		for _, tl := range res.Tools {
			if tl.Meta != nil {
				if ui, ok := tl.Meta.AdditionalFields["ui"].(map[string]any); ok {
					out[tl.Name] = ui["resourceUri"]
				}
			}
		}
		return out
	}
	// The session tools are there only with a session runner (the e2e
	// test TestView sees all five).
	got := uris(apps)
	if len(got) != 2 || got["run_code"] != view.URI || got["run_wait"] != view.URI {
		t.Errorf("tools pointing to the view: %v", got)
	}
	if p := uris(plain); len(p) != 0 {
		t.Errorf("a client without the extension sees the view on %v", p)
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = view.URI
	res, err := apps.ReadResource(context.Background(), req)
	if err != nil || len(res.Contents) != 1 {
		t.Fatalf("read view: %v %v", res, err)
	}
	if c, ok := res.Contents[0].(mcp.TextResourceContents); !ok || c.MIMEType != view.MIMEType || c.Text != view.HTML() {
		t.Fatalf("view contents: %#v", res.Contents[0])
	}
	answer := func(c *client.Client) string {
		r := call(t, c, "run_code", map[string]any{"language": "python", "code": "print(1)", "stdin": "same"})
		b, _ := json.Marshal(r)
		var sc struct {
			RunID string `json:"run_id"`
		}
		sb, _ := json.Marshal(r.StructuredContent)
		_ = json.Unmarshal(sb, &sc)
		return strings.ReplaceAll(string(b), sc.RunID, "RUN")
	}
	if a, p := answer(apps), answer(plain); a != p {
		t.Errorf("the answers differ:\n%s\n%s", a, p)
	}
}
