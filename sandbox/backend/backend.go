// Package backend connects to the platform a manifest's backend names:
// the one place that maps a backend to its sandbox.Driver.
package backend

import (
	"log/slog"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
	"github.com/runbox-mcp/runbox/sandbox/docker"
	"github.com/runbox-mcp/runbox/sandbox/kube"
	"github.com/runbox-mcp/runbox/sandbox/oci"
)

// New returns the driver of m's backend, for boxes owned by owner.
func New(m *manifest.Manifest, owner sandbox.Owner, logger *slog.Logger) (sandbox.Driver, error) {
	switch m.Backend {
	case manifest.BackendKubernetes:
		return kube.New(kube.Options{Manifest: m, Logger: logger}, owner)
	case manifest.BackendOCI:
		return oci.New(oci.Options{Manifest: m, Logger: logger}, owner)
	}
	return docker.New(docker.Options{Manifest: m, Logger: logger}, owner)
}
