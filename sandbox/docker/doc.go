// Package docker is the sandbox.Driver for Docker-API engines: Docker, and
// Podman through its compatible API. It owns the engine's client (moby,
// with API version negotiation), the box's hardening profile in the form
// each engine reads (sandbox/linuxbox's seccomp profile inline or by path,
// masked paths and tmpfs; ulimits, the runsc runtime for gVisor), the
// runbox-init volume, the attach stream that carries a box's channel, the
// engine's verdict on a box's end (OOM, and the system call named by
// linuxbox's kernel log), and the reaper of boxes whose server is gone.
//
// It must not know the run algorithm (pool, deadlines, classification: that
// is package sandbox) nor MCP, nor another driver.
package docker
