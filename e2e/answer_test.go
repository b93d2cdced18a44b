//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/tools"
)

// TestAnswerForModel: a long output is shown within the answer budget, its
// head and tail around a marker naming the resource that holds all of it,
// the facts an agent acts on ahead of it in both renderings, and the
// resource gives back every byte that was kept.
func TestAnswerForModel(t *testing.T) {
	s := shared(t)
	code := "print('HEAD-MARK')\nfor i in range(1200):\n    print('line %04d ' % i + 'x' * 40)\nprint('TAIL-MARK')\nimport sys\nprint('Traceback-ish warning', file=sys.stderr)\nraise SystemExit(3)\n"
	r, res := s.call(t, map[string]any{"language": "python", "code": code})
	if r.Status != contract.StatusError || r.ExitCode == nil || *r.ExitCode != 3 {
		t.Fatalf("status %s exit %v", r.Status, r.ExitCode)
	}
	budget := manifest.Default().Limits.AnswerChars
	if len([]rune(r.Stdout))+len([]rune(r.Stderr)) > budget+400 {
		t.Fatalf("the answer shows %d characters, the budget is %d", len(r.Stdout)+len(r.Stderr), budget)
	}
	uri := contract.StreamURI(r.RunID, contract.StreamStdout)
	if !r.StdoutTruncated || r.StdoutCut == nil || r.StdoutCut.URI != uri || r.StdoutCut.Bytes < 55000 ||
		!strings.HasPrefix(r.Stdout, "HEAD-MARK\n") || !strings.HasSuffix(r.Stdout, "TAIL-MARK\n") || !strings.Contains(r.Stdout, "all of it: "+uri) {
		t.Fatalf("stdout cut %+v, head %q, tail %q", r.StdoutCut, r.Stdout[:20], r.Stdout[len(r.Stdout)-20:])
	}
	if r.StderrTruncated || !strings.Contains(r.Stderr, "Traceback-ish warning") {
		t.Fatalf("stderr %q", r.Stderr)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if i, j := strings.Index(string(raw), `"error"`), strings.Index(string(raw), `"stdout":`); i < 0 || i > j {
		t.Fatalf("the error comes after stdout in the structured content")
	}
	text := res.Content[0].(mcp.TextContent).Text
	for _, want := range []string{"error · python · exit 3", "HEAD-MARK", "TAIL-MARK", "all of it: " + uri, "Traceback-ish warning"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q", want)
		}
	}
	// The whole stdout, as the box kept it.
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	got, err := s.c.ReadResource(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	whole := got.Contents[0].(mcp.TextResourceContents).Text
	if len(whole) < 55000 || !strings.Contains(whole, "line 0600 ") || !strings.HasSuffix(whole, "TAIL-MARK\n") {
		t.Fatalf("the resource has %d bytes", len(whole))
	}
	// A stream the answer showed whole has no resource, said clearly.
	req.Params.URI = contract.StreamURI(r.RunID, contract.StreamStderr)
	if _, err := s.c.ReadResource(context.Background(), req); err == nil || !strings.Contains(err.Error(), "showed all") {
		t.Fatalf("stderr's resource: %v", err)
	}
}

// TestContentOnlyClient: a client that reads structured content over
// content (Codex) is listed no output schema and answered with content
// alone, so it keeps images; its text still carries every fact.
func TestContentOnlyClient(t *testing.T) {
	c, err := client.NewStdioMCPClientWithOptions(runboxBin, secretEnv, []string{"serve"},
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			return cmd, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "codex-mcp-client", Version: "0.169.0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.RawOutputSchema != nil || tl.OutputSchema.Type != "" {
			t.Errorf("%s lists an output schema to a content-only client", tl.Name)
		}
		if tl.Name == tools.RunCodeName && (len(tl.Icons) == 0 || tl.Meta == nil || tl.Meta.AdditionalFields[tools.MaxResultSizeMeta] == nil) {
			t.Errorf("run_code lacks its icon or size hint: %+v", tl.Meta)
		}
	}
	res, err := c.CallTool(ctx, newCall(map[string]any{"language": "python",
		"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('plot.png')\nprint('plotted')\nprint(1/0)\n"}))
	if err != nil {
		t.Fatal(err)
	}
	if res.StructuredContent != nil {
		t.Fatal("structured content sent to a content-only client")
	}
	text := res.Content[0].(mcp.TextContent).Text
	for _, want := range []string{"error · python · exit 1", "error: runtime ZeroDivisionError at line 5", "hint: ", "plot.png (image/png", "plotted"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	images := 0
	for _, part := range res.Content {
		if im, ok := part.(mcp.ImageContent); ok && im.MIMEType == "image/png" {
			images++
		}
	}
	if images != 1 || !res.IsError {
		t.Fatalf("%d images, isError %v", images, res.IsError)
	}
}
