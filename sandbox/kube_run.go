package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/runbox-mcp/runbox/manifest"
)

// podGoneHint is the hint of a run whose pod the cluster took away.
const podGoneHint = "The cluster deleted or evicted the sandbox pod, not because of your code: run it again."

// Run runs one job in a fresh pod.
func (k *Kube) Run(ctx context.Context, job contract.Job) contract.Result {
	release, queueMs, refused := k.slots.take(ctx, job, k.m)
	if refused != nil {
		return *refused
	}
	defer release()
	res := k.runReady(ctx, job)
	res.Metrics.QueueMs = queueMs
	res.Isolation = k.m.Isolation
	if k.gvisor() {
		res.Isolation = manifest.IsolationGVisor
	}
	res.Image, _ = k.ImageDigest(ctx, job.Language.Image)
	return res
}

func (k *Kube) runReady(ctx context.Context, job contract.Job) contract.Result {
	fail := func(err error) contract.Result {
		ee := kubeError(err).(*EngineError)
		return contract.Fail(job, contract.ErrorInfo{Kind: contract.KindSandbox, Message: ee.Msg, Hint: ee.Hint})
	}
	if err := k.Ready(ctx); err != nil {
		return fail(err)
	}
	t0 := time.Now()
	p, pooled := k.pool.take(job.Language.Name), true
	if p == nil {
		pooled = false
		var err error
		labels := k.owner.Labels(map[string]string{LabelRunID: job.RunID, LabelLanguage: job.Language.Name})
		p, err = k.startPod(ctx, job.Language, labels, job.Timeout+backstopGrace+startTimeout, nil)
		if err != nil {
			if ctx.Err() != nil {
				return contract.Fail(job, cancelled())
			}
			var ee *EngineError
			if !errors.As(err, &ee) {
				k.invalidate(err)
			}
			return fail(err)
		}
	}
	k.pool.refill(job.Language.Name)
	defer k.deleteLater(p.name)
	startup := time.Since(t0).Milliseconds()
	o, contents, gone := k.runOn(ctx, p, job)
	if o.cancelled {
		return contract.Fail(job, cancelled())
	}
	res := buildResult(k.m, job, o, contents)
	if gone && res.Error != nil && res.Error.Kind == contract.KindSandbox {
		res.Error.Hint = podGoneHint
	}
	res.Metrics.StartupMs = startup
	res.Metrics.Pooled = pooled
	return res
}

// pod is a running pod whose runbox-init waits on stdin for its one job.
type pod struct {
	name    string
	started time.Time
}

// startPod creates a pod and waits, with a watch, until its box runs.
func (k *Kube) startPod(ctx context.Context, lang manifest.Language, labels map[string]string, deadline time.Duration, initArgs []string) (*pod, error) {
	name := k.podName(lang.Name)
	spec := k.podSpec(name, lang, labels, deadline, initArgs)
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
	wctx, wcancel := context.WithTimeout(ctx, startTimeout)
	defer wcancel()
	if err := k.waitRunning(wctx, created); err != nil {
		k.deleteLater(name)
		return nil, err
	}
	return &pod{name: name, started: time.Now()}, nil
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
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				return &EngineError{Msg: "the sandbox pod was deleted before it started", Hint: podGoneHint}
			case watch.Error:
				// An expired resource version: start again from a Get.
				rv = ""
				continue
			}
			if np, ok := ev.Object.(*corev1.Pod); ok {
				p, rv = np, np.ResourceVersion
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
	return &EngineError{Msg: fmt.Sprintf("the sandbox pod did not start in %s (%s): %v", startTimeout, why, err),
		Hint: "The cluster has no room or cannot run the pod: retry later; the operator should check the sandbox namespace's events."}
}

