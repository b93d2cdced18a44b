package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/view"
)

func withCaps(caps string) context.Context {
	var c mcp.ClientCapabilities
	if err := json.Unmarshal([]byte(caps), &c); err != nil {
		panic(err)
	}
	return server.WithRequestProtocolInfo(context.Background(), &server.RequestProtocolInfo{Modern: true, ClientCapabilities: &c})
}

func TestViewForClient(t *testing.T) {
	listed := func() []mcp.Tool {
		return []mcp.Tool{
			withSizeHint(manifest.Default(), mcp.NewTool(RunCodeName)),
			mcp.NewTool(SessionOpenName),
			mcp.NewTool(SaveToolName),
		}
	}
	for name, c := range map[string]struct {
		caps string
		view bool
	}{
		"declared":          {`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`, true},
		"declared, no list": {`{"extensions":{"io.modelcontextprotocol/ui":{}}}`, true},
		"other mime only":   {`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/uri-list"]}}}`, false},
		"not an object":     {`{"extensions":{"io.modelcontextprotocol/ui":true}}`, false},
		"other extension":   {`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, false},
		"none":              {`{}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			before := listed()
			want, _ := json.Marshal(before)
			got := ViewForClient(withCaps(c.caps), before)
			if after, _ := json.Marshal(before); string(after) != string(want) {
				t.Fatalf("the registered tools changed: %s", after)
			}
			if !c.view {
				if b, _ := json.Marshal(got); string(b) != string(want) {
					t.Fatalf("a client without the extension saw %s, not %s", b, want)
				}
				return
			}
			for _, tl := range got {
				var uri any
				if tl.Meta != nil {
					if ui, ok := tl.Meta.AdditionalFields["ui"].(map[string]any); ok {
						uri = ui["resourceUri"]
					}
				}
				if wantView := tl.Name != SaveToolName; wantView != (uri == view.URI) {
					t.Errorf("%s: resourceUri %v", tl.Name, uri)
				}
			}
			if _, ok := got[0].Meta.AdditionalFields[MaxResultSizeMeta]; !ok {
				t.Errorf("run_code lost its other _meta: %v", got[0].Meta.AdditionalFields)
			}
		})
	}
}

func TestViewResource(t *testing.T) {
	r := ViewResource()
	if r.Resource.URI != view.URI || r.Resource.MIMEType != view.MIMEType {
		t.Fatalf("resource %+v", r.Resource)
	}
	contents, err := r.Handler(context.Background(), mcp.ReadResourceRequest{})
	if err != nil || len(contents) != 1 {
		t.Fatalf("read: %v %v", contents, err)
	}
	c := contents[0].(mcp.TextResourceContents)
	if c.MIMEType != view.MIMEType || !strings.Contains(c.Text, `http-equiv="Content-Security-Policy"`) {
		t.Fatalf("contents: %s %.200s", c.MIMEType, c.Text)
	}
	csp := c.Meta["ui"].(map[string]any)["csp"].(map[string]any)
	if len(csp["connectDomains"].([]string)) != 0 || len(csp["resourceDomains"].([]string)) != 0 {
		t.Fatalf("the view asks for network domains: %v", csp)
	}
}
