#!/usr/bin/env bash
# Sets up Podman as an engine for runbox, beside Docker, idempotently:
#  - Debian's podman (with runc, conmon, containers-common, uidmap,
#    slirp4netns, fuse-overlayfs), where missing;
#  - podman's own configuration, in /etc/containers/containers.conf, other
#    settings kept: runc as the default runtime (Podman's compat API runs
#    every container with it) and, without systemd, cgroupfs and events to a
#    file;
#  - `podman system service` on unix:///run/runbox-podman/podman.sock, started
#    when that socket does not answer (log /var/log/runbox-podman.log, pid file
#    /run/runbox-podman/podman.pid);
#  - the sandbox image copied from Docker (`docker save | podman load`, no
#    registry), skipped when podman's copy has Docker's io.runbox.recipe label.
# Prints the DOCKER_HOST to give runbox on stdout (everything else goes to
# stderr), so `export "$(bash scripts/podman.sh)"` works.
# Non-interactive (CI has no stdin); a second or two when everything is done.
# It never touches Docker's configuration, daemon or objects.
#
# Environment: RUNBOX_IMAGE (default runbox/sandbox:bookworm).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "podman: $*" >&2; }
die() { log "$*"; exit 1; }
need_root() { [[ $(id -u) == 0 ]] || die "run as root: it $1"; }

IMAGE=${RUNBOX_IMAGE:-runbox/sandbox:bookworm}
RUN_DIR=/run/runbox-podman
SOCK=$RUN_DIR/podman.sock
PIDFILE=$RUN_DIR/podman.pid
LOG=/var/log/runbox-podman.log
CONF=/etc/containers/containers.conf
HOST=unix://$SOCK
t0=$(date +%s%N)
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

# 1. Packages. podman pulls conmon and containers-common; runc is the runtime
# runbox's boxes get (see 2: docker.io brings it too; Debian's podman would
# pick crun, its default, on a machine without runc); uidmap, slirp4netns and
# fuse-overlayfs are what rootless use needs. --no-install-recommends keeps
# buildah and dbus-user-session (which pulls systemd) out.
missing=()
for pkg in podman runc conmon uidmap slirp4netns fuse-overlayfs curl; do
  [[ $(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true) == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  need_root "installs ${missing[*]}"
  log "installing ${missing[*]}"
  start=$(date +%s%N)
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
  log "installed in $(ms_since "$start") ms: $(podman --version)"
fi

# 2. Configuration. Only podman's own file is written, and only the [engine]
# keys runbox needs; any other setting an operator made stays. Without
# systemd as PID 1, Podman 4.3 already falls back to cgroupfs and to events in
# a file (/run/systemd/system is missing); they are pinned so that the
# service does not change its mind, and cgroupfs is what Docker uses here too.
set_engine_key() { # key value: sets key = "value" under [engine]
  local key=$1 value=$2
  if [[ ! -f $CONF ]]; then
    mkdir -p "$(dirname "$CONF")"
    printf '# Written by runbox scripts/podman.sh; edit freely.\n[engine]\n' >"$CONF"
  fi
  grep -q '^\[engine\]' "$CONF" || printf '\n[engine]\n' >>"$CONF"
  if grep -qE "^[[:space:]]*${key}[[:space:]]*=[[:space:]]*\"${value}\"" "$CONF"; then
    return 1
  fi
  local tmp
  tmp=$(mktemp "$CONF.XXXXXX")
  awk -v key="$key" -v line="$key = \"$value\"" '
    /^\[/ { if (in_engine && !done) { print line; done = 1 } in_engine = ($0 == "[engine]") }
    in_engine && $0 ~ "^[[:space:]]*#?[[:space:]]*" key "[[:space:]]*=" { if (!done) { print line; done = 1 } next }
    { print }
    END { if (in_engine && !done) print line }' "$CONF" >"$tmp"
  chmod 0644 "$tmp"
  mv "$tmp" "$CONF"
  log "set $key = \"$value\" in $CONF"
}
# The runtime: Podman's compat API ignores the runtime a request names
# (HostConfig.Runtime) and runs every container with its default, so the
# default must be the one runbox's isolation level asks for: runc (crun 1.8
# also refuses a cgroup v1 host whose cgroup2 hierarchy has controllers:
# "cgroups in hybrid mode not supported"). runbox checks it and refuses to
# run otherwise.
conf_changed=false
want_key() { need_root "writes $CONF"; if set_engine_key "$1" "$2"; then conf_changed=true; fi; }
grep -qE '^[[:space:]]*runtime[[:space:]]*=[[:space:]]*"runc"' "$CONF" 2>/dev/null || want_key runtime runc
if [[ $(cat /proc/1/comm 2>/dev/null) != systemd ]]; then
  grep -qE '^[[:space:]]*cgroup_manager[[:space:]]*=[[:space:]]*"cgroupfs"' "$CONF" 2>/dev/null || want_key cgroup_manager cgroupfs
  grep -qE '^[[:space:]]*events_logger[[:space:]]*=[[:space:]]*"file"' "$CONF" 2>/dev/null || want_key events_logger file
fi

# 3. The service. A service started before the configuration changed is
# restarted (only ours: the one in our pid file).
# A service that is busy (a loaded machine, many boxes starting) answers
# late, not never: three tries of 10 s each before it counts as gone, since
# restarting it would end every box it runs.
answering() {
  local try
  for try in 1 2 3; do
    curl -fsS --max-time 10 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1 && return 0
    [[ -S $SOCK ]] || return 1
  done
  return 1
}
our_pid() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == podman ]] && echo "$pid"
}
if $conf_changed && pid=$(our_pid); then
  log "restarting podman system service (pid $pid) for the new configuration"
  kill "$pid"
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
fi
if ! answering; then
  need_root "starts podman system service"
  if pid=$(our_pid); then
    log "podman system service (pid $pid) does not answer; restarting it"
    kill "$pid"
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  mkdir -p "$RUN_DIR"
  chmod 0711 "$RUN_DIR"
  rm -f "$SOCK"
  log "starting podman system service on $HOST (log: $LOG)"
  start=$(date +%s%N)
  # Started in its own directory: conmon drops files such as "oom" into the
  # service's working directory, which must not be a checkout.
  (cd "$RUN_DIR" && exec setsid nohup podman system service --time=0 "$HOST" >>"$LOG" 2>&1 </dev/null) &
  pid=$!
  echo "$pid" >"$PIDFILE"
  for _ in $(seq 1 300); do
    answering && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  answering || {
    log "podman system service did not come up; the end of $LOG:"
    tail -20 "$LOG" >&2
    exit 1
  }
  log "podman system service (pid $pid) answered in $(ms_since "$start") ms"
