package runs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

// RunCodeArgs are the arguments of run_code; the published input schema is
// reflected from this type.
type RunCodeArgs struct {
	Language       string      `json:"language" jsonschema:"required,description=The language of the code."`
	Code           string      `json:"code" jsonschema:"required,description=The program to run. It is saved in /workspace (main.py / main.js / main.sh) and run from there."`
	Stdin          string      `json:"stdin,omitempty" jsonschema:"description=Text fed to the program's standard input."`
	Files          []InputFile `json:"files,omitempty" jsonschema:"description=Input files written into /workspace before the code runs."`
	TimeoutSeconds *float64    `json:"timeout_seconds,omitempty" jsonschema:"description=Wall-clock limit for this run in seconds."`
	// SaveArtifacts also saves the artifacts in the manifest's outputs
	// folder; SessionID runs the code in an open session (session_open)
	// instead of a fresh box.
	SaveArtifacts bool   `json:"save_artifacts,omitempty" jsonschema:"description=Also save the run's artifacts in the user's outputs folder (when the server declares one), under a folder named for the run id; each artifact's saved_to says where."`
	SessionID     string `json:"session_id,omitempty" jsonschema:"description=Run in this session (from session_open): the same interpreter as its earlier calls, so variables, imports and loaded data are still there. Omit for a fresh, empty sandbox."`
}

// InputFile is a file placed in the workspace before the run.
type InputFile struct {
	Path     string `json:"path" jsonschema:"required,description=Path relative to /workspace, e.g. data/input.csv; no .. and no leading /."`
	Content  string `json:"content,omitempty" jsonschema:"description=The file's content, as text or base64 per encoding (or use source)."`
	Source   string `json:"source,omitempty" jsonschema:"description=Instead of content: a file in a declared read-only folder, e.g. /mnt/data/sales.csv, copied to path without passing its bytes."`
	Encoding string `json:"encoding,omitempty" jsonschema:"enum=utf-8,enum=base64,default=utf-8,description=How content is encoded."`
}

// Encodings of InputFile.Content.
const (
	EncodingUTF8   = "utf-8"
	EncodingBase64 = "base64"
)

// invalid is the error of a request that never reaches a box.
// MinTimeoutSeconds is the shortest timeout a call may ask for.
const MinTimeoutSeconds = 0.1

func invalid(format string, a ...any) *contract.ErrorInfo {
	info := contract.Invalid(format, a...)
	return &info
}

// DecodeArgs reads arguments strictly: wrong types and unknown fields are
// errors the agent sees, not silently dropped.
func DecodeArgs(raw []byte) (RunCodeArgs, *contract.ErrorInfo) {
	var args RunCodeArgs
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return args, invalid("arguments are missing: language and code are required")
	}
	if err := unmarshalStrict(raw, &args); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return args, invalid("argument %s must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return args, invalid("bad arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return args, nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "float64", "int", "int64":
		return "a number"
	case "slice":
		return "an array"
	case "struct", "ptr":
		return "an object"
	}
	return goKind
}

