#!/usr/bin/env bash
# Boots Debian's sched_ext kernel (unstable suite) under TCG with 2 CPUs on 2 NUMA nodes and an
# initramfs of busybox plus this build's tests/sched/test-sched (and its shared libraries), runs
# it there, and exits with its status. A scratch check of the scheduler part on a real
# sched_ext kernel without the multi-node test host; the kernel comes with apt from the mirror
# this machine's apt already uses, through a private sources list (the system's is untouched).
#
#   tests/sched/run-tcg.sh [BUILD_DIR] [-- COMMAND...]   (root; default COMMAND: test-sched)
# Multi-threaded TCG (each vCPU its own host thread, so a spinner's share means something; with
# thread=single both vCPUs share one and each gets half the wall clock). Seen in 2 of 8 runs: the
# kernel's "Oops: int3" at a static branch while sched_ext was enabled or disabled, a vCPU
# executing the breakpoint of live code patching (TCG's cross-modified code, no BPF frame).
# Environment: SOFTAFF_SCHED_CACHE (default /var/cache/softaff-sched-scratch), SOFTAFF_SCHED_KERNEL
# (default linux-binary-*-amd64 newest in unstable), TIMEOUT (s, default 600).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
cache=${SOFTAFF_SCHED_CACHE:-/var/cache/softaff-sched-scratch}
mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial" "$cache/apt/cache" "$cache/kernel"

# The mirror: the first deb URI of this machine's apt configuration.
uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [ -z "$uri" ]; then
    uri=$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' \
        /etc/apt/sources.list 2>/dev/null || true)
fi
[ -n "$uri" ] || { echo "no Debian mirror in /etc/apt: cannot fetch the kernel" >&2; exit 1; }
printf 'Types: deb\nURIs: %s\nSuites: unstable\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" > "$cache/apt/unstable.sources"
apto=(-o "Dir::Etc::sourcelist=$cache/apt/unstable.sources" -o Dir::Etc::sourceparts=-
      -o "Dir::State::Lists=$cache/apt/lists" -o "Dir::Cache::archives=$cache/apt/archives"
      -o "Dir::Cache=$cache/apt/cache" -o APT::Architecture=amd64 -o APT::Architectures=amd64
      -o APT::Sandbox::User=root)

if [ -z "${SOFTAFF_SCHED_KERNEL:-}" ] || ! ls "$cache"/kernel/*/vmlinuz >/dev/null 2>&1; then
    apt-get -q "${apto[@]}" update >/dev/null
fi
pkg=${SOFTAFF_SCHED_KERNEL:-$(apt-cache "${apto[@]}" search '^linux-binary-[0-9].*-amd64$' |
    awk '{print $1}' | grep -v -e cloud -e '-rt-' | sort -V | tail -1)}
[ -n "$pkg" ] || { echo "no linux-binary-*-amd64 package in unstable" >&2; exit 1; }
ver=${pkg#linux-binary-}
kdir=$cache/kernel/$ver
if [ ! -f "$kdir/vmlinuz" ]; then
    (cd "$cache/apt/archives" && apt-get -q "${apto[@]}" download "$pkg" "linux-base-$ver" >/dev/null)
    rm -rf "$kdir.x" && mkdir -p "$kdir.x"
    for deb in "$cache"/apt/archives/linux-binary-"$ver"_*.deb "$cache"/apt/archives/linux-base-"$ver"_*.deb; do
        dpkg-deb -x "$deb" "$kdir.x"
    done
    grep -q '^CONFIG_SCHED_CLASS_EXT=y' "$kdir.x/usr/lib/modules/$ver/config" ||
        { echo "$pkg: no CONFIG_SCHED_CLASS_EXT=y in its config" >&2; exit 1; }
    mkdir -p "$kdir"
    cp "$kdir.x/usr/lib/modules/$ver/vmlinuz" "$kdir.x/usr/lib/modules/$ver/config" "$kdir/"
    rm -rf "$kdir.x"
fi

# The initramfs: busybox, the test and its libraries, an init that runs the command.
[ -x "$build/tests/sched/test-sched" ] || { echo "no $build/tests/sched/test-sched: build first" >&2; exit 1; }
ir=$(mktemp -d "$cache/initramfs.XXXXXX")
trap 'rm -rf "$ir"' EXIT
mkdir -p "$ir"/{bin,dev,proc,sys,tmp,lib64}
cp /bin/busybox "$ir/bin/busybox"
cp "$build/tests/sched/test-sched" "$ir/bin/test-sched"
ldd "$build/tests/sched/test-sched" | awk '/=>/ {print $3} /ld-linux/ {print $1}' | while read -r lib; do
    [ -f "$lib" ] || continue
    mkdir -p "$ir$(dirname "$lib")"
    cp -L "$lib" "$ir$lib"
done
cmd=${*:-SOFTAFF_REQUIRE_SCHED_EXT=1 test-sched}
cat > "$ir/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev; mount -t tmpfs tmp /tmp
echo "@@ kernel \$(uname -r), \$(nproc) CPUs, sched_ext state \$(cat /sys/kernel/sched_ext/state 2>&1)"
( $cmd ); rc=\$?
dmesg | grep -i sched_ext | sed 's/^/@@ dmesg: /'
echo "@@rc=\$rc"
poweroff -f
EOF
chmod +x "$ir/init"
(cd "$ir" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$ir.cpio.gz"
trap 'rm -rf "$ir" "$ir.cpio.gz"' EXIT

out=$(mktemp)
timeout "${TIMEOUT:-600}" qemu-system-x86_64 -machine q35 -accel tcg -m 1024 -smp 2 -nographic -no-reboot \
    -object memory-backend-ram,id=m0,size=512M -numa node,nodeid=0,cpus=0,memdev=m0 \
    -object memory-backend-ram,id=m1,size=512M -numa node,nodeid=1,cpus=1,memdev=m1 \
    -kernel "$kdir/vmlinuz" -initrd "$ir.cpio.gz" \
    -append "console=ttyS0 quiet loglevel=5 panic=-1" </dev/null 2>&1 | tr -d '\r' | tee "$out" |
    sed -n "/@@ kernel/,\$p"
rc=$(sed -n 's/.*@@rc=\([0-9]*\).*/\1/p' "$out" | tail -1)
rm -f "$out"
[ -n "$rc" ] || { echo "the guest did not report a status" >&2; exit 1; }
exit "$rc"
