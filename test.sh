#!/usr/bin/env bash
# Runs every Skein test. Installs what the tests need on the way (Python venv,
# npm packages, Maven jars, kcat from Debian) — see e2e/setup.sh.
#
#   ./test.sh            everything: format, lint, unit + integration tests, real-client e2e suite
#   ./test.sh --rust     only the Rust workspace (fmt, clippy, cargo test)
#
# CARGO_TARGET_DIR is honoured (CI points it at a cache outside the clone).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
ROOT=$PWD
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

step() { printf '\n=== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test (workspace: storage, controller core + simulation, broker protocol tests)"
cargo test --workspace

if [[ "${1:-}" == "--rust" ]]; then
    exit 0
fi

step "cargo build --release -p skein-broker"
cargo build --release -p skein-broker

step "e2e: real Kafka clients against skein-broker"
SKEIN_BROKER_BIN="$TARGET_DIR/release/skein-broker" e2e/run.sh
