package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Named workspaces are PersistentVolumeClaims, one per caller and name,
// in the sandbox namespace: the claim's size is the quota, as its
// provisioner enforces it, and a pod that holds one carries
// labelWorkspaceClaim with the claim's name, by which the one-writer rule
// finds it.
const (
	// labelWorkspaceClaim marks a workspace's claim, and a pod that
	// mounts it, with the claim's name: always a valid label value, where
	// a workspace's name (which may end in - or _) is not.
	labelWorkspaceClaim = "io.runbox.workspace.claim"
	// annotationLastUsed is when the claim's last pod was released
	// (RFC 3339).
	annotationLastUsed = annotationPrefix + "last-used-at"
	// claimGrace is the grace period of a pod that mounts a claim's
	// deletion: with one, the pod stays (and holds the claim, for
	// VolumeHeld) until the kubelet has stopped its box and unmounted the
	// volume; deleted at once, it would be gone from the API while its
	// processes may still write, and a next pod could mount the volume.
	claimGrace = 1
	// workspaceVolume is the pod volume mounted at /workspace.
	workspaceVolume = "workspace"
	// bytesUsedNote is workspace_list's word on what Kubernetes does not
	// tell runbox.
	bytesUsedNote = "bytes_used is not known on the kubernetes backend (the cluster does not report a claim's usage to runbox): 0 here"
)

var _ sandbox.VolumeDriver = (*Kube)(nil)

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// claimName is ref's claim: runbox-ws-<first 12 hex of the caller's
// key>-<name>, the name made a DNS label (its _ as -, and a short hash of
// the real name after it when that changed it), at most 62 characters.
func claimName(ref sandbox.WorkspaceRef) string {
	ck := ref.Client[:min(len(ref.Client), 12)]
	name := ref.Name
	if !dnsLabel.MatchString(name) {
		sum := sha256.Sum256([]byte(name))
		name = strings.Trim(strings.ReplaceAll(name, "_", "-"), "-") + "-" + hex.EncodeToString(sum[:])[:6]
		name = strings.TrimPrefix(name, "-")
	}
	return "runbox-ws-" + ck + "-" + name
}

// claimSpec is ref's claim: quota bytes, ReadWriteOnce, of the manifest's
// storage class (the cluster's default without one), labelled with the
// caller's key and the workspace's name.
func (k *Kube) claimSpec(ref sandbox.WorkspaceRef, quota int64) *corev1.PersistentVolumeClaim {
	name := claimName(ref)
	labels, annotations := podMeta(k.owner.Labels(map[string]string{
		sandbox.LabelWorkspace: ref.Name, sandbox.LabelSessionClient: ref.Client, labelWorkspaceClaim: name}))
	// Not the owning server's: a workspace outlives it, and no reaper
	// takes it.
	for _, l := range []string{sandbox.LabelInstance, sandbox.LabelOwnerHost, sandbox.LabelOwnerPID, sandbox.LabelOwnerStart} {
		delete(labels, l)
		delete(annotations, annotationPrefix+l)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Labels: labels, Annotations: annotations},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: *resource.NewQuantity(quota, resource.BinarySI)}},
		},
	}
	if sc := k.m.Kubernetes.WorkspaceStorageClass; sc != "" {
		pvc.Spec.StorageClassName = &sc
	}
	return pvc
}

// withWorkspaceClaim mounts ref's claim at /workspace in place of the
// memory-backed one, the pod's files group-owned by the box user's group
// (fsGroup, changed only when the volume's root is not yet so), and
// labels the pod as holding it. The rest of the pod's profile is as is.
func (k *Kube) withWorkspaceClaim(pod *corev1.Pod, ref sandbox.WorkspaceRef) {
	name := claimName(ref)
	for i, v := range pod.Spec.Volumes {
		if v.Name == workspaceVolume {
			pod.Spec.Volumes[i].VolumeSource = corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}
		}
	}
	_, gid := boxIDs(k.m.User)
	policy := corev1.FSGroupChangeOnRootMismatch
	pod.Spec.SecurityContext.FSGroup = &gid
	pod.Spec.SecurityContext.FSGroupChangePolicy = &policy
	pod.Labels[labelWorkspaceClaim] = name
}

