//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// packagesManifest declares a Debian python3-* package and an npm package
// that the base image does not have (images/sandbox/packages.txt).
const packagesManifest = "packages:\n  python: [tabulate=0.8.9-1]\n  javascript: [is-number@7.0.0]\n"

// imagesBuild runs `runbox images build --json` and returns its results
// and how long it took.
func imagesBuild(t *testing.T, env []string, manifestPath string) ([]derivedResult, time.Duration) {
	t.Helper()
	cmd := exec.Command(runboxBin, "images", "build", "--json", "--manifest", manifestPath)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("runbox images build: %v\n%s", err, stderr.String())
	}
	var res []derivedResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("images build --json: %v\n%s", err, out)
	}
	return res, took
}

type derivedResult struct {
	Tag      string `json:"tag"`
	ID       string `json:"id"`
	Built    bool   `json:"built"`
	Packages []struct {
		Ecosystem, Name, Version, SHA256, Integrity string
		Declared                                    bool
	} `json:"packages"`
	SizeBytes  int64 `json:"size_bytes"`
	LayerBytes int64 `json:"layer_bytes"`
}

// lastLayer is the diff ID of an image's top layer.
func lastLayer(t *testing.T, ref string) string {
	t.Helper()
	out, err := exec.Command("docker", "image", "inspect", "-f", "{{ json .RootFS.Layers }}", ref).Output()
	if err != nil {
		t.Fatal(err)
	}
	var layers []string
	if err := json.Unmarshal(out, &layers); err != nil || len(layers) == 0 {
		t.Fatalf("%s: layers %s", ref, out)
	}
	return layers[len(layers)-1]
}

