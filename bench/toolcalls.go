package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// toolCallBench measures the code's tool calls against the same upstream
// called directly, in the same run: e2e/upstreamfake over stdio.
//
//   - A tool call's added latency: the p50 of `echo` timed inside a box
//     (Python, through runbox_tools, runbox-init and the channel) minus
//     the p50 of `echo` called directly with mcp-go's client.
//   - A three-tool workflow (1 MiB from `big`, `echo` of a summary, `pid`)
//     as one run_code against three direct calls: the bytes of the results
//     that reach the client and the wall time.
func toolCallBench(bin string, n int) ([]row, []string, error) {
	dir, err := os.MkdirTemp("", "runbox-bench-tools-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	fake := filepath.Join(dir, "upstreamfake")
	if out, err := exec.Command("go", "build", "-o", fake, "./e2e/upstreamfake").CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("building upstreamfake: %v\n%s", err, out)
	}
	m := filepath.Join(dir, "tools.yaml")
	_ = os.WriteFile(m, []byte("limits:\n  max_output_bytes: 4MiB\npool:\n  size: 1\nservers:\n  - name: fake\n    command: "+fake+"\ntool_calls:\n  max_calls: 100000\n"), 0o644)
	rb, err := startRunbox(bin, m)
	if err != nil {
		return nil, nil, err
	}
	defer rb.Close()
	direct, err := client.NewStdioMCPClient(fake, nil)
	if err != nil {
		return nil, nil, err
	}
	defer direct.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "runbox-bench", Version: "1"}
	if _, err := direct.Initialize(context.Background(), init); err != nil {
		return nil, nil, err
	}
	callDirect := func(name string, args map[string]any) (int, error) {
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := direct.CallTool(context.Background(), req)
		if err != nil {
			return 0, err
		}
		b, _ := json.Marshal(res)
		return len(b), nil
	}
	time.Sleep(3 * time.Second) // the pool fills

	calls := max(200, 10*n)
	var rows []row
	d := measure("echo tool call", "upstream called directly (mcp-go client, stdio)", 1, calls, 0, func() error {
		_, err := callDirect("echo", map[string]any{"text": "hi"})
		return err
	})
	rows = append(rows, d)
	// Timed inside the box, one run for all the calls: the box's start is
	// not a tool call's cost.
	code := fmt.Sprintf(`import json, time
import runbox_tools as tools
tools.fake.echo(text="warm")
ms = []
for _ in range(%d):
    t = time.perf_counter_ns()
    tools.fake.echo(text="hi")
    ms.append((time.perf_counter_ns() - t) / 1e6)
print(json.dumps(ms))
`, calls)
	sc, _, err := runCode(rb, code)
	box := row{Program: "echo tool call", Name: "from a box through runbox (Python runbox_tools)", Concurrency: 1, N: calls}
	var ms []float64
	if err == nil {
		err = json.Unmarshal([]byte(sc.Stdout), &ms)
	}
	if err != nil {
		box.Failure = err.Error()
	} else {
		slices.Sort(ms)
		box.P50Ms, box.P95Ms, box.P99Ms = pct(ms, 0.5), pct(ms, 0.95), pct(ms, 0.99)
		var total float64
		for _, x := range ms {
			total += x
		}
		box.RunsPerSec = float64(len(ms)) / (total / 1000)
	}
	rows = append(rows, box)
	var notes []string
	if d.Failure == "" && box.Failure == "" {
		notes = append(notes, fmt.Sprintf("A tool call from a box adds %.2f ms p50 to the upstream's own %.2f ms (target < 2 ms).", box.P50Ms-d.P50Ms, d.P50Ms))
	}

	// The workflow, n times each way.
	workflow := `import runbox_tools as tools
data = tools.fake.big(mb=1)
tools.fake.echo(text="%d bytes, starts %s" % (len(data), data[:8]))
print("read", len(data), "bytes; server", tools.fake.pid())
`
	var inBytes, outBytes int
	var inMs, outMs []float64
	for range max(5, n/2) {
		t := time.Now()
		total := 0
		for _, c := range []struct {
			name string
			args map[string]any
		}{{"big", map[string]any{"mb": 1}}, {"echo", map[string]any{"text": "1048576 bytes, starts xxxxxxxx"}}, {"pid", nil}} {
			b, err := callDirect(c.name, c.args)
			if err != nil {
				return rows, notes, err
			}
			total += b
		}
		outMs = append(outMs, float64(time.Since(t).Microseconds())/1000)
		outBytes = total
		t = time.Now()
		sc, b, err := runCode(rb, workflow)
		if err != nil {
			return rows, notes, err
		}
		if !strings.HasPrefix(sc.Stdout, "read 1048576 bytes") {
			return rows, notes, fmt.Errorf("workflow stdout %q", sc.Stdout)
		}
		inMs = append(inMs, float64(time.Since(t).Microseconds())/1000)
		inBytes = b
	}
	slices.Sort(inMs)
	slices.Sort(outMs)
	notes = append(notes,
		"",
		"| three-tool workflow (1 MiB read, a summary echoed, the server's pid) | bytes reaching the client | wall ms p50 |",
		"| --- | ---: | ---: |",
		fmt.Sprintf("| three direct tool calls | %d | %.0f |", outBytes, pct(outMs, 0.5)),
		fmt.Sprintf("| one run_code calling the three (a box per run, pool.size 1) | %d | %.0f |", inBytes, pct(inMs, 0.5)),
		fmt.Sprintf("| ratio (direct / run_code) | %.0fx | %.2fx |", float64(outBytes)/float64(inBytes), pct(outMs, 0.5)/pct(inMs, 0.5)),
	)
	return rows, notes, nil
}

type codeResult struct {
	Status string `json:"status"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// runCode runs Python code and returns its result and the size of the
// whole answer as it reached the client.
func runCode(c *client.Client, code string) (codeResult, int, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	req.Params.Arguments = map[string]any{"language": "python", "code": code, "timeout_seconds": 120}
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		return codeResult{}, 0, err
	}
	raw, _ := json.Marshal(res)
	var sc codeResult
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &sc)
	if res.IsError {
		return sc, len(raw), fmt.Errorf("run_code failed: %.300s", b)
	}
	return sc, len(raw), nil
}
