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
NUMAD_S = 180
# Every 0.5 s until /tmp/bench.stop: "@@ uptime utime stime" (softaffd's clock ticks), one
# "## LABEL node:bytes ..." per guest (anonymous memory, as test-memory's node_bytes counts it),
# then softaffd's status JSON while it runs. $1: "LABEL:PID ..." (re-read each time from
# /tmp/bench.pids so that guests started later join).
SAMPLER = r"""rm -f /tmp/bench.stop
while [ ! -e /tmp/bench.stop ]; do
    read -r up _ </proc/uptime
    sa=$(pgrep -xo softaffd)
    stat=$(cat /proc/$sa/stat 2>/dev/null)
    set -- ${stat##*) }
    echo "@@ $up ${12:-0} ${13:-0}"
    for lp in $(cat /tmp/bench.pids 2>/dev/null); do
        printf '## %s ' "${lp%%:*}"
        awk '/anon=/ && !/file=/ && !/stack/ {
            kb = 4
            if (match($0, /kernelpagesize_kB=[0-9]+/)) kb = substr($0, RSTART + 18, RLENGTH - 18)
            for (i = 1; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {
                split(substr($i, 2), a, "="); s[a[1]] += a[2] * kb * 1024 }
        } END { for (n in s) printf "%s:%d ", n, s[n]; printf "\n" }' /proc/${lp#*:}/numa_maps
    done
    [ -n "$sa" ] && CTL status --json 2>/dev/null | tr -d '\n' && echo
    sleep 0.5
done >/tmp/bench.out 2>/tmp/bench.err
"""


def log(msg):
    mnhost.log("bench: " + msg)


class Bench(tm.Run):
    def __init__(self, h, build):
        super().__init__(h, build)
        self.pids = {}

    def sampler_start(self):
        self.sh("cat >/tmp/bench.sh <<'EOF'\n%sEOF\nnohup bash /tmp/bench.sh >/dev/null 2>&1 &" %
                SAMPLER.replace("CTL", self.ctl))

    def track(self, label, name):
        self.pids[label] = self.qemu_pid(name)
        self.sh("echo '%s' >/tmp/bench.pids" % " ".join("%s:%d" % kv for kv in self.pids.items()))

    def samples(self):
        """[{t, cpu_s, mem: {label: {node: bytes}}, status}] from the sampler's file."""
        out = self.sh("cat /tmp/bench.out", timeout=300)
        recs = []
        for chunk in out.split("@@ ")[1:]:
            lines = chunk.split("\n")
            f = lines[0].split()
            try:
                rec = {"t": float(f[0]), "cpu_s": (int(f[1]) + int(f[2])) / 100.0, "mem": {},
                       "status": None}
            except (ValueError, IndexError):
                continue
            for line in lines[1:]:
                if line.startswith("## "):
                    p = line[3:].split()
                    rec["mem"][p[0]] = {int(n): int(b) for n, b in (x.split(":") for x in p[1:])}
                elif line.startswith("{"):
                    try:
                        rec["status"] = json.loads(line)
                    except ValueError:
                        pass  # the last record may be half written
            recs.append(rec)
        return recs

    def softaffd_log(self):
        return self.sh("cat /var/log/softaffd.log", timeout=120)

    def start_softaffd(self):
        # test-memory's start without its 1 s poller: the sampler above does that job.
        self.sh("nohup %s/softaffd --foreground >/var/log/softaffd.log 2>&1 &" % self.build)
        self.sh("for i in $(seq 120); do [ -S /run/softaff/softaffd.sock ] && exit 0; "
                "pgrep -x softaffd >/dev/null || break; sleep 0.5; done; "
                "cat /var/log/softaffd.log; exit 1", timeout=90)

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


