#!/bin/bash
# Installs the softaff .deb on this machine, checks what it put where, and takes it out again
# (remove, then purge), checking each step. Run as root; leaves the machine as it found it.
#
#   tests/package/test-deb.sh [DEB]    (default: build-deb/softaff_*.deb of contrib/build-deb.sh)
#
# Refuses (exit 2) to run when softaff is installed already (any dpkg state but not-installed),
# when /etc/libvirt/hooks/qemu.d/50-softaff exists (integration tests put a temporary wrapper
# there: it is not this package's to clobber), or when any file of the package is on disk.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

SRC=$(cd "$(dirname "$0")/../.." && pwd)
HOOK=/etc/libvirt/hooks/qemu.d/50-softaff
HOOK_BIN=/usr/libexec/softaff-hook
DAEMON=/usr/sbin/softaffd
CTL=/usr/bin/softaffctl
CONF=/etc/softaff/softaff.conf
WANTS=/etc/systemd/system/multi-user.target.wants/softaffd.service
APT=(timeout 600 apt-get -o DPkg::Lock::Timeout=300)
# Every path the package installs, checked one by one after the install.
EXECUTABLES=("$DAEMON" "$CTL" "$HOOK_BIN")
MAN_PAGES=(/usr/share/man/man8/softaffd.8.gz /usr/share/man/man1/softaffctl.1.gz
    /usr/share/man/man8/softaff-hook.8.gz /usr/share/man/man5/softaff.conf.5.gz)
UNIT=/lib/systemd/system/softaffd.service
COMPLETION=/usr/share/bash-completion/completions/softaffctl
SCHEMA=/usr/share/softaff/softaff-domain.rng
DOCS=(/usr/share/doc/softaff/copyright /usr/share/doc/softaff/changelog.gz)

failures=0
installed=0
T=
log() { printf 'test-deb: %s\n' "$*"; }
ok() { printf 'test-deb: ok    %s\n' "$*"; }
fail() {
    printf 'test-deb: FAIL  %s\n' "$*" >&2
    failures=$((failures + 1))
}
refuse() {
    printf 'test-deb: refusing to run: %s\n' "$*" >&2
    exit 2
}
check() { # check DESCRIPTION COMMAND...: ok when COMMAND succeeds
    local what=$1
    shift
    if "$@"; then ok "$what"; else fail "$what"; fi
}

dpkg_status() { dpkg-query -W -f='${db:Status-Status}' softaff 2>/dev/null || true; }
# PIDs of processes running the installed daemon (its binary, or the binary dpkg removed).
daemon_pids() {
    local p exe
    for p in /proc/[0-9]*; do
        exe=$(readlink "$p/exe" 2>/dev/null || true)
        if [ "$exe" = "$DAEMON" ] || [ "$exe" = "$DAEMON (deleted)" ]; then
            echo "${p#/proc/}"
        fi
    done
}
libvirt_running() { pidof -s libvirtd >/dev/null 2>&1 || pidof -s virtqemud >/dev/null 2>&1; }
other_hook_present() {
    local f
    [ -x /etc/libvirt/hooks/qemu ] && [ -f /etc/libvirt/hooks/qemu ] && return 0
    for f in /etc/libvirt/hooks/qemu.d/* /etc/libvirt/hooks/qemu.d/.[!.]*; do
        [ "$f" != "$HOOK" ] && [ -f "$f" ] && [ -x "$f" ] && return 0
    done
    return 1
}

# On any exit: no test daemon, no package left behind, directories dpkg took away put back.
cleanup() {
    local pid
    for pid in $(daemon_pids); do kill "$pid" 2>/dev/null || true; done
    if [ "$installed" = 1 ] && [ -n "$(dpkg_status)" ] && [ "$(dpkg_status)" != not-installed ]; then
        log "cleanup: purging softaff"
        "${APT[@]}" purge -y softaff >/dev/null 2>&1 || log "cleanup: apt-get purge softaff failed"
    fi
    restore_dirs
    [ -z "$T" ] || rm -rf "$T"
}

# Directories of the package that exist now: dpkg removes them on purge when they are empty.
record_dirs() {
    local d
    : >"$T/dirs"
    while IFS= read -r d; do
        if [ -d "$d" ]; then
            stat -c '%a %U %G %n' "$d" >>"$T/dirs"
        fi
    done < <(grep '/$' "$T/contents" | sed 's|^\.||; s|/$||' | grep -v '^$')
}
restore_dirs() {
    [ -n "$T" ] && [ -f "$T/dirs" ] || return 0
    local mode user group dir
    while read -r mode user group dir; do
        if [ ! -d "$dir" ]; then
            install -d -m "$mode" -o "$user" -g "$group" "$dir"
            log "restored directory $dir (dpkg removed it with the package)"
        fi
    done <"$T/dirs"
}

preconditions() {
    [ "$(id -u)" -eq 0 ] || refuse "must run as root (apt-get install)"
    local status path
    status=$(dpkg_status)
    if [ -n "$status" ] && [ "$status" != not-installed ]; then
        refuse "the softaff package is on this machine already (dpkg state: $status); this test installs and purges it: remove it first (apt-get purge softaff)"
    fi
    if [ -e "$HOOK" ] || [ -L "$HOOK" ]; then
        refuse "$HOOK exists and no softaff package owns it (an integration test's temporary wrapper, or contrib/install-hook.sh): not clobbering it; run again when it is gone"
    fi
    [ ! -e /etc/softaff ] || refuse "/etc/softaff exists (not from the package): the purge would delete it"
    while IFS= read -r path; do
        path=${path#.}
        case "$path" in */ | '') continue ;; esac
        if [ -e "$path" ] || [ -L "$path" ]; then
            refuse "$path exists and would be overwritten, then deleted, by the package (a meson install to /usr?)"
        fi
    done <"$T/contents"
}

