package expose

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
)

const (
	// tokenParam carries the token in the URL runbox prints.
	tokenParam = "runbox_token"
	// cookiePrefix names the cookies that carry tokens, one per listener
	// port (a browser shares a host's cookies across its ports). Every
	// cookie of that prefix is stripped from what the box reads, so no
	// box sees its own token nor another exposure's.
	cookiePrefix = "runbox_token_"
	// maxHead bounds a request's line and headers.
	maxHead = 64 << 10
	// dialWait bounds the connection into the box.
	dialWait = 20 * time.Second
)

// headWait bounds the wait for a connection's first request head. Later
// ones are not timed, nor is an answer once begun: it may stream for as
// long as the box sends it (server-sent events, a download), and the
// connection ends when either side ends it. The wait for an answer to
// begin is the manifest's answer_within_seconds.
var headWait = 30 * time.Second

// exposure is one listener and its connections.
type exposure struct {
	set     *Set
	info    Info
	client  string
	session string
	ln      net.Listener
	token   string
	// host is the only Host a request may name; cookie, its token's name.
	host, cookie string
	// slots bounds the connections open at once.
	slots  chan struct{}
	served atomic.Int64
	seq    atomic.Int64

	mu sync.Mutex
	// conns are the person's connections open now, boxes their streams
	// into the box: stop closes both.
	conns, boxes map[net.Conn]struct{}
	closed       chan struct{}
	ended        bool
	wg           sync.WaitGroup
}

func (e *exposure) snapshot() Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	i := e.info
	i.Connections = len(e.conns)
	i.Served = e.served.Load()
	return i
}

// stop closes the listener and every connection and waits for their
// goroutines; false when it was already stopped.
func (e *exposure) stop() bool {
	e.mu.Lock()
	if e.ended {
		e.mu.Unlock()
		return false
	}
	e.ended = true
	close(e.closed)
	_ = e.ln.Close()
	for c := range e.conns {
		_ = c.Close()
	}
	for c := range e.boxes {
		_ = c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
	return true
}

// track adds c to the person's connections (or, box, to the streams
// into the box) that stop closes; false once stopped.
func (e *exposure) track(c net.Conn, box bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return false
	}
	if box {
		e.boxes[c] = struct{}{}
	} else {
		e.conns[c] = struct{}{}
	}
	return true
}

func (e *exposure) untrack(c net.Conn) {
	e.mu.Lock()
	delete(e.conns, c)
	delete(e.boxes, c)
	e.mu.Unlock()
}

// accept serves the listener's connections, within the cap.
func (e *exposure) accept() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		e.mu.Lock()
		if e.ended {
			e.mu.Unlock()
			_ = c.Close()
			return
		}
		e.wg.Add(1)
		e.mu.Unlock()
		select {
		case e.slots <- struct{}{}:
			go func() {
				defer e.wg.Done()
				defer func() { <-e.slots }()
				e.serve(c)
			}()
		default:
			go func() {
				defer e.wg.Done()
				e.refuseFull(c)
			}()
		}
	}
}

// refuseFull answers a connection past the cap 503 and records it.
func (e *exposure) refuseFull(c net.Conn) {
	defer c.Close()
	if !e.track(c, false) {
		return
	}
	defer e.untrack(c)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	reply(c, http.StatusServiceUnavailable, fmt.Sprintf("this preview has %d connections open, the most it may (manifest sessions.expose.max_connections)", cap(e.slots)), nil)
	e.audit(connRecord{remote: c.RemoteAddr().String(), outcome: "refused: too many connections", start: time.Now()})
}

// connRecord is what one connection's audit line says.
type connRecord struct {
	remote            string
	outcome           string
	requests          int
	bytesIn, bytesOut int64
	start             time.Time
}

