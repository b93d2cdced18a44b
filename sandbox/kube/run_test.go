package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// fakeCluster is client-go's fake clientset (an in-memory object store
// behind the typed client the driver uses) with the pod watches in the
// test's hands: the store's own watch ignores field selectors and
// resource versions, which the driver relies on the API server to honour.
// Each watch the driver opens is handed to the test, which plays the
// kubelet and the API server: it changes the pod's status and sends the
// events the API server would send, in the order the test needs, and
// ends the watch as the API server does (an expired resource version, the
// request's context ended).
type fakeCluster struct {
	cs      *fake.Clientset
	ns      string
	watches chan *podWatch
	rv      int
	mu      sync.Mutex
}

// podWatch is one watch the driver opened.
type podWatch struct {
	opts metav1.ListOptions
	w    *watch.FakeWatcher
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

func newFakeCluster(t *testing.T) (*Kube, *fakeCluster) {
	t.Helper()
	k := testKube(t, nil)
	fc := &fakeCluster{cs: fake.NewClientset(), ns: k.ns, watches: make(chan *podWatch, 16)}
	// The API server gives each object version a resource version.
	fc.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).ResourceVersion = fc.nextRV()
		return false, nil, nil
	})
	fc.cs.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		pw := &podWatch{opts: a.(k8stesting.WatchActionImpl).ListOptions, w: watch.NewFakeWithChanSize(16, false)}
		fc.watches <- pw
		return true, pw.w, nil
	})
	k.cs, k.cfg = fc.cs, &rest.Config{Host: "https://127.0.0.1:6443"}
	k.log = slog.New(slog.DiscardHandler)
	k.imageIDs, k.live, k.unremoved = map[string]string{}, map[string]struct{}{}, map[string]bool{}
	return k, fc
}

func (fc *fakeCluster) nextRV() string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.rv++
	return strconv.Itoa(fc.rv)
}

// watch is the next watch the driver opens.
func (fc *fakeCluster) watch(t *testing.T) *podWatch {
	t.Helper()
	select {
	case pw := <-fc.watches:
		return pw
	case <-time.After(30 * time.Second):
		t.Fatal("the driver opened no watch")
		return nil
	}
}

