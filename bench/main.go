// Command bench measures runbox against baselines on the same machine, in
// the same run, on the same image, and prints a markdown table (and JSON
// with --json).
//
//	go run ./bench --server bin/runbox -n 30
//
// Scenarios: run_code print(1) through the real server over stdio with
// mcp-go's client, warm (pooled boxes) and cold; against `docker exec` into
// a running container and `docker run --rm` of the same program on the
// same image, with runbox's hardening flags and without. Then throughput
// at concurrency 8.
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
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
)

type row struct {
	Name        string  `json:"name"`
	Concurrency int     `json:"concurrency"`
	N           int     `json:"n"`
	P50Ms       float64 `json:"p50_ms"`
	P95Ms       float64 `json:"p95_ms"`
	P99Ms       float64 `json:"p99_ms"`
	RunsPerSec  float64 `json:"runs_per_sec"`
	Failure     string  `json:"failure,omitempty"`
}

func main() {
	server := flag.String("server", "bin/runbox", "the runbox binary")
	n := flag.Int("n", 30, "calls per scenario")
	asJSON := flag.Bool("json", false, "print JSON instead of a table")
	flag.Parse()
	image := manifest.DefaultImage
	warmManifest, err := os.CreateTemp("", "runbox-bench-*.yaml")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.Remove(warmManifest.Name())
	fmt.Fprintf(warmManifest, "pool:\n  size: 8\n  refill_concurrency: 2\nconcurrency: 8\n")
	warmManifest.Close()
	coldManifest := strings.Replace(warmManifest.Name(), ".yaml", "-cold.yaml", 1)
	_ = os.WriteFile(coldManifest, []byte("concurrency: 8\n"), 0o644)
	defer os.Remove(coldManifest)

	warm, closeWarm := runboxCaller(*server, warmManifest.Name())
	defer closeWarm()
	cold, closeCold := runboxCaller(*server, coldManifest)
	defer closeCold()
	exec1, stopExec := dockerExec(image)
	defer stopExec()
	time.Sleep(3 * time.Second) // let the pool fill
	rows := []row{
		measure("runbox warm (pooled box)", 1, *n, warm),
		measure("runbox cold (new box)", 1, *n, cold),
		measure("docker exec into a running container", 1, *n, exec1),
		measure("docker run --rm, runbox's hardening flags", 1, *n, dockerRun(image, true)),
		measure("docker run --rm, no flags", 1, *n, dockerRun(image, false)),
		measure("runbox warm (pooled box)", 8, 4**n, warm),
		measure("runbox cold (new box)", 8, 4**n, cold),
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rows)
		return
	}
	fmt.Printf("machine: %d CPUs, %s/%s, %s\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, engineVersion())
	fmt.Println("Program: python3 print(1) on " + image + ", every scenario measured in this run.")
	fmt.Println()
	fmt.Println("| scenario | concurrency | n | p50 ms | p95 ms | p99 ms | runs/s |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		if r.Failure != "" {
			fmt.Printf("| %s | %d | %d | failed: %s | | | |\n", r.Name, r.Concurrency, r.N, r.Failure)
			continue
		}
		fmt.Printf("| %s | %d | %d | %.0f | %.0f | %.0f | %.1f |\n", r.Name, r.Concurrency, r.N, r.P50Ms, r.P95Ms, r.P99Ms, r.RunsPerSec)
	}
}

// measure calls f once to warm up, then n times from c workers.
func measure(name string, c, n int, f func() error) row {
	r := row{Name: name, Concurrency: c, N: n}
	if err := f(); err != nil {
		r.Failure = err.Error()
		return r
	}
	var mu sync.Mutex
	var ms []float64
	var firstErr error
	jobs := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				t := time.Now()
				err := f()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				ms = append(ms, float64(time.Since(t).Microseconds())/1000)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		r.Failure = firstErr.Error()
		return r
	}
	slices.Sort(ms)
	r.P50Ms, r.P95Ms, r.P99Ms = pct(ms, 0.50), pct(ms, 0.95), pct(ms, 0.99)
	r.RunsPerSec = float64(n) / time.Since(start).Seconds()
	return r
}

func pct(sorted []float64, p float64) float64 {
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

// runboxCaller starts a server and returns a call of run_code print(1),
// and the server's close (which drains its pool).
func runboxCaller(bin, manifestPath string) (func() error, func()) {
	c, err := client.NewStdioMCPClientWithOptions(bin, nil, []string{"serve", "--manifest", manifestPath},
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			return cmd, nil
		}))
	if err != nil {
		return func() error { return err }, func() {}
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "runbox-bench", Version: "1"}
	if _, err := c.Initialize(context.Background(), init); err != nil {
		return func() error { return err }, func() { _ = c.Close() }
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
	}, func() { _ = c.Close() }
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

// dockerExec starts one hardened container and execs the program in it:
// the cheapest way to run code in an existing container, with no isolation
// between runs.
func dockerExec(image string) (func() error, func()) {
	out, err := exec.Command("docker", "run", "-d", "--rm", "--network", "none", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--read-only", "--user", "1000:1000", "--memory", "512m",
		"--label", "io.runbox.bench=true", image, "sleep", "infinity").Output()
	if err != nil {
		return func() error { return fmt.Errorf("docker run -d: %v", err) }, func() {}
	}
	id := strings.TrimSpace(string(out))
	return func() error {
			out, err := exec.Command("docker", "exec", id, "python3", "-c", "print(1)").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "1" {
				return fmt.Errorf("docker exec: %v: %s", err, out)
			}
			return nil
		}, func() {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
}

func engineVersion() string {
	out, err := exec.Command("docker", "version", "--format", "Docker engine {{.Server.Version}} (API {{.Server.APIVersion}})").Output()
	if err != nil {
		return "engine unknown"
	}
	return strings.TrimSpace(string(out))
}
