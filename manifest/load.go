package manifest

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// DefaultPath is read when no manifest is named, if it exists.
const DefaultPath = "runbox.yaml"

// LoadDefault loads the named manifest, or ./runbox.yaml when none is named
// and it exists, or the built-in defaults. A named file that is missing is
// an error; an unnamed one is not.
func LoadDefault(named string) (*Manifest, string, error) {
	if named != "" {
		m, err := Load(named)
		return m, named, err
	}
	if _, err := os.Stat(DefaultPath); err == nil {
		m, err := Load(DefaultPath)
		return m, DefaultPath, err
	}
	m, err := Load("")
	return m, "", err
}

// Load reads a manifest file (YAML or JSON) over the defaults: fields it
// does not set keep their default; a languages list replaces the default
// one. Unknown fields are errors, so a typo never silently does nothing.
// An empty path returns the defaults.
func Load(path string) (*Manifest, error) {
	m := Default()
	if path == "" {
		return m, m.Validate()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("manifest %s is invalid:\n%w", path, err)
	}
	return m, nil
}
