package initproto

import (
	"encoding/base64"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"
)

// decodeFast decodes a message's line (its '\n' included) into body
// without encoding/json's reflection, when body is a zero *Report or
// *Header and the line is in the form Send writes: keys in the structs'
// order, no whitespace, numbers and escapes as encoding/json writes them,
// no field the encoder leaves to json.Marshal. ok is false, and body
// untouched, for anything else: the caller then decodes the line with
// json.Unmarshal, so every line ends as it would have. The line may come
// from a box running hostile code; decodeFast must never panic.
func decodeFast(line []byte, body any) (blobs []int64, ok bool) {
	switch v := body.(type) {
	case *Report:
		if v == nil || !reflect.ValueOf(v).Elem().IsZero() {
			return nil, false
		}
		// Decoded aside: a line declined halfway leaves body as it was.
		var rep Report
		p := decoder{b: line}
		if blobs, ok = p.envelope(func() bool { return p.report(&rep) }); ok {
			*v = rep
		}
	case *Header:
		if v == nil || !reflect.ValueOf(v).Elem().IsZero() {
			return nil, false
		}
		var h Header
		p := decoder{b: line}
		if blobs, ok = p.envelope(func() bool { return p.header(&h) }); ok {
			*v = h
		}
	}
	return blobs, ok
}

// decoder reads b from i on; each method returns false on anything it
// does not read exactly as decodeFast promises.
type decoder struct {
	b []byte
	i int
}

// envelope reads a whole line: the blobs' sizes, body through readBody,
// and the closing brace and newline, nothing after.
func (p *decoder) envelope(readBody func() bool) (blobs []int64, ok bool) {
	if !p.lit(`{`) {
		return nil, false
	}
	if p.lit(`"blobs":[`) {
		for {
			n, ok := p.int(64)
			// A negative size is an error json.Unmarshal lets through;
			// the fallback reports it as before.
			if !ok || n < 0 {
				return nil, false
			}
			blobs = append(blobs, n)
			if p.lit(`,`) {
				continue
			}
			if !p.lit(`],`) {
				return nil, false
			}
			break
		}
	}
	if !p.lit(`"body":`) || !readBody() || !p.lit("}\n") || p.i != len(p.b) {
		return nil, false
	}
	return blobs, true
}

// object reads an object whose keys are among keys, each after the one
// before in keys' order (so none twice), calling member with each key to
// read its value.
func (p *decoder) object(keys []string, member func(key string) bool) bool {
	if !p.lit(`{`) {
		return false
	}
	if p.lit(`}`) {
		return true
	}
	next := 0
	for {
		k := p.key(keys[next:])
		if k < 0 || !member(keys[next+k]) {
			return false
		}
		next += k + 1
		if p.lit(`}`) {
			return true
		}
		if !p.lit(`,`) || next == len(keys) {
			return false
		}
	}
}

// array reads an array, calling elem to read each element.
func (p *decoder) array(elem func() bool) bool {
	if !p.lit(`[`) {
		return false
	}
	if p.lit(`]`) {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if p.lit(`]`) {
			return true
		}
		if !p.lit(`,`) {
			return false
		}
	}
}

// key reads `"name":` and returns name's index in keys, -1 when it is
// not there or has an escape.
func (p *decoder) key(keys []string) int {
	if !p.lit(`"`) {
		return -1
	}
	start := p.i
	for p.i < len(p.b) && p.b[p.i] != '"' && p.b[p.i] != '\\' {
		p.i++
	}
	name := p.b[start:p.i]
	if !p.lit(`":`) {
		return -1
	}
	for k, key := range keys {
		if string(name) == key {
			return k
		}
	}
	return -1
}

// headerKeys are Header's keys that the fast path reads (no data).
var headerKeys = []string{"kind", "job", "index", "call", "run"}

// header reads a Header.
func (p *decoder) header(h *Header) bool {
	return p.object(headerKeys, func(key string) bool {
		ok := false
		switch key {
		case "kind":
			h.Kind, ok = p.string()
		case "job":
			if p.lit(`null`) {
				return true
			}
			h.Job = new(Job)
			ok = p.job(h.Job)
		case "index":
			h.Index, ok = p.intN()
		case "call":
			h.Call, ok = p.uint()
		case "run":
			h.Run, ok = p.string()
		}
		return ok
	})
}

// jobKeys are Job's keys.
var jobKeys = []string{"argv", "check", "dir", "code_path", "files", "env", "timeout_ms", "cpu_seconds", "nproc",
	"streams", "stream_budgets", "proxy", "ca", "call", "run_id", "keep_ms", "max_output_bytes", "max_artifacts",
	"max_artifact_bytes", "trace"}

