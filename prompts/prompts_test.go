package prompts

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
)

func TestGuideSaysTheManifestsLimits(t *testing.T) {
	m := manifest.Default()
	m.Limits.TimeoutSeconds = 7
	m.Limits.MaxTimeoutSeconds = 42
	g := GuideText(m)
	for _, want := range []string{"7s (timeout_seconds up to 42)", "No network", "numpy", "plt.savefig", "error.kind"} {
		if !strings.Contains(g, want) {
			t.Errorf("guide lacks %q", want)
		}
	}
}

func TestDebugText(t *testing.T) {
	m := manifest.Default()
	res := `{"run_id":"r_1","language":"python","status":"error","error":{"kind":"runtime","type":"KeyError","message":"'x'","line":4,"hint":"Fix KeyError raised on line 4 and run again."}}`
	text, err := DebugText(m, res, "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`error.kind is "runtime" (KeyError) at line 4: 'x'`, "at most 2 times", "After 2 failed attempts, stop"} {
		if !strings.Contains(text, want) {
			t.Errorf("debug prompt lacks %q:\n%s", want, text)
		}
	}
	for _, bad := range [][2]string{{"not json", ""}, {`{"status":"ok","error":null}`, ""}, {res, "0"}, {res, "x"}} {
		var argErr *ArgumentError
		if _, err := DebugText(m, bad[0], bad[1]); !errors.As(err, &argErr) || !errors.Is(err, mcp.ErrInvalidParams) {
			t.Errorf("%q %q: got %v, want an *ArgumentError (invalid params)", bad[0], bad[1], err)
		}
	}
}

// badPromptCalls are prompts/get calls with a missing or malformed
// argument, and what the error message must name.
var badPromptCalls = []struct {
	name string
	args map[string]string
	want string
}{
	{"no result", nil, `"result"`},
	{"empty result", map[string]string{"result": ""}, `"result"`},
	{"result not JSON", map[string]string{"result": "not json"}, `"result"`},
	{"result a JSON string", map[string]string{"result": `"x"`}, `"result"`},
	{"result not a run_code result", map[string]string{"result": `{"foo":1}`}, `"result"`},
	{"result with an unknown status", map[string]string{"result": `{"run_id":"r_1","status":"maybe"}`}, `"result"`},
	{"result of a failed run without error", map[string]string{"result": `{"run_id":"r_1","status":"error","error":null}`}, `"result"`},
	{"result of a successful run", map[string]string{"result": `{"run_id":"r_1","language":"python","status":"ok","error":null}`}, "succeeded"},
	{"max_attempts not a number", map[string]string{"result": failedResult, "max_attempts": "x"}, `"max_attempts"`},
	{"max_attempts out of range", map[string]string{"result": failedResult, "max_attempts": "0"}, `"max_attempts"`},
}

const failedResult = `{"run_id":"r_1","language":"python","status":"error","error":{"kind":"runtime","type":"KeyError","message":"'x'","line":4,"hint":"Fix KeyError raised on line 4 and run again."}}`

// TestBadArgumentsAreInvalidParams: a prompts/get the client got wrong
// fails with an error wrapping mcp.ErrInvalidParams that names the
// argument; the transports answer it -32602 (internal/mcpserver).
func TestBadArgumentsAreInvalidParams(t *testing.T) {
	h := Debug(manifest.Default()).Handler
	get := func(args map[string]string) (*mcp.GetPromptResult, error) {
		req := mcp.GetPromptRequest{}
		req.Params.Name = DebugName
		req.Params.Arguments = args
		return h(context.Background(), req)
	}
	for _, tc := range badPromptCalls {
		t.Run(tc.name, func(t *testing.T) {
			_, err := get(tc.args)
			if !errors.Is(err, mcp.ErrInvalidParams) {
				t.Fatalf("got %v, want an invalid params error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the message does not name %s: %v", tc.want, err)
			}
		})
	}
	if res, err := get(map[string]string{"result": failedResult}); err != nil || len(res.Messages) != 1 {
		t.Fatalf("a good call: %v %+v", err, res)
	}
}

func TestGuideListsEndpoints(t *testing.T) {
	m := manifest.Default()
	m.Network.Allow = []manifest.Endpoint{{Host: "api.example.com", Ports: []int{443}}}
	g := GuideText(m)
	if !strings.Contains(g, "5. The network reaches only these declared endpoints, over HTTP(S) through the proxy the environment names: api.example.com:443.") ||
		strings.Contains(g, "There is no network") {
		t.Fatalf("guide:\n%s", g)
	}
}

func TestGuideNamesTheIndex(t *testing.T) {
	m := manifest.Default()
	m.Network.Allow = []manifest.Endpoint{{Host: "pypi.example.com"}}
	m.Network.Index.Python = "https://pypi.example.com/simple/"
	if g := GuideText(m); !strings.Contains(g, "Any other host is refused: use only those. Packages can be installed from the declared package index only (pip install: already configured") {
		t.Fatalf("guide:\n%s", g)
	}
}

func TestGuideSaysWhenASessionPays(t *testing.T) {
	m := manifest.Default()
	text := GuideText(m)
	for _, want := range []string{"When a session pays", "session_open", "session_lost", "Not for a one-off computation"} {
		if !strings.Contains(text, want) {
			t.Errorf("the guide does not say %q", want)
		}
	}
	m.Sessions.Enabled = false
	if strings.Contains(GuideText(m), "session_open") {
		t.Error("the guide offers sessions the server does not keep")
	}
}

// The guide tells the agent how to use run_wait and run_cancel, with the
// manifest's bound, and says nothing of them when calls always wait.
func TestGuideSaysHowToWaitForALongRun(t *testing.T) {
	m := manifest.Default()
	m.Limits.AnswerWithinSeconds = 20
	text := GuideText(m)
	for _, want := range []string{"after 20s answers status \"running\"", "run_wait", "run_cancel", "background_runs"} {
		if !strings.Contains(text, want) {
			t.Errorf("the guide does not say %q:\n%s", want, text)
		}
	}
	m.Limits.AnswerWithinSeconds = 0
	if text := GuideText(m); strings.Contains(text, "run_wait") {
		t.Errorf("the guide offers run_wait the server does not serve:\n%s", text)
	}
}

// With servers, the guide shows the typed signatures code calls tools by,
// and the bad_request a wrong argument raises; without, it says nothing
// of tools.
func TestGuideShowsToolSignatures(t *testing.T) {
	m := manifest.Default()
	if strings.Contains(GuideText(m), "search_tools") {
		t.Fatal("the guide offers tools no server gives")
	}
	m.Servers = []manifest.Server{{Name: "math", Command: "math-server"}}
	text := GuideText(m)
	for _, want := range []string{`"language": "python"`, "tools.<server>.add(*, a: float, b: float) -> Any", "tools.<server>.add(args: { a: number; b: number }): Promise<unknown>", "ToolError kind bad_request before the call is sent"} {
		if !strings.Contains(text, want) {
			t.Errorf("the guide does not say %q:\n%s", want, text)
		}
	}
}
