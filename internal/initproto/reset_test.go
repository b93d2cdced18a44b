package initproto

import (
	"bytes"
	"io"
	"testing"
)

// A restarted server resets the channel mid-way through whatever the dead
// one left half-written: every cut point of the old stream must leave the
// box reading exactly the new channel's data after the reset.
func TestResetEndsAHalfWrittenFrame(t *testing.T) {
	var old bytes.Buffer
	ow := NewResetWriter(&old)
	n1 := bytes.Repeat([]byte{1}, NonceSize)
	if err := ow.Reset(n1); err != nil {
		t.Fatal(err)
	}
	start := old.Len()
	big := bytes.Repeat([]byte{0x5A, 0xA5, 0, 'R'}, 40000) // longer than a frame, full of marker bytes
	if _, err := ow.Write(big); err != nil {
		t.Fatal(err)
	}
	stream := old.Bytes()
	n2 := bytes.Repeat([]byte{2}, NonceSize)
	for _, cut := range []int{start, start + 1, start + 2, start + 3, start + 1000, start + maxFrame + 3, start + maxFrame + 4, len(stream) - 1} {
		var buf bytes.Buffer
		buf.Write(stream[:cut])
		nw := NewResetWriter(&buf)
		if err := nw.Reset(n2); err != nil {
			t.Fatal(err)
		}
		_, _ = nw.Write([]byte("new channel"))
		rr := NewResetReader(&buf)
		got, err := rr.Await()
		if err != nil || !bytes.Equal(got, n1) {
			t.Fatalf("cut %d: first reset %x, %v", cut, got, err)
		}
		// The old channel reads what was sent, then the padding that
		// completed its half-written frame: the dead session's garbage.
		if _, err := io.ReadAll(rr); err != nil {
			t.Fatalf("cut %d: old channel: %v", cut, err)
		}
		if got, err := rr.Await(); err != nil || !bytes.Equal(got, n2) {
			t.Fatalf("cut %d: second reset %x, %v", cut, got, err)
		}
		rest, _ := io.ReadAll(rr)
		if string(rest) != "new channel" {
			t.Fatalf("cut %d: the new channel reads %q", cut, rest)
		}
	}
}

func TestAwaitAckSkipsTheOldOutput(t *testing.T) {
	nonce := bytes.Repeat([]byte{7}, NonceSize)
	in := append(append([]byte("RBXACK0 half of an old frame RBXACK01"), Ack([]byte("0123456789abcdef"))...), Ack(nonce)...)
	r, err := AwaitAck(bytes.NewReader(append(in, "yamux"...)), nonce, 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(r); string(rest) != "yamux" {
		t.Fatalf("after the ack: %q", rest)
	}
	if _, err := AwaitAck(bytes.NewReader(bytes.Repeat([]byte("x"), 100)), nonce, 50); err != ErrNoAck {
		t.Fatalf("no ack: %v", err)
	}
}

// FuzzResetReader: whatever a dead server left on the box's stdin, the
// box reads it without panicking or growing memory, and a reset that
// follows it is always found.
func FuzzResetReader(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0xA5, 0xff, 0xff, 'x'})
	f.Add([]byte{0x5A, 'R', 'B', 'X'})
	f.Add(append([]byte{0xA5, 0x00, 0x05}, "RBXRESET"...))
	f.Fuzz(func(t *testing.T, junk []byte) {
		var buf bytes.Buffer
		buf.Write(junk)
		nonce := bytes.Repeat([]byte{9}, NonceSize)
		w := NewResetWriter(&buf)
		if err := w.Reset(nonce); err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte("after"))
		rr := NewResetReader(&buf)
		// The junk may itself hold resets; the last nonce is ours.
		var got []byte
		for {
			n, err := rr.Await()
			if err != nil {
				break
			}
			got = n
			rest, _ := io.ReadAll(rr)
			if bytes.Equal(n, nonce) && rr.nonce == nil {
				if string(rest) != "after" {
					t.Fatalf("after our reset: %q", rest)
				}
				return
			}
		}
		t.Fatalf("our reset was not found (last nonce %x)", got)
	})
}

// A box's first channel starts with a reset without padding, and End ends
// a channel for good: the reader's data stops there and Await says so.
func TestStartAndEnd(t *testing.T) {
	var buf bytes.Buffer
	w := NewResetWriter(&buf)
	n := bytes.Repeat([]byte{7}, NonceSize)
	if err := w.Start(n); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 1+len(resetMagic)+NonceSize {
		t.Fatalf("a first channel's reset is %d bytes", buf.Len())
	}
	_, _ = w.Write([]byte("job"))
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write([]byte("after the end"))
	rr := NewResetReader(&buf)
	if got, err := rr.Await(); err != nil || !bytes.Equal(got, n) {
		t.Fatalf("start %x, %v", got, err)
	}
	if got, err := io.ReadAll(rr); err != nil || string(got) != "job" {
		t.Fatalf("the channel reads %q, %v", got, err)
	}
	if _, err := rr.Await(); err != ErrEnded {
		t.Fatalf("after the end: %v", err)
	}
}
