package procstat

import (
	"os"
	"strconv"
	"testing"
)

func TestField(t *testing.T) {
	pid := os.Getpid()
	if st := Field(pid, 3); st != "R" && st != "S" {
		t.Errorf("state %q", st)
	}
	if ppid := Field(pid, 4); ppid != strconv.Itoa(os.Getppid()) {
		t.Errorf("ppid %q, want %d", ppid, os.Getppid())
	}
	if Field(pid, 22) == "" || Field(pid, 14) == "" {
		t.Error("starttime or utime missing")
	}
	for _, n := range []int{1, 2, 999} {
		if f := Field(pid, n); f != "" {
			t.Errorf("field %d: %q", n, f)
		}
	}
	if f := Field(1<<30, 3); f != "" {
		t.Errorf("no such process: %q", f)
	}
}

func TestRead(t *testing.T) {
	s, ok := Read(os.Getpid())
	if !ok || s.Comm != "procstat.test" {
		t.Errorf("comm %q, ok %v", s.Comm, ok)
	}
	if s.Field(4) != strconv.Itoa(os.Getppid()) || s.Field(2) != "" || s.Field(999) != "" {
		t.Errorf("fields 4, 2, 999: %q %q %q", s.Field(4), s.Field(2), s.Field(999))
	}
	if s, ok := Read(1 << 30); ok || s.Comm != "" || s.Field(3) != "" {
		t.Errorf("no such process: %+v %v", s, ok)
	}
}
