package langerr_test

import (
	"testing"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/langerr"
)

// resourceCases were captured under real limits: prlimit --fsize, --nofile,
// --nproc (as an unprivileged user), and /dev/full for a full disk. parse
// is what Parse says of them; the caller reports the limit.
var resourceCases = []struct {
	dir   string
	hint  contract.Limit
	parse langerr.Error
}{
	{"resource/python_disk_full", contract.LimitDisk, runtimeErr("OSError", "[Errno 28] No space left on device", 2, 0)},
	{"resource/python_file_too_large", contract.LimitDisk, runtimeErr("OSError", "[Errno 27] File too large", 2, 0)},
	{"resource/python_too_many_open_files", contract.LimitOpenFiles, runtimeErr("OSError", "[Errno 24] Too many open files: '/dev/null'", 1, 10)},
	{"resource/python_fork", contract.LimitPids, runtimeErr("BlockingIOError", "[Errno 11] Resource temporarily unavailable", 4, 11)},
	{"resource/python_subprocess", contract.LimitPids, runtimeErr("BlockingIOError", "[Errno 11] Resource temporarily unavailable", 2, 10)},
	{"resource/python_thread", contract.LimitPids, runtimeErr("RuntimeError", "can't start new thread", 5, 0)},
	{"resource/node_disk_full", contract.LimitDisk, runtimeErr("Error", "ENOSPC: no space left on device, write", 2, 4)},
	{"resource/node_too_many_open_files", contract.LimitOpenFiles, runtimeErr("Error", "EMFILE: too many open files, open '/dev/null'", 3, 43)},
	{"resource/node_spawn_eagain", contract.LimitPids, runtimeErr("Error", "spawn sleep EAGAIN", 0, 0)},
	{"resource/node_execsync_eagain", contract.LimitPids, runtimeErr("Error", "spawnSync /bin/sh EAGAIN", 2, 1)}, // "<ref *1> Error: ..."
	{"resource/node_thread_create", contract.LimitPids, notOK},                                                   // Node's own assertion, no JavaScript error
	{"resource/bash_disk_full", contract.LimitDisk, runtimeErr("", "echo: write error: No space left on device", 1, 0)},
	{"resource/bash_file_too_large", contract.LimitDisk, notOK},
	{"resource/bash_file_size_signal", contract.LimitDisk, runtimeErr("", "12153 File size limit exceededhead -c 100000 /dev/zero > big.bin", 1, 0)},
	{"resource/bash_too_many_open_files", contract.LimitOpenFiles, runtimeErr("", "/dev/null: Too many open files", 1, 0)},
	{"resource/bash_fork", contract.LimitPids, notOK},
}

func TestResourceHintGolden(t *testing.T) {
	for _, tc := range resourceCases {
		for _, g := range readGolden(t, tc.dir) {
			t.Run(g.name, func(t *testing.T) {
				if got := langerr.ResourceHint(g.stderr); got != tc.hint {
					t.Errorf("hint %q, want %q", got, tc.hint)
				}
				checkParse(t, g.format, g.stderr, g.codePath, g.code, tc.parse)
				if langerr.HeapExhausted(g.format, g.stderr) {
					t.Error("heap exhausted")
				}
			})
		}
	}
}

