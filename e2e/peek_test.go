//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/contract"
)

// ticks prints "tick i" each second, n times, then "done": a job whose
// output grows while it runs.
func ticks(n int) string {
	return fmt.Sprintf("import time\nfor i in range(1, %d):\n    print(f'tick {i}', flush=True)\n    time.sleep(1)\nprint('done')\n", n+1)
}

func ticksOut(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "tick %d\n", i)
	}
	return b.String() + "done\n"
}

// tool calls a tool of s and decodes its answer, with its text summary.
func (s *server) toolResult(t testing.TB, name string, args map[string]any) (contract.Result, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v\nserver stderr:\n%s", name, err, s.stderr)
	}
	r, err := decodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	if len(res.Content) > 0 {
		if c, ok := res.Content[0].(mcp.TextContent); ok {
			text = c.Text
		}
	}
	return r, text
}

// runningAnswers follows a run that answered running with run_wait
// (wait_seconds each) to its result: the running answers on the way and
// the result.
func (s *server) runningAnswers(t testing.TB, first contract.Result, firstText string, wait float64) (running []contract.Result, texts []string, final contract.Result) {
	t.Helper()
	running, texts = []contract.Result{first}, []string{firstText}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		r, text := s.toolResult(t, "run_wait", map[string]any{"run_id": first.RunID, "wait_seconds": wait})
		if r.Status != contract.StatusRunning {
			return running, texts, r
		}
		running, texts = append(running, r), append(texts, text)
	}
	t.Fatalf("run %s still running after 5 minutes", first.RunID)
	return
}

// checkSoFar checks a run's running answers against its result: each
// shows its output so far (a prefix of the result's, growing), says so,
// and its summary shows it.
func checkSoFar(t *testing.T, running []contract.Result, texts []string, final contract.Result, want string) {
	t.Helper()
	if final.Status != contract.StatusOK || final.Stdout != want || final.Running != nil {
		t.Fatalf("the result after %d running answers: %s %+v\nstdout %q\nstderr %q", len(running), final.Status, final.Error, final.Stdout, final.Stderr)
	}
	last, shown := -1, 0
	for i, r := range running {
		if r.Status != contract.StatusRunning || r.Running == nil || r.RunID != final.RunID {
			t.Fatalf("answer %d: %+v", i, r)
		}
		if !strings.HasPrefix(r.Running.Output, "so far: ") {
			// Not known in time (a loaded machine): said, nothing shown.
			if r.Stdout != "" || !strings.Contains(r.Running.Output, "not known") {
				t.Fatalf("answer %d: %q with stdout %q", i, r.Running.Output, r.Stdout)
			}
			continue
		}
		if !strings.HasPrefix(want, r.Stdout) || len(r.Stdout) < last {
			t.Fatalf("answer %d shows %q, not a growing prefix of %q (the last showed %d bytes)", i, r.Stdout, want, last)
		}
		if r.Running.Output != contract.OutputSoFar(int64(len(r.Stdout)), 0) {
			t.Fatalf("answer %d: %q for %d bytes", i, r.Running.Output, len(r.Stdout))
		}
		if r.Stdout != "" && !strings.Contains(texts[i], "--- stdout so far ---\n"+strings.TrimRight(r.Stdout, "\n")) {
			t.Fatalf("answer %d's summary lacks its output:\n%s", i, texts[i])
		}
		last = len(r.Stdout)
		shown++
	}
	// The first answer that shows output shows the first line (a loaded
	// machine may not have started the program by the first answer), and
	// a later one shows more.
	firstShown := -1
	for _, r := range running {
		if r.Stdout != "" {
			firstShown = len(r.Stdout)
			if !strings.HasPrefix(r.Stdout, "tick 1\n") {
				t.Fatalf("the first output shown: %q", r.Stdout)
			}
			break
		}
	}
	if shown < 2 || firstShown < 0 || last <= firstShown {
		t.Fatalf("%d of %d running answers showed output, the first %d bytes, the last %d", shown, len(running), firstShown, last)
	}
}

