#!/usr/bin/env bash
# Builds the sandbox image runbox/sandbox:bookworm from Debian packages:
# debootstrap a bookworm rootfs with images/sandbox/packages.txt, slim and
# harden it, then `docker import` it. No registry is involved.
#
# The image carries a label with the hash of this recipe; when the image on
# the engine has the current hash, nothing is done. The rootfs tarball is
# kept in .cache/ keyed on the hash, so a wiped engine re-imports it without
# running debootstrap again.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${RUNBOX_IMAGE:-runbox/sandbox:bookworm}
CACHE=.cache/images
recipe_hash=$(cat images/build.sh images/sandbox/* | sha256sum | cut -c1-16)
log() { echo "images: $*" >&2; }

current=$(docker image inspect -f '{{ index .Config.Labels "io.runbox.recipe" }}' "$IMAGE" 2>/dev/null || true)
if [[ "$current" == "$recipe_hash" ]]; then
  log "$IMAGE is up to date (recipe $recipe_hash)"
  exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
tarball="$CACHE/sandbox-$recipe_hash.tar"

if [[ ! -s "$tarball" ]]; then
  rootfs=$(mktemp -d "$PWD/$CACHE/rootfs.XXXXXX")
  trap 'rm -rf "$rootfs"' EXIT
  packages=$(grep -v '^\s*\(#\|$\)' images/sandbox/packages.txt | paste -sd, -)
  # The mirror the machine's own apt uses; debootstrap's default otherwise.
  mirror=${RUNBOX_DEBIAN_MIRROR:-$(grep -hoE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | grep -v security | head -1 | awk '{print $2}' || true)}
  log "debootstrap bookworm with: $packages (several minutes)"
  start=$(date +%s)
  debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" ${mirror:+"$mirror"} >"$CACHE/debootstrap.log" 2>&1 || {
    log "debootstrap failed; the end of $CACHE/debootstrap.log:"; tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  log "debootstrap took $(( $(date +%s) - start ))s"

  # Slim: no package manager state, docs, man pages or logs in the box.
  rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
         "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/* \
         "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
  # Defence in depth: no setuid or setgid file in the image at all.
  find "$rootfs" -xdev -type f \( -perm -4000 -o -perm -2000 \) -exec chmod ug-s {} +
  # The program's identity, so that tools which look the uid up find it.
  grep -q '^sandbox:' "$rootfs/etc/passwd" || echo 'sandbox:x:1000:1000:runbox sandbox:/tmp:/usr/sbin/nologin' >>"$rootfs/etc/passwd"
  grep -q '^sandbox:' "$rootfs/etc/group" || echo 'sandbox:x:1000:' >>"$rootfs/etc/group"
  install -d -m 0755 "$rootfs/workspace" "$rootfs/.runbox"
  # Versions, for the manifest and for people.
  chroot "$rootfs" /bin/sh -c 'python3 --version; echo "node $(node --version)"; bash --version | head -1' >"$CACHE/versions-$recipe_hash.txt" 2>&1 || true

  tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$rootfs"; trap - EXIT
fi
find "$CACHE" -maxdepth 1 -name 'sandbox-*.tar' ! -name "sandbox-$recipe_hash.tar" -delete

log "importing $IMAGE ($(du -h "$tarball" | cut -f1))"
docker import \
  --change "LABEL io.runbox.recipe=$recipe_hash" \
  --change "LABEL io.runbox.image=sandbox" \
  --change "WORKDIR /workspace" \
  "$tarball" "$IMAGE" >/dev/null
log "$IMAGE built (recipe $recipe_hash)"
