//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/contract"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/runbox-mcp/runbox/sandbox"
)

// The Kubernetes backend's tests run against the cluster whose kubeconfig
// RUNBOX_K8S_KUBECONFIG names (`make k8s-up` prints it), in a namespace of
// their own. They import the init image of the runbox-init they built with
// scripts/k8s/import-init.sh (root and Docker needed), unless
// RUNBOX_K8S_INIT_IMAGE names one already on the node. The contract on
// Kubernetes is TestContract/kubernetes; the tests here are what only a
// cluster has (pods deleted, reaped, shared; warm pods; the API server
// away; the deploy's RBAC; latency).
const kubeNS = "runbox-e2e"

var (
	kubeOnce sync.Once
	kubeCS   *kubernetes.Clientset
	kubeErr  error
)

// kubeSetup skips unless a cluster is configured, and makes the namespace
// and the init image ready, once.
func kubeSetup(t *testing.T) *kubernetes.Clientset {
	t.Helper()
	kc := os.Getenv("RUNBOX_K8S_KUBECONFIG")
	if kc == "" {
		absent(t, "RUNBOX_K8S_KUBECONFIG is not set (`make k8s-up` starts the test cluster)")
	}
	kubeOnce.Do(func() {
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			kubeErr = err
			return
		}
		if kubeCS, kubeErr = kubernetes.NewForConfig(cfg); kubeErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = kubeCS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeNS}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			kubeErr = fmt.Errorf("creating namespace %s: %w", kubeNS, err)
			return
		}
		kubeDeleteOrphans(ctx)
		if os.Getenv("RUNBOX_K8S_INIT_IMAGE") == "" {
			bin := filepath.Join(binDir, "runbox-init-linux-"+runtime.GOARCH)
			out, err := exec.Command("../scripts/k8s/import-init.sh", bin).CombinedOutput()
			if err != nil {
				kubeErr = fmt.Errorf("import-init.sh: %v\n%s", err, out)
			}
		}
	})
	if kubeErr != nil {
		t.Fatal(kubeErr)
	}
	return kubeCS
}

// kubeDeleteOrphans deletes the test namespace's pods whose server is
// gone: an earlier run that was killed leaves its session pods, which
// outlive their server by design (until the session's lifetime) and hold
// the node's CPU, so that this run's pods would stay Pending. Every server
// of the test cluster runs on this machine (some under a host name of
// their own), so a pod's owner is alive exactly when its process is; the
// pods of a live server (another suite's) stay.
func kubeDeleteOrphans(ctx context.Context) {
	list, err := kubeCS.CoreV1().Pods(kubeNS).List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
	if err != nil {
		return
	}
	zero := int64(0)
	for _, p := range list.Items {
		if alive, _ := sandbox.OwnerAlive(p.Labels, sandbox.Owner{Host: p.Labels[sandbox.LabelOwnerHost]}); alive {
			continue
		}
		fmt.Printf("e2e: deleting pod %s, left by a server that is gone (pid %s)\n", p.Name, p.Labels[sandbox.LabelOwnerPID])
		_ = kubeCS.CoreV1().Pods(kubeNS).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
}

// kubeManifest is a manifest selecting the kubernetes backend, plus extra.
func kubeManifest(t *testing.T, extra string) string {
	t.Helper()
	// runbox.json is runbox's own seccomp profile, which scripts/k8s/up.sh
	// installs as a Localhost profile.
	// runbox-test-local is the test cluster's provisioner's class (ext4
	// images of the claim's size: a real quota).
	y := fmt.Sprintf("backend: kubernetes\nkubernetes:\n  kubeconfig: %s\n  namespace: %s\n  seccomp_profile: runbox.json\n  workspace_storage_class: runbox-test-local\n",
		os.Getenv("RUNBOX_K8S_KUBECONFIG"), kubeNS)
	if img := os.Getenv("RUNBOX_K8S_INIT_IMAGE"); img != "" {
		y += "  init_image: " + img + "\n"
	}
	return writeManifest(t, y+"audit:\n  enabled: false\n"+extra)
}

// kubeServer starts a server on the kubernetes backend; at the end of the
// test it is closed and no pod of it may remain.
func kubeServer(t *testing.T, extra string) *server {
	t.Helper()
	kubeSetup(t)
	s := startServer(t, secretEnv, "--manifest", kubeManifest(t, extra))
	t.Cleanup(func() {
		s.close()
		kubeNoPodsOf(t, s.cmd.Process.Pid)
	})
	return s
}

// kubePods lists runbox's pods in the test namespace.
func kubePods(t testing.TB) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	list, err := kubeCS.CoreV1().Pods(kubeNS).List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	return list.Items
}