// HasVolume says whether ref's claim exists. A claim of that name whose
// labels name another caller or workspace is refused, never used. A claim
// being deleted (another server's workspace_delete, its last pod still
// going) is awaited, for at most claimGoneWait: taken as it is, a new
// session's pod would wait on it until its start timed out.
func (k *Kube) HasVolume(ctx context.Context, ref sandbox.WorkspaceRef) (bool, error) {
	end := time.Now().Add(claimGoneWait)
	for {
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		c, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Get(actx, claimName(ref), metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, kubeError(err)
		}
		if l := podOwnerLabels(&c.ObjectMeta); l[sandbox.LabelSessionClient] != ref.Client || l[sandbox.LabelWorkspace] != ref.Name {
			return false, &sandbox.EngineError{Msg: fmt.Sprintf("the claim %s belongs to another workspace", c.Name),
				Hint: "Use another workspace name; the operator should look at that claim's labels."}
		}
		if c.DeletionTimestamp == nil {
			return true, nil
		}
		if time.Now().After(end) {
			return false, &sandbox.EngineError{Msg: fmt.Sprintf("the workspace %q is still being deleted", ref.Name),
				Hint: "Try again in a moment, or use another workspace name."}
		}
		select {
		case <-time.After(claimGonePoll):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// claimGoneWait bounds the wait for a claim being deleted to go, polled
// every claimGonePoll.
var (
	claimGoneWait = 30 * time.Second
	claimGonePoll = 250 * time.Millisecond
)

// CreateVolume creates ref's claim; one that appeared meanwhile is taken.
func (k *Kube) CreateVolume(ctx context.Context, ref sandbox.WorkspaceRef, quota int64) error {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Create(actx, k.claimSpec(ref, quota), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return kubeError(err)
	}
	return nil
}

// Volumes lists client's claims: the size the claim got (else the one it
// asked for), when its last pod was released (else its creation), and
// whether a pod holds it. Their usage is not known here (Note).
func (k *Kube) Volumes(ctx context.Context, client string) ([]contract.WorkspaceInfo, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	sel := sandbox.LabelSessionClient + "=" + client + "," + labelWorkspaceClaim
	claims, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).List(actx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, kubeError(err)
	}
	pods, err := k.cs.CoreV1().Pods(k.ns).List(actx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, kubeError(err)
	}
	held := map[string]bool{}
	for i := range pods.Items {
		if holds(&pods.Items[i]) {
			held[pods.Items[i].Labels[labelWorkspaceClaim]] = true
		}
	}
	out := []contract.WorkspaceInfo{}
	for i := range claims.Items {
		c := &claims.Items[i]
		l := podOwnerLabels(&c.ObjectMeta)
		if c.DeletionTimestamp != nil || l[sandbox.LabelWorkspace] == "" {
			continue
		}
		size := c.Spec.Resources.Requests[corev1.ResourceStorage]
		if got, ok := c.Status.Capacity[corev1.ResourceStorage]; ok {
			size = got
		}
		used := c.CreationTimestamp.UTC()
		if t, err := time.Parse(time.RFC3339, c.Annotations[annotationLastUsed]); err == nil {
			used = t.UTC()
		}
		out = append(out, contract.WorkspaceInfo{Name: l[sandbox.LabelWorkspace], Quota: size.Value(), LastUsed: used,
			InUse: held[c.Name], Note: bytesUsedNote})
	}
	return out, nil
}

// holds says whether a pod holds the claim it mounts: one not ended, and
// one being deleted whatever its phase (the kubelet removes it only once
// its box is stopped and the volume unmounted).
func holds(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// VolumeHeld says whether a pod that is not ended holds ref's claim.
func (k *Kube) VolumeHeld(ctx context.Context, ref sandbox.WorkspaceRef) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	pods, err := k.cs.CoreV1().Pods(k.ns).List(actx, metav1.ListOptions{LabelSelector: labelWorkspaceClaim + "=" + claimName(ref)})
	if err != nil {
		return false, kubeError(err)
	}
	for i := range pods.Items {
		if holds(&pods.Items[i]) {
			return true, nil
		}
	}
	return false, nil
}

// DeleteVolume deletes ref's claim; its provisioner reclaims the volume.
func (k *Kube) DeleteVolume(ctx context.Context, ref sandbox.WorkspaceRef) error {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Delete(actx, claimName(ref), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return kubeError(err)
	}
	return nil
}

// VolumeReleased stamps ref's claim with the time of its release.
func (k *Kube) VolumeReleased(ctx context.Context, ref sandbox.WorkspaceRef) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotationLastUsed, time.Now().UTC().Format(time.RFC3339))
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Patch(actx, claimName(ref), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		k.log.Warn("workspace's release not recorded", "claim", claimName(ref), "err", err)
	}
}

// markClaimPod records that the live pod name mounts a claim.
func (k *Kube) markClaimPod(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.claimPods == nil {
		k.claimPods = map[string]bool{}
	}
	k.claimPods[name] = true
}

// firstHolder says whether pod, just created, is the oldest pod not ended
// that holds its claim: two servers that opened the workspace at once
// both created one, and only the older goes on.
func (k *Kube) firstHolder(ctx context.Context, pod *corev1.Pod) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	pods, err := k.cs.CoreV1().Pods(k.ns).List(actx, metav1.ListOptions{LabelSelector: labelWorkspaceClaim + "=" + pod.Labels[labelWorkspaceClaim]})
	if err != nil {
		return false, err
	}
	for i := range pods.Items {
		o := &pods.Items[i]
		if o.Name == pod.Name || !holds(o) {
			continue
		}
		if o.CreationTimestamp.Before(&pod.CreationTimestamp) ||
			o.CreationTimestamp.Equal(&pod.CreationTimestamp) && o.Name < pod.Name {
			return false, nil
		}
	}
	return true, nil
}
