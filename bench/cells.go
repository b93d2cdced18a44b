package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/internal/stagetrace"
)

// cellsManifest is the manifest of the cell rows' servers on backend:
// room for the sessions the throughput rows hold open.
func cellsManifest(backend string) string {
	return "backend: " + backend + "\nsessions:\n  max_per_client: 64\n  max_open: 64\n"
}

// cellSessions is how many sessions the concurrent throughput rows use.
const cellSessions = 8

// cellsBench (`--only cells`) measures a session cell against what the MCP
// layer costs by itself, with mcp-go's client and the TypeScript SDK's,
// each on its own server: MCP ping, a no-op tool call (session_list) and a
// session cell print(1), interleaved call by call; then cells per second
// back to back in one session and in 8 sessions at once, against no-op
// calls the same way, in turns. Then the breakdown of one cell, stage by
// stage, from a server that traces its calls (RUNBOX_TRACE_STAGES). Every
// server runs on backend (docker or oci).
func cellsBench(bin, backend string, n int, secs float64) ([]row, []target, error) {
	dir, err := os.MkdirTemp("", "runbox-bench-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	mpath := dir + "/cells.yaml"
	if err := os.WriteFile(mpath, []byte(cellsManifest(backend)), 0o644); err != nil {
		return nil, nil, err
	}
	fmt.Printf("backend: %s\n\n", backend)
	var rows []row
	var targets []target
	goRows, err := cellsGo(bin, mpath, n, secs)
	if err != nil {
		return nil, nil, err
	}
	rows = append(rows, goRows...)
	targets = append(targets, cellTargets("mcp-go client", goRows)...)
	tsRows, validation, err := cellsTS(bin, mpath, n, secs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: TypeScript SDK client:", err)
	} else {
		rows = append(rows, tsRows...)
		targets = append(targets, cellTargets("TypeScript SDK client", tsRows)...)
	}
	printRows(rows)
	fmt.Println()
	if err := cellBreakdown(bin, mpath, dir, max(n, 60), goRows, validation); err != nil {
		fmt.Fprintln(os.Stderr, "bench: breakdown:", err)
	}
	return nil, targets, nil
}

// cellTargets judge a client's rows: a cell's p50 at most 2x a no-op
// call's, and 500 cells/s across 8 sessions.
func cellTargets(who string, rs []row) []target {
	find := func(prog, name string) row {
		for _, r := range rs {
			if r.Program == prog && strings.HasPrefix(r.Name, name) {
				return r
			}
		}
		return row{}
	}
	noop, cell := find("session_list", "no-op"), find("print(1)", "a session cell")
	many := find("print(1)", fmt.Sprintf("cells in %d sessions", cellSessions))
	noop8 := find("session_list", fmt.Sprintf("no-op calls from %d", cellSessions))
	var ts []target
	if noop.P50Ms > 0 && cell.P50Ms > 0 {
		ts = append(ts, target{what: "a session cell against a no-op tool call (p50), " + who, ratio: cell.P50Ms / noop.P50Ms, limit: 2,
			detail: fmt.Sprintf("cell %.2f ms, no-op %.2f ms", cell.P50Ms, noop.P50Ms)})
	}
	if many.RunsPerSec > 0 {
		ts = append(ts, target{what: fmt.Sprintf("cells/s across %d sessions, %s", cellSessions, who), ratio: many.RunsPerSec / 500, limit: 1, atLeast: true,
			detail: fmt.Sprintf("%.0f cells/s (no-op calls: %.0f/s); against 500/s", many.RunsPerSec, noop8.RunsPerSec)})
	}
	return ts
}

// cellsGo are the rows of mcp-go's client.
func cellsGo(bin, mpath string, n int, secs float64) ([]row, error) {
	c, err := startRunbox(bin, mpath)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ids := make([]string, cellSessions)
	for i := range ids {
		if ids[i], err = openSession(c); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, id := range ids {
			closeSession(c, id)
		}
	}()
	// A raw ping: mcp-go's Ping sends none on the protocol it negotiates
	// here, which the server still answers.
	var pings atomic.Int64
	ping := func() error {
		id := fmt.Sprintf("bench-ping-%d", pings.Add(1))
		resp, err := c.GetTransport().SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: "ping"})
		if err == nil && resp.Error != nil {
			err = fmt.Errorf("ping: %s", resp.Error.Message)
		}
		return err
	}
	noop := func() error { _, err := tool(c, "session_list", map[string]any{}); return err }
	cell := func(i int) error { return callSession(c, ids[i], "print(1)", "1\n") }
	const who = "mcp-go client"
	rows := roundRobin(n, []rateRun{
		{"ping", "MCP ping, " + who, 1, func(int) error { return ping() }},
		{"session_list", "no-op tool call (session_list), " + who, 1, func(int) error { return noop() }},
		{"print(1)", "a session cell, " + who, 1, cell},
	})
	rates := []rateRun{
		{"session_list", "no-op calls back to back, " + who, 1, func(int) error { return noop() }},
		{"print(1)", "cells back to back in one session, " + who, 1, cell},
		{"session_list", fmt.Sprintf("no-op calls from %d callers at once, %s", cellSessions, who), cellSessions, func(int) error { return noop() }},
		{"print(1)", fmt.Sprintf("cells in %d sessions at once, %s", cellSessions, who), cellSessions, cell},
	}
	return append(rows, rateRows(rates, secs)...), nil
}

