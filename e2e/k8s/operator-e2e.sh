#!/usr/bin/env bash
# The operator's e2e suite on a real Kubernetes API server (this machine's
# e2e/k8s control plane), with a real skein-broker process behind every
# broker pod (pod_runner.py). Builds what is missing: the control plane
# binaries (e2e/k8s/build.sh, cached), the Python venv (e2e/setup.sh), the
# broker and operator (release). Runs inside netns.sh (needs root): pod IPs
# are local addresses there and /etc/hosts is private, standing in for
# cluster DNS.
#   e2e/k8s/operator-e2e.sh [pytest args]
#     test_operator.py, test_certificates.py (rotation on a short clock,
#     bring-your-own CAs) and test_day2.py (day-2 safety: rolls paced by
#     readiness, an image roll undone, evictions, zones) on one control
#     plane, then test_upgrade.py (a rolling upgrade from the previous
#     release, built by build-previous.sh) on its own
#   e2e/k8s/operator-e2e.sh --cluster-script [-- pytest args]
#     the same suite run by cluster-e2e.sh (the script for real clusters) in
#     a runner pod on this control plane
# Env: SKEIN_BROKER_BIN, SKEIN_OPERATOR_BIN (default: target/release/...).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
export SKEIN_BROKER_BIN=${SKEIN_BROKER_BIN:-$TARGET/release/skein-broker}
export SKEIN_OPERATOR_BIN=${SKEIN_OPERATOR_BIN:-$TARGET/release/skein-operator}
if [[ ! -x $SKEIN_BROKER_BIN || ! -x $SKEIN_OPERATOR_BIN ]]; then
  (cd "$ROOT" && cargo build --release -p skein-broker -p skein-operator)
fi
bash "$HERE/build.sh" >/dev/null
"$ROOT/e2e/setup.sh" >/dev/null
export SKEIN_K8S_POD_CIDR=${SKEIN_K8S_POD_CIDR:-198.18.0.0/16}
# The operator pods read their ServiceAccount token where a real pod does; the
# test bind-mounts it there inside its private mount namespace. The mount
# point has to exist on the real filesystem: remove it again if we made it.
SA=/var/run/secrets/kubernetes.io/serviceaccount
made_sa=0
[[ -e $SA ]] || made_sa=1
rc=0
if [[ ${1:-} == --cluster-script ]]; then
  # The same suite through cluster-e2e.sh (the script for real clusters), its
  # runner pod on this control plane: see cluster_e2e_selftest.py.
  shift
  export SKEIN_K8S_EXEC_PATH="$ROOT/e2e/.venv/bin:/usr/local/bin:/usr/bin:/bin"
  "$HERE/netns.sh" "$ROOT/e2e/.venv/bin/python" "$HERE/cluster_e2e_selftest.py" "$@" || rc=$?
else
  # test_upgrade.py rolls from the previous release (upgrade-from.env): its
  # binaries and chart, built once and cached.
  SKEIN_PREV_DIR=$(bash "$HERE/build-previous.sh")
  export SKEIN_PREV_DIR
  # One session, one control plane (conftest.py) for the three modules; test_upgrade.py starts
  # its own from the previous release's chart, in a session of its own so that the first
  # control plane is gone by then (they would share the pod network). Exit status 5: the
  # arguments (-k) selected none of its tests.
  pytest=("$HERE/netns.sh" "$ROOT/e2e/.venv/bin/python" -m pytest -v -s -p no:cacheprovider --durations=15)
  r1=0 r2=0
  "${pytest[@]}" "$HERE/test_operator.py" "$HERE/test_certificates.py" "$HERE/test_day2.py" "$@" || r1=$?
  "${pytest[@]}" "$HERE/test_upgrade.py" "$@" || r2=$?
  if [[ $r1 == 5 && $r2 == 5 ]]; then rc=5
  elif [[ $r1 != 0 && $r1 != 5 ]]; then rc=$r1
  elif [[ $r2 != 0 && $r2 != 5 ]]; then rc=$r2
  fi
fi
if [[ $made_sa == 1 ]]; then
  rmdir "$SA" /var/run/secrets/kubernetes.io /var/run/secrets 2>/dev/null || true
fi
exit $rc
