#!/usr/bin/env bash
# scripts/k8s/build.sh — build the test cluster's Kubernetes binaries from the
# Go module proxy (no GitHub, no dl.k8s.io, no container registry) and the tiny
# static pause program plus its image archive.
#
# Output (cached, keyed on the version; a second run only checks and exits):
#   $RUNBOX_CACHE/k8s/bin-v1.34.4/ (scripts/cache.sh: ~/.cache/runbox)
#   {kube-apiserver,kube-controller-manager,
#                           kube-scheduler,kubelet,kubectl,pause,pause-image.tar}
#
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces every k8s.io/X
# with ./staging/...), so a wrapper module requires k8s.io/kubernetes and
# carries the same replace list pointed at the published modules
# (k8s.io/X => k8s.io/X v0.34.4). Pinned to 1.34: 1.35+ refuse cgroup v1.
# A cold build takes ~12 minutes on 2 cores.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
. "$ROOT/scripts/cache.sh"
CACHE="$RUNBOX_CACHE/k8s"
BIN="$CACHE/bin-$K8S_VERSION"
WORK="$CACHE/build-$K8S_VERSION"
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
PAUSE_IMAGE="${PAUSE_IMAGE:-localhost/runbox/pause:3.10}"

log() { printf '[k8s-build] %s\n' "$*" >&2; }

have_all() {
  local f
  for f in "${COMPONENTS[@]}" pause; do [[ -x "$BIN/$f" ]] || return 1; done
  [[ -s "$BIN/pause-image.tar" && -s "$BIN/.complete" ]] || return 1
  [[ "$(cat "$BIN/.complete")" == "$K8S_VERSION $PAUSE_IMAGE" ]]
}

if have_all; then
  log "cached: $BIN"
  exit 0
fi

command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { log "go not found"; exit 1; }
mkdir -p "$CACHE" "$WORK"
# One build at a time (a second caller waits, then finds the cache).
exec 9>"$CACHE/.build.lock"
if ! flock -n 9; then
  log "another build is running; waiting for it"
  flock 9
fi
if have_all; then
  log "cached: $BIN"
  exit 0
fi
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

start=$(date +%s)
OUT="$WORK/out"
rm -rf "$OUT"
mkdir -p "$OUT"

# --- the pause program and its image archive (seconds) -----------------------
log "building pause"
(cd "$ROOT" && GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$OUT/pause" ./scripts/k8s/pause/main.go)

# A `docker save`-format archive built by hand (no docker build, nothing is
# added to the Docker engine): one layer holding /pause.
make_pause_image() {
  local d="$WORK/pause-image" layerdir
  rm -rf "$d"
  mkdir -p "$d/rootfs"
  install -m 0755 "$OUT/pause" "$d/rootfs/pause"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    -C "$d/rootfs" -cf "$d/layer.tar" pause
  local lsha cfg csha
  lsha=$(sha256sum "$d/layer.tar" | cut -d' ' -f1)
  layerdir="$lsha"
  mkdir -p "$d/img/$layerdir"
  mv "$d/layer.tar" "$d/img/$layerdir/layer.tar"
  cfg=$(printf '{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","config":{"User":"65535:65535","Entrypoint":["/pause"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"1970-01-01T00:00:00Z","created_by":"scripts/k8s/build.sh"}]}' "$lsha")
  csha=$(printf '%s' "$cfg" | sha256sum | cut -d' ' -f1)
  printf '%s' "$cfg" >"$d/img/$csha.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' \
    "$csha" "$PAUSE_IMAGE" "$layerdir" >"$d/img/manifest.json"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    -C "$d/img" -cf "$OUT/pause-image.tar" .
  rm -rf "$d"
}
make_pause_image

# --- the Kubernetes binaries (~12 minutes cold) --------------------------------
have_k8s=1
for f in "${COMPONENTS[@]}"; do [[ -x "$BIN/$f" ]] || have_k8s=0; done
if [[ "$have_k8s" == 1 && -s "$BIN/.k8s-complete" && "$(cat "$BIN/.k8s-complete")" == "$K8S_VERSION" ]]; then
  log "kubernetes binaries cached"
  for f in "${COMPONENTS[@]}"; do cp -p "$BIN/$f" "$OUT/$f"; done
else
  MOD="$WORK/mod"
  mkdir -p "$MOD"
  log "fetching k8s.io/kubernetes@$K8S_VERSION go.mod"
  # A placeholder go.mod first: $MOD sits inside the runbox module, whose
  # go.mod/go.sum must never be touched.
  printf 'module runbox.local/k8s-build\n\ngo 1.24.0\n' >"$MOD/go.mod"
  upstream_mod=$(cd "$MOD" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod":[[:space:]]*"\(.*\)",\{0,1\}$/\1/p')
  [[ -s "$upstream_mod" ]] || { log "cannot download k8s.io/kubernetes@$K8S_VERSION"; exit 1; }
  staging="v0.${K8S_VERSION#v1.}"
  go_line=$(grep -m1 '^go ' "$upstream_mod")
  {
    echo "module runbox.local/k8s-build"
    echo
    echo "$go_line"
    grep -m1 '^godebug ' "$upstream_mod" || true
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    # Every staging module upstream both requires and replaces with ./staging,
    # pointed at its published version instead.
    grep -E '^[[:space:]]+k8s\.io/[A-Za-z0-9._-]+ => \./staging/' "$upstream_mod" |
      awk '{print $1}' | while read -r m; do
        if grep -qE "^[[:space:]]+$m v0\.0\.0([[:space:]]|$)" "$upstream_mod"; then
          printf '\t%s => %s %s\n' "$m" "$m" "$staging"
        fi
      done
    echo ")"
  } >"$MOD/go.mod"
  printf 'package main\n\nfunc main() {}\n' >"$MOD/main.go"
  rm -f "$MOD/go.sum"

  pkgs=()
  for c in "${COMPONENTS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  log "resolving modules"
  (cd "$MOD" && go get "${pkgs[@]/%/@$K8S_VERSION}")

  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  bdate=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=$bdate"
  done
  log "building ${COMPONENTS[*]} (~12 min on 2 cores)"
  (cd "$MOD" && go build -trimpath -ldflags="$ld" -o "$OUT/" "${pkgs[@]}")
  for f in "${COMPONENTS[@]}"; do [[ -x "$OUT/$f" ]] || { log "missing $f"; exit 1; }; done
  echo "$K8S_VERSION" >"$OUT/.k8s-complete"
fi

# --- publish atomically --------------------------------------------------------
echo "$K8S_VERSION $PAUSE_IMAGE" >"$OUT/.complete"
[[ -f "$OUT/.k8s-complete" ]] || echo "$K8S_VERSION" >"$OUT/.k8s-complete"
rm -rf "$BIN.old"
[[ -d "$BIN" ]] && mv "$BIN" "$BIN.old"
mv "$OUT" "$BIN"
rm -rf "$BIN.old"
"$BIN/kubectl" version --client 2>/dev/null | head -1 >&2 || true
log "done in $(( $(date +%s) - start ))s: $BIN"