// job reads a Job.
func (p *decoder) job(j *Job) bool {
	return p.object(jobKeys, func(key string) bool {
		ok := false
		switch key {
		case "argv":
			j.Argv, ok = p.strings()
		case "check":
			j.Check, ok = p.strings()
		case "dir":
			j.Dir, ok = p.string()
		case "code_path":
			j.CodePath, ok = p.string()
		case "files":
			j.Files, ok = p.files()
		case "env":
			j.Env, ok = p.strings()
		case "timeout_ms":
			j.TimeoutMs, ok = p.int(64)
		case "cpu_seconds":
			j.CPUSeconds, ok = p.int(64)
		case "nproc":
			j.NProc, ok = p.int(64)
		case "streams":
			j.Streams, ok = p.strings()
		case "stream_budgets":
			j.StreamBudgets, ok = p.budgets()
		case "proxy":
			j.Proxy, ok = p.string()
		case "ca":
			j.CA, ok = p.base64()
		case "call":
			j.Call, ok = p.uint()
		case "run_id":
			j.RunID, ok = p.string()
		case "keep_ms":
			j.KeepMs, ok = p.int(64)
		case "max_output_bytes":
			j.MaxOutputBytes, ok = p.intN()
		case "max_artifacts":
			j.MaxArtifacts, ok = p.intN()
		case "max_artifact_bytes":
			j.MaxArtifactBytes, ok = p.int(64)
		case "trace":
			j.Trace, ok = p.bool()
		}
		return ok
	})
}

// files reads a job's files: null, or an array of objects with a path.
func (p *decoder) files() ([]File, bool) {
	if p.lit(`null`) {
		return nil, true
	}
	fs := []File{}
	ok := p.array(func() bool {
		var f File
		ok := p.object(fileKeys, func(string) bool {
			var ok bool
			f.Path, ok = p.string()
			return ok
		})
		fs = append(fs, f)
		return ok
	})
	return fs, ok
}

// fileKeys are File's keys.
var fileKeys = []string{"path"}

// budgets reads a job's stream budgets: null, or an object of integers
// with its keys in order, as json.Marshal writes them (so none twice).
func (p *decoder) budgets() (map[string]int64, bool) {
	if p.lit(`null`) {
		return nil, true
	}
	if !p.lit(`{`) {
		return nil, false
	}
	m := map[string]int64{}
	if p.lit(`}`) {
		return m, true
	}
	for first, prev := true, ""; ; first = false {
		k, ok := p.string()
		if !ok || !first && k <= prev || !p.lit(`:`) {
			return nil, false
		}
		prev = k
		if m[k], ok = p.int(64); !ok {
			return nil, false
		}
		if p.lit(`}`) {
			return m, true
		}
		if !p.lit(`,`) {
			return nil, false
		}
	}
}

// reportKeys are Report's keys that the fast path reads (no displays or
// trace).
var reportKeys = []string{"init_error", "start_error", "check_failed", "exit_code", "signal", "timed_out",
	"stdout_bytes", "stderr_bytes", "stdout_truncated", "stderr_truncated", "wall_ms", "ended_unix_ms", "cpu_ms",
	"peak_memory_bytes", "oom_kills", "pids_limit_hit", "disk_full", "artifacts", "artifacts_omitted",
	"displays_omitted", "session"}

// report reads a Report.
func (p *decoder) report(r *Report) bool {
	return p.object(reportKeys, func(key string) bool {
		ok := false
		switch key {
		case "init_error":
			r.InitError, ok = p.string()
		case "start_error":
			r.StartError, ok = p.string()
		case "check_failed":
			r.CheckFailed, ok = p.bool()
		case "exit_code":
			r.ExitCode, ok = p.intN()
		case "signal":
			r.Signal, ok = p.intN()
		case "timed_out":
			r.TimedOut, ok = p.bool()
		case "stdout_bytes":
			r.StdoutBytes, ok = p.int(64)
		case "stderr_bytes":
			r.StderrBytes, ok = p.int(64)
		case "stdout_truncated":
			r.StdoutTruncated, ok = p.bool()
		case "stderr_truncated":
			r.StderrTruncated, ok = p.bool()
		case "wall_ms":
			r.WallMs, ok = p.int(64)
		case "ended_unix_ms":
			r.EndedUnixMs, ok = p.int(64)
		case "cpu_ms":
			r.CPUMs, ok = p.int(64)
		case "peak_memory_bytes":
			r.PeakMemoryBytes, ok = p.int(64)
		case "oom_kills":
			r.OOMKills, ok = p.int(64)
		case "pids_limit_hit":
			r.PidsLimitHit, ok = p.bool()
		case "disk_full":
			r.DiskFull, ok = p.string()
		case "artifacts":
			r.Artifacts, ok = p.artifacts()
		case "artifacts_omitted":
			r.ArtifactsOmitted, ok = p.intN()
		case "displays_omitted":
			r.DisplaysOmitted, ok = p.intN()
		case "session":
			if p.lit(`null`) {
				return true
			}
			r.Session = new(SessionState)
			ok = p.session(r.Session)
		}
		return ok
	})
}

