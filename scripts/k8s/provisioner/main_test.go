package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/runbox-mcp/runbox/internal/ext4img"
)

func claim(name, uid, class string, size int64) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: k8stypes.UID("0000-" + uid)},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

// A pending claim of the class gets a local volume bound to it, backed by
// a mounted image of its size; one of another class, or too large, gets
// none; a released volume is unmounted, its image removed and the volume
// deleted (root only: it mounts).
func TestProvisionAndReclaim(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop device needs root")
	}
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("no mkfs.ext4")
	}
	ctx := context.Background()
	cs := fake.NewClientset(claim("a", "aaaa", "local", 16<<20), claim("b", "bbbb", "other", 16<<20), claim("c", "cccc", "local", maxSize+1))
	dir := t.TempDir()
	p := &provisioner{cfg: config{class: "local", name: "test/local", node: "n1", dir: dir}, cs: cs, log: slog.New(slog.DiscardHandler)}
	mp := filepath.Join(dir, "pvc-0000-aaaa", mountDir)
	t.Cleanup(func() { _ = ext4img.Unmount(mp) })
	p.pass(ctx)
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil || len(pvs.Items) != 1 {
		t.Fatalf("volumes: %d %v", len(pvs.Items), err)
	}
	pv := pvs.Items[0]
	if pv.Name != "pvc-0000-aaaa" || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "a" || pv.Spec.ClaimRef.Namespace != "ns" ||
		pv.Spec.Capacity.Storage().Value() != 16<<20 || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete ||
		pv.Spec.StorageClassName != "local" || pv.Spec.Local == nil || pv.Spec.Local.Path != mp || pv.Annotations[annProvisionedBy] != "test/local" ||
		pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != "n1" {
		t.Fatalf("volume: %+v", pv)
	}
	if !ext4img.Mounted(mp) {
		t.Fatal("its image is not mounted")
	}
	// The next pass provisions nothing more.
	p.pass(ctx)
	if pvs, _ := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); len(pvs.Items) != 1 {
		t.Fatalf("volumes after a second pass: %d", len(pvs.Items))
	}
	pv.Status.Phase = corev1.VolumeReleased
	if _, err := cs.CoreV1().PersistentVolumes().UpdateStatus(ctx, &pv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.pass(ctx)
	if pvs, _ := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); len(pvs.Items) != 0 {
		t.Fatalf("a released volume stays: %d", len(pvs.Items))
	}
	if _, err := os.Stat(filepath.Dir(mp)); !os.IsNotExist(err) || ext4img.Mounted(mp) {
		t.Fatalf("its image stays: %v, mounted %v", err, ext4img.Mounted(mp))
	}
}
