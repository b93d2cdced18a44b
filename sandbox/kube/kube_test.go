package kube

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

func testKube(t *testing.T, edit func(*manifest.Manifest)) *Kube {
	t.Helper()
	m := manifest.Default()
	m.Backend = manifest.BackendKubernetes
	if edit != nil {
		edit(m)
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return &Kube{m: m, ns: m.Kubernetes.Namespace, owner: sandbox.CurrentOwner(), initImage: "runbox/init:0123456789abcdef"}
}

func TestKubePodSpecHardened(t *testing.T) {
	k := testKube(t, nil)
	lang := k.m.Languages[0]
	p := k.podSpec("runbox-python-x", lang, k.owner.Labels(map[string]string{sandbox.LabelRunID: "r_1"}), time.Minute, []string{"a"})
	sp := p.Spec
	if *sp.AutomountServiceAccountToken || *sp.EnableServiceLinks || *sp.ShareProcessNamespace || sp.HostNetwork ||
		sp.RestartPolicy != corev1.RestartPolicyNever || *sp.ActiveDeadlineSeconds != 61 || sp.RuntimeClassName != nil {
		t.Fatalf("pod spec: %+v", sp)
	}
	if len(sp.InitContainers) != 2 || len(sp.Containers) != 1 {
		t.Fatal("want two init containers (install, unplug) and one box")
	}
	init, box := sp.InitContainers[0], sp.Containers[0]
	// The unplug step alone has a capability: NET_ADMIN as root, nothing
	// else, over the pod's own network namespace.
	un := sp.InitContainers[1]
	usc := un.SecurityContext
	if un.Image != k.initImage || strings.Join(un.Command, " ") != "/runbox-init __unplug" || *usc.RunAsUser != 0 || *usc.RunAsNonRoot ||
		*usc.AllowPrivilegeEscalation || *usc.Privileged || !*usc.ReadOnlyRootFilesystem || len(usc.Capabilities.Drop) != 1 || usc.Capabilities.Drop[0] != "ALL" ||
		len(usc.Capabilities.Add) != 1 || usc.Capabilities.Add[0] != "NET_ADMIN" || len(un.VolumeMounts) != 0 || sp.HostNetwork {
		t.Errorf("unplug container %+v %+v", un, usc)
	}
	if box.SecurityContext.Capabilities.Add != nil || init.SecurityContext.Capabilities.Add != nil {
		t.Error("a capability beyond the unplug step")
	}
	k.m.Kubernetes.KeepInterfaces = true
	if n := len(k.podSpec("runbox-python-y", lang, nil, time.Minute, nil).Spec.InitContainers); n != 1 {
		t.Errorf("keep_interfaces: %d init containers", n)
	}
	k.m.Kubernetes.KeepInterfaces = false
	if init.Image != k.initImage || strings.Join(init.Command, " ") != "/runbox-init __install "+sandbox.InitPath {
		t.Errorf("init container %s %v", init.Image, init.Command)
	}
	if strings.Join(box.Command, " ") != "prlimit --nofile=1024 --fsize=67108864 --core=0 -- "+sandbox.InitPath || box.Args[0] != "a" || !box.Stdin || box.StdinOnce || box.TTY || box.Image != lang.Image {
		t.Errorf("box %+v", box)
	}
	for _, c := range []corev1.Container{init, box} {
		sc := c.SecurityContext
		if !*sc.RunAsNonRoot || *sc.RunAsUser != 1000 || *sc.RunAsGroup != 1000 || *sc.AllowPrivilegeEscalation || *sc.Privileged ||
			!*sc.ReadOnlyRootFilesystem || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s security context %+v", c.Name, sc)
		}
		if c.Resources.Limits.Memory().Value() != int64(k.m.Limits.Memory) || c.Resources.Limits.Cpu().MilliValue() != 1000 ||
			!c.Resources.Limits.Memory().Equal(*c.Resources.Requests.Memory()) || !c.Resources.Limits.Cpu().Equal(*c.Resources.Requests.Cpu()) {
			t.Errorf("%s resources %+v", c.Name, c.Resources)
		}
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range box.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if !mounts[sandbox.InitDir].ReadOnly || mounts[manifest.Workspace].ReadOnly || mounts[manifest.Tmp].ReadOnly {
		t.Errorf("mounts %+v", mounts)
	}
	sizes := map[string]int64{}
	for _, v := range sp.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory {
			t.Fatalf("volume %s is not a memory emptyDir", v.Name)
		}
		sizes[v.Name] = v.EmptyDir.SizeLimit.Value()
	}
	if sizes["workspace"] != int64(k.m.Limits.WorkspaceBytes) || sizes["tmp"] != int64(k.m.Limits.TmpBytes) {
		t.Errorf("volume sizes %v", sizes)
	}
	if p.Labels[sandbox.LabelManaged] != "true" || p.Labels[sandbox.LabelInstance] != k.owner.Instance || p.Labels[sandbox.LabelRunID] != "r_1" {
		t.Errorf("labels %v", p.Labels)
	}
}