// kubeNoPods fails when pods remain (deleted ones get 20 s to go).
func kubeNoPods(t testing.TB) {
	t.Helper()
	kubeNoPodsOf(t, 0)
}

// kubeNoPodsOf fails when pods of the server of pid remain (0: of any
// server; a test may hold two servers, and one's pods outlive the
// other's close).
func kubeNoPodsOf(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pods := slices.DeleteFunc(kubePods(t), func(p corev1.Pod) bool {
			return pid != 0 && p.Labels[sandbox.LabelOwnerPID] != strconv.Itoa(pid)
		})
		if len(pods) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
			}
			t.Errorf("pods left behind: %v", names)
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// waitPod waits for a running pod that matches.
func waitPod(t *testing.T, match func(corev1.Pod) bool) corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range kubePods(t) {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && match(p) {
				return p
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no matching running pod within 60 s")
	return corev1.Pod{}
}

// TestKubePodHardened reads a live pod's spec and deletes it mid-run: the
// run answers sandbox with the hint that says so.
func TestKubePodDeletedMidRun(t *testing.T) {
	s := kubeServer(t, "")
	done := make(chan contract.Result, 1)
	go func() {
		r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo started; sleep 60", "timeout_seconds": 90})
		done <- r
	}()
	p := waitPod(t, func(p corev1.Pod) bool { return p.Labels[sandbox.LabelLanguage] == "bash" })
	checkHardened(t, p)
	time.Sleep(time.Second) // the job is in
	zero := int64(0)
	if err := kubeCS.CoreV1().Pods(kubeNS).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		e := wantError(t, r, contract.KindSandbox, "")
		if !strings.Contains(e.Message, "deleted") || !strings.Contains(e.Hint, "deleted or evicted") {
			t.Errorf("error %+v", e)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the run did not end after its pod was deleted")
	}
	// The server still works.
	r, _ := s.call(t, map[string]any{"language": "bash", "code": "echo fine"})
	mustOK(t, r)
}

func checkHardened(t *testing.T, p corev1.Pod) {
	t.Helper()
	sp := p.Spec
	if sp.AutomountServiceAccountToken == nil || *sp.AutomountServiceAccountToken || sp.EnableServiceLinks == nil || *sp.EnableServiceLinks ||
		sp.ActiveDeadlineSeconds == nil || sp.HostNetwork || sp.HostPID || sp.HostIPC || sp.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod spec not hardened: %+v", sp)
	}
	for _, c := range append(append([]corev1.Container{}, sp.InitContainers...), sp.Containers...) {
		sc := c.SecurityContext
		// runbox's unplug step alone runs as root, with NET_ADMIN alone.
		unplug := c.Name == "unplug"
		if unplug && (sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 || sc.Capabilities == nil || len(sc.Capabilities.Add) != 1 || sc.Capabilities.Add[0] != "NET_ADMIN" || len(c.VolumeMounts) != 0) {
			t.Errorf("unplug step: %+v", sc)
		}
		if !unplug && sc != nil && sc.Capabilities != nil && len(sc.Capabilities.Add) != 0 {
			t.Errorf("container %s adds capabilities %v", c.Name, sc.Capabilities.Add)
		}
		if sc == nil || sc.RunAsNonRoot == nil || *sc.RunAsNonRoot == unplug || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 ||
			sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost ||
			sc.SeccompProfile.LocalhostProfile == nil || *sc.SeccompProfile.LocalhostProfile != "runbox.json" {
			t.Errorf("container %s not hardened: %+v", c.Name, sc)
		}
		if !c.Resources.Limits.Memory().Equal(*c.Resources.Requests.Memory()) || !c.Resources.Limits.Cpu().Equal(*c.Resources.Requests.Cpu()) {
			t.Errorf("container %s: limits %v != requests %v", c.Name, c.Resources.Limits, c.Resources.Requests)
		}
	}
	for _, v := range sp.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit == nil {
			t.Errorf("volume %s is not a sized memory emptyDir", v.Name)
		}
	}
	// Whether stdin outlives the first attach is the driver's per kind of
	// box (a restarted server attaches again to a one-off box to collect
	// a run that outlived its server), not part of the hardening.
	if box := sp.Containers[0]; !box.Stdin || box.TTY {
		t.Errorf("box stdin %v once %v tty %v", box.Stdin, box.StdinOnce, box.TTY)
	}
}

