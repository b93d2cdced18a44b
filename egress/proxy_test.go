package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// serveProxy runs p on a loopback listener, as runbox-init would hand it
// each connection, and returns its URL.
func serveProxy(t *testing.T, p *Proxy) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); ln.Close(); wg.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.Serve(ctx, c) }()
		}
	}()
	return &url.URL{Scheme: "http", Host: ln.Addr().String()}
}

func network(allow ...manifest.Endpoint) manifest.Network {
	n := manifest.Default().Network
	n.Allow = allow
	return n
}

func port(t *testing.T, rawURL string) int {
	u, _ := url.Parse(rawURL)
	p, _ := strconv.Atoi(u.Port())
	return p
}

func client(proxy *url.URL, srv *httptest.Server) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(proxy), DisableKeepAlives: true}
	if srv != nil && srv.TLS != nil {
		tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
	})
}

// noDial fails the test if the proxy connects anywhere.
func noDial(t *testing.T) DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		t.Errorf("dialled %s", address)
		return nil, errors.New("no")
	}
}

func TestProxyAllowed(t *testing.T) {
	plain := httptest.NewServer(echo())
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(echo())
	defer tlsSrv.Close()
	p := New(Options{Network: network(
		manifest.Endpoint{Host: "127.0.0.1", Ports: []int{port(t, plain.URL), port(t, tlsSrv.URL)}},
	)})
	purl := serveProxy(t, p)
	for _, srv := range []*httptest.Server{plain, tlsSrv} {
		c := client(purl, srv)
		resp, err := c.Get(srv.URL + "/get")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "GET /get " {
			t.Fatalf("%s: %q", srv.URL, b)
		}
		resp, err = c.Post(srv.URL+"/post", "text/plain", strings.NewReader("hello"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "POST /post hello" {
			t.Fatalf("%s: %q", srv.URL, b)
		}
	}
	recs := p.Records()
	if len(recs) != 4 {
		t.Fatalf("records: %+v", recs)
	}
	for i, r := range recs {
		want := []string{"GET", "POST", "CONNECT", "CONNECT"}[i]
		if !r.Allowed || r.Method != want || r.Host != "127.0.0.1" || r.Rule == "" || !strings.HasPrefix(r.Rule, "network.allow[0]") ||
			r.BytesIn == 0 || r.BytesOut == 0 || r.Address == "" || r.Reason != "" || r.Cut != "" {
			t.Errorf("record %d: %+v", i, r)
		}
	}
}

func TestProxyRefusals(t *testing.T) {
	plain := httptest.NewServer(echo())
	defer plain.Close()
	pp := port(t, plain.URL)
	n := network(
		manifest.Endpoint{Host: "loop.test", Ports: []int{pp}},
		manifest.Endpoint{Host: "meta.test", Ports: []int{80}},
		manifest.Endpoint{Host: "ask.test", Ports: []int{pp}, Approve: manifest.ApproveAsk},
	)
	n.Hosts = map[string]string{"loop.test": "127.0.0.1", "meta.test": "169.254.169.254", "ask.test": "127.0.0.1"}
	p := New(Options{Network: n, Dial: noDial(t)})
	purl := serveProxy(t, p)
	cases := []struct {
		url    string
		status int
		body   string
	}{
		{"http://undeclared.example/x", 403, "undeclared.example:80 is not declared in the manifest's network.allow; to allow it add network.allow: [{host: undeclared.example, ports: [80]}]"},
		{fmt.Sprintf("http://loop.test:%d/", pp), 403, "resolves to 127.0.0.1, a loopback address"},
		{"http://meta.test/latest/meta-data/", 403, "resolves to 169.254.169.254, a cloud-metadata address"},
		{fmt.Sprintf("http://127.0.0.1:%d/", pp), 403, "is not declared"},
		{fmt.Sprintf("http://ask.test:%d/", pp), 403, "needs the user's approval and the client cannot ask"},
	}
	c := client(purl, nil)
	for _, tc := range cases {
		resp, err := c.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
			t.Errorf("%s: %d %q, want %d %q", tc.url, resp.StatusCode, b, tc.status, tc.body)
		}
	}
	// CONNECT refused: the client sees the status and the reason.
	_, err := c.Get("https://undeclared.example/")
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("CONNECT to an undeclared host: %v", err)
	}
	recs := p.Records()
	if len(recs) != len(cases)+1 {
		t.Fatalf("records: %+v", recs)
	}
	for _, r := range recs {
		if r.Allowed || r.Reason == "" || r.BytesIn+r.BytesOut != 0 {
			t.Errorf("record: %+v", r)
		}
	}
	if recs[1].Rule == "" || recs[0].Rule != "" {
		t.Errorf("rules: %q %q", recs[0].Rule, recs[1].Rule)
	}
}

// fakeResolver answers fixed addresses for any name.
type fakeResolver []netip.Addr

func (f fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return f, nil
}

// A name that resolves to a mix connects only to what the entry permits,
// and only to the resolved address itself.
func TestProxyDialsOnlyCheckedAddresses(t *testing.T) {
	srv := httptest.NewServer(echo())
	defer srv.Close()
	pp := port(t, srv.URL)
	var dialled []string
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		dialled = append(dialled, address)
		return (&net.Dialer{}).DialContext(ctx, network, address)
	}
	p := New(Options{
		Network:  network(manifest.Endpoint{Host: "mixed.test", Ports: []int{pp}, Addresses: []string{"127.0.0.1"}}),
		Resolver: fakeResolver{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("127.0.0.1")},
		Dial:     dial,
	})
	resp, err := client(serveProxy(t, p), nil).Get(fmt.Sprintf("http://mixed.test:%d/ok", pp))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "GET /ok " || len(dialled) != 1 || dialled[0] != fmt.Sprintf("127.0.0.1:%d", pp) {
		t.Fatalf("%q, dialled %v", b, dialled)
	}
}

