#!/usr/bin/env python3
"""Multi-node benchmark on the 2-node test host (issue 11, "Proof"): softaffd's memory mover,
then numad, on the same host and guests.

    SOFTAFF_BUILD_DIR=build bench/run-multinode.py [--out DIR] [--rates 32,256]   # root

One boot of tests/multinode's host (nodes 0 and 1, one CPU and 1 GiB each), reusing
test-memory.py's guests and helpers:
  softaffd  A and B (160 MiB, paused, RAM preallocated, preferred="auto") get homes on different
            nodes; then A's home is set to the other node once per rate (rate_mib_s reloaded
            with SIGHUP), sampled every 0.5 s from the set until 20 s after the move is done.
  numad     softaffd stopped (SIGTERM: pins restored); A's vCPU and emulator pinned to the CPU
            of the node its memory is not on; E (384 MiB, preallocated on node 0, boots a kernel:
            a busy vCPU) pinned to CPU 1 the same way; `numad -i 5`, watched for a few minutes.
One in-host shell loop samples everything (uptime, softaffd's utime+stime, the guests' anonymous
bytes per node from numa_maps, softaffd's status); the driver only starts, stops and waits.
Writes DIR/results.json, DIR/table.md (for docs/benchmarks.md) and DIR/multinode.png."""

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MN = os.path.join(os.path.dirname(HERE), "tests", "multinode")
sys.path.insert(0, MN)
import mnhost  # noqa: E402

_spec = importlib.util.spec_from_file_location("mn_test_memory", os.path.join(MN, "test-memory.py"))
tm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tm)

MIB = 1 << 20
BUSY_MIB = 384  # numad manages only processes over 300 MB using half a CPU (numad(8), -p)
TAIL_S = 20
NUMAD_S = 100
# Every 0.5 s until /tmp/bench.stop: "@@ uptime utime stime" (softaffd's clock ticks), one
# "## LABEL node:bytes ..." per guest (anonymous memory, as test-memory's node_bytes counts it),
# with the CPUs its threads may use, then softaffd's status JSON (every other time: it costs
# ~0.3 s under TCG) while it runs. $1: "LABEL:PID ..." (re-read each time from
# /tmp/bench.pids so that guests started later join).
SAMPLER = r"""rm -f /tmp/bench.stop
k=0
while [ ! -e /tmp/bench.stop ]; do
    k=$((k + 1))
    read -r up _ </proc/uptime
    sa=$(pgrep -xo softaffd) stat=
    [ -n "$sa" ] && stat=$(cat /proc/$sa/stat 2>/dev/null)  # not /proc//stat
    set -- ${stat##*) }
    echo "@@ $up ${12:-0} ${13:-0}"
    for lp in $(cat /tmp/bench.pids 2>/dev/null); do
        printf '## %s cpus=%s ' "${lp%%:*}" "$(cat /proc/${lp#*:}/task/*/status 2>/dev/null |
            awk '/^Cpus_allowed_list/ { print $2 }' | sort -u | tr '\n' /)"
        awk '/anon=/ && !/file=/ && !/stack/ {
            kb = 4
            if (match($0, /kernelpagesize_kB=[0-9]+/)) kb = substr($0, RSTART + 18, RLENGTH - 18)
            for (i = 1; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {
                split(substr($i, 2), a, "="); s[a[1]] += a[2] * kb * 1024 }
        } END { for (n in s) printf "%s:%d ", n, s[n]; printf "\n" }' /proc/${lp#*:}/numa_maps
    done
    [ -n "$sa" ] && [ $((k % 2)) = 0 ] &&
        timeout 5 CTL status --json 2>/dev/null | tr -d '\n' && echo
    sleep 0.5
done >/tmp/bench.out 2>/tmp/bench.err
"""


