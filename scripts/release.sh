#!/usr/bin/env bash
# Release tooling for runbox, driven by .goreleaser.yaml.
#
#   bash scripts/release.sh check      validate .goreleaser.yaml
#   bash scripts/release.sh snapshot   build all archives + checksums into dist/ and verify them
#   bash scripts/release.sh verify     verify an existing dist/ (what snapshot runs at its end)
#   bash scripts/release.sh install    only install goreleaser (`make test` starts it early, in the background)
#   bash scripts/release.sh bundles    pack an MCP bundle (.mcpb, Claude Desktop's one-step install) per
#                                      platform from dist/'s archives, validated with @anthropic-ai/mcpb
#
# goreleaser is installed with `go install` (through the Go module proxy only)
# into the machine's cache (scripts/cache.sh: ~/.cache/runbox/bin), and only when it is missing or of another
# version. The snapshot needs no git tag, no GitHub token and no network beyond
# the Go module proxy; it works on a dirty tree (--snapshot skips validation)
# and non-interactively (CI=true). Nothing is published, signed or dockerized.
set -euo pipefail

GORELEASER_VERSION=v2.14.0 # the newest releases need Go 1.27
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

export PATH="/usr/local/go/bin:$PATH"
export CI="${CI:-true}"
command -v go >/dev/null || { echo "release.sh: go not found" >&2; exit 1; }

. "$ROOT/scripts/cache.sh"
GOBIN_DIR="$RUNBOX_CACHE/bin"
GORELEASER="$GOBIN_DIR/goreleaser"
DIST="$ROOT/dist"

# The archives a snapshot must produce (os_arch).
PLATFORMS=(linux_amd64 linux_arm64 darwin_amd64 darwin_arm64 windows_amd64 windows_arm64)

