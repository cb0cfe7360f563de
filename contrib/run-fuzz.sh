#!/bin/bash
# Builds the libFuzzer targets of tests/fuzz with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, replays their seed corpora, then fuzzes each one for FUZZ_SECONDS
# (default 30). Fails on the first crash, leak, sanitizer report or timeout; the input that
# triggered it is kept in $BUILDDIR/fuzz-artifacts/.
#
#   contrib/run-fuzz.sh                   every target
#   contrib/run-fuzz.sh metadata proc     some targets
#   BUILDDIR=build-fuzz FUZZ_SECONDS=300 contrib/run-fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BUILDDIR=${BUILDDIR:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    # Every tests/fuzz/fuzz-NAME.c is a target.
    for f in tests/fuzz/fuzz-*.c; do
        f=${f##*/fuzz-}
        targets+=("${f%.c}")
    done
fi

log() { printf 'run-fuzz: %s\n' "$*"; }

if ! command -v clang >/dev/null 2>&1; then
    log "clang not found (contrib/install-deps.sh installs it)" >&2
    exit 1
fi

if [ ! -f "$BUILDDIR/build.ninja" ]; then
    log "configuring $BUILDDIR (clang, -Dfuzzing=true, ASan+UBSan)"
    CC=clang meson setup "$BUILDDIR" -Dfuzzing=true -Db_sanitize=address,undefined \
        -Db_lundef=false -Dbuildtype=debugoptimized
fi
ninja -C "$BUILDDIR" $(printf 'tests/fuzz/fuzz-%s ' "${targets[@]}")

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export G_DEBUG=fatal-criticals

artifacts="$BUILDDIR/fuzz-artifacts"
mkdir -p "$artifacts"
for t in "${targets[@]}"; do
    exe="$BUILDDIR/tests/fuzz/fuzz-$t"
    seeds="tests/fuzz/corpus/$t"
    # New inputs go to a scratch corpus in the build directory; the seeds stay as checked in.
    work="$BUILDDIR/fuzz-corpus/$t"
    mkdir -p "$work"
    log "$t: fuzzing for ${FUZZ_SECONDS}s (seeds: $seeds)"
    if ! "$exe" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
        "$work" "$seeds" >"$BUILDDIR/fuzz-$t.log" 2>&1; then
        tail -n 60 "$BUILDDIR/fuzz-$t.log" >&2
        log "$t: FAILED; the input is in $artifacts/ (replay: $exe FILE)" >&2
        exit 1
    fi
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ *DONE)' \
        "$BUILDDIR/fuzz-$t.log" | sed "s/^/run-fuzz: $t: /" || true
done
log "all ${#targets[@]} target(s) ran ${FUZZ_SECONDS}s without a crash"
