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
# low_priority NICE CMD...: CMD in a session of its own (so that stop_builds can stop its whole
# process group) at priority NICE. With the kernel's autogroup scheduling (sched_autogroup_enabled,
# on here), every session gets an equal share of the CPU whatever its processes' nice values: the
# session's autogroup is made nice too, or a "nice" build takes half the machine from the steps
# beside it (seen: clippy on cold caches took 19 minutes instead of 5).
low_priority() {
    local n=$1
    shift
    setsid bash -c 'echo "$1" >/proc/self/autogroup 2>/dev/null || true; exec nice -n "$1" "${@:2}"' _ "$n" "$@"
}
WEED_PID= K8S_PID=
stop_builds() {
    # each build is its own process group (setsid), so that an early exit stops go build too
    # (the group, or the process itself if it has not called setsid yet)
    for pid in $WEED_PID $K8S_PID ${PREV_PID:-}; do { kill -- -"$pid" || kill "$pid"; } 2>/dev/null; done
    rm -rf "${WEED_DIR:-}" "${K8S_DIR:-}" "${PREV_DIR:-}" "${BIN_DIR:-}"
}
if [[ "${1:-}" != "--rust" ]]; then
    WEED_DIR=$(mktemp -d "${TMPDIR:-/tmp}/skein-seaweedfs-build.XXXXXX")
    low_priority 10 bash e2e/tools/seaweedfs-build.sh >"$WEED_DIR/path" 2>"$WEED_DIR/build.log" &
    WEED_PID=$!
    K8S_DIR=$(mktemp -d "${TMPDIR:-/tmp}/skein-k8s-build.XXXXXX")
    low_priority 19 bash e2e/k8s/build.sh >/dev/null 2>"$K8S_DIR/build.log" &
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

step "cargo build --release -p skein-broker -p skein-operator"
cargo build --release -p skein-broker -p skein-operator
# Every step from here on runs these copies: the previous release builds into the same target
# directory in the background (below), and cargo leaves its binaries there meanwhile.
BIN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/skein-bin.XXXXXX")
cp -p "$TARGET_DIR/release/skein-broker" "$TARGET_DIR/release/skein-operator" "$BIN_DIR/"
export SKEIN_BROKER_BIN="$BIN_DIR/skein-broker" SKEIN_OPERATOR_BIN="$BIN_DIR/skein-operator"

# The previous release (e2e/k8s/upgrade-from.env), for the upgrade test at the end: built once
# and cached in ~/.cache/skein/previous; when it is not cached, it builds in the background at the
# lowest priority from here, as the Kubernetes control plane does, on the CPU the e2e tests leave.
PREV_DIR=$(mktemp -d "${TMPDIR:-/tmp}/skein-previous-build.XXXXXX")
low_priority 19 bash e2e/k8s/build-previous.sh >"$PREV_DIR/path" 2>"$PREV_DIR/build.log" &
PREV_PID=$!

wait_build() { # wait_build NAME PID LOG: a background build's end; its log when it failed
    if ! wait "$2"; then
        echo "$1 failed:" >&2
        cat "$3" >&2
        exit 1
    fi
}

seaweedfs_ready() {
    wait_build "SeaweedFS build (e2e/tools/seaweedfs-build.sh)" "$WEED_PID" "$WEED_DIR/build.log"
    WEED_PID=
    export SKEIN_WEED_BIN
    SKEIN_WEED_BIN=$(cat "$WEED_DIR/path")
    grep -E '^(SeaweedFS .* cached|built in)' "$WEED_DIR/build.log" || true
}

step "e2e: real Kafka clients against skein-broker and a 3-broker local cluster (skein-operator local)"
# Most tests wait on clients and brokers more than they use the CPU: they
# run on two workers, a file to a worker (half the time); the ones that
# measure rates or timings (marked `serial`) run alone after them. The
# tiered-storage files need SeaweedFS: when it is still building (cold
# caches), they run once it is there, after the others; else with them.
TIERED_FILES=(tests/test_tiered_storage.py tests/test_seaweedfs_harness.py)
if [[ -s $WEED_DIR/path ]]; then # built (the script prints its path last)
    seaweedfs_ready
    e2e/run.sh -n 2 --dist loadfile -m "not serial"
else
    e2e/run.sh -n 2 --dist loadfile -m "not serial" "${TIERED_FILES[@]/#/--ignore=}"
    step "SeaweedFS for the tiered-storage tests: waiting for the background build (e2e/tools/seaweedfs-build.sh)"
    seaweedfs_ready
    step "e2e: the tiered-storage tests (SeaweedFS)"
    e2e/run.sh -n 2 --dist loadfile -m "not serial" "${TIERED_FILES[@]}"
fi

step "the Kubernetes control plane and the previous release: waiting for their background builds (e2e/k8s/build.sh, build-previous.sh), so that they never run beside the timing tests"
wait_build "Kubernetes build (e2e/k8s/build.sh)" "$K8S_PID" "$K8S_DIR/build.log"
K8S_PID=
grep -E '^(k8s .* cached|built in|building)' "$K8S_DIR/build.log" || true
wait_build "the previous release's build (e2e/k8s/build-previous.sh)" "$PREV_PID" "$PREV_DIR/build.log"
PREV_PID=
grep -E '^(previous release|building)' "$PREV_DIR/build.log" || true

e2e/run.sh -m serial

step "chaos: ~2 minutes of random faults (kill -9, pauses, network partitions, disk full, slow disk, controller restarts, clock skew, partition reassignments) under idempotent acks=all producers and a consumer group, then a Jepsen-style check (e2e/chaos)"
e2e/chaos/run.sh --duration 75 --report "${TMPDIR:-/tmp}/skein-chaos-smoke-$$/report.md"

step "chaos with tiered storage: ~1 minute of the same faults plus object-store outages, the topic tiering to SeaweedFS (e2e/chaos --tiered)"
e2e/chaos/run.sh --duration 50 --tiered --report "${TMPDIR:-/tmp}/skein-chaos-tiered-$$/report.md"

step "operator on a real Kubernetes API server (e2e/k8s: built from the Go module proxy, cached; kwok nodes; a skein-broker process behind every broker pod)"
e2e/k8s/operator-e2e.sh

# The step above ran the whole suite; this one checks the script users run on
# their own clusters (its runner pod, in-cluster access, images by flag, the
# exit status brought back) with the suite's first steps: chart, validation,
# a cluster and a topic served to clients, deletion. Everything else (pod
# loss, scaling, rolls, failover, security, day-2) is left to the step above:
# the script runs those tests unchanged (`e2e/k8s/cluster-e2e.sh` without -k),
# and running them twice here proved nothing about the script.
CLUSTER_SCRIPT_SUBSET="helm_chart or chart_examples or rejects or builds_objects or topic_gets_partitions"
CLUSTER_SCRIPT_SUBSET+=" or kafka_api_topic or deleting_the_cluster"
step "the operator suite's core through e2e/k8s/cluster-e2e.sh (the script for your own cluster): its runner pod on the e2e/k8s control plane"
e2e/k8s/operator-e2e.sh --cluster-script -- -k "$CLUSTER_SCRIPT_SUBSET"

step "observability: promtool rule tests, then the dashboard and alerts against a real Prometheus (3-broker local cluster; operator on e2e/k8s's control plane)"
bash observability/test.sh

step "benchmark harness smoke: e2e/bench/run.sh --quick (keeps the harness working; speed is not asserted)"
e2e/bench/run.sh --quick \
    --out "${TMPDIR:-/tmp}/skein-bench-smoke-$$"
