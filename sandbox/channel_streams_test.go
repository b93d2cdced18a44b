package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/boxinit"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

// echo answers a stream's request with its Data and blobs, upper-cased.
var echo = initproto.StreamHandlerFunc(func(ctx context.Context, s *initproto.BoxStream) {
	var blobs [][]byte
	for _, b := range s.Blobs {
		blobs = append(blobs, bytes.ToUpper(b))
	}
	_ = initproto.Send(s, s.Header.Data, blobs...)
})

// callHost is a box that, while its job runs, makes n calls of kind
// through boxinit.Host, at most par at once, and reports what came back
// as its stdout.
func callHost(kind string, n, par int) func(*yamux.Session, *yamux.Stream, *initproto.Job) {
	return func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
		out := calls(sess, kind, n, par)
		_ = initproto.SendReport(st, &initproto.Report{Stdout: []byte(strings.Join(out, "\n"))})
		_ = st.Close()
	}
}

// calls makes n calls of kind through boxinit.Host, at most par at once,
// and returns their answers.
func calls(sess *yamux.Session, kind string, n, par int) []string {
	return callsOn(boxinit.NewHost(sess), kind, n, par)
}

// callsOn is calls through host.
func callsOn(host *boxinit.Host, kind string, n, par int) []string {
	{
		out := make([]string, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, par)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				hs, err := host.Open(context.Background(), kind, map[string]int{"i": i}, []byte(fmt.Sprintf("call %d", i)))
				if err != nil {
					out[i] = "open: " + err.Error()
					return
				}
				defer hs.Close()
				_ = hs.CloseWrite()
				var data map[string]int
				blobs, err := initproto.Receive(hs, &data, 1<<20)
				if err != nil {
					out[i] = "receive: " + err.Error()
					return
				}
				out[i] = fmt.Sprintf("%d:%s", data["i"], blobs[0])
			}()
		}
		wg.Wait()
		return out
	}
}

