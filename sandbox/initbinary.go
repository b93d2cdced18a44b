package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// ReadInitBinary finds runbox-init for a platform's architecture ("amd64",
// "x86_64", "arm64", "aarch64") in dir: runbox-init-linux-<arch>;
// linux_<arch>/runbox-init, where `GOOS=linux go install` puts it beside a
// `go install`ed runbox; or runbox-init when the server itself is that
// linux build.
func ReadInitBinary(dir, arch string) ([]byte, error) {
	arch = map[string]string{"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64", "amd64": "amd64"}[arch]
	candidates := []string{filepath.Join(dir, "runbox-init-linux-"+arch), filepath.Join(dir, "linux_"+arch, "runbox-init")}
	if runtime.GOOS == "linux" && runtime.GOARCH == arch {
		candidates = append(candidates, filepath.Join(dir, "runbox-init"))
	}
	for _, p := range candidates {
		if b, err := os.ReadFile(p); err == nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("runbox-init for linux/%s not found (looked for %v)", arch, candidates)
}

// InitDirOr is dir, or when it is empty the directory of the running
// binary, where `make build` and the release put runbox-init beside it.
func InitDirOr(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating runbox-init: %w", err)
	}
	return initDirOf(exe), nil
}

// initDirOf is the directory of runbox-init for the binary at exe.
func initDirOf(exe string) string {
	dir := filepath.Dir(exe)
	// Started through a symbolic link (Homebrew links bin/runbox to the
	// keg's libexec/runbox, where runbox-init is): the link's target's
	// directory, when runbox-init is there and not beside the link.
	if matches, _ := filepath.Glob(filepath.Join(dir, "runbox-init*")); len(matches) == 0 {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(real), "runbox-init*")); len(matches) > 0 {
				return filepath.Dir(real)
			}
		}
	}
	return dir
}
