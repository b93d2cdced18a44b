package derived

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/manifest"
)

// aptInst is one package apt's plan installs.
type aptInst struct {
	Name, Version, Arch string
	// Replaces is the version of the base image's package it would
	// upgrade ("" for a new package).
	Replaces string
}

// debFile is the name apt gives the package's file in its archive.
func (a aptInst) debFile() string {
	return a.Name + "_" + strings.ReplaceAll(a.Version, ":", "%3a") + "_" + a.Arch + ".deb"
}

var (
	instRe = regexp.MustCompile(`^Inst (\S+) (?:\[(\S+)\] )?\((\S+) .*\[([a-z0-9-]+)\]\)`)
	remvRe = regexp.MustCompile(`^Remv (\S+)`)
)

// parsePlan reads `apt-get install -s`: the packages it would install.
// A plan that removes or replaces a package of the base image is refused:
// the layer only adds.
func parsePlan(out string) ([]aptInst, error) {
	var plan []aptInst
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := remvRe.FindStringSubmatch(line); m != nil {
			errs = append(errs, fmt.Errorf("it would remove the base image's %s", m[1]))
			continue
		}
		m := instRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, _, _ := strings.Cut(m[1], ":") // libfoo1:amd64 on a multi-arch host
		in := aptInst{Name: name, Replaces: m[2], Version: m[3], Arch: m[4]}
		if in.Replaces != "" {
			errs = append(errs, fmt.Errorf("it would replace the base image's %s %s with %s", in.Name, in.Replaces, in.Version))
			continue
		}
		plan = append(plan, in)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("the packages conflict with the base image: %w (pin versions that the base image's packages satisfy)", errors.Join(errs...))
	}
	return plan, nil
}

var (
	noPackageRe = regexp.MustCompile(`^E: Unable to locate package (\S+)`)
	noVersionRe = regexp.MustCompile(`^E: Version '([^']+)' for '([^']+)' was not found`)
)

