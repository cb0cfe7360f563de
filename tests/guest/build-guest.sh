#!/bin/bash
# Build the softaff test guest: a Debian cloud kernel plus a busybox initramfs whose /init runs
# the load generator (load.c) controlled over the second serial port.
#
# Output, in ${SOFTAFF_CACHE:-/var/cache/softaff-test}:
#   vmlinuz        the guest kernel
#   initrd.img     gzip'd newc cpio: busybox, /init, /load
#   cmdline        the kernel command line to use
#   load           the static load generator (load.sha256: the load.c it was built from)
#   kernel-version the Debian kernel package the kernel came from
# Idempotent: a second run reuses everything that is up to date (no network access).
#   SOFTAFF_GUEST_KERNEL=/path/vmlinuz  use this kernel instead of downloading one
#   SOFTAFF_KERNEL_REFRESH=1            resolve and fetch the current cloud kernel again
#   --print                             print KERNEL=, INITRD=, CMDLINE= lines at the end
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SOFTAFF_CACHE:-/var/cache/softaff-test}
CMDLINE="console=ttyS0 quiet panic=-1 no_timer_check"
PRINT=0
for a in "$@"; do
    case $a in
    --print) PRINT=1 ;;
    -h | --help)
        sed -n '2,14p' "$0"
        exit 0
        ;;
    *)
        echo "build-guest: unknown argument $a" >&2
        exit 2
        ;;
    esac
done

log() { printf 'build-guest: %s\n' "$*" >&2; }
die() {
    printf 'build-guest: ERROR: %s\n' "$*" >&2
    exit 1
}

mkdir -p "$CACHE"
chmod 755 "$CACHE"
# Serialise concurrent builds (tests may start in parallel).
exec 9>"$CACHE/.lock"
flock 9

for b in gcc cpio gzip dpkg-deb; do
    command -v "$b" >/dev/null 2>&1 || die "$b not found (run contrib/install-deps.sh)"
done
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] || die "$BUSYBOX not found (apt-get install busybox-static)"
ldd_out=$(LC_ALL=C ldd "$BUSYBOX" 2>&1 || true)
if [[ $ldd_out != *"not a dynamic"* ]]; then
    die "$BUSYBOX is not static (install busybox-static, not busybox)"
fi

