//go:build linux

package boxinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// hostPair is a Host over net.Pipe and the server's session that accepts
// its streams.
func hostPair(t *testing.T) (*Host, *yamux.Session) {
	t.Helper()
	a, b := net.Pipe()
	box, err := yamux.Server(a, initproto.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	server, err := yamux.Client(b, initproto.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = box.Close(); _ = server.Close() })
	return NewHost(box), server
}

// answerStreams serves the host's side of every stream the box opens, as
// the server would: each stream's header and blobs in, answer's one blob
// back.
func answerStreams(server *yamux.Session, answer func(h initproto.Header, blobs [][]byte) []byte) {
	go func() {
		for {
			st, err := server.AcceptStream()
			if err != nil {
				return
			}
			go func() {
				var h initproto.Header
				blobs, _ := initproto.Receive(st, &h, 1<<20)
				_ = initproto.Send(st, struct{}{}, answer(h, blobs))
				_ = st.Close()
			}()
		}
	}()
}

func TestHost(t *testing.T) {
	t.Run("a stream carries its kind, data and blobs, and the answer back", func(t *testing.T) {
		host, server := hostPair(t)
		go func() {
			st, err := server.AcceptStream()
			if err != nil {
				return
			}
			var h initproto.Header
			blobs, _ := initproto.Receive(st, &h, 1<<20)
			_ = initproto.Send(st, map[string]string{"kind": h.Kind, "data": string(h.Data)}, blobs...)
			_ = st.Close()
		}()
		hs, err := host.Open(context.Background(), "tool", map[string]int{"n": 1}, []byte("blob"))
		if err != nil {
			t.Fatal(err)
		}
		defer hs.Close()
		var got map[string]string
		blobs, err := initproto.Receive(hs, &got, 1<<20)
		if err != nil || got["kind"] != "tool" || got["data"] != `{"n":1}` || string(blobs[0]) != "blob" {
			t.Fatalf("answer %v %q %v", got, blobs, err)
		}
	})

	t.Run("no more than MaxBoxStreams are open at once; a closed one frees its place when the server lets go", func(t *testing.T) {
		host, server := hostPair(t)
		var open, peak atomic.Int64
		go func() {
			for {
				st, err := server.AcceptStream()
				if err != nil {
					return
				}
				n := open.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				go func() {
					time.Sleep(5 * time.Millisecond)
					// The server's side counts the stream as done before
					// the box can see its end, as initproto.BoxStream does.
					open.Add(-1)
					_, _ = st.Write([]byte("answer not read to its end\n"))
					_ = st.Close()
				}()
			}
		}()
		var wg sync.WaitGroup
		for range 5 * initproto.MaxBoxStreams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				hs, err := host.Open(context.Background(), "tool", nil)
				if err != nil {
					t.Error(err)
					return
				}
				_ = hs.Close() // before the answer: drained in the background
			}()
		}
		wg.Wait()
		if p := peak.Load(); p > initproto.MaxBoxStreams || p < 2 {
			t.Fatalf("the server saw %d streams open at once, the bound is %d", p, initproto.MaxBoxStreams)
		}
	})

	t.Run("Open waits for a place and gives up with its context", func(t *testing.T) {
		host, server := hostPair(t)
		go func() {
			for {
				if _, err := server.AcceptStream(); err != nil {
					return
				}
			}
		}()
		for range initproto.MaxBoxStreams {
			if _, err := host.Open(context.Background(), "hold", nil); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := host.Open(ctx, "hold", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("open past the bound: %v", err)
		}
	})

	t.Run("a Host without a channel says so", func(t *testing.T) {
		var host *Host
		if _, err := host.Open(context.Background(), "tool", nil); !errors.Is(err, ErrNoHost) {
			t.Fatalf("err %v", err)
		}
	})
}

// recorder is a Service that notes its start and stop.
type recorder struct {
	log  *[]string
	fail bool
}

func (r recorder) Start(ctx context.Context, host *Host, job *initproto.Job) (func(), error) {
	if r.fail {
		return nil, errors.New("no socket")
	}
	*r.log = append(*r.log, "start")
	return func() { *r.log = append(*r.log, "stop") }, nil
}

func TestServices(t *testing.T) {
	t.Run("a service starts before the program and stops after it", func(t *testing.T) {
		var log []string
		job := bashJob(t, `echo ran`)
		rep, _ := Run(context.Background(), job, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{},
			Services: []Service{recorder{log: &log}}})
		if rep.InitError != "" || strings.TrimSpace(string(rep.Stdout)) != "ran" || strings.Join(log, ",") != "start,stop" {
			t.Fatalf("report %+v, log %v", rep, log)
		}
	})
	t.Run("a service that cannot start is an init error, and those started are stopped", func(t *testing.T) {
		var log []string
		job := bashJob(t, `echo ran`)
		rep, _ := Run(context.Background(), job, Options{Self: os.Args[0], CgroupRoot: t.TempDir(), Scratch: []string{},
			Services: []Service{recorder{log: &log}, recorder{fail: true}}})
		if !strings.Contains(rep.InitError, "no socket") || strings.Join(log, ",") != "start,stop" {
			t.Fatalf("report %+v, log %v", rep, log)
		}
	})
}

func TestToolCallsService(t *testing.T) {
	host, server := hostPair(t)
	answerStreams(server, func(h initproto.Header, blobs [][]byte) []byte {
		return append([]byte(h.Kind+":"), blobs[0]...)
	})
	sock := filepath.Join(t.TempDir(), "s", "tools.sock")
	svc := toolCalls{socket: sock, lib: filepath.Join(t.TempDir(), "lib")}
	stop, err := svc.Start(context.Background(), host, &initproto.Job{})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := os.Stat(sock); err == nil {
		t.Fatal("a job whose server serves no tool calls got a socket")
	}
	stop, err = svc.Start(context.Background(), host, &initproto.Job{Streams: []string{initproto.StreamTool}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			req := fmt.Sprintf(`{"n":%d}`, i)
			_, _ = c.Write([]byte(req))
			_ = c.(*net.UnixConn).CloseWrite()
			got, _ := io.ReadAll(c)
			if string(got) != "tool:"+req {
				t.Errorf("answer %q", got)
			}
		}()
	}
	wg.Wait()
	stop()
	if _, err := os.Stat(sock); err == nil {
		t.Fatal("the socket outlived the service")
	}
}

func TestWriteLibraries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lib")
	if err := writeLibraries(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"runbox_tools.py", "runbox_tools.js"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || len(b) < 100 {
			t.Fatalf("%s: %v", f, err)
		}
	}
}
