#!/bin/bash
# Install softaff's libvirt qemu hook as /etc/libvirt/hooks/qemu.d/50-softaff (builds nothing).
#
#   contrib/install-hook.sh [--hook-dir DIR] [--no-reload] BINARY
#   contrib/install-hook.sh [--hook-dir DIR] --uninstall
#
# BINARY is the built hook (BUILD/plugin/softaff-hook) or the installed one
# (PREFIX/libexec/softaff-hook); it is copied, so the build directory can go away afterwards.
# libvirt looks for hooks when it starts and when it reloads (SIGHUP); a hook added while
# another qemu hook (/etc/libvirt/hooks/qemu, or an executable in qemu.d/) already exists is
# found by the next call. So when there was none before, libvirtd (or virtqemud) gets SIGHUP,
# unless --no-reload.
set -euo pipefail

HOOK_DIR=/etc/libvirt/hooks/qemu.d
NAME=50-softaff
RELOAD=1
UNINSTALL=0
BINARY=

log() { printf 'install-hook: %s\n' "$*"; }
die() {
    printf 'install-hook: %s\n' "$*" >&2
    exit 1
}
usage() {
    sed -n '4,5p' "$0" | sed 's/^# *//' >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case "$1" in
    --hook-dir)
        [ $# -ge 2 ] || usage
        HOOK_DIR=$2
        shift 2
        ;;
    --hook-dir=*)
        HOOK_DIR=${1#--hook-dir=}
        shift
        ;;
    --no-reload)
        RELOAD=0
        shift
        ;;
    --uninstall)
        UNINSTALL=1
        shift
        ;;
    -h | --help) usage ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *)
        [ -z "$BINARY" ] || die "more than one BINARY given: '$BINARY' and '$1'"
        BINARY=$1
        shift
        ;;
    esac
done

case "$HOOK_DIR" in
*.d) ;;
*) die "--hook-dir '$HOOK_DIR' does not end in .d (libvirt reads DRIVER.d, e.g. /etc/libvirt/hooks/qemu.d)" ;;
esac
HOOK_DIR=${HOOK_DIR%/}
TARGET=$HOOK_DIR/$NAME
SCRIPT=${HOOK_DIR%.d} # the single-file hook libvirt also runs, /etc/libvirt/hooks/qemu

# Whether libvirt already runs some other qemu hook: then it re-reads the directory on each
# call. Our own 50-softaff does not count (it may be the link `meson install` made, which
# reloads nothing), so installing over it reloads again, which is harmless.
hook_present() {
    if [ -f "$SCRIPT" ] && [ -x "$SCRIPT" ]; then
        return 0
    fi
    local f
    for f in "$HOOK_DIR"/* "$HOOK_DIR"/.[!.]*; do
        if [ "$f" != "$TARGET" ] && [ -f "$f" ] && [ -x "$f" ]; then
            return 0
        fi
    done
    return 1
}

# SIGHUP to the daemon running qemu guests: the monolithic libvirtd or the modular virtqemud.
reload_libvirt() {
    local sent=0 name pidfile pid
    for name in libvirtd virtqemud; do
        pid=
        for pidfile in "/run/$name.pid" "/var/run/$name.pid"; do
            if [ -r "$pidfile" ]; then
                pid=$(tr -dc '0-9' <"$pidfile")
                break
            fi
        done
        if [ -z "$pid" ]; then
            pid=$(pidof -s "$name" 2>/dev/null || true)
        fi
        if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
            kill -HUP "$pid"
            log "sent SIGHUP to $name (pid $pid) so that it finds its first qemu hook"
            sent=1
        fi
    done
    if [ "$sent" = 0 ]; then
        log "no running libvirtd or virtqemud: the hook is found when it starts"
    fi
}

if [ "$UNINSTALL" = 1 ]; then
    [ -z "$BINARY" ] || die "--uninstall takes no BINARY (got '$BINARY')"
    if [ -e "$TARGET" ] || [ -L "$TARGET" ]; then
        rm -f "$TARGET"
        log "removed $TARGET"
    else
        log "$TARGET is not installed, nothing to do"
    fi
    exit 0
fi

[ -n "$BINARY" ] || usage
[ -f "$BINARY" ] || die "BINARY '$BINARY' is not a file (build it first: ninja -C BUILD)"
[ -x "$BINARY" ] || die "BINARY '$BINARY' is not executable"
# A binary that cannot run (missing libraries, wrong architecture) would fail every VM start.
if ! "$BINARY" --help >/dev/null 2>&1; then
    die "BINARY '$BINARY' does not run ('$BINARY --help' failed); not installed"
fi

had_hook=0
if hook_present; then
    had_hook=1
fi

if [ "$(realpath "$BINARY")" = "$(realpath -m "$TARGET")" ]; then
    log "$TARGET is already $BINARY (meson install links it): not copied"
else
    mkdir -p "$HOOK_DIR"
    # Copy next to the hook directory, then rename: libvirt never runs a half-written file, and
    # the temporary file is not in qemu.d, where it would be run too.
    tmp=$(mktemp "$(dirname "$HOOK_DIR")/.softaff-hook.XXXXXX")
    trap 'rm -f "$tmp"' EXIT
    cp "$BINARY" "$tmp"
    chmod 0755 "$tmp"
    mv -f "$tmp" "$TARGET"
    trap - EXIT
    log "installed $BINARY as $TARGET"
fi

if [ "$had_hook" = 1 ]; then
    log "libvirt already runs qemu hooks: no reload needed"
elif [ "$RELOAD" = 1 ]; then
    reload_libvirt
else
    log "--no-reload: libvirt finds the hook at its next start or reload (SIGHUP)"
fi
