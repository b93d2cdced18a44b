package doctor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/runbox-mcp/runbox/contract"
	"github.com/runbox-mcp/runbox/sandbox/docker"
	"github.com/runbox-mcp/runbox/sandbox/oci"

	"github.com/runbox-mcp/runbox/images"
	"github.com/runbox-mcp/runbox/images/derived"
	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/runs"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Status of one check.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	// Fix is the one command or setting that fixes a warn or fail.
	Fix string `json:"fix,omitempty"`
}

// Report is every check; OK is false when any failed.
type Report struct {
	OK     bool           `json:"ok"`
	Engine *docker.Engine `json:"engine,omitempty"`
	Checks []Check        `json:"checks"`
	// Packages are the derived images of the manifest's packages.
	Packages []Derived `json:"packages,omitempty"`
}

func (r *Report) add(c Check) {
	r.Checks = append(r.Checks, c)
	if c.Status == Fail {
		r.OK = false
	}
}

// Options say what to check.
type Options struct {
	// Manifest is the effective manifest; nil when it did not load, with
	// ManifestErr saying why.
	Manifest     *manifest.Manifest
	ManifestPath string
	ManifestErr  error
	Logger       *slog.Logger
	// Discovery is how the engine was found (endpoint.go); zero: found here.
	Discovery Discovery
	// Derived are the derived images of the manifest's packages
	// (derived.Apply), whose languages already name them.
	Derived []derived.Image
	// ClientFiles finds the MCP clients' files (clients.go); nil checks
	// none.
	ClientFiles ClientFiles
}

// Run performs every check. It never returns early: a broken engine still
// gets its manifest checked, and each failure says its fix.
func Run(ctx context.Context, o Options) Report {
	rep := Report{OK: true}
	m := o.Manifest
	if o.ManifestErr != nil {
		rep.add(Check{Name: "manifest", Status: Fail, Detail: o.ManifestErr.Error(),
			Fix: "Correct the field named above in " + orDefault(o.ManifestPath, "runbox.yaml") + " (`runbox manifest schema` lists every field)."})
		m = manifest.Default() // the rest is still worth checking
	} else {
		rep.add(Check{Name: "manifest", Status: OK, Detail: fmt.Sprintf("%s: languages %s, isolation %s, pool %d, concurrency %d",
			orDefault(o.ManifestPath, "built-in defaults"), strings.Join(m.LanguageNames(), ", "), m.Isolation, m.Pool.Size, m.Concurrency)})
	}

	credentialChecks(m, lookupEnv, &rep)

	if m.Backend == manifest.BackendKubernetes {
		kubeChecks(ctx, o, m, &rep)
	} else {
		rep.add(endpointCheck(ctx, o.Discovery))
		dockerChecks(ctx, o, m, &rep)
	}
	if c, ok := workspaceCheck(m, os.Geteuid()); ok {
		rep.add(c)
	}
	if c, ok := previewCheck(m); ok {
		rep.add(c)
	}
	for _, c := range clientChecks(o.ClientFiles, "runbox") {
		rep.add(c)
	}
	return rep
}

// dockerChecks checks a Docker-API engine (Docker, Podman).
func dockerChecks(ctx context.Context, o Options, m *manifest.Manifest, rep *Report) {
	d, err := docker.New(docker.Options{Manifest: probeManifest(m, m.Isolation), Logger: o.Logger}, sandbox.CurrentOwner())
	if err != nil {
		rep.add(Check{Name: "engine", Status: Fail, Detail: err.Error(), Fix: "Set DOCKER_HOST to the engine's address, or run `make setup`."})
		return
	}
	defer d.Close()
	eng, err := d.Engine(ctx)
	if err != nil {
		rep.add(Check{Name: "engine", Status: Fail, Detail: err.Error(), Fix: hintOf(err, "Start the Docker engine: `make setup` installs and starts it.")})
		return
	}
	rep.Engine = &eng
	rep.add(Check{Name: "engine", Status: OK, Detail: fmt.Sprintf("%s %s, API %s, %s, kernel %s, %s", orDefault(eng.Product, "Docker"), eng.Version, eng.APIVersion, eng.OS, eng.Kernel, eng.Arch)})
	rep.add(syscallNamesCheck(o.Discovery, eng.Kernel))
	rep.add(cgroupCheck(eng))
	rep.add(runcCheck(eng.RuncVersion))
	if path, ok := eng.Runtimes["runsc"]; ok {
		rep.add(Check{Name: "runsc", Status: OK, Detail: runscVersion(path) + " at " + path})
	}

	for _, im := range o.Derived {
		c, dr := derivedCheck(ctx, d, im)
		rep.add(c)
		rep.Packages = append(rep.Packages, dr)
	}
	for _, lang := range m.Languages {
		rep.add(imageCheck(ctx, d, lang))
	}
	for _, level := range []string{manifest.IsolationRunc, manifest.IsolationGVisor} {
		rep.add(dockerLevelCheck(ctx, o, m, eng, level))
	}
	if m.Backend == manifest.BackendOCI {
		rep.add(ociCheck(ctx, o, m))
	}
}

