#!/usr/bin/env bash
# Checks the Helm chart: helm lint, helm template (default values and a
# namespaced install), and that the chart's CRDs are exactly the generated
# ones (crds/yaml/, which `cargo test -p skein-crds` keeps equal to the Rust
# types). Installs helm from the Go module proxy when it is missing.
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

# ... and the rendered release carries both of them.
rendered_crds() {
  grep -q '^  name: kafkaclusters.skein.dev$' "$out/all.yaml" &&
    grep -q '^  name: topics.skein.dev$' "$out/all.yaml"
}
check "rendered release includes both CRDs" rendered_crds

# When the operator binary is built, its `crds` output is the chart's CRDs too.
binary_crds() {
  local op="$root/target/debug/skein-operator"
  if [ ! -x "$op" ]; then
    echo "  (skipped: $op not built)"; return 0
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

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
