package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
)

// fzMuxHeader is the engine's attach-stream header: the stream (1 stdout,
// 2 stderr), three zero bytes and the payload's length, big-endian.
func fzMuxHeader(stream byte, n int) []byte {
	h := make([]byte, 8)
	h[0] = stream
	binary.BigEndian.PutUint32(h[4:], uint32(n))
	return h
}

// fzMux multiplexes stdout and stderr as the engine does for an attached
// box, in frames of at most chunk bytes (all at once when chunk is 0),
// interleaving the two streams. No stream is cut in more than 16 frames:
// each costs a pipe round trip, and the fuzzer needs fast inputs.
func fzMux(stdout, stderr []byte, chunk int) []byte {
	if chunk <= 0 {
		chunk = max(len(stdout), len(stderr), 1)
	}
	chunk = max(chunk, (len(stdout)+15)/16, (len(stderr)+15)/16)
	var b bytes.Buffer
	for len(stdout) > 0 || len(stderr) > 0 {
		if n := min(chunk, len(stdout)); n > 0 {
			b.Write(fzMuxHeader(1, n))
			b.Write(stdout[:n])
			stdout = stdout[n:]
		}
		if n := min(chunk, len(stderr)); n > 0 {
			b.Write(fzMuxHeader(2, n))
			b.Write(stderr[:n])
			stderr = stderr[n:]
		}
	}
	return b.Bytes()
}

// fzClampMux rewrites the length of every attach-stream header to at most
// 64 KiB. stdcopy allocates what a header claims before reading it; the
// engine, not the box, writes those headers, so absurd lengths are not
// part of what a box can send.
func fzClampMux(raw []byte) []byte {
	raw = bytes.Clone(raw)
	for pos := 0; pos+8 <= len(raw); {
		n := binary.BigEndian.Uint32(raw[pos+4:])
		if n > 0xffff {
			n &= 0xffff
			binary.BigEndian.PutUint32(raw[pos+4:], n)
		}
		pos += 8 + int(n)
	}
	return raw
}

// fzDemux is a reference demultiplexer with stdcopy's rules: stdin and
// stdout frames go to stdout, stderr frames to stderr, a partial frame at
// the end is dropped, an unknown stream ends the stream with an error at
// its header and the engine's error stream (3) once its frame is whole.
func fzDemux(raw []byte) (stdout, stderr []byte, failed bool) {
	for len(raw) >= 8 {
		n := int(binary.BigEndian.Uint32(raw[4:]))
		typ := raw[0]
		if typ > 3 {
			return stdout, stderr, true
		}
		if len(raw)-8 < n {
			break
		}
		if typ == 3 {
			return stdout, stderr, true
		}
		if typ == 2 {
			stderr = append(stderr, raw[8:8+n]...)
		} else {
			stdout = append(stdout, raw[8:8+n]...)
		}
		raw = raw[8+n:]
	}
	return stdout, stderr, false
}

// fzExpect is a reference reading of runbox-init's stdout, independent of
// initproto.Reader and readFrames: a report frame first, then one artifact
// frame per artifact the report says was sent, all within max bytes.
// Whatever follows is not read.
func fzExpect(s []byte, max int64) (*initproto.Report, [][]byte) {
	pos := 0
	next := func() (byte, []byte, bool) {
		if len(s)-pos < 5 {
			return 0, nil, false
		}
		n := int64(binary.BigEndian.Uint32(s[pos+1:]))
		if n > initproto.MaxFrame || int64(len(s)-pos-5) < n {
			return 0, nil, false
		}
		typ, payload := s[pos], s[pos+5:pos+5+int(n)]
		pos += 5 + int(n)
		return typ, payload, true
	}
	typ, payload, ok := next()
	if !ok || typ != initproto.FrameReport {
		return nil, nil
	}
	var rep initproto.Report
	if json.Unmarshal(payload, &rep) != nil {
		return nil, nil
	}
	var contents [][]byte
	for _, a := range rep.Artifacts {
		if !a.Sent {
			continue
		}
		typ, payload, ok := next()
		if !ok || typ != initproto.FrameArtifact {
			return nil, nil
		}
		contents = append(contents, payload)
	}
	if int64(pos) > max {
		return nil, nil
	}
	return &rep, contents
}

// fzEncode writes a report and the contents of its sent artifacts as
// runbox-init does, with the package's own encoder.
func fzEncode(tb testing.TB, rep initproto.Report, contents [][]byte) []byte {
	var b bytes.Buffer
	payload, err := json.Marshal(rep)
	if err != nil {
		tb.Fatal(err)
	}
	if err := initproto.WriteFrame(&b, initproto.FrameReport, payload); err != nil {
		tb.Fatal(err)
	}
	for _, c := range contents {
		if err := initproto.WriteFrame(&b, initproto.FrameArtifact, c); err != nil {
			tb.Fatal(err)
		}
	}
	return b.Bytes()
}

