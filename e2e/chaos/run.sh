#!/usr/bin/env bash
# Fault injection against a 3-broker `skein-operator local` cluster; see e2e/chaos/README.md.
#
#   e2e/chaos/run.sh [--duration SECONDS] [--faults kill,pause,...|all] [--seed N] [--report PATH]
#                    [--max-faults N] [--rate N] [--partitions N] ... (--help lists them all)
#
# Needs root (network namespaces, loop devices, blkio cgroups), iproute2, util-linux (losetup),
# e2fsprogs (mkfs.ext4) and the e2e venv (e2e/setup.sh; run here when missing). Binaries:
# SKEIN_OPERATOR_BIN and SKEIN_BROKER_BIN, default <repo>/target/release/.
# Exit code: 0 every check passed, 1 a violation (see the report), 2 the harness failed.
set -uo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E="$(dirname "$DIR")"
if [[ $(id -u) -ne 0 ]]; then
    echo "e2e/chaos: needs root (ip netns, losetup, mount, cgroups)" >&2
    exit 2
fi
for tool in ip losetup mkfs.ext4 mount umount; do
    command -v "$tool" >/dev/null || { echo "e2e/chaos: '$tool' not found (iproute2, util-linux, e2fsprogs)" >&2; exit 2; }
done
# the venv, and libfaketime for the clock-skew fault (both from e2e/setup.sh)
if [[ ! -x "$E2E/.venv/bin/python" || ! -f /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]]; then
    "$E2E/setup.sh" || { echo "e2e/chaos: e2e/setup.sh failed" >&2; exit 2; }
fi
exec "$E2E/.venv/bin/python" "$DIR/chaos.py" "$@"
