#!/usr/bin/env python3
"""Smoke test of the real-guest harness (no softaffd needed).

Boots two 2-vCPU TCG guests under libvirt, drives the in-guest load generator, finds the
QEMU vCPU threads, checks /proc and `virsh vcpuinfo` agree on their affinity, and sees a
`virsh vcpupin --live` show up in /proc."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import softaff_testlib as T  # noqa: E402


def check_agree(g, what):
    """/proc Cpus_allowed_list of every vCPU thread == virsh vcpuinfo == virsh vcpupin."""
    proc = g.affinity()
    info = g.vcpuinfo()
    pins = g.vcpupin_info()
    for v in range(g.vcpus):
        T.log("  %s vcpu %d: /proc %s, vcpuinfo %s (on CPU %s), vcpupin %s" % (
            g.label, v, T.format_cpulist(proc[v]), T.format_cpulist(info[v]["affinity"]),
            info[v].get("cpu"), T.format_cpulist(pins[v])))
        assert proc[v] == info[v]["affinity"], "%s: %s vcpu %d: /proc %s != vcpuinfo %s" % (
            what, g.name, v, proc[v], info[v]["affinity"])
        assert proc[v] == pins[v], "%s: %s vcpu %d: /proc %s != vcpupin %s" % (
            what, g.name, v, proc[v], pins[v])
    return proc


def main():
    host = T.host_cpus()
    T.log("host CPUs %s" % T.format_cpulist(host))
    a = T.Guest("a", vcpus=2)
    b = T.Guest("b", vcpus=2, metadata=T.softaff_metadata(preferred=1, mode="soft"))
    a.start()
    b.start()
    ta = a.wait_ready(timeout=180)
    tb = b.wait_ready(timeout=180)
    T.log("boot-to-ready: a %.2fs, b %.2fs" % (ta, tb))

    # The metadata template reaches libvirt intact.
    md = b.metadata_get()
    assert 'preferred="1"' in md and "urn:softaff:domain:1" in b.dumpxml(), md

    # Load reports.
    a.set_load(2)
    t_set = time.monotonic()
    a.wait_report(after=t_set + 0.2)
    rep = a.wait_report()
    T.log("a: work %.0f units/s with %d threads" % (rep[1], rep[2]))
    assert rep[2] == 2 and rep[1] > 0, "no work reported by a: %r" % (rep,)
    rb = b.wait_report()
    T.log("b: work %.0f units/s with %d threads (idle)" % (rb[1], rb[2]))
    assert rb[2] == 0 and rb[1] == 0, "idle guest b reports work: %r" % (rb,)

    # vCPU threads: 2 per guest, named 'CPU n/TCG' (or /KVM).
    for g in (a, b):
        tids = g.wait_vcpu_threads()
        comms = sorted(T.read_comm(g.pid(), t) for t in tids.values())
        T.log("%s: qemu pid %d, vCPU threads %s %s" % (g.label, g.pid(), tids, comms))
        assert len(tids) == 2 and sorted(tids) == [0, 1], tids
        assert comms in (["CPU 0/TCG", "CPU 1/TCG"], ["CPU 0/KVM", "CPU 1/KVM"]), comms
        proc = check_agree(g, "unpinned")
        for v in range(2):
            assert proc[v] == host, "%s vcpu %d affinity %s, expected all host CPUs %s" % (
                g.label, v, proc[v], host)
        run, wait, _ = g.schedstat()[0]
        assert run > 0, "schedstat run time of %s vcpu 0 is 0" % g.label

    # Pin a's vCPU 0 live and see it in /proc and in libvirt.
    first = min(host)
    t0 = time.monotonic()
    a.vcpupin(0, {first})
    el = T.wait_until(lambda: a.affinity()[0] == {first}, 5, 0.01, what="vcpupin in /proc")
    T.log("vcpupin --live a 0 %d visible in /proc after %.3fs (virsh call included)" % (
        first, time.monotonic() - t0))
    proc = check_agree(a, "after vcpupin")
    assert proc[0] == {first} and proc[1] == host, proc
    T.wait_until(lambda: a.current_cpus()[0] == first, 5, what="vcpu 0 running on CPU %d" % first)
    assert b.affinity() == {0: host, 1: host}, "pinning a changed b: %r" % b.affinity()

    # Informational: throughput with both vCPUs squeezed onto one CPU vs spread (the host is
    # shared, so this is reported, not asserted).
    if len(host) >= 2:
        before = a.wait_report(after=time.monotonic() + 0.1)[1]
        a.vcpupin(1, {first})
        a.wait_report(after=time.monotonic() + 0.2)
        squeezed = a.wait_report()[1]
        a.vcpupin(0, host)
        a.vcpupin(1, host)
        check_agree(a, "restored")
        T.log("throughput: spread %.0f, both vCPUs on CPU %d %.0f (%.0f%%)" % (
            before, first, squeezed, 100.0 * squeezed / before if before else 0))

    a.set_load(0)
    r = a.wait_report(after=time.monotonic() + 0.1)
    T.log("a after load 0: %r" % (r,))
    assert r[2] == 0

    a.destroy()
    b.destroy()
    out = T.virsh("list", "--all", "--name")
    assert a.name not in out and b.name not in out, out


if __name__ == "__main__":
    T.run(main)
