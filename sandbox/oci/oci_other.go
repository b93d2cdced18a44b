//go:build !linux

package oci

import (
	"errors"
	"log/slog"

	"github.com/runbox-mcp/runbox/manifest"
	"github.com/runbox-mcp/runbox/sandbox"
)

// Options configure the oci driver.
type Options struct {
	Manifest *manifest.Manifest
	InitDir  string
	Dir      string
	Images   string
	Logger   *slog.Logger
}

// New refuses: the oci backend runs runc, which is Linux's.
func New(Options, sandbox.Owner) (sandbox.Driver, error) {
	return nil, errors.New("the oci backend runs on Linux only (it runs runc itself); use backend: docker")
}
