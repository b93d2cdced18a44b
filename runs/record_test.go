package runs

import (
	"encoding/json"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
)

// A kept result read back (through JSON, as the run store keeps it) is
// the result: the bytes each stream held and the content of its
// artifacts and displays included, which its own JSON leaves out.
func TestKeptResultRoundTrip(t *testing.T) {
	code := 0
	png := []byte("\x89PNG-data")
	res := contract.Result{RunID: "r_1", Language: "python", Status: contract.StatusOK, ExitCode: &code,
		Stdout: "hi\n", StdoutBytes: 3000, StderrBytes: 7, StdoutTruncated: true,
		Artifacts: []contract.Artifact{
			{Path: "out.txt", SizeBytes: 5, MimeType: "text/plain", URI: contract.ArtifactURI("r_1", "out.txt"), Data: []byte("hello")},
			{Path: "big.bin", SizeBytes: 1 << 30, ContentOmitted: true},
		},
		Displays: []contract.Display{{Index: 0, Source: "show", Mimes: map[string]contract.DisplayMime{
			"image/png":  {Bytes: int64(len(png)), URI: contract.DisplayURI("r_1", 0, "image.png"), Data: png},
			"text/plain": {Bytes: 6, Text: "Figure"},
		}}},
	}
	raw, err := json.Marshal(Keep(res, true))
	if err != nil {
		t.Fatal(err)
	}
	var k KeptResult
	if err := json.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	got := k.Restore()
	if got.StdoutBytes != 3000 || got.StderrBytes != 7 || got.Stdout != "hi\n" || *got.ExitCode != 0 || !got.StdoutTruncated {
		t.Fatalf("streams: %+v", got)
	}
	if string(got.Artifacts[0].Data) != "hello" || got.Artifacts[1].Data != nil || !got.Artifacts[1].ContentOmitted {
		t.Fatalf("artifacts: %+v", got.Artifacts)
	}
	if string(got.Displays[0].Mimes["image/png"].Data) != string(png) || got.Displays[0].Mimes["text/plain"].Data != nil {
		t.Fatalf("displays: %+v", got.Displays)
	}
	// The shown answer is the same from the kept result as from the
	// result itself.
	a, _ := json.Marshal(contract.ForModel(res, 100))
	b, _ := json.Marshal(contract.ForModel(got, 100))
	if string(a) != string(b) {
		t.Fatalf("the answer differs:\n%s\n%s", a, b)
	}

	// Without data, the result alone.
	small := Keep(res, false)
	if small.ArtifactData != nil || small.DisplayData != nil || small.Restore().StdoutBytes != 3000 {
		t.Fatalf("without data: %+v", small)
	}
	// Restore leaves the kept result's own slices alone.
	if res.Artifacts[0].Data == nil || res.Displays[0].Mimes["image/png"].Data == nil {
		t.Fatal("Keep or Restore changed the result it was given")
	}
}

// A kept result is read from the state directory: content that does not
// match what it claims to be, or names nothing, is left out.
func TestKeptResultUntrusted(t *testing.T) {
	raw := `{"result":{"run_id":"r_2","status":"ok","artifacts":[{"path":"a","size_bytes":3}],
		"displays":[{"index":0,"mimes":{"image/png":{"bytes":2}}}]},
		"artifact_data":["eHh4eHh4","eHg="],
		"display_data":[{"image/png":"eHh4eA==","text/html":"eHg="},{"image/png":"eHg="}]}`
	var k KeptResult
	if err := json.Unmarshal([]byte(raw), &k); err != nil {
		t.Fatal(err)
	}
	got := k.Restore()
	if len(got.Artifacts) != 1 || got.Artifacts[0].Data != nil {
		t.Fatalf("an artifact's content of the wrong size was kept: %+v", got.Artifacts)
	}
	if len(got.Displays) != 1 || len(got.Displays[0].Mimes) != 1 || got.Displays[0].Mimes["image/png"].Data != nil {
		t.Fatalf("a display's content of the wrong size was kept: %+v", got.Displays)
	}
	var none KeptResult
	if arts := none.Restore().Artifacts; arts == nil || len(arts) != 0 {
		t.Fatalf("a result without artifacts: %#v", arts)
	}
}

// A recorded call decodes to the call it was: its arguments as they came
// (or as read, when they were not JSON), its client and app.
func TestRecordedCall(t *testing.T) {
	c := DecodeCall(json.RawMessage(`{"language":"python","code":"print(1)"}`))
	c.Client = "alice"
	got := RecordCall(c).Call()
	if got.Client != "alice" || got.Args.Language != "python" || got.Args.Code != "print(1)" {
		t.Fatalf("%+v", got)
	}
	c.Raw = json.RawMessage(`{not json`)
	if got := RecordCall(c).Call(); got.Args.Code != "print(1)" {
		t.Fatalf("arguments that were not JSON: %+v", got)
	}
}
