package sandbox

import (
	"bytes"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/runbox-mcp/runbox/contract"

	"github.com/runbox-mcp/runbox/manifest"
)

// buildResult turns what came out of a box into the contract's result,
// classified against the limits the box ran under (a session box's own).
func buildResult(job contract.Job, o outcome, lim manifest.Limits) contract.Result {
	res := contract.Result{RunID: job.RunID, Language: job.Language.Name, Status: contract.StatusOK, Artifacts: []contract.Artifact{}}
	if rep := o.report; rep != nil && rep.InitError == "" && rep.StartError == "" {
		code := rep.ExitCode
		res.ExitCode = &code
		res.Stdout, res.Stderr = validText(rep.Stdout), validText(rep.Stderr)
		res.StdoutTruncated, res.StderrTruncated = rep.StdoutTruncated, rep.StderrTruncated
		res.StdoutBytes, res.StderrBytes = rep.StdoutBytes, rep.StderrBytes
		res.Metrics.WallMs = rep.WallMs
		res.Metrics.CPUMs = rep.CPUMs
		res.Metrics.PeakMemoryBytes = max(rep.PeakMemoryBytes, 0)
		res.ArtifactsOmitted = rep.ArtifactsOmitted
		next := 0
		shown := map[string][]byte{}
		for _, a := range rep.Artifacts {
			art := contract.Artifact{Path: a.Path, SizeBytes: a.Size, SHA256: a.SHA256, URI: contract.ArtifactURI(job.RunID, a.Path), ContentOmitted: !a.Sent}
			if a.Sent && next < len(o.contents) {
				art.Data = o.contents[next]
				next++
			}
			if a.Display {
				shown[a.Path] = art.Data
				continue
			}
			art.MimeType = mimeType(a.Path, art.Data)
			res.Artifacts = append(res.Artifacts, art)
		}
		res.Displays, res.DisplaysOmitted = buildDisplays(job.RunID, rep, shown), rep.DisplaysOmitted
	}
	if info := classify(job, lim, o); info != nil {
		res.Status = contract.StatusError
		res.Error = info
	}
	return res
}

// mimeTypes is fixed, so results do not depend on the host's mime.types.
var mimeTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
	".webp": "image/webp", ".svg": "image/svg+xml", ".bmp": "image/bmp",
	".pdf": "application/pdf", ".json": "application/json", ".csv": "text/csv",
	".tsv": "text/tab-separated-values", ".txt": "text/plain", ".md": "text/markdown",
	".html": "text/html", ".htm": "text/html", ".xml": "application/xml", ".yaml": "application/yaml",
	".yml": "application/yaml", ".py": "text/x-python", ".js": "text/javascript", ".sh": "text/x-shellscript",
	".log": "text/plain", ".parquet": "application/vnd.apache.parquet", ".zip": "application/zip",
	".gz": "application/gzip", ".tar": "application/x-tar", ".npy": "application/octet-stream",
	".wav": "audio/wav", ".mp3": "audio/mpeg", ".mp4": "video/mp4",
}

func mimeType(p string, data []byte) string {
	if t, ok := mimeTypes[strings.ToLower(path.Ext(p))]; ok {
		return t
	}
	if data == nil {
		return "application/octet-stream"
	}
	t := http.DetectContentType(data)
	if i := strings.IndexByte(t, ';'); i >= 0 && !strings.HasPrefix(t, "text/") {
		t = t[:i]
	}
	return t
}

// validText turns captured bytes into valid UTF-8 for the result.
func validText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD")))
}
