package contract

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func lines(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(prefix)
		b.WriteString(strings.Repeat("x", 60))
		b.WriteString(" ")
		b.WriteString(string(rune('0' + i%10)))
		b.WriteString("\n")
	}
	return b.String()
}

func TestForModel(t *testing.T) {
	long := "HEAD-MARK\n" + lines("o", 1000) + "TAIL-MARK\n" // ~64k characters
	errs := "Traceback (most recent call last):\n" + lines("e", 300) + "ZeroDivisionError: division by zero\n"
	cases := []struct {
		name           string
		stdout, stderr string
		budget         int
		cutOut, cutErr bool
	}{
		{"both fit", "hello\n", "warn\n", 1000, false, false},
		{"stdout alone cut", long, "", 12000, true, false},
		{"stderr keeps its share", long, errs, 12000, true, true},
		{"short stderr whole beside long stdout", long, "ZeroDivisionError: x\n", 12000, true, false},
		{"unicode", strings.Repeat("é漢🙂", 20000), "", 3000, true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Result{RunID: "r_1", Stdout: c.stdout, Stderr: c.stderr, StdoutBytes: int64(len(c.stdout)), StderrBytes: int64(len(c.stderr))}
			got := ForModel(res, c.budget)
			if (got.StdoutCut != nil) != c.cutOut || (got.StderrCut != nil) != c.cutErr {
				t.Fatalf("cuts: stdout %+v stderr %+v", got.StdoutCut, got.StderrCut)
			}
			if got.StdoutTruncated != c.cutOut || got.StderrTruncated != c.cutErr {
				t.Fatalf("truncated flags %v %v", got.StdoutTruncated, got.StderrTruncated)
			}
			shown := 0
			for _, cut := range []*Cut{got.StdoutCut, got.StderrCut} {
				if cut != nil {
					shown += cut.Shown
				}
			}
			if !c.cutOut {
				shown += utf8.RuneCountInString(got.Stdout)
			}
			if !c.cutErr {
				shown += utf8.RuneCountInString(got.Stderr)
			}
			if shown > c.budget {
				t.Fatalf("shows %d characters, budget %d", shown, c.budget)
			}
			if !utf8.ValidString(got.Stdout) || !utf8.ValidString(got.Stderr) {
				t.Fatal("a cut split a character")
			}
			if res.Stdout != c.stdout {
				t.Fatal("the result given was changed")
			}
			if c.cutOut {
				if got.StdoutCut.URI != "runbox://runs/r_1/stdout" || !strings.Contains(got.Stdout, "all of it: runbox://runs/r_1/stdout") {
					t.Fatalf("the cut does not name the resource: %+v", got.StdoutCut)
				}
				if strings.HasPrefix(c.stdout, "HEAD-MARK") && (!strings.HasPrefix(got.Stdout, "HEAD-MARK") || !strings.HasSuffix(got.Stdout, "TAIL-MARK\n")) {
					t.Fatal("head or tail lost")
				}
			}
			if c.cutErr && !strings.HasSuffix(got.Stderr, "ZeroDivisionError: division by zero\n") {
				t.Fatal("the traceback's last line is lost")
			}
			if strings.Contains(c.name, "stderr") && !strings.HasSuffix(got.Stderr, "\n") {
				t.Fatal("stderr cut")
			}
		})
	}
}

// TestForModelKeptCut: a stream that the box cut at max_output_bytes but
// that fits the answer says so, with nothing more to read.
func TestForModelKeptCut(t *testing.T) {
	res := Result{RunID: "r", Stdout: "head\n…[runbox: 10 bytes truncated]…\ntail\n", StdoutTruncated: true, StdoutBytes: 1 << 20}
	got := ForModel(res, 12000)
	if got.StdoutCut == nil || got.StdoutCut.URI != "" || got.StdoutCut.Bytes != 1<<20 || !got.StdoutTruncated {
		t.Fatalf("%+v", got.StdoutCut)
	}
}