// podStarted says whether waiting is over, and why when it failed.
func (k *Kube) podStarted(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return true, &EngineError{Msg: fmt.Sprintf("the sandbox pod ended before it ran the job: %s %s", p.Status.Reason, p.Status.Message),
			Hint: "Retry once; if it persists, the operator should check the init image and the sandbox namespace's events."}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return true, &EngineError{Msg: fmt.Sprintf("the init container failed (%s, exit %d): %s", t.Reason, t.ExitCode, strings.TrimSpace(t.Message)),
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
			return true, &EngineError{Msg: "the box ended before it got its job: " + cs.State.Terminated.Reason,
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
		return &EngineError{Msg: fmt.Sprintf("the image %s is missing on the node (%s)", image, w.Reason),
			Hint: "The operator should make the image available to the cluster (scripts/k8s/import-init.sh for the init image, a registry or ctr import for the sandbox image)."}
	case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return &EngineError{Msg: fmt.Sprintf("the node could not create the box (%s): %s", w.Reason, w.Message),
			Hint: "The operator should check the RuntimeClass and seccomp profile in the manifest's kubernetes section."}
	}
	return nil
}

// runOn attaches to the pod, gives runbox-init its job and collects the
// outcome. gone says the cluster deleted or evicted the pod.
func (k *Kube) runOn(ctx context.Context, p *pod, job contract.Job) (o boxOutcome, contents [][]byte, gone bool) {
	ij := initJob(k.m, job)
	if k.gvisor() {
		// As on Docker: gVisor's own kernel counts the box's processes.
		ij.NProc = k.m.Limits.Pids
	}
	payload, err := json.Marshal(ij)
	if err != nil {
		o.lost = "encoding the job: " + err.Error()
		return o, nil, false
	}
	req := k.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(k.ns).Name(p.name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: kubeBox, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(k.cfg, "POST", req.URL())
	if err != nil {
		o.lost = "attaching to the pod: " + err.Error()
		return o, nil, false
	}
	sctx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	pr, pw := io.Pipe()
	diag := &capped{max: 16 << 10}
	go func() {
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: bytes.NewReader(append(payload, '\n')), Stdout: pw, Stderr: diag})
		pw.CloseWithError(err)
	}()
	read := make(chan frames, 1)
	go func() { read <- parseFrames(pr, diag, maxStream(k.m.Limits)) }()

	backstop := time.NewTimer(job.Timeout + backstopGrace)
	defer backstop.Stop()
	var got frames
	collect := func() frames {
		k.deletePod(p.name)
		select {
		case f := <-read:
			return f
		case <-time.After(killTimeout):
			stopStream()
			return <-read
		}
	}
	select {
	case got = <-read:
	case <-backstop.C:
		o.backstop = true
		got = collect()
	case <-ctx.Done():
		o.cancelled = true
		got = collect()
	}
	o.report, contents = got.report, got.contents
	if o.report == nil {
		o.lost = "the box ended without a report"
		if got.err != nil {
			o.lost += ": " + got.err.Error()
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(got.diag), "\n"); first != "" {
			o.lost += " (runbox-init: " + first + ")"
		}
	}
	if !needsEngineVerdict(o) || o.cancelled {
		return o, contents, false
	}
	// The cluster's view decides OOM, the pod's deadline and its loss.
	v := k.verdict(ctx, p.name)
	o.oomKilled = v.oomKilled
	switch {
	case v.deadline && o.report == nil:
		o.backstop = true
	case v.gone != "" && o.report == nil && !o.backstop:
		o.lost = v.gone
		gone = true
	}
	if o.report == nil {
		k.log.Warn("box ended without a report", "run_id", job.RunID, "pod", p.name, "err", got.err, "init_stderr", got.diag, "verdict", v)
	}
	return o, contents, gone
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

// deleteLater deletes a finished pod in the background; Close waits.
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
	zero := int64(0)
	err := k.cs.CoreV1().Pods(k.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil && !apierrors.IsNotFound(err) {
		k.log.Warn("deleting a pod failed; the reaper will retry", "pod", name, "err", err)
		k.unremoved[name] = true
		return
	}
	delete(k.live, name)
}

// gvisor says whether the pods run under gVisor: the manifest's isolation
// level, or a RuntimeClass named for it.
func (k *Kube) gvisor() bool {
	return k.m.Isolation == manifest.IsolationGVisor || strings.Contains(k.m.Kubernetes.RuntimeClass, "gvisor")
}