// TestRunningShowsOutputSoFar: with answer_within_seconds 2, a 15 s run
// that prints a line a second answers running with its first lines,
// run_wait shows more, and the result is whole, as a run's without
// peeks: pooled and cold one-off runs and a session's cell, on every
// backend. A hostile program (100 MB fast, invalid UTF-8, a closed
// stdout) breaks neither its peeks nor its run.
//
// Its runs wait on their programs' clocks, so it runs beside other tests,
// and its backends beside one another: each has servers of its own, and
// checks only their boxes.
func TestRunningShowsOutputSoFar(t *testing.T) {
	t.Parallel()
	const manifest = "limits:\n  answer_within_seconds: 2\n"
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			takeTurn(t, b.name)
			pooled := b.start(t, "pool:\n  size: 1\n"+manifest)
			cold := b.start(t, manifest)
			follow := func(t *testing.T, s *server, args map[string]any) ([]contract.Result, []string, contract.Result) {
				first, text := s.toolResult(t, "run_code", args)
				if first.Status != contract.StatusRunning {
					t.Fatalf("the first answer: %+v", first)
				}
				return s.runningAnswers(t, first, text, 3)
			}
			t.Run("cold", func(t *testing.T) {
				running, texts, final := follow(t, cold, map[string]any{"language": "python", "code": ticks(15), "timeout_seconds": 120})
				checkSoFar(t, running, texts, final, ticksOut(15))
				if final.Metrics.Pooled {
					t.Errorf("a run of a server without a pool was pooled")
				}
				t.Logf("cold: %d running answers, %v", len(running), outputs(running))
			})
			// The pooled run goes after the cold one: its box, started with
			// the server and of a low CPU weight until taken, may be slow to
			// get ready on a loaded machine, and a run before it is ready
			// starts cold. Not last: the pool's refill after it, still under
			// way when the server closed, once left a box on Podman.
			t.Run("pooled", func(t *testing.T) {
				if b.name == "docker" || b.name == "gvisor" {
					waitRunningPooled(t, pooled.cmd.Process.Pid, "python")
				}
				running, texts, final := follow(t, pooled, map[string]any{"language": "python", "code": ticks(15), "timeout_seconds": 120})
				checkSoFar(t, running, texts, final, ticksOut(15))
				if !final.Metrics.Pooled && (b.name == "docker" || b.name == "gvisor") {
					t.Errorf("the run did not take the pooled box")
				}
				t.Logf("pooled: %d running answers, %v", len(running), outputs(running))
			})
			t.Run("session", func(t *testing.T) {
				id := cold.open(t, "python")
				running, texts, final := follow(t, cold, map[string]any{"language": "python", "code": "n = 1\n" + ticks(15), "session_id": id, "timeout_seconds": 120})
				checkSoFar(t, running, texts, final, ticksOut(15))
				if r := cold.in(t, id, "python", "print('after', n)\n"); r.Status != contract.StatusOK || r.Stdout != "after 1\n" {
					t.Fatalf("the session after a peeked cell: %+v", r)
				}
				cold.tool(t, "session_close", map[string]any{"session_id": id})
				t.Logf("session: %d running answers, %v", len(running), outputs(running))
			})
			t.Run("hostile", func(t *testing.T) { hostilePeeks(t, cold) })
		})
	}
}

// outputs are the stdout sizes of running answers, for the log.
func outputs(rs []contract.Result) []int {
	var n []int
	for _, r := range rs {
		n = append(n, len(r.Stdout))
	}
	return n
}

