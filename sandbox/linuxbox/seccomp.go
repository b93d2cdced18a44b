package linuxbox

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/runbox-mcp/runbox/manifest"
)

// The seccomp profiles are rendered by internal/seccompgen from moby's
// current default (see there for what differs) and committed here; every
// runtime receives them whole, so an engine's own default never applies.
//
//go:embed seccomp/*.json
var seccompFiles embed.FS

// seccompProfiles are the profiles for the server's architecture (the
// engine's, for a local engine) at each isolation level.
var seccompProfiles = map[string]string{
	// Names as internal/seccompgen.FileName writes them (that package
	// pulls moby's generator in, which the server does not need).
	manifest.IsolationRunc:   mustSeccomp(runtime.GOARCH + ".json"),
	manifest.IsolationGVisor: mustSeccomp(runtime.GOARCH + "-gvisor.json"),
}

func mustSeccomp(name string) string {
	b, err := seccompFiles.ReadFile("seccomp/" + name)
	if err != nil {
		// Built for an architecture without a profile: fail at start,
		// never run a box without one.
		panic(fmt.Sprintf("runbox has no seccomp profile %s", name))
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		panic(fmt.Sprintf("seccomp/%s: %v", name, err))
	}
	return compact.String()
}

// Seccomp is the seccomp profile of an isolation level, as compact JSON in
// the engine's format: what Docker takes inline (seccomp=), Podman from a
// file, and the oci driver turns into its spec's form; "" for a level
// without one.
func Seccomp(isolation string) string { return seccompProfiles[isolation] }