// ociCheck starts boxes as the oci backend does (runc, or runsc for
// isolation: gvisor, run by runbox, the engine's image unpacked) and runs
// the hardening self-test in them.
func ociCheck(ctx context.Context, o Options, m *manifest.Manifest) Check {
	isolation := manifest.IsolationRunc
	if m.Isolation == manifest.IsolationGVisor {
		isolation = manifest.IsolationGVisor
	}
	c := level{Check: Check{Name: "backend oci"}, required: true, isolation: isolation}
	pm := probeManifest(m, isolation)
	d, err := oci.New(oci.Options{Manifest: pm, Logger: o.Logger}, sandbox.CurrentOwner())
	if err != nil {
		return c.failed(err.Error(), "Use backend: docker on this host.")
	}
	r := sandbox.New(d, sandbox.Options{Manifest: pm, Logger: o.Logger})
	defer r.Close()
	return selfTestCheck(ctx, c, pm, r, false, "Run runbox as root on Linux with runc on PATH (`make setup` installs the engine, which brings runc; and runsc for isolation: gvisor), then `runbox doctor` again.",
		"Do not run boxes on the oci backend until fixed: check runc (`runc --version`) or runsc (`runsc --version`) and report the failing fact.")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func hintOf(err error, def string) string {
	var ee *sandbox.EngineError
	if errors.As(err, &ee) && ee.Hint != "" {
		return ee.Hint
	}
	return def
}

func cgroupCheck(e docker.Engine) Check {
	c := Check{Name: "cgroup", Status: OK, Detail: "v" + e.CgroupVersion + " (" + e.CgroupDriver + " driver)"}
	if e.CgroupVersion == "1" {
		c.Detail += ": every limit works; OOM and pids events are read from the v1 memory and pids controllers"
	}
	return c
}

// runcFixed is the first upstream runc with the fix for CVE-2024-21626
// ("Leaky Vessels": a container escape through a leaked working directory).
var runcFixed = [3]int{1, 1, 12}

// runcBackports are distribution builds of older runc that carry the fix.
var runcBackports = []struct {
	pattern *regexp.Regexp
	who     string
}{
	{regexp.MustCompile(`^1\.1\.5\+ds1-1\+deb12u[1-9]`), "Debian bookworm's security update (1.1.5+ds1-1+deb12u1)"},
}

var leadingVersion = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)`)

func runcCheck(v string) Check {
	c := Check{Name: "runc", Detail: v}
	m := leadingVersion.FindStringSubmatch(v)
	if m == nil {
		c.Status, c.Detail = Warn, fmt.Sprintf("the engine reports runc as %q: its version is unknown", v)
		c.Fix = "Check that runc is 1.1.12 or later (`runc --version`), or a distribution build with the fix for CVE-2024-21626."
		return c
	}
	var got [3]int
	for i := range got {
		got[i], _ = strconv.Atoi(m[i+1])
	}
	if !older(got, runcFixed) {
		c.Status, c.Detail = OK, v+" (has the fix for CVE-2024-21626)"
		return c
	}
	for _, b := range runcBackports {
		if b.pattern.MatchString(v) {
			c.Status, c.Detail = OK, v+": older than 1.1.12, but "+b.who+" carries the fix for CVE-2024-21626"
			return c
		}
	}
	c.Status = Warn
	c.Detail = v + " predates runc 1.1.12: CVE-2024-21626 lets a container escape to the host"
	c.Fix = "Upgrade runc (your distribution's security update, or runc 1.1.12+), or set isolation: gvisor."
	return c
}

func older(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func runscVersion(path string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "version unknown (the engine may be on another host)"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(first)
}

func imageCheck(ctx context.Context, d *docker.Docker, lang manifest.Language) Check {
	c := Check{Name: "image " + lang.Name}
	img, err := d.Image(ctx, lang.Image)
	if err != nil {
		c.Status, c.Detail, c.Fix = Fail, err.Error(), hintOf(err, "Build or pull "+lang.Image+".")
		if strings.HasPrefix(lang.Image, derived.Repository+":") {
			c.Fix = buildFix
		}
		return c
	}
	c.Status, c.Detail = OK, lang.Image+" "+short(img.ID)
	switch have := img.Labels[images.RecipeLabel]; {
	case have == "":
		c.Detail += " (not built by runbox: no recipe to compare)"
	case have == images.RecipeHash():
		c.Detail += ", recipe " + have + " (current)"
	default:
		c.Status = Warn
		c.Detail += fmt.Sprintf(", recipe %s, but this runbox's recipe is %s", have, images.RecipeHash())
		c.Fix = "Rebuild the image: `runbox setup` (`make setup` in a Debian checkout)."
	}
	return c
}

func short(id string) string {
	if len(id) > 19 {
		return id[:19]
	}
	return id
}

// probeManifest is m at one isolation level, without pool or cache: the
// self-test starts exactly the boxes it needs.
func probeManifest(m *manifest.Manifest, level string) *manifest.Manifest {
	p := *m
	p.Isolation = level
	p.Pool.Size = 0
	p.Cache.Enabled = false
	return &p
}

// selfTest prints what the hardening looks like from inside a box.
const selfTest = `echo "uid=$(id -u)"
sed -n -E 's/^(CapEff|NoNewPrivs|Seccomp):[[:space:]]*/\1=/p' /proc/self/status
echo "net=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' ' | sed 's/ $//')"
if : > /.runbox-probe 2>/dev/null; then echo root=writable; else echo root=readonly; fi
`

// ptraceProbe calls ptrace, which the seccomp profile kills.
const ptraceProbe = "import ctypes\nctypes.CDLL(None).syscall(101, 0, 0, 0, 0)\nprint('ptrace returned')\n"

// dockerLevelCheck starts boxes at one isolation level on the engine.
func dockerLevelCheck(ctx context.Context, o Options, m *manifest.Manifest, eng docker.Engine, level string) Check {
	c := levelResult(level, level == m.Isolation)
	if _, ok := eng.Runtimes[docker.RuntimeFor(level)]; !ok {
		return c.failed("the engine has no "+docker.RuntimeFor(level)+" runtime", "Install runsc and register it in /etc/docker/daemon.json: `make setup` does both.")
	}
	pm := probeManifest(m, level)
	d, err := docker.New(docker.Options{Manifest: pm, Logger: o.Logger}, sandbox.CurrentOwner())
	if err != nil {
		return c.failed(err.Error(), "Run `make setup`.")
	}
	r := sandbox.New(d, sandbox.Options{Manifest: pm, Logger: o.Logger})
	defer r.Close()
	return selfTestCheck(ctx, c, pm, r, false, "Run `make setup`, then `runbox doctor` again.",
		"Do not run boxes on this engine until fixed: check /etc/docker/daemon.json for settings that weaken containers (userns, seccomp, default runtime) and run `make setup`.")
}

// level is a level check under way: its name and whether the manifest
// requires that level (then a failure fails the report, else it warns).
type level struct {
	Check
	required bool
	// isolation is what the probe boxes run under, which decides what
	// their /proc can show.
	isolation string
}

func levelResult(name string, required bool) level {
	return level{Check: Check{Name: "level " + name}, required: required, isolation: name}
}

func (l level) failed(detail, fix string) Check {
	c := l.Check
	c.Status, c.Detail, c.Fix = Warn, detail, fix
	if l.required {
		c.Status = Fail
	}
	return c
}

// selfTestCheck runs the hardening self-test and a forbidden call in boxes
// of r, and says what it saw.
// podNetwork allows a pod's cluster interface beside lo, with a note.
func selfTestCheck(ctx context.Context, l level, pm *manifest.Manifest, r sandbox.Runner, podNetwork bool, fix, weakFix string) Check {
	failed := l.failed
	bash, ok := pm.Language("bash")
	if !ok {
		bash = pm.Languages[0]
	}
	start := time.Now()
	res := run(ctx, pm, r, bash.Name, selfTest)
	took := time.Since(start)
	if res.Status != contract.StatusOK {
		if res.Error != nil {
			return failed(fmt.Sprintf("a probe box did not run: %s: %s", res.Error.Kind, res.Error.Message), fix)
		}
		return failed("a probe box did not run", fix)
	}
	facts := parseFacts(res.Stdout)
	var bad []string
	expect := func(key, want, what string) {
		got, ok := facts[key]
		switch {
		case !ok && key == "NoNewPrivs" && l.isolation == manifest.IsolationGVisor:
			// gVisor's /proc does not show it; runsc applies it.
		case got != want:
			bad = append(bad, fmt.Sprintf("%s: %s=%q, want %q", what, key, got, want))
		}
	}
	expect("CapEff", "0000000000000000", "capabilities")
	expect("NoNewPrivs", "1", "no-new-privileges")
	expect("Seccomp", "2", "seccomp filter")
	var notes []string
	if net := facts["net"]; net != "lo" && podNetwork && strings.Contains(" "+net+" ", " lo ") {
		// A pod has its cluster network's interface: what it reaches is
		// the NetworkPolicy's to say (deploy/kubernetes).
		notes = append(notes, "network "+net+" (the namespace's deny-all NetworkPolicy must hold it)")
	} else {
		expect("net", "lo", "network")
	}
	expect("root", "readonly", "root filesystem")
	if facts["uid"] == "0" || facts["uid"] == "" {
		bad = append(bad, "uid: the program runs as "+orDefault(facts["uid"], "nobody knows"))
	}
	seccomp := "no python to try ptrace"
	if _, ok := pm.Language("python"); ok {
		pr := run(ctx, pm, r, "python", ptraceProbe)
		if pr.Error != nil && pr.Error.Kind == contract.KindForbiddenSyscall {
			seccomp = "ptrace killed (forbidden_syscall)"
		} else {
			bad = append(bad, fmt.Sprintf("ptrace was not killed: status %s, stdout %q", pr.Status, pr.Stdout))
		}
	}
	if len(bad) > 0 {
		return failed("hardening self-test: "+strings.Join(bad, "; "), weakFix)
	}
	c := l.Check
	c.Status = OK
	c.Detail = fmt.Sprintf("a box ran in %d ms: uid %s, no capabilities, no-new-privileges, seccomp filter, network %s, root read-only; %s",
		took.Milliseconds(), facts["uid"], facts["net"], seccomp)
	if len(notes) > 0 {
		c.Status = Warn
		c.Detail += "; " + strings.Join(notes, "; ")
		c.Fix = "Apply deploy/kubernetes/networkpolicy.yaml in the sandbox namespace, with a CNI that enforces NetworkPolicy."
	}
	return c
}

func run(ctx context.Context, m *manifest.Manifest, r sandbox.Runner, lang, code string) contract.Result {
	timeout := 60.0
	return runs.Service{Manifest: m, Runner: r}.Run(ctx, runs.Call{Args: runs.RunCodeArgs{Language: lang, Code: code, TimeoutSeconds: &timeout}})
}

func parseFacts(out string) map[string]string {
	facts := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			facts[k] = strings.TrimSpace(v)
		}
	}
	return facts
}

// Print writes the report for people: one line per check, the fix under
// each that did not pass.
func (r Report) Print(w interface{ Write([]byte) (int, error) }) {
	for _, c := range r.Checks {
		fmt.Fprintf(w, "%-5s %-17s %s\n", c.Status, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "      %-17s fix: %s\n", "", c.Fix)
		}
	}
	if r.OK {
		fmt.Fprintln(w, "runbox is ready.")
	} else {
		fmt.Fprintln(w, "runbox is not ready: fix what failed above.")
	}
}
