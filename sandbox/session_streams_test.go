package sandbox

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/boxinit"
	"github.com/runbox-mcp/runbox/internal/initproto"
)

// streams plays the box's side of the stream tests' cells; false for a
// cell that is not one of them:
//
//	tool N   N tool calls while the cell runs; stdout is their answers
//	late     after the report, on the test's go-ahead, one tool call;
//	         what came back goes to b.late
//	stuck    a stream that never sends its first message, left open
//	flood N  after the report, on the go-ahead, N tool streams at once
//	bogus    a stream of a kind the server does not serve
//	waiting  a tool call, then, once interrupted, whether it still waits
//	stale    a tool call stamped with the previous call's Call, as if
//	         opened during it and late to reach the server
func (b *fakeSessionBox) streams(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) bool {
	word, arg, _ := strings.Cut(string(job.Code), " ")
	n, _ := strconv.Atoi(arg)
	host := boxinit.NewHost(sess).ForCall(job.Call)
	b.mu.Lock()
	previous := b.call
	b.call = job.Call
	b.mu.Unlock()
	var out []string
	var after func()
	switch word {
	case "tool":
		out = callsOn(host, initproto.StreamTool, n, 4)
	case "stale":
		out = callsOn(boxinit.NewHost(sess).ForCall(previous), initproto.StreamTool, 1, 1)
	case "late":
		after = func() { b.late <- strings.Join(callsOn(host, initproto.StreamTool, 1, 1), "") }
	case "stuck":
		if _, err := sess.OpenStream(); err != nil {
			out = []string{err.Error()}
		}
	case "flood":
		after = func() {
			for range n {
				hs, err := host.Open(context.Background(), initproto.StreamTool, nil)
				if err != nil {
					break
				}
				go func() { _, _ = hs.Read(make([]byte, 1)); _ = hs.Close() }()
			}
			b.late <- "sent"
		}
	case "bogus":
		out = callsOn(host, "bogus", 1, 1)
	case "waiting":
		answer := make(chan string, 1)
		go func() { answer <- strings.Join(callsOn(host, initproto.StreamTool, 1, 1), "") }()
		<-b.interrup
		select {
		case a := <-answer:
			out = []string{"the call ended first: " + a}
		default:
			out = []string{"still waiting"}
		}
	default:
		return false
	}
	b.mu.Lock()
	b.calls++
	b.kinds = job.Streams
	rep := &initproto.Report{Session: &initproto.SessionState{Calls: b.calls}, Stderr: []byte{}, Stdout: []byte(strings.Join(out, ","))}
	b.mu.Unlock()
	_ = initproto.SendReport(st, rep)
	_ = st.Close()
	if after != nil {
		<-b.after
		after()
	}
	return true
}

// tagged serves tool streams with an answer naming the call (tag) and
// counts them.
func tagged(ctx context.Context, tag string, served *atomic.Int64) context.Context {
	return WithStreams(ctx, &Streams{Handlers: map[string]StreamHandler{initproto.StreamTool: StreamHandlerFunc(func(ctx context.Context, s *BoxStream) {
		served.Add(1)
		var data map[string]int
		_ = json.Unmarshal(s.Header.Data, &data)
		_ = initproto.Send(s, data, []byte(tag))
	})}})
}

