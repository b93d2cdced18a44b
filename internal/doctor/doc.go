// Package doctor checks a runbox set-up end to end, on the backend the
// manifest names: the manifest; for Docker and Podman the engine, its
// runtimes' versions, the images and each isolation level; for Kubernetes
// the cluster, runbox's permissions in its namespace and the isolation
// level; each level started for real with a hardening self-test. Every
// failing check carries the one command or setting that fixes it.
//
// It reports and never repairs: what it starts it removes, and it changes no
// setting of the engine or the cluster.
package doctor
