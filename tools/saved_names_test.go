package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
)

func TestReservedNameInEverySpelling(t *testing.T) {
	builtins := []string{RunCodeName, SearchToolsName, SessionOpenName, SessionCloseName, SessionListName, SaveToolName, DeleteToolName}
	for _, name := range []string{
		"session_open", "sessionopen", "Session-Open", "session.open", "SESSION_OPEN", "session__open", "s_e_s_s_i_o_n_open",
		"run_code", "runcode", "run-code", "search_tools", "searchtools", "save_tool", "savetool", "delete_tool", "deletetool",
		"runbox", "runbox_stats", "runboxstats", "run_thing", "run-thing", "session_fork", "sessions", "session2",
	} {
		if reservedName(name, builtins) == "" {
			t.Errorf("%q is not reserved", name)
		}
	}
	for _, name := range []string{"running_total", "csv_stats", "runner", "my_session_report", "sum"} {
		if why := reservedName(name, builtins); why != "" {
			t.Errorf("%q is reserved: %s", name, why)
		}
	}
}

func TestSaveValidateRefusesHostileInput(t *testing.T) {
	m := manifest.Default()
	ok := SaveToolArgs{Name: "csv_stats", Description: "Stats of a CSV.", Language: "python", Code: "print(1)"}
	if _, err := ok.validate(m); err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 40) + `{}` + strings.Repeat(`}}`, 40)
	for name, mod := range map[string]func(*SaveToolArgs){
		"remote ref": func(a *SaveToolArgs) {
			a.InputSchema = json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"https://evil.example/s.json"}}}`)
		},
		"dynamic ref": func(a *SaveToolArgs) {
			a.InputSchema = json.RawMessage(`{"type":"object","$dynamicRef":"file:///etc/passwd"}`)
		},
		"deep":       func(a *SaveToolArgs) { a.InputSchema = json.RawMessage(deep) },
		"not object": func(a *SaveToolArgs) { a.InputSchema = json.RawMessage(`{"type":"string"}`) },
		"array":      func(a *SaveToolArgs) { a.InputSchema = json.RawMessage(`[1]`) },
		"huge": func(a *SaveToolArgs) {
			a.InputSchema = json.RawMessage(`{"type":"object","x":"` + strings.Repeat("a", 70<<10) + `"}`)
		},
		"bidi description": func(a *SaveToolArgs) { a.Description = "safe \u202e txt.exe" },
		"escape sequence":  func(a *SaveToolArgs) { a.Description = "clear \x1b[2J screen" },
		"bad utf-8":        func(a *SaveToolArgs) { a.Description = "bad \xff" },
		"long description": func(a *SaveToolArgs) { a.Description = strings.Repeat("d", 2049) },
		"nul code":         func(a *SaveToolArgs) { a.Code = "print(1)\x00" },
		"long code":        func(a *SaveToolArgs) { a.Code = strings.Repeat("#", int(m.Limits.CodeBytes)+1) },
		"upper name":       func(a *SaveToolArgs) { a.Name = "CSV" },
		"unicode name":     func(a *SaveToolArgs) { a.Name = "сsv" },
		"long name":        func(a *SaveToolArgs) { a.Name = strings.Repeat("a", 49) },
	} {
		a := ok
		mod(&a)
		if _, err := a.validate(m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	a := ok
	a.InputSchema = json.RawMessage(`{"type":"object","properties":{"x":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}`)
	if _, err := a.validate(m); err != nil {
		t.Errorf("a local $ref: %v", err)
	}
}
