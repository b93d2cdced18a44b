package images

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed build.sh all:sandbox
var recipe embed.FS

// RecipeLabel is the image label that carries the recipe's hash.
const RecipeLabel = "io.runbox.recipe"

// RecipeHash is the hash build.sh labels the image with: sha256sum of
// images/build.sh, then of every file under images/sandbox in byte order,
// hashed again, first 16 hex digits.
func RecipeHash() string {
	var lines strings.Builder
	sum := func(name string) {
		b, err := recipe.ReadFile(name)
		if err != nil {
			panic(err) // embedded: cannot happen
		}
		h := sha256.Sum256(b)
		fmt.Fprintf(&lines, "%s  images/%s\n", hex.EncodeToString(h[:]), name)
	}
	sum("build.sh")
	var files []string
	_ = fs.WalkDir(recipe, "sandbox", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	sort.Strings(files)
	for _, f := range files {
		sum(f)
	}
	h := sha256.Sum256([]byte(lines.String()))
	return hex.EncodeToString(h[:])[:16]
}