// TestPackagesDerivedImage: manifest packages become a derived image built
// from Debian's archive and the npm registry; code imports them through
// the real server in real boxes (runc and gVisor); the tool description,
// runbox://manifest and doctor --json name them with versions and
// hashes; a second build is a no-op under a second; and the same build
// again with the mirror and the registry unreachable gives the same layer
// from the kept resolution.
func TestPackagesDerivedImage(t *testing.T) {
	mf := writeManifest(t, "audit:\n  enabled: false\n"+packagesManifest)
	cache := []string{"XDG_CACHE_HOME=" + t.TempDir()}
	out, err := exec.Command(runboxBin, "manifest", "--manifest", mf).Output()
	if err != nil {
		t.Fatal(err)
	}
	var eff struct {
		Languages []struct{ Name, Image string }
	}
	if err := json.Unmarshal(out, &eff); err != nil {
		t.Fatal(err)
	}
	tag := eff.Languages[0].Image
	if !strings.HasPrefix(tag, "runbox/sandbox-packages:") {
		t.Fatalf("the languages do not run on the derived image: %s", out)
	}
	// The tag is this test's (a hash of the list): start and end without it.
	_ = exec.Command("docker", "rmi", tag).Run()
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", tag).Run() })

	res, took := imagesBuild(t, cache, mf)
	if len(res) != 1 || !res[0].Built || res[0].Tag != tag {
		t.Fatalf("first build: %+v", res)
	}
	t.Logf("built %s in %s: image %d bytes, layer %d bytes", tag, took.Round(time.Millisecond), res[0].SizeBytes, res[0].LayerBytes)
	hashes := map[string]string{}
	for _, p := range res[0].Packages {
		hashes[p.Name] = p.Version + " " + p.SHA256 + p.Integrity
	}
	if h := hashes["python3-tabulate"]; !strings.HasPrefix(h, "0.8.9-1 ") || len(h) != len("0.8.9-1 ")+64 {
		t.Errorf("python3-tabulate: %q", h)
	}
	if h := hashes["is-number"]; h != "7.0.0 sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng==" {
		t.Errorf("is-number: %q", h)
	}

	again, took := imagesBuild(t, cache, mf)
	if len(again) != 1 || again[0].Built || again[0].ID != res[0].ID {
		t.Fatalf("second build was not a no-op: %+v", again)
	}
	if took > time.Second {
		t.Errorf("a no-op build took %s", took)
	}

	s := engineServer(t, "", packagesManifest)
	r, _ := s.call(t, map[string]any{"language": "python", "code": "import tabulate\nprint(tabulate.__version__)\nprint(tabulate.tabulate([[1, 2]], tablefmt='plain'))"})
	mustOK(t, r)
	if r.Stdout != "0.8.9\n1  2\n" {
		t.Errorf("python stdout %q", r.Stdout)
	}
	r, _ = s.call(t, map[string]any{"language": "javascript", "code": "const isNumber = require('is-number');\nconsole.log(isNumber('5'), isNumber('x'), require('is-number/package.json').version);\nimport('is-number').then(m => console.log(m.default(7)));"})
	mustOK(t, r)
	if r.Stdout != "true false 7.0.0\ntrue\n" {
		t.Errorf("javascript stdout %q", r.Stdout)
	}
	desc := toolDescriptions(t, s.c)["run_code"]
	for _, want := range []string{"python3-tabulate 0.8.9-1", "is-number 7.0.0"} {
		if !strings.Contains(desc, want) {
			t.Errorf("run_code's description lacks %q:\n%s", want, desc)
		}
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "runbox://manifest"
	mres, err := s.c.ReadResource(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if text := mres.Contents[0].(mcp.TextResourceContents).Text; !strings.Contains(text, `"python3-tabulate"`) || !strings.Contains(text, `"7.0.0"`) || !strings.Contains(text, tag) {
		t.Errorf("runbox://manifest lacks the packages or the image:\n%s", text)
	}

	var rep struct {
		OK       bool `json:"ok"`
		Packages []struct {
			Tag      string `json:"tag"`
			Current  bool   `json:"current"`
			Packages []struct {
				Name, Version, SHA256, Integrity string
			} `json:"packages"`
		} `json:"packages"`
	}
	cmd := exec.Command(runboxBin, "doctor", "--json", "--manifest", mf)
	dout, err := cmd.Output()
	if err := json.Unmarshal(dout, &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, dout)
	}
	if !rep.OK || len(rep.Packages) != 1 || !rep.Packages[0].Current || rep.Packages[0].Tag != tag || len(rep.Packages[0].Packages) != 2 {
		t.Fatalf("doctor: %v\n%s", err, dout)
	}
	for _, p := range rep.Packages[0].Packages {
		if p.Version == "" || p.SHA256+p.Integrity == "" {
			t.Errorf("doctor lists %s without version or hash: %+v", p.Name, p)
		}
	}

	t.Run("gvisor", func(t *testing.T) {
		g := gvisorServer(t, packagesManifest)
		r, _ := g.call(t, map[string]any{"language": "python", "code": "import tabulate; print(tabulate.__version__)"})
		mustOK(t, r)
		if r.Stdout != "0.8.9\n" || r.Isolation != "gvisor" {
			t.Errorf("gvisor: %q %s", r.Stdout, r.Isolation)
		}
	})

	t.Run("unknown", func(t *testing.T) {
		for yaml, want := range map[string]string{
			"packages:\n  python: [tabulate=9.9-1]\n":       "unknown version 9.9-1 of python3-tabulate",
			"packages:\n  javascript: [is-number@99.0.0]\n": "unknown version is-number@99.0.0 in the npm registry",
		} {
			cmd := exec.Command(runboxBin, "images", "build", "--manifest", writeManifest(t, yaml))
			cmd.Env = append(os.Environ(), cache...)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("%s: err %v, want %q in:\n%s", yaml, err, want, out)
			}
		}
	})

	// Offline: the image gone, the mirror and the registry unreachable,
	// the kept resolution and downloads build the same layer.
	layer := lastLayer(t, tag)
	if out, err := exec.Command("docker", "rmi", tag).CombinedOutput(); err != nil {
		t.Fatalf("docker rmi: %v %s", err, out)
	}
	// npm's own cache empty too, as on a machine that never ran npm: the
	// tarballs kept with the resolution must do.
	offline := append(cache, "RUNBOX_DEBIAN_MIRROR=http://127.0.0.1:9/debian", "npm_config_proxy=http://127.0.0.1:9", "npm_config_https_proxy=http://127.0.0.1:9",
		"npm_config_cache="+t.TempDir())
	res, _ = imagesBuild(t, offline, mf)
	if !res[0].Built {
		t.Fatalf("offline rebuild: %+v", res)
	}
	if got := lastLayer(t, tag); got != layer {
		t.Errorf("the rebuilt layer differs: %s, first %s", got, layer)
	}

	// runbox setup makes the derived image too, as images build does.
	if out, err := exec.Command("docker", "rmi", tag).CombinedOutput(); err != nil {
		t.Fatalf("docker rmi: %v %s", err, out)
	}
	setupCmd := exec.Command(runboxBin, "setup", "--manifest", mf)
	setupCmd.Env = append(os.Environ(), offline...)
	out, err = setupCmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "setup: packages: "+tag) {
		t.Fatalf("runbox setup: %v\n%s", err, out)
	}
	if got := lastLayer(t, tag); got != layer {
		t.Errorf("the layer setup built differs: %s, first %s", got, layer)
	}
}

