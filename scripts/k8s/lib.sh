# scripts/k8s/lib.sh — shared settings and helpers of the test cluster scripts
# shellcheck shell=bash disable=SC2034
# (sourced by up.sh, down.sh, smoke.sh; not run on its own).
#
# Everything the cluster owns lives under $STATE and $RUN, with its own
# containerd (own root, state and socket), so Docker's engine, its containerd
# and its containers are never touched. Override any of these from the
# environment.

K8S_VERSION="${K8S_VERSION:-v1.34.4}"
K8S_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
. "$K8S_ROOT/scripts/cache.sh"
K8S_CACHE="$RUNBOX_CACHE/k8s"
K8S_BIN="$K8S_CACHE/bin-$K8S_VERSION"
KUBECONFIG_OUT="${RUNBOX_K8S_KUBECONFIG:-$K8S_CACHE/kubeconfig}"

STATE="${RUNBOX_K8S_STATE:-/var/lib/runbox-k8s}"
RUN="${RUNBOX_K8S_RUN:-/run/runbox-k8s}"
PKI="$STATE/pki"
LOGDIR="$STATE/log"
PIDDIR="$RUN/pids"
# up.sh and down.sh hold this lock, so that two never run at once.
LOCKFILE="${RUNBOX_K8S_LOCK:-/run/runbox-k8s.lock}"
take_lock() {
  exec 7>"$LOCKFILE"
  if ! flock -n 7; then
    log "another up.sh/down.sh is running; waiting for it"
    flock 7
  fi
}

CTR_ROOT="$STATE/containerd"
CTR_STATE="$RUN/containerd"
CTR_SOCK="$CTR_STATE/containerd.sock"
CTR_CONFIG="$STATE/containerd.toml"
KUBELET_ROOT="$STATE/kubelet"
POD_LOGS="$STATE/pod-logs"
CNI_CONF_DIR="$STATE/cni/net.d"
CNI_IPAM_DIR="$STATE/cni/ipam"
CNI_BIN_DIR="${RUNBOX_K8S_CNI_BIN:-/usr/lib/cni}"
CNI_NET="runbox-k8s-none"

NODE_NAME="${RUNBOX_K8S_NODE:-runbox-k8s}"
API_PORT="${RUNBOX_K8S_API_PORT:-6443}"
ETCD_PORT="${RUNBOX_K8S_ETCD_PORT:-2479}"
ETCD_PEER_PORT="${RUNBOX_K8S_ETCD_PEER_PORT:-2480}"
KUBELET_PORT=10250
KUBELET_HEALTHZ_PORT=10248
# The veth pair whose one end is the macvlan (mode private) parent of every
# pod: a pod gets an address and reaches nothing (not the host, not the
# outside, not other pods).
VETH_A="${RUNBOX_K8S_VETH:-rbk8s0}"
VETH_B="${VETH_A}p"
POD_SUBNET="${RUNBOX_K8S_POD_SUBNET:-10.213.0.0/24}"
SERVICE_CIDR="${RUNBOX_K8S_SERVICE_CIDR:-10.96.0.0/16}"
SERVICE_API_IP="${RUNBOX_K8S_SERVICE_API_IP:-10.96.0.1}"
PAUSE_IMAGE="${PAUSE_IMAGE:-localhost/runbox/pause:3.10}"
# Images copied from the local Docker engine into the cluster's containerd.
read -r -a K8S_IMAGES <<<"${RUNBOX_K8S_IMAGES:-runbox/sandbox:bookworm}"
IMAGE_LABEL="io.runbox.docker-id"

COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet)

# Optional gVisor RuntimeClass (scripts/k8s/gvisor.sh): when its binaries are
# built, up.sh registers the "runsc" runtime in our containerd.
GVISOR_VERSION="${GVISOR_VERSION:-v0.0.0-20260905035102-160fafc42237}"
GV_BIN="$K8S_CACHE/gvisor-$GVISOR_VERSION"
gvisor_built() { [[ -x $GV_BIN/runsc && -x $GV_BIN/containerd-shim-runsc-v1 && -s $GV_BIN/.complete ]]; }

export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

log() {
  if [[ -n ${T0:-} ]]; then
    printf '[%s +%ss] %s\n' "${LOG_TAG:-k8s}" "$(since "$T0")" "$*" >&2
  else
    printf '[%s] %s\n' "${LOG_TAG:-k8s}" "$*" >&2
  fi
}
die() { log "ERROR: $*"; exit 1; }
need_root() { [[ $(id -u) == 0 ]] || die "run as root (it $1)"; }

kctl() { "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }
ctrk() { ctr --address "$CTR_SOCK" --namespace k8s.io "$@"; }

# now: seconds since the epoch with milliseconds
now() { date +%s.%3N; }
# since T0: seconds elapsed since T0, one decimal
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# The test cluster's volume provisioner (scripts/k8s/provisioner): its
# StorageClass, its binary (rebuilt when its source changes) and where its
# volumes' ext4 images are mounted.
STORAGE_CLASS="${RUNBOX_K8S_STORAGE_CLASS:-runbox-test-local}"
PROVISIONER_BIN="$K8S_CACHE/runbox-test-provisioner"
VOLUMES_DIR="$STATE/volumes"

# The binary a component runs.
comp_exe() {
  case "$1" in
    provisioner) echo "$PROVISIONER_BIN" ;;
    etcd) command -v etcd || echo /usr/bin/etcd ;;
    containerd) command -v containerd || echo /usr/bin/containerd ;;
    *) echo "$K8S_BIN/$1" ;;
  esac
}

# comp_pid NAME: prints the PID from NAME's pid file when that process is
# alive and still runs the component's binary (guards against PID reuse).
comp_pid() {
  local f="$PIDDIR/$1.pid" pid arg0
  [[ -s $f ]] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
  arg0=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1)
  # By name, not path: a component started from another checkout's cache
  # (the same version) is still ours, and must be seen running and stopped.
  [[ ${arg0##*/} == "$(basename "$(comp_exe "$1")")" ]] || return 1
  # A zombie is not running.
  [[ $(awk '/^State:/{print $2}' "/proc/$pid/status" 2>/dev/null) != Z ]] || return 1
  echo "$pid"
}

# stop_pid PID NAME [GRACE]: TERM, wait up to GRACE s (default 10), then KILL.
stop_pid() {
  local pid=$1 name=$2 grace=${3:-10} i
  kill -0 "$pid" 2>/dev/null || return 0
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    # reaped by its parent already? (our children are reparented to init)
    [[ $(awk '/^State:/{print $2}' "/proc/$pid/status" 2>/dev/null) == Z ]] && return 0
    sleep 0.1
  done
  log "$name (pid $pid) still running after ${grace}s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}

# PIDs of containerd shims that belong to this cluster's containerd (their
# -address argument is our socket). Docker's shims name Docker's socket.
our_shim_pids() {
  local f pid
  # one grep over every cmdline: NUL-separated args, one must be our socket
  while read -r f; do
    pid=${f#/proc/}
    pid=${pid%/cmdline}
    case "$(tr '\0' '\n' <"$f" 2>/dev/null | head -n1)" in
      *containerd-shim*) echo "$pid" ;;
    esac
  done < <(grep -lszxF -- "$CTR_SOCK" /proc/[0-9]*/cmdline 2>/dev/null || true)
}
