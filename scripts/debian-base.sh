#!/usr/bin/env bash
# Makes a local stand-in for the registry's Debian bookworm image, for
# machines with no registry (ours): a debootstrap --variant=minbase bookworm
# tree, imported as IMAGE (default runbox-test/debian:bookworm). The e2e test
# of the engine-side build (`runbox setup --method engine --base IMAGE`)
# starts from it. The tarball is cached in the machine's cache (scripts/cache.sh);
# idempotent: an IMAGE already present is left as it is. Needs root and
# debootstrap (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C
IMAGE=${1:-runbox-test/debian:bookworm}
. scripts/cache.sh
CACHE=$RUNBOX_CACHE/images/debian-base
log() { echo "debian-base: $*" >&2; }

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE is present"
  exit 0
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
tarball="$CACHE/bookworm-minbase.tar"
if [[ ! -s $tarball ]]; then
  [[ $(id -u) == 0 ]] || { log "needs root (debootstrap)"; exit 1; }
  mirror=${RUNBOX_DEBIAN_MIRROR:-$(grep -hoE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?( |$)' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -1 || true)}
  rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'rm -rf --one-file-system "$rootfs"' EXIT
  log "debootstrap --variant=minbase bookworm from ${mirror:-the default mirror}"
  start=$(date +%s)
  debootstrap --variant=minbase bookworm "$rootfs" ${mirror:+"$mirror"} >"$CACHE/debootstrap.log" 2>&1 || {
    log "debootstrap failed; the end of $CACHE/debootstrap.log:"; tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  : >"$rootfs/etc/resolv.conf"
  find "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" "$rootfs/run" "$rootfs/tmp" -mindepth 1 -xdev -delete 2>/dev/null || true
  tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  log "built in $(($(date +%s) - start))s"
fi
docker import --change 'CMD ["bash"]' "$tarball" "$IMAGE" >/dev/null
log "$IMAGE imported"