def move_stats(recs, rate, to_node, t_set, t_done, lines):
    win = [x for x in recs if t_set <= x["t"] <= t_done + 1.0]
    st = [x for x in win if x["status"]]
    mem = [(x["t"], x["mem"].get("A", {})) for x in recs if t_set - 1 <= x["t"] <= t_done + TAIL_S]
    on_new = [(t, nb.get(to_node, 0), sum(nb.values())) for t, nb in mem if nb]
    # External view: first and last sample where A's bytes on the new node grew by > 1 MiB.
    grew = [i for i in range(1, len(on_new)) if on_new[i][1] - on_new[i - 1][1] > MIB]
    ext = None
    if grew:
        i0, i1 = grew[0] - 1, grew[-1]
        dt = on_new[i1][0] - on_new[i0][0]
        ext = {"bytes": on_new[i1][1] - on_new[i0][1], "seconds": dt,
               "mib_s": (on_new[i1][1] - on_new[i0][1]) / MIB / dt if dt > 0 else None}

    def am(x):
        for v in x["status"].get("vms", []):
            if v["name"] == "mn-A":
                return v.get("memory") or {}
        return {}
    moved = am(st[-1]).get("moved_bytes_total", 0) - am(st[0]).get("moved_bytes_total", 0) \
        if len(st) >= 2 else 0
    done = [re.search(r"(\d+) of (\d+) MiB moved in ([\d.]+) s", x) for x in lines]
    done = [m for m in done if m]
    ticks = [(x["t"], x["status"]["daemon"]["ticks"], x["status"]["daemon"]["tick_cpu_ms"])
             for x in st if "daemon" in x["status"]]
    span = ticks[-1][0] - ticks[0][0] if len(ticks) >= 2 else 0
    cpu = win[-1]["cpu_s"] - win[0]["cpu_s"] if len(win) >= 2 else 0
    logged_mib, logged_s = (float(done[-1].group(1)), float(done[-1].group(3))) if done else \
        (None, None)
    return {
        "rate_mib_s": rate, "to_node": to_node, "t_set": t_set, "t_done": t_done,
        "set_to_done_s": t_done - t_set,
        "moved_bytes_status": moved,
        "logged": {"moved_mib": logged_mib, "seconds": logged_s,
                   "mib_s": logged_mib / logged_s if done and logged_s > 0 else None},
        "numa_maps": ext,
        "share_after": on_new[-1][1] / on_new[-1][2] if on_new else None,
        "softaffd_cpu_s": cpu,
        "cpu_s_per_gib": cpu / (moved / (1 << 30)) if moved else None,
        "tick_cpu_ms_max": max((x[2] for x in ticks), default=None),
        "ticks": ticks[-1][1] - ticks[0][1] if ticks else 0,
        "ticks_due": span * 1000 / tm.INTERVAL_MS,
        "migrate_pages_fallback": any("finds none" in x for x in lines),
        "log": lines,
        "series": [[t - t_set, b / tot if tot else 0] for t, b, tot in on_new],
    }


def softaffd_part(r, rates):
    r.sh("mkdir -p /etc/softaff /run/softaff")
    r.write_conf(rates[0])
    r.start_softaffd()
    for n in ("A", "B"):
        r.create(n)
    got = r.wait_status("A and B at home, memory measured", tm.homes(r), 240)
    r.track("A", "A")
    r.track("B", "B")
    first = [x for x in r.softaffd_log().splitlines() if "finds none" in x]
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


def numad_part(r, a_home):
    r.sh("kill -TERM $(pgrep -xo softaffd); for i in $(seq 60); do pgrep -x softaffd >/dev/null"
         " || exit 0; sleep 0.5; done; exit 1", timeout=60)
    kernel = r.sh("ls /boot/vmlinuz-* | head -1").strip()
    create_busy(r, kernel)
    r.track("E", "E")
    time.sleep(5)
    pin(r, "A", 1 - a_home)  # A's memory on a_home, its threads on the other node
    pin(r, "E", 1)
    version = r.sh("dpkg-query -W numad").strip()
    r.event("numad started")
    t0 = r.uptime()
    r.sh("rm -f /var/log/numad.log; nohup numad -i 5 -l 7 </dev/null >/dev/null 2>&1")
    time.sleep(NUMAD_S)
    t_end = r.uptime()
    numad_log = r.h.run("cat /var/log/numad.log", timeout=60).out
    r.sh("numad -i 0 >/dev/null 2>&1; sleep 2; p=$(cat /var/run/numad.pid 2>/dev/null); "
         "[ -n \"$p\" ] && kill $p 2>/dev/null; true")
    affinity = {n: r.sh("grep Cpus_allowed_list /proc/%d/task/*/status | sort -u -k2 | head -5"
                        % r.pids[n]) for n in ("A", "E")}
    recs = [x for x in r.samples() if x["t"] >= t0 - 1]
    series = {}
    for lb in ("A", "E"):
        series[lb] = [[x["t"] - t0, x["mem"][lb]] for x in recs if x["mem"].get(lb)]
    return {"version": version, "t_start": t0, "seconds": t_end - t0, "a_home": a_home,
            "log": numad_log, "affinity_after": affinity, "series": series}


def numad_summary(n):
    """When numad acted (log lines mentioning our PIDs' moves) and where A and E are after."""
    acts = [x for x in n["log"].splitlines()
            if re.search(r"(?i)bind|migrat|moving|moved|advis", x) ]
    out = {}
    for lb in ("A", "E"):
        s = n["series"][lb]
        if not s:
            continue
        first, last = s[0][1], s[-1][1]
        moved_at = next((t for t, nb in s if nb != first and
                         abs(nb.get(0, 0) - first.get(0, 0)) > 4 * MIB), None)
        out[lb] = {"first": first, "last": last, "first_change_s": moved_at}
    return {"actions": acts[:40], "guests": out}


def fmt_nodes(nb):
    tot = sum(nb.values()) or 1
    return ", ".join("node %d %d%%" % (k, round(100 * v / tot)) for k, v in sorted(nb.items()))


