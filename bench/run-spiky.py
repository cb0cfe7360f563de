#!/usr/bin/env python3
"""softaff spiky-load benchmark: none, hard and softaff side by side on real guests.

    SOFTAFF_BUILD_DIR=build python3 bench/run-spiky.py [--rounds 2] [--quick] [--out DIR]
        [--patterns 300/2700,100/900,400/400] [--duration 16] [--sensing both|proc|auto]

Two TCG guests of 2 vCPUs, layout custom "0;1": A (home CPU 1) and B (home CPU 0, softness 0:
the owner, never a visitor), running the load generator of tests/guest/load.c. Per configuration (the order rotates each round):

  none, hard                       no daemon; vCPUs and emulator on CPUs 0-1 / on the home CPU
  softaff[-S]-proc, softaff[-S]-bpf  softaffd at softness S (0, 50 = the default, 100) with
                                   [sensing] mode=proc (the tick) / mode=auto (event sensing)

these parts run in turn:
  spiky       A's two vCPUs spin ON ms, sleep OFF ms ("p 2 ON OFF") for --duration s, B idle:
              A's vCPU run time (schedstat deltas), its ratio to none, bursts (A's affinity
              gaining CPU 0), the share of time A's door onto CPU 0 was open, and the reaction of
              each spike (the guest's "spike on") when the door was closed
  protection  (hard and softaff at the default softness) B starts a steady 1-thread load or a
              spiky one (p 1 300 700) while A is spiky (p 2 300 2700) or idle, --steps times:
              B's throughput against hard pinning, and A's retreat: from B's "ok" to no vCPU
              of A allowed on CPU 0; and A's own steady steps (0 -> 2, B idle): the burst
              reaction when the door was closed
  both busy   A and B 2 threads each: the share of each VM's vCPU time on its home CPU

Affinity is polled every 2 ms (one thread of this process; sched_getaffinity), schedstat and
the CPU seen every 50 ms (bench/run-guests.py's Sampler). Results: DIR/results.json and
DIR/table.md (markdown tables for docs/benchmarks.md); `--table-from DIR/results.json` prints
the tables again without running anything. Must run as root."""

import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("run_guests", os.path.join(_HERE, "run-guests.py"))
RG = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(RG)
T = RG.T

HOME = {"A": {1}, "B": {0}}
ALL = {0, 1}
B_CPU = 0  # A's door: CPU 0, B's home
TICK_MS = 500
A_SPIKY = (2, 300, 2700)  # A's pattern in the protection cases
B_SPIKY = (1, 300, 700)
CASES = [("A spiky, B steady", A_SPIKY, 1), ("A spiky, B spiky", A_SPIKY, B_SPIKY),
         ("A idle, B steady", 0, 1), ("A idle, B spiky", 0, B_SPIKY)]
PROTECT = ("hard", "softaff-proc", "softaff-bpf")


def config_list(sensing):
    out = [{"name": "none"}, {"name": "hard"}]
    for s in (0, 50, 100):
        for label, mode in (("proc", "proc"), ("bpf", "auto")):
            if sensing in ("both", mode):
                name = "softaff%s-%s" % ("" if s == 50 else "-%d" % s, label)
                out.append({"name": name, "softness": s, "mode": mode})
    return out


def sensing_supported():
    """(True, '') when softaffd accepts [sensing] mode=auto, else (False, its complaint)."""
    path = os.path.join(T.workdir(), "sensing-check.conf")
    cfg, _ = T.write_config(path=path, extra={"sensing": {"mode": "auto"}})
    p = T.run_cmd([T.softaffd_path(), "--config", cfg, "--check-config"], check=False, timeout=30)
    return p.returncode == 0, (p.stderr or p.stdout).strip()


def foreign(mine_pids, mine_names):
    """Other engineers' softaff activity on a shared host: softaffd processes and libvirt guests
    not this run's (another softaffd may pin this run's guests: its runs are suspect)."""
    daemons = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) not in mine_pids:
            try:
                with open("/proc/%s/comm" % d) as f:
                    if f.read().strip() == "softaffd":
                        daemons.append(int(d))
            except OSError:
                pass
    names = T.virsh("list", "--name", check=False, timeout=30).split()
    return {"softaffd": daemons, "guests": sorted(n for n in names if n not in mine_names)}


