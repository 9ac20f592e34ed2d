#!/usr/bin/env bash
# Benchmark Skein against Apache Kafka on this machine (see e2e/bench/README.md).
#
#   e2e/bench/run.sh            full run: 3 repetitions per system, GiB-sized topics, RF=3 rows
#   e2e/bench/run.sh --quick    CI smoke: small sizes, 1 repetition, a few minutes
#   (other flags: --repetitions N, --systems kafka,skein, --no-rf3, --out DIR; see bench.py --help)
#
#   SKEIN_BROKER_BIN=path       use this skein-broker instead of building target/release/skein-broker
#
# Writes e2e/bench/results/<UTC date-time>/{report.md,report.json,report.png,tools.log}.
set -euo pipefail
BENCH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E_DIR="$(dirname "$BENCH_DIR")"
ROOT="$(dirname "$E2E_DIR")"

# Apache Kafka server + kafka-tools jars (pinned in e2e/kafka-dist/pom.xml, cached in
# e2e/.cache), the Python venv, kcat: the e2e suite's own idempotent setup.
"$E2E_DIR/setup.sh"

VENV="$E2E_DIR/.venv"
h=$(sha256sum "$BENCH_DIR/requirements.txt" | cut -d' ' -f1)
if [[ ! -f "$VENV/.bench-stamp" || "$(cat "$VENV/.bench-stamp")" != "$h" ]]; then
    echo "==> [bench] installing $BENCH_DIR/requirements.txt into $VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$BENCH_DIR/requirements.txt"
    echo "$h" > "$VENV/.bench-stamp"
fi

if [[ -z "${SKEIN_BROKER_BIN:-}" || -z "${SKEIN_OPERATOR_BIN:-}" ]]; then
    echo "==> [bench] cargo build --release -p skein-broker -p skein-operator"
    (cd "$ROOT" && cargo build --release -p skein-broker -p skein-operator)
    export SKEIN_BROKER_BIN="${SKEIN_BROKER_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/skein-broker}"
    export SKEIN_OPERATOR_BIN="${SKEIN_OPERATOR_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/release/skein-operator}"
fi

echo "==> [bench] $(uptime)"
exec "$VENV/bin/python" "$BENCH_DIR/bench.py" "$@"