def parse_samples(out):
    """[{t, cpu_s, mem: {label: {node: bytes}}, cpus: {label: cpulists}, status}]."""
    recs = []
    for chunk in out.split("@@ ")[1:]:
        lines = chunk.split("\n")
        f = lines[0].split()
        try:
            rec = {"t": float(f[0]), "cpu_s": None, "mem": {}, "cpus": {}, "status": None}
        except (ValueError, IndexError):
            continue
        if len(f) == 3 and f[1].isdigit() and f[2].isdigit():  # else softaffd is not running
            rec["cpu_s"] = (int(f[1]) + int(f[2])) / 100.0
        for line in lines[1:]:
            if line.startswith("## "):
                p = line[3:].split()
                rec["mem"][p[0]] = {int(n): int(b) for n, b in (x.split(":") for x in p[2:])}
                rec["cpus"][p[0]] = p[1][5:].strip("/")
            elif line.startswith("{"):
                try:
                    rec["status"] = json.loads(line)
                except ValueError:
                    pass  # the last record may be half written
        recs.append(rec)
    return recs


def log(msg):
    mnhost.log("bench: " + msg)


class Bench(tm.Run):
    def __init__(self, h, build, out_dir):
        super().__init__(h, build)
        self.pids = {}
        self.out_dir = out_dir

    def sampler_start(self):
        self.sh("cat >/tmp/bench.sh <<'EOF'\n%sEOF\nnohup bash /tmp/bench.sh >/dev/null 2>&1 &" %
                SAMPLER.replace("CTL", self.ctl))

    def track(self, label, name):
        self.pids[label] = self.qemu_pid(name)
        self.sh("echo '%s' >/tmp/bench.pids" % " ".join("%s:%d" % kv for kv in self.pids.items()))

    def samples(self):
        """The sampler's records so far (parse_samples), its raw output kept in the out dir."""
        out = self.sh("cat /tmp/bench.out", timeout=300)
        with open(os.path.join(self.out_dir, "samples.txt"), "w") as f:
            f.write(out)
        return parse_samples(out)

    def softaffd_log(self):
        return self.sh("cat /var/log/softaffd.log", timeout=120)

    def start_softaffd(self):
        # test-memory's start without its 1 s poller: the sampler above does that job.
        self.h.start_softaffd(self.build)

    def write_conf(self, rate):
        self.sh("cat >/etc/softaff/softaff.conf <<'EOF'\n" +
                tm.CONF.format(interval=tm.INTERVAL_MS, rate=rate) + "EOF")


def a_memory(r):
    return r.vm(r.status(), "A").get("memory") or {}


def move_once(r, rate, to_node):
    """Sets A's home to to_node at rate MiB/s; returns (t_set, t_done, log lines of the move)."""
    r.write_conf(rate)
    r.sh("kill -HUP $(pgrep -xo softaffd)")
    time.sleep(2)  # the reload runs on the main loop, at most a tick later
    before = a_memory(r)
    log_before = len(r.softaffd_log().splitlines())
    t_set = r.uptime()
    r.sh("%s set mn-A --preferred %d --live" % (r.ctl, to_node))
    deadline = time.monotonic() + 120
    while True:
        m = a_memory(r)
        if m.get("moves", 0) > before.get("moves", 0) and not m.get("moving"):
            break
        if time.monotonic() > deadline:
            raise AssertionError("A's move to node %d not done in 120 s: %s" % (to_node, m))
        time.sleep(1)
    t_done = r.uptime()
    log("move to node %d at %d MiB/s done %.1f s after the set" % (to_node, rate, t_done - t_set))
    time.sleep(TAIL_S)
    lines = r.softaffd_log().splitlines()[log_before:]
    return t_set, t_done, [x for x in lines if "mn-A" in x]


def crossing(series, level):
    """When the share first reached level, interpolated between samples; None if never."""
    for (t0, s0), (t1, s1) in zip(series, series[1:]):
        if s0 < level <= s1:
            return t0 + (t1 - t0) * (level - s0) / (s1 - s0)
    return None


def external_rate(on_new):
    """MiB/s from numa_maps alone: the bytes between 10% and 90% of A on the new node, over
    the interpolated times it crossed them (the samples are ~0.6-1 s apart under TCG)."""
    if not on_new:
        return None
    total = on_new[-1][2]
    series = [(t, b / tot) for t, b, tot in on_new if tot]
    t10, t90 = crossing(series, 0.1), crossing(series, 0.9)
    if t10 is None or t90 is None or t90 <= t10:
        return None
    return {"t10": t10, "t90": t90, "mib_s": 0.8 * total / MIB / (t90 - t10)}


