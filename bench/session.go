package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// bigFrame loads a 100 MB frame (1.25 M rows of 10 float64 columns) from
// a CSV in a declared folder: what an agent analysing the user's data does.
const bigFrame = "import pandas as pd\ndf = pd.read_csv('/mnt/data/big.csv')\n"

// writeBigCSV writes the CSV bigFrame reads: 1.25 M rows of 10 numbers.
func writeBigCSV(dir string) error {
	f, err := os.Create(dir + "/big.csv")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "c0,c1,c2,c3,c4,c5,c6,c7,c8,c9")
	x := uint64(88172645463325252)
	for i := 0; i < 1_250_000; i++ {
		for j := 0; j < 10; j++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			if j > 0 {
				_ = w.WriteByte(',')
			}
			fmt.Fprintf(w, "%.6f", float64(x%1_000_000)/1_000_000)
		}
		_ = w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// sessionManifest is the manifest of the session rows' servers: room for
// the frame, a declared folder with the CSV, room for the opens measured.
func sessionManifest(data string, pool int) string {
	return fmt.Sprintf("limits:\n  max_output_bytes: 4MiB\n  memory: 1GiB\npool:\n  size: %d\nmounts:\n  - name: data\n    path: %s\nsessions:\n  max_per_client: 64\n  max_open: 64\n", pool, data)
}

// sessionRows measure a call in a live session against a pooled one-off
// run, in the same run: print(1), and df.describe() on a 100 MB frame built
// once in the session against building it in every run.
func sessionRows(c, cold *client.Client, n int) ([]row, error) {
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
	var opened []string
	rows = append(rows,
		measure("session_open (python)", "runbox: open a session (a new box)", 1, max(n/2, 5), 0, func() error {
			sid, err := openSession(c)
			opened = append(opened, sid)
			return err
		}),
		measure(print1.name, "runbox cold (new box), same run", 1, max(n/2, 5), 0, func() error { return callRunbox(cold, print1) }),
	)
	for _, sid := range opened {
		closeSession(c, sid)
	}
	if err := callSession(c, id, bigFrame+"df.shape", "(1250000, 10)\n"); err != nil {
		return nil, err
	}
	describe := "df.describe().shape"
	rows = append(rows,
		measure("df.describe(), 100 MB frame from a 100 MB CSV", "runbox session: loaded once", 1, max(n/4, 5), 0, func() error {
			return callSession(c, id, describe, "(8, 10)\n")
		}),
		measure("df.describe(), 100 MB frame from a 100 MB CSV", "runbox warm: loaded in every run", 1, max(n/4, 5), 400*time.Millisecond, func() error {
			return callRunbox(c, program{name: "describe", code: bigFrame + "print(" + describe + ")", check: func(b []byte) bool { return string(b) == "(8, 10)\n" }})
		}),
	)
	if s, o := rows[4], rows[5]; s.Failure == "" && o.Failure == "" && s.P50Ms > 0 {
		fmt.Fprintf(os.Stderr, "bench: df.describe() on a 100 MB frame: a session is %.1fx faster than loading it in every run (p50 %.0f ms vs %.0f ms)\n", o.P50Ms/s.P50Ms, s.P50Ms, o.P50Ms)
	}
	return append(rows, manySessions(c, openSessions, n)), nil
}

// openSessions is how many sessions the scale row holds open at once.
const openSessions = 50

// manySessions opens k python sessions, each holding a value, measures
// a call in them round robin while all are open, and reports what they
// cost the host at rest: the engine's memory use per box (as docker stats
// shows it) and the drop in the host's available memory.
func manySessions(c *client.Client, k, n int) row {
	prog := fmt.Sprintf("print(x), %d sessions open", k)
	before := memAvailable()
	began := time.Now()
	var ids []string
	defer func() {
		for _, id := range ids {
			closeSession(c, id)
		}
	}()
	for i := range k {
		id, err := openSession(c)
		if err == nil {
			err = callSession(c, id, fmt.Sprintf("x = %d", i), "")
		}
		if err != nil {
			return row{Program: prog, Name: "runbox session", Failure: fmt.Sprintf("session %d: %v", i+1, err)}
		}
		ids = append(ids, id)
	}
	opening := time.Since(began)
	time.Sleep(3 * time.Second) // the interpreters settle
	boxes, perBox := sessionBoxMemory(ids)
	fmt.Fprintf(os.Stderr, "bench: %d python sessions opened one after another in %.1f s; at rest each box uses %.1f MiB (docker stats, %d boxes) and the host's available memory fell by %.1f MiB per session\n",
		k, opening.Seconds(), perBox/(1<<20), boxes, float64(before-memAvailable())/float64(k)/(1<<20))
	i := 0
	return measure(prog, "runbox session: a call, round robin", 1, max(n, k), 0, func() error {
		id := ids[i%len(ids)]
		want := fmt.Sprintf("%d\n", i%len(ids))
		i++
		return callSession(c, id, "print(x)", want)
	})
}

// memAvailable is the host's MemAvailable in bytes (0 when unknown).
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sessionBoxMemory is the average memory use of the session boxes of ids
// as `docker stats` reports it (usage less page cache).
func sessionBoxMemory(ids []string) (int, float64) {
	var boxes []string
	for _, id := range ids {
		out, err := exec.Command("docker", "ps", "-q", "--filter", "label="+sandbox.LabelSession+"="+sandbox.SessionKey(id)).Output()
		if err == nil && len(bytes.TrimSpace(out)) > 0 {
			boxes = append(boxes, strings.TrimSpace(string(out)))
		}
	}
	if len(boxes) == 0 {
		return 0, 0
	}
	out, err := exec.Command("docker", append([]string{"stats", "--no-stream", "--format", "{{.MemUsage}}"}, boxes...)...).Output()
	if err != nil {
		return 0, 0
	}
	var total float64
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		used, _, _ := strings.Cut(l, " / ")
		if v, ok := statsBytes(strings.TrimSpace(used)); ok {
			total += v
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return n, total / float64(n)
}

// benchSessionsOnly is the session rows alone.
func benchSessionsOnly(bin string, n int, jsonPath string) error {
	rows, err := sessionBench(bin, n)
	if err != nil {
		return err
	}
	return report(rows, manifest.DefaultImage, jsonPath)
}

// sessionBench starts the servers the session rows compare (pooled and
// cold, with the CSV in a declared folder) and measures them.
func sessionBench(bin string, n int) ([]row, error) {
	dir, err := os.MkdirTemp("", "runbox-bench-sessions-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeBigCSV(dir); err != nil {
		return nil, err
	}
	m, cm := dir+"/warm.yaml", dir+"/cold.yaml"
	_ = os.WriteFile(m, []byte(sessionManifest(dir, 2)), 0o644)
	_ = os.WriteFile(cm, []byte(sessionManifest(dir, 0)), 0o644)
	c, err := startRunbox(bin, m)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cold, err := startRunbox(bin, cm)
	if err != nil {
		return nil, err
	}
	defer cold.Close()
	time.Sleep(8 * time.Second) // the pool fills and its preloads finish
	return sessionRows(c, cold, n)
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

// statsBytes reads a size as docker stats prints it: "12.3MiB", "900KiB".
func statsBytes(s string) (float64, bool) {
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(num, 64)
			return v * u.scale, err == nil
		}
	}
	return 0, false
}
