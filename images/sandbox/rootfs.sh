#!/usr/bin/env bash
# Builds the sandbox's root filesystem in ROOTFS (an empty directory) from
# Debian packages: debootstrap bookworm with packages.txt, purge what only
# cut.txt's edges pulled in (a compiler, perl), slim and harden it, check
# what the box promises, and write the interpreters' versions to VERSIONS.
#
#   rootfs.sh ROOTFS VERSIONS
#
# The one recipe of both build paths: images/build.sh runs it on the host
# (then `docker import`s the tree), and images/sandbox/Dockerfile runs it in
# the engine's build container (then copies the tree into an empty image),
# so both give the same packages at the same versions. Needs root, chroot
# and debootstrap on Debian; nothing of Docker.
#
# Environment: RUNBOX_DEBIAN_MIRROR (default: the machine's own Debian
# mirror, else debootstrap's default); RUNBOX_DEBS (a directory that keeps
# the downloaded .debs, and npm's tarball, between builds; default: none
# kept); RUNBOX_LOGS (where debootstrap.log and purge.log go; default:
# ROOTFS's parent); RUNBOX_NPM_REGISTRY (where npm's tarball, pinned by
# npm.txt, is fetched; default https://registry.npmjs.org).
set -euo pipefail
export LC_ALL=C
[[ $# == 2 ]] || { echo "usage: rootfs.sh ROOTFS VERSIONS" >&2; exit 2; }
RECIPE=$(cd "$(dirname "$0")" && pwd)
rootfs=$(cd "$1" && pwd)
versions=$2
logs=${RUNBOX_LOGS:-$(dirname "$rootfs")}
debs=${RUNBOX_DEBS:-}
log() { echo "images: $*" >&2; }

[[ $(id -u) == 0 ]] || { log "building the image needs root (debootstrap, chroot)"; exit 1; }
in_root() { chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

packages=$(grep -v '^\s*\(#\|$\)' "$RECIPE/packages.txt" | sed 's/\s*#.*//' | paste -sd, -)
# The mirror the machine's own apt uses (only Debian's mirrors may be
# reachable); debootstrap's default otherwise.
mirror=${RUNBOX_DEBIAN_MIRROR:-$(grep -hoE '^(URIs:|deb) +[a-z]+://[^ ]+/debian/?( |$)' \
  /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | awk '{print $2}' | head -1 || true)}
log "debootstrap bookworm from ${mirror:-the default mirror of debootstrap} with: $packages (a few minutes)"
start=$(date +%s)
debootstrap --variant=minbase --include="$packages" ${debs:+--cache-dir="$debs"} \
  bookworm "$rootfs" ${mirror:+"$mirror"} >"$logs/debootstrap.log" 2>&1 || {
  log "debootstrap failed; the end of $logs/debootstrap.log:"; tail -20 "$logs/debootstrap.log" >&2; exit 1; }
log "debootstrap took $(($(date +%s) - start))s"

# Keep only the .debs of this build in the download cache.
if [[ -n $debs ]]; then
  in_root dpkg-query -W -f='${Package}_${Version}_${Architecture}.deb\n' | sed 's/:/%3a/' | sort >"$rootfs/tmp/debs"
  find "$debs" -maxdepth 1 -name '*.deb' -printf '%f\n' | sort | comm -23 - "$rootfs/tmp/debs" |
    sed "s|^|$debs/|" | xargs -r rm -f
fi

# Purge what only the dependencies in cut.txt pulled in (a C++ compiler,
# Boost, Python headers, perl), so no compiler is in the box.
cp "$RECIPE/prune.py" "$RECIPE/packages.txt" "$RECIPE/cut.txt" "$rootfs/tmp/"
purge=$(in_root python3 /tmp/prune.py /tmp/packages.txt /tmp/cut.txt)
if [[ -n $purge ]]; then
  log "purging $(wc -w <<<"$purge") packages that nothing in the box needs"
  # shellcheck disable=SC2086  # one package a word
  in_root dpkg --purge --force-depends $purge >"$logs/purge.log" 2>&1 || {
    log "dpkg --purge failed; see $logs/purge.log"; tail -20 "$logs/purge.log" >&2; exit 1; }
fi

# matplotlib's font list, built once here; runbox_mplcache (loaded by a .pth
# file) copies it into the writable cache directory on a program's first
# `import matplotlib`, which saves ~100 ms a run.
in_root MPLCONFIGDIR=/usr/share/runbox/matplotlib MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1 \
  python3 -c 'import matplotlib.font_manager'
rm -f "$rootfs"/usr/share/runbox/matplotlib/.matplotlib-lock
ls "$rootfs"/usr/share/runbox/matplotlib/fontlist-v*.json >/dev/null
site="$rootfs/usr/lib/python3/dist-packages"
install -m 0644 "$RECIPE/python/runbox_mplcache.py" "$RECIPE/python/runbox-mplcache.pth" \
  "$RECIPE/python/runbox_usersite.py" "$RECIPE/python/runbox-usersite.pth" "$site/"
in_root python3 -m py_compile /usr/lib/python3/dist-packages/runbox_mplcache.py /usr/lib/python3/dist-packages/runbox_usersite.py
# pip installs into the user's site (pip.conf says why).
install -m 0644 "$RECIPE/pip.conf" "$rootfs/etc/pip.conf"
# setuptools (pip's dependency) hooks every interpreter's start-up to shim
# distutils (~0.5 ms a start); `import setuptools` still installs the shim.
rm -f "$site/distutils-precedence.pth"
# matplotlib's namespace hook for mpl_toolkits (a setuptools nspkg .pth)
# imports importlib.util at every interpreter's start-up: ~3.5 ms of a
# 13 ms `python3 -c pass` at --cpus 1. This matplotlib's mpl_toolkits is a
# regular package (it has its __init__.py), so it imports without the hook.
rm -f "$site"/matplotlib-*-nspkg.pth
in_root PYTHONDONTWRITEBYTECODE=1 python3 -c 'import importlib.util as u; assert u.find_spec("mpl_toolkits.mplot3d")'

# Node packages from their registry tarballs, each pinned by integrity hash
# in npm.txt: npm itself, and the TypeScript compiler with Node's type
# declarations (the typescript language; the box has no network at run
# time). Fetched from the npm registry (RUNBOX_NPM_REGISTRY, default
# registry.npmjs.org) with wget (debootstrap depends on it, so it is
# wherever this runs). The hash is what is trusted, as apt trusts
# signatures over plain http, not the connection: the engine-side build's
# container has no CA of the machine's (a TLS-inspecting egress, say), so
# the certificate is not checked, and bytes other than the pinned ones
# stop the build. Each is extracted into /usr/lib/node_modules/<name>
# (@scope/name for scoped packages), where require() finds it by path.
registry=${RUNBOX_NPM_REGISTRY:-https://registry.npmjs.org}
while read -r name version integrity; do
  [[ $name =~ ^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$ && $version =~ ^[0-9A-Za-z.+-]+$ && $integrity == sha512-* ]] || {
    log "npm.txt: bad line: $name $version $integrity"; exit 1; }
  base=${name##*/}
  sha512=$(base64 -d <<<"${integrity#sha512-}" | od -An -v -tx1 | tr -d ' \n')
  [[ ${#sha512} == 128 ]] || { log "npm.txt: $name's integrity is not a sha512"; exit 1; }
  # The cached file's name keeps the scope (@types/node, @other/node).
  tgz=${debs:-$rootfs/tmp}/npm-${name//\//+}-$version.tgz
  if [[ ! -s $tgz ]] || ! sha512sum -c --status <<<"$sha512  $tgz"; then
    log "fetching $name $version from ${registry}"
    wget -q --no-check-certificate -O "$tgz.tmp" "${registry%/}/$name/-/$base-$version.tgz" || {
      log "fetching $name from $registry failed (wget exit $?)"; exit 1; }
    mv "$tgz.tmp" "$tgz"
  fi
  sha512sum -c --status <<<"$sha512  $tgz" || { log "$name-$version.tgz does not have the integrity npm.txt pins"; exit 1; }
  dir="$rootfs/usr/lib/node_modules/$name"
  rm -rf "$dir"
  mkdir -p "$dir"
  # A registry tarball's one top directory is "package" (most) or the
  # package's name (@types/*): stripped either way.
  tar -xzf "$tgz" -C "$dir" --strip-components=1 --no-same-owner --no-same-permissions
  rm -rf "$dir/docs" "$dir/man"
  chmod -R u=rwX,go=rX "$dir"
  # An older pin of this package goes from the cache.
  [[ -z $debs ]] || find "$debs" -maxdepth 1 -name "npm-${name//\//+}-*.tgz" ! -name "${tgz##*/}" -delete
done < <(grep -v '^\s*\(#\|$\)' "$RECIPE/npm.txt")
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/bin/npx"
install -m 0644 "$RECIPE/npmrc" "$rootfs/usr/lib/node_modules/npm/npmrc"
# tsc on PATH too, for an agent's own builds in bash.
ln -sf ../lib/node_modules/typescript/bin/tsc "$rootfs/usr/bin/tsc"
# The compiler reads its lib.*.d.ts at every check; none may be missing.
ls "$rootfs"/usr/lib/node_modules/typescript/lib/lib.es2022.full.d.ts \
   "$rootfs"/usr/lib/node_modules/@types/node/index.d.ts \
   "$rootfs"/usr/lib/node_modules/undici-types/index.d.ts >/dev/null

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
# The network clients, and pip's and npm's configuration as the box sees it
# (HOME=/tmp, not root).
in_root HOME=/tmp PYTHONDONTWRITEBYTECODE=1 python3 -c '
import requests, sys, site, os
assert site.getusersitepackages() in sys.path, "the user site is not on sys.path"' || { log "the rootfs fails its own check (requests, user site)"; exit 1; }
[[ $(in_root HOME=/tmp python3 -m pip config list) == *"break-system-packages='true'"* ]] || { log "the rootfs fails its own check (pip.conf)"; exit 1; }
[[ $(in_root HOME=/tmp npm config get update-notifier) == false ]] || { log "the rootfs fails its own check (npm)"; exit 1; }
in_root curl --version >/dev/null || { log "the rootfs fails its own check (curl)"; exit 1; }
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
  in_root python3 -c 'import requests, pip; print("requests", requests.__version__); print("pip", pip.__version__)'
  echo "node $(in_root node --version)"
  echo "npm $(in_root HOME=/tmp npm --version)"
  echo "bash $(in_root bash -c 'echo $BASH_VERSION')"
  echo "curl $(in_root curl --version | awk 'NR == 1 { print $2 }')"
} >"$versions"

# Empty what the engine provides or the box mounts over, and what the
# checks left in root's home (runbox_usersite made its user site).
rm -rf "$rootfs/root/.local" "$rootfs/root/.npm" "$rootfs/root/.cache"
find "$rootfs/tmp" "$rootfs/dev" "$rootfs/proc" "$rootfs/sys" "$rootfs/run" -mindepth 1 -xdev -delete 2>/dev/null || true
log "built the rootfs in $(($(date +%s) - start))s"
