package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// Interception is what the proxy needs to add entries' credentials: the
// secrets, the CA whose certificates end a box's TLS to those entries,
// and the roots it verifies their servers with (nil: the host's system
// roots, which honour SSL_CERT_FILE and SSL_CERT_DIR).
type Interception struct {
	Credentials Credentials
	CA          *CA
	Roots       *x509.CertPool
}

// CAPEM is the certificate of the CA whose leaves end the boxes' TLS, for
// the boxes to trust; nil for none.
func (ic *Interception) CAPEM() []byte {
	if ic == nil || ic.CA == nil {
		return nil
	}
	return ic.CA.PEM()
}

// scrub replaces every credential's secret in s (Credentials.scrub).
func (ic *Interception) scrub(s string) string {
	if ic == nil {
		return s
	}
	return ic.Credentials.scrub(s)
}

// credential is the matched entry's credential when the proxy adds one.
func (ic *Interception) credential(m Match) (credential, bool) {
	if ic == nil || ic.CA == nil {
		return credential{}, false
	}
	return ic.Credentials.credential(m)
}

// maxRecordedRequests bounds a connection's request records.
const maxRecordedRequests = 100

// plainRefusal is why a plain-HTTP request to an entry with a credential
// is refused: the secret would cross the network in the clear.
func plainRefusal(m Match, host string, port int) string {
	return fmt.Sprintf("%s:%d carries a credential (%s), which runbox sends over HTTPS only; use https://", NormalizeHost(host), port, m.Rule())
}