// Validate checks arguments against the manifest and returns the job to run.
// A request that fails here never reaches a box.
func Validate(m *manifest.Manifest, args RunCodeArgs, runID string) (contract.Job, *contract.ErrorInfo) {
	lim := m.Limits
	lang, ok := m.Language(args.Language)
	if !ok {
		if args.Language == "" {
			return contract.Job{}, invalid("language is required: one of %s", strings.Join(m.LanguageNames(), ", "))
		}
		return contract.Job{}, invalid("unknown language %q: use one of %s", args.Language, strings.Join(m.LanguageNames(), ", "))
	}
	job := contract.Job{RunID: runID, Language: lang, Code: args.Code, Stdin: args.Stdin, Timeout: lim.Timeout()}
	switch {
	case strings.TrimSpace(args.Code) == "":
		return job, invalid("code is empty")
	case len(args.Code) > int(lim.CodeBytes):
		return job, invalid("code is %d bytes, over the %s limit: move data into files or shorten the program", len(args.Code), lim.CodeBytes)
	case strings.IndexByte(args.Code, 0) >= 0:
		// Python ignores everything after a NUL byte in a source file.
		return job, invalid("code contains a NUL byte (at byte %d): remove it; pass binary data in files with encoding base64", strings.IndexByte(args.Code, 0))
	}
	if t := args.TimeoutSeconds; t != nil {
		// Below MinTimeoutSeconds a deadline is shorter than starting any
		// interpreter (and under a nanosecond it would round to none).
		if !(*t >= MinTimeoutSeconds) || *t > lim.MaxTimeoutSeconds {
			return job, invalid("timeout_seconds %g is out of range: it must be at least %g and at most %g", *t, MinTimeoutSeconds, lim.MaxTimeoutSeconds)
		}
		job.Timeout = time.Duration(*t * float64(time.Second))
	}
	if len(args.Files) > lim.InputFiles {
		return job, invalid("%d input files, over the limit of %d", len(args.Files), lim.InputFiles)
	}
	total := int64(len(args.Stdin))
	seen := map[string]bool{}
	for i, f := range args.Files {
		p, err := checkPath(f.Path)
		if err != nil {
			return job, invalid("files[%d].path %q: %s", i, f.Path, err)
		}
		if p == lang.File {
			return job, invalid("files[%d].path %q is where the code is saved: rename the file", i, f.Path)
		}
		if seen[p] {
			return job, invalid("files[%d].path %q appears twice", i, f.Path)
		}
		seen[p] = true
		var data []byte
		switch {
		case f.Source != "":
			if f.Content != "" {
				return job, invalid("files[%d]: give content or source, not both", i)
			}
			if data, err = readSource(m, f.Source, int64(lim.InputBytes)-total); err != nil {
				return job, invalid("files[%d].source %q: %s", i, f.Source, err)
			}
		case f.Encoding == "" || f.Encoding == EncodingUTF8:
			data = []byte(f.Content)
		case f.Encoding == EncodingBase64:
			data, err = base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return job, invalid("files[%d].content is not valid base64: %s", i, err)
			}
		default:
			return job, invalid("files[%d].encoding %q: use utf-8 or base64", i, f.Encoding)
		}
		total += int64(len(data))
		if total > int64(lim.InputBytes) {
			return job, invalid("input files and stdin exceed the %s limit", lim.InputBytes)
		}
		job.Files = append(job.Files, contract.File{Path: p, Data: data})
	}
	for p := range seen {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return job, invalid("files: %q is both a file and a directory of %q", dir, p)
			}
		}
	}
	if total > int64(lim.InputBytes) {
		return job, invalid("input files and stdin exceed the %s limit", lim.InputBytes)
	}
	if args.SaveArtifacts && m.Outputs == "" {
		return job, invalid("save_artifacts: this server declares no outputs folder; read the artifacts from the result instead")
	}
	return job, nil
}

// checkPath accepts a clean relative path inside the workspace.
func checkPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("empty path")
	case strings.IndexByte(p, 0) >= 0:
		return "", errors.New("contains a NUL byte")
	case strings.HasPrefix(p, "/"):
		return "", errors.New("absolute paths are not allowed; use a path relative to /workspace")
	case strings.Contains(p, "\\"):
		return "", errors.New("use / as the separator")
	case len(p) > 1024:
		return "", errors.New("longer than 1024 bytes")
	}
	for _, part := range strings.Split(p, "/") {
		switch {
		case part == "..":
			return "", errors.New(".. is not allowed; files stay inside /workspace")
		case len(part) > 255:
			return "", errors.New("a path component is longer than 255 bytes")
		}
	}
	clean := path.Clean(p)
	if clean == "." || strings.HasSuffix(p, "/") {
		return "", errors.New("names a directory, not a file")
	}
	return clean, nil
}

// unmarshalStrict is json.Unmarshal refusing unknown fields, as a Decoder
// with DisallowUnknownFields does, without the copy of raw a Decoder reads
// it into: a call's arguments may be most of a large request. Small
// arguments go through such a Decoder first, one pass where the check
// below is a second; whatever it refuses is decoded again the long way,
// which names the first unknown field by name and errs as Unmarshal does.
func unmarshalStrict(raw []byte, v any) error {
	if len(raw) <= strictOnePass {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if dec.Decode(v) == nil {
			if _, err := dec.Token(); err == io.EOF {
				return nil
			}
		}
		reflect.ValueOf(v).Elem().SetZero()
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return err
	}
	return unknownFields(raw, reflect.TypeOf(v))
}

// strictOnePass is the largest arguments unmarshalStrict decodes through
// a Decoder, whose copy of them costs little.
const strictOnePass = 64 << 10

// span is a JSON value as a slice of the input, not a copy.
type span []byte

func (s *span) UnmarshalJSON(b []byte) error {
	*s = b
	return nil
}

// unknownFields returns the error of the first field (by name) of an
// object in raw that t, the type raw was decoded into, does not have.
func unknownFields(raw []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]span
		if json.Unmarshal(raw, &obj) != nil {
			return nil // null: nothing to check
		}
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			f, ok := jsonField(t, key)
			if !ok {
				return fmt.Errorf("json: unknown field %q", key)
			}
			if err := unknownFields(obj[key], f.Type); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		var items []span
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for _, item := range items {
			if err := unknownFields(item, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonField is t's field that encoding/json decodes key into.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
