//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// TestKubeDoctor: with backend: kubernetes, doctor checks the cluster, not
// Docker: the API server, runbox's permissions in its namespace, and a pod
// started for real with the hardening self-test; a cluster it cannot reach
// fails with its fix.
func TestKubeDoctor(t *testing.T) {
	kubeSetup(t)
	rep, code, out := doctor(t, nil, "--manifest", kubeManifest(t, ""))
	if code != 0 || !rep.OK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if status, detail, _ := rep.check("cluster"); status != "ok" || !strings.Contains(detail, "namespace "+kubeNS) {
		t.Errorf("cluster: %s %s", status, detail)
	}
	if status, detail, _ := rep.check("permissions"); status != "ok" || !strings.Contains(detail, "pods/attach") {
		t.Errorf("permissions: %s %s", status, detail)
	}
	// The test cluster's pods have an interface of their own: the self-test
	// says so (a warning), and everything else of the profile holds.
	status, detail, _ := rep.check("level runc")
	if status == "fail" || !strings.Contains(detail, "no capabilities") || !strings.Contains(detail, "ptrace killed") {
		t.Errorf("level runc: %s %s", status, detail)
	}
	if status, _, _ := rep.check("engine"); status != "" {
		t.Errorf("doctor checked a Docker engine for a Kubernetes backend: %s", out)
	}

	bad := writeManifest(t, "backend: kubernetes\nkubernetes:\n  kubeconfig: /nonexistent/kubeconfig\n")
	rep, code, out = doctor(t, nil, "--manifest", bad)
	if status, _, fix := rep.check("cluster"); code == 0 || rep.OK || status != "fail" || fix == "" {
		t.Errorf("an unusable kubeconfig: exit %d\n%s", code, out)
	}
}
