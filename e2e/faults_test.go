//go:build e2e

package e2e

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/sandbox"
)

// engineProxy stands between a server and the real engine's socket, so a
// test can take "the engine" away, hang it, and bring it back without
// touching the engine the other tests use.
type engineProxy struct {
	t    *testing.T
	path string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	hang  bool
}

func newEngineProxy(t *testing.T) *engineProxy {
	p := &engineProxy{t: t, path: filepath.Join(t.TempDir(), "engine.sock")}
	p.up()
	t.Cleanup(p.down)
	return p
}

func (p *engineProxy) host() string { return "DOCKER_HOST=unix://" + p.path }

// up listens again (the engine is back).
func (p *engineProxy) up() {
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.hang = ln, false
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			hang := p.hang
			p.mu.Unlock()
			if !hang {
				go p.forward(c)
			}
		}
	}()
}

func (p *engineProxy) forward(c net.Conn) {
	e, err := net.Dial("unix", "/var/run/docker.sock")
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, e)
	p.mu.Unlock()
	// Half-closes pass through: an attach stream goes on after the
	// client has closed its side.
	go func() { _, _ = io.Copy(e, c); _ = e.(*net.UnixConn).CloseWrite() }()
	_, _ = io.Copy(c, e)
	_ = c.(*net.UnixConn).CloseWrite()
}

// down stops the engine as a client sees it: every connection is cut and
// new ones are refused.
func (p *engineProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	os.Remove(p.path)
}

// hangAll makes the engine accept connections and never answer.
func (p *engineProxy) hangAll() {
	p.down()
	p.up()
	p.mu.Lock()
	p.hang = true
	p.mu.Unlock()
}

// TestEngineStoppedMidRun: the engine goes away while a box runs. The call
// answers sandbox with a hint, the server stays up, answers while the
// engine is away, recovers by itself when it is back, and removes the box
// it could not remove before.
func TestEngineStoppedMidRun(t *testing.T) {
	p := newEngineProxy(t)
	s := startServer(t, []string{p.host()})
	defer s.close()
	owner := "label=" + sandbox.LabelOwnerPID + "=" + strconv.Itoa(s.cmd.Process.Pid)

	done := make(chan contract.Result, 1)
	go func() {
		r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo started; sleep 3", "timeout_seconds": 30})
		done <- r
	}()
	waitBox(t, owner)
	time.Sleep(300 * time.Millisecond)
	p.down()
	var r contract.Result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not return after the engine went away")
	}
	e := wantError(t, r, contract.KindSandbox, "")
	if !strings.Contains(e.Hint, "runbox recovers by itself") && !strings.Contains(e.Hint, "retry") {
		t.Errorf("hint %q", e.Hint)
	}

	r, _ = s.call(t, map[string]any{"language": "python", "code": "print(1)"})
	if e := wantError(t, r, contract.KindSandbox, ""); !strings.Contains(e.Message, "not reachable") {
		t.Errorf("while the engine is away: %+v", e)
	}

	p.up()
	r, _ = s.call(t, map[string]any{"language": "python", "code": "print('back')"})
	mustOK(t, r)
	if left := waitNoBoxes(20*time.Second, owner); len(left) > 0 {
		t.Fatalf("the box of the cut run was not removed once the engine was back: %v\n%s", left, s.stderr)
	}
}

// TestHungEngineIsBounded: an engine that accepts and never answers costs a
// call the API deadline, not forever.
func TestHungEngineIsBounded(t *testing.T) {
	p := newEngineProxy(t)
	p.hangAll()
	s := startServer(t, []string{p.host()})
	defer func() {
		p.down()
		s.close()
	}()
	start := time.Now()
	r, _ := s.call(t, map[string]any{"language": "python", "code": "print(1)"})
	wantError(t, r, contract.KindSandbox, "")
	if took := time.Since(start); took > 40*time.Second {
		t.Fatalf("a hung engine held the call %s", took)
	}
}
