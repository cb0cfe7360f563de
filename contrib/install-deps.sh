#!/bin/bash
# Install everything softaff needs to build, test and run the demo on Debian 12 (run as root).
# Idempotent: installs only missing packages; runs `apt-get update` only when the package
# lists are older than a day or a wanted package has no install candidate.
# promtool (the metrics test's linter) comes from Debian's prometheus package, which would also
# install and start a Prometheus server: only /usr/bin/promtool is taken from it, as
# /usr/local/bin/promtool, unless a promtool is on PATH already.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
    build-essential gcc meson ninja-build pkg-config clang-format
    libglib2.0-dev libjson-c-dev libnuma-dev libvirt-dev libxml2-dev libxml2-utils
    libvirt-daemon-system libvirt-clients qemu-system-x86
    busybox-static cpio gzip procps python3 numactl gnuplot-nox
    systemd  # systemd-analyze: the systemd-unit test checks the generated unit with it
    scdoc bash-completion clang libclang-rt-14-dev  # man pages, completion dir, fuzzing
    libbpf-dev bpftool  # with clang: event sensing (host/bpf, meson -Dbpf)
)

log() { printf 'install-deps: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
    log "must run as root" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-query >/dev/null 2>&1; then
    log "apt-get/dpkg-query not found: this script is for Debian (12) only" >&2
    exit 1
fi

is_installed() {
    local status
    status=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)
    [ "$status" = "installed" ]
}

missing=()
for p in "${PACKAGES[@]}"; do
    if is_installed "$p"; then
        log "ok        $p"
    else
        log "missing   $p"
        missing+=("$p")
    fi
done

PROMTOOL_PKG=prometheus
PROMTOOL_DEST=/usr/local/bin/promtool
need_promtool=0
if command -v promtool >/dev/null 2>&1; then
    log "ok        promtool ($(command -v promtool))"
else
    log "missing   promtool (from package $PROMTOOL_PKG)"
    need_promtool=1
fi

if [ ${#missing[@]} -eq 0 ] && [ "$need_promtool" -eq 0 ]; then
    log "all ${#PACKAGES[@]} packages and promtool already installed, nothing to do"
    exit 0
fi

lists_fresh() {
    # Fresh = some package list exists and was updated in the last 24 hours.
    local newest
    newest=$(find /var/lib/apt/lists -maxdepth 1 -type f -name '*_Packages*' -mmin -1440 2>/dev/null | head -n1)
    [ -n "$newest" ]
}

has_candidate() {
    local cand
    cand=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')
    [ -n "$cand" ] && [ "$cand" != "(none)" ]
}

need_update=0
if ! lists_fresh; then
    log "package lists are missing or older than a day"
    need_update=1
else
    wanted=("${missing[@]}")
    [ "$need_promtool" -eq 0 ] || wanted+=("$PROMTOOL_PKG")
    for p in "${wanted[@]}"; do
        if ! has_candidate "$p"; then
            log "no install candidate for $p in the current lists"
            need_update=1
            break
        fi
    done
fi
if [ "$need_update" -eq 1 ]; then
    log "running apt-get update"
    apt-get update
fi

# install_promtool: /usr/bin/promtool out of the prometheus .deb (apt-get download, dpkg-deb -x).
install_promtool() {
    local tmp deb
    tmp=$(mktemp -d)
    chmod 755 "$tmp"
    chown _apt "$tmp" 2>/dev/null || true # apt downloads as its _apt sandbox user
    if ! (cd "$tmp" && apt-get download "$PROMTOOL_PKG" >&2); then
        rm -rf "$tmp"
        log "apt-get download $PROMTOOL_PKG failed" >&2
        return 1
    fi
    deb=$(ls "$tmp"/*.deb)
    dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" ./usr/bin/promtool
    install -m 755 "$tmp/usr/bin/promtool" "$PROMTOOL_DEST"
    rm -rf "$tmp"
    log "installed $PROMTOOL_DEST from $(basename "$deb") ($("$PROMTOOL_DEST" --version 2>&1 | head -n1))"
}

if [ ${#missing[@]} -ne 0 ]; then
    log "installing: ${missing[*]}"
    apt-get install -y --no-install-recommends "${missing[@]}"
fi
if [ "$need_promtool" -eq 1 ]; then
    install_promtool || exit 1
fi

failed=()
for p in "${missing[@]}"; do
    is_installed "$p" || failed+=("$p")
done
if [ "$need_promtool" -eq 1 ] && ! command -v promtool >/dev/null 2>&1; then
    failed+=("promtool ($PROMTOOL_DEST is not on PATH: $PATH)")
fi
if [ ${#failed[@]} -ne 0 ]; then
    log "still not installed: ${failed[*]}" >&2
    exit 1
fi
log "done: installed ${#missing[@]} package(s)$([ "$need_promtool" -eq 0 ] || echo ", promtool")"
