package contract

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestSecurityDocNamesEveryForbiddenSyscall: docs/security.md lists the
// calls that kill a program, from the one list.
func TestSecurityDocNamesEveryForbiddenSyscall(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range ForbiddenSyscallNames() {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/security.md does not name `%s`", name)
		}
	}
}

// TestDesignLayoutMatchesTree: docs/design.md's layout table names every
// Go package of the tree (those under deploy, scripts and examples by their
// folder), and every path it names exists.
func TestDesignLayoutMatchesTree(t *testing.T) {
	doc, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	inTable := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| path |") {
			inTable = true
			continue
		}
		if inTable && !strings.HasPrefix(line, "|") {
			break
		}
		if !inTable || strings.HasPrefix(line, "| ---") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, f := range strings.Split(first, ",") {
			named[strings.Trim(strings.TrimSpace(f), "`")] = true
		}
	}
	if len(named) == 0 {
		t.Fatal("docs/design.md has no layout table (a row `| path | ...`)")
	}
	for p := range named {
		if _, err := os.Stat("../" + p); err != nil {
			t.Errorf("docs/design.md's layout names %s, which is not in the tree", p)
		}
	}
	byFolder := map[string]bool{"deploy": true, "scripts": true, "examples": true}
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
		if d.IsDir() {
			switch {
			case rel == "..":
				return nil
			case strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || rel == "bin" || rel == "dist":
				return filepath.SkipDir
			case byFolder[strings.Split(rel, "/")[0]]:
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") && rel[:strings.LastIndex(rel, "/")] != "e2e" {
			return nil
		}
		if dir := rel[:strings.LastIndex(rel, "/")]; !named[dir] {
			t.Errorf("package %s is not in docs/design.md's layout table", dir)
			named[dir] = true // once
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDocLinksResolve: every relative link of the README and docs/ names a
// file that exists and, with a #fragment, a heading of that file (GitHub's
// anchors), so moving a section cannot leave a link dangling.
func TestDocLinksResolve(t *testing.T) {
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../README.md")
	anchors := map[string]map[string]bool{}
	headings := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		for _, line := range markdownLines(t, path) {
			if strings.HasPrefix(line, "#") {
				a[githubAnchor(strings.TrimLeft(line, "#"))] = true
			}
		}
		anchors[path] = a
		return a
	}
	for _, doc := range docs {
		for _, line := range markdownLines(t, doc) {
			for _, m := range linkRe.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, frag, _ := strings.Cut(target, "#")
				path := doc
				if file != "" {
					path = filepath.Join(filepath.Dir(doc), file)
					if _, err := os.Stat(path); err != nil {
						t.Errorf("%s links to %s, which does not exist", doc, target)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(path, ".md") && !headings(path)[frag] {
					t.Errorf("%s links to %s: %s has no such heading", doc, target, path)
				}
			}
		}
	}
}

var linkRe = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLines is a file's lines outside fenced code blocks.
func markdownLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

// githubAnchor is the fragment GitHub gives a heading: lower case, spaces as
// hyphens, punctuation other than hyphens and underscores dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
