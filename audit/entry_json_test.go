package audit

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// checkEntry fails unless appendEntry writes what json.Marshal writes for
// e, and fails where it fails.
func checkEntry(t testing.TB, e *Entry) {
	t.Helper()
	want, werr := json.Marshal(*e)
	got, gerr := appendEntry(nil, e)
	if werr != nil || gerr != nil {
		if werr == nil || gerr == nil {
			t.Fatalf("json.Marshal error %v, appendEntry error %v\nentry %#v", werr, gerr, e)
		}
		if line, err := marshalEntry(e); err == nil || err.Error() != werr.Error() || line != nil {
			t.Fatalf("marshalEntry = %q, %v; json.Marshal's error is %v", line, err, werr)
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendEntry differs from json.Marshal %s", diff(got, want))
	}
	if line, err := marshalEntry(e); err != nil || !bytes.Equal(line, want) {
		t.Fatalf("marshalEntry = %s, %v", line, err)
	}
}

// diff shows where got and want part.
func diff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-60)
	return fmt.Sprintf("at byte %d:\n got …%s\nwant …%s", i, got[from:min(len(got), i+60)], want[from:min(len(want), i+60)])
}

// nastyStrings are what JSON string escaping can get wrong.
var nastyStrings = []string{
	"", "a", "plain text 42", `"quoted"`, `back\slash`, "<script>&amp;</script>",
	"\u2028", "\u2029", "x\u2028y\u2029z", "\u2027\u202a", "\x00", "\x01\x1f", "\x7f",
	"\b\f\n\r\t", "\v", "\xff", "a\xffb", "\xe2\x80", "\xe2\x80\xa8\xe2", "\xc0\xaf",
	"\xed\xa0\x80", "é", "日本語", "😀", "\U0010ffff", "\ufffd", "[REDACTED]",
	"Traceback (most recent call last):\n  File \"/workspace/main.py\", line 3\n",
}

// fullEntry has every field set.
func fullEntry() Entry {
	code := -3
	return Entry{
		RunID: "run-01", Time: time.Date(2026, 11, 29, 12, 34, 56, 789, time.FixedZone("X", 5*3600+30*60)),
		Client:    Client{Name: "claude", Version: "1.2", Session: "s<1>", Principal: "alice&bob"},
		Transport: "stdio", Language: "python", CodeSHA256: strings.Repeat("ab", 32),
		Args:  json.RawMessage(" {\"code\" : \"print('<&>')\", \"n\":[1, 2 ,\n3]}\t"),
		Image: "python:3.13", Isolation: "runsc",
		Limits:  Limits{TimeoutSeconds: 2.5, MemoryBytes: 1 << 30, CPUs: 0.5, Pids: 128, OutputBytes: 1 << 20},
		Metrics: contract.Metrics{WallMs: 12, CPUMs: 7, PeakMemoryBytes: 1 << 25, QueueMs: 1, StartupMs: 300, Pooled: true, Cached: true},
		Status:  contract.StatusError, ExitCode: &code,
		Error:     &Error{Kind: contract.KindTimeout, Limit: "time", Syscall: "execve", Message: "took \"too\" long\n"},
		Artifacts: []Artifact{{Path: "out/a.png", SizeBytes: 99, MimeType: "image/png", SHA256: "00"}, {Path: "b"}},
		Network: []contract.Connection{{Host: "api.example.com", Port: 443, Method: "CONNECT", Allowed: true, Rule: "network.allow[0]",
			Requests: []contract.HTTPRequest{{Method: "GET", Path: "/x?[redacted]", Status: 200}}}},
		StdoutHead: "42\n", StderrHead: "warn <x>", StdoutSHA256: "aa", StderrSHA256: "bb", Redacted: 2,
		ToolCalls:  []ToolCall{{Server: "gh", Tool: "search", ArgsHead: `{"q":"<x>"}`, DurationMs: 5, Outcome: "ok", BytesIn: 1, BytesOut: 2}},
		Session:    &Session{Key: "k", Call: 3, State: "new"},
		Background: "waited",
		Exposure:   &Exposure{ID: "e1", BoxPort: 8080, Remote: "1.2.3.4:5", Outcome: "served", Requests: 1, BytesIn: 2, BytesOut: 3, DurationMs: 4},
	}
}

