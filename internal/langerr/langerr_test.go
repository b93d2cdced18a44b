package langerr_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/internal/langerr"
)

// The golden cases live in testdata/<group>/<case>/: the code that ran
// (main.py, main.js or main.sh, and the helper files it imports), and the
// stderr it really printed, captured by testdata/gen.sh: stderr.txt for
// Python 3.11.2 and bash 5.2 (Debian bookworm's, as in the box),
// stderr.node18.txt (Debian bookworm's nodejs 18.20) and stderr.node20.txt
// for Node. Paths read as in the box: /workspace/....

const testdata = "testdata"

// notOK marks a stderr the parser must not read as an error report.
var notOK = langerr.Error{Kind: "not ok"}

func runtimeErr(typ, msg string, line, col int) langerr.Error {
	return langerr.Error{Kind: contract.KindRuntime, Type: typ, Message: msg, Line: line, Column: col}
}

func syntaxErr(typ, msg string, line, col int) langerr.Error {
	return langerr.Error{Kind: contract.KindSyntax, Type: typ, Message: msg, Line: line, Column: col}
}

const unhandledRejection = "This error originated either by throwing inside of an async function without a catch block, or by rejecting a promise which was not handled with .catch(). The promise rejected with the reason "

// parseCases says what each golden case must parse to. byFile holds the
// exceptions for one captured file, where Node versions differ.
var parseCases = []struct {
	dir    string
	want   langerr.Error
	byFile map[string]langerr.Error
}{
	// Python: syntax errors in the submitted file. Columns are where
	// Python's own SyntaxError.offset points, in characters.
	{"python/syntax_invalid", syntaxErr("SyntaxError", "invalid syntax", 2, 10), nil},
	{"python/syntax_indented_column", syntaxErr("SyntaxError", "invalid syntax", 3, 16), nil}, // Python quotes the line without its 8 spaces
	{"python/syntax_tab_indented", syntaxErr("SyntaxError", "invalid syntax", 3, 10), nil},    // ... or its 2 tabs
	{"python/syntax_never_closed", syntaxErr("SyntaxError", "'(' was never closed", 3, 16), nil},
	{"python/syntax_eof_in_multiline", syntaxErr("SyntaxError", "'[' was never closed", 1, 9), nil},
	{"python/syntax_range_print", syntaxErr("SyntaxError", "Missing parentheses in call to 'print'. Did you mean print(...)?", 2, 5), nil}, // ^^^^ range: its first caret
	{"python/syntax_unicode_column", syntaxErr("SyntaxError", "invalid syntax", 1, 27), nil},                                               // the caret counts bytes: é is 2
	{"python/syntax_unicode_escape", syntaxErr("SyntaxError", `(unicode error) 'unicodeescape' codec can't decode bytes in position 2-3: truncated \UXXXXXXXX escape`, 1, 20), nil},
	{"python/syntax_unterminated_string", syntaxErr("SyntaxError", "unterminated string literal (detected at line 2)", 2, 7), nil},
	{"python/syntax_fstring", syntaxErr("SyntaxError", "f-string: invalid syntax. Perhaps you forgot a comma?", 2, 0), nil}, // quotes "(a b)", not the line
	{"python/indentation_expected", syntaxErr("IndentationError", "expected an indented block after function definition on line 1", 2, 1), nil},
	{"python/indentation_unexpected", syntaxErr("IndentationError", "unexpected indent", 2, 0), nil}, // no caret printed
	{"python/indentation_unindent", syntaxErr("IndentationError", "unindent does not match any outer indentation level", 3, 10), nil},
	{"python/tab_error", syntaxErr("TabError", "inconsistent use of tabs and spaces in indentation", 3, 0), nil},
	// Python: syntax errors that are not the submitted file's.
	{"python/syntax_in_helper", runtimeErr("SyntaxError", "invalid syntax", 2, 0), nil}, // line of "import helper"
	{"python/eval_syntax", runtimeErr("SyntaxError", "invalid syntax", 2, 7), nil},
	{"python/syntax_raised_manually", runtimeErr("SyntaxError", "bad rule: a ->", 2, 0), nil},
	// Python: runtime errors. Columns come from 3.11's markers, first caret.
	{"python/zero_division", runtimeErr("ZeroDivisionError", "integer division or modulo by zero", 2, 14), nil},
	{"python/attribute_error", runtimeErr("AttributeError", "'Point' object has no attribute 'y'", 6, 7), nil},
	{"python/name_error_suggestion", runtimeErr("NameError", "name 'countr' is not defined. Did you mean: 'counter'?", 3, 5), nil},
	{"python/error_in_lambda_deep_expression", runtimeErr("TypeError", "'NoneType' object is not subscriptable", 2, 23), nil},
	{"python/error_in_indented_expression", runtimeErr("KeyError", "'qty'", 4, 30), nil},
	{"python/unicode_runtime_column", runtimeErr("TypeError", "'NoneType' object is not subscriptable", 1, 30), nil}, // runtime markers count characters
	{"python/chained_during_handling", runtimeErr("RuntimeError", "lookup failed", 5, 0), nil},
	{"python/chained_direct_cause", runtimeErr("TypeError", "bad number 'x1'", 5, 0), nil},
	{"python/json_decode_dotted", runtimeErr("json.decoder.JSONDecodeError", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)", 4, 12), nil},
	{"python/error_in_helper", runtimeErr("ZeroDivisionError", "division by zero", 4, 9), nil}, // raised in helper.py, called from main.py:4
	{"python/custom_exception_main", runtimeErr("QuotaError", "quota exceeded: 3 > 2", 4, 0), nil},
	{"python/custom_exception_module", runtimeErr("helper.LimitError", "5 is over the limit", 2, 0), nil},
	{"python/keyboard_interrupt", runtimeErr("KeyboardInterrupt", "", 3, 0), nil},
	{"python/stop_iteration", runtimeErr("StopIteration", "", 2, 9), nil},
	{"python/assert_no_message", runtimeErr("AssertionError", "", 2, 8), nil},
	{"python/multiline_message", runtimeErr("ValueError", "first line", 1, 0), nil},
	{"python/exception_note", runtimeErr("ValueError", "bad value", 2, 0), nil},
	{"python/exception_group", runtimeErr("ExceptionGroup", "several failed (2 sub-exceptions)", 2, 0), nil},
	{"python/recursion", runtimeErr("RecursionError", "maximum recursion depth exceeded", 2, 12), nil},
	{"python/exec_string", runtimeErr("ZeroDivisionError", "division by zero", 2, 0), nil},
	{"python/module_not_found", runtimeErr("ModuleNotFoundError", "No module named 'numpy'", 1, 0), nil},
	{"python/warnings_then_error", runtimeErr("IndexError", "list index out of range", 6, 3), nil},
	{"python/thread_exception_then_exit", runtimeErr("ValueError", "in thread", 3, 0), nil},
	// Python: no report.
	{"python/sys_exit_code", notOK, nil},
	{"python/sys_exit_message", notOK, nil},
	{"python/stderr_noise_only", notOK, nil},

	// Node: syntax errors in the submitted file. Columns count characters.
	{"node/syntax_unexpected_token", syntaxErr("SyntaxError", "Unexpected token ';'", 2, 11), nil},
	{"node/syntax_indented", syntaxErr("SyntaxError", "Unexpected token '*'", 3, 19), nil},
	{"node/syntax_unicode_column", syntaxErr("SyntaxError", "Unexpected token '*'", 1, 41), nil}, // the caret counts UTF-16 units: 😀 is 2
	{"node/syntax_unexpected_end", syntaxErr("SyntaxError", "Unexpected end of input", 5, 0), nil},
	// Node 20 detects ES module syntax and runs these files; Node 18
	// refuses them as CommonJS.
	{"node/syntax_import_in_cjs", syntaxErr("SyntaxError", "Cannot use import statement outside a module", 1, 1),
		map[string]langerr.Error{"stderr.node20.txt": notOK}},
	{"node/syntax_top_level_await", syntaxErr("SyntaxError", "await is only valid in async functions and the top level bodies of modules", 2, 1),
		map[string]langerr.Error{"stderr.node20.txt": notOK}},
	{"node/esm_syntax_runtime_error", syntaxErr("SyntaxError", "Cannot use import statement outside a module", 1, 1),
		map[string]langerr.Error{"stderr.node20.txt": runtimeErr("TypeError", "Cannot read properties of null (reading 'port')", 3, 17)}}, // file:///workspace/main.js
	// Node: SyntaxErrors raised while running.
	{"node/syntax_in_helper", runtimeErr("SyntaxError", "Unexpected token ';'", 2, 16), nil}, // the require() in main.js
	{"node/json_parse", runtimeErr("SyntaxError", "Unexpected token b in JSON at position 1", 2, 19),
		map[string]langerr.Error{"stderr.node20.txt": runtimeErr("SyntaxError", "Expected property name or '}' in JSON at position 1", 2, 19)}},
	{"node/eval_syntax", runtimeErr("SyntaxError", "Unexpected token ';'", 2, 6), nil},
	{"node/new_function_syntax", runtimeErr("SyntaxError", "Unexpected token '*'", 1, 12), nil},
	// Node: runtime errors.
	{"node/type_error", runtimeErr("TypeError", "Cannot read properties of null (reading 'name')", 3, 20), nil},
	{"node/reference_error", runtimeErr("ReferenceError", "count is not defined", 3, 15), nil},
	{"node/tab_indented_runtime", runtimeErr("TypeError", "Cannot read properties of null (reading 'x')", 3, 8), nil},
	{"node/unicode_runtime_column", runtimeErr("TypeError", "Cannot read properties of undefined (reading 'y')", 1, 37), nil},
	{"node/throw_error_no_message", runtimeErr("Error", "", 2, 9), nil},
	{"node/throw_in_class_method", runtimeErr("RangeError", "cannot withdraw 50", 3, 23), nil},
	{"node/custom_class_with_name", runtimeErr("ValidationError", "age must be positive", 7, 7), nil},
	{"node/custom_class_without_name", runtimeErr("Oops", "bad thing", 3, 9), nil}, // "Oops [Error]: bad thing"
	{"node/error_code_bracket", runtimeErr("TypeError", `The "path" argument must be of type string. Received null`, 2, 6), nil},
	{"node/multiline_message", runtimeErr("Error", "first line", 1, 7), nil},
	{"node/error_with_properties", runtimeErr("Error", "request failed", 4, 1), nil},  // thrown on line 4, made on line 1
	{"node/error_name_with_space", runtimeErr("Error", "disk is on fire", 3, 1), nil}, // "Error [Fatal Error]: ...", thrown on line 3
	{"node/error_with_cause", runtimeErr("Error", "config is invalid", 4, 9), nil},
	{"node/error_in_helper", runtimeErr("TypeError", "Cannot read properties of undefined (reading 'bar')", 4, 13), nil},
	{"node/range_error_stack", runtimeErr("RangeError", "Maximum call stack size exceeded", 2, 3), nil},
	{"node/system_error_fs", runtimeErr("Error", "ENOENT: no such file or directory, open '/nope/data.txt'", 2, 17), nil},
	{"node/child_process_fail", runtimeErr("Error", "Command failed: ls /nope", 2, 1), nil},
	{"node/module_not_found", runtimeErr("Error", "Cannot find module 'lodash'", 1, 11), nil},
	{"node/local_module_not_found", runtimeErr("Error", "Cannot find module './helpers/util'", 2, 11), nil},
	{"node/uncaught_in_event_emitter", runtimeErr("Error", "emitter broke", 3, 18), nil},
	{"node/aggregate_error", runtimeErr("AggregateError", "All promises were rejected", 0, 0), nil},
	// Node: thrown asynchronously.
	{"node/set_timeout_throw", runtimeErr("TypeError", "parts.get is not a function", 4, 9), nil},
	{"node/process_nexttick_throw", runtimeErr("ReferenceError", "undefinedFunction is not defined", 2, 2), nil},
	{"node/async_await_type_error", runtimeErr("TypeError", "Cannot read properties of undefined (reading 'data')", 3, 14), nil},
	{"node/unhandled_rejection_error", runtimeErr("Error", "load failed", 3, 9), nil},
	{"node/unhandled_rejection_string", runtimeErr("UnhandledPromiseRejection", unhandledRejection+`"oops".`, 0, 0), nil},
	{"node/unhandled_rejection_object", runtimeErr("UnhandledPromiseRejection", unhandledRejection+`"#<Object>".`, 0, 0), nil},
	{"node/unhandled_rejection_undefined", runtimeErr("UnhandledPromiseRejection", unhandledRejection+`"undefined".`, 0, 0), nil},
	// Node: thrown values that are no Errors.
	{"node/throw_string", runtimeErr("", "something broke", 2, 1), nil},
	{"node/throw_multiline_string", runtimeErr("", "line one", 1, 1), nil},
	{"node/throw_number", runtimeErr("", "42", 1, 1), nil},
	{"node/throw_null", runtimeErr("", "null", 1, 1), nil},
	{"node/throw_undefined", runtimeErr("", "undefined", 1, 1), nil},
	{"node/throw_object", runtimeErr("", "{ code: 42, reason: 'nope' }", 2, 3), nil},
	{"node/throw_empty_string", runtimeErr("", "", 1, 1), nil},
	{"node/throw_long_object", runtimeErr("", "{ code: 'E_VALIDATION', field: 'email', detail: 'the address must contain an @ sign and a domain name', nested: { a: [ 1, 2, 3 ] } }", 1, 1), nil},
	// Node: no report.
	{"node/process_exit", notOK, nil},

	// bash: syntax errors, from bash -n.
	{"bash/syntax_unexpected_token", syntaxErr("", "syntax error near unexpected token `)'", 2, 0), nil},
	{"bash/syntax_unexpected_eof", syntaxErr("", "syntax error: unexpected end of file", 3, 0), nil},
	{"bash/syntax_unmatched_quote", syntaxErr("", "unexpected EOF while looking for matching `\"'", 2, 0), nil},
	{"bash/syntax_done", syntaxErr("", "syntax error near unexpected token `echo'", 2, 0), nil},
	{"bash/syntax_multiple", syntaxErr("", "syntax error near unexpected token `)'", 1, 0), nil},
	{"bash/cond_syntax", syntaxErr("", "unexpected argument `]]' to conditional binary operator", 2, 0), nil},
	// bash: runtime errors, the last one.
	{"bash/command_not_found", runtimeErr("", "pyhton3: command not found", 2, 0), nil},
	{"bash/unbound_variable", runtimeErr("", "MISSING_VAR: unbound variable", 3, 0), nil},
	{"bash/in_function", runtimeErr("", "$1: unbound variable", 3, 0), nil},
	{"bash/no_such_file", runtimeErr("", "/nope/tool: No such file or directory", 2, 0), nil},
	{"bash/redirect_no_such_file", runtimeErr("", "/nope/input.txt: No such file or directory", 1, 0), nil},
	{"bash/cd_failed", runtimeErr("", "cd: /nope: No such file or directory", 2, 0), nil},
	{"bash/permission_denied", runtimeErr("", "./tool.sh: Permission denied", 2, 0), nil},
	{"bash/readonly_var", runtimeErr("", "LIMIT: readonly variable", 2, 0), nil},
	{"bash/bad_substitution", runtimeErr("", "${name!}: bad substitution", 3, 0), nil},
	{"bash/bad_array_subscript", runtimeErr("", "m[]: bad array subscript", 2, 0), nil},
	{"bash/integer_expected", runtimeErr("", "[: abc: integer expression expected", 2, 0), nil},
	{"bash/arith_syntax", runtimeErr("", `1 + x + : syntax error: operand expected (error token is "+ ")`, 2, 0), nil}, // says "syntax error" but is runtime
	{"bash/multiple_errors_last", runtimeErr("", "second_missing_cmd: command not found", 3, 0), nil},
	{"bash/runtime_then_other", runtimeErr("", "foo_missing: command not found", 1, 0), nil},
	{"bash/heredoc_warning_then_error", runtimeErr("", "missing_tool_abc: command not found", 1, 0), nil}, // the warning is skipped
	{"bash/crlf_line_endings", runtimeErr("", `cd: $'/tmp\r': No such file or directory`, 1, 0), nil},
	{"bash/killed_child", runtimeErr("", "10605 Segmentation fault      sh -c 'kill -SEGV $$'", 2, 0), nil},
	{"bash/eval_syntax", runtimeErr("", "eval: syntax error: unexpected end of file", 0, 0), nil},
	// bash: no report of the script's own.
	{"bash/other_command_error", notOK, nil},
	{"bash/set_e_silent", notOK, nil},
	{"bash/exit_code", notOK, nil},
	{"bash/sourced_helper", notOK, nil},
}

// caseFiles returns a case's main file and its captured stderr files.
func caseFiles(t testing.TB, dir string) (main string, stderrs []string) {
	t.Helper()
	mains, _ := filepath.Glob(filepath.Join(testdata, dir, "main.*"))
	stderrs, _ = filepath.Glob(filepath.Join(testdata, dir, "stderr*.txt"))
	if len(mains) != 1 || len(stderrs) == 0 {
		t.Fatalf("%s: want one main.* and captured stderr, have %v %v", dir, mains, stderrs)
	}
	return mains[0], stderrs
}

// formatFor returns the error format and code path of a case's main file.
func formatFor(main string) (format, codePath string) {
	ext := filepath.Ext(main)
	return map[string]string{".py": "python", ".js": "node", ".sh": "bash"}[ext], "/workspace/main" + ext
}

// golden is one captured stderr of a case, with the code that printed it.
type golden struct {
	name                         string // <case>/<stderr file>
	format, codePath, code, file string
	stderr                       string
}

// readGolden reads every captured stderr of a case.
func readGolden(t testing.TB, dir string) []golden {
	t.Helper()
	main, stderrs := caseFiles(t, dir)
	code, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	format, codePath := formatFor(main)
	var gs []golden
	for _, f := range stderrs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, golden{name: dir + "/" + filepath.Base(f), format: format, codePath: codePath, code: string(code), file: filepath.Base(f), stderr: string(b)})
	}
	return gs
}

