#!/usr/bin/env bash
# scripts/k8s/gvisor.sh — OPTIONAL: a gVisor RuntimeClass ("gvisor", handler
# "runsc") for the test cluster, then one hardened pod run under it.
#
# Debian's runsc (2022) does not work for pods on this host, so runsc and its
# containerd shim are built from gvisor.dev/gvisor on the Go module proxy
# (cached in ~/.cache/runbox/k8s/gvisor-<version>/), with two local patches that only
# this host's containerd 1.6 and limited root need:
#   - the shim sets its OOM score to 0, not -999 (root here lacks
#     CAP_SYS_RESOURCE and cannot lower oom_score_adj);
#   - the shim's `start` prints the plain socket address, as containerd 1.6
#     expects, instead of containerd 2's JSON bootstrap reply.
# A cluster with containerd >= 1.7 and normal root needs neither.
# runsc runs with network=none.
#
#   scripts/k8s/gvisor.sh          build if needed, (re)start our containerd
#                                  with the runtime (via up.sh), create the
#                                  RuntimeClass, run a pod under it
#   scripts/k8s/gvisor.sh build    only build
set -euo pipefail
# shellcheck disable=SC2034 # used by log() in lib.sh
LOG_TAG=k8s-gvisor
# shellcheck source=scripts/k8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
exec </dev/null
T0=$(now)

build() {
  if gvisor_built; then log "cached: $GV_BIN"; return 0; fi
  command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null || die "go not found"
  local work="$K8S_CACHE/gvisor-build" dir out
  mkdir -p "$work/mod"
  exec 8>"$K8S_CACHE/.gvisor-build.lock"
  flock 8
  if gvisor_built; then exec 8>&-; log "cached: $GV_BIN"; return 0; fi
  # a placeholder module: $work sits inside the runbox module
  printf 'module runbox.local/gvisor-fetch\n\ngo 1.24.0\n' >"$work/mod/go.mod"
  dir=$(cd "$work/mod" && go mod download -json "gvisor.dev/gvisor@$GVISOR_VERSION" |
    sed -n 's/^[[:space:]]*"Dir":[[:space:]]*"\(.*\)",\{0,1\}$/\1/p')
  [[ -d $dir ]] || die "cannot download gvisor.dev/gvisor@$GVISOR_VERSION"
  rm -rf "$work/src" "$work/out"
  cp -r "$dir" "$work/src"
  chmod -R u+w "$work/src"
  local mgr="$work/src/pkg/shim/v1/manager.go"
  grep -q 'oomScoreMax = -999' "$mgr" || die "patch 1 does not apply to $mgr"
  perl -0pi -e 's/oomScoreMax = -999/oomScoreMax = 0/' "$mgr"
  # both successful returns of manager.Start: print the address, exit
  n=$(grep -c 'return shim.BootstrapParams{Version: 2, Address: address, Protocol: "ttrpc"}, nil' "$mgr" || true)
  [[ $n -ge 1 ]] || die "patch 2 does not apply to $mgr"
  perl -0pi -e 's/(\t+)return shim\.BootstrapParams\{Version: 2, Address: address, Protocol: "ttrpc"\}, nil/$1\/\/ runbox: containerd 1.6 reads a plain address, not JSON.\n$1fmt.Fprint(os.Stdout, address)\n$1os.Exit(0)\n$1return shim.BootstrapParams{Version: 2, Address: address, Protocol: "ttrpc"}, nil/g' "$mgr"
  log "building runsc and containerd-shim-runsc-v1 ($GVISOR_VERSION; several minutes on 2 cores)"
  out="$work/out"
  mkdir -p "$out"
  (cd "$work/src" && GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=local \
    go build -trimpath -ldflags='-s -w' -o "$out/" ./runsc ./shim)
  mv "$out/shim" "$out/containerd-shim-runsc-v1"
  echo "$GVISOR_VERSION" >"$out/.complete"
  rm -rf "$GV_BIN"
  mv "$out" "$GV_BIN"
  rm -rf "$work/src"
  exec 8>&-
  log "built in $(since "$T0")s: $GV_BIN"
}

build
[[ ${1:-} == build ]] && exit 0

# up.sh registers the runtime in our containerd once the binaries are built
# (restarting only our containerd) and creates the RuntimeClass.
bash "$K8S_ROOT/scripts/k8s/up.sh" >/dev/null
kctl get runtimeclass gvisor >/dev/null || die "RuntimeClass gvisor missing"
log "RuntimeClass gvisor (handler runsc) ready in $(since "$T0")s; running the smoke pods under it"
RUNBOX_K8S_RUNTIME_CLASS=gvisor bash "$K8S_ROOT/scripts/k8s/smoke.sh"
