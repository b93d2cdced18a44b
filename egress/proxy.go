package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// Approver asks a person whether a run may connect to an endpoint that
// says approve: ask; nil error means yes.
type Approver func(ctx context.Context, host string, port int, rule string) error

// ErrNoApprover refuses an approve: ask endpoint when nobody can be asked.
var ErrNoApprover = errors.New("this endpoint needs the user's approval and the client cannot ask for it (no MCP elicitation)")

// Options configure one run's proxy.
type Options struct {
	Network manifest.Network
	// Deadline is the run's: no connection outlives it.
	Deadline time.Time
	// Resolver and Dial default to the system's.
	Resolver Resolver
	Dial     DialFunc
	// Approve is asked for approve: ask endpoints; nil refuses them.
	Approve Approver
	// Interception adds entries' credentials (intercept.go); nil: none.
	Interception *Interception
}

// Proxy serves one run's proxied connections and keeps their records.
type Proxy struct {
	net      manifest.Network
	policy   *Policy
	deadline time.Time
	resolver Resolver
	dialer   DialFunc
	approve  Approver
	icpt     *Interception

	bytes atomic.Int64
	mu    sync.Mutex
	recs  []*contract.Connection
	// over counts connections refused past max_connections and past
	// the records' bound (twice the cap), so unrecorded.
	over     int
	approved map[int]error
}

// New returns the proxy of one run.
func New(o Options) *Proxy {
	p := &Proxy{net: o.Network, policy: NewPolicy(o.Network), deadline: o.Deadline,
		resolver: o.Resolver, dialer: o.Dial, approve: o.Approve, icpt: o.Interception, approved: map[int]error{}}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.dialer == nil {
		p.dialer = (&net.Dialer{Timeout: dialTimeout}).DialContext
	}
	return p
}

// Records returns the run's connections in the order they were asked for;
// the refusals past twice max_connections, not listed one by one, end it
// as one record that counts them. No record holds a credential's secret,
// whatever the box or a server sent (Credentials.scrub).
func (p *Proxy) Records() []contract.Connection {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]contract.Connection, len(p.recs), len(p.recs)+1)
	for i, r := range p.recs {
		out[i] = p.scrubbed(*r)
	}
	if p.over > 0 {
		out = append(out, contract.Connection{Reason: fmt.Sprintf("%s: %d more refused, not listed one by one", p.overCap(), p.over)})
	}
	return out
}

// scrubbed is c without a credential's secret in any of its texts.
func (p *Proxy) scrubbed(c contract.Connection) contract.Connection {
	if p.icpt == nil {
		return c
	}
	sc := p.icpt.scrub
	c.Host, c.Method, c.Address, c.Rule, c.Reason, c.Cut = sc(c.Host), sc(c.Method), sc(c.Address), sc(c.Rule), sc(c.Reason), sc(c.Cut)
	if c.Requests != nil {
		reqs := make([]contract.HTTPRequest, len(c.Requests))
		for i, r := range c.Requests {
			r.Method, r.Path = sc(r.Method), sc(r.Path)
			reqs[i] = r
		}
		c.Requests = reqs
	}
	return c
}

// Overflow counts the connections refused past max_connections that the
// records do not list: those past twice the cap.
func (p *Proxy) Overflow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.over
}

// headerTimeout bounds the request line and headers of a connection, so a
// client that drips them holds nothing for long.
const headerTimeout = 10 * time.Second

// MaxRequestHeader bounds a proxied request's line and headers.
const MaxRequestHeader = 64 << 10

// MaxBoxBytes bounds what a box may send to the proxy in one run: the
// bytes it lets through (network.max_bytes), plus each connection's
// request line and headers, which it reads before deciding (one more
// connection than max_connections is read, to refuse it).
func (p *Proxy) MaxBoxBytes() int64 {
	return int64(p.net.MaxBytes) + int64(p.net.MaxConnections+1)*MaxRequestHeader
}

