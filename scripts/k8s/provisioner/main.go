// Command provisioner is the test cluster's dynamic volume provisioner
// (scripts/k8s/up.sh starts it, down.sh stops it): for each pending
// PersistentVolumeClaim of its StorageClass it makes an ext4 image file of
// the claim's requested size, mounts it on a loop device on this node
// (nosuid,nodev), and creates a local PersistentVolume bound to the claim
// whose path is that mount, so the size is a real quota: a write past it
// is ENOSPC in the pod. When a volume is released (its claim deleted) it
// unmounts it, removes the image and deletes the volume (reclaim policy
// Delete). It polls the API server; one node, one provisioner.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runbox-mcp/runbox/internal/ext4img"
)

const (
	// annProvisionedBy marks the volumes this provisioner made.
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
	image            = "disk.img"
	mountDir         = "mnt"
	// maxSize bounds a claim: the images are sparse, but a test's typo
	// must not fill the host.
	maxSize = 8 << 30
)

type config struct {
	kubeconfig, class, name, node, dir string
	interval                           time.Duration
}

type provisioner struct {
	cfg config
	cs  kubernetes.Interface
	log *slog.Logger
}

func main() {
	var cfg config
	flag.StringVar(&cfg.kubeconfig, "kubeconfig", "", "the admin kubeconfig")
	flag.StringVar(&cfg.class, "class", "runbox-test-local", "the StorageClass whose claims are provisioned")
	flag.StringVar(&cfg.name, "name", "runbox.io/test-local", "the provisioner's name (the StorageClass's provisioner)")
	flag.StringVar(&cfg.node, "node", "", "this node's name")
	flag.StringVar(&cfg.dir, "dir", "", "where the volumes' images and mounts live")
	flag.DurationVar(&cfg.interval, "interval", time.Second, "how often claims and volumes are looked at")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "provisioner:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	if cfg.node == "" || cfg.dir == "" || cfg.kubeconfig == "" {
		return fmt.Errorf("-kubeconfig, -node and -dir are required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.dir, 0o700); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	p := &provisioner{cfg: cfg, cs: cs, log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	p.log.Info("provisioning", "class", cfg.class, "node", cfg.node, "dir", cfg.dir)
	for {
		p.pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(cfg.interval):
		}
	}
}

// pass provisions pending claims, reclaims released volumes, mounts the
// bound ones again (after a host restart) and removes images no volume
// names.
func (p *provisioner) pass(ctx context.Context) {
	actx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pvs, err := p.cs.CoreV1().PersistentVolumes().List(actx, metav1.ListOptions{})
	if err != nil {
		p.log.Warn("listing volumes", "err", err)
		return
	}
	mine := map[string]bool{}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Annotations[annProvisionedBy] != p.cfg.name {
			continue
		}
		mine[pv.Name] = true
		switch pv.Status.Phase {
		case corev1.VolumeReleased, corev1.VolumeFailed:
			p.reclaim(actx, pv)
		default:
			if pv.DeletionTimestamp == nil {
				p.remount(actx, pv)
			}
		}
	}
	pvcs, err := p.cs.CoreV1().PersistentVolumeClaims("").List(actx, metav1.ListOptions{})
	if err != nil {
		p.log.Warn("listing claims", "err", err)
		return
	}
	for i := range pvcs.Items {
		c := &pvcs.Items[i]
		if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" || c.DeletionTimestamp != nil ||
			c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != p.cfg.class || mine[volumeName(c)] {
			continue
		}
		if err := p.provision(actx, c); err != nil {
			p.log.Warn("provisioning", "claim", c.Namespace+"/"+c.Name, "err", err)
		}
	}
	p.sweep(mine)
}

func volumeName(c *corev1.PersistentVolumeClaim) string { return "pvc-" + string(c.UID) }

var safe = regexp.MustCompile(`^pvc-[0-9a-f-]+$`)

