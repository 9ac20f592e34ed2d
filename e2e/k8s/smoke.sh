#!/usr/bin/env bash
# Smoke test of the local control plane. Starts a cluster with up.sh (and stops
# it on exit) unless SKEIN_K8S_SMOKE_REUSE=1 and KUBECONFIG point at a running one.
# Every wait is bounded; the whole run is bounded by SKEIN_K8S_SMOKE_TIMEOUT (600s).
# Exit code 0 only if every check passed. Last line: "N passed, N failed".
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ -z ${SKEIN_K8S_SMOKE_INNER:-} ]]; then
  export SKEIN_K8S_SMOKE_INNER=1
  exec timeout --kill-after=30 "${SKEIN_K8S_SMOKE_TIMEOUT:-600}" "$0" "$@"
fi

if [[ ${SKEIN_K8S_SMOKE_REUSE:-0} == 1 && -n ${KUBECONFIG:-} ]]; then
  KUBECTL=${SKEIN_K8S_BIN:-$(dirname "$(command -v kubectl)")}/kubectl
else
  export SKEIN_K8S_STATE=${SKEIN_K8S_STATE:-${TMPDIR:-/tmp}/skein-k8s-smoke-$$}
  trap '"$HERE/down.sh"' EXIT
  t0=$(date +%s)
  export KUBECONFIG=$("$HERE/up.sh")
  echo "[smoke] cluster up in $(( $(date +%s) - t0 ))s"
  # shellcheck disable=SC1091
  source "$SKEIN_K8S_STATE/env"
  KUBECTL=$SKEIN_K8S_BIN/kubectl
fi
k() { "$KUBECTL" "$@"; }

PASS=0 FAIL=0
check() { # description cmd...
  local what=$1; shift
  if "$@"; then echo "[smoke] PASS: $what"; PASS=$((PASS + 1))
  else echo "[smoke] FAIL: $what"; FAIL=$((FAIL + 1)); fi
}
# until_ok timeout cmd... : poll until cmd succeeds (silently) or timeout
until_ok() {
  local end=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do (( $(date +%s) < end )) || return 1; sleep 0.5; done
}
not() { ! "$@" >/dev/null 2>&1; }
eq() { [[ "$(eval "$1" 2>/dev/null)" == "$2" ]]; }  # eq 'cmd' expected

NS=smoke
k create namespace $NS >/dev/null

echo "[smoke] versions: $(k version -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); print("client", d["clientVersion"]["gitVersion"], "server", d["serverVersion"]["gitVersion"])')"

# ---------------------------------------------------------------- CRD + CR
k apply -f - >/dev/null <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.smoke.skein.dev
spec:
  group: smoke.skein.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [replicas]
            properties:
              replicas: {type: integer, minimum: 1}
          status:
            type: object
            properties:
              ready: {type: boolean}
EOF
check "CRD becomes Established" k wait --for=condition=Established crd/widgets.smoke.skein.dev --timeout=30s
k -n $NS apply -f - >/dev/null <<'EOF'
apiVersion: smoke.skein.dev/v1alpha1
kind: Widget
metadata: {name: w1}
spec: {replicas: 3}
EOF
check "custom resource created and read back" eq "k -n $NS get widget w1 -o jsonpath={.spec.replicas}" 3
check "CRD schema validation rejects replicas=0" \
  not k -n $NS create -f - <<<'{"apiVersion":"smoke.skein.dev/v1alpha1","kind":"Widget","metadata":{"name":"bad"},"spec":{"replicas":0}}'
k -n $NS patch widget w1 --subresource=status --type=merge -p '{"status":{"ready":true}}' >/dev/null
check "status subresource patch" eq "k -n $NS get widget w1 -o jsonpath={.status.ready}" true

# ------------------------------------------------- StatefulSet + headless Service
k -n $NS apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Service
metadata: {name: broker}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: broker}
  ports: [{name: kafka, port: 9092}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: broker}
