package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
)

// bigFrame makes a 100 MB frame (1.25 M rows of 10 float64 columns).
const bigFrame = "import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.default_rng(0).random((1_250_000, 10)))\n"

// sessionRows measure a call in a live session against a pooled one-off
// run, in the same run: print(1), and df.describe() on a 100 MB frame built
// once in the session against building it in every run.
func sessionRows(c *client.Client, n int) ([]row, error) {
	id, err := openSession(c)
	if err != nil {
		return nil, err
	}
	defer closeSession(c, id)
	print1 := programs[0]
	rows := []row{
		measure(print1.name, "runbox session: a call in a live session", 1, max(n, 50), 0, func() error {
			return callSession(c, id, "print(1)", "1\n")
		}),
		measure(print1.name, "runbox warm (pooled box), same run", 1, n, 400*time.Millisecond, func() error { return callRunbox(c, print1) }),
	}
	if err := callSession(c, id, bigFrame+"len(df)", "1250000\n"); err != nil {
		return nil, err
	}
	describe := "df.describe().shape"
	rows = append(rows,
		measure("df.describe(), 100 MB frame", "runbox session: frame loaded once", 1, max(n/4, 5), 0, func() error {
			return callSession(c, id, describe, "(8, 10)\n")
		}),
		measure("df.describe(), 100 MB frame", "runbox warm: frame built in every run", 1, max(n/4, 5), 400*time.Millisecond, func() error {
			return callRunbox(c, program{name: "describe", code: bigFrame + "print(" + describe + ")", check: func(b []byte) bool { return string(b) == "(8, 10)\n" }})
		}),
	)
	if s, o := rows[2], rows[3]; s.Failure == "" && o.Failure == "" && s.P50Ms > 0 {
		fmt.Fprintf(os.Stderr, "bench: df.describe() on a 100 MB frame: a session is %.1fx faster than building it in every run (p50 %.0f ms vs %.0f ms)\n", o.P50Ms/s.P50Ms, s.P50Ms, o.P50Ms)
	}
	return rows, nil
}

// benchSessionsOnly is the session rows alone, with the pooled server
// they compare with.
func benchSessionsOnly(bin string, n int, jsonPath string) error {
	dir, err := os.MkdirTemp("", "runbox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	m := dir + "/warm.yaml"
	_ = os.WriteFile(m, []byte("limits:\n  max_output_bytes: 4MiB\npool:\n  size: 2\n"), 0o644)
	c, err := startRunbox(bin, m)
	if err != nil {
		return err
	}
	defer c.Close()
	time.Sleep(8 * time.Second) // the pool fills and its preloads finish
	rows, err := sessionRows(c, n)
	if err != nil {
		return err
	}
	return report(rows, manifest.DefaultImage, jsonPath)
}

func tool(c *client.Client, name string, args map[string]any) (map[string]any, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if res.IsError {
		return nil, fmt.Errorf("%s failed: %s", name, raw[:min(len(raw), 300)])
	}
	return out, nil
}

func openSession(c *client.Client) (string, error) {
	out, err := tool(c, "session_open", map[string]any{"language": "python"})
	if err != nil {
		return "", err
	}
	s, _ := out["session"].(map[string]any)
	id, _ := s["session_id"].(string)
	if id == "" {
		return "", fmt.Errorf("session_open answered no id: %v", out)
	}
	return id, nil
}

func closeSession(c *client.Client, id string) {
	_, _ = tool(c, "session_close", map[string]any{"session_id": id})
}

func callSession(c *client.Client, id, code, want string) error {
	out, err := tool(c, "run_code", map[string]any{"language": "python", "code": code, "session_id": id})
	if err != nil {
		return err
	}
	if got, _ := out["stdout"].(string); got != want {
		return fmt.Errorf("unexpected stdout %q", got)
	}
	return nil
}
