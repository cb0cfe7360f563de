#!/usr/bin/env python3
"""Scenario c: two VMs with preferred="auto" get different homes, written back as assigned=.
Scenario d: `virsh metadata ... --live` moves a VM's home, applied within one tick."""
import re
import time

import softaff_testlib as T

PARTS = {0: {0}, 1: {1}}  # layout custom "0;1"


def assigned(g):
    m = re.search(r'assigned="(\d+)"', g.metadata_get())
    return int(m.group(1)) if m else None


def main():
    T.require_vm()
    cfg, sock = T.write_config(layout="custom", custom="0;1", interval_ms=500,
                               extra={"policy": {"manage": "all"}})
    a = T.Guest("a", vcpus=2, metadata=T.softaff_metadata(preferred="auto"))
    b = T.Guest("b", vcpus=2)  # no metadata: manage=all gives it the defaults (auto)
    for g in (a, b):
        g.start()
    for g in (a, b):
        g.wait_ready()
        g.wait_vcpu_threads()
    d = T.Daemon(cfg).start(wait_socket=False)

    # c. different homes, each VM's vCPUs on its own home, homes recorded in live metadata
    T.wait_until(lambda: assigned(a) is not None and assigned(b) is not None, 5,
                 what=lambda: "assigned= in both VMs' metadata (a: %r, b: %r)" % (
                     a.metadata_get(), b.metadata_get()))
    ha, hb = assigned(a), assigned(b)
    T.log("homes: a=%d b=%d" % (ha, hb))
    assert ha != hb, "both VMs got home %d" % ha
    a.wait_affinity(PARTS[ha], 2)
    b.wait_affinity(PARTS[hb], 2)
    for g, h in ((a, ha), (b, hb)):
        info = g.vcpuinfo()
        for v, i in info.items():
            assert i["affinity"] == PARTS[h], "%s vCPU %d: virsh vcpuinfo says %s, want %s" % (
                g.name, v, i["affinity"], PARTS[h])

    # d. a live metadata change moves the home within one tick (500 ms; 300 ms of slack for
    # the virsh round trip and this machine's noise)
    new_home = hb
    t0 = time.monotonic()
    a.metadata_set('<affinity preferred="%d"/>' % new_home, live=True)
    el = a.wait_affinity(PARTS[new_home], 3)
    total = time.monotonic() - t0
    T.log("metadata change applied %.3fs after virsh returned (%.3fs after it started)" % (
        el, total))
    assert total <= 0.8, "home change took %.3fs (> one 500 ms tick + 300 ms)" % total
    d.stop()


T.run(main)
