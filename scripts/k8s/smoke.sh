#!/usr/bin/env bash
# scripts/k8s/smoke.sh — with the test cluster up (scripts/k8s/up.sh), run
# hardened pods of runbox/sandbox:bookworm and check them:
#   1. a run-to-completion pod prints python3 -c 'print(6*7)' = 42, runs as
#      uid 1000 with no capabilities, no_new_privs, seccomp filtering and a
#      read-only root, has tmpfs /workspace and /tmp, and cannot reach the
#      network: TCP connects to 1.1.1.1:443, to the node's kubelet port and to
#      the other pod's listening port all fail;
#   2. a waiting pod (listening on TCP 8080 inside) answers `kubectl exec -i`
#      round trips (stdin in, stdout back), timed; it reaches its own port.
# Prints the timings; exits non-zero on any failed check. Pods are deleted at
# the end (and at the start, when a previous run left them).
set -euo pipefail
# shellcheck disable=SC2034 # used by log() in lib.sh
LOG_TAG=k8s-smoke
# shellcheck source=scripts/k8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
exec </dev/null
IMAGE="${RUNBOX_K8S_SMOKE_IMAGE:-${K8S_IMAGES[0]}}"
NS=default
RUN_POD=runbox-smoke-run
PROBE_POD=runbox-smoke-probe
EXEC_POD=runbox-smoke-exec
EXEC_ROUNDS="${EXEC_ROUNDS:-5}"
# RUNBOX_K8S_RUNTIME_CLASS=gvisor runs the same pods under that RuntimeClass
# (scripts/k8s/gvisor.sh does).
RUNTIME_CLASS="${RUNBOX_K8S_RUNTIME_CLASS:-}"
if [[ -n $RUNTIME_CLASS ]]; then
  RUN_POD+="-$RUNTIME_CLASS" PROBE_POD+="-$RUNTIME_CLASS" EXEC_POD+="-$RUNTIME_CLASS"
fi

[[ -x $K8S_BIN/kubectl && -s $KUBECONFIG_OUT ]] || die "no cluster: run scripts/k8s/up.sh first"
kctl get node "$NODE_NAME" >/dev/null 2>&1 || die "the cluster does not answer: run scripts/k8s/up.sh first"
NODE_IP=$(kctl get node "$NODE_NAME" -o 'jsonpath={.status.addresses[?(@.type=="InternalIP")].address}')

FAILED=0
ok() { log "ok   $*"; }
bad() { log "FAIL $*"; FAILED=1; }
cleanup() {
  timeout 40 "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" delete pod -n "$NS" "$RUN_POD" "$PROBE_POD" "$EXEC_POD" \
    --ignore-not-found --grace-period=1 --wait=true --timeout=30s >/dev/null 2>&1 || true
}
trap cleanup EXIT
if kctl get pod -n "$NS" "$RUN_POD" "$PROBE_POD" "$EXEC_POD" --ignore-not-found -o name 2>/dev/null | grep -q .; then
  kctl delete pod -n "$NS" "$RUN_POD" "$PROBE_POD" "$EXEC_POD" --ignore-not-found --wait=true --timeout=30s >/dev/null
fi

# pod NAME DEADLINE COMMAND-JSON: a hardened pod's manifest.
pod() {
  cat <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
  namespace: $NS
  labels: {app.kubernetes.io/name: runbox-smoke}
spec:
  ${RUNTIME_CLASS:+runtimeClassName: $RUNTIME_CLASS}
  restartPolicy: Never
  activeDeadlineSeconds: $2
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  enableServiceLinks: false
  hostNetwork: false
  hostPID: false
  hostIPC: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    runAsGroup: 1000
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: box
    image: $IMAGE
    imagePullPolicy: Never
    command: $3
    workingDir: /workspace
    env:
    - {name: HOME, value: /tmp}
    - {name: PYTHONDONTWRITEBYTECODE, value: "1"}
    securityContext:
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      privileged: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
      seccompProfile: {type: RuntimeDefault}
    resources:
      requests: {cpu: 500m, memory: 256Mi, ephemeral-storage: 64Mi}
      limits: {cpu: 500m, memory: 256Mi, ephemeral-storage: 64Mi}
    volumeMounts:
    - {name: workspace, mountPath: /workspace}
    - {name: tmp, mountPath: /tmp}
  volumes:
  - name: workspace
    emptyDir: {medium: Memory, sizeLimit: 64Mi}
  - name: tmp
    emptyDir: {medium: Memory, sizeLimit: 16Mi}
EOF
}