def status_of_a(x):
    for v in x["status"].get("vms", []):
        if v["name"] == "mn-A":
            return v.get("memory") or {}
    return {}


def cpu_between(recs, t0, t1):
    win = [x for x in recs if t0 <= x["t"] <= t1]
    if len(win) < 2:
        return None, 0
    return win[-1]["cpu_s"] - win[0]["cpu_s"], win[-1]["t"] - win[0]["t"]


def move_stats(recs, rate, to_node, t_set, t_done, lines):
    mem = [(x["t"], x["mem"].get("A", {})) for x in recs if t_set - 1 <= x["t"] <= t_done + TAIL_S]
    on_new = [(t - t_set, nb.get(to_node, 0), sum(nb.values())) for t, nb in mem if nb]
    done = [m for m in (re.search(r"done: (\d+) of (\d+) MiB moved in ([\d.]+) s", x)
                        for x in lines) if m]
    mib, secs = (float(done[-1].group(1)), float(done[-1].group(3))) if done else (None, None)
    st = [x for x in recs if x["status"] and "daemon" in x["status"] and
          t_set <= x["t"] <= t_done + 1.0]
    ticks = [(x["t"], x["status"]["daemon"]["ticks"], x["status"]["daemon"]["tick_cpu_ms"])
             for x in st]
    span = ticks[-1][0] - ticks[0][0] if len(ticks) >= 2 else 0
    cpu, cpu_span = cpu_between(recs, t_set, t_done + 1.0)
    idle, idle_span = cpu_between(recs, t_done + 2.0, t_done + TAIL_S)  # ticking, no move
    net = cpu - idle / idle_span * cpu_span if cpu is not None and idle_span else None
    gib = mib / 1024 if mib else None
    return {
        "rate_mib_s": rate, "to_node": to_node, "t_set": t_set, "t_done": t_done,
        "set_to_done_s": t_done - t_set,
        "moved_bytes_status": (status_of_a(st[-1]).get("moved_bytes_total", 0) -
                               status_of_a(st[0]).get("moved_bytes_total", 0)) if st else None,
        "logged": {"moved_mib": mib, "seconds": secs, "mib_s": mib / secs if secs else None},
        "numa_maps": external_rate(on_new),
        "share_after": on_new[-1][1] / on_new[-1][2] if on_new else None,
        "softaffd_cpu_s": cpu, "softaffd_cpu_window_s": cpu_span,
        "softaffd_idle_cpu_s_per_s": idle / idle_span if idle_span else None,
        "softaffd_cpu_s_net": net,
        "cpu_s_per_gib": cpu / gib if gib and cpu is not None else None,
        "cpu_s_per_gib_net": net / gib if gib and net is not None else None,
        "tick_cpu_ms_max": max((x[2] for x in ticks), default=None),
        "ticks": ticks[-1][1] - ticks[0][1] if ticks else 0,
        "ticks_due": span * 1000 / tm.INTERVAL_MS, "ticks_span_s": span,
        "migrate_pages_fallback": any("could not see" in x or "finds none" in x for x in lines),
        "log": lines,
        "series": [[t, b / tot if tot else 0] for t, b, tot in on_new],
    }


def softaffd_part(r, rates):
    r.sh("mkdir -p /etc/softaff /run/softaff")
    r.write_conf(rates[0])
    r.start_softaffd()
    for n in ("A", "B"):
        r.create(n)
    got = r.wait_status("A and B at home, memory measured", tm.homes(r), 240)
    r.track("A", "A")
    first = [x for x in r.softaffd_log().splitlines() if "could not see" in x or "finds none" in x]
    moves, home = [], got["A"]
    plan = list(rates) + [rates[0]]  # the first move may take the migrate_pages path
    for rate in plan:
        to = 1 - home
        moves.append((rate, to) + move_once(r, rate, to))
        home = to
    recs = r.samples()
    out = [move_stats(recs, rate, to, *rest) for rate, to, *rest in moves]
    return {"homes": got, "first_home_fallback": first, "moves": out}


