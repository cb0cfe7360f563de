#!/bin/bash
# Install everything softaff needs to build, test and run the demo on Debian 12 (run as root).
# Idempotent: installs only missing packages; runs `apt-get update` only when the package
# lists are older than a day or a wanted package has no install candidate.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

PACKAGES=(
    build-essential gcc meson ninja-build pkg-config clang-format
    libglib2.0-dev libjson-c-dev libnuma-dev libvirt-dev libxml2-dev libxml2-utils
    libvirt-daemon-system libvirt-clients qemu-system-x86
    busybox-static cpio gzip procps python3 numactl gnuplot-nox
    scdoc bash-completion clang libclang-rt-14-dev  # man pages, completion dir, fuzzing
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

if [ ${#missing[@]} -eq 0 ]; then
    log "all ${#PACKAGES[@]} packages already installed, nothing to do"
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
    for p in "${missing[@]}"; do
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

log "installing: ${missing[*]}"
apt-get install -y --no-install-recommends "${missing[@]}"

failed=()
for p in "${missing[@]}"; do
    is_installed "$p" || failed+=("$p")
done
if [ ${#failed[@]} -ne 0 ]; then
    log "still not installed: ${failed[*]}" >&2
    exit 1
fi
log "done: installed ${#missing[@]} package(s)"
