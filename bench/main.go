// Command bench measures runbox against baselines on the same machine, in
// the same run, on the same image, and prints a markdown table (and JSON
// with --json).
//
//	go run ./bench --server bin/runbox -n 30
//
// Scenarios: run_code print(1) through the real server over stdio with
// mcp-go's client, against `docker run --rm` of the same program on the
// same image, with runbox's hardening flags and without.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
)

type row struct {
	Name    string  `json:"name"`
	N       int     `json:"n"`
	P50Ms   float64 `json:"p50_ms"`
	P95Ms   float64 `json:"p95_ms"`
	MeanMs  float64 `json:"mean_ms"`
	Failure string  `json:"failure,omitempty"`
}

func main() {
	server := flag.String("server", "bin/runbox", "the runbox binary")
	n := flag.Int("n", 30, "calls per scenario")
	asJSON := flag.Bool("json", false, "print JSON instead of a table")
	flag.Parse()
	image := manifest.DefaultImage
	rows := []row{
		measure("runbox run_code print(1), stdio (cold box)", *n, runboxCaller(*server)),
		measure("docker run --rm, runbox's hardening flags", *n, dockerRun(image, true)),
		measure("docker run --rm, no flags", *n, dockerRun(image, false)),
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rows)
		return
	}
	fmt.Printf("machine: %d CPUs, %s/%s, %s\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, engineVersion())
	fmt.Println("| scenario | n | p50 ms | p95 ms | mean ms |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		if r.Failure != "" {
			fmt.Printf("| %s | %d | failed: %s | | |\n", r.Name, r.N, r.Failure)
			continue
		}
		fmt.Printf("| %s | %d | %.0f | %.0f | %.0f |\n", r.Name, r.N, r.P50Ms, r.P95Ms, r.MeanMs)
	}
}

// measure calls f once to warm up, then n times.
func measure(name string, n int, f func() error) row {
	r := row{Name: name, N: n}
	if err := f(); err != nil {
		r.Failure = err.Error()
		return r
	}
	var ms []float64
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := f(); err != nil {
			r.Failure = err.Error()
			return r
		}
		ms = append(ms, float64(time.Since(start).Microseconds())/1000)
	}
	slices.Sort(ms)
	var sum float64
	for _, v := range ms {
		sum += v
	}
	r.P50Ms, r.P95Ms, r.MeanMs = pct(ms, 0.50), pct(ms, 0.95), sum/float64(len(ms))
	return r
}

func pct(sorted []float64, p float64) float64 {
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func runboxCaller(bin string) func() error {
	c, err := client.NewStdioMCPClientWithOptions(bin, nil, []string{"serve"},
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			return cmd, nil
		}))
	if err != nil {
		return func() error { return err }
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "runbox-bench", Version: "1"}
	if _, err := c.Initialize(context.Background(), init); err != nil {
		return func() error { return err }
	}
	return func() error {
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_code"
		req.Params.Arguments = map[string]any{"language": "python", "code": "print(1)"}
		res, err := c.CallTool(context.Background(), req)
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("run_code failed: %v", res.Content)
		}
		return nil
	}
}

func dockerRun(image string, hardened bool) func() error {
	args := []string{"run", "--rm", "-i"}
	if hardened {
		args = append(args, "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
			"--read-only", "--tmpfs", "/workspace:rw,nosuid,nodev,size=64m,nr_inodes=16384,uid=1000,gid=1000",
			"--tmpfs", "/tmp:rw,nosuid,nodev,size=64m,nr_inodes=16384,uid=1000,gid=1000", "--ipc", "none",
			"--user", "1000:1000", "--memory", "512m", "--memory-swap", "512m", "--cpus", "1", "--pids-limit", "128",
			"--ulimit", "nofile=1024:1024", "--ulimit", "core=0", "--log-driver", "none", "-w", "/workspace")
	}
	args = append(args, image, "python3", "-c", "print(1)")
	return func() error {
		out, err := exec.Command("docker", args...).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "1" {
			return fmt.Errorf("docker run: %v: %s", err, out)
		}
		return nil
	}
}

func engineVersion() string {
	out, err := exec.Command("docker", "version", "--format", "Docker engine {{.Server.Version}} (API {{.Server.APIVersion}})").Output()
	if err != nil {
		return "engine unknown"
	}
	return strings.TrimSpace(string(out))
}
