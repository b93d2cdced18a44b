package sandbox

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/boxinit"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

func TestWithNetwork(t *testing.T) {
	denied := contract.Connection{Host: "evil.example", Port: 443, Method: "CONNECT", Reason: "evil.example:443 is not declared in the manifest's network.allow"}
	allowed := contract.Connection{Host: "api.example", Port: 443, Method: "CONNECT", Allowed: true, Rule: "network.allow[0] (api.example:443)"}
	runtime := func() contract.Result {
		return contract.Result{Status: contract.StatusError, Error: &contract.ErrorInfo{Kind: contract.KindRuntime, Type: "URLError", Line: 3, Message: "Tunnel connection failed: 403"}}
	}
	cases := []struct {
		name string
		res  contract.Result
		recs []contract.Connection
		kind contract.Kind
		msg  string
	}{
		{"failed after a refusal", runtime(), []contract.Connection{allowed, denied, denied}, contract.KindForbiddenNetwork, "refused a connection to evil.example:443: evil.example:443 is not declared in the manifest's network.allow (2 connections were refused)"},
		{"failed, all allowed", runtime(), []contract.Connection{allowed}, contract.KindRuntime, "Tunnel"},
		{"ok after a refusal", contract.Result{Status: contract.StatusOK}, []contract.Connection{denied}, "", ""},
		{"timeout after a refusal", contract.Result{Status: contract.StatusError, Error: &contract.ErrorInfo{Kind: contract.KindTimeout}}, []contract.Connection{denied}, contract.KindTimeout, ""},
		{"no connections", runtime(), nil, contract.KindRuntime, "Tunnel"},
	}
	for _, tc := range cases {
		res := tc.res
		withNetwork(&res, tc.recs)
		if res.Network == nil || len(res.Network) != len(tc.recs) {
			t.Errorf("%s: network %v", tc.name, res.Network)
		}
		var kind contract.Kind
		msg := ""
		if res.Error != nil {
			kind, msg = res.Error.Kind, res.Error.Message
		}
		if kind != tc.kind || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %s %q, want %s %q", tc.name, kind, msg, tc.kind, tc.msg)
		}
		if kind == contract.KindForbiddenNetwork && (res.Error.Line != 3 || res.Error.Type != "URLError" || !strings.Contains(res.Error.Hint, "network.allow")) {
			t.Errorf("%s: %+v", tc.name, res.Error)
		}
	}
}

// fakeNetwork answers each connection with "net:" and what it read, and
// records it.
type fakeNetwork struct {
	deadline time.Time
	approve  Approver
	mu       sync.Mutex
	recs     []contract.Connection
}

func (n *fakeNetwork) Serve(ctx context.Context, conn io.ReadWriteCloser) {
	defer conn.Close()
	b := make([]byte, 64)
	k, _ := conn.Read(b)
	_, _ = conn.Write(append([]byte("net:"), b[:k]...))
	n.mu.Lock()
	n.recs = append(n.recs, contract.Connection{Host: string(b[:k]), Allowed: true})
	n.mu.Unlock()
}

func (n *fakeNetwork) Records() []contract.Connection {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.recs)
}

func (n *fakeNetwork) MaxBoxBytes() int64 { return 1 << 20 }

// A run's proxy streams are served by a Network made for that run, with
// its deadline and its request's approver, beside the request's own
// streams; its records are the result's network. Nothing travels in the
// context.
func TestRunNetwork(t *testing.T) {
	m := testManifest(t, func(m *manifest.Manifest) {
		m.Network.Allow = []manifest.Endpoint{{Host: "example.com"}}
	})
	var kinds []string
	d := &fakeDriver{behave: func(sess *yamux.Session, st *yamux.Stream, job *initproto.Job) {
		kinds = job.Streams
		hs, err := boxinit.NewHost(sess).Open(context.Background(), initproto.StreamProxy, nil)
		out := "open: "
		if err == nil {
			_, _ = hs.Write([]byte("example.com"))
			_ = hs.CloseWrite()
			b, _ := io.ReadAll(hs)
			_ = hs.Close()
			out = string(b)
		} else {
			out += err.Error()
		}
		_ = initproto.SendReport(st, &initproto.Report{Stdout: []byte(out)})
		_ = st.Close()
	}}
	r := newTestRunner(t, d, m)
	var made []*fakeNetwork
	r.network = func(deadline time.Time, approve Approver) Network {
		n := &fakeNetwork{deadline: deadline, approve: approve}
		made = append(made, n)
		return n
	}
	errAsked := errors.New("asked")
	approve := func(context.Context, string, int, string) error { return errAsked }
	for i := range 2 {
		start := time.Now()
		res := r.Run(context.Background(), RunRequest{Job: testJob(t, m, 5*time.Second), Approve: approve,
			Streams: &initproto.Streams{Handlers: map[string]initproto.StreamHandler{initproto.StreamTool: echo}}})
		if res.Status != contract.StatusOK || res.Stdout != "net:example.com" {
			t.Fatalf("run %d: %+v %q", i, res.Error, res.Stdout)
		}
		if len(made) != i+1 {
			t.Fatalf("run %d: %d networks made, want one per run", i, len(made))
		}
		n := made[i]
		if len(res.Network) != 1 || res.Network[0].Host != "example.com" {
			t.Fatalf("run %d: the result's network %+v", i, res.Network)
		}
		if lo, hi := start.Add(5*time.Second), time.Now().Add(5*time.Second+r.grace); n.deadline.Before(lo) || n.deadline.After(hi) {
			t.Fatalf("run %d: the network's deadline %v is not the run's (%v..%v)", i, n.deadline, lo, hi)
		}
		if n.approve == nil || n.approve(context.Background(), "example.com", 443, "") != errAsked {
			t.Fatalf("run %d: the network did not get the request's approver", i)
		}
		if strings.Join(kinds, ",") != "proxy,tool" {
			t.Fatalf("run %d: the job named the kinds %v", i, kinds)
		}
	}
}