// TestKubeReapsKilledServer kills a server mid-run: the next server on the
// same cluster deletes its pod at start-up.
func TestKubeReapsKilledServer(t *testing.T) {
	kubeSetup(t)
	a := startServer(t, nil, "--manifest", kubeManifest(t, ""))
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, _ = a.c.CallTool(ctx, newCall(map[string]any{"language": "bash", "code": "sleep 120", "timeout_seconds": 150}))
	}()
	p := waitPod(t, func(p corev1.Pod) bool { return p.Labels[sandbox.LabelOwnerPID] == fmt.Sprint(a.cmd.Process.Pid) })
	_ = a.cmd.Process.Signal(syscall.SIGKILL)
	_ = a.cmd.Wait()
	_ = a.c.Close()
	if _, err := kubeCS.CoreV1().Pods(kubeNS).Get(context.Background(), p.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the killed server's pod is already gone: %v", err)
	}
	t0 := time.Now()
	kubeServer(t, "") // reaps at start-up; its cleanup checks that no pod remains
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := kubeCS.CoreV1().Pods(kubeNS).Get(context.Background(), p.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			t.Logf("reaped %s in %s", p.Name, time.Since(t0).Round(time.Millisecond))
			lease := "runbox-" + p.Labels[sandbox.LabelInstance]
			if _, err := kubeCS.CoordinationV1().Leases(kubeNS).Get(context.Background(), lease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("lease %s of the killed server is still there (%v)", lease, err)
			}
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s of the killed server was not reaped", p.Name)
}

// TestKubeTwoInstances: two servers share the namespace; a server that
// starts (and reaps) while the other runs leaves the other's pod alone.
func TestKubeTwoInstances(t *testing.T) {
	a := kubeServer(t, "")
	done := make(chan contract.Result, 1)
	go func() {
		r, _ := a.call(t, map[string]any{"language": "bash", "code": "sleep 6; echo a-done", "timeout_seconds": 60})
		done <- r
	}()
	waitPod(t, func(p corev1.Pod) bool { return p.Labels[sandbox.LabelOwnerPID] == fmt.Sprint(a.cmd.Process.Pid) })
	b := kubeServer(t, "")
	r, _ := b.call(t, map[string]any{"language": "bash", "code": "echo b-done"})
	mustOK(t, r)
	if r.Stdout != "b-done\n" {
		t.Errorf("b: %q", r.Stdout)
	}
	ra := <-done
	mustOK(t, ra)
	if ra.Stdout != "a-done\n" {
		t.Errorf("a: %q", ra.Stdout)
	}
}