func TestAppendEntryCases(t *testing.T) {
	zero := 0
	big := math.MaxInt64
	cases := map[string]func(e *Entry){
		"full": func(e *Entry) {},
		"zero": func(e *Entry) { *e = Entry{} },
		"empty slices": func(e *Entry) {
			e.Artifacts, e.Network, e.ToolCalls, e.Args = []Artifact{}, []contract.Connection{}, []ToolCall{}, json.RawMessage{}
		},
		"nil slices":    func(e *Entry) { e.Artifacts, e.Network, e.ToolCalls, e.Args = nil, nil, nil, nil },
		"nil pointers":  func(e *Entry) { e.ExitCode, e.Error, e.Session, e.Exposure = nil, nil, nil, nil },
		"exit 0":        func(e *Entry) { e.ExitCode = &zero },
		"exit max":      func(e *Entry) { e.ExitCode = &big },
		"negatives":     func(e *Entry) { e.Metrics.WallMs, e.Limits.Pids, e.Redacted = -1, math.MinInt64, -7 },
		"client part":   func(e *Entry) { e.Client = Client{Session: "s"} },
		"client last":   func(e *Entry) { e.Client = Client{Principal: "p"} },
		"error bare":    func(e *Entry) { e.Error = &Error{} },
		"session zero":  func(e *Entry) { e.Session = &Session{} },
		"args null":     func(e *Entry) { e.Args = json.RawMessage("null") },
		"args string":   func(e *Entry) { e.Args = json.RawMessage(" \"a\u2028<b>\xff\" ") },
		"args invalid":  func(e *Entry) { e.Args = json.RawMessage("{") },
		"args html out": func(e *Entry) { e.Args = json.RawMessage("<") },
		"zero time":     func(e *Entry) { e.Time = time.Time{} },
		"utc time":      func(e *Entry) { e.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
		"local time":    func(e *Entry) { e.Time = time.Now() },
		"negative zone": func(e *Entry) {
			e.Time = time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -9*3600-30*60))
		},
		"zone seconds": func(e *Entry) { e.Time = time.Date(1900, 1, 1, 0, 0, 0, 1, time.FixedZone("LMT", 561)) },
		"year 10000":   func(e *Entry) { e.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"year -1":      func(e *Entry) { e.Time = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		"zone 24h":     func(e *Entry) { e.Time = time.Date(2000, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)) },
		"NaN":          func(e *Entry) { e.Limits.CPUs = math.NaN() },
		"-Inf":         func(e *Entry) { e.Limits.TimeoutSeconds = math.Inf(-1) },
		"-0":           func(e *Entry) { e.Limits.CPUs = math.Copysign(0, -1) },
		"tiny float":   func(e *Entry) { e.Limits.CPUs = 1e-7 },
		"e-6 edge":     func(e *Entry) { e.Limits.CPUs, e.Limits.TimeoutSeconds = 1e-6, 9.999999e-7 },
		"e21 edge":     func(e *Entry) { e.Limits.CPUs, e.Limits.TimeoutSeconds = 1e21, 999999999999999999999.0 },
		"huge float":   func(e *Entry) { e.Limits.CPUs, e.Limits.TimeoutSeconds = math.MaxFloat64, -1e300 },
		"denormal":     func(e *Entry) { e.Limits.CPUs = math.SmallestNonzeroFloat64 },
		"e-100":        func(e *Entry) { e.Limits.CPUs = -1.5e-100 },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			e := fullEntry()
			f(&e)
			checkEntry(t, &e)
		})
	}
	for _, s := range nastyStrings {
		e := fullEntry()
		setStrings(reflect.ValueOf(&e).Elem(), s)
		checkEntry(t, &e)
	}
}

