#!/usr/bin/env bash
# Checks the Helm chart: helm lint, helm template (default values and a
# namespaced install), and that the chart's CRDs are exactly the generated
# ones (crds/yaml/, which `cargo test -p skein-crds` keeps equal to the Rust
# types); the monitoring objects (dashboard ConfigMap, PrometheusRule,
# ServiceMonitor, PodMonitor) on and off, and that the dashboard and alerts
# they carry are exactly observability/'s files. Installs helm from the Go
# module proxy when it is missing (and python3-yaml from Debian).
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
chart="$here/skein"
bin="${SKEIN_BIN_DIR:-$HOME/.cache/skein/bin}"

helm_bin() {
  if command -v helm >/dev/null 2>&1; then
    command -v helm
  elif [ -x "$bin/helm" ]; then
    echo "$bin/helm"
  else
    echo "installing helm $HELM_VERSION into $bin (go install; takes a few minutes)" >&2
    mkdir -p "$bin"
    GOBIN="$bin" GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
    echo "$bin/helm"
  fi
}
HELM="$(helm_bin)"
"$HELM" version --short

passed=0
failed=0
check() {
  local name="$1"; shift
  if "$@"; then
    echo "ok - $name"; passed=$((passed + 1))
  else
    echo "FAILED - $name"; failed=$((failed + 1))
  fi
}

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

check "helm lint" "$HELM" lint --strict "$chart"
check "helm lint (watched namespaces)" "$HELM" lint --strict "$chart" --set 'watchNamespaces={a,b}'
check "helm template (defaults)" sh -c "'$HELM' template skein '$chart' --namespace skein-system --include-crds > '$out/all.yaml'"
check "helm template (watched namespaces, no leader election)" sh -c \
  "'$HELM' template skein '$chart' --namespace skein-system --set 'watchNamespaces={team-a,team-b}' --set leaderElection.enabled=false --set replicaCount=1 > '$out/ns.yaml'"

# The CRDs in the chart are byte-for-byte the generated ones.
crds_equal() {
  diff -r "$root/crds/yaml" "$chart/crds"
}
check "chart CRDs equal crds/yaml" crds_equal

# ... and the rendered release carries every one of them.
rendered_crds() {
  grep -q '^  name: kafkaclusters.skein.dev$' "$out/all.yaml" &&
    grep -q '^  name: kafkausers.skein.dev$' "$out/all.yaml" &&
    grep -q '^  name: topics.skein.dev$' "$out/all.yaml"
}
check "rendered release includes every CRD" rendered_crds

