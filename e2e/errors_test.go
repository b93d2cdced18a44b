//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// The error kinds of calls that are not contract cases across backends
// (those are in contract_test.go): invalid requests never reach a box, and
// the fork-bomb regression is runbox-init's on Docker.

// TestInvalidRequests: each answers invalid_request before any box.
func TestInvalidRequests(t *testing.T) {
	big := strings.Repeat("#", int(lim.CodeBytes)+1)
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"unknown language", map[string]any{"language": "cobol", "code": "x"}, `unknown language "cobol"`},
		{"missing language", map[string]any{"code": "x"}, "language is required"},
		{"code too big", map[string]any{"language": "python", "code": big}, "over the"},
		{"NUL in code", map[string]any{"language": "python", "code": "print(1)\x00print(2)"}, "NUL byte"},
		{"dotdot path", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "a/../../x", "content": "x"}}}, ".. is not allowed"},
		{"absolute path", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "/etc/passwd", "content": "x"}}}, "absolute"},
		{"bad base64", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "a.bin", "content": "!!!", "encoding": "base64"}}}, "not valid base64"},
		{"wrong type", map[string]any{"language": "python", "code": 12}, "code must be a string"},
		{"unknown field", map[string]any{"language": "python", "code": "print(1)", "timeout": 5}, `unknown field "timeout"`},
		{"timeout above max", map[string]any{"language": "python", "code": "print(1)", "timeout_seconds": 100000}, "at most"},
		{"code file name taken", map[string]any{"language": "python", "code": "print(1)", "files": []any{map[string]any{"path": "main.py", "content": "x"}}}, "where the code is saved"},
	}
	before := len(boxes())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, res := shared(t).call(t, c.args)
			e := wantError(t, r, contract.KindInvalidRequest, "")
			if !strings.Contains(e.Message, c.want) || r.ExitCode != nil || !res.IsError {
				t.Fatalf("got %+v, want %q", e, c.want)
			}
		})
	}
	if after := len(boxes()); after > before {
		t.Fatalf("invalid requests created boxes")
	}
}

// TestForkBombsNeverKillInit repeats a fork bomb: runbox-init shares the
// pids limit with the program and must still report every time (it once
// died about one run in twenty, unable to start a thread).
func TestForkBombsNeverKillInit(t *testing.T) {
	code := "import os, threading, time\nfor i in range(400):\n    try:\n        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n    except RuntimeError:\n        pass\n    if os.fork() == 0:\n        time.sleep(5); os._exit(0)\n"
	for i := 0; i < 15; i++ {
		r := run(t, "python", code, "timeout_seconds", 30)
		wantError(t, r, contract.KindResourceLimit, contract.LimitPids)
	}
}