// checkParse runs Parse and compares with want, notOK for no report.
func checkParse(t *testing.T, format, stderr, codePath, code string, want langerr.Error) {
	t.Helper()
	got, ok := langerr.Parse(format, stderr, codePath, code)
	if want == notOK {
		if ok || got != (langerr.Error{}) {
			t.Errorf("got %+v (ok %v), want no report", got, ok)
		}
		return
	}
	if !ok || got != want {
		t.Errorf("\n got %+v (ok %v)\nwant %+v", got, ok, want)
	}
}

func TestParseGolden(t *testing.T) {
	for _, tc := range parseCases {
		for _, g := range readGolden(t, tc.dir) {
			t.Run(g.name, func(t *testing.T) {
				want, ok := tc.byFile[g.file]
				if !ok {
					want = tc.want
				}
				checkParse(t, g.format, g.stderr, g.codePath, g.code, want)
				// None of these failures is about a limit.
				if hint := langerr.ResourceHint(g.stderr); hint != "" {
					t.Errorf("resource hint %q", hint)
				}
				if langerr.HeapExhausted(g.format, g.stderr) {
					t.Error("heap exhausted")
				}
			})
		}
	}
}

// Every captured case has an expectation: a new folder must not be
// silently skipped.
func TestGoldenCasesAllListed(t *testing.T) {
	listed := map[string]bool{}
	for _, tc := range parseCases {
		listed[tc.dir] = true
	}
	for _, tc := range resourceCases {
		listed[tc.dir] = true
	}
	for _, tc := range heapCases {
		listed[tc.dir] = true
	}
	dirs, _ := filepath.Glob(filepath.Join(testdata, "*", "*"))
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || filepath.Base(filepath.Dir(d)) == "fuzz" {
			continue
		}
		rel, _ := filepath.Rel(testdata, d)
		if !listed[filepath.ToSlash(rel)] {
			t.Errorf("%s has no expectation", rel)
		}
	}
}