def pin(r, name, cpu):
    r.sh("virsh -c qemu:///system vcpupin mn-%s 0 %d --live && "
         "virsh -c qemu:///system emulatorpin mn-%s %d --live" % (name, cpu, name, cpu))


def create_busy(r, kernel):
    """E: boots a kernel (busy vCPU), RAM preallocated while pinned to CPU 0 (node 0)."""
    xml = tm.domain_xml("E", BUSY_MIB, kernel=kernel).replace(
        "<metadata>", "<cputune><vcpupin vcpu='0' cpuset='0'/><emulatorpin cpuset='0'/>"
        "</cputune><metadata>").replace("<metadata><softaff:affinity xmlns:softaff="
                                        "'urn:softaff:domain:1' mode='soft' preferred='auto'/>"
                                        "</metadata>", "")
    r.sh("cat >/tmp/mn-E.xml <<'EOF'\n%s\nEOF\nvirsh -c qemu:///system create /tmp/mn-E.xml" % xml,
         timeout=300)


def cpu_nodes(cpus):
    """Nodes of a "/"-joined set of cpulists ("1", "0-1/1"): CPU n is on node n on this host."""
    nodes = set()
    for part in re.split(r"[/,]", cpus or ""):
        if "-" in part:
            a, b = part.split("-")
            nodes.update(range(int(a), int(b) + 1))
        elif part:
            nodes.add(int(part))
    return nodes


def numad_series(recs, t0, t_end):
    recs = [x for x in recs if t0 - 1 <= x["t"] <= t_end]
    return {lb: [[x["t"] - t0, x["mem"][lb], x["cpus"].get(lb)] for x in recs if x["mem"].get(lb)]
            for lb in ("A", "E")}


def numad_run(r, flags, seconds):
    """One numad daemon for seconds: its log, and A's and E's memory and CPUs over time."""
    t0 = r.uptime()
    r.event("numad " + flags)
    r.sh("rm -f /var/log/numad.log; nohup numad %s </dev/null >/dev/null 2>&1" % flags)
    time.sleep(seconds)
    t_end = r.uptime()
    numad_log = r.h.run("cat /var/log/numad.log", timeout=60).out
    r.sh("numad -i 0 >/dev/null 2>&1; for i in $(seq 20); do pgrep -x numad >/dev/null || "
         "exit 0; sleep 0.5; done; kill $(cat /var/run/numad.pid); true", timeout=60)
    series = numad_series(r.samples(), t0, t_end)
    return {"flags": flags, "t_start": t0, "seconds": t_end - t0, "log": numad_log,
            "series": series}


def numad_part(r, a_home, seconds):
    r.sh("kill -TERM $(pgrep -xo softaffd); for i in $(seq 60); do pgrep -x softaffd >/dev/null"
         " || exit 0; sleep 0.5; done; exit 1", timeout=60)
    kernel = r.sh("ls /boot/vmlinuz-* | head -1").strip()
    create_busy(r, kernel)
    r.track("E", "E")
    time.sleep(5)
    pin(r, "A", 1 - a_home)  # A's memory on a_home, its threads on the other node
    pin(r, "E", 1)
    out = {"version": r.sh("dpkg-query -W -f '${Version}' numad").strip(), "a_home": a_home,
           "runs": []}
    # numad's default target (-u 85) leaves a 1-vCPU guest that uses a whole CPU no 1-CPU node
    # to fit in; -u 100 lets it fit. Each run is a fresh daemon (it evaluates a process at most
    # every few minutes).
    for flags in ("-i 5 -l 7", "-i 5 -u 100 -l 7"):
        out["runs"].append(numad_run(r, flags, seconds))
    return out


