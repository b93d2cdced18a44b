// Command bench measures runbox against baselines on the same machine, in
// the same run, on the same image, and prints a markdown table (or JSON
// with --json).
//
//	go run ./bench --server bin/runbox -n 30
//
// Each program runs through the real server over stdio with mcp-go's
// client, warm (a pooled box) and cold (a new box), and through the
// baselines: `docker exec` into one running container (no isolation
// between runs) and `docker run --rm` with runbox's hardening flags. Warm
// calls are paced so the pool keeps up, as an agent's think time does; the
// pause is not counted. The machine's calibration comes first (a trivial
// `docker exec` and a fixed CPU loop), then a pool against no pool at
// paces of 0, 300 ms and 1 s (a pool must never make a call slower), an
// HTTPS GET of 1 MiB through the box's proxy against the same GET from
// the host (timed by the program itself), throughput at concurrency 8,
// gVisor's warm box against runc's, and 1 MiB of output as a client gets
// it (the call, whose answer shows limits.answer_output_chars of it, and a
// read of the stdout resource it names) with mcp-go's client and with the
// reference TypeScript SDK client (bench/ts, run by node from --ts-sdk)
// against `docker exec` printing the same. Each target is printed after
// the table with its ratio to its baseline of the same run. --busy N runs
// N CPU-bound loops beside it all: a loaded machine, on purpose.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/internal/procstat"
	"github.com/runbox-mcp/runbox/manifest"
)

// program is one workload, for runbox and for the baselines.
type program struct {
	name  string
	code  string // python
	stdin []byte // baselines get input files on stdin
	files []map[string]any
	check func(stdout []byte) bool
}

var oneMiB = bytes.Repeat([]byte("0123456789abcdef"), 1<<16)

var programs = []program{
	{name: "print(1)", code: "print(1)", check: func(b []byte) bool { return string(b) == "1\n" }},
	{name: "import pandas + small frame", code: "import pandas as pd\ndf = pd.DataFrame({'a': range(100)})\nprint(df.a.sum())",
		check: func(b []byte) bool { return string(b) == "4950\n" }},
	{name: "1 MiB of output", code: "import sys\nsys.stdout.write('x' * 1048576)",
		check: func(b []byte) bool { return len(b) == 1<<20 }},
	{name: "1 MiB input file round trip", code: "import shutil\nshutil.copy('in.bin', 'out.bin')",
		stdin: oneMiB,
		files: []map[string]any{{"path": "in.bin", "content": base64.StdEncoding.EncodeToString(oneMiB), "encoding": "base64"}}},
}