func readCase(t *testing.T, dir, file string) (stderr, code string) {
	t.Helper()
	for _, g := range readGolden(t, dir) {
		if g.file == file {
			return g.stderr, g.code
		}
	}
	t.Fatalf("%s has no %s", dir, file)
	return "", ""
}

func TestParseSmallCases(t *testing.T) {
	pyZero, pyZeroCode := readCase(t, "python/zero_division", "stderr.txt")
	pySyntax, _ := readCase(t, "python/syntax_indented_column", "stderr.txt")
	nodeRef, nodeRefCode := readCase(t, "node/reference_error", "stderr.node18.txt")
	cases := []struct {
		name, format, stderr, codePath, code string
		want                                 langerr.Error
	}{
		{"unknown format", "ruby", pyZero, "/workspace/main.rb", "", notOK},
		{"format none", "none", pyZero, "/workspace/main.py", pyZeroCode, notOK},
		{"empty python", "python", "", "/workspace/main.py", "", notOK},
		{"empty node", "node", "", "/workspace/main.js", "", notOK},
		{"empty bash", "bash", "", "/workspace/main.sh", "", notOK},
		{"another code path", "python", strings.ReplaceAll(pyZero, "/workspace/main.py", "/tmp/x/run.py"), "/tmp/x/run.py", pyZeroCode,
			runtimeErr("ZeroDivisionError", "integer division or modulo by zero", 2, 14)},
		{"frames of another path only", "python", pyZero, "/workspace/other.py", pyZeroCode,
			runtimeErr("ZeroDivisionError", "integer division or modulo by zero", 0, 0)},
		// Without the code the indentation Python stripped is unknown.
		{"syntax without code", "python", pySyntax, "/workspace/main.py", "", syntaxErr("SyntaxError", "invalid syntax", 3, 0)},
		{"code of other lines", "python", pySyntax, "/workspace/main.py", "x = 1\n", syntaxErr("SyntaxError", "invalid syntax", 3, 0)},
		{"CRLF", "python", strings.ReplaceAll(pyZero, "\n", "\r\n"), "/workspace/main.py", pyZeroCode,
			runtimeErr("ZeroDivisionError", "integer division or modulo by zero", 2, 14)},
		// A report cut short before its exception line says nothing.
		{"python cut before the exception", "python", pyZero[:strings.LastIndex(pyZero, "ZeroDivisionError")], "/workspace/main.py", pyZeroCode, notOK},
		{"header-less exception group start", "python", "  + Exception Group Traceback (most recent call last):\n  |   File \"/workspace/main.py\", line 4, in <module>\n  +-+---- 1 ----\n", "/workspace/main.py", "", notOK},
		{"python traceback printed by the program, then more", "python", pyZero + "exiting\n", "/workspace/main.py", pyZeroCode,
			runtimeErr("ZeroDivisionError", "integer division or modulo by zero", 2, 14)},
		{"node REPL form", "node", "Uncaught TypeError: x is not a function\n    at /workspace/main.js:2:3\n", "/workspace/main.js", "", runtimeErr("TypeError", "x is not a function", 2, 3)},
		// An error the program printed itself (console.error(err)) before
		// exiting: no header, a stack.
		{"node printed stack", "node", "Error: boom\n    at main (/workspace/main.js:7:11)\n    at Object.<anonymous> (/workspace/main.js:9:1)\n", "/workspace/main.js", "",
			runtimeErr("Error", "boom", 7, 11)},
		{"node eval frame", "node", "ReferenceError: y is not defined\n    at eval (eval at <anonymous> (/workspace/main.js:1:1), <anonymous>:1:1)\n    at Object.<anonymous> (/workspace/main.js:1:1)\n", "/workspace/main.js", "",
			runtimeErr("ReferenceError", "y is not defined", 1, 1)},
		{"node only a header", "node", "/workspace/main.js:3\n", "/workspace/main.js", "", notOK},
		{"node value after junk", "node", nodeRef + "\n" + "more output\n", "/workspace/main.js", nodeRefCode,
			runtimeErr("ReferenceError", "count is not defined", 3, 15)},
		{"bash yaml line is no diagnostic", "bash", "/workspace/main.sh: line 2: foo: command not found\nyaml: line 3: mapping values are not allowed here\n", "/workspace/main.sh", "",
			runtimeErr("", "foo: command not found", 2, 0)},
		{"bash child script last", "bash", "/workspace/main.sh: line 2: foo: command not found\n/workspace/other.sh: line 3: bar: command not found\n", "/workspace/main.sh", "", notOK},
		{"bash syntax at run time after runtime errors", "bash", "/workspace/main.sh: line 1: foo: command not found\n/workspace/main.sh: line 9: syntax error near unexpected token `fi'\n/workspace/main.sh: line 9: `fi'\n", "/workspace/main.sh", "",
			syntaxErr("", "syntax error near unexpected token `fi'", 9, 0)},
		{"bash fork only", "bash", "/workspace/main.sh: fork: retry: Resource temporarily unavailable\n", "/workspace/main.sh", "", notOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkParse(t, tc.format, tc.stderr, tc.codePath, tc.code, tc.want)
		})
	}
}

