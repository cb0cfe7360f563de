#!/bin/sh
# Checks the metrics exposition with Prometheus' own linter: `promtool check metrics`.
# promtool is $PROMTOOL or found on PATH; without it the test is skipped (exit 77), unless
# SOFTAFF_REQUIRE_PROMTOOL=1 (CI), where a missing promtool fails.
# Usage: promtool-check.sh TEST-METRICS-BINARY
set -eu

test_metrics=$1
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -z "$promtool" ] || [ ! -x "$promtool" ]; then
    if [ "${SOFTAFF_REQUIRE_PROMTOOL:-0}" = 1 ]; then
        echo "promtool not found (set PROMTOOL or install it) and SOFTAFF_REQUIRE_PROMTOOL=1" >&2
        exit 1
    fi
    echo "promtool not found: skipped"
    exit 77
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$test_metrics" --emit "$dir/softaff.prom"
echo "promtool: $promtool"
# promtool prints lint problems and exits non-zero on any of them.
out=$("$promtool" check metrics <"$dir/softaff.prom" 2>&1) || {
    echo "$out"
    exit 1
}
[ -z "$out" ] || { echo "$out"; exit 1; }
echo "promtool check metrics: ok ($(grep -c -v '^#' "$dir/softaff.prom") samples)"
