package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestBodyLimit(t *testing.T) {
	var held []byte
	h := bodyLimit(1000, newRefusals(nil, nil), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held, _ = heldBytes(r)
	}))
	for _, tc := range []struct {
		name    string
		body    io.Reader
		length  int64
		status  int
		heldLen int
	}{
		{"announced and within", strings.NewReader(strings.Repeat("x", 1000)), 1000, 200, 1000},
		{"announced past the limit", strings.NewReader(strings.Repeat("x", 1001)), 1001, 413, 0},
		{"chunked within", io.MultiReader(strings.NewReader(strings.Repeat("x", 999))), -1, 200, 999},
		{"chunked past the limit", io.MultiReader(strings.NewReader(strings.Repeat("x", 5000))), -1, 413, 0},
		{"empty", strings.NewReader(""), 0, 200, 0},
	} {
		held = nil
		r := httptest.NewRequest("POST", "/mcp", tc.body)
		r.ContentLength = tc.length
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status || len(held) != tc.heldLen {
			t.Errorf("%s: %d, held %d bytes", tc.name, w.Code, len(held))
		}
		if tc.status != 200 && w.Header().Get("Connection") != "close" {
			t.Errorf("%s: a refusal keeps the connection", tc.name)
		}
	}
}

func TestReadBodyTakesItsSize(t *testing.T) {
	for _, n := range []int{0, 1, 64 << 10, 64<<10 + 1, 3 << 20} {
		b, err := readBody(bytes.NewReader(make([]byte, n)), int64(n), true)
		if err != nil || len(b) != n || cap(b) != n {
			t.Errorf("%d bytes: len %d cap %d, %v", n, len(b), cap(b), err)
		}
		if b, err := readBody(bytes.NewReader(make([]byte, n)), 4<<20, false); err != nil || len(b) != n {
			t.Errorf("%d bytes, chunked: len %d, %v", n, len(b), err)
		}
	}
	if _, err := readBody(strings.NewReader("longer"), 3, true); err == nil {
		t.Error("a body longer than announced was taken")
	}
}

func TestConnCaps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	caps := newConnCaps(ln, 3, 2, newRefusals(nil, nil))
	defer caps.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := caps.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		ne, ok := err.(net.Error)
		return !ok || !ne.Timeout()
	}
	dial()
	dial()
	a, b := <-accepted, <-accepted
	if !closed(dial()) {
		t.Fatal("a third unauthenticated connection was kept")
	}
	a.(*cappedConn).authenticate()
	dial()
	<-accepted
	if !closed(dial()) {
		t.Fatal("a fourth connection from one address was kept")
	}
	_ = b.Close()
	dial()
	<-accepted
}

// A task's call as handed to mcp-go is the client's, byte for byte in
// its arguments, with the layer's id and progress token.
func TestInnerCallKeepsTheArguments(t *testing.T) {
	args := `{"language":"python","code":"` + strings.Repeat("x", 1<<20) + `\n","files":[{"path":"a","content":"\u00e9"}]}`
	msg := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run_code","arguments":` + args + `,"_meta":{"k":1}}}`
	out, err := innerCall([]byte(msg), "T1", json.RawMessage(`[1]`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID     string `json:"id"`
		Method string `json:"method"`
		Params struct {
			Arguments      json.RawMessage `json:"arguments"`
			InputResponses json.RawMessage `json:"inputResponses"`
			Meta           map[string]any  `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != taskIDPrefix+"T1" || got.Method != "tools/call" || string(got.Params.Arguments) != args ||
		string(got.Params.InputResponses) != "[1]" || got.Params.Meta["progressToken"] != taskIDPrefix+"T1" || got.Params.Meta["k"] != 1.0 {
		t.Fatalf("%.300s", out)
	}
}
