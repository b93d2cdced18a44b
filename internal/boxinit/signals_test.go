//go:build linux

package boxinit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// signalTargetEnv makes the test binary a process that ignores signals as
// runbox-init does and echoes each line of its stdin.
const signalTargetEnv = "RUNBOX_TEST_SIGNAL_TARGET"

func signalTarget() int {
	if err := ignoreSignals(); err != nil {
		fmt.Println("ignoreSignals:", err)
		return 1
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fmt.Println(in.Text())
	}
	return 0
}

// sigqueue sends sig as sigqueue(3) does: si_code SI_QUEUE, which the Go
// runtime takes for a fault of its own when it handles the signal.
func sigqueue(pid int, sig syscall.Signal) error {
	var info [128]byte
	*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
	*(*int32)(unsafe.Pointer(&info[8])) = -1 // SI_QUEUE
	*(*int32)(unsafe.Pointer(&info[16])) = int32(os.Getpid())
	*(*uint32)(unsafe.Pointer(&info[20])) = uint32(os.Getuid())
	_, _, errno := unix.RawSyscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(sig), uintptr(unsafe.Pointer(&info[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

// Code in the box may send runbox-init any signal, by any of the system
// calls that send one: runbox-init must go on. (As PID 1 it is also spared
// SIGKILL, SIGSTOP and the signals it leaves at their default action, 32 to
// 34; off PID 1 those would end it, and the e2e tests send them.)
func TestInitSurvivesEverySignal(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), signalTargetEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	expect := func(what, want string) {
		t.Helper()
		select {
		case got, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the process ended: %v", what, cmd.Wait())
			}
			if got != want {
				t.Fatalf("%s: got %q, want %q", what, got, want)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: no answer", what)
		}
	}
	expect("start", "ready")
	pid := cmd.Process.Pid
	senders := map[string]func(syscall.Signal) error{
		"kill":     func(s syscall.Signal) error { return syscall.Kill(pid, s) },
		"tgkill":   func(s syscall.Signal) error { return unix.Tgkill(pid, pid, s) },
		"sigqueue": func(s syscall.Signal) error { return sigqueue(pid, s) },
	}
	for _, how := range []string{"kill", "tgkill", "sigqueue"} {
		for sig := syscall.Signal(1); sig <= 64; sig++ {
			if sig == syscall.SIGKILL || sig == syscall.SIGSTOP || (sig >= 32 && sig <= 34) {
				continue
			}
			if err := senders[how](sig); err != nil {
				t.Fatalf("%s %d: %v", how, sig, err)
			}
			name := fmt.Sprintf("%s %s (%d)", how, unix.SignalName(sig), sig)
			if _, err := io.WriteString(stdin, name+"\n"); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			expect(name, name)
		}
	}
}

// The program runs with a filter that refuses to signal PID 1, in every
// way one can be signalled, and lets it signal anything else.
func TestProgramCannotSignalPID1(t *testing.T) {
	job := bashJob(t, `
kill -0 1 2>/dev/null && echo "kill reached 1"
sleep 30 & kill -0 $! && echo "kill reached a child"
kill -9 $!
python3 - <<'PY' 2>/dev/null || echo "no python"
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
def refused(r):
    return r == -1 and ctypes.get_errno() == 1
print("tgkill", refused(libc.syscall(234 if os.uname().machine == "x86_64" else 131, 1, 1, 0)))
print("tkill", refused(libc.syscall(200 if os.uname().machine == "x86_64" else 130, 1, 0)))
print("sigqueue", refused(libc.sigqueue(1, 0, ctypes.c_void_p(0))))
print("pidfd_open", refused(libc.syscall(434, 1, 0)))
fd = os.open("/proc/1", os.O_RDONLY | os.O_DIRECTORY)
print("pidfd_send_signal", refused(libc.syscall(424, fd, 0, None, 0)))
print("kill self", os.kill(os.getpid(), 0) is None)
PY`)
	rep, _ := runJob(t, job)
	want := "kill reached a child\ntgkill True\ntkill True\nsigqueue True\npidfd_open True\npidfd_send_signal True\nkill self True\n"
	if string(rep.Stdout) != want {
		t.Fatalf("stdout %q, want %q; stderr %q", rep.Stdout, want, rep.Stderr)
	}
}
