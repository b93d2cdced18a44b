package initproto

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"unicode/utf8"
)

// realLines are a session cell's job and report as they crossed a
// channel, and some other lines Send writes.
var realLines = []string{
	`{"blobs":[8,0],"body":{"kind":"cells","job":{"argv":["python3","/workspace/main.py"],"dir":"/workspace","code_path":"/workspace/main.py","env":null,"timeout_ms":30000,"call":18362341736707102783,"run_id":"r_01M8KM3WJXA4R61X1Y2QA6D1XP","keep_ms":600000,"max_output_bytes":262144,"max_artifacts":64,"max_artifact_bytes":33554432}}}`,
	`{"blobs":[2,0],"body":{"exit_code":0,"stdout_bytes":2,"stderr_bytes":0,"wall_ms":0,"ended_unix_ms":1795954963040,"cpu_ms":0,"peak_memory_bytes":14442496,"oom_kills":0,"session":{"calls":2399}}}`,
	`{"body":{"kind":"interrupt"}}`,
	`{"blobs":[3],"body":{"kind":"artifact","index":2}}`,
	`{"body":{"kind":"collect","call":7,"run":"r_1"}}`,
	`{"blobs":[0,0],"body":{"init_error":"bad \"job\" \u003c\u2028\ufffd\\ \n\t\u0000","exit_code":-1,"stdout_bytes":0,"stderr_bytes":0,"wall_ms":0,"cpu_ms":0,"peak_memory_bytes":0,"oom_kills":-1,"disk_full":"/tmp","artifacts":[{"path":"out.png","size":9,"sha256":"ab","sent":true},{"path":"0/image/png","size":0,"sha256":"","sent":false,"display":true}],"session":{"calls":1,"lost":"é€😀","interrupted":true}}}`,
	`{"blobs":[0,0,1],"body":{"kind":"job","job":{"argv":[],"check":["bash","-n"],"dir":"","code_path":"","files":[{"path":"a\u003c"}],"env":["A=1"],"timeout_ms":1,"cpu_seconds":2,"nproc":-3,"streams":["tool"],"stream_budgets":{"proxy":-1,"tool":65536},"proxy":"127.0.0.1:3128","ca":"LS0tLQo=","call":1,"run_id":"r","keep_ms":9,"max_output_bytes":1,"max_artifacts":2,"max_artifact_bytes":3,"trace":true}}}`,
}

// checkDecodes fails t unless decodeFast, given line, either declines and
// leaves its targets zero, or decodes what json.Unmarshal decodes. It
// returns whether decodeFast took the line as a report or as a header.
func checkDecodes(t *testing.T, line []byte) (tookReport, tookHeader bool) {
	t.Helper()
	for _, fresh := range []func() any{func() any { return new(Report) }, func() any { return new(Header) }} {
		fast := fresh()
		blobs, ok := decodeFast(line, fast)
		if !ok {
			if !reflect.ValueOf(fast).Elem().IsZero() {
				t.Fatalf("decodeFast declined %q but left %+v", line, fast)
			}
			continue
		}
		env := envelope{Body: fresh()}
		if err := json.Unmarshal(line, &env); err != nil {
			t.Fatalf("decodeFast took %q, which json.Unmarshal refuses: %v", line, err)
		}
		if !reflect.DeepEqual(blobs, env.Blobs) || !reflect.DeepEqual(fast, env.Body) {
			t.Fatalf("%q:\ndecodeFast %v %#v\njson       %v %#v", line, blobs, fast, env.Blobs, env.Body)
		}
		if _, isReport := fast.(*Report); isReport {
			tookReport = true
		} else {
			tookHeader = true
		}
	}
	return tookReport, tookHeader
}