// Serve handles one connection the box's program opened to its proxy: it
// reads the request (CONNECT host:port, or a plain HTTP request with an
// absolute URI), checks it, connects and relays until either side ends,
// a cap cuts it or ctx ends. It always closes box; box's Close may be a
// half-close (a channel stream's is), the answer's end.
func (p *Proxy) Serve(ctx context.Context, box io.ReadWriteCloser) {
	defer box.Close()
	start := time.Now()
	hdrWait := headerTimeout
	if !p.deadline.IsZero() {
		hdrWait = min(hdrWait, time.Until(p.deadline))
	}
	// A request that drips in is given up, its connection closed.
	hdrTimer := time.AfterFunc(hdrWait, func() { abort(box) })
	lr := &io.LimitedReader{R: box, N: MaxRequestHeader}
	br := bufio.NewReader(lr)
	req, rerr := http.ReadRequest(br)
	late := !hdrTimer.Stop()
	sent := lr.N < MaxRequestHeader
	if errors.Is(rerr, io.EOF) && !sent && !late {
		// Opened and closed without a word: nothing to record.
		return
	}
	rec, over := p.record()
	if rec == nil {
		refuse(box, http.StatusTooManyRequests, p.overCap())
		return
	}
	defer func() {
		p.mu.Lock()
		rec.DurationMs = time.Since(start).Milliseconds()
		p.mu.Unlock()
	}()
	set := func(f func(r *contract.Connection)) {
		p.mu.Lock()
		f(rec)
		p.mu.Unlock()
	}
	if req != nil {
		host, port, _ := target(req)
		set(func(r *contract.Connection) { r.Method, r.Host, r.Port = req.Method, host, port })
	}
	switch {
	case over:
		why := p.overCap()
		set(func(r *contract.Connection) { r.Reason = why })
		refuse(box, http.StatusTooManyRequests, why)
		return
	case late:
		set(func(r *contract.Connection) {
			r.Reason = fmt.Sprintf("refused: the request's line and headers did not arrive within %s", hdrWait.Round(time.Millisecond))
		})
		return
	case rerr != nil && lr.N == 0:
		why := fmt.Sprintf("refused: the request's line and headers passed the proxy's %d KiB", MaxRequestHeader>>10)
		set(func(r *contract.Connection) { r.Reason = why })
		refuse(box, http.StatusRequestHeaderFieldsTooLarge, "runbox: "+why)
		return
	case rerr != nil:
		set(func(r *contract.Connection) { r.Reason = "no HTTP proxy request: " + rerr.Error() })
		refuse(box, http.StatusBadRequest, "runbox: the proxy expects CONNECT host:port or an absolute http:// URI")
		return
	}
	lr.N = 1 << 62

	host, port, perr := target(req)
	if perr != nil {
		set(func(r *contract.Connection) { r.Reason = perr.Error() })
		refuse(box, http.StatusBadRequest, "runbox: "+perr.Error())
		return
	}
	m, ok := p.policy.Match(host, port)
	if !ok {
		why := fmt.Sprintf("%s:%d is not declared in the manifest's network.allow", NormalizeHost(host), port)
		set(func(r *contract.Connection) { r.Reason = why })
		refuse(box, http.StatusForbidden, fmt.Sprintf("runbox: %s; to allow it add %s", why, Suggest(host, port)))
		return
	}
	set(func(r *contract.Connection) { r.Rule = m.Rule() })
	if m.Endpoint.Approve == manifest.ApproveAsk {
		if err := p.approval(ctx, m, host, port); err != nil {
			why := fmt.Sprintf("%s:%d was not approved: %v", NormalizeHost(host), port, err)
			set(func(r *contract.Connection) { r.Reason = why })
			refuse(box, http.StatusForbidden, "runbox: "+why)
			return
		}
	}
	cred, intercept := p.icpt.credential(m)
	if intercept && req.Method != http.MethodConnect {
		why := plainRefusal(m, host, port)
		set(func(r *contract.Connection) { r.Reason = why })
		refuse(box, http.StatusForbidden, "runbox: "+why)
		return
	}
	up, addr, err := p.dial(ctx, m, host, port)
	if err != nil {
		if errors.Is(err, errRefused) {
			why := fmt.Sprintf("%s:%d was refused: %s", NormalizeHost(host), port, strings.TrimPrefix(err.Error(), errRefused.Error()+": "))
			set(func(r *contract.Connection) { r.Reason = why })
			refuse(box, http.StatusForbidden, "runbox: "+why)
			return
		}
		set(func(r *contract.Connection) { r.Allowed, r.Reason = true, err.Error() })
		refuse(box, http.StatusBadGateway, fmt.Sprintf("runbox: %s:%d: %v", NormalizeHost(host), port, err))
		return
	}
	defer up.Close()
	set(func(r *contract.Connection) {
		r.Allowed, r.Address = true, net.JoinHostPort(addr.String(), strconv.Itoa(port))
	})

	// One timer bounds the connection's life: the cap, never past the run.
	end := time.Now().Add(time.Duration(p.net.ConnectionSeconds * float64(time.Second)))
	if !p.deadline.IsZero() && p.deadline.Before(end) {
		end = p.deadline
	}
	var cut atomic.Value
	// The record says why before the box sees its connection end, so
	// what the program sees is already in the record.
	stop := func(why string) {
		if cut.CompareAndSwap(nil, why) && why != "" {
			set(func(r *contract.Connection) {
				r.Cut = why
				if why == contract.CutBytes {
					r.Reason = fmt.Sprintf("cut: the run passed network.max_bytes (%s)", p.net.MaxBytes)
				} else {
					r.Reason = "cut: the connection reached network.connection_seconds or the run's deadline"
				}
			})
		}
		_ = up.Close()
		abort(box)
	}
	timer := time.AfterFunc(time.Until(end), func() { stop(contract.CutTime) })
	defer timer.Stop()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
			// The run ended: not a cap, the program is gone.
			stop("")
		case <-finished:
		}
	}()

	toUp := &counter{w: up, p: p, n: func(n int64) { set(func(r *contract.Connection) { r.BytesOut += n }) }, stop: stop}
	toBox := &counter{w: box, p: p, n: func(n int64) { set(func(r *contract.Connection) { r.BytesIn += n }) }, stop: stop}
	if intercept {
		p.intercept(ctx, cred, host, port, br, box, up, toUp, toBox, set)
	} else if req.Method == http.MethodConnect {
		if _, err := io.WriteString(box, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		relay(br, box, up, toUp, toBox)
	} else {
		forward(req, up, toUp, toBox)
	}
}

