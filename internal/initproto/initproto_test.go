package initproto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	frames := []struct {
		typ     byte
		payload []byte
	}{
		{FrameReport, []byte(`{"exit_code":0}`)},
		{FrameArtifact, []byte{}},
		{FrameArtifact, bytes.Repeat([]byte{0, 1, 2}, 100000)},
	}
	for _, f := range frames {
		if err := WriteFrame(&buf, f.typ, f.payload); err != nil {
			t.Fatal(err)
		}
	}
	r := NewReader(&buf)
	for i, want := range frames {
		typ, payload, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if typ != want.typ || !bytes.Equal(payload, want.payload) {
			t.Fatalf("frame %d: got type %q, %d bytes", i, typ, len(payload))
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after last frame: got %v, want io.EOF", err)
	}
}

func TestReaderRejectsBadStreams(t *testing.T) {
	cases := map[string][]byte{
		"short header":  {FrameReport, 0, 0},
		"short payload": {FrameReport, 0, 0, 0, 5, 'a', 'b'},
	}
	for name, data := range cases {
		if _, _, err := NewReader(bytes.NewReader(data)).Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: got %v, want io.ErrUnexpectedEOF", name, err)
		}
	}
	huge := []byte{FrameArtifact, 0xff, 0xff, 0xff, 0xff}
	if _, _, err := NewReader(bytes.NewReader(huge)).Next(); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("huge frame: got %v, want ErrFrameTooLarge", err)
	}
}

func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteFrame(&buf, FrameReport, []byte(`{}`))
	f.Add(buf.Bytes())
	f.Add([]byte{FrameArtifact, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for i := 0; i < 1000; i++ {
			if _, _, err := r.Next(); err != nil {
				return
			}
		}
	})
}
