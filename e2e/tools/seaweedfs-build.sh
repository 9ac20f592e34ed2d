#!/usr/bin/env bash
# Build (once) SeaweedFS's `weed` from the Go module proxy, the S3-compatible object store of the
# tiered-storage e2e tests (e2e/tests/seaweedfs.py), into
#   ${SKEIN_CACHE:-$HOME/.cache/skein}/seaweedfs/<SEAWEEDFS_VERSION>/weed
# and print that path on stdout. Idempotent: exits at once when the binary for the current pin
# (seaweedfs.env) is there. 8-10 minutes cold on two cores (plus ~4 GB of Go module and build
# caches); the binary is 157 MB.
#
#   e2e/tools/seaweedfs-build.sh            build if needed, print the path
#   e2e/tools/seaweedfs-build.sh --cached   print the path if built, else exit 3 (never builds)
#
# Env: SKEIN_CACHE (cache root), SKEIN_SEAWEEDFS_BUILD_P (go build -p, default 2),
#      SKEIN_SEAWEEDFS_FORCE=1 (rebuild even when cached).
#
# `go install github.com/seaweedfs/seaweedfs/weed@<version>` refuses this module (its go.mod has a
# replace directive), so the module is downloaded (checked against the checksum database) and
# built inside its own directory, where its go.mod, go.sum and replace apply.
set -euo pipefail
# The whole script in one block: bash reads it before running any of it, so editing this file
# during a build (test.sh runs one in the background for minutes) cannot derail that build.
{
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=seaweedfs.env
source "$HERE/seaweedfs.env"

CACHE_ROOT=${SKEIN_CACHE:-$HOME/.cache/skein}
DEST=$CACHE_ROOT/seaweedfs/$SEAWEEDFS_VERSION
BIN=$DEST/weed
P=${SKEIN_SEAWEEDFS_BUILD_P:-2}
MODULE=github.com/seaweedfs/seaweedfs

# The cache key: everything that decides what gets built (comment lines aside: editing them
# should not cost a rebuild).
KEY=$(sed '/^[[:space:]]*#/d' "$HERE/seaweedfs.env" "$HERE/seaweedfs-build.sh" | sha256sum | cut -c1-16)

cached() { [[ -f $DEST/stamp && $(cat "$DEST/stamp") == "$KEY" && -x $BIN ]]; }

if [[ ${1:-} == --cached ]]; then
  cached && { echo "$BIN"; exit 0; }
  echo "seaweedfs-build.sh: SeaweedFS $SEAWEEDFS_VERSION is not built in $DEST: run e2e/tools/seaweedfs-build.sh (or e2e/setup.sh)" >&2
  exit 3
fi
if [[ ${SKEIN_SEAWEEDFS_FORCE:-0} != 1 ]] && cached; then
  echo "SeaweedFS $SEAWEEDFS_VERSION cached: $BIN" >&2
  echo "$BIN"
  exit 0
fi

mkdir -p "$DEST"
# Serialise concurrent builds (test.sh's background build and e2e/setup.sh, several clones).
exec 9>"$DEST/.lock"
flock 9
if [[ ${SKEIN_SEAWEEDFS_FORCE:-0} != 1 ]] && cached; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { echo "seaweedfs-build.sh: go not found (Go >= 1.26.6 is needed)" >&2; exit 1; }
TMP=$(mktemp -d "$DEST/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 143' TERM INT  # killed (test.sh stops its background build when it fails early): clean up

# The module's go.mod asks for go 1.26.6: with GOTOOLCHAIN=local an older go fails here with
# that message instead of fetching a toolchain. GOWORK=off and -mod=readonly: only the module's
# own go.mod and go.sum decide the dependencies.
export CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-buildvcs=false -mod=readonly -p=$P"
start=$(date +%s)
echo "building SeaweedFS $SEAWEEDFS_VERSION ($MODULE@$SEAWEEDFS_MODULE_VERSION, go build -p=$P) ..." >&2
go mod download "$MODULE@$SEAWEEDFS_MODULE_VERSION"
SRC=$(go mod download -json "$MODULE@$SEAWEEDFS_MODULE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -f $SRC/go.mod ]] || { echo "seaweedfs-build.sh: module source not found (Dir=$SRC)" >&2; exit 1; }
(
  cd "$SRC"
  # As the release Makefile (weed/Makefile: CGO_ENABLED=0, -s -w), plus the commit in `weed version`.
  go build -trimpath \
    -ldflags="-s -w -X $MODULE/weed/util/version.COMMIT=${SEAWEEDFS_MODULE_VERSION##*-}" \
    -o "$TMP/weed" ./weed
)
"$TMP/weed" version >&2
mv -f "$TMP/weed" "$BIN"
echo "$KEY" >"$DEST/stamp"
echo "built in $(($(date +%s) - start))s: $(du -h "$BIN" | cut -f1) $BIN" >&2
echo "$BIN"
exit 0
}
