#!/usr/bin/env bash
# Builds Skein's cargo-fuzz targets and runs each for a while; exits non-zero
# if any target crashes (panic, abort, timeout, out of memory). See
# docs/fuzzing.md.
#
#   fuzz/run.sh [--seconds N] [--target NAME]... [-- LIBFUZZER_FLAGS...]
#
# --seconds N   run time per target (default 30)
# --target NAME run only NAME (repeatable; default: every target)
#
# Needs the nightly toolchain (installed with rustup if missing) and
# cargo-fuzz (installed with `cargo install cargo-fuzz --locked` if missing,
# into ~/.cargo/bin). Builds go to $CARGO_TARGET_DIR/fuzz when
# CARGO_TARGET_DIR is set, else to fuzz/target. The corpus of each target
# lives in fuzz/corpus/<target> (seeded on every run); crashes are written
# to fuzz/artifacts/<target>/.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
seconds=30
targets=()
extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --target) targets+=("$2"); shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) echo "usage: $0 [--seconds N] [--target NAME]... [-- LIBFUZZER_FLAGS...]" >&2; exit 2 ;;
    esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
    targets=(request record_batch log_recovery)
fi

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "== installing the nightly toolchain (cargo fuzz needs it)"
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

target_dir="${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/fuzz}"
target_dir="${target_dir:-$here/target}"
cd "$root"

# --release with debug assertions: overflow checks and debug_assert! stay on.
# Address sanitizer (cargo fuzz's default) makes libFuzzer's malloc limit
# work: any single allocation above -malloc_limit_mb is a crash, which is
# how an allocation sized by an untrusted count shows up.
build=(cargo +nightly fuzz build --fuzz-dir "$here" --target-dir "$target_dir" --release --debug-assertions)
echo "== building fuzz targets (${targets[*]}) into $target_dir"
start=$(date +%s)
"${build[@]}"
echo "== fuzz build took $(( $(date +%s) - start ))s"

failed=()
for t in "${targets[@]}"; do
    corpus="$here/corpus/$t"
    artifacts="$here/artifacts/$t"
    mkdir -p "$corpus" "$artifacts"
    echo "== fuzzing $t for ${seconds}s"
    if ! SKEIN_FUZZ_SEEDS="$corpus" cargo +nightly fuzz run --fuzz-dir "$here" \
        --target-dir "$target_dir" --release --debug-assertions "$t" "$corpus" -- \
        -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=512 \
        -artifact_prefix="$artifacts/" -print_final_stats=1 "${extra[@]}"; then
        failed+=("$t")
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "FUZZ FAILURES: ${failed[*]} (inputs in fuzz/artifacts/<target>/)" >&2
    exit 1
fi
echo "== fuzzing clean: ${targets[*]}, ${seconds}s each"
