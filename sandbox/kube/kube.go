package kube

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runbox-mcp/runbox/internal/initproto"
	"github.com/runbox-mcp/runbox/sandbox"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runbox-mcp/runbox/manifest"
)

const (
	apiTimeout  = sandbox.APITimeout
	killTimeout = sandbox.KillTimeout
)

// Kubernetes backend constants.
const (
	// kubeBox is the name of the container that runs the job.
	kubeBox = "box"
	// leaseDuration is how long an instance's Lease stays valid without
	// a renewal; it is renewed every leaseDuration/3.
	leaseDuration = 30 * time.Second
	// startTimeout bounds scheduling, the init container and the start.
	startTimeout = 2 * time.Minute
	// annotationPrefix carries owner values that are not valid label
	// values (a long host name) as annotations.
	annotationPrefix = "runbox.io/"
)

// Options configure the Kubernetes driver.
type Options struct {
	Manifest *manifest.Manifest
	// InitDir holds runbox-init-linux-<arch>, whose sha256 names the
	// default init image; default: the directory of the running binary.
	InitDir string
	Logger  *slog.Logger
}

// Kube starts boxes as hardened pods in a Kubernetes namespace, one pod
// per job: the sandbox.Driver for clusters.
type Kube struct {
	cs        kubernetes.Interface
	cfg       *rest.Config
	m         *manifest.Manifest
	ns        string
	log       *slog.Logger
	owner     sandbox.Owner
	initImage string
	bg        sync.WaitGroup

	mu       sync.Mutex
	readyErr error
	// readyTries counts the checks Ready made, for callers that waited on one.
	readyTries atomic.Int64
	// imageIDs are the image IDs the kubelet reported, per image.
	imageIDs map[string]string
	// live are this server's pods not yet deleted; unremoved those
	// whose deletion failed (the reaper retries them).
	live      map[string]struct{}
	unremoved map[string]bool
	// claimPods are the live pods that mount a workspace's claim: they
	// are deleted gracefully (workspace.go, claimGrace).
	claimPods map[string]bool

	stop func()
	done chan struct{}
}

// NewKube connects to the cluster named by the manifest (a kubeconfig, else
// the in-cluster config). A cluster that does not answer is not an error
// here: calls report it until it is back.
func New(opts Options, owner sandbox.Owner) (*Kube, error) {
	m := opts.Manifest
	cfg, err := kubeConfig(m.Kubernetes.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	img := m.Kubernetes.InitImage
	if img == "" {
		dir, err := sandbox.InitDirOr(opts.InitDir)
		if err != nil {
			return nil, err
		}
		bin, err := sandbox.ReadInitBinary(dir, runtime.GOARCH)
		if err != nil {
			return nil, fmt.Errorf("%w: it names the init image (or set kubernetes.init_image)", err)
		}
		img = InitImageFor(bin)
	}
	ctx, cancel := context.WithCancel(context.Background())
	k := &Kube{
		cs: cs, cfg: cfg, m: m, ns: m.Kubernetes.Namespace, log: log, owner: owner,
		initImage: img,
		readyErr:  errors.New("not checked yet"),
		imageIDs:  map[string]string{},
		live:      map[string]struct{}{},
		unremoved: map[string]bool{},
		stop:      cancel,
		done:      make(chan struct{}),
	}
	go k.background(ctx)
	return k, nil
}

// InitImageFor is the default init image of a runbox-init binary:
// runbox/init:<first 16 hex of its sha256>.
func InitImageFor(bin []byte) string {
	sum := sha256.Sum256(bin)
	return "runbox/init:" + hex.EncodeToString(sum[:])[:16]
}

// InitImage is the image the pods' init container copies runbox-init from.
func (k *Kube) InitImage() string { return k.initImage }

func kubeConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", path, err)
		}
		return cfg, nil
	}
	if cfg, err := rest.InClusterConfig(); err == nil {
		return cfg, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("no in-cluster config and no usable kubeconfig (set kubernetes.kubeconfig): %w", err)
	}
	return cfg, nil
}

// Close stops renewing this instance's Lease and deletes it, after
// retrying the deletions that failed.
func (k *Kube) Close() error {
	k.stop()
	<-k.done
	k.bg.Wait()
	k.retryDeletes()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	_ = k.cs.CoordinationV1().Leases(k.ns).Delete(ctx, k.leaseName(k.owner.Instance), metav1.DeleteOptions{})
	return nil
}