spec:
  serviceName: broker
  replicas: 3
  podManagementPolicy: Parallel
  selector: {matchLabels: {app: broker}}
  template:
    metadata: {labels: {app: broker}}
    spec:
      containers:
      - name: broker
        image: skein-broker:e2e
        ports: [{name: kafka, containerPort: 9092}]
        volumeMounts: [{name: data, mountPath: /var/lib/skein}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
EOF
check "3 StatefulSet pods exist" until_ok 60 eq "k -n $NS get pods -l app=broker -o name | wc -l" 3
check "3 PVCs bound by kwok's fake provisioner (default StorageClass)" until_ok 60 \
  eq "k -n $NS get pvc -o jsonpath='{range .items[*]}{.status.phase}{\"\\n\"}{end}' | grep -c Bound" 3
check "3 pods Ready (kwok)" k -n $NS wait --for=condition=Ready pod -l app=broker --timeout=60s
check "StatefulSet status.readyReplicas=3" until_ok 60 eq "k -n $NS get sts broker -o jsonpath={.status.readyReplicas}" 3
check "pods bound to kwok nodes by kube-scheduler" \
  eq "k -n $NS get pods -l app=broker -o jsonpath='{range .items[*]}{.spec.nodeName}{\"\\n\"}{end}' | grep -c '^kwok-node-'" 3
check "pods have a pod IP" \
  eq "k -n $NS get pods -l app=broker -o jsonpath='{range .items[*]}{.status.podIP}{\"\\n\"}{end}' | grep -cE '^[0-9.]+$'" 3
k -n $NS get pods -l app=broker -o wide
POD_CIDR=${SKEIN_K8S_POD_CIDR:-127.244.0.0/16}
if [[ $POD_CIDR != 127.* ]]; then
  check "EndpointSlice of headless Service lists 3 addresses" until_ok 60 \
    eq "k -n $NS get endpointslices -l kubernetes.io/service-name=broker -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]}{\"\\n\"}{end}' | grep -c ." 3
else
  echo "[smoke] (loopback pod CIDR $POD_CIDR: EndpointSlices reject 127/8 addresses; run under netns.sh to check them)"
fi

# Back pod broker-0 with a real process bound to its pod IP, as the e2e runner
# will do with skein-broker, and reach it through the IP the API reports.
IP0=$(k -n $NS get pod broker-0 -o jsonpath='{.status.podIP}')
python3 -m http.server --bind "$IP0" 9092 --directory "$HERE" >/dev/null 2>&1 &
srv=$!
check "a process bound to pod IP $IP0:9092 is reachable at the pod's IP" until_ok 15 \
  curl -fsS -o /dev/null "http://$IP0:9092/README.md"
if [[ -n ${SKEIN_K8S_HOSTS_FILE:-} ]]; then  # under netns.sh: private /etc/hosts
  echo "$IP0 broker-0.broker.$NS.svc.cluster.local broker-0.broker.$NS.svc" >>"$SKEIN_K8S_HOSTS_FILE"
  check "pod DNS name broker-0.broker.$NS.svc resolves via the netns hosts file" \
    curl -fsS -o /dev/null "http://broker-0.broker.$NS.svc:9092/README.md"
fi
kill $srv; wait $srv 2>/dev/null || true

# Readiness owned by the runner: kwok leaves Ready=False on annotated pods.
k -n $NS apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: gated
  annotations: {e2e.skein.dev/readiness: external}
spec:
  containers: [{name: broker, image: skein-broker:e2e}]
EOF
phase_ready() { k -n $NS get pod "${1:-gated}" -o jsonpath='{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}'; }
cond_of() { k -n $NS get pod "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}"; }
check "annotated pod: Running with pod IP, Ready=False" until_ok 60 eq phase_ready Running/False
check "annotated pod: has a pod IP" eq "k -n $NS get pod gated -o jsonpath={.status.podIP} | grep -c ." 1
k -n $NS patch pod gated --subresource=status --type=strategic \
  -p '{"status":{"conditions":[{"type":"Ready","status":"True"},{"type":"ContainersReady","status":"True"}]}}' >/dev/null
sleep 2
check "runner-set Ready=True sticks (kwok does not revert it)" eq phase_ready Running/True
check "the strategic status patch keeps the other conditions" eq "cond_of gated Initialized" True
k -n $NS delete pod gated --wait=false >/dev/null

# The operator's broker pods (app.kubernetes.io/name=skein AND component=broker) start not
# ready too: pod_runner.py's probes decide. Other pods are Ready at once (helm --wait needs it).
k -n $NS apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: skein-broker-pod
  labels: {app.kubernetes.io/name: skein, app.kubernetes.io/component: broker}
spec:
  containers: [{name: broker, image: skein-broker:e2e}]
---
apiVersion: v1
kind: Pod
metadata:
  name: skein-other-pod
  labels: {app.kubernetes.io/name: skein, app.kubernetes.io/component: operator}
spec:
  containers: [{name: operator, image: skein-operator:e2e}]
EOF
check "broker pod (name=skein, component=broker): Running, Ready=False" \
  until_ok 60 eq "phase_ready skein-broker-pod" Running/False
check "broker pod: ContainersReady=False, container started=false" \
  eq "cond_of skein-broker-pod ContainersReady; k -n $NS get pod skein-broker-pod -o jsonpath=/{.status.containerStatuses[0].started}" False/false
check "other skein pod (component=operator): Ready at once" until_ok 60 eq "phase_ready skein-other-pod" Running/True
k -n $NS delete pod skein-broker-pod skein-other-pod --wait=false >/dev/null

recreated() { local u; u=$(k -n $NS get pod "$1" -o jsonpath='{.metadata.uid}') && [[ -n $u && $u != "$2" ]]; }
old_uid=$(k -n $NS get pod broker-1 -o jsonpath='{.metadata.uid}')
k -n $NS delete pod broker-1 --wait=false >/dev/null
check "deleted pod broker-1 is recreated (new UID)" until_ok 60 \
  recreated broker-1 "$old_uid"
check "recreated broker-1 keeps its PVC data-broker-1 (same volume)" \
  eq "k -n $NS get pvc data-broker-1 -o jsonpath={.status.phase}" Bound
check "recreated broker-1 becomes Ready" k -n $NS wait --for=condition=Ready pod/broker-1 --timeout=60s

k -n $NS scale sts broker --replicas=1 >/dev/null
check "scale down 3->1 removes broker-2 and broker-1" until_ok 60 eq "k -n $NS get pods -l app=broker -o name" pod/broker-0
k -n $NS scale sts broker --replicas=3 >/dev/null
check "scale up 1->3 Ready again" until_ok 60 eq "k -n $NS get sts broker -o jsonpath={.status.readyReplicas}" 3

# ---------------------------------------------------------------- PDB status (disruption controller)
k -n $NS apply -f - >/dev/null <<'EOF'
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: broker}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: broker}}
EOF
check "PDB status currentHealthy=3, disruptionsAllowed=1" until_ok 60 \
  eq "k -n $NS get pdb broker -o jsonpath='{.status.currentHealthy}/{.status.disruptionsAllowed}'" 3/1

