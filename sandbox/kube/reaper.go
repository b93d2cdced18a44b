package kube

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/sandbox"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Reap deletes the pods whose runbox instance is gone: from this host,
// those whose owner process no longer runs; from any host, those whose
// instance's Lease is missing or stale, and anything older than any run
// could last; and this instance's own pods that it failed to delete while
// the API server was away. A pod kept by the store of another state
// directory (sandbox.KeptElsewhere), or of another host, is judged by its
// age alone. It returns how many it deleted. A pod keep
// holds stays, whoever owned it (a store keeps its run's record).
func (k *Kube) Reap(ctx context.Context, keep func(string) bool) (int, error) {
	removed := k.retryDeletes()
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := k.cs.CoreV1().Pods(k.ns).List(actx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
	if err != nil {
		return removed, err
	}
	// A one-off pod keeps its report for a restarted server past its run
	// (initproto.DefaultKeep).
	maxAge := k.m.Limits.MaxTimeout() + k.m.Pool.Idle() + sandbox.BackstopGrace + 2*startTimeout + 2*apiTimeout + initproto.DefaultKeep
	leases := map[string]bool{} // instance → lease fresh
	fresh := func(instance string) bool {
		if f, ok := leases[instance]; ok {
			return f
		}
		l, err := k.cs.CoordinationV1().Leases(k.ns).Get(actx, k.leaseName(instance), metav1.GetOptions{})
		f := err == nil && l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) < 3*leaseDuration
		if err != nil && !apierrors.IsNotFound(err) {
			f = true // cannot tell: keep
		}
		leases[instance] = f
		return f
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || (keep != nil && keep(p.Name)) {
			continue
		}
		labels := podOwnerLabels(&p.ObjectMeta)
		age := time.Since(p.CreationTimestamp.Time)
		inst := labels[sandbox.LabelInstance]
		var reap bool
		isSession, expired := sandbox.SessionBoxExpired(labels, time.Now())
		switch alive, known := sandbox.OwnerAlive(labels, k.owner); {
		case isSession:
			// A session outlives its server (and lives on another
			// replica): it ends at its lifetime or when its box ended.
			reap = expired || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		case age > maxAge:
			reap = true
		case inst == k.owner.Instance:
			// Ours: only one this server lost track of (a create that
			// timed out but happened).
			k.mu.Lock()
			_, tracked := k.live[p.Name]
			k.mu.Unlock()
			reap = !tracked && age > startTimeout+apiTimeout
		case known:
			// A dead owner's pod that another state directory keeps
			// waits for a server restarted there to adopt it, until its
			// age.
			reap = !alive && !sandbox.KeptElsewhere(labels[sandbox.LabelKept], k.owner)
		default:
			// Another host: a fresh Lease means a live instance. A pod
			// younger than the Lease period may belong to an instance
			// whose first Lease is on its way. A pod marked kept holds
			// a run that a server restarted on its state directory, on
			// any host, may adopt: it goes at its age.
			reap = age > leaseDuration && !fresh(inst) && labels[sandbox.LabelKept] == ""
		}
		if !reap {
			continue
		}
		zero := int64(0)
		rctx, rcancel := context.WithTimeout(ctx, apiTimeout)
		err := k.cs.CoreV1().Pods(k.ns).Delete(rctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		rcancel()
		if err != nil && !apierrors.IsNotFound(err) {
			k.log.Warn("reaping a leftover pod failed", "pod", p.Name, "err", err)
			continue
		}
		removed++
		k.log.Info("reaped a leftover pod", "pod", p.Name, "instance", inst, "owner_pid", labels[sandbox.LabelOwnerPID], "run_id", labels[sandbox.LabelRunID])
	}
	k.reapLeases(ctx)
	return removed, nil
}

// MarkKept annotates pod name with its owner's state directory
// (sandbox.LabelKept), which the reapers of other state directories read.
func (k *Kube) MarkKept(ctx context.Context, name string) error {
	if k.owner.State == "" {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotationPrefix + sandbox.LabelKept: k.owner.State}}})
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	_, err := k.cs.CoreV1().Pods(k.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil // gone already (a short task's run ended first)
	}
	return err
}

// reapLeases deletes the Leases of instances gone: on this host, those
// whose process no longer runs; elsewhere, those not renewed for long.
func (k *Kube) reapLeases(ctx context.Context) {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	list, err := k.cs.CoordinationV1().Leases(k.ns).List(actx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
	if err != nil {
		return
	}
	for _, l := range list.Items {
		alive, known := sandbox.OwnerAlive(podOwnerLabels(&l.ObjectMeta), k.owner)
		if (known && !alive) || (l.Spec.RenewTime != nil && time.Since(l.Spec.RenewTime.Time) > 10*leaseDuration) {
			_ = k.cs.CoordinationV1().Leases(k.ns).Delete(actx, l.Name, metav1.DeleteOptions{})
		}
	}
}

func (k *Kube) retryDeletes() int {
	k.mu.Lock()
	names := slices.Collect(maps.Keys(k.unremoved))
	k.mu.Unlock()
	removed := 0
	for _, name := range names {
		k.mu.Lock()
		delete(k.unremoved, name)
		k.mu.Unlock()
		k.deletePod(name)
		k.mu.Lock()
		_, still := k.unremoved[name]
		k.mu.Unlock()
		if !still {
			removed++
		}
	}
	return removed
}