usage() {
	sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

# installed_version prints the module version the cached binary was built from
# (empty when there is none).
installed_version() {
	[[ -x $GORELEASER ]] || return 0
	go version -m "$GORELEASER" 2>/dev/null | awk '$1 == "mod" { print $3; exit }'
}

ensure_goreleaser() {
	local have
	have=$(installed_version)
	if [[ $have == "$GORELEASER_VERSION" ]]; then
		return 0
	fi
	# One install at a time: a second caller waits, then finds it installed.
	mkdir -p "$GOBIN_DIR"
	exec 8>"$GOBIN_DIR/.goreleaser.lock"
	if ! flock -n 8; then
		echo "release.sh: another goreleaser install is running; waiting for it" >&2
		flock 8
	fi
	have=$(installed_version)
	if [[ $have == "$GORELEASER_VERSION" ]]; then
		return 0
	fi
	echo "release.sh: installing goreleaser $GORELEASER_VERSION into $GOBIN_DIR (had: ${have:-none}); this compiles it and takes a few minutes" >&2
	mkdir -p "$GOBIN_DIR"
	# GOFLAGS from the caller (e.g. -mod=vendor) must not leak into this install.
	GOBIN="$GOBIN_DIR" GOFLAGS= go install "github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION"
	have=$(installed_version)
	if [[ $have != "$GORELEASER_VERSION" ]]; then
		echo "release.sh: goreleaser install gave version '${have:-none}', want $GORELEASER_VERSION" >&2
		exit 1
	fi
}

# verify checks dist/: one archive per PLATFORMS entry, the checksums file, and that each archive
# holds runbox, both linux init binaries, the docs and the image recipe.
verify() {
	local fail=0 platforms=("${PLATFORMS[@]}")
	local required=(runbox-init-linux-amd64 runbox-init-linux-arm64 README.md
		docs/design.md images/build.sh images/sandbox/packages.txt scripts/setup.sh)
	local sums
	sums=$(compgen -G "$DIST/runbox_*_checksums.txt" || true)
	if [[ -z $sums || $(wc -l <<<"$sums") -ne 1 ]]; then
		echo "verify: want exactly one dist/runbox_*_checksums.txt, got: ${sums:-none}" >&2
		return 1
	fi
	(cd "$DIST" && sha256sum --quiet -c "$(basename "$sums")") || { echo "verify: checksums do not match" >&2; fail=1; }
	local p archive ext listing bin f n
	for p in "${platforms[@]}"; do
		if [[ $p == windows_* ]]; then ext=zip bin=runbox.exe; else ext=tar.gz bin=runbox; fi
		archive=$(compgen -G "$DIST/runbox_*_${p}.${ext}" || true)
		if [[ -z $archive || $(wc -l <<<"$archive") -ne 1 ]]; then
			echo "verify: want exactly one dist/runbox_*_${p}.${ext}, got: ${archive:-none}" >&2
			fail=1
			continue
		fi
		if [[ $ext == zip ]]; then
			if command -v unzip >/dev/null; then
				listing=$(unzip -Z1 "$archive")
			else
				listing=$(python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$archive")
			fi
		else
			listing=$(tar tzf "$archive")
		fi
		local missing=0
		for f in "$bin" "${required[@]}"; do
			grep -qxF "$f" <<<"$listing" || { echo "verify: $(basename "$archive") lacks $f" >&2; missing=1; }
		done
		grep -qxF "$(basename "$archive")" < <(awk '{print $2}' "$sums") ||
			{ echo "verify: $(basename "$archive") is not in $(basename "$sums")" >&2; missing=1; }
		n=$(wc -l <<<"$listing")
		if [[ $missing -eq 0 ]]; then
			echo "verify: $(basename "$archive"): $n files, ok"
		else
			fail=1
		fi
	done
	# The Homebrew formula names the four macOS and Linux archives with their
	# checksums and installs runbox-init beside runbox; the Scoop manifest names
	# the two Windows archives.
	local formula="$DIST/homebrew/Formula/runbox.rb" manifest="$DIST/scoop/runbox.json" a sum
	if [[ ! -s $formula ]]; then
		echo "verify: no Homebrew formula at dist/homebrew/Formula/runbox.rb" >&2
		fail=1
	else
		for p in darwin_amd64 darwin_arm64 linux_amd64 linux_arm64; do
			a=$(basename "$(compgen -G "$DIST/runbox_*_${p}.tar.gz" | head -1)")
			sum=$(awk -v a="$a" '$2 == a { print $1 }' "$sums")
			grep -qF "/$a\"" "$formula" && grep -qF "$sum" "$formula" ||
				{ echo "verify: the formula lacks $a or its checksum" >&2; fail=1; }
		done
		grep -qF 'libexec.install "runbox", "runbox-init-linux-amd64", "runbox-init-linux-arm64"' "$formula" ||
			{ echo "verify: the formula does not install runbox-init beside runbox" >&2; fail=1; }
		echo "verify: $(basename "$formula"): 4 archives, ok"
	fi
	if [[ ! -s $manifest ]]; then
		echo "verify: no Scoop manifest at dist/scoop/runbox.json" >&2
		fail=1
	else
		for p in windows_amd64 windows_arm64; do
			a=$(basename "$(compgen -G "$DIST/runbox_*_${p}.zip" | head -1)")
			grep -qF "/$a\"" "$manifest" || { echo "verify: the Scoop manifest lacks $a" >&2; fail=1; }
		done
		echo "verify: $(basename "$manifest"): 2 archives, ok"
	fi
	[[ $fail -eq 0 ]] || return 1
	# The archive of this machine's platform runs and reports its stamped version.
	local host
	host="$(go env GOOS)_$(go env GOARCH)"
	archive=$(compgen -G "$DIST/runbox_*_${host}.tar.gz" || true)
	if [[ -n $archive ]]; then
		local tmp out
		tmp=$(mktemp -d)
		tar xzf "$archive" -C "$tmp" runbox
		out=$("$tmp/runbox" version)
		rm -rf "$tmp"
		echo "verify: $(basename "$archive"): $out"
		if grep -qE '^runbox dev |commit none|built unknown' <<<"$out"; then
			echo "verify: version, commit or date was not stamped" >&2
			return 1
		fi
	fi
	echo "verify: dist/ ok (${#platforms[@]} archives + $(basename "$sums"))"
}


# bundles packs dist/runbox_<version>_<os>_<arch>.mcpb from each archive: its runbox and both
# runbox-init binaries, with the manifest.json and icon.png that scripts/mcpb writes; the
# manifest is validated and each bundle read back with @anthropic-ai/mcpb (pinned in
# scripts/mcpb/package.json, installed once into scripts/mcpb/node_modules).
bundles() {
	command -v npm >/dev/null || { echo "bundles: npm not found (Node.js packs the bundles)" >&2; return 1; }
	local tool="$ROOT/scripts/mcpb"
	if [[ ! -x $tool/node_modules/.bin/mcpb || $tool/package-lock.json -nt $tool/node_modules/.bin/mcpb ]]; then
		bash "$ROOT/scripts/npm.sh" "$tool" ci || return 1
		touch "$tool/node_modules/.bin/mcpb"
	fi
	local mcpb="$tool/node_modules/.bin/mcpb" p archive ext stage out version
	for p in "${PLATFORMS[@]}"; do
		if [[ $p == windows_* ]]; then ext=zip; else ext=tar.gz; fi
		archive=$(compgen -G "$DIST/runbox_*_${p}.${ext}" | head -1)
		[[ -n $archive ]] || { echo "bundles: no archive for $p" >&2; return 1; }
		version=$(basename "$archive" ".$ext")
		version=${version#runbox_}
		version=${version%_"$p"}
		stage=$(mktemp -d)
		if [[ $ext == zip ]]; then
			python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in ("runbox.exe", "runbox-init-linux-amd64", "runbox-init-linux-arm64")]' "$archive" "$stage"
		else
			tar xzf "$archive" -C "$stage" runbox runbox-init-linux-amd64 runbox-init-linux-arm64
		fi
		go run ./scripts/mcpb --version "$version" --os "${p%_*}" --out "$stage"
		"$mcpb" validate "$stage/manifest.json" >/dev/null || { echo "bundles: $p: the manifest does not validate" >&2; rm -rf "$stage"; return 1; }
		out="$DIST/runbox_${version}_${p}.mcpb"
		"$mcpb" pack "$stage" "$out" >/dev/null || { rm -rf "$stage"; return 1; }
		rm -rf "$stage"
		"$mcpb" info "$out" | grep -q "runbox" || { echo "bundles: $out does not read back" >&2; return 1; }
		echo "bundles: $(basename "$out"): $(du -h "$out" | cut -f1), ok"
	done
}

cmd=${1:-}
case $cmd in
install)
	ensure_goreleaser
	;;
check)
	ensure_goreleaser
	"$GORELEASER" check
	;;
snapshot)
	ensure_goreleaser
	# goreleaser reads the remote URL (`git ls-remote --get-url`) and, when
	# that fails, throws away the whole git state, stamping commit "none". A
	# clone has an origin; a repo without a remote gets one through git's environment
	# config (no file is changed, nothing is fetched: release is disabled).
	if [[ -z $(git remote) && -z ${GIT_CONFIG_COUNT:-} ]]; then
		export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url
		GIT_CONFIG_VALUE_0="https://$(go list -m).git"
		export GIT_CONFIG_VALUE_0
	fi
	# --snapshot: no tag needed (version from the last tag or v0.0.0), implies
	# --skip=announce,publish,validate (so a dirty tree is fine); release is
	# also disabled in the config, so no token is read.
	"$GORELEASER" release --snapshot --clean --skip=publish
	verify
	bundles
	;;
bundles)
	bundles
	;;
verify)
	verify
	;;
*)
	usage
	;;
esac