func hostilePeeks(t *testing.T, s *server) {
	cases := []struct {
		name, code string
		check      func(t *testing.T, r contract.Result, text string)
		final      func(t *testing.T, r contract.Result)
	}{
		{"100 MB fast", "head -c 100000000 /dev/zero | tr '\\0' x; echo; for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 1; done\n",
			func(t *testing.T, r contract.Result, text string) {
				if r.Stdout == "" {
					return
				}
				budget := 8000
				if n := utf8.RuneCountInString(r.Stdout); n > budget+400 || !r.StdoutTruncated || r.StdoutCut == nil || r.StdoutCut.Bytes < 1<<20 || !strings.HasPrefix(r.Stdout, "xxxx") {
					t.Fatalf("a peek of a flood: %d characters, cut %+v, %q", n, r.StdoutCut, r.Running.Output)
				}
			},
			func(t *testing.T, r contract.Result) {
				if r.Error == nil || r.Error.Kind != contract.KindOutputLimit || !strings.HasSuffix(r.Stdout, "tick 8\n") || r.StdoutCut == nil || r.StdoutCut.Bytes != 100000001+8*7 {
					t.Fatalf("the flood's result: %+v, cut %+v, stdout ends %q", r.Error, r.StdoutCut, r.Stdout[max(0, len(r.Stdout)-40):])
				}
			}},
		{"invalid UTF-8", "printf 'bad \\xff\\xfe ok\\n'; printf '\\xe2\\x82' >&2; sleep 10; echo end\n",
			func(t *testing.T, r contract.Result, text string) {
				if r.Stdout != "" && (!strings.HasPrefix("bad \uFFFD ok\nend\n", r.Stdout) || !strings.HasPrefix(r.Stdout, "bad \uFFFD ok\n") || !utf8.ValidString(text)) {
					t.Fatalf("a peek of invalid UTF-8: %q %q", r.Stdout, r.Stderr)
				}
			},
			func(t *testing.T, r contract.Result) {
				if r.Status != contract.StatusOK || r.Stdout != "bad \uFFFD ok\nend\n" {
					t.Fatalf("the result: %+v %q %q", r.Error, r.Stdout, r.Stderr)
				}
			}},
		{"a closed stdout", "exec 1>&-; echo err-line >&2; sleep 10; echo after >&2\n",
			func(t *testing.T, r contract.Result, text string) {
				if r.Stderr != "" && (!strings.HasPrefix("err-line\nafter\n", r.Stderr) || !strings.HasPrefix(r.Stderr, "err-line\n") || r.Stdout != "") {
					t.Fatalf("a peek of a closed stdout: %q %q", r.Stdout, r.Stderr)
				}
			},
			func(t *testing.T, r contract.Result) {
				if r.Status != contract.StatusOK || r.Stderr != "err-line\nafter\n" {
					t.Fatalf("the result: %+v %q %q", r.Error, r.Stdout, r.Stderr)
				}
			}},
	}
	for _, c := range cases {
		first, text := s.toolResult(t, "run_code", map[string]any{"language": "bash", "code": c.code, "timeout_seconds": 120})
		if first.Status != contract.StatusRunning {
			t.Fatalf("%s: the first answer %+v", c.name, first)
		}
		running, texts, final := s.runningAnswers(t, first, text, 1)
		known := 0
		for j, r := range running {
			if strings.HasPrefix(r.Running.Output, "so far: ") {
				known++
			}
			c.check(t, r, texts[j])
		}
		c.final(t, final)
		if known == 0 {
			t.Errorf("%s: none of %d running answers showed its output", c.name, len(running))
		}
		t.Logf("%s: %d running answers, %d with output", c.name, len(running), known)
	}
}

