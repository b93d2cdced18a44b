// Package pymain is runbox's one way to run a Python file as `python3 FILE`
// runs it, from an interpreter that was started before the file was known:
// a fresh __main__ module naming the file, the same argv and sys.path, the
// exit status of an uncaught SystemExit, and errors printed by the
// interpreter's own hook without the runner's frame.
//
// Two interpreters use it: a pooled box's prestarted one (sandbox's
// prestart loader, which runs one job) and a session's (runbox-init's
// Python driver, which runs many cells in one __main__). Each prepends
// [Source] to its own Python text; the definitions' names start with _rbx.
package pymain

import _ "embed"

// Source is the Python text of the runner: definitions only, nothing runs.
//
//go:embed main.py
var Source string
