#!/bin/sh
# Checks the alerting rules with Prometheus' promtool: `check rules` (syntax, PromQL, templates)
# and `test rules` (the unit tests: each alert fires where it should, and only there).
# promtool is $PROMTOOL or found on PATH (contrib/install-deps.sh installs it). Without it the
# test is skipped (exit 77), unless SOFTAFF_REQUIRE_PROMTOOL=1 or SOFTAFF_REQUIRE_VM=1, where a
# missing promtool fails (as promtool-check.sh does).
# Usage: alerts-check.sh RULES.yml RULES-TESTS.yml
set -eu

rules=$1
tests=$2
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

echo "promtool: $promtool"
"$promtool" check rules "$rules"
# The tests name their rule files relative to themselves.
"$promtool" test rules "$tests"
