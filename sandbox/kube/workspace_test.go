package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

const testClientKey = "0123456789abcdef0123456789abcdef"

func TestKubeClaimName(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range []struct{ name, want string }{
		{"proj", "runbox-ws-0123456789ab-proj"},
		{"a-b", "runbox-ws-0123456789ab-a-b"},
		{"a_b", ""},
		{"a_", ""},
		{"x-", ""},
		{"_", ""},
		{strings.Repeat("a_", 16), ""},
		{strings.Repeat("z", 32), ""},
	} {
		got := claimName(sandbox.WorkspaceRef{Client: testClientKey, Name: tc.name})
		if tc.want != "" && got != tc.want {
			t.Errorf("%q: %q, want %q", tc.name, got, tc.want)
		}
		// A claim's name, and a label value, for every valid workspace
		// name; two names never share one.
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 || len(validation.IsValidLabelValue(got)) > 0 {
			t.Errorf("%q: %q is not a DNS label and label value: %v", tc.name, got, errs)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q share the claim %q", tc.name, other, got)
		}
		seen[got] = tc.name
	}
}

func TestKubeClaimSpec(t *testing.T) {
	k := testKube(t, func(m *manifest.Manifest) { m.Kubernetes.WorkspaceStorageClass = "fast-local" })
	ref := sandbox.WorkspaceRef{Client: testClientKey, Name: "proj_1"}
	c := k.claimSpec(ref, 32<<20)
	l := podOwnerLabels(&c.ObjectMeta)
	if c.Name != claimName(ref) || c.Namespace != k.ns || l[sandbox.LabelWorkspace] != "proj_1" ||
		l[sandbox.LabelSessionClient] != testClientKey || c.Labels[labelWorkspaceClaim] != c.Name {
		t.Errorf("claim's name and labels: %s %v %v", c.Name, c.Labels, c.Annotations)
	}
	// A workspace outlives the server that made it: no owner, no reaper.
	if _, ok := l[sandbox.LabelInstance]; ok {
		t.Errorf("the claim names its server: %v", l)
	}
	if len(c.Spec.AccessModes) != 1 || c.Spec.AccessModes[0] != corev1.ReadWriteOnce ||
		c.Spec.Resources.Requests.Storage().Value() != 32<<20 || c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != "fast-local" {
		t.Errorf("claim's spec: %+v", c.Spec)
	}
	if c := testKube(t, nil).claimSpec(ref, 1<<30); c.Spec.StorageClassName != nil {
		t.Errorf("no class in the manifest, yet the claim names %q", *c.Spec.StorageClassName)
	}
}

