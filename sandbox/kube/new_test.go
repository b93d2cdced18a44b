package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// New connects through the manifest's kubeconfig and renews the
// instance's Lease in the background at once; Close stops the renewal
// and deletes the Lease. A kubeconfig that cannot be read is an error
// that names the setting.
func TestKubeNewAndClose(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "config")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m := manifest.Default()
	m.Backend = manifest.BackendKubernetes
	m.Kubernetes.Kubeconfig = kubeconfig
	m.Kubernetes.InitImage = "runbox/init:0123456789abcdef"
	owner := sandbox.CurrentOwner()
	k, err := New(Options{Manifest: m}, owner)
	if err != nil {
		t.Fatal(err)
	}
	if k.InitImage() != m.Kubernetes.InitImage || k.ns != m.Kubernetes.Namespace {
		t.Errorf("init image %s namespace %s", k.InitImage(), k.ns)
	}
	lease := "/apis/coordination.k8s.io/v1/namespaces/" + k.ns + "/leases/runbox-" + owner.Instance
	has := func(req string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			if s == req {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(30 * time.Second)
	for !has("POST /apis/coordination.k8s.io/v1/namespaces/"+k.ns+"/leases") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !has("GET "+lease) || !has("POST /apis/coordination.k8s.io/v1/namespaces/"+k.ns+"/leases") {
		t.Errorf("the lease was not renewed at start: %v", seen)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if !has("DELETE " + lease) {
		t.Errorf("Close did not delete the lease: %v", seen)
	}
	if c, err := k.Cluster(context.Background()); err == nil || c.Host != srv.URL {
		t.Errorf("Cluster on a server without /version: %+v %v", c, err)
	}

	m.Kubernetes.Kubeconfig = filepath.Join(t.TempDir(), "missing")
	if _, err := New(Options{Manifest: m}, owner); err == nil || !strings.Contains(err.Error(), "kubernetes.kubeconfig") {
		t.Errorf("a missing kubeconfig: %v", err)
	}
}
