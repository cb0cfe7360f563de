#!/usr/bin/env python3
"""A user's live pin equal to the pin softaff has just applied is the user's (partitions
CPU 0 | CPU 1; every assertion reads /proc and virsh).

The VM has <vcpupin vcpu='0' cpuset='0'/> and preferred='1': softaff pins vCPU 1 to CPU 1 (its
home) and leaves vCPU 0 on its own CPU 0. The user then runs `virsh vcpupin VM 1 1 --live`: the
same set softaff wrote. The daemon must take it for the user's word (the record changes at
once), so after SIGTERM vCPU 1 holds exactly 1, not 0-1 (its definition's set), and the live
table says so. softaffd matched events to its own writes by value until issue 20. Before
that, the user gives vCPU 1 both CPUs (its own set already): softaff pins it home again.
"""
import re
import time

import softaff_testlib as T


def main():
    T.require_vm()
    T.wait_host_quiet()
    cfg, _ = T.write_config(layout="custom", custom="0;1", interval_ms=500, manage="explicit")
    g = T.Guest("eq", vcpus=2, vcpupins={0: "0"}, metadata=T.softaff_metadata(preferred="1"))
    g.start()
    g.wait_ready()
    g.wait_vcpu_threads()
    d = T.Daemon(cfg).start(wait_socket=False)
    T.wait_until(lambda: g.affinity() == {0: {0}, 1: {1}}, 15,
                 what=lambda: "vCPU 0 on its own 0, vCPU 1 home on 1 (now %s)" % g.affinity_text())
    T.wait_until(lambda: "<own" in g.metadata_get(), 5, what="softaffd's record")
    # softaff's own event for vCPU 1 has come and gone (two ticks).
    time.sleep(1.0)
    own_before = re.findall(r'<vcpupin vcpu="1"[^>]*>', g.metadata_get())
    assert not own_before, "vCPU 1 has no pin of its own yet: %s" % g.metadata_get()

    # The user gives vCPU 1 both CPUs, which its own set was: no own set changes, yet the
    # thread now runs on 0-1. softaff pins it home again (soak seed 1775393844: it stayed).
    g.vcpupin(1, "0-1")
    moved = g.affinity()
    back = T.wait_until(lambda: g.affinity() == {0: {0}, 1: {1}}, 5, what=False)
    assert back is not None, "vCPU 1 not pinned home again 5 s after the user's 0-1 (right " \
        "after the pin %s, now %s)" % (moved, g.affinity_text())
    T.log("the user's 0-1 on vCPU 1: home again after %.2f s (right after the pin: %s)"
          % (back, moved))

    g.vcpupin(1, "1")

    def recorded():
        d.check_alive()
        return re.search(r'<vcpupin vcpu="1" cpuset="1"/>', g.metadata_get()) is not None
    # The record follows the user's word at once (a discover), not at softaff's next pin.
    was_recorded = T.wait_until(recorded, 5, what=False) is not None
    taken = "the user pinned vCPU 1 to 1" in d.log_text()
    record = g.metadata_get()
    assert g.affinity() == {0: {0}, 1: {1}}, "while managed: %s" % g.affinity_text()

    assert d.stop() == 0
    assert g.affinity() == {0: {0}, 1: {1}}, \
        "after SIGTERM: %s; want exactly the user's 1 for vCPU 1" % g.affinity_text()
    assert g.vcpupin_info() == {0: {0}, 1: {1}}, "live table: %s" % g.vcpupin_info()
    assert taken, "the daemon did not take the user's pin: %s" % d.log_text()[-2000:]
    assert was_recorded, "the user's pin of vCPU 1 not in softaffd's record after 5 s: %s" % record
    assert "<softaffd" not in g.metadata_get(), "the record stayed: %s" % g.metadata_get()
    g.destroy()


T.run(main)
