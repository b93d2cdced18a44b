package setup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/runbox-mcp/runbox/images"
)

// HostBuild runs images/build.sh on this machine (debootstrap, then
// `docker import`; Linux, as root, with debootstrap installed). It uses the
// checkout at dir when that holds this binary's recipe; otherwise it writes the embedded recipe to the
// user's cache directory (runbox/recipe) and builds there. The script's
// output goes to out.
func HostBuild(dir string, out io.Writer) func(ctx context.Context, image string) error {
	return func(ctx context.Context, image string) error {
		if runtime.GOOS != "linux" {
			return fmt.Errorf("the host build needs Linux (debootstrap, chroot); on %s use --method engine", runtime.GOOS)
		}
		if _, err := exec.LookPath("debootstrap"); err != nil {
			return errors.New("the host build needs debootstrap (on Debian: apt-get install debootstrap, or `make setup`)")
		}
		root, err := recipeDir(dir)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "images", "build.sh"))
		cmd.Env = append(os.Environ(), "RUNBOX_IMAGE="+image)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("images/build.sh in %s: %w", root, err)
		}
		return nil
	}
}

// recipeDir returns a directory whose images/ holds this binary's recipe.
func recipeDir(dir string) (string, error) {
	files, err := images.Files()
	if err != nil {
		return "", err
	}
	if dir != "" && sameFiles(dir, files) {
		return dir, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no checkout of this runbox's recipe here and no cache directory: %w", err)
	}
	root := filepath.Join(cache, "runbox", "recipe")
	// build.sh hashes every file under images/sandbox: none of an older
	// recipe may stay. The script keeps its .debs and rootfs tarball in
	// the user's cache, whichever copy runs.
	if err := os.RemoveAll(filepath.Join(root, "images")); err != nil {
		return "", err
	}
	for name, b := range files {
		p := filepath.Join(root, "images", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", err
		}
	}
	return root, nil
}

// sameFiles says whether dir/images holds exactly these files' contents.
func sameFiles(dir string, files map[string][]byte) bool {
	for name, b := range files {
		have, err := os.ReadFile(filepath.Join(dir, "images", filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(have, b) {
			return false
		}
	}
	return true
}
