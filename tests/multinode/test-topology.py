#!/usr/bin/env python3
"""Multi-node host, first look: the 2-node TCG host (mnhost.py) shows 2 NUMA nodes to numactl,
to libvirt and to the host-built softaffctl, and the host-built softaffd runs there and reports
both partitions over its control socket.

Needs root, qemu-system-x86_64 and mkfs.ext4 (build-host.sh installs debootstrap; the first run
builds the image, ~80 s); without them it exits 77 (skip), or fails when SOFTAFF_REQUIRE_VM=1.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnhost  # noqa: E402



def expect(cond, what, detail=""):
    if not cond:
        raise AssertionError(what + ("\n" + detail if detail else ""))
    mnhost.log("ok: " + what)


def check_numactl(h):
    out = h.check("numactl -H", timeout=30)
    expect("available: 2 nodes (0-1)" in out, "numactl -H shows 2 nodes", out)
    expect("node 0 cpus: 0\n" in out and "node 1 cpus: 1\n" in out, "one CPU per node", out)
    sizes = [int(line.split()[3]) for line in out.splitlines()
             if line.startswith("node ") and " size: " in line]
    expect(len(sizes) == 2 and min(sizes) > 700, "about 1 GiB on each node (%s MB)" % sizes, out)


def check_libvirt(h, src):
    t0 = time.monotonic()
    h.check("bash %s/contrib/start-libvirt.sh" % src, timeout=180)
    mnhost.log("libvirtd ready in %.1fs" % (time.monotonic() - t0))
    caps = h.check("virsh -c qemu:///system capabilities", timeout=60)
    expect("<cells num='2'>" in caps, "libvirt capabilities show 2 NUMA cells", caps[-2000:])
    dom = h.check("virsh -c qemu:///system domcapabilities --virttype qemu --arch x86_64",
                  timeout=120)
    expect("<domain>qemu</domain>" in dom, "libvirt offers qemu (TCG) guests", dom[:1000])


def check_partitions(doc, what, key="node"):
    """Partition 0 is CPU 0 and partition 1 CPU 1; with key "node", also their node numbers."""
    got = sorted((p[key], p["cpus"]) for p in doc["partitions"])
    expect(got == [(0, "0"), (1, "1")], "%s: 2 partitions, CPU 0 and CPU 1 (%s)" % (what, got),
           json.dumps(doc, indent=1))


def check_softaffctl(h, build):
    out = h.check("%s/ctl/softaffctl partitions --layout node --json" % build, timeout=60)
    doc = json.loads(out)
    check_partitions(doc, "softaffctl partitions")
    for p in doc["partitions"]:
        expect(p["memory_total_bytes"] > 700 << 20, "partition %d has its node's memory (%d)" % (
            p["id"], p["memory_total_bytes"]))


def check_softaffd(h, build):
    h.check("mkdir -p /etc/softaff /run/softaff && : >/etc/softaff/softaff.conf", timeout=30)
    h.start_softaffd(build)
    try:
        out = h.check("%s/ctl/softaffctl status --json" % build, timeout=30)
        check_partitions(json.loads(out), "softaffd status", key="id")
    finally:
        mnhost.log_tail(h, "softaffd log tail",
                        "pkill -x softaffd; sleep 1; tail -n 20 /var/log/softaffd.log")


def main():
    build = mnhost.preflight()
    t0 = time.monotonic()

    def body(h):
        mnhost.log("image and shares: %.1fs, boot to ready: %.1fs" % (h.prepare_seconds,
                                                                      h.boot_seconds))
        check_numactl(h)
        check_softaffctl(h, os.path.abspath(build))
        check_libvirt(h, mnhost.SRC_ROOT)
        check_softaffd(h, os.path.abspath(build))
    mnhost.with_host(body, build_dir=build)
    mnhost.log("test-topology passed in %.1fs" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
