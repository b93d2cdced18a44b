package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/sandbox"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/runbox-mcp/runbox/manifest"
)

// Start starts a pod and waits, with a watch, until its box runs.
func (k *Kube) Start(ctx context.Context, spec sandbox.BoxSpec) (sandbox.Box, error) {
	p, err := k.startPod(ctx, spec, spec.Lifetime+startTimeout)
	if errors.Is(err, sandbox.ErrWorkspaceBusy) {
		return nil, err
	}
	if err != nil {
		var ee *sandbox.EngineError
		if !errors.As(err, &ee) && ctx.Err() == nil {
			k.invalidate(err)
		}
		return nil, kubeError(err)
	}
	return p, nil
}

// Isolation is gvisor when the manifest says so or the pods run under a
// RuntimeClass named for it.
func (k *Kube) Isolation() string {
	if k.gvisor() {
		return manifest.IsolationGVisor
	}
	return k.m.Isolation
}

// pod is a running pod whose runbox-init waits on stdin for the server.
type pod struct {
	k       *Kube
	name    string
	started time.Time
}

func (p *pod) ID() string         { return p.name }
func (p *pod) Started() time.Time { return p.started }

// Alive is true: a pod that died while it waited is found out when the
// channel is opened, and answers sandbox like a deleted one.
func (p *pod) Alive() bool { return true }

// Kill deletes the pod at once.
func (p *pod) Kill() { p.k.deletePod(p.name) }

// Remove deletes the pod; what fails, the reaper retries.
func (p *pod) Remove() { p.k.deletePod(p.name) }

// startPod creates a pod and waits, with a watch, until its box runs.
func (k *Kube) startPod(ctx context.Context, bs sandbox.BoxSpec, deadline time.Duration) (*pod, error) {
	name := k.podName(bs.Language.Name)
	spec := k.podSpec(name, bs.Language, bs.Labels, deadline, bs.InitArgs)
	k.withFolders(spec, bs.Mounts)
	if bs.Session {
		sessionPod(spec, bs.Limits)
	}
	if bs.WorkspaceVolume != nil {
		k.withWorkspaceClaim(spec, *bs.WorkspaceVolume)
	}
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	created, err := k.cs.CoreV1().Pods(k.ns).Create(actx, spec, metav1.CreateOptions{})
	cancel()
	if err != nil {
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			// The connection failed: the pod may exist all the same.
			// Deleting it is retried until the API server answers.
			k.mu.Lock()
			k.live[name] = struct{}{}
			k.unremoved[name] = true
			k.mu.Unlock()
		}
		return nil, err
	}
	k.mu.Lock()
	k.live[name] = struct{}{}
	k.mu.Unlock()
	if bs.WorkspaceVolume != nil {
		k.markClaimPod(name)
		if first, err := k.firstHolder(ctx, created); err != nil || !first {
			k.deleteLater(name)
			if err != nil {
				return nil, err
			}
			return nil, sandbox.ErrWorkspaceBusy
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, startTimeout)
	defer wcancel()
	if err := k.waitRunning(wctx, created); err != nil {
		k.deleteLater(name)
		return nil, err
	}
	return &pod{k: k, name: name, started: time.Now()}, nil
}

// waitRunning watches the pod until its box container runs, and fails
// fast on what will never get better (a missing image, a failed init
// container).
func (k *Kube) waitRunning(ctx context.Context, p *corev1.Pod) error {
	rv := p.ResourceVersion
	for {
		if done, err := k.podStarted(p); done {
			return err
		}
		w, err := k.cs.CoreV1().Pods(k.ns).Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", p.Name).String(), ResourceVersion: rv})
		if err != nil {
			if ctx.Err() != nil {
				return k.startFailed(p, ctx.Err())
			}
			return err
		}
	events:
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				return &sandbox.EngineError{Msg: "the sandbox pod was deleted before it started", Hint: "The cluster deleted the sandbox pod, not because of your code: run it again."}
			case watch.Error:
				// An expired resource version: start again from a Get.
				break events
			}
			if np, ok := ev.Object.(*corev1.Pod); ok {
				p = np
				if done, err := k.podStarted(p); done {
					w.Stop()
					return err
				}
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return k.startFailed(p, ctx.Err())
		}
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
		np, err := k.cs.CoreV1().Pods(k.ns).Get(gctx, p.Name, metav1.GetOptions{})
		cancel()
		if err != nil {
			return err
		}
		p, rv = np, np.ResourceVersion
	}
}

func (k *Kube) startFailed(p *corev1.Pod, err error) error {
	why := string(p.Status.Phase)
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			why = cs.Name + ": " + w.Reason
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			why = c.Reason + ": " + c.Message
		}
	}
	if why == "" {
		why = "Pending"
	}
	return &sandbox.EngineError{Msg: fmt.Sprintf("the sandbox pod did not start in %s (%s): %v", startTimeout, why, err),
		Hint: "The cluster has no room or cannot run the pod: retry later; the operator should check the sandbox namespace's events."}
}

// podStarted says whether waiting is over, and why when it failed.
func (k *Kube) podStarted(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return true, &sandbox.EngineError{Msg: fmt.Sprintf("the sandbox pod ended before it ran the job: %s %s", p.Status.Reason, p.Status.Message),
			Hint: "Retry once; if it persists, the operator should check the init image and the sandbox namespace's events."}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return true, &sandbox.EngineError{Msg: fmt.Sprintf("the init container failed (%s, exit %d): %s", t.Reason, t.ExitCode, strings.TrimSpace(t.Message)),
				Hint: "The operator should check kubernetes.init_image: it must hold the runbox-init of this runbox build."}
		}
		if err := waitingError(cs, k.initImage); err != nil {
			return true, err
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != kubeBox {
			continue
		}
		if err := waitingError(cs, cs.Image); err != nil {
			return true, err
		}
		if cs.State.Running != nil {
			if cs.ImageID != "" {
				k.mu.Lock()
				k.imageIDs[p.Spec.Containers[0].Image] = cs.ImageID
				k.mu.Unlock()
			}
			return true, nil
		}
		if cs.State.Terminated != nil {
			return true, &sandbox.EngineError{Msg: "the box ended before it got its job: " + cs.State.Terminated.Reason,
				Hint: "Retry once; if it persists, the operator should run `runbox doctor`."}
		}
	}
	return false, nil
}

