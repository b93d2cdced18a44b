package runs

import (
	"bytes"
	"encoding/base64"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

// checkInvalid asserts the shape of every refusal: an invalid_request the
// agent can read.
func checkInvalid(t *testing.T, step string, bad *contract.ErrorInfo) {
	t.Helper()
	if bad == nil {
		t.Fatalf("%s: nil error", step)
	}
	if bad.Kind != contract.KindInvalidRequest || strings.TrimSpace(bad.Message) == "" || bad.Hint == "" {
		t.Fatalf("%s: malformed error %+v", step, *bad)
	}
}

// checkJob asserts what Validate promises about a job it accepted.
func checkJob(t *testing.T, m *manifest.Manifest, args RunCodeArgs, job contract.Job) {
	t.Helper()
	lim := m.Limits
	lang, ok := m.Language(args.Language)
	if !ok || job.Language.Name != lang.Name || job.Language.File != lang.File {
		t.Fatalf("accepted language %q as %+v", args.Language, job.Language)
	}
	if job.Code != args.Code || job.Stdin != args.Stdin {
		t.Fatalf("job code or stdin differs from the arguments")
	}
	if strings.TrimSpace(job.Code) == "" || strings.IndexByte(job.Code, 0) >= 0 || int64(len(job.Code)) > int64(lim.CodeBytes) {
		t.Fatalf("accepted code of %d bytes: %q", len(job.Code), trim(job.Code))
	}
	if job.Timeout <= 0 || job.Timeout > lim.MaxTimeout() {
		t.Fatalf("accepted timeout %v (timeout_seconds %v), want in (0, %v]", job.Timeout, deref(args.TimeoutSeconds), lim.MaxTimeout())
	}
	if args.TimeoutSeconds == nil && job.Timeout != lim.Timeout() {
		t.Fatalf("default timeout %v, want %v", job.Timeout, lim.Timeout())
	}
	if len(job.Files) != len(args.Files) || len(job.Files) > lim.InputFiles {
		t.Fatalf("%d files accepted of %d (limit %d)", len(job.Files), len(args.Files), lim.InputFiles)
	}
	total := int64(len(job.Stdin))
	seen := map[string]bool{}
	for i, f := range job.Files {
		p := f.Path
		switch {
		case p == "" || p == "." || strings.HasPrefix(p, "/"):
			t.Fatalf("files[%d]: accepted path %q is not relative", i, p)
		case path.Clean(p) != p:
			t.Fatalf("files[%d]: accepted path %q is not clean", i, p)
		case strings.IndexByte(p, 0) >= 0 || strings.Contains(p, "\\"):
			t.Fatalf("files[%d]: accepted path %q has a NUL or a backslash", i, p)
		case slices.Contains(strings.Split(p, "/"), ".."):
			t.Fatalf("files[%d]: accepted path %q has a .. element", i, p)
		case !filepath.IsLocal(p):
			t.Fatalf("files[%d]: accepted path %q is not local", i, p)
		case p == lang.File:
			t.Fatalf("files[%d]: accepted path %q is the code's file", i, p)
		case seen[p]:
			t.Fatalf("files[%d]: accepted path %q twice", i, p)
		}
		if want := path.Clean(args.Files[i].Path); p != want {
			t.Fatalf("files[%d]: path %q became %q", i, args.Files[i].Path, p)
		}
		seen[p] = true
		switch enc := args.Files[i].Encoding; enc {
		case "", EncodingUTF8:
			if string(f.Data) != args.Files[i].Content {
				t.Fatalf("files[%d]: utf-8 content changed", i)
			}
		case EncodingBase64:
			want, err := base64.StdEncoding.DecodeString(args.Files[i].Content)
			if err != nil || !bytes.Equal(want, f.Data) {
				t.Fatalf("files[%d]: base64 content decoded to %q (%v)", i, trim(string(f.Data)), err)
			}
		default:
			t.Fatalf("files[%d]: accepted encoding %q", i, enc)
		}
		total += int64(len(f.Data))
	}
	if total > int64(lim.InputBytes) {
		t.Fatalf("accepted %d bytes of stdin and files, over %d", total, lim.InputBytes)
	}
	// No accepted file is a directory of another: the box could not
	// create both.
	for p := range seen {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				t.Fatalf("accepted %q both as a file and as a directory of %q", dir, p)
			}
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// tightManifest is the default one with limits small enough for fuzzed
// inputs to reach them.
func tightManifest() *manifest.Manifest {
	m := manifest.Default()
	m.Limits.CodeBytes = 64
	m.Limits.InputBytes = 48
	m.Limits.InputFiles = 3
	m.Limits.TimeoutSeconds = 2
	m.Limits.MaxTimeoutSeconds = 5
	return m
}

// FuzzRunCodeArgs feeds raw run_code arguments through DecodeArgs and
// Validate, as the pipeline (Service.Run) does, and checks that a refusal is always a
// well-formed invalid_request and that an accepted job keeps every promise
// of the input schema and the manifest's limits.
//
//	go test -run '^$' -fuzz '^FuzzRunCodeArgs$' -fuzztime 20s ./tools
func FuzzRunCodeArgs(f *testing.F) {
	for _, s := range []string{
		`{"language":"python","code":"print(1)"}`,
		`{"language":"bash","code":"cat a/b.txt","stdin":"x","timeout_seconds":2.5,"files":[{"path":"a/b.txt","content":"aGk=","encoding":"base64"}]}`,
		`{"language":"javascript","code":"console.log(1)","files":[{"path":"./d//e.json","content":"{}","encoding":"utf-8"},{"path":"d/f","content":""}]}`,
		`{"language":"python","code":"x","timeout_seconds":300}`,
		`{"language":"python","code":"x","timeout_seconds":0.001}`,
		`{"language":"python","code":"x","timeout_seconds":1e-9}`,
		`{"language":"python","code":"x","timeout_seconds":-0}`,
		`{"language":"python","code":"x","files":[{"path":"a","content":""},{"path":"a/b","content":""}]}`,
		`{"language":"python","code":"x","files":[{"path":"a/../../x","content":""}]}`,
		`{"language":"python","code":"x","files":[{"path":"./main.py","content":""}]}`,
		`{"language":"python","code":"x","files":[{"path":"a\u0000b","content":""}]}`,
		`{"language":"python","code":"a\u0000b"}`,
		`{"language":"python","code":5}`,
		`{"language":"python","code":"x","lang":"py"}`,
		`{"code":null,"timeout_seconds":1e309}`,
		`null`,
		``,
		`[1]`,
	} {
		f.Add([]byte(s))
	}
	manifests := []*manifest.Manifest{manifest.Default(), tightManifest()}
	f.Fuzz(func(t *testing.T, raw []byte) {
		args, bad := DecodeArgs(raw)
		if bad != nil {
			checkInvalid(t, "decode", bad)
			return
		}
		for _, m := range manifests {
			job, bad := Validate(m, args, "r_fuzz")
			if bad != nil {
				checkInvalid(t, "validate", bad)
				continue
			}
			if job.RunID != "r_fuzz" {
				t.Fatalf("run id %q", job.RunID)
			}
			checkJob(t, m, args, job)
		}
	})
}

// FuzzInputPath checks checkPath, which every input file's path goes
// through: what it accepts is a clean relative path that stays in the
// workspace, and accepting is stable under its own output.
//
//	go test -run '^$' -fuzz '^FuzzInputPath$' -fuzztime 20s ./tools
func FuzzInputPath(f *testing.F) {
	for _, s := range []string{
		"data/input.csv", "a", "./a", "a//b", "a/./b", "a/b/", ".", "..", "../x", "a/../b",
		"a/../../x", "/etc/passwd", "a\\b", "a\x00b", "", "...", "..a/b..", "main.py",
		strings.Repeat("x", 256), strings.Repeat("a/", 512) + "b", "é/ü.txt",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := checkPath(p)
		if err != nil {
			if clean != "" || err.Error() == "" {
				t.Fatalf("refused %q with %q and path %q", p, err, clean)
			}
			return
		}
		switch {
		case clean == "" || clean == ".":
			t.Fatalf("%q: accepted as %q", p, clean)
		case strings.HasPrefix(clean, "/") || path.IsAbs(clean) || strings.HasPrefix(p, "/"):
			t.Fatalf("%q: accepted as absolute %q", p, clean)
		case path.Clean(clean) != clean:
			t.Fatalf("%q: accepted %q is not clean", p, clean)
		case clean != path.Clean(p):
			t.Fatalf("%q: accepted as %q, not its clean form", p, clean)
		case strings.IndexByte(clean, 0) >= 0 || strings.IndexByte(p, 0) >= 0:
			t.Fatalf("%q: accepted with a NUL", p)
		case slices.Contains(strings.Split(clean, "/"), "..") || slices.Contains(strings.Split(p, "/"), ".."):
			t.Fatalf("%q: accepted with a .. element", p)
		case !filepath.IsLocal(clean):
			t.Fatalf("%q: accepted %q is not local", p, clean)
		case len(clean) > 1024:
			t.Fatalf("%q: accepted %d bytes", p, len(clean))
		}
		full := path.Join(manifest.Workspace, clean)
		if !strings.HasPrefix(full, manifest.Workspace+"/") || full == manifest.Workspace+"/" {
			t.Fatalf("%q: lands at %q, outside %s/", p, full, manifest.Workspace)
		}
		if rel := strings.TrimPrefix(full, manifest.Workspace+"/"); rel != clean {
			t.Fatalf("%q: joined as %q, not %q", p, full, clean)
		}
		// The clean form is accepted as itself.
		if again, err := checkPath(clean); err != nil || again != clean {
			t.Fatalf("%q: accepted as %q, which then gives %q, %v", p, clean, again, err)
		}
	})
}