// record starts a connection's record; over says it is past
// max_connections (refused, recorded). Past twice the cap nothing more is
// recorded (nil): the records stay bounded, and Overflow counts those
// (the last of Records).
func (p *Proxy) record() (r *contract.Connection, over bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.recs) >= 2*p.net.MaxConnections {
		p.over++
		return nil, true
	}
	r = &contract.Connection{}
	p.recs = append(p.recs, r)
	return r, len(p.recs) > p.net.MaxConnections
}

// overCap is the reason of a connection refused past max_connections.
func (p *Proxy) overCap() string {
	return fmt.Sprintf("refused: the run opened network.max_connections (%d) connections already", p.net.MaxConnections)
}

// approval asks once per entry and run.
func (p *Proxy) approval(ctx context.Context, m Match, host string, port int) error {
	p.mu.Lock()
	err, asked := p.approved[m.Index]
	p.mu.Unlock()
	if asked {
		return err
	}
	if p.approve == nil {
		err = ErrNoApprover
	} else {
		err = p.approve(ctx, NormalizeHost(host), port, m.Rule())
	}
	p.mu.Lock()
	p.approved[m.Index] = err
	p.mu.Unlock()
	return err
}

// target is the host and port a proxy request names.
func target(req *http.Request) (string, int, error) {
	hostport := req.Host
	def := ""
	if req.Method != http.MethodConnect {
		if req.URL.Scheme != "http" || req.URL.Host == "" {
			return "", 0, fmt.Errorf("a plain request must name an absolute http:// URI (use CONNECT for https), not %q", req.RequestURI)
		}
		hostport, def = req.URL.Host, "80"
	}
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == "" {
			return hostport, 0, fmt.Errorf("CONNECT needs host:port, not %q", hostport)
		}
		host, ps = hostport, def
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return host, 0, fmt.Errorf("bad port in %q", hostport)
	}
	if host == "" {
		return host, port, fmt.Errorf("no host in %q", hostport)
	}
	return host, port, nil
}

