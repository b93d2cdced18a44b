package contract

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
