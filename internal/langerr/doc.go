// Package langerr turns what an interpreter printed on stderr into the
// run_code contract's error fields: whether the submitted code failed to
// parse or failed while it ran, the language's own name for the error, its
// message, and the line and column in the submitted code ([Parse]). It also
// reads the program's complaints about the box's limits ([ResourceHint],
// [HeapExhausted]) and owns the one way a message becomes a single bounded
// line an agent reads ([contract.FirstLine], [LastLine]).
//
// It is pure text in, data out: one file per error format (python.go,
// node.go, bash.go), each tested against stderr the real interpreters
// printed (testdata/, captured by testdata/gen.sh). It must not know how a
// run happened or what ended it (exit codes, signals, timeouts, cgroup
// kills are the caller's), nor containers, engines, runbox-init beyond the
// truncation marker it leaves in stderr, or MCP.
package langerr