func (e *exposure) audit(r connRecord) {
	n := e.seq.Add(1)
	if e.set.record == nil {
		return
	}
	status := contract.StatusOK
	if strings.HasPrefix(r.outcome, "refused") || strings.HasPrefix(r.outcome, "box:") {
		status = contract.StatusError
	}
	ms := time.Since(r.start).Milliseconds()
	e.set.record(audit.Entry{RunID: e.info.ID + "." + strconv.FormatInt(n, 10), Time: r.start.UTC(), Client: audit.Client{Principal: e.client},
		Transport: "expose", Status: status, Metrics: contract.Metrics{WallMs: ms}, Artifacts: []audit.Artifact{},
		Exposure: &audit.Exposure{ID: e.info.ID, BoxPort: e.info.BoxPort, Remote: r.remote, Outcome: r.outcome,
			Requests: r.requests, BytesIn: r.bytesIn, BytesOut: r.bytesOut, DurationMs: ms}})
}

// serve checks each request a connection carries and forwards it to the
// box; an upgraded connection (a WebSocket) is carried as bytes after its
// first request. Responses come back from the box as bytes, unparsed, so
// streamed answers (server-sent events) arrive as the box sends them.
func (e *exposure) serve(c net.Conn) {
	rec := connRecord{remote: c.RemoteAddr().String(), start: time.Now()}
	defer func() { e.audit(rec) }()
	defer c.Close()
	if !e.track(c, false) {
		rec.outcome = "refused: the exposure closed"
		return
	}
	defer e.untrack(c)
	e.served.Add(1)
	in := &countReader{r: c}
	lim := &headLimit{r: in}
	br := bufio.NewReaderSize(lim, 16<<10)
	var box net.Conn
	var fromBox sync.WaitGroup
	var out atomic.Int64
	var wait answerWait
	// silent: the box did not begin an answer in time.
	var silent atomic.Bool
	defer func() {
		if box != nil {
			_ = box.Close()
			fromBox.Wait()
			rec.bytesOut = out.Load()
			if silent.Load() {
				rec.outcome = fmt.Sprintf("box: no answer within %s", e.answerWait())
			}
		}
		rec.bytesIn = in.n
	}()
	for {
		if box == nil {
			_ = c.SetReadDeadline(time.Now().Add(headWait))
		}
		lim.left = maxHead
		req, err := http.ReadRequest(br)
		if err != nil {
			if box != nil && errors.Is(err, io.EOF) {
				// The person sent all they will: the box may still be
				// answering, within a bound on its silences.
				closeWrite(box)
				wait.personDone(box, e.answerWait())
				fromBox.Wait()
			}
			if rec.outcome == "" {
				rec.outcome = "ended before a request"
				if lim.left <= 0 {
					rec.outcome = "refused: a request head past 64 KiB"
					reply(c, http.StatusRequestHeaderFieldsTooLarge, "the request's line and headers are larger than 64 KiB", nil)
				}
			}
			return
		}
		lim.left = -1
		_ = c.SetReadDeadline(time.Time{})
		if why, status := e.check(req); why != "" {
			if rec.requests == 0 {
				rec.outcome = "refused: " + why
				reply(c, status, why, nil)
			}
			// A later request refused ends the connection: answers
			// already on their way from the box keep their order.
			return
		}
		if box == nil && req.URL.Query().Has(tokenParam) {
			// The first visit: the cookie, then the same page without
			// the token, by a same-site navigation (a redirect from
			// another site would leave a Strict cookie behind).
			rec.outcome = "landing"
			// A body the landing does not read must not be taken
			// for the next request's head.
			if _, err := io.Copy(io.Discard, io.LimitReader(req.Body, maxHead)); err != nil {
				return
			}
			if n, _ := req.Body.Read(make([]byte, 1)); n > 0 {
				return
			}
			e.land(c, req)
			if req.Close {
				return
			}
			rec.outcome = ""
			continue
		}
		if box == nil {
			ctx, cancel := context.WithTimeout(context.Background(), dialWait)
			box, err = e.set.d.DialSession(ctx, e.session, e.client, e.info.BoxPort)
			cancel()
			if err != nil {
				rec.outcome = "box: " + err.Error()
				reply(c, http.StatusBadGateway, "the session's box did not take the connection: "+err.Error(), nil)
				box = nil
				return
			}
			if !e.track(box, true) {
				rec.outcome = "refused: the exposure closed"
				return
			}
			defer e.untrack(box)
			fromBox.Add(1)
			go func() {
				defer fromBox.Done()
				if e.answer(c, box, &wait, &out) {
					silent.Store(true)
				}
				// The box's server is done: so is the connection.
				_ = c.Close()
			}()
		}
		rec.outcome = "served"
		rec.requests++
		strip(req)
		// Armed before the request leaves: an answer that comes at once
		// must find it armed, to disarm it.
		wait.arm(box, e.answerWait())
		if err := req.Write(box); err != nil {
			return
		}
		if upgrade(req) {
			// From here on the connection is the app's protocol (a
			// WebSocket): bytes both ways, what the reader holds first.
			if n := br.Buffered(); n > 0 {
				b, _ := br.Peek(n)
				if _, err := box.Write(b); err != nil {
					return
				}
			}
			_, _ = io.Copy(box, in)
			closeWrite(box)
			wait.personDone(box, e.answerWait())
			fromBox.Wait()
			return
		}
	}
}

