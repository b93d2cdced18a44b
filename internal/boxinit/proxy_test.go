//go:build linux

package boxinit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/runbox-mcp/runbox/egress"
	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// bufConn reads what a buffered reader kept of a stream before the rest.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// The box's proxy carries each connection, as it is, over one stream of
// the channel to the host's egress proxy: plain HTTP, a CONNECT tunnel
// that half-closes, a refusal, and many at once.
func TestProxyOverTheChannel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, b)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())

	var proxyAddr string
	hostEnd, boxEnd := net.Pipe()
	hs, err := yamux.Client(hostEnd, initproto.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	bs, err := yamux.Server(boxEnd, initproto.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()

	n := manifest.Default().Network
	n.Allow = []manifest.Endpoint{{Host: "127.0.0.1", Ports: []int{port}}}
	px := egress.New(egress.Options{Network: n})
	var wg sync.WaitGroup
	go func() {
		for {
			st, err := hs.AcceptStream()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				br := bufio.NewReaderSize(st, 64<<10)
				var h initproto.Header
				if _, err := initproto.Receive(br, &h, 0); err != nil || h.Kind != initproto.StreamProxy {
					t.Errorf("stream %q: %v", h.Kind, err)
					st.Close()
					return
				}
				px.Serve(context.Background(), bufConn{st, br})
			}()
		}
	}()

	host := NewHost(bs)
	stop, err := networkService{}.Start(context.Background(), host, &initproto.Job{})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		// The job names a free port; a job without a proxy opened none.
		addr := ln.Addr().String()
		ln.Close()
		stop, err = networkService{}.Start(context.Background(), host, &initproto.Job{Proxy: addr})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if stop != nil {
				stop()
			}
		}()
		proxyAddr = addr
	}
	proxyURL := &url.URL{Scheme: "http", Host: proxyAddr}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), DisableKeepAlives: true}, Timeout: 10 * time.Second}

	var cwg sync.WaitGroup
	for i := range 100 {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			resp, err := c.Post(fmt.Sprintf("%s/%d", srv.URL, i), "text/plain", strings.NewReader("body"))
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != fmt.Sprintf("POST /%d body", i) {
				t.Errorf("%d: %q", i, b)
			}
		}()
	}
	cwg.Wait()

	// A tunnel: the request, a half-close, the answer.
	raw, err := net.Dial("tcp", proxyURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(raw, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\nGET /tunnel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", u.Host)
	raw.(*net.TCPConn).CloseWrite()
	all, _ := io.ReadAll(raw)
	raw.Close()
	if !strings.HasPrefix(string(all), "HTTP/1.1 200 Connection established") || !strings.HasSuffix(string(all), "GET /tunnel ") {
		t.Fatalf("tunnel: %q", all)
	}

	resp, err := c.Get("http://undeclared.example/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(b), "network.allow: [{host: undeclared.example, ports: [80]}]") {
		t.Fatalf("refusal: %d %q", resp.StatusCode, b)
	}
	stop()
	stop = nil
	wg.Wait()
	if recs := px.Records(); len(recs) != 102 {
		t.Fatalf("%d records", len(recs))
	}
}
