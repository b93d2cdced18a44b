package sandbox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// A box answers the same way to a one-off run and to a session's cell:
// the same status, error kind and message, stdout and artifacts, whatever
// the box does on its channel. What is a session's own is its state: kept,
// or lost when the box was killed.
func TestCallBothWays(t *testing.T) {
	small := func(m *manifest.Manifest) {
		m.Limits.OutputBytes, m.Limits.ArtifactBytes = 64*manifest.KiB, 256*manifest.KiB
	}
	lim := testManifest(t, small).Limits
	art := bytes.Repeat([]byte{0, 0xff}, 50000)
	cases := []struct {
		name   string
		behave func(*yamux.Session, *yamux.Stream, *initproto.Job)
		// kind "" is ok; want is in the message (or stdout when ok).
		kind contract.Kind
		want string
		// lost: the session's state goes (its box was killed).
		lost bool
	}{
		{"a report and its artifacts", reply(initproto.Report{Artifacts: []initproto.Artifact{
			{Path: "a.bin", Size: int64(len(art)), Sent: true}, {Path: "big", Size: 1 << 40}}}, art), "", "script", false},
		{"output past its cap", reply(initproto.Report{Stdout: []byte("x"), StdoutTruncated: true, StdoutBytes: 1 << 20}), contract.KindOutputLimit, "", false},
		{"a report past its output limit", reply(initproto.Report{Stdout: bytes.Repeat([]byte("x"), 4*int(lim.OutputBytes))}), contract.KindSandbox, "larger than its output limit", true},
		{"an artifact not the size its report says", reply(initproto.Report{Artifacts: []initproto.Artifact{{Path: "a", Size: 10, Sent: true}}}, []byte("abc")), contract.KindSandbox, "not the size its report says", true},
		{"an artifact sent twice", func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			_ = initproto.SendReport(st, &initproto.Report{Artifacts: []initproto.Artifact{{Path: "a", Size: 1, Sent: true}, {Path: "b", Size: 1, Sent: true}}})
			for range 2 {
				as, _ := sess.OpenStream()
				_ = initproto.Send(as, initproto.Header{Kind: initproto.StreamArtifact, Index: 0}, []byte("x"))
				_ = as.Close()
			}
		}, contract.KindSandbox, "sent twice", true},
		{"an artifact past the artifact cap", reply(initproto.Report{Artifacts: []initproto.Artifact{{Path: "a", Size: 1, Sent: true}}}, make([]byte, lim.ArtifactBytes+1)), contract.KindSandbox, "larger than the artifact cap", true},
		{"more artifacts than the cap", reply(initproto.Report{Artifacts: func() []initproto.Artifact {
			a := make([]initproto.Artifact, lim.Artifacts+1)
			for i := range a {
				a[i] = initproto.Artifact{Path: "f", Size: 0, Sent: true}
			}
			return a
		}()}), contract.KindSandbox, "past the caps", true},
		{"a stream of a kind the run does not serve", func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			_ = initproto.SendReport(st, &initproto.Report{Artifacts: []initproto.Artifact{{Path: "a", Size: 1, Sent: true}}})
			as, _ := sess.OpenStream()
			_ = initproto.Send(as, initproto.Header{Kind: "surprise", Call: job.Call})
		}, contract.KindSandbox, `"surprise" stream`, true},
		{"a flood of bytes on the job stream", func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			chunk := bytes.Repeat([]byte("y"), 1<<20)
			for range 200 {
				if _, err := st.Write(chunk); err != nil {
					return
				}
			}
		}, contract.KindSandbox, "broke the channel protocol", true},
		{"more bytes on the whole channel than a run may", func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
			// Each stream within its own cap, the sum past the channel's.
			for i := range lim.Artifacts {
				as, err := sess.OpenStream()
				if err != nil {
					return
				}
				_ = initproto.Send(as, initproto.Header{Kind: initproto.StreamArtifact, Index: i}, make([]byte, lim.ArtifactBytes-1))
				_ = as.Close()
			}
			_ = initproto.SendReport(st, &initproto.Report{})
		}, contract.KindSandbox, "bytes a run may", true},
		{"a report naming artifacts that never come", reply(initproto.Report{Artifacts: []initproto.Artifact{{Path: "a", Size: 1, Sent: true}}}),
			contract.KindSandbox, "without the artifacts it names", false},
		{"a box that never answers", hang, contract.KindTimeout, "", true},
	}
	check := func(t *testing.T, how string, res contract.Result, kind contract.Kind, want string) {
		t.Helper()
		switch {
		case kind == "" && (res.Status != contract.StatusOK || res.Stdout != want):
			t.Fatalf("%s: %+v %q", how, res.Error, res.Stdout)
		case kind != "" && (res.Error == nil || res.Error.Kind != kind || !strings.Contains(res.Error.Message, want)):
			t.Fatalf("%s: %+v", how, res.Error)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			d := &fakeDriver{behave: c.behave}
			m := testManifest(t, small)
			r := newTestRunner(t, d, m)
			job := testJob(t, m, 2*time.Second)
			job.Code = "script"
			one := r.Run(ctx, RunRequest{Job: job})
			check(t, "one-off", one, c.kind, c.want)
			if c.lost && d.killed.Load() == 0 {
				t.Fatal("one-off: the box was not killed")
			}

			sd, sr, sm := sessionRunner(t, small)
			sd.behave = c.behave
			lang, _ := sm.Language("python")
			info, fail := sr.OpenSession(ctx, SessionRequest{Language: lang, Client: "c", Limits: sm.SessionLimits()})
			if fail != nil {
				t.Fatal(fail)
			}
			sjob := testJob(t, sm, 2*time.Second)
			sjob.Code = "kept"
			sr.RunInSession(ctx, info.ID, "c", RunRequest{Job: sjob})
			sjob.Code = "script"
			cell := sr.RunInSession(ctx, info.ID, "c", RunRequest{Job: sjob})
			check(t, "session", cell, c.kind, c.want)
			if one.Status != cell.Status || len(one.Artifacts) != len(cell.Artifacts) || (one.Error != nil && one.Error.Message != cell.Error.Message) {
				t.Fatalf("one-off and session differ:\n%+v %+v\n%+v %+v", one.Error, one.Artifacts, cell.Error, cell.Artifacts)
			}
			for i := range one.Artifacts {
				if !bytes.Equal(one.Artifacts[i].Data, cell.Artifacts[i].Data) {
					t.Fatalf("artifact %d differs", i)
				}
			}
			wantState := contract.SessionAlive
			if c.lost {
				wantState = contract.SessionLost
			}
			if cell.Session == nil || cell.Session.State != wantState {
				t.Fatalf("session: %+v", cell.Session)
			}
			sjob.Code = "after"
			next := sr.RunInSession(ctx, info.ID, "c", RunRequest{Job: sjob})
			switch {
			case c.lost && (next.Error == nil || next.Error.Kind != contract.KindSessionLost):
				t.Fatalf("after a lost cell: %+v", next.Error)
			case !c.lost && (next.Status != contract.StatusOK || next.Stdout != "kept;after"):
				t.Fatalf("after a cell that kept the state: %+v %q", next.Error, next.Stdout)
			}
		})
	}
}

