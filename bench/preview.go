package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/sandbox"
)

// previewSize is the download the preview rows time.
const previewSize = 10 << 20

// previewApp serves previewSize random bytes at /big from a session,
// with the standard library.
var previewApp = `import threading, http.server, os
BIG = os.urandom(` + strconv.Itoa(previewSize) + `)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Type", "application/octet-stream"); self.send_header("Content-Length", str(len(BIG))); self.end_headers()
        self.wfile.write(BIG)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), H)
srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
print("ok")
`

// previewRow is one way of getting the download: time to its first
// byte and to its last, p50 over the rounds.
type previewRow struct {
	runtime, path   string
	n               int
	ttfbMs, totalMs float64
	failure         string
}

// previewBench (`--only preview`) times a 10 MiB download from a session's
// web server, on runc and on gVisor: through session_expose's URL from
// the host (a fresh connection each round, the cookie already set), and
// against it, on the same box in the same run, `docker exec` of curl in
// the box with its output streamed to the host (what an agent without
// exposures would do), and curl's own timing in the box (the app's
// ceiling, no transport to the host). The paths take turns, round by
// round, so they see the same drift of the machine.
func previewBench(bin string, n int) error {
	dir, err := os.MkdirTemp("", "runbox-bench-preview-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var rows []previewRow
	for _, rt := range []struct{ name, isolation string }{{"runc", ""}, {"gvisor", "isolation: gvisor\n"}} {
		m := dir + "/" + rt.name + ".yaml"
		_ = os.WriteFile(m, []byte(rt.isolation+"sessions:\n  expose:\n    enabled: true\n"), 0o644)
		r, err := previewRuntime(bin, m, rt.name, n)
		if err != nil {
			r = []previewRow{{runtime: rt.name, path: "all", failure: err.Error()}}
		}
		rows = append(rows, r...)
	}
	fmt.Printf("machine: %d CPUs, %s; 10 MiB download from a session's python http.server, p50 of n rounds\n\n", runtime.NumCPU(), engineVersion())
	fmt.Println("| runtime | path | n | first byte p50 ms | whole p50 ms | MiB/s |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		if r.failure != "" {
			fmt.Printf("| %s | %s | %d | failed: %s | | |\n", r.runtime, r.path, r.n, r.failure)
			continue
		}
		fmt.Printf("| %s | %s | %d | %.1f | %.1f | %.0f |\n", r.runtime, r.path, r.n, r.ttfbMs, r.totalMs, float64(previewSize)/(1<<20)/(r.totalMs/1000))
	}
	return nil
}