func TestKubePodSpecOptions(t *testing.T) {
	k := testKube(t, func(m *manifest.Manifest) {
		m.Kubernetes.RuntimeClass = "gvisor"
		m.Kubernetes.NodeSelector = map[string]string{"runbox.io/sandbox": "true"}
		m.Kubernetes.Tolerations = []manifest.Toleration{{Key: "runbox.io/sandbox", Operator: "Exists", Effect: "NoSchedule"}}
		m.Kubernetes.SeccompProfile = "profiles/runbox.json"
		m.Limits.CPUs = 0.25
	})
	sp := k.podSpec("x", k.m.Languages[0], nil, time.Second, nil).Spec
	if *sp.RuntimeClassName != "gvisor" || sp.NodeSelector["runbox.io/sandbox"] != "true" || len(sp.Tolerations) != 1 ||
		sp.Tolerations[0].Operator != corev1.TolerationOpExists || sp.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("scheduling %+v", sp)
	}
	sc := sp.Containers[0].SecurityContext.SeccompProfile
	if sc.Type != corev1.SeccompProfileTypeLocalhost || *sc.LocalhostProfile != "profiles/runbox.json" {
		t.Errorf("seccomp %+v", sc)
	}
	if cpu := sp.Containers[0].Resources.Requests.Cpu().MilliValue(); cpu != 250 {
		t.Errorf("cpu %dm", cpu)
	}
}

func TestKubeManifestValidation(t *testing.T) {
	m := manifest.Default()
	m.Backend = "nomad"
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "backend") {
		t.Errorf("backend nomad: %v", err)
	}
	m = manifest.Default()
	m.Backend = manifest.BackendKubernetes
	m.Kubernetes.Namespace = "Bad_NS"
	m.Kubernetes.Tolerations = []manifest.Toleration{{Operator: "Maybe", Effect: "Sometimes"}, {Key: "k", Operator: "Exists", Value: "v"}}
	m.Kubernetes.SeccompProfile = "../etc/x.json"
	m.Kubernetes.NodeSelector = map[string]string{"bad key!": "v"}
	err := m.Validate()
	for _, f := range []string{"kubernetes.namespace", "tolerations[0].operator", "tolerations[0].effect", "tolerations[1].value", "kubernetes.seccomp_profile", "kubernetes.node_selector"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("want an error for %s, got %v", f, err)
		}
	}
}

func TestKubePodMetaRoundTrip(t *testing.T) {
	all := map[string]string{sandbox.LabelManaged: "true", sandbox.LabelOwnerHost: strings.Repeat("h", 70), sandbox.LabelOwnerPID: "42"}
	labels, ann := podMeta(all)
	if _, ok := labels[sandbox.LabelOwnerHost]; ok || ann[annotationPrefix+sandbox.LabelOwnerHost] == "" || labels[sandbox.LabelOwnerPID] != "42" {
		t.Fatalf("labels %v annotations %v", labels, ann)
	}
	pod := corev1.Pod{}
	pod.Labels, pod.Annotations = labels, ann
	if got := podOwnerLabels(&pod.ObjectMeta); fmt.Sprint(got) != fmt.Sprint(all) {
		t.Fatalf("round trip %v, want %v", got, all)
	}
}

func TestKubeErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, c := range []struct {
		err  error
		want string
	}{
		{apierrors.NewForbidden(gr, "x", errors.New("no")), "refused runbox"},
		{apierrors.NewServiceUnavailable("down"), "not reachable"},
		{errors.New(`Get "https://127.0.0.1:1/api": dial tcp 127.0.0.1:1: connect: connection refused`), "not reachable"},
		{&url.Error{Op: "Post", URL: "https://127.0.0.1:1/api", Err: errors.New("write: broken pipe")}, "not reachable"},
		{apierrors.NewBadRequest("bad"), "refused a request"},
	} {
		ee := kubeError(c.err).(*sandbox.EngineError)
		if !strings.Contains(ee.Msg, c.want) || ee.Hint == "" {
			t.Errorf("%v: %+v", c.err, ee)
		}
	}
}

func TestInitImageFor(t *testing.T) {
	// sha256("") = e3b0c44298fc1c14...
	if got := InitImageFor(nil); got != "runbox/init:e3b0c44298fc1c14" {
		t.Fatal(got)
	}
}

// TestParseFramesPlain: the Kubernetes attach stream carries stdout and
// stderr apart, with no Docker multiplexing in front of the frames.
