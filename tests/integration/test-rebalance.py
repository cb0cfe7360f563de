#!/usr/bin/env python3
"""softaffd scenario (issue 11): homes rebalance on real guests.

Partitions 0 = CPU 0 and 1 = CPU 1 (layout=custom), tick 500 ms, mode strict (no bursts: the
owners' demand is what the VMs ask of their home), rebalance window 60 s (the least allowed).
Three guests of 1 vCPU, all homed on partition 1:
  A  preferred="auto", assigned 1 (the record of an earlier softaffd), 192 MiB, one spinning
     thread
  B  preferred="auto", assigned 1, 128 MiB, idle: cheaper than A, but moving it fixes nothing
  C  preferred="1" (the user's choice), 96 MiB, one spinning thread: the cheapest, never moved
Partition 1's owners want 2 CPUs of 1 while partition 0's want none. After the window A, the
cheapest VM whose move fixes the imbalance and whose home softaff may move, gets home 0: its
vCPU goes to CPU 0, the log gives the reason, and its metadata records assigned 0. Then both
partitions' owners want 1 CPU: no other move follows for another window (no oscillation), and
B and C never move."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import softaff_testlib as T  # noqa: E402

WINDOW_MS = 60000
INTERVAL = 0.5


def main():
    if not {0, 1} <= T.host_cpus():
        T.skip("the scenario needs host CPUs 0 and 1")
    cfg, sock = T.write_config(interval_ms=int(INTERVAL * 1000), layout="custom", custom="0;1",
                               manage="explicit",
                               extra={"policy": {"rebalance": "auto",
                                                 "rebalance_window_ms": WINDOW_MS,
                                                 "rebalance_max_moves_per_hour": 2}})
    a = T.Guest("A", vcpus=1, memory_mib=192,
                metadata=T.softaff_metadata(preferred="auto", mode="strict", assigned=1))
    b = T.Guest("B", vcpus=1, memory_mib=128,
                metadata=T.softaff_metadata(preferred="auto", mode="strict", assigned=1))
    c = T.Guest("C", vcpus=1, memory_mib=96,
                metadata=T.softaff_metadata(preferred=1, mode="strict"))
    guests = (a, b, c)
    for g in guests:
        g.start()
    for g in guests:
        g.wait_ready(180)
        g.wait_vcpu_threads()
    daemon = T.Daemon(cfg, socket_path=sock)
    daemon.start()
    for g in guests:
        g.wait_affinity({1}, 10)
    a.set_load(1)
    c.set_load(1)
    t0 = time.monotonic()
    T.log("A, B, C at home on CPU 1; A and C spinning one thread each")

    # Until the window has passed, nobody moves; then A goes to CPU 0.
    while time.monotonic() - t0 < WINDOW_MS / 1000.0 - 5:
        for g in guests:
            assert g.all_on({1}), "%s left CPU 1 before the window (%.0fs): %s" % (
                g.label, time.monotonic() - t0, g.affinity_text())
        time.sleep(0.5)
    el = T.wait_until(lambda: a.all_on({0}), 60, 0.1,
                      what=lambda: "A moved home to CPU 0: A %s, B %s, C %s\n%s" % (
                          a.affinity_text(), b.affinity_text(), c.affinity_text(),
                          daemon.log_text()[-3000:]))
    moved_after = time.monotonic() - t0
    T.log("A's home moved to partition 0 %.1fs after the load started" % moved_after)
    log = daemon.log_text()
    lines = [ln for ln in log.splitlines() if a.name in ln and "rebalance" in ln.lower()]
    assert lines, "no rebalance line for A in the log:\n" + log[-3000:]
    T.log("log: " + lines[0])
    assert re.search(r"from partition 1 to 0", lines[0]), lines[0]
    xml = T.virsh("dumpxml", a.name)
    assert re.search(r'assigned="0"|assigned=\'0\'', xml), "A's record does not say assigned 0:\n" + xml
    T.assert_libvirt_agrees(a)

    # Another window: B and C stay on CPU 1, A on CPU 0 (no move back, no second move).
    t1 = time.monotonic()
    while time.monotonic() - t1 < WINDOW_MS / 1000.0 + 10:
        assert a.all_on({0}), "A left its new home: %s" % a.affinity_text()
        assert b.all_on({1}), "B moved: %s" % b.affinity_text()
        assert c.all_on({1}), "C (the user's home) moved: %s" % c.affinity_text()
        time.sleep(0.5)
    moves = [ln for ln in daemon.log_text().splitlines() if "rebalance: home of" in ln]
    assert len(moves) == 1, "more than one move:\n" + "\n".join(moves)
    for g in guests:
        g.set_load(0)
    assert daemon.stop() == 0
    T.log("A moved once after %.1fs (window %ds); stable for %ds after" % (
        moved_after, WINDOW_MS // 1000, WINDOW_MS // 1000 + 10))


if __name__ == "__main__":
    T.run(main)
