#!/usr/bin/env bash
# Start a local Kubernetes control plane for Skein's operator e2e tests:
#   etcd -> kube-apiserver -> kube-controller-manager, kube-scheduler, kwok
# plus SKEIN_K8S_NODES fake (kwok) nodes. No kubelet, no container runtime:
# pods are scheduled, then kwok marks them Running/Ready with a fake pod IP.
#
# Prints the admin kubeconfig path on stdout (the only stdout line); all
# progress goes to stderr. Writes $STATE/env (source it for KUBECONFIG etc.).
# If the cluster in $STATE is already up and healthy, just prints the path.
#
# Env:
#   SKEIN_K8S_STATE   state dir (default ${TMPDIR:-/tmp}/skein-k8s-$UID); one cluster per dir
#   SKEIN_K8S_NODES   number of fake nodes (default 3; zones zone-a/b/c round robin)
#   SKEIN_K8S_POD_CIDR pod IPs kwok hands out. Default 127.244.0.0/16 (loopback:
#                     bindable by a broker process, but EndpointSlices reject
#                     loopback addresses); under netns.sh 198.18.0.0/16. See README.
#   SKEIN_K8S_AUTHZ   --authorization-mode (default Node,RBAC; AlwaysAllow is faster to reason about)
#   SKEIN_K8S_V       log verbosity of the control-plane components (default 1)
#   SKEIN_K8S_BIN_DIR use the binaries in this dir (default: build.sh's cache)
#   SKEIN_K8S_TIMEOUT seconds to wait for readiness (default 120)
#   SKEIN_K8S_EXEC_PATH PATH of commands `kubectl exec`-ed into skein-e2e-runner pods
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$HERE/versions.env"

STATE=${SKEIN_K8S_STATE:-${TMPDIR:-/tmp}/skein-k8s-$(id -u)}
NODES=${SKEIN_K8S_NODES:-3}
POD_CIDR=${SKEIN_K8S_POD_CIDR:-127.244.0.0/16}
SVC_CIDR=10.96.0.0/16
AUTHZ=${SKEIN_K8S_AUTHZ:-Node,RBAC}
V=${SKEIN_K8S_V:-1}
TIMEOUT=${SKEIN_K8S_TIMEOUT:-120}

