#!/usr/bin/env python3
"""softaffd with backend=qmp: QEMU processes without libvirt, found through QMP sockets.

Partitions 0 = CPU 0 and 1 = CPU 1 (layout=custom), tick 500 ms, softness 50. Guests A
([vm A] preferred=0) and B (preferred=1) are plain `qemu-system-x86_64` processes with an extra
-qmp socket for softaffd; their threads are unnamed, so softaffd can only learn the vCPU threads
from query-cpus-fast. A third guest C (preferred=1) comes and goes.
  0. softaffd finds the sockets, names the VMs (query-name), finds the QEMU pid (SO_PEERCRED):
     idle A on CPU 0, B and C on CPU 1, emulator threads at home too.
  1. C exits: forgotten, without warnings.
  a. A busy, B idle: A's vCPU threads on 0-1 within 2 ticks; B busy: A back on CPU 0 within
     2 ticks.
  b. both busy for 20 s: everybody home, no affinity change at all.
  2. SIGTERM: every QEMU thread gets back the affinity it had before softaffd touched it.
Reaction times are measured from the guest's acknowledgement of the load change."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import softaff_testlib as T  # noqa: E402

INTERVAL = 0.5
LIMIT = 1.5  # 2 ticks + slack, as in test-burst-retreat
STEADY = 20.0


def all_threads_affinity(g):
    """{tid: set} of every thread of the QEMU process."""
    out = {}
    for t in os.listdir("/proc/%d/task" % g.pid()):
        try:
            out[int(t)] = T.thread_affinity(g.pid(), int(t))
        except OSError:
            pass
    return out


def others_on(g, cpus):
    aff = all_threads_affinity(g)
    vcpus = set(g.vcpu_tids().values())
    return all(c == cpus for t, c in aff.items() if t not in vcpus)


def wait_or_explain(g, cpus, timeout):
    try:
        return g.wait_affinity(cpus, timeout)
    except AssertionError as e:
        raise AssertionError("%s\n  host CPU utilization now: %s" % (
            e, T.format_utilization(T.cpu_utilization(0.5))))


def main():
    if not {0, 1} <= T.host_cpus():
        T.skip("the two-partition scenario needs host CPUs 0 and 1")
    T.wait_host_quiet()
    wd = T.workdir()
    a = T.QemuGuest("A", vcpus=2)
    b = T.QemuGuest("B", vcpus=2)
    c = T.QemuGuest("C", vcpus=1)
    cfg, sock = T.write_config(interval_ms=int(INTERVAL * 1000), layout="custom", custom="0;1",
                               manage="explicit", extra={
                                   "daemon": {"backend": "qmp"},
                                   "qmp": {"sockets": os.path.join(wd, "*.qmp")},
                                   "vm " + a.qemu_name: {"preferred": 0},
                                   "vm " + b.qemu_name: {"preferred": 1, "mode": "soft"},
                                   "vm " + c.qemu_name: {"preferred": 1},
                               })
    for g in (a, b, c):
        g.start()
    for g in (a, b, c):
        g.wait_ready(180)
    for g in (a, b, c):
        tids = g.vcpu_tids()
        assert sorted(tids) == list(range(g.vcpus)), "query-cpus-fast of %s: %s" % (g.name, tids)
        comms = {T.read_comm(g.pid(), t) for t in tids.values()}
        assert not any(x.startswith("CPU ") for x in comms), "threads are named: %s" % comms
    original = {g.label: all_threads_affinity(g) for g in (a, b)}
    T.log("original affinities: " + "; ".join("%s %s" % (k, sorted(
        {T.format_cpulist(s) for s in v.values()})) for k, v in original.items()))

    daemon = T.Daemon(cfg, socket_path=sock).start(wait_socket=False)

    # 0. Found, named and placed; emulator threads at home as well.
    settle = 10 * INTERVAL + 5

    def settled():
        daemon.check_alive()
        return (a.all_on({0}) and b.all_on({1}) and c.all_on({1}) and others_on(a, {0})
                and others_on(b, {1}))
    el = T.wait_until(settled, settle, 0.05, what=lambda: "idle guests at home: A %s, B %s, C %s"
                      % (a.affinity_text(), b.affinity_text(), c.affinity_text()))
    T.log("settled after %.2fs: A on 0, B and C on 1, emulator threads at home" % el)
    text = daemon.log_text()
    for g in (a, b, c):
        want = "%s: found QEMU process %d over QMP" % (g.qemu_name, g.pid())
        assert want in text, "daemon log lacks %r:\n%s" % (want, text[-2000:])

    # 1. A QEMU that exits is forgotten, quietly.
    before = len(daemon.log_text().splitlines())
    c.destroy()
    T.wait_until(lambda: "forgotten" in "\n".join(daemon.log_text().splitlines()[before:]), 5,
                 what="C to be forgotten")
    time.sleep(2 * INTERVAL)
    after = daemon.log_text().splitlines()[before:]
    T.log("daemon log after C exited:\n  " + "\n  ".join(after))
    noisy = [x for x in after if " warning: " in x or " critical: " in x]
    assert not noisy, "warnings after a QEMU exit: %s" % noisy
    assert daemon.running(), "softaffd died after a QEMU exit"

    # a. Burst and retreat.
    T.wait_host_quiet(max_busy=0.5)
    results = {}
    a.set_load(2)
    results["burst"] = wait_or_explain(a, {0, 1}, 10)
    T.log("A busy, B idle: A on 0-1 after %.3fs" % results["burst"])
    assert b.all_on({1}), "B moved while idle: %s" % b.affinity_text()
    assert others_on(a, {0}), "A's emulator threads left home while it bursts"
    b.set_load(2)
    results["retreat"] = wait_or_explain(a, {0}, 10)
    T.log("B busy: A back on 0 after %.3fs" % results["retreat"])
    assert b.all_on({1}), "B left its home while busy: %s" % b.affinity_text()

    # b. Both busy: everybody home, no affinity change.
    time.sleep(2.0)
    T.wait_until(lambda: a.all_on({0}) and b.all_on({1}), 5, 0.05,
                 what=lambda: "busy guests at home: A %s, B %s" % (a.affinity_text(),
                                                                   b.affinity_text()))
    time.sleep(1.0)
    t0 = time.monotonic()
    with T.AffinityWatcher([a, b], interval=0.1) as w:
        time.sleep(STEADY)
    T.log("%d samples in %.1fs, %d affinity changes" % (w.samples, time.monotonic() - t0,
                                                        len(w.changes)))
    for (t, label, v, old, new) in w.changes:
        T.log("  change at +%.2fs: %s vcpu %d %s -> %s" % (
            t - t0, label, v, T.format_cpulist(old or ()), T.format_cpulist(new)))
    home_a, home_b = w.fraction_on("A", {0}), w.fraction_on("B", {1})
    T.log("vCPU samples at home: A %.1f%%, B %.1f%%" % (100 * home_a, 100 * home_b))
    assert w.samples >= STEADY / 0.1 * 0.8, "watcher took only %d samples" % w.samples
    assert not w.changes, "%d affinity changes under steady load" % len(w.changes)
    assert home_a >= 0.99 and home_b >= 0.99, "vCPUs ran away from home: A %.3f, B %.3f" % (
        home_a, home_b)

    # 2. SIGTERM restores every thread's own affinity.
    a.set_load(0)
    b.set_load(0)
    rc = daemon.stop()
    assert rc == 0, "softaffd exited with %s on SIGTERM" % rc
    for g in (a, b):
        now = all_threads_affinity(g)
        wrong = {t: (T.format_cpulist(original[g.label][t]), T.format_cpulist(s))
                 for t, s in now.items() if t in original[g.label] and s != original[g.label][t]}
        assert not wrong, "after SIGTERM %s threads not restored (tid: (before, now)): %s" % (
            g.name, wrong)
    T.log("SIGTERM: softaffd exited 0, every QEMU thread has its own affinity back")

    T.log("reaction times: " + ", ".join("%s %.3fs" % kv for kv in results.items()))
    slow = {k: v for k, v in results.items() if v > LIMIT}
    assert not slow, "reactions slower than %.1fs (2 ticks + slack): %s" % (LIMIT, slow)


if __name__ == "__main__":
    T.run(main, libvirt=False)
