#!/usr/bin/env bash
# Sets up a machine for runbox, from nothing, idempotently:
#  - Debian's docker.io, runsc (gVisor) and debootstrap, where missing;
#  - runsc registered in /etc/docker/daemon.json, other keys untouched;
#  - dockerd started when it is not answering;
#  - the sandbox image built from Debian packages (images/build.sh).
# Non-interactive (CI has no stdin); fast when everything is done.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "setup: $*" >&2; }

need_root() { [[ $(id -u) == 0 ]] || { log "run as root (it installs packages and starts dockerd)"; exit 1; }; }

missing=()
for pkg in docker.io runsc debootstrap jq; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if ((${#missing[@]})); then
  need_root
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Register runsc without clobbering what an operator put in daemon.json.
daemon_json=/etc/docker/daemon.json
runsc_path=$(command -v runsc)
mkdir -p /etc/docker
[[ -s $daemon_json ]] || echo '{}' >"$daemon_json"
wanted=$(jq --arg p "$runsc_path" '.runtimes.runsc = {"path": $p, "runtimeArgs": ["--network=none"]}' "$daemon_json")
changed=false
if [[ "$wanted" != "$(jq . "$daemon_json")" ]]; then
  need_root
  printf '%s\n' "$wanted" >"$daemon_json.tmp" && mv "$daemon_json.tmp" "$daemon_json"
  changed=true
  log "registered runsc in $daemon_json"
fi

# Debian's docker.io CLI is /usr/bin/docker; any docker CLI will do.
if docker info >/dev/null 2>&1; then
  if $changed; then
    log "reloading dockerd for the new runtime"
    pkill -HUP -x dockerd || true
    sleep 1
  fi
else
  need_root
  log "starting dockerd (log: /var/log/runbox-dockerd.log)"
  setsid nohup dockerd >/var/log/runbox-dockerd.log 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { log "dockerd did not answer in 60 s; the end of its log:"; tail -20 /var/log/runbox-dockerd.log >&2; exit 1; }
fi
docker info --format '{{json .Runtimes}}' | grep -q runsc || log "warning: the engine does not list runsc; the gvisor isolation level will not work"

bash images/build.sh
log "ready: $(docker version --format 'engine {{.Server.Version}}, API {{.Server.APIVersion}}')"