log() { echo "[k8s-up] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# SKEIN_K8S_BIN_DIR: use prebuilt binaries there instead of build.sh's cache.
python3 -c 'import ipaddress,sys; ipaddress.ip_network(sys.argv[1])' "$POD_CIDR" 2>/dev/null \
  || die "SKEIN_K8S_POD_CIDR=$POD_CIDR is not a CIDR"
BIN=${SKEIN_K8S_BIN_DIR:-$("$HERE/build.sh")}
KUBECTL="$BIN/kubectl"

alive() { [[ -f $STATE/pids/$1 ]] && kill -0 "$(cat "$STATE/pids/$1")" 2>/dev/null; }

# Already up?
if [[ -f $STATE/kubeconfig ]] && alive kube-apiserver && alive etcd \
   && "$KUBECTL" --kubeconfig "$STATE/kubeconfig" get --raw /readyz >/dev/null 2>&1; then
  log "cluster in $STATE already up"
  echo "$STATE/kubeconfig"
  exit 0
fi
if [[ -d $STATE ]]; then
  log "stale state in $STATE: tearing it down first"
  SKEIN_K8S_STATE=$STATE "$HERE/down.sh" >&2 || true
fi

mkdir -p "$STATE"/{pki,pids,logs}
STATE=$(cd "$STATE" && pwd)
PKI=$STATE/pki

on_err() {
  log "startup failed; last log lines:"
  for f in "$STATE"/logs/*.log; do [[ -f $f ]] && { echo "== $f" >&2; tail -n 15 "$f" >&2; }; done
  SKEIN_K8S_KEEP=${SKEIN_K8S_KEEP:-1} SKEIN_K8S_STATE=$STATE "$HERE/down.sh" >&2 || true
}
trap 'rc=$?; if ((rc != 0)); then on_err; fi; exit $rc' EXIT

# ---- ports: free ephemeral ports on 127.0.0.1 (several clusters may coexist)
read -r ETCD_PORT ETCD_PEER_PORT API_PORT KCM_PORT SCHED_PORT KWOK_PORT < <(python3 - <<'EOF'
import socket
ss=[socket.socket() for _ in range(6)]
for s in ss: s.bind(("127.0.0.1",0))
print(*[s.getsockname()[1] for s in ss])
EOF
)

# ---- PKI (openssl): CA, serving cert, client certs, service-account key pair
t0=$(date +%s)
key() { openssl genrsa -out "$PKI/$1.key" 2048 2>/dev/null; }
cert() { # name subject extensions
  openssl req -new -key "$PKI/$1.key" -subj "$2" -out "$PKI/$1.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -out "$PKI/$1.crt" -extfile <(printf '%b' "$3") 2>/dev/null
  rm -f "$PKI/$1.csr"
}
key ca
openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=skein-e2e-ca" -days 3650 -sha256 \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
  -out "$PKI/ca.crt" 2>/dev/null
key apiserver
cert apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1"
CLIENT_EXT="basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth"
key admin;      cert admin      "/O=system:masters/CN=skein-e2e-admin" "$CLIENT_EXT"
key kcm;        cert kcm        "/CN=system:kube-controller-manager" "$CLIENT_EXT"
key scheduler;  cert scheduler  "/CN=system:kube-scheduler" "$CLIENT_EXT"
key kwok;       cert kwok       "/O=system:masters/CN=kwok" "$CLIENT_EXT"
key front-proxy; cert front-proxy "/CN=front-proxy-client" "$CLIENT_EXT"
key sa
openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
log "PKI generated in $(( $(date +%s) - t0 ))s"

b64() { base64 -w0 <"$1"; }
kubeconfig() { # file user
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: skein-e2e
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(b64 "$PKI/$2.crt")
    client-key-data: $(b64 "$PKI/$2.key")
contexts:
- name: skein-e2e
  context: {cluster: skein-e2e, user: $2}
current-context: skein-e2e
EOF
  chmod 600 "$1"
}
kubeconfig "$STATE/kubeconfig" admin
for c in kcm scheduler kwok; do kubeconfig "$STATE/$c.kubeconfig" $c; done

start() { # name cmd...
  local name=$1; shift
  setsid nohup "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/pids/$name"
}
wait_for() { # description timeout cmd...
  local what=$1 t=$2; shift 2
  local end=$(( $(date +%s) + t ))
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < end )) || die "timed out after ${t}s waiting for $what"
    sleep 0.5
  done
}

# ---- etcd (tmp data dir, no fsync: it is throwaway)
start etcd "$BIN/etcd" --name skein-e2e --data-dir "$STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "skein-e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync --log-level warn --quota-backend-bytes $((2*1024*1024*1024))
wait_for etcd "$TIMEOUT" curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
log "etcd up on 127.0.0.1:$ETCD_PORT"

# ---- kube-apiserver
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address 127.0.0.1 \
  --endpoint-reconciler-type none \
  --service-cluster-ip-range "$SVC_CIDR" \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --requestheader-client-ca-file "$PKI/ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file "$PKI/front-proxy.crt" --proxy-client-key-file "$PKI/front-proxy.key" \
  --authorization-mode "$AUTHZ" --allow-privileged=true --profiling=false --v "$V"
wait_for "kube-apiserver /readyz" "$TIMEOUT" "$KUBECTL" --kubeconfig "$STATE/kubeconfig" get --raw /readyz
log "kube-apiserver ready on https://127.0.0.1:$API_PORT"

# ---- kube-controller-manager: every default controller (statefulset, replicaset,
# deployment, garbagecollector, namespace, serviceaccount(-token), endpointslice,
# disruption, nodelifecycle, job, ...). No cloud provider => cloud controllers skip.
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig "$STATE/kcm.kubeconfig" \
  --authentication-kubeconfig "$STATE/kcm.kubeconfig" --authorization-kubeconfig "$STATE/kcm.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
  --leader-elect=false --controllers '*' --use-service-account-credentials=true \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --service-cluster-ip-range "$SVC_CIDR" --profiling=false --v "$V"

# ---- kube-scheduler: kwok does not bind pods, a real scheduler sets spec.nodeName
start kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig "$STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig "$STATE/scheduler.kubeconfig" --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --leader-elect=false --profiling=false --v "$V"

# ---- kwok: fakes the kubelet of every node annotated kwok.x-k8s.io/node=fake.
# Its server (the nodes' kubelet endpoint, --node-port) answers `kubectl exec`
# into pods of namespace skein-e2e-runner by running the command here, in
# $STATE/exec with KUBECONFIG set and SKEIN_K8S_EXEC_PATH as PATH: the runner
# pod of e2e/k8s/cluster-e2e.sh (see cluster-e2e-selftest.sh).
mkdir -p "$STATE/exec"
cat >"$STATE/kwok-exec.yaml" <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: skein-e2e-runner
spec:
  selector:
    matchNamespaces: [skein-e2e-runner]
  execs:
  - local:
      workDir: $STATE/exec
      envs:
      - {name: KUBECONFIG, value: $STATE/kubeconfig}
      - {name: PATH, value: "${SKEIN_K8S_EXEC_PATH:-/usr/local/bin:/usr/bin:/bin}"}
EOF
start kwok "$BIN/kwok" --kubeconfig "$STATE/kwok.kubeconfig" \
  --config "$HERE/kwok/stages.yaml" --config "$STATE/kwok-exec.yaml" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --cidr "$POD_CIDR" --node-ip 127.0.0.1 --node-port "$KWOK_PORT" --server-address "127.0.0.1:$KWOK_PORT" \
  --node-lease-duration-seconds 40 --v "$( ((V > 2)) && echo DEBUG || echo INFO)"

# ---- fake nodes
zones=(zone-a zone-b zone-c)
for ((i = 0; i < NODES; i++)); do
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: kwok-node-$i
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node-role.kubernetes.io/worker: ""
    topology.kubernetes.io/zone: ${zones[i % 3]}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
EOF
done | "$KUBECTL" --kubeconfig "$STATE/kubeconfig" apply -f - >&2

K() { "$KUBECTL" --kubeconfig "$STATE/kubeconfig" "$@"; }
# Default StorageClass served by kwok's fake provisioner stages (PVCs bind at once).
K apply -f "$HERE/kwok/storage-class.yaml" >&2
wait_for "default ServiceAccount (controller-manager)" "$TIMEOUT" K -n default get serviceaccount default
wait_for "kube-root-ca.crt ConfigMap" "$TIMEOUT" K -n default get configmap kube-root-ca.crt
K wait --for=condition=Ready node --all --timeout="${TIMEOUT}s" >&2
wait_for "kube-scheduler healthz" "$TIMEOUT" curl -fsSk "https://127.0.0.1:$SCHED_PORT/healthz"
wait_for "kube-controller-manager healthz" "$TIMEOUT" curl -fsSk "https://127.0.0.1:$KCM_PORT/healthz"

cat >"$STATE/env" <<EOF
export KUBECONFIG=$STATE/kubeconfig
export SKEIN_K8S_STATE=$STATE
export SKEIN_K8S_BIN=$BIN
export SKEIN_K8S_API=https://127.0.0.1:$API_PORT
export SKEIN_K8S_ETCD=http://127.0.0.1:$ETCD_PORT
export SKEIN_K8S_KWOK=127.0.0.1:$KWOK_PORT
export SKEIN_K8S_POD_CIDR=$POD_CIDR
EOF
trap - EXIT
log "cluster up ($NODES kwok nodes) in $STATE; source $STATE/env"
echo "$STATE/kubeconfig"
