package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/invopop/jsonschema"
)

// Packages are libraries added to the sandbox image: `runbox images build`
// (images/derived) builds a derived image holding exactly these, from
// Debian's archive (Python, as python3-* packages) and the npm registry
// (JavaScript), and every language whose image is the base runs on it.
// Every entry is pinned to one version.
type Packages struct {
	Python     []Package `json:"python,omitempty" jsonschema_description:"Python libraries as Debian packages, each pinned: python3-tabulate=0.8.9-1, or {name: python3-tabulate, version: 0.8.9-1}; a PyPI-style name reads as its Debian package (tabulate: python3-tabulate, python-dateutil: python3-dateutil, PyYAML: python3-yaml). What they depend on comes along, resolved against the base image's own package list."`
	JavaScript []Package `json:"javascript,omitempty" jsonschema_description:"JavaScript packages from the npm registry, each pinned to an exact version: is-number@7.0.0, or {name: is-number, version: 7.0.0}; installed with a generated package-lock (integrity checked) in /node_modules, where require() and import() find them."`
}

// Package is one pinned package.
type Package struct {
	Name    string `json:"name" jsonschema_description:"The package's name (Debian's for python, npm's for javascript)."`
	Version string `json:"version" jsonschema_description:"The exact version (Debian's, e.g. 0.8.9-1; npm's, e.g. 7.0.0)."`
}

// Ecosystems of packages, as labels and reports name them.
const (
	EcosystemDebian = "debian"
	EcosystemNPM    = "npm"
)

// Empty says whether no package is declared.
func (p Packages) Empty() bool { return len(p.Python) == 0 && len(p.JavaScript) == 0 }

// UnmarshalJSON reads "name=version" (Debian's spelling), "name@version"
// (npm's) or {name, version}, strictly.
func (p *Package) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if i := strings.LastIndexAny(s, "=@"); i > 0 {
			p.Name, p.Version = s[:i], s[i+1:]
		} else {
			p.Name, p.Version = s, ""
		}
		return nil
	}
	type plain Package
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode((*plain)(p))
}

// JSONSchema lets an entry be a string, name=version or name@version, or
// an object, as UnmarshalJSON reads it.
func (Package) JSONSchema() *jsonschema.Schema {
	props := jsonschema.NewProperties()
	props.Set("name", &jsonschema.Schema{Type: "string", Description: "The package's name (Debian's for python, npm's for javascript)."})
	props.Set("version", &jsonschema.Schema{Type: "string", Description: "The exact version (Debian's, e.g. 0.8.9-1; npm's, e.g. 7.0.0)."})
	return &jsonschema.Schema{
		Description: "A pinned package: name=version (Debian's spelling), name@version (npm's), or {name, version}.",
		OneOf: []*jsonschema.Schema{
			{Type: "string", Pattern: `^[^=\s]+[=@][^=@\s]+$`},
			{Type: "object", Properties: props, Required: []string{"name", "version"}, AdditionalProperties: jsonschema.FalseSchema},
		},
	}
}

// String is the package as apt and people spell it: name=version for
// Debian, name@version for npm.
func (p Package) String() string { return p.Name + " " + p.Version }

