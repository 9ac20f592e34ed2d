#!/usr/bin/env bash
# Checks the Grafana dashboard and the Prometheus alert rules (docs/observability.md):
#
#   1. promtool check rules + promtool test rules (unit tests: every alert fires
#      and stays quiet where it should);
#   2. test_live.py: a real Prometheus scrapes skein-broker and skein-operator
#      (the operator runs against e2e/k8s's local control plane) every second
#      while a consumer group works; every dashboard query and every alert
#      operand must return data; lag rises and falls with the consumer; alerts
#      go pending in Prometheus.
#
# Needs: e2e/setup.sh run once (Python venv with confluent-kafka), the e2e/k8s
# binaries (e2e/k8s/build.sh; cached after the first build). Installs Debian's
# prometheus package (promtool and the server) when missing; never uses the
# Debian service, and stops it if the install started it. Builds the broker
# (release) and the operator (debug) into CARGO_TARGET_DIR when missing.
#
#   SKEIN_BROKER_BIN / SKEIN_OPERATOR_BIN   binaries to use instead
#   OBS_KEEP=1                              keep the work dir (logs, Prometheus data)
#   extra arguments go to pytest, e.g. observability/test.sh -k lag
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
say() { printf '\n==> [observability] %s\n' "$*"; }

venv="$root/e2e/.venv"
[[ -x $venv/bin/python ]] && "$venv/bin/python" -c 'import confluent_kafka, pytest' 2>/dev/null \
  || { echo "observability: $venv missing or incomplete: run e2e/setup.sh first" >&2; exit 1; }

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  say "installing Debian's prometheus package (promtool + server)"
  [[ $(id -u) -eq 0 ]] || { echo "observability: need root to apt-get install prometheus" >&2; exit 1; }
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache policy prometheus 2>/dev/null | grep -q 'Candidate: [0-9]'; then apt-get update -q; fi
  apt-get install -y -q --no-install-recommends prometheus
  # Where systemd runs, the package starts its own server on :9090: stop it,
  # this test runs its own on a free loopback port.
  if command -v systemctl >/dev/null && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl disable --now prometheus || true
  fi
fi
promtool --version 2>&1 | head -1

say "promtool check rules"
promtool check rules "$here/skein-alerts.yaml"
say "promtool test rules (unit tests of every alert)"
(cd "$here" && promtool test rules skein-alerts.test.yaml)

export SKEIN_BROKER_BIN="${SKEIN_BROKER_BIN:-$target/release/skein-broker}"
export SKEIN_OPERATOR_BIN="${SKEIN_OPERATOR_BIN:-$target/debug/skein-operator}"
if [[ ! -x $SKEIN_BROKER_BIN ]]; then
  say "building the broker: cargo build --release -p skein-broker"
  (cd "$root" && cargo build --release -p skein-broker)
fi
if [[ ! -x $SKEIN_OPERATOR_BIN ]]; then
  say "building the operator: cargo build -p skein-operator"
  (cd "$root" && cargo build -p skein-operator)
fi

say "live: dashboard and alerts against a real Prometheus (broker $SKEIN_BROKER_BIN, operator $SKEIN_OPERATOR_BIN)"
cd "$here"
exec "$venv/bin/python" -m pytest -v -s -p no:cacheprovider --timeout=600 test_live.py "$@"
