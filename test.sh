#!/usr/bin/env bash
# Runs every Skein test. Installs what the tests need on the way (Python venv,
# npm packages, Maven jars, kcat from Debian) — see e2e/setup.sh.
#
#   ./test.sh            everything: format, layout (import circles, long files), lint, unit + integration tests,
#                        Helm chart checks,
#                        real-client e2e suite (single broker and a 3-broker cluster),
#                        the chaos checker's unit tests and short fault-injection runs (e2e/chaos; one tiering),
#                        the operator against a real Kubernetes API server (e2e/k8s), with a
#                        rolling upgrade from the previous release and back (e2e/k8s/test_upgrade.py),
#                        observability (promtool, real Prometheus), benchmark smoke
#   ./test.sh --rust     only the Rust workspace (fmt, clippy, cargo test)
#   SKEIN_FUZZ_SECONDS=30 ./test.sh   also fuzz each cargo-fuzz target for 30 s
#
# CARGO_TARGET_DIR is honoured (CI points it at a cache outside the clone).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
ROOT=$PWD
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

START=$SECONDS
step() { printf '\n=== [%dm%02ds] %s\n' $(((SECONDS - START) / 60)) $(((SECONDS - START) % 60)) "$*"; }

# SeaweedFS, the S3 server of the tiered-storage e2e tests, is built from the Go module proxy
# (e2e/tools/seaweedfs-build.sh: 8-10 minutes on two cold cores, then cached). It builds in the
# background, at low priority, while the Rust steps run; the e2e step waits for it. setup.sh
# leaves it to this build meanwhile (SKEIN_SEAWEEDFS_SKIP); a failure stops the run with its log.
#
# The Kubernetes control plane of the operator tests (e2e/k8s/build.sh: about 10 minutes on two
# cold cores, then cached) builds in the background too, at the lowest priority, from the start:
# it takes the CPU the steps before it leave idle (test runs, links, clients waiting on brokers).
# The serial timing tests wait for it first, so that it never runs beside them; the operator step
# finds it built (build.sh is idempotent and locked).
WEED_PID= K8S_PID=
stop_builds() {
    # each build is its own process group (setsid), so that an early exit stops go build too
    # (the group, or the process itself if it has not called setsid yet)
    for pid in $WEED_PID $K8S_PID; do { kill -- -"$pid" || kill "$pid"; } 2>/dev/null; done
    rm -rf "${WEED_DIR:-}" "${K8S_DIR:-}"
}
if [[ "${1:-}" != "--rust" ]]; then
    WEED_DIR=$(mktemp -d "${TMPDIR:-/tmp}/skein-seaweedfs-build.XXXXXX")
    setsid nice -n 10 bash e2e/tools/seaweedfs-build.sh >"$WEED_DIR/path" 2>"$WEED_DIR/build.log" &
    WEED_PID=$!
    K8S_DIR=$(mktemp -d "${TMPDIR:-/tmp}/skein-k8s-build.XXXXXX")
    setsid nice -n 19 bash e2e/k8s/build.sh >/dev/null 2>"$K8S_DIR/build.log" &
    K8S_PID=$!
    trap stop_builds EXIT
    export SKEIN_SEAWEEDFS_SKIP=1
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "layout: no circle of imports inside a crate, no file over 700 lines without a reason (scripts/)"
python3 scripts/import-cycles.py
python3 scripts/long-files.py

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test (workspace: storage, controller core + simulation, broker protocol and group tests, CRDs, operator reconcile against a mocked API server)"
cargo test --workspace

if [[ "${1:-}" == "--rust" ]]; then
    exit 0
fi

# Fuzzing builds the whole tree a third time (nightly, sanitizers): about 12
# minutes on two cold cores, too much for every CI run. Inputs it finds
# become regular tests (e.g. storage/tests/log/compaction.rs); the fuzzing
# itself runs when asked (docs/fuzzing.md).
if [[ "${SKEIN_FUZZ_SECONDS:-0}" -gt 0 ]]; then
    step "fuzzing: ${SKEIN_FUZZ_SECONDS}s of each cargo-fuzz target (fuzz/run.sh; installs nightly and cargo-fuzz if missing)"
    fuzz/run.sh --seconds "$SKEIN_FUZZ_SECONDS"
else
    step "fuzzing: not run (SKEIN_FUZZ_SECONDS=30 ./test.sh or fuzz/run.sh runs it; see docs/fuzzing.md)"
fi

step "chaos checker: unit tests, every Jepsen class on a synthetic history (e2e/chaos/unit.sh; creates the e2e venv if missing)"
e2e/chaos/unit.sh

step "Helm chart: lint, template, CRDs equal the generated ones (installs helm if missing)"
bash charts/test.sh

