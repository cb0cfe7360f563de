#!/usr/bin/env python3
"""Strict and softness-0 VMs never leave home under [actuation] mode=sched_ext (issue 24), in the
2-node test host on Debian unstable's kernel. mnsensing.py's guests: A (2 spinning vCPUs, home
node 1 with its 1 CPU: home is busy, a vCPU always waits), B (1 vCPU, home node 0, paused: an
idle owner, so node 0's CPU is idle).
For three settings of A, each over a window of WINDOW_S seconds, read by the scheduler's own
per-VM counters (softaffctl status --json, 'scheduler': run time at home / away, visits):
  control  mode soft, the config's default softness (50): A runs away onto node 0 (> 0.5 s), so
           the other two windows can fail;
  strict   mode strict: 0 s away, 0 visits;
  soft-0   mode soft, softness 0: 0 s away, 0 visits.
And in every window A's vCPU threads keep their own set (0-1): softaffd pinned no vCPU, the
scheduler alone kept them home; and each of them ran over 20% of the window by the kernel's own
per-thread run time (/proc/PID/task/TID/schedstat): owners share their home, none starves.
Status is read from CPU 1 (A's home) twice per window and nothing of the test's runs in
between: a look on CPU 0 is load on the partition measured.
Needs root, qemu-system-x86_64, mkfs.ext4 (SKIP 77 without, or FAIL when SOFTAFF_REQUIRE_VM=1).
Prints the figures it saw ('figure:' lines)."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnhost  # noqa: E402
import mnsensing as S  # noqa: E402
from mnsensing import cpulist, expect  # noqa: E402

WINDOW_S = 15
SETTLE_S = 3
# A's vCPU threads: "vcpu TID POLICY CPUS_ALLOWED" in shell builtins only, from CPU 1.
LOOK = r"""taskset -c 1 bash -c '
pid=$(</run/libvirt/qemu/mn-A.pid)
for t in /proc/$pid/task/*; do
    read -r c <$t/comm
    case "$c" in "CPU "*)
        read -r st <$t/stat; st=${st##*) }; set -- $st
        read -r run wait _ <$t/schedstat
        while read -r k v; do [ "$k" = Cpus_allowed_list: ] && echo "vcpu ${t##*/} ${39} $v $run $wait"; done <$t/status;;
    esac
done
exit 0'"""


class Run(S.Run):
    def status1(self):
        return json.loads(self.sh("taskset -c 1 %s status --json" % self.ctl, timeout=60))

    def vm_a(self, doc):
        v = S.Record(0, {}, [], doc).vm("A")
        if v is None:
            raise AssertionError("no mn-A in status: %s" % [v["name"] for v in doc["vms"]])
        return v

    def why_not_running(self):
        """Each vCPU thread's state, wait channel and kernel stack, A's console tail, and the
        kernel's sched_ext state dump (sysrq D)."""
        out = self.h.run(
            "pid=$(cat /run/libvirt/qemu/mn-A.pid); for t in /proc/$pid/task/*; do "
            "read -r c <$t/comm; echo \"== ${t##*/} $c: $(sed 's/.*) //' $t/stat | cut -d' ' -f1) "
            "$(cat $t/wchan)\"; cat $t/stack; done; echo '== A console'; "
            "tail -c 1500 /tmp/mn-A.console", timeout=60).out
        d = self.h.run("mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; "
                       "echo 1 >/proc/sys/kernel/sysrq; dmesg -c >/dev/null; "
                       "echo D >/proc/sysrq-trigger; sleep 2; dmesg | tail -n 150; echo '== trace'; "
                       "grep -v '^#' /sys/kernel/tracing/trace | tail -n 150", timeout=120)
        return "%s\n== sysrq D (rc %d): %s\n%s" % (out, d.rc, d.err, d.out)

    def vcpus(self):
        rows = []
        self.last_look = self.sh(LOOK, timeout=60)
        for ln in self.last_look.splitlines():
            f = ln.split()
            if len(f) == 6 and f[0] == "vcpu":
                rows.append({"tid": int(f[1]), "policy": int(f[2]), "affinity": cpulist(f[3]),
                             "run": int(f[4]) / 1e9, "wait": int(f[5]) / 1e9})
        return rows


