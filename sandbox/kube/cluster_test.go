package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	authv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runbox-mcp/runbox/sandbox"
)

// doctor's view of the cluster: its version, and for each permission the
// driver uses, whether the API server grants it to runbox's identity.
func TestKubeClusterAndPermissions(t *testing.T) {
	k, fc := newFakeCluster(t)
	fc.cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{GitVersion: "v1.31.4+k3s1"}
	c, err := k.Cluster(context.Background())
	if err != nil || c.Version != "v1.31.4+k3s1" || c.Namespace != k.ns || c.InitImage != k.initImage || c.Host != k.cfg.Host {
		t.Errorf("Cluster: %+v %v", c, err)
	}
	var asked []authv1.ResourceAttributes
	fc.cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authv1.SelfSubjectAccessReview)
		ra := *r.Spec.ResourceAttributes
		asked = append(asked, ra)
		r.Status.Allowed = !(ra.Verb == "delete" && ra.Resource == "leases")
		if !r.Status.Allowed {
			r.Status.Reason = "no RBAC rule"
		}
		return true, r, nil
	})
	perms, err := k.Permissions(context.Background())
	if err != nil || len(perms) != len(needed) || len(asked) != len(needed) {
		t.Fatalf("Permissions: %d %v", len(perms), err)
	}
	for i, p := range perms {
		if asked[i].Namespace != k.ns || asked[i].Verb != p.Verb || asked[i].Resource != p.Resource || asked[i].Subresource != p.Subresource || asked[i].Group != p.Group {
			t.Errorf("asked %+v for %+v", asked[i], p)
		}
		if denied := p.Verb == "delete" && p.Resource == "leases"; p.Allowed == denied || denied && p.Reason != "no RBAC rule" {
			t.Errorf("permission %+v", p)
		}
	}
	fc.cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(authv1.Resource("selfsubjectaccessreviews"), "", errors.New("no"))
	})
	var ee *sandbox.EngineError
	if _, err := k.Permissions(context.Background()); !errors.As(err, &ee) {
		t.Errorf("Permissions refused: %v", err)
	}
}

// Each instance keeps a Lease of its own fresh, so that other instances'
// reapers leave its pods alone: created the first time, renewed after,
// deleted at Close.
func TestKubeLease(t *testing.T) {
	k, fc := newFakeCluster(t)
	if err := k.renewLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	leases := fc.cs.CoordinationV1().Leases(k.ns)
	l, err := leases.Get(context.Background(), "runbox-"+k.owner.Instance, metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != k.owner.Instance || *l.Spec.LeaseDurationSeconds != int32(leaseDuration.Seconds()) ||
		l.Labels[sandbox.LabelManaged] != "true" || l.Spec.RenewTime == nil {
		t.Fatalf("lease %+v %v", l, err)
	}
	first := l.Spec.RenewTime.Time
	if err := k.renewLease(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, _ = leases.Get(context.Background(), "runbox-"+k.owner.Instance, metav1.GetOptions{})
	if !l.Spec.RenewTime.Time.After(first) || !l.Spec.AcquireTime.Time.Equal(first) {
		t.Errorf("renewed lease: acquired %v renewed %v (first %v)", l.Spec.AcquireTime, l.Spec.RenewTime, first)
	}
	k.stop = func() {}
	k.done = make(chan struct{})
	close(k.done)
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := leases.Get(context.Background(), "runbox-"+k.owner.Instance, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the lease outlived Close: %v", err)
	}
	if !strings.HasPrefix(k.leaseName(k.owner.Instance), "runbox-") {
		t.Error(k.leaseName(k.owner.Instance))
	}
}