def numad_summary(run):
    """numad's decisions (deduplicated, with the first time and count) and where A and E were
    at the start and the end of the run."""
    acts, start, first_act = {}, None, None
    for line in run["log"].splitlines():
        m = re.match(r"(.*? \d\d:\d\d:\d\d \d{4}): (Registering|Advising)", line)
        if m:
            wall = time.mktime(time.strptime(m.group(1), "%a %b %d %H:%M:%S %Y"))
            if m.group(2) == "Registering":
                start = wall
            elif start is not None and first_act is None:
                first_act = wall - start
        m = re.match(r"(.*? \d\d:\d\d:\d\d \d{4}): (.*)", line)
        if m and re.search(r"Advising|moved to|Skipping|Candidates|bind|Bad ", m.group(2)):
            text = re.sub(r"\d+\.\d+ seconds", "N seconds", m.group(2))
            first, n = acts.get(text, (m.group(1), 0))
            acts[text] = (first, n + 1)
    guests = {}
    for lb, s in run["series"].items():
        if not s:
            continue
        first, last = s[0], s[-1]
        guests[lb] = {"first": first[1], "first_cpus": first[2], "last": last[1],
                      "last_cpus": last[2]}
    return {"actions": ["%s (x%d, first %s)" % (k, n, t) for k, (t, n) in acts.items()],
            "first_advice_s": first_act, "guests": guests}


def fmt_nodes(nb):
    tot = sum(nb.values()) or 1
    return "%d MiB: " % (tot / MIB) + ", ".join(
        "node %s %d%%" % (k, round(100 * v / tot)) for k, v in sorted(nb.items()))


def num(v, fmt="%.1f"):
    return fmt % v if v is not None else "–"


