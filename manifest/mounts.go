package manifest

import (
	"fmt"
	"path/filepath"
	"regexp"
)

// MountRoot is where declared folders appear in a box: /mnt/<name>.
const MountRoot = "/mnt"

// Mount is a host folder every box sees read-only at /mnt/<name>.
type Mount struct {
	Name string `json:"name" jsonschema_description:"The folder's name in the box: /mnt/<name>; not roots, where a client's MCP roots go."`
	Path string `json:"path" jsonschema_description:"The host folder (absolute), mounted read-only; links inside it never reach outside it."`
}

// Target is the mount's path in a box.
func (m Mount) Target() string { return MountRoot + "/" + m.Name }

var mountNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

func (m *Manifest) validateMounts(bad func(field string, value any, allowed string)) {
	seen := map[string]bool{}
	for i, mt := range m.Mounts {
		f := fmt.Sprintf("mounts[%d]", i)
		if !mountNameRe.MatchString(mt.Name) || seen[mt.Name] {
			bad(f+".name", mt.Name, "a unique name of lower-case letters, digits, _ and -, at most 32")
		} else if MountRoot+"/"+mt.Name == RootsDir {
			bad(f+".name", mt.Name, "a name other than roots (a client's MCP roots are mounted at "+RootsDir+")")
		}
		seen[mt.Name] = true
		if !filepath.IsAbs(mt.Path) || filepath.Clean(mt.Path) != mt.Path || mt.Path == "/" {
			bad(f+".path", mt.Path, "an absolute, clean host path other than /")
		}
	}
	if m.Outputs != "" && (!filepath.IsAbs(m.Outputs) || filepath.Clean(m.Outputs) != m.Outputs || m.Outputs == "/") {
		bad("outputs", m.Outputs, "empty, or an absolute, clean host folder other than /")
	}
}
