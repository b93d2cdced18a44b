package runs

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

func TestDecodeAndValidate(t *testing.T) {
	m := manifest.Default()
	cases := []struct {
		name, args, want string
	}{
		{"ok", `{"language":"python","code":"print(1)"}`, ""},
		{"ok with everything", `{"language":"bash","code":"cat a/b.txt","stdin":"x","timeout_seconds":2.5,"files":[{"path":"a/b.txt","content":"aGk=","encoding":"base64"}]}`, ""},
		{"empty", ``, "arguments are missing"},
		{"null", `null`, "arguments are missing"},
		{"not an object", `[1]`, "bad arguments"},
		{"wrong type", `{"language":"python","code":5}`, "code must be a string, not number"},
		{"wrong file type", `{"language":"python","code":"x","files":"a"}`, "files must be an array"},
		{"unknown field", `{"language":"python","code":"x","lang":"py"}`, `unknown field "lang"`},
		{"no language", `{"code":"x"}`, "language is required: one of python, javascript, typescript, bash"},
		{"unknown language", `{"language":"ruby","code":"x"}`, `unknown language "ruby"`},
		{"empty code", `{"language":"python","code":"  \n"}`, "code is empty"},
		{"NUL", `{"language":"python","code":"a\u0000b"}`, "NUL byte (at byte 1)"},
		{"zero timeout", `{"language":"python","code":"x","timeout_seconds":0}`, "timeout_seconds 0 is out of range"},
		{"negative timeout", `{"language":"python","code":"x","timeout_seconds":-1}`, "out of range"},
		{"huge timeout", `{"language":"python","code":"x","timeout_seconds":301}`, "at most 300"},
		{"dotdot", `{"language":"python","code":"x","files":[{"path":"../x","content":""}]}`, ".. is not allowed"},
		{"inner dotdot", `{"language":"python","code":"x","files":[{"path":"a/../../x","content":""}]}`, ".. is not allowed"},
		{"absolute", `{"language":"python","code":"x","files":[{"path":"/etc/x","content":""}]}`, "absolute"},
		{"backslash", `{"language":"python","code":"x","files":[{"path":"a\\b","content":""}]}`, "separator"},
		{"directory", `{"language":"python","code":"x","files":[{"path":"a/","content":""}]}`, "directory"},
		{"dot", `{"language":"python","code":"x","files":[{"path":".","content":""}]}`, "directory"},
		{"empty path", `{"language":"python","code":"x","files":[{"path":"","content":""}]}`, "empty path"},
		{"duplicate", `{"language":"python","code":"x","files":[{"path":"a","content":""},{"path":"./a","content":""}]}`, "appears twice"},
		{"file and dir", `{"language":"python","code":"x","files":[{"path":"a","content":""},{"path":"a/b","content":""}]}`, "both a file and a directory"},
		{"code name", `{"language":"python","code":"x","files":[{"path":"main.py","content":""}]}`, "where the code is saved"},
		{"bad base64", `{"language":"python","code":"x","files":[{"path":"a","content":"@@","encoding":"base64"}]}`, "not valid base64"},
		{"bad encoding", `{"language":"python","code":"x","files":[{"path":"a","content":"","encoding":"hex"}]}`, `encoding "hex"`},
	}
	for _, tc := range cases {
		args, bad := DecodeArgs([]byte(tc.args))
		var job contract.Job
		if bad == nil {
			job, bad = Validate(m, args, "r_test")
		}
		switch {
		case tc.want == "" && bad != nil:
			t.Errorf("%s: unexpected error %+v", tc.name, bad)
		case tc.want != "" && (bad == nil || !strings.Contains(bad.Message, tc.want)):
			t.Errorf("%s: got %+v, want %q", tc.name, bad, tc.want)
		case bad != nil && (bad.Kind != contract.KindInvalidRequest || bad.Hint == ""):
			t.Errorf("%s: kind %s hint %q", tc.name, bad.Kind, bad.Hint)
		case tc.name == "ok with everything" && (job.Timeout != 2500*time.Millisecond || string(job.Files[0].Data) != "hi" || job.Files[0].Path != "a/b.txt"):
			t.Errorf("%s: job %+v", tc.name, job)
		case tc.name == "ok" && job.Timeout != m.Limits.Timeout():
			t.Errorf("default timeout: %v", job.Timeout)
		}
	}
}