// runbox-init cuts the middle of a long stderr and leaves a marker: what
// remains on either side is still read.
func TestParseTruncated(t *testing.T) {
	marker := func(n int) string { return fmt.Sprintf("\n…[runbox: %d bytes truncated]…\n", n) }
	py, pyCode := readCase(t, "python/json_decode_dotted", "stderr.txt")
	pyWant := runtimeErr("json.decoder.JSONDecodeError", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)", 4, 12)
	node, nodeCode := readCase(t, "node/error_in_helper", "stderr.node18.txt")
	nodeWant := runtimeErr("TypeError", "Cannot read properties of undefined (reading 'bar')", 4, 13)

	pyFrames := strings.Index(py, "  File \"/usr/lib/python3.11/json/__init__.py\"")
	pyDecoder := strings.Index(py, "  File \"/usr/lib/python3.11/json/decoder.py\", line 353")
	cases := []struct {
		name, format, stderr, codePath, code string
		// check compares what matters when the cut leaves less to read.
		check func(langerr.Error) bool
	}{
		// A deep traceback cut between its frames.
		{"python cut in the frames", "python", py[:pyFrames-1] + marker(pyDecoder-pyFrames) + py[pyDecoder:], "/workspace/main.py", pyCode,
			func(e langerr.Error) bool { return e == pyWant }},
		// The header and the first frames gone: the frames left still count.
		{"python cut through the head", "python", "lots of output" + marker(5000) + py[strings.Index(py, "    return json.loads(s)"):], "/workspace/main.py", pyCode,
			func(e langerr.Error) bool { return e.Type == pyWant.Type && e.Line == 0 }},
		{"python cut before a frame", "python", "lots of output" + marker(5000) + py[strings.Index(py, "  File \"/workspace/main.py\", line 4"):], "/workspace/main.py", pyCode,
			func(e langerr.Error) bool { return e == pyWant }},
		// Node: the header gone, the stack left.
		{"node without header", "node", "output" + marker(100) + node[strings.Index(node, "TypeError"):], "/workspace/main.js", nodeCode,
			func(e langerr.Error) bool { return e == nodeWant }},
		// Node: cut between the message and the stack.
		{"node cut in the stack", "node", node[:strings.Index(node, "    at /workspace/helper.js")] + marker(300) + node[strings.Index(node, "    at exports.compute"):], "/workspace/main.js", nodeCode,
			func(e langerr.Error) bool { return e.Type == "TypeError" && e.Line == 4 }},
		// bash: the diagnostic after the marker.
		{"bash after the marker", "bash", "/workspace/main.sh: line 1: a: command not found" + marker(9) + "/workspace/main.sh: line 7: b: command not found\n", "/workspace/main.sh", "",
			func(e langerr.Error) bool { return e.Line == 7 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := langerr.Parse(tc.format, tc.stderr, tc.codePath, tc.code); !ok || !tc.check(got) {
				t.Errorf("got %+v (ok %v)", got, ok)
			}
		})
	}
}

