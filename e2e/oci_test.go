//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runbox-mcp/runbox/sandbox"
)

// ociState is where the oci backend keeps runc's state (sandbox/oci).
const ociState = "/run/runbox/oci/runc"

// ociServer starts a server on the oci backend (runc run by the server)
// and, at the end of the test, closes it and checks that runc knows no
// box of it and no bundle of it is left.
func ociServer(t *testing.T, manifest string) *server {
	t.Helper()
	ociReady(t)
	s := startServer(t, secretEnv, "--manifest", writeManifest(t, "audit:\n  enabled: false\nbackend: oci\n"+manifest))
	t.Cleanup(func() {
		s.close()
		pid := strconv.Itoa(s.cmd.Process.Pid)
		deadline := time.Now().Add(30 * time.Second)
		for left := ociBoxes(t, pid); len(left) > 0; left = ociBoxes(t, pid) {
			if time.Now().After(deadline) {
				t.Errorf("boxes left behind in runc: %v", left)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(line, "removing box failed") {
				t.Errorf("a box was not removed at once:\n%s", line)
			}
		}
	})
	return s
}

// ociReady skips a test of the oci backend where it cannot run (a
// failure under CI).
func ociReady(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		absent(t, "the oci backend needs root")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		absent(t, "the oci backend needs runc (`make setup` installs the engine, which brings it)")
	}
}

// ociStatus is box id's status in runc ("running", "stopped"...), "" when
// runc does not know it.
func ociStatus(t *testing.T, id string) string {
	t.Helper()
	out, err := exec.Command("runc", "--root", ociState, "state", id).Output()
	if err != nil {
		return ""
	}
	var st struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(out, &st)
	return st.Status
}

// ociBox is a box as `runc list` shows it.
type ociBox struct {
	ID          string            `json:"id"`
	Created     time.Time         `json:"created"`
	Annotations map[string]string `json:"annotations"`
}

// ociList lists the boxes in runc's state (none before runc made it).
func ociList() ([]ociBox, error) {
	out, err := exec.Command("runc", "--root", ociState, "list", "--format", "json").Output()
	if err != nil {
		if _, serr := os.Stat(ociState); os.IsNotExist(serr) {
			return nil, nil
		}
		return nil, fmt.Errorf("runc list: %w", err)
	}
	var boxes []ociBox
	_ = json.Unmarshal(out, &boxes)
	return boxes, nil
}

