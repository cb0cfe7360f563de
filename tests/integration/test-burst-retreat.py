#!/usr/bin/env python3
"""softaffd scenario: burst onto an idle partition, retreat when its owner gets busy.

Partitions 0 = CPU 0 and 1 = CPU 1 (layout=custom), tick 500 ms, softness 50.
Guest A (home 0) and guest B (home 1), 2 vCPUs each.
  1. A busy (2 threads), B idle: A's vCPUs spread to CPUs 0-1 within 2 ticks.
  2. B busy too: A retreats to CPU 0 within 2 ticks; B stays on CPU 1.
  3. B idle again: A bursts again.
  4. SIGTERM: softaffd exits 0 and restores every vCPU to its allowed set (all CPUs).
Reaction times are measured from the guest's acknowledgement of the load change."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import softaff_testlib as T  # noqa: E402

INTERVAL = 0.5
LIMIT = 1.5  # 2 ticks + slack for the sampling and the guest's thread start


def wait_or_explain(g, cpus, timeout):
    """g.wait_affinity(); on timeout add the host's CPU utilization to the failure."""
    try:
        return g.wait_affinity(cpus, timeout)
    except AssertionError as e:
        raise AssertionError("%s\n  host CPU utilization now: %s" % (
            e, T.format_utilization(T.cpu_utilization(0.5))))


def main():
    a, b, daemon = T.two_partition_scenario(daemon_first=False, interval_ms=int(INTERVAL * 1000))
    results = {}

    T.wait_host_quiet()  # again: the idle guests and the daemon are running now
    a.set_load(2)
    el = wait_or_explain(a, {0, 1}, 10)
    results["burst"] = el
    T.log("A busy, B idle: A on 0-1 after %.3fs" % el)
    assert b.all_on({1}), "B moved while idle: %s" % b.affinity_text()
    T.assert_libvirt_agrees(a)
    # A's burst is real: its throughput reaches about two CPUs' worth.
    a.wait_report(after=time.monotonic() + 0.2)
    w_burst = a.wait_report()[1]
    T.log("A throughput while bursting: %.0f units/s" % w_burst)

    b.set_load(2)
    el = wait_or_explain(a, {0}, 10)
    results["retreat"] = el
    T.log("B busy: A back on 0 after %.3fs" % el)
    assert b.all_on({1}), "B left its home while busy: %s" % b.affinity_text()
    T.assert_libvirt_agrees(a)
    T.assert_libvirt_agrees(b)

    b.set_load(0)
    el = wait_or_explain(a, {0, 1}, 10)
    results["burst again"] = el
    T.log("B idle again: A on 0-1 after %.3fs" % el)

    rc = daemon.stop()
    assert rc == 0, "softaffd exited with %s on SIGTERM" % rc
    host = T.host_cpus()
    for g in (a, b):
        aff = g.affinity()
        assert all(c == host for c in aff.values()), \
            "after SIGTERM %s is not restored to its allowed set %s: %s" % (
                g.name, T.format_cpulist(host), g.affinity_text())
        T.assert_libvirt_agrees(g)
    T.log("SIGTERM: softaffd exited 0, all vCPUs restored to %s" % T.format_cpulist(host))

    T.log("reaction times: " + ", ".join("%s %.3fs" % kv for kv in results.items()))
    # A second owner-forced retreat in a row holds the next burst off (docs/policy.md, the
    # back-off): with event sensing an idle TCG owner's few ms right after A arrives can count
    # as the first. Then the burst again may also wait the hold-off softaffd logged, no more.
    holdoff = [float(x) for x in re.findall(r"%s: retreat from partition 1: .*no burst for "
                                             r"([0-9.]+) s" % a.name, daemon.log_text())]
    limits = {k: LIMIT + (max(holdoff) if holdoff and k == "burst again" else 0)
              for k in results}
    if holdoff:
        T.log("softaffd held A's next burst off for %s s after a forced retreat" % holdoff)
    slow = {k: v for k, v in results.items() if v > limits[k]}
    assert not slow, "reactions slower than %s (2 ticks + slack, + a logged hold-off): %s" % (
        limits, slow)


if __name__ == "__main__":
    T.run(main)