// stderr can be a MiB: the parsers read all of it, in linear time, and
// find a report before or after the noise.
func TestParseLargeStderr(t *testing.T) {
	junk := strings.Repeat("progress: 42% done, still working on it\n", (1<<20)/41)
	py, pyCode := readCase(t, "python/error_in_helper", "stderr.txt")
	node, nodeCode := readCase(t, "node/error_in_helper", "stderr.node20.txt")
	bash, bashCode := readCase(t, "bash/unbound_variable", "stderr.txt")
	pyWant := runtimeErr("ZeroDivisionError", "division by zero", 4, 9)
	nodeWant := runtimeErr("TypeError", "Cannot read properties of undefined (reading 'bar')", 4, 13)
	bashWant := runtimeErr("", "MISSING_VAR: unbound variable", 3, 0)
	cases := []struct {
		name, format, stderr, codePath, code string
		want                                 langerr.Error
	}{
		{"python after junk", "python", junk + py, "/workspace/main.py", pyCode, pyWant},
		{"python before junk", "python", py + junk, "/workspace/main.py", pyCode, pyWant},
		{"node after junk", "node", junk + node, "/workspace/main.js", nodeCode, nodeWant},
		{"node before junk", "node", node + junk, "/workspace/main.js", nodeCode, nodeWant},
		{"bash after junk", "bash", junk + bash, "/workspace/main.sh", bashCode, bashWant},
		{"bash before junk", "bash", bash + junk, "/workspace/main.sh", bashCode, bashWant},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			got, ok := langerr.Parse(tc.format, tc.stderr, tc.codePath, tc.code)
			hint := langerr.ResourceHint(tc.stderr)
			heap := langerr.HeapExhausted(tc.format, tc.stderr)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			if !ok || got != tc.want || hint != "" || heap {
				t.Errorf("got %+v (ok %v, hint %q, heap %v), want %+v", got, ok, hint, heap, tc.want)
			}
		})
	}
}

