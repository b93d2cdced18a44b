package runs

import (
	"strconv"

	"github.com/runbox-mcp/runbox/contract"
)

// DisplayKey is where the store keeps a display's data among its run's
// files: a key no workspace path can be (those are relative).
func DisplayKey(index int, name string) string {
	return "/displays/" + strconv.Itoa(index) + "/" + name
}

// storeDisplays adds a result's displays' data to a stored run's files.
func storeDisplays(run *storedRun, res contract.Result) {
	for _, d := range res.Displays {
		for mime, m := range d.Mimes {
			if m.Data == nil || m.URI == "" {
				continue
			}
			_, _, name, _ := contract.ParseDisplayURI(m.URI)
			run.files[DisplayKey(d.Index, name)] = contract.Artifact{Path: name, MimeType: mime, SizeBytes: int64(len(m.Data)), Data: m.Data}
			run.bytes += int64(len(m.Data))
		}
	}
}
