package sandbox

import (
	"strings"
	"testing"
	"time"
)

// Samples are real interpreter output (Python 3.11, Node 18/20, bash 5.2),
// with the code's path as the box has it.

const pyZeroDiv = `Traceback (most recent call last):
  File "/workspace/main.py", line 7, in <module>
    div(0)
  File "/workspace/main.py", line 4, in div
    return 1 // a
           ~~^~~
ZeroDivisionError: integer division or modulo by zero
`

const pyJSON = `x
Traceback (most recent call last):
  File "/workspace/main.py", line 5, in <module>
    f('{bad')
  File "/workspace/main.py", line 3, in f
    return json.loads(a)
           ^^^^^^^^^^^^^
  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/lib/python3.11/json/decoder.py", line 353, in raw_decode
    obj, end = self.scan_once(s, idx)
               ^^^^^^^^^^^^^^^^^^^^^^
json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)
`

const pySyntax = `  File "/workspace/main.py", line 2
    print(x +* y)
             ^
SyntaxError: invalid syntax
`

const pyIndentedSyntax = `  File "/workspace/main.py", line 3
    return (1 +
           ^
SyntaxError: '(' was never closed
`

const pyIndent = `  File "/workspace/main.py", line 2
    return 1
    ^
IndentationError: expected an indented block after function definition on line 1
`

const pyHelperSyntax = `Traceback (most recent call last):
  File "/workspace/main.py", line 1, in <module>
    import helper2
  File "/workspace/helper2.py", line 1
    def (
        ^
SyntaxError: invalid syntax
`

const pyChained = `Traceback (most recent call last):
  File "/workspace/main.py", line 2, in <module>
    1/0
    ~^~
ZeroDivisionError: division by zero

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/workspace/main.py", line 4, in <module>
    raise ValueError("multi\nline") from e
ValueError: multi
line
`

const pyNoMessage = `Traceback (most recent call last):
  File "/workspace/main.py", line 1, in <module>
    next(iter([]))
StopIteration
`

const nodeSyntax = `/workspace/main.js:2
const b = ;
          ^

SyntaxError: Unexpected token ';'
    at internalCompileFunction (node:internal/vm:76:18)
    at wrapSafe (node:internal/modules/cjs/loader:1283:20)
    at Module._compile (node:internal/modules/cjs/loader:1328:27)
    at node:internal/main/run_main_module:28:49

Node.js v18.19.0
`

const nodeReference = `before
/workspace/main.js:3
  return missing + 1;
  ^

ReferenceError: missing is not defined
    at f (/workspace/main.js:3:3)
    at Object.<anonymous> (/workspace/main.js:5:1)
    at Module._compile (node:internal/modules/cjs/loader:1256:14)

Node.js v18.19.0
`

const nodeTimer = `/workspace/main.js:2
setTimeout(() => { throw new TypeError('late'); }, 10);
                   ^

TypeError: late
    at Timeout._onTimeout (/workspace/main.js:2:26)
    at listOnTimeout (node:internal/timers:569:17)
    at process.processTimers (node:internal/timers:512:7)

Node.js v18.19.0
`

const nodeThrowString = `/workspace/main.js:1
throw "x";
^
x
(Use ` + "`node --trace-uncaught ...`" + ` to show where the exception was thrown)

Node.js v18.19.0
`

const nodeRejection18 = `node:internal/process/promises:288
            triggerUncaughtException(err, true /* fromPromise */);
            ^

[UnhandledPromiseRejection: This error originated either by throwing inside of an async function without a catch block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason "oops".] {
  code: 'ERR_UNHANDLED_REJECTION'
}

Node.js v18.19.0
`

const nodeRejection20 = `node:internal/process/promises:389
      new UnhandledPromiseRejection(reason);
      ^

UnhandledPromiseRejection: This error originated either by throwing inside of an async function without a catch block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason "oops".
    at throwUnhandledRejectionsMode (node:internal/process/promises:389:7)
    at process.processTicksAndRejections (node:internal/process/task_queues:96:32) {
  code: 'ERR_UNHANDLED_REJECTION'
}

Node.js v20.20.2
`

const nodeSubclass = `/workspace/main.js:2
throw new Oops("bad");
^

Oops [Error]: bad
    at Object.<anonymous> (/workspace/main.js:2:7)
    at Module._compile (node:internal/modules/cjs/loader:1256:14)
`