// setStrings sets every string in v, however deep, to s.
func setStrings(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Pointer:
		if !v.IsNil() {
			setStrings(v.Elem(), s)
		}
	case reflect.Slice:
		for i := range v.Len() {
			setStrings(v.Index(i), s)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return
		}
		for i := range v.NumField() {
			setStrings(v.Field(i), s)
		}
	}
}

// filler sets values at random, reaching every field by reflection, so
// that a field added to Entry or below is filled without being named.
type filler struct {
	r *rand.Rand
	t testing.TB
	// full makes every value non-zero and every pointer and slice set.
	full bool
}

func (f *filler) string() string {
	var b strings.Builder
	for range f.r.IntN(4) + bool2int(f.full) {
		b.WriteString(nastyStrings[f.r.IntN(len(nastyStrings))])
	}
	if f.full && b.Len() == 0 {
		b.WriteString("x")
	}
	return b.String()
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

var argsSamples = []string{
	`{}`, `null`, ` {"code":"print(1)","language":"python"} `, "{\n\t\"a\" : [ 1 , 2.50 , true , null ]\n}",
	`"<&>\u003c"`, "[\"\u2028\u2029\"]", "\"\xff\"", `{"a":{"b":{"c":"d"}}}`, `1e5`, `[`, `{"a" 1}`, `<`,
}

func (f *filler) fill(v reflect.Value) {
	r := f.r
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		zones := []*time.Location{time.UTC, time.Local, time.FixedZone("A", 3600), time.FixedZone("B", -(4*3600 + 30*60)), time.FixedZone("C", 17), time.FixedZone("D", 99*3600)}
		var sec int64
		switch r.IntN(8) {
		case 0:
			if !f.full {
				return // the zero time
			}
			sec = 1
		case 1:
			sec = r.Int64N(1<<40) - 1<<39 // some outside years 0 to 9999
		default:
			sec = 1_700_000_000 + r.Int64N(1<<28)
		}
		ns := int64(0)
		if r.IntN(4) > 0 {
			ns = r.Int64N(1e9)
		}
		v.Set(reflect.ValueOf(time.Unix(sec, ns).In(zones[r.IntN(len(zones))])))
		return
	case reflect.TypeFor[json.RawMessage]():
		if !f.full && r.IntN(3) == 0 {
			return
		}
		v.SetBytes([]byte(argsSamples[r.IntN(len(argsSamples))]))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.string())
	case reflect.Bool:
		v.SetBool(f.full || r.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		ints := []int64{1, -1, 42, 1 << 40, math.MaxInt64, math.MinInt64, int64(r.Uint64())}
		if !f.full {
			ints = append(ints, 0, 0)
		}
		v.SetInt(ints[r.IntN(len(ints))])
	case reflect.Float64:
		floats := []float64{1, -2.5, 0.1, 1e-7, 1e21, 1e20, 123456789.125, math.Pi, math.SmallestNonzeroFloat64, math.MaxFloat64, r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))}
		if !f.full {
			floats = append(floats, 0, 0, math.Copysign(0, -1))
			if r.IntN(50) == 0 {
				floats = []float64{math.NaN(), math.Inf(1)}
			}
		}
		v.SetFloat(floats[r.IntN(len(floats))])
	case reflect.Pointer:
		if !f.full && r.IntN(2) == 0 {
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		n := 1 + r.IntN(3)
		if !f.full {
			switch r.IntN(3) {
			case 0:
				return // nil
			case 1:
				n = 0
			}
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			f.fill(v.Field(i))
		}
	default:
		f.t.Fatalf("filler: teach it %s", v.Type())
	}
}

func TestAppendEntryRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 11))
	n := 5000
	if testing.Short() {
		n = 500
	}
	for range n {
		var e Entry
		(&filler{r: r, t: t}).fill(reflect.ValueOf(&e).Elem())
		checkEntry(t, &e)
	}
}

// TestEntryFieldsAreEncoded fails when Entry, or a struct appendEntry
// writes by hand, gains a field appendEntry does not write: with every
// value set, the field shows in json.Marshal's line and not in its.
func TestEntryFieldsAreEncoded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var e Entry
		(&filler{r: r, t: t, full: true}).fill(reflect.ValueOf(&e).Elem())
		if e.Time.Year() < 0 || e.Time.Year() > 9999 || e.Time.Location().String() == "D" || !json.Valid(e.Args) {
			continue // json.Marshal fails on those: nothing to compare
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEntry(nil, &e)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("a field appendEntry does not write? %v %s", err, diff(got, want))
		}
	}
	// The structs appendEntry writes by hand, field by field; a new field
	// must be added there and counted here.
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[Entry]():            25,
		reflect.TypeFor[Client]():           4,
		reflect.TypeFor[Limits]():           5,
		reflect.TypeFor[contract.Metrics](): 7,
		reflect.TypeFor[Error]():            4,
		reflect.TypeFor[Artifact]():         4,
		reflect.TypeFor[Session]():          3,
	} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, appendEntry writes %d: teach it the new ones", typ, typ.NumField(), n)
		}
		for i := range typ.NumField() {
			ft := typ.Field(i).Type
			if ft == reflect.TypeFor[time.Time]() || ft == reflect.TypeFor[json.RawMessage]() {
				continue
			}
			p := reflect.New(ft).Interface()
			_, j := p.(json.Marshaler)
			_, txt := p.(encoding.TextMarshaler)
			if j || txt {
				t.Errorf("%s.%s marshals itself: appendEntry must call it", typ, typ.Field(i).Name)
			}
		}
	}
}

// FuzzAppendEntry puts the fuzzed string in every string of an entry, and
// as its Args.
func FuzzAppendEntry(f *testing.F) {
	for _, s := range nastyStrings {
		f.Add(s)
	}
	for _, s := range argsSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := fullEntry()
		setStrings(reflect.ValueOf(&e).Elem(), s)
		e.Args = json.RawMessage(s)
		checkEntry(t, &e)
		var zero Entry
		zero.StdoutHead = s
		checkEntry(t, &zero)
	})
}

// sessionCellEntry is the line of a plain call in a session, as
// runs.AuditEntry builds it.
func sessionCellEntry() Entry {
	code := 0
	return Entry{
		RunID: "r-2b7f0c1e9a4d", Time: time.Now().UTC(), Client: Client{Name: "claude-code", Version: "2.0.14", Principal: "local"},
		Transport: "stdio", Language: "python", CodeSHA256: strings.Repeat("9f86d081", 8),
		Image: "python:3.13-slim", Isolation: "runc",
		Limits:  Limits{TimeoutSeconds: 30, MemoryBytes: 512 << 20, CPUs: 1, Pids: 256, OutputBytes: 1 << 20},
		Metrics: contract.Metrics{WallMs: 41, CPUMs: 12, PeakMemoryBytes: 31 << 20, StartupMs: 3, Pooled: true},
		Status:  contract.StatusOK, ExitCode: &code, Artifacts: []Artifact{},
		StdoutHead: "   a  b\n0  1  4\n1  2  5\n2  3  6\n", StdoutSHA256: strings.Repeat("4b227777", 8), StderrSHA256: strings.Repeat("e3b0c442", 8),
		Session: &Session{Key: strings.Repeat("c0ffee00", 8), Call: 7, State: "warm"},
	}
}

func BenchmarkRecordLine(b *testing.B) {
	e := sessionCellEntry()
	b.Run("appendEntry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalEntry(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