step "the previous release (e2e/k8s/upgrade-from.env) for the upgrade test: built once, cached in ~/.cache/skein/previous"
bash e2e/k8s/build-previous.sh >/dev/null

step "cargo build --release -p skein-broker -p skein-operator"
cargo build --release -p skein-broker -p skein-operator

step "SeaweedFS for the tiered-storage tests: waiting for the background build (e2e/tools/seaweedfs-build.sh)"
if ! wait "$WEED_PID"; then
    WEED_PID=
    echo "SeaweedFS build (e2e/tools/seaweedfs-build.sh) failed:" >&2
    cat "$WEED_DIR/build.log" >&2
    exit 1
fi
WEED_PID=
export SKEIN_WEED_BIN
SKEIN_WEED_BIN=$(cat "$WEED_DIR/path")
grep -E '^(SeaweedFS .* cached|built in)' "$WEED_DIR/build.log" || true

step "e2e: real Kafka clients against skein-broker and a 3-broker local cluster (skein-operator local)"
# Most tests wait on clients and brokers more than they use the CPU: they
# run on two workers, a file to a worker (half the time); the ones that
# measure rates or timings (marked `serial`) run alone after them.
SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" SKEIN_OPERATOR_BIN="$TARGET_DIR/release/skein-operator" \
    e2e/run.sh -n 2 --dist loadfile -m "not serial"
step "the Kubernetes control plane for the operator tests: waiting for its background build (e2e/k8s/build.sh), so that it never runs beside the timing tests"
if ! wait "$K8S_PID"; then
    K8S_PID=
    echo "Kubernetes build (e2e/k8s/build.sh) failed:" >&2
    cat "$K8S_DIR/build.log" >&2
    exit 1
fi
K8S_PID=
grep -E '^(k8s .* cached|built in|building)' "$K8S_DIR/build.log" || true

SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" SKEIN_OPERATOR_BIN="$TARGET_DIR/release/skein-operator" \
    e2e/run.sh -m serial

step "chaos: ~2 minutes of random faults (kill -9, pauses, network partitions, disk full, slow disk, controller restarts, clock skew, partition reassignments) under idempotent acks=all producers and a consumer group, then a Jepsen-style check (e2e/chaos)"
SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" SKEIN_OPERATOR_BIN="$TARGET_DIR/release/skein-operator" \
    e2e/chaos/run.sh --duration 75 --report "${TMPDIR:-/tmp}/skein-chaos-smoke-$$/report.md"

step "chaos with tiered storage: ~1 minute of the same faults plus object-store outages, the topic tiering to SeaweedFS (e2e/chaos --tiered)"
SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" SKEIN_OPERATOR_BIN="$TARGET_DIR/release/skein-operator" \
    e2e/chaos/run.sh --duration 50 --tiered --report "${TMPDIR:-/tmp}/skein-chaos-tiered-$$/report.md"

step "operator on a real Kubernetes API server (e2e/k8s: built from the Go module proxy, cached; kwok nodes; a skein-broker process behind every broker pod)"
SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" SKEIN_OPERATOR_BIN="$TARGET_DIR/release/skein-operator" \
    e2e/k8s/operator-e2e.sh

# The step above ran the whole suite; this one checks the script users run on
# their own clusters (its runner pod, in-cluster access, images by flag) with
# the suite's core: chart, validation, topics and clients, pod loss, scaling,
# a rolling restart, operator failover and deletion. The long day-2 and
# security scenarios (certificate renewal, storage growth, self-healing,
# balance, ...) are left to the step above: the script runs them unchanged
# (`e2e/k8s/cluster-e2e.sh` without -k).
CLUSTER_SCRIPT_SUBSET="helm_chart or chart_examples or rejects or builds_objects or topic or scale_up or scale_down"
CLUSTER_SCRIPT_SUBSET+=" or config_change_rolls or operator_failover or deleting_the_cluster"
step "the operator suite's core through e2e/k8s/cluster-e2e.sh (the script for your own cluster): its runner pod on the e2e/k8s control plane"
SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" SKEIN_OPERATOR_BIN="$TARGET_DIR/release/skein-operator" \
    e2e/k8s/operator-e2e.sh --cluster-script -- -k "$CLUSTER_SCRIPT_SUBSET"

step "observability: promtool rule tests, then the dashboard and alerts against a real Prometheus (3-broker local cluster; operator on e2e/k8s's control plane)"
SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" SKEIN_OPERATOR_BIN="$TARGET_DIR/release/skein-operator" \
    bash observability/test.sh

step "benchmark harness smoke: e2e/bench/run.sh --quick (keeps the harness working; speed is not asserted)"
SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" SKEIN_OPERATOR_BIN="$TARGET_DIR/release/skein-operator" \
    e2e/bench/run.sh --quick \
    --out "${TMPDIR:-/tmp}/skein-bench-smoke-$$"
