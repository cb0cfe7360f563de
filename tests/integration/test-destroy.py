#!/usr/bin/env python3
"""Scenario g: a VM destroyed while bursting is forgotten, without an error storm."""
import time

import softaff_testlib as T


def main():
    T.require_vm()
    T.wait_host_quiet()
    cfg, sock = T.write_config(layout="custom", custom="0;1", interval_ms=500)
    a = T.Guest("a", vcpus=2, metadata=T.softaff_metadata(preferred=0))
    b = T.Guest("b", vcpus=2, metadata=T.softaff_metadata(preferred=1))
    for g in (a, b):
        g.start()
    for g in (a, b):
        g.wait_ready()
        g.wait_vcpu_threads()
    d = T.Daemon(cfg).start(wait_socket=False)
    a.wait_affinity({0}, 2)
    a.set_load(2)
    a.wait_affinity({0, 1}, 3, what="a to burst")
    before = len(d.log_text().splitlines())
    a.destroy()
    time.sleep(3)  # six ticks
    after = d.log_text().splitlines()[before:]
    T.log("daemon log after the destroy:\n  " + "\n  ".join(after))
    assert d.running(), "softaffd died after a VM was destroyed"
    assert any("forgotten" in l for l in after), "the destroyed VM was not forgotten"
    noisy = [l for l in after if " warning: " in l or " critical: " in l]
    assert len(noisy) <= 1, "error storm after the destroy: %d warnings" % len(noisy)
    # The daemon keeps working for the VMs left: B bursts when busy alone.
    b.set_load(2)
    b.wait_affinity({0, 1}, 3, what="b to burst after a is gone")
    assert d.stop() == 0


T.run(main)
