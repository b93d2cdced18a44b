#!/usr/bin/env bash
# Installs Debian's chromium, the browser the view's end-to-end test drives
# headless (e2e/view), where it is missing; prints its path. Idempotent: a
# machine that has it is not touched. Non-interactive (CI has no stdin).
set -euo pipefail
log() { echo "chromium: $*" >&2; }

if [[ $(dpkg-query -W -f='${Status}' chromium 2>/dev/null || true) != "install ok installed" ]]; then
  [[ $(id -u) == 0 ]] || { log "run as root: it installs chromium"; exit 1; }
  log "installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium </dev/null >/dev/null
fi
command -v chromium
