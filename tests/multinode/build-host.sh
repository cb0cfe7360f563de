#!/bin/bash
# Build the softaff multi-node test host: a Debian rootfs (debootstrap, same release as this
# machine so host-built softaffd/softaffctl run inside unchanged) with libvirt, QEMU and numactl,
# booted by run-host.py / mnhost.py as a TCG guest with 2 virtual NUMA nodes.
#
# Output, in ${SOFTAFF_MN_CACHE:-/var/cache/softaff-multinode} (kept between runs):
#   rootfs/        the debootstrap tree (rebuilt only when PACKAGES or the release change)
#   host.img       raw ext4 image of rootfs plus our init and agent (mkfs.ext4 -d, no loop mounts)
#   vmlinuz        the Debian cloud kernel installed in the rootfs (modules are in the image)
#   initrd.img     its initramfs (virtio-blk root)
#   build-times    seconds spent on the last rootfs and image builds
# Idempotent; the only network access is the Debian mirror this machine's apt already uses.
#   SOFTAFF_MN_MIRROR=URL   mirror for debootstrap (default: the one apt-cache policy shows)
#   --print                 print KERNEL=, INITRD=, IMAGE= lines at the end
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SOFTAFF_MN_CACHE:-/var/cache/softaff-multinode}
# What softaffd/softaffctl link against, what the tests drive, and the kernel to boot. dbus and
# libpam-systemd: debootstrap does not resolve the virtual packages polkitd needs.
PACKAGES=(linux-image-cloud-amd64 initramfs-tools kmod tini procps iproute2 util-linux
    dbus libpam-systemd libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu qemu-system-x86 numactl
    libglib2.0-0 libjson-c5 libnuma1 libxml2 libvirt0 libbpf1 numad)
PRINT=0
for a in "$@"; do
    case $a in
    --print) PRINT=1 ;;
    -h | --help)
        sed -n '2,15p' "$0"
        exit 0
        ;;
    *)
        echo "build-host: unknown argument $a" >&2
        exit 2
        ;;
    esac
done

log() { printf 'build-host: %s\n' "$*" >&2; }
die() {
    printf 'build-host: ERROR: %s\n' "$*" >&2
    exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot)"
if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    apt-get install -y debootstrap >/dev/null 2>&1 ||
        { apt-get update >/dev/null && apt-get install -y debootstrap >/dev/null; } ||
        die "apt-get install debootstrap failed"
fi
for b in mkfs.ext4 sha256sum flock; do
    command -v "$b" >/dev/null 2>&1 || die "$b not found (apt-get install e2fsprogs coreutils util-linux)"
done

mkdir -p "$CACHE"
chmod 755 "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

# shellcheck disable=SC1091
SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$SUITE" ] || die "no VERSION_CODENAME in /etc/os-release"

# The mirror apt uses here (never a hard-coded host): first "<url> <suite>/main amd64" line.
find_mirror() {
    if [ -n "${SOFTAFF_MN_MIRROR:-}" ]; then
        echo "$SOFTAFF_MN_MIRROR"
        return
    fi
    apt-cache policy 2>/dev/null | awk -v s="$SUITE/main" '$3 == s && $4 == "amd64" {print $2; exit}'
}

