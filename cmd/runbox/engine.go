package main

import (
	"errors"
	"log/slog"
	"os"

	"github.com/runbox-mcp/runbox/internal/doctor"
	"github.com/runbox-mcp/runbox/internal/enginehost"
)

// useDiscoveredEngine points the Engine API client, which reads DOCKER_HOST
// (and DOCKER_CERT_PATH, DOCKER_TLS_VERIFY), at the engine enginehost
// finds when the user named none: Docker Desktop's, Colima's or Podman's
// socket, or the current Docker context. MCP clients such as Claude
// Desktop start the server without the user's shell environment, so the
// server must find the engine by itself.
func useDiscoveredEngine(logger *slog.Logger) doctor.Discovery {
	d := doctor.Discover()
	switch {
	case errors.Is(d.Err, enginehost.ErrNotFound):
		logger.Debug("no engine found; using the client's default address")
	case d.Err != nil:
		logger.Warn("cannot use the current Docker context; using the client's default address", "err", d.Err)
	case d.Endpoint.Source != enginehost.SourceEnv:
		os.Setenv("DOCKER_HOST", d.Endpoint.Host)
		if d.Endpoint.CertPath != "" && os.Getenv("DOCKER_CERT_PATH") == "" {
			os.Setenv("DOCKER_CERT_PATH", d.Endpoint.CertPath)
			if d.Endpoint.TLSVerify {
				os.Setenv("DOCKER_TLS_VERIFY", "1")
			}
		}
		logger.Debug("engine", "host", d.Endpoint.Host, "engine", d.Endpoint.Engine, "found", d.Endpoint.Source)
	}
	return d
}
