//go:build linux

package boxinit

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// testRelay listens on an abstract name of this test's own; notRoot makes
// it take every connection for a non-root one's.
func testRelay(t *testing.T) (*relay, string, *atomic.Bool) {
	t.Helper()
	name := fmt.Sprintf("@runbox-test-relay-%d-%s", os.Getpid(), t.Name())
	var notRoot atomic.Bool
	rl, err := listenRelay(name, func(c net.Conn) bool { return fromRoot(c) && !notRoot.Load() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rl.l.Close() })
	return rl, name, &notRoot
}

// dialRelay connects as `runbox-init relay` does and returns the
// connection with the first byte it was answered (0 for none).
func dialRelay(t *testing.T, name string) (net.Conn, byte) {
	t.Helper()
	c, err := net.Dial("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return c, 0
	}
	_ = c.SetReadDeadline(time.Time{})
	return c, b[0]
}

// dialReady dials until the relay is no longer busy: the box may not yet
// have read the end of its stdin.
func dialReady(t *testing.T, name string) net.Conn {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, got := dialRelay(t, name)
		if got == initproto.RelayReady {
			return c
		}
		if got != initproto.RelayBusy || time.Now().After(end) {
			t.Fatalf("the relay was answered %q, want ready", got)
		}
	}
}

// relayChannel opens a channel over a relay connection as a restarted
// server does over a new attach.
func relayChannel(t *testing.T, c net.Conn, nonce byte) (*yamux.Session, *initproto.ResetWriter) {
	t.Helper()
	w := initproto.NewResetWriter(c)
	return openChannel(t, w, c, c, nonce, false), w
}

// TestOneOffRelayAfterStdinEnds: on Podman a box's stdin ends with its
// server's attach. The relay is busy while stdin is open, refuses a
// non-root peer, and once stdin has ended serves the channel a restarted
// server collects the run on; a newer relay replaces an older one, and the
// server's end of the channel lets the box exit.
func TestOneOffRelayAfterStdinEnds(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	rl, name, notRoot := testRelay(t)
	b := startOneOffWith(t, rl)
	first := b.connect(1, true)
	if _, got := dialRelay(t, name); got != initproto.RelayBusy {
		t.Fatalf("a relay while stdin is open was answered %q, want busy", got)
	}
	startKeptJob(t, first, "r_relayed")
	_ = b.inW.Close() // the server's attach is gone, and stdin with it
	go func() { _, _ = io.Copy(io.Discard, b.att.attach()) }()

	notRoot.Store(true)
	if _, got := dialRelay(t, name); got != 0 {
		t.Fatalf("a non-root peer was answered %q", got)
	}
	notRoot.Store(false)
	older := dialReady(t, name)
	c, got := dialRelay(t, name)
	if got != initproto.RelayReady {
		t.Fatalf("the newer relay was answered %q, want ready", got)
	}
	_ = older.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := older.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the older relay was not ended: %v", err)
	}
	sess, w := relayChannel(t, c, 2)
	rep, arts, err := collectRun(t, sess, initproto.Header{Kind: initproto.StreamCollect, Run: "r_relayed"}, nil)
	if err != nil || string(rep.Stdout) != "done\n" || rep.ExitCode != 0 || len(arts) != 2 || arts[0] != "kept" {
		t.Fatalf("collected %+v %q %v", rep, arts, err)
	}
	_ = w.End()
	if code := b.exited(10 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestOneOffWithoutJobExitsAtStdinEnd: stdin ending before any job leaves
// nothing to collect: the box exits, relay or not.
func TestOneOffWithoutJobExitsAtStdinEnd(t *testing.T) {
	rl, _, _ := testRelay(t)
	b := startOneOffWith(t, rl)
	_ = b.inW.Close()
	if code := b.exited(10 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestSessionRelayAfterStdinEnds: a session box whose stdin ended serves
// its next cells over the relay, with the state the cells before left.
func TestSessionRelayAfterStdinEnds(t *testing.T) {
	s, _ := newTestSession(t, "bash", "bash")
	rl, name, _ := testRelay(t)
	b, job := serveTestSession(t, s, rl, nil)
	first := b.connect(1, false)
	if rep, _, err := collectRun(t, first, initproto.Header{}, job("X=kept", "r_1")); err != nil || rep.ExitCode != 0 {
		t.Fatalf("the first cell: %+v %v", rep, err)
	}
	_ = b.inW.Close()
	go func() { _, _ = io.Copy(io.Discard, b.att.attach()) }()
	sess, _ := relayChannel(t, dialReady(t, name), 2)
	if rep, _, err := collectRun(t, sess, initproto.Header{}, job("echo $X", "r_2")); err != nil || string(rep.Stdout) != "kept\n" || rep.Session.Calls != 2 {
		t.Fatalf("the cell over the relay: %+v %v", rep, err)
	}
}

// serveTestSession serves s as a session box does, stdin a pipe, with
// relay rl and direct socket dl (either nil); job is a cell's job.
func serveTestSession(t *testing.T, s *session, rl *relay, dl *direct) (*oneOffBox, func(code, id string) *initproto.Job) {
	t.Helper()
	inR, inW := io.Pipe()
	t.Cleanup(func() { _ = inW.Close() })
	att := &attachments{}
	go serveSession(inR, att, s, rl, dl)
	job := func(code, id string) *initproto.Job {
		return &initproto.Job{Dir: s.spec.Dir, CodePath: s.spec.CodePath, Code: []byte(code), TimeoutMs: 60000,
			MaxOutputBytes: 1 << 16, MaxArtifacts: 10, MaxArtifactBytes: 1 << 20, RunID: id}
	}
	return &oneOffBox{t: t, inW: inW, w: initproto.NewResetWriter(inW), att: att}, job
}

// TestRelayMainJoinsStdioToTheSocket: `runbox-init relay` copies both
// ways and ends when the box closes the connection.
func TestRelayMainJoinsStdioToTheSocket(t *testing.T) {
	name := fmt.Sprintf("@runbox-test-relaymain-%d", os.Getpid())
	l, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		buf := make([]byte, 5)
		_, _ = io.ReadFull(c, buf)
		_, _ = c.Write(bytes.ToUpper(buf))
		_ = c.Close()
	}()
	var out bytes.Buffer
	inR, inW := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- relayMain(inR, &out, name) }()
	_, _ = inW.Write([]byte("hello"))
	select {
	case code := <-done:
		if code != 0 || out.String() != "HELLO" {
			t.Fatalf("exit %d, out %q", code, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the relay did not end with the connection")
	}
	if code := relayMain(inR, &out, name+"-none"); code != 1 {
		t.Fatalf("a relay with no socket exits %d", code)
	}
}
