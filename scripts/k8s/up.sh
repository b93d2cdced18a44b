#!/usr/bin/env bash
# scripts/k8s/up.sh — stand up (or check) a real single-node Kubernetes on this
# machine, with no container registry. Idempotent: when everything already
# runs it only checks, in a few seconds.
#
#   - the binaries: scripts/k8s/build.sh (cached in ~/.cache/runbox/k8s/bin-v1.34.4);
#   - Debian packages where missing: etcd-server, containernetworking-plugins,
#     containerd, runc, iptables, iproute2, openssl, curl;
#   - a separate containerd (root $STATE/containerd, state and socket under
#     $RUN/containerd): Docker's dockerd and containerd are never touched;
#   - etcd (TLS, loopback), kube-apiserver (x509 auth, Node,RBAC),
#     kube-controller-manager, kube-scheduler and the kubelet, keys and
#     certificates made with openssl in $STATE/pki;
#   - pod network "none": the macvlan plugin in private mode on one end of a
#     veth pair with no other port (host-local IPAM): pods get an address and
#     reach nothing;
#   - images: the static pause image, and runbox/sandbox:bookworm copied from
#     the local Docker engine (docker save | ctr import), skipped when the
#     copy already has Docker's image ID;
#   - waits for the node to be Ready and the default service account;
#   - when scripts/k8s/gvisor.sh has built gVisor: the "runsc" runtime in our
#     containerd and the RuntimeClass "gvisor";
#   - a dynamic volume provisioner (scripts/k8s/provisioner, built from this
#     checkout and rebuilt when its source changes) and its StorageClass
#     runbox-test-local: each claim gets a local volume backed by an ext4
#     image of the claim's size, loop-mounted under $STATE/volumes, so its
#     size is a real quota; a released volume's image is removed.
#
# Prints the admin kubeconfig's path on stdout (everything else goes to
# stderr), so `export KUBECONFIG=$(scripts/k8s/up.sh)` works.
# Run as root; needs no TTY or stdin. Logs: /var/lib/runbox-k8s/log/.
# Tear down with scripts/k8s/down.sh.
set -euo pipefail
# shellcheck disable=SC2034 # used by log() in lib.sh
LOG_TAG=k8s-up
# shellcheck source=scripts/k8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root "starts containerd, etcd, the control plane and the kubelet"
T0=$(now)
exec </dev/null
take_lock

# --- 1. binaries ----------------------------------------------------------------
bash "$K8S_ROOT/scripts/k8s/build.sh"

# --- 2. packages ----------------------------------------------------------------
pkgs=(etcd-server containernetworking-plugins containerd runc iptables iproute2 openssl curl util-linux mount)
missing=()
for p in "${pkgs[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  # etcd-server's postinst asks invoke-rc.d to start Debian's own etcd; this
  # host's policy-rc.d refuses (no service starts). Where one does start, it
  # is on 2379 with /var/lib/etcd: ours uses its own ports and data dir.
  apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "${missing[@]}" >/dev/null
fi
for b in etcd containerd containerd-shim-runc-v2 runc ctr iptables ip openssl curl findmnt nsenter; do
  command -v "$b" >/dev/null || die "$b not found after installing packages"
done
[[ -x $CNI_BIN_DIR/macvlan && -x $CNI_BIN_DIR/host-local && -x $CNI_BIN_DIR/loopback ]] ||
  die "CNI plugins missing in $CNI_BIN_DIR"

# --- 3. host facts ----------------------------------------------------------------
NODE_IP="${RUNBOX_K8S_NODE_IP:-}"
if [[ -z $NODE_IP ]]; then
  NODE_IP=$(ip -4 route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n1)
fi
if [[ -z $NODE_IP ]]; then
  NODE_IP=$(ip -4 -o addr show scope global 2>/dev/null | awk '$2 != "docker0" {split($4, a, "/"); print a[1]; exit}')
fi
[[ -n $NODE_IP ]] || die "no non-loopback IPv4 address for the node (set RUNBOX_K8S_NODE_IP)"

mkdir -p "$STATE" "$RUN" "$PKI" "$LOGDIR" "$PIDDIR" "$CTR_ROOT" "$CTR_STATE" \
  "$KUBELET_ROOT" "$POD_LOGS" "$CNI_CONF_DIR" "$CNI_IPAM_DIR" "$STATE/etcd" "$(dirname "$KUBECONFIG_OUT")"
chmod 700 "$STATE" "$PKI" "$STATE/etcd"

