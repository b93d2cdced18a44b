package sandbox

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// peekingBox is a box that answers each peek as answer says until release
// is closed, then reports.
func peekingBox(answer func(st *yamux.Stream, max int), release <-chan struct{}) func(*yamux.Session, *yamux.Stream, *initproto.Job) {
	return func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
		go func() {
			for {
				ps, err := sess.AcceptStream()
				if err != nil {
					return
				}
				go func() {
					defer ps.Close()
					var h initproto.Header
					if _, err := initproto.Receive(ps, &h, 4<<10); err != nil || h.Kind != initproto.StreamPeek {
						return
					}
					_ = ps.SetWriteDeadline(time.Now().Add(5 * time.Second))
					answer(ps, initproto.PeekBound(h))
				}()
			}
		}()
		<-release
		reply(initproto.Report{Stdout: []byte("all of it\n")})(sess, st, job)
	}
}

// TestPeek: a run's output so far is asked of its box by run id while it
// runs; a box that answers late, too much or nonsense is not known, and
// the run goes on to its own result, whatever its peeks met.
func TestPeek(t *testing.T) {
	cases := []struct {
		name   string
		answer func(st *yamux.Stream, max int)
		want   *Peek
	}{
		{"an answer", func(st *yamux.Stream, max int) {
			_ = initproto.SendPeek(st, &initproto.Peek{Running: true, Stdout: []byte("so far\n"), StdoutBytes: 7, Stderr: []byte("bad \xff\n"), StderrBytes: 6})
		}, &Peek{Stdout: "so far\n", StdoutBytes: 7, Stderr: "bad \uFFFD\n", StderrBytes: 6}},
		{"nothing running yet", func(st *yamux.Stream, max int) {
			_ = initproto.SendPeek(st, &initproto.Peek{Stdout: []byte{}, Stderr: []byte{}})
		}, nil},
		{"no answer", func(st *yamux.Stream, max int) { time.Sleep(2 * PeekWait) }, nil},
		{"nonsense", func(st *yamux.Stream, max int) { _, _ = st.Write([]byte("not json\n")) }, nil},
		{"more than it may", func(st *yamux.Stream, max int) {
			big := bytes.Repeat([]byte("x"), 200<<10)
			_ = initproto.SendPeek(st, &initproto.Peek{Running: true, Stdout: big, StdoutBytes: int64(len(big)), Stderr: []byte{}})
		}, nil},
		{"more than it counts", func(st *yamux.Stream, max int) {
			_ = initproto.SendPeek(st, &initproto.Peek{Running: true, Stdout: bytes.Repeat([]byte("x"), max), StdoutBytes: 3, Stderr: []byte{}})
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free)
			d := &fakeDriver{behave: peekingBox(tc.answer, release)}
			m := testManifest(t, func(m *manifest.Manifest) {
				// A small channel bound: many peeks of a box that answers
				// too much must not make the run a flood.
				m.Limits.OutputBytes, m.Limits.ArtifactBytes = 64*manifest.KiB, manifest.MiB
			})
			r := newTestRunner(t, d, m)
			if _, ok := r.Peek(context.Background(), "r_test"); ok {
				t.Fatal("a peek of a run that is not going on")
			}
			done := make(chan contract.Result, 1)
			go func() { done <- r.Run(context.Background(), RunRequest{Job: testJob(t, m, time.Minute)}) }()
			// The run is on its channel once a well-behaved box answers.
			deadline := time.Now().Add(20 * time.Second)
			peeks := 0
			for peeks < 40 {
				t0 := time.Now()
				p, ok := r.Peek(context.Background(), "r_test")
				if took := time.Since(t0); took > PeekWait+time.Second {
					t.Fatalf("a peek took %s", took)
				}
				if r.peeks.get("r_test") == nil {
					if time.Now().After(deadline) {
						t.Fatal("the run never went on its channel")
					}
					time.Sleep(10 * time.Millisecond)
					continue
				}
				peeks++
				if tc.want == nil && ok {
					t.Fatalf("peek %d: %+v, want none", peeks, p)
				}
				if tc.want != nil && (!ok || p != *tc.want) {
					t.Fatalf("peek %d: %+v %v, want %+v", peeks, p, ok, *tc.want)
				}
				if tc.name == "no answer" && peeks == 2 {
					break
				}
			}
			free()
			res := <-done
			if res.Status != contract.StatusOK || res.Stdout != "all of it\n" {
				t.Fatalf("the run after %d peeks: %+v", peeks, res)
			}
			if _, ok := r.Peek(context.Background(), "r_test"); ok {
				t.Fatal("a peek of a run that ended")
			}
		})
	}
}

// TestPeekSession: a session's running cell is peeked at by its run id,
// over the session's channel, and only while it runs.
func TestPeekSession(t *testing.T) {
	ctx := context.Background()
	_, r, m := sessionRunner(t, nil)
	lang, _ := m.Language("python")
	info, fail := r.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: m.SessionLimits()})
	if fail != nil {
		t.Fatal(fail)
	}
	job := testJob(t, m, time.Minute)
	job.Code, job.RunID = "x = 1", "r_first"
	r.RunInSession(ctx, info.ID, "c", RunRequest{Job: job})
	if _, ok := r.Peek(ctx, "r_first"); ok {
		t.Fatal("a peek of a cell that ended")
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	job.Code, job.RunID = "hang", "r_hang"
	done := make(chan contract.Result, 1)
	go func() { done <- r.RunInSession(cctx, info.ID, "c", RunRequest{Job: job}) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, ok := r.Peek(ctx, "r_hang")
		if ok {
			if p.Stdout != "x = 1" || p.StdoutBytes != 5 {
				t.Fatalf("the cell's peek: %+v", p)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running cell was never peeked at")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if res := <-done; res.Error == nil || !strings.Contains(res.Error.Message, "interrupted") {
		t.Fatalf("the interrupted cell: %+v", res)
	}
	if _, ok := r.Peek(ctx, "r_hang"); ok {
		t.Fatal("a peek of a cell that was interrupted")
	}
}
