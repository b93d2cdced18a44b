#!/usr/bin/env bash
# scripts/k8s/import-image.sh [--remove] IMAGE — copy an image of the local
# Docker engine into the test cluster's containerd (there is no registry),
# or remove it from there: e.g. the derived image of a manifest's packages
# (`runbox images build` makes runbox/sandbox-packages:<hash>), which the
# sandbox pods then run. Idempotent (a copy of the same Docker image ID is
# kept). Prints the reference the cluster knows. Run as root. In a real
# cluster the operator pushes the image to the cluster's registry instead.
set -euo pipefail
LOG_TAG=k8s-image
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

remove=false
if [[ ${1:-} == --remove ]]; then remove=true; shift; fi
img=${1:?usage: import-image.sh [--remove] IMAGE}
need_root "imports into the cluster's containerd"
r=$img
[[ $r == */* ]] || r="library/$r"
first=${r%%/*}
[[ $first == *.* || $first == *:* || $first == localhost ]] || r="docker.io/$r"
[[ ${r##*/} == *:* || $r == *@* ]] || r="$r:latest"

if $remove; then
  ctrk images rm "$r" >/dev/null 2>&1 || true
  echo "$r"
  exit 0
fi
id=$(docker image inspect -f '{{.Id}}' "$img") || die "image $img is not in the local Docker engine"
have=$(ctrk images ls "name==$r" 2>/dev/null | awk -v k="$IMAGE_LABEL=" 'NR > 1 {
  n = split($NF, a, ","); for (i = 1; i <= n; i++) if (index(a[i], k) == 1) print substr(a[i], length(k) + 1) }')
if [[ $have != "$id" ]]; then
  log "importing $img ($id) into the cluster's containerd"
  docker save "$img" | ctrk images import - >/dev/null
  ctrk images ls -q "name==$r" | grep -qxF "$r" || die "import of $img did not create $r"
  ctrk images label "$r" "$IMAGE_LABEL=$id" >/dev/null
fi
echo "$r"