func TestProxyByteCap(t *testing.T) {
	big := strings.Repeat("x", 256<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) }))
	defer srv.Close()
	n := network(manifest.Endpoint{Host: "127.0.0.1", Ports: []int{port(t, srv.URL)}})
	n.MaxBytes = 64 << 10
	p := New(Options{Network: n})
	resp, err := client(serveProxy(t, p), nil).Get(srv.URL)
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil && len(b) == len(big) {
			t.Fatal("the whole body passed the cap")
		}
	}
	r := p.Records()[0]
	if r.Cut != contract.CutBytes || !strings.Contains(r.Reason, "network.max_bytes (64KiB)") || r.BytesIn+r.BytesOut > 64<<10 {
		t.Fatalf("record: %+v", r)
	}
}

// A client that drips its request is cut at the connection's time cap.
func TestProxyTimeCap(t *testing.T) {
	srv := httptest.NewServer(echo())
	defer srv.Close()
	n := network(manifest.Endpoint{Host: "127.0.0.1", Ports: []int{port(t, srv.URL)}})
	n.ConnectionSeconds = 0.5
	p := New(Options{Network: n})
	purl := serveProxy(t, p)
	c, err := net.Dial("tcp", purl.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", srv.Listener.Addr(), srv.Listener.Addr())
	br := bufio.NewReader(c)
	if line, _ := br.ReadString('\n'); !strings.Contains(line, " 200 ") {
		t.Fatalf("CONNECT: %q", line)
	}
	start := time.Now()
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
	for time.Since(start) < 5*time.Second {
		if _, err := c.Write([]byte("x")); err != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a dripping client held its connection for %v", d)
	}
	time.Sleep(100 * time.Millisecond)
	if r := p.Records()[0]; r.Cut != contract.CutTime || r.DurationMs > 2000 {
		t.Fatalf("record: %+v", r)
	}
}

func TestProxyConnectionCap(t *testing.T) {
	n := network(manifest.Endpoint{Host: "a.example"})
	n.MaxConnections = 2
	p := New(Options{Network: n, Dial: noDial(t)})
	c := client(serveProxy(t, p), nil)
	var codes []int
	for range 6 {
		resp, err := c.Get("http://b.example/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	// Past the cap each refusal is recorded, up to twice the cap; past
	// that they are counted, in one last record.
	recs := p.Records()
	if fmt.Sprint(codes) != "[403 403 429 429 429 429]" || len(recs) != 5 || p.Overflow() != 2 {
		t.Fatalf("codes %v, %d records, overflow %d", codes, len(recs), p.Overflow())
	}
	if last := recs[4]; last.Allowed || !strings.Contains(last.Reason, "network.max_connections (2) connections already: 2 more refused") {
		t.Fatalf("the count of those not listed: %+v", last)
	}
	for _, r := range recs[2:4] {
		if r.Allowed || r.Host != "b.example" || !strings.Contains(r.Reason, "network.max_connections (2)") {
			t.Fatalf("record past the cap: %+v", r)
		}
	}
}

// A request head past MaxRequestHeader is answered 431 and recorded; one
// that never ends is given up and recorded.
func TestProxyOversizedHead(t *testing.T) {
	p := New(Options{Network: network(manifest.Endpoint{Host: "a.example"}), Dial: noDial(t)})
	purl := serveProxy(t, p)
	c, err := net.Dial("tcp", purl.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.WriteString(c, "GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX-Pad: "+strings.Repeat("a", 70000)+"\r\n\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 431 ") {
		t.Fatalf("answer: %q", line)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(p.Records()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if recs := p.Records(); len(recs) != 1 || recs[0].Allowed || !strings.Contains(recs[0].Reason, "64 KiB") {
		t.Fatalf("records: %+v", recs)
	}
}

func TestProxyBadRequests(t *testing.T) {
	p := New(Options{Network: network(manifest.Endpoint{Host: "a.example"}), Dial: noDial(t)})
	purl := serveProxy(t, p)
	for _, raw := range []string{
		"GET /relative HTTP/1.1\r\nHost: a.example\r\n\r\n",
		"CONNECT a.example HTTP/1.1\r\nHost: a.example\r\n\r\n",
		"not http at all\r\n\r\n",
		"GET http://a.example:99999/ HTTP/1.1\r\nHost: a.example\r\n\r\n",
	} {
		c, err := net.Dial("tcp", purl.Host)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, raw)
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.HasPrefix(line, "HTTP/1.1 400 ") {
			t.Errorf("%q: %q", raw, line)
		}
	}
}

// Many connections at once from one run are all carried and recorded.
func TestProxyParallel(t *testing.T) {
	srv := httptest.NewServer(echo())
	defer srv.Close()
	p := New(Options{Network: network(manifest.Endpoint{Host: "127.0.0.1", Ports: []int{port(t, srv.URL)}})})
	c := client(serveProxy(t, p), nil)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(fmt.Sprintf("%s/%d", srv.URL, i))
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != fmt.Sprintf("GET /%d ", i) {
				errs <- fmt.Errorf("%d: %q", i, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(p.Records()); n != 100 {
		t.Fatalf("%d records", n)
	}
}