func previewRuntime(bin, manifestPath, rt string, n int) ([]previewRow, error) {
	c, err := startRunbox(bin, manifestPath)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	id, err := openSession(c)
	if err != nil {
		return nil, err
	}
	defer closeSession(c, id)
	if err := callSession(c, id, previewApp, "ok\n"); err != nil {
		return nil, fmt.Errorf("the app: %w", err)
	}
	out, err := tool(c, "session_expose", map[string]any{"session_id": id, "port": 8000})
	if err != nil {
		return nil, err
	}
	e, _ := out["exposure"].(map[string]any)
	previewURL, _ := e["url"].(string)
	u, err := url.Parse(previewURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("session_expose answered no URL: %v", out)
	}
	// The person's first visit sets the cookie; the rounds carry it.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: time.Minute}
	res, err := hc.Get(previewURL)
	if err != nil {
		return nil, err
	}
	res.Body.Close()
	cookie := ""
	for _, ck := range jar.Cookies(u) {
		cookie = ck.Name + "=" + ck.Value
	}
	box, err := exec.Command("docker", "ps", "-q", "--filter", "label="+sandbox.LabelSession+"="+sandbox.SessionKey(id)).Output()
	if err != nil || len(bytes.Fields(box)) != 1 {
		return nil, fmt.Errorf("the session's box: %q %v", box, err)
	}
	ctr := string(bytes.TrimSpace(box))

	paths := []struct {
		name string
		get  func() (ttfb, total time.Duration, err error)
	}{
		{"session_expose URL, from the host", func() (time.Duration, time.Duration, error) { return exposedGet(u.Host, cookie) }},
		{"docker exec curl in the box, to the host", func() (time.Duration, time.Duration, error) { return execGet(ctr) }},
		{"curl in the box (its own timing)", func() (time.Duration, time.Duration, error) { return inBoxGet(ctr) }},
	}
	ttfb, total := make([][]float64, len(paths)), make([][]float64, len(paths))
	fails := make([]string, len(paths))
	for i, p := range paths {
		// A warm-up each: the app's first answer, the exec's first start.
		if _, _, err := p.get(); err != nil {
			fails[i] = err.Error()
		}
	}
	for round := range n {
		for j := range paths {
			i := j
			if round%2 == 1 {
				i = len(paths) - 1 - j
			}
			if fails[i] != "" {
				continue
			}
			f, w, err := paths[i].get()
			if err != nil {
				fails[i] = err.Error()
				continue
			}
			ttfb[i] = append(ttfb[i], float64(f.Microseconds())/1000)
			total[i] = append(total[i], float64(w.Microseconds())/1000)
		}
	}
	var rows []previewRow
	for i, p := range paths {
		r := previewRow{runtime: rt, path: p.name, n: n, failure: fails[i]}
		if r.failure == "" {
			slices.Sort(ttfb[i])
			slices.Sort(total[i])
			r.ttfbMs, r.totalMs = pct(ttfb[i], 0.5), pct(total[i], 0.5)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// exposedGet downloads /big through the exposure on a new connection:
// the time to the answer's first byte and to its last.
func exposedGet(host, cookie string) (time.Duration, time.Duration, error) {
	t0 := time.Now()
	conn, err := net.DialTimeout("tcp", host, 10*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET /big HTTP/1.1\r\nHost: %s\r\nCookie: %s\r\nConnection: close\r\n\r\n", host, cookie)
	br := bufio.NewReaderSize(conn, 64<<10)
	if _, err := br.Peek(1); err != nil {
		return 0, 0, err
	}
	first := time.Since(t0)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, 0, err
	}
	k, err := io.Copy(io.Discard, res.Body)
	if err != nil || k != previewSize || res.StatusCode != 200 {
		return 0, 0, fmt.Errorf("the exposure's download: %d, %d bytes, %v", res.StatusCode, k, err)
	}
	return first, time.Since(t0), nil
}

// execGet downloads /big with curl in the box, its output streamed to
// the host by `docker exec`.
func execGet(ctr string) (time.Duration, time.Duration, error) {
	t0 := time.Now()
	cmd := exec.Command("docker", "exec", ctr, "curl", "-sS", "http://127.0.0.1:8000/big")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	br := bufio.NewReaderSize(out, 64<<10)
	_, perr := br.Peek(1)
	first := time.Since(t0)
	k, _ := io.Copy(io.Discard, br)
	if err := cmd.Wait(); err != nil || perr != nil || k != previewSize {
		return 0, 0, fmt.Errorf("docker exec curl: %d bytes, %v %v %s", k, err, perr, strings.TrimSpace(stderr.String()))
	}
	return first, time.Since(t0), nil
}

// inBoxGet is curl's own timing of /big in the box: to the first byte
// and to the last, with no transport to the host.
func inBoxGet(ctr string) (time.Duration, time.Duration, error) {
	out, err := exec.Command("docker", "exec", ctr, "curl", "-sS", "-o", "/dev/null", "-w", "%{time_starttransfer} %{time_total} %{size_download}", "http://127.0.0.1:8000/big").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("docker exec curl: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 || f[2] != strconv.Itoa(previewSize) {
		return 0, 0, fmt.Errorf("curl's timing: %q", out)
	}
	first, _ := strconv.ParseFloat(f[0], 64)
	total, _ := strconv.ParseFloat(f[1], 64)
	return time.Duration(first * float64(time.Second)), time.Duration(total * float64(time.Second)), nil
}