// artifactKeys are Artifact's keys.
var artifactKeys = []string{"path", "size", "sha256", "sent", "display"}

// artifacts reads a report's artifacts: null, or an array of objects.
func (p *decoder) artifacts() ([]Artifact, bool) {
	if p.lit(`null`) {
		return nil, true
	}
	as := []Artifact{}
	ok := p.array(func() bool {
		var a Artifact
		ok := p.object(artifactKeys, func(key string) bool {
			ok := false
			switch key {
			case "path":
				a.Path, ok = p.string()
			case "size":
				a.Size, ok = p.int(64)
			case "sha256":
				a.SHA256, ok = p.string()
			case "sent":
				a.Sent, ok = p.bool()
			case "display":
				a.Display, ok = p.bool()
			}
			return ok
		})
		as = append(as, a)
		return ok
	})
	return as, ok
}

// sessionKeys are SessionState's keys.
var sessionKeys = []string{"calls", "lost", "interrupted"}

// session reads a SessionState.
func (p *decoder) session(s *SessionState) bool {
	return p.object(sessionKeys, func(key string) bool {
		ok := false
		switch key {
		case "calls":
			s.Calls, ok = p.intN()
		case "lost":
			s.Lost, ok = p.string()
		case "interrupted":
			s.Interrupted, ok = p.bool()
		}
		return ok
	})
}

// lit reads s if it comes next.
func (p *decoder) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// bool reads true or false.
func (p *decoder) bool() (bool, bool) {
	if p.lit(`true`) {
		return true, true
	}
	return false, p.lit(`false`)
}

// digits reads a run of decimal digits as json.Marshal writes an
// integer's (no leading zero but in 0 itself), with ok false past 1<<64-1.
func (p *decoder) digits() (n uint64, ok bool) {
	start := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
		p.i++
	}
	if p.i == start || (p.b[start] == '0' && p.i-start > 1) {
		return 0, false
	}
	return n, true
}

// uint reads a uint64.
func (p *decoder) uint() (uint64, bool) {
	return p.digits()
}

// int reads an integer that fits in a signed integer of bits bits.
func (p *decoder) int(bits uint) (int64, bool) {
	neg := p.lit(`-`)
	n, ok := p.digits()
	limit := uint64(1) << (bits - 1)
	switch {
	case !ok || n > limit || (n == limit && !neg) || (neg && n == 0):
		// "-0" decodes to 0, but json.Marshal never writes it.
		return 0, false
	case neg:
		return int64(-n), true
	}
	return int64(n), true
}

// intN reads an int.
func (p *decoder) intN() (int, bool) {
	n, ok := p.int(strconv.IntSize)
	return int(n), ok
}

// strings reads null (a nil slice) or an array of strings ([] an empty one,
// as encoding/json makes it).
func (p *decoder) strings() ([]string, bool) {
	if p.lit(`null`) {
		return nil, true
	}
	if !p.lit(`[`) {
		return nil, false
	}
	ss := []string{}
	if p.lit(`]`) {
		return ss, true
	}
	for {
		s, ok := p.string()
		if !ok {
			return nil, false
		}
		ss = append(ss, s)
		if p.lit(`]`) {
			return ss, true
		}
		if !p.lit(`,`) {
			return nil, false
		}
	}
}

// base64 reads a []byte as encoding/json writes it: null, or a string of
// standard base64.
func (p *decoder) base64() ([]byte, bool) {
	if p.lit(`null`) {
		return nil, true
	}
	s, ok := p.string()
	if !ok {
		return nil, false
	}
	// The same buffer and call as encoding/json, which tolerates
	// newlines in the text as this does.
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, []byte(s))
	if err != nil {
		return nil, false
	}
	return b[:n], true
}

// string reads a string of valid UTF-8 whose escapes are those
// encoding/json writes, or the other single-character ones, or \u of a
// character that is not a surrogate.
func (p *decoder) string() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				// encoding/json would put U+FFFD in place.
				return "", false
			}
			return string(s), true
		case c == '\\':
			return p.unescape(start)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return "", false
}

// unescape finishes reading a string that started at start and has an
// escape at p.i.
func (p *decoder) unescape(start int) (string, bool) {
	if !utf8.Valid(p.b[start:p.i]) {
		return "", false
	}
	out := append(make([]byte, 0, p.i-start+16), p.b[start:p.i]...)
	from := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), utf8.Valid(p.b[from : p.i-1])
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return "", false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok || utf8.RuneLen(r) < 0 {
				// A surrogate: the pairing rules are encoding/json's.
				return "", false
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", false
		}
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func (p *decoder) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}