func TestValidateSizeLimits(t *testing.T) {
	m := manifest.Default()
	m.Limits.CodeBytes = 1 * manifest.KiB
	m.Limits.InputBytes = 10
	m.Limits.InputFiles = 2
	if _, bad := Validate(m, RunCodeArgs{Language: "python", Code: strings.Repeat("x", 1025)}, "r"); bad == nil || !strings.Contains(bad.Message, "over the 1KiB limit") {
		t.Errorf("code cap: %+v", bad)
	}
	if _, bad := Validate(m, RunCodeArgs{Language: "python", Code: "x", Stdin: "123456", Files: []InputFile{{Path: "a", Content: "12345"}}}, "r"); bad == nil || !strings.Contains(bad.Message, "exceed the 10B limit") {
		t.Errorf("input cap: %+v", bad)
	}
	if _, bad := Validate(m, RunCodeArgs{Language: "python", Code: "x", Files: []InputFile{{Path: "a"}, {Path: "b"}, {Path: "c"}}}, "r"); bad == nil || !strings.Contains(bad.Message, "3 input files") {
		t.Errorf("file count cap: %+v", bad)
	}
}

func FuzzValidate(f *testing.F) {
	f.Add([]byte(`{"language":"python","code":"print(1)","files":[{"path":"a/b","content":"eA==","encoding":"base64"}]}`))
	f.Add([]byte(`{"language":"bash","code":"x","files":[{"path":"../../etc","content":""}]}`))
	f.Add([]byte(`{"code":null,"timeout_seconds":1e309}`))
	m := manifest.Default()
	f.Fuzz(func(t *testing.T, raw []byte) {
		args, bad := DecodeArgs(raw)
		if bad != nil {
			return
		}
		job, bad := Validate(m, args, "r")
		if bad != nil {
			return
		}
		for _, file := range job.Files {
			if strings.HasPrefix(file.Path, "/") || strings.Contains("/"+file.Path+"/", "/../") || strings.ContainsRune(file.Path, 0) || file.Path == job.Language.File {
				t.Fatalf("accepted path %q", file.Path)
			}
		}
		if job.Timeout <= 0 || job.Timeout > m.Limits.MaxTimeout() {
			t.Fatalf("accepted timeout %v", job.Timeout)
		}
	})
}

func TestRunIDs(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 1000; i++ {
		id := NewRunID()
		if len(id) != 28 || !strings.HasPrefix(id, "r_") || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		if id[2:12] < prev {
			t.Fatalf("ids not time-ordered: %s after %s", id, prev)
		}
		prev = id[2:12]
		seen[id] = true
	}
}

// TestUnmarshalStrictOnePassAgrees: small arguments decoded in one pass
// end exactly as the long way (Unmarshal, then the unknown-field check)
// leaves them, errors included, whatever the input.
func TestUnmarshalStrictOnePassAgrees(t *testing.T) {
	long := func(raw []byte) (RunCodeArgs, error) {
		var a RunCodeArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			return a, err
		}
		return a, unknownFields(raw, reflect.TypeOf(&a))
	}
	for _, raw := range []string{
		`{"language":"python","code":"print(1)","session_id":"s_1"}`,
		` {"language":"python","code":"x"} `,
		`{"Language":"python","CODE":"x"}`,
		`{"language":"python","code":"x","extra":1}`,
		`{"language":"python","code":"x","files":[{"path":"a","content":"b","mode":"x"}]}`,
		`{"language":"python","code":"x","files":[{"path":"a"},{"path":"b","zz":1,"aa":2}]}`,
		`{"language":"python","code":"x"} {}`,
		`{"language":"python","code":"x"}]`,
		`{"language":1,"code":"x"}`,
		`{"language":"python","code":"x","timeout_seconds":"1"}`,
		`{"language":"python","code":"x","timeout_seconds":2.5,"save_artifacts":true}`,
		`{"language":"python","code":"x","language":"javascript"}`,
		`[1,2]`, `"x"`, `null`, `{`, `{"code":"\ud800"}`,
	} {
		var got RunCodeArgs
		gotErr := unmarshalStrict([]byte(raw), &got)
		want, wantErr := long([]byte(raw))
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n one pass %+v, %v\n long way %+v, %v", raw, got, gotErr, want, wantErr)
		}
	}
}
