package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// The speed rows, which measure the claims of speed: the machine's
// calibration, a pool against no pool at three paces, throughput at
// concurrency 8 against `docker run`, and gVisor's warm box against runc's,
// each with its baseline from the same run, and a line per target with the
// ratio.

// paces are the think times between calls the pool rows are measured at:
// none (a script's loop), a quick agent, a thinking one.
var paces = []time.Duration{0, 300 * time.Millisecond, time.Second}

// target is one of the targets, judged on rows of the same run.
type target struct {
	what    string
	ratio   float64
	limit   float64 // holds when ratio <= limit (>= when atLeast)
	atLeast bool
	detail  string
}

// noise is how far apart two p50s of 20 calls taking the same path were
// seen to be in one run on a loaded machine: a ratio past the limit by
// less is reported as such, not as a miss.
const noise = 1.05

func (t target) String() string {
	verdict, bound := "holds", "at most"
	if t.atLeast {
		bound = "at least"
	}
	switch {
	case t.ratio == 0 || (t.atLeast && t.ratio < t.limit) || (!t.atLeast && t.ratio > t.limit*noise):
		verdict = "**misses**"
	case !t.atLeast && t.ratio > t.limit:
		verdict = "within the noise (5%)"
	}
	return fmt.Sprintf("| %s | %s | %.2f× (%s %.1f×) | %s |", t.what, t.detail, t.ratio, bound, t.limit, verdict)
}

func printTargets(ts []target) {
	if len(ts) == 0 {
		return
	}
	fmt.Println("| target | measured (same run) | ratio | |")
	fmt.Println("| --- | --- | ---: | --- |")
	for _, t := range ts {
		fmt.Println(t)
	}
}

// calibrationRows say how fast this machine is today: a trivial `docker
// exec` (the engine's round trip) and a fixed CPU loop (the CPU the bench
// gets), so rows from different days compare as ratios.
func calibrationRows(ctr string, n int) []row {
	return []row{
		measure("calibration", "docker exec of `true` into a running container", 1, n, 0, func() error {
			return exec.Command("docker", "exec", ctr, "true").Run()
		}),
		measure("calibration", "CPU loop: 50 M xorshift steps in the bench process", 1, n, 0, func() error {
			if cpuLoop(50_000_000) == 0 {
				return fmt.Errorf("cpu loop") // never: keeps the loop from being optimised away
			}
			return nil
		}),
	}
}

