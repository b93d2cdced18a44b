package derived

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/images"
	"github.com/runbox-mcp/runbox/manifest"
)

func pkgs(py, js []string) manifest.Packages {
	var p manifest.Packages
	for _, s := range py {
		n, v, _ := strings.Cut(s, "=")
		p.Python = append(p.Python, manifest.Package{Name: n, Version: v})
	}
	for _, s := range js {
		n, v, _ := strings.Cut(s, "@")
		p.JavaScript = append(p.JavaScript, manifest.Package{Name: n, Version: v})
	}
	return p
}

// The tag names the content: the same list in any order is the same
// image; another version, base or recipe is another.
func TestSpecHash(t *testing.T) {
	a := SpecHash("b", "r", pkgs([]string{"python3-a=1", "python3-b=2"}, []string{"x@1.0.0"}))
	for name, other := range map[string]string{
		"order":   SpecHash("b", "r", pkgs([]string{"python3-b=2", "python3-a=1"}, []string{"x@1.0.0"})),
		"version": SpecHash("b", "r", pkgs([]string{"python3-a=1", "python3-b=3"}, []string{"x@1.0.0"})),
		"base":    SpecHash("c", "r", pkgs([]string{"python3-a=1", "python3-b=2"}, []string{"x@1.0.0"})),
		"recipe":  SpecHash("b", "s", pkgs([]string{"python3-a=1", "python3-b=2"}, []string{"x@1.0.0"})),
		"moved":   SpecHash("b", "r", pkgs([]string{"python3-a=1", "python3-b=2", "python3-x=1.0.0"}, nil)),
	} {
		if (name == "order") != (other == a) {
			t.Errorf("%s: %s vs %s", name, other, a)
		}
	}
	if len(a) != 16 {
		t.Fatal(a)
	}
	if got := Tag(images.Image, pkgs([]string{"python3-a=1"}, nil)); got != Repository+":"+SpecHash(images.Image, images.RecipeHash(), pkgs([]string{"python3-a=1"}, nil)) {
		t.Fatalf("the default base's tag does not carry this runbox's recipe: %s", got)
	}
}

func TestApply(t *testing.T) {
	m := manifest.Default()
	if am, plan := Apply(m); plan != nil || am != m {
		t.Fatal("no packages: nothing may change")
	}
	m.Packages = pkgs([]string{"python3-tabulate=0.8.9-1"}, nil)
	own := slices.IndexFunc(m.Languages, func(l manifest.Language) bool { return l.Name == "bash" })
	m.Languages[own].Image = "my/own:image"
	am, plan := Apply(m)
	if len(plan) != 2 || plan[0].Base != manifest.DefaultImage || plan[1].Base != "my/own:image" || len(plan[0].Languages) != len(m.Languages)-1 {
		t.Fatalf("plan = %+v", plan)
	}
	for i, l := range am.Languages {
		want := plan[0].Tag
		if i == own {
			want = plan[1].Tag
		}
		if l.Image != want {
			t.Errorf("%s runs on %s, want %s", l.Name, l.Image, want)
		}
	}
	if m.Languages[0].Image != manifest.DefaultImage || m.Languages[own].Image != "my/own:image" {
		t.Errorf("the loaded manifest was changed: %+v", m.Languages)
	}
}

func TestLabelsRoundTrip(t *testing.T) {
	in := []Installed{{Ecosystem: "debian", Name: "python3-tabulate", Version: "0.8.9-1", SHA256: "80715c", Declared: true},
		{Ecosystem: "debian", Name: "libx", Version: "1", SHA256: "ab"},
		{Ecosystem: "npm", Name: "is-number", Version: "7.0.0", Integrity: "sha512-41C", Declared: true}}
	l := Labels("sha256:base", "spec", in)
	out, err := Packages(l)
	if err != nil || len(out) != 3 || out[2] != in[2] || l[LabelBase] != "sha256:base" || l[images.ImageLabel] != ImageValue {
		t.Fatalf("%v %+v %v", err, out, l)
	}
	if s := Summary(out); s != "python3-tabulate 0.8.9-1, is-number 7.0.0 (+1 dependencies)" {
		t.Fatal(s)
	}
	if _, err := Packages(map[string]string{}); err == nil {
		t.Fatal("an image without the label read as derived")
	}
}

