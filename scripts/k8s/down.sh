#!/usr/bin/env bash
# scripts/k8s/down.sh — tear the test cluster down, thoroughly and
# idempotently (a no-op when nothing runs).
#
#   1. deletes every pod through the API while the kubelet still runs (so the
#      kubelet and containerd release addresses, netns and mounts themselves);
#   2. stops the volume provisioner, the kubelet, scheduler,
#      controller-manager, apiserver and etcd by the PIDs up.sh recorded
#      (TERM, then KILL);
#   3. kills and deletes any CRI task/container left in our containerd (each
#      ctr call under a timeout), remembering their network namespaces;
#   4. stops our containerd, then any shim of ours still running (found by our
#      socket in its -address argument) and any process left in the kubelet's
#      kubepods cgroups;
#   5. unmounts everything under the cluster's directories, removes our pods'
#      network namespaces (+ their /run/netns bind mounts), the veth pair, the
#      KUBE-* iptables chains (and only the rules that jump to them), the
#      kubepods cgroups, the kubelet's state and pod logs, etcd's data, the
#      host-local IPAM and CNI cache entries of our network and sandboxes,
#      and the /var/log/containers links into our pod logs;
#   6. removes what a kubelet writes at fixed host paths whatever its
#      --root-dir (/var/lib/kubelet/device-plugins, the empty
#      /usr/libexec/kubernetes/kubelet-plugins/volume/exec; /var/log/pods),
#      when no other kubelet runs, and /run/netns when it is left empty.
#
# Kept for a fast next start: the built binaries (~/.cache/runbox/k8s, scripts/cache.sh), keys and
# certificates, and containerd's image store (the imported images).
# `down.sh --purge` removes those too (except the binaries).
#
# Docker is never touched: not dockerd, not its containerd, shims, containers,
# networks, docker0, nor its iptables chains.
set -euo pipefail
# shellcheck disable=SC2034 # used by log() in lib.sh
LOG_TAG=k8s-down
# shellcheck source=scripts/k8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_root "stops the cluster's processes and removes its state"
exec </dev/null
PURGE=false
for a in "$@"; do
  case "$a" in
    --purge) PURGE=true ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) die "unknown argument: $a" ;;
  esac
done
T0=$(now)
take_lock

# --- 1. pods, through the API -------------------------------------------------
if comp_pid kubelet >/dev/null && comp_pid kube-apiserver >/dev/null && [[ -s $KUBECONFIG_OUT && -x $K8S_BIN/kubectl ]]; then
  n=$({ timeout 10 "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" --request-timeout=5s \
    get pods -A --no-headers 2>/dev/null || true; } | wc -l)
  if ((n > 0)); then
    log "deleting $n pod(s)"
    timeout 45 "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" --request-timeout=10s \
      delete pods --all -A --grace-period=2 --wait=true --timeout=30s >/dev/null 2>&1 ||
      log "pods not all gone through the API; cleaning up below"
  fi
fi

# --- 2. the control plane and the kubelet, by PID --------------------------------
for c in provisioner kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do
  if pid=$(comp_pid "$c"); then stop_pid "$pid" "$c" 15; fi
  rm -f "$PIDDIR/$c.pid"
done
# Strays whose pid file was lost (a start that raced another one): any
# control-plane process that runs on our state directory.
for pid in $(pgrep -f -- "--(kubeconfig|config|data-dir|etcd-servers|root-dir|client-ca-file)[= ]$STATE/" || true); do
  case $(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n1) in
  */kube-*|*/kubelet|*/etcd) stop_pid "$pid" "stray $(basename "$(tr '\0' '\n' <"/proc/$pid/cmdline" | head -n1)")" 10 ;;
  esac
done

