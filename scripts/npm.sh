#!/usr/bin/env bash
# npm.sh DIR ci|install: install DIR's pinned node modules, asking the registry again when it fails.
#
# A fresh CI machine once failed `make test` at one `npm install` whose only output was the path
# of npm's debug log, gone with the machine. So a failed attempt prints the log's error lines and
# the free disk space, and the install is tried three times in all (a registry that resets or
# times out once is not a failed build). A lock that does not fit, or a full disk, fails all three
# the same way and still fails the build.
set -euo pipefail

dir=$1 verb=$2
cd "$dir"
logs="$(npm config get cache)/_logs"
for attempt in 1 2 3; do
	if npm "$verb" --no-audit --no-fund --loglevel=error; then
		exit 0
	fi
	echo "npm.sh: npm $verb in $dir failed (attempt $attempt of 3)" >&2
	log=$(ls -t "$logs"/*-debug-0.log 2>/dev/null | head -1 || true)
	if [[ -n $log ]]; then
		grep -E '^[0-9]+ (error|verbose (stack|code|errno|syscall|statusCode)) ' "$log" | grep -Ev ' verbose stack +at ' | tail -20 | sed 's/^/npm.sh:   /' >&2 || true
	fi
	df -h . | sed 's/^/npm.sh:   /' >&2
	if ((attempt < 3)); then
		rm -rf node_modules
		sleep $((attempt * 10))
	fi
done
exit 1
