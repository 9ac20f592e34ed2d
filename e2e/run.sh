#!/usr/bin/env bash
# Runs the e2e compatibility suite: setup.sh, then pytest -v over e2e/tests.
#   E2E_TARGET=skein (default) | kafka     broker under test
#   SKEIN_BROKER_BIN=path                  skein-broker binary (default <repo>/target/release/skein-broker)
# Extra arguments go to pytest, e.g.  e2e/run.sh -k roundtrip   or   e2e/run.sh -m "not group_coordinator"
# Exit code = pytest's.
set -uo pipefail
E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$E2E_DIR/setup.sh" || { echo "e2e: setup.sh failed" >&2; exit 1; }
echo
echo "==> [e2e] running pytest against E2E_TARGET=${E2E_TARGET:-skein}"
cd "$E2E_DIR" && exec "$E2E_DIR/.venv/bin/python" -m pytest -v -rA --durations=15 "$@"