// ociLabelled names the boxes of list whose annotation key is value.
func ociLabelled(list []ociBox, key, value string) []string {
	var ids []string
	for _, b := range list {
		if b.Annotations[key] == value {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// waitNoOCIOrphans is waitNoOrphans for the oci backend: the boxes in
// runc's state, made since since by a server of this host that is gone.
func waitNoOCIOrphans(d time.Duration, since time.Time) []string {
	host, _ := os.Hostname()
	deadline := time.Now().Add(d)
	for {
		var orphans []string
		list, _ := ociList()
		for _, st := range list {
			if st.Annotations[sandbox.LabelOwnerHost] != host || st.Created.Before(since.Add(-time.Second)) {
				continue
			}
			if n, err := strconv.Atoi(st.Annotations[sandbox.LabelOwnerPID]); err != nil || syscall.Kill(n, 0) == syscall.ESRCH {
				orphans = append(orphans, st.ID)
			}
		}
		if len(orphans) == 0 || time.Now().After(deadline) {
			return orphans
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ociRunBoxes lists the boxes runc knows of run id.
func ociRunBoxes(t *testing.T, id string) []string {
	t.Helper()
	list, _ := ociList()
	return ociLabelled(list, sandbox.LabelRunID, id)
}

// ociBoxes lists the boxes runc knows of the server with pid.
func ociBoxes(t *testing.T, pid string) []string {
	t.Helper()
	list, err := ociList()
	if err != nil {
		t.Fatal(err)
	}
	return ociLabelled(list, sandbox.LabelOwnerPID, pid)
}

// hardeningProbe prints what a program in a box can see of its own
// confinement, one fact a line, sorted: identity, capabilities,
// no_new_privs, seccomp, network interfaces, host name, limits, every
// mount with its type and options, and what the masked paths hold.
const hardeningProbe = `
import os, resource
facts = []
st = dict(l.rstrip("\n").split(":\t", 1) for l in open("/proc/self/status"))
for k in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"):
    facts.append("status %s %s" % (k, " ".join(st.get(k, "").split())))
facts.append("net " + " ".join(sorted(os.listdir("/sys/class/net"))))
facts.append("hostname " + os.uname().nodename)
for name in ("NOFILE", "FSIZE", "CORE", "NPROC", "AS"):
    facts.append("rlimit %s %s" % (name, resource.getrlimit(getattr(resource, "RLIMIT_" + name))))
for line in open("/proc/self/mountinfo"):
    pre, post = line.split(" - ")
    f, g = pre.split(), post.split()
    if f[4] in ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf"):
        continue
    if f[4] == "/":
        # The image's files: overlay on Docker, a bind of the unpacked
        # image on oci; what matters is that the box cannot write them.
        facts.append("mount / %s" % f[5].split(",")[0])
        continue
    opts = sorted(set(f[5].split(",")) | set(o for o in g[2].split(",") if not o.startswith(("size=", "nr_inodes=", "inode64"))))
    facts.append("mount %s %s %s" % (f[4], g[0], ",".join(opts)))
for p in ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/sys/firmware", "/proc/sysrq-trigger"):
    try:
        if os.path.isdir(p):
            facts.append("masked %s dir %s" % (p, os.listdir(p)))
        else:
            with open(p, "rb") as fh:
                facts.append("masked %s file %r" % (p, fh.read(16)))
    except OSError as e:
        facts.append("masked %s %s" % (p, e.strerror))
for p in ("/", "/workspace", "/tmp", "/.runbox"):
    try:
        open(os.path.join(p, ".w"), "w").close()
        facts.append("writable " + p)
    except OSError as e:
        facts.append("writable %s no: %s" % (p, e.strerror))
print("\n".join(sorted(facts)))
`

// TestOCIHardeningMatchesDocker: a box of the oci backend sees the same
// confinement as a box the Docker engine starts from the same manifest,
// fact for fact, but for where the image's files and runbox-init come
// from (a read-only bind of the unpacked image against the engine's
// overlay; of the host's copy of runbox-init, nosuid and nodev too,
// against the engine's volume).
func TestOCIHardeningMatchesDocker(t *testing.T) {
	o := ociServer(t, "")
	d := dockerServer(t, "")
	facts := func(s *server) []string {
		r, _ := s.call(t, map[string]any{"language": "python", "code": hardeningProbe})
		if r.Status != "ok" {
			t.Fatalf("probe: %+v", r)
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
			if strings.HasPrefix(l, "mount "+sandbox.InitDir+" ") {
				continue // compared below
			}
			out = append(out, l)
		}
		return out
	}
	of, df := facts(o), facts(d)
	if !slices.Equal(of, df) {
		for _, l := range of {
			if !slices.Contains(df, l) {
				t.Errorf("only in the oci box:    %s", l)
			}
		}
		for _, l := range df {
			if !slices.Contains(of, l) {
				t.Errorf("only in the docker box: %s", l)
			}
		}
	}
	for _, want := range []string{"status CapEff 0000000000000000", "status NoNewPrivs 1", "status Seccomp 2", "net lo", "writable / no: Read-only file system", "writable /workspace"} {
		if !slices.Contains(of, want) {
			t.Errorf("the oci box lacks %q:\n%s", want, strings.Join(of, "\n"))
		}
	}
	r, _ := o.call(t, map[string]any{"language": "python", "code": `
for l in open("/proc/self/mountinfo"):
    if " /.runbox " in l:
        print(l.split(" - ")[0].split()[5])`})
	opts := strings.Split(strings.TrimSpace(r.Stdout), ",")
	for _, want := range []string{"ro", "nosuid", "nodev"} {
		if !slices.Contains(opts, want) {
			t.Errorf("runbox-init's mount in the oci box is %v, without %s", opts, want)
		}
	}
}

// TestOCISessions runs the session suites on the oci backend.
func TestOCISessions(t *testing.T) {
	s := ociServer(t, "limits:\n  memory: 256MiB\n")
	t.Run("state", func(t *testing.T) { sessionStatePersists(t, s) })
	t.Run("errors", func(t *testing.T) { sessionErrors(t, s) })
}

// TestOCIBoxesEndWithTheirServer: a killed server's boxes end (their
// stdin, the server's pipe, ends with it), and the next server's reaper
// deletes them from runc.
func TestOCIBoxesEndWithTheirServer(t *testing.T) {
	s := ociServer(t, "")
	r, _ := s.call(t, map[string]any{"language": "python", "code": "print(1)"})
	if r.Status != "ok" {
		t.Fatalf("first run: %+v", r)
	}
	pid := strconv.Itoa(s.cmd.Process.Pid)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, _ = s.callCtxRaw(ctx, map[string]any{"language": "python", "code": "import time; time.sleep(60)"})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(ociBoxes(t, pid)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the long run's box never showed in runc")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.kill9(t)
	<-done
	next := ociServer(t, "")
	if r, _ := next.call(t, map[string]any{"language": "python", "code": "print(2)"}); r.Stdout != "2\n" {
		t.Fatalf("the next server's run: %+v", r)
	}
	deadline = time.Now().Add(30 * time.Second)
	for left := ociBoxes(t, pid); len(left) > 0; left = ociBoxes(t, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed server's boxes are still in runc: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// On the oci backend the same clients and refusals of the declared
// network: the box has no interface but lo, and reaches the endpoints
// over runbox's channel, as on the engines.
func TestNetworkOCI(t *testing.T) {
	ns := startNetServers(t)
	s := ociServer(t, ns.manifest(""))
	testNetworkClients(t, s, ns)
	testNetworkRefusals(t, s, ns)
}

// Credentials are added at the egress for oci boxes too, and never enter
// the box.
func TestCredentialsOCI(t *testing.T) {
	cs := startCredServers(t)
	cs.env(t)
	testCredentials(t, ociServer(t, imageLanguages(t)+cs.manifest("")), cs)
}

// TestDoctorOCI: with backend oci, the doctor starts boxes as the oci
// backend does and runs the hardening self-test in them; a manifest that
// asks gVisor of it fails with its fix.
func TestDoctorOCI(t *testing.T) {
	ociReady(t)
	rep, code, out := doctor(t, nil, "--manifest", writeManifest(t, "backend: oci\n"))
	if code != 0 || !rep.OK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if st, detail, _ := rep.check("backend oci"); st != "ok" || !strings.Contains(detail, "ptrace killed") || !strings.Contains(detail, "root read-only") {
		t.Errorf("backend oci: %s %s", st, detail)
	}
	// gVisor on oci (runsc run by runbox, the path whose sessions keep
	// their memory through a checkpoint): the same self-test, in runsc.
	rep, code, out = doctor(t, nil, "--manifest", writeManifest(t, "backend: oci\nisolation: gvisor\n"))
	if code != 0 || !rep.OK {
		t.Fatalf("gVisor on oci: exit %d\n%s", code, out)
	}
	if st, detail, _ := rep.check("backend oci"); st != "ok" || !strings.Contains(detail, "root read-only") || !strings.Contains(detail, "network lo") {
		t.Errorf("backend oci with gVisor: %s %s", st, detail)
	}
}

// TestOCIPool: the pool works on oci as on Docker: a pooled run answers
// as a cold one, its box waited at the pooled CPU weight and was given a
// cold box's once claimed, and one job per box.
func TestOCIPool(t *testing.T) {
	s := ociServer(t, "pool:\n  size: 1\n")
	cold := ociServer(t, "")
	pid := strconv.Itoa(s.cmd.Process.Pid)
	shares := func() []string {
		var out []string
		for _, id := range ociBoxes(t, pid) {
			b, err := os.ReadFile("/sys/fs/cgroup/cpu/runbox/" + id + "/cpu.shares")
			if err != nil {
				t.Skip("cgroup v1's cpu.shares is not here: ", err)
			}
			out = append(out, strings.TrimSpace(string(b)))
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(ociBoxes(t, pid)) < 3 { // one per language
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not fill: %v", ociBoxes(t, pid))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if sh := shares(); slices.ContainsFunc(sh, func(v string) bool { return v != "2" }) {
		t.Errorf("waiting pooled boxes have CPU shares %v, want 2", sh)
	}
	args := map[string]any{"language": "python", "code": "import sys, os\nprint(open(f'/sys/fs/cgroup/cpu/cpu.shares').read().strip(), sys.stdin.read()[::-1], sorted(os.listdir('/workspace')))", "stdin": "loop"}
	warm, _ := s.call(t, args)
	ref, _ := cold.call(t, args)
	if !warm.Metrics.Pooled || ref.Metrics.Pooled || warm.Status != "ok" || ref.Status != "ok" {
		t.Fatalf("pooled %+v, cold %+v", warm, ref)
	}
	if warm.Stdout != "1024 pool ['main.py']\n" {
		t.Errorf("the pooled run saw %q: its box was not claimed at a cold box's weight, or had state", warm.Stdout)
	}
	if !strings.HasSuffix(ref.Stdout, " pool ['main.py']\n") {
		t.Errorf("the cold run saw %q", ref.Stdout)
	}
}

// gvisorPipeline is a command substitution of a five-stage pipeline: on
// the ptrace platform each stage is a host stub process of the sandbox.
const gvisorPipeline = `echo "n=$(echo a | cut -d: -f1 | tr -d " " | sort | tr "\n" " " | sed "s/ $//")"`

// TestOCIGVisorPipelines: under runsc run by runbox, a short pipeline
// answers every time. A pids cgroup sized for the box's processes held
// the whole sandbox there, and about half the runs ended without a
// report when gVisor's kernel could not fork a stub.
func TestOCIGVisorPipelines(t *testing.T) {
	s := gvisorOCIServer(t, t.TempDir(), "")
	for i := range 10 {
		r, _ := s.call(t, map[string]any{"language": "bash", "code": gvisorPipeline})
		if r.Status != "ok" || r.Stdout != "n=a\n" {
			t.Fatalf("run %d: status %s, stdout %q, error %+v", i, r.Status, r.Stdout, r.Error)
		}
	}
}
