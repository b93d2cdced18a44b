package initproto

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkEncodes fails t unless appendBody writes for body exactly what
// json.Marshal writes; fast says whether the fast path must take it.
func checkEncodes(t *testing.T, body any, fast bool) {
	t.Helper()
	want, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := appendBody([]byte("prefix"), body)
	if ok != fast {
		t.Fatalf("appendBody took %#v: %v, want %v", body, ok, fast)
	}
	if !ok {
		if string(got) != "prefix" {
			t.Fatalf("appendBody declined %#v but wrote %q", body, got)
		}
		return
	}
	if !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("appendBody wrote\n%s\njson.Marshal\n%s", got[len("prefix"):], want)
	}
}

// realJob is a session cell's job as the server sends it.
func realJob() *Job {
	return &Job{Argv: []string{"python3", "/workspace/main.py"}, Dir: "/workspace", CodePath: "/workspace/main.py",
		TimeoutMs: 30000, Call: 18362341736707102783, RunID: "r_01M8KM3WJXA4R61X1Y2QA6D1XP", KeepMs: 600000,
		MaxOutputBytes: 262144, MaxArtifacts: 64, MaxArtifactBytes: 33554432, Code: []byte("print(1)")}
}

// realReport is a session box's report on a cell.
func realReport() *Report {
	return &Report{StdoutBytes: 2, EndedUnixMs: 1795954963040, PeakMemoryBytes: 14442496,
		Session: &SessionState{Calls: 2399}, Stdout: []byte("1\n"), Stderr: []byte{}}
}

func TestAppendBodyEdgeCases(t *testing.T) {
	odd := "a\"b\\c\x00\x01\x1f\x7f\b\f\n\r\t<>&\u2028\u2029\xff\xc3(é€😀\ufffd/'"
	full := &Job{Argv: []string{}, Check: []string{"bash", "-n"}, Dir: odd, CodePath: "", Env: []string{"A=1", odd},
		TimeoutMs: math.MaxInt64, CPUSeconds: math.MinInt64, NProc: -1, Streams: []string{"tool", "proxy"},
		Proxy: ProxyAddr, CA: []byte("-----BEGIN CERTIFICATE-----\n\x00\xff"), Call: math.MaxUint64, RunID: odd,
		KeepMs: 1, MaxOutputBytes: math.MaxInt, MaxArtifacts: math.MinInt, MaxArtifactBytes: -7, Trace: true}
	fullReport := &Report{InitError: odd, StartError: "no such file", CheckFailed: true, ExitCode: -1, Signal: 9,
		TimedOut: true, StdoutBytes: math.MaxInt64, StderrBytes: 1, StdoutTruncated: true, StderrTruncated: true,
		WallMs: 1, EndedUnixMs: -1, CPUMs: 2, PeakMemoryBytes: 3, OOMKills: -1, PidsLimitHit: true, DiskFull: "/tmp",
		ArtifactsOmitted: 4, DisplaysOmitted: 5, Session: &SessionState{Lost: odd, Interrupted: true}}
	for _, tc := range []struct {
		name string
		body any
		fast bool
	}{
		{"a real job", Header{Kind: StreamCells, Job: realJob()}, true},
		{"a real job by pointer", &Header{Kind: StreamCells, Job: realJob()}, true},
		{"a zero job", Header{Kind: StreamJob, Job: &Job{}}, true},
		{"every job field", Header{Kind: odd, Job: full, Index: -3, Call: 1, Run: odd}, true},
		{"a header alone", Header{Kind: StreamInterrupt}, true},
		{"an artifact header", &Header{Kind: StreamArtifact, Index: 2}, true},
		{"a collect header", Header{Kind: StreamCollect, Run: "r_1", Call: 5}, true},
		{"a zero header", Header{}, true},
		{"a real report", realReport(), true},
		{"a zero report", &Report{}, true},
		{"every report field", fullReport, true},
		{"an empty session", &Report{Session: &SessionState{}}, true},
		{"empty slices", &Header{Job: &Job{Check: []string{}, Streams: []string{}, CA: []byte{}, Files: []File{}, StreamBudgets: map[string]int64{}}}, true},
		{"a header's data", Header{Kind: StreamTool, Data: json.RawMessage(`{"a": 1}`)}, false},
		{"files", Header{Job: &Job{Files: []File{{Path: "a"}, {Path: odd, Data: []byte("x")}}}}, true},
		{"budgets", Header{Job: &Job{StreamBudgets: map[string]int64{"tool": 1, "proxy": -1, odd: 0, "": math.MaxInt64}}}, true},
		{"artifacts", &Report{Artifacts: []Artifact{{Path: "a"}, {Path: odd, Size: -1, SHA256: "ab", Sent: true, Display: true}}}, true},
		{"displays", &Report{Displays: []Display{{}}}, false},
		{"a trace", &Report{Trace: []Mark{{Stage: "s"}}}, false},
		{"a nil report", (*Report)(nil), false},
		{"a nil header", (*Header)(nil), false},
		{"a report by value", Report{}, false},
		{"another type", map[string]int{"a": 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) { checkEncodes(t, tc.body, tc.fast) })
	}
}

