package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/sandbox/kube"
)

// kubeChecks checks a Kubernetes backend: the cluster answers, runbox may
// do what it needs in its namespace, and a box runs hardened there at the
// manifest's isolation level.
func kubeChecks(ctx context.Context, o Options, m *manifest.Manifest, rep *Report) {
	pm := probeManifest(m, m.Isolation)
	k, err := kube.New(kube.Options{Manifest: pm, Logger: o.Logger}, sandbox.CurrentOwner())
	if err != nil {
		rep.add(Check{Name: "cluster", Status: Fail, Detail: err.Error(),
			Fix: "Set kubernetes.kubeconfig in the manifest, or run runbox in the cluster with its service account (deploy/kubernetes)."})
		return
	}
	r := sandbox.New(k, sandbox.Options{Manifest: pm, Logger: o.Logger})
	defer r.Close()
	cl, err := k.Cluster(ctx)
	if err != nil {
		rep.add(Check{Name: "cluster", Status: Fail, Detail: err.Error(), Fix: hintOf(err, "Check that the API server is reachable from here.")})
		return
	}
	rep.add(Check{Name: "cluster", Status: OK, Detail: fmt.Sprintf("Kubernetes %s at %s, namespace %s, init image %s", cl.Version, cl.Host, cl.Namespace, cl.InitImage)})
	rep.add(permissionsCheck(ctx, k))
	if err := r.Ready(ctx); err != nil {
		rep.add(Check{Name: "namespace", Status: Fail, Detail: err.Error(), Fix: hintOf(err, "Create the namespace (deploy/kubernetes/namespace.yaml).")})
		return
	}
	level := k.Isolation()
	rep.add(selfTestCheck(ctx, levelResult(level, true), pm, r, true,
		"Check the sandbox namespace's events (`kubectl get events -n "+cl.Namespace+"`), the images on the nodes and the RuntimeClass, then run `runbox doctor` again.",
		"Do not run boxes in this cluster until fixed: check the RuntimeClass, the seccomp profile named in kubernetes.seccomp_profile and the namespace's admission policies."))
}

func permissionsCheck(ctx context.Context, k *kube.Kube) Check {
	c := Check{Name: "permissions"}
	perms, err := k.Permissions(ctx)
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, err.Error(), hintOf(err, "Grant runbox's identity the Role in deploy/kubernetes/rbac.yaml.")
		return c
	}
	var missing []string
	for _, p := range perms {
		if !p.Allowed {
			res := p.Resource
			if p.Subresource != "" {
				res += "/" + p.Subresource
			}
			missing = append(missing, p.Verb+" "+res)
		}
	}
	if len(missing) > 0 {
		c.Status, c.Detail = Fail, "runbox may not "+strings.Join(missing, ", ")
		c.Fix = "Grant runbox's identity the Role in deploy/kubernetes/rbac.yaml in the sandbox namespace."
		return c
	}
	c.Status, c.Detail = OK, fmt.Sprintf("all %d that runbox needs (pods, pods/attach, leases)", len(perms))
	return c
}
