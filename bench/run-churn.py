#!/usr/bin/env python3
"""softaff with many real VMs: start tiny guests in waves and churn them while softaffd runs.

    SOFTAFF_BUILD_DIR=build python3 bench/run-churn.py [--guests 40] [--wave 5] [--cycles 4]
                                                      [--churn 5] [--memory 80] [--out DIR]

softaffd runs with layout custom "0;1" and manage=explicit, with softaff metadata on the bench
guests, so that the other VMs of an operator's host are left alone (--manage all: softaffd
manages every VM, only when no other VM runs). Guests of 1 vCPU and --memory MiB running the idle load generator start in waves of
--wave (each wave waits for the previous one to boot), then --cycles times --churn guests are
destroyed and as many new ones started. After every wave and cycle, the daemon's status
(softaffctl status --json) must list every running guest as managed and no destroyed one
(compared with virsh list). Measured: daemon CPU per tick (/proc/PID/stat utime+stime deltas /
ticks, from the status' tick counter) while the guests sit idle and during the churn, and the
daemon's RSS (VmRSS) at start, with all guests, after the churn and after all are gone.

Results: DIR/churn.json and a summary on stdout. Must run as root."""

import argparse
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "integration"))
import softaff_testlib as T  # noqa: E402


def proc_cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid, key="VmRSS"):
    """VmRSS (or RssAnon: the daemon's own heap and stacks, without mapped files) in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def run_ns(pid):
    """CPU time of every thread of a process, in ns (schedstat: finer than utime/stime)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError):
            pass
    return total


def mem(pid):
    return {"rss_kib": rss_kib(pid), "anon_kib": rss_kib(pid, "RssAnon")}