// TestKubePackages: on the Kubernetes backend the sandbox pods run the
// derived image once it is in the cluster (the test cluster has no
// registry: scripts/k8s/import-image.sh copies it into its containerd).
func TestKubePackages(t *testing.T) {
	kubeSetup(t)
	cache := []string{"XDG_CACHE_HOME=" + t.TempDir()}
	mf := writeManifest(t, packagesManifest)
	res, _ := imagesBuild(t, cache, mf)
	tag := res[0].Tag
	t.Cleanup(func() {
		_ = exec.Command("bash", "../scripts/k8s/import-image.sh", "--remove", tag).Run()
		_ = exec.Command("docker", "rmi", tag).Run()
	})
	if out, err := exec.Command("bash", "../scripts/k8s/import-image.sh", tag).CombinedOutput(); err != nil {
		t.Fatalf("import-image.sh: %v\n%s", err, out)
	}
	s := kubeServer(t, packagesManifest)
	packagesRun(t, s)
}

// TestPodmanPackages: the derived image is built through Podman's
// Docker-compatible API (its classic build) and the boxes run it.
func TestPodmanPackages(t *testing.T) {
	host := os.Getenv("RUNBOX_PODMAN_HOST")
	if host == "" {
		absent(t, "RUNBOX_PODMAN_HOST is not set (bash scripts/podman.sh prints it)")
	}
	env := []string{"DOCKER_HOST=" + host, "XDG_CACHE_HOME=" + t.TempDir()}
	mf := writeManifest(t, packagesManifest)
	res, _ := imagesBuild(t, env, mf)
	t.Cleanup(func() { _ = exec.Command("docker", "-H", host, "rmi", res[0].Tag).Run() })
	if again, took := imagesBuild(t, env, mf); again[0].Built || took > time.Second {
		t.Errorf("a second build on Podman was not a no-op under a second: %+v in %s", again, took)
	}
	s := podmanServer(t, packagesManifest)
	packagesRun(t, s)
}

// packagesRun checks that s's boxes import packagesManifest's packages.
func packagesRun(t *testing.T, s *server) {
	t.Helper()
	r, _ := s.call(t, map[string]any{"language": "python", "code": "import tabulate; print(tabulate.__version__)"})
	mustOK(t, r)
	if r.Stdout != "0.8.9\n" {
		t.Errorf("python stdout %q", r.Stdout)
	}
	r, _ = s.call(t, map[string]any{"language": "javascript", "code": "console.log(require('is-number')(5))"})
	mustOK(t, r)
	if r.Stdout != "true\n" {
		t.Errorf("javascript stdout %q", r.Stdout)
	}
}