// intercept serves a CONNECT to an entry with a credential: the proxy
// makes its own verified TLS connection to the server first (a failure is
// a 502 the program reads), then ends the program's TLS with a
// certificate of runbox's CA and carries its requests one by one, each
// with the entry's header set, and the responses back.
func (p *Proxy) intercept(ctx context.Context, cred credential, host string, port int, fromBox io.Reader, box io.ReadWriteCloser, up net.Conn, toUp, toBox io.Writer, set func(func(*contract.Connection))) {
	hs, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	name := NormalizeHost(host)
	upTLS := tls.Client(&wireConn{Conn: up, w: toUp}, &tls.Config{ServerName: name, RootCAs: p.icpt.Roots,
		NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	if err := upTLS.HandshakeContext(hs); err != nil {
		// The server's certificate is its own to name: one that names
		// a secret sent on an earlier connection must not carry it on.
		why := p.icpt.scrub(fmt.Sprintf("TLS to %s:%d failed: %v", name, port, err))
		set(func(r *contract.Connection) { r.Reason = why })
		refuse(box, http.StatusBadGateway, "runbox: "+why)
		return
	}
	defer upTLS.Close()
	leaf, err := p.icpt.CA.Leaf(name)
	if err != nil {
		set(func(r *contract.Connection) { r.Reason = "runbox CA: " + err.Error() })
		refuse(box, http.StatusBadGateway, "runbox: cannot issue a certificate for "+name)
		return
	}
	if _, err := io.WriteString(box, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	boxTLS := tls.Server(&boxConn{r: fromBox, w: toBox, c: box}, &tls.Config{Certificates: []tls.Certificate{*leaf},
		NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
	if err := boxTLS.HandshakeContext(hs); err != nil {
		set(func(r *contract.Connection) {
			r.Reason = "the program's TLS handshake with runbox's proxy failed (does it trust runbox's CA? SSL_CERT_FILE and the like name it): " + err.Error()
		})
		return
	}
	cancel()
	defer boxTLS.Close()
	p.exchange(cred, name, boxTLS, upTLS, set)
}

// exchange carries HTTP/1.1 requests from the program to the server and
// the responses back until either side ends the connection.
func (p *Proxy) exchange(cred credential, host string, boxTLS, upTLS net.Conn, set func(func(*contract.Connection))) {
	lim := &io.LimitedReader{R: boxTLS, N: MaxRequestHeader}
	br := bufio.NewReader(lim)
	ur := bufio.NewReaderSize(upTLS, 32<<10)
	for n := 0; ; n++ {
		lim.N = MaxRequestHeader + int64(br.Buffered())
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		lim.N = 1 << 62
		if h := requestHost(req.Host); h != host {
			// Another name on this server's connection (a CDN fronting
			// both) must not get this entry's secret.
			misdirected(boxTLS, fmt.Sprintf("runbox: this connection is to %s; its requests must name it as their Host, not %q", host, h))
			return
		}
		if req.Method == http.MethodTrace {
			// TRACE echoes the request, secret included, into the box.
			misdirected(boxTLS, "runbox: TRACE is not carried to an entry with a credential")
			return
		}
		for _, h := range []string{"Proxy-Authorization", "Proxy-Connection"} {
			req.Header.Del(h)
		}
		cred.apply(req.Header)
		if _, ok := req.Header["User-Agent"]; !ok {
			// Otherwise req.Write adds Go's.
			req.Header["User-Agent"] = []string{""}
		}
		if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
			req.Header.Del("Expect")
			if _, err := io.WriteString(boxTLS, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return
			}
		}
		rec := n < maxRecordedRequests
		if rec {
			hr := contract.HTTPRequest{Method: req.Method, Path: redactedPath(req)}
			set(func(r *contract.Connection) { r.Requests = append(r.Requests, hr) })
		}
		wrote := make(chan error, 1)
		go func() {
			bw := bufio.NewWriterSize(upTLS, 32<<10)
			err := req.Write(bw)
			if err == nil {
				err = bw.Flush()
			}
			wrote <- err
		}()
		resp, err := http.ReadResponse(ur, req)
		for err == nil && resp.StatusCode/100 == 1 && resp.StatusCode != http.StatusSwitchingProtocols {
			// An informational answer (103 Early Hints) is dropped.
			resp, err = http.ReadResponse(ur, req)
		}
		if err != nil {
			// A malformed response may quote the header it was sent:
			// scrubbed of the secret first, then quoted.
			why := fmt.Sprintf("the server's response could not be read: %q", p.icpt.scrub(err.Error()))
			set(func(r *contract.Connection) { r.Reason = why })
			return
		}
		if rec {
			set(func(r *contract.Connection) { r.Requests[n].Status = resp.StatusCode })
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if resp.Write(boxTLS) == nil && <-wrote == nil {
				splice(br, boxTLS, ur, upTLS)
			}
			return
		}
		werr := resp.Write(boxTLS)
		resp.Body.Close()
		if werr != nil || req.Close || resp.Close {
			return
		}
		select {
		case err := <-wrote:
			if err != nil {
				return
			}
		case <-time.After(afterUpstream):
			// The server answered before it read the whole request (a
			// 401 to a large upload) and the request is still going:
			// the connection cannot carry another.
			return
		}
	}
}

// requestHost is a request's Host without its port, normalized.
func requestHost(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return NormalizeHost(h)
	}
	return NormalizeHost(hostport)
}

// redactedPath is the request's path with any query replaced.
func redactedPath(req *http.Request) string {
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	if req.URL.RawQuery != "" || req.URL.ForceQuery {
		path += "?[redacted]"
	}
	return path
}

// misdirected answers a request the proxy will not carry on an
// intercepted connection, and the connection ends.
func misdirected(w io.Writer, msg string) {
	body := msg + "\n"
	fmt.Fprintf(w, "HTTP/1.1 421 Misdirected Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s",
		strconv.Itoa(len(body)), body)
}

// splice carries an upgraded connection's bytes both ways until one side
// ends it.
func splice(fromBox io.Reader, boxTLS net.Conn, fromUp io.Reader, upTLS net.Conn) {
	var once sync.Once
	done := make(chan struct{})
	end := func() { once.Do(func() { _ = boxTLS.Close(); _ = upTLS.Close(); close(done) }) }
	go func() { _, _ = io.Copy(upTLS, fromBox); end() }()
	go func() { _, _ = io.Copy(boxTLS, fromUp); end() }()
	<-done
}

// wireConn is the server's connection with its writes counted.
type wireConn struct {
	net.Conn
	w io.Writer
}

func (c *wireConn) Write(b []byte) (int, error) { return c.w.Write(b) }

// boxConn is a box's proxied stream as a net.Conn for crypto/tls: reads
// from what the proxy has buffered, counted writes, the stream's Close
// and read deadline.
type boxConn struct {
	r io.Reader
	w io.Writer
	c io.Closer
}

func (c *boxConn) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *boxConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c *boxConn) Close() error                { return c.c.Close() }
func (c *boxConn) LocalAddr() net.Addr         { return boxAddr{} }
func (c *boxConn) RemoteAddr() net.Addr        { return boxAddr{} }
func (c *boxConn) SetDeadline(t time.Time) error {
	return c.SetReadDeadline(t)
}
func (c *boxConn) SetReadDeadline(t time.Time) error {
	if d, ok := c.c.(interface{ SetReadDeadline(time.Time) error }); ok {
		return d.SetReadDeadline(t)
	}
	return nil
}
func (c *boxConn) SetWriteDeadline(time.Time) error { return nil }

type boxAddr struct{}

func (boxAddr) Network() string { return "runbox" }
func (boxAddr) String() string  { return "box" }
