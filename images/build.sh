#!/usr/bin/env bash
# Builds the sandbox image runbox/sandbox:bookworm from Debian packages on
# this machine, with no registry involved: images/sandbox/rootfs.sh
# debootstraps a bookworm rootfs with images/sandbox/packages.txt, purges what
# only cut dependencies pulled in (a compiler, perl), slims, hardens and
# checks it; then it is `docker import`ed. `runbox setup --method host` runs
# this; `runbox setup` without a registry builds the same rootfs inside the
# engine instead (images/sandbox/Dockerfile), which needs no root or Linux.
#
# The image carries the label io.runbox.recipe=<hash of images/build.sh and
# images/sandbox/**>; when the engine's image has the current hash, nothing is
# done. The rootfs tarball is kept in the machine's cache (~/.cache/runbox/images) keyed on the hash, so an
# engine whose data was wiped gets a re-import, not a new debootstrap; the
# downloaded .debs are kept there too (debs/) for the next recipe change.
#
# Environment: RUNBOX_IMAGE (default runbox/sandbox:bookworm),
# RUNBOX_DEBIAN_MIRROR (default: the machine's own Debian mirror, else
# debootstrap's default).
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

IMAGE=${RUNBOX_IMAGE:-runbox/sandbox:bookworm}
# The machine's cache, as scripts/cache.sh names it (this script is also run
# from a copy of the recipe outside any checkout, by `runbox setup`).
CACHE=${RUNBOX_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/runbox}/images
RECIPE=images/sandbox
log() { echo "images: $*" >&2; }

recipe_hash=$(
  { sha256sum images/build.sh
    find "$RECIPE" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16)

image_current() {
  [[ $(docker image inspect -f '{{ index .Config.Labels "io.runbox.recipe" }}' "$IMAGE" 2>/dev/null) == "$recipe_hash" ]]
}

if image_current; then
  log "$IMAGE is up to date (recipe $recipe_hash)"
  exit 0
fi

mkdir -p "$CACHE/debs"
exec 9>"$CACHE/.lock"
if ! flock -n 9; then
  log "waiting for another build (lock $CACHE/.lock)"
  flock 9
fi
if image_current; then
  log "$IMAGE was built meanwhile (recipe $recipe_hash)"
  exit 0
fi

# Removes a rootfs, first unmounting what debootstrap or a chroot step may
# have left mounted inside it (proc, sys): rm must never walk into those.
teardown() {
  local dir=$1 m
  [[ -d $dir ]] || return 0
  awk -v d="$dir/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf --one-file-system "$dir"
}
for stale in "$CACHE"/rootfs.*; do
  [[ -d $stale ]] && teardown "$stale"
done

tarball="$CACHE/sandbox-$recipe_hash.tar"
versions="$CACHE/versions-$recipe_hash.txt"

if [[ ! -s $tarball ]]; then
  [[ $(id -u) == 0 ]] || { log "building the image needs root (debootstrap, chroot)"; exit 1; }
  rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  trap 'teardown "$rootfs"' EXIT
  RUNBOX_DEBS="$CACHE/debs" RUNBOX_LOGS="$CACHE" bash "$RECIPE/rootfs.sh" "$rootfs" "$versions"
  tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  teardown "$rootfs"; trap - EXIT
fi
find "$CACHE" -maxdepth 1 \( -name 'sandbox-*.tar' ! -name "sandbox-$recipe_hash.tar" \
  -o -name 'versions-*.txt' ! -name "versions-$recipe_hash.txt" -o -name 'sandbox-*.tar.tmp' \) -delete

log "importing $IMAGE ($(du -h "$tarball" | cut -f1))"
previous=$(docker image inspect -f '{{.Id}}' "$IMAGE" 2>/dev/null || true)
docker import \
  --change "LABEL io.runbox.recipe=$recipe_hash" \
  --change "LABEL io.runbox.image=sandbox" \
  --change "WORKDIR /workspace" \
  "$tarball" "$IMAGE" >/dev/null
# The image this one replaces, now untagged: removed unless a container
# still uses it (then the engine refuses, which is fine).
if [[ -n $previous && $previous != "$(docker image inspect -f '{{.Id}}' "$IMAGE")" ]]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
[[ -s $versions ]] && log "versions: $(paste -sd, "$versions" | sed 's/,/, /g')"
log "$IMAGE built (recipe $recipe_hash)"
