#!/usr/bin/env python3
"""softaffd scenario: both partitions' owners busy -> everybody stays home, no re-pins.

Partitions 0 = CPU 0 and 1 = CPU 1 (layout=custom), tick 500 ms, softness 50.
softaffd starts first; guests A (home 0) and B (home 1), 2 vCPUs each, arrive while it runs.
Both run 2 spinning threads for 20 s: /proc is polled every 100 ms and no affinity may change
(the target is at most 1 change per VM per 10 s; a steady load should give none)."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import softaff_testlib as T  # noqa: E402

DURATION = 20.0


def main():
    a, b, daemon = T.two_partition_scenario(daemon_first=True)

    a.set_load(2)
    b.set_load(2)
    # Both loads are on; the daemon may have seen one of them first and let A or B burst
    # for a moment. Give it 4 ticks to settle, then demand that everyone is home.
    time.sleep(2.0)
    el = 2.0 + T.wait_until(lambda: a.all_on({0}) and b.all_on({1}), 5, 0.05,
                      what=lambda: "busy guests at home: A %s, B %s" % (a.affinity_text(),
                                                                      b.affinity_text()))
    T.log("both busy, both home %.2fs after the load change" % el)
    time.sleep(1.0)

    t0 = time.monotonic()
    with T.AffinityWatcher([a, b], interval=0.1) as w:
        time.sleep(DURATION)
    t1 = time.monotonic()
    wa, wb = a.work_between(t0, t1), b.work_between(t0, t1)
    T.log("%d samples in %.1fs, %d affinity changes; throughput A %.0f, B %.0f units/s" % (
        w.samples, t1 - t0, len(w.changes), wa or 0, wb or 0))
    for (t, label, v, old, new) in w.changes:
        T.log("  change at +%.2fs: %s vcpu %d %s -> %s" % (
            t - t0, label, v, T.format_cpulist(old or ()), T.format_cpulist(new)))
    home_a, home_b = w.fraction_on("A", {0}), w.fraction_on("B", {1})
    T.log("vCPU samples at home: A %.1f%%, B %.1f%%" % (100 * home_a, 100 * home_b))
    assert w.samples >= DURATION / 0.1 * 0.8, "watcher took only %d samples" % w.samples
    assert not w.changes, "%d affinity changes under steady load" % len(w.changes)
    assert home_a >= 0.99 and home_b >= 0.99, "vCPUs ran away from home: A %.3f, B %.3f" % (
        home_a, home_b)
    assert a.all_on({0}) and b.all_on({1}), "not home at the end: A %s, B %s" % (
        a.affinity_text(), b.affinity_text())
    T.assert_libvirt_agrees(a)
    T.assert_libvirt_agrees(b)
    assert daemon.running(), "softaffd died"
    rc = daemon.stop()
    assert rc == 0, "softaffd exited with %s on SIGTERM" % rc


if __name__ == "__main__":
    T.run(main)
