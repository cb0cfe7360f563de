#!/bin/bash
# Build the Debian package of softaff (softaff_VERSION_ARCH.deb) on Debian 12 and check it with
# lintian: any lintian error fails. See docs/packaging.md.
#
#   contrib/build-deb.sh [--out DIR] [--no-deps]
#
# --out DIR    where the .deb, .changes, .buildinfo and lintian.txt go (default: build-deb/ in
#              the source tree; earlier softaff_* files there are removed first)
# --no-deps    do not install missing packages (otherwise, as root, apt-get installs the
#              packaging tools and the Build-Depends of debian/control)
#
# The package is built in a copy of the tree under a temporary directory: dpkg-buildpackage
# writes its results next to the tree it builds, and must not write into the checkout's parent.
# Tests are skipped (DEB_BUILD_OPTIONS=nocheck): contrib/run-tests.sh runs them.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=$SRC/build-deb
DEPS=1
# autopkgtest: to run debian/tests against the built package (docs/packaging.md), not used here.
TOOLS=(dpkg-dev debhelper lintian devscripts autopkgtest)

log() { printf 'build-deb: %s\n' "$*"; }
die() {
    printf 'build-deb: %s\n' "$*" >&2
    exit 1
}
usage() {
    sed -n '5p' "$0" | sed 's/^# *//' >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    --out)
        [ $# -ge 2 ] || usage
        OUT=$2
        shift 2
        ;;
    --out=*)
        OUT=${1#--out=}
        shift
        ;;
    --no-deps)
        DEPS=0
        shift
        ;;
    -h | --help) usage ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done

command -v apt-get >/dev/null 2>&1 || die "apt-get not found: this script is for Debian (12)"

# apt-get with one `apt-get update` when the first try fails (stale or missing package lists).
apt_retry() {
    if ! apt-get "$@"; then
        log "apt-get $1 failed; running apt-get update and trying again"
        apt-get update
        apt-get "$@"
    fi
}

tools_installed() {
    local p status
    for p in "${TOOLS[@]}"; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [ "$status" = installed ] || return 1
    done
}

install_deps() {
    if tools_installed && (cd "$SRC" && dpkg-checkbuilddeps >/dev/null 2>&1); then
        log "packaging tools and build dependencies already installed"
        return 0
    fi
    [ "$DEPS" = 1 ] || die "missing packaging tools or build dependencies (see dpkg-checkbuilddeps); run without --no-deps as root"
    [ "$(id -u)" -eq 0 ] || die "missing packaging tools or build dependencies: run as root to install them"
    log "installing the packaging tools: ${TOOLS[*]}"
    apt_retry install -y --no-install-recommends "${TOOLS[@]}"
    log "installing the Build-Depends of debian/control"
    apt_retry build-dep -y --no-install-recommends "$SRC/"
    (cd "$SRC" && dpkg-checkbuilddeps) || die "build dependencies still unmet (above)"
}

# The changelog's version must be meson.build's project version: one version, two places.
check_version() {
    local meson_version deb_version
    meson_version=$(sed -n "s/^ *version: *'\([^']*\)'.*/\1/p" "$SRC/meson.build" | head -n1)
    deb_version=$(cd "$SRC" && dpkg-parsechangelog -S Version)
    [ -n "$meson_version" ] || die "no version: '...' line found in $SRC/meson.build"
    [ "$deb_version" = "$meson_version" ] ||
        die "debian/changelog says $deb_version but meson.build says $meson_version: add a debian/changelog entry (dch -v $meson_version)"
    VERSION=$deb_version
}

# The source tree without build directories: tracked and untracked-but-not-ignored files.
copy_tree() {
    local dest=$1
    mkdir -p "$dest"
    if git -C "$SRC" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        (cd "$SRC" && git ls-files -z --cached --others --exclude-standard |
            while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
            tar --null -T - -cf -) | tar -xf - -C "$dest"
    else
        tar -C "$SRC" --exclude='./build*' --exclude='./_build*' -cf - . | tar -xf - -C "$dest"
    fi
}

install_deps
check_version
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/softaff_* "$OUT"/softaff-dbgsym_* "$OUT"/python3-softaff-nova_* "$OUT"/lintian.txt

WORK=$(mktemp -d /tmp/softaff-deb.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
copy_tree "$WORK/softaff-$VERSION"

start=$(date +%s)
log "dpkg-buildpackage -us -uc -b in $WORK/softaff-$VERSION"
(cd "$WORK/softaff-$VERSION" &&
    DEB_BUILD_OPTIONS="nocheck parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" dpkg-buildpackage -us -uc -b)
log "dpkg-buildpackage took $(($(date +%s) - start)) s"

shopt -s nullglob
results=("$WORK"/*.deb "$WORK"/*.ddeb "$WORK"/*.changes "$WORK"/*.buildinfo)
[ ${#results[@]} -gt 0 ] || die "dpkg-buildpackage produced nothing in $WORK"
cp "${results[@]}" "$OUT"/
changes=$(ls "$OUT"/softaff_"$VERSION"_*.changes)

log "lintian $(basename "$changes") (fails on errors)"
rc=0
lintian --fail-on error --display-info "$changes" >"$OUT/lintian.txt" 2>&1 || rc=$?
cat "$OUT/lintian.txt"
for level in E W I; do
    log "lintian $level: $(grep -c "^$level: " "$OUT/lintian.txt" || true)"
done
[ "$rc" = 0 ] || die "lintian failed (exit $rc): errors above, also in $OUT/lintian.txt"

log "built:"
for f in "$OUT"/softaff_"$VERSION"_*.deb "$OUT"/python3-softaff-nova_"$VERSION"_all.deb; do
    log "  $f"
done
