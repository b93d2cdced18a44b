package mcpserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

const (
	// bodyTimeBase and bodyRate set how long a body may take to come: the
	// base, plus a second a MiB.
	bodyTimeBase = 30 * time.Second
	bodyRate     = 1 << 20
	// bodyFirstBuffer is the buffer a body is first read into; it
	// doubles, to the body's announced size at most.
	bodyFirstBuffer = 64 << 10
)

// heldBody is a request body read whole, once: every layer reads its
// bytes (heldBytes) rather than a copy.
type heldBody struct {
	*bytes.Reader
	b []byte
}

func (heldBody) Close() error { return nil }

// holdBody makes b r's body.
func holdBody(r *http.Request, b []byte) {
	r.Body = heldBody{Reader: bytes.NewReader(b), b: b}
	r.ContentLength = int64(len(b))
}

// heldBytes returns r's body as held by bodyLimit, or false.
func heldBytes(r *http.Request) ([]byte, bool) {
	if h, ok := r.Body.(heldBody); ok {
		return h.b, true
	}
	return nil, false
}

// bodyLimit reads the body of a POST whole, once, at most max bytes,
// into a buffer of its size (so that holding it costs about its size), within a time that grows with its size, then hands
// the request on with the body held. A body announced larger than max
// is refused (413) before any of it is read; one that proves larger
// stops being read there; one that does not come in time is refused.
// Both close the connection. Only an authenticated request's body is
// ever read: bodyLimit comes after the bearer check.
func bodyLimit(max int64, f *refusals, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		tooLarge := fmt.Sprintf("request body larger than the server's limit (http.max_request_bytes: %d bytes)", max)
		if r.ContentLength > max {
			f.refuse(w, r, http.StatusRequestEntityTooLarge, refusedBodyTooLarge, tooLarge)
			return
		}
		size := r.ContentLength
		if size < 0 {
			size = max
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(bodyTimeBase + time.Duration(size/bodyRate)*time.Second))
		body, err := readBody(http.MaxBytesReader(w, r.Body, max), size, r.ContentLength >= 0)
		// The connection's reads from here on are net/http's watch for a
		// client that goes away: they must not time out.
		_ = rc.SetReadDeadline(time.Time{})
		var large *http.MaxBytesError
		switch {
		case errors.As(err, &large):
			f.refuse(w, r, http.StatusRequestEntityTooLarge, refusedBodyTooLarge, tooLarge)
			return
		case err != nil:
			f.refuse(w, r, http.StatusBadRequest, refusedBodyUnread, "reading the request body: "+err.Error())
			return
		}
		holdBody(r, body)
		next.ServeHTTP(w, r)
	})
}

// readBody reads r to its end, at most size bytes, into a buffer of the
// body's size: once the first bodyFirstBuffer bytes came, the buffer
// grows to the announced size at once (announced: true), else it doubles
// as it fills.
func readBody(r io.Reader, size int64, announced bool) ([]byte, error) {
	buf := make([]byte, 0, min(size, bodyFirstBuffer))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= size {
				return buf, atEnd(r)
			}
			next := 2 * int64(cap(buf))
			if announced {
				next = size
			}
			grown := make([]byte, len(buf), min(next, size))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// atEnd reports whether r has nothing more to give.
func atEnd(r io.Reader) error {
	var probe [1]byte
	for {
		n, err := r.Read(probe[:])
		switch {
		case n > 0:
			return errBodyLonger
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// errBodyLonger is a body longer than it was announced.
var errBodyLonger = errors.New("the body is longer than announced")