# ---------------------------------------------------------------- Deployment (operator's own workload)
k -n $NS create deployment op --image=skein-operator:e2e --replicas=1 >/dev/null
check "Deployment becomes Available" k -n $NS wait --for=condition=Available deploy/op --timeout=60s

# ---------------------------------------------------------------- helm install (how the chart will be installed)
HELM=$(dirname "$KUBECTL")/helm
if [[ -x $HELM ]]; then
  chartdir=$(mktemp -d)
  (cd "$chartdir" && "$HELM" create demo >/dev/null)
  check "helm install --wait of a generated chart (Deployment+Service+SA) succeeds" \
    "$HELM" install demo "$chartdir/demo" -n $NS --wait --timeout 90s
  check "helm release is deployed" eq "'$HELM' -n $NS status demo -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"info\"][\"status\"])'" deployed
  check "helm uninstall" "$HELM" uninstall demo -n $NS --wait --timeout 60s
  rm -rf "$chartdir"
fi

# ---------------------------------------------------------------- garbage collector
k -n $NS create configmap owner >/dev/null
owner_uid=$(k -n $NS get configmap owner -o jsonpath='{.metadata.uid}')
k -n $NS apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: owned
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: $owner_uid}
data: {k: v}
EOF
k -n $NS delete configmap owner >/dev/null
check "ownerReference'd ConfigMap garbage-collected after owner deletion" until_ok 60 \
  not k -n $NS get configmap owned