// A shell names the command the seccomp filter killed; its kernel name
// narrows the kernel log's records to that command's, so another box's
// kill of the same moment is not taken for it.
func TestShellKilledComm(t *testing.T) {
	for stderr, want := range map[string]string{
		"/workspace/main.sh: line 2:    12 Bad system call         unshare -U true\n":                    "unshare",
		"main.sh: line 2: 12 Bad system call (core dumped) /usr/bin/unshare -r true\n":                   "unshare",
		"main.sh: line 3: 9 Bad system call         LANG=C FOO_1=x strace -f ls\n":                       "strace",
		"main.sh: line 2: 12 Bad system call         a-very-long-command-name --flag\n":                  "a-very-long-com",
		"main.sh: line 2: 12 Bad system call         sh -c \"kill -SYS \\$\\$\"\n":                       "sh",
		"first\nmain.sh: line 2: 3 Bad system call   ls\nmain.sh: line 4: 5 Bad system call   unshare\n": "unshare",
		"main.sh: line 2: 12 Bad system call         cat x | unshare -U true\n":                          "",
		"main.sh: line 2: 12 Bad system call         ( unshare -U true )\n":                              "",
		"main.sh: line 2: 12 Bad system call         $CMD -U\n":                                          "",
		"main.sh: line 2: 12 Bad system call         \"un share\" -U\n":                                  "",
		"main.sh: line 2: 12 Bad system call\n":                                                          "",
		"no such line\n":                                                                                 "",
	} {
		if got := shellKilledComm([]byte(stderr)); got != want {
			t.Errorf("shellKilledComm(%q) = %q, want %q", stderr, got, want)
		}
	}
}
