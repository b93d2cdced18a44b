package manifest

import (
	"strings"
	"testing"
)

func TestPackagesForms(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       Packages
		err        string
	}{
		{"both spellings", "packages:\n  python: [python3-tabulate=0.8.9-1, {name: python3-attr, version: 22.2.0-1}]\n  javascript: [is-number@7.0.0, \"@types/node@20.1.0\", {name: left-pad, version: 1.3.0}]\n",
			Packages{Python: []Package{{"python3-tabulate", "0.8.9-1"}, {"python3-attr", "22.2.0-1"}},
				JavaScript: []Package{{"is-number", "7.0.0"}, {"@types/node", "20.1.0"}, {"left-pad", "1.3.0"}}}, ""},
		{"pypi names read as Debian's", "packages:\n  python: [tabulate=0.8.9-1, python-dateutil=2.8.2-2, Typing_Extensions=4.4.0-1]\n",
			Packages{Python: []Package{{"python3-tabulate", "0.8.9-1"}, {"python3-dateutil", "2.8.2-2"}, {"python3-typing-extensions", "4.4.0-1"}}}, ""},
		{"pypi names Debian spells otherwise", "packages:\n  python: [PyYAML=6.0-3, beautifulsoup4=4.11.2-2, Pillow=9.4.0-1.1+deb12u1]\n",
			Packages{Python: []Package{{"python3-yaml", "6.0-3"}, {"python3-bs4", "4.11.2-2"}, {"python3-pil", "9.4.0-1.1+deb12u1"}}}, ""},
		{"epoch", "packages:\n  python: [python3-foo=1:2.0-3]\n", Packages{Python: []Package{{"python3-foo", "1:2.0-3"}}}, ""},
		{"unpinned python", "packages:\n  python: [python3-tabulate]\n", Packages{}, "packages.python[0].version"},
		{"unpinned npm", "packages:\n  javascript: [is-number]\n", Packages{}, "a pinned version: is-number@7.0.0"},
		{"npm range", "packages:\n  javascript: [is-number@^7.0.0]\n", Packages{}, "no ranges"},
		{"npm tag", "packages:\n  javascript: [is-number@latest]\n", Packages{}, "no tags like latest"},
		{"debian wildcard", "packages:\n  python: [python3-tabulate=0.8.*]\n", Packages{}, "an exact Debian version"},
		{"not python", "packages:\n  python: [libstdc++6=12.2.0-14]\n", Packages{}, "a Debian python3-* package"},
		{"bad npm name", "packages:\n  javascript: [Is_Number@7.0.0]\n", Packages{}, "an npm package name"},
		{"conflicting", "packages:\n  python: [tabulate=0.8.9-1, python3-tabulate=0.9.0-1]\n", Packages{}, "python3-tabulate is also pinned to 0.8.9-1"},
		{"duplicate", "packages:\n  javascript: [is-number@7.0.0, is-number@7.0.0]\n", Packages{}, "listed twice"},
		{"unknown field", "packages:\n  python:\n    - {name: python3-tabulate, version: 0.8.9-1, hash: x}\n", Packages{}, `unknown field "hash"`},
		{"unknown ecosystem", "packages:\n  ruby: [rake@1.0.0]\n", Packages{}, `unknown field "ruby"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := loadCase(t, tc.yaml, tc.err)
			if m == nil {
				return
			}
			if got, want := joinPackages(m.Packages.Python)+"|"+joinPackages(m.Packages.JavaScript), joinPackages(tc.want.Python)+"|"+joinPackages(tc.want.JavaScript); got != want {
				t.Fatalf("packages = %s, want %s", got, want)
			}
		})
	}
}

// The agent is told the declared packages with their versions; without
// any, the description does not change.
func TestToolDescriptionPackages(t *testing.T) {
	m := Default()
	before := m.Describe()
	m.Packages = Packages{Python: []Package{{"python3-tabulate", "0.8.9-1"}}, JavaScript: []Package{{"is-number", "7.0.0"}}}
	d := m.Describe()
	for _, want := range []string{"python3-tabulate 0.8.9-1", "is-number 7.0.0"} {
		if !strings.Contains(d, want) {
			t.Errorf("description lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(before, "added by the manifest") {
		t.Errorf("description without packages mentions them:\n%s", before)
	}
}

// Editors that validate against `runbox manifest schema` accept both
// spellings of an entry.
func TestPackagesSchema(t *testing.T) {
	s := string(Schema())
	for _, want := range []string{`"oneOf"`, `"pattern": "^[^=\\s]+[=@][^=@\\s]+$"`, `"required": [`} {
		if !strings.Contains(s[strings.Index(s, `"packages"`):], want) {
			t.Errorf("the packages schema lacks %s", want)
		}
	}
}
