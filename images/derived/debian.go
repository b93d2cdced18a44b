package derived

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
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
