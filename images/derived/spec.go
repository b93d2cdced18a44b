package derived

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/runbox-mcp/runbox/images"
	"github.com/runbox-mcp/runbox/manifest"
)

// Repository is the name of every derived image; the tag is the spec hash.
const Repository = "runbox/sandbox-packages"

// Labels of a derived image (besides the base's own, which it inherits).
const (
	// ImageValue is the io.runbox.image label of a derived image.
	ImageValue = "sandbox-packages"
	// LabelBase is the ID of the base image the layer was resolved against.
	LabelBase = "io.runbox.packages.base"
	// LabelSpec is the spec hash (the tag's).
	LabelSpec = "io.runbox.packages.spec"
	// LabelPackages is the JSON list of installed packages ([]Installed).
	LabelPackages = "io.runbox.packages"
)

// format changes when the same spec would build a different layer.
const format = "runbox-derived/1"

// Image is one derived image the manifest needs: the base it is built
// FROM, its tag, and the languages that run on it.
type Image struct {
	Base      string   `json:"base"`
	Tag       string   `json:"tag"`
	Languages []string `json:"languages"`
}

// Installed is one package in a derived image's layer.
type Installed struct {
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	// SHA256 is the .deb's (Debian).
	SHA256 string `json:"sha256,omitempty"`
	// Integrity is npm's subresource integrity of the tarball.
	Integrity string `json:"integrity,omitempty"`
	// Declared says the manifest names it; otherwise a dependency.
	Declared bool `json:"declared,omitempty"`
	// InBase says the base image has it already (at that version).
	InBase bool `json:"in_base,omitempty"`
}

// baseRecipe is the recipe a base image must carry: this runbox's for its
// own sandbox image; "" for any other (its ID is checked at build time).
func baseRecipe(base string) string {
	if base == images.Image {
		return images.RecipeHash()
	}
	return ""
}

// SpecHash is the hash of what a derived image is made from: the format,
// the base image and its recipe, and the packages in a canonical order.
func SpecHash(base, recipe string, p manifest.Packages) string {
	canon := func(ps []manifest.Package) []string {
		s := make([]string, len(ps))
		for i, pk := range ps {
			s[i] = pk.Name + "\x00" + pk.Version
		}
		slices.Sort(s)
		return s
	}
	b, _ := json.Marshal([]any{format, base, recipe, canon(p.Python), canon(p.JavaScript)})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// Tag is the derived image of base with p.
func Tag(base string, p manifest.Packages) string {
	return Repository + ":" + SpecHash(base, baseRecipe(base), p)
}

// Plan lists the derived images m needs, one per distinct base image of
// its languages; none when it declares no packages.
func Plan(m *manifest.Manifest) []Image {
	if m == nil || m.Packages.Empty() {
		return nil
	}
	var out []Image
	for _, lang := range m.Languages {
		i := slices.IndexFunc(out, func(im Image) bool { return im.Base == lang.Image })
		if i < 0 {
			out = append(out, Image{Base: lang.Image, Tag: Tag(lang.Image, m.Packages)})
			i = len(out) - 1
		}
		out[i].Languages = append(out[i].Languages, lang.Name)
	}
	return out
}

// Apply returns m as it runs: a copy whose every language runs on its
// derived image, with the plan; m itself when it declares no packages. m
// is not changed: it is the manifest as loaded.
func Apply(m *manifest.Manifest) (*manifest.Manifest, []Image) {
	plan := Plan(m)
	if len(plan) == 0 {
		return m, nil
	}
	out := *m
	out.Languages = slices.Clone(m.Languages)
	for _, im := range plan {
		for i := range out.Languages {
			if slices.Contains(im.Languages, out.Languages[i].Name) {
				out.Languages[i].Image = im.Tag
			}
		}
	}
	return &out, plan
}

// Labels are the derived image's labels.
func Labels(baseID, spec string, pkgs []Installed) map[string]string {
	b, _ := json.Marshal(pkgs)
	return map[string]string{
		images.ImageLabel: ImageValue,
		LabelBase:         baseID,
		LabelSpec:         spec,
		LabelPackages:     string(b),
	}
}

// Packages reads the installed packages from a derived image's labels.
func Packages(labels map[string]string) ([]Installed, error) {
	v, ok := labels[LabelPackages]
	if !ok {
		return nil, fmt.Errorf("no %s label: not a derived image of runbox's", LabelPackages)
	}
	var pkgs []Installed
	if err := json.Unmarshal([]byte(v), &pkgs); err != nil {
		return nil, fmt.Errorf("label %s: %w", LabelPackages, err)
	}
	return pkgs, nil
}

// Summary is the packages in one line, declared ones first, each with
// its version: "python3-tabulate 0.8.9-1, is-number 7.0.0 (+2 dependencies)".
func Summary(pkgs []Installed) string {
	var names []string
	deps := 0
	for _, p := range pkgs {
		if p.Declared {
			names = append(names, p.Name+" "+p.Version)
		} else {
			deps++
		}
	}
	s := strings.Join(names, ", ")
	if deps > 0 {
		s += fmt.Sprintf(" (+%d dependencies)", deps)
	}
	return s
}
