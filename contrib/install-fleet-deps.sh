#!/bin/bash
# Install what the fleet tests and the consolidation benchmark need on Debian 12 (run as root),
# beside contrib/install-deps.sh: Nova's scheduler classes (python3-nova), a Prometheus server and
# prometheus-node-exporter. Their packages start services on install; a policy-rc.d that refuses
# every start is put in place for the install (when none is there already) and removed after, so
# nothing runs: the tests start their own instances on loopback ports.
# Idempotent: installs only missing packages.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
PACKAGES=(python3-nova python3-oslo.config prometheus prometheus-node-exporter dh-python)

log() { printf 'install-fleet-deps: %s\n' "$*"; }

[ "$(id -u)" -eq 0 ] || { log "must run as root" >&2; exit 1; }
command -v apt-get >/dev/null 2>&1 || { log "apt-get not found: Debian (12) only" >&2; exit 1; }

missing=()
for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    if [ "$status" = installed ]; then
        log "ok        $p"
    else
        log "missing   $p"
        missing+=("$p")
    fi
done
[ ${#missing[@]} -gt 0 ] || { log "all ${#PACKAGES[@]} packages already installed"; exit 0; }

POLICY=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\n# install-fleet-deps.sh: no service starts while it installs\nexit 101\n' >"$POLICY"
    chmod 755 "$POLICY"
    made_policy=1
fi
cleanup() { [ "$made_policy" = 0 ] || rm -f "$POLICY"; }
trap cleanup EXIT

if ! apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${missing[@]}"; then
    log "install failed; running apt-get update and trying again"
    apt-get -o DPkg::Lock::Timeout=300 update
    apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${missing[@]}"
fi
log "done: installed ${missing[*]}"