// TestResultFieldOrder: what an agent acts on comes before the streams, so
// a client's head-only cut or preview keeps it.
func TestResultFieldOrder(t *testing.T) {
	code := 1
	res := ForModel(Result{RunID: "r", Status: StatusError, ExitCode: &code, Error: &ErrorInfo{Kind: KindRuntime, Hint: "h"},
		Session: &SessionRef{ID: "s", State: SessionAlive}, Artifacts: []Artifact{{Path: "a.png"}}, Stdout: lines("o", 400), Stderr: "boom"}, 1000)
	b, _ := json.Marshal(res)
	s := string(b)
	stdout := strings.Index(s, `"stdout":`)
	for _, key := range []string{`"status"`, `"exit_code"`, `"error"`, `"hint"`, `"session"`, `"stdout_truncated"`, `"stdout_cut"`, `"artifacts"`, `"metrics"`} {
		if i := strings.Index(s, key); i < 0 || i > stdout {
			t.Errorf("%s is not before stdout in %s", key, s[:min(len(s), 300)])
		}
	}
}

func TestSummaryCarriesTheFacts(t *testing.T) {
	code := 1
	res := ForModel(Result{RunID: "r_9", Language: "python", Status: StatusError, ExitCode: &code,
		Error:     &ErrorInfo{Kind: KindSyntax, Type: "SyntaxError", Message: "invalid syntax", Line: 3, Hint: "Fix line 3."},
		Session:   &SessionRef{ID: "s_1", Call: 2, State: SessionAlive},
		Artifacts: []Artifact{{Path: "plot.png", MimeType: "image/png", SizeBytes: 10, URI: ArtifactURI("r_9", "plot.png")}},
		Network:   []Connection{{Method: "CONNECT", Host: "evil.example", Port: 443, Reason: "not declared"}},
		Stdout:    "HEAD\n" + lines("o", 400) + "TAIL\n", Stderr: "boom\n"}, 2000)
	s := Summary(res)
	for _, want := range []string{"error · python · exit 1", "error: syntax SyntaxError at line 3: invalid syntax", "hint: Fix line 3.",
		"session s_1 · call 2 · alive", "plot.png (image/png, 10 bytes) runbox://runs/r_9/files/plot.png", "CONNECT evil.example:443 refused: not declared",
		"--- stdout (cut: ", "all of it: runbox://runs/r_9/stdout", "HEAD\n", "TAIL\n", "--- stderr ---\nboom"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "artifacts:") > strings.Index(s, "--- stdout") {
		t.Error("artifacts after the streams")
	}
}

func TestStreamURI(t *testing.T) {
	if id, st, ok := ParseStreamURI(StreamURI("r_1", StreamStderr)); !ok || id != "r_1" || st != StreamStderr {
		t.Fatal(id, st, ok)
	}
	for _, bad := range []string{"runbox://runs/r_1/files/stdout", "runbox://runs/r_1/other", "runbox://runs//stdout", "file:///stdout"} {
		if _, _, ok := ParseStreamURI(bad); ok {
			t.Errorf("%s parsed", bad)
		}
	}
}

// TestSummaryOfACell is the whole text of a session cell's answer and of a
// one-off run's, as clients have read it.
func TestSummaryOfACell(t *testing.T) {
	zero, two := 0, 2
	at := time.Date(2026, 11, 29, 12, 28, 28, 76247258, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		res  Result
		want string
	}{
		{Result{RunID: "r_01", Language: "python", Status: StatusOK, ExitCode: &zero, Metrics: Metrics{WallMs: 19},
			Session: &SessionRef{ID: "s_6v", Call: 1, State: SessionAlive, ExpiresAt: at}, Stdout: "1\n"},
			"ok · python · exit 0 · 19 ms · run r_01\nsession s_6v · call 1 · alive · expires 2026-11-29T11:28:28Z\n--- stdout ---\n1"},
		{Result{RunID: "r_02", Language: "bash", Status: StatusError, ExitCode: &two, Metrics: Metrics{WallMs: -3},
			Session: &SessionRef{ID: "s_7", Call: 12, State: SessionLost, LostReason: "its box is gone"}, Stdout: "a", Stderr: "b\n"},
			"error · bash · exit 2 · -3 ms · run r_02\nsession s_7 · call 12 · lost (its box is gone)\n--- stdout ---\na\n--- stderr ---\nb"},
		{Result{RunID: "r_03", Status: StatusOK}, "ok · 0 ms · run r_03"},
	} {
		if got := Summary(tc.res); got != tc.want {
			t.Errorf("got\n%q\nwant\n%q", got, tc.want)
		}
	}
}