def load(g, spec):
    """spec: N threads, or (N, ON, OFF) for a pattern. Returns (send, reply) times."""
    if isinstance(spec, tuple):
        return g.command("p %d %d %d" % spec, report_now=True)
    return g.command("%d" % spec, report_now=True)


# ---- affinity timeline -------------------------------------------------------------------------


def aff_state(s, lb, t):
    st = {v: set(a) for (l, v), a in s.aff0.items() if l == lb}
    for c in s.changes:
        if c[0] > t:
            break
        if c[1] == lb:
            st[c[2]] = set(c[4])
    return st


def door_open(st):
    return any(B_CPU in a for a in st.values())


def first_time(s, lb, t0, t1, pred):
    """First time in [t0, t1] the VM's vCPU affinities satisfy pred, else None."""
    st = aff_state(s, lb, t0)
    if pred(st):
        return t0
    for c in s.changes:
        if c[0] <= t0 or c[1] != lb:
            continue
        if c[0] > t1:
            break
        st[c[2]] = set(c[4])
        if pred(st):
            return c[0]
    return None


def open_share(s, lb, t0, t1):
    st = aff_state(s, lb, t0)
    last, opened, acc = t0, door_open(st), 0.0
    for c in s.changes:
        if c[0] <= t0 or c[1] != lb:
            continue
        if c[0] > t1:
            break
        acc += (c[0] - last) if opened else 0.0
        st[c[2]] = set(c[4])
        last, opened = c[0], door_open(st)
    acc += (t1 - last) if opened else 0.0
    return acc / (t1 - t0)


def bursts(s, lb, t0, t1):
    """Times the door opened (vCPU changes within 100 ms are one change of the VM)."""
    n, st, was, last = 0, aff_state(s, lb, t0), None, -1.0
    was = door_open(st)
    for c in s.changes:
        if c[0] <= t0 or c[1] != lb:
            continue
        if c[0] > t1:
            break
        st[c[2]] = set(c[4])
        now = door_open(st)
        if now and not was and c[0] - last > 0.1:
            n += 1
            last = c[0]
        was = now
    return n


def run_seconds(s, lb, t0, t1, cpus=None):
    return sum(r[4] for r in s.runs if r[1] == lb and t0 < r[0] <= t1
               and (cpus is None or r[3] in cpus)) / 1e9


def work_mean(g, t0, t1):
    """B's work/s over (t0, t1]: reports weighted by the time each one covers."""
    with g._cond:
        pts = [(t, w) for t, w, _ in g.series]
    num = den = 0.0
    for (tp, _), (t, w) in zip(pts, pts[1:]):
        if t0 < t <= t1 + 0.2 and tp >= t0 - 0.05:
            num += w * (t - tp)
            den += t - tp
    return num / den if den else None


def reaction(s, lb, t_send, t_ack, t_end, kind):
    """ms from the step's reply to the retreat (no vCPU on CPU 0) or the burst; None if not
    within the segment; 'open'/'closed' when there was nothing to react to."""
    st = aff_state(s, lb, t_send)
    if kind == "retreat" and not door_open(st):
        return "closed"
    if kind == "burst" and door_open(st):
        return "open"
    pred = (lambda x: not door_open(x)) if kind == "retreat" else door_open
    t = first_time(s, lb, t_send, t_end, pred)
    return None if t is None else (t - t_ack) * 1000.0


# ---- the benchmark -----------------------------------------------------------------------------


