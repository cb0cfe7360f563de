#!/usr/bin/env python3
"""softaff demo: two tiny guests on a two-partition layout, softaffd running, load walked
through phases (A alone, both, B alone). Prints where each VM's vCPUs may run and the work
the guests measured in each phase, then cleans up everything it started.

Run through contrib/demo.sh, which installs and builds first."""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))
import softaff_testlib as T  # noqa: E402

PHASE_S = float(os.environ.get("SOFTAFF_DEMO_PHASE_S", "12"))


def layout():
    """Two partitions: NUMA nodes when the host has two or more, else halves of the CPUs."""
    nodes = [n for n in os.listdir("/sys/devices/system/node") if n.startswith("node")]
    cpus = sorted(T.host_cpus())
    if len(nodes) >= 2:
        return "node", None, 0, 1
    half = max(1, len(cpus) // 2)
    first, second = cpus[:half], cpus[half:]
    custom = "%s;%s" % (T.format_cpulist(first), T.format_cpulist(second))
    return "custom", custom, 0, 1


def show(guests, title):
    print("  %-10s %s" % ("", title))
    for g in guests:
        aff = g.affinity()
        sets = sorted({T.format_cpulist(s) for s in aff.values()})
        print("  %-10s vCPUs may run on CPUs %s" % (g.label, " / ".join(sets)))


def main():
    T.require_vm()
    lay, custom, home_a, home_b = layout()
    # manage=explicit: the operator's own VMs are left alone; the demo guests carry metadata.
    cfg, sock = T.write_config(layout=lay, custom=custom or "", interval_ms=500,
                               manage="explicit")
    print("softaff demo: layout %s%s" % (lay, " (%s)" % custom if custom else ""))
    print("environment: %s" % T.environment_text())
    a = T.Guest("A", vcpus=2, metadata=T.softaff_metadata(preferred=home_a))
    b = T.Guest("B", vcpus=2, metadata=T.softaff_metadata(preferred=home_b))
    for g in (a, b):
        g.start()
    for g in (a, b):
        g.wait_ready()
        g.wait_vcpu_threads()
    d = T.Daemon(cfg).start(wait_socket=False)
    time.sleep(1.5)
    print("\nguest A: home partition %d, guest B: home partition %d\n" % (home_a, home_b))
    phases = [("A alone", 2, 0), ("both busy", 2, 2), ("B alone", 0, 2), ("idle", 0, 0)]
    rows = []
    for name, la, lb in phases:
        a.set_load(la)
        b.set_load(lb)
        t0 = time.monotonic()
        time.sleep(PHASE_S)
        t1 = time.monotonic()
        # Skip the first two seconds of the phase: the reaction is shown by the daemon log.
        wa = a.work_between(t0 + 2, t1) or 0.0
        wb = b.work_between(t0 + 2, t1) or 0.0
        print("phase %-10s (A load %d, B load %d): work/s A %.3g, B %.3g" % (name, la, lb, wa, wb))
        show((a, b), "")
        rows.append((name, wa, wb))
    rc = d.stop()
    print("\nsoftaffd stopped (status %s); after SIGTERM:" % rc)
    show((a, b), "")
    print("\nsoftaffd's decisions:")
    for line in d.log_text().splitlines():
        if "->" in line or "restored" in line:
            print("  " + line)


if __name__ == "__main__":
    T.run(main)
