//go:build e2e

package e2e

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/manifest"
)

// imageLanguages is the manifest's languages on the image under test:
// RUNBOX_E2E_IMAGE when set (a branch's image built under its own tag, so
// the shared one stays as it is), else nothing, so the defaults run on
// runbox/sandbox:bookworm as everywhere else.
func imageLanguages(t *testing.T) string {
	img := os.Getenv("RUNBOX_E2E_IMAGE")
	if img == "" {
		return ""
	}
	langs := manifest.Default().Languages
	for i := range langs {
		langs[i].Image = img
	}
	return languagesSection(t, langs)
}

// languagesSection is a manifest's languages section listing langs (a
// list replaces the default one).
func languagesSection(t *testing.T, langs []manifest.Language) string {
	t.Helper()
	b, err := json.Marshal(langs)
	if err != nil {
		t.Fatal(err)
	}
	return "languages: " + string(b) + "\n"
}

// The image's network clients reach a declared HTTPS endpoint through
// the proxy, each trusting the test's CA by its own variable: curl by
// CURL_CA_BUNDLE, requests by REQUESTS_CA_BUNDLE; an undeclared host is
// refused and the run is forbidden_network naming it.
func TestNetworkCurlRequests(t *testing.T) {
	ns := startNetServers(t)
	s := engineServer(t, "", imageLanguages(t)+ns.manifest(""))
	want := "GET /get \nPOST /post hello\n"

	r := netCall(t, s, "bash", fmt.Sprintf(`set -e
export CURL_CA_BUNDLE=$PWD/ca.pem
curl -sS https://127.0.0.1:%d/get; echo
curl -sS -d hello https://127.0.0.1:%d/post; echo`, ns.tport, ns.tport), ns.files(), 30)
	mustOK(t, r)
	if r.Stdout != want {
		t.Fatalf("curl printed %q\nstderr: %s", r.Stdout, r.Stderr)
	}
	checkAllowed(t, r, 2)

	r = netCall(t, s, "python", fmt.Sprintf(`
import os
os.environ["REQUESTS_CA_BUNDLE"] = "ca.pem"
import requests
base = "https://127.0.0.1:%d"
print(requests.get(base + "/get", timeout=10).text)
print(requests.post(base + "/post", data=b"hello", timeout=10).text)
`, ns.tport), ns.files(), 30)
	mustOK(t, r)
	if r.Stdout != want {
		t.Fatalf("requests printed %q\nstderr: %s", r.Stdout, r.Stderr)
	}
	checkAllowed(t, r, 2)

	r = netCall(t, s, "bash", "curl -sS https://undeclared.example/", nil, 30)
	info := wantError(t, r, contract.KindForbiddenNetwork, "")
	if !strings.Contains(info.Message, "undeclared.example:443") || !strings.Contains(r.Stderr, "403") {
		t.Fatalf("curl: error %+v stderr %q", info, r.Stderr)
	}
	r = netCall(t, s, "python", "import requests\nrequests.get('https://undeclared.example/', timeout=10)\n", nil, 30)
	info = wantError(t, r, contract.KindForbiddenNetwork, "")
	if !strings.Contains(info.Message, "undeclared.example:443") || info.Line != 2 {
		t.Fatalf("requests: error %+v", info)
	}
}

// pkgIndex is the test's own package index on 127.0.0.1 over HTTPS: a PEP
// 503 simple index with one wheel, and an npm registry with one package,
// both built by the test.
type pkgIndex struct {
	srv  *httptest.Server
	port int
	ca   string
	hits atomic.Int64
}

const (
	demoPy  = "runbox-demo"
	demoNPM = "runbox-demo"
)