// TestKubePool: warm pods serve one job each and are replaced.
func TestKubePool(t *testing.T) {
	// Pooled pods hold their CPU request while they wait: 3 × 0.25 fits
	// the 2-core test node next to a running pod.
	langs := []string{"python", "javascript", "bash"}
	s := kubeServer(t, "pool:\n  size: 1\nlimits:\n  cpus: 0.25\n"+poolOf(t, langs...))
	waitIdle := func() {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			n := 0
			for _, p := range kubePods(t) {
				if p.Labels[sandbox.LabelOwnerPID] == fmt.Sprint(s.cmd.Process.Pid) && p.Labels[sandbox.LabelPooled] == "true" &&
					p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					n++
				}
			}
			if n == len(langs) {
				time.Sleep(500 * time.Millisecond) // the server sees them too
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatal("the pool did not fill")
	}
	for round := range 2 {
		waitIdle()
		for _, lang := range langs {
			code := map[string]string{"python": "print(1)", "javascript": "console.log(1)", "bash": "echo 1"}[lang]
			t0 := time.Now()
			r, _ := s.call(t, map[string]any{"language": lang, "code": code})
			mustOK(t, r)
			if !r.Metrics.Pooled || r.Stdout != "1\n" {
				t.Fatalf("round %d %s: pooled %v stdout %q", round, lang, r.Metrics.Pooled, r.Stdout)
			}
			t.Logf("%s: warm run, startup %d ms, call %s", lang, r.Metrics.StartupMs, time.Since(t0).Round(time.Millisecond))
		}
	}
}

