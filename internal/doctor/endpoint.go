package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/runbox-mcp/runbox/internal/enginehost"
)

// Discovery is how the engine's address was found; cmd/runbox points the
// Engine API client at it (DOCKER_HOST) when the user named none.
type Discovery struct {
	GOOS     string
	Endpoint enginehost.Endpoint
	// Err is nil, enginehost.ErrNotFound, or why a chosen Docker context
	// cannot be used.
	Err error
	// Tried are the platform's well-known addresses.
	Tried []enginehost.Endpoint
}

// Discover reads this machine as cmd/runbox does.
func Discover() Discovery {
	h := enginehost.Local()
	d := Discovery{GOOS: h.GOOS, Tried: enginehost.Candidates(h)}
	d.Endpoint, d.Err = enginehost.Find(h)
	return d
}

// endpointCheck names the engine runbox found and how; when none answers,
// what starts one on this platform.
func endpointCheck(ctx context.Context, d Discovery) Check {
	if d.GOOS == "" {
		d = Discover()
	}
	var pingErr error
	if d.Err == nil {
		pingErr = ping(ctx)
	}
	return describeEndpoint(d, pingErr)
}

func ping(ctx context.Context) error {
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{})
	return err
}

// describeEndpoint is endpointCheck's verdict, given whether the engine
// answered.
func describeEndpoint(d Discovery, pingErr error) Check {
	c := Check{Name: "engine found"}
	switch {
	case errors.Is(d.Err, enginehost.ErrNotFound):
		var tried []string
		for _, t := range d.Tried {
			tried = append(tried, t.Host)
		}
		c.Status, c.Fix = Fail, startFix(d.GOOS, "")
		c.Detail = "no engine found: DOCKER_HOST is not set, no Docker context is chosen, and none of these exists: " + strings.Join(tried, ", ")
	case d.Err != nil:
		c.Status, c.Detail = Fail, d.Err.Error()
		c.Fix = "Choose a usable context (`docker context ls`, `docker context use default`) or set DOCKER_HOST to the engine's address."
	case pingErr != nil:
		c.Status, c.Fix = Fail, startFix(d.GOOS, d.Endpoint.Engine)
		c.Detail = fmt.Sprintf("%s (%s) does not answer: %v", where(d.Endpoint), d.Endpoint.Source, pingErr)
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s (%s)", where(d.Endpoint), d.Endpoint.Source)
	}
	return c
}

func where(ep enginehost.Endpoint) string {
	if ep.Engine == "" {
		return "an engine at " + ep.Host
	}
	return ep.Engine + " at " + ep.Host
}

// StartFix says what starts an engine: the one named (as enginehost
// names it), else this platform's usual ones.
func StartFix(goos, engine string) string { return startFix(goos, engine) }

// startFix says what starts an engine: the one found, when its name is
// known, else this platform's usual ones.
func startFix(goos, engine string) string {
	const then = ", then run `runbox setup`."
	switch engine {
	case "Docker Desktop", "OrbStack", "Rancher Desktop":
		return "Start " + engine + then
	case "Colima":
		return "Start Colima: `colima start`" + then
	case "Podman machine":
		return "Start Podman's machine: `podman machine start` (or start it in Podman Desktop)" + then
	case "Podman", "Podman (rootless)":
		return "Start Podman's API service: `systemctl start podman.socket` (rootless: `systemctl --user start podman.socket`)" + then
	case "Docker", "Docker (rootless)":
		if goos == "linux" {
			return "Start the engine: `sudo systemctl start docker` (on Debian, `sudo make setup` installs and starts docker.io)" + then
		}
	}
	switch goos {
	case "darwin":
		return "Install and start Docker Desktop (or Colima: `brew install colima docker && colima start`; OrbStack; or Podman Desktop / `podman machine start`)" + then
	case "windows":
		return "Install and start Docker Desktop with the WSL 2 backend (or Podman Desktop / `podman machine init` and `podman machine start`)" + then
	default:
		return "On Debian or Ubuntu, `sudo make setup` (or scripts/setup.sh) installs and starts docker.io; elsewhere start Docker (`sudo systemctl start docker`), Docker Desktop, or Podman (`systemctl --user start podman.socket`)" + then
	}
}

// syscallNamesCheck says whether a forbidden_syscall can name the call.
// The name comes from the kernel's audit record, which only the engine's
// own kernel writes: runbox reads it from /dev/kmsg when it runs on that
// kernel with the right to read it. Everywhere else (an engine in a VM,
// macOS, Windows, a remote engine) the program is still killed, and the
// result says "forbidden_syscall" (killed by SIGSYS) without the name.
func syscallNamesCheck(d Discovery, engineKernel string) Check {
	if d.GOOS == "" {
		d.GOOS = runtime.GOOS
	}
	own, readable := "", false
	if d.GOOS == "linux" {
		b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
		own = strings.TrimSpace(string(b))
		if f, err := os.Open("/dev/kmsg"); err == nil {
			f.Close()
			readable = true
		}
	}
	return describeSyscallNames(d.GOOS, d.Endpoint.Host, engineKernel, own, readable)
}

const unnamed = "a forbidden system call still kills the program and is reported as forbidden_syscall (killed by SIGSYS), without the call's name"

func describeSyscallNames(goos, host, engineKernel, ownKernel string, kmsgReadable bool) Check {
	c := Check{Name: "syscall names", Status: OK}
	local := host == "" || strings.HasPrefix(host, "unix://")
	switch {
	case goos != "linux":
		c.Detail = fmt.Sprintf("not available on %s: the engine runs in a Linux VM whose kernel log runbox cannot read; %s", osName(goos), unnamed)
	case !local:
		c.Detail = fmt.Sprintf("not available: the engine at %s is on another machine, whose kernel log runbox cannot read; %s", host, unnamed)
	case engineKernel != ownKernel:
		c.Detail = fmt.Sprintf("not available: the engine runs on kernel %s (a VM), this machine on %s, and runbox can read only its own kernel's log; %s", engineKernel, ownKernel, unnamed)
	case !kmsgReadable:
		c.Status = Warn
		c.Detail = "not available: the engine shares this kernel, but /dev/kmsg is not readable by this user; " + unnamed
		c.Fix = "Run runbox as root or give it CAP_SYSLOG to have forbidden calls named (optional)."
	default:
		c.Detail = "available: the engine shares this kernel and its log (/dev/kmsg) is readable, so a forbidden call is named (e.g. ptrace)"
	}
	return c
}

func osName(goos string) string {
	switch goos {
	case "darwin":
		return "macOS"
	case "windows":
		return "Windows"
	}
	return goos
}