def table(res):
    rows = ["| move | size (MiB) | set → done (s) | mover's log: MiB/s | numa_maps: MiB/s | "
            "configured MiB/s | share on new node after | softaffd CPU s / GiB | "
            "tick CPU max (ms) | ticks / due during move | path |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for i, m in enumerate(res["softaffd"]["moves"], 1):
        ext = m["numa_maps"] or {}
        rows.append("| %d → node %d | %.0f | %.1f | %s | %s | %d | %.1f%% | %s | %s | %d / %.0f |"
                    " %s |" % (
                        i, m["to_node"], m["moved_bytes_status"] / MIB, m["set_to_done_s"],
                        "%.1f" % m["logged"]["mib_s"] if m["logged"]["mib_s"] else "–",
                        "%.1f" % ext["mib_s"] if ext.get("mib_s") else "–", m["rate_mib_s"],
                        100 * (m["share_after"] or 0),
                        "%.2f" % m["cpu_s_per_gib"] if m["cpu_s_per_gib"] is not None else "–",
                        "%.1f" % m["tick_cpu_ms_max"] if m["tick_cpu_ms_max"] is not None else "–",
                        m["ticks"], m["ticks_due"],
                        "migrate_pages fallback" if m["migrate_pages_fallback"] else "move_pages"))
    n, s = res["numad"], res["numad_summary"]
    rows += ["", "numad (%s, `numad -i 5`, %.0f s; A paused %d MiB, memory on node %d, threads "
             "pinned to CPU %d; E %d MiB booting a kernel, memory on node 0, threads pinned to "
             "CPU 1):" % (n["version"], n["seconds"], tm.GUEST_MIB["A"], n["a_home"],
                          1 - n["a_home"], BUSY_MIB), "",
             "| guest | memory at numad start | after %.0f s | first change (s) |" % n["seconds"],
             "| --- | --- | --- | ---: |"]
    for lb, g in s["guests"].items():
        rows.append("| %s | %s | %s | %s |" % (lb, fmt_nodes(g["first"]), fmt_nodes(g["last"]),
                                              "%.0f" % g["first_change_s"]
                                              if g["first_change_s"] is not None else "none"))
    rows += ["", "numad's log (actions):", "", "```"] + (s["actions"] or ["(none)"]) + ["```"]
    return "\n".join(rows) + "\n"


def plot(res, d):
    png = os.path.join(d, "multinode.png")
    dat = os.path.join(d, "plot.dat")
    titles = []
    with open(dat, "w") as f:
        for m in res["softaffd"]["moves"]:
            for t, share in m["series"]:
                f.write("%.2f %.4f\n" % (t, 100 * share))
            f.write("\n\n")
            titles.append("softaffd, %d MiB/s, to node %d" % (m["rate_mib_s"], m["to_node"]))
        e = res["numad"]["series"].get("E") or []
        for t, nb in e:
            tot = sum(nb.values()) or 1
            f.write("%.2f %.4f\n" % (t, 100 * nb.get(1, 0) / tot))
        f.write("\n\n")
        titles.append("numad, busy E (vCPU on node 1), share on node 1")
    plots = ["'%s' index %d using 1:2 with linespoints pt 7 ps 0.4 title '%s'" % (dat, i, tt)
             for i, tt in enumerate(titles)]
    gp = os.path.join(d, "plot.gp")
    with open(gp, "w") as f:
        f.write("set terminal pngcairo size 1200,700 font 'sans,11'\nset output '%s'\n"
                "set xlabel 'seconds since softaffctl set (softaffd) / numad start'\n"
                "set ylabel '%% of the guest memory on its new node'\nset yrange [0:105]\n"
                "set key bottom right\nset grid\nset xrange [-1:*]\nplot %s\n"
                % (png, ", ".join(plots)))
    subprocess.run(["gnuplot", gp], check=True)
    return png


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="/tmp/softaff-bench-multinode")
    ap.add_argument("--rates", default="32,256")
    args = ap.parse_args()
    build = os.environ.get("SOFTAFF_BUILD_DIR")
    if os.geteuid() != 0 or not build or not os.access(os.path.join(build, "softaffd"), os.X_OK):
        sys.exit("run as root with SOFTAFF_BUILD_DIR set to a build dir with softaffd")
    rates = [int(x) for x in args.rates.split(",")]
    build = os.path.abspath(build)
    os.makedirs(args.out, exist_ok=True)
    tm.GUEST_MIB["E"] = BUSY_MIB
    res = {}
    with mnhost.Host(build_dir=build) as h:
        r = Bench(h, build)
        try:
            h.check("bash %s/contrib/start-libvirt.sh" % mnhost.SRC_ROOT, timeout=300)
            r.sampler_start()
            res["softaffd"] = softaffd_part(r, rates)
            res["numad"] = numad_part(r, res["softaffd"]["moves"][-1]["to_node"])
            res["numad_summary"] = numad_summary(res["numad"])
        finally:
            h.run("touch /tmp/bench.stop /tmp/poll.stop", timeout=30)
            res["softaffd_log"] = h.run("cat /var/log/softaffd.log", timeout=60).out
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump(res, f, indent=1)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table(res))
    png = plot(res, args.out)
    print(table(res))
    log("results in %s; plot %s" % (args.out, png))


if __name__ == "__main__":
    main()