# --- rootfs -------------------------------------------------------------------------------------
ROOTFS=$CACHE/rootfs
ROOTFS_STAMP="$SUITE ${PACKAGES[*]}"
build_rootfs() {
    local mirror t0 tmp
    mirror=$(find_mirror)
    if [ -z "$mirror" ]; then
        log "no $SUITE/main mirror in apt-cache policy, running apt-get update"
        apt-get update >/dev/null
        mirror=$(find_mirror)
    fi
    [ -n "$mirror" ] || die "cannot find a $SUITE mirror (set SOFTAFF_MN_MIRROR)"
    log "debootstrap $SUITE (minbase + ${#PACKAGES[@]} packages) from the apt mirror"
    t0=$SECONDS
    tmp=$CACHE/rootfs.new
    rm -rf "$tmp"
    local incl
    incl=$(
        IFS=,
        echo "${PACKAGES[*]}"
    )
    if ! debootstrap --variant=minbase --include="$incl" "$SUITE" "$tmp" "$mirror" \
        >"$CACHE/debootstrap.log" 2>&1; then
        cp "$tmp/debootstrap/debootstrap.log" "$CACHE/debootstrap-inner.log" 2>/dev/null || true
        tail -n 20 "$CACHE/debootstrap-inner.log" "$CACHE/debootstrap.log" >&2
        rm -rf "$tmp"
        die "debootstrap failed (log: $CACHE/debootstrap.log)"
    fi
    rm -rf "$ROOTFS"
    mv "$tmp" "$ROOTFS"
    echo "$ROOTFS_STAMP" >"$CACHE/rootfs.stamp"
    echo "rootfs $((SECONDS - t0))" >"$CACHE/build-times"
    log "rootfs built in $((SECONDS - t0))s"
}
if [ "$(cat "$CACHE/rootfs.stamp" 2>/dev/null)" != "$ROOTFS_STAMP" ] || [ ! -d "$ROOTFS/usr" ]; then
    build_rootfs
else
    log "rootfs: up to date"
fi

# --- our files in the image: init, command agent, config ----------------------------------------
# Staged beside the rootfs so the cached tree stays pristine; both go into one mkfs.ext4 -d.
stage_overlay() {
    local o=$1
    mkdir -p "$o/sbin" "$o/etc"
    install -m 755 "$HERE/guest-init.sh" "$o/sbin/softaff-mn-init"
    install -m 755 "$HERE/guest-agent.sh" "$o/sbin/softaff-mn-agent"
    echo mnhost >"$o/etc/hostname"
    printf '127.0.0.1 localhost\n127.0.1.1 mnhost\n' >"$o/etc/hosts"
    : >"$o/etc/fstab"
}

IMAGE=$CACHE/host.img
image_stamp() {
    cat "$CACHE/rootfs.stamp" "$HERE/guest-init.sh" "$HERE/guest-agent.sh" "$0" | sha256sum |
        cut -d' ' -f1
}
build_image() {
    local t0=$SECONDS tree size_mb
    tree=$CACHE/image-tree
    rm -rf "$tree"
    # cp -al: hard links, so the copy is instant and the overlay files replace links, not data.
    cp -al "$ROOTFS" "$tree"
    rm -f "$tree/etc/hostname" "$tree/etc/hosts" "$tree/etc/fstab"
    stage_overlay "$tree"
    size_mb=$(($(du -sm "$tree" | cut -f1) * 13 / 10 + 512))
    rm -f "$IMAGE.new"
    truncate -s "${size_mb}M" "$IMAGE.new"
    mkfs.ext4 -q -F -L mnhost-root -d "$tree" "$IMAGE.new" >/dev/null ||
        die "mkfs.ext4 -d $tree failed"
    rm -rf "$tree"
    mv -f "$IMAGE.new" "$IMAGE"
    local k i
    k=$(find "$ROOTFS/boot" -maxdepth 1 -name 'vmlinuz-*' | sort | tail -n1)
    i=$(find "$ROOTFS/boot" -maxdepth 1 -name 'initrd.img-*' | sort | tail -n1)
    if [ -z "$k" ] || [ -z "$i" ]; then
        die "no vmlinuz-*/initrd.img-* in $ROOTFS/boot"
    fi
    install -m 644 "$k" "$CACHE/vmlinuz"
    install -m 644 "$i" "$CACHE/initrd.img"
    image_stamp >"$CACHE/image.stamp"
    sed -i '/^image /d' "$CACHE/build-times" 2>/dev/null || true
    echo "image $((SECONDS - t0))" >>"$CACHE/build-times"
    log "image: $IMAGE (${size_mb} MiB) in $((SECONDS - t0))s"
}
if [ ! -s "$IMAGE" ] || [ "$(cat "$CACHE/image.stamp" 2>/dev/null)" != "$(image_stamp)" ]; then
    build_image
else
    log "image: up to date"
fi

if [ "$PRINT" -eq 1 ]; then
    echo "KERNEL=$CACHE/vmlinuz"
    echo "INITRD=$CACHE/initrd.img"
    echo "IMAGE=$IMAGE"
fi