fi

# 4. The sandbox image, from Docker's copy. A docker-archive keeps the
# image's config (labels, workdir) and its ID; podman names it
# localhost/runbox/sandbox:bookworm, which is what runbox/sandbox:bookworm
# resolves to, through the CLI and the compat API alike.
label() { "$@" 2>/dev/null | head -1 || true; }
want=$(label docker image inspect -f '{{ index .Config.Labels "io.runbox.recipe" }}' "$IMAGE")
have=$(label podman image inspect -f '{{ index .Labels "io.runbox.recipe" }}' "$IMAGE")
if [[ -z $want || $want == "<no value>" ]]; then
  if [[ -n $have && $have != "<no value>" ]]; then
    log "Docker has no $IMAGE with a recipe label; keeping podman's (recipe $have)"
  else
    die "Docker has no $IMAGE to copy: run \`make setup\` first (it builds the image into Docker)"
  fi
elif [[ $want == "$have" ]]; then
  log "$IMAGE is up to date in podman (recipe $have)"
else
  need_root "loads $IMAGE into podman"
  previous=$(label podman image inspect -f '{{.Id}}' "$IMAGE")
  log "copying $IMAGE (recipe $want) from Docker into podman"
  start=$(date +%s%N)
  loaded=$(docker save "$IMAGE" | podman load -q | sed -nE 's/^Loaded image(\(s\))?: *//p' | tail -1)
  # An archive without its name loads as a bare ID: give it the name.
  podman image exists "$IMAGE" || podman tag "${loaded##*,}" "$IMAGE"
  have=$(label podman image inspect -f '{{ index .Labels "io.runbox.recipe" }}' "$IMAGE")
  [[ $have == "$want" ]] || die "podman's $IMAGE has recipe '$have' after the load, not '$want'"
  log "loaded in $(ms_since "$start") ms"
  current=$(label podman image inspect -f '{{.Id}}' "$IMAGE")
  if [[ -n $previous && $previous != "$current" ]]; then
    podman rmi "$previous" >/dev/null 2>&1 || true
  fi
fi

# Only for the log line: a late answer must not fail the script.
api=$(curl -fsS --max-time 10 --unix-socket "$SOCK" http://d/version 2>/dev/null | sed -n 's/.*"ApiVersion":"\([^"]*\)".*/\1/p' || true)
log "ready in $(ms_since "$t0") ms: $(podman --version), compat API ${api:-?}, runtime $(podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null), cgroups $(podman info --format '{{.Host.CgroupsVersion}} ({{.Host.CgroupManager}})' 2>/dev/null)"
echo "DOCKER_HOST=$HOST"
