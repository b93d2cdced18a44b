//go:build e2e

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"
)

// credServers are the test's HTTPS servers on 127.0.0.1 under a test CA
// (which the server process trusts through SSL_CERT_FILE, as it would a
// public CA through the system's roots): api requires the token, as a
// bearer header, for everything, a PEP 503 index included; other is a
// second declared host without a credential, reached end to end.
type credServers struct {
	api, other   *httptest.Server
	aport, oport int
	// eport is a broken server's: it answers every request with a
	// malformed header line quoting the credential headers it was sent.
	eport  int
	testCA string
	token  string

	mu sync.Mutex
	// otherSaw is every Authorization value other was sent.
	otherSaw []string
	// leaked: the token reached other, or api outside its header.
	leaked bool
}

// credToken is the secret: it is in the server's environment and must
// reach api, and nothing else.
const credToken = "ghp_runboxE2Ecredential0123456789abcdef"

func startCredServers(t *testing.T) *credServers {
	t.Helper()
	cs := &credServers{token: credToken}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "runbox e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "api.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"api.test", "other.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
	cs.testCA = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))

	whl, whlName := demoWheel(t)
	whlSum := sha256.Sum256(whl)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Values("Authorization")
		if strings.Contains(r.URL.String(), cs.token) {
			cs.mu.Lock()
			cs.leaked = true
			cs.mu.Unlock()
		}
		if len(auth) != 1 || auth[0] != "Bearer "+cs.token {
			// Never echo what arrived: the box must not see the token.
			http.Error(w, fmt.Sprintf("api: no token (%d Authorization headers)", len(auth)), http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/whoami":
			fmt.Fprintf(w, "api ok n=%d", len(auth))
		case r.URL.Path == "/address":
			// Reached by address: runbox's certificate for an IP.
			io.WriteString(w, "api ok address")
		case r.URL.Path == "/redirect":
			http.Redirect(w, r, fmt.Sprintf("https://other.test:%d/landed", cs.oport), http.StatusFound)
		case r.URL.Path == "/simple/"+demoPy+"/":
			fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="../../files/%s#sha256=%s">%s</a></body></html>`, whlName, hex.EncodeToString(whlSum[:]), whlName)
		case r.URL.Path == "/files/"+whlName:
			w.Write(whl)
		default:
			http.NotFound(w, r)
		}
	})
	other := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Values("Authorization")
		cs.mu.Lock()
		cs.otherSaw = append(cs.otherSaw, auth...)
		for k, vs := range r.Header {
			if strings.Contains(k+strings.Join(vs, ","), cs.token) {
				cs.leaked = true
			}
		}
		cs.mu.Unlock()
		fmt.Fprintf(w, "other auth=%q", auth)
	})
	start := func(h http.Handler) (*httptest.Server, int) {
		s := httptest.NewUnstartedServer(h)
		s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		s.StartTLS()
		t.Cleanup(s.Close)
		return s, s.Listener.Addr().(*net.TCPAddr).Port
	}
	cs.api, cs.aport = start(api)
	cs.other, cs.oport = start(other)
	_, cs.eport = start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\n")
		for _, h := range []string{"Authorization", "X-Api-Key"} {
			if v := r.Header.Get(h); v != "" {
				fmt.Fprintf(buf, "Echo %s %s\r\n", h, v)
			}
		}
		buf.WriteString("\r\n")
		buf.Flush()
	}))
	return cs
}

// env puts the token, the trust in the test CA and a fresh state
// directory (runbox's CA is made there) in the environment of the servers
// the test starts, and debug logs, so that every log line is there to be
// searched for the token.
func (cs *credServers) env(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "test-ca.pem")
	if err := os.WriteFile(caFile, []byte(cs.testCA), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RUNBOX_E2E_API_TOKEN", cs.token)
	t.Setenv("SSL_CERT_FILE", caFile)
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	t.Setenv("RUNBOX_LOG_LEVEL", "debug")
}

func (cs *credServers) manifest(extra string) string {
	return fmt.Sprintf(`network:
  allow:
    - host: api.test
      ports: [%d]
      addresses: [127.0.0.1]
      credential: {env: RUNBOX_E2E_API_TOKEN, placeholder: api}
    - host: other.test
      ports: [%d]
      addresses: [127.0.0.1]
    - host: 127.0.0.1
      ports: [%d]
      credential: {env: RUNBOX_E2E_API_TOKEN}
  hosts:
    api.test: 127.0.0.1
    other.test: 127.0.0.1
  index:
    python: https://api.test:%d/simple/
%s`, cs.aport, cs.oport, cs.aport, cs.aport, extra)
}

// files gives the box the test CA, for other (end to end, not runbox's).
func (cs *credServers) files() []any {
	return []any{map[string]any{"path": "test-ca.pem", "content": cs.testCA}}
}

// noLeak fails when the token is anywhere in what the test saw: results,
// the server's log, what other received.
func (cs *credServers) noLeak(t *testing.T, s *server, rs ...contract.Result) {
	t.Helper()
	for _, r := range rs {
		if strings.Contains(fmt.Sprintf("%+v", r), cs.token) {
			t.Errorf("the token is in a result: %+v", r)
		}
	}
	if strings.Contains(s.stderr.String(), cs.token) {
		t.Errorf("the token is in the server's log")
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.leaked {
		t.Errorf("the token reached a server outside the declared header")
	}
}

const credPython = `
import os, urllib.request, requests
u = "https://api.test:%d/whoami"
print(requests.get(u, timeout=30).text)
print(requests.get(u, headers={"Authorization": "Bearer " + os.environ["RUNBOX_SECRET_API"]}, timeout=30).text)
print(urllib.request.urlopen(u, timeout=30).read().decode())
print(urllib.request.urlopen(urllib.request.Request(u, headers={"Authorization": "token made-up"}), timeout=30).read().decode())
print(os.environ["RUNBOX_SECRET_API"])
`

const credNode = `
const u = 'https://api.test:%d/whoami';
console.log(await (await fetch(u)).text());
console.log(await (await fetch(u, {headers: {Authorization: 'Bearer made-up'}})).text());
`

// testCredentialClients: Python's requests and urllib, curl and Node's
// fetch authenticate to api without the code holding the token, whether
// they send no header, the placeholder or a made-up one (replaced, never
// doubled: api counts one); the records show each request's method,
// path without query, and status.
func testCredentialClients(t *testing.T, s *server, cs *credServers) {
	r := netCall(t, s, "python", fmt.Sprintf(credPython, cs.aport), nil, 60)
	mustOK(t, r)
	if r.Stdout != strings.Repeat("api ok n=1\n", 4)+"runbox-secret:api\n" {
		t.Fatalf("python printed %q\nstderr: %s", r.Stdout, r.Stderr)
	}
	var reqs []contract.HTTPRequest
	for _, c := range r.Network {
		if !c.Allowed || c.Method != "CONNECT" || !strings.HasPrefix(c.Rule, "network.allow[0] (api.test:") {
			t.Errorf("connection %+v", c)
		}
		reqs = append(reqs, c.Requests...)
	}
	if len(reqs) != 4 || reqs[0] != (contract.HTTPRequest{Method: "GET", Path: "/whoami", Status: 200}) {
		t.Fatalf("requests %+v", reqs)
	}

	r = netCall(t, s, "bash", fmt.Sprintf(`curl -sS https://api.test:%d/whoami?q=1; echo
curl -sS -H 'Authorization: Bearer made-up' https://api.test:%d/whoami; echo
curl -sS https://127.0.0.1:%d/address; echo
cat > client.mjs <<'EOF'
%s
EOF
node client.mjs`, cs.aport, cs.aport, cs.aport, fmt.Sprintf(credNode, cs.aport)), nil, 60)
	mustOK(t, r)
	if r.Stdout != strings.Repeat("api ok n=1\n", 2)+"api ok address\n"+strings.Repeat("api ok n=1\n", 2) {
		t.Fatalf("curl and node printed %q\nstderr: %s", r.Stdout, r.Stderr)
	}
	if len(r.Network) == 0 || len(r.Network[0].Requests) != 1 || r.Network[0].Requests[0].Path != "/whoami?[redacted]" {
		t.Fatalf("network %+v", r.Network)
	}
	cs.noLeak(t, s, r)
}

// testCredentialPip: pip installs from the declared index that requires
// the token, without being told of any (the index and PIP_CERT are the
// box's own).
func testCredentialPip(t *testing.T, s *server, cs *credServers) {
	r := netCall(t, s, "bash", "pip install -q runbox-demo && python3 -c 'import runbox_demo; print(runbox_demo.hello())'", nil, 120)
	mustOK(t, r)
	if r.Stdout != "hello from the declared index\n" {
		t.Fatalf("stdout %q\nstderr %s", r.Stdout, r.Stderr)
	}
	cs.noLeak(t, s, r)
}

// testCredentialBoundaries: a redirect to the second declared host gets
// there without the token (curl made to send its header on, it carries
// the placeholder, which only api's entry swaps), end to end under the
// test CA; an undeclared host is still refused; nothing the box can read
// holds the token.
func testCredentialBoundaries(t *testing.T, s *server, cs *credServers) {
	half := len(cs.token) / 2
	r := netCall(t, s, "bash", fmt.Sprintf(`cat "$CURL_CA_BUNDLE" test-ca.pem > /tmp/all.pem
curl -sS -L --location-trusted --cacert /tmp/all.pem -H "Authorization: Bearer $RUNBOX_SECRET_API" https://api.test:%d/redirect; echo
python3 -c 'import requests; print(requests.get("https://api.test:%d/redirect", verify="/tmp/all.pem", timeout=30).text)'
curl -s -o /dev/null -w '%%{http_connect}\n' https://undeclared.example/
curl -sv --cacert test-ca.pem https://other.test:%d/direct 2>&1 | grep -o 'issuer: CN=[^;]*' | head -1
curl -sv https://api.test:%d/whoami 2>&1 | grep 'issuer:' | grep -o 'CN=runbox egress CA' | head -1
# Everything the box can read, searched for the token: the code holds two
# halves only, joined in a pipe.
a='%s'; b='%s'
pat() { printf '%%s%%s\n' "$a" "$b"; }
found=$( { env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; } | grep -caF -f <(pat))
files=$(grep -rlsaF -f <(pat) /tmp /workspace /.runbox /etc /run /var /dev/shm /mnt 2>/dev/null | wc -l)
echo "leaks: $found $files"
`, cs.aport, cs.aport, cs.oport, cs.aport, cs.token[:half], cs.token[half:]), cs.files(), 90)
	mustOK(t, r)
	want := `other auth=["Bearer runbox-secret:api"]
other auth=[]
403
issuer: CN=runbox e2e test CA
CN=runbox egress CA
leaks: 0 0
`
	if r.Stdout != want {
		t.Fatalf("stdout %q, want %q\nstderr: %s", r.Stdout, want, r.Stderr)
	}
	cs.mu.Lock()
	saw := fmt.Sprint(cs.otherSaw)
	cs.mu.Unlock()
	if !strings.Contains(saw, "runbox-secret:api") || strings.Contains(saw, cs.token) {
		t.Fatalf("other saw %s", saw)
	}
	cs.noLeak(t, s, r)
}

func testCredentials(t *testing.T, s *server, cs *credServers) {
	t.Run("clients", func(t *testing.T) { testCredentialClients(t, s, cs) })
	t.Run("pip", func(t *testing.T) { testCredentialPip(t, s, cs) })
	t.Run("boundaries", func(t *testing.T) { testCredentialBoundaries(t, s, cs) })
}

// On Docker (runc), with the audit log on: everything above, and the
// token is in no audit line.
func TestCredentials(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	s := startServer(t, nil, "--manifest", writeManifest(t, fmt.Sprintf("audit:\n  enabled: true\n  path: %s\n", logPath)+imageLanguages(t)+cs.manifest("")))
	t.Cleanup(s.close)
	testCredentials(t, s, cs)
	b, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(b), `"path":"/whoami"`) || strings.Contains(string(b), cs.token) {
		t.Fatalf("audit log (%v): has the request records %v, has the token %v", err, strings.Contains(string(b), `"path":"/whoami"`), strings.Contains(string(b), cs.token))
	}
	cs.noLeak(t, s)
}

// credCustomKey is a secret of no known pattern, sent in a header of
// the manifest's choosing: the audit's pattern redaction cannot know it.
const credCustomKey = "rbxCustomKeyValue0123456789"

// TestCredentialsMalformedEcho: a server (broken or hostile) answers with
// a malformed header line that quotes the credential header it was sent,
// the default Authorization and a custom X-Api-Key alike. The connection's
// record says why it failed, quoting the server's bytes, and neither
// secret is in the result, the audit log or the server's debug log.
func TestCredentialsMalformedEcho(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	t.Setenv("RUNBOX_E2E_CUSTOM_KEY", credCustomKey)
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	m := fmt.Sprintf(`audit:
  enabled: true
  path: %s
network:
  allow:
    - host: api.test
      ports: [%d]
      addresses: [127.0.0.1]
      credential: {env: RUNBOX_E2E_API_TOKEN}
    - host: other.test
      ports: [%d]
      addresses: [127.0.0.1]
      credential: {env: RUNBOX_E2E_CUSTOM_KEY, header: X-Api-Key, format: "{secret}"}
  hosts:
    api.test: 127.0.0.1
    other.test: 127.0.0.1
`, logPath, cs.eport, cs.eport)
	s := startServer(t, nil, "--manifest", writeManifest(t, m+imageLanguages(t)))
	t.Cleanup(s.close)
	r := netCall(t, s, "bash", fmt.Sprintf("curl -sS https://api.test:%d/a; curl -sS https://other.test:%d/b; true", cs.eport, cs.eport), nil, 60)
	if len(r.Network) != 2 {
		t.Fatalf("network %+v (%s %+v)", r.Network, r.Status, r.Error)
	}
	for _, c := range r.Network {
		if !c.Allowed || !strings.Contains(c.Reason, "malformed") || !strings.Contains(c.Reason, "[redacted]") {
			t.Errorf("record %+v: want the malformed line, its secret redacted", c)
		}
	}
	raw, _ := json.Marshal(r)
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{cs.token, credCustomKey} {
		for what, text := range map[string]string{"the result": string(raw), "the audit log": string(b), "the server's log": s.stderr.String()} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds the secret %.8s…", what, secret)
			}
		}
	}
}

func TestCredentialsGVisor(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	testCredentials(t, gvisorServer(t, imageLanguages(t)+cs.manifest("")), cs)
}

func TestCredentialsPodman(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	testCredentials(t, podmanServer(t, imageLanguages(t)+cs.manifest("")), cs)
}

func TestKubeCredentials(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	testCredentials(t, kubeServer(t, cs.manifest("")), cs)
}

// In sessions: Python's requests and Node's fetch (NODE_EXTRA_CA_CERTS is
// read when the session's interpreter starts, before any call), call
// after call.
func TestCredentialsSession(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	s := engineServer(t, "", imageLanguages(t)+cs.manifest(""))
	py := s.open(t, "python")
	for range 2 {
		r := s.in(t, py, "python", fmt.Sprintf("import requests\nprint(requests.get('https://api.test:%d/whoami', timeout=30).text)", cs.aport))
		mustOK(t, r)
		if r.Stdout != "api ok n=1\n" {
			t.Fatalf("python session: %q %s", r.Stdout, r.Stderr)
		}
	}
	js := s.open(t, "javascript")
	r := s.in(t, js, "javascript", fmt.Sprintf("const r = await fetch('https://api.test:%d/whoami'); console.log(await r.text());", cs.aport))
	mustOK(t, r)
	if r.Stdout != "api ok n=1\n" {
		t.Fatalf("node session: %q %s", r.Stdout, r.Stderr)
	}
	cs.noLeak(t, s, r)
}

// approve: ask still applies to an entry with a credential: the client
// that cannot ask gets the refusal, and api is never reached.
func TestCredentialsApprove(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	m := strings.Replace(cs.manifest(""), "credential: {env", "approve: ask\n      credential: {env", 1)
	s := engineServer(t, "", imageLanguages(t)+m)
	r := netCall(t, s, "python", fmt.Sprintf("import requests\nrequests.get('https://api.test:%d/whoami', timeout=30)", cs.aport), nil, 60)
	info := wantError(t, r, contract.KindForbiddenNetwork, "")
	if !strings.Contains(info.Message, "needs the user's approval") {
		t.Fatalf("error %+v", info)
	}
}

// A credential whose variable is not set fails the start, naming the
// field, before any box.
func TestCredentialsMissingVariable(t *testing.T) {
	m := writeManifest(t, "network:\n  allow:\n    - host: api.github.com\n      credential: {env: RUNBOX_E2E_UNSET_TOKEN}\n")
	cmd := exec.Command(runboxBin, "serve", "--manifest", m)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "network.allow[0].credential.env: $RUNBOX_E2E_UNSET_TOKEN is not set in the server's environment") {
		t.Fatalf("exit %v, output:\n%s", err, out)
	}
}

// A pooled box (its Python started before the job) trusts runbox's CA
// too: the bundle is written when the job arrives, before its code runs.
func TestCredentialsPooled(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	s := engineServer(t, "", imageLanguages(t)+cs.manifest("pool:\n  size: 1\n"))
	time.Sleep(3 * time.Second) // the pool fills
	r := netCall(t, s, "python", fmt.Sprintf("import requests\nprint(requests.get('https://api.test:%d/whoami', timeout=30).text)", cs.aport), nil, 60)
	mustOK(t, r)
	if !r.Metrics.Pooled || r.Stdout != "api ok n=1\n" {
		t.Fatalf("pooled %v stdout %q stderr %q", r.Metrics.Pooled, r.Stdout, r.Stderr)
	}
	cs.noLeak(t, s, r)
}