// pods are the pods in the store.
func (fc *fakeCluster) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	l, err := fc.cs.CoreV1().Pods(fc.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// set changes a pod in the store as the kubelet would, and returns it as
// a watch event carries it.
func (fc *fakeCluster) set(t *testing.T, name string, change func(*corev1.Pod)) *corev1.Pod {
	t.Helper()
	p, err := fc.cs.CoreV1().Pods(fc.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change(p)
	p.ResourceVersion = fc.nextRV()
	if err := fc.cs.Tracker().Update(podsGVR, p, fc.ns); err != nil {
		t.Fatal(err)
	}
	return p.DeepCopy()
}

func running(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kubeBox, Image: p.Spec.Containers[0].Image, ImageID: "docker-pullable://runbox/sandbox@sha256:feed",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
}

func boxWaiting(reason, msg string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kubeBox, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
}

func testBoxSpec(k *Kube) sandbox.BoxSpec {
	return sandbox.BoxSpec{Language: k.m.Languages[0], InitArgs: []string{"--preload"}, Lifetime: time.Minute,
		Labels: k.owner.Labels(map[string]string{sandbox.LabelRunID: "r_test"})}
}

type started struct {
	box sandbox.Box
	err error
}

// start starts a box in the background: the test plays the cluster.
func start(k *Kube, ctx context.Context, spec sandbox.BoxSpec) chan started {
	ch := make(chan started, 1)
	go func() {
		b, err := k.Start(ctx, spec)
		ch <- started{b, err}
	}()
	return ch
}

func result(t *testing.T, ch chan started) started {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(60 * time.Second):
		t.Fatal("Start did not return")
		return started{}
	}
}

// Start creates the pod and waits, on a watch of that pod alone from the
// version it created, until the box container runs; the pod is this
// server's until removed, and the image ID the kubelet reported names the
// image from then on.
func TestKubeStartWaitsUntilTheBoxRuns(t *testing.T) {
	k, fc := newFakeCluster(t)
	ch := start(k, context.Background(), testBoxSpec(k))
	pw := fc.watch(t)
	pods := fc.pods(t)
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	p := pods[0]
	if pw.opts.FieldSelector != "metadata.name="+p.Name || pw.opts.ResourceVersion != p.ResourceVersion || p.ResourceVersion == "" {
		t.Errorf("watch %+v of pod %s at version %s", pw.opts, p.Name, p.ResourceVersion)
	}
	if !strings.HasPrefix(p.Name, "runbox-python-"+k.owner.Instance[:8]+"-") || p.Labels[sandbox.LabelRunID] != "r_test" ||
		*p.Spec.ActiveDeadlineSeconds != int64((time.Minute+startTimeout).Seconds())+1 || p.Spec.Containers[0].StdinOnce ||
		strings.Join(p.Spec.Containers[0].Args, " ") != "--preload" {
		t.Errorf("pod %s: labels %v deadline %d", p.Name, p.Labels, *p.Spec.ActiveDeadlineSeconds)
	}
	// Scheduled, the init container running: not yet.
	pw.w.Modify(fc.set(t, p.Name, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	}))
	select {
	case r := <-ch:
		t.Fatalf("Start returned before the box ran: %v", r.err)
	case <-time.After(100 * time.Millisecond):
	}
	pw.w.Modify(fc.set(t, p.Name, running))
	r := result(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.box.ID() != p.Name || r.box.Started().IsZero() || !r.box.(*pod).Alive() {
		t.Errorf("box %s started %v", r.box.ID(), r.box.Started())
	}
	if !pw.w.IsStopped() {
		t.Error("the watch was left open")
	}
	if id, err := k.ImageDigest(context.Background(), p.Spec.Containers[0].Image); err != nil || id != "docker-pullable://runbox/sandbox@sha256:feed" {
		t.Errorf("ImageDigest %q %v", id, err)
	}
	if _, live := k.live[p.Name]; !live {
		t.Error("the pod is not counted as this server's")
	}
	r.box.Remove()
	if len(fc.pods(t)) != 0 || len(k.live) != 0 {
		t.Errorf("after Remove: %d pods, live %v", len(fc.pods(t)), k.live)
	}
	var grace *int64
	for _, a := range fc.cs.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok && a.GetResource().Resource == "pods" {
			grace = d.DeleteOptions.GracePeriodSeconds
		}
	}
	if grace == nil || *grace != 0 {
		t.Errorf("deleted with grace period %v, want 0", grace)
	}
}

// A session's pod keeps its stdin open between attaches and has the
// session's own limits.
func TestKubeStartSession(t *testing.T) {
	k, fc := newFakeCluster(t)
	spec := testBoxSpec(k)
	lim := k.m.Limits
	lim.Memory, lim.WorkspaceBytes = 256<<20, 8<<20
	spec.Session, spec.Limits = true, &lim
	ch := start(k, context.Background(), spec)
	pw := fc.watch(t)
	p := fc.pods(t)[0]
	pw.w.Modify(fc.set(t, p.Name, running))
	r := result(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.box.Remove()
	c := p.Spec.Containers[0]
	if c.StdinOnce || c.Resources.Limits.Memory().Value() != 256<<20 || p.Spec.InitContainers[0].Resources.Requests.Memory().Value() != 256<<20 {
		t.Errorf("session pod: stdin once %v, memory %v", c.StdinOnce, c.Resources.Limits.Memory())
	}
	for _, v := range p.Spec.Volumes {
		if v.Name == "workspace" && v.EmptyDir.SizeLimit.Value() != 8<<20 {
			t.Errorf("workspace size %v", v.EmptyDir.SizeLimit)
		}
	}
}

// What will never get better fails the start at once, with its cause and
// fix, and the pod is deleted.
func TestKubeStartFailsFast(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(*corev1.Pod)
		want   string
	}{
		{"image missing", boxWaiting("ErrImagePull", "not found"), "is missing on the node (ErrImagePull)"},
		{"image pull back-off", boxWaiting("ImagePullBackOff", ""), "is missing on the node"},
		{"box config", boxWaiting("CreateContainerConfigError", "bad seccomp"), "could not create the box (CreateContainerConfigError): bad seccomp"},
		{"init image missing", func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull"}}}}
		}, "runbox/init:0123456789abcdef is missing on the node"},
		{"init failed", func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "install", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "no such file\n"}}}}
		}, "the init container failed (Error, exit 2): no such file"},
		{"pod failed", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "UnexpectedAdmissionError", "node said no"
		}, "ended before it ran the job: UnexpectedAdmissionError node said no"},
		{"box ended", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kubeBox, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
		}, "the box ended before it got its job: Error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, fc := newFakeCluster(t)
			ch := start(k, context.Background(), testBoxSpec(k))
			pw := fc.watch(t)
			pw.w.Modify(fc.set(t, fc.pods(t)[0].Name, c.change))
			r := result(t, ch)
			var ee *sandbox.EngineError
			if !errors.As(r.err, &ee) || !strings.Contains(ee.Msg, c.want) || ee.Hint == "" {
				t.Fatalf("Start: %v, want %q", r.err, c.want)
			}
			k.bg.Wait()
			if n := len(fc.pods(t)); n != 0 || len(k.live) != 0 {
				t.Errorf("%d pods left, live %v", n, k.live)
			}
			// The cluster answered: its answer is no reason to check it again.
			if k.readyErr != nil {
				t.Errorf("the cluster was suspected: %v", k.readyErr)
			}
		})
	}
}

