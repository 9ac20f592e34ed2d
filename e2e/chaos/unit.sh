#!/usr/bin/env bash
# Unit tests of the chaos checker (test_checker.py: every Jepsen class on a synthetic history,
# clean histories of each mode). No cluster, no root: a second or two. Creates the e2e venv
# (e2e/setup.sh) when it is missing. Extra arguments go to pytest.
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E="$(dirname "$DIR")"
if [[ ! -x "$E2E/.venv/bin/python" ]]; then
    "$E2E/setup.sh"
fi
cd "$DIR"
exec "$E2E/.venv/bin/python" -m pytest -q -p no:cacheprovider -c /dev/null --rootdir "$DIR" test_checker.py "$@"