// refuse answers a request the proxy will not carry: a status the program
// can read, the reason in the status line (which CONNECT clients show)
// and in the body.
func refuse(w io.Writer, code int, msg string) {
	phrase := strings.NewReplacer("\r", " ", "\n", " ").Replace(msg)
	if len(phrase) > 300 {
		phrase = phrase[:300]
	}
	body := msg + "\n"
	fmt.Fprintf(w, "HTTP/1.1 %d %s (%s)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), phrase, len(body), body)
}

// hopHeaders are the proxy's, never forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends one plain HTTP request upstream in origin form, asking
// the server to close after its response, and relays that response.
func forward(req *http.Request, up net.Conn, toUp, toBox io.Writer) {
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.Close = true
	req.RequestURI = ""
	go func() {
		bw := bufio.NewWriterSize(toUp, 32<<10)
		if req.Write(bw) == nil {
			_ = bw.Flush()
		}
	}()
	_, _ = copyToBox(toBox, up)
}

// copyToBox copies what upstream sends to the box in large pieces: each
// write to the box's stream travels on its own through the platform's
// copies, so fewer and larger writes carry more per second (io.Copy would
// take 32 KiB at a time).
func copyToBox(toBox io.Writer, up io.Reader) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{toBox}, struct{ io.Reader }{up}, make([]byte, 256<<10))
}

// relay copies both ways until both ends finished; an end's EOF is passed
// on as a half-close, so request-then-response protocols work.
func relay(fromBox io.Reader, box io.Closer, up net.Conn, toUp, toBox io.Writer) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := io.Copy(toUp, fromBox); err == nil {
			closeWrite(up)
		} else {
			_ = up.Close()
		}
	}()
	if _, err := copyToBox(toBox, up); err == nil {
		closeWrite(box)
	} else {
		_ = box.Close()
	}
	// The server is done: a client that keeps its end open (a pooled
	// keep-alive connection) gets a moment to finish, not the whole cap.
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(afterUpstream):
		abort(box)
		_ = up.Close()
		<-finished
	}
}

// afterUpstream is how long a tunnel stays open once its server ended it.
const afterUpstream = 2 * time.Second

func closeWrite(c io.Closer) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// counter counts what a direction carries against the run's byte cap;
// the write that would pass it is cut short and the connection stopped.
type counter struct {
	w    io.Writer
	p    *Proxy
	n    func(int64)
	stop func(string)
}

var errByteCap = errors.New("egress: the run's byte cap")

func (c *counter) Write(b []byte) (int, error) {
	limit := int64(c.p.net.MaxBytes)
	total := c.p.bytes.Add(int64(len(b)))
	if over := total - limit; over > 0 {
		allowed := max(0, int64(len(b))-over)
		c.p.bytes.Add(-(int64(len(b)) - allowed))
		n, _ := c.w.Write(b[:allowed])
		c.n(int64(n))
		c.stop(contract.CutBytes)
		return n, errByteCap
	}
	n, err := c.w.Write(b)
	c.n(int64(n))
	return n, err
}

// abort ends a connection at once: a channel stream's Close only
// half-closes it, so a read that waits on the box is released by a
// deadline in the past first.
func abort(c io.Closer) {
	if d, ok := c.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(time.Unix(1, 0))
	}
	_ = c.Close()
}
