#!/bin/bash
# Start virtlogd and libvirtd without systemd (e.g. in a container or a minimal test host) and
# wait until qemu:///system answers. Idempotent: daemons already running are left alone.
#   SOFTAFF_LIBVIRT_TIMEOUT  seconds to wait for readiness (default 60)
set -euo pipefail

TIMEOUT=${SOFTAFF_LIBVIRT_TIMEOUT:-60}
URI=qemu:///system
LOG=/var/log/libvirt/libvirtd.log

log() { printf 'start-libvirt: %s\n' "$*"; }
die() {
    printf 'start-libvirt: ERROR: %s\n' "$*" >&2
    if [ -r "$LOG" ]; then
        printf 'start-libvirt: last lines of %s:\n' "$LOG" >&2
        tail -n 20 "$LOG" >&2 || true
    fi
    exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root"
for b in libvirtd virtlogd virsh; do
    command -v "$b" >/dev/null 2>&1 || die "$b not found (run contrib/install-deps.sh)"
done

# running NAME PIDFILE: true when a process named NAME runs (pid file first, then pgrep -x).
running() {
    local name=$1 pidfile=$2 pid
    if [ -r "$pidfile" ]; then
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$name" ]; then
            return 0
        fi
    fi
    pgrep -x "$name" >/dev/null 2>&1
}

mkdir -p /run/libvirt /var/log/libvirt /var/lib/libvirt/qemu /var/cache/libvirt

# Without udev, /dev/kvm stays root:root 0600: libvirt then finds KVM unusable and probes QEMU
# again on every VM start (~9 probes, tens of seconds per `virsh create`). Give it the group and
# mode udev gives it (the kvm group comes with libvirt-daemon-system).
fix_kvm_node() {
    local dev=/dev/kvm now
    [ -c "$dev" ] || return 0
    now=$(stat -c %G:%a "$dev")
    [ "$now" != "kvm:660" ] || return 0
    if ! getent group kvm >/dev/null 2>&1; then
        log "warning: $dev is $now and there is no kvm group: libvirt will re-probe QEMU at every VM start (install libvirt-daemon-system)"
        return 0
    fi
    log "$dev is $now, not kvm:660 as udev sets it (no udev here?): chgrp kvm, chmod 660, or libvirt re-probes QEMU at every VM start"
    { chgrp kvm "$dev" && chmod 660 "$dev"; } || die "cannot give $dev group kvm and mode 660"
}
fix_kvm_node

# libvirtd logs to syslog/journal by default; without systemd there may be neither, so ask
# for a file log unless the admin configured logging already.
ensure_log_config() {
    local conf=/etc/libvirt/libvirtd.conf
    [ -w "$conf" ] || return 0
    if ! grep -Eq '^[[:space:]]*log_outputs[[:space:]]*=' "$conf"; then
        log "configuring $conf: log_outputs=\"3:file:$LOG\""
        printf '\n# added by softaff contrib/start-libvirt.sh (no systemd/journald here)\nlog_outputs="3:file:%s"\n' "$LOG" >>"$conf"
    fi
}
ensure_log_config

start_virtlogd() {
    log "starting virtlogd -d"
    virtlogd -d || die "virtlogd failed to start"
}

start_libvirtd() {
    # A stale pid file from an unclean shutdown would make libvirtd refuse to start.
    if [ -e /run/libvirtd.pid ]; then
        log "removing stale /run/libvirtd.pid"
        rm -f /run/libvirtd.pid
    fi
    log "starting libvirtd -d"
    libvirtd -d || die "libvirtd failed to start"
}

if running virtlogd /run/virtlogd.pid; then
    log "virtlogd already running"
else
    start_virtlogd
fi
if running libvirtd /run/libvirtd.pid; then
    log "libvirtd already running"
else
    start_libvirtd
fi

# Wait for readiness. A daemon found running may be on its way out (e.g. just sent SIGTERM):
# if one disappears while we wait, start it again (a few times at most).
starts=0
deadline=$((SECONDS + TIMEOUT))
until out=$(virsh -c "$URI" version 2>&1); do
    if [ $SECONDS -ge $deadline ]; then
        printf '%s\n' "$out" >&2
        die "$URI not ready after ${TIMEOUT}s"
    fi
    if ! running virtlogd /run/virtlogd.pid; then
        start_virtlogd
    fi
    if ! running libvirtd /run/libvirtd.pid; then
        starts=$((starts + 1))
        [ $starts -le 3 ] || die "libvirtd keeps exiting during start-up"
        start_libvirtd
    fi
    sleep 0.2
done
log "$URI ready ($(printf '%s\n' "$out" | grep -m1 'Running hypervisor' | sed 's/^ *//'))"