// A pod deleted while it started (by an operator, an eviction) fails the
// start with a sandbox error that says so.
func TestKubeStartPodDeleted(t *testing.T) {
	k, fc := newFakeCluster(t)
	ch := start(k, context.Background(), testBoxSpec(k))
	pw := fc.watch(t)
	p := fc.pods(t)[0]
	pw.w.Delete(&p)
	r := result(t, ch)
	var ee *sandbox.EngineError
	if !errors.As(r.err, &ee) || !strings.Contains(ee.Msg, "deleted before it started") {
		t.Fatalf("Start: %v", r.err)
	}
}

// The API server ends a watch whose resource version expired: the driver
// reads the pod again and watches from its current version.
func TestKubeStartWatchExpires(t *testing.T) {
	k, fc := newFakeCluster(t)
	ch := start(k, context.Background(), testBoxSpec(k))
	pw := fc.watch(t)
	name := fc.pods(t)[0].Name
	pending := fc.set(t, name, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })
	pw.w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	pw.w.Stop()
	pw2 := fc.watch(t)
	if pw2.opts.ResourceVersion != pending.ResourceVersion || pw2.opts.FieldSelector != "metadata.name="+name {
		t.Errorf("second watch %+v, want from version %s", pw2.opts, pending.ResourceVersion)
	}
	pw2.w.Modify(fc.set(t, name, running))
	if r := result(t, ch); r.err != nil {
		t.Fatal(r.err)
	} else {
		r.box.Remove()
	}
}

// A pod that does not start by the call's deadline: the error says why
// it waits (the scheduler's word), and the pod is deleted.
func TestKubeStartDeadline(t *testing.T) {
	k, fc := newFakeCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ch := start(k, ctx, testBoxSpec(k))
	pw := fc.watch(t)
	name := fc.pods(t)[0].Name
	pw.w.Modify(fc.set(t, name, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}
	}))
	// The API server ends a watch when its request's context ends: this
	// one, and any the driver opens from then on.
	<-ctx.Done()
	pw.w.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case pw := <-fc.watches:
				pw.w.Stop()
			case <-done:
				return
			}
		}
	}()
	r := result(t, ch)
	var ee *sandbox.EngineError
	if !errors.As(r.err, &ee) || !strings.Contains(ee.Msg, "did not start") || !strings.Contains(ee.Msg, "Unschedulable: 0/3 nodes are available") {
		t.Fatalf("Start: %v", r.err)
	}
	k.bg.Wait()
	if n := len(fc.pods(t)); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

// The API server refuses the pod: the error names the fix (RBAC), and no
// pod is left to delete.
func TestKubeStartRefused(t *testing.T) {
	k, fc := newFakeCluster(t)
	fc.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(podsGVR.GroupResource(), "", errors.New("no pods for you"))
	})
	_, err := k.Start(context.Background(), testBoxSpec(k))
	var ee *sandbox.EngineError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "refused runbox") || !strings.Contains(ee.Hint, "rbac.yaml") {
		t.Fatalf("Start: %v", err)
	}
	if len(k.live) != 0 || len(k.unremoved) != 0 {
		t.Errorf("live %v unremoved %v", k.live, k.unremoved)
	}
}

