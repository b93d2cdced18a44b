package kube

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// attachServer is the API server's pods/attach endpoint as client-go's
// SPDY executor speaks to it (protocol v4.channel.k8s.io): it checks the
// request, upgrades the connection with apimachinery's own SPDY upgrader
// and hands the test the four streams the client opens (error, stdin,
// stdout, stderr), so that the test plays the attached box. What it does
// not fake is a kubelet: the real attach (the container runtime's stdin
// and stdout, their end with the box) is e2e's (TestKube*).
type attachServer struct {
	t        *testing.T
	pod, ns  string
	sessions chan *attachSession
}

type attachSession struct {
	conn                        httpstream.Connection
	errs, stdin, stdout, stderr httpstream.Stream
	query                       url.Values
	done                        chan struct{}
}

func (s *attachServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	want := "/api/v1/namespaces/" + s.ns + "/pods/" + s.pod + "/attach"
	if r.Method != http.MethodPost || r.URL.Path != want {
		s.t.Errorf("attach request %s %s, want POST %s", r.Method, r.URL.Path, want)
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{remotecommandconsts.StreamProtocolV4Name}); err != nil {
		return
	}
	streams := make(chan httpstream.Stream, 4)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, _ <-chan struct{}) error {
		streams <- st
		return nil
	})
	if conn == nil {
		return
	}
	as := &attachSession{conn: conn, query: r.URL.Query(), done: make(chan struct{})}
	for range 4 {
		select {
		case st := <-streams:
			switch st.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				as.errs = st
			case corev1.StreamTypeStdin:
				as.stdin = st
			case corev1.StreamTypeStdout:
				as.stdout = st
			case corev1.StreamTypeStderr:
				as.stderr = st
			}
		case <-time.After(30 * time.Second):
			s.t.Error("the client opened fewer than four streams")
			conn.Close()
			return
		}
	}
	s.sessions <- as
	select {
	case <-as.done:
	case <-conn.CloseChan():
	}
}

// end ends the attached box: its status on the error stream (none: a
// clean end), then its streams.
func (as *attachSession) end(status *metav1.Status) {
	if status != nil {
		b, _ := json.Marshal(status)
		_, _ = as.errs.Write(b)
	}
	as.errs.Close()
	as.stdout.Close()
	as.stderr.Close()
	close(as.done)
}

// attachedPod is a pod of a driver whose API server is the attach server.
func attachedPod(t *testing.T) (*pod, *attachServer) {
	t.Helper()
	k := testKube(t, nil)
	s := &attachServer{t: t, pod: "runbox-python-attach", ns: k.ns, sessions: make(chan *attachSession, 1)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	k.cfg = &rest.Config{Host: srv.URL}
	cs, err := kubernetes.NewForConfig(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.cs, k.log = cs, slog.New(slog.DiscardHandler)
	k.live, k.unremoved = map[string]struct{}{}, map[string]bool{}
	return &pod{k: k, name: s.pod, started: time.Now()}, s
}

func (s *attachServer) session(t *testing.T) *attachSession {
	t.Helper()
	select {
	case as := <-s.sessions:
		return as
	case <-time.After(30 * time.Second):
		t.Fatal("the driver did not attach")
		return nil
	}
}

// The channel is the box container's attach stream: stdin, stdout and
// stderr (runbox-init's diagnostics) of the container named box, no TTY;
// a clean end of the box ends the channel's output.
func TestKubeExchange(t *testing.T) {
	p, s := attachedPod(t)
	c, err := p.Exchange(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The streams open when the stream starts: the first write waits for it.
	go func() { _, _ = c.Write([]byte("job\n")) }()
	as := s.session(t)
	q := as.query
	if q.Get("container") != kubeBox || q.Get("stdin") != "true" || q.Get("stdout") != "true" || q.Get("stderr") != "true" || q.Get("tty") == "true" {
		t.Errorf("attach query %v", q)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(as.stdin, buf); err != nil || string(buf) != "job\n" {
		t.Fatalf("stdin %q %v", buf, err)
	}
	_, _ = as.stderr.Write([]byte("init: diag\n"))
	_, _ = as.stdout.Write([]byte("result"))
	out := make([]byte, 6)
	if _, err := io.ReadFull(c, out); err != nil || string(out) != "result" {
		t.Fatalf("stdout %q %v", out, err)
	}
	as.end(nil)
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Errorf("after the box's end: %q %v", rest, err)
	}
	if c.Diag() != "init: diag\n" {
		t.Errorf("diag %q", c.Diag())
	}
}

// The attach fails on the kubelet's side (the container is gone): the
// channel's reader gets the error, not a clean end.
func TestKubeExchangeFailure(t *testing.T) {
	p, s := attachedPod(t)
	c, err := p.Exchange(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = c.Write([]byte("x")) }()
	as := s.session(t)
	as.end(&metav1.Status{Status: metav1.StatusFailure, Message: "container box not found", Reason: metav1.StatusReasonNotFound, Code: 404})
	_, err = io.ReadAll(c)
	if err == nil || !strings.Contains(err.Error(), "container box not found") {
		t.Errorf("read after a failed attach: %v", err)
	}
}

// Close ends the attach stream: the box sees its stdin end, and writes
// fail from then on.
func TestKubeExchangeClose(t *testing.T) {
	p, s := attachedPod(t)
	c, err := p.Exchange(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = c.Write([]byte("x")) }()
	as := s.session(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(as.stdin)
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the box's stdin did not end at Close")
	}
	if _, err := c.Write([]byte("late")); err == nil {
		t.Error("a write after Close succeeded")
	}
	as.end(nil)
}
