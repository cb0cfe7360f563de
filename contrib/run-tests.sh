#!/usr/bin/env bash
# Builds softaff and runs every test suite: unit tests on fixture trees, and integration tests
# on a real libvirtd with real guests. Installs what it needs with apt (root, Debian 12).
#
#   contrib/run-tests.sh              all suites
#   contrib/run-tests.sh --suite unit only the unit tests
# Environment: BUILDDIR (default build), SOFTAFF_REQUIRE_VM=1 turns a missing libvirt/QEMU into
# a failure instead of a skip, MESON_SETUP_ARGS adds options to `meson setup`.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

"$top/contrib/install-deps.sh"
# The fleet suite's Nova, Prometheus and node_exporter (tests/fleet).
"$top/contrib/install-fleet-deps.sh"

builddir=${BUILDDIR:-build}
if [ ! -f "$builddir/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$builddir" -Dwerror=true ${MESON_SETUP_ARGS:-}
fi
ninja -C "$builddir"

status=0
meson test -C "$builddir" --print-errorlogs "$@" || status=$?

# One closing line any CI can read, and skipped tests made visible.
python3 "$top/contrib/test-summary.py" "$builddir/meson-logs/testlog.json" || status=1
exit $status