func TestSessionStreams(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T) (*fakeSessionDriver, *BoxRunner, func(ctx context.Context, code string) contract.Result) {
		t.Helper()
		d, r, m := sessionRunner(t, nil)
		lang, _ := m.Language("python")
		info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
		if fail != nil {
			t.Fatal(fail)
		}
		return d, r, func(ctx context.Context, code string) contract.Result {
			job := testJob(t, m, 5*time.Second)
			job.Code = code
			return r.RunInSession(ctx, info.ID, "c", job)
		}
	}

	t.Run("each call's tool streams reach that call's handlers", func(t *testing.T) {
		d, _, call := open(t)
		var one, two atomic.Int64
		res := call(tagged(ctx, "first", &one), "tool 6")
		if res.Status != contract.StatusOK || res.Stdout != "0:first,1:first,2:first,3:first,4:first,5:first" || one.Load() != 6 {
			t.Fatalf("first call: %+v %q, %d served", res.Error, res.Stdout, one.Load())
		}
		if k := d.sboxs[0].kinds; len(k) != 1 || k[0] != initproto.StreamTool {
			t.Fatalf("the job named the kinds %v", k)
		}
		res = call(tagged(ctx, "second", &two), "tool 2")
		if res.Stdout != "0:second,1:second" || one.Load() != 6 || two.Load() != 2 {
			t.Fatalf("second call: %q, %d and %d served", res.Stdout, one.Load(), two.Load())
		}
		if res.Session.State != contract.SessionAlive || res.Session.Call != 2 {
			t.Fatalf("session %+v", res.Session)
		}
	})

	t.Run("a call without handlers names none, and its box may open none", func(t *testing.T) {
		d, _, call := open(t)
		mustState := func(res contract.Result, want string) {
			t.Helper()
			if res.Session == nil || res.Session.State != want {
				t.Fatalf("%+v %+v", res.Error, res.Session)
			}
		}
		res := call(ctx, "late")
		mustState(res, contract.SessionAlive)
		if d.sboxs[0].kinds != nil {
			t.Fatalf("kinds %v", d.sboxs[0].kinds)
		}
		d.sboxs[0].after <- struct{}{}
		<-d.sboxs[0].late
		res = call(ctx, "bogus")
		mustState(res, contract.SessionLost)
		if res.Error == nil || res.Error.Kind != contract.KindSandbox || !strings.Contains(res.Error.Message, `a "bogus" stream`) {
			t.Fatalf("a stream nothing serves: %+v", res.Error)
		}
		if res := call(ctx, "tool 1"); res.Error == nil || res.Error.Kind != contract.KindSessionLost {
			t.Fatalf("after the violation: %+v", res.Error)
		}
	})

	t.Run("a stream opened between calls is refused, never served by a past call's handlers", func(t *testing.T) {
		d, _, call := open(t)
		var served atomic.Int64
		if res := call(tagged(ctx, "first", &served), "late"); res.Status != contract.StatusOK {
			t.Fatalf("first call: %+v", res.Error)
		}
		d.sboxs[0].after <- struct{}{}
		select {
		case got := <-d.sboxs[0].late:
			if !strings.HasPrefix(got, "receive: ") || served.Load() != 0 {
				t.Fatalf("the late call got %q, %d served", got, served.Load())
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the late stream hangs")
		}
		var next atomic.Int64
		if res := call(tagged(ctx, "next", &next), "tool 1"); res.Stdout != "0:next" || served.Load() != 0 {
			t.Fatalf("the next call: %+v %q", res.Error, res.Stdout)
		}
		// A stream of the call before, reaching the server during this
		// one, is refused, and this call goes on.
		if res := call(tagged(ctx, "third", &next), "stale"); res.Status != contract.StatusOK || !strings.HasPrefix(res.Stdout, "receive: ") || next.Load() != 1 {
			t.Fatalf("a stale stream: %+v %q, %d served", res.Error, res.Stdout, next.Load())
		}
	})

	t.Run("a flood between calls closes the channel; the next call opens another and the state lives", func(t *testing.T) {
		d, r, call := open(t)
		call(ctx, "kept")
		var served atomic.Int64
		call(tagged(ctx, "t", &served), "flood "+strconv.Itoa(maxIdleStreams+20))
		r.sessionsOf().mu.Lock()
		var ch *channel
		for _, ls := range r.sessionsOf().live {
			ch = ls.ch
		}
		r.sessionsOf().mu.Unlock()
		d.sboxs[0].after <- struct{}{}
		<-d.sboxs[0].late
		select {
		case <-ch.done:
		case <-time.After(5 * time.Second):
			t.Fatal("the flood did not close the channel")
		}
		res := call(ctx, "after")
		if res.Status != contract.StatusOK || res.Stdout != "kept;after" || served.Load() != 0 {
			t.Fatalf("the next call: %+v %q, %d served", res.Error, res.Stdout, served.Load())
		}
	})

	t.Run("a cancelled call's handlers last until its cell was interrupted", func(t *testing.T) {
		_, _, call := open(t)
		var ended atomic.Bool
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		cctx = WithStreams(cctx, &Streams{Handlers: map[string]StreamHandler{initproto.StreamTool: StreamHandlerFunc(func(ctx context.Context, s *BoxStream) {
			<-ctx.Done()
			ended.Store(true)
		})}})
		res := call(cctx, "waiting")
		if res.Stdout != "still waiting" || res.Error == nil || !strings.Contains(res.Error.Message, "interrupted") || res.Session.State != contract.SessionAlive {
			t.Fatalf("cancelled: %q %+v %+v", res.Stdout, res.Error, res.Session)
		}
		if !ended.Load() {
			t.Fatal("the handler outlived its call")
		}
	})

	t.Run("streams left open by a call end with it: nothing waits into the next", func(t *testing.T) {
		_, _, call := open(t)
		var served atomic.Int64
		call(tagged(ctx, "warm", &served), "tool 1")
		time.Sleep(100 * time.Millisecond)
		base := runtime.NumGoroutine()
		for range 5 {
			start := time.Now()
			if res := call(tagged(ctx, "t", &served), "stuck"); res.Status != contract.StatusOK || time.Since(start) > 2*time.Second {
				t.Fatalf("a call with a stuck stream: %+v in %s", res.Error, time.Since(start))
			}
		}
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > base+1 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > base+1 {
			t.Fatalf("%d goroutines after five calls, %d before", n, base)
		}
	})
}