// A session pod with a workspace differs from one without only in its
// /workspace volume (the claim), the fsGroup that gives the box user the
// volume, and the label that says it holds it: the rest of its profile
// (read-only root, no service account token, no capabilities, seccomp,
// limits) is the same.
func TestKubeWorkspacePod(t *testing.T) {
	k := testKube(t, func(m *manifest.Manifest) { m.User = "1000:1001" })
	lim := k.m.Limits
	ref := sandbox.WorkspaceRef{Client: testClientKey, Name: "proj"}
	mk := func(ws bool) *corev1.Pod {
		p := k.podSpec("runbox-python-x", k.m.Languages[0], k.owner.Labels(map[string]string{sandbox.LabelWorkspace: "proj"}), time.Minute, nil)
		sessionPod(p, &lim)
		if ws {
			k.withWorkspaceClaim(p, ref)
		}
		return p
	}
	plain, with := mk(false), mk(true)
	var vol *corev1.Volume
	for i := range with.Spec.Volumes {
		if with.Spec.Volumes[i].Name == workspaceVolume {
			vol = &with.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != claimName(ref) || vol.EmptyDir != nil {
		t.Fatalf("the workspace volume: %+v", vol)
	}
	// Mounted in the box only, where the memory-backed one was.
	for _, c := range append(append([]corev1.Container{}, with.Spec.InitContainers...), with.Spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.Name == workspaceVolume && (c.Name != kubeBox || m.MountPath != manifest.Workspace || m.ReadOnly) {
				t.Errorf("container %s mounts the workspace at %s (read-only %v)", c.Name, m.MountPath, m.ReadOnly)
			}
		}
	}
	sc := with.Spec.SecurityContext
	if sc.FSGroup == nil || *sc.FSGroup != 1001 || sc.FSGroupChangePolicy == nil || *sc.FSGroupChangePolicy != corev1.FSGroupChangeOnRootMismatch {
		t.Errorf("fsGroup: %v %v", sc.FSGroup, sc.FSGroupChangePolicy)
	}
	if with.Labels[labelWorkspaceClaim] != claimName(ref) {
		t.Errorf("the pod's labels: %v", with.Labels)
	}
	// Everything else as without.
	with = with.DeepCopy()
	for i := range with.Spec.Volumes {
		if with.Spec.Volumes[i].Name == workspaceVolume {
			with.Spec.Volumes[i] = *plain.Spec.Volumes[i].DeepCopy()
		}
	}
	with.Spec.SecurityContext.FSGroup, with.Spec.SecurityContext.FSGroupChangePolicy = nil, nil
	delete(with.Labels, labelWorkspaceClaim)
	if !equality.Semantic.DeepEqual(with, plain) {
		t.Errorf("the workspace changed more of the pod than its volume:\n%+v\n%+v", with.Spec, plain.Spec)
	}
}

func TestKubeVolumes(t *testing.T) {
	k, fc := newFakeCluster(t)
	ctx := context.Background()
	ref := sandbox.WorkspaceRef{Client: testClientKey, Name: "proj"}
	if has, err := k.HasVolume(ctx, ref); err != nil || has {
		t.Fatalf("before: %v %v", has, err)
	}
	if err := k.CreateVolume(ctx, ref, 32<<20); err != nil {
		t.Fatal(err)
	}
	if err := k.CreateVolume(ctx, ref, 32<<20); err != nil {
		t.Fatalf("created twice: %v", err)
	}
	if has, err := k.HasVolume(ctx, ref); err != nil || !has {
		t.Fatalf("after: %v %v", has, err)
	}
	other := sandbox.WorkspaceRef{Client: strings.Repeat("f", 32), Name: "proj"}
	if err := k.CreateVolume(ctx, other, 1<<20); err != nil {
		t.Fatal(err)
	}
	vols, err := k.Volumes(ctx, testClientKey)
	if err != nil || len(vols) != 1 || vols[0].Name != "proj" || vols[0].Quota != 32<<20 || vols[0].InUse || vols[0].Note == "" {
		t.Fatalf("volumes: %+v %v", vols, err)
	}
	// A pod not ended holds it; an ended one does not.
	labels := map[string]string{labelWorkspaceClaim: claimName(ref), sandbox.LabelSessionClient: testClientKey}
	for name, phase := range map[string]corev1.PodPhase{"done": corev1.PodSucceeded, "live": corev1.PodPending} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
		if _, err := fc.cs.CoreV1().Pods(k.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if held, err := k.VolumeHeld(ctx, ref); err != nil || !held {
		t.Fatalf("held by a pending pod: %v %v", held, err)
	}
	if vols, _ := k.Volumes(ctx, testClientKey); len(vols) != 1 || !vols[0].InUse {
		t.Fatalf("in use: %+v", vols)
	}
	if err := fc.cs.CoreV1().Pods(k.ns).Delete(ctx, "live", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if held, err := k.VolumeHeld(ctx, ref); err != nil || held {
		t.Fatalf("held by an ended pod: %v %v", held, err)
	}
	// An ended pod being deleted still holds it: the kubelet removes it
	// once its volume is unmounted.
	now := metav1.Now()
	leaving := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "leaving", Namespace: k.ns, Labels: labels, DeletionTimestamp: &now},
		Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	if _, err := fc.cs.CoreV1().Pods(k.ns).Create(ctx, leaving, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if held, err := k.VolumeHeld(ctx, ref); err != nil || !held {
		t.Fatalf("held by a pod being deleted: %v %v", held, err)
	}
	if err := fc.cs.CoreV1().Pods(k.ns).Delete(ctx, "leaving", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	k.VolumeReleased(ctx, ref)
	if vols, _ := k.Volumes(ctx, testClientKey); len(vols) != 1 || time.Since(vols[0].LastUsed) > time.Minute {
		t.Fatalf("last used: %+v", vols)
	}
	if err := k.DeleteVolume(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if vols, _ := k.Volumes(ctx, testClientKey); len(vols) != 0 {
		t.Fatalf("after deletion: %+v", vols)
	}
	if err := k.DeleteVolume(ctx, ref); err != nil {
		t.Fatalf("deleted twice: %v", err)
	}
	if vols, _ := k.Volumes(ctx, other.Client); len(vols) != 1 {
		t.Fatalf("another caller's: %+v", vols)
	}
}

// A claim of the name whose labels say it is another's is never used.
func TestKubeVolumeOfAnother(t *testing.T) {
	k, fc := newFakeCluster(t)
	ctx := context.Background()
	ref := sandbox.WorkspaceRef{Client: testClientKey, Name: "proj"}
	c := k.claimSpec(ref, 1<<20)
	c.Labels[sandbox.LabelSessionClient] = testClientKey[:12] + strings.Repeat("0", 20)
	if _, err := fc.cs.CoreV1().PersistentVolumeClaims(k.ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if has, err := k.HasVolume(ctx, ref); err == nil || has {
		t.Fatalf("another's claim taken: %v %v", has, err)
	}
}

// Two servers that open a workspace at once both create a pod; the one
// that finds an older pod holding the claim deletes its own and says so.
func TestKubeStartWorkspaceBusy(t *testing.T) {
	k, fc := newFakeCluster(t)
	ctx := context.Background()
	ref := sandbox.WorkspaceRef{Client: testClientKey, Name: "proj"}
	older := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "runbox-a", Namespace: k.ns, Labels: map[string]string{labelWorkspaceClaim: claimName(ref)}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if _, err := fc.cs.CoreV1().Pods(k.ns).Create(ctx, older, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec := testBoxSpec(k)
	spec.Session, spec.WorkspaceVolume = true, &ref
	r := result(t, start(k, ctx, spec))
	if !errors.Is(r.err, sandbox.ErrWorkspaceBusy) {
		t.Fatalf("started beside an older holder: %v", r.err)
	}
	k.bg.Wait()
	if pods := fc.pods(t); len(pods) != 1 || pods[0].Name != "runbox-a" {
		t.Fatalf("pods left: %d", len(pods))
	}
}

// A pod that mounts a claim is deleted with a grace period, so that it
// holds the claim until the kubelet has stopped its box; one adopted
// after a restart too. Other pods go at once.
func TestKubeClaimPodDeletedGracefully(t *testing.T) {
	k, fc := newFakeCluster(t)
	ctx := context.Background()
	graces := map[string]int64{}
	fc.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if g := a.(k8stesting.DeleteActionImpl).DeleteOptions.GracePeriodSeconds; g != nil {
			graces[a.(k8stesting.DeleteActionImpl).Name] = *g
		}
		return false, nil, nil
	})
	ref := sandbox.WorkspaceRef{Client: testClientKey, Name: "proj"}
	spec := testBoxSpec(k)
	spec.Session, spec.WorkspaceVolume = true, &ref
	ch := start(k, ctx, spec)
	pw := fc.watch(t)
	p := fc.pods(t)[0]
	pw.w.Modify(fc.set(t, p.Name, running))
	r := result(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if p.Labels[labelWorkspaceClaim] != claimName(ref) || p.Spec.Volumes[1].PersistentVolumeClaim == nil {
		t.Fatalf("the pod: %v %+v", p.Labels, p.Spec.Volumes)
	}
	r.box.Remove()
	adopted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "runbox-adopted", Namespace: k.ns, Labels: map[string]string{labelWorkspaceClaim: claimName(ref)}}}
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "runbox-plain", Namespace: k.ns}}
	for _, p := range []*corev1.Pod{adopted, plain} {
		if _, err := fc.cs.CoreV1().Pods(k.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b, err := k.Attach(ctx, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		b.Remove()
	}
	if graces[p.Name] != claimGrace || graces[adopted.Name] != claimGrace || graces[plain.Name] != 0 {
		t.Fatalf("grace periods: %v", graces)
	}
}

// A claim being deleted (another server's workspace_delete) is awaited:
// gone, it is no workspace, and a new one is made; still there past the
// wait, the open fails saying so, never waits on it in a pod.
func TestKubeClaimBeingDeleted(t *testing.T) {
	k, fc := newFakeCluster(t)
	ctx := context.Background()
	wait, poll := claimGoneWait, claimGonePoll
	claimGoneWait, claimGonePoll = time.Second, 10*time.Millisecond
	t.Cleanup(func() { claimGoneWait, claimGonePoll = wait, poll })
	ref := sandbox.WorkspaceRef{Client: testClientKey, Name: "proj"}
	claims := fc.cs.CoreV1().PersistentVolumeClaims(k.ns)
	leaving := func() {
		t.Helper()
		c := k.claimSpec(ref, 1<<20)
		now := metav1.Now()
		c.DeletionTimestamp = &now
		if _, err := claims.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	leaving()
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = claims.Delete(ctx, claimName(ref), metav1.DeleteOptions{})
	}()
	if has, err := k.HasVolume(ctx, ref); has || err != nil {
		t.Fatalf("a claim that went: %v %v", has, err)
	}
	leaving()
	began := time.Now()
	has, err := k.HasVolume(ctx, ref)
	if has || err == nil || !strings.Contains(err.Error(), "still being deleted") || time.Since(began) < claimGoneWait {
		t.Fatalf("a claim that stays: %v %v after %v", has, err, time.Since(began))
	}
}