check_installed_paths() {
    local f
    for f in "${EXECUTABLES[@]}"; do
        check "$f is an executable file" test -f "$f" -a -x "$f"
    done
    check "$HOOK is a link to $HOOK_BIN" test "$(readlink "$HOOK")" = "$HOOK_BIN"
    check "$HOOK runs ($HOOK --help)" "$HOOK" --help
    check "$UNIT starts $DAEMON --foreground" grep -qx "ExecStart=$DAEMON --foreground" "$UNIT"
    check "softaffd.service is enabled ($WANTS)" test "$(readlink "$WANTS")" = "$UNIT"
    for f in "${MAN_PAGES[@]}"; do
        check "$f is a man page" bash -c "zcat '$f' | grep -q '^\.TH'"
    done
    check "$COMPLETION completes softaffctl" \
        bash -c "source '$COMPLETION' && complete -p softaffctl >/dev/null"
    check "$SCHEMA is a RELAX NG grammar" grep -q '<grammar' "$SCHEMA"
    for f in "${DOCS[@]}"; do
        check "$f is there" test -s "$f"
    done
    check "$CONF is there" test -s "$CONF"
    check "$CONF is a conffile" bash -c "dpkg-query -W -f='\${Conffiles}' softaff | grep -q '^ $CONF '"
    check "$CONF sets no key (all commented out)" \
        bash -c "! grep -Ev '^[[:space:]]*(#|\[|$)' '$CONF'"
    # And whatever else the .deb holds: nothing missing on disk.
    local path missing=0
    while IFS= read -r path; do
        path=${path#.}
        case "$path" in */ | '') continue ;; esac
        if [ ! -e "$path" ] && [ ! -L "$path" ]; then
            fail "$path (in the .deb) is not on disk"
            missing=1
        fi
    done <"$T/contents"
    [ "$missing" = 1 ] || ok "every file of the .deb is on disk"
}

check_commands() {
    local out version
    if out=$("$CTL" partitions 2>&1) && grep -q '^PARTITION' <<<"$out"; then
        ok "$CTL partitions"
        printf '%s\n' "$out"
    else
        fail "$CTL partitions: $out"
    fi
    check "$CTL partitions --json lists a partition" bash -c \
        "'$CTL' partitions --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"partitions\"]'"
    version=$(dpkg-deb -f "$DEB" Version)
    out=$("$DAEMON" --version 2>&1 || true)
    check "$DAEMON --version says $version ('$out')" test "$out" = "softaffd $version"
}