# --- 4. keys and certificates (openssl) ------------------------------------------
# Regenerated as a whole when the node's name, IP or API port changes.
pki_stamp="v1 $NODE_NAME $NODE_IP $API_PORT $SERVICE_API_IP"
sign() { # sign NAME CN ORG EKU SANS   (ORG and SANS may be empty)
  local name=$1 cn=$2 org=$3 eku=$4 sans=$5 subj="/CN=$2" ext="$PKI/$1.ext"
  [[ -n $org ]] && subj="/O=$org/CN=$cn"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n $sans ]] && echo "subjectAltName=$sans"
  } >"$ext"
  openssl req -new -nodes -newkey rsa:2048 -keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 3650 -sha256 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
  chmod 600 "$PKI/$name.key"
}
if [[ ! -s $PKI/stamp || $(<"$PKI/stamp") != "$pki_stamp" ]]; then
  for c in containerd "${COMPONENTS[@]}"; do
    if comp_pid "$c" >/dev/null; then
      die "the node's name, IP or API port changed while the cluster runs: run scripts/k8s/down.sh first"
    fi
  done
  log "generating keys and certificates in $PKI"
  rm -f "$PKI"/*
  openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$PKI/ca.key" -out "$PKI/ca.crt" \
    -days 3650 -sha256 -subj "/CN=runbox-k8s-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  chmod 600 "$PKI/ca.key"
  sign etcd-server etcd-server "" serverAuth,clientAuth "IP:127.0.0.1,DNS:localhost"
  sign apiserver-etcd-client kube-apiserver-etcd-client "" clientAuth ""
  sign apiserver kube-apiserver "" serverAuth \
    "IP:127.0.0.1,IP:$NODE_IP,IP:$SERVICE_API_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  sign apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth ""
  sign admin runbox-admin system:masters clientAuth ""
  sign controller-manager system:kube-controller-manager "" clientAuth ""
  sign scheduler system:kube-scheduler "" clientAuth ""
  sign kubelet-client "system:node:$NODE_NAME" system:nodes clientAuth ""
  sign kubelet-server "$NODE_NAME" "" serverAuth "IP:$NODE_IP,IP:127.0.0.1,DNS:$NODE_NAME"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  chmod 600 "$PKI/sa.key"
  echo "$pki_stamp" >"$PKI/stamp"
  rm -f "$KUBECONFIG_OUT"
fi

write_kubeconfig() { # write_kubeconfig FILE CERTNAME
  local f=$1 tmp
  tmp=$(mktemp "$f.XXXXXX")
  cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: runbox-k8s
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: runbox-k8s
  context:
    cluster: runbox-k8s
    user: $2
    namespace: default
current-context: runbox-k8s
EOF
  chmod 600 "$tmp"
  if [[ -s $f ]] && cmp -s "$tmp" "$f"; then rm -f "$tmp"; else mv -f "$tmp" "$f"; fi
}
write_kubeconfig "$STATE/controller-manager.kubeconfig" controller-manager
write_kubeconfig "$STATE/scheduler.kubeconfig" scheduler
write_kubeconfig "$STATE/kubelet.kubeconfig" kubelet-client
write_kubeconfig "$KUBECONFIG_OUT" admin

# --- 5. configuration files -------------------------------------------------------
write_if_changed() { # write_if_changed FILE  (content on stdin)
  local tmp
  tmp=$(mktemp "$1.XXXXXX")
  cat >"$tmp"
  if [[ -f $1 ]] && cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; fi
}

write_if_changed "$CTR_CONFIG" <<EOF
# containerd for the runbox test cluster only (Docker's containerd is separate).
version = 2
root = "$CTR_ROOT"
state = "$CTR_STATE"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$CTR_SOCK"

[ttrpc]
  address = "$CTR_SOCK.ttrpc"

[debug]
  address = ""
  level = "warn"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$CTR_ROOT/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # root here lacks CAP_SYS_RESOURCE and cannot lower oom_score_adj: without
  # this, runc sandboxes fail with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_unprivileged_ports = false
  enable_unprivileged_icmp = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    discard_unpacked_layers = false

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$RUN/runc"

$(gvisor_built && cat <<EOR
    # gVisor (scripts/k8s/gvisor.sh built it): RuntimeClass handler "runsc".
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc]
      runtime_type = "io.containerd.runsc.v1"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runsc.options]
        TypeUrl = "io.containerd.runsc.v1.options"
        ConfigPath = "$STATE/runsc.toml"

EOR
)
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$CNI_CONF_DIR"
    max_conf_num = 1
EOF

if gvisor_built; then
  write_if_changed "$STATE/runsc.toml" <<EOF
# the gVisor shim's options (scripts/k8s/gvisor.sh)
binary_name = "$GV_BIN/runsc"
root = "$RUN/runsc"

# as scripts/setup.sh registers runsc with Docker: no network, and the pod's
# seccomp profile enforced inside the sandbox too
[runsc_config]
  network = "none"
  oci-seccomp = "true"
EOF
fi

# runbox's own seccomp profile (sandbox/linuxbox/seccomp: moby's default for the
# native ABI, with the escapes killing the process), where pods name it as
# the Localhost profile "runbox.json" (kubernetes.seccomp_profile).
mkdir -p "$KUBELET_ROOT/seccomp"
case $(uname -m) in x86_64) seccomp_arch=amd64 ;; aarch64) seccomp_arch=arm64 ;; *) seccomp_arch=$(uname -m) ;; esac
write_if_changed "$KUBELET_ROOT/seccomp/runbox.json" <"$K8S_ROOT/sandbox/linuxbox/seccomp/$seccomp_arch.json"

write_if_changed "$CNI_CONF_DIR/10-$CNI_NET.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NET",
  "plugins": [
    {
      "type": "macvlan",
      "master": "$VETH_A",
      "mode": "private",
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "dataDir": "$CNI_IPAM_DIR"
      }
    }
  ]
}
EOF

write_if_changed "$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $PKI/kubelet-server.crt
tlsPrivateKeyFile: $PKI/kubelet-server.key
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $PKI/ca.crt
# Only holders of a certificate from this cluster's CA get in (the apiserver).
authorization:
  mode: AlwaysAllow
# This host: cgroup v1 without systemd, swap not refused.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CTR_SOCK
imageServiceEndpoint: unix://$CTR_SOCK
podLogsDir: $POD_LOGS
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# root here cannot lower oom_score_adj.
oomScoreAdj: 0
# Generous eviction thresholds and image GC effectively off: the images are
# imported by hand and cannot be pulled again.
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
  imagefs.inodesFree: "1%"
evictionPressureTransitionPeriod: 30s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 87600h
maxPods: 110
# A pod's processes and threads (runbox's limits.pids, plus 1 for the pause
# process): Kubernetes has no per-pod pids field, and RLIMIT_NPROC would
# count every pod of the same uid on the node together.
podPidsLimit: ${RUNBOX_K8S_POD_PIDS:-129}
serializeImagePulls: false
localStorageCapacityIsolation: true
protectKernelDefaults: false
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
EOF

# --- 6. network: the veth pair pods hang off (macvlan, private) ------------------
if ! ip link show "$VETH_A" >/dev/null 2>&1; then
  log "creating veth $VETH_A <-> $VETH_B (pod network: none)"
  ip link add "$VETH_A" type veth peer name "$VETH_B"
fi
for l in "$VETH_A" "$VETH_B"; do
  sysctl -qw "net.ipv6.conf.$l.disable_ipv6=1" >/dev/null 2>&1 || true
  [[ $(cat "/sys/class/net/$l/operstate" 2>/dev/null) == up ]] || ip link set "$l" up
done

# --- 7. processes -------------------------------------------------------------------
# start NAME ARGS...: starts the component detached (own session, no stdin),
# logging to $LOGDIR/NAME.log, unless it already runs.
start() {
  local name=$1 exe pid
  shift
  if pid=$(comp_pid "$name"); then return 0; fi
  exe=$(comp_exe "$name")
  log "starting $name (log $LOGDIR/$name.log)"
  printf '\n=== %s start %s\n' "$(date -u +%FT%TZ)" "$name" >>"$LOGDIR/$name.log"
  (
    # no inherited descriptor beyond 0-2 (our locks, a CI runner's pipes)
    for f in /proc/"$BASHPID"/fd/*; do
      f=${f##*/}
      if [[ $f =~ ^[0-9]+$ ]] && ((f > 2)); then eval "exec $f>&-"; fi
    done
    exec setsid "$exe" "$@" >>"$LOGDIR/$name.log" 2>&1 </dev/null
  ) &
  pid=$!
  echo "$pid" >"$PIDDIR/$name.pid"
  STARTED+=("$name")
  # until the forked shell has exec'd the binary (comp_pid checks argv[0])
  for _ in {1..50}; do
    comp_pid "$name" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
}
# wait_for NAME SECONDS CMD...: until CMD succeeds; fails with the log's tail.
wait_for() {
  local name=$1 secs=$2 i
  shift 2
  for ((i = 0; i < secs * 5; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [[ $name != - ]] && ! comp_pid "$name" >/dev/null; then
      log "$name exited; the end of $LOGDIR/$name.log:"
      tail -n 25 "$LOGDIR/$name.log" >&2 || true
      exit 1
    fi
    sleep 0.2
  done
  log "$name not ready after ${secs}s; the end of $LOGDIR/$name.log:"
  [[ $name != - ]] && { tail -n 25 "$LOGDIR/$name.log" >&2 || true; }
  exit 1
}
STARTED=()
curl_ca() { curl -fsS --max-time 3 --cacert "$PKI/ca.crt" "$@"; }

# containerd (ours only; restarted when its configuration changed, e.g. the
# gVisor runtime was added: its shims and containers keep running)
ctr_sum=$(sha256sum "$CTR_CONFIG" | cut -d' ' -f1)
if pid=$(comp_pid containerd) && [[ $(cat "$RUN/containerd.config.sha256" 2>/dev/null) != "$ctr_sum" ]]; then
  log "containerd configuration changed: restarting our containerd"
  stop_pid "$pid" containerd 15
fi
if ! comp_pid containerd >/dev/null; then
  echo "$ctr_sum" >"$RUN/containerd.config.sha256"
fi
if gvisor_built; then
  PATH="$GV_BIN:$PATH" start containerd --config "$CTR_CONFIG"
else
  start containerd --config "$CTR_CONFIG"
fi
wait_for containerd 30 ctr --address "$CTR_SOCK" version

# --- images: imported in the background while the control plane starts ------------
# image_label REF: the io.runbox.docker-id label of REF in our containerd, if any.
image_label() {
  ctrk images ls "name==$1" 2>/dev/null | awk -v k="$IMAGE_LABEL=" 'NR > 1 {
    n = split($NF, a, ","); for (i = 1; i <= n; i++) if (index(a[i], k) == 1) print substr(a[i], length(k) + 1) }'
}
# full_ref IMAGE: how the CRI names IMAGE (docker.io/library/x:latest for x).
full_ref() {
  local r=$1 first last
  [[ $r == */* ]] || r="library/$r"
  first=${r%%/*}
  [[ $first == *.* || $first == *:* || $first == localhost ]] || r="docker.io/$r"
  last=${r##*/}
  [[ $last == *:* || $r == *@* ]] || r="$r:latest"
  echo "$r"
}
import_images() {
  pause_sum=$(sha256sum "$K8S_BIN/pause-image.tar" | cut -d' ' -f1)
  if [[ $(image_label "$PAUSE_IMAGE") != "sha256:$pause_sum" ]]; then
    log "importing $PAUSE_IMAGE"
    ctrk images import "$K8S_BIN/pause-image.tar" >/dev/null
    ctrk images label "$PAUSE_IMAGE" "$IMAGE_LABEL=sha256:$pause_sum" >/dev/null
  fi
  for img in "${K8S_IMAGES[@]}"; do
    ref=$(full_ref "$img")
    have=$(image_label "$ref")
    if ! id=$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null); then
      [[ -n $have ]] || die "image $img is not in the local Docker engine (run make setup first)"
      log "warning: Docker does not answer for $img; keeping the imported copy ($have)"
      continue
    fi
    if [[ $have != "$id" ]]; then
      log "importing $img ($id) from Docker into the cluster's containerd"
      ti=$(now)
      docker save "$img" | ctrk images import - >/dev/null
      ctrk images ls -q "name==$ref" | grep -qxF "$ref" || die "import of $img did not create $ref"
      ctrk images label "$ref" "$IMAGE_LABEL=$id" >/dev/null
      log "imported $ref in $(since "$ti")s"
    fi
  done
}
import_images &
IMPORT_PID=$!

# etcd (TLS with client certificates, loopback only)
start etcd --name "$NODE_NAME" --data-dir "$STATE/etcd" \
  --listen-client-urls "https://127.0.0.1:$ETCD_PORT" --advertise-client-urls "https://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "$NODE_NAME=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new \
  --cert-file "$PKI/etcd-server.crt" --key-file "$PKI/etcd-server.key" \
  --trusted-ca-file "$PKI/ca.crt" --client-cert-auth \
  --logger zap --log-level warn
etcd_ok() { curl_ca --cert "$PKI/apiserver-etcd-client.crt" --key "$PKI/apiserver-etcd-client.key" \
  "https://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }
wait_for etcd 30 etcd_ok

# kube-apiserver
start kube-apiserver \
  --etcd-servers "https://127.0.0.1:$ETCD_PORT" --etcd-cafile "$PKI/ca.crt" \
  --etcd-certfile "$PKI/apiserver-etcd-client.crt" --etcd-keyfile "$PKI/apiserver-etcd-client.key" \
  --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address "$NODE_IP" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --client-ca-file "$PKI/ca.crt" --anonymous-auth=false \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" \
  --kubelet-preferred-address-types InternalIP \
  --allow-privileged=false --profiling=false
api_ok() { curl_ca --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:$API_PORT/readyz" | grep -qx ok; }
wait_for kube-apiserver 90 api_ok

# kube-controller-manager and kube-scheduler
start kube-controller-manager \
  --kubeconfig "$STATE/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --profiling=false \
  --use-service-account-credentials=true \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --service-cluster-ip-range "$SERVICE_CIDR"
start kube-scheduler \
  --kubeconfig "$STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
  --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --profiling=false
cm_ok() { curl -fsSk --max-time 3 https://127.0.0.1:10257/healthz | grep -qx ok; }
sched_ok() { curl -fsSk --max-time 3 https://127.0.0.1:10259/healthz | grep -qx ok; }

# kubelet (restarted when its configuration changed; pods keep running)
kubelet_sum=$(sha256sum "$STATE/kubelet.yaml" | cut -d' ' -f1)
if pid=$(comp_pid kubelet) && [[ $(cat "$RUN/kubelet.config.sha256" 2>/dev/null) != "$kubelet_sum" ]]; then
  log "kubelet configuration changed: restarting the kubelet"
  stop_pid "$pid" kubelet 15
fi
if ! comp_pid kubelet >/dev/null; then
  echo "$kubelet_sum" >"$RUN/kubelet.config.sha256"
fi
start kubelet --config "$STATE/kubelet.yaml" --kubeconfig "$STATE/kubelet.kubeconfig" \
  --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --root-dir "$KUBELET_ROOT" \
  --cert-dir "$KUBELET_ROOT/pki" --volume-plugin-dir "$STATE/volume-plugins"
kubelet_ok() { curl -fsS --max-time 3 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" | grep -qx ok; }
wait_for kube-controller-manager 60 cm_ok
wait_for kube-scheduler 60 sched_ok

wait_for kubelet 60 kubelet_ok

# --- 8. Ready ---------------------------------------------------------------------------
node_ready() {
  [[ $(kctl get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]
}
wait_for kubelet 120 node_ready
sa_ok() { kctl get serviceaccount default -n default -o name; }
wait_for kube-controller-manager 60 sa_ok

wait "$IMPORT_PID" || die "importing the images failed (see above)"

if gvisor_built && ! kctl get runtimeclass gvisor >/dev/null 2>&1; then
  log "creating RuntimeClass gvisor (handler runsc)"
  kctl apply -f - >/dev/null <<EOF
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: gvisor
handler: runsc
EOF
fi

# --- 9. the volume provisioner and its StorageClass ---------------------------------
# its source: the Go files it is built from (tests excluded)
prov_src() {
  local f
  for f in "$K8S_ROOT/scripts/k8s/provisioner/"*.go "$K8S_ROOT/internal/ext4img/"*.go; do
    [[ $f == *_test.go ]] || cat "$f"
  done | sha256sum | cut -d' ' -f1
}
prov_sum=$(prov_src)
if [[ ! -x $PROVISIONER_BIN || $(cat "$PROVISIONER_BIN.sha256" 2>/dev/null) != "$prov_sum" ]]; then
  log "building the volume provisioner"
  (cd "$K8S_ROOT" && GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w' -o "$PROVISIONER_BIN.new" ./scripts/k8s/provisioner) ||
    die "building scripts/k8s/provisioner failed"
  mv -f "$PROVISIONER_BIN.new" "$PROVISIONER_BIN"
  echo "$prov_sum" >"$PROVISIONER_BIN.sha256"
  if pid=$(comp_pid provisioner); then stop_pid "$pid" provisioner 10; fi
fi
start provisioner -kubeconfig "$KUBECONFIG_OUT" -class "$STORAGE_CLASS" -node "$NODE_NAME" -dir "$VOLUMES_DIR"
comp_pid provisioner >/dev/null || die "the volume provisioner exited; see $LOGDIR/provisioner.log"
if ! kctl get storageclass "$STORAGE_CLASS" >/dev/null 2>&1; then
  log "creating StorageClass $STORAGE_CLASS"
  kctl apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
provisioner: runbox.io/test-local
reclaimPolicy: Delete
volumeBindingMode: Immediate
EOF
fi

if ((${#STARTED[@]})); then
  log "started: ${STARTED[*]}"
fi
log "node $NODE_NAME Ready ($K8S_VERSION, node IP $NODE_IP) in $(since "$T0")s"
log "kubectl: $K8S_BIN/kubectl --kubeconfig $KUBECONFIG_OUT"
echo "$KUBECONFIG_OUT"
