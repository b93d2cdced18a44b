package sandbox

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

type nopCloser struct{ io.ReadWriter }

func (nopCloser) Close() error { return nil }

// An exposed stream's standing grant outlives a call's new bound, and
// ends with the stream: a download through a preview never eats a cell's
// bytes, and a closed one gives the box nothing more.
func TestStandingGrantsOutliveTheCallsBound(t *testing.T) {
	read := func(c *countingConn, n int) (int, error) {
		got, err := io.ReadFull(c, make([]byte, n))
		return got, err
	}
	c := &countingConn{ReadWriteCloser: nopCloser{bytes.NewBuffer(make([]byte, 1000))}, max: 10}
	c.stand(100)
	c.bound(10) // a call begins
	if n, err := read(c, 110); err != nil || n != 110 {
		t.Fatalf("within the call's bound and the standing grant: %d %v", n, err)
	}
	if _, err := read(c, 1); !errors.Is(err, errFlood) {
		t.Fatalf("past both: %v", err)
	}
	c.stand(-100) // the stream closed
	c.bound(10)
	if n, err := read(c, 11); n != 10 || !errors.Is(err, errFlood) {
		t.Fatalf("after the stream closed: %d %v", n, err)
	}
}