// provision makes the claim's image, mounts it and creates its volume,
// bound to the claim.
func (p *provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	name := volumeName(c)
	if !safe.MatchString(name) {
		return fmt.Errorf("unexpected claim UID %q", c.UID)
	}
	req := c.Spec.Resources.Requests[corev1.ResourceStorage]
	size := req.Value()
	if size <= 0 || size > maxSize {
		return fmt.Errorf("requested size %s is not from 1 byte to %d", req.String(), maxSize)
	}
	dir := filepath.Join(p.cfg.dir, name)
	img, mp := filepath.Join(dir, image), filepath.Join(dir, mountDir)
	if _, err := os.Stat(img); err != nil {
		// A half-made volume of an earlier pass is made again whole.
		ext4img.Unmount(mp)
		os.RemoveAll(dir)
		if err := os.MkdirAll(mp, 0o700); err != nil {
			return err
		}
		// The root is root's, 0755: the pod's fsGroup makes it the box
		// user's group's, as the kubelet mounts a local volume.
		if err := ext4img.Make(ctx, img, size, 0, 0); err != nil {
			os.RemoveAll(dir)
			return err
		}
	}
	if !ext4img.Mounted(mp) {
		if err := ext4img.Mount(ctx, img, mp); err != nil {
			return err
		}
	}
	modes := c.Spec.AccessModes
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: p.cfg.name}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			AccessModes:                   modes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              p.cfg.class,
			VolumeMode:                    c.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: mp}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{p.cfg.node}}},
			}}}},
		},
	}
	if _, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	p.log.Info("provisioned", "claim", c.Namespace+"/"+c.Name, "volume", name, "bytes", size)
	return nil
}

// remount mounts a bound volume's image again when its mount is gone (the
// host restarted, or down.sh unmounted it).
func (p *provisioner) remount(ctx context.Context, pv *corev1.PersistentVolume) {
	if !safe.MatchString(pv.Name) {
		return
	}
	dir := filepath.Join(p.cfg.dir, pv.Name)
	img, mp := filepath.Join(dir, image), filepath.Join(dir, mountDir)
	if _, err := os.Stat(img); err != nil || ext4img.Mounted(mp) {
		return
	}
	if err := ext4img.Mount(ctx, img, mp); err != nil {
		p.log.Warn("mounting again", "volume", pv.Name, "err", err)
	}
}

// reclaim unmounts a released volume, removes its image and deletes it.
func (p *provisioner) reclaim(ctx context.Context, pv *corev1.PersistentVolume) {
	if !safe.MatchString(pv.Name) {
		return
	}
	dir := filepath.Join(p.cfg.dir, pv.Name)
	mp := filepath.Join(dir, mountDir)
	if err := ext4img.Unmount(mp); err != nil {
		p.log.Warn("unmounting", "volume", pv.Name, "err", err)
		return
	}
	if !ext4img.Detached(filepath.Join(dir, image), 5*time.Second) {
		p.log.Warn("a loop device still holds the image", "volume", pv.Name)
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		p.log.Warn("removing", "volume", pv.Name, "err", err)
		return
	}
	if err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		p.log.Warn("deleting", "volume", pv.Name, "err", err)
		return
	}
	p.log.Info("reclaimed", "volume", pv.Name)
}

// sweep removes the images of volumes that no longer exist (deleted by
// hand, or the cluster's state wiped), unmounted first.
func (p *provisioner) sweep(mine map[string]bool) {
	ents, err := os.ReadDir(p.cfg.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !safe.MatchString(e.Name()) || mine[e.Name()] {
			continue
		}
		// A volume being provisioned has its image before the API knows
		// it: only images older than a minute are swept.
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < time.Minute {
			continue
		}
		dir := filepath.Join(p.cfg.dir, e.Name())
		if ext4img.Unmount(filepath.Join(dir, mountDir)) != nil || !ext4img.Detached(filepath.Join(dir, image), 5*time.Second) {
			continue
		}
		os.RemoveAll(dir)
		p.log.Info("swept", "volume", e.Name())
	}
}
