package initproto

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestMessagesRoundTrip(t *testing.T) {
	t.Run("job", func(t *testing.T) {
		var buf bytes.Buffer
		job := &Job{Argv: []string{"python3", "{file}"}, Dir: "/workspace", Code: []byte("print(1)\n"), Stdin: []byte{0, 1, 2},
			Files: []File{{Path: "a.bin", Data: bytes.Repeat([]byte{0xff, 0}, 100000)}, {Path: "empty", Data: []byte{}}}}
		if err := SendJob(&buf, job); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), "cHJpbnQ") { // base64 of "print"
			t.Fatal("the code went as base64 inside JSON")
		}
		var h Header
		blobs, err := Receive(&buf, &h, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if h.Kind != StreamJob || h.Job == nil {
			t.Fatalf("header %+v", h)
		}
		if err := JobBlobs(h.Job, blobs); err != nil {
			t.Fatal(err)
		}
		if string(h.Job.Code) != "print(1)\n" || !bytes.Equal(h.Job.Stdin, job.Stdin) || !bytes.Equal(h.Job.Files[0].Data, job.Files[0].Data) || len(h.Job.Files[1].Data) != 0 {
			t.Fatalf("job changed on the way: %+v", h.Job)
		}
	})
	t.Run("report", func(t *testing.T) {
		var buf bytes.Buffer
		rep := &Report{ExitCode: 3, Stdout: []byte("out\xff"), Stderr: bytes.Repeat([]byte("e"), 70000)}
		if err := SendReport(&buf, rep); err != nil {
			t.Fatal(err)
		}
		got, err := ReceiveReport(&buf, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if got.ExitCode != 3 || !bytes.Equal(got.Stdout, rep.Stdout) || !bytes.Equal(got.Stderr, rep.Stderr) {
			t.Fatalf("report changed on the way: %+v", got)
		}
	})
}

func TestReceiveRejectsBadMessages(t *testing.T) {
	cases := []struct {
		name  string
		data  string
		limit int64
		want  error
	}{
		{"empty", "", 10, io.EOF},
		{"no newline", `{"body":{}}`, 10, io.ErrUnexpectedEOF},
		{"short blob", `{"blobs":[5],"body":{}}` + "\nab", 10, io.ErrUnexpectedEOF},
		{"blobs past the limit", `{"blobs":[6,6],"body":{}}` + "\n", 10, ErrTooLarge},
		{"a huge blob declared", `{"blobs":[9223372036854775807],"body":{}}` + "\n", 1 << 30, ErrTooLarge},
		{"header past its bound", strings.Repeat(" ", MaxHeader+1), 10, ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v map[string]any
			if _, err := Receive(strings.NewReader(c.data), &v, c.limit); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	t.Run("negative blob", func(t *testing.T) {
		var v map[string]any
		if _, err := Receive(strings.NewReader(`{"blobs":[-1],"body":{}}`+"\n"), &v, 10); err == nil {
			t.Fatal("accepted a negative size")
		}
	})
	t.Run("job with the wrong number of blobs", func(t *testing.T) {
		if err := JobBlobs(&Job{Files: []File{{Path: "a"}}}, [][]byte{{}, {}}); err == nil {
			t.Fatal("accepted a job missing a file's blob")
		}
	})
}

func FuzzReceive(f *testing.F) {
	var buf bytes.Buffer
	_ = SendReport(&buf, &Report{Stdout: []byte("x")})
	f.Add(buf.Bytes())
	f.Add([]byte(`{"blobs":[1,2],"body":{}}` + "\nabc"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Header
		blobs, err := Receive(bytes.NewReader(data), &h, 1<<16)
		if err == nil {
			var total int
			for _, b := range blobs {
				total += len(b)
			}
			if total > 1<<16 {
				t.Fatalf("%d bytes past the limit", total)
			}
		}
	})
}