// TestKubeAPIUnreachable: an API server that does not answer makes runs
// answer sandbox; the server stays up.
func TestKubeAPIUnreachable(t *testing.T) {
	kubeSetup(t)
	raw, err := os.ReadFile(os.Getenv("RUNBOX_K8S_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	bad := regexp.MustCompile(`server: https://[^\s]+`).ReplaceAll(raw, []byte("server: https://127.0.0.1:1"))
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf("backend: kubernetes\naudit:\n  enabled: false\nkubernetes:\n  kubeconfig: %s\n  namespace: %s\n", kc, kubeNS)
	if img := os.Getenv("RUNBOX_K8S_INIT_IMAGE"); img != "" {
		y += "  init_image: " + img + "\n"
	}
	s := startServer(t, nil, "--manifest", writeManifest(t, y))
	defer s.close()
	for range 2 {
		r, _ := s.call(t, map[string]any{"language": "python", "code": "print(1)"})
		e := wantError(t, r, contract.KindSandbox, "")
		if !strings.Contains(e.Message, "not reachable") {
			t.Errorf("error %+v", e)
		}
	}
}

// TestKubeLatency measures cold and warm runs on the cluster for
// docs/scaling.md (logged, not asserted). CPU 0.5 per box, so that three
// pooled pods fit the 2-core test node.
func TestKubeLatency(t *testing.T) {
	measure := func(t *testing.T, s *server, n int) []time.Duration {
		var out []time.Duration
		for range n {
			time.Sleep(4 * time.Second) // let the pool refill
			t0 := time.Now()
			r, _ := s.call(t, map[string]any{"language": "python", "code": "print(1)"})
			mustOK(t, r)
			out = append(out, time.Since(t0).Round(time.Millisecond))
		}
		return out
	}
	t.Run("cold", func(t *testing.T) {
		t.Logf("cold python runs: %v", measure(t, kubeServer(t, "limits:\n  cpus: 0.5\n"), 5))
	})
	t.Run("warm", func(t *testing.T) {
		t.Logf("warm python runs: %v", measure(t, kubeServer(t, "pool:\n  size: 1\nlimits:\n  cpus: 0.5\n"+poolOf(t, "python", "javascript", "bash")), 5))
	})
	// The same on the Docker backend, for comparison.
	docker := func(t *testing.T, extra string) *server {
		s := startServer(t, nil, "--manifest", writeManifest(t, "audit:\n  enabled: false\nlimits:\n  cpus: 0.5\n"+extra))
		t.Cleanup(s.close)
		return s
	}
	t.Run("docker-cold", func(t *testing.T) {
		t.Logf("docker cold python runs: %v", measure(t, docker(t, ""), 5))
	})
	t.Run("docker-warm", func(t *testing.T) {
		t.Logf("docker warm python runs: %v", measure(t, docker(t, "pool:\n  size: 1\n"+poolOf(t, "python", "javascript", "bash")), 5))
	})
}

// TestKubeDeployRBAC runs as the service account of deploy/kubernetes (its
// Role only, by impersonation) in the namespace it makes, which enforces
// the restricted Pod Security level: the pods pass it and the Role is
// enough for runs, reaping and the Lease.
func TestKubeDeployRBAC(t *testing.T) {
	kubeSetup(t)
	kubectl := filepath.Join(runboxCache(), "k8s", "bin-v1.34.4", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Skipf("no %s (`make k8s-up` builds it)", kubectl)
	}
	kc := os.Getenv("RUNBOX_K8S_KUBECONFIG")
	for _, f := range []string{"namespace.yaml", "rbac.yaml", "networkpolicy.yaml"} {
		if out, err := exec.Command(kubectl, "--kubeconfig", kc, "apply", "-f", "../deploy/kubernetes/"+f).CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply %s: %v\n%s", f, err, out)
		}
	}
	raw, err := os.ReadFile(kc)
	if err != nil {
		t.Fatal(err)
	}
	sa := regexp.MustCompile(`(?m)^  user:\n`).ReplaceAll(raw, []byte("  user:\n    as: system:serviceaccount:runbox:runbox\n"))
	saKC := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(saKC, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf("backend: kubernetes\naudit:\n  enabled: false\nkubernetes:\n  kubeconfig: %s\n  namespace: runbox-sandbox\n  workspace_storage_class: runbox-test-local\n", saKC)
	if img := os.Getenv("RUNBOX_K8S_INIT_IMAGE"); img != "" {
		y += "  init_image: " + img + "\n"
	}
	y += "workspaces:\n  enabled: true\n  quota: 16MiB\n  dir: " + t.TempDir() + "\n"
	s := startServer(t, nil, "--manifest", writeManifest(t, y))
	r, _ := s.call(t, map[string]any{"language": "python", "code": "open('x.txt', 'w').write('hi')\nprint('ok')"})
	mustOK(t, r)
	if r.Stdout != "ok\n" || len(r.Artifacts) != 1 {
		t.Errorf("stdout %q artifacts %+v", r.Stdout, r.Artifacts)
	}
	// The Role lets it keep a named workspace: its claim made, listed,
	// stamped at its release and deleted.
	id := s.open(t, "python", "workspace", "rbac")
	mustOK(t, s.in(t, id, "python", "open('kept.txt', 'w').write('kept')"))
	s.tool(t, "session_close", map[string]any{"session_id": id})
	waitFree(t, s, "rbac")
	if d := workspaceTool(t, s.c, "workspace_delete", map[string]any{"name": "rbac"}); d.Error != nil {
		t.Fatalf("workspace_delete as runbox's service account: %+v", d.Error)
	}
	s.close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		pods, err := kubeCS.CoreV1().Pods("runbox-sandbox").List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d pods left in runbox-sandbox", len(pods.Items))
		}
		time.Sleep(300 * time.Millisecond)
	}
	leases, err := kubeCS.CoordinationV1().Leases("runbox-sandbox").List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelManaged + "=true"})
	if err != nil || len(leases.Items) != 0 {
		t.Errorf("leases left after close: %v %v", leases, err)
	}
	// A deleted claim goes once no pod uses it (its pvc-protection
	// finalizer): the session's pod has just gone.
	for {
		claims, err := kubeCS.CoreV1().PersistentVolumeClaims("runbox-sandbox").List(ctx, metav1.ListOptions{LabelSelector: "io.runbox.workspace.claim"})
		if err == nil && len(claims.Items) == 0 {
			break
		}
		if err == nil && ctx.Err() == nil {
			deleting := true
			for _, c := range claims.Items {
				deleting = deleting && c.DeletionTimestamp != nil
			}
			if !deleting {
				t.Fatalf("a claim left after workspace_delete, not being deleted: %v", claims)
			}
			time.Sleep(300 * time.Millisecond)
			continue
		}
		t.Fatalf("claims left after workspace_delete: %v %v", claims, err)
	}
}

