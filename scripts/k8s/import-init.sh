#!/usr/bin/env bash
# scripts/k8s/import-init.sh BINARY — make the runbox-init image the
# Kubernetes backend's init container uses, runbox/init:<first 16 hex of the
# binary's sha256>, and import it into the test cluster's containerd (there
# is no registry). Prints the image reference. Idempotent. Run as root.
#
# The image holds nothing but /runbox-init; its init container runs
# `/runbox-init __install /.runbox/runbox-init`. In a real cluster the
# operator builds the same image (scripts/k8s/import-init.sh --docker-only)
# and pushes it to the cluster's registry.
set -euo pipefail
LOG_TAG=k8s-init
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

docker_only=false
if [[ ${1:-} == --docker-only ]]; then docker_only=true; shift; fi
bin=${1:?usage: import-init.sh [--docker-only] path/to/runbox-init-linux-ARCH}
[[ -f $bin ]] || die "no such file: $bin"
sha=$(sha256sum "$bin" | cut -c1-16)
ref="runbox/init:$sha"

if ! docker image inspect "$ref" >/dev/null 2>&1; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  install -m 0555 "$bin" "$tmp/runbox-init"
  tar -C "$tmp" --owner=0 --group=0 --numeric-owner -cf "$tmp/rootfs.tar" runbox-init
  docker import --change 'ENTRYPOINT ["/runbox-init"]' "$tmp/rootfs.tar" "$ref" >/dev/null
  log "built $ref"
fi
if ! $docker_only; then
  need_root "imports into the cluster's containerd"
  full="docker.io/$ref"
  if ! ctrk images ls -q "name==$full" | grep -qxF "$full"; then
    docker save "$ref" | ctrk images import - >/dev/null
    ctrk images ls -q "name==$full" | grep -qxF "$full" || die "import of $ref did not create $full"
    log "imported $ref into the cluster"
  fi
fi
echo "$ref"