// TestPeekCost measures what peeks cost a run (RUNBOX_E2E_MEASURE=1): the
// box's own wall time of the same CPU-bound run of about 10 s (its work
// calibrated by a first run) with a peek a second and with one peek (the
// running answer's), alternated, and what a run_wait that peeks takes
// beside one that does not (an unknown run id).
func TestPeekCost(t *testing.T) {
	if os.Getenv("RUNBOX_E2E_MEASURE") == "" {
		t.Skip("a measurement: set RUNBOX_E2E_MEASURE=1")
	}
	s := dockerServer(t, "limits:\n  answer_within_seconds: 2\n")
	collect := func(code string, peeks bool) (contract.Result, []float64, []float64) {
		first, _ := s.toolResult(t, "run_code", map[string]any{"language": "python", "code": code, "timeout_seconds": 120})
		if first.Status != contract.StatusRunning {
			t.Fatalf("first answer: %+v", first)
		}
		if !peeks {
			_, _, final := s.runningAnswers(t, first, "", 120)
			return final, nil, nil
		}
		var peekMs, plainMs []float64
		for {
			t0 := time.Now()
			r, _ := s.toolResult(t, "run_wait", map[string]any{"run_id": first.RunID, "wait_seconds": 0})
			took := time.Since(t0)
			if r.Status != contract.StatusRunning {
				return r, peekMs, plainMs
			}
			if strings.HasPrefix(r.Running.Output, "so far") {
				peekMs = append(peekMs, float64(took.Microseconds())/1000)
			}
			t1 := time.Now()
			s.toolResult(t, "run_wait", map[string]any{"run_id": "r_unknown", "wait_seconds": 0})
			plainMs = append(plainMs, float64(time.Since(t1).Microseconds())/1000)
			time.Sleep(time.Second - min(time.Second, time.Since(t0)))
		}
	}
	calib, _, _ := collect("import time\nt = time.time()\nk = 0\nwhile time.time() - t < 10:\n    for _ in range(100000):\n        pass\n    k += 1\nprint(k)\n", false)
	k, err := strconv.Atoi(strings.TrimSpace(calib.Stdout))
	if err != nil || k <= 0 {
		t.Fatalf("calibration: %+v", calib)
	}
	code := fmt.Sprintf("for k in range(%d):\n    for _ in range(100000):\n        pass\n    if k %% 50 == 0:\n        print('at', k, flush=True)\nprint('done')\n", k)
	var with, without, withCPU, withoutCPU []int64
	var peekMs, plainMs []float64
	rounds := 8
	if n, err := strconv.Atoi(os.Getenv("RUNBOX_E2E_MEASURE")); err == nil && n > 1 {
		rounds = n
	}
	for round := range rounds {
		peeks := round%2 == 0
		final, p, q := collect(code, peeks)
		if final.Status != contract.StatusOK || !strings.HasSuffix(final.Stdout, "done\n") {
			t.Fatalf("result: %+v", final)
		}
		peekMs, plainMs = append(peekMs, p...), append(plainMs, q...)
		if peeks {
			with, withCPU = append(with, final.Metrics.WallMs), append(withCPU, final.Metrics.CPUMs)
		} else {
			without, withoutCPU = append(without, final.Metrics.WallMs), append(withoutCPU, final.Metrics.CPUMs)
		}
		t.Logf("round %d, a peek a second %v: wall %d ms, cpu %d ms", round, peeks, final.Metrics.WallMs, final.Metrics.CPUMs)
	}
	t.Logf("work: %d units (10 s when calibrated); wall with a peek a second %v ms (median %d), with one peek %v ms (median %d)", k, with, median(with), without, median(without))
	t.Logf("the box's cpu with a peek a second %v ms (median %d), with one peek %v ms (median %d)", withCPU, median(withCPU), withoutCPU, median(withoutCPU))
	t.Logf("run_wait that peeks: median %.1f ms, p90 %.1f ms (n=%d); run_wait of an unknown run: median %.1f ms, p90 %.1f ms (n=%d)",
		pct(peekMs, 50), pct(peekMs, 90), len(peekMs), pct(plainMs, 50), pct(plainMs, 90), len(plainMs))
	for _, line := range strings.Split(s.stderr.String(), "\n") {
		if strings.Contains(line, "peek") {
			t.Logf("server: %s", line)
		}
	}
}

func median(v []int64) int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func pct(v []float64, p int) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}
