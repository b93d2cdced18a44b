package egress

import (
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"net/http/httptest"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/manifest"
)

// Node's fetch ignores the proxy variables; with NodeOptions it goes
// through the proxy anyway, for http and for https (the test CA trusted
// through NODE_EXTRA_CA_CERTS), and a refusal is an error that says why.
// The e2e tests run the same in the sandbox image's Node.
func TestNodeFetchThroughProxy(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on this machine: the e2e tests cover the image's")
	}
	plain := httptest.NewServer(echo())
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(echo())
	defer tlsSrv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	p := New(Options{Network: network(manifest.Endpoint{Host: "127.0.0.1", Ports: []int{port(t, plain.URL), port(t, tlsSrv.URL)}})})
	purl := serveProxy(t, p)
	script := fmt.Sprintf(`
const show = async (u, init) => { try { const r = await fetch(u, init); console.log(r.status, await r.text()); } catch (e) { console.log('error', e.cause ? e.cause.message : e.message); } };
await show(%q);
await show(%q, {method: 'POST', body: 'hi'});
await show('http://undeclared.example/');
`, plain.URL+"/a", tlsSrv.URL+"/b")
	cmd := exec.Command(node, "--input-type=module", "-e", script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NODE_EXTRA_CA_CERTS=" + ca, "NODE_OPTIONS=" + initproto.NodeProxyOptions()}
	for k, v := range initproto.ProxyEnv(purl.Host) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := "200 GET /a \n200 POST /b hi\nerror runbox proxy refused undeclared.example:80: HTTP/1.1 403 Forbidden (runbox: undeclared.example:80 is not declared"
	if !strings.HasPrefix(string(out), want) {
		t.Fatalf("node printed:\n%s\nwant:\n%s", out, want)
	}
	if recs := p.Records(); len(recs) != 3 || recs[0].Method != "CONNECT" || !recs[1].Allowed || recs[2].Allowed {
		t.Fatalf("records %+v", recs)
	}
}