func startPkgIndex(t *testing.T) *pkgIndex {
	t.Helper()
	whl, whlName := demoWheel(t)
	tgz := demoTarball(t)
	whlSum := sha256.Sum256(whl)
	sha512Sum := sha512.Sum512(tgz)
	sha1Sum := sha1.Sum(tgz)
	x := &pkgIndex{}
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/simple/":
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="%s/">%s</a></body></html>`, demoPy, demoPy)
		case "/simple/" + demoPy + "/":
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="../../files/%s#sha256=%s">%s</a></body></html>`, whlName, hex.EncodeToString(whlSum[:]), whlName)
		default:
			http.NotFound(w, r)
		}
	})
	mux.HandleFunc("/files/"+whlName, func(w http.ResponseWriter, r *http.Request) { w.Write(whl) })
	mux.HandleFunc("/npm/"+demoNPM, func(w http.ResponseWriter, r *http.Request) {
		base := "https://" + r.Host + "/npm/"
		doc := map[string]any{
			"name":      demoNPM,
			"dist-tags": map[string]string{"latest": "0.1.0"},
			"versions": map[string]any{"0.1.0": map[string]any{
				"name": demoNPM, "version": "0.1.0", "main": "index.js",
				"dist": map[string]string{
					"tarball":   base + demoNPM + "/-/" + demoNPM + "-0.1.0.tgz",
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha512Sum[:]),
					"shasum":    hex.EncodeToString(sha1Sum[:]),
				},
			}},
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("/npm/"+demoNPM+"/-/"+demoNPM+"-0.1.0.tgz", func(w http.ResponseWriter, r *http.Request) { w.Write(tgz) })
	x.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x.hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(x.srv.Close)
	fmt.Sscanf(x.srv.URL[strings.LastIndex(x.srv.URL, ":")+1:], "%d", &x.port)
	x.ca = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x.srv.Certificate().Raw}))
	return x
}

func (x *pkgIndex) files() []any {
	return []any{map[string]any{"path": "ca.pem", "content": x.ca}}
}

// demoWheel writes a pure-Python wheel by hand: a module and its
// dist-info (METADATA, WHEEL, RECORD with each file's hash).
func demoWheel(t *testing.T) ([]byte, string) {
	t.Helper()
	const dist = "runbox_demo-0.1.0"
	files := []struct{ name, body string }{
		{"runbox_demo/__init__.py", "def hello():\n    return 'hello from the declared index'\n"},
		{dist + ".dist-info/METADATA", "Metadata-Version: 2.1\nName: runbox-demo\nVersion: 0.1.0\nSummary: runbox's e2e test package\n"},
		{dist + ".dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: runbox-e2e\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	fmt.Fprintf(&record, "%s.dist-info/RECORD,,\n", dist)
	w, _ := zw.Create(dist + ".dist-info/RECORD")
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), dist + "-py3-none-any.whl"
}

// demoTarball writes an npm package tarball: package/package.json and
// package/index.js.
func demoTarball(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"package/package.json", `{"name": "` + demoNPM + `", "version": "0.1.0", "main": "index.js"}`},
		{"package/index.js", "module.exports = () => 'hello from the declared registry';\n"},
	} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	return buf.Bytes()
}

// npmHost is the registry's name (the test certificate covers
// *.example.com), which network.hosts maps to 127.0.0.1: npm's proxy
// agent checks an HTTPS registry named by an IP address against
// "localhost" and fails, so the registry goes by a name, as real ones do.
const npmHost = "npm.example.com"

// manifest declares, when declared is set, the index as the box's Python
// index (by address) and npm registry (by name); otherwise only another
// port, so the proxy runs but refuses the index.
func (x *pkgIndex) manifest(t *testing.T, declared bool) string {
	y := imageLanguages(t) + "network:\n  allow:\n"
	if !declared {
		return y + "    - host: 127.0.0.1\n      ports: [1]\n"
	}
	return y + fmt.Sprintf(`    - host: 127.0.0.1
      ports: [%d]
    - host: %s
      ports: [%d]
      addresses: [127.0.0.1]
  hosts:
    %s: 127.0.0.1
  index:
    python: https://127.0.0.1:%d/simple/
    npm: https://%s:%d/npm/
`, x.port, npmHost, x.port, npmHost, x.port, npmHost, x.port)
}

