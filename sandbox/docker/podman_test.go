package docker

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/system"

	"github.com/runbox-mcp/runbox/manifest"
)

// TestPodmanSpec: each item Podman reads differently is said in its form,
// and nothing else of the profile changes.
func TestPodmanSpec(t *testing.T) {
	m := manifest.Default()
	lang, _ := m.Language("python")
	_, docker := boxSpec(m, lang, nil, "v", nil)
	_, host := boxSpec(m, lang, nil, "v", nil)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if err := podmanSpec(host); err != nil {
		t.Fatal(err)
	}
	profile, err := seccompFile(docker.SecurityOpt[1])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(host.SecurityOpt[:2], []string{"no-new-privileges", "seccomp=" + profile}) {
		t.Errorf("security opts %q", host.SecurityOpt)
	}
	if want := "mask=" + strings.Join(docker.MaskedPaths, ":"); len(host.SecurityOpt) != 3 || host.SecurityOpt[2] != want {
		t.Errorf("masked paths not passed as mask=: %q", host.SecurityOpt)
	}
	for _, p := range []string{"/run", "/var/tmp"} {
		if opts := host.Tmpfs[p]; !strings.HasPrefix(opts, "ro,") {
			t.Errorf("%s: %q, want an empty read-only tmpfs over Podman's writable one", p, opts)
		}
		delete(host.Tmpfs, p)
	}
	for path, opts := range host.Tmpfs {
		o := strings.Split(opts, ",")
		for _, want := range []string{"rw", "nosuid", "nodev", "noexec", "U", "notmpcopyup", "size=67108864"} {
			if !slices.Contains(o, want) {
				t.Errorf("%s: %q lacks %s", path, opts, want)
			}
		}
		for _, bad := range []string{"uid=", "gid=", "nr_inodes="} {
			if strings.Contains(opts, bad) {
				t.Errorf("%s: %q has %s, which Podman refuses", path, opts, bad)
			}
		}
	}
	if host.Tmpfs["/tmp"] == host.Tmpfs["/workspace"] || !strings.Contains(host.Tmpfs["/tmp"], "mode=1777") {
		t.Errorf("tmpfs modes %q", host.Tmpfs)
	}
	last := host.Ulimits[len(host.Ulimits)-1]
	if len(host.Ulimits) != len(docker.Ulimits)+1 || last.Name != "nproc" || last.Hard != podmanNproc() || last.Soft != last.Hard || last.Hard <= 0 {
		t.Errorf("ulimits %+v", host.Ulimits)
	}
	// Everything else is Docker's profile, untouched.
	host.SecurityOpt, host.Tmpfs, host.Ulimits = docker.SecurityOpt, docker.Tmpfs, docker.Ulimits
	if !reflect.DeepEqual(host, docker) {
		t.Errorf("podmanSpec changed more than it says")
	}
}

func TestIsPodman(t *testing.T) {
	if !isPodman([]system.ComponentVersion{{Name: "Conmon"}, {Name: "Podman Engine"}}) || isPodman([]system.ComponentVersion{{Name: "Engine"}, {Name: "containerd"}}) {
		t.Error("isPodman")
	}
}

func TestSeccompFile(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	opt := seccompOpts[manifest.IsolationRunc]
	p, err := seccompFile(opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || "seccomp="+string(b) != opt {
		t.Fatalf("profile at %s differs from the inline one (%v)", p, err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
	// Removed (a cache clean-up): written again.
	os.Remove(p)
	if p2, err := seccompFile(opt); err != nil || p2 != p {
		t.Fatalf("second write: %s %v", p2, err)
	}
	// A directory others may write is refused, never used.
	if err := os.Chmod(filepath.Join(cache, "runbox", "seccomp"), 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := seccompFile(opt); err == nil {
		t.Fatal("a profile directory others may write was used")
	}
}
