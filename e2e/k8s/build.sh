#!/usr/bin/env bash
# Build (once) the local Kubernetes control plane from the Go module proxy:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, helm
# into ${SKEIN_CACHE:-$HOME/.cache/skein}/k8s/<K8S_VERSION>/bin/.
# Idempotent: exits at once when the binaries for the current pins are present.
# Env: SKEIN_CACHE (cache root), SKEIN_K8S_BUILD_P (go build -p, default 2),
#      SKEIN_K8S_FORCE=1 (rebuild even when cached).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$HERE/versions.env"

CACHE_ROOT=${SKEIN_CACHE:-$HOME/.cache/skein}
DEST=$CACHE_ROOT/k8s/$K8S_VERSION
BIN=$DEST/bin
BINS=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm)
P=${SKEIN_K8S_BUILD_P:-2}

# The cache key: everything that decides what gets built.
KEY=$(cat "$HERE/versions.env" "$HERE/cmd/go.mod" "$HERE/cmd/go.sum" "$HERE/build.sh" | sha256sum | cut -c1-16)

cached() {
  [[ -f $DEST/stamp && $(cat "$DEST/stamp") == "$KEY" ]] || return 1
  for b in "${BINS[@]}"; do [[ -x $BIN/$b ]] || return 1; done
}

if [[ ${SKEIN_K8S_FORCE:-0} != 1 ]] && cached; then
  echo "k8s $K8S_VERSION binaries cached in $BIN" >&2
  echo "$BIN"
  exit 0
fi

mkdir -p "$DEST"
# Serialise concurrent builds (several engineers / CI on one machine).
exec 9>"$DEST/.lock"
flock 9
if [[ ${SKEIN_K8S_FORCE:-0} != 1 ]] && cached; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { echo "build.sh: go not found" >&2; exit 1; }
TMP=$(mktemp -d "$DEST/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -mod=readonly -p=$P"
# What hack/lib/version.sh would stamp, so /version, kubectl version and
# Helm's kubeVersion checks see a real release number instead of v0.0.0-master.
major=${K8S_VERSION#v}; minor=${major#*.}; minor=${minor%%.*}; major=${major%%.*}
X=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  X+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  X+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
LDFLAGS="-s -w$X"

start=$(date +%s)
echo "building k8s $K8S_VERSION + etcd $ETCD_VERSION (go build -p=$P) ..." >&2
(
  cd "$HERE/cmd"
  go build -trimpath -ldflags="$LDFLAGS" -o "$TMP/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
  go build -trimpath -ldflags="-s -w" -o "$TMP/etcd" go.etcd.io/etcd/server/v3
)
echo "building kwok $KWOK_VERSION ..." >&2
# kwok has no replace directives, so `go install pkg@version` works and is
# verified against the checksum database with kwok's own go.sum.
GOBIN="$TMP" go install -trimpath \
  -ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
  "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"

echo "building helm $HELM_VERSION ..." >&2
# helm v4 has no replace directives either (and uses the same k8s.io libs).
GOBIN="$TMP" go install -trimpath \
  -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"

mkdir -p "$BIN"
for b in "${BINS[@]}"; do mv -f "$TMP/$b" "$BIN/$b"; done
echo "$KEY" >"$DEST/stamp"
echo "built in $(( $(date +%s) - start ))s: $(du -sh "$BIN" | cut -f1) in $BIN" >&2
echo "$BIN"
