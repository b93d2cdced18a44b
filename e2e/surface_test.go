//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/sandbox"
)

const testToken = "e2e-token-6f1c"

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func writeManifest(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "runbox.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// netServer is `runbox serve` on http or sse.
type netServer struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
}

func startNetServer(t *testing.T, transport string, args ...string) *netServer {
	t.Helper()
	s := &netServer{addr: freeAddr(t), stderr: &syncBuffer{}}
	s.cmd = exec.Command(runboxBin, append([]string{"serve", "--transport", transport, "--listen", s.addr}, args...)...)
	s.cmd.Env = append(os.Environ(), "RUNBOX_AUTH_TOKEN="+testToken)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if resp, err := http.Get("http://" + s.addr + "/healthz"); err == nil {
			resp.Body.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not listen:\n%s", s.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *netServer) url(transport string) string {
	if transport == "sse" {
		return "http://" + s.addr + "/sse"
	}
	return "http://" + s.addr + "/mcp"
}

func (s *netServer) client(t *testing.T, tr string) *client.Client {
	t.Helper()
	return s.clientAs(t, tr, testToken, mcp.LATEST_PROTOCOL_VERSION)
}

// clientAs is a client of s on transport tr with a token, asking for a
// protocol version.
func (s *netServer) clientAs(t *testing.T, tr, token, version string) *client.Client {
	t.Helper()
	headers := map[string]string{"Authorization": "Bearer " + token}
	var c *client.Client
	var err error
	if tr == "sse" {
		c, err = client.NewSSEMCPClient(s.url(tr), client.WithHeaders(headers))
	} else {
		c, err = client.NewStreamableHttpClient(s.url(tr), transport.WithHTTPHeaders(headers))
	}
	if err != nil {
		t.Fatal(err)
	}
	// The SSE stream lives as long as Start's context: not a timeout's.
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start: %v\n%s", err, s.stderr)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := initializeAs(c, version); err != nil {
		t.Fatalf("initialize over %s: %v\n%s", tr, err, s.stderr)
	}
	return c
}

func callOn(t *testing.T, c *client.Client, args map[string]any) contract.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.CallTool(ctx, newCall(args))
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	r, err := decodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNetworkTransports(t *testing.T) {
	for _, tr := range []string{"http", "sse"} {
		t.Run(tr, func(t *testing.T) {
			s := startNetServer(t, tr)
			resp, err := http.Post(s.url(tr), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			if tr == "sse" {
				resp, err = http.Get(s.url(tr))
			}
			if err != nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("without a token: %v %v", resp.StatusCode, err)
			}
			resp.Body.Close()
			c := s.client(t, tr)
			r := callOn(t, c, map[string]any{"language": "python", "code": "print(6*7)"})
			mustOK(t, r)
			if r.Stdout != "42\n" {
				t.Fatalf("stdout %q", r.Stdout)
			}
			out, err := exec.Command("node", "ts/smoke.mjs", tr, s.url(tr), testToken).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "ts smoke (") {
				t.Fatalf("TypeScript client over %s: %v\n%s", tr, err, out)
			}
		})
	}
}

func TestManyClientsOneServerBoundedQueue(t *testing.T) {
	p := writeManifest(t, "concurrency: 1\nqueue_size: 1\n")
	s := startNetServer(t, "http", "--manifest", p)
	var wg sync.WaitGroup
	results := make([]contract.Result, 3)
	for i := range results {
		c := s.client(t, "http")
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 300 * time.Millisecond)
			results[i] = callOn(t, c, map[string]any{"language": "bash", "code": "sleep 2; echo done"})
		}(i)
	}
	wg.Wait()
	var ok, busy, queued int
	for _, r := range results {
		switch {
		case r.Status == contract.StatusOK:
			ok++
			if r.Metrics.QueueMs > 500 {
				queued++
			}
		case r.Error != nil && r.Error.Limit == contract.LimitBusy:
			busy++
		}
	}
	if ok != 2 || busy != 1 || queued != 1 {
		t.Fatalf("ok %d (queued %d), busy %d; want 2 (1 queued) and 1 busy: %+v", ok, queued, busy, results)
	}
}

func TestSessionBudgets(t *testing.T) {
	p := writeManifest(t, "budgets:\n  runs_per_minute: 2\n")
	s := startServer(t, nil, "--manifest", p)
	defer s.close()
	for i := 0; i < 2; i++ {
		r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo hi"})
		mustOK(t, r)
	}
	r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo hi"})
	e := wantError(t, r, contract.KindResourceLimit, contract.LimitBudget)
	if !strings.Contains(e.Hint, "Wait") {
		t.Fatalf("hint %q", e.Hint)
	}
}

func TestProgressNotifications(t *testing.T) {
	s := startServer(t, nil)
	defer s.close()
	var mu sync.Mutex
	var progress []mcp.JSONRPCNotification
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			progress = append(progress, n)
			mu.Unlock()
		}
	})
	req := newCall(map[string]any{"language": "bash", "code": "sleep 7; echo done"})
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := s.c.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) < 2 {
		t.Fatalf("%d progress notifications over a 7 s run; want one at least every 5 s\n%s", len(progress), s.stderr)
	}
	if tok := progress[0].Params.AdditionalFields["progressToken"]; tok != "tok-1" {
		t.Fatalf("progress token %v", tok)
	}
}