// Real `apt-get install -s` output (bookworm, against the sandbox image's
// status).
const aptSim = `NOTE: This is only a simulation!
Reading package lists...
Building dependency tree...
The following NEW packages will be installed:
  python3-tabulate python3-wcwidth
0 upgraded, 2 newly installed, 0 to remove and 0 not upgraded.
Inst python3-wcwidth (0.2.5+dfsg1-1.1 Debian:12.12/stable [all])
Inst python3-tabulate (0.8.9-1 Debian:12.12/stable [all])
Inst libfoo1:amd64 (1:2.0-3 Debian:12.12/stable [amd64])
Conf python3-wcwidth (0.2.5+dfsg1-1.1 Debian:12.12/stable [all])
Conf python3-tabulate (0.8.9-1 Debian:12.12/stable [all])
`

func TestParsePlan(t *testing.T) {
	plan, err := parsePlan(aptSim)
	if err != nil || len(plan) != 3 {
		t.Fatalf("%v %+v", err, plan)
	}
	if f := plan[2].debFile(); f != "libfoo1_1%3a2.0-3_amd64.deb" {
		t.Fatal(f)
	}
	if plan[1].debFile() != "python3-tabulate_0.8.9-1_all.deb" {
		t.Fatal(plan[1].debFile())
	}
	_, err = parsePlan("Inst python3-numpy [1:1.24.2-1] (1:1.24.2-1+deb12u1 Debian:12.12/stable [amd64])\nRemv python3-scipy [1.10.1-2]\n")
	if err == nil || !strings.Contains(err.Error(), "replace the base image's python3-numpy 1:1.24.2-1 with 1:1.24.2-1+deb12u1") || !strings.Contains(err.Error(), "remove the base image's python3-scipy") {
		t.Fatal(err)
	}
}

func TestAptError(t *testing.T) {
	err := aptError("Reading package lists...\nE: Unable to locate package python3-nosuch\nE: Version '9.9-1' for 'python3-tabulate' was not found\n", "bookworm")
	if err == nil || !strings.Contains(err.Error(), "unknown package python3-nosuch") || !strings.Contains(err.Error(), "unknown version 9.9-1 of python3-tabulate") {
		t.Fatal(err)
	}
	if err := aptError("E: Broken packages\n", "bookworm"); err == nil || !strings.Contains(err.Error(), "Broken packages") {
		t.Fatal(err)
	}
	if aptError("all fine\n", "bookworm") != nil {
		t.Fatal("no E: line is no error")
	}
}

// The base image's status lacks what cut.txt cut (pythran); apt must see
// a consistent status, and nothing else may change.
func TestConsistentStatus(t *testing.T) {
	status := `Package: python3-scipy
Status: install ok installed
Depends: python3 (>= 3.11~), python3-pythran (>= 0.11), libc6 (>= 2.34) | libc6-alt, python3-numpy:any

Package: python3
Status: install ok installed
Provides: python3-profiler

Package: libc6
Status: install ok installed
Pre-Depends: libgcc-s1

Package: python3-numpy
Status: install ok installed
Depends: python3-profiler
`
	got := string(consistentStatus([]byte(status)))
	if !strings.Contains(got, "Depends: python3 (>= 3.11~), libc6 (>= 2.34) | libc6-alt, python3-numpy:any\n") {
		t.Fatalf("scipy's dependencies:\n%s", got)
	}
	if strings.Contains(got, "Pre-Depends") || !strings.Contains(got, "Depends: python3-profiler\n") {
		t.Fatalf("an unsatisfied Pre-Depends stays, or a provided one goes:\n%s", got)
	}
	st := string(installedStanza([]byte("Package: python3-tabulate\nVersion: 0.8.9-1\nDepends: python3:any\n")))
	if st != "Package: python3-tabulate\nStatus: install ok installed\nVersion: 0.8.9-1\nDepends: python3:any\n\n" {
		t.Fatalf("%q", st)
	}
}

