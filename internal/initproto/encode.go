package initproto

import (
	"encoding/base64"
	"maps"
	"slices"
	"strconv"

	"github.com/runbox-mcp/runbox/internal/jsonenc"
)

// appendBody appends what json.Marshal makes of body, without its
// reflection, when body is a message a cell sends over and over: a
// *Report or a Header (or *Header) without Data. ok is false, and dst
// unchanged, for any other body or one with a field the fast path leaves
// to encoding/json (a report's displays and trace): reflection costs a
// session cell tens of microseconds per message on a cold cache.
func appendBody(dst []byte, body any) (out []byte, ok bool) {
	switch b := body.(type) {
	case *Report:
		if b == nil || !plainReport(b) {
			return dst, false
		}
		return appendReport(dst, b), true
	case Header:
		if !plainHeader(&b) {
			return dst, false
		}
		return appendHeader(dst, &b), true
	case *Header:
		if b == nil || !plainHeader(b) {
			return dst, false
		}
		return appendHeader(dst, b), true
	}
	return dst, false
}

// plainHeader reports whether appendHeader can encode h: no Data.
func plainHeader(h *Header) bool {
	return len(h.Data) == 0
}

// plainReport reports whether appendReport can encode r: no displays or
// trace.
func plainReport(r *Report) bool {
	return len(r.Displays) == 0 && len(r.Trace) == 0
}

// appendHeader appends h as json.Marshal would; h must be plainHeader.
func appendHeader(dst []byte, h *Header) []byte {
	dst = append(dst, `{"kind":`...)
	dst = jsonenc.AppendString(dst, h.Kind)
	if h.Job != nil {
		dst = append(dst, `,"job":`...)
		dst = appendJob(dst, h.Job)
	}
	if h.Index != 0 {
		dst = append(dst, `,"index":`...)
		dst = strconv.AppendInt(dst, int64(h.Index), 10)
	}
	if h.Call != 0 {
		dst = append(dst, `,"call":`...)
		dst = strconv.AppendUint(dst, h.Call, 10)
	}
	if h.Run != "" {
		dst = append(dst, `,"run":`...)
		dst = jsonenc.AppendString(dst, h.Run)
	}
	return append(dst, '}')
}