func TestResourcesAndPrompts(t *testing.T) {
	p := writeManifest(t, "artifacts:\n  ttl_seconds: 3\n")
	s := startServer(t, nil, "--manifest", p)
	defer s.close()
	ctx := context.Background()
	r, res := s.call(t, map[string]any{"language": "python", "code": "open('notes.txt','w').write('hello')\nopen('raw.bin','wb').write(bytes(range(256)))\n"})
	mustOK(t, r)
	links := 0
	for _, c := range res.Content {
		if _, ok := c.(mcp.ResourceLink); ok {
			links++
		}
	}
	if links != 2 {
		t.Fatalf("%d resource links, want 2: %+v", links, res.Content)
	}
	read := func(uri string) (*mcp.ReadResourceResult, error) {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		return s.c.ReadResource(ctx, req)
	}
	text, err := read(r.Artifacts[0].URI)
	if err != nil {
		t.Fatalf("read %s: %v", r.Artifacts[0].URI, err)
	}
	if tc, ok := text.Contents[0].(mcp.TextResourceContents); !ok || tc.Text != "hello" {
		t.Fatalf("text artifact: %+v", text.Contents)
	}
	bin, err := read(contract.ArtifactURI(r.RunID, "raw.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if bc, ok := bin.Contents[0].(mcp.BlobResourceContents); !ok || len(bc.Blob) != 344 {
		t.Fatalf("binary artifact: %+v", bin.Contents)
	}
	if _, err := read(contract.ArtifactURI("r_nope", "x")); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("unknown run: %v", err)
	}
	man, err := read("runbox://manifest")
	var declared struct {
		Network struct{ Allow []any } `json:"network"`
	}
	if err != nil || json.Unmarshal([]byte(man.Contents[0].(mcp.TextResourceContents).Text), &declared) != nil ||
		declared.Network.Allow == nil || len(declared.Network.Allow) != 0 {
		t.Fatalf("manifest resource (want network.allow: []): %v %+v", err, man)
	}
	time.Sleep(3500 * time.Millisecond)
	if _, err := read(r.Artifacts[0].URI); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("past the TTL: %v", err)
	}

	prompts, err := s.c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil || len(prompts.Prompts) != 2 {
		t.Fatalf("prompts: %v %+v", err, prompts)
	}
	failed, _ := s.call(t, map[string]any{"language": "python", "code": "x = {}\nprint(x['k'])\n"})
	raw, _ := json.Marshal(failed)
	get := mcp.GetPromptRequest{}
	get.Params.Name = "debug_failed_run"
	get.Params.Arguments = map[string]string{"result": string(raw)}
	got, err := s.c.GetPrompt(ctx, get)
	if err != nil {
		t.Fatal(err)
	}
	if txt := got.Messages[0].Content.(mcp.TextContent).Text; !strings.Contains(txt, `"runtime" (KeyError) at line 2`) {
		t.Fatalf("debug prompt:\n%s", txt)
	}
}

func TestCancellationFreesTheSlotWithinASecond(t *testing.T) {
	p := writeManifest(t, "concurrency: 1\n")
	s := startServer(t, nil, "--manifest", p)
	defer s.close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = s.callCtxRaw(ctx, map[string]any{"language": "bash", "code": "sleep 60", "timeout_seconds": 120})
	}()
	waitBox(t, "label="+sandbox.LabelOwnerPID+"="+fmt.Sprint(s.cmd.Process.Pid))
	cancel()
	start := time.Now()
	for len(boxes("label="+sandbox.LabelOwnerPID+"="+fmt.Sprint(s.cmd.Process.Pid), "status=running")) > 0 {
		// The program sleeps for 60 s: a box killed on cancellation is gone
		// long before, however slow the engine is today.
		if time.Since(start) > 15*time.Second {
			t.Fatal("the box still runs 15 s after the client cancelled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo next"})
	mustOK(t, r)
	if r.Metrics.QueueMs > 1000 {
		t.Fatalf("the next call waited %d ms for the slot", r.Metrics.QueueMs)
	}
}

func TestBadManifestStopsTheServer(t *testing.T) {
	p := writeManifest(t, "limits:\n  memory: 1MiB\n  timeout_seconds: 9999\n")
	out, err := exec.Command(runboxBin, "serve", "--manifest", p).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "limits.memory = 1MiB: from 16MiB to 64GiB") || !strings.Contains(string(out), "limits.timeout_seconds = 9999") {
		t.Fatalf("%v\n%s", err, out)
	}
	out, _ = exec.Command(runboxBin, "manifest", "schema").Output()
	var schema map[string]any
	if json.Unmarshal(out, &schema) != nil || schema["properties"] == nil {
		t.Fatalf("manifest schema: %s", out)
	}
}

// TestDescriptionReadFromImage: the agent is told what the image really
// has, read from it at start-up, not what the manifest guessed.
func TestDescriptionReadFromImage(t *testing.T) {
	s := shared(t)
	s.described(t, "python (Python 3.11.", "numpy 1.", "pandas 1.", "matplotlib 3.", "javascript (Node.js v18.", "bash (bash 5.")
}
