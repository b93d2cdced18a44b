//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

type doctorReport struct {
	OK     bool `json:"ok"`
	Checks []struct {
		Name, Status, Detail, Fix string
	} `json:"checks"`
}

func doctor(t *testing.T, env []string, args ...string) (doctorReport, int, string) {
	t.Helper()
	cmd := exec.Command(runboxBin, append([]string{"doctor", "--json"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep doctorReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	return rep, code, string(out)
}

func (r doctorReport) check(name string) (status, detail, fix string) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Status, c.Detail, c.Fix
		}
	}
	return "", "", ""
}

// TestDoctor: on this machine every check passes, with both levels started
// for real; a broken manifest, a missing image and an unreachable engine
// each fail with their fix and a non-zero exit.
func TestDoctor(t *testing.T) {
	rep, code, out := doctor(t, nil)
	if code != 0 || !rep.OK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, name := range []string{"manifest", "engine", "cgroup", "runc", "image python", "level runc", "level gvisor"} {
		if st, detail, _ := rep.check(name); st != "ok" {
			t.Errorf("%s: %s %s", name, st, detail)
		}
	}
	if _, detail, _ := rep.check("level runc"); !strings.Contains(detail, "ptrace killed") || !strings.Contains(detail, "uid 1000") {
		t.Errorf("the self-test says too little: %s", detail)
	}

	rep, code, out = doctor(t, nil, "--manifest", writeManifest(t, "limits:\n  memory: 1KiB\n"))
	if st, _, fix := rep.check("manifest"); code != 1 || rep.OK || st != "fail" || fix == "" {
		t.Errorf("bad manifest: exit %d\n%s", code, out)
	}

	rep, code, out = doctor(t, nil, "--manifest", writeManifest(t, "languages:\n  - name: python\n    image: runbox/no-such-image:1\n    file: main.py\n    command: [python3, \"{file}\"]\n    error_format: python\n"))
	if st, _, fix := rep.check("image python"); code != 1 || st != "fail" || !strings.Contains(fix, "runbox setup") {
		t.Errorf("missing image: exit %d\n%s", code, out)
	}

	rep, code, out = doctor(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"})
	if st, _, fix := rep.check("engine"); code != 1 || st != "fail" || !strings.Contains(fix, "make setup") {
		t.Errorf("no engine: exit %d\n%s", code, out)
	}
}
