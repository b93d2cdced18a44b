package langerr

import (
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// The TypeScript runner's reports: a type error is the submitted code's
// syntax error (nothing ran), named by the compiler's code; a runtime
// error reads as Node's, at the TypeScript's own lines (source maps).
func TestParseTypeScript(t *testing.T) {
	const code = "console.log(\"before\");\nconst s: string = 1;\nlet q: number = \"x\";\n"
	cases := []struct {
		name, stderr string
		want         Error
	}{
		{"type error", "/workspace/main.ts:2\nconst s: string = 1;\n      ^\n\nTS2322: Type 'number' is not assignable to type 'string'. (first of 2 type errors; all are listed below)\n/workspace/main.ts:3:5 - TS2322: Type 'string' is not assignable to type 'number'.\n",
			Error{Kind: contract.KindSyntax, Type: "TS2322", Message: "Type 'number' is not assignable to type 'string'. (first of 2 type errors; all are listed below)", Line: 2, Column: 7}},
		{"runtime error", "/workspace/main.ts:3\n  throw new Error(\"boom \" + a);\n  ^\n\n\nError: boom 1\n    at f (/workspace/main.ts:3:9)\n    at Object.<anonymous> (/workspace/main.ts:5:1)\n    at Module._compile (node:internal/modules/cjs/loader:1105:14)\n    at execute (/tmp/.runbox/run/runbox_ts.js:303:5)\n",
			Error{Kind: contract.KindRuntime, Type: "Error", Message: "boom 1", Line: 3, Column: 9}},
		{"a thrown value named like a code is no type error", "/workspace/main.ts:1\nthrow \"TS2322\";\n^\nTS2322\n(Use `node --trace-uncaught ...` to show where the exception was thrown)\n",
			Error{Kind: contract.KindRuntime, Message: "TS2322", Line: 1, Column: 1}},
	}
	for _, tc := range cases {
		got, ok := Parse("typescript", tc.stderr, "/workspace/main.ts", code)
		if !ok || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, ok, tc.want)
		}
	}
	if isTypeError("TS") || isTypeError("TSX1") || !isTypeError("TS1005") || isTypeError("TypeError") {
		t.Error("isTypeError misreads a name")
	}
}
