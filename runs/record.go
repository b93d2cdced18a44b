package runs

import (
	"encoding/json"
	"time"

	"github.com/runbox-mcp/runbox/audit"
	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Record is a long run's record in the run store (kinds RecordRun and
// RecordTaskRun): plain data, written by the server that runs the run and
// read back, as untrusted input, by the one that collects or adopts it.
type Record struct {
	// Version is RecordVersion; a finished record of another version has
	// no result this server reads.
	Version   int       `json:"version,omitempty"`
	RunID     string    `json:"run_id"`
	TaskID    string    `json:"task_id,omitempty"`
	Owner     string    `json:"owner"`
	Tool      string    `json:"tool"`
	Language  string    `json:"language"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended,omitzero"`
	Cancelled bool      `json:"cancelled,omitempty"`
	// Ending is how the client got (or gave up) the result, once known.
	Ending string `json:"ending,omitempty"`
	// Result is the run's result once it ended.
	Result *KeptResult `json:"result,omitempty"`
	// Audit is the run's audit line held until its ending is known.
	Audit *audit.Entry `json:"audit,omitempty"`
	Call  RecordedCall `json:"call"`
	// Detached finds the run's box again, once its job was sent.
	Detached *sandbox.Detached `json:"detached,omitempty"`
}

// RecordedCall is what an adopted run's audit line needs of its call.
type RecordedCall struct {
	Args   json.RawMessage `json:"args,omitempty"`
	Client string          `json:"client,omitempty"`
	App    audit.Client    `json:"app"`
}

// RecordCall is what a record keeps of c: its arguments as they came
// (or as read, when those are not JSON), its client and app.
func RecordCall(c Call) RecordedCall {
	raw := c.Raw
	if raw == nil || !json.Valid(raw) {
		raw, _ = json.Marshal(c.Args)
	}
	return RecordedCall{Args: raw, Client: c.Client, App: c.App}
}

// Call is the recorded call, decoded again.
func (r RecordedCall) Call() Call {
	c := DecodeCall(r.Args)
	c.Client, c.App = r.Client, r.App
	return c
}

// RecordVersion is the version of the run store's records of long runs
// (RecordRun, RecordTaskRun) that keep a finished run's result as a
// KeptResult. A finished record of another version is not read: its
// result answers as lost, saying why.
const RecordVersion = 2

// KeptResult is a finished run's contract.Result as a record keeps it,
// so that its answer is rendered when it is collected, by this server or
// a restarted one: the result's JSON, and what that JSON leaves out (the
// bytes each stream held, the content of artifacts and displays), so
// that a restarted server serves the run's resources again.
type KeptResult struct {
	Result      contract.Result `json:"result"`
	StdoutBytes int64           `json:"stdout_bytes"`
	StderrBytes int64           `json:"stderr_bytes"`
	// ArtifactData is each artifact's content, by its index in
	// Result.Artifacts (nil where none was kept).
	ArtifactData [][]byte `json:"artifact_data,omitempty"`
	// DisplayData is each display's data by mime type, by its index in
	// Result.Displays.
	DisplayData []map[string][]byte `json:"display_data,omitempty"`
}

// Keep returns res as a record keeps it; withData false leaves out the
// content of its artifacts and displays (a record that must be small).
func Keep(res contract.Result, withData bool) KeptResult {
	k := KeptResult{Result: res, StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes}
	if !withData {
		return k
	}
	for i, a := range res.Artifacts {
		if a.Data != nil {
			if k.ArtifactData == nil {
				k.ArtifactData = make([][]byte, len(res.Artifacts))
			}
			k.ArtifactData[i] = a.Data
		}
	}
	for i, d := range res.Displays {
		for mime, m := range d.Mimes {
			if m.Data != nil {
				if k.DisplayData == nil {
					k.DisplayData = make([]map[string][]byte, len(res.Displays))
				}
				if k.DisplayData[i] == nil {
					k.DisplayData[i] = map[string][]byte{}
				}
				k.DisplayData[i][mime] = m.Data
			}
		}
	}
	return k
}

// Restore returns the result k keeps. k was read from the state
// directory, untrusted: content that does not match its artifact's or
// display's recorded size, or names one that is not there, is left out
// (the resource then reads as not kept).
func (k KeptResult) Restore() contract.Result {
	res := k.Result
	res.StdoutBytes, res.StderrBytes = k.StdoutBytes, k.StderrBytes
	if res.Artifacts == nil {
		res.Artifacts = []contract.Artifact{}
	}
	arts := make([]contract.Artifact, len(res.Artifacts))
	copy(arts, res.Artifacts)
	for i := range arts {
		arts[i].Data = nil
		if i < len(k.ArtifactData) && k.ArtifactData[i] != nil && int64(len(k.ArtifactData[i])) == arts[i].SizeBytes {
			arts[i].Data = k.ArtifactData[i]
		}
	}
	res.Artifacts = arts
	if res.Displays != nil {
		displays := make([]contract.Display, len(res.Displays))
		copy(displays, res.Displays)
		for i := range displays {
			mimes := make(map[string]contract.DisplayMime, len(displays[i].Mimes))
			for mime, m := range displays[i].Mimes {
				m.Data = nil
				if i < len(k.DisplayData) {
					if data, ok := k.DisplayData[i][mime]; ok && data != nil && int64(len(data)) == m.Bytes {
						m.Data = data
					}
				}
				mimes[mime] = m
			}
			displays[i].Mimes = mimes
		}
		res.Displays = displays
	}
	return res
}