# --- 3. leftover CRI tasks and containers in our containerd ----------------------
NETNS=()
SHIM_SOCKS=()
ids=()
collect_shim_socks() {
  local f
  for f in "$CTR_STATE"/io.containerd.runtime.v2.task/*/*/address; do
    [[ -s $f ]] && SHIM_SOCKS+=("$(sed 's#^unix://##' "$f")")
  done
  return 0
}
collect_shim_socks
if comp_pid containerd >/dev/null && [[ -S $CTR_SOCK ]]; then
  mapfile -t ids < <(timeout 10 ctr --address "$CTR_SOCK" -n k8s.io containers ls -q 2>/dev/null || true)
  if ((${#ids[@]})); then
    log "removing ${#ids[@]} leftover CRI container(s)"
    for id in "${ids[@]}"; do
      # the network namespace a sandbox was given (/var/run/netns/cni-...)
      while read -r p; do [[ -n $p ]] && NETNS+=("$p"); done < <(
        timeout 10 ctr --address "$CTR_SOCK" -n k8s.io containers info "$id" 2>/dev/null |
          tr -d ' \n' | grep -o '"type":"network","path":"[^"]*"' | sed 's/.*"path":"\([^"]*\)"/\1/' || true)
      timeout 10 ctr --address "$CTR_SOCK" -n k8s.io tasks kill -a -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in "${ids[@]}"; do
      timeout 15 ctr --address "$CTR_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
      timeout 15 ctr --address "$CTR_SOCK" -n k8s.io containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
fi

# Sandbox/container IDs also from containerd's state dir (when it was dead).
for d in "$CTR_STATE"/io.containerd.runtime.v2.task/k8s.io/* "$CTR_STATE"/io.containerd.grpc.v1.cri/sandboxes/*; do
  [[ -d $d ]] && ids+=("${d##*/}")
done

# --- 4. containerd, our shims, processes left in kubepods ---------------------------
if pid=$(comp_pid containerd); then stop_pid "$pid" containerd 15; fi
rm -f "$PIDDIR/containerd.pid"
mapfile -t shims < <(our_shim_pids)
for pid in "${shims[@]}"; do stop_pid "$pid" "containerd-shim (ours)" 5; done

kubepods_dirs() {
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/kubepods.slice /sys/fs/cgroup/kubepods.slice; do
    [[ -d $d ]] && echo "$d"
  done
  return 0
}
mapfile -t cg < <(kubepods_dirs)
if ((${#cg[@]})); then
  mapfile -t left < <(find "${cg[@]}" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un)
  if ((${#left[@]})); then
    log "killing ${#left[@]} process(es) left in kubepods cgroups"
    for d in "${cg[@]}"; do
      find "$d" -name freezer.state -exec sh -c 'echo THAWED > "$1"' _ {} \; 2>/dev/null || true
    done
    kill -KILL "${left[@]}" 2>/dev/null || true
    sleep 0.5
  fi
fi

# --- 5. mounts, netns, veth, iptables, cgroups, files -------------------------------
# Pod network namespaces not seen above: ours are the cni-* ones holding a
# macvlan slave of our veth (possible only while the veth exists).
if [[ -d /run/netns ]] && ip link show "$VETH_A" >/dev/null 2>&1; then
  for ns in /run/netns/cni-*; do
    [[ -e $ns ]] || continue
    if timeout 5 ip -n "${ns##*/}" -d -o link show 2>/dev/null | grep -q 'macvlan mode private'; then
      NETNS+=("$ns")
    fi
  done
fi

unmount_under() { # unmount_under DIR: every mount at or below DIR, deepest first
  local dir=$1 m
  [[ -e $dir ]] || return 0
  while read -r m; do
    m=$(printf '%b' "$m")
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "could not unmount $m"
  done < <(findmnt -rn -o TARGET | awk -v d="$dir" '$0 == d || index($0, d "/") == 1' | sort -r)
  return 0
}

if ((${#NETNS[@]})); then
  mapfile -t NETNS < <(printf '%s\n' "${NETNS[@]}" | sed 's#^/var/run/#/run/#' | grep '^/run/netns/' | sort -u |
    while read -r ns; do [[ -e $ns ]] && echo "$ns"; done)
fi
if ((${#NETNS[@]})); then
  log "removing ${#NETNS[@]} pod network namespace(s)"
  for ns in "${NETNS[@]}"; do
    [[ -e $ns ]] || continue
    umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null || true
    rm -f "$ns"
  done
fi

unmount_under "$RUN"
unmount_under "$KUBELET_ROOT"
unmount_under "$CTR_ROOT"
unmount_under "$STATE"

if ip link show "$VETH_A" >/dev/null 2>&1; then
  log "removing veth $VETH_A"
  ip link del "$VETH_A" 2>/dev/null || true
fi

# KUBE-* chains (the kubelet's), in every table and iptables flavour that has
# some; rules elsewhere that jump to them are deleted one by one.
clean_kube_chains() {
  local ipt=$1 t rules chains r c tables=(filter nat mangle raw security) names
  command -v "$ipt" >/dev/null || return 0
  case $ipt in
    # Merely listing a legacy table instantiates it in the kernel: look only
    # at the legacy tables that already exist.
    iptables-legacy) names=/proc/net/ip_tables_names ;;
    ip6tables-legacy) names=/proc/net/ip6_tables_names ;;
    *) names= ;;
  esac
  if [[ -n $names ]]; then
    [[ -r $names ]] || return 0
    mapfile -t tables <"$names"
  fi
  for t in "${tables[@]}"; do
    rules=$(timeout 10 "$ipt" -w 5 -t "$t" -S 2>/dev/null) || continue
    chains=$(awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}' <<<"$rules")
    [[ -n $chains ]] || continue
    log "$ipt -t $t: removing chains ${chains//$'\n'/ }"
    while read -r r; do
      [[ -n $r ]] || continue
      eval "$ipt -w 5 -t $t -D ${r#-A }" 2>/dev/null || true
    done < <(awk '$1 == "-A" && $2 !~ /^KUBE-/ && / -j KUBE-/' <<<"$rules")
    for c in $chains; do "$ipt" -w 5 -t "$t" -F "$c" 2>/dev/null || true; done
    for c in $chains; do "$ipt" -w 5 -t "$t" -X "$c" 2>/dev/null || log "could not delete $ipt -t $t $c"; done
  done
  return 0
}
for ipt in iptables ip6tables iptables-legacy ip6tables-legacy; do
  clean_kube_chains "$ipt"
done

mapfile -t cg < <(kubepods_dirs)
for d in "${cg[@]}"; do
  find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  [[ -d $d ]] && log "cgroup $d still busy"
done

# /var/log/containers links the kubelet made into our pod logs.
if [[ -d /var/log/containers ]]; then
  find /var/log/containers -maxdepth 1 -type l -lname "$POD_LOGS/*" -delete 2>/dev/null || true
  rmdir /var/log/containers 2>/dev/null || true
fi
# CNI's result cache entries of our network and of the loopback network of
# our sandboxes (other networks' and other runtimes' entries stay).
rm -f /var/lib/cni/results/"$CNI_NET"-* 2>/dev/null || true
for id in "${ids[@]}"; do rm -f "/var/lib/cni/results/cni-loopback-$id-lo"; done
rmdir /var/lib/cni/results /var/lib/cni 2>/dev/null || true

# The provisioner's volumes go with etcd's data, which held their claims
# (their mounts went above, and their loop devices with them).
rm -rf "$RUN" "$KUBELET_ROOT" "$POD_LOGS" "$STATE/etcd" "$CNI_IPAM_DIR" "$STATE/volume-plugins" "$VOLUMES_DIR"

# Fixed host paths a kubelet writes whatever its --root-dir (device-plugins
# under /var/lib/kubelet, the default flexvolume dir) and the kubelet's
# default state and pod-log dirs: removed when no other kubelet runs here.
if ! pgrep -x kubelet >/dev/null; then
  unmount_under /var/lib/kubelet
  rm -rf /var/lib/kubelet /var/log/pods
  rmdir /usr/libexec/kubernetes/kubelet-plugins/volume/exec /usr/libexec/kubernetes/kubelet-plugins/volume \
    /usr/libexec/kubernetes/kubelet-plugins /usr/libexec/kubernetes 2>/dev/null || true
fi
# containerd's /run/netns (a bind mount of itself, as iproute2 makes it),
# when no namespace at all is left in it.
if [[ -d /run/netns && -z $(ls -A /run/netns 2>/dev/null) ]]; then
  if findmnt -rn /run/netns >/dev/null 2>&1; then umount /run/netns 2>/dev/null || true; fi
  rmdir /run/netns 2>/dev/null || true
fi
if $PURGE; then
  log "purging $STATE and $KUBECONFIG_OUT"
  unmount_under "$STATE"
  rm -rf "$STATE" "$KUBECONFIG_OUT"
fi

# Report anything of ours that survived.
left=()
for c in containerd "${COMPONENTS[@]}"; do comp_pid "$c" >/dev/null && left+=("$c"); done
mapfile -t shims < <(our_shim_pids)
((${#shims[@]})) && left+=("shims:${shims[*]}")
findmnt -rn -o TARGET | grep -qE "^($STATE|$RUN)(/|$)" && left+=("mounts")
ip link show "$VETH_A" >/dev/null 2>&1 && left+=("veth")
if ((${#left[@]})); then
  log "WARNING: still present: ${left[*]}"
  exit 1
fi
rm -f "$LOCKFILE"
log "down in $(since "$T0")s"