# Owner = custom resource (what the operator does: StatefulSet owned by KafkaCluster)
w_uid=$(k -n $NS get widget w1 -o jsonpath='{.metadata.uid}')
k -n $NS apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: widget-config
  ownerReferences:
  - {apiVersion: smoke.skein.dev/v1alpha1, kind: Widget, name: w1, uid: $w_uid, controller: true, blockOwnerDeletion: true}
EOF
both_gone() { not k -n $NS get configmap widget-config && not k -n $NS get widget w1; }
k -n $NS delete widget w1 --cascade=foreground --wait=false >/dev/null
check "foreground deletion of a custom resource deletes its dependents, then itself" until_ok 60 \
  both_gone
k -n $NS delete sts broker --wait=false >/dev/null
check "deleting the StatefulSet garbage-collects its pods" until_ok 60 eq "k -n $NS get pods -l app=broker -o name | wc -l" 0

# ---------------------------------------------------------------- ServiceAccount token + RBAC
k -n $NS create serviceaccount operator >/dev/null
k -n $NS create role cm-reader --verb=get,list,watch --resource=configmaps >/dev/null
k -n $NS create rolebinding operator-cm --role=cm-reader --serviceaccount=$NS:operator >/dev/null
TOKEN=$(k -n $NS create token operator --duration=10m)
SERVER=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
# A token-only client, as the operator would be (no admin client certificate).
ksa() { "$KUBECTL" --kubeconfig=/dev/null --server="$SERVER" --insecure-skip-tls-verify --token="$TOKEN" "$@"; }
check "ServiceAccount token is accepted (list configmaps allowed)" ksa -n $NS get configmaps -o name
check "token authenticates as the ServiceAccount" \
  eq "ksa auth whoami -o jsonpath={.status.userInfo.username}" "system:serviceaccount:$NS:operator"
if [[ ${SKEIN_K8S_AUTHZ:-Node,RBAC} == *RBAC* ]]; then
  check "RBAC denies what the Role does not grant (list secrets)" not ksa -n $NS get secrets
fi

# ---------------------------------------------------------------- namespace deletion with a finalizer
k create namespace fin >/dev/null
k -n fin apply -f - >/dev/null <<'EOF'
apiVersion: smoke.skein.dev/v1alpha1
kind: Widget
metadata: {name: held, finalizers: [smoke.skein.dev/hold]}
spec: {replicas: 1}
EOF
k -n fin create configmap plain >/dev/null
held() {
  [[ -n $(k -n fin get widget held -o jsonpath='{.metadata.deletionTimestamp}') ]] &&
  [[ $(k get ns fin -o jsonpath='{.status.conditions[?(@.type=="NamespaceFinalizersRemaining")].status}') == True ]]
}
k delete namespace fin --wait=false >/dev/null
check "namespace goes Terminating" until_ok 30 eq "k get ns fin -o jsonpath={.status.phase}" Terminating
check "namespace controller deletes unfinalized objects" until_ok 60 not k -n fin get configmap plain
check "finalizer holds the CR (deletionTimestamp set) and the namespace" until_ok 60 \
  held
sleep 3
check "namespace still present while the finalizer remains" eq "k get ns fin -o jsonpath={.status.phase}" Terminating
k -n fin patch widget held --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]' >/dev/null
check "namespace disappears once the finalizer is removed" until_ok 60 not k get ns fin

echo "$PASS passed, $FAIL failed"
(( FAIL == 0 ))
