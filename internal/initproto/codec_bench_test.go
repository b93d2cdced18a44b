package initproto

import (
	"bufio"
	"bytes"
	"io"
	"testing"
)

// The benchmarks below run each message both ways: "fast" as Send and
// Receive take it, "json" wrapped in a struct that embeds it, which
// encoding/json reads and writes alike but the fast paths do not know.

// reportJSON is a report wrapped so that only encoding/json takes it.
type reportJSON struct{ *Report }

// headerJSON is a header wrapped so that only encoding/json takes it.
type headerJSON struct{ Header }

func BenchmarkSendCell(b *testing.B) {
	job := realJob()
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := SendCell(io.Discard, job); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := Send(io.Discard, headerJSON{Header{Kind: StreamCells, Job: job}}, job.Code, job.Stdin); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSendReport(b *testing.B) {
	rep := realReport()
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := SendReport(io.Discard, rep); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := Send(io.Discard, reportJSON{rep}, rep.Stdout, rep.Stderr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// message is what Send writes for body and blobs.
func message(b *testing.B, body any, blobs ...[]byte) []byte {
	var buf bytes.Buffer
	if err := Send(&buf, body, blobs...); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// receiveLoop receives msg into the value fresh makes, again and again,
// through one reader as a cells stream is read.
func receiveLoop(b *testing.B, msg []byte, fresh func() any) {
	b.ReportAllocs()
	r := bytes.NewReader(msg)
	br := bufio.NewReaderSize(r, 64<<10)
	for b.Loop() {
		r.Reset(msg)
		br.Reset(r)
		if _, err := Receive(br, fresh(), 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReceiveCell(b *testing.B) {
	job := realJob()
	msg := message(b, Header{Kind: StreamCells, Job: job}, job.Code, job.Stdin)
	b.Run("fast", func(b *testing.B) { receiveLoop(b, msg, func() any { return new(Header) }) })
	b.Run("json", func(b *testing.B) { receiveLoop(b, msg, func() any { return new(headerJSON) }) })
}

func BenchmarkReceiveReport(b *testing.B) {
	rep := realReport()
	msg := message(b, rep, rep.Stdout, rep.Stderr)
	b.Run("fast", func(b *testing.B) { receiveLoop(b, msg, func() any { return new(Report) }) })
	b.Run("json", func(b *testing.B) { receiveLoop(b, msg, func() any { return new(reportJSON) }) })
}
