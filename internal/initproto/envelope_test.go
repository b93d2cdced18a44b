package initproto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
)

// TestSendWritesTheEnvelopeJSONWould checks the hand-made line of Send
// against json.Marshal of the same envelope: one encoding of the body must
// not change a byte of the message.
func TestSendWritesTheEnvelopeJSONWould(t *testing.T) {
	rep := &Report{ExitCode: 3, StdoutBytes: 2, Stdout: []byte("1\n"), Stderr: []byte("<&>"), DiskFull: "/tmp <full> & \u2028",
		Artifacts: []Artifact{{Path: "a\"b.png", Size: 9}}}
	for _, tc := range []struct {
		name  string
		body  any
		blobs [][]byte
	}{
		{"a report", rep, [][]byte{rep.Stdout, rep.Stderr}},
		{"no blobs", Header{Kind: StreamLane}, nil},
		{"an empty blob", map[string]int{"a": 1}, [][]byte{{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got bytes.Buffer
			if err := Send(&got, tc.body, tc.blobs...); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			env := struct {
				Blobs []int64         `json:"blobs,omitempty"`
				Body  json.RawMessage `json:"body"`
			}{Body: b}
			for _, blob := range tc.blobs {
				env.Blobs = append(env.Blobs, int64(len(blob)))
			}
			want, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			for _, blob := range tc.blobs {
				want = append(want, blob...)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("Send wrote\n%q\nwant\n%q", got.Bytes(), want)
			}
		})
	}
}

// TestReceiveDecodesTheBodyInOnePass: the body lands in the receiver's
// value whatever the keys' order, a body of the wrong shape is an error,
// and a null body leaves the value as it was.
func TestReceiveDecodesTheBodyInOnePass(t *testing.T) {
	var rep Report
	blobs, err := Receive(bufio.NewReader(bytes.NewReader([]byte(`{"body":{"exit_code":7,"disk_full":"/w"},"blobs":[1,0]}`+"\nx"))), &rep, 10)
	if err != nil || rep.ExitCode != 7 || rep.DiskFull != "/w" || len(blobs) != 2 || string(blobs[0]) != "x" {
		t.Fatalf("got %+v, %q, %v", rep, blobs, err)
	}
	if _, err := Receive(bytes.NewReader([]byte(`{"body":[1]}`+"\n")), &rep, 10); err == nil {
		t.Error("an array for a report's body: no error")
	}
	rep = Report{ExitCode: 4}
	if _, err := Receive(bytes.NewReader([]byte(`{"body":null}`+"\n")), &rep, 10); err != nil || rep.ExitCode != 4 {
		t.Errorf("a null body: %+v, %v", rep, err)
	}
}
