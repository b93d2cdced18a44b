#!/usr/bin/env bash
# scripts/k8s/server-image.sh [TAG] — build the runbox server image
# (deploy/kubernetes/Dockerfile: runbox + runbox-init on scratch) with no
# registry, and, as root with the test cluster up, import it and the init
# image into the cluster's containerd. Prints the image reference.
set -euo pipefail
LOG_TAG=k8s-server
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tag=${1:-runbox/server:dev}
arch=$(go env GOARCH)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$K8S_ROOT" &&
  CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags '-s -w' -o "$ctx/runbox" ./cmd/runbox &&
  CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags '-s -w' -o "$ctx/runbox-init-linux-$arch" ./cmd/runbox-init)
cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
sed "s/amd64/$arch/g" "$K8S_ROOT/deploy/kubernetes/Dockerfile" >"$ctx/Dockerfile"
docker build -q -t "$tag" "$ctx" >/dev/null
log "built $tag"
init_ref=$("$K8S_ROOT/scripts/k8s/import-init.sh" --docker-only "$ctx/runbox-init-linux-$arch")
if [[ $(id -u) == 0 && -S $CTR_SOCK ]]; then
  docker save "$tag" | ctrk images import - >/dev/null
  "$K8S_ROOT/scripts/k8s/import-init.sh" "$ctx/runbox-init-linux-$arch" >/dev/null
  log "imported $tag and $init_ref into the test cluster"
fi
echo "$tag"