func TestParseLock(t *testing.T) {
	lock := `{"name":"x","lockfileVersion":3,"packages":{"":{"dependencies":{"is-odd":"3.0.1"}},
"node_modules/is-odd":{"version":"3.0.1","resolved":"https://registry.npmjs.org/is-odd/-/is-odd-3.0.1.tgz","integrity":"sha512-odd"},
"node_modules/is-number":{"version":"6.0.0","resolved":"https://registry.npmjs.org/is-number/-/is-number-6.0.0.tgz","integrity":"sha512-six"}}}`
	got, err := parseLock([]byte(lock), []manifest.Package{{Name: "is-odd", Version: "3.0.1"}})
	if err != nil || len(got) != 2 || got[0].Name != "is-number" || got[0].Declared || !got[1].Declared || got[1].Integrity != "sha512-odd" {
		t.Fatalf("%v %+v", err, got)
	}
	if _, err := parseLock([]byte(`{"lockfileVersion":3,"packages":{"node_modules/x":{"version":"1.0.0","resolved":"git+https://example/x.git"}}}`), nil); err == nil || !strings.Contains(err.Error(), "no integrity") {
		t.Fatal(err)
	}
	if _, err := parseLock([]byte(`{"lockfileVersion":1}`), nil); err == nil {
		t.Fatal("lockfile v1 accepted")
	}
	if _, err := parseLock([]byte(lock), []manifest.Package{{Name: "left-pad", Version: "1.3.0"}}); err == nil {
		t.Fatal("a declared package npm did not install went unnoticed")
	}
}

// The same files make the same build context, whatever their owners
// and times; setuid files are refused.
func TestContextTarDeterministic(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "usr/lib/python3/dist-packages"), 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "usr/lib/python3/dist-packages/tabulate.py")
	if err := os.WriteFile(f, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("tabulate.py", filepath.Join(dir, "usr/lib/python3/dist-packages/t.py")); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := contextTar(&a, []byte("FROM x\n"), dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f, epoch.AddDate(5, 0, 0), epoch.AddDate(5, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if err := contextTar(&b, []byte("FROM x\n"), dir); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the context changed with a file's time")
	}
	if err := os.Chmod(f, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := contextTar(&b, []byte("FROM x\n"), dir); err == nil || !strings.Contains(err.Error(), "setuid") {
		t.Fatal(err)
	}
}

func TestCodenameAndMirror(t *testing.T) {
	if c := codename([]byte("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_CODENAME=bookworm\n")); c != "bookworm" {
		t.Fatal(c)
	}
	if m := aptSourceRe.FindStringSubmatch("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"); m == nil || m[1] != "http://deb.debian.org/debian" {
		t.Fatal(m)
	}
	if m := aptSourceRe.FindStringSubmatch("deb [arch=amd64] http://mirror.example/debian/ bookworm main\n"); m == nil || m[1] != "http://mirror.example/debian" {
		t.Fatal(m)
	}
	if m := aptSourceRe.FindStringSubmatch("URIs: http://deb.debian.org/debian-security\n"); m != nil {
		t.Fatal(m)
	}
}

// npm's own words (npm 11) for an unknown package and an unknown version.
func TestNPMNotFound(t *testing.T) {
	e404 := "npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/no-such-pkg\nnpm error 404\nnpm error 404  The requested resource 'no-such-pkg@1.0.0' could not be found or you do not have permission to access it.\n"
	if got := npmNotFound(e404); got != "packages.javascript: unknown package no-such-pkg@1.0.0 in the npm registry\n" {
		t.Errorf("%q", got)
	}
	etarget := "npm error code ETARGET\nnpm error notarget No matching version found for is-number@99.0.0.\n"
	if got := npmNotFound(etarget); got != "packages.javascript: unknown version is-number@99.0.0 in the npm registry\n" {
		t.Errorf("%q", got)
	}
	if npmNotFound("npm error code ECONNREFUSED\n") != "" {
		t.Error("a network failure read as an unknown package")
	}
}

func TestPythonMinor(t *testing.T) {
	for in, want := range map[string]string{"3.11.2-1+b1": "3.11", "3.12.1-2": "3.12", "3": "", "": ""} {
		if got := pythonMinor(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