# --- 1. a waiting pod (created first: the run pod probes it) -----------------------------------------------------------
t0=$(now)
SERVE='import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(8)
while True:
    c, _ = s.accept(); c.sendall(b"hello\n"); c.close()'
pod "$EXEC_POD" 120 "$(jq -cn --arg p "$SERVE" '["python3", "-c", $p]')" | kctl apply -f - >/dev/null
if kctl wait -n "$NS" --for=condition=Ready "pod/$EXEC_POD" --timeout=90s >/dev/null 2>&1; then
  T_READY=$(since "$t0")
  ok "pod $EXEC_POD created -> Ready in ${T_READY}s"
else
  T_READY=fail
  bad "pod $EXEC_POD not Ready"
fi
EXEC_IP=$(kctl get pod -n "$NS" "$EXEC_POD" -o 'jsonpath={.status.podIP}')
log "pod $EXEC_POD IP: ${EXEC_IP:-none}"

# --- 2. run to completion: python3 -c 'print(6*7)', timed ---------------------------
# run_pod NAME COMMAND-JSON: create, wait for Succeeded; sets T_POD and OUT.
run_pod() {
  local t0
  t0=$(now)
  pod "$1" 60 "$2" | kctl apply -f - >/dev/null
  if kctl wait -n "$NS" --for=jsonpath='{.status.phase}'=Succeeded "pod/$1" --timeout=90s >/dev/null 2>&1; then
    T_POD=$(since "$t0")
    ok "pod $1 created -> Succeeded in ${T_POD}s"
  else
    T_POD=fail
    bad "pod $1 did not succeed: $(kctl get pod -n "$NS" "$1" -o 'jsonpath={.status.phase} {.status.containerStatuses[0].state}' 2>&1)"
  fi
  OUT=$(kctl logs -n "$NS" "$1" 2>&1 || true)
  printf '%s\n' "$OUT" | sed 's/^/    | /' >&2
}
run_pod "$RUN_POD" '["python3", "-c", "print(6*7)"]'
T_RUN=$T_POD
if [[ $OUT == 42 ]]; then ok "python3 -c 'print(6*7)' printed 42"; else bad "python3 did not print 42"; fi

# --- 3. the same hardened pod, probing what it can do ------------------------------
PROBE=$(cat <<'PY'
import os, socket, sys
print("kernel=" + os.uname().release)
st = dict(l.split(":", 1) for l in open("/proc/self/status") if ":" in l)
print("uid=%d gid=%d" % (os.getuid(), os.getgid()))
print("capeff=" + st["CapEff"].strip())
print("nonewprivs=" + st["NoNewPrivs"].strip())
print("seccomp=" + st["Seccomp"].strip())
try:
    open("/etc/runbox-smoke", "w"); print("rootfs=writable")
except OSError as e:
    print("rootfs=readonly")
for d in ("/workspace", "/tmp"):
    fs = [l.split()[2] for l in open("/proc/self/mounts") if l.split()[1] == d]
    open(d + "/probe", "w").write("x")
    print("mount%s=%s,writable" % (d.replace("/", "_"), fs[0] if fs else "none"))
for host, port in (("1.1.1.1", 443), (sys.argv[1], 10250), (sys.argv[2], 8080)):
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((host, port)); print("net %s:%d=OPEN" % (host, port))
    except OSError as e:
        print("net %s:%d=blocked (%s)" % (host, port, e.__class__.__name__ + ": " + str(e)))
    finally:
        s.close()
PY
)
run_pod "$PROBE_POD" "$(jq -cn --arg p "$PROBE" --arg ip "$NODE_IP" --arg pod "${EXEC_IP:-10.0.0.1}" '["python3", "-c", $p, $ip, $pod]')"
T_PROBE=$T_POD
out=$OUT
expect() { # expect DESCRIPTION REGEX
  if grep -qE "$2" <<<"$out"; then ok "$1"; else bad "$1 (wanted /$2/)"; fi
}
host_kernel=$(uname -r)
if [[ -n $RUNTIME_CLASS ]]; then
  if grep -q '^kernel=' <<<"$out" && ! grep -qxF "kernel=$host_kernel" <<<"$out"; then
    ok "runs on $RUNTIME_CLASS's kernel ($(sed -n 's/^kernel=//p' <<<"$out")), not the host's ($host_kernel)"
  else
    bad "the pod sees the host kernel $host_kernel under $RUNTIME_CLASS"
  fi
