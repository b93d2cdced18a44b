#!/usr/bin/env bash
# Sets up a machine for runbox, from nothing, idempotently:
#  - Debian's docker.io, runsc (gVisor), debootstrap and jq, where missing;
#  - runsc registered in /etc/docker/daemon.json, other keys untouched;
#  - dockerd started when it is not answering (reloaded when runsc is new);
#  - the sandbox image built from Debian packages (images/build.sh);
#  - the derived image of the manifest's packages (runbox images build), when
#    $RUNBOX_MANIFEST (else ./runbox.yaml) declares any.
# Non-interactive (CI has no stdin); a few seconds when everything is done.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "setup: $*" >&2; }
die() { log "$*"; exit 1; }
need_root() { [[ $(id -u) == 0 ]] || die "run as root: it $1"; }

DAEMON_JSON=/etc/docker/daemon.json
DOCKERD_LOG=/var/log/runbox-dockerd.log

# 1. Packages.
missing=()
for pkg in docker.io runsc debootstrap jq; do
  [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true) == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  need_root "installs ${missing[*]}"
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
fi

# 2. runsc in daemon.json, merged so that an operator's other keys stay.
runsc_path=$(command -v runsc) || die "runsc is installed but not on PATH"
current='{}'
if [[ -s $DAEMON_JSON ]]; then
  current=$(jq . "$DAEMON_JSON") || die "$DAEMON_JSON is not valid JSON; fix it and run again"
fi
wanted=$(jq --arg p "$runsc_path" '.runtimes.runsc = {"path": $p, "runtimeArgs": ["--network=none", "--oci-seccomp"]}' <<<"$current")
changed=false
if [[ ! -s $DAEMON_JSON || "$(jq -S . <<<"$wanted")" != "$(jq -S . <<<"$current")" ]]; then
  need_root "writes $DAEMON_JSON"
  mkdir -p "$(dirname "$DAEMON_JSON")"
  printf '%s\n' "$wanted" >"$DAEMON_JSON.tmp"
  mv "$DAEMON_JSON.tmp" "$DAEMON_JSON"
  changed=true
  log "registered runsc ($runsc_path) in $DAEMON_JSON"
fi

# 3. The engine. Any docker CLI will do (Debian's is /usr/bin/docker).
engine_has_runsc() { docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}' 2>/dev/null | grep -qw runsc; }

if docker info >/dev/null 2>&1; then
  if $changed || ! engine_has_runsc; then
    pid=$(cat /var/run/docker.pid 2>/dev/null || pgrep -xo dockerd || true)
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
      need_root "reloads dockerd"
      log "reloading dockerd (pid $pid) for the runsc runtime"
      kill -HUP "$pid"
      for _ in $(seq 1 20); do engine_has_runsc && break; sleep 0.5; done
    fi
  fi
else
  need_root "starts dockerd"
  command -v dockerd >/dev/null || die "dockerd is not on PATH (is docker.io installed?)"
  log "starting dockerd (log: $DOCKERD_LOG)"
  setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
  dockerd_pid=$!
  for _ in $(seq 1 120); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 0.5
  done
  docker info >/dev/null 2>&1 || {
    if kill -0 "$dockerd_pid" 2>/dev/null; then
      log "dockerd (pid $dockerd_pid) did not answer within 60 s; the end of $DOCKERD_LOG:"
    else
      log "dockerd exited at start-up; the end of $DOCKERD_LOG:"
    fi
    tail -20 "$DOCKERD_LOG" >&2
    exit 1
  }
fi
engine_has_runsc || log "warning: the engine does not list runsc (see $DAEMON_JSON and $DOCKERD_LOG); the gvisor isolation level will not work"

# 4. The sandbox image.
bash images/build.sh

# 5. The derived image of the manifest's packages, when the manifest that
# runbox will use declares any: $RUNBOX_MANIFEST, else ./runbox.yaml (as
# runbox serve finds it). A top-level packages: key (YAML) or a packages
# object (JSON); `runbox images build` is a no-op when the image is current.
manifest=${RUNBOX_MANIFEST:-runbox.yaml}
if [[ -f $manifest ]] && grep -Eq '^packages:|"packages"[[:space:]]*:[[:space:]]*\{' "$manifest"; then
  log "building the derived image of the packages in $manifest"
  if command -v go >/dev/null; then
    go run ./cmd/runbox images build --manifest "$manifest"
  else
    bin/runbox images build --manifest "$manifest"
  fi
fi
log "ready: $(docker version --format 'engine {{.Server.Version}}, API {{.Server.APIVersion}}'), runtimes: $(docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}')"
