//go:build linux

package pollfd

import (
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Pollable turns a blocking pipe into one read through the poller, as
// readable as before; anything else it leaves as it is.
func TestPollable(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	defer w.Close()
	got := Pollable(r)
	if got == io.Reader(r) {
		t.Fatal("a blocking pipe was left blocking")
	}
	if fl, _ := unix.FcntlInt(uintptr(p[0]), unix.F_GETFL, 0); fl&unix.O_NONBLOCK == 0 {
		t.Fatal("the pipe is still blocking")
	}
	go func() { _, _ = w.Write([]byte("job")) }()
	buf := make([]byte, 8)
	if n, err := got.Read(buf); err != nil || string(buf[:n]) != "job" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	if again := Pollable(got); again != got {
		t.Error("a polled pipe was made again")
	}
	file, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if Pollable(file) != io.Reader(file) {
		t.Error("a regular file was changed")
	}
	if s := strings.NewReader("x"); Pollable(s) != io.Reader(s) {
		t.Error("a reader that is no file was changed")
	}
}