// apiProxy forwards TCP to the API server until it is cut; cutting closes
// the listener's connections and refuses new ones.
type apiProxy struct {
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	addr   string
}

func (p *apiProxy) up(t *testing.T) {
	t.Helper()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
}

func (p *apiProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestKubeAPIServerAway: the API server becomes unreachable for a while
// (its connections cut, new ones refused): runs answer sandbox, the server
// stays up, and runs work again once it is back.
func TestKubeAPIServerAway(t *testing.T) {
	kubeSetup(t)
	raw, err := os.ReadFile(os.Getenv("RUNBOX_K8S_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`server: https://([^\s]+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("no server in the kubeconfig")
	}
	p := &apiProxy{target: string(m[1])}
	p.up(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, bytes.Replace(raw, m[0], []byte("server: https://"+p.addr), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf("backend: kubernetes\naudit:\n  enabled: false\nkubernetes:\n  kubeconfig: %s\n  namespace: %s\n", kc, kubeNS)
	if img := os.Getenv("RUNBOX_K8S_INIT_IMAGE"); img != "" {
		y += "  init_image: " + img + "\n"
	}
	s := startServer(t, nil, "--manifest", writeManifest(t, y))
	t.Cleanup(func() {
		s.close()
		kubeNoPods(t)
	})
	code := map[string]any{"language": "bash", "code": "echo up"}
	r, _ := s.call(t, code)
	mustOK(t, r)
	p.cut()
	for range 2 {
		r, _ = s.call(t, code)
		e := wantError(t, r, contract.KindSandbox, "")
		if !strings.Contains(e.Message, "not reachable") {
			t.Errorf("error %+v", e)
		}
	}
	time.Sleep(2 * time.Second) // the Lease renewal and reaper fail meanwhile
	p.up(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, _ = s.call(t, code)
		if r.Status == contract.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery: %+v", r.Error)
		}
		time.Sleep(time.Second)
	}
	if r.Stdout != "up\n" {
		t.Errorf("stdout %q", r.Stdout)
	}
}

// A session is a long-lived pod attached per call; a second runbox
// instance sharing the namespace finds it by its labels and carries on with
// its state, and the first one can still use it after.
func TestKubeSessions(t *testing.T) {
	a := kubeServer(t, "")
	b := kubeServer(t, "")
	id := a.open(t, "python")
	mustOK(t, a.in(t, id, "python", "import json\nstate = {'n': 1}"))
	r := b.in(t, id, "python", "state['n'] += 1\njson.dumps(state)")
	if mustOK(t, r); r.Stdout != "'{\"n\": 2}'\n" || r.Session.Call != 2 {
		t.Fatalf("through the other instance: %q %+v\n%s", r.Stdout, r.Session, b.stderr)
	}
	r = a.in(t, id, "python", "print(state['n'])")
	if mustOK(t, r); r.Stdout != "2\n" {
		t.Fatalf("back on the first: %q", r.Stdout)
	}
	pods := kubePods(t)
	if len(pods) != 1 || pods[0].Spec.Containers[0].StdinOnce {
		t.Fatalf("session pods: %d", len(pods))
	}
	// Apart from a stdin that outlives one attach, the profile is a
	// one-off pod's.
	p := pods[0]
	p.Spec.Containers[0].StdinOnce = true
	checkHardened(t, p)
	if c := a.tool(t, "session_close", map[string]any{"session_id": id}); !c.Closed {
		t.Fatalf("close: %+v", c.Error)
	}
}