def window(r, name, set_args, expect_status):
    if set_args:
        r.sh("taskset -c 1 %s set mn-A %s --live" % (r.ctl, set_args), timeout=60)
    time.sleep(SETTLE_S)
    d0 = r.status1()
    a0 = r.vm_a(d0)
    s0 = a0["scheduler"]
    for k, v in expect_status.items():
        got = s0.get(k[6:]) if k.startswith("sched_") else a0.get(k)
        expect(got == v,
               "%s: status shows %s=%s" % (name, k, v), json.dumps(a0))
    before = r.vcpus()
    look0 = r.last_look
    t0 = time.monotonic()
    time.sleep(WINDOW_S)
    d1 = r.status1()
    el = time.monotonic() - t0
    after = r.vcpus()
    a1 = r.vm_a(d1)
    s1 = a1["scheduler"]
    act = d1["daemon"]["actuation"]
    expect(act["mode"] == "sched_ext" and not act.get("ejections"),
           "%s: still sched_ext, no ejection: %s" % (name, act))
    away = s1["run_away_seconds"] - s0["run_away_seconds"]
    home = s1["run_home_seconds"] - s0["run_home_seconds"]
    visits = s1["visits"] - s0["visits"]
    wait = s1["wait_seconds"] - s0["wait_seconds"]
    mnhost.log("figure: %s: A in %.1f s: %.3f s at home, %.3f s away, %d visits, wait %.2f s; "
               "scheduler %s; vCPUs before %s after %s" % (
                   name, el, home, away, visits, wait, json.dumps(s1),
                   [(x["policy"], sorted(x["affinity"])) for x in before],
                   [(x["policy"], sorted(x["affinity"])) for x in after]))
    expect(len(before) == 2 and len(after) == 2, "%s: A's 2 vCPU threads read" % name,
           "before:\n%s\nafter:\n%s" % (look0, r.last_look))
    expect(all(x["policy"] == 7 and x["affinity"] == {0, 1} for x in before + after),
           "%s: A's vCPUs SCHED_EXT with their own set (0-1), no vCPU pinned" % name,
           str(before + after))
    expect(home > 0.5 * el, "%s: A ran at home (%.2f s in %.1f s)" % (name, home, el))
    # No vCPU starves: each of A's two spinning vCPUs gets a fair part of the window (the
    # kernel's own run time per thread; about half of the window each at home, more in the
    # control window). A vCPU that waited seconds at a time behind its sibling would not.
    b = {x["tid"]: x for x in before}
    runs = [(x["tid"], x["run"] - b[x["tid"]]["run"], x["wait"] - b[x["tid"]]["wait"])
            for x in after if x["tid"] in b]
    mnhost.log("figure: %s: per vCPU (tid, run s, wait s) in %.1f s: %s" % (
        name, el, ", ".join("(%d, %.2f, %.2f)" % r for r in runs)))
    ok = len(runs) == 2 and all(r[1] > 0.2 * el for r in runs)
    expect(ok, "%s: each vCPU of A ran over 20%% of the window (no vCPU starves)" % name,
           "%s\n%s" % (runs, "" if ok else r.why_not_running()))
    return away, visits


def main():
    build = mnhost.preflight()
    t0 = time.monotonic()

    def body(h):
        r = Run(h, build)
        try:
            expect(r.sh("cat /sys/kernel/sched_ext/state").strip() == "disabled",
                   "the host's kernel has sched_ext, disabled")
            r.start_libvirt()
            r.start_guests(a_mode="soft")
            r.sh("mkdir -p /etc/softaff /run/softaff && cat >/etc/softaff/softaff.conf <<'EOF'\n"
                 + S.SCHED_CONF.format(mode="sched_ext") + "EOF")
            h.start_softaffd(build)
            deadline = time.monotonic() + 90
            while True:
                vc = r.vcpus()
                if len(vc) == 2 and all(x["policy"] == 7 for x in vc):
                    break
                if time.monotonic() > deadline:
                    raise AssertionError("A's vCPUs not in the ext class after 90 s: %s\n%s" % (
                        vc, r.log_tail()))
                time.sleep(3)
            mnhost.log("ok: A's vCPU threads in the ext class")
            away, visits = window(r, "control (soft, default softness)", None,
                                  {"mode": "soft", "softness": 50, "sched_strict": False})
            expect(away > 0.5, "control: A runs away onto idle node 0 (%.2f s): the test can "
                   "see a run away from home" % away)
            for name, args, st in (("strict", "--mode strict", {"mode": "strict", "sched_strict": True}),
                                   ("soft, softness 0", "--mode soft --softness 0",
                                    {"mode": "soft", "softness": 0, "sched_softness": 0})):
                away, visits = window(r, name, args, st)
                expect(away == 0 and visits == 0,
                       "%s: A never ran away from home (%.3f s away, %d visits)" % (
                           name, away, visits))
        finally:
            S.log_tails(h, 40, 10)
    mnhost.with_host(body, build_dir=build, kernel="unstable",
                     tcg_single=os.environ.get("SOFTAFF_MN_TCG_THREAD", "single") == "single")
    mnhost.log("test-sched-home passed in %.1fs" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
