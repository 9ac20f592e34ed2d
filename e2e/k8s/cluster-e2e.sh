#!/usr/bin/env bash
# The operator's e2e suite (e2e/k8s/test_operator.py) on a cluster of your
# own: kind, or any cluster your kubeconfig reaches.
#
#   e2e/k8s/cluster-e2e.sh --operator-image REPO:TAG --broker-image REPO:TAG [options] [-- pytest args]
#
# The suite installs the chart (release "skein" in namespace skein-system, the
# images under test), creates a KafkaCluster and Topics in namespace skein-e2e,
# produces and consumes through the pods' DNS names, deletes pods, scales, rolls
# and fails the operator over; then removes the namespaces and the release
# (the CRDs stay). Nothing named skein-system/skein-e2e may exist beforehand.
#
# Where it runs (Kafka clients must resolve pod DNS names):
#   default      in a runner pod in the cluster (namespace skein-e2e-runner,
#                ServiceAccount bound to cluster-admin, removed afterwards):
#                this script copies the suite, the chart and your kubectl and
#                helm binaries (linux/amd64 or the nodes' arch) into it, installs
#                the Python packages (e2e/requirements.txt) unless the image has
#                them, runs pytest there and streams its output.
#   --from-here  on this machine, with e2e/.venv (e2e/setup.sh): only where
#                this machine resolves and reaches pod names (inside the cluster
#                network).
#
# Options:
#   --runner-image IMG   image of the runner pod (default python:3.11-slim;
#                        needs python3, sh, tar, head; pip needs network access)
#   --keep               leave everything in place afterwards
# Env: KUBECTL, HELM (default: from PATH); POD_KUBECTL, POD_HELM: the binaries
# copied into the runner pod when yours are not linux builds for the nodes' arch.
# Needs images the nodes can pull (kind: `kind load docker-image`) and a
# default StorageClass. Build the images with docker/broker.Dockerfile and
# docker/operator.Dockerfile.
#
# Exec transport: the archive goes over stdin with a known length (`head -c`),
# and the suite's exit status comes back as a marker line, so the script does
# not depend on an exec implementation closing stdin or passing exit codes on.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
KUBECTL=${KUBECTL:-$(command -v kubectl || true)}
HELM=${HELM:-$(command -v helm || true)}
OPERATOR_IMAGE="" BROKER_IMAGE="" RUNNER_IMAGE=python:3.11-slim FROM_HERE=0 KEEP=0
PYTEST_ARGS=()
while (($#)); do
  case $1 in
    --operator-image) OPERATOR_IMAGE=$2; shift 2 ;;
    --broker-image) BROKER_IMAGE=$2; shift 2 ;;
    --runner-image) RUNNER_IMAGE=$2; shift 2 ;;
    --from-here) FROM_HERE=1; shift ;;
    --keep) KEEP=1; shift ;;
    --) shift; PYTEST_ARGS=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//;$d'; exit 0 ;;
    *) echo "cluster-e2e: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n $OPERATOR_IMAGE && -n $BROKER_IMAGE ]] || { echo "cluster-e2e: --operator-image and --broker-image are required" >&2; exit 2; }
