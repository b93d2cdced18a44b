// Package enginehost finds the container engine runbox talks to when
// nobody said which: DOCKER_HOST, else the current Docker context, else the
// first socket or named pipe of this platform's well-known engines (Docker
// Desktop, OrbStack, Colima, Rancher Desktop, Podman's machine and service,
// Debian's docker.io).
//
// It is pure: the OS, the home directory, the environment and the file
// system come in as a Host, so each platform's paths are tested on any
// machine. It knows nothing of the Engine API (whether an engine answers is
// the caller's question) and nothing of runbox's boxes.
package enginehost
