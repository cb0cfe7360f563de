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
#   SOFTAFF_MN_KERNEL=NAME  the kernel the host boots (--kernel NAME says the same):
#       bookworm  (default) Debian 12's cloud kernel (6.1), installed in the rootfs
#       unstable  Debian unstable's cloud kernel (7.2.x, CONFIG_SCHED_CLASS_EXT=y), fetched
#                 once with apt through a private sources list (the same mirror, suite
#                 unstable; this machine's apt sources are not touched) into kernel-unstable/;
#                 its modules and initramfs go into their own image, host-unstable.img, with
#                 vmlinuz-unstable and initrd-unstable.img. Delete kernel-unstable/ (or set
#                 SOFTAFF_MN_KERNEL_REFRESH=1) to take a newer one.
#   --print                 print KERNEL=, INITRD=, IMAGE=, KERNEL_NAME= lines at the end
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${SOFTAFF_MN_CACHE:-/var/cache/softaff-multinode}
# What softaffd/softaffctl link against, what the tests drive, and the kernel to boot. dbus and
# libpam-systemd: debootstrap does not resolve the virtual packages polkitd needs.
PACKAGES=(linux-image-cloud-amd64 initramfs-tools kmod tini procps iproute2 util-linux
    dbus libpam-systemd libvirt-daemon-system libvirt-clients libvirt-daemon-driver-qemu qemu-system-x86 numactl
    libglib2.0-0 libjson-c5 libnuma1 libxml2 libvirt0 libbpf1 numad)
PRINT=0
KERNEL_NAME=${SOFTAFF_MN_KERNEL:-bookworm}
next_is_kernel=0
for a in "$@"; do
    if [ "$next_is_kernel" -eq 1 ]; then
        KERNEL_NAME=$a
        next_is_kernel=0
        continue
    fi
    case $a in
    --print) PRINT=1 ;;
    --kernel) next_is_kernel=1 ;;
    --kernel=*) KERNEL_NAME=${a#--kernel=} ;;
    -h | --help)
        sed -n '2,23p' "$0"
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
case $KERNEL_NAME in
bookworm | unstable) ;;
*) die "unknown kernel '$KERNEL_NAME' (SOFTAFF_MN_KERNEL or --kernel: bookworm or unstable)" ;;
esac
[ "$next_is_kernel" -eq 0 ] || die "--kernel needs a name (bookworm or unstable)"

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

# --- the unstable kernel (SOFTAFF_MN_KERNEL=unstable) ----------------------------------------
# apt with a private sources list, lists and cache under kernel-unstable/apt: the mirror this
# machine's apt uses, suite unstable. The debs are kept; only the three the kernel is made of
# (base files, image, modules) are fetched, and unpacked into the image tree, not installed:
# bookworm's linux-base is older than the unstable image package's pre-dependency, and the
# tree needs no package database entry to boot it.
KDIR=$CACHE/kernel-unstable
fetch_unstable() {
    local mirror apt abi pkg
    if [ -s "$KDIR/abi" ] && [ "${SOFTAFF_MN_KERNEL_REFRESH:-0}" != 1 ] &&
        [ "$(find "$KDIR/debs" -name '*.deb' 2>/dev/null | wc -l)" -eq 3 ]; then
        return
    fi
    mirror=$(find_mirror)
    [ -n "$mirror" ] || die "cannot find the apt mirror (set SOFTAFF_MN_MIRROR)"
    log "fetching Debian unstable's cloud kernel with apt (private sources list)"
    rm -rf "$KDIR"
    mkdir -p "$KDIR/apt/lists/partial" "$KDIR/apt/cache/archives/partial" "$KDIR/debs"
    : >"$KDIR/apt/status"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror unstable main" \
        >"$KDIR/apt/sources.list"
    apt=(-o Dir::Etc::sourcelist="$KDIR/apt/sources.list" -o Dir::Etc::sourceparts=-
        -o Dir::State::Lists="$KDIR/apt/lists" -o Dir::Cache="$KDIR/apt/cache"
        -o Dir::State::status="$KDIR/apt/status" -o APT::Sandbox::User=root)
    apt-get "${apt[@]}" update >"$KDIR/apt.log" 2>&1 ||
        { tail -n 5 "$KDIR/apt.log" >&2; die "apt-get update (unstable) failed"; }
    # The meta-package names the current ABI: linux-image-7.2.13+deb14-cloud-amd64 and so on.
    abi=$(apt-cache "${apt[@]}" show linux-image-cloud-amd64 |
        sed -n 's/^Depends:.*linux-image-\([^ ,]*-cloud-amd64\) .*/\1/p' | head -n1)
    [ -n "$abi" ] || die "no linux-image-cloud-amd64 in the unstable suite"
    for pkg in linux-base-$abi linux-binary-$abi linux-modules-$abi; do
        (cd "$KDIR/debs" && apt-get "${apt[@]}" download "$pkg" >>"$KDIR/apt.log" 2>&1) ||
            { tail -n 5 "$KDIR/apt.log" >&2; die "apt-get download $pkg failed"; }
    done
    echo "$abi" >"$KDIR/abi"
    rm -rf "$KDIR/apt/lists" "$KDIR/apt/cache"
    log "unstable kernel: $abi"
}