func TestResourceHint(t *testing.T) {
	cases := []struct {
		name, stderr string
		want         contract.Limit
	}{
		{"empty", "", ""},
		{"no sign", "ValueError: bad\n", ""},
		// Real lines seen once, not reliably reproducible.
		{"node pthread_create", "node[26394]: pthread_create: Resource temporarily unavailable\n", contract.LimitPids},
		{"OpenBLAS pthread_create", "OpenBLAS blas_thread_init: pthread_create failed for thread 1 of 4: Resource temporarily unavailable\n", contract.LimitPids},
		{"bash fork", "bash: fork: Resource temporarily unavailable\n", contract.LimitPids},
		{"disk quota", "OSError: [Errno 122] Disk quota exceeded\n", contract.LimitDisk},
		{"ENFILE", "OSError: [Errno 23] Too many open files in system\n", contract.LimitOpenFiles},
		// pthread_create failing for another reason is no limit.
		{"pthread_create without EAGAIN", "pthread_create failed: Invalid argument\n", ""},
		// A non-blocking read says EAGAIN too: no limit.
		{"non-blocking read", "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 3, in <module>\n    data = sock.recv(10)\nBlockingIOError: [Errno 11] Resource temporarily unavailable\n", ""},
		// A process failing before a later traceback does not count.
		{"fork in an earlier traceback", "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 3, in <module>\n    os.fork()\nOSError: x\nTraceback (most recent call last):\n  File \"/workspace/main.py\", line 9, in <module>\n    data = sock.recv(10)\nBlockingIOError: [Errno 11] Resource temporarily unavailable\n", ""},
		// Node's EAGAIN counts where it failed to spawn.
		{"node EAGAIN without spawn", "Error: EAGAIN: resource temporarily unavailable, read\n", ""},
		// inotify's ENOSPC is about watchers, not disk space.
		{"file watchers", "Error: ENOSPC: System limit for number of file watchers reached, watch '/workspace'\n", ""},
		// The last sign wins: it is nearest to the failure.
		{"last wins: pids", "OSError: [Errno 24] Too many open files\n/workspace/main.sh: fork: retry: Resource temporarily unavailable\n", contract.LimitPids},
		{"last wins: disk", "/workspace/main.sh: fork: retry: Resource temporarily unavailable\nOSError: [Errno 28] No space left on device\n", contract.LimitDisk},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := langerr.ResourceHint(tc.stderr); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// heapCases were captured with the heap limit the box gives Node
// (NODE_OPTIONS=--max-old-space-size, in each case's env file): the
// stderr.node18.txt in runbox/sandbox:bookworm (BOX=... gen.sh), the
// stderr.node20.txt with Node 20. parse is what Parse says of them, for
// both versions.
var heapCases = []struct {
	dir   string
	heap  bool
	parse langerr.Error
}{
	{"heap/reached_heap_limit", true, notOK},
	{"heap/ineffective_mark_compacts", true, notOK},
	{"heap/call_and_retry_last", true, notOK},
	// Node 18: "FATAL ERROR: Reached heap limit"; Node 20: "# Fatal
	// javascript OOM in GC during deserialization", from V8 itself.
	{"heap/heap_limit_at_startup", true, notOK},
	// A worker stopped at its own resourceLimits: an error the program
	// could have caught, not V8 aborting it.
	{"heap/worker_heap_limit", false, runtimeErr("Error", "Worker terminated due to reaching memory limit: JS heap out of memory", 0, 0)},
	{"heap/message_mentions_heap", false, runtimeErr("Error", "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", 2, 7)}, // the stack's column: made and thrown on one line
}

func TestHeapExhaustedGolden(t *testing.T) {
	for _, tc := range heapCases {
		for _, g := range readGolden(t, tc.dir) {
			t.Run(g.name, func(t *testing.T) {
				if got := langerr.HeapExhausted(g.format, g.stderr); got != tc.heap {
					t.Errorf("HeapExhausted %v, want %v", got, tc.heap)
				}
				// The format decides: the same stderr from a python or
				// bash run says nothing of V8.
				for _, f := range []string{"python", "bash", "none", ""} {
					if langerr.HeapExhausted(f, g.stderr) {
						t.Errorf("HeapExhausted for format %q", f)
					}
				}
				checkParse(t, g.format, g.stderr, g.codePath, g.code, tc.parse)
				if hint := langerr.ResourceHint(g.stderr); hint != "" {
					t.Errorf("resource hint %q", hint)
				}
			})
		}
	}
}

func TestHeapExhausted(t *testing.T) {
	const oom = "Allocation failed - JavaScript heap out of memory"
	cases := []struct {
		name, stderr string
		want         bool
	}{
		{"empty", "", false},
		{"reached heap limit", "\n<--- JS stacktrace --->\n\nFATAL ERROR: Reached heap limit " + oom + "\n", true},
		{"ineffective mark-compacts", "FATAL ERROR: Ineffective mark-compacts near heap limit " + oom + "\n----- Native stack trace -----\n", true},
		{"invalid array length", "FATAL ERROR: invalid array length " + oom + "\n 1: 0xb83f50 node::Abort() [node]\n", true},
		{"CRLF", "x\r\nFATAL ERROR: Reached heap limit " + oom + "\r\n", true},
		{"no newline at the end", "FATAL ERROR: Reached heap limit " + oom, true},
		{"V8's own report", "\n#\n# Fatal javascript OOM in Reached heap limit\n#\n\n", true},
		{"V8's own report, later wording", "\n#\n# Fatal JavaScript out of memory: Ineffective mark-compacts near heap limit\n#\n", true},
		// Out of address space, not heap: V8 could not reserve memory.
		{"process out of memory", "FATAL ERROR: Committing semi space failed. Allocation failed - process out of memory\n", false},
		{"V8's process report", "\n#\n# Fatal process OOM in Failed to reserve virtual memory for CodeRange\n#\n", false},
		// The words elsewhere than at the start of V8's line.
		{"quoted in a message", "Error: FATAL ERROR: Reached heap limit " + oom + "\n    at /workspace/main.js:1:7\n", false},
		{"indented child output", "  FATAL ERROR: Reached heap limit " + oom + "\n", false},
		{"more after the words", "FATAL ERROR: Reached heap limit " + oom + ", or so it says\n", false},
		{"a native frame", " 4: 0x7f0591eec87c v8::internal::V8::FatalProcessOutOfMemory(v8::internal::Isolate*, char const*, bool)\n", false},
		{"worker", "Error [ERR_WORKER_OUT_OF_MEMORY]: Worker terminated due to reaching memory limit: JS heap out of memory\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := langerr.HeapExhausted("node", tc.stderr); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
