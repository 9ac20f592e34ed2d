#!/usr/bin/env bash
# Builds librdkafka's own benchmark tool, rdkafka_performance, for the benchmark's native-client
# rows (e2e/bench/README.md), and our own clients against the same library: fixed_rate.c (the
# fixed-rate latency row) and group_read.c (many consumers in one group). The librdkafka source is the copy inside the rdkafka-sys crate
# (crates.io, version pinned below), fetched with cargo; built without TLS/SASL/zstd, statically.
# Idempotent: prints the tool's path; rebuilds only when the pinned version changes.
#
#   e2e/bench/native/build-rdkafka-perf.sh      -> e2e/.cache/rdkafka-perf/<version>/rdkafka_performance
#                                                  (fixed_rate and group_read beside it)
set -euo pipefail
RDKAFKA_SYS_VERSION="4.10.0+2.12.1"   # librdkafka 2.12.1

NATIVE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
E2E_DIR="$(dirname "$(dirname "$NATIVE_DIR")")"
OUT="$E2E_DIR/.cache/rdkafka-perf/$RDKAFKA_SYS_VERSION"
TOOL="$OUT/rdkafka_performance"

# Our clients: (re)built whenever missing or older than their source.
build_clients() {
    for name in fixed_rate group_read; do
        if [[ ! -x "$OUT/$name" || "$NATIVE_DIR/$name.c" -nt "$OUT/$name" ]]; then
            gcc -O2 -Wall -Werror -I"$OUT/include" "$NATIVE_DIR/$name.c" "$OUT/librdkafka.a" \
                -lz -lm -ldl -lpthread -lrt -o "$OUT/$name.tmp"
            mv "$OUT/$name.tmp" "$OUT/$name"
        fi
    done
}

if [[ -x "$TOOL" && -f "$OUT/librdkafka.a" ]]; then
    build_clients
    echo "$TOOL"
    exit 0
fi
for tool in cargo gcc make; do
    command -v "$tool" >/dev/null || { echo "build-rdkafka-perf: '$tool' not found on PATH" >&2; exit 1; }
done
mkdir -p "$OUT"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A throwaway crate depending on rdkafka-sys: `cargo fetch` puts its source in cargo's registry.
mkdir -p "$work/fetch/src"
cat > "$work/fetch/Cargo.toml" <<TOML
[package]
name = "fetch-librdkafka"
version = "0.0.0"
edition = "2021"
[dependencies]
rdkafka-sys = { version = "=$RDKAFKA_SYS_VERSION", default-features = false }
TOML
echo 'fn main() {}' > "$work/fetch/src/main.rs"
(cd "$work/fetch" && cargo fetch -q) >&2
src="$(cd "$work/fetch" && cargo metadata --format-version 1 2>/dev/null | python3 -c '
import json, sys
m = json.load(sys.stdin)
p = next(p for p in m["packages"] if p["name"] == "rdkafka-sys")
import os; print(os.path.join(os.path.dirname(p["manifest_path"]), "librdkafka"))')"
[[ -f "$src/configure" ]] || { echo "build-rdkafka-perf: no librdkafka source at $src" >&2; exit 1; }

cp -r "$src" "$work/librdkafka"
cd "$work/librdkafka"
echo "==> [bench] building librdkafka $(grep -o '[0-9.]*$' <<<"$RDKAFKA_SYS_VERSION") and rdkafka_performance (~1 min)" >&2
./configure --disable-ssl --disable-gssapi --disable-curl --disable-zstd --disable-lz4-ext \
    --disable-syslog > "$OUT/configure.log" 2>&1
make -j"$(nproc)" -C src librdkafka.a > "$OUT/make.log" 2>&1
gcc -O2 -Isrc examples/rdkafka_performance.c src/librdkafka.a -lz -lm -ldl -lpthread -lrt \
    -o "$TOOL.tmp"
mkdir -p "$OUT/include"
cp src/librdkafka.a "$OUT/librdkafka.a"
cp src/rdkafka.h "$OUT/include/rdkafka.h"
build_clients
mv "$TOOL.tmp" "$TOOL"
echo "$TOOL"