// appendJob appends j as json.Marshal would.
func appendJob(dst []byte, j *Job) []byte {
	dst = append(dst, `{"argv":`...)
	dst = appendStrings(dst, j.Argv)
	if len(j.Check) != 0 {
		dst = append(dst, `,"check":`...)
		dst = appendStrings(dst, j.Check)
	}
	dst = append(dst, `,"dir":`...)
	dst = jsonenc.AppendString(dst, j.Dir)
	dst = append(dst, `,"code_path":`...)
	dst = jsonenc.AppendString(dst, j.CodePath)
	if len(j.Files) != 0 {
		dst = append(dst, `,"files":[`...)
		for i, f := range j.Files {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"path":`...)
			dst = jsonenc.AppendString(dst, f.Path)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"env":`...)
	dst = appendStrings(dst, j.Env)
	dst = appendInt(dst, `,"timeout_ms":`, j.TimeoutMs, false)
	dst = appendInt(dst, `,"cpu_seconds":`, j.CPUSeconds, true)
	dst = appendInt(dst, `,"nproc":`, j.NProc, true)
	if len(j.Streams) != 0 {
		dst = append(dst, `,"streams":`...)
		dst = appendStrings(dst, j.Streams)
	}
	if len(j.StreamBudgets) != 0 {
		// As json.Marshal does, keys in order.
		dst = append(dst, `,"stream_budgets":{`...)
		for i, k := range slices.Sorted(maps.Keys(j.StreamBudgets)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonenc.AppendString(dst, k)
			dst = append(dst, ':')
			dst = strconv.AppendInt(dst, j.StreamBudgets[k], 10)
		}
		dst = append(dst, '}')
	}
	if j.Proxy != "" {
		dst = append(dst, `,"proxy":`...)
		dst = jsonenc.AppendString(dst, j.Proxy)
	}
	if len(j.CA) != 0 {
		dst = append(dst, `,"ca":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, j.CA)
		dst = append(dst, '"')
	}
	if j.Call != 0 {
		dst = append(dst, `,"call":`...)
		dst = strconv.AppendUint(dst, j.Call, 10)
	}
	if j.RunID != "" {
		dst = append(dst, `,"run_id":`...)
		dst = jsonenc.AppendString(dst, j.RunID)
	}
	dst = appendInt(dst, `,"keep_ms":`, j.KeepMs, true)
	dst = appendInt(dst, `,"max_output_bytes":`, int64(j.MaxOutputBytes), false)
	dst = appendInt(dst, `,"max_artifacts":`, int64(j.MaxArtifacts), false)
	dst = appendInt(dst, `,"max_artifact_bytes":`, j.MaxArtifactBytes, false)
	dst = appendBool(dst, `,"trace":true`, j.Trace)
	return append(dst, '}')
}

// appendReport appends r as json.Marshal would; r must be plainReport.
func appendReport(dst []byte, r *Report) []byte {
	// The first field written opens the object: the strings before
	// exit_code are omitempty, so "{" rides with exit_code unless one is set.
	dst = append(dst, '{')
	if r.InitError != "" {
		dst = append(dst, `"init_error":`...)
		dst = jsonenc.AppendString(dst, r.InitError)
		dst = append(dst, ',')
	}
	if r.StartError != "" {
		dst = append(dst, `"start_error":`...)
		dst = jsonenc.AppendString(dst, r.StartError)
		dst = append(dst, ',')
	}
	if r.CheckFailed {
		dst = append(dst, `"check_failed":true,`...)
	}
	dst = appendInt(dst, `"exit_code":`, int64(r.ExitCode), false)
	dst = appendInt(dst, `,"signal":`, int64(r.Signal), true)
	dst = appendBool(dst, `,"timed_out":true`, r.TimedOut)
	dst = appendInt(dst, `,"stdout_bytes":`, r.StdoutBytes, false)
	dst = appendInt(dst, `,"stderr_bytes":`, r.StderrBytes, false)
	dst = appendBool(dst, `,"stdout_truncated":true`, r.StdoutTruncated)
	dst = appendBool(dst, `,"stderr_truncated":true`, r.StderrTruncated)
	dst = appendInt(dst, `,"wall_ms":`, r.WallMs, false)
	dst = appendInt(dst, `,"ended_unix_ms":`, r.EndedUnixMs, true)
	dst = appendInt(dst, `,"cpu_ms":`, r.CPUMs, false)
	dst = appendInt(dst, `,"peak_memory_bytes":`, r.PeakMemoryBytes, false)
	dst = appendInt(dst, `,"oom_kills":`, r.OOMKills, false)
	dst = appendBool(dst, `,"pids_limit_hit":true`, r.PidsLimitHit)
	if r.DiskFull != "" {
		dst = append(dst, `,"disk_full":`...)
		dst = jsonenc.AppendString(dst, r.DiskFull)
	}
	if len(r.Artifacts) != 0 {
		dst = append(dst, `,"artifacts":[`...)
		for i := range r.Artifacts {
			a := &r.Artifacts[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"path":`...)
			dst = jsonenc.AppendString(dst, a.Path)
			dst = appendInt(dst, `,"size":`, a.Size, false)
			dst = append(dst, `,"sha256":`...)
			dst = jsonenc.AppendString(dst, a.SHA256)
			dst = append(dst, `,"sent":`...)
			dst = strconv.AppendBool(dst, a.Sent)
			dst = appendBool(dst, `,"display":true`, a.Display)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = appendInt(dst, `,"artifacts_omitted":`, int64(r.ArtifactsOmitted), true)
	dst = appendInt(dst, `,"displays_omitted":`, int64(r.DisplaysOmitted), true)
	if s := r.Session; s != nil {
		dst = appendInt(dst, `,"session":{"calls":`, int64(s.Calls), false)
		if s.Lost != "" {
			dst = append(dst, `,"lost":`...)
			dst = jsonenc.AppendString(dst, s.Lost)
		}
		dst = appendBool(dst, `,"interrupted":true`, s.Interrupted)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendInt appends key and n, nothing when omitEmpty and n is 0.
func appendInt(dst []byte, key string, n int64, omitEmpty bool) []byte {
	if omitEmpty && n == 0 {
		return dst
	}
	dst = append(dst, key...)
	return strconv.AppendInt(dst, n, 10)
}

// appendBool appends member (an omitempty bool's key with true) when b.
func appendBool(dst []byte, member string, b bool) []byte {
	if b {
		dst = append(dst, member...)
	}
	return dst
}

// appendStrings appends ss as a JSON array, null when ss is nil.
func appendStrings(dst []byte, ss []string) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonenc.AppendString(dst, s)
	}
	return append(dst, ']')
}
