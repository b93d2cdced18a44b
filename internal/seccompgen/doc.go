// Package seccompgen renders runbox's seccomp profiles from moby's current
// default (github.com/moby/profiles/seccomp): the allow-list as the Docker
// engine would expand it for a box with no capabilities on one native
// architecture, minus what an interpreter never needs, with the dangerous
// system calls killing the process instead of returning EPERM.
//
// The rendered profiles are committed in sandbox/linuxbox/seccomp/, which
// every driver's box profile embeds; `UPDATE_SECCOMP=true go test
// ./internal/seccompgen` writes them and the same test fails when they
// drift from this code.
//
// It must not know an engine's client: the drivers pass what it renders.
package seccompgen
