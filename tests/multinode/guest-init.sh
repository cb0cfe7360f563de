#!/bin/bash
# /sbin/softaff-mn-init: the multi-node test host's init (kernel init=). systemd would cost
# far more boot time under TCG than this; the tests start libvirtd themselves when they need it.
# Mounts what libvirt and softaffd need, then runs the command agent under tini (PID 1 reaping).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

mnt() { mountpoint -q "$4" || mount -t "$1" -o "$3" "$2" "$4"; }
mkdir -p /proc /sys /dev /run
mnt proc proc nosuid,nodev,noexec /proc
mnt sysfs sysfs nosuid,nodev,noexec /sys
mnt devtmpfs devtmpfs mode=755 /dev
mkdir -p /dev/pts /dev/shm
mnt devpts devpts gid=5,mode=620,ptmxmode=666 /dev/pts
mnt tmpfs tmpfs nosuid,nodev /dev/shm
mnt tmpfs tmpfs nosuid,nodev,mode=755 /run
mnt tmpfs tmpfs nosuid,nodev /tmp
mnt cgroup2 cgroup2 nosuid,nodev,noexec /sys/fs/cgroup
mount -o remount,rw / 2>/dev/null
hostname mnhost
ip link set lo up 2>/dev/null

# The agent's channel (virtio-serial) and the read-only shares (virtio-blk) are modules.
modprobe -q virtio_console
modprobe -q virtio_blk
echo "softaff-mn: init done at $(cut -d' ' -f1 /proc/uptime)s, $(nproc) CPUs" >/dev/console

exec tini -s -- /sbin/softaff-mn-agent
