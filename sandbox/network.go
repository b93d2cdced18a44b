package sandbox

import (
	"context"
	"maps"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/egress"
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

// withProxy returns ctx serving the run's proxy streams with a fresh
// egress proxy, when the manifest declares endpoints; other streams the
// context already serves are kept. No connection outlives the run.
func (r *BoxRunner) withProxy(ctx context.Context, job contract.Job) (context.Context, *egress.Proxy) {
	if !r.m.Network.Enabled() {
		return ctx, nil
	}
	n := r.m.Network
	px := egress.New(egress.Options{Network: n, Deadline: time.Now().Add(job.Timeout + r.grace), Approve: egress.ApproverFrom(ctx), Interception: r.icpt})
	s := initproto.Streams{}
	if prev := StreamsFrom(ctx); prev != nil {
		s = *prev
		if len(s.Handlers) > 0 && s.MaxBytes <= 0 {
			s.MaxBytes = initproto.DefaultMaxStreamBytes
		}
	}
	s.Handlers = maps.Clone(s.Handlers)
	if s.Handlers == nil {
		s.Handlers = map[string]initproto.StreamHandler{}
	}
	s.Handlers[initproto.StreamProxy] = initproto.StreamHandlerFunc(func(ctx context.Context, bs *initproto.BoxStream) { px.Serve(ctx, bs) })
	s.MaxOpen = initproto.MaxBoxStreams
	// What the box may send: the bytes the proxy lets through, plus each
	// connection's request headers, which it reads before deciding.
	s.MaxBytes += int64(n.MaxBytes) + int64(n.MaxConnections+1)*egress.MaxRequestHeader + 1<<20
	s.MaxTotal = max(s.MaxTotal, initproto.DefaultMaxStreams)
	return WithStreams(ctx, &s), px
}

// caPEM is runbox's CA certificate for the boxes to trust, when the
// manifest has entries with credentials.
func (r *BoxRunner) caPEM() []byte {
	if r.icpt == nil || r.icpt.CA == nil || !r.m.Network.Intercepts() {
		return nil
	}
	return r.icpt.CA.PEM()
}