class Bench:
    def __init__(self, args):
        self.args = args
        self.a = self.b = None
        self.runs = []
        self.notes = []

    def estimate(self, configs):
        a = self.args
        pats = len(a.patterns)
        per = pats * (a.duration + a.gap) + a.both + 3 + 8  # + daemon start/settle, quiet wait
        prot = (len(CASES) + 1) * a.steps * (a.step_on + a.step_off) + a.gap * (len(CASES) + 1)
        n_prot = sum(1 for c in configs if c["name"] in PROTECT)
        return a.rounds * (len(configs) * per + n_prot * prot) + 90

    def pin(self, cfg):
        for g in (self.a, self.b):
            cl = T.format_cpulist(HOME[g.key] if cfg["name"] == "hard" else ALL)
            for v in range(g.vcpus):
                T.virsh("vcpupin", g.name, str(v), cl, "--live")
            T.virsh("emulatorpin", g.name, cl, "--live")

    def start_daemon(self, cfg, rnd):
        extra = {"sensing": {"mode": cfg["mode"]}} if self.sensing_ok else None
        path = os.path.join(T.workdir(), "softaff-%s.conf" % cfg["name"])
        conf, sock = T.write_config(path=path, interval_ms=TICK_MS, softness=cfg["softness"],
                                    manage="explicit", extra=extra)
        log = os.path.join(self.args.out, "softaffd-%s-r%d.log" % (cfg["name"], rnd + 1))
        d = T.Daemon(conf, socket_path=sock, log_path=log,
                     args=["--verbose"] if self.args.verbose else None)
        d.start(wait_socket=True)
        time.sleep(4 * TICK_MS / 1000.0)  # the first decisions and pins
        d.check_alive()
        return d

    def idle(self, secs):
        for g in (self.a, self.b):
            if g.cur != 0:
                load(g, 0)
                g.cur = 0
        time.sleep(secs)

    def set(self, g, spec):
        t = load(g, spec)
        g.cur = spec
        return t

    def run_config(self, cfg, rnd):
        a = self.args
        self.idle(0)
        try:
            util = T.wait_host_quiet(timeout=a.quiet_timeout)
        except T.Skip as e:
            T.log("NOTE: %s; measuring anyway" % e)
            util = T.cpu_utilization(1.0)
        self.pin(cfg)
        d = self.start_daemon(cfg, rnd) if "softness" in cfg else None
        s = RG.Sampler([self.a, self.b], period=0.002)
        if d:
            s.daemon_pid = d.proc.pid
        s.start()
        out = {"config": cfg["name"], "round": rnd + 1, "quiet_before": max(util.values()),
               "spiky": {}, "protection": {}, "steps": [], "both": None}
        mine = ({d.proc.pid} if d else set(), {self.a.name, self.b.name})
        seen = [foreign(*mine)]
        try:
            segs = self.measure(cfg, s, out)
        finally:
            s.stop()
            if d:
                d.stop()
        seen.append(foreign(*mine))
        if d:  # what softaffd said about its sensing (e.g. why BPF did not load)
            out["sensing_log"] = [ln for ln in d.log_text().splitlines()
                                  if "sensing" in ln.lower() or "bpf" in ln.lower()][:5]
        out["foreign"] = {"softaffd": sorted(set(p for f in seen for p in f["softaffd"])),
                          "guests": sorted(set(n for f in seen for n in f["guests"]))}
        if not d:  # nobody of this run changes affinities in none / hard
            out["foreign"]["pins"] = len(s.changes)
        self.analyse(s, out, segs)
        self.runs.append(out)
        T.log("%s round %d: %s" % (cfg["name"], rnd + 1, json.dumps(out["summary"])))

    def measure(self, cfg, s, out):
        """Runs the parts; returns the segments to analyse."""
        a = self.args
        segs = {"spiky": [], "protection": [], "steps": [], "both": None}
        for on, off in a.patterns:
            self.idle(a.gap)
            t_send, t_ack = self.set(self.a, (2, on, off))
            time.sleep(a.duration)
            t_end = time.monotonic()
            segs["spiky"].append(("%d/%d" % (on, off), t_send, t_ack, t_end))
        if cfg["name"] in PROTECT:
            for name, a_spec, b_spec in CASES:
                self.idle(a.gap)
                if a_spec:
                    self.set(self.a, a_spec)
                    time.sleep(a.step_off)
                for _ in range(a.steps):
                    t_send, t_ack = self.set(self.b, b_spec)
                    time.sleep(a.step_on)
                    _, t_end = self.set(self.b, 0)
                    segs["protection"].append((name, t_send, t_ack, t_end))
                    time.sleep(a.step_off)
            self.idle(a.gap)
            for _ in range(a.steps):
                t_send, t_ack = self.set(self.a, 2)
                time.sleep(a.step_on)
                _, t_end = self.set(self.a, 0)
                segs["steps"].append((t_send, t_ack, t_end))
                time.sleep(a.step_off)
        self.idle(1.0)
        self.set(self.a, 2)
        _, t0 = self.set(self.b, 2)
        time.sleep(a.both)
        segs["both"] = (t0 + 2.0, time.monotonic())
        self.idle(0.3)
        return segs

    def analyse(self, s, out, segs):
        for pat, t_send, t_ack, t_end in segs["spiky"]:
            with self.a._cond:
                spikes = [t for t, ln in self.a.lines if t_ack < t <= t_end and ln == "spike on"]
            on_s = int(pat.split("/")[0]) / 1000.0
            react = [reaction(s, "A", t - 0.05, t, min(t + on_s, t_end), "burst")
                     for t in [t_ack] + spikes]
            out["spiky"][pat] = {
                "run_s": run_seconds(s, "A", t_ack, t_end),
                "run_s_on_b": run_seconds(s, "A", t_ack, t_end, {B_CPU}),
                "seconds": t_end - t_ack, "bursts": bursts(s, "A", t_ack, t_end),
                "open_share": open_share(s, "A", t_ack, t_end), "spike_reactions": react}
        for name, t_send, t_ack, t_end in segs["protection"]:
            p = out["protection"].setdefault(name, {"work": [], "retreat": []})
            p["work"].append(work_mean(self.b, t_ack, t_end))
            p["retreat"].append(reaction(s, "A", t_send, t_ack, t_end, "retreat"))
        for t_send, t_ack, t_end in segs["steps"]:
            out["steps"].append(reaction(s, "A", t_send, t_ack, t_end, "burst"))
        t0, t1 = segs["both"]
        out["both"] = {lb: {"home_share": (run_seconds(s, lb, t0, t1, HOME[lb]) /
                                           (run_seconds(s, lb, t0, t1) or 1e-9)),
                            "work": g.work_between(t0 + 1.0, t1)}
                       for lb, g in (("A", self.a), ("B", self.b))}
        if len(s.cpu) >= 2:
            c0, c1 = s.cpu[0], s.cpu[-1]
            dt = c1[0] - c0[0]
            out["host"] = {"daemon_cpus": (c1[3] - c0[3]) / dt,
                           "sampler_cpus": (c1[4] - c0[4]) / dt}
        out["summary"] = {
            "spiky_run_s": {p: round(v["run_s"], 2) for p, v in out["spiky"].items()},
            "bursts": {p: v["bursts"] for p, v in out["spiky"].items()},
            "both_home_A": round(out["both"]["A"]["home_share"], 4),
            "retreat_ms": [r if isinstance(r, str) or r is None else round(r)
                           for p in out["protection"].values() for r in p["retreat"]]}

    def main(self):
        a = self.args
        os.makedirs(a.out, exist_ok=True)
        if not {0, 1} <= T.host_cpus():
            T.skip("needs host CPUs 0 and 1")
        if not os.access(T.softaffd_path(), os.X_OK):
            raise AssertionError("softaffd not built: %s" % T.softaffd_path())
        self.sensing_ok, why = sensing_supported()
        configs = config_list(a.sensing)
        if not self.sensing_ok:
            self.notes.append("softaffd rejects [sensing] (%s): softaff-*-proc ran without the "
                              "group (tick sensing), softaff-*-bpf skipped" % why.splitlines()[-1])
            configs = [c for c in configs if c.get("mode") != "auto"]
        if a.configs:
            configs = [c for c in configs if c["name"] in a.configs.split(",")]
        for n in self.notes:
            T.log("NOTE: " + n)
        T.log("configurations: %s; estimated total %.0f min" % (
            ", ".join(c["name"] for c in configs), self.estimate(configs) / 60.0))
        env = T.environment()
        T.log("environment: " + T.environment_text(env))
        self.a = T.Guest("spiky-A", vcpus=2, metadata=T.softaff_metadata(preferred=1))
        # B is the owner, never a visitor (softness 0): at the default softness B's own spikes
        # earn it a door onto A's idle CPU, and B's load steps then ran there, leaving A
        # nothing to retreat from.
        self.b = T.Guest("spiky-B", vcpus=2, metadata=T.softaff_metadata(preferred=0, softness=0))
        self.a.key, self.b.key = "A", "B"
        for g in (self.a, self.b):
            g.cur = 0
            g.start()
        for g in (self.a, self.b):
            g.wait_ready(240)
            g.wait_vcpu_threads()
            load(g, (0, 1, 1))  # the image knows the pattern command
            load(g, 0)
        t0 = time.monotonic()
        for rnd in range(a.rounds):
            k = rnd % len(configs)
            for cfg in configs[k:] + configs[:k]:
                self.run_config(cfg, rnd)
        T.log("measured for %.0f s" % (time.monotonic() - t0))
        names = [c["name"] for c in configs]
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"args": {k: v for k, v in vars(a).items()}, "notes": self.notes,
                       "configs": names, "runs": self.runs, "environment": env}, f, indent=1)
        table = "Environment: %s\n\n%s" % (T.environment_text(env),
                                             Tables(self.runs, names, self.notes, a).render())
        with open(os.path.join(a.out, "table.md"), "w") as f:
            f.write(table)
        print(table)