// refusedInstall runs script (with the index's port for its %d) on a
// server whose manifest does not declare the index: the run must be
// forbidden_network naming the index's address, and the index never hit.
func (x *pkgIndex) refusedInstall(t *testing.T, script string) contract.Result {
	t.Helper()
	before := x.hits.Load()
	s := engineServer(t, "", x.manifest(t, false))
	r := netCall(t, s, "bash", fmt.Sprintf(script, x.port), x.files(), 90)
	info := wantError(t, r, contract.KindForbiddenNetwork, "")
	if !strings.Contains(info.Message, fmt.Sprintf("127.0.0.1:%d", x.port)) || x.hits.Load() != before {
		t.Fatalf("error %+v, index hits %d\nstderr %s", info, x.hits.Load()-before, r.Stderr)
	}
	return r
}

// pip install from the declared index, without naming it: the package
// lands in the user's site under /tmp and imports in the same program;
// the index undeclared, pip's request is refused and the run is
// forbidden_network naming it, the index never reached.
func TestNetworkPipIndex(t *testing.T) {
	x := startPkgIndex(t)
	testPipInstall(t, engineServer(t, "", x.manifest(t, true)), x)

	r := x.refusedInstall(t, "export PIP_CERT=$PWD/ca.pem\npip install --index-url https://127.0.0.1:%d/simple/ runbox-demo")
	// pip.conf's one retry: the refusal is tried twice, not six times.
	if len(r.Network) == 0 || len(r.Network) > 2 {
		t.Fatalf("refused connections: %+v", r.Network)
	}
	t.Logf("refused pip install: %d ms, %d refused connections", r.Metrics.WallMs, len(r.Network))
}

func testPipInstall(t *testing.T, s *server, x *pkgIndex) {
	t.Helper()
	r := netCall(t, s, "python", `
import os, subprocess, sys
os.environ["PIP_CERT"] = os.path.abspath("ca.pem")
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "runbox-demo"], check=True)
import runbox_demo
print(runbox_demo.hello(), runbox_demo.__file__)
`, x.files(), 90)
	mustOK(t, r)
	if r.Stdout != "hello from the declared index /tmp/.local/lib/python3.11/site-packages/runbox_demo/__init__.py\n" {
		t.Fatalf("stdout %q\nstderr %s", r.Stdout, r.Stderr)
	}
	for _, c := range r.Network {
		if !c.Allowed || c.Host != "127.0.0.1" || c.Port != x.port {
			t.Errorf("connection %+v", c)
		}
	}
	if len(r.Network) == 0 || len(r.Artifacts) != 0 {
		t.Fatalf("network %+v artifacts %+v", r.Network, r.Artifacts)
	}

	// bash: pip's own command, then a new interpreter imports it.
	r = netCall(t, s, "bash", "export PIP_CERT=$PWD/ca.pem\npip install -q runbox-demo && python3 -c 'import runbox_demo; print(runbox_demo.hello())'", x.files(), 90)
	mustOK(t, r)
	if r.Stdout != "hello from the declared index\n" {
		t.Fatalf("stdout %q\nstderr %s", r.Stdout, r.Stderr)
	}
	t.Logf("pip install and import: %d ms, %d connections", r.Metrics.WallMs, len(r.Network))
}

// npm install from the declared registry, without naming it: the package
// lands in /workspace/node_modules (not artifacts) and requires; the
// registry undeclared, npm's request is refused and the run is
// forbidden_network naming it.
func TestNetworkNpmRegistry(t *testing.T) {
	x := startPkgIndex(t)
	testNpmInstall(t, engineServer(t, "", x.manifest(t, true)), x)

	r := x.refusedInstall(t, "export NODE_EXTRA_CA_CERTS=$PWD/ca.pem\nnpm install --registry https://127.0.0.1:%d/npm/ runbox-demo")
	t.Logf("refused npm install: %d ms, %d refused connections", r.Metrics.WallMs, len(r.Network))
}