func TestBoxStreams(t *testing.T) {
	m := testManifest(t, nil)

	t.Run("streams the box opens during its run reach the run's handler by kind", func(t *testing.T) {
		d := &fakeDriver{behave: callHost("echo", 200, 64)}
		r := newTestRunner(t, d, m)
		streams := &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"echo": echo}}
		res := r.Run(context.Background(), RunRequest{Job: testJob(t, m, 5*time.Second), Streams: streams})
		if res.Status != contract.StatusOK {
			t.Fatalf("result %+v", res.Error)
		}
		lines := strings.Split(res.Stdout, "\n")
		if len(lines) != 200 || lines[0] != "0:CALL 0" || lines[199] != "199:CALL 199" {
			t.Fatalf("stdout %q", res.Stdout)
		}
	})

	t.Run("the job names the kinds the run serves, so box services offer only these", func(t *testing.T) {
		var got [2][]string
		for i, streams := range []*initproto.Streams{nil, {Handlers: map[string]initproto.StreamHandler{"tool": echo, "net": echo}}} {
			d := &fakeDriver{behave: func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
				got[i] = job.Streams
				reply(initproto.Report{})(sess, st, job)
			}}
			r := newTestRunner(t, d, m)
			if res := r.Run(context.Background(), RunRequest{Job: testJob(t, m, 5*time.Second), Streams: streams}); res.Status != contract.StatusOK {
				t.Fatalf("result %+v", res.Error)
			}
		}
		if got[0] != nil || strings.Join(got[1], ",") != "net,tool" {
			t.Fatalf("kinds %q", got)
		}
	})

	t.Run("artifacts are still collected after the report", func(t *testing.T) {
		art := bytes.Repeat([]byte("a"), 100000)
		d := &fakeDriver{behave: func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			if out := calls(sess, "echo", 3, 3); out[2] != "2:CALL 2" {
				return
			}
			reply(initproto.Report{Artifacts: []initproto.Artifact{{Path: "a", Size: int64(len(art)), Sent: true}}}, art)(sess, st, job)
		}}
		r := newTestRunner(t, d, m)
		streams := &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"echo": echo}}
		res := r.Run(context.Background(), RunRequest{Job: testJob(t, m, 5*time.Second), Streams: streams})
		if res.Status != contract.StatusOK || len(res.Artifacts) != 1 || !bytes.Equal(res.Artifacts[0].Data, art) {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("a handler's context ends with the run", func(t *testing.T) {
		ended := make(chan struct{})
		hold := initproto.StreamHandlerFunc(func(ctx context.Context, s *initproto.BoxStream) {
			<-ctx.Done()
			close(ended)
		})
		d := &fakeDriver{behave: func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			hs, err := boxinit.NewHost(sess).Open(context.Background(), "hold", nil)
			if err != nil {
				return
			}
			defer hs.Close()
			time.Sleep(50 * time.Millisecond)
			_ = initproto.SendReport(st, &initproto.Report{})
			_ = st.Close()
		}}
		r := newTestRunner(t, d, m)
		streams := &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"hold": hold}}
		if res := r.Run(context.Background(), RunRequest{Job: testJob(t, m, 5*time.Second), Streams: streams}); res.Status != contract.StatusOK {
			t.Fatalf("result %+v", res.Error)
		}
		select {
		case <-ended:
		case <-time.After(2 * time.Second):
			t.Fatal("the handler still runs after its run ended")
		}
	})

	t.Run("a run with streams is not answered from the cache", func(t *testing.T) {
		var runs atomic.Int64
		d := &fakeDriver{behave: func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			runs.Add(1)
			reply(initproto.Report{})(sess, st, job)
		}}
		mc := testManifest(t, nil)
		mc.Cache.Enabled = true
		r := newTestRunner(t, d, mc)
		c := NewCache(r, mc, r.ImageDigest)
		streams := &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"echo": echo}}
		for range 2 {
			if res := c.Run(context.Background(), RunRequest{Job: testJob(t, mc, 5*time.Second), Streams: streams}); res.Status != contract.StatusOK {
				t.Fatalf("result %+v", res.Error)
			}
		}
		if runs.Load() != 2 {
			t.Fatalf("%d runs reached a box, want 2", runs.Load())
		}
	})

	t.Run("a first message past the bytes is its handler's refusal when it refuses, and the run goes on", func(t *testing.T) {
		d := &fakeDriver{behave: func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			host := boxinit.NewHost(sess)
			var out []string
			for _, size := range []int{3 << 20, 10, 3 << 20, 20} {
				hs, err := host.Open(context.Background(), "tool", nil, make([]byte, size))
				if err != nil {
					out = append(out, "open: "+err.Error())
					continue
				}
				_ = hs.CloseWrite()
				var data struct{}
				blobs, err := initproto.Receive(hs, &data, 1<<20)
				_ = hs.Close()
				if err != nil {
					out = append(out, "receive: "+err.Error())
					continue
				}
				out = append(out, string(blobs[0]))
			}
			_ = initproto.SendReport(st, &initproto.Report{Stdout: []byte(strings.Join(out, ","))})
			_ = st.Close()
		}}
		r := newTestRunner(t, d, m)
		streams := &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"tool": sizeOrRefuse{}}, MaxBytes: 1 << 20}
		res := r.Run(context.Background(), RunRequest{Job: testJob(t, m, 20*time.Second), Streams: streams})
		if res.Status != contract.StatusOK || res.Stdout != "refused,10,refused,20" || d.killed.Load() != 0 {
			t.Fatalf("result %+v, stdout %q, killed %d", res.Error, res.Stdout, d.killed.Load())
		}
	})

	flood := func(n int, kind string) func(*yamux.Session, *yamux.Stream, *initproto.Job) {
		return func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			for range n {
				s, err := sess.OpenStream()
				if err != nil {
					return
				}
				if initproto.Send(s, initproto.Header{Kind: kind}) != nil {
					return
				}
			}
			<-sess.CloseChan()
		}
	}
	block := initproto.StreamHandlerFunc(func(ctx context.Context, s *initproto.BoxStream) { <-ctx.Done() })
	cases := []struct {
		name    string
		streams *initproto.Streams
		behave  func(*yamux.Session, *yamux.Stream, *initproto.Job)
		want    string
	}{
		{"a kind the run does not serve", &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"echo": echo}}, flood(1, "shell"), `"shell" stream, which this run does not serve`},
		{"any kind when the run serves none", nil, flood(1, "echo"), `"echo" stream, which this run does not serve`},
		{"more streams open at once than the bound", &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"hold": block}, MaxOpen: 4}, flood(5, "hold"), "more than 4 streams open at once"},
		{"more streams than a run may", &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"echo": echo}, MaxTotal: 10}, flood(40, "echo"), "more than the 10 streams a run may"},
		{"a first message past the bytes", &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"echo": echo}, MaxBytes: 1 << 20}, func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			s, _ := sess.OpenStream()
			_ = initproto.Send(s, initproto.Header{Kind: "echo"}, make([]byte, 2<<20))
			<-sess.CloseChan()
		}, "more than the 1048576 bytes its streams may"},
		{"bytes past the bound after the first message", &initproto.Streams{Handlers: map[string]initproto.StreamHandler{"sink": initproto.StreamHandlerFunc(func(ctx context.Context, s *initproto.BoxStream) {
			_, _ = io.Copy(io.Discard, s)
		})}, MaxBytes: 1 << 20}, func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			s, _ := sess.OpenStream()
			_ = initproto.Send(s, initproto.Header{Kind: "sink", Data: json.RawMessage(`{}`)})
			chunk := make([]byte, 64<<10)
			for range 64 {
				if _, err := s.Write(chunk); err != nil {
					break
				}
			}
			<-sess.CloseChan()
		}, "more than the 1048576 bytes its streams may"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := &fakeDriver{behave: c.behave}
			r := newTestRunner(t, d, m)
			start := time.Now()
			res := r.Run(context.Background(), RunRequest{Job: testJob(t, m, 5*time.Second), Streams: c.streams})
			if res.Error == nil || res.Error.Kind != contract.KindSandbox || !strings.Contains(res.Error.Message, c.want) {
				t.Fatalf("result %+v", res.Error)
			}
			if !strings.Contains(res.Error.Message, "broke the channel protocol") || d.killed.Load() == 0 {
				t.Fatalf("the box was believed or not killed: %+v, killed %d", res.Error, d.killed.Load())
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("took %s", took)
			}
		})
	}
}

// sizeOrRefuse answers a request with its size, and refuses one too large.
type sizeOrRefuse struct{}

func (sizeOrRefuse) ServeStream(ctx context.Context, s *initproto.BoxStream) {
	_ = initproto.Send(s, struct{}{}, []byte(fmt.Sprint(len(s.Blobs[0]))))
}

func (sizeOrRefuse) RefuseStream(ctx context.Context, s *initproto.BoxStream) {
	_ = initproto.Send(s, struct{}{}, []byte("refused"))
}