func waitingError(cs corev1.ContainerStatus, image string) error {
	w := cs.State.Waiting
	if w == nil {
		return nil
	}
	switch w.Reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
		return &sandbox.EngineError{Msg: fmt.Sprintf("the image %s is missing on the node (%s)", image, w.Reason),
			Hint: "The operator should make the image available to the cluster (scripts/k8s/import-init.sh for the init image, a registry or ctr import for the sandbox image)."}
	case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return &sandbox.EngineError{Msg: fmt.Sprintf("the node could not create the box (%s): %s", w.Reason, w.Message),
			Hint: "The operator should check the RuntimeClass and seccomp profile in the manifest's kubernetes section."}
	}
	return nil
}

// Exchange attaches to the box container's stdin and stdout: the channel.
func (p *pod) Exchange(ctx context.Context) (sandbox.Conn, error) {
	k := p.k
	req := k.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(k.ns).Name(p.name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: kubeBox, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(k.cfg, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &conn{in: inW, out: outR, stop: stop, diag: &sandbox.Capped{Max: 16 << 10}}
	go func() {
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: c.diag})
		outW.CloseWithError(err)
		// The writer's end: the runner's writes fail from now on, and
		// client-go's copy of stdin, which may still be reading, reads
		// the end of its input (a reader closed under it is an error
		// client-go logs on stderr for every box).
		inW.Close()
	}()
	return c, nil
}

// conn is a pod's attach stream as a channel.
type conn struct {
	in   *io.PipeWriter
	out  *io.PipeReader
	stop context.CancelFunc
	diag *sandbox.Capped
}

func (c *conn) Read(b []byte) (int, error)  { return c.out.Read(b) }
func (c *conn) Write(b []byte) (int, error) { return c.in.Write(b) }
func (c *conn) Diag() string                { return c.diag.String() }

// Close ends the attach stream. Its stdout is drained, not closed, until
// the stream has ended: client-go reports a write into a closed pipe as an
// error of its own.
func (c *conn) Close() error {
	c.stop()
	err := c.in.Close()
	go func() { _, _ = io.Copy(io.Discard, c.out) }()
	return err
}

// Verdict waits briefly for the box container to end and reads why it
// did: OOM, the pod's deadline, its loss.
func (p *pod) Verdict(ctx context.Context, q sandbox.VerdictQuery) sandbox.Verdict {
	if !q.State {
		return sandbox.Verdict{}
	}
	v := p.k.verdict(ctx, p.name)
	return sandbox.Verdict{OOMKilled: v.oomKilled, Deadline: v.deadline, Gone: v.gone}
}

type podVerdict struct {
	oomKilled bool
	deadline  bool
	gone      string
}

// verdict waits briefly for the box container to end and reads why it did.
func (k *Kube) verdict(ctx context.Context, name string) podVerdict {
	vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	var v podVerdict
	judge := func(p *corev1.Pod) bool {
		if p.DeletionTimestamp != nil {
			v.gone = "the sandbox pod was deleted during the run"
		}
		if p.Status.Reason == "Evicted" {
			v.gone = "the sandbox pod was evicted during the run: " + p.Status.Message
		}
		if p.Status.Reason == "DeadlineExceeded" {
			v.deadline = true
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != kubeBox {
				continue
			}
			for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if t != nil && t.Reason == "OOMKilled" {
					v.oomKilled = true
				}
			}
			if cs.State.Terminated != nil {
				return true
			}
		}
		return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
	}
	p, err := k.cs.CoreV1().Pods(k.ns).Get(vctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		v.gone = "the sandbox pod was deleted during the run"
		return v
	}
	if err != nil || judge(p) {
		return v
	}
	w, err := k.cs.CoreV1().Pods(k.ns).Watch(vctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: p.ResourceVersion})
	if err != nil {
		return v
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			v.gone = "the sandbox pod was deleted during the run"
			return v
		}
		if np, ok := ev.Object.(*corev1.Pod); ok && judge(np) {
			return v
		}
	}
	return v
}

// deleteLater deletes a pod in the background; Close waits.
func (k *Kube) deleteLater(name string) {
	k.bg.Add(1)
	go func() {
		defer k.bg.Done()
		k.deletePod(name)
	}()
}

// deletePod deletes a pod at once with a fresh deadline. What it cannot
// delete, the reaper will.
func (k *Kube) deletePod(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	grace := int64(0)
	k.mu.Lock()
	if k.claimPods[name] {
		grace = claimGrace
	}
	k.mu.Unlock()
	err := k.cs.CoreV1().Pods(k.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil && !apierrors.IsNotFound(err) {
		k.log.Warn("deleting a pod failed; the reaper will retry", "pod", name, "err", err)
		k.unremoved[name] = true
		return
	}
	delete(k.live, name)
	delete(k.claimPods, name)
}

// gvisor says whether the pods run under gVisor: the manifest's isolation
// level, or a RuntimeClass named for it.
func (k *Kube) gvisor() bool {
	return k.m.Isolation == manifest.IsolationGVisor || strings.Contains(k.m.Kubernetes.RuntimeClass, "gvisor")
}