func TestDecodeFastTakesWhatSendWrites(t *testing.T) {
	for _, l := range realLines {
		if r, h := checkDecodes(t, []byte(l+"\n")); !r && !h {
			t.Errorf("declined %s", l)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		h := randHeader(r)
		for _, tc := range []struct {
			body   any
			report bool
		}{{h, false}, {&h, false}, {randReport(r), true}} {
			var buf bytes.Buffer
			if err := Send(&buf, tc.body, []byte("code\n"), nil); err != nil {
				t.Fatal(err)
			}
			line, _ := buf.ReadBytes('\n')
			tookReport, tookHeader := checkDecodes(t, line)
			if !tc.report && h.Job != nil && invalidKeys(h.Job.StreamBudgets) {
				// Keys that json.Marshal sorts before writing U+FFFD
				// for their invalid bytes may come out of order or
				// twice: encoding/json decodes those.
				continue
			}
			if tookReport != tc.report || tookHeader != !tc.report {
				t.Fatalf("%s: taken as a report %v, as a header %v", line, tookReport, tookHeader)
			}
		}
	}
}

// invalidKeys reports whether a key of m is not valid UTF-8.
func invalidKeys(m map[string]int64) bool {
	for k := range m {
		if !utf8.ValidString(k) {
			return true
		}
	}
	return false
}

// Anything but the form Send writes goes to encoding/json, whose outcome
// decides; a target that is not zero goes there too.
func TestDecodeFastDeclines(t *testing.T) {
	for _, l := range []string{
		`{"body":{"exit_code":1,"exit_code":2}}`,
		`{"body":{"stdout_bytes":1,"exit_code":2}}`,
		`{"body":{"Exit_code":1}}`,
		`{"body":{"exit_code":1} }`,
		`{"body":{"exit_code":1}}` + "\n\n",
		`{"body":{"exit_code":1}}x`,
		`{"body":{"exit_code":1.0}}`,
		`{"body":{"exit_code":1e2}}`,
		`{"body":{"exit_code":-0}}`,
		`{"body":{"exit_code":01}}`,
		`{"body":{"exit_code":9223372036854775808}}`,
		`{"body":{"disk_full":"\ud83d\ude00"}}`,
		`{"body":{"disk_full":"\x"}}`,
		"{\"body\":{\"disk_full\":\"\xff\"}}",
		"{\"body\":{\"disk_full\":\"\t\"}}",
		`{"body":{"displays":[]}}`,
		`{"body":{"trace":null}}`,
		`{"body":{"artifacts":[{"path":"a","path":"b"}]}}`,
		`{"body":{"artifacts":[{"size":1,"path":"b"}]}}`,
		`{"body":{"artifacts":[1]}}`,
		`{"body":{"artifacts":[{}],}}`,
		`{"body":{"job":{"stream_budgets":{"a":1,}}}}`,
		`{"body":{"job":{"stream_budgets":{"b":1,"a":2}}}}`,
		`{"body":{"job":{"stream_budgets":{"a":1,"a":2}}}}`,
		`{"body":{"job":{"stream_budgets":{"a":"1"}}}}`,
		`{"body":{"exit_code":null}}`,
		`{"body":null}`,
		`{"blobs":[-1],"body":{}}`,
		`{"blobs":[],"body":{}}`,
		`{"body":{},"blobs":[1]}`,
		`{"body":{"kind":"tool","data":{}}}`,
		`{"body":{"job":{"files":[{"path":1}]}}}`,
		`{"body":{"job":{"files":[{"Path":"a"}]}}}`,
		`{"body":{"job":{"ca":"!!"}}}`,
	} {
		for _, target := range []any{new(Report), new(Header)} {
			if _, ok := decodeFast([]byte(l+"\n"), target); ok {
				t.Errorf("took %s as %T", l, target)
			}
		}
	}
	line := []byte(realLines[1] + "\n")
	if _, ok := decodeFast(line[:len(line)-1], new(Report)); ok {
		t.Error("took a line without its newline")
	}
	if _, ok := decodeFast(line, &Report{Signal: 1}); ok {
		t.Error("took a report into one that is not zero")
	}
	if _, ok := decodeFast(line, (*Report)(nil)); ok {
		t.Error("took a report into nil")
	}
	if _, ok := decodeFast([]byte(realLines[0]+"\n"), &Header{Index: 1}); ok {
		t.Error("took a header into one that is not zero")
	}
}

// FuzzReceiveMatchesJSON: on any line, decodeFast decodes what
// json.Unmarshal decodes or declines, and never panics (a box runs hostile
// code and writes the reports the server reads).
func FuzzReceiveMatchesJSON(f *testing.F) {
	for _, l := range realLines {
		f.Add([]byte(l + "\n"))
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecodes(t, line)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			// What ReceiveWith hands it: up to and with the first newline.
			checkDecodes(t, line[:i+1])
		} else {
			checkDecodes(t, append(line, '\n'))
		}
	})
}

// Every prefix of a real line, and every line with one byte changed to
// one that matters to JSON, decodes as encoding/json decodes it or is
// declined, without a panic: what the fuzzer checks at random, here in
// every plain test run.
func TestDecodeFastOnDamagedLines(t *testing.T) {
	for _, l := range realLines {
		line := []byte(l + "\n")
		for i := range line {
			checkDecodes(t, line[:i])
			for _, c := range []byte("\n\"\\{}[]:,0-9eu \x00\xff") {
				damaged := bytes.Clone(line)
				damaged[i] = c
				checkDecodes(t, damaged)
			}
		}
	}
}
