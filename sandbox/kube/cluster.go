package kube

import (
	"context"

	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cluster describes the cluster and namespace, for `runbox doctor`.
type Cluster struct {
	Version      string `json:"version"`
	Host         string `json:"host"`
	Namespace    string `json:"namespace"`
	InitImage    string `json:"init_image"`
	RuntimeClass string `json:"runtime_class,omitempty"`
}

// Cluster asks the API server about itself.
func (k *Kube) Cluster(ctx context.Context) (Cluster, error) {
	c := Cluster{Host: k.cfg.Host, Namespace: k.ns, InitImage: k.initImage, RuntimeClass: k.m.Kubernetes.RuntimeClass}
	v, err := k.cs.Discovery().ServerVersion()
	if err != nil {
		return c, kubeError(err)
	}
	c.Version = v.GitVersion
	return c, nil
}

// Permission is one thing runbox must be allowed in its namespace.
type Permission struct {
	Verb, Resource, Subresource, Group string
	Allowed                            bool
	Reason                             string
}

// needed is every permission the driver uses (deploy/kubernetes/rbac.yaml).
var needed = []Permission{
	{Verb: "create", Resource: "pods"}, {Verb: "get", Resource: "pods"}, {Verb: "list", Resource: "pods"},
	{Verb: "watch", Resource: "pods"}, {Verb: "delete", Resource: "pods"}, {Verb: "patch", Resource: "pods"},
	{Verb: "create", Resource: "pods", Subresource: "attach"},
	{Verb: "get", Resource: "leases", Group: "coordination.k8s.io"}, {Verb: "create", Resource: "leases", Group: "coordination.k8s.io"},
	{Verb: "update", Resource: "leases", Group: "coordination.k8s.io"}, {Verb: "list", Resource: "leases", Group: "coordination.k8s.io"},
	{Verb: "delete", Resource: "leases", Group: "coordination.k8s.io"},
}

// Permissions asks the API server, for each permission runbox needs in
// its namespace, whether runbox's own identity has it.
func (k *Kube) Permissions(ctx context.Context) ([]Permission, error) {
	out := make([]Permission, len(needed))
	for i, p := range needed {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		r, err := k.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(actx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Namespace: k.ns, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource}},
		}, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return nil, kubeError(err)
		}
		p.Allowed, p.Reason = r.Status.Allowed, r.Status.Reason
		out[i] = p
	}
	return out, nil
}