// Ready checks that the namespace's pods can be listed, once; after a
// failure it checks again on the next call.
func (k *Kube) Ready(ctx context.Context) error {
	// A caller that waited for a check under way takes its answer (see
	// the Docker driver's Ready).
	seen := k.readyTries.Load()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.readyErr == nil || k.readyTries.Load() != seen {
		return k.readyErr
	}
	defer k.readyTries.Add(1)
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := k.cs.CoreV1().Pods(k.ns).List(actx, metav1.ListOptions{Limit: 1}); err != nil {
		k.readyErr = kubeError(err)
		return k.readyErr
	}
	k.readyErr = nil
	// Pods whose deletion failed while the API server was away.
	go k.retryDeletes()
	return nil
}

func (k *Kube) invalidate(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.readyErr = err
}

// ImageDigest returns the image ID the kubelet last reported for image, or
// the reference itself before any pod has run it.
func (k *Kube) ImageDigest(_ context.Context, image string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if id, ok := k.imageIDs[image]; ok {
		return id, nil
	}
	return image, nil
}

// kubeError is a failure of the cluster, with the one thing that fixes it.
func kubeError(err error) error {
	var ee *sandbox.EngineError
	switch {
	case errors.As(err, &ee):
		return ee
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return &sandbox.EngineError{Msg: "the Kubernetes API server refused runbox: " + err.Error(),
			Hint: "The operator should grant runbox's service account pods, pods/attach, leases and (for named workspaces) persistentvolumeclaims in the sandbox namespace (deploy/kubernetes/rbac.yaml)."}
	case apierrors.IsNotFound(err):
		return &sandbox.EngineError{Msg: "the sandbox namespace is missing: " + err.Error(),
			Hint: "The operator should create the namespace named in kubernetes.namespace (deploy/kubernetes/namespace.yaml)."}
	case apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded) || isConnErr(err):
		return &sandbox.EngineError{Msg: "the Kubernetes API server is not reachable: " + err.Error(),
			Hint: "Retry in a few seconds; runbox recovers by itself once the cluster answers."}
	}
	return &sandbox.EngineError{Msg: "the Kubernetes API server refused a request: " + err.Error(),
		Hint: "Retry once; if it persists, the operator should check the sandbox namespace and runbox's logs."}
}

func isConnErr(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"connection refused", "no such host", "i/o timeout", "EOF", "connection reset", "broken pipe", "no route to host", "http2: client connection lost"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// podName is a fresh pod name of this instance.
func (k *Kube) podName(lang string) string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	l := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return 'x'
	}, strings.ToLower(lang))
	return fmt.Sprintf("runbox-%s-%s-%s", l[:min(len(l), 16)], k.owner.Instance[:8], hex.EncodeToString(b))
}

// podMeta splits runbox's labels into valid labels and annotations.
func podMeta(all map[string]string) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	for key, v := range all {
		if len(validation.IsValidLabelValue(v)) == 0 {
			labels[key] = v
		} else {
			annotations[annotationPrefix+key] = v
		}
	}
	return labels, annotations
}

// podOwnerLabels reads back what podMeta split.
func podOwnerLabels(p *metav1.ObjectMeta) map[string]string {
	out := map[string]string{}
	for key, v := range p.Annotations {
		if rest, ok := strings.CutPrefix(key, annotationPrefix); ok {
			out[rest] = v
		}
	}
	for key, v := range p.Labels {
		out[key] = v
	}
	return out
}

