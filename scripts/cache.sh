# scripts/cache.sh — where the slow builds that only depend on a version are
# kept (sourced, not run): per machine, outside any clone, as Go keeps its
# module and build caches, so a fresh clone finds the test cluster's
# Kubernetes, gVisor's shim, goreleaser and the image's rootfs already built.
# Each entry is keyed on its version or recipe hash inside.
# shellcheck shell=bash
RUNBOX_CACHE="${RUNBOX_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/runbox}"
