package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// sessionPod makes a pod a session's, with the session's own limits (its
// stdin, as every pod's, stays open between attaches).
func sessionPod(p *corev1.Pod, lim *manifest.Limits) {
	c := &p.Spec.Containers[0]
	if lim == nil {
		return
	}
	mem := *resource.NewQuantity(int64(lim.Memory), resource.BinarySI)
	for _, ct := range []*corev1.Container{c, &p.Spec.InitContainers[0]} {
		ct.Resources.Limits[corev1.ResourceMemory] = mem
		ct.Resources.Requests[corev1.ResourceMemory] = mem
	}
	for i, v := range p.Spec.Volumes {
		if v.Name == workspaceVolume && v.EmptyDir != nil {
			p.Spec.Volumes[i].EmptyDir.SizeLimit = resource.NewQuantity(int64(lim.WorkspaceBytes), resource.BinarySI)
		}
	}
}

// FindBoxes lists the running pods that carry all of labels (an empty
// value: the label with any value).
func (k *Kube) FindBoxes(ctx context.Context, want map[string]string) ([]sandbox.FoundBox, error) {
	sel := labels.NewSelector()
	for key, v := range want {
		op, vals := selection.Equals, []string{v}
		if v == "" {
			op, vals = selection.Exists, nil
		}
		r, err := labels.NewRequirement(key, op, vals)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*r)
	}
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := k.cs.CoreV1().Pods(k.ns).List(actx, metav1.ListOptions{LabelSelector: sel.String(), FieldSelector: "status.phase=Running"})
	if err != nil {
		return nil, kubeError(err)
	}
	out := make([]sandbox.FoundBox, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		out = append(out, sandbox.FoundBox{ID: p.Name, Labels: podOwnerLabels(&p.ObjectMeta)})
	}
	return out, nil
}

// Attach is a running pod: each Exchange attaches to it anew. A pod that
// mounts a workspace's claim is marked so, to be deleted gracefully.
func (k *Kube) Attach(ctx context.Context, name string) (sandbox.Box, error) {
	k.mu.Lock()
	k.live[name] = struct{}{}
	k.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if p, err := k.cs.CoreV1().Pods(k.ns).Get(actx, name, metav1.GetOptions{}); err == nil && p.Labels[labelWorkspaceClaim] != "" {
		k.markClaimPod(name)
	}
	return &pod{k: k, name: name, started: time.Now()}, nil
}