// Inputs made to look like the start of a report on every line must not
// make the parsers go back and forth over them.
func TestParseAdversarialSize(t *testing.T) {
	const mib = 1 << 20
	cases := []struct{ name, stderr string }{
		{"one long line", strings.Repeat("x", mib)},
		{"blank lines", strings.Repeat("\n", mib)},
		{"python frames", strings.Repeat("  File \"/workspace/main.py\", line 1, in f\n    x\n    ^\n", mib/50)},
		{"python headers", strings.Repeat("Traceback (most recent call last):\n", mib/35)},
		{"group prefix", "  + Exception Group Traceback (most recent call last):\n" + strings.Repeat("  |     x\n", mib/10)},
		{"node headers", strings.Repeat("/workspace/main.js:1\nx\n^\n\n", mib/25)},
		{"node frames", strings.Repeat("    at f (/workspace/main.js:1:1)\n", mib/34)},
		{"node errors", strings.Repeat("Error: x\n", mib/9)},
		{"node header gaps", strings.Repeat("a:1\n\n\n\n", mib/7)},
		{"bash lines", strings.Repeat("/workspace/main.sh: line 1: x: y\n", mib/33)},
		{"resource signs", strings.Repeat("BlockingIOError: [Errno 11] ", mib/28)},
		{"heap signs", strings.Repeat("FATAL ERROR: x# Fatal javascript OOM in ", mib/40)},
		{"one long line of invalid bytes", strings.Repeat("\xff", mib)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parse := func(stderr string) time.Duration {
				start := time.Now()
				for _, f := range []string{"python", "node", "bash"} {
					langerr.Parse(f, stderr, "/workspace/main.x", "x\n")
					langerr.HeapExhausted(f, stderr)
				}
				langerr.ResourceHint(stderr)
				contract.FirstLine(stderr)
				contract.LastLine(stderr)
				return time.Since(start)
			}
			// Linear, measured against the machine itself: an eighth of
			// the input takes about an eighth of the time, where a
			// quadratic parse takes a sixty-fourth. Under a second, no
			// quadratic parse of a MiB could have finished, whatever the
			// load.
			eighth := parse(tc.stderr[:len(tc.stderr)/8])
			if d := parse(tc.stderr); d > time.Second && d > 32*eighth {
				t.Errorf("took %v, and %v for an eighth of the input", d, eighth)
			}
		})
	}
}

// Parse's message is one bounded line, as FirstLine makes it.
func TestParseMessageIsOneBoundedLine(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	cases := []struct {
		name, format, stderr, codePath string
		want                           string
	}{
		{"long python message", "python", "Traceback (most recent call last):\n  File \"/workspace/main.py\", line 1, in <module>\nValueError: " + long + "\n", "/workspace/main.py",
			strings.Repeat("é", 248) + "…"},
		{"invalid byte in bash", "bash", "/workspace/main.sh: line 1: bad \xff byte\n", "/workspace/main.sh", "bad \uFFFD byte"},
		{"invalid byte early in a long node message", "node", "Error: \xff" + strings.Repeat("x", 600) + "\n    at /workspace/main.js:1:1\n", "/workspace/main.js",
			"\uFFFD" + strings.Repeat("x", 494) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := langerr.Parse(tc.format, tc.stderr, tc.codePath, "")
			if !ok || got.Message != tc.want {
				t.Errorf("got %q (ok %v), want %q", got.Message, ok, tc.want)
			}
			if len(got.Message) > 500 || !utf8.ValidString(got.Message) {
				t.Errorf("%d bytes, valid %v", len(got.Message), utf8.ValidString(got.Message))
			}
		})
	}
}
