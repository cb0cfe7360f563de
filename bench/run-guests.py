#!/usr/bin/env python3
"""softaff real-guest comparison: no pinning, hard pinning and softaff, side by side in one run.

    SOFTAFF_BUILD_DIR=build python3 bench/run-guests.py [--rounds 3] [--phase 10] [--step 5]
                                                      [--steps 4] [--out DIR] [--png FILE]

Two TCG guests of 2 vCPUs (A, home CPU 0; B, home CPU 1; layout custom "0;1") run the load
generator of tests/guest/load.c. For each configuration in turn (the order rotates each round):

  none         no pinning, no daemon (vCPUs and emulator allowed on CPUs 0-1)
  hard         vCPUs and emulator pinned to the home CPU (virsh vcpupin/emulatorpin --live)
  softaff      softaffd, softness 50 (the default)
  softaff-0    softaffd, softness 0
  softaff-100  softaffd, softness 100

and these phases: "A alone" (A 2 threads, B idle), "both busy", "B alone", then (softaff
configurations only) --steps cycles of "A alone" / "both busy" of --step seconds, for reaction
samples.

Everything is measured from outside softaff: guest work/s (the load generator's reports), where
each vCPU thread ran (/proc/PID/task/TID/stat field 39 and schedstat run/delay deltas every 50 ms,
each delta attributed to the CPU seen), affinity (sched_getaffinity every 10 ms: changes, and the
reaction from a load step, timed at the guest's "ok N", to the affinity change), and host CPU
used outside the two guests (/proc/stat minus the QEMU processes).

Results: DIR/results.json (raw per-run metrics), DIR/table.md (the summary table), and a plot of
where the vCPUs ran for none / hard / softaff in round 1 (PNG, gnuplot). Must run as root."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "integration"))
import softaff_testlib as T  # noqa: E402

CONFIGS = ["none", "hard", "softaff", "softaff-0", "softaff-100"]
SOFTNESS = {"softaff": 50, "softaff-0": 0, "softaff-100": 100}
HOME = {"A": {0}, "B": {1}}
ALL = {0, 1}
SETTLE = 2.0  # seconds skipped at the start of a phase for the steady metrics
TICK_MS = 500


def proc_cpu_seconds(pid):
    """utime + stime of a whole process, in seconds (None when it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def host_busy_seconds():
    """CPU-seconds the host was busy (all CPUs), and its total, from /proc/stat."""
    with open("/proc/stat") as f:
        a = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    busy = sum(a[:8]) - a[3] - a[4]
    return busy / hz


class Sampler:
    """Polls the vCPU threads of the guests: affinity every `period` s (10 ms), CPU seen and
    schedstat every 50 ms, host and process CPU every second."""

    def __init__(self, guests, period=0.010):
        self.guests = guests
        self.period = period
        self.tids = {g.key: g.vcpu_tids() for g in guests}
        self.pids = {g.key: g.pid() for g in guests}
        self.aff = {}
        self.changes = []   # (t, label, vcpu, old, new)
        self.runs = []      # (t, label, vcpu, cpu, drun_ns, ddelay_ns)
        self.cpu = []       # (t, host busy s, {label: qemu cpu s}, daemon cpu s, own cpu s)
        self.daemon_pid = None
        self._prev = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        for g in guests:
            for v, tid in self.tids[g.key].items():
                self.aff[(g.key, v)] = frozenset(os.sched_getaffinity(tid))
                self._prev[(g.key, v)] = self._read(g.key, tid)
        self.aff0 = dict(self.aff)  # the affinities at the start, before self.changes

    def _read(self, label, tid):
        pid = self.pids[label]
        with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
            run, delay = (int(x) for x in f.read().split()[:2])
        with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
            cpu = int(f.read().rsplit(")", 1)[1].split()[36])
        return run, delay, cpu

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _loop(self):
        n = 0
        period = self.period
        run_every = max(1, int(round(0.050 / period)))
        cpu_every = max(1, int(round(1.0 / period)))
        next_t = time.monotonic()
        while not self._stop.is_set():
            next_t += period
            now = time.monotonic()
            for g in self.guests:
                for v, tid in self.tids[g.key].items():
                    try:
                        a = frozenset(os.sched_getaffinity(tid))
                    except OSError:
                        continue
                    old = self.aff[(g.key, v)]
                    if a != old:
                        self.changes.append((now, g.key, v, sorted(old), sorted(a)))
                        self.aff[(g.key, v)] = a
            if n % run_every == 0:
                for g in self.guests:
                    for v, tid in self.tids[g.key].items():
                        try:
                            run, delay, cpu = self._read(g.key, tid)
                        except (OSError, ValueError, IndexError):
                            continue
                        prun, pdelay, _ = self._prev[(g.key, v)]
                        self._prev[(g.key, v)] = (run, delay, cpu)
                        self.runs.append((now, g.key, v, cpu, run - prun, delay - pdelay))
            if n % cpu_every == 0:
                self.cpu.append((now, host_busy_seconds(),
                                 {lb: proc_cpu_seconds(p) for lb, p in self.pids.items()},
                                 proc_cpu_seconds(self.daemon_pid) if self.daemon_pid else 0.0,
                                 sum(os.times()[:2])))
            n += 1
            delay = next_t - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_t = time.monotonic()


def ack_time(g, n, after):
    """Time of the guest's 'ok n' received after `after`."""
    with g._cond:
        for t, line in reversed(g.lines):
            if t >= after and line == "ok %d" % n:
                return t
    return None


class Bench:
    def __init__(self, args):
        self.args = args
        self.a = self.b = None
        self.runs = []
        self.plot_runs = {}

    def set_loads(self, events, la, lb):
        """Set the loads of A then B (only those that change); record (label, n, ack time)."""
        for g, n in ((self.a, la), (self.b, lb)):
            if g.current_load != n:
                t0 = time.monotonic()
                g.set_load(n)
                events.append((g.key, n, ack_time(g, n, t0) or time.monotonic()))
                g.current_load = n

    def pin(self, config):
        for g in (self.a, self.b):
            cpus = HOME[g.key] if config == "hard" else ALL
            cl = T.format_cpulist(cpus)
            for v in range(g.vcpus):
                T.virsh("vcpupin", g.name, str(v), cl, "--live")
            T.virsh("emulatorpin", g.name, cl, "--live")

    def run_config(self, config, rnd):
        args = self.args
        self.set_loads([], 0, 0)
        quiet = True
        try:
            util = T.wait_host_quiet(timeout=args.quiet_timeout)
        except T.Skip as e:
            T.log("NOTE: %s; measuring anyway" % e)
            quiet = False
            util = T.cpu_utilization(1.0)
        self.pin(config)
        daemon = None
        if config in SOFTNESS:
            cfg, sock = T.write_config(interval_ms=TICK_MS, layout="custom", custom="0;1",
                                       softness=SOFTNESS[config], manage="explicit")
            daemon = T.Daemon(cfg, socket_path=sock, log_path=os.path.join(
                args.out, "softaffd-%s-r%d.log" % (config, rnd)))
            daemon.start(wait_socket=False)
            T.wait_until(lambda: (daemon.check_alive() or True) and self.a.all_on(HOME["A"])
                         and self.b.all_on(HOME["B"]), 15, 0.05,
                         what="idle guests at home under softaffd")
            time.sleep(1.0)
        s = Sampler([self.a, self.b])
        if daemon:
            s.daemon_pid = daemon.proc.pid
        s.start()
        phases = []
        events = []
        t_start = time.monotonic()
        plan = [("A alone", 2, 0, args.phase), ("both busy", 2, 2, args.phase),
                ("B alone", 0, 2, args.phase)]
        if config in SOFTNESS and args.steps > 0:
            for k in range(args.steps):
                plan += [("step A alone", 2, 0, args.step), ("step both", 2, 2, args.step)]
        for name, la, lb, dur in plan:
            t0 = time.monotonic()
            self.set_loads(events, la, lb)
            time.sleep(max(0.0, dur - (time.monotonic() - t0)))
            phases.append((name, t0, time.monotonic()))
        self.set_loads(events, 0, 0)
        time.sleep(0.3)
        s.stop()
        if daemon:
            daemon.stop()
        run = self.analyse(config, rnd, s, phases, events, t_start)
        run["quiet_before"] = {"quiet": quiet, "max_cpu_busy": max(util.values())}
        self.runs.append(run)
        if rnd == 0 and config in ("none", "hard", "softaff"):
            self.plot_runs[config] = (s.runs, phases, t_start)
        T.log("%s round %d: %s" % (config, rnd + 1, json.dumps(run["summary"])))

    def analyse(self, config, rnd, s, phases, events, t_start):
        guests = {"A": self.a, "B": self.b}
        out = {"config": config, "round": rnd + 1, "phases": {}}
        for name, t0, t1 in phases:
            w0 = t0 + SETTLE
            ph = {}
            for lb, g in guests.items():
                run_tot = sum(r[4] for r in s.runs if r[1] == lb and w0 <= r[0] <= t1)
                run_home = sum(r[4] for r in s.runs
                               if r[1] == lb and w0 <= r[0] <= t1 and r[3] in HOME[lb])
                delay = sum(r[5] for r in s.runs if r[1] == lb and w0 <= r[0] <= t1)
                # One change of the VM: its vCPUs' affinity changes seen within 100 ms (libvirt
                # re-pins the vCPUs one after the other).
                times = sorted(c[0] for c in s.changes if c[1] == lb and w0 <= c[0] <= t1)
                nchg = sum(1 for k, t in enumerate(times) if k == 0 or t - times[k - 1] > 0.1)
                ph[lb] = {
                    "work": g.work_between(w0 + 1.0, t1),
                    "home_share": run_home / run_tot if run_tot else None,
                    "run_cpus": run_tot / 1e9 / (t1 - w0),
                    "delay_cpus": delay / 1e9 / (t1 - w0),
                    "changes": nchg,
                    "seconds": t1 - w0,
                }
            out["phases"].setdefault(name, []).append(ph)
        # Reactions: retreat of A when B's load comes (A was bursting), bursts when a neighbour
        # goes idle (A on B 2->0 or A 0->2 with B idle; B on A 2->0 with B busy).
        reactions = []
        for lb, n, t_ack in (events if config in SOFTNESS else []):
            seg_end = min([p[2] for p in phases if p[1] <= t_ack + 0.5 and p[2] > t_ack] or
                          [t_ack + self.args.phase])
            if lb == "B" and n == 2 and self.a.current_load_at(events, t_ack) == 2:
                who, want, kind = "A", HOME["A"], "retreat"
            elif lb == "B" and n == 0 and self.a.current_load_at(events, t_ack) == 2:
                who, want, kind = "A", ALL, "burst"
            elif lb == "A" and n == 2 and self.b.current_load_at(events, t_ack) == 0:
                who, want, kind = "A", ALL, "burst"
            elif lb == "A" and n == 0 and self.b.current_load_at(events, t_ack) == 2:
                who, want, kind = "B", ALL, "burst"
            else:
                continue
            # The affinity before the step (the last change before it, else the start).
            before = [c for c in s.changes if c[1] == who and c[0] < t_ack]
            cur = set(before[-1][4]) if before else (HOME[who] if config != "none" else ALL)
            if kind == "retreat" and cur == HOME[who]:
                continue  # was not bursting: nothing to retreat from
            if kind == "burst" and cur == ALL:
                continue
            after = [c for c in s.changes if c[1] == who and t_ack <= c[0] <= seg_end
                     and set(c[4]) == want]
            reactions.append({"kind": kind, "vm": who, "step_at": t_ack - t_start,
                              "ms": (after[0][0] - t_ack) * 1000 if after else None})
        out["reactions"] = reactions
        # Host CPU outside the two guests (includes softaffd and this sampler).
        if len(s.cpu) >= 2:
            c0, c1 = s.cpu[0], s.cpu[-1]
            dt = c1[0] - c0[0]
            qemu = sum((c1[2][lb] or 0) - (c0[2][lb] or 0) for lb in guests)
            busy = c1[1] - c0[1]
            out["host"] = {"seconds": dt, "busy_cpus": busy / dt, "qemu_cpus": qemu / dt,
                           "daemon_cpus": (c1[3] - c0[3]) / dt, "sampler_cpus": (c1[4] - c0[4]) / dt,
                           "other_cpus": (busy - qemu - (c1[3] - c0[3]) - (c1[4] - c0[4])) / dt}
            # Per second: host CPU used outside the two guests, softaffd and this script.
            series = []
            for p, q in zip(s.cpu, s.cpu[1:]):
                d = q[0] - p[0]
                if d <= 0:
                    continue
                outside = ((q[1] - p[1]) - sum((q[2][lb] or 0) - (p[2][lb] or 0) for lb in guests)
                           - (q[3] - p[3]) - (q[4] - p[4]))
                series.append((round(q[0] - t_start, 2), round(outside / d, 3)))
            out["host_outside_per_second"] = series
        out["summary"] = {
            "A_alone_work_A": out["phases"]["A alone"][0]["A"]["work"],
            "both_home_A": out["phases"]["both busy"][0]["A"]["home_share"],
            "both_home_B": out["phases"]["both busy"][0]["B"]["home_share"],
            "reactions": [(r["kind"], r["ms"] and round(r["ms"])) for r in reactions],
            "other_cpus": out.get("host", {}).get("other_cpus"),
        }
        return out

    def plot(self, png):
        if not self.plot_runs:
            return
        d = self.args.out
        script = ["set terminal pngcairo size 1400,1000 font 'sans,11'",
                  "set output '%s'" % png,
                  "set multiplot layout %d,1 title 'Where the vCPUs ran (50 ms samples, round 1)"
                  "' font 'sans,13'" % len(self.plot_runs),
                  "set yrange [-0.5:1.5]", "set ytics ('CPU 0 (A home)' 0, 'CPU 1 (B home)' 1)",
                  "set grid xtics", "set key outside right top"]
        xmax = max(p[-1][2] - t for _, p, t in self.plot_runs.values())
        script.append("set xrange [0:%.0f]" % (xmax + 1))
        for config in ("none", "hard", "softaff"):
            if config not in self.plot_runs:
                continue
            runs, phases, t_start = self.plot_runs[config]
            path = os.path.join(d, "plot-%s.dat" % config)
            with open(path, "w") as f:
                for lb, off in (("A", -0.12), ("B", 0.12)):
                    f.write("# %s\n" % lb)
                    for t, l, v, cpu, drun, _ in runs:
                        if l == lb and drun > 0:
                            f.write("%.3f %.3f\n" % (t - t_start, cpu + off + (v - 0.5) * 0.08))
                    f.write("\n\n")
            script.append("unset label; unset arrow")
            for i, (name, t0, t1) in enumerate(phases):
                x = t0 - t_start
                script.append("set arrow from %.2f,-0.5 to %.2f,1.5 nohead lc rgb '#999999' dt 2"
                              % (x, x))
                short = {"A alone": "A alone", "both busy": "both", "B alone": "B alone",
                         "step A alone": "A", "step both": "both"}[name]
                script.append("set label '%s' at %.2f,1.42 font 'sans,9'" % (short, x + 0.2))
            script.append("set title '%s'" % config)
            script.append("set xlabel 'seconds'" if config == "softaff" else "unset xlabel")
            script.append("plot '%s' index 0 using 1:2 with points pt 7 ps 0.35 lc rgb '#d62728' "
                          "title 'VM A vCPUs', '' index 1 using 1:2 with points pt 7 ps 0.35 "
                          "lc rgb '#1f77b4' title 'VM B vCPUs'" % path)
        script.append("unset multiplot")
        gp = os.path.join(d, "plot.gp")
        with open(gp, "w") as f:
            f.write("\n".join(script) + "\n")
        subprocess.run(["gnuplot", gp], check=True)
        T.log("plot written to %s" % png)

    def table(self):
        by = {c: [r for r in self.runs if r["config"] == c] for c in CONFIGS}
        none = {r["round"]: r for r in by["none"]}

        def rng(vals, fmt="%.1f", scale=1.0):
            vals = [v * scale for v in vals if v is not None]
            if not vals:
                return "–"
            m = statistics.mean(vals)
            return (fmt % m) + (" (%s–%s)" % (fmt % min(vals), fmt % max(vals)) if len(vals) > 1
                                else "")

        def ph(r, name, lb, key):
            return r["phases"][name][0][lb][key]

        def ratio(r, name, lb):
            n = none.get(r["round"])
            a, b = ph(r, name, lb, "work"), n and ph(n, name, lb, "work")
            return a / b if a and b else None

        def pct(vals):
            vals = sorted(v for v in vals if v is not None)
            if not vals:
                return None, None
            return (vals[len(vals) // 2],
                    vals[min(len(vals) - 1, int(round(0.95 * (len(vals) - 1))))])

        lines = ["| metric | " + " | ".join(CONFIGS) + " |",
                 "|---|" + "---|" * len(CONFIGS)]

        def row(title, fn):
            lines.append("| %s | %s |" % (title, " | ".join(fn(c) for c in CONFIGS)))

        row("A alone: A work/s", lambda c: rng([ph(r, "A alone", "A", "work") for r in by[c]]))
        row("A alone: A throughput / none, %", lambda c: rng(
            [ratio(r, "A alone", "A") for r in by[c]], scale=100))
        row("B alone: B throughput / none, %", lambda c: rng(
            [ratio(r, "B alone", "B") for r in by[c]], scale=100))
        def both_ratio(r):
            n = none.get(r["round"])
            vals = [ph(x, "both busy", lb, "work") for x in (r, n) if x for lb in ("A", "B")]
            if len(vals) < 4 or None in vals or not vals[2] + vals[3]:
                return None
            return (vals[0] + vals[1]) / (vals[2] + vals[3])
        row("both busy: A+B throughput / none, %", lambda c: rng(
            [both_ratio(r) for r in by[c]], scale=100))
        row("both busy: home share A, %", lambda c: rng(
            [ph(r, "both busy", "A", "home_share") for r in by[c]], "%.2f", 100))
        row("both busy: home share B, %", lambda c: rng(
            [ph(r, "both busy", "B", "home_share") for r in by[c]], "%.2f", 100))
        row("A alone: home share A, %", lambda c: rng(
            [ph(r, "A alone", "A", "home_share") for r in by[c]], "%.1f", 100))
        row("both busy: run delay A+B, ms/s", lambda c: rng(
            [1000 * (ph(r, "both busy", "A", "delay_cpus") + ph(r, "both busy", "B",
                                                                  "delay_cpus"))
             for r in by[c]], "%.0f"))

        def changes(c):
            n = secs = 0.0
            for r in by[c]:
                for name in ("A alone", "both busy", "B alone"):
                    for lb in ("A", "B"):
                        n += ph(r, name, lb, "changes")
                        secs += ph(r, name, lb, "seconds")
            return "%.2f" % (10 * n / secs) if secs else "–"
        row("steady: affinity changes per VM per 10 s", changes)

        def react(kind):
            def f(c):
                rs = [x for r in by[c] for x in r["reactions"] if x["kind"] == kind]
                if not rs:
                    return "–"
                got = [x["ms"] for x in rs if x["ms"] is not None]
                p50, p95 = pct(got)
                missed = len(rs) - len(got)
                if p50 is None:
                    return "none of %d" % len(rs)
                return "%.0f / %.0f ms (%.1f / %.1f ticks), n=%d%s" % (
                    p50, p95, p50 / TICK_MS, p95 / TICK_MS, len(got),
                    ", %d not in the segment" % missed if missed else "")
            return f
        row("reaction, retreat p50 / p95", react("retreat"))
        row("reaction, burst p50 / p95", react("burst"))

        def within(c):
            rs = [x for r in by[c] for x in r["reactions"] if x["kind"] == "burst"]
            fast = [x for x in rs if x["ms"] is not None and x["ms"] <= 2 * TICK_MS]
            return "%d of %d" % (len(fast), len(rs)) if rs else "–"
        row("bursts within 2 ticks (the others: back-off after repeated retreats)", within)
        row("host CPU outside the guests, CPUs", lambda c: rng(
            [r.get("host", {}).get("other_cpus") for r in by[c]], "%.2f"))
        row("softaffd CPU, % of one CPU", lambda c: rng(
            [r.get("host", {}).get("daemon_cpus") for r in by[c]], "%.2f", 100))
        row("quiet before (max CPU busy, %)", lambda c: rng(
            [r["quiet_before"]["max_cpu_busy"] for r in by[c]], "%.0f", 100))
        return "\n".join(lines) + "\n"

    def main(self):
        args = self.args
        os.makedirs(args.out, exist_ok=True)
        if not {0, 1} <= T.host_cpus():
            T.skip("needs host CPUs 0 and 1")
        if not os.access(T.softaffd_path(), os.X_OK):
            raise AssertionError("softaffd not built: %s" % T.softaffd_path())
        self.env = T.environment()
        T.log("environment: " + T.environment_text(self.env))
        self.a = T.Guest("bench-A", vcpus=2, metadata=T.softaff_metadata(preferred=0))
        self.b = T.Guest("bench-B", vcpus=2, metadata=T.softaff_metadata(preferred=1))
        self.a.key, self.b.key = "A", "B"
        for g in (self.a, self.b):
            g.current_load = 0
            g.current_load_at = (lambda ev, t, lb=g.key: next(
                (n for l, n, ta in reversed(ev) if l == lb and ta <= t + 1e-6), 0))
            g.start()
        for g in (self.a, self.b):
            g.wait_ready(240)
            g.wait_vcpu_threads()
        t0 = time.monotonic()
        for rnd in range(args.rounds):
            order = CONFIGS[rnd % len(CONFIGS):] + CONFIGS[:rnd % len(CONFIGS)]
            if args.configs:
                order = [c for c in order if c in args.configs.split(",")]
            for config in order:
                self.run_config(config, rnd)
        T.log("measured for %.0f s" % (time.monotonic() - t0))
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(self.runs, f, indent=1)
        with open(os.path.join(args.out, "environment.json"), "w") as f:
            json.dump(self.env, f, indent=1)
        table = "Environment: %s\n\n%s" % (T.environment_text(self.env), self.table())
        with open(os.path.join(args.out, "table.md"), "w") as f:
            f.write(table)
        print(table)
        if args.png:
            self.plot(args.png)


def parse_args():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--phase", type=float, default=10.0,
                   help="seconds per steady phase (the first 2 s are not measured; >= 5)")
    p.add_argument("--step", type=float, default=5.0, help="seconds per step segment")
    p.add_argument("--steps", type=int, default=4, help="A alone / both busy cycles")
    p.add_argument("--configs", default="", help="comma-separated subset of " + ",".join(CONFIGS))
    p.add_argument("--quiet-timeout", type=float, default=120.0,
                   help="wait up to this long for a quiet host before each configuration")
    p.add_argument("--out", default=os.path.join(os.getcwd(), "bench-guests-results"))
    p.add_argument("--png", default=os.path.join(here, "docs", "benchmarks-placement.png"),
                   help="plot file ('' for none)")
    return p.parse_args()


if __name__ == "__main__":
    ARGS = parse_args()
    T.run(Bench(ARGS).main)