// fzReport makes a report of stdout and stderr whose artifacts cut data
// into n pieces, every other one sent.
func fzReport(data, stderr []byte, n int) (initproto.Report, [][]byte) {
	rep := initproto.Report{
		ExitCode: len(data) % 256, Signal: len(stderr) % 32, TimedOut: n == 3,
		Stdout: data, Stderr: stderr, StdoutBytes: int64(len(data)), StderrBytes: int64(len(stderr)),
		WallMs: 12, OOMKills: -1,
		DiskFull: strings.ToValidUTF8(string(stderr[:min(len(stderr), 4)]), "?"),
	}
	var contents [][]byte
	for i := range n {
		piece := data[i*len(data)/n : (i+1)*len(data)/n]
		sum := sha256.Sum256(piece)
		a := initproto.Artifact{
			Path:   fmt.Sprintf("o/%d%s", i, strings.ToValidUTF8(string(stderr[:min(len(stderr), 4)]), "_")),
			Size:   int64(len(piece)),
			SHA256: hex.EncodeToString(sum[:4]), // short: inputs stay small
			Sent:   i%2 == 0,
		}
		rep.Artifacts = append(rep.Artifacts, a)
		if a.Sent {
			contents = append(contents, piece)
		}
	}
	if n > 0 {
		rep.ArtifactsOmitted = n - 1
	}
	return rep, contents
}

