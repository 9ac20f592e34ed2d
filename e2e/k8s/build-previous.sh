#!/usr/bin/env bash
# Build (once) the previous release's skein-broker and skein-operator and keep
# its Helm chart, for the upgrade test (test_upgrade.py). Prints the directory:
#   <dir>/bin/skein-broker  <dir>/bin/skein-operator  <dir>/chart/
# The release is the commit in upgrade-from.env (the sha decides; the tag is
# for people: a clone may lack tags). Cached in
# ${SKEIN_CACHE:-$HOME/.cache/skein}/previous/<sha>/: exits at once when built.
#
# The build shares CARGO_TARGET_DIR with the current tree, so crates.io
# dependencies of equal versions are not compiled twice; only the workspace
# crates of that commit are. Cargo hard-links the binaries it builds into
# $CARGO_TARGET_DIR/release/: the current tree's binaries found there are put
# back afterwards, so a caller's SKEIN_BROKER_BIN keeps meaning the current one.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=upgrade-from.env
source "$HERE/upgrade-from.env"
SHA=$SKEIN_UPGRADE_FROM
CACHE_ROOT=${SKEIN_CACHE:-$HOME/.cache/skein}
DEST=$CACHE_ROOT/previous/$SHA
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

cached() { [[ -x $DEST/bin/skein-broker && -x $DEST/bin/skein-operator && -f $DEST/chart/Chart.yaml ]]; }
if cached; then
  echo "previous release $SKEIN_UPGRADE_FROM_VERSION ($SHA) cached in $DEST" >&2
  echo "$DEST"
  exit 0
fi
mkdir -p "$CACHE_ROOT/previous"
exec 9>"$CACHE_ROOT/previous/.lock"
flock 9
if cached; then echo "$DEST"; exit 0; fi

if ! git -C "$ROOT" cat-file -e "$SHA^{commit}" 2>/dev/null; then
  git -C "$ROOT" fetch -q origin "$SHA" || {
    echo "build-previous.sh: commit $SHA ($SKEIN_UPGRADE_FROM_VERSION) is not in this clone" >&2; exit 1; }
fi
# One source path for every baseline: cargo keys a workspace crate's build by
# its path, so a stable path keeps the target directory from growing per run.
SRC=$CACHE_ROOT/previous/src
rm -rf "$SRC"
mkdir -p "$SRC"
git -C "$ROOT" archive "$SHA" | tar -x -C "$SRC"

saved=$(mktemp -d)
for b in skein-broker skein-operator; do
  [[ -e $TARGET/release/$b ]] && cp -p "$TARGET/release/$b" "$saved/$b"
done
echo "building the previous release $SKEIN_UPGRADE_FROM_VERSION ($SHA) in $SRC" >&2
rc=0
(cd "$SRC" && CARGO_TARGET_DIR=$TARGET cargo build --release --locked -p skein-broker -p skein-operator >&2) || rc=$?
if [[ $rc == 0 ]]; then
  tmp=$(mktemp -d "$CACHE_ROOT/previous/.new.XXXXXX")
  mkdir -p "$tmp/bin"
  cp "$TARGET/release/skein-broker" "$TARGET/release/skein-operator" "$tmp/bin/"
  cp -r "$SRC/charts/skein" "$tmp/chart"
  rm -rf "$DEST"
  mv "$tmp" "$DEST"
fi
# Put the current tree's binaries back (or leave none, as before).
for b in skein-broker skein-operator; do
  rm -f "$TARGET/release/$b"
  [[ -e $saved/$b ]] && cp -p "$saved/$b" "$TARGET/release/$b"
done
rm -rf "$saved"
[[ $rc == 0 ]] || { echo "build-previous.sh: the build of $SHA failed" >&2; exit $rc; }
echo "$DEST"