func testNpmInstall(t *testing.T, s *server, x *pkgIndex) {
	t.Helper()
	r := netCall(t, s, "bash", "export NODE_EXTRA_CA_CERTS=$PWD/ca.pem\nnpm install --no-progress runbox-demo >&2 && node -e \"console.log(require('runbox-demo')())\"", x.files(), 90)
	mustOK(t, r)
	if r.Stdout != "hello from the declared registry\n" {
		t.Fatalf("stdout %q\nstderr %s", r.Stdout, r.Stderr)
	}
	for _, c := range r.Network {
		if !c.Allowed || c.Host != npmHost || c.Port != x.port || c.Address != fmt.Sprintf("127.0.0.1:%d", x.port) {
			t.Errorf("connection %+v", c)
		}
	}
	var paths []string
	for _, a := range r.Artifacts {
		paths = append(paths, a.Path)
	}
	if len(r.Network) == 0 || strings.Join(paths, ",") != "package-lock.json,package.json" {
		t.Fatalf("network %+v artifacts %v", r.Network, paths)
	}
	t.Logf("npm install and require: %d ms, %d connections", r.Metrics.WallMs, len(r.Network))
}

// Under gVisor the same installs work, through the same channel.
func TestNetworkPackagesGVisor(t *testing.T) {
	x := startPkgIndex(t)
	s := gvisorServer(t, x.manifest(t, true))
	testPipInstall(t, s, x)
	testNpmInstall(t, s, x)
}

// The description names the network clients the image really has, read
// from it (requests and pip among Python's packages, npm for JavaScript,
// curl for bash), and where packages come from when an index is declared.
func TestNetworkDescriptionClients(t *testing.T) {
	x := startPkgIndex(t)
	s := engineServer(t, "", x.manifest(t, true))
	desc := s.described(t, "requests 2.", "npm 10.9.9", "curl 7.88.1")
	for _, want := range []string{
		"Installed (more only from the declared package indexes below)", "requests 2.", "pip 23.",
		"javascript (Node.js v18.20.4) with npm 10.9.9", "bash (bash 5.2.15) with curl 7.88.1",
		fmt.Sprintf("- Packages: pip install installs from https://127.0.0.1:%d/simple/, and npm install from https://%s:%d/npm/", x.port, npmHost, x.port),
	} {
		if !strings.Contains(desc, want) {
			t.Errorf("description lacks %q:\n%s", want, desc)
		}
	}
}

// In a session, a package installed by one cell imports (Python) or
// requires (JavaScript) in the next, in the same interpreter: pip's user
// site was on sys.path from the start, node_modules is in the workspace.
// node_modules is no artifact of the cell that installed it.
func TestSessionPackageInstalls(t *testing.T) {
	x := startPkgIndex(t)
	s := engineServer(t, "", x.manifest(t, true))

	id := s.open(t, "python")
	r := s.in(t, id, "python", `import os, subprocess, sys
os.environ["PIP_CERT"] = os.path.abspath("ca.pem")
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "runbox-demo"], check=True)
`, "files", x.files(), "timeout_seconds", 90)
	mustOK(t, r)
	if len(r.Network) == 0 || !r.Network[0].Allowed {
		t.Fatalf("install: network %+v\nstderr %s", r.Network, r.Stderr)
	}
	r = s.in(t, id, "python", "import runbox_demo\nrunbox_demo.hello()\n")
	if mustOK(t, r); r.Stdout != "'hello from the declared index'\n" {
		t.Fatalf("next cell: %q %q", r.Stdout, r.Stderr)
	}
	s.tool(t, "session_close", map[string]any{"session_id": id})

	id = s.open(t, "javascript")
	r = s.in(t, id, "javascript", `require('child_process').execSync('npm install --no-progress runbox-demo', {stdio: 'inherit', env: {...process.env, NODE_EXTRA_CA_CERTS: 'ca.pem'}})
`, "files", x.files(), "timeout_seconds", 90)
	mustOK(t, r)
	for _, a := range r.Artifacts {
		if strings.Contains(a.Path, "node_modules") {
			t.Errorf("artifact %s", a.Path)
		}
	}
	r = s.in(t, id, "javascript", "console.log(require('runbox-demo')())\n")
	if mustOK(t, r); r.Stdout != "hello from the declared registry\n" {
		t.Fatalf("next cell: %q %q", r.Stdout, r.Stderr)
	}
	s.tool(t, "session_close", map[string]any{"session_id": id})
}