// fzWaitGoroutines waits for the goroutines started since there were n
// to end. It first yields a fixed number of times, which is nearly always
// enough and, unlike a loop that checks, runs the same code every time:
// the fuzzer reads coverage of the test as well.
func fzWaitGoroutines(t *testing.T, n int) {
	t.Helper()
	for range 64 {
		runtime.Gosched()
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines left of readFrames after 10 s:\n%s", runtime.NumGoroutine()-n, buf)
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// fzCheck reads stream and checks readFrames against the reference.
func fzCheck(t *testing.T, stream []byte, max int64) frames {
	t.Helper()
	// The stream is in memory: readFrames must come back at once, and
	// its goroutines end with the stream (else they would also run into
	// the next input and blur the coverage the fuzzer steers by).
	before := runtime.NumGoroutine()
	defer fzWaitGoroutines(t, before)
	done := make(chan frames, 1)
	go func() { done <- readFrames(bytes.NewReader(stream), max) }()
	var got frames
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("readFrames of a %d-byte stream (limit %d) still running after 10 s:\n%s", len(stream), max, buf)
	}

	var total int64
	for _, c := range got.contents {
		total += int64(len(c))
	}
	if total > max {
		t.Fatalf("%d bytes of artifacts read under a limit of %d", total, max)
	}
	if len(got.diag) > 16<<10 {
		t.Fatalf("%d bytes of runbox-init stderr kept", len(got.diag))
	}

	stdout, stderr, muxFailed := fzDemux(stream)
	wantDiag := stderr[:min(len(stderr), 16<<10)]
	wantRep, wantContents := fzExpect(stdout, max)
	if got.report == nil {
		if wantRep != nil {
			t.Fatalf("no report (err %v), want %+v", got.err, wantRep)
		}
		if got.err == nil && (len(stdout) > 0 || muxFailed) {
			t.Fatalf("no report and no error from %d bytes of stdout", len(stdout))
		}
		// Without a report the whole stream was drained first.
		if got.diag != string(wantDiag) {
			t.Fatalf("diag %q, want %q", got.diag, wantDiag)
		}
		return got
	}
	if got.err != nil {
		t.Fatalf("report with error %v", got.err)
	}
	if wantRep == nil {
		t.Fatalf("report %+v, want none", got.report)
	}
	if !reflect.DeepEqual(got.report, wantRep) {
		t.Fatalf("report\n got %+v\nwant %+v", got.report, wantRep)
	}
	if len(got.contents) != len(wantContents) {
		t.Fatalf("%d artifact contents, want %d", len(got.contents), len(wantContents))
	}
	for i := range got.contents {
		if !bytes.Equal(got.contents[i], wantContents[i]) {
			t.Fatalf("artifact %d: %d bytes differ", i, len(got.contents[i]))
		}
	}
	if n := int64(len(got.report.Stdout) + len(got.report.Stderr)); n > max {
		t.Fatalf("report holds %d bytes of output under a limit of %d", n, max)
	}
	// The rest of stderr may still be on its way: what is kept is its start.
	if !strings.HasPrefix(string(wantDiag), got.diag) {
		t.Fatalf("diag %q is not the start of %q", got.diag, wantDiag)
	}
	return got
}

// FuzzFrames feeds readFrames what a box can send: arbitrary bytes on
// runbox-init's stdout and stderr, multiplexed by the engine (raw false),
// or an arbitrary attach stream (raw true). readFrames must not panic,
// must keep to its byte limit, and must agree with a reference reading of
// the frames. Every input also makes a report with artifacts that goes
// through initproto's encoder and must come back unchanged.
//
//	go test -run '^$' -fuzz '^FuzzFrames$' -fuzztime 20s ./sandbox
func FuzzFrames(f *testing.F) {
	// Every input runs readFrames twice, each with its goroutines and
	// pipe: a few hundred microseconds. The minimization of a new
	// interesting input tries a number of candidates quadratic in its
	// size and would hold a worker for the default minute; unless the
	// command line says otherwise, it gets a second.
	minimizeSet := false
	flag.Visit(func(fl *flag.Flag) { minimizeSet = minimizeSet || fl.Name == "test.fuzzminimizetime" })
	if !minimizeSet {
		if err := flag.Set("test.fuzzminimizetime", "1s"); err != nil {
			f.Logf("cannot shorten minimization: %v", err)
		}
	}
	rep, contents := fzReport([]byte("hello\nworld\n"), []byte("Traceback: x"), 3)
	full := fzEncode(f, rep, contents)
	bare, _ := fzReport([]byte("ok\n"), nil, 0)
	empty := fzEncode(f, bare, nil)
	seeds := []struct {
		data, diag   []byte
		chunk, limit uint16
		raw          bool
	}{
		{data: full},
		{data: full, diag: []byte("runbox-init: starting\n"), chunk: 7},
		{data: full, limit: uint16(len(full))},
		{data: full, limit: uint16(len(full) - 1)},
		{data: full[:len(full)-3], diag: []byte("killed")},
		{data: append(bytes.Clone(full), "trailing junk"...)},
		{data: empty},
		{data: fzMux(full, []byte("warn\n"), 16), raw: true},
		{data: fzMux(empty, nil, 0), raw: true},
		{data: append(fzMux(full[:20], nil, 0), 3, 0, 0, 0, 0, 0, 0, 2, 'e', 'r'), raw: true},
		{data: []byte{initproto.FrameArtifact, 0, 0, 0, 1, 'x'}},
		{data: []byte{initproto.FrameReport, 0, 0, 0, 2, '{', '['}},
		{data: []byte{initproto.FrameReport, 0xff, 0xff, 0xff, 0xff}},
		{data: []byte{initproto.FrameReport, 0, 0, 0, 2, '{', '}', initproto.FrameArtifact, 0, 0, 0, 0}},
		{data: []byte(`{"exit_code":0}`), diag: []byte("runbox-init: bad job\n")},
	}
	for _, s := range seeds {
		f.Add(s.data, s.diag, s.chunk, s.limit, s.raw)
	}
	f.Fuzz(func(t *testing.T, data, diag []byte, chunk, limit uint16, raw bool) {
		max := int64(1 << 20)
		if limit > 0 {
			max = int64(limit)
		}
		stream := fzClampMux(data)
		if !raw {
			stream = fzMux(data, diag, int(chunk))
		}
		fzCheck(t, stream, max)

		// Round trip: a well-formed report and its artifacts, made from
		// the input, come back as they were sent.
		rep, contents := fzReport(data, diag, int(chunk%4))
		enc := fzEncode(t, rep, contents)
		got := fzCheck(t, fzMux(enc, diag, int(chunk)), 1<<20)
		if int64(len(enc)) > 1<<20 {
			return
		}
		if got.report == nil {
			t.Fatalf("round trip: no report: %v", got.err)
		}
		wantJSON, _ := json.Marshal(rep)
		gotJSON, _ := json.Marshal(got.report)
		if !bytes.Equal(wantJSON, gotJSON) || !bytes.Equal(got.report.Stdout, data) || !bytes.Equal(got.report.Stderr, diag) {
			t.Fatalf("round trip: report\n got %s\nwant %s", gotJSON, wantJSON)
		}
		for i, a := range got.report.Artifacts {
			if a != rep.Artifacts[i] {
				t.Fatalf("round trip: artifact %d %+v, want %+v", i, a, rep.Artifacts[i])
			}
		}
		if len(got.contents) != len(contents) {
			t.Fatalf("round trip: %d contents, want %d", len(got.contents), len(contents))
		}
		for i := range contents {
			if !bytes.Equal(got.contents[i], contents[i]) {
				t.Fatalf("round trip: content %d differs", i)
			}
		}
	})
}
