#!/usr/bin/env bash
# The softaff demo: installs what it needs (apt), builds, starts libvirtd if needed, boots two
# tiny guests and runs softaffd while the guests' load goes through phases. Root, Debian 12.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
"$top/contrib/install-deps.sh"
builddir=${BUILDDIR:-build}
[ -f "$builddir/build.ninja" ] || meson setup "$builddir"
ninja -C "$builddir"
echo
"$builddir/ctl/softaffctl" partitions
echo
case "$builddir" in /*) ;; *) builddir="$top/$builddir" ;; esac
SOFTAFF_BUILD_DIR="$builddir" python3 "$top/contrib/demo.py"