fi
expect "runs as uid 1000" '^uid=1000 gid=1000$'
expect "no effective capabilities" '^capeff=0000000000000000$'
expect "no_new_privs set" '^nonewprivs=1$'
expect "seccomp filter on" '^seccomp=2$'
expect "read-only root filesystem" '^rootfs=readonly$'
if [[ -z $RUNTIME_CLASS ]]; then
  expect "/workspace is a writable tmpfs" '^mount_workspace=tmpfs,writable$'
  expect "/tmp is a writable tmpfs" '^mount_tmp=tmpfs,writable$'
else
  # gVisor shows the kubelet's host tmpfs bind mounts as gofer (9p) mounts
  expect "/workspace is writable (tmpfs or gVisor gofer)" '^mount_workspace=(tmpfs|9p),writable$'
  expect "/tmp is writable (tmpfs or gVisor gofer)" '^mount_tmp=(tmpfs|9p),writable$'
fi
expect "no route to 1.1.1.1:443" '^net 1\.1\.1\.1:443=blocked'
expect "node $NODE_IP:10250 unreachable" "^net ${NODE_IP//./\\.}:10250=blocked"
expect "other pod ${EXEC_IP:-?}:8080 unreachable" "^net ${EXEC_IP//./\\.}:8080=blocked"
podip=$(kctl get pod -n "$NS" "$PROBE_POD" -o 'jsonpath={.status.podIP}')
log "pod $PROBE_POD IP: ${podip:-none}"

# --- 4. exec -i round trips -------------------------------------------------------------

T_EXEC=()
exec_ok=1
for ((i = 1; i <= EXEC_ROUNDS; i++)); do
  t0=$(now)
  got=$(printf 'round %d\n' "$i" | kctl exec -i -n "$NS" "$EXEC_POD" -- python3 -c 'import sys; print(sys.stdin.read().strip().upper())' 2>&1) || true
  T_EXEC+=("$(since "$t0")")
  want="ROUND $i"
  [[ $got == "$want" ]] || { bad "exec round $i: got '$got', want '$want'"; exec_ok=0; }
done
((exec_ok)) && ok "exec -i round trips (python3 upper-cases stdin): ${T_EXEC[*]} s"
t0=$(now)
got=$(printf 'hi\n' | kctl exec -i -n "$NS" "$EXEC_POD" -- cat 2>&1) || true
T_CAT=$(since "$t0")
if [[ $got == hi ]]; then ok "exec -i cat round trip ${T_CAT}s"; else bad "exec -i cat: got '$got'"; fi
got=$(kctl exec -n "$NS" "$EXEC_POD" -- python3 -c 'import socket; print(socket.create_connection(("127.0.0.1", 8080), 3).recv(16).decode().strip())' 2>&1) || true
if [[ $got == hello ]]; then
  ok "the pod reaches its own listening port (so the peer check above is meaningful)"
else
  bad "own port: got '$got'"
fi

echo "timings${RUNTIME_CLASS:+ ($RUNTIME_CLASS)}: print(6*7) pod create->Succeeded ${T_RUN}s; probe pod ${T_PROBE}s; exec pod create->Ready ${T_READY}s; exec -i python round trips ${T_EXEC[*]}s; exec -i cat ${T_CAT}s" >&2
if ((FAILED)); then
  log "SMOKE FAILED"
  exit 1
fi
log "smoke passed"