[[ -x $KUBECTL ]] || { echo "cluster-e2e: kubectl not found (PATH or KUBECTL=)" >&2; exit 2; }
[[ -x $HELM ]] || { echo "cluster-e2e: helm not found (PATH or HELM=)" >&2; exit 2; }
if ((!FROM_HERE)) && [[ $(uname -s)/$(uname -m) != Linux/* && -z ${POD_KUBECTL:-} ]]; then
  echo "cluster-e2e: this is not Linux: set POD_KUBECTL and POD_HELM to linux builds for the runner pod" >&2
  exit 2
fi
K() { "$KUBECTL" "$@"; }
K version >/dev/null || { echo "cluster-e2e: the cluster does not answer (kubeconfig?)" >&2; exit 2; }

SUITE_ENV=(SKEIN_E2E_CLUSTER=existing "SKEIN_E2E_OPERATOR_IMAGE=$OPERATOR_IMAGE" "SKEIN_E2E_BROKER_IMAGE=$BROKER_IMAGE")
((KEEP)) && SUITE_ENV+=(SKEIN_E2E_KEEP=1)

if ((FROM_HERE)); then
  "$ROOT/e2e/setup.sh" >/dev/null
  exec env "${SUITE_ENV[@]}" SKEIN_E2E_KUBECTL="$KUBECTL" SKEIN_E2E_HELM="$HELM" \
    "$ROOT/e2e/.venv/bin/python" -m pytest -v -s -p no:cacheprovider "$HERE/test_operator.py" "${PYTEST_ARGS[@]}"
fi

RNS=skein-e2e-runner
POD=runner
DIR=/tmp/skein-e2e
cleanup() {
  ((KEEP)) && { echo "cluster-e2e: kept namespace $RNS (--keep)"; return; }
  K delete namespace "$RNS" --wait=false --ignore-not-found >/dev/null 2>&1 || true
  K delete clusterrolebinding skein-e2e-runner --ignore-not-found >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "cluster-e2e: runner pod $RNS/$POD ($RUNNER_IMAGE)"
K apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $RNS}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner, namespace: $RNS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: skein-e2e-runner}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: runner, namespace: $RNS}]
---
apiVersion: v1
kind: Pod
metadata: {name: $POD, namespace: $RNS, labels: {app.kubernetes.io/name: skein-e2e-runner}}
spec:
  serviceAccountName: runner
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  containers:
  - name: runner
    image: $RUNNER_IMAGE
    command: ["sleep", "86400"]
EOF
K -n "$RNS" wait --for=condition=Ready "pod/$POD" --timeout=300s >/dev/null

# The suite, the chart and the two CLIs, as one archive of known length.
stage=$(mktemp -d)
trap 'rm -rf "$stage"; cleanup' EXIT
mkdir -p "$stage/e2e/k8s" "$stage/e2e/tests" "$stage/bin" "$stage/charts"
cp "$HERE/test_operator.py" "$HERE/conftest.py" "$stage/e2e/k8s/"
cp "$ROOT/e2e/tests/util.py" "$ROOT/e2e/tests/brokers.py" "$ROOT/e2e/tests/pki.py" "$stage/e2e/tests/"
cp "$ROOT/e2e/requirements.txt" "$stage/e2e/"
cp -r "$ROOT/charts/skein" "$stage/charts/"
# The pod needs Linux builds of both: yours, or POD_KUBECTL/POD_HELM (for
# example when this machine is a Mac, or the nodes are arm64).
cp "${POD_KUBECTL:-$KUBECTL}" "$stage/bin/kubectl"
cp "${POD_HELM:-$HELM}" "$stage/bin/helm"
tar -C "$stage" -czf "$stage.tgz" .
size=$(wc -c <"$stage.tgz" | tr -d " ")
K -n "$RNS" exec -i "$POD" -- sh -c "mkdir -p $DIR && head -c $size | tar -xzf - -C $DIR && echo unpacked" <"$stage.tgz"
rm -f "$stage.tgz"

# In the pod: kubectl and helm use the runner's ServiceAccount (in-cluster
# configuration); clients resolve pod names through cluster DNS.
run="cd $DIR && export PATH=$DIR/bin:\$PATH ${SUITE_ENV[*]} SKEIN_E2E_KUBECTL=$DIR/bin/kubectl SKEIN_E2E_HELM=$DIR/bin/helm"
run+=" && { python3 -c 'import pytest, confluent_kafka' 2>/dev/null || python3 -m pip install -q -r e2e/requirements.txt; }"
# Each pytest argument quoted for the pod's shell (-k "a or b" stays one).
quoted=""
((${#PYTEST_ARGS[@]})) && quoted=$(printf '%q ' "${PYTEST_ARGS[@]}")
run+=" && python3 -m pytest -v -s -p no:cacheprovider e2e/k8s/test_operator.py $quoted"
run+="; echo \"skein-e2e-exit=\$?\""
out=$(mktemp)
K -n "$RNS" exec "$POD" -- sh -c "$run" 2>&1 | tee "$out" || true
rc=$(sed -n 's/^skein-e2e-exit=\([0-9]*\)$/\1/p' "$out" | tail -1)
rm -f "$out"
if [[ -z $rc ]]; then
  echo "cluster-e2e: the runner pod gave no exit status" >&2
  exit 1
fi
echo "cluster-e2e: suite exit status $rc"
exit "$rc"
