package langerr

import (
	"strings"

	"github.com/runbox-mcp/runbox/contract"
)

// resourceSign is a message that means a limit of the box was hit.
type resourceSign struct {
	limit  contract.Limit
	needle string
	// valid, when set, checks the match at stderr[at:]: some messages
	// mean a limit only in some contexts.
	valid func(stderr string, at int) bool
}

var resourceSigns = []resourceSign{
	{contract.LimitDisk, "No space left on device", nil},
	{contract.LimitDisk, "ENOSPC", notFileWatchers},
	{contract.LimitDisk, "Disk quota exceeded", nil},
	{contract.LimitDisk, "EDQUOT", nil},
	{contract.LimitDisk, "File too large", nil},
	{contract.LimitDisk, "EFBIG", nil},
	{contract.LimitDisk, "File size limit exceeded", nil}, // bash, of a child killed by SIGXFSZ
	{contract.LimitOpenFiles, "Too many open files", nil}, // "... in system" (ENFILE) too
	{contract.LimitOpenFiles, "too many open files", nil}, // Node: "EMFILE: too many open files, open 'x'"
	{contract.LimitOpenFiles, "EMFILE", nil},
	{contract.LimitOpenFiles, "ENFILE", nil},
	// bash: "main.sh: fork: retry: Resource temporarily unavailable",
	// then "main.sh: fork: Resource temporarily unavailable".
	{contract.LimitPids, "fork: retry: Resource temporarily unavailable", nil},
	{contract.LimitPids, "fork: Resource temporarily unavailable", nil},
	// Python: os.fork, subprocess and multiprocessing raise
	// BlockingIOError [Errno 11]; so does a non-blocking read, which is
	// no limit.
	{contract.LimitPids, "BlockingIOError: [Errno 11]", afterProcessStart},
	{contract.LimitPids, "can't start new thread", nil},
	// Node: "Error: spawn sleep EAGAIN", "Error: spawnSync /bin/sh EAGAIN".
	{contract.LimitPids, "EAGAIN", afterSpawn},
	// Node's own threads at start: Node 18 "Assertion `(0) ==
	// (uv_thread_create(...))' failed", Node 20 "Assertion failed: (0) ==
	// (uv_thread_create(...))".
	{contract.LimitPids, "uv_thread_create", nil},
	// "node[7]: pthread_create: Resource temporarily unavailable", OpenBLAS
	// "pthread_create failed for thread 1 of 4: Resource temporarily
	// unavailable".
	{contract.LimitPids, "pthread_create", beforeEAGAIN},
}

// ResourceHint recognises messages that mean a resource limit was hit
// inside the box, whatever the language printed them: it returns
// contract.LimitDisk (no space left, file too large),
// contract.LimitOpenFiles (too many open files), contract.LimitPids (no
// process or thread could be started), or "" when none. When several
// appear, the last one wins: it is the one closest to the failure. It says
// nothing of memory: a box out of memory is killed before it can complain,
// and V8's own heap limit is [HeapExhausted]'s.
func ResourceHint(stderr string) contract.Limit {
	var hint contract.Limit
	best := -1
	for _, s := range resourceSigns {
		// Look at the last few occurrences only: a sign that does not
		// count a hundred times over is noise, and stderr can be a MiB
		// of it.
		end := len(stderr)
		for tries := 0; tries < 100; tries++ {
			i := strings.LastIndex(stderr[:end], s.needle)
			if i <= best {
				break
			}
			if s.valid == nil || s.valid(stderr, i) {
				hint, best = s.limit, i
				break
			}
			end = i
		}
	}
	return hint
}

// sameLine returns up to max bytes of the line around stderr[at], before
// and after at.
func sameLine(stderr string, at, max int) (before, after string) {
	before = stderr[:at]
	if i := strings.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	before = before[len(before)-min(len(before), max):]
	after = stderr[at:min(len(stderr), at+max)]
	if i := strings.IndexByte(after, '\n'); i >= 0 {
		after = after[:i]
	}
	return before, after
}

// notFileWatchers rejects Node's "ENOSPC: System limit for number of file
// watchers reached", which is about inotify, not disk space.
func notFileWatchers(stderr string, at int) bool {
	_, after := sameLine(stderr, at, 200)
	return !strings.Contains(after, "file watchers")
}

// afterSpawn accepts EAGAIN where Node failed to start a process.
func afterSpawn(stderr string, at int) bool {
	before, _ := sameLine(stderr, at, 300)
	return strings.Contains(before, "spawn")
}

// beforeEAGAIN accepts pthread_create where the line says it failed for
// want of resources.
func beforeEAGAIN(stderr string, at int) bool {
	_, after := sameLine(stderr, at, 200)
	return strings.Contains(after, "Resource temporarily unavailable")
}

// afterProcessStart checks that the traceback before a BlockingIOError is
// about forking or spawning, in its last few kilobytes.
func afterProcessStart(stderr string, at int) bool {
	before := stderr[max(0, at-4096):at]
	if i := strings.LastIndex(before, pyTracebackHeader); i >= 0 {
		before = before[i:]
	}
	for _, w := range []string{"fork", "subprocess", "spawn", "Popen", "multiprocessing"} {
		if strings.Contains(before, w) {
			return true
		}
	}
	return false
}

// heapSigns start the line V8 prints as it aborts a process whose
// JavaScript heap is full. Node's handler prints the first, with where V8
// gave up ("Reached heap limit", "Ineffective mark-compacts near heap
// limit", "CALL_AND_RETRY_LAST"...) between the two parts. V8 prints the
// others itself when no handler is in place yet, as when the heap is too
// small to load the startup snapshot: "# Fatal javascript OOM in GC during
// deserialization" (Node 18 to 20), "# Fatal JavaScript out of memory:
// Reached heap limit" (later V8).
var heapSigns = []struct{ prefix, suffix string }{
	{"FATAL ERROR: ", "Allocation failed - JavaScript heap out of memory"},
	{"# Fatal javascript OOM in ", ""},
	{"# Fatal JavaScript out of memory: ", ""},
}

// HeapExhausted says whether stderr, of a program run with error format
// format, shows that V8 aborted the program because its JavaScript heap
// reached the limit (--max-old-space-size): the program ran out of memory,
// though no cgroup killed it. Only Node's formats (node, typescript) have
// such a report.
//
// The report must be V8's own line, not the words in a message: an Error
// whose message quotes it, or a worker_threads Worker stopped at its own
// resourceLimits (ERR_WORKER_OUT_OF_MEMORY, which the program can catch),
// is no heap exhaustion of the program's. "Allocation failed - process out
// of memory" is no heap limit either: V8 failed to reserve address space.
func HeapExhausted(format, stderr string) bool {
	if format != formatNode && format != formatTypeScript {
		return false
	}
	for _, s := range heapSigns {
		for from := 0; from < len(stderr); {
			i := strings.Index(stderr[from:], s.prefix)
			if i < 0 {
				break
			}
			i += from
			from = i + len(s.prefix)
			if i > 0 && stderr[i-1] != '\n' {
				continue
			}
			line := stderr[i:]
			if j := strings.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			if strings.HasSuffix(strings.TrimSuffix(line, "\r"), s.suffix) {
				return true
			}
		}
	}
	return false
}