var (
	debianNameRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)
	debianVersionRe = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~-]*$`)
	npmNameRe       = regexp.MustCompile(`^(@[a-z0-9-~][a-z0-9-._~]*/)?[a-z0-9-~][a-z0-9-._~]*$`)
	// An exact semver: no range, no tag.
	npmVersionRe = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	pypiNameRe   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
)

// DebianName is the Debian package of a Python library: python3-* names
// as they are; a PyPI-style name lower-cased, with _ and . as -, the
// python- prefix dropped, as python3-<name> (Debian's naming policy).
func DebianName(name string) string {
	if strings.HasPrefix(name, "python3-") {
		return name
	}
	n := strings.NewReplacer("_", "-", ".", "-").Replace(strings.ToLower(name))
	if d, ok := debianAliases[n]; ok {
		return d
	}
	n = strings.TrimPrefix(n, "python-")
	return "python3-" + n
}

// debianAliases are well-known PyPI projects whose Debian package is not
// python3-<name> (Debian names a package for its import name).
var debianAliases = map[string]string{
	"pyyaml":         "python3-yaml",
	"beautifulsoup4": "python3-bs4",
	"pillow":         "python3-pil",
	"scikit-learn":   "python3-sklearn",
	"scikit-image":   "python3-skimage",
	"pyjwt":          "python3-jwt",
	"opencv-python":  "python3-opencv",
	"attrs":          "python3-attr",
	"msgpack-python": "python3-msgpack",
}

// normalize maps PyPI-style Python names to Debian's; Validate calls it
// first, so the effective manifest shows what will be installed.
func (p *Packages) normalize() {
	for i, pk := range p.Python {
		if pypiNameRe.MatchString(pk.Name) {
			p.Python[i].Name = DebianName(pk.Name)
		}
	}
}

func (p Packages) validate(bad func(field string, value any, allowed string)) {
	seen := map[string]string{}
	for i, pk := range p.Python {
		f := fmt.Sprintf("packages.python[%d]", i)
		switch {
		case !debianNameRe.MatchString(pk.Name) || !strings.HasPrefix(pk.Name, "python3-"):
			bad(f+".name", pk.Name, "a Debian python3-* package (python3-tabulate) or a PyPI-style name (tabulate)")
		case pk.Version == "":
			bad(f+".version", `""`, fmt.Sprintf("a pinned Debian version: %s=0.8.9-1 (apt-cache policy %s lists them)", pk.Name, pk.Name))
		case !debianVersionRe.MatchString(pk.Version):
			bad(f+".version", pk.Version, "an exact Debian version such as 0.8.9-1 (no ranges, no wildcards)")
		}
		conflict(bad, seen, f, EcosystemDebian, pk)
	}
	for i, pk := range p.JavaScript {
		f := fmt.Sprintf("packages.javascript[%d]", i)
		switch {
		case !npmNameRe.MatchString(pk.Name) || len(pk.Name) > 214:
			bad(f+".name", pk.Name, "an npm package name (is-number, @scope/name)")
		case pk.Version == "":
			bad(f+".version", `""`, fmt.Sprintf("a pinned version: %s@7.0.0 (npm view %s versions lists them)", pk.Name, pk.Name))
		case !npmVersionRe.MatchString(pk.Version):
			bad(f+".version", pk.Version, "an exact version such as 7.0.0 (no ranges like ^7 or ~7.0, no tags like latest)")
		}
		conflict(bad, seen, f, EcosystemNPM, pk)
	}
}

// conflict refuses a package named twice: with another version it is a
// conflict, with the same one a duplicate.
func conflict(bad func(string, any, string), seen map[string]string, f, eco string, pk Package) {
	key := eco + "\x00" + pk.Name
	if v, ok := seen[key]; ok {
		if v != pk.Version {
			bad(f, pk.Name, fmt.Sprintf("one version per package: %s is also pinned to %s", pk.Name, v))
		} else {
			bad(f, pk.Name, "each package once: "+pk.Name+" is listed twice")
		}
		return
	}
	seen[key] = pk.Version
}

// describe is the tool description's line about the declared packages.
func (p Packages) describe() string {
	var b strings.Builder
	if len(p.Python) > 0 {
		fmt.Fprintf(&b, "- Python packages added by the manifest (Debian's): %s.\n", joinPackages(p.Python))
	}
	if len(p.JavaScript) > 0 {
		fmt.Fprintf(&b, "- JavaScript packages added by the manifest (npm, require or import them by name): %s.\n", joinPackages(p.JavaScript))
	}
	return b.String()
}

func joinPackages(ps []Package) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
