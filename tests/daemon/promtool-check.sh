#!/bin/sh
# Checks the metrics exposition with Prometheus' own linter: `promtool check metrics`.
# promtool is $PROMTOOL or found on PATH (contrib/install-deps.sh installs it). Without it the
# test is skipped (exit 77), unless SOFTAFF_REQUIRE_PROMTOOL=1 or SOFTAFF_REQUIRE_VM=1 (CI, and
# whoever wants proof that every test ran), where a missing promtool fails.
# Usage: promtool-check.sh TEST-METRICS-BINARY
set -eu

test_metrics=$1
promtool=${PROMTOOL:-$(command -v promtool || true)}
if [ -z "$promtool" ] || [ ! -x "$promtool" ]; then
    why="promtool not found (PROMTOOL='${PROMTOOL:-}', PATH=$PATH; contrib/install-deps.sh installs it)"
    # As softaff_testlib.py reads SOFTAFF_REQUIRE_VM: set, and not 0.
    for flag in "SOFTAFF_REQUIRE_PROMTOOL=${SOFTAFF_REQUIRE_PROMTOOL:-0}" \
        "SOFTAFF_REQUIRE_VM=${SOFTAFF_REQUIRE_VM:-0}"; do
        case ${flag#*=} in
        0 | "") ;;
        *)
            echo "FAIL: $why and $flag" >&2
            exit 1
            ;;
        esac
    done
    echo "SKIP: $why"
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
