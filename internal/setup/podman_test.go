package setup

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/images"
)

// The podman CLI gets MKNOD for the build's containers, the build
// arguments, the tag and the recipe as a directory.
func TestPodmanBuildCommand(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in podman is a shell script")
	}
	dir := t.TempDir()
	podman := filepath.Join(dir, "podman")
	script := "#!/bin/sh\necho \"args: $*\"\nfor a; do last=$a; done\nls \"$last\"\necho images: debootstrap took 1s\n"
	if err := os.WriteFile(podman, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	bctx, err := images.BuildContext()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	err = podmanBuild(context.Background(), podman, BuildRequest{Context: bctx, Tag: "runbox/sandbox:bookworm", Network: "host",
		BuildArgs: map[string]string{"RECIPE": "00203c306312a9a9", "BASE": "debian:bookworm"}}, func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Join(lines, "\n")
	for _, want := range []string{"build --cap-add MKNOD --layers=false --no-cache -t runbox/sandbox:bookworm --network host --build-arg BASE=debian:bookworm --build-arg RECIPE=00203c306312a9a9 ",
		"Dockerfile", "rootfs.sh", "packages.txt", "python", "images: debootstrap took 1s"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

func TestUntarRefusesEscape(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "../evil", Size: 1, Mode: 0o644})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if err := untar(b.Bytes(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "leaves") {
		t.Fatalf("err %v", err)
	}
}

func TestIsPodmanNoMknod(t *testing.T) {
	if !isPodmanNoMknod([]string{"images: debootstrap failed; the end of /logs/debootstrap.log:", "mknod: /rootfs/test-dev-null: Operation not permitted"}) {
		t.Error("Podman's refusal not recognised")
	}
	if isPodmanNoMknod([]string{"E: Couldn't download packages"}) {
		t.Error("another failure taken for Podman's")
	}
}