def softaffd_table(res):
    rows = ["| move | rate_mib_s | moved (MiB) | mover's time (s) | MiB/s, mover's log | MiB/s, "
            "numa_maps 10→90% | set → done seen (s) | on new node 20 s after | softaffd CPU s "
            "/ GiB (net of idle ticks) | tick CPU max (ms) | ticks / due | path |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for i, m in enumerate(res["softaffd"]["moves"], 1):
        rows.append("| %d → node %d | %d | %s | %s | %s | %s | %.1f | %.1f%% | %s (%s) | %s | "
                    "%d / %.0f | %s |" % (
                        i, m["to_node"], m["rate_mib_s"], num(m["logged"]["moved_mib"], "%.0f"),
                        num(m["logged"]["seconds"]), num(m["logged"]["mib_s"]),
                        num((m["numa_maps"] or {}).get("mib_s")), m["set_to_done_s"],
                        100 * (m["share_after"] or 0), num(m["cpu_s_per_gib"], "%.2f"),
                        num(m["cpu_s_per_gib_net"], "%.2f"), num(m["tick_cpu_ms_max"]),
                        m["ticks"], m["ticks_due"],
                        "migrate_pages fallback" if m["migrate_pages_fallback"] else "move_pages"))
    first = res["softaffd"]["first_home_fallback"]
    if first:
        rows += ["", "First homes (before the table's moves):", ""] + ["- " + x for x in first]
    return rows


def numad_table(res):
    n = res["numad"]
    rows = ["", "numad %s on the same host: softaffd stopped; A (paused, %d MiB) with its memory "
            "on node %d and its threads pinned to CPU %d; E (%d MiB, booting a kernel: one busy "
            "vCPU) with its memory on node 0 and its threads pinned to CPU 1." % (
                n["version"], tm.GUEST_MIB["A"], n["a_home"], 1 - n["a_home"], BUSY_MIB)]
    for run in n["runs"]:
        s = run["summary"]
        rows += ["", "`numad %s`, %.0f s; its first advice %s:" % (
            run["flags"], run["seconds"], "%.0f s after it started" % s["first_advice_s"]
            if s.get("first_advice_s") is not None else "never"), "",
            "| guest | at start: memory (its threads' CPUs) | at end: memory (CPUs) |",
            "| --- | --- | --- |"]
        for lb, g in s["guests"].items():
            rows.append("| %s | %s (%s) | %s (%s) |" % (
                lb, fmt_nodes(g["first"]), g["first_cpus"], fmt_nodes(g["last"]), g["last_cpus"]))
        rows += ["", "```"] + (s["actions"] or ["(no decision logged)"]) + ["```"]
    return rows


def table(res):
    return "\n".join(softaffd_table(res) + numad_table(res)) + "\n"


def local_share(nb, cpus):
    tot = sum(nb.values()) or 1
    return sum(v for k, v in nb.items() if k in cpu_nodes(cpus)) / tot


def plot(res, d):
    png = os.path.join(d, "multinode.png")
    dat = os.path.join(d, "plot.dat")
    titles = []
    with open(dat, "w") as f:
        for m in res["softaffd"]["moves"]:
            for t, share in m["series"]:
                f.write("%.2f %.4f\n" % (t, 100 * share))
            f.write("\n\n")
            titles.append("softaffd %d MiB/s: A on its new home node %d" % (m["rate_mib_s"],
                                                                           m["to_node"]))
        for run in res["numad"]["runs"]:
            for t, nb, cpus in run["series"].get("E") or []:
                f.write("%.2f %.4f\n" % (t, 100 * local_share(nb, cpus)))
            f.write("\n\n")
            titles.append("numad %s: busy E on the nodes of its CPUs" % run["flags"])
    colours = ("#1f77b4", "#2ca02c", "#17becf", "#ff7f0e", "#d62728", "#9467bd")
    plots = ["'%s' index %d using 1:2 with linespoints pt 7 ps 0.4 lc rgb '%s' title '%s'" % (
        dat, i, colours[i % len(colours)], tt) for i, tt in enumerate(titles)]
    gp = os.path.join(d, "plot.gp")
    with open(gp, "w") as f:
        f.write("set terminal pngcairo size 1200,700 font 'sans,11'\nset output '%s'\n"
                "set title 'Guest memory locality on the 2-node test host'\n"
                "set xlabel 'seconds since softaffctl set (softaffd) / since numad started'\n"
                "set ylabel '%% of the guest memory local'\nset yrange [-2:105]\n"
                "set key center right\nset grid\nset logscale x 2\nset xrange [0.25:*]\n"
                "plot %s\n" % (png, ", ".join(plots)))
    subprocess.run(["gnuplot", gp], check=True)
    return png


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/softaff-bench-multinode")
    ap.add_argument("--rates", default="32,256")
    ap.add_argument("--reanalyze", action="store_true",
                    help="no host: recompute the numad series, table and plot from --out's "
                    "results.json and samples.txt")
    ap.add_argument("--numad-s", type=int, default=NUMAD_S, help="seconds per numad run")
    args = ap.parse_args()
    if args.reanalyze:
        return report(reanalyze(args.out), args.out)
    build = os.environ.get("SOFTAFF_BUILD_DIR")
    if os.geteuid() != 0 or not build or not os.access(os.path.join(build, "softaffd"), os.X_OK):
        sys.exit("run as root with SOFTAFF_BUILD_DIR set to a build dir with softaffd")
    rates = [int(x) for x in args.rates.split(",")]
    build = os.path.abspath(build)
    os.makedirs(args.out, exist_ok=True)
    tm.GUEST_MIB["E"] = BUSY_MIB
    res = {}
    with mnhost.Host(build_dir=build) as h:
        r = Bench(h, build, args.out)
        try:
            h.check("bash %s/contrib/start-libvirt.sh" % mnhost.SRC_ROOT, timeout=300)
            r.sampler_start()
            res["softaffd"] = softaffd_part(r, rates)
            res["numad"] = numad_part(r, res["softaffd"]["moves"][-1]["to_node"], args.numad_s)
            for run in res["numad"]["runs"]:
                run["summary"] = numad_summary(run)
        finally:
            h.run("touch /tmp/bench.stop /tmp/poll.stop", timeout=30)
            res["softaffd_log"] = h.run("cat /var/log/softaffd.log", timeout=60).out
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump(res, f, indent=1)
    report(res, args.out)


def reanalyze(d):
    with open(os.path.join(d, "results.json")) as f:
        res = json.load(f)
    with open(os.path.join(d, "samples.txt")) as f:
        recs = parse_samples(f.read())
    for run in res["numad"]["runs"]:
        run["series"] = numad_series(recs, run["t_start"], run["t_start"] + run["seconds"])
        run["summary"] = numad_summary(run)
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res


def report(res, d):
    with open(os.path.join(d, "table.md"), "w") as f:
        f.write(table(res))
    png = plot(res, d)
    print(table(res))
    log("results in %s; plot %s" % (d, png))


if __name__ == "__main__":
    main()