// The connection fails during the create: the pod may exist all the same,
// so it is deleted once the API server answers; the cluster is checked
// again on the next call.
func TestKubeStartConnectionLost(t *testing.T) {
	k, fc := newFakeCluster(t)
	fc.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("Post \"https://127.0.0.1:6443/api/v1/namespaces/runbox/pods\": http2: client connection lost")
	})
	_, err := k.Start(context.Background(), testBoxSpec(k))
	var ee *sandbox.EngineError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "not reachable") {
		t.Fatalf("Start: %v", err)
	}
	if len(k.unremoved) != 1 || len(k.live) != 1 {
		t.Errorf("the pod that may exist is not left to delete: unremoved %v", k.unremoved)
	}
	if k.readyErr == nil {
		t.Error("a lost connection did not have the cluster checked again")
	}
}

// The cluster's word on a pod's end.
func TestKubeVerdict(t *testing.T) {
	term := func(reason string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kubeBox, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: reason}}}}
		}
	}
	for _, c := range []struct {
		name   string
		change func(*corev1.Pod)
		want   sandbox.Verdict
	}{
		{"oom", term("OOMKilled"), sandbox.Verdict{OOMKilled: true}},
		{"exited", term("Error"), sandbox.Verdict{}},
		{"oom before a restart", func(p *corev1.Pod) {
			term("Error")(p)
			p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "OOMKilled"}
		}, sandbox.Verdict{OOMKilled: true}},
		{"deadline", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "DeadlineExceeded"
		}, sandbox.Verdict{Deadline: true}},
		{"evicted", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "the node was low on memory"
		}, sandbox.Verdict{Gone: "the sandbox pod was evicted during the run: the node was low on memory"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, fc := newFakeCluster(t)
			b := startedPod(t, k, fc)
			fc.set(t, b.name, c.change)
			if v := b.Verdict(context.Background(), sandbox.VerdictQuery{State: true}); v != c.want {
				t.Errorf("verdict %+v, want %+v", v, c.want)
			}
		})
	}
	// Deleted before the verdict.
	k, fc := newFakeCluster(t)
	b := startedPod(t, k, fc)
	b.Kill()
	if v := b.Verdict(context.Background(), sandbox.VerdictQuery{State: true}); v.Gone != "the sandbox pod was deleted during the run" {
		t.Errorf("verdict of a deleted pod %+v", v)
	}
	// Without State the cluster is not asked.
	n := len(fc.cs.Actions())
	if v := b.Verdict(context.Background(), sandbox.VerdictQuery{}); v != (sandbox.Verdict{}) || len(fc.cs.Actions()) != n {
		t.Errorf("verdict without State %+v", v)
	}
}

// A box still running when asked: the verdict waits, on a watch, for its
// end, or for its deletion.
func TestKubeVerdictWaits(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		k, fc := newFakeCluster(t)
		b := startedPod(t, k, fc)
		ch := make(chan sandbox.Verdict, 1)
		go func() { ch <- b.Verdict(context.Background(), sandbox.VerdictQuery{State: true}) }()
		pw := fc.watch(t)
		if pw.opts.FieldSelector != "metadata.name="+b.name {
			t.Errorf("verdict watch %+v", pw.opts)
		}
		if deleted {
			p := fc.pods(t)[0]
			pw.w.Delete(&p)
		} else {
			pw.w.Modify(fc.set(t, b.name, func(p *corev1.Pod) {
				p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}
			}))
		}
		select {
		case v := <-ch:
			if deleted && v.Gone == "" || !deleted && !v.OOMKilled {
				t.Errorf("deleted %v: verdict %+v", deleted, v)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Verdict did not return")
		}
		if !pw.w.IsStopped() {
			t.Error("the verdict's watch was left open")
		}
	}
}

// startedPod is a box whose pod runs.
func startedPod(t *testing.T, k *Kube, fc *fakeCluster) *pod {
	t.Helper()
	ch := start(k, context.Background(), testBoxSpec(k))
	pw := fc.watch(t)
	pw.w.Modify(fc.set(t, fc.pods(t)[0].Name, running))
	r := result(t, ch)
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.box.(*pod)
}