const nodeJSONParse = `undefined:1
{bad
 ^

SyntaxError: Unexpected token b in JSON at position 1
    at JSON.parse (<anonymous>)
    at Object.<anonymous> (/workspace/main.js:1:6)
    at Module._compile (node:internal/modules/cjs/loader:1256:14)
`

const nodeRequiredSyntax = `/workspace/h3.js:1
let = ;
      ^

SyntaxError: Unexpected token ';'
    at internalCompileFunction (node:internal/vm:76:18)
    at Module.require (node:internal/modules/cjs/loader:1143:19)
    at require (node:internal/modules/cjs/helpers:119:18)
    at Object.<anonymous> (/workspace/main.js:1:1)
`

const nodeNotFound = `node:internal/modules/cjs/loader:1080
  throw err;
  ^

Error: Cannot find module 'lodash'
Require stack:
- /workspace/main.js
    at Module._resolveFilename (node:internal/modules/cjs/loader:1077:15)
    at Object.<anonymous> (/workspace/main.js:1:1) {
  code: 'MODULE_NOT_FOUND',
  requireStack: [ '/workspace/main.js' ]
}
`

func TestParseLangError(t *testing.T) {
	pyCode := "x = 1\nprint(x +* y)\n"
	cases := []struct {
		name, format, stderr, code string
		want                       LangError
		ok                         bool
	}{
		{"py runtime in a function", "python", pyZeroDiv, "", LangError{KindRuntime, "ZeroDivisionError", "integer division or modulo by zero", 4, 0}, true},
		{"py error inside the library points at the user's line", "python", pyJSON, "", LangError{KindRuntime, "json.decoder.JSONDecodeError", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)", 3, 0}, true},
		{"py syntax with column", "python", pySyntax, pyCode, LangError{KindSyntax, "SyntaxError", "invalid syntax", 2, 10}, true},
		{"py syntax column keeps indentation", "python", pyIndentedSyntax, "def f():\n  if x:\n        return (1 +\n", LangError{KindSyntax, "SyntaxError", "'(' was never closed", 3, 16}, true},
		{"py indentation", "python", pyIndent, "def f():\nreturn 1\n", LangError{KindSyntax, "IndentationError", "expected an indented block after function definition on line 1", 2, 1}, true},
		{"py syntax in an imported file is a runtime error here", "python", pyHelperSyntax, "import helper2\n", LangError{KindRuntime, "SyntaxError", "invalid syntax", 1, 0}, true},
		{"py chained: the last exception", "python", pyChained, "", LangError{KindRuntime, "ValueError", "multi", 4, 0}, true},
		{"py exception without message", "python", pyNoMessage, "", LangError{KindRuntime, "StopIteration", "", 1, 0}, true},
		{"py no traceback", "python", "usage: whatever\n", "", LangError{}, false},
		{"node syntax", "node", nodeSyntax, "", LangError{KindSyntax, "SyntaxError", "Unexpected token ';'", 2, 11}, true},
		{"node reference", "node", nodeReference, "", LangError{KindRuntime, "ReferenceError", "missing is not defined", 3, 3}, true},
		{"node async throw", "node", nodeTimer, "", LangError{KindRuntime, "TypeError", "late", 2, 26}, true},
		{"node thrown string", "node", nodeThrowString, "", LangError{KindRuntime, "", "x", 1, 1}, true},
		{"node 18 rejection", "node", nodeRejection18, "", LangError{KindRuntime, "UnhandledPromiseRejection", `This error originated either by throwing inside of an async function without a catch block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason "oops".`, 0, 0}, true},
		{"node 20 rejection", "node", nodeRejection20, "", LangError{KindRuntime, "UnhandledPromiseRejection", `This error originated either by throwing inside of an async function without a catch block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason "oops".`, 0, 0}, true},
		{"node subclass", "node", nodeSubclass, "", LangError{KindRuntime, "Oops", "bad", 2, 7}, true},
		{"node JSON.parse is runtime", "node", nodeJSONParse, "", LangError{KindRuntime, "SyntaxError", "Unexpected token b in JSON at position 1", 1, 6}, true},
		{"node syntax in a required file", "node", nodeRequiredSyntax, "", LangError{KindRuntime, "SyntaxError", "Unexpected token ';'", 1, 1}, true},
		{"node module not found", "node", nodeNotFound, "", LangError{KindRuntime, "Error", "Cannot find module 'lodash'", 1, 1}, true},
		{"node nothing", "node", "plain output\n", "", LangError{}, false},
		{"bash syntax", "bash", "/workspace/main.sh: line 2: syntax error near unexpected token `)'\n/workspace/main.sh: line 2: `echo two )'\n", "", LangError{KindSyntax, "", "syntax error near unexpected token `)'", 2, 0}, true},
		{"bash eof", "bash", "/workspace/main.sh: line 4: syntax error: unexpected end of file\n", "", LangError{KindSyntax, "", "syntax error: unexpected end of file", 4, 0}, true},
		{"bash runtime: the last", "bash", "/workspace/main.sh: line 2: foo: command not found\n/workspace/main.sh: line 5: x: unbound variable\n", "", LangError{KindRuntime, "", "x: unbound variable", 5, 0}, true},
		{"bash other command's error", "bash", "ls: cannot access 'x': No such file or directory\n", "", LangError{}, false},
		{"unknown format", "ruby", "x", "", LangError{}, false},
	}
	for _, tc := range cases {
		codePath := map[string]string{"python": "/workspace/main.py", "node": "/workspace/main.js", "bash": "/workspace/main.sh"}[tc.format]
		got, ok := ParseLangError(tc.format, tc.stderr, codePath, tc.code)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s:\n got %+v %v\nwant %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseLangErrorOnLargeStderr(t *testing.T) {
	junk := strings.Repeat("noise noise noise\n", 60000) // ~1 MiB
	start := time.Now()
	got, ok := ParseLangError("python", junk+pyZeroDiv, "/workspace/main.py", "")
	if !ok || got.Type != "ZeroDivisionError" || got.Line != 4 {
		t.Errorf("junk then traceback: %+v %v", got, ok)
	}
	got, ok = ParseLangError("node", nodeReference+junk, "/workspace/main.js", "")
	_ = got
	_ = ok // a traceback followed by a megabyte of output is past the window: not a requirement
	if d := time.Since(start); d > time.Second {
		t.Errorf("parsing 1 MiB took %v", d)
	}
	got, ok = ParseLangError("python", pyZeroDiv+"\nprinted after\n", "/workspace/main.py", "")
	if !ok || got.Type != "ZeroDivisionError" {
		t.Errorf("traceback then junk: %+v %v", got, ok)
	}
	truncated := "Traceback (most re\n…[runbox: 5 bytes truncated]…\n" + pyZeroDiv[40:]
	if _, ok := ParseLangError("python", truncated, "/workspace/main.py", ""); !ok {
		t.Errorf("a cut traceback is not parsed")
	}
}

func TestResourceHint(t *testing.T) {
	for stderr, want := range map[string]string{
		"OSError: [Errno 28] No space left on device":                              LimitDisk,
		"head: error writing 'x': File too large":                                  LimitDisk,
		"OSError: [Errno 24] Too many open files: '/dev/null'":                     LimitOpenFiles,
		"Error: EMFILE: too many open files, open '/dev/null'":                     LimitOpenFiles,
		"main.sh: fork: retry: Resource temporarily unavailable":                   LimitPids,
		"BlockingIOError: [Errno 11] Resource temporarily unavailable":             LimitPids,
		"RuntimeError: can't start new thread":                                     LimitPids,
		"Too many open files\nthen bash: fork: Resource temporarily unavailable\n": LimitPids,
		"ValueError: bad": "",
	} {
		if got := ResourceHint(stderr); got != want {
			t.Errorf("%q: got %q, want %q", stderr, got, want)
		}
	}
}

func FuzzParseLangError(f *testing.F) {
	for _, s := range []string{pyZeroDiv, pyJSON, pySyntax, pyIndent, pyChained, nodeSyntax, nodeReference, nodeThrowString, nodeRejection18, nodeNotFound, "/workspace/main.sh: line 2: x\n"} {
		f.Add(s, "x = 1\n")
	}
	f.Fuzz(func(t *testing.T, stderr, code string) {
		for _, format := range []string{"python", "node", "bash"} {
			le, ok := ParseLangError(format, stderr, "/workspace/main.x", code)
			if ok && le.Kind != KindSyntax && le.Kind != KindRuntime {
				t.Fatalf("kind %q", le.Kind)
			}
			if le.Line < 0 || le.Column < 0 {
				t.Fatalf("negative position %+v", le)
			}
		}
		_ = ResourceHint(stderr)
	})
}
