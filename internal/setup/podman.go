package setup

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// podmanBuild builds req with the podman CLI. Podman's Docker-compatible
// build API runs RUN steps with Podman's default capabilities, which lack
// CAP_MKNOD, and debootstrap must create /dev's nodes in the tree it
// builds; the CLI can add it (--cap-add MKNOD, to the build's containers
// only: the boxes runbox starts later still drop every capability). The
// CLI reaches the same engine: Podman machine's default connection on
// macOS and Windows, the local storage on Linux.
func podmanBuild(ctx context.Context, podman string, req BuildRequest, progress func(string)) error {
	dir, err := os.MkdirTemp("", "runbox-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := untar(req.Context, dir); err != nil {
		return err
	}
	args := []string{"build", "--cap-add", "MKNOD", "--layers=false", "--no-cache", "-t", req.Tag}
	if req.Network != "" {
		args = append(args, "--network", req.Network)
	}
	keys := make([]string, 0, len(req.BuildArgs))
	for k := range req.BuildArgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--build-arg", k+"="+req.BuildArgs[k])
	}
	cmd := exec.CommandContext(ctx, podman, append(args, dir)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		progress(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("podman build: %w", err)
	}
	return nil
}

// untar writes a build context (regular files and directories only) under
// dir.
func untar(b []byte, dir string) error {
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if !filepath.IsLocal(name) {
			return fmt.Errorf("build context: %q leaves the directory", h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, data, os.FileMode(h.Mode)&0o755); err != nil {
				return err
			}
		default:
			return fmt.Errorf("build context: %q is not a file or directory", h.Name)
		}
	}
}

// isPodmanNoMknod says whether a build failed because its containers could
// not create device nodes (Podman's default capabilities).
func isPodmanNoMknod(lines []string) bool {
	for _, l := range lines {
		if strings.Contains(l, "mknod") && strings.Contains(l, "Operation not permitted") {
			return true
		}
	}
	return false
}
