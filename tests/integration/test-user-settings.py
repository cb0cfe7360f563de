#!/usr/bin/env python3
"""Scenario h: a VM whose user pinned each vCPU with <vcpupin> is never touched.
Scenario i: a VM with <vcpu cpuset='0'> never bursts onto CPU 1.
Also: a user's live `virsh vcpupin` on a managed VM is respected."""
import time

import softaff_testlib as T


def main():
    T.require_vm()
    cfg, sock = T.write_config(layout="custom", custom="0;1", interval_ms=500,
                               extra={"policy": {"manage": "all"}})
    # h: pinned vCPU by vCPU, no softaff metadata, busy: softaff must leave it alone.
    h = T.Guest("h", vcpus=2, vcpupins={0: "1", 1: "0"})
    # i: allowed set is CPU 0 only; home auto; busy while CPU 1 is idle.
    i = T.Guest("i", vcpus=2, cpuset="0", metadata=T.softaff_metadata(preferred="auto"))
    for g in (h, i):
        g.start()
    for g in (h, i):
        g.wait_ready()
        g.wait_vcpu_threads()
    pins_before = h.affinity()
    assert pins_before == {0: {1}, 1: {0}}, "guest h started with %s" % pins_before
    d = T.Daemon(cfg).start(wait_socket=False)
    h.set_load(2)
    i.set_load(2)
    with T.AffinityWatcher([h, i], interval=0.05) as w:
        time.sleep(6)
    T.log("affinity changes seen: %s" % w.changes)
    assert h.affinity() == pins_before, "h's pins changed: %s" % h.affinity_text()
    assert not [c for c in w.changes if c[1] == "h"], "softaff touched h: %s" % w.changes
    for v, s in i.affinity().items():
        assert s == {0}, "i vCPU %d may run on %s, outside its cpuset 0" % (v, s)
    assert not [c for c in w.changes if c[1] == "i" and 1 in c[4]], \
        "i burst outside its cpuset: %s" % w.changes
    log = d.log_text()
    assert "pinned by the user" in log, "the daemon did not say why h is unmanaged:\n" + log
    rc = d.stop()
    assert rc == 0
    # After SIGTERM the user's pins are still the user's.
    assert h.affinity() == pins_before, "h's pins changed after SIGTERM: %s" % h.affinity_text()
    for v, s in i.affinity().items():
        assert s == {0}, "i vCPU %d restored to %s, not its cpuset 0" % (v, s)

    # A live `virsh vcpupin` by the user on a managed VM: softaff does not fight it.
    h.set_load(0)
    i.set_load(0)
    j = T.Guest("j", vcpus=2, metadata=None)
    j.start()
    j.wait_ready()
    j.wait_vcpu_threads()
    d = T.Daemon(cfg, log_path=T.os.path.join(T.workdir(), "softaffd-2.log"))
    d.start(wait_socket=False)
    T.wait_until(lambda: all(len(s) == 1 for s in j.affinity().values()), 3,
                 what="j placed home")
    j.vcpupin(0, "0-1")
    j.vcpupin(1, "0-1")
    time.sleep(2)
    assert j.affinity() == {0: {0, 1}, 1: {0, 1}}, \
        "softaff overrode the user's live vcpupin: %s" % j.affinity_text()
    assert d.stop() == 0
    assert j.affinity() == {0: {0, 1}, 1: {0, 1}}, "user's pins lost at SIGTERM"


T.run(main)