// answerWait is how long the box has to begin an answer.
func (e *exposure) answerWait() time.Duration {
	return time.Duration(e.set.cfg.AnswerWithinSeconds) * time.Second
}

// answer copies what the box sends to the person until either side
// ends; true when it ended because the box began no answer in time,
// which the person is told with a 504.
func (e *exposure) answer(c, box net.Conn, wait *answerWait, out *atomic.Int64) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := box.Read(buf)
		if n > 0 {
			// Disarmed before the person has the bytes: the next request,
			// which they send once they have the answer, arms it again.
			// Past the person's end, it bounds the next silence instead.
			wait.disarm(box)
			if _, werr := c.Write(buf[:n]); werr != nil {
				return false
			}
			out.Add(int64(n))
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && wait.armed() {
				reply(c, http.StatusGatewayTimeout, fmt.Sprintf("the app in the box did not begin an answer within %s (manifest sessions.expose.answer_within_seconds)", e.answerWait()), nil)
				return true
			}
			return false
		}
	}
}

// answerWait bounds the box's silences: the wait for its first byte
// after a request (armed when a request is sent, disarmed by the next
// byte from the box; a client that pipelines requests behind a streaming
// answer sees the bound only for the first of them), and, once the
// person has sent all they will, every wait between its bytes, so an
// answer held quiet for a person who left ends.
type answerWait struct {
	mu sync.Mutex
	on bool
	// idle, once set, bounds each silence of the box.
	idle time.Duration
}

func (w *answerWait) arm(box net.Conn, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.on = true
	_ = box.SetReadDeadline(time.Now().Add(d))
}

func (w *answerWait) disarm(box net.Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.idle > 0:
		w.on = false
		_ = box.SetReadDeadline(time.Now().Add(w.idle))
	case w.on:
		w.on = false
		_ = box.SetReadDeadline(time.Time{})
	}
}

// personDone bounds each silence of the box from now on by d: a person
// who half-closed still gets an answer the box goes on sending, and one
// who left does not hold a slot and a stream for an answer held quiet.
func (w *answerWait) personDone(box net.Conn, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idle = d
	if !w.on {
		_ = box.SetReadDeadline(time.Now().Add(d))
	}
}

func (w *answerWait) armed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.on
}