# --- kernel ---------------------------------------------------------------------------------
fetch_kernel() {
    command -v apt-cache >/dev/null 2>&1 || die "apt-cache not found; set SOFTAFF_GUEST_KERNEL"
    local pkg
    pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/ {sub(/^[ |]*Depends: /, ""); print; exit}')
    if [ -z "$pkg" ]; then
        log "linux-image-cloud-amd64 unknown to apt-cache, running apt-get update"
        apt-get update >/dev/null
        pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
            awk '/Depends: linux-image-[0-9]/ {sub(/^[ |]*Depends: /, ""); print; exit}')
    fi
    [ -n "$pkg" ] || die "cannot resolve linux-image-cloud-amd64 to a kernel package"
    if [ -s "$CACHE/vmlinuz" ] && [ "$(cat "$CACHE/kernel-version" 2>/dev/null)" = "$pkg" ]; then
        log "kernel $pkg already in cache"
        return
    fi
    log "downloading $pkg (apt-get download; not installed on the host)"
    local tmp
    tmp=$(mktemp -d "$CACHE/.kernel.XXXXXX")
    chmod 755 "$tmp"
    chown _apt "$tmp" 2>/dev/null || true # apt downloads as the _apt sandbox user
    if ! (cd "$tmp" && apt-get download "$pkg" >&2); then
        rm -rf "$tmp"
        die "apt-get download $pkg failed"
    fi
    local deb
    deb=$(ls "$tmp"/*.deb)
    dpkg-deb -x "$deb" "$tmp/root"
    local vmlinuz
    vmlinuz=$(find "$tmp/root/boot" -maxdepth 1 -name "vmlinuz-*" 2>/dev/null | head -n1)
    [ -n "$vmlinuz" ] || {
        rm -rf "$tmp"
        die "no /boot/vmlinuz-* in $deb"
    }
    install -m 644 "$vmlinuz" "$CACHE/vmlinuz.new"
    mv -f "$CACHE/vmlinuz.new" "$CACHE/vmlinuz"
    echo "$pkg" >"$CACHE/kernel-version"
    rm -rf "$tmp"
    log "kernel: $CACHE/vmlinuz ($pkg)"
}

if [ -n "${SOFTAFF_GUEST_KERNEL:-}" ]; then
    [ -r "$SOFTAFF_GUEST_KERNEL" ] || die "SOFTAFF_GUEST_KERNEL=$SOFTAFF_GUEST_KERNEL is not readable"
    if ! cmp -s "$SOFTAFF_GUEST_KERNEL" "$CACHE/vmlinuz" 2>/dev/null; then
        install -m 644 "$SOFTAFF_GUEST_KERNEL" "$CACHE/vmlinuz"
        echo "custom:$SOFTAFF_GUEST_KERNEL" >"$CACHE/kernel-version"
        log "kernel: copied $SOFTAFF_GUEST_KERNEL"
    fi
elif [ -s "$CACHE/vmlinuz" ] && [ -s "$CACHE/kernel-version" ] && [ "${SOFTAFF_KERNEL_REFRESH:-0}" != 1 ]; then
    log "kernel: reusing $CACHE/vmlinuz ($(cat "$CACHE/kernel-version"))"
else
    fetch_kernel
fi

# --- load generator ---------------------------------------------------------------------------
# Keyed by load.c's content, not its mtime: worktrees of different ages share the cache, and an
# older load.c with a newer mtime (a checkout) must not stand for a newer one. A load newer than
# its load.sha256 was built by a script that keeps no sum: rebuild.
LOAD_SUM=$(sha256sum "$HERE/load.c" | cut -d' ' -f1)
if [ ! -x "$CACHE/load" ] || [ "$(cat "$CACHE/load.sha256" 2>/dev/null)" != "$LOAD_SUM" ] ||
    [ "$CACHE/load" -nt "$CACHE/load.sha256" ]; then
    log "compiling load.c"
    gcc -static -O2 -pthread -Wall -o "$CACHE/load.new" "$HERE/load.c"
    mv -f "$CACHE/load.new" "$CACHE/load"
    echo "$LOAD_SUM" >"$CACHE/load.sha256"
else
    log "load: up to date"
fi

# --- initramfs --------------------------------------------------------------------------------
INITRD=$CACHE/initrd.img
if [ ! -s "$INITRD" ] || [ "$CACHE/load" -nt "$INITRD" ] || [ "$0" -nt "$INITRD" ] ||
    [ "$BUSYBOX" -nt "$INITRD" ]; then
    log "building initramfs"
    root=$(mktemp -d "$CACHE/.initramfs.XXXXXX")
    mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run}
    install -m 755 "$BUSYBOX" "$root/bin/busybox"
    for applet in sh mount umount mkdir cat echo ls sleep ps top poweroff reboot; do
        ln -s busybox "$root/bin/$applet"
    done
    install -m 755 "$CACHE/load" "$root/load"
    cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
echo "softaff-guest: init, $(/bin/busybox grep -c ^processor /proc/cpuinfo) CPUs, $(/bin/busybox cut -d' ' -f1 /proc/uptime)s uptime" >/dev/console
exec /load /dev/ttyS1 </dev/console >/dev/console 2>&1
INIT
    chmod 755 "$root/init"
    (cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0 | gzip -9 -n) \
        >"$INITRD.new"
    rm -rf "$root"
    chmod 644 "$INITRD.new"
    mv -f "$INITRD.new" "$INITRD"
    log "initramfs: $INITRD ($(stat -c %s "$INITRD") bytes)"
else
    log "initramfs: up to date"
fi
echo "$CMDLINE" >"$CACHE/cmdline"

if [ "$PRINT" -eq 1 ]; then
    echo "KERNEL=$CACHE/vmlinuz"
    echo "INITRD=$INITRD"
    echo "CMDLINE=$CMDLINE"
fi
