package audit

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/runbox-mcp/runbox/internal/jsonenc"
)

// errUnencodable says appendEntry met a value it does not write (a time
// outside RFC 3339, a NaN or infinite float, invalid Args): the caller then
// lets json.Marshal fail, with its own error.
var errUnencodable = errors.New("audit: entry needs json.Marshal")

// marshalEntry is json.Marshal(*e), written by appendEntry, with room for
// the newline Record adds.
func marshalEntry(e *Entry) ([]byte, error) {
	// A session cell's line takes about 900 bytes besides its heads
	// (four sha256s are 256): one allocation, most often.
	n := 1024 + len(e.StdoutHead) + len(e.StderrHead) + len(e.Args)
	if e.Error != nil {
		n += len(e.Error.Message)
	}
	b, err := appendEntry(make([]byte, 0, n), e)
	if err != nil {
		// A value appendEntry does not write: json.Marshal fails on
		// it too, and says why.
		return json.Marshal(*e)
	}
	return b, nil
}

// appendEntry appends e as json.Marshal writes it, byte for byte, without
// reflection: the log writes a line per run, synchronously, and reflection
// was most of that line's cost. Fields that are rare or nested deeply
// (Args, Network, ToolCalls, Exposure) go through json.Marshal on their own.
//
// TestEntryFieldsAreEncoded fails when a field is added to Entry or to a
// struct written here by hand without being taught to it.
func appendEntry(b []byte, e *Entry) ([]byte, error) {
	b = append(b, `{"run_id":`...)
	b = jsonenc.AppendString(b, e.RunID)
	b = append(b, `,"time":"`...)
	b, err := e.Time.AppendText(b) // what Time.MarshalJSON writes, unquoted
	if err != nil {
		return nil, errUnencodable
	}
	b = append(b, `","client":{`...)
	n := len(b)
	b = appendOmitString(b, n, `"name":`, e.Client.Name)
	b = appendOmitString(b, n, `"version":`, e.Client.Version)
	b = appendOmitString(b, n, `"session":`, e.Client.Session)
	b = appendOmitString(b, n, `"principal":`, e.Client.Principal)
	b = append(b, `},"transport":`...)
	b = jsonenc.AppendString(b, e.Transport)
	b = append(b, `,"language":`...)
	b = jsonenc.AppendString(b, e.Language)
	b = append(b, `,"code_sha256":`...)
	b = jsonenc.AppendString(b, e.CodeSHA256)
	if len(e.Args) > 0 {
		// Args is a json.RawMessage: json.Marshal compacts and
		// HTML-escapes it, and fails when it is not JSON.
		if b, err = appendMarshal(b, `,"args":`, e.Args); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"image":`...)
	b = jsonenc.AppendString(b, e.Image)
	b = append(b, `,"isolation":`...)
	b = jsonenc.AppendString(b, e.Isolation)

	l := &e.Limits
	b = append(b, `,"limits":{"timeout_seconds":`...)
	if b, err = appendFloat(b, l.TimeoutSeconds); err != nil {
		return nil, err
	}
	b = append(b, `,"memory_bytes":`...)
	b = strconv.AppendInt(b, l.MemoryBytes, 10)
	b = append(b, `,"cpus":`...)
	if b, err = appendFloat(b, l.CPUs); err != nil {
		return nil, err
	}
	b = append(b, `,"pids":`...)
	b = strconv.AppendInt(b, l.Pids, 10)
	b = append(b, `,"max_output_bytes":`...)
	b = strconv.AppendInt(b, l.OutputBytes, 10)

	m := &e.Metrics
	b = append(b, `},"metrics":{"wall_ms":`...)
	b = strconv.AppendInt(b, m.WallMs, 10)
	b = append(b, `,"cpu_ms":`...)
	b = strconv.AppendInt(b, m.CPUMs, 10)
	b = append(b, `,"peak_memory_bytes":`...)
	b = strconv.AppendInt(b, m.PeakMemoryBytes, 10)
	b = append(b, `,"queue_ms":`...)
	b = strconv.AppendInt(b, m.QueueMs, 10)
	b = append(b, `,"startup_ms":`...)
	b = strconv.AppendInt(b, m.StartupMs, 10)
	b = append(b, `,"pooled":`...)
	b = strconv.AppendBool(b, m.Pooled)
	b = append(b, `,"cached":`...)
	b = strconv.AppendBool(b, m.Cached)

	b = append(b, `},"status":`...)
	b = jsonenc.AppendString(b, string(e.Status))
	b = append(b, `,"exit_code":`...)
	if e.ExitCode == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*e.ExitCode), 10)
	}
	if x := e.Error; x != nil {
		b = append(b, `,"error":{"kind":`...)
		b = jsonenc.AppendString(b, string(x.Kind))
		if x.Limit != "" {
			b = append(b, `,"limit":`...)
			b = jsonenc.AppendString(b, string(x.Limit))
		}
		if x.Syscall != "" {
			b = append(b, `,"syscall":`...)
			b = jsonenc.AppendString(b, x.Syscall)
		}
		b = append(b, `,"message":`...)
		b = jsonenc.AppendString(b, x.Message)
		b = append(b, '}')
	}
	b = append(b, `,"artifacts":`...)
	if e.Artifacts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range e.Artifacts {
			a := &e.Artifacts[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"path":`...)
			b = jsonenc.AppendString(b, a.Path)
			b = append(b, `,"size_bytes":`...)
			b = strconv.AppendInt(b, a.SizeBytes, 10)
			b = append(b, `,"mime_type":`...)
			b = jsonenc.AppendString(b, a.MimeType)
			b = append(b, `,"sha256":`...)
			b = jsonenc.AppendString(b, a.SHA256)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(e.Network) > 0 {
		if b, err = appendMarshal(b, `,"network":`, e.Network); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"stdout_head":`...)
	b = jsonenc.AppendString(b, e.StdoutHead)
	b = append(b, `,"stderr_head":`...)
	b = jsonenc.AppendString(b, e.StderrHead)
	b = append(b, `,"stdout_sha256":`...)
	b = jsonenc.AppendString(b, e.StdoutSHA256)
	b = append(b, `,"stderr_sha256":`...)
	b = jsonenc.AppendString(b, e.StderrSHA256)
	if e.Redacted != 0 {
		b = append(b, `,"redacted":`...)
		b = strconv.AppendInt(b, int64(e.Redacted), 10)
	}
	if len(e.ToolCalls) > 0 {
		if b, err = appendMarshal(b, `,"tool_calls":`, e.ToolCalls); err != nil {
			return nil, err
		}
	}
	if s := e.Session; s != nil {
		b = append(b, `,"session":{"key":`...)
		b = jsonenc.AppendString(b, s.Key)
		b = append(b, `,"call":`...)
		b = strconv.AppendInt(b, int64(s.Call), 10)
		b = append(b, `,"state":`...)
		b = jsonenc.AppendString(b, s.State)
		b = append(b, '}')
	}
	if e.Background != "" {
		b = append(b, `,"background":`...)
		b = jsonenc.AppendString(b, e.Background)
	}
	if e.Exposure != nil {
		if b, err = appendMarshal(b, `,"exposure":`, e.Exposure); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendOmitString appends an omitempty string field: nothing when s is
// empty, else the field, after a comma unless it is the first since start.
func appendOmitString(b []byte, start int, key, s string) []byte {
	if s == "" {
		return b
	}
	if len(b) > start {
		b = append(b, ',')
	}
	b = append(b, key...)
	return jsonenc.AppendString(b, s)
}

// appendMarshal appends key and json.Marshal's encoding of v, for the
// fields not worth encoding by hand.
func appendMarshal(b []byte, key string, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, errUnencodable
	}
	b = append(b, key...)
	return append(b, j...), nil
}

// appendFloat appends f as encoding/json writes a float64: like %g as in
// ES6, with 'e' only below 1e-6 or from 1e21, its exponent unpadded.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errUnencodable
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
