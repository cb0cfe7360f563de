#!/usr/bin/env python3
"""Sensing truth on a quiet multi-node host (issue 23), in the 2-node test host, on the kernel
SOFTAFF_MN_KERNEL names (bookworm: Debian 12's 6.1; unstable: 7.2.x): mnsensing.py's scenario
with softaffd at its defaults ([sensing] mode=auto: BPF where it loads).
  1. A strict (home 1): partition 0 is idle; its utilization from status' running totals
     (cpu_seconds) matches /proc/stat's over the same seconds within 5 points, it reads idle,
     and status' own utilization (averaged over about 2 s) shows it idle (median of 5 reads).
  2. A soft: it bursts onto node 0 (B paused there) and stays: 0 forced retreats in 30 s from
     5 s after the burst (the live `set` and the test's own polls settled),
     partition 0's utilization matches /proc/stat within 5 points, its unmanaged load < 0.1.
  3. B resumed (a busy owner): A's vCPUs leave CPU 0 within 2 ticks + 300 ms of B's first run
     as status sees it (test-owners-full.py's bound), measured from the resume.
Needs root, qemu-system-x86_64, mkfs.ext4 (SKIP 77 without, or FAIL when SOFTAFF_REQUIRE_VM=1)."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnhost  # noqa: E402
import mnsensing as S  # noqa: E402

STAY_S = 30
SETTLE_S = 5
POINTS = 0.05
LEAVE_LIMIT = 2 * S.INTERVAL_MS / 1000 + 0.3


def expect(cond, what, detail=""):
    if not cond:
        raise AssertionError(what + ("\n" + detail if detail else ""))
    mnhost.log("ok: " + what)


def check_idle(r):
    recs = r.measure(10)
    s = S.partition_summary(recs, 0)
    expect(abs(s["utilization"] - s["proc_stat_busy"]) <= POINTS,
           "A strict: partition 0 utilization %.3f, /proc/stat %.3f (within 5 points)" % (
               s["utilization"], s["proc_stat_busy"]))
    expect(s["unmanaged"] + s["owners"] < 0.25,
           "A strict: partition 0 reads idle (owners %.2f, unmanaged %.2f)" % (
               s["owners"], s["unmanaged"]))
    # What an operator's `softaffctl status` shows (averaged over about its last 2 s), asked
    # alone: a shell on CPU 0 sleeps 2 s (its own start out of the window), reads /proc/stat,
    # sleeps 2.5 s, reads it again and asks status, whose average then covers about the same
    # seconds. The host's own work has real blips over 2 s (one CI run read 0.29 once where 10 s
    # read 0.11), so status is asked 5 times, each reading logged beside /proc/stat's, and the
    # median must read idle.
    time.sleep(6)  # the last poll's own load out of status' average first
    reads = []
    for _ in range(5):
        out = r.sh("taskset -c 0 sh -c 'sleep 2; grep \"^cpu0 \" /proc/stat; sleep 2.5; "
                   "grep \"^cpu0 \" /proc/stat; %s status --json'" % r.ctl, timeout=60)
        lines = out.split("\n")
        a, b = ({0: [int(x) for x in ln.split()[1:]]} for ln in lines[:2])
        doc = json.JSONDecoder().raw_decode("\n".join(lines[2:]))[0]
        reads.append((S.Record(0, {}, [], doc).part(0)["utilization"], S.cpu_busy(a, b)[0]))
    mnhost.log("A strict: status' utilization of partition 0 against /proc/stat's 2.5 s: %s" % (
        ", ".join("%.2f/%.2f" % x for x in reads)))
    util = sorted(u for u, _ in reads)[len(reads) // 2]
    expect(util < 0.25, "A strict: status shows partition 0 idle (median of 5 readings %.2f)" % util)


def check_stay(r):
    r.set_a("soft")
    t0 = time.monotonic()
    while True:
        v = S.Record(0, {}, [], r.status()).vm("A")
        if v and v["bursts"] > 0 and v["state"] == "burst":
            break
        expect(time.monotonic() - t0 < 60, "A bursts within 60 s", str(v))
        time.sleep(1)
    # The window starts SETTLE_S after the burst, with nothing of the test's on CPU 0 till then:
    # the first burst comes right after the live `set` (libvirt writes A's metadata, softaffd
    # reads it again) amid this loop's status polls, all on CPU 0 beside A's vCPU; in some runs
    # on 7.2 that unmanaged load (0.62 CPU, 1.5 s after the burst) sent A home once, and A burst
    # again 2 s later and stayed. A forced retreat of the kind issue 23 is about comes again at
    # every burst (21 ms after each, then a doubling back-off) and still shows in the window.
    time.sleep(SETTLE_S)
    recs = r.measure(STAY_S)
    before = recs[0].vm("A")
    mnhost.log("A before the window: %s bursts, %s forced retreats" % (
        before and before["bursts"], before and before["retreats"]))
    retreats = S.vm_counter(recs, "A", "retreats")
    s = S.partition_summary(recs, 0)
    mnhost.log("A bursting: A's vCPUs ran %.2f CPUs; partition 0: %s" % (r.a_run(recs), s))
    expect(retreats == 0, "A stays on node 0 for %d s: %d forced retreats" % (STAY_S, retreats),
           r.log_tail())
    expect(abs(s["utilization"] - s["proc_stat_busy"]) <= POINTS,
           "A bursting: partition 0 utilization %.3f, /proc/stat %.3f (within 5 points)" % (
               s["utilization"], s["proc_stat_busy"]))
    expect(s["unmanaged"] + s["owners"] < 0.1,
           "A bursting: partition 0's owners and unmanaged %.2f + %.2f (< 0.1)" % (
               s["owners"], s["unmanaged"]))


def check_leave(r):
    # A loop on CPU 1 records when A's vCPUs are all on CPU 1 again; B resumes at its start.
    r.sh("cat >/tmp/leave.sh <<'EOF'\npid=$(cat /run/libvirt/qemu/mn-A.pid)\n"
         "virsh -c qemu:///system resume mn-B >/dev/null; read -r t0 _ </proc/uptime\n"
         "while :; do ok=1; for t in /proc/$pid/task/*; do case \"$(cat $t/comm)\" in \"CPU \"*)"
         " [ \"$(taskset -pc ${t##*/} | sed 's/.*: //')\" = 1 ] || ok=0;; esac; done\n"
         "read -r t _ </proc/uptime; [ $ok = 1 ] && break; sleep 0.05; done\n"
         "echo $t0 $t\nEOF")
    t0, t1 = (float(x) for x in r.sh("taskset -c 0 bash /tmp/leave.sh", timeout=120).split())
    # B's vCPU starts a moment after the resume; status's run of B says when.
    expect(t1 - t0 <= LEAVE_LIMIT + 1.0,
           "A left CPU 0 %.2f s after B resumed (<= 2 ticks + 300 ms + 1 s for B to start)"
           % (t1 - t0), r.log_tail())


def main():
    build = mnhost.preflight()
    t0 = time.monotonic()

    def body(h):
        r = S.Run(h, build, mode=os.environ.get("SOFTAFF_MN_SENSING", "auto"))
        try:
            r.start_libvirt()
            r.start_guests(a_mode="strict")
            r.start_softaffd()
            time.sleep(3)
            doc = r.status()
            mnhost.log("sensing: %s" % doc["daemon"]["sensing"])
            check_idle(r)
            check_stay(r)
            check_leave(r)
            mnhost.log("sensing at the end: %s" % r.status()["daemon"]["sensing"])
        finally:
            r.stop()
            S.log_tails(h, 40, 10)
    h = mnhost.with_host(body, build_dir=build)
    mnhost.log("test-sensing (%s kernel) passed in %.1fs" % (h.kernel, time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