class Churn:
    def __init__(self, args):
        self.args = args
        self.daemon = None
        self.sock = None
        self.live = []        # Guest objects running
        self.serial = 0
        self.checks = []
        self.samples = []

    def ctl_status(self):
        exe = os.path.join(os.environ["SOFTAFF_BUILD_DIR"], "ctl", "softaffctl")
        p = T.run_cmd([exe, "status", "--json", "--socket", self.sock], timeout=30)
        return json.loads(p.stdout)

    def new_guest(self):
        self.serial += 1
        md = T.softaff_metadata() if self.manage == "explicit" else None
        return T.Guest("churn-%03d" % self.serial, vcpus=self.args.vcpus,
                       memory_mib=self.args.memory, metadata=md)

    def start_wave(self, n):
        guests = [self.new_guest() for _ in range(n)]
        for g in guests:
            g.start()
        for g in guests:
            g.wait_ready(300)
        self.live.extend(guests)
        return guests

    def destroy(self, guests):
        threads = [threading.Thread(target=g.destroy) for g in guests]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for g in guests:
            self.live.remove(g)

    def check(self, what, timeout=10.0):
        """Every running guest that softaff should manage is listed as managed; none extra."""
        running = set(T.virsh("list", "--name").split())
        if self.manage == "explicit":
            want = {g.name for g in self.live}
        else:
            want = running
        t0 = time.monotonic()
        while True:
            st = self.ctl_status()
            listed = {v["name"]: v for v in st.get("vms", [])}
            managed = {n for n, v in listed.items() if v.get("state") in ("home", "burst")}
            missing = sorted(want - managed)
            stale = sorted(n for n in listed if n not in running)
            ok = not missing and not stale
            if ok or time.monotonic() - t0 > timeout:
                break
            time.sleep(0.5)
        rec = {"what": what, "running": len(running), "expected": len(want),
               "managed": len(managed & want), "missing": missing, "stale": stale,
               "settle_s": round(time.monotonic() - t0, 2), "ticks": st["daemon"]["ticks"],
               "rss_kib": rss_kib(self.daemon.proc.pid),
               "anon_kib": rss_kib(self.daemon.proc.pid, "RssAnon"),
               "cpu_s": proc_cpu_seconds(self.daemon.proc.pid)}
        self.checks.append(rec)
        T.log("check %s: %d running, %d expected, %d managed, missing %s, stale %s, RSS %d KiB"
              % (what, rec["running"], rec["expected"], rec["managed"], missing, stale,
                 rec["rss_kib"]))
        return rec

    def cpu_per_tick(self, seconds, what):
        pid = self.daemon.proc.pid
        st0 = self.ctl_status()["daemon"]["ticks"]
        c0, n0, t0 = proc_cpu_seconds(pid), run_ns(pid), time.monotonic()
        time.sleep(seconds)
        st1 = self.ctl_status()["daemon"]["ticks"]
        c1, n1, t1 = proc_cpu_seconds(pid), run_ns(pid), time.monotonic()
        ticks = st1 - st0
        rec = {"what": what, "guests": len(self.live), "seconds": t1 - t0, "ticks": ticks,
               "cpu_ms_per_tick": (n1 - n0) / 1e6 / ticks if ticks else None,
               "utime_stime_ms_per_tick": 1000 * (c1 - c0) / ticks if ticks else None,
               "ms_between_ticks": 1000 * (t1 - t0) / ticks if ticks else None,
               "tick_cpu_ms_reported": self.ctl_status()["daemon"].get("tick_cpu_ms")}
        self.samples.append(rec)
        T.log("daemon CPU %s: %s" % (what, rec))
        return rec

    def main(self):
        args = self.args
        os.makedirs(args.out, exist_ok=True)
        if not {0, 1} <= T.host_cpus():
            T.skip("needs host CPUs 0 and 1")
        others = [n for n in T.virsh("list", "--name").split() if n]
        self.manage = args.manage
        env = T.environment()
        T.log("environment: " + T.environment_text(env))
        if self.manage == "all" and others:
            T.log("other VMs run on this host (%s): using manage=explicit and softaff metadata on "
                  "the bench guests, so that they are left alone" % ", ".join(others))
            self.manage = "explicit"
        try:
            T.wait_host_quiet(timeout=args.quiet_timeout)
        except T.Skip as e:
            T.log("NOTE: %s; measuring anyway" % e)
        cfg, self.sock = T.write_config(layout="custom", custom="0;1", manage=self.manage)
        self.daemon = T.Daemon(cfg, socket_path=self.sock,
                               log_path=os.path.join(args.out, "softaffd-churn.log"))
        self.daemon.start(require_socket=True)
        time.sleep(2)
        rss_start = mem(self.daemon.proc.pid)
        self.cpu_per_tick(args.measure, "no guests")
        t0 = time.monotonic()
        while len(self.live) < args.guests:
            n = min(args.wave, args.guests - len(self.live))
            self.start_wave(n)
            self.check("wave up to %d guests" % len(self.live))
        boot_s = time.monotonic() - t0
        time.sleep(5)
        rss_full = mem(self.daemon.proc.pid)
        idle = self.cpu_per_tick(args.measure, "%d idle guests" % len(self.live))
        rng = random.Random(1)
        t_churn = time.monotonic()
        c_churn = run_ns(self.daemon.proc.pid)
        k_churn = self.ctl_status()["daemon"]["ticks"]
        for cycle in range(args.cycles):
            gone = rng.sample(self.live, min(args.churn, len(self.live)))
            self.destroy(gone)
            self.start_wave(len(gone))
            self.check("churn cycle %d" % (cycle + 1))
        churn_ticks = self.ctl_status()["daemon"]["ticks"] - k_churn
        churn = {"seconds": time.monotonic() - t_churn, "ticks": churn_ticks,
                 "cpu_ms_per_tick": (run_ns(self.daemon.proc.pid) - c_churn) / 1e6
                 / max(churn_ticks, 1)}
        time.sleep(5)
        rss_after_churn = mem(self.daemon.proc.pid)
        self.cpu_per_tick(args.measure, "%d idle guests after the churn" % len(self.live))
        self.destroy(list(self.live))
        self.check("all destroyed")
        time.sleep(2)
        rss_end = mem(self.daemon.proc.pid)
        self.daemon.check_alive()
        rc = self.daemon.stop()
        result = {"guests": args.guests, "vcpus": args.vcpus, "memory_mib": args.memory,
                  "manage": self.manage, "boot_seconds": boot_s, "started_in_all": self.serial,
                  "rss_kib": {"start": rss_start, "all_guests": rss_full,
                              "after_churn": rss_after_churn, "end": rss_end},
                  "cpu": self.samples, "churn": churn, "checks": self.checks,
                  "daemon_exit": rc, "environment": env}
        with open(os.path.join(args.out, "churn.json"), "w") as f:
            json.dump(result, f, indent=1)
        bad = [c for c in self.checks if c["missing"] or c["stale"]]
        print("environment: " + T.environment_text(env))
        print("guests: %d x %d vCPU, %d MiB (%d started in all, %d checks, %d with a missing or "
              "stale VM); manage=%s" % (args.guests, args.vcpus, args.memory, self.serial,
                                        len(self.checks), len(bad), self.manage))
        print("boot of the waves: %.0f s" % boot_s)
        for s in self.samples:
            print("daemon CPU, %s: %.3f ms per tick (%d ticks, one every %.0f ms); the daemon's own "
                  "last tick: %.3f ms" % (s["what"], s["cpu_ms_per_tick"] or 0, s["ticks"],
                                          s["ms_between_ticks"] or 0,
                                          s["tick_cpu_ms_reported"] or 0))
        print("daemon CPU during the churn: %.3f ms per tick (%d ticks, %.0f s)" % (
            churn["cpu_ms_per_tick"], churn["ticks"], churn["seconds"]))
        for key, title in (("rss_kib", "RSS"), ("anon_kib", "RssAnon")):
            print("daemon %s: %d KiB at start, %d with %d guests, %d after the churn, %d at the end"
                  % (title, rss_start[key], rss_full[key], args.guests, rss_after_churn[key],
                     rss_end[key]))
        if bad:
            raise AssertionError("missed or stale VMs: %s" % bad)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--guests", type=int, default=40)
    p.add_argument("--vcpus", type=int, default=1)
    p.add_argument("--memory", type=int, default=80,
                   help="MiB per guest (the test guest does not boot with 64)")
    p.add_argument("--wave", type=int, default=5)
    p.add_argument("--cycles", type=int, default=4)
    p.add_argument("--churn", type=int, default=5, help="guests replaced per cycle")
    p.add_argument("--measure", type=float, default=10.0, help="seconds per CPU measurement")
    p.add_argument("--manage", choices=("all", "explicit"), default="explicit")
    p.add_argument("--quiet-timeout", type=float, default=120.0)
    p.add_argument("--out", default=os.path.join(os.getcwd(), "bench-churn-results"))
    return p.parse_args()


if __name__ == "__main__":
    ARGS = parse_args()
    T.run(Churn(ARGS).main)