// A deletion the API server refuses is left to the reaper, which
// retries it once the API server answers; a pod already gone is no
// failure.
func TestKubeDeleteRetried(t *testing.T) {
	k, fc := newFakeCluster(t)
	b := startedPod(t, k, fc)
	fail := true
	fc.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, apierrors.NewServiceUnavailable("etcd away")
		}
		return false, nil, nil
	})
	b.Remove()
	if !k.unremoved[b.name] || len(fc.pods(t)) != 1 {
		t.Fatalf("a refused deletion: unremoved %v, %d pods", k.unremoved, len(fc.pods(t)))
	}
	fail = false
	if n := k.retryDeletes(); n != 1 || len(fc.pods(t)) != 0 || len(k.unremoved) != 0 {
		t.Errorf("retryDeletes %d: %d pods, unremoved %v", n, len(fc.pods(t)), k.unremoved)
	}
	b.Remove() // gone already
	if len(k.unremoved) != 0 {
		t.Errorf("deleting a pod that is gone: unremoved %v", k.unremoved)
	}
}

// Ready lists the namespace's pods once; its failure says the fix and is
// checked again on the next call.
func TestKubeReady(t *testing.T) {
	k, fc := newFakeCluster(t)
	k.readyErr = errors.New("not checked yet")
	refuse := true
	fc.cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if refuse {
			return true, nil, apierrors.NewUnauthorized("token expired")
		}
		return false, nil, nil
	})
	var ee *sandbox.EngineError
	if err := k.Ready(context.Background()); !errors.As(err, &ee) || !strings.Contains(ee.Hint, "rbac.yaml") {
		t.Fatalf("Ready: %v", err)
	}
	refuse = false
	if err := k.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	lists := 0
	_ = k.Ready(context.Background())
	for _, a := range fc.cs.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
			lists++
		}
	}
	if lists != 2 {
		t.Errorf("%d lists, want 2 (once ready, no more checks)", lists)
	}
}

// Sessions find their boxes by label: running pods only (the field
// selector), not those being deleted, with the owner values kept as
// annotations read back.
func TestKubeFindBoxes(t *testing.T) {
	k, fc := newFakeCluster(t)
	long := strings.Repeat("h", 70)
	labels, ann := podMeta(map[string]string{sandbox.LabelManaged: "true", "runbox.io/session": "s1", sandbox.LabelOwnerHost: long})
	now := metav1.Now()
	for _, p := range []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: k.ns, Labels: labels, Annotations: ann}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: k.ns, Labels: labels, DeletionTimestamp: &now}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: k.ns, Labels: map[string]string{sandbox.LabelManaged: "true"}}},
	} {
		if err := fc.cs.Tracker().Add(p); err != nil {
			t.Fatal(err)
		}
	}
	found, err := k.FindBoxes(context.Background(), map[string]string{sandbox.LabelManaged: "true", "runbox.io/session": ""})
	if err != nil || len(found) != 1 || found[0].ID != "a" || found[0].Labels[sandbox.LabelOwnerHost] != long {
		t.Fatalf("FindBoxes: %+v %v", found, err)
	}
	var opts metav1.ListOptions
	for _, a := range fc.cs.Actions() {
		if l, ok := a.(k8stesting.ListActionImpl); ok {
			opts = l.ListOptions
		}
	}
	if opts.FieldSelector != "status.phase=Running" || !strings.Contains(opts.LabelSelector, "runbox.io/session") {
		t.Errorf("list options %+v", opts)
	}
	if _, err := k.FindBoxes(context.Background(), map[string]string{"bad key!": "x"}); err == nil {
		t.Error("an invalid label was accepted")
	}
	b, err := k.Attach(context.Background(), "a")
	if err != nil || b.ID() != "a" {
		t.Fatalf("Attach: %v", err)
	}
	if _, live := k.live["a"]; !live {
		t.Error("an attached pod is not this server's to delete")
	}
}

// The isolation level: the manifest's, or gvisor under a RuntimeClass
// named for it.
func TestKubeIsolation(t *testing.T) {
	k := testKube(t, nil)
	if k.Isolation() != manifest.IsolationRunc {
		t.Errorf("isolation %s", k.Isolation())
	}
	k = testKube(t, func(m *manifest.Manifest) { m.Kubernetes.RuntimeClass = "gvisor-rc" })
	if k.Isolation() != manifest.IsolationGVisor {
		t.Errorf("isolation under RuntimeClass gvisor-rc: %s", k.Isolation())
	}
}