# ---- tables ------------------------------------------------------------------------------------


def pct(vals):
    """p50 and p95, nearest rank."""
    vals = sorted(vals)
    if not vals:
        return None, None
    return tuple(vals[max(0, math.ceil(q * len(vals)) - 1)] for q in (0.50, 0.95))


def rng(vals, fmt="%.2f", scale=1.0):
    vals = [v * scale for v in vals if v is not None]
    if not vals:
        return "–"
    m = statistics.mean(vals)
    return fmt % m + (" (%s–%s)" % (fmt % min(vals), fmt % max(vals)) if len(vals) > 1 else "")


def react_cell(vals):
    """p50 / p95 over the numeric reactions; counts of the missed and the not applicable."""
    got = [v for v in vals if isinstance(v, float)]
    missed = sum(1 for v in vals if v is None)
    na = sum(1 for v in vals if isinstance(v, str))
    if not vals:
        return "–"
    p50, p95 = pct(got)
    txt = "%.0f / %.0f ms, n=%d" % (p50, p95, len(got)) if got else "n=0"
    if missed:
        txt += ", %d missed" % missed
    if na:
        txt += ", %d already %s" % (na, "/".join(sorted(set(v for v in vals
                                                             if isinstance(v, str)))))
    return txt


class Tables:
    def __init__(self, runs, names, notes, args):
        self.runs, self.names, self.notes, self.args = runs, names, notes, args
        self.by = {c: [r for r in runs if r["config"] == c] for c in names}
        self.none = {r["round"]: r for r in self.by.get("none", [])}
        self.hard = {r["round"]: r for r in self.by.get("hard", [])}

    def spiky(self):
        pats = ["%d/%d" % p for p in self.args.patterns]
        head = ["| pattern (on/off ms) | " + " | ".join(self.names) + " |",
                "|---|" + "---|" * len(self.names)]
        t1, t2 = list(head), list(head)
        for p in pats:
            c1, c2 = [], []
            for c in self.names:
                rs = [r for r in self.by[c] if p in r["spiky"]]
                runs = [r["spiky"][p]["run_s"] for r in rs]
                ratios = [r["spiky"][p]["run_s"] / self.none[r["round"]]["spiky"][p]["run_s"]
                          for r in rs if r["round"] in self.none]
                c1.append("%s s · %s" % (rng(runs), rng(ratios)))
                c2.append("%s · %s%% · %s" % (
                    rng([r["spiky"][p]["bursts"] for r in rs], "%.0f"),
                    rng([r["spiky"][p]["open_share"] for r in rs], "%.0f", 100),
                    react_cell([x for r in rs for x in r["spiky"][p]["spike_reactions"]])
                    if c.startswith("softaff") else "–"))
            t1.append("| %s | %s |" % (p, " | ".join(c1)))
            t2.append("| %s | %s |" % (p, " | ".join(c2)))
        return ("A's vCPU run time over %g s, B idle: seconds · ratio to none (mean, range over "
                "rounds)\n\n%s\n\nBursts (A's door onto CPU 0 opening) · share of time open · "
                "reaction of a spike while the door was closed (p50 / p95)\n\n%s\n"
                % (self.args.duration, "\n".join(t1), "\n".join(t2)))

    def prot_ratio(self, r, case):
        """B's throughput in run r against hard pinning's of the same round."""
        h = self.hard.get(r["round"])
        w = [x for x in r["protection"][case]["work"] if x]
        hw = h and case in h["protection"] and [x for x in h["protection"][case]["work"] if x]
        return statistics.mean(w) / statistics.mean(hw) if w and hw else None

    def targets(self):
        """The issue's targets against the measured values (worst round)."""
        lines = ["| target | config | measured | met |", "|---|---|---|---|"]

        def add(what, c, vals, limit, fmt, at_least=True):
            vals = [v for v in vals if v is not None]
            if vals:
                worst = min(vals) if at_least else max(vals)
                ok = worst >= limit if at_least else worst <= limit
                lines.append("| %s | %s | %s | %s |" % (what, c, fmt % worst,
                                                       "yes" if ok else "**no**"))
        for c in self.names:
            if not c.startswith("softaff"):
                continue
            rs = self.by[c]
            if c in PROTECT:
                add("spiky 300/2700: run time / none >= 0.90", c, [
                    r["spiky"]["300/2700"]["run_s"] / self.none[r["round"]]["spiky"]["300/2700"]
                    ["run_s"] for r in rs if "300/2700" in r["spiky"] and r["round"] in self.none],
                    0.90, "%.2f")
                add("owners' protection: B / hard >= 0.97 (worst case)", c,
                    [self.prot_ratio(r, case) for r in rs for case in r["protection"]],
                    0.97, "%.3f")
                limit = 50.0 if c.endswith("-bpf") else 2 * TICK_MS
                got = [x for r in rs for p in r["protection"].values() for x in p["retreat"]
                       if isinstance(x, float)]
                if got:
                    add("retreat p95 <= %.0f ms" % limit, c, [pct(got)[1]], limit, "%.0f ms",
                        at_least=False)
            add("both busy: A's time at home >= 99%", c,
                [r["both"]["A"]["home_share"] * 100 for r in rs], 99.0, "%.2f%%")
        return "Targets (issue 13; the worst round)\n\n%s\n" % "\n".join(lines)

    def protection(self):
        names = [c for c in self.names if c in PROTECT and c != "hard"]
        lines = ["| case | B work/s, hard | " + " | ".join(
            "%s: B / hard · A's retreat p50 / p95" % c for c in names) + " |",
            "|---|---|" + "---|" * len(names)]
        for case, _, _ in CASES:
            hard = [statistics.mean(w for w in r["protection"][case]["work"] if w)
                    for r in self.by.get("hard", []) if case in r["protection"]]
            cells = []
            for c in names:
                rs = [r for r in self.by[c] if case in r["protection"]]
                ratios = [self.prot_ratio(r, case) for r in rs]
                cells.append("%s · %s" % (rng(ratios, "%.3f"), react_cell(
                    [x for r in rs for x in r["protection"][case]["retreat"]])))
            lines.append("| %s | %s | %s |" % (case, rng(hard, "%.0f"), " | ".join(cells)))
        return ("Owners' protection: B's throughput while B's load is on (%g s steps), against "
                "hard pinning; A's retreat from B's reply to no vCPU of A on CPU 0 (target >= "
                "0.97; 'already closed': A's door was shut at the step)\n\n%s\n"
                % (self.args.step_on, "\n".join(lines)))

    def reactions(self):
        lines = ["| config | retreat p50 / p95 | burst, steady step p50 / p95 | "
                 "burst, spike p50 / p95 |", "|---|---|---|---|"]
        for c in self.names:
            if c not in PROTECT or c == "hard":
                continue
            rs = self.by[c]
            lines.append("| %s | %s | %s | %s |" % (
                c, react_cell([x for r in rs for p in r["protection"].values()
                               for x in p["retreat"]]),
                react_cell([x for r in rs for x in r["steps"]]),
                react_cell([x for r in rs for p in r["spiky"].values()
                            for x in p["spike_reactions"]])))
        return ("Reaction to a load step (tick %d ms; -proc: tick sensing, -bpf: event sensing)"
                "\n\n%s\n" % (TICK_MS, "\n".join(lines)))

    def both(self):
        lines = ["| config | A home % | B home % | A+B work/s | softaffd CPU % | poller CPU % |",
                 "|---|---|---|---|---|---|"]
        for c in self.names:
            rs = self.by[c]
            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                c, rng([r["both"]["A"]["home_share"] for r in rs], "%.2f", 100),
                rng([r["both"]["B"]["home_share"] for r in rs], "%.2f", 100),
                rng([(r["both"]["A"]["work"] or 0) + (r["both"]["B"]["work"] or 0)
                     for r in rs], "%.0f"),
                rng([r.get("host", {}).get("daemon_cpus") for r in rs], "%.1f", 100),
                rng([r.get("host", {}).get("sampler_cpus") for r in rs], "%.1f", 100)))
        return ("Both busy (A and B 2 threads each, %g s): vCPU time on the home CPU (target "
                ">= 99%%); CPU of softaffd and of this bench's 2-ms poller over the whole "
                "configuration\n\n%s\n" % (self.args.both, "\n".join(lines)))

    def render(self):
        parts = [self.spiky(), self.protection(), self.reactions(), self.both(), self.targets()]
        suspect = ["%s r%d (%s)" % (r["config"], r["round"], ", ".join(
            k for k, v in (("other softaffd", r["foreign"]["softaffd"]),
                           ("other guests", r["foreign"]["guests"]),
                           ("foreign pins", r["foreign"].get("pins"))) if v))
            for r in self.runs if any(r.get("foreign", {}).values())]
        said = sorted(set("%s: %s" % (r["config"], ln.split(" ", 1)[-1])
                          for r in self.runs for ln in r.get("sensing_log", [])))
        if said:
            parts.append("softaffd on sensing: %s\n" % "; ".join(said[:8]))
        if suspect:
            parts.append("Suspect (other softaff activity on the host during the run): %s\n"
                         % "; ".join(suspect))
        if self.notes:
            parts.append("Notes: " + "; ".join(self.notes) + "\n")
        return "\n".join(parts)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--patterns", default="300/2700,100/900,400/400",
                   help="comma-separated ON/OFF ms of A's spikes")
    p.add_argument("--duration", type=float, default=16.0, help="seconds per spiky pattern")
    p.add_argument("--gap", type=float, default=3.0, help="idle seconds before each part")
    p.add_argument("--steps", type=int, default=3, help="load steps per protection case")
    p.add_argument("--step-on", type=float, default=4.0, help="seconds of B's load per step")
    p.add_argument("--step-off", type=float, default=6.0, help="idle seconds after each step")
    p.add_argument("--both", type=float, default=10.0, help="seconds both busy")
    p.add_argument("--sensing", choices=("both", "proc", "auto"), default="both")
    p.add_argument("--configs", default="", help="comma-separated subset of the names")
    p.add_argument("--quiet-timeout", type=float, default=120.0)
    p.add_argument("--verbose", action="store_true",
                   help="softaffd --verbose: its logs in DIR show every event and narrowing")
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 1 round, 5 s patterns, 1 step per case, short gaps")
    p.add_argument("--out", default=os.path.join(os.getcwd(), "bench-spiky-results"))
    p.add_argument("--table-from", metavar="RESULTS_JSON",
                   help="only print the tables of an earlier run's results.json")
    a = p.parse_args()
    if a.quick:
        a.rounds, a.duration, a.gap, a.steps = 1, 6.0, 2.0, 1
        a.step_on, a.step_off, a.both, a.quiet_timeout = 3.0, 4.0, 5.0, 10.0
    try:
        a.patterns = [tuple(int(x) for x in s.split("/")) for s in a.patterns.split(",")]
        if any(len(x) != 2 or x[0] < 1 or x[1] < 0 for x in a.patterns):
            raise ValueError
    except ValueError:
        p.error("--patterns %r: want ON/OFF ms pairs, e.g. 300/2700,100/900" % a.patterns)
    return a


def render_from(path):
    """--table-from: table.md again from a results.json (no guests)."""
    with open(path) as f:
        res = json.load(f)
    a = argparse.Namespace(**res["args"])
    a.patterns = [tuple(x) for x in a.patterns]
    print(Tables(res["runs"], res["configs"], res["notes"], a).render())


if __name__ == "__main__":
    ARGS = parse_args()
    if ARGS.table_from:
        render_from(ARGS.table_from)
        sys.exit(0)
    T.run(Bench(ARGS).main)