# When the operator binary is built, its `crds` output is the chart's CRDs too.
binary_crds() {
  local op="${CARGO_TARGET_DIR:-$root/target}/debug/skein-operator"
  if [ ! -x "$op" ]; then
    (cd "$root" && cargo build -q -p skein-operator) || return 1
  fi
  diff <("$op" crds) <(for f in "$chart"/crds/*.yaml; do echo '---'; cat "$f"; done)
}
check "skein-operator crds equals the chart CRDs" binary_crds

rbac_shape() {
  grep -q '^kind: ClusterRole$' "$out/all.yaml" &&
    ! grep -q '^kind: ClusterRole$' "$out/ns.yaml" &&
    [ "$(grep -c '^kind: Role$' "$out/ns.yaml")" -eq 2 ] &&
    grep -q 'coordination.k8s.io' "$out/all.yaml" &&
    ! grep -q 'coordination.k8s.io' "$out/ns.yaml"
}
check "RBAC: ClusterRole for all namespaces, Roles per watched namespace, Lease role only with leader election" rbac_shape


# ---- monitoring: dashboard ConfigMap, PrometheusRule, ServiceMonitor, PodMonitor
if ! python3 -c 'import yaml' 2>/dev/null; then
  echo "installing python3-yaml (apt-get) for the monitoring checks" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-yaml >&2 ||
    { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-yaml >&2; }
fi
# Least privilege (issue #41): the operator's rules are the same in both shapes, name no wildcard
# and nothing cluster-scoped, and grant on Secrets only get/create/patch; a namespaced install binds
# them only in the watched namespaces.
rbac_least_privilege() {
  python3 - "$out/all.yaml" "$out/ns.yaml" <<'PY'
import sys, yaml
def docs(p): return [d for d in yaml.safe_load_all(open(p)) if d]
everywhere, ns = docs(sys.argv[1]), docs(sys.argv[2])
def rules(ds, kind): return [d for d in ds if d["kind"] == kind and not d["metadata"]["name"].endswith("leader-election")]
cr, roles = rules(everywhere, "ClusterRole"), rules(ns, "Role")
ok = len(cr) == 1 and len(roles) == 2
ok &= sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
ok &= all(r["rules"] == cr[0]["rules"] for r in roles)
ok &= sorted(b["metadata"]["namespace"] for b in ns if b["kind"] == "RoleBinding"
             and not b["metadata"]["name"].endswith("leader-election")) == ["team-a", "team-b"]
ok &= not any(d["kind"] in ("ClusterRole", "ClusterRoleBinding") for d in ns)
cluster_scoped = {"nodes", "namespaces", "customresourcedefinitions", "persistentvolumes", "clusterroles"}
for rule in cr[0]["rules"]:
    ok &= "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    ok &= not cluster_scoped & set(rule["resources"])
    if "secrets" in rule["resources"]:
        ok &= sorted(rule["verbs"]) == ["create", "get", "patch"]
    if set(rule["resources"]) & {"statefulsets", "serviceaccounts", "poddisruptionbudgets", "networkpolicies"}:
        ok &= "delete" not in rule["verbs"] and "update" not in rule["verbs"]
sys.exit(0 if ok else 1)
PY
}
check "RBAC least privilege: same rules in both shapes, no wildcard, nothing cluster-scoped, Secrets get/create/patch" rbac_least_privilege

obs="$root/observability"
monitoring_on=(--set monitoring.prometheusRule.enabled=true --set monitoring.serviceMonitor.enabled=true
  --set monitoring.podMonitor.enabled=true --set-string monitoring.prometheusRule.labels.release=kps)

# The chart carries copies of observability/'s dashboard and rules (Helm reads
# files only from inside the chart): they must be identical. To update them:
#   cp observability/skein-dashboard.json observability/skein-alerts.yaml charts/skein/files/
files_equal() {
  diff "$obs/skein-dashboard.json" "$chart/files/skein-dashboard.json" &&
    diff "$obs/skein-alerts.yaml" "$chart/files/skein-alerts.yaml"
}
check "chart files/ equal observability/skein-dashboard.json and skein-alerts.yaml" files_equal

check "helm lint (all monitoring on)" "$HELM" lint --strict "$chart" "${monitoring_on[@]}"
check "helm template (all monitoring on)" sh -c "'$HELM' template skein '$chart' --namespace skein-system $(printf "%q " "${monitoring_on[@]}") > '$out/mon.yaml'"
check "helm template (dashboard off)" sh -c "'$HELM' template skein '$chart' --namespace skein-system --set monitoring.dashboard.enabled=false > '$out/nodash.yaml'"
check "helm template (dashboard label, namespace, folder annotation; PodMonitor in watched namespaces)" sh -c \
  "'$HELM' template skein '$chart' --namespace skein-system --set monitoring.dashboard.label=my_dashboards --set-string monitoring.dashboard.labelValue=yes --set monitoring.dashboard.namespace=grafana --set-string monitoring.dashboard.annotations.grafana_folder=Kafka --set monitoring.podMonitor.enabled=true --set 'watchNamespaces={team-a,team-b}' > '$out/custom.yaml'"

# kinds <file> prints "Kind name" per object
kinds() {
  python3 -c 'import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d: print(d["kind"], d["metadata"]["name"])' "$1"
}
monitoring_defaults() {
  local k; k="$(kinds "$out/all.yaml")"
  grep -qx 'ConfigMap skein-dashboard' <<<"$k" &&
    ! grep -Eq '^(PrometheusRule|ServiceMonitor|PodMonitor) ' <<<"$k" &&
    ! grep -q '^ConfigMap skein-dashboard' <(kinds "$out/nodash.yaml")
}
check "defaults: dashboard ConfigMap only (no CRD-dependent objects); dashboard.enabled=false: none" monitoring_defaults
check "serviceMonitor without the metrics Service is refused" sh -c \
  "! '$HELM' template skein '$chart' --set monitoring.serviceMonitor.enabled=true --set metrics.service.enabled=false >/dev/null 2>&1"

# Rendered objects carry exactly the files' content; the monitors name the jobs
# the rules and the dashboard query; options end up where they should.
monitoring_content() {
  python3 - "$out/mon.yaml" "$out/custom.yaml" "$obs/skein-alerts.yaml" "$obs/skein-dashboard.json" <<'PY'
import json, sys, yaml
mon, custom, rules_path, dash_path = sys.argv[1:]
def objs(path):
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(path)) if d}
m, c = objs(mon), objs(custom)
ok = True
def expect(cond, what):
    global ok
    if not cond:
        print("  not ok:", what); ok = False

rule = m[("PrometheusRule", "skein")]
expect(rule["spec"] == yaml.safe_load(open(rules_path)), "PrometheusRule spec equals observability/skein-alerts.yaml")
expect(rule["metadata"]["labels"].get("release") == "kps", "prometheusRule.labels applied")
rules_text = open(rules_path).read()
expect('job="skein-broker"' in rules_text and 'job="skein-operator"' in rules_text, "rules use the jobs")

cm = m[("ConfigMap", "skein-dashboard")]
dash_text = open(dash_path).read()
expect(cm["data"]["skein-dashboard.json"] == dash_text, "dashboard ConfigMap data equals observability/skein-dashboard.json")
expect(json.loads(cm["data"]["skein-dashboard.json"])["uid"] == "skein-overview", "dashboard JSON parses")
expect(cm["metadata"]["labels"].get("grafana_dashboard") == "1", "default sidecar label grafana_dashboard=1")
expect(cm["metadata"]["namespace"] == "skein-system", "dashboard in the release namespace by default")

def job_of(relabelings):
    return [r.get("replacement") for r in relabelings if r.get("targetLabel") == "job"]
sm = m[("ServiceMonitor", "skein-operator")]
expect(job_of(sm["spec"]["endpoints"][0]["relabelings"]) == ["skein-operator"], "ServiceMonitor job=skein-operator")
svc = m[("Service", "skein-metrics")]
expect(sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items(),
       "ServiceMonitor selects the operator's metrics Service")
expect(sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"], "ServiceMonitor port is the Service's")
pm = m[("PodMonitor", "skein-brokers")]
ep = pm["spec"]["podMetricsEndpoints"][0]
expect(job_of(ep["relabelings"]) == ["skein-broker"], "PodMonitor job=skein-broker")
expect({r["targetLabel"] for r in ep["relabelings"]} >= {"skein_cluster", "instance"}, "PodMonitor sets skein_cluster, instance")
expect(pm["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "skein", "app.kubernetes.io/component": "broker"},
       "PodMonitor selects broker pods (operator/src/manifests/mod.rs selector_labels)")
expect(pm["spec"]["namespaceSelector"] == {"any": True}, "PodMonitor: all namespaces by default")
expect(any('job="skein-broker"' in t["expr"] for p in json.load(open(dash_path))["panels"] for t in p.get("targets", [])),
       "dashboard queries job skein-broker")

cc = c[("ConfigMap", "skein-dashboard")]
expect(cc["metadata"]["labels"].get("my_dashboards") == "yes" and "grafana_dashboard" not in cc["metadata"]["labels"],
       "custom sidecar label")
expect(cc["metadata"]["namespace"] == "grafana", "dashboard.namespace")
expect(cc["metadata"].get("annotations") == {"grafana_folder": "Kafka"}, "dashboard.annotations")
expect(c[("PodMonitor", "skein-brokers")]["spec"]["namespaceSelector"] == {"matchNames": ["team-a", "team-b"]},
       "PodMonitor limited to watchNamespaces")
expect(not any(k[0] in ("PrometheusRule", "ServiceMonitor") for k in c), "PrometheusRule, ServiceMonitor off")
sys.exit(0 if ok else 1)
PY
}
check "rendered PrometheusRule = rules file, dashboard ConfigMap = JSON file, monitors match the rules' jobs" monitoring_content

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