// aptError says why apt refused, naming the package: unknown packages and
// versions first, in the manifest's terms.
func aptError(out, suites string) error {
	var errs []error
	var other []string
	for _, line := range strings.Split(out, "\n") {
		switch m := noPackageRe.FindStringSubmatch(line); {
		case m != nil:
			errs = append(errs, fmt.Errorf("packages.python: unknown package %s: Debian %s has no such package", m[1], suites))
			continue
		}
		switch m := noVersionRe.FindStringSubmatch(line); {
		case m != nil:
			errs = append(errs, fmt.Errorf("packages.python: unknown version %s of %s in Debian %s (`apt-cache madison %s` lists the versions there)", m[1], m[2], suites, m[2]))
			continue
		}
		if strings.HasPrefix(line, "E: ") {
			other = append(other, strings.TrimPrefix(line, "E: "))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(other) > 0 {
		return fmt.Errorf("apt-get: %s", strings.Join(other, "; "))
	}
	return nil
}

// stanzas splits a dpkg status file (or control file) into paragraphs.
func stanzas(b []byte) [][]byte {
	var out [][]byte
	for _, p := range bytes.Split(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")), []byte("\n\n")) {
		if p = bytes.Trim(p, "\n"); len(p) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// field returns a paragraph's field (its first line only).
func field(p []byte, name string) string {
	for _, line := range strings.Split(string(p), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// depName is a dependency's package: no version, no architecture qualifier.
func depName(alt string) string {
	alt = strings.TrimSpace(alt)
	if i := strings.IndexAny(alt, " ("); i >= 0 {
		alt = alt[:i]
	}
	name, _, _ := strings.Cut(alt, ":")
	return name
}

// consistentStatus returns the base image's dpkg status with every
// dependency that nothing installed satisfies dropped. The base image
// purged what a few edges only pulled in (images/sandbox/cut.txt, a
// compiler), so its status is "broken" in apt's eyes and apt would plan
// nothing; the dropped edges are exactly those.
func consistentStatus(status []byte) []byte {
	ps := stanzas(status)
	have := map[string]bool{}
	for _, p := range ps {
		if !strings.HasSuffix(field(p, "Status"), " installed") {
			continue
		}
		have[field(p, "Package")] = true
		for _, prov := range strings.Split(field(p, "Provides"), ",") {
			if n := depName(prov); n != "" {
				have[n] = true
			}
		}
	}
	var out bytes.Buffer
	for _, p := range ps {
		for _, line := range strings.Split(string(p), "\n") {
			name, value, ok := strings.Cut(line, ": ")
			if ok && (name == "Depends" || name == "Pre-Depends") {
				var keep []string
				for _, group := range strings.Split(value, ",") {
					for _, alt := range strings.Split(group, "|") {
						if have[depName(alt)] {
							keep = append(keep, strings.TrimSpace(group))
							break
						}
					}
				}
				if len(keep) == 0 {
					continue
				}
				line = name + ": " + strings.Join(keep, ", ")
			}
			out.WriteString(line + "\n")
		}
		out.WriteString("\n")
	}
	return out.Bytes()
}

// installedStanza is a package's control paragraph as dpkg's status
// records an installed package, so that dpkg-query in the box lists it.
func installedStanza(control []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(strings.Trim(string(control), "\n"), "\n") {
		out.WriteString(line + "\n")
		if strings.HasPrefix(line, "Package:") {
			out.WriteString("Status: install ok installed\n")
		}
	}
	out.WriteString("\n")
	return out.Bytes()
}

// debLock is one resolved .deb, as kept in the lock directory.
type debLock struct {
	Installed
	File string `json:"file"`
}

// debianLayer resolves the python packages' closure against the base
// image's own dpkg status, downloads the .debs (apt checks them against
// the archive's signed indexes), unpacks them into layer and records them
// in the layer's copy of the dpkg status.
func debianLayer(ctx context.Context, cli *client.Client, o Options, baseID, arch string, ps []manifest.Package, layer, lockDir string) ([]Installed, error) {
	// /etc/os-release is a link to /usr/lib/os-release on Debian.
	files, err := readFromImage(ctx, cli, baseID, "/var/lib/dpkg/status", "/etc/os-release", "/usr/lib/os-release")
	if err != nil {
		return nil, fmt.Errorf("reading the base image's package list: %w", err)
	}
	status := files["/var/lib/dpkg/status"]
	if len(status) == 0 {
		return nil, errors.New("the base image has no /var/lib/dpkg/status: python packages need a Debian base")
	}
	aptDir := filepath.Join(o.CacheDir, "apt")
	archives := filepath.Join(aptDir, "cache", "archives")
	lockFile := filepath.Join(lockDir, "debian.json")
	var locked []debLock
	if b, err := os.ReadFile(lockFile); err == nil && json.Unmarshal(b, &locked) == nil && allPresent(archives, locked) {
		o.logf("python: the resolution of a previous build (%d packages, every .deb in the cache with its sha256)", len(locked))
	} else {
		locked, err = aptResolve(ctx, o, aptDir, status, codename(append(files["/etc/os-release"], files["/usr/lib/os-release"]...)), arch, ps)
		if err != nil {
			return nil, err
		}
		b, _ := json.MarshalIndent(locked, "", "  ")
		if err := os.WriteFile(lockFile, b, 0o644); err != nil {
			return nil, err
		}
	}
	var out []Installed
	newStatus := bytes.TrimRight(status, "\n")
	newStatus = append(newStatus, '\n', '\n')
	for _, d := range locked {
		out = append(out, d.Installed)
		if d.File == "" {
			continue // in the base image already
		}
		deb := filepath.Join(archives, d.File)
		if b, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, layer).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("dpkg-deb -x %s: %v: %s", d.File, err, b)
		}
		control, err := exec.CommandContext(ctx, "dpkg-deb", "-f", deb).Output()
		if err != nil {
			return nil, fmt.Errorf("dpkg-deb -f %s: %w", d.File, err)
		}
		newStatus = append(newStatus, installedStanza(control)...)
	}
	if err := byteCompile(ctx, o, layer, status); err != nil {
		return nil, err
	}
	// As the base image is slimmed: no docs, man pages or test suites.
	for _, p := range []string{"usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/bug"} {
		if err := os.RemoveAll(filepath.Join(layer, p)); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(filepath.Join(layer, "var/lib/dpkg"), 0o755); err != nil {
		return nil, err
	}
	return out, os.WriteFile(filepath.Join(layer, "var/lib/dpkg/status"), newStatus, 0o644)
}

// byteCompile writes the .pyc files that Debian's postinst (py3compile)
// would have, so that an import in the box, whose root is read-only, does
// not compile the module again in every run. It uses this machine's
// python3 when it is the image's minor version (the .pyc format is per
// minor version), with source-hash validation (the layer's times are
// fixed) and a fixed hash seed, so the same sources give the same files.
func byteCompile(ctx context.Context, o Options, layer string, status []byte) error {
	site := filepath.Join(layer, "usr/lib/python3/dist-packages")
	if _, err := os.Stat(site); err != nil {
		return nil
	}
	want := ""
	for _, p := range stanzas(status) {
		if field(p, "Package") == "python3" {
			want = pythonMinor(field(p, "Version"))
		}
	}
	host, err := exec.CommandContext(ctx, "python3", "-c", `import sys; print("%d.%d" % sys.version_info[:2])`).Output()
	if have := strings.TrimSpace(string(host)); err != nil || want == "" || have != want {
		o.logf("python: not byte-compiled: this machine's python3 is %q, the image's %q (imports compile in each run)", have, want)
		return nil
	}
	cmd := exec.CommandContext(ctx, "python3", "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "checked-hash", "-s", layer, "-p", "/", site)
	cmd.Env = append(os.Environ(), "PYTHONHASHSEED=0", "SOURCE_DATE_EPOCH=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("byte-compiling the python packages: %v: %s", err, lastLines(string(b), 8))
	}
	return nil
}

// pythonMinor is "3.11" of Debian's python3 version "3.11.2-1+b1".
func pythonMinor(debVersion string) string {
	parts := strings.SplitN(debVersion, ".", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "." + strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
}

// allPresent says whether every locked .deb is in the archive with its
// recorded sha256.
func allPresent(archives string, locked []debLock) bool {
	if len(locked) == 0 {
		return false
	}
	for _, d := range locked {
		if d.File == "" {
			continue
		}
		if sum, err := fileSHA256(filepath.Join(archives, d.File)); err != nil || sum != d.SHA256 {
			return false
		}
	}
	return true
}

// aptResolve runs the host's apt-get against a private apt root whose
// dpkg status is the base image's: what it plans to install is the
// closure the layer needs, and nothing of the base is replaced.
func aptResolve(ctx context.Context, o Options, aptDir string, status []byte, suite, arch string, ps []manifest.Package) ([]debLock, error) {
	if _, err := exec.LookPath("apt-get"); err != nil {
		return nil, errors.New("python packages are resolved with apt-get on this machine (Debian or Ubuntu); it is not on PATH")
	}
	const keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	if _, err := os.Stat(keyring); err != nil {
		return nil, fmt.Errorf("%s is missing: install debian-archive-keyring", keyring)
	}
	if suite == "" {
		return nil, errors.New("the base image's /etc/os-release names no VERSION_CODENAME")
	}
	mirror := debianMirror(o.Mirror)
	for _, d := range []string{"state/lists/partial", "cache/archives/partial", "etc/parts", "log"} {
		if err := os.MkdirAll(filepath.Join(aptDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	sources := fmt.Sprintf("deb [signed-by=%s] %s %s main\ndeb [signed-by=%s] %s %s-updates main\n", keyring, mirror, suite, keyring, mirror, suite)
	if err := os.WriteFile(filepath.Join(aptDir, "etc", "sources.list"), []byte(sources), 0o644); err != nil {
		return nil, err
	}
	statusFile := filepath.Join(aptDir, "status")
	if err := os.WriteFile(statusFile, consistentStatus(status), 0o644); err != nil {
		return nil, err
	}
	args := []string{"-q",
		"-o", "Dir::State=" + filepath.Join(aptDir, "state"),
		"-o", "Dir::State::status=" + statusFile,
		"-o", "Dir::Cache=" + filepath.Join(aptDir, "cache"),
		"-o", "Dir::Etc::SourceList=" + filepath.Join(aptDir, "etc", "sources.list"),
		"-o", "Dir::Etc::SourceParts=" + filepath.Join(aptDir, "etc", "parts"),
		"-o", "Dir::Etc::Parts=" + filepath.Join(aptDir, "etc", "parts"),
		"-o", "Dir::Etc::PreferencesParts=" + filepath.Join(aptDir, "etc", "parts"),
		"-o", "Dir::Etc::Preferences=" + filepath.Join(aptDir, "etc", "preferences"),
		"-o", "Dir::Log=" + filepath.Join(aptDir, "log"),
		"-o", "APT::Architecture=" + arch, "-o", "APT::Architectures=" + arch,
		"-o", "Acquire::Languages=none", "-o", "APT::Install-Recommends=false", "-o", "APT::Install-Suggests=false",
		"-o", "Debug::NoLocking=true", "-o", "APT::Get::AllowUnauthenticated=false",
	}
	if os.Geteuid() == 0 {
		args = append(args, "-o", "APT::Sandbox::User=root")
	}
	apt := func(sub ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "apt-get", append(slices.Clone(args), sub...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	suites := suite + " (" + mirror + ")"
	o.logf("python: apt-get update from %s %s and %s-updates", mirror, suite, suite)
	if out, err := apt("update"); err != nil {
		return nil, fmt.Errorf("apt-get update: %v: %s", err, lastLines(out, 5))
	}
	var want []string
	for _, p := range ps {
		want = append(want, p.Name+"="+p.Version)
	}
	out, err := apt(append([]string{"install", "-s", "--no-install-recommends"}, want...)...)
	if err != nil {
		if e := aptError(out, suites); e != nil {
			return nil, e
		}
		return nil, fmt.Errorf("apt-get install -s: %v: %s", err, lastLines(out, 8))
	}
	plan, err := parsePlan(out)
	if err != nil {
		return nil, err
	}
	if len(plan) > 0 {
		o.logf("python: downloading %d .debs", len(plan))
		if out, err := apt(append([]string{"install", "-y", "--download-only", "--no-install-recommends"}, want...)...); err != nil {
			if e := aptError(out, suites); e != nil {
				return nil, e
			}
			return nil, fmt.Errorf("apt-get install --download-only: %v: %s", err, lastLines(out, 8))
		}
	}
	archives := filepath.Join(aptDir, "cache", "archives")
	var locked []debLock
	for _, in := range plan {
		sum, err := fileSHA256(filepath.Join(archives, in.debFile()))
		if err != nil {
			return nil, fmt.Errorf("apt planned %s %s but its .deb is not in the cache: %w", in.Name, in.Version, err)
		}
		declared := slices.ContainsFunc(ps, func(p manifest.Package) bool { return p.Name == in.Name })
		locked = append(locked, debLock{Installed{Ecosystem: manifest.EcosystemDebian, Name: in.Name, Version: in.Version, SHA256: sum, Declared: declared}, in.debFile()})
	}
	// A declared package the base image has at that version: nothing to
	// add, but the image's list still names it.
	for _, p := range ps {
		if !slices.ContainsFunc(locked, func(d debLock) bool { return d.Name == p.Name }) {
			locked = append(locked, debLock{Installed: Installed{Ecosystem: manifest.EcosystemDebian, Name: p.Name, Version: p.Version, Declared: true, InBase: true}})
		}
	}
	return locked, nil
}

// codename reads VERSION_CODENAME from an os-release file.
func codename(osRelease []byte) string {
	for _, line := range strings.Split(string(osRelease), "\n") {
		if v, ok := strings.CutPrefix(line, "VERSION_CODENAME="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

var aptSourceRe = regexp.MustCompile(`(?m)^(?:URIs:|deb)\s+(?:\[[^]]*\]\s+)?([a-z]+://\S+/debian)/?(?:\s|$)`)

// debianMirror is the mirror to use: the named one, RUNBOX_DEBIAN_MIRROR,
// the machine's own apt source for Debian (where only it may be
// reachable), else deb.debian.org.
func debianMirror(named string) string {
	if named != "" {
		return named
	}
	if m := os.Getenv("RUNBOX_DEBIAN_MIRROR"); m != "" {
		return m
	}
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	files = append(files, "/etc/apt/sources.list")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if m := aptSourceRe.FindSubmatch(b); m != nil {
			return string(m[1])
		}
	}
	return "http://deb.debian.org/debian"
}