# Unpacks the unstable kernel into tree and builds its initramfs there (bookworm's kmod and
# initramfs-tools read its xz-compressed modules); copies the kernel and initramfs to $1, $2.
install_unstable() {
    local tree=$1 kernel=$2 initrd=$3 abi deb
    abi=$(cat "$KDIR/abi")
    for deb in "$KDIR"/debs/*.deb; do
        dpkg-deb -x "$deb" "$tree"
    done
    [ -f "$tree/usr/lib/modules/$abi/vmlinuz" ] || die "no vmlinuz in the $abi packages"
    cp "$tree/usr/lib/modules/$abi/config" "$tree/boot/config-$abi"
    cp "$tree/usr/lib/modules/$abi/System.map" "$tree/boot/System.map-$abi" 2>/dev/null || true
    chroot "$tree" depmod -a "$abi" || die "depmod $abi failed"
    chroot "$tree" mkinitramfs -o "/boot/initrd.img-$abi" "$abi" >"$CACHE/mkinitramfs.log" 2>&1 ||
        { tail -n 5 "$CACHE/mkinitramfs.log" >&2; die "mkinitramfs $abi failed"; }
    install -m 644 "$tree/usr/lib/modules/$abi/vmlinuz" "$kernel"
    install -m 644 "$tree/boot/initrd.img-$abi" "$initrd"
}

# Per kernel: its image, kernel and initramfs, and the stamp of what they were made from.
if [ "$KERNEL_NAME" = bookworm ]; then
    IMAGE=$CACHE/host.img KERNEL=$CACHE/vmlinuz INITRD=$CACHE/initrd.img
    STAMP=$CACHE/image.stamp
else
    IMAGE=$CACHE/host-unstable.img KERNEL=$CACHE/vmlinuz-unstable
    INITRD=$CACHE/initrd-unstable.img STAMP=$CACHE/image-unstable.stamp
    fetch_unstable
fi
image_stamp() {
    {
        cat "$CACHE/rootfs.stamp" "$HERE/guest-init.sh" "$HERE/guest-agent.sh" "$0"
        echo "$KERNEL_NAME"
        [ "$KERNEL_NAME" = bookworm ] || cat "$KDIR/abi"
    } | sha256sum | cut -d' ' -f1
}
build_image() {
    local t0=$SECONDS tree size_mb
    tree=$CACHE/image-tree
    rm -rf "$tree"
    # cp -al: hard links, so the copy is instant and the overlay files replace links, not data.
    cp -al "$ROOTFS" "$tree"
    rm -f "$tree/etc/hostname" "$tree/etc/hosts" "$tree/etc/fstab"
    stage_overlay "$tree"
    if [ "$KERNEL_NAME" = unstable ]; then
        # New files only (its modules dir, /boot entries): the linked rootfs stays as it is.
        install_unstable "$tree" "$KERNEL.new" "$INITRD.new"
    else
        local k i
        k=$(find "$ROOTFS/boot" -maxdepth 1 -name 'vmlinuz-*' | sort | tail -n1)
        i=$(find "$ROOTFS/boot" -maxdepth 1 -name 'initrd.img-*' | sort | tail -n1)
        if [ -z "$k" ] || [ -z "$i" ]; then
            die "no vmlinuz-*/initrd.img-* in $ROOTFS/boot"
        fi
        install -m 644 "$k" "$KERNEL.new"
        install -m 644 "$i" "$INITRD.new"
    fi
    size_mb=$(($(du -sm "$tree" | cut -f1) * 13 / 10 + 512))
    rm -f "$IMAGE.new"
    truncate -s "${size_mb}M" "$IMAGE.new"
    mkfs.ext4 -q -F -L mnhost-root -d "$tree" "$IMAGE.new" >/dev/null ||
        die "mkfs.ext4 -d $tree failed"
    rm -rf "$tree"
    mv -f "$IMAGE.new" "$IMAGE"
    mv -f "$KERNEL.new" "$KERNEL"
    mv -f "$INITRD.new" "$INITRD"
    image_stamp >"$STAMP"
    sed -i "/^image-$KERNEL_NAME /d" "$CACHE/build-times" 2>/dev/null || true
    echo "image-$KERNEL_NAME $((SECONDS - t0))" >>"$CACHE/build-times"
    log "image ($KERNEL_NAME kernel): $IMAGE (${size_mb} MiB) in $((SECONDS - t0))s"
}
if [ ! -s "$IMAGE" ] || [ ! -s "$KERNEL" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$(image_stamp)" ]; then
    build_image
else
    log "image ($KERNEL_NAME kernel): up to date"
fi

if [ "$PRINT" -eq 1 ]; then
    echo "KERNEL=$KERNEL"
    echo "INITRD=$INITRD"
    echo "IMAGE=$IMAGE"
    echo "KERNEL_NAME=$KERNEL_NAME"
fi
