#!/usr/bin/env python3
"""Benchmark for issue 23 (sensing truth), not a test: in the 2-node test host, on each kernel
(Debian 12's 6.1 and unstable's 7.2.x; --kernels), tests/multinode/mnsensing.py's scenario:
A (2 spinning vCPUs, home node 1) with B (home node 0) paused. Per host, side by side:
  free   A's vCPU run time with no affinity and no softaffd (20 s);
  then for [sensing] mode=auto (BPF where it loads) and mode=proc, softaffd with A strict
  (10 s: partition 0 idle, status against /proc/stat) and A soft (30 s: A's vCPU run time,
  its ratio to free, forced retreats, partition 0 as status shows it against /proc/stat, the
  event ticks in those 30 s and softaffd's CPU over them, % of one CPU).
Prints a table (Markdown) and writes results.json to --out. Root; ~4 min per kernel.
  SOFTAFF_BUILD_DIR=build bench/run-sensing.py [--kernels bookworm,unstable] [--out DIR]"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "multinode"))
import mnhost  # noqa: E402
import mnsensing as S  # noqa: E402


def softaffd_cpu_s(r):
    """(uptime, softaffd's user + system CPU seconds) in the host, read from CPU 1 in one
    command just outside the measured window."""
    up, ticks = r.sh("taskset -c 1 sh -c 'read -r u _ </proc/uptime; echo $u; "
                     "cut -d\\  -f14,15 /proc/$(pgrep -x softaffd)/stat'").split("\n")[:2]
    return float(up), sum(int(x) for x in ticks.split()) / os.sysconf("SC_CLK_TCK")


def event_ticks(rec):
    return rec.status["daemon"]["sensing"].get("event_ticks", 0) if rec.status else 0


def one_mode(r, mode):
    r.mode = mode
    r.set_a("strict")
    r.start_softaffd()
    time.sleep(3)
    idle = S.partition_summary(r.measure(10), 0)
    r.set_a("soft")
    time.sleep(2)
    cpu0 = softaffd_cpu_s(r)
    recs = r.measure(30)
    cpu1 = softaffd_cpu_s(r)
    out = {"mode": mode, "idle_p0": idle, "burst_p0": S.partition_summary(recs, 0),
           "a_run": r.a_run(recs), "retreats": S.vm_counter(recs, "A", "retreats"),
           "bursts": S.vm_counter(recs, "A", "bursts"),
           "sensing": r.status()["daemon"]["sensing"],
           "event_ticks": event_ticks(recs[-1]) - event_ticks(recs[0]),
           "softaffd_cpu": (cpu1[1] - cpu0[1]) / (cpu1[0] - cpu0[0])}
    out["log"] = r.h.run("grep -E 'burst|retreat|sensing' /var/log/softaffd.log | tail -n 12",
                         timeout=30).out
    r.stop_softaffd()
    return out


def one_kernel(build, kernel):
    with mnhost.Host(build_dir=build, kernel=kernel) as h:
        r = S.Run(h, build)
        r.start_libvirt()
        r.start_guests(a_mode="strict")
        res = {"kernel": kernel, "uname": h.check("uname -r").strip()}
        res["free_run"] = r.a_run(r.measure(20))
        res["modes"] = [one_mode(r, m) for m in ("auto", "proc")]
        r.stop()
        return res


def table(results):
    rows = ["| kernel | sensing | utilization from | A run free | A run softaff | ratio | forced "
            "retreats / 30 s | p0 idle: status / /proc | p0 bursting: status / /proc | "
            "p0 bursting: owners + unmanaged | event ticks / 30 s | softaffd CPU |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k in results:
        for m in k["modes"]:
            i, b = m["idle_p0"], m["burst_p0"]
            rows.append("| %s | %s | %s | %.2f | %.2f | %.2f | %s | %.0f%% / %.0f%% | %.0f%% / "
                        "%.0f%% | %.2f | %d | %.1f%% |" % (
                            k["uname"], m["sensing"]["mode"], m["sensing"].get("utilization", "-"),
                            k["free_run"], m["a_run"], m["a_run"] / k["free_run"], m["retreats"],
                            100 * i["utilization"], 100 * i["proc_stat_busy"],
                            100 * b["utilization"], 100 * b["proc_stat_busy"],
                            b["owners"] + b["unmanaged"], m["event_ticks"],
                            100 * m["softaffd_cpu"]))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default="bookworm,unstable")
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    build = os.path.abspath(os.environ.get("SOFTAFF_BUILD_DIR", "build"))
    results = []
    for k in a.kernels.split(","):
        results.append(one_kernel(build, k))
        print(json.dumps(results[-1], indent=1), flush=True)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    t = table(results)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(t + "\n")
    print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
