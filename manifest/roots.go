package manifest

import (
	"fmt"
	"path/filepath"
)

// RootsDir is where a client's MCP roots appear in its boxes:
// /mnt/roots/<name>.
const RootsDir = MountRoot + "/roots"

// Roots says whether a client's MCP roots (roots/list: the folders it
// works in, e.g. an IDE's open project) are mounted in that client's
// boxes, read-only like declared folders. A root names a folder of the
// server's host, so only folders under one of Under are mounted: an HTTP
// client cannot mount /etc by naming it.
type Roots struct {
	Mount bool     `json:"mount" jsonschema_description:"Ask each client for its roots (roots/list) and mount those that are folders of this host under one of the under folders; a client without the roots capability gets none."`
	Under []string `json:"under" jsonschema_description:"Host folders (absolute) a root must be in, after resolving links; required when mount is true."`
}

func (r Roots) validate(bad func(field string, value any, allowed string)) {
	for i, u := range r.Under {
		if !filepath.IsAbs(u) || filepath.Clean(u) != u || u == "/" {
			bad(fmt.Sprintf("roots.under[%d]", i), u, "an absolute, clean host folder other than /")
		}
	}
	if r.Mount && len(r.Under) == 0 {
		bad("roots.under", r.Under, "at least one host folder roots may be in when roots.mount is true (e.g. your projects folder)")
	}
}
