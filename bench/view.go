package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// viewBench (`--only view`) measures the MCP Apps view in headless
// Chromium: the time from tools/call to the view painted with the result,
// the view mounted while the call runs as a host does, against the same
// call without a view, interleaved round by round, and the view's own
// share: from the result handed to it to painted. The host is the view's
// end-to-end test host (e2e/view, run by node from --view-host): ext-apps'
// AppBridge over the reference TypeScript SDK client and streamable HTTP.
func viewBench(bin, hostDir string, n int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "bench-view"
	srv := exec.Command(bin, "serve", "--transport", "http", "--listen", addr)
	srv.Env = append(os.Environ(), "RUNBOX_AUTH_TOKEN="+token)
	if *serverLog != "" {
		if f, err := os.OpenFile(*serverLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			defer f.Close()
			srv.Stderr = f
		}
	}
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		_ = srv.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = srv.Process.Kill()
		}
	}()
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			return fmt.Errorf("the server did not listen on %s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dir, err := filepath.Abs(hostDir)
	if err != nil {
		return err
	}
	cmd := exec.Command("node", "view.mjs", "bench", "http://"+addr+"/mcp", token, fmt.Sprint(n))
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("view host: %v\n%s", err, stderr.String())
	}
	var r struct {
		Rounds    int     `json:"rounds"`
		CallP50Ms float64 `json:"call_p50_ms"`
		ViewP50Ms float64 `json:"view_p50_ms"`
		PaintP50  float64 `json:"paint_p50_ms"`
		ViewMinMs float64 `json:"view_min_ms"`
		ViewMaxMs float64 `json:"view_max_ms"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		return fmt.Errorf("view host said %q: %v", out, err)
	}
	fmt.Println("| headless Chromium, AppBridge host | rounds | p50 ms | min ms | max ms |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: |")
	fmt.Printf("| run_code print(i): tools/call answered, no view | %d | %.0f | | |\n", r.Rounds, r.CallP50Ms)
	fmt.Printf("| run_code print(i): tools/call to the view painted | %d | %.0f | %.0f | %.0f |\n", r.Rounds, r.ViewP50Ms, r.ViewMinMs, r.ViewMaxMs)
	fmt.Printf("| the result handed to the view, to painted | %d | %.0f | | |\n", r.Rounds, r.PaintP50)
	return nil
}