# The installed daemon, detached as an operator would start it without systemd; with its own
# socket and the QMP backend over no sockets, it manages no VM of this (shared) machine.
start_daemon() {
    cat >"$T/softaff.conf" <<CONF
[daemon]
socket=$T/softaffd.sock
backend=qmp
[qmp]
sockets=$T/none/*.qmp
CONF
    check "$DAEMON --config ... starts (detaches)" "$DAEMON" --config "$T/softaff.conf"
    local _
    for _ in $(seq 50); do
        "$CTL" status --socket "$T/softaffd.sock" >/dev/null 2>&1 && break
        sleep 0.2
    done
    check "$CTL status answers from the installed softaffd" \
        "$CTL" status --socket "$T/softaffd.sock"
    DAEMON_PIDS=$(daemon_pids)
    check "softaffd runs (pid $DAEMON_PIDS)" test -n "$DAEMON_PIDS"
}

main() {
    DEB=${1:-}
    if [ -z "$DEB" ]; then
        DEB=$(find "$SRC/build-deb" -maxdepth 1 -name 'softaff_*.deb' 2>/dev/null | sort | tail -n1)
        [ -n "$DEB" ] || refuse "no $SRC/build-deb/softaff_*.deb: build it (contrib/build-deb.sh) or name the .deb"
    fi
    [ -f "$DEB" ] || refuse "no package '$DEB' (build it: contrib/build-deb.sh)"
    DEB=$(realpath "$DEB")
    T=$(mktemp -d /tmp/softaff-test-deb.XXXXXX)
    chmod 755 "$T"
    trap cleanup EXIT
    dpkg-deb --fsys-tarfile "$DEB" | tar -t >"$T/contents"
    preconditions
    record_dirs
    dpkg-query -W -f='${db:Status-Status} ${Package}\n' | awk '$1 == "installed" {print $2}' |
        sort >"$T/packages-before"
    local expect_reload=0
    if libvirt_running && ! other_hook_present; then
        expect_reload=1
    fi

    log "apt-get install $DEB"
    installed=1
    "${APT[@]}" install -y --no-install-recommends "$DEB" 2>&1 | tee "$T/install.log"
    check "dpkg state is installed" test "$(dpkg_status)" = installed
    if [ ! -d /run/systemd/system ]; then
        check "without systemd, the install says how to start softaffd" \
            grep -q "start-stop-daemon --stop .*--exec $DAEMON" "$T/install.log"
    fi
    if [ "$expect_reload" = 1 ]; then
        check "the install reloads libvirt (its first qemu hook)" grep -q 'sent SIGHUP to' "$T/install.log"
    fi
    check_installed_paths
    check_commands
    start_daemon
    echo '# an administrator edit, kept by remove' >>"$CONF"

    log "apt-get remove softaff"
    local t0 took
    t0=$(date +%s)
    "${APT[@]}" remove -y softaff 2>&1 | tee "$T/remove.log"
    took=$(($(date +%s) - t0))
    # prerm sends SIGTERM and waits up to 30 s before SIGKILL, which would restore no VM.
    check "softaffd stopped on SIGTERM (the removal took ${took} s, under 25)" test "$took" -lt 25
    check "dpkg state is config-files" test "$(dpkg_status)" = config-files
    check "$HOOK is gone" test ! -e "$HOOK" -a ! -L "$HOOK"
    check "softaffd is not running (was pid $DAEMON_PIDS)" test -z "$(daemon_pids)"
    check "$DAEMON is gone" test ! -e "$DAEMON"
    check "$CONF is kept, with the edit" grep -q '^# an administrator edit' "$CONF"
    if [ "$expect_reload" = 1 ]; then
        check "the removal reloads libvirt" grep -q 'sent SIGHUP to' "$T/remove.log"
    fi

    log "apt-get purge softaff"
    "${APT[@]}" purge -y softaff 2>&1 | tee "$T/purge.log"
    local status
    status=$(dpkg_status)
    check "dpkg state is not-installed ('$status')" test -z "$status" -o "$status" = not-installed
    check "/etc/softaff is gone" test ! -e /etc/softaff
    check "softaffd.service is no longer enabled" test ! -L "$WANTS"
    installed=0

    restore_dirs
    dpkg-query -W -f='${db:Status-Status} ${Package}\n' | awk '$1 == "installed" {print $2}' |
        sort >"$T/packages-after"
    local extra
    extra=$(comm -13 "$T/packages-before" "$T/packages-after" | tr '\n' ' ')
    if [ -n "$extra" ]; then
        log "purging the dependencies the install pulled in: $extra"
        # shellcheck disable=SC2086 # package names
        "${APT[@]}" purge -y $extra
    fi
    check "the installed packages are those of before" \
        cmp -s "$T/packages-before" <(dpkg-query -W -f='${db:Status-Status} ${Package}\n' |
            awk '$1 == "installed" {print $2}' | sort)

    if [ "$failures" -ne 0 ]; then
        log "$failures check(s) failed"
        exit 1
    fi
    log "all checks passed"
}

main "$@"
