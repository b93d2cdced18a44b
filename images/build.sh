#!/usr/bin/env bash
# Builds the sandbox image runbox/sandbox:bookworm from Debian packages, with no
# registry involved: debootstrap a bookworm rootfs with images/sandbox/
# packages.txt, purge what only cut dependencies pulled in (a compiler, perl),
# slim and harden it, then `docker import` it.
#
# The image carries the label io.runbox.recipe=<hash of images/build.sh and
# images/sandbox/**>; when the engine's image has the current hash, nothing is
# done. The rootfs tarball is kept in .cache/images keyed on the hash, so an
# engine whose data was wiped gets a re-import, not a new debootstrap; the
# downloaded .debs are kept in .cache/images/debs for the next recipe change.
#
# Environment: RUNBOX_IMAGE (default runbox/sandbox:bookworm),
# RUNBOX_DEBIAN_MIRROR (default: the machine's own Debian mirror, else
# debootstrap's default).
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

IMAGE=${RUNBOX_IMAGE:-runbox/sandbox:bookworm}
CACHE=.cache/images
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
  [[ -d $stale ]] && teardown "$PWD/$stale"
done

tarball="$CACHE/sandbox-$recipe_hash.tar"
versions="$CACHE/versions-$recipe_hash.txt"

if [[ ! -s $tarball ]]; then
  [[ $(id -u) == 0 ]] || { log "building the image needs root (debootstrap, chroot)"; exit 1; }
  rootfs=$(mktemp -d "$PWD/$CACHE/rootfs.XXXXXX")
  trap 'teardown "$rootfs"' EXIT
  in_root() { chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

  packages=$(grep -v '^\s*\(#\|$\)' "$RECIPE/packages.txt" | sed 's/\s*#.*//' | paste -sd, -)
  # The mirror the machine's own apt uses (only Debian's mirrors may be
  # reachable); debootstrap's default otherwise.
  mirror=${RUNBOX_DEBIAN_MIRROR:-$(grep -hoE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?( |$)' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -1 || true)}
  log "debootstrap bookworm from ${mirror:-the default mirror of debootstrap} with: $packages (a few minutes)"
  start=$(date +%s)
  debootstrap --variant=minbase --include="$packages" --cache-dir="$PWD/$CACHE/debs" \
    bookworm "$rootfs" ${mirror:+"$mirror"} >"$CACHE/debootstrap.log" 2>&1 || {
    log "debootstrap failed; the end of $CACHE/debootstrap.log:"; tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
  log "debootstrap took $(($(date +%s) - start))s"

  # Keep only the .debs of this build in the download cache.
  in_root dpkg-query -W -f='${Package}_${Version}_${Architecture}.deb\n' | sed 's/:/%3a/' | sort >"$rootfs/tmp/debs"
  find "$CACHE/debs" -maxdepth 1 -name '*.deb' -printf '%f\n' | sort | comm -23 - "$rootfs/tmp/debs" |
    sed "s|^|$CACHE/debs/|" | xargs -r rm -f

  # Purge what only the dependencies in cut.txt pulled in (a C++ compiler,
  # Boost, Python headers, perl), so no compiler is in the box.
  cp "$RECIPE/prune.py" "$RECIPE/packages.txt" "$RECIPE/cut.txt" "$rootfs/tmp/"
  purge=$(in_root python3 /tmp/prune.py /tmp/packages.txt /tmp/cut.txt)
  if [[ -n $purge ]]; then
    log "purging $(wc -w <<<"$purge") packages that nothing in the box needs"
    # shellcheck disable=SC2086  # one package a word
    in_root dpkg --purge --force-depends $purge >"$CACHE/purge.log" 2>&1 || {
      log "dpkg --purge failed; see $CACHE/purge.log"; tail -20 "$CACHE/purge.log" >&2; exit 1; }
  fi

  # matplotlib's font list, built once here; runbox_mplcache (loaded by a .pth
  # file) copies it into the writable cache directory on a program's first
  # `import matplotlib`, which saves ~100 ms a run.
  in_root MPLCONFIGDIR=/usr/share/runbox/matplotlib MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1 \
    python3 -c 'import matplotlib.font_manager'
  rm -f "$rootfs"/usr/share/runbox/matplotlib/.matplotlib-lock
  ls "$rootfs"/usr/share/runbox/matplotlib/fontlist-v*.json >/dev/null
  site="$rootfs/usr/lib/python3/dist-packages"
  install -m 0644 "$RECIPE/python/runbox_mplcache.py" "$RECIPE/python/runbox-mplcache.pth" "$site/"
  in_root python3 -m py_compile /usr/lib/python3/dist-packages/runbox_mplcache.py

  # Slim: no package manager state, docs, man pages, translations, logs or
  # test suites in the box.
  rm -rf "$rootfs"/var/cache/apt/* "$rootfs"/var/lib/apt/lists/* \
         "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
         "$rootfs"/usr/share/lintian "$rootfs"/usr/share/bug \
         "$rootfs"/var/log/* "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  # Packages' own test suites (~145 MB: pandas, sympy, numpy, scipy, ...);
  # they need pytest, which is not in the box, and nothing imports them.
  find "$rootfs/usr/lib/python3/dist-packages" -depth -type d -name tests -exec rm -rf {} +

  # Defence in depth: no setuid or setgid file in the image at all.
  find "$rootfs" -xdev -type f \( -perm -4000 -o -perm -2000 \) -exec chmod ug-s {} +
  # The program's identity, so that tools which look the uid up find it.
  grep -q '^sandbox:' "$rootfs/etc/passwd" || echo 'sandbox:x:1000:1000:runbox sandbox:/tmp:/usr/sbin/nologin' >>"$rootfs/etc/passwd"
  grep -q '^sandbox:' "$rootfs/etc/group" || echo 'sandbox:x:1000:' >>"$rootfs/etc/group"
  install -d -m 0755 "$rootfs/workspace" "$rootfs/.runbox"
  # Nothing of the build machine: debootstrap copies its resolv.conf and
  # hostname (the engine mounts its own over them).
  : >"$rootfs/etc/resolv.conf"
  echo runbox >"$rootfs/etc/hostname"

  # Check what the box promises, before packing it.
  in_root HOME=/tmp MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1 python3 -c '
import numpy, pandas, scipy, scipy.optimize, scipy.stats, scipy.interpolate, scipy.signal, scipy.linalg, sympy
import matplotlib.pyplot as plt
plt.plot([1, 2]); plt.savefig("/tmp/check.png")' || { log "the rootfs fails its own check (python)"; exit 1; }
  in_root node -e 'process.exit(0)' || { log "the rootfs fails its own check (node)"; exit 1; }
  for tool in gcc cc g++ c++ cpp ld as; do
    if in_root sh -c "command -v $tool" >/dev/null; then log "$tool is in the rootfs; cut.txt no longer keeps the compiler out"; exit 1; fi
  done
  if [[ -n $(find "$rootfs" -xdev -type f \( -perm -4000 -o -perm -2000 \) -print -quit) ]]; then
    log "a setuid/setgid file is left"; exit 1
  fi
  # Versions, for people and the manifest.
  in_root python3 -c '
import sys, numpy, pandas, matplotlib, scipy, sympy
print("python", sys.version.split()[0])
for m in (numpy, pandas, matplotlib, scipy, sympy): print(m.__name__, m.__version__)' >"$rootfs/tmp/versions"
  { cat "$rootfs/tmp/versions"
    echo "node $(in_root node --version)"
    echo "bash $(in_root bash -c 'echo $BASH_VERSION')"
  } >"$versions"

  # Empty what the engine provides or the box mounts over.
  find "$rootfs/tmp" "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" "$rootfs/run" -mindepth 1 -xdev -delete 2>/dev/null || true
  tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  teardown "$rootfs"; trap - EXIT
  log "built the rootfs in $(($(date +%s) - start))s"
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