// randString makes a string from pieces encoding/json treats each its own
// way, or from random bytes.
func randString(r *rand.Rand) string {
	if r.IntN(8) == 0 {
		return ""
	}
	pieces := []string{"a", "Z", "/", " ", "\"", "\\", "<", ">", "&", "\u2028", "\u2029", "\x00", "\x1f", "\x7f",
		"\n", "\t", "\b", "\f", "\r", "é", "€", "😀", "\ufffd", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "\\u0041", "null"}
	var b strings.Builder
	for n := r.IntN(12); n > 0; n-- {
		if r.IntN(4) == 0 {
			b.WriteByte(byte(r.Uint32()))
		} else {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
	}
	return b.String()
}

// randStrings makes a nil, empty or filled slice.
func randStrings(r *rand.Rand) []string {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	ss := make([]string, 1+r.IntN(4))
	for i := range ss {
		ss[i] = randString(r)
	}
	return ss
}

// randInt is 0, an extreme, or a random value of any size and sign.
func randInt(r *rand.Rand) int64 {
	switch r.IntN(5) {
	case 0:
		return 0
	case 1:
		return []int64{math.MaxInt64, math.MinInt64, -1, 1, math.MaxInt32, math.MinInt32}[r.IntN(6)]
	case 2:
		return int64(r.IntN(1000))
	}
	return int64(r.Uint64()) >> r.IntN(64)
}

// randJob makes a job the fast path takes.
func randJob(r *rand.Rand) *Job {
	j := &Job{Argv: randStrings(r), Check: randStrings(r), Dir: randString(r), CodePath: randString(r), Env: randStrings(r),
		TimeoutMs: randInt(r), CPUSeconds: randInt(r), NProc: randInt(r), Streams: randStrings(r), Proxy: randString(r),
		RunID: randString(r), KeepMs: randInt(r), MaxOutputBytes: int(randInt(r)), MaxArtifacts: int(randInt(r)),
		MaxArtifactBytes: randInt(r), Trace: r.IntN(2) == 0}
	if r.IntN(3) == 0 {
		j.CA = []byte(randString(r))
	}
	if r.IntN(3) == 0 {
		j.Files = make([]File, r.IntN(3))
		for i := range j.Files {
			j.Files[i].Path = randString(r)
		}
	}
	if r.IntN(3) == 0 {
		j.StreamBudgets = map[string]int64{}
		for n := r.IntN(4); n > 0; n-- {
			j.StreamBudgets[randString(r)] = randInt(r)
		}
	}
	if r.IntN(2) == 0 {
		j.Call = r.Uint64() >> r.IntN(64)
	}
	return j
}

// randReport makes a report the fast path takes.
func randReport(r *rand.Rand) *Report {
	rep := &Report{InitError: randString(r), StartError: randString(r), CheckFailed: r.IntN(2) == 0,
		ExitCode: int(randInt(r)), Signal: int(randInt(r)), TimedOut: r.IntN(2) == 0, StdoutBytes: randInt(r),
		StderrBytes: randInt(r), StdoutTruncated: r.IntN(2) == 0, StderrTruncated: r.IntN(2) == 0, WallMs: randInt(r),
		EndedUnixMs: randInt(r), CPUMs: randInt(r), PeakMemoryBytes: randInt(r), OOMKills: randInt(r),
		PidsLimitHit: r.IntN(2) == 0, DiskFull: randString(r), ArtifactsOmitted: int(randInt(r)),
		DisplaysOmitted: int(randInt(r))}
	if r.IntN(3) == 0 {
		rep.Artifacts = make([]Artifact, r.IntN(3))
		for i := range rep.Artifacts {
			rep.Artifacts[i] = Artifact{Path: randString(r), Size: randInt(r), SHA256: randString(r),
				Sent: r.IntN(2) == 0, Display: r.IntN(2) == 0}
		}
	}
	if r.IntN(2) == 0 {
		rep.Session = &SessionState{Calls: int(randInt(r)), Lost: randString(r), Interrupted: r.IntN(2) == 0}
	}
	return rep
}

// randHeader makes a header the fast path takes, with a job or not.
func randHeader(r *rand.Rand) Header {
	h := Header{Kind: randString(r), Index: int(randInt(r)), Run: randString(r)}
	if r.IntN(2) == 0 {
		h.Call = r.Uint64() >> r.IntN(64)
	}
	if r.IntN(4) != 0 {
		h.Job = randJob(r)
	}
	return h
}

func TestAppendBodyMatchesJSONRandomly(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		h := randHeader(r)
		checkEncodes(t, h, true)
		checkEncodes(t, &h, true)
		checkEncodes(t, randReport(r), true)
	}
}

// SendCell encodes its header itself: its message must be the one
// encoding/json makes of the same header.
func TestSendCellWritesWhatJSONWould(t *testing.T) {
	withFiles := realJob()
	withFiles.Files = []File{{Path: "a.csv", Data: []byte("1,2")}, {Path: "<b>", Data: nil}}
	withFiles.StreamBudgets = map[string]int64{"tool": 1 << 20}
	for _, job := range []*Job{realJob(), withFiles, {}} {
		var got, want bytes.Buffer
		if err := SendCell(&got, job); err != nil {
			t.Fatal(err)
		}
		blobs := [][]byte{job.Code, job.Stdin}
		for _, f := range job.Files {
			blobs = append(blobs, f.Data)
		}
		if err := Send(&want, headerJSON{Header{Kind: StreamCells, Job: job}}, blobs...); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("SendCell wrote\n%q\nencoding/json\n%q", got.Bytes(), want.Bytes())
		}
	}
}
