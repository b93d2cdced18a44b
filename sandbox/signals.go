package sandbox

import "strconv"

// Signal numbers as the box's kernel (Linux, on amd64 and arm64) reports
// them in runbox-init's report: the server may run elsewhere (darwin's
// SIGSYS is 12, Windows has none), so they are not taken from syscall.
const (
	sigKILL = 9
	sigSEGV = 11
	sigXCPU = 24
	sigXFSZ = 25
	sigSYS  = 31
)

var linuxSignalNames = [...]string{1: "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
	"SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM", "SIGSTKFLT", "SIGCHLD", "SIGCONT",
	"SIGSTOP", "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGURG", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGWINCH",
	"SIGIO", "SIGPWR", "SIGSYS"}

// signalName names a Linux signal number: "SIGSEGV", or "signal 40".
func signalName(n int) string {
	if n > 0 && n < len(linuxSignalNames) {
		return linuxSignalNames[n]
	}
	return "signal " + strconv.Itoa(n)
}
