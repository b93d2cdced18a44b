// Package oci is the sandbox.Driver of the oci backend: the server runs
// each box with runc itself, from a bundle it writes, with no engine
// between (no dockerd, containerd or shim per box). The box's profile is
// the one sandbox/linuxbox holds, as the Docker driver gives it, item for
// item (the same seccomp profile, masked and read-only paths, tmpfs,
// limits, no capabilities, no network interface); its root file system
// is the engine's sandbox image, unpacked once per image ID and mounted
// read-only; its channel is runbox-init's stdin and stdout, which runc
// hands the box as they are (pipes the server holds).
//
// Every box listens on runbox-init's relay, so a session's channel after
// one broke, and a restarted server adopting a run or a session, reach it
// again with runc exec (as on Podman); a box whose run a store keeps is
// marked in its bundle for the reapers of other state directories.
//
// It needs Linux, root and runc; the image comes from the local Docker
// engine. gVisor stays on the Docker backend. It must not import another
// driver: what it shares with sandbox/docker is sandbox/linuxbox's.
package oci
