package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// headersEcho answers with what arrived: method, path, the Authorization
// values and X-Api-Key.
func headersEcho() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s auth=%q key=%q body=%s", r.Method, r.URL.Path, r.Header.Values("Authorization"), r.Header.Values("X-Api-Key"), b)
	})
}

type credSetup struct {
	p          *Proxy
	purl       *url.URL
	api, other *httptest.Server
	ca         *CA
}

// newCredSetup: api (HTTPS) carries a credential; other (HTTPS) does not.
func newCredSetup(t *testing.T) *credSetup {
	t.Helper()
	return newCredSetupWith(t, headersEcho())
}

// newCredSetupWith is newCredSetup with api served by h.
func newCredSetupWith(t *testing.T, h http.Handler) *credSetup {
	t.Helper()
	s := &credSetup{api: httptest.NewTLSServer(h), other: httptest.NewTLSServer(headersEcho())}
	t.Cleanup(s.api.Close)
	t.Cleanup(s.other.Close)
	n := network(
		manifest.Endpoint{Host: "127.0.0.1", Ports: []int{port(t, s.api.URL)}, Credential: &manifest.Credential{Env: "API_TOKEN", Placeholder: "api"}},
		manifest.Endpoint{Host: "127.0.0.1", Ports: []int{port(t, s.other.URL)}},
	)
	creds, err := LoadCredentials(n, env(map[string]string{"API_TOKEN": "s3cret-value"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.ca, err = OpenCA(t.TempDir(), CAHosts(n)); err != nil {
		t.Fatal(err)
	}
	upRoots := x509.NewCertPool()
	upRoots.AddCert(s.api.Certificate())
	s.p = New(Options{Network: n, Interception: &Interception{Credentials: creds, CA: s.ca, Roots: upRoots}})
	s.purl = serveProxy(t, s.p)
	return s
}

// client trusts runbox's CA (for api) and the test server's (for other),
// as a box's bundle would.
func (s *credSetup) client(keepAlive bool) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(s.ca.Certificate())
	pool.AddCert(s.other.Certificate())
	tr := &http.Transport{Proxy: http.ProxyURL(s.purl), DisableKeepAlives: !keepAlive, TLSClientConfig: &tls.Config{RootCAs: pool}}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func get(t *testing.T, c *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestInterceptAddsCredential(t *testing.T) {
	s := newCredSetup(t)
	c := s.client(true)
	req, _ := http.NewRequest("GET", s.api.URL+"/user?token=q", nil)
	if code, body := get(t, c, req); code != 200 || body != `GET /user auth=["Bearer s3cret-value"] key=[] body=` {
		t.Fatalf("%d %s", code, body)
	}
	// The program's own header (its placeholder, or two of them) is
	// replaced, never doubled; a POST body is carried; keep-alive works.
	req, _ = http.NewRequest("POST", s.api.URL+"/repos", strings.NewReader("payload"))
	req.Header.Add("Authorization", "Bearer runbox-secret:api")
	req.Header.Add("Authorization", "Basic Zm9vOmJhcg==")
	if code, body := get(t, c, req); code != 200 || body != `POST /repos auth=["Bearer s3cret-value"] key=[] body=payload` {
		t.Fatalf("%d %s", code, body)
	}
	// The server's certificate the program saw is runbox's.
	resp, err := c.Get(s.api.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if iss := resp.TLS.PeerCertificates[0].Issuer.CommonName; !strings.HasPrefix(iss, "runbox egress CA") {
		t.Fatalf("issuer %q", iss)
	}
	// A redirect to the other declared entry arrives there without it,
	// end to end (the other server's own certificate).
	req, _ = http.NewRequest("GET", s.api.URL+"/redirect?to="+url.QueryEscape(s.other.URL+"/landed"), nil)
	if code, body := get(t, c, req); code != 200 || body != `GET /landed auth=[] key=[] body=` {
		t.Fatalf("%d %s", code, body)
	}
	recs := s.p.Records()
	var seen []contract.HTTPRequest
	for _, r := range recs {
		if strings.HasPrefix(r.Rule, "network.allow[0]") {
			seen = append(seen, r.Requests...)
			if r.BytesIn == 0 || r.BytesOut == 0 {
				t.Errorf("bytes: %+v", r)
			}
		} else if r.Requests != nil {
			t.Errorf("an end-to-end connection has requests: %+v", r)
		}
	}
	want := []contract.HTTPRequest{{Method: "GET", Path: "/user?[redacted]", Status: 200}, {Method: "POST", Path: "/repos", Status: 200}, {Method: "GET", Path: "/x", Status: 200}, {Method: "GET", Path: "/redirect?[redacted]", Status: 302}}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("requests %+v, want %+v", seen, want)
	}
	for _, r := range recs {
		if strings.Contains(fmt.Sprintf("%#v", r), "s3cret") {
			t.Fatalf("the secret in a record: %+v", r)
		}
	}
}

// Plain HTTP to an entry with a credential is refused (the secret would
// cross in the clear); a request naming another Host on the connection,
// or TRACE, is not carried; an undeclared host is still 403.
func TestInterceptRefusals(t *testing.T) {
	s := newCredSetup(t)
	c := s.client(false)
	if code, body := get(t, c, mustReq(t, "GET", "http://"+s.api.Listener.Addr().String()+"/x")); code != 403 || !strings.Contains(body, "runbox sends over HTTPS only") {
		t.Fatalf("plain: %d %s", code, body)
	}
	req := mustReq(t, "GET", s.api.URL+"/x")
	req.Host = "evil.example"
	if code, body := get(t, c, req); code != 421 || !strings.Contains(body, "must name it as their Host") {
		t.Fatalf("other Host: %d %s", code, body)
	}
	if code, _ := get(t, c, mustReq(t, "TRACE", s.api.URL+"/x")); code != 421 {
		t.Fatalf("TRACE: %d", code)
	}
	if code, _ := get(t, c, mustReq(t, "GET", "http://undeclared.example/")); code != 403 {
		t.Fatalf("undeclared: %d", code)
	}
}

// A program that does not trust runbox's CA fails its handshake, and the
// record says why; the secret went nowhere.
func TestInterceptUntrusted(t *testing.T) {
	s := newCredSetup(t)
	cc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(s.purl)}, Timeout: 10 * time.Second}
	if _, err := cc.Get(s.api.URL + "/x"); err == nil {
		t.Fatal("an untrusting client got through")
	}
	time.Sleep(100 * time.Millisecond)
	if r := s.p.Records(); len(r) != 1 || !strings.Contains(r[0].Reason, "runbox's CA") || len(r[0].Requests) != 0 {
		t.Fatalf("%+v", r)
	}
}

// An upstream whose certificate the proxy cannot verify is a 502 the
// program reads, before any request is sent.
func TestInterceptUpstreamUnverified(t *testing.T) {
	s := newCredSetup(t)
	s.p.icpt = &Interception{Credentials: s.p.icpt.Credentials, CA: s.ca, Roots: x509.NewCertPool()}
	conn, err := net.Dial("tcp", s.purl.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", s.api.Listener.Addr())
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 502 ") || !strings.Contains(line, "certificate") {
		t.Fatalf("%q", line)
	}
}

func mustReq(t *testing.T, method, u string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestInterceptMalformedEchoIsScrubbed: a server that answers with a
// malformed header line quoting the header it was sent (a broken or
// hostile server) gets its bytes into the connection's record, quoted,
// but never the secret.
func TestInterceptMalformedEchoIsScrubbed(t *testing.T) {
	s := newCredSetupWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nEcho Authorization %s\r\n\r\n", r.Header.Get("Authorization"))
		buf.Flush()
	}))
	req, _ := http.NewRequest("GET", s.api.URL+"/echo", nil)
	if resp, err := s.client(false).Do(req); err == nil {
		resp.Body.Close()
	}
	var reason string
	for _, r := range s.p.Records() {
		if strings.HasPrefix(r.Rule, "network.allow[0]") {
			reason = r.Reason
		}
	}
	if strings.Contains(fmt.Sprintf("%+v", s.p.Records()), "s3cret-value") {
		t.Fatalf("the secret is in the records: %+v", s.p.Records())
	}
	if !strings.Contains(reason, "malformed") || !strings.Contains(reason, `Echo Authorization [redacted]`) {
		t.Fatalf("reason %q", reason)
	}
}
