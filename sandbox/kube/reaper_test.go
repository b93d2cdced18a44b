package kube

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// TestKubeReapDecisions runs the reaper against an in-memory API server
// (client-go's fake clientset): which pods of which instances it deletes.
func TestKubeReapDecisions(t *testing.T) {
	m := manifest.Default()
	m.Backend = manifest.BackendKubernetes
	ns := m.Kubernetes.Namespace
	self := sandbox.CurrentOwner()
	self.State = sandbox.StateKey(t.TempDir())
	now := time.Now()
	pod := func(name string, o sandbox.Owner, age time.Duration) runtime.Object {
		labels, ann := podMeta(o.Labels(nil))
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: ann,
			CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	}
	lease := func(instance string, renewed time.Duration) runtime.Object {
		rt := metav1.NewMicroTime(now.Add(-renewed))
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "runbox-" + instance, Namespace: ns,
			Labels: map[string]string{sandbox.LabelManaged: "true"}}, Spec: coordv1.LeaseSpec{RenewTime: &rt}}
	}
	remote := func(instance string) sandbox.Owner {
		return sandbox.Owner{Instance: instance, Host: "elsewhere", PID: 1, Start: "1"}
	}
	deadLocal := sandbox.Owner{Instance: "deadlocal", Host: self.Host, PID: 1 << 30, Start: "1"}
	objs := []runtime.Object{
		pod("own", self, time.Minute),
		pod("own-untracked", self, 10*time.Minute),
		pod("own-ancient", self, 2*time.Hour),
		pod("local-dead", deadLocal, time.Second),
		// Marked kept (MarkKept below): by another state directory's
		// server, by this one's, and another's long ago.
		pod("local-dead-kept-elsewhere", deadLocal, time.Minute),
		pod("local-dead-kept-here", deadLocal, time.Minute),
		pod("local-dead-kept-ancient", deadLocal, 48*time.Hour),
		pod("remote-live", remote("live"), time.Minute), lease("live", 5*time.Second),
		pod("remote-stale", remote("stale"), time.Minute), lease("stale", 2*time.Minute),
		pod("remote-stale-kept", remote("stale"), time.Minute),
		pod("remote-nolease-old", remote("gone"), time.Minute),
		pod("remote-nolease-young", remote("new"), 5*time.Second),
		lease("ancient", time.Hour),
	}
	dl := lease("deadlocal", time.Second).(*coordv1.Lease)
	dl.Labels, dl.Annotations = podMeta(deadLocal.Labels(nil))
	objs = append(objs, dl)
	cs := fake.NewClientset(objs...)
	k := &Kube{cs: cs, m: m, ns: ns, log: slog.New(slog.DiscardHandler), owner: self,
		live: map[string]struct{}{"own": {}}, unremoved: map[string]bool{}}
	otherDir := deadLocal
	otherDir.State = sandbox.StateKey(t.TempDir())
	other := &Kube{cs: cs, m: m, ns: ns, log: slog.New(slog.DiscardHandler), owner: otherDir}
	for by, pods := range map[*Kube][]string{other: {"local-dead-kept-elsewhere", "local-dead-kept-ancient", "remote-stale-kept"}, k: {"local-dead-kept-here"}} {
		for _, p := range pods {
			if err := by.MarkKept(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := k.Reap(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	var left []string
	for _, p := range list.Items {
		left = append(left, p.Name)
	}
	slices.Sort(left)
	want := []string{"local-dead-kept-elsewhere", "own", "remote-live", "remote-nolease-young", "remote-stale-kept"}
	if !slices.Equal(left, want) || n != 7 {
		t.Fatalf("left %v (removed %d), want %v (removed 7)", left, n, want)
	}
	leases, _ := cs.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{})
	var kept []string
	for _, l := range leases.Items {
		kept = append(kept, l.Name)
	}
	slices.Sort(kept)
	if want := []string{"runbox-live", "runbox-stale"}; !slices.Equal(kept, want) {
		t.Errorf("leases kept %v, want %v", kept, want)
	}
}
