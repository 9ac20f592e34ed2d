#!/usr/bin/env bash
# Stop the control plane started by up.sh (same SKEIN_K8S_STATE) and remove its
# state dir. SKEIN_K8S_KEEP=1 keeps the state dir (logs, etcd data) for debugging.
set -uo pipefail
STATE=${SKEIN_K8S_STATE:-${TMPDIR:-/tmp}/skein-k8s-$(id -u)}
[[ -d $STATE ]] || { echo "[k8s-down] nothing in $STATE" >&2; exit 0; }

# SIGTERM everything we started (clients first), then wait for all of them.
pids=()
for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
  f=$STATE/pids/$name
  [[ -f $f ]] || continue
  pid=$(cat "$f")
  # Only signal the process we started (guards against PID reuse).
  if [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */$name ]]; then
    kill -TERM "$pid" 2>/dev/null && pids+=("$name:$pid")
  fi
  rm -f "$f"
done
for np in "${pids[@]}"; do
  pid=${np#*:}
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "[k8s-down] ${np%%:*} ($pid) did not stop in 10s: SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null
  fi
done

if [[ ${SKEIN_K8S_KEEP:-0} == 1 ]]; then
  echo "[k8s-down] stopped; state kept in $STATE" >&2
else
  rm -rf "$STATE"
  echo "[k8s-down] stopped; removed $STATE" >&2
fi