type row struct {
	Program     string  `json:"program"`
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
	n := flag.Int("n", 20, "calls per scenario")
	asJSON := flag.String("json", "", "also write the rows as JSON to this file")
	serverLog = flag.String("server-log", "", "append the runbox servers' logs (stderr) to this file")
	tsSDK = flag.String("ts-sdk", "e2e/ts", "a folder whose node_modules has the TypeScript SDK (npm ci there), for the large-output row with its client")
	only := flag.String("only", "", "run only this part: speed (calibration, paces, concurrency 8, gVisor, 1 MiB of output), one of speed's own (with the calibration: throughput, gvisor, output, tasks: a short run as an MCP task beside a plain call), toolcalls, network or sessions (with the pooled run they compare with), cells (a session cell against ping and a no-op tool call, cells/s, and where a cell's time goes), typescript (console.log(1) in TypeScript against JavaScript: a pooled one-off and a session cell), view (tools/call to the MCP Apps view painted in headless Chromium, against the call alone), or preview (a 10 MiB download through session_expose's URL against docker exec of curl in the box, on runc and gVisor)")
	viewHost := flag.String("view-host", "e2e/view", "the view's test host (npm ci there; Debian's chromium), for --only view")
	seconds := flag.Float64("seconds", 10, "how long each --only cells throughput row runs")
	cellsBackend := flag.String("backend", "docker", "the backend of the --only cells servers: docker or oci")
	busy := flag.Int("busy", 0, "run this many CPU-bound loops beside the bench (stopped by the bench)")
	flag.Parse()
	if *cellsBackend != "docker" && *cellsBackend != "oci" {
		fmt.Fprintln(os.Stderr, "bench: --backend takes docker or oci")
		os.Exit(2)
	}
	if *busy < 0 || *busy > 64 {
		fmt.Fprintln(os.Stderr, "bench: --busy takes 0 to 64")
		os.Exit(2)
	}
	loops, err := startBusy(*busy)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer loops.stop()
	removeBaselines(func(pid int) bool { return syscall.Kill(pid, 0) != nil })
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		loops.stop()
		removeBaselines(func(pid int) bool { return pid == os.Getpid() })
		os.Exit(130)
	}()
	fmt.Printf("load average at start: %s; busy loops beside the bench: %d\n\n", loadAvg(), *busy)
	defer func() { fmt.Printf("\nload average at the end: %s\n", loadAvg()) }()
	switch *only {
	case "":
	case "speed", "output", "throughput", "gvisor", "tasks":
		if err := speedOnly(*server, *n, *asJSON, *only); err != nil {
			loops.stop()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	case "toolcalls":
		rows, notes, err := toolCallBench(*server, *n)
		printRows(rows)
		fmt.Println()
		fmt.Println(strings.Join(notes, "\n"))
		if err != nil {
			loops.stop()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	case "network":
		dir, err := os.MkdirTemp("", "runbox-bench-")
		if err != nil {
			loops.stop()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		printRows(networkRows(*server, dir, max(*n, 30)))
		return
	case "cells":
		_, targets, err := cellsBench(*server, *cellsBackend, max(*n, 60), *seconds)
		printTargets(targets)
		if err != nil {
			loops.stop()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	case "view":
		if err := viewBench(*server, *viewHost, max(*n, 5)); err != nil {
			loops.stop()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	case "preview":
		if err := previewBench(*server, max(*n, 5)); err != nil {
			loops.stop()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	case "typescript":
		if err := typeScriptBench(*server, *n, *asJSON); err != nil {
			loops.stop()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	case "sessions":
		if err := benchSessionsOnly(*server, *n, *asJSON); err != nil {
			loops.stop()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	default:
		loops.stop()
		fmt.Fprintf(os.Stderr, "bench: --only takes speed, throughput, gvisor, output, tasks, toolcalls, network, sessions, cells, typescript, view or preview, not %q\n", *only)
		os.Exit(2)
	}
	if err := bench(*server, *n, *asJSON); err != nil {
		loops.stop()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func bench(bin string, n int, jsonPath string) error {
	image := manifest.DefaultImage
	dir, err := os.MkdirTemp("", "runbox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	limits := "limits:\n  max_output_bytes: 4MiB\n"
	warmM, coldM := dir+"/warm.yaml", dir+"/cold.yaml"
	_ = os.WriteFile(warmM, []byte(limits+"pool:\n  size: 4\n  refill_concurrency: 2\nconcurrency: 8\n"), 0o644)
	_ = os.WriteFile(coldM, []byte(limits+"concurrency: 8\n"), 0o644)

	warm, err := startRunbox(bin, warmM)
	if err != nil {
		return err
	}
	defer warm.Close()
	cold, err := startRunbox(bin, coldM)
	if err != nil {
		return err
	}
	defer cold.Close()
	ctr, err := startContainer(image)
	if err != nil {
		return err
	}
	defer exec.Command("docker", "rm", "-f", ctr).Run()
	time.Sleep(3 * time.Second) // let the pool fill

	sp := speed{bin: bin, dir: dir, image: image, ctr: ctr, n: n, sdk: *tsSDK}
	rows := calibrationRows(ctr, max(n, 20))
	for _, p := range programs {
		p := p
		rows = append(rows,
			measure(p.name, "runbox warm (pooled box)", 1, n, 400*time.Millisecond, func() error { return callRunbox(warm, p) }),
			measure(p.name, "runbox cold (new box)", 1, n, 0, func() error { return callRunbox(cold, p) }),
			measure(p.name, "docker exec into a running container", 1, n, 0, func() error { return dockerCmd(p, "exec", "-i", ctr) }),
			measure(p.name, "docker run --rm, runbox's hardening", 1, n, 0, func() error { return dockerCmd(p, hardenedRun(image)...) }),
		)
	}
	var targets []target
	for _, part := range []func() ([]row, []target, error){sp.output, sp.paces, sp.gvisor} {
		r, t, err := part()
		if err != nil {
			return err
		}
		rows, targets = append(rows, r...), append(targets, t...)
	}
	srows, err := sessionBench(bin, n)
	if err != nil {
		return err
	}
	rows = append(rows, srows...)
	rows = append(rows, networkRows(bin, dir, max(n, 30))...)
	r, t, err := sp.throughput()
	if err != nil {
		return err
	}
	rows, targets = append(rows, r...), append(targets, t...)

	toolRows, toolNotes, err := toolCallBench(bin, n)
	if err != nil {
		toolNotes = append(toolNotes, "tool calls: "+err.Error())
	}
	rows = append(rows, toolRows...)

	if err := report(rows, image, jsonPath); err != nil {
		return err
	}
	fmt.Println()
	fmt.Println(strings.Join(toolNotes, "\n"))
	fmt.Println()
	printTargets(targets)
	return nil
}

// speedOnly runs the speed part alone (`--only speed`).
func speedOnly(bin string, n int, jsonPath, part string) error {
	image := manifest.DefaultImage
	dir, err := os.MkdirTemp("", "runbox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctr, err := startContainer(image)
	if err != nil {
		return err
	}
	defer exec.Command("docker", "rm", "-f", ctr).Run()
	rows, targets, err := speed{bin: bin, dir: dir, image: image, ctr: ctr, n: n, sdk: *tsSDK}.run(part)
	if rerr := report(rows, image, jsonPath); rerr != nil && err == nil {
		err = rerr
	}
	fmt.Println()
	printTargets(targets)
	return err
}

// report prints the machine, the image and the rows, and writes the rows
// as JSON to jsonPath when it is set.
func report(rows []row, image, jsonPath string) error {
	fmt.Printf("machine: %d CPUs, %s/%s, %s; image %s\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, engineVersion(), image)
	printRows(rows)
	if jsonPath != "" {
		b, _ := json.MarshalIndent(rows, "", "  ")
		return os.WriteFile(jsonPath, b, 0o644)
	}
	return nil
}

// measure calls f once to warm up, then n times from c workers, pausing
// pace after each call (not counted).
func measure(prog, name string, c, n int, pace time.Duration, f func() error) row {
	return interleave(prog, c, n, 1, pace, scenario{name, f})[0]
}

// scenario is one way to run a program: a row's name and one call.
type scenario struct {
	name string
	call func() error
}

// interleave measures the scenarios in turns: each makes n calls from c
// workers, n/turns at a time, one scenario after the other, in the
// opposite order on every other turn. The speed of this machine drifts by
// ±15% over minutes; taken in turns, rows compared with each other are
// measured through the same drift. Each scenario warms up with one call
// first.
func interleave(prog string, c, n, turns int, pace time.Duration, scs ...scenario) []row {
	type tally struct {
		ms    []float64
		busy  time.Duration
		cpu   int64 // the host's, in jiffies
		wall  time.Duration
		procs map[string]int64
		err   error
	}
	ts := make([]tally, len(scs))
	for i, sc := range scs {
		ts[i].procs = map[string]int64{}
		ts[i].err = sc.call()
	}
	time.Sleep(pace)
	for turn := range turns {
		k := n*(turn+1)/turns - n*turn/turns
		for j := range scs {
			i := j
			if turn%2 == 1 {
				i = len(scs) - 1 - j
			}
			t := &ts[i]
			if t.err != nil {
				continue
			}
			cpu0, wall0, procs0 := hostBusy(), time.Now(), procCPU()
			ms, busy, err := batch(c, k, pace, scs[i].call)
			t.cpu += hostBusy() - cpu0
			t.wall += time.Since(wall0)
			for name, v := range procCPU() {
				t.procs[name] += v - procs0[name]
			}
			t.ms, t.busy, t.err = append(t.ms, ms...), t.busy+busy, err
		}
	}
	rows := make([]row, len(scs))
	for i, t := range ts {
		r := row{Program: prog, Name: scs[i].name, Concurrency: c, N: n}
		if t.err != nil {
			r.Failure = t.err.Error()
			rows[i] = r
			continue
		}
		// Concurrent rows are bound by the host's CPU: what a run costs
		// it says more than runs/s, and where it goes (the engine's
		// daemons, runbox; the rest is the shims, runc, the box and the
		// kernel).
		if c > 1 {
			fmt.Fprintf(os.Stderr, "bench: %s, %s: host CPU %.1f ms a run (%.2f cores busy); dockerd %.1f, containerd %.1f, runbox %.1f\n",
				prog, scs[i].name, float64(t.cpu)*10/float64(n), float64(t.cpu)/100/t.wall.Seconds(),
				float64(t.procs["dockerd"])*10/float64(n), float64(t.procs["containerd"])*10/float64(n), float64(t.procs["runbox"])*10/float64(n))
		}
		r = rowOf(r, t.ms)
		// Throughput counts call time only, not the pacing.
		r.RunsPerSec = float64(n) / (t.busy.Seconds() / float64(c))
		rows[i] = r
	}
	return rows
}

// batch calls f n times from c workers, pausing pace after each call: the
// calls' times in ms, their sum and the first error.
func batch(c, n int, pace time.Duration, f func() error) ([]float64, time.Duration, error) {
	var mu sync.Mutex
	var ms []float64
	var firstErr error
	var busy time.Duration
	jobs := make(chan struct{}, n)
	for range n {
		jobs <- struct{}{}
	}
	close(jobs)
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			for range jobs {
				t := time.Now()
				err := f()
				d := time.Since(t)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				ms = append(ms, float64(d.Microseconds())/1000)
				busy += d
				mu.Unlock()
				time.Sleep(pace)
			}
		})
	}
	wg.Wait()
	return ms, busy, firstErr
}

// rowOf fills r's percentiles from the calls' times in ms, and its runs
// per second as one caller makes them.
func rowOf(r row, ms []float64) row {
	if len(ms) == 0 {
		r.Failure = "no calls"
		return r
	}
	slices.Sort(ms)
	r.P50Ms, r.P95Ms, r.P99Ms = pct(ms, 0.50), pct(ms, 0.95), pct(ms, 0.99)
	var sum float64
	for _, m := range ms {
		sum += m
	}
	r.RunsPerSec = float64(len(ms)) / (sum / 1000)
	return r
}

func printRows(rows []row) {
	fmt.Println("| program | scenario | concurrency | n | p50 ms | p95 ms | p99 ms | runs/s |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		if r.Failure != "" {
			fmt.Printf("| %s | %s | %d | %d | failed: %s | | | |\n", r.Program, r.Name, r.Concurrency, r.N, r.Failure)
			continue
		}
		fmt.Printf("| %s | %s | %d | %d | %.2f | %.2f | %.2f | %.1f |\n", r.Program, r.Name, r.Concurrency, r.N, r.P50Ms, r.P95Ms, r.P99Ms, r.RunsPerSec)
	}
}

func pct(sorted []float64, p float64) float64 {
	return sorted[int(float64(len(sorted)-1)*p)]
}

// serverLog is where the servers' stderr goes (nowhere when empty).
var serverLog = new(string)

// tsSDK is where the TypeScript SDK client's node_modules are.
var tsSDK = new(string)

func startRunbox(bin, manifestPath string) (*client.Client, error) {
	c, err := client.NewStdioMCPClientWithOptions(bin, nil, []string{"serve", "--manifest", manifestPath},
		transport.WithCommandFunc(func(ctx context.Context, command string, env, args []string) (*exec.Cmd, error) {
			cmd := exec.Command(command, args...)
			cmd.Env = append(os.Environ(), env...)
			if *serverLog != "" {
				if f, err := os.OpenFile(*serverLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
					cmd.Stderr = f
				}
			}
			return cmd, nil
		}))
	if err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "runbox-bench", Version: "1"}
	if _, err := c.Initialize(context.Background(), init); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func callRunbox(c *client.Client, p program) error {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_code"
	args := map[string]any{"language": "python", "code": p.code}
	if p.files != nil {
		args["files"] = p.files
	}
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		return err
	}
	var sc struct {
		Status    string
		Stdout    string
		StdoutCut *struct {
			URI string
		} `json:"stdout_cut"`
		Artifacts []struct {
			SizeBytes int `json:"size_bytes"`
		}
	}
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &sc)
	if !res.IsError && sc.StdoutCut != nil && sc.StdoutCut.URI != "" {
		// The answer shows limits.answer_output_chars of the output: a
		// client that wants all of it reads its resource, and that is
		// timed too.
		if sc.Stdout, err = readText(c, sc.StdoutCut.URI); err != nil {
			return err
		}
	}
	switch {
	case res.IsError:
		return fmt.Errorf("run_code failed: %s", raw[:min(len(raw), 300)])
	case p.files != nil && (len(sc.Artifacts) != 1 || sc.Artifacts[0].SizeBytes != len(oneMiB)):
		return fmt.Errorf("round trip: %s", raw[:min(len(raw), 300)])
	case p.check != nil && !p.check([]byte(sc.Stdout)):
		return fmt.Errorf("unexpected stdout (%d bytes): %s", len(sc.Stdout), raw[:min(len(raw), 600)])
	}
	return nil
}

// readText reads a text resource whole.
func readText(c *client.Client, uri string) (string, error) {
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := c.ReadResource(context.Background(), req)
	if err != nil {
		return "", fmt.Errorf("resources/read %s: %w", uri, err)
	}
	if len(res.Contents) != 1 {
		return "", fmt.Errorf("resources/read %s: %d contents", uri, len(res.Contents))
	}
	t, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		return "", fmt.Errorf("resources/read %s: not text", uri)
	}
	return t.Text, nil
}

func hardenedRun(image string) []string {
	return []string{"run", "--rm", "-i", "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--read-only", "--tmpfs", "/workspace:rw,nosuid,nodev,size=64m,nr_inodes=16384,uid=1000,gid=1000",
		"--tmpfs", "/tmp:rw,nosuid,nodev,size=64m,nr_inodes=16384,uid=1000,gid=1000", "--ipc", "none",
		"--user", "1000:1000", "--memory", "512m", "--memory-swap", "512m", "--cpus", "1", "--pids-limit", "128",
		"--ulimit", "nofile=1024:1024", "--ulimit", "core=0", "--log-driver", "none", "-w", "/workspace", image}
}

// dockerCmd runs a program through the docker CLI: input files go in on
// stdin and come back on stdout.
func dockerCmd(p program, prefix ...string) error {
	args := append(append([]string{}, prefix...), "python3", "-c", p.code)
	if p.stdin != nil {
		args = append(append([]string{}, prefix...), "sh", "-c", "cat > /tmp/in.bin && cat /tmp/in.bin")
	}
	cmd := exec.Command("docker", args...)
	cmd.Stdin = bytes.NewReader(p.stdin)
	out, err := cmd.Output()
	switch {
	case err != nil:
		return fmt.Errorf("docker %s: %v", prefix[0], err)
	case p.stdin != nil && len(out) != len(p.stdin):
		return fmt.Errorf("round trip: %d bytes back", len(out))
	case p.stdin == nil && p.check != nil && !p.check(out):
		return fmt.Errorf("unexpected stdout (%d bytes)", len(out))
	}
	return nil
}

// labelBench marks a baseline container with the pid of the bench that
// started it: a bench stopped before its own removal (killed) leaves one
// running `sleep infinity`, which the next bench removes.
const labelBench = "io.runbox.bench.pid"

// removeBaselines removes the baseline containers of the benches whose pid
// gone says are gone.
func removeBaselines(gone func(pid int) bool) {
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+labelBench).Output()
	if err != nil {
		return
	}
	for _, id := range strings.Fields(string(out)) {
		v, _ := exec.Command("docker", "inspect", "--format", "{{index .Config.Labels \""+labelBench+"\"}}", id).Output()
		if pid, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil && gone(pid) {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
	}
}

func startContainer(image string) (string, error) {
	args := append([]string{}, "run", "-d", "--rm", "--label", labelBench+"="+strconv.Itoa(os.Getpid()), "--network", "none", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--read-only", "--tmpfs", "/tmp:rw,size=64m", "--user", "1000:1000",
		"--memory", "512m", "-w", "/tmp", image, "sleep", "infinity")
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		return "", fmt.Errorf("docker run -d: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// withoutPidsLimit drops --pids-limit, which this host's runsc cannot take
// (runbox enforces RLIMIT_NPROC in the box instead).
func withoutPidsLimit(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		if args[i] == "--pids-limit" {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// runscWorks says whether the engine can start a box under gVisor.
func runscWorks(image string) bool {
	return exec.Command("docker", "run", "--rm", "--runtime", "runsc", "--network", "none", image, "true").Run() == nil
}

func engineVersion() string {
	out, err := exec.Command("docker", "version", "--format", "Docker engine {{.Server.Version}} (API {{.Server.APIVersion}})").Output()
	if err != nil {
		return "engine unknown"
	}
	return strings.TrimSpace(string(out))
}

// hostBusy is the host's busy CPU time in jiffies (USER_HZ, 1/100 s on
// Linux), from /proc/stat.
func hostBusy() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy
}

// procCPU is the CPU time in jiffies of the long-lived processes a run
// goes through, by name.
func procCPU() map[string]int64 {
	out := map[string]int64{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := procstat.Read(pid)
		switch {
		case !ok:
		case st.Comm == "dockerd", st.Comm == "containerd", st.Comm == "runbox":
			ut, _ := strconv.ParseInt(st.Field(14), 10, 64)
			sys, _ := strconv.ParseInt(st.Field(15), 10, 64)
			out[st.Comm] += ut + sys
		}
	}
	return out
}