// podSpec is the isolation profile of one pod: the items of the Docker
// box's profile that Kubernetes can express, on every run.
func (k *Kube) podSpec(name string, lang manifest.Language, all map[string]string, deadline time.Duration, initArgs []string) *corev1.Pod {
	lim := k.m.Limits
	uid, gid := boxIDs(k.m.User)
	t, f := true, false
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	if p := k.m.Kubernetes.SeccompProfile; p != "" {
		seccomp = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &p}
	}
	sc := &corev1.SecurityContext{
		RunAsNonRoot: &t, RunAsUser: &uid, RunAsGroup: &gid,
		AllowPrivilegeEscalation: &f, Privileged: &f, ReadOnlyRootFilesystem: &t,
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: seccomp,
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(lim.CPUs*1000), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(lim.Memory), resource.BinarySI),
	}
	reqs := corev1.ResourceRequirements{Limits: res, Requests: res}
	memDir := func(vol string, size int64) corev1.Volume {
		q := resource.NewQuantity(size, resource.BinarySI)
		return corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: q}}}
	}
	labels, annotations := podMeta(all)
	secs := int64(deadline.Seconds()) + 1
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.ns, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &secs,
			TerminationGracePeriodSeconds: &zero,
			AutomountServiceAccountToken:  &f,
			EnableServiceLinks:            &f,
			ShareProcessNamespace:         &f,
			Hostname:                      "sandbox",
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: &t, RunAsUser: &uid, RunAsGroup: &gid, SeccompProfile: seccomp,
			},
			NodeSelector: k.m.Kubernetes.NodeSelector,
			Volumes: []corev1.Volume{
				memDir("runbox", 64<<20),
				memDir("workspace", int64(lim.WorkspaceBytes)),
				memDir("tmp", int64(lim.TmpBytes)),
				// Mounted read-only over the runtime's writable /dev/shm:
				// /workspace and /tmp are the only writable places, as in a
				// Docker box.
				memDir("noshm", 4<<10),
			},
			InitContainers: []corev1.Container{{
				Name:                     "install",
				Image:                    k.initImage,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Command:                  []string{"/runbox-init", "__install", sandbox.InitPath},
				SecurityContext:          sc,
				Resources:                reqs,
				VolumeMounts:             []corev1.VolumeMount{{Name: "runbox", MountPath: sandbox.InitDir}},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Containers: []corev1.Container{{
				Name:            kubeBox,
				Image:           lang.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				// Kubernetes has no ulimits: prlimit (util-linux, in every
				// Debian-based image) sets Docker's box ulimits on PID 1,
				// which every process of the box inherits, then execs
				// runbox-init.
				Command: []string{"prlimit",
					fmt.Sprintf("--nofile=%d", lim.OpenFiles),
					fmt.Sprintf("--fsize=%d", int64(lim.WorkspaceBytes)),
					"--core=0", "--", sandbox.InitPath},
				Args:       append([]string{}, initArgs...),
				WorkingDir: manifest.Workspace,
				Stdin:      true,
				// Stdin outlives an attach: a restarted server attaches
				// again to collect a run, or a session's next call.
				StdinOnce:       false,
				TTY:             false,
				SecurityContext: sc,
				Resources:       reqs,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "runbox", MountPath: sandbox.InitDir, ReadOnly: true},
					{Name: "workspace", MountPath: manifest.Workspace},
					{Name: "tmp", MountPath: manifest.Tmp},
					{Name: "noshm", MountPath: "/dev/shm", ReadOnly: true},
				},
			}},
		},
	}
	if !k.m.Kubernetes.KeepInterfaces {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, unplugContainer(k.initImage, seccomp, reqs))
	}
	if rc := k.m.Kubernetes.RuntimeClass; rc != "" {
		pod.Spec.RuntimeClassName = &rc
	}
	for _, tol := range k.m.Kubernetes.Tolerations {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: tol.Key,
			Operator: corev1.TolerationOperator(tol.Operator), Value: tol.Value, Effect: corev1.TaintEffect(tol.Effect)})
	}
	return pod
}

// boxIDs is the manifest's "uid:gid" (validated) as numbers.
func boxIDs(user string) (uid, gid int64) {
	uidS, gidS, _ := strings.Cut(user, ":")
	uid, _ = strconv.ParseInt(uidS, 10, 64)
	gid, _ = strconv.ParseInt(gidS, 10, 64)
	return uid, gid
}

func (k *Kube) leaseName(instance string) string { return "runbox-" + instance }

// renewLease keeps this instance's Lease fresh: the reapers of other
// instances leave the pods of a live instance alone.
func (k *Kube) renewLease(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	leases := k.cs.CoordinationV1().Leases(k.ns)
	now := metav1.NewMicroTime(time.Now())
	secs := int32(leaseDuration.Seconds())
	name := k.leaseName(k.owner.Instance)
	l, err := leases.Get(actx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		labels, annotations := podMeta(k.owner.Labels(nil))
		_, err = leases.Create(actx, &coordv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
			Spec:       coordv1.LeaseSpec{HolderIdentity: &k.owner.Instance, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(actx, l, metav1.UpdateOptions{})
	return err
}

// background renews the Lease until Close; the runner reaps.
func (k *Kube) background(ctx context.Context) {
	defer close(k.done)
	for {
		if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
			k.log.Debug("lease: cluster not reachable", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(leaseDuration / 3):
		}
	}
}

// unplugContainer is the init step that removes every network interface
// but lo from the pod's network namespace (runbox-init __unplug), so a pod
// has what a Docker box has whatever the CNI gave it. It alone holds a
// capability: NET_ADMIN, as root, which reaches no further than the pod's
// own network namespace; no privilege escalation, read-only root, the
// pod's seccomp profile. The program's container never has it.
func unplugContainer(image string, seccomp *corev1.SeccompProfile, reqs corev1.ResourceRequirements) corev1.Container {
	t, f := true, false
	root := int64(0)
	return corev1.Container{
		Name:            "unplug",
		Image:           image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/runbox-init", initproto.UnplugArg},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: &f, RunAsUser: &root, RunAsGroup: &root,
			AllowPrivilegeEscalation: &f, Privileged: &f, ReadOnlyRootFilesystem: &t,
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}},
			SeccompProfile: seccomp,
		},
		Resources:                reqs,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}