// check says why req may not pass, with the status to answer; "" when
// it may.
func (e *exposure) check(req *http.Request) (string, int) {
	if !strings.EqualFold(req.Host, e.host) {
		return fmt.Sprintf("this preview answers only to Host %s", e.host), http.StatusMisdirectedRequest
	}
	if req.Method == http.MethodConnect || req.URL.IsAbs() {
		return "this is not a proxy", http.StatusMethodNotAllowed
	}
	if q := req.URL.Query(); q.Has(tokenParam) {
		if !equal(q.Get(tokenParam), e.token) {
			return "the URL's token is not this preview's", http.StatusForbidden
		}
		// The URL itself is the capability: whoever holds it may
		// arrive from anywhere (a chat client's link).
		return "", 0
	}
	ck, err := req.Cookie(e.cookie)
	if err != nil || !equal(ck.Value, e.token) {
		return "this preview needs its URL's token (open the URL session_expose printed)", http.StatusUnauthorized
	}
	// A browser sends the cookie on requests another site's page makes
	// too (same-site for cookies is the host, whatever the port).
	if o := req.Header.Get("Origin"); o != "" && o != "http://"+e.host {
		return "a request from another origin", http.StatusForbidden
	}
	if s := req.Header.Get("Sec-Fetch-Site"); s == "cross-site" || s == "same-site" {
		return "a request from another site", http.StatusForbidden
	}
	return "", 0
}

// land answers the first visit: the cookie, and a page that goes on to
// the same path without the token.
func (e *exposure) land(c net.Conn, req *http.Request) {
	u := *req.URL
	q := u.Query()
	q.Del(tokenParam)
	u.RawQuery = q.Encode()
	u.Scheme, u.Host = "", ""
	next := u.RequestURI()
	cookie := (&http.Cookie{Name: e.cookie, Value: e.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}).String()
	body := fmt.Sprintf("<!doctype html><meta charset=utf-8><meta http-equiv=refresh content=\"0;url=%s\"><title>runbox preview</title><a href=\"%s\">Open the preview</a>\n",
		html.EscapeString(next), html.EscapeString(next))
	reply(c, http.StatusOK, body, http.Header{"Set-Cookie": {cookie}, "Content-Type": {"text/html; charset=utf-8"},
		"Cache-Control": {"no-store"}, "Referrer-Policy": {"no-referrer"}})
}

// reply writes a whole response of runbox's own.
func reply(w io.Writer, status int, body string, h http.Header) {
	if h == nil {
		// A refusal: the connection ends after it.
		h = http.Header{"Content-Type": {"text/plain; charset=utf-8"}, "Connection": {"close"}}
		body = "runbox: " + body + "\n"
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	_ = h.Write(w)
	_, _ = io.WriteString(w, "\r\n"+body)
}

// strip takes runbox's tokens out of a request before the box reads it.
func strip(req *http.Request) {
	cookies := req.Cookies()
	req.Header.Del("Cookie")
	var keep []string
	for _, ck := range cookies {
		if !strings.HasPrefix(ck.Name, cookiePrefix) {
			keep = append(keep, ck.Name+"="+ck.Value)
		}
	}
	if len(keep) > 0 {
		req.Header.Set("Cookie", strings.Join(keep, "; "))
	}
	if req.URL.Query().Has(tokenParam) {
		q := req.URL.Query()
		q.Del(tokenParam)
		req.URL.RawQuery = q.Encode()
	}
	// Request.Write adds a User-Agent of Go's own when there is none.
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""}
	}
}

// upgrade says whether req asks to switch protocols (a WebSocket).
func upgrade(req *http.Request) bool {
	if req.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range req.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// countReader counts what the person sent.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// headLimit fails reads past left bytes while a request's head is read;
// left < 0: unbounded (a body, an upgraded connection).
type headLimit struct {
	r    io.Reader
	left int
}

func (h *headLimit) Read(p []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(p)
	}
	if h.left == 0 {
		return 0, errHeadTooLarge
	}
	if len(p) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= n
	return n, err
}

var errHeadTooLarge = errors.New("a request head past 64 KiB")
