// Package linuxbox is the one Linux profile of a box that every runtime
// builds on, in neutral form: the seccomp profile of each isolation level
// (rendered by internal/seccompgen and embedded here), the kernel
// interfaces masked and made read-only, and the options of the writable
// tmpfs mounts. Each driver says it in its platform's terms: sandbox/docker
// as an engine's container config, sandbox/oci as runc's spec.
//
// It also reads the kernel's own word on what the profile killed
// ([KernelLog]: seccomp kills, with the call's name, and OOM kills), on a
// Linux host that lets the server read /dev/kmsg.
//
// It must not know a driver, an engine's client or the run algorithm:
// drivers import it, never one another.
package linuxbox
