package sandbox

import (
	"context"
	"io"
	"maps"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// networkEnv adds, when the manifest declares endpoints, what makes the
// program's clients use runbox-init's proxy: the proxy variables, the
// declared package indexes for pip and npm, and for Node a module that
// routes fetch through it. Every language gets it, so a
// bash script's node or a Python subprocess's curl use it too.
func networkEnv(m *manifest.Manifest, env map[string]string) {
	if !m.Network.Enabled() {
		return
	}
	for k, v := range initproto.ProxyEnv(initproto.ProxyAddr) {
		env[k] = v
	}
	maps.Copy(env, m.Network.Index.Env())
	if m.Network.Intercepts() {
		// The image's clients trust runbox's CA (with the image's own)
		// for the entries whose TLS the proxy ends; each reads its own
		// variable. Without such an entry nothing changes.
		for _, k := range initproto.TrustVars {
			env[k] = initproto.CABundle
		}
		for _, e := range m.Network.Allow {
			if e.Credential != nil {
				if k, v := e.Credential.PlaceholderEnv(); k != "" {
					env[k] = v
				}
			}
		}
	}
	if opts := env["NODE_OPTIONS"]; opts != "" {
		env["NODE_OPTIONS"] = opts + " " + initproto.NodeProxyOptions()
	} else {
		env["NODE_OPTIONS"] = initproto.NodeProxyOptions()
	}
}

// withNetwork puts a run's connections in its result and, when the run
// failed after the proxy refused a connection, says so: a runtime error
// (an exception about the refused request, most likely) becomes
// forbidden_network, naming the first refused host.
func withNetwork(res *contract.Result, recs []contract.Connection) {
	if recs == nil {
		recs = []contract.Connection{}
	}
	res.Network = recs
	var first *contract.Connection
	refused := 0
	for i := range recs {
		if !recs[i].Allowed {
			if first == nil {
				first = &recs[i]
			}
			refused++
		}
	}
	if first == nil || res.Status != contract.StatusError || res.Error == nil || res.Error.Kind != contract.KindRuntime {
		return
	}
	info := contract.ForbiddenNetwork(*first, refused)
	info.Type, info.Line, info.Column = res.Error.Type, res.Error.Line, res.Error.Column
	res.Error = &info
}

// Approver is asked, by a run's [Network], whether the run may connect to
// host:port, which the manifest's entry rule allows with approve: ask; an
// error refuses the connection and says why (the client declined, or
// cannot be asked).
type Approver = func(ctx context.Context, host string, port int, rule string) error

// Network is one run's side of its box's declared network, made by
// [Options].Network (egress's proxy): it serves each connection the box's
// program opens to runbox-init's proxy, carried as a stream of kind
// initproto.StreamProxy, and keeps their records for the result.
type Network interface {
	// Serve handles one connection until it ends, a cap cuts it or ctx
	// ends, and closes conn.
	Serve(ctx context.Context, conn io.ReadWriteCloser)
	// Records are the run's connections, in the order they were asked
	// for: the result's network.
	Records() []contract.Connection
	// MaxBoxBytes bounds what the box may send on the run's proxy
	// streams: what the network lets through and what it reads to
	// decide.
	MaxBoxBytes() int64
}

// withProxy returns the streams a run serves: req's and, when the
// manifest declares endpoints, its proxy streams, with a fresh Network
// whose connections end by the run's deadline.
func (r *BoxRunner) withProxy(req RunRequest) (*initproto.Streams, Network) {
	if !r.m.Network.Enabled() {
		return req.Streams, nil
	}
	var px Network
	serve := func(ctx context.Context, bs *initproto.BoxStream) {}
	if r.network != nil {
		px = r.network(time.Now().Add(req.Job.Timeout+r.grace), req.Approve)
		serve = func(ctx context.Context, bs *initproto.BoxStream) { px.Serve(ctx, bs) }
	}
	s := initproto.Streams{}
	if prev := req.Streams; prev != nil {
		s = *prev
		if len(s.Handlers) > 0 && s.MaxBytes <= 0 {
			s.MaxBytes = initproto.DefaultMaxStreamBytes
		}
	}
	s.Handlers = maps.Clone(s.Handlers)
	if s.Handlers == nil {
		s.Handlers = map[string]initproto.StreamHandler{}
	}
	s.Handlers[initproto.StreamProxy] = initproto.StreamHandlerFunc(serve)
	s.MaxOpen = initproto.MaxBoxStreams
	s.MaxBytes += 1 << 20
	if px != nil {
		s.MaxBytes += px.MaxBoxBytes()
	}
	s.MaxTotal = max(s.MaxTotal, initproto.DefaultMaxStreams)
	return &s, px
}

// caPEM is runbox's CA certificate for the boxes to trust, when the
// manifest has entries with credentials.
func (r *BoxRunner) caPEM() []byte {
	if !r.m.Network.Intercepts() {
		return nil
	}
	return r.ca
}

// budgets are the kinds' budgets for the job; nil for nil.
func budgets(s *initproto.Streams) map[string]int64 {
	if s == nil {
		return nil
	}
	return s.Budgets
}
