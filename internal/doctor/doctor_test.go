package doctor

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

func TestRuncCheck(t *testing.T) {
	for _, c := range []struct {
		version string
		status  Status
		says    string
	}{
		{"v1.1.12-0-g51d5e94", OK, "has the fix"},
		{"1.2.5", OK, "has the fix"},
		{"1.1.5+ds1-1+deb12u1", OK, "Debian bookworm"},
		{"1.1.5+ds1-1", Warn, "CVE-2024-21626"},
		{"v1.1.11", Warn, "predates runc 1.1.12"},
		{"1.0.0-rc93", Warn, "predates"},
		{"", Warn, "unknown"},
	} {
		got := runcCheck(c.version)
		if got.Status != c.status || !strings.Contains(got.Detail, c.says) || (got.Status != OK && got.Fix == "") {
			t.Errorf("%q: %+v", c.version, got)
		}
	}
}

func TestParseFacts(t *testing.T) {
	f := parseFacts("uid=1000\nCapEff=0000000000000000\nNoNewPrivs=1\nSeccomp=2\nnet=lo\nroot=readonly\nnoise\n")
	if f["uid"] != "1000" || f["net"] != "lo" || f["root"] != "readonly" || f["Seccomp"] != "2" || len(f) != 6 {
		t.Fatalf("%v", f)
	}
}

func TestReportPrintsFixesAndVerdict(t *testing.T) {
	r := Report{OK: true}
	r.add(Check{Name: "engine", Status: OK, Detail: "Docker 20.10"})
	r.add(Check{Name: "manifest", Status: Fail, Detail: "limits.memory: too small", Fix: "Correct it."})
	if r.OK {
		t.Fatal("a failed check must fail the report")
	}
	var b bytes.Buffer
	r.Print(&b)
	out := b.String()
	if !strings.Contains(out, "fail  manifest") || !strings.Contains(out, "fix: Correct it.") || !strings.Contains(out, "not ready") {
		t.Fatalf("report:\n%s", out)
	}
}

func TestHintOf(t *testing.T) {
	if hintOf(errors.New("x"), "default") != "default" {
		t.Error("a plain error has no hint of its own")
	}
}

// A check's fix is the engine error's hint however the error was wrapped
// (the driver marks a missing image with a type of its own).
func TestHintOfAWrappedEngineError(t *testing.T) {
	wrapped := fmt.Errorf("checking: %w", &sandbox.EngineError{Msg: "the sandbox image x is missing", Hint: "Run `runbox setup`."})
	if got := hintOf(wrapped, "default"); got != "Run `runbox setup`." {
		t.Errorf("hintOf(wrapped) = %q", got)
	}
	if got := hintOf(errors.New("plain"), "default"); got != "default" {
		t.Errorf("hintOf(plain) = %q", got)
	}
}

// Each entry's credential source is reported, present or missing, never
// its value; a missing one fails.
func TestCredentialChecks(t *testing.T) {
	m := manifest.Default()
	m.Network.Allow = []manifest.Endpoint{
		{Host: "api.github.com", Credential: &manifest.Credential{Env: "GH_TOKEN"}},
		{Host: "a.example"},
		{Host: "b.example", Credential: &manifest.Credential{Env: "B_TOKEN", Header: "X-Api-Key"}},
	}
	rep := Report{OK: true}
	credentialChecks(m, func(k string) (string, bool) {
		if k == "GH_TOKEN" {
			return "ghp_doctor_secret_value", true
		}
		return "", false
	}, &rep)
	out := fmt.Sprintf("%+v", rep)
	if rep.OK || len(rep.Checks) != 2 || rep.Checks[0].Status != OK || rep.Checks[1].Status != Fail || strings.Contains(out, "ghp_doctor_secret_value") ||
		!strings.Contains(rep.Checks[0].Detail, "network.allow[0] (api.github.com): Authorization header from environment variable GH_TOKEN: present") ||
		!strings.Contains(rep.Checks[1].Detail, "X-Api-Key header from environment variable B_TOKEN: missing ($B_TOKEN is not set") {
		t.Fatalf("%s", out)
	}
}