// roundRobin measures rs call by call, one of each in turn, n rounds
// after one round of warm-up: the machine's drift weighs on each alike.
func roundRobin(n int, rs []rateRun) []row {
	ms := make([][]float64, len(rs))
	errs := make([]error, len(rs))
	for round := range n + 1 {
		for i, r := range rs {
			if errs[i] != nil {
				continue
			}
			t := time.Now()
			errs[i] = r.call(0)
			if round > 0 {
				ms[i] = append(ms[i], float64(time.Since(t).Microseconds())/1000)
			}
		}
	}
	rows := make([]row, len(rs))
	for i, r := range rs {
		rows[i] = statsRow(r.prog, r.name, 1, ms[i], 0, errs[i])
	}
	return rows
}

// rateRun is a throughput row: k callers calling as fast as they can.
type rateRun struct {
	prog, name string
	k          int
	call       func(worker int) error
}

// rateRows runs each for secs in all, in two turns, the order reversed in
// the second: the machine's drift weighs on each alike.
func rateRows(rs []rateRun, secs float64) []row {
	type tally struct {
		ms   []float64
		wall time.Duration
		err  error
	}
	ts := make([]tally, len(rs))
	for turn := range 2 {
		for j := range rs {
			i := j
			if turn == 1 {
				i = len(rs) - 1 - j
			}
			if ts[i].err != nil {
				continue
			}
			end := time.Now().Add(time.Duration(secs / 2 * float64(time.Second)))
			var mu sync.Mutex
			var failed atomic.Pointer[error]
			began := time.Now()
			var wg sync.WaitGroup
			for w := range rs[i].k {
				wg.Go(func() {
					for time.Now().Before(end) && failed.Load() == nil {
						t := time.Now()
						if err := rs[i].call(w); err != nil {
							failed.Store(&err)
							return
						}
						ms := float64(time.Since(t).Microseconds()) / 1000
						mu.Lock()
						ts[i].ms = append(ts[i].ms, ms)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			ts[i].wall += time.Since(began)
			if err := failed.Load(); err != nil {
				ts[i].err = *err
			}
		}
	}
	rows := make([]row, len(rs))
	for i, t := range ts {
		rows[i] = statsRow(rs[i].prog, rs[i].name, rs[i].k, t.ms, t.wall.Seconds(), t.err)
	}
	return rows
}

// statsRow is a row of the call times ms, made in secs.
func statsRow(prog, name string, k int, ms []float64, secs float64, err error) row {
	r := row{Program: prog, Name: name, Concurrency: k, N: len(ms)}
	if err != nil {
		r.Failure = err.Error()
		return r
	}
	slices.Sort(ms)
	if len(ms) > 0 {
		r.P50Ms, r.P95Ms, r.P99Ms = pct(ms, 0.50), pct(ms, 0.95), pct(ms, 0.99)
	}
	if secs > 0 {
		r.RunsPerSec = float64(len(ms)) / secs
	}
	return r
}

// cellsTS are the rows of the TypeScript SDK client (bench/ts/cells.mjs)
// and what its validation of structuredContent costs a cell (p50).
func cellsTS(bin, mpath string, n int, secs float64) ([]row, float64, error) {
	if _, err := os.Stat(*tsSDK + "/node_modules/@modelcontextprotocol/sdk"); err != nil {
		return nil, 0, fmt.Errorf("no SDK in %s (bash scripts/npm.sh e2e/ts ci): %w", *tsSDK, err)
	}
	cmd := exec.Command("node", "bench/ts/cells.mjs", *tsSDK, bin, mpath, fmt.Sprint(n), fmt.Sprint(secs))
	if *serverLog != "" {
		if f, err := os.OpenFile(*serverLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			defer f.Close()
			cmd.Stderr = f
		}
	}
	out, err := cmd.Output()
	if err != nil {
		return nil, 0, fmt.Errorf("node: %w", err)
	}
	var got struct {
		Ping, Noop, Cell, CellRaw []float64
		Rates                     map[string]struct {
			Calls int
			Secs  float64
		}
		Error string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, 0, err
	}
	if got.Error != "" {
		return nil, 0, fmt.Errorf("%s", got.Error)
	}
	const who = "TypeScript SDK client"
	rows := []row{
		statsRow("ping", "MCP ping, "+who, 1, got.Ping, 0, nil),
		statsRow("session_list", "no-op tool call (session_list), "+who, 1, got.Noop, 0, nil),
		statsRow("print(1)", "a session cell, "+who, 1, got.Cell, 0, nil),
		statsRow("print(1)", "a session cell, "+who+", through its low-level request (no output validation)", 1, got.CellRaw, 0, nil),
	}
	for _, r := range []struct{ key, prog, name string }{
		{"noop1", "session_list", "no-op calls back to back, " + who},
		{"cell1", "print(1)", "cells back to back in one session, " + who},
		{"noop8", "session_list", fmt.Sprintf("no-op calls from %d callers at once, %s", cellSessions, who)},
		{"cell8", "print(1)", fmt.Sprintf("cells in %d sessions at once, %s", cellSessions, who)},
	} {
		k := 1
		if strings.HasSuffix(r.key, "8") {
			k = cellSessions
		}
		rt := got.Rates[r.key]
		rr := row{Program: r.prog, Name: r.name, Concurrency: k, N: rt.Calls}
		if rt.Secs > 0 {
			rr.RunsPerSec = float64(rt.Calls) / rt.Secs
		}
		rows = append(rows, rr)
	}
	return rows, rows[2].P50Ms - rows[3].P50Ms, nil
}

// cellBreakdown prints where a session cell's time goes: the p50 of each
// stage the server and the box mark (RUNBOX_TRACE_STAGES), the MCP layer
// both ways (the client's time less the handler's span) and the
// TypeScript SDK's validation of structuredContent.
func cellBreakdown(bin, mpath, dir string, n int, goRows []row, validation float64) error {
	logPath := dir + "/trace.log"
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	os.Setenv(stagetrace.Env, "1")
	saved := *serverLog
	*serverLog = logPath
	c, err := startRunbox(bin, mpath)
	os.Unsetenv(stagetrace.Env)
	*serverLog = saved
	if err != nil {
		return err
	}
	id, err := openSession(c)
	if err != nil {
		c.Close()
		return err
	}
	var client []float64
	for i := range n + 1 {
		t := time.Now()
		if err := callSession(c, id, "print(1)", "1\n"); err != nil {
			c.Close()
			return err
		}
		if i > 0 {
			client = append(client, float64(time.Since(t).Microseconds()))
		}
	}
	closeSession(c, id)
	c.Close()
	stages, spans, err := readStages(logPath)
	if err != nil {
		return err
	}
	if len(spans) < 2 {
		return fmt.Errorf("the server traced %d calls", len(spans))
	}
	stages, spans = stages[1:], spans[1:] // the first is the warm-up
	slices.Sort(client)
	span := p50(spans)
	fmt.Printf("Where a session cell's time goes (print(1), mcp-go client, %d cells back to back, p50 of each stage in µs; one traced server):\n\n", len(spans))
	fmt.Println("| stage | µs (p50) |")
	fmt.Println("| --- | ---: |")
	fmt.Printf("| MCP layer both ways: the client's request and answer, stdio, the server's decode, dispatch and encode (the client's time less the handler's span) | %.0f |\n", pct(client, 0.50)-span)
	var order []string
	per := map[string][]float64{}
	for _, call := range stages {
		for _, s := range call {
			if _, ok := per[s.stage]; !ok {
				order = append(order, s.stage)
			}
			per[s.stage] = append(per[s.stage], s.us)
		}
	}
	for _, name := range order {
		fmt.Printf("| %s | %.0f |\n", name, p50(per[name]))
	}
	fmt.Printf("| the handler's span (its first mark to its last) | %.0f |\n", span)
	fmt.Printf("| the cell at the client (mcp-go) | %.0f |\n", pct(client, 0.50))
	if validation != 0 {
		fmt.Printf("| the TypeScript SDK client's validation of structuredContent (its cell less the same through its low-level request, p50, from its rows) | %.0f |\n", validation*1000)
	}
	fmt.Println()
	return nil
}

type stageTime struct {
	stage string
	us    float64
}

// readStages reads the server's "stages" records: each call's stages in
// order, and its span.
func readStages(path string) ([][]stageTime, []float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var calls [][]stageTime
	var spans []float64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"msg":"stages"`) {
			continue
		}
		var rec struct {
			Span float64         `json:"span_us"`
			Us   json.RawMessage `json:"us"`
		}
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		// The stages in their order: the object's keys as written.
		dec := json.NewDecoder(strings.NewReader(string(rec.Us)))
		var call []stageTime
		if _, err := dec.Token(); err != nil {
			continue
		}
		for dec.More() {
			k, _ := dec.Token()
			var v float64
			if dec.Decode(&v) != nil {
				break
			}
			call = append(call, stageTime{fmt.Sprint(k), v})
		}
		calls = append(calls, call)
		spans = append(spans, rec.Span)
	}
	return calls, spans, sc.Err()
}

func p50(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return pct(s, 0.50)
}