func cpuLoop(steps int) uint64 {
	x := uint64(88172645463325252)
	for i := 0; i < steps; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// paceRows measure print(1) through a pool of 2 (preloading, as
// configured by default) and through no pool, at each pace, in blocks
// that alternate so that a change of the machine's load hits both. The
// pool is given time to fill and finish its preloads before each block.
func paceRows(pooled, cold *client.Client, n int) ([]row, []target) {
	print1 := programs[0]
	var rows []row
	var ts []target
	for _, pace := range paces {
		time.Sleep(6 * time.Second)
		name := fmt.Sprintf("paced %s: runbox, pool.size 2", paceName(pace))
		p := measure(print1.name, name, 1, n, pace, func() error { return callRunbox(pooled, print1) })
		c := measure(print1.name, fmt.Sprintf("paced %s: runbox cold (no pool)", paceName(pace)), 1, n, pace, func() error { return callRunbox(cold, print1) })
		rows = append(rows, p, c)
		ts = append(ts, target{what: fmt.Sprintf("a pool never makes a call slower, paced %s (p50)", paceName(pace)),
			ratio: ratio(p.P50Ms, c.P50Ms), limit: 1,
			detail: fmt.Sprintf("pool %.0f ms, no pool %.0f ms (p95 %.0f against %.0f)", p.P50Ms, c.P50Ms, p.P95Ms, c.P95Ms)})
	}
	return rows, ts
}

func paceName(d time.Duration) string {
	if d == 0 {
		return "0 ms (back to back)"
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// ratio is a/b, 0 when either is unknown.
func ratio(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a / b
}

// busyLoops are N CPU-bound processes beside the bench (`--busy N`): a
// loaded machine, made on purpose. The bench stops them itself, on its
// way out and on SIGINT/SIGTERM.
type busyLoops struct{ cmds []*exec.Cmd }

func startBusy(n int) (*busyLoops, error) {
	b := &busyLoops{}
	for i := 0; i < n; i++ {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		// Its own process group: a ^C to the bench is handled by the
		// bench, which then stops the loops.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			b.stop()
			return nil, fmt.Errorf("busy loop: %w", err)
		}
		b.cmds = append(b.cmds, cmd)
	}
	return b, nil
}

func (b *busyLoops) stop() {
	if b == nil {
		return
	}
	for _, c := range b.cmds {
		_ = c.Process.Kill()
		_, _ = c.Process.Wait()
	}
	b.cmds = nil
}

// loadAvg is the machine's load average as /proc/loadavg gives it (1, 5
// and 15 minutes).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// find returns the row of scenario name among rows (a zero row if none).
func find(rows []row, prog, name string, c int) row {
	for _, r := range rows {
		if r.Program == prog && r.Name == name && r.Concurrency == c {
			return r
		}
	}
	return row{}
}

// speed is the part of the bench that measures pooling, throughput and
// gVisor's cost against baselines; its rows go in the table in order, its
// targets after it.
type speed struct {
	bin, dir, image, ctr string
	n                    int
	// sdk is a folder whose node_modules has the TypeScript SDK
	// (e2e/ts after npm ci); empty or missing: no TypeScript row.
	sdk string
}

// manifest writes a manifest for a server of this part and returns its path.
func (s speed) manifest(name, body string) string {
	p := s.dir + "/" + name + ".yaml"
	_ = os.WriteFile(p, []byte("limits:\n  max_output_bytes: 4MiB\n"+body), 0o644)
	return p
}

// paces measures the pool against no pool at each pace.
func (s speed) paces() ([]row, []target, error) {
	pooled, err := startRunbox(s.bin, s.manifest("pace-pool", "pool:\n  size: 2\n"))
	if err != nil {
		return nil, nil, err
	}
	defer pooled.Close()
	cold, err := startRunbox(s.bin, s.manifest("pace-cold", ""))
	if err != nil {
		return nil, nil, err
	}
	defer cold.Close()
	rows, ts := paceRows(pooled, cold, max(s.n, 20))
	return rows, ts, nil
}

// throughput: one-off runs per second at concurrency 8, runbox with a
// pool of 4 and without, against hardened `docker run --rm` (taken in
// turns with runbox's cold boxes).
func (s speed) throughput() ([]row, []target, error) {
	warm, err := startRunbox(s.bin, s.manifest("c8-pool", "pool:\n  size: 4\n  refill_concurrency: 2\nconcurrency: 8\n"))
	if err != nil {
		return nil, nil, err
	}
	time.Sleep(6 * time.Second)
	print1 := programs[0]
	rows := []row{measure(print1.name, "runbox warm (pooled box)", 8, 8*s.n, 0, func() error { return callRunbox(warm, print1) })}
	// Its pool would refill (and preload) beside the rows after it.
	warm.Close()
	cold, err := startRunbox(s.bin, s.manifest("c8-cold", "concurrency: 8\n"))
	if err != nil {
		return nil, nil, err
	}
	defer cold.Close()
	// The oci backend: runc run by the server, no engine per box.
	direct, err := startRunbox(s.bin, s.manifest("c8-oci", "backend: oci\nconcurrency: 8\n"))
	if err != nil {
		return nil, nil, err
	}
	defer direct.Close()
	// Cold boxes and `docker run` leave nothing running once a call is
	// answered, so they are measured in turns (interleave says why).
	rows = append(rows, interleave(print1.name, 8, 8*s.n, 4, 0,
		scenario{"runbox cold (new box)", func() error { return callRunbox(cold, print1) }},
		scenario{"docker run --rm, runbox's hardening", func() error { return dockerCmd(print1, hardenedRun(s.image)...) }},
		scenario{"runbox cold (new box), backend oci (runc, no engine)", func() error { return callRunbox(direct, print1) }})...)
	base := rows[2].RunsPerSec
	return rows, []target{
		{what: "runs/s at concurrency 8, pool.size 4, against `docker run --rm`", ratio: ratio(rows[0].RunsPerSec, base), limit: 2, atLeast: true,
			detail: fmt.Sprintf("%.1f against %.1f runs/s", rows[0].RunsPerSec, base)},
		{what: "runs/s at concurrency 8, no pool, against `docker run --rm`", ratio: ratio(rows[1].RunsPerSec, base), limit: 2, atLeast: true,
			detail: fmt.Sprintf("%.1f against %.1f runs/s", rows[1].RunsPerSec, base)},
		{what: "runs/s at concurrency 8, backend oci, no pool, against `docker run --rm`", ratio: ratio(rows[3].RunsPerSec, base), limit: 2, atLeast: true,
			detail: fmt.Sprintf("%.1f against %.1f runs/s", rows[3].RunsPerSec, base)},
	}, nil
}

// gvisor measures a warm gVisor box against a warm runc box at the same
// pace, a cold gVisor box and `docker run --runtime runsc`.
func (s speed) gvisor() ([]row, []target, error) {
	if !runscWorks(s.image) {
		fmt.Fprintln(os.Stderr, "bench: runsc does not work on this engine; no gVisor rows")
		return nil, nil, nil
	}
	gvWarm, err := startRunbox(s.bin, s.manifest("gv-warm", "isolation: gvisor\npool:\n  size: 2\n"))
	if err != nil {
		return nil, nil, err
	}
	defer gvWarm.Close()
	gvCold, err := startRunbox(s.bin, s.manifest("gv-cold", "isolation: gvisor\n"))
	if err != nil {
		return nil, nil, err
	}
	defer gvCold.Close()
	runcWarm, err := startRunbox(s.bin, s.manifest("runc-warm", "pool:\n  size: 2\n"))
	if err != nil {
		return nil, nil, err
	}
	defer runcWarm.Close()
	time.Sleep(8 * time.Second)
	print1 := programs[0]
	const pace = time.Second
	rows := []row{
		measure(print1.name, "gVisor: runbox warm (pooled box), paced 1 s", 1, s.n, pace, func() error { return callRunbox(gvWarm, print1) }),
		measure(print1.name, "runc: runbox warm (pooled box), paced 1 s", 1, s.n, pace, func() error { return callRunbox(runcWarm, print1) }),
		measure(print1.name, "gVisor: runbox cold (new box)", 1, s.n, 0, func() error { return callRunbox(gvCold, print1) }),
		measure(print1.name, "gVisor: docker run --rm --runtime runsc, hardening", 1, s.n, 0, func() error {
			return dockerCmd(print1, append([]string{"run", "--runtime", "runsc"}, withoutPidsLimit(hardenedRun(s.image)[1:])...)...)
		}),
	}
	return rows, []target{{what: "gVisor warm `print(1)` against runc warm (p50)", ratio: ratio(rows[0].P50Ms, rows[1].P50Ms), limit: 2,
		detail: fmt.Sprintf("%.0f ms against %.0f ms", rows[0].P50Ms, rows[1].P50Ms)}}, nil
}

// outputPace is the think time between the large-output calls: the pool
// refills between them, as it does for an agent.
const outputPace = time.Second

// output measures what a client does to get 1 MiB of a run's output, with
// mcp-go's client and with the reference TypeScript SDK client: the call
// (whose answer shows limits.answer_output_chars of it) and the read of
// the stdout resource it names; against `docker exec` printing the same.
func (s speed) output() ([]row, []target, error) {
	const man = "pool:\n  size: 2\n"
	c, err := startRunbox(s.bin, s.manifest("output-go", man))
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	time.Sleep(6 * time.Second)
	big := programs[2]
	rows := []row{
		measure(big.name, "runbox warm, mcp-go client: run_code + resources/read of stdout, paced 1 s", 1, s.n, outputPace, func() error { return callRunbox(c, big) }),
	}
	if r, ok := s.outputTS(s.manifest("output-ts", man)); ok {
		rows = append(rows, r)
	}
	exe := measure(big.name, "docker exec into a running container", 1, s.n, 0, func() error { return dockerCmd(big, "exec", "-i", s.ctr) })
	rows = append(rows, exe)
	var ts []target
	for _, r := range rows[:len(rows)-1] {
		client := "mcp-go's client"
		if strings.Contains(r.Name, "TypeScript") {
			client = "the TypeScript SDK client"
		}
		ts = append(ts, target{what: "1 MiB of output against `docker exec` (p50), " + client, ratio: ratio(r.P50Ms, exe.P50Ms), limit: 1.2,
			detail: fmt.Sprintf("%.0f ms against %.0f ms", r.P50Ms, exe.P50Ms)})
	}
	return rows, ts, nil
}

// outputTS is output's row with the TypeScript SDK client (bench/ts).
func (s speed) outputTS(manifestPath string) (row, bool) {
	if !s.hasSDK() {
		return row{}, false
	}
	r := row{Program: programs[2].name, Name: "runbox warm, TypeScript SDK client: run_code + resources/read of stdout, paced 1 s", Concurrency: 1, N: s.n}
	times, err := s.nodeTimes("bench/ts/output.mjs", manifestPath, outputPace)
	if err != nil {
		r.Failure = err.Error()
		return r, true
	}
	return rowOf(r, times["ms"]), true
}

// tasks measures what an MCP task (SEP-2663) adds to a short run, with
// the TypeScript SDK client on one server: print(1) as a plain call and
// as a task polled every 10 ms and at the server's pollIntervalMs, the
// three alternating (bench/ts/tasks.mjs). The issue sets no bound: the
// rows are the overhead, side by side.
func (s speed) tasks() ([]row, []target, error) {
	if !s.hasSDK() {
		return nil, nil, nil
	}
	names := []struct{ key, name string }{
		{"plain", "runbox warm, TypeScript SDK client: a plain call, paced 1 s"},
		{"task10", "the same call as an MCP task, tasks/get every 10 ms"},
		{"taskPoll", "the same call as an MCP task, tasks/get at the server's pollIntervalMs"},
	}
	times, err := s.nodeTimes("bench/ts/tasks.mjs", s.manifest("tasks-ts", "pool:\n  size: 2\n"), outputPace)
	rows := make([]row, 0, len(names))
	for _, n := range names {
		r := row{Program: programs[0].name, Name: n.name, Concurrency: 1, N: s.n}
		if err != nil {
			r.Failure = err.Error()
		} else {
			r = rowOf(r, times[n.key])
		}
		rows = append(rows, r)
	}
	return rows, nil, nil
}

// hasSDK says whether the TypeScript SDK is where bench/ts's scripts look.
func (s speed) hasSDK() bool {
	if _, err := os.Stat(filepath.Join(s.sdk, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		fmt.Fprintf(os.Stderr, "bench: no TypeScript SDK in %s (cd e2e/ts && npm ci): no TypeScript rows\n", s.sdk)
		return false
	}
	return true
}

// nodeTimes runs a bench/ts script with the TypeScript SDK client against
// the server with manifestPath and returns the times (ms) it printed, by
// name.
func (s speed) nodeTimes(script, manifestPath string, pace time.Duration) (map[string][]float64, error) {
	bin, _ := filepath.Abs(s.bin)
	out, err := exec.Command("node", script, s.sdk, bin, manifestPath, fmt.Sprint(s.n), fmt.Sprint(pace.Milliseconds())).Output()
	if err != nil {
		return nil, fmt.Errorf("node: %v", err)
	}
	var got map[string]json.RawMessage
	if json.Unmarshal(out, &got) != nil {
		return nil, errors.New("node printed no times")
	}
	if e, ok := got["error"]; ok {
		var msg string
		_ = json.Unmarshal(e, &msg)
		return nil, errors.New(msg)
	}
	times := make(map[string][]float64, len(got))
	for k, v := range got {
		var ms []float64
		if json.Unmarshal(v, &ms) != nil {
			return nil, errors.New("node printed no times")
		}
		times[k] = ms
	}
	return times, nil
}

// run runs the calibration and then the whole part ("speed": paces,
// throughput, gVisor, output, tasks) or one of it.
func (s speed) run(which string) ([]row, []target, error) {
	rows := calibrationRows(s.ctr, max(s.n, 20))
	var ts []target
	parts := map[string][]func() ([]row, []target, error){
		"speed":      {s.paces, s.throughput, s.gvisor, s.output, s.tasks},
		"tasks":      {s.tasks},
		"throughput": {s.throughput},
		"gvisor":     {s.gvisor},
		"output":     {s.output},
	}
	for _, part := range parts[which] {
		r, t, err := part()
		if err != nil {
			return rows, ts, err
		}
		rows, ts = append(rows, r...), append(ts, t...)
	}
	return rows, ts, nil
}
