#!/usr/bin/env python3
"""Benchmark for issue 24 (soft affinity in the scheduler), not a test: in the 2-node test host
booting Debian unstable's kernel (7.2.x, sched_ext; nodes 0 and 1, one CPU each), side by side in
one run, four configurations:
  none               no softaffd, nothing pinned (every vCPU thread on 0-1);
  hard               A's vCPU threads pinned to CPU 1, B's to CPU 0 (sched_setaffinity);
  softaff-pin        softaffd, [actuation] mode=pin, [sensing] mode=auto (BPF events);
  softaff-sched_ext  softaffd, [actuation] mode=sched_ext.
In every configuration each QEMU's emulator thread lives at home (<emulatorpin> in the domain
XML: A on CPU 1, B on CPU 0), so a QEMU main thread's CPU never reads as an owner's load.

Guests (mnsensing.py's: the host's own kernel, no disk, idle=poll, so every vCPU spins in the
guest's idle loop for good once booted): A (2 vCPUs, soft, home node 1) and B (1 vCPU, soft, home
node 0). Both are booted first and measured only once all three vCPUs spin; then B is suspended
(virsh suspend: a truly idle owner) except in the owner phase.
The spiky load: A's guest spins all the time, so its demand is switched from the host by stopping
and continuing its whole QEMU process (SIGSTOP / SIGCONT: a stopped process has no runnable
thread, so A's vCPUs are exactly idle while OFF and exactly busy while ON). The driver is one bash
loop of builtins (kill, read -t on a FIFO as the sleep), no process per edge, on CPU 1 (A's home),
at a real-time priority (SCHED_FIFO) in every configuration, so that the pattern is the same in
all of them. Its edge log times each ON period from just before its CONT to just after its STOP.
This needs nothing inside the guest (no load generator, no agent), and 20/180 ms is within a shell
loop's timing; virsh suspend/resume would cost tens to hundreds of ms of CPU per edge under TCG.
softaffd reads vCPU times from /proc and pins without QEMU's monitor, so a stopped QEMU does not
hold it up.

Phases per configuration:
  (a) spiky: A ON/OFF at 300/2700, 100/900, 20/180 ms with B suspended: A's vCPU run time (CPU
      seconds, from schedstat) per second of ON inside the window (the driver logs its edges),
      ratio to none's; results.json also keeps it against ON counted from after each CONT
      (run_per_on_after, the measure before 2026-12-07 22:00 UTC);
  (b)+(c) owner / both busy: B resumed (steady spinner, the owner of node 0) while A spins: B's
      vCPU run time (its throughput) against hard's; B's run delay per timeslice, per sample
      interval (schedstat wait-ns delta / timeslices delta), p50 / p99 over the intervals and the
      window's mean; then TRACE_S (5) s of the kernel's sched_wakeup / sched_switch events
      (ftrace): B's delay per wakeup (wakeup to running) and per preemption (switched out
      runnable to running), p50 / p99 over the events; each VM's share of sampled vCPU
      positions on its home CPU (the thread's last CPU, stat field 39), and for sched_ext the
      scheduler's own home/away run-time counters;
  (d) affinity changes: each sample reads every vCPU thread's Cpus_allowed_list; a VM's change is
      a sample in which one of its vCPU sets differs from the sample before, per VM per 10 s over
      all phases (and softaffd's own "changes" counter from status at the phases' ends);
  (e) softaffd's CPU: utime + stime of /proc/PID/stat over the measured windows, % of one CPU.
softaffd's CPU per tick (status tick_cpu_ms) is kept at each window's edges in results.json.
All sampling is ONE bash loop of builtins per window (read from /proc, one line out per thread
per sample, every 0.5 s), started with taskset -c 1: on CPU 0 the polls read as the owners' load
(mnsensing.py). Status is read only at a window's edges, from CPU 1.

Prints a Markdown table and ratios against none and hard, writes results.json and table.md to
--out. Root, SOFTAFF_BUILD_DIR with softaffd and softaffctl, the host image cached.
  SOFTAFF_BUILD_DIR=build SOFTAFF_MN_NO_BUILD=1 flock /run/softaff-nested.lock \\
      bench/run-sched.py [--quick] [--seconds 30] [--rounds N] [--out DIR]
          [--configs none,hard,...] [--patterns 300/2700,...] [--no-owner]
--quick: one pattern (100/900) and 12-s windows (to debug); a full run is about 15-20 min.
--patterns runs only the spiky patterns named; --no-owner leaves out the owner phase (hard is then
not needed in --configs). With both, one pattern can be measured in many short rounds of
alternating order, none beside one configuration, so that the shared machine's drift over
minutes falls on both alike.
--seconds is at least the slowest pattern's period and --rounds at least 1; both are checked,
with --configs, --patterns and the build, before the host boots.
SOFTAFF_MN_TCG_THREAD=multi runs the host with multi-threaded TCG (default single, as
test-sched-ext.py: enabling sched_ext under multi-threaded TCG oopsed 2 runs in 8). Any static-key
toggle can end such a host (int3 oops): with it, use --configs none,hard,softaff-sched_ext
(softaff-pin's BPF sensor attaches and detaches tracepoints), and expect some runs to die
(docs/benchmarks.md section 14, multi-threaded TCG)."""

import argparse
import base64
import gzip
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "multinode"))
import mnhost  # noqa: E402
import mnsensing as S  # noqa: E402
from mnsensing import cpulist  # noqa: E402

CONFIGS = ("none", "hard", "softaff-pin", "softaff-sched_ext")
PATTERNS = ((300, 2700), (100, 900), (20, 180))
HOME = {"A": 1, "B": 0}

# softaffd: the sched_ext tests' config ([sensing] at its default, auto: BPF events).
CONF = S.SCHED_CONF

# The sampler: one bash loop of builtins. Per sample "@ uptime", then per vCPU thread
# "v VM tid run_ns wait_ns slices last_cpu allowed", then "d utime stime" for softaffd.
POLL = r"""read -r pa </run/libvirt/qemu/mn-A.pid
read -r pb </run/libvirt/qemu/mn-B.pid
sd=$1
rm -f /tmp/poll.fifo; mkfifo /tmp/poll.fifo; exec 3<>/tmp/poll.fifo
while :; do
    read -r up _ </proc/uptime
    echo "@ $up"
    for vm in A B; do
        if [ $vm = A ]; then p=$pa; else p=$pb; fi
        for t in /proc/$p/task/*; do
            read -r c <$t/comm
            case "$c" in "CPU "*)
                read -r r w n <$t/schedstat
                read -r st <$t/stat
                set -- ${st##*) }
                cpu=${37}
                aff=-
                while read -r k v; do
                    [ "$k" = Cpus_allowed_list: ] && { aff=$v; break; }
                done <$t/status
                echo "v $vm ${t##*/} $r $w $n $cpu $aff";;
            esac
        done
    done
    if [ -n "$sd" ] && read -r st <"/proc/$sd/stat"; then
        set -- ${st##*) }
        echo "d ${12} ${13}"
    fi
    read -t 0.5 -u 3
done
"""

# The spiky driver: A's QEMU continued for ON seconds, stopped for OFF seconds, for good. Each
# edge goes to /tmp/spike.edges ("C" continued, "S" stopped) with the host's uptime and the
# wall clock (microseconds) just before and just after the kill: a window holds a whole number
# of periods only by chance, and the driver's sleeps stretch with the host's load, so A's run
# time is set against the ON time the window really held. That time runs from the moment the
# CONT begins to the moment the STOP has returned: a stamp taken after the CONT would leave out
# the time the woken vCPUs spend running before the driver gets its CPU back to stamp it.
# The driver runs at a real-time priority in every configuration, so that the pattern is the
# same in all of them: a fair driver on CPU 1 waits its turn behind A's woken vCPUs under none and
# pin (ON phases of 35 ms on average at 20/180 under none, 2026-12-07) but never behind threads
# of the sched_ext class, which ranks below the fair one (30 ms).
SPIKE_RT = 10
SPIKE = r"""read -r p </run/libvirt/qemu/mn-A.pid
rm -f /tmp/spike.fifo; mkfifo /tmp/spike.fifo; exec 3<>/tmp/spike.fifo
exec 4>/tmp/spike.edges
trap 'kill -CONT $p; exit 0' TERM
while :; do
    b=$EPOCHREALTIME; kill -CONT $p; a=$EPOCHREALTIME
    read -r up _ </proc/uptime; echo "C $up $b $a" >&4; read -t $1 -u 3
    b=$EPOCHREALTIME; kill -STOP $p; a=$EPOCHREALTIME
    read -r up _ </proc/uptime; echo "S $up $b $a" >&4; read -t $2 -u 3
done
"""

# Delay per wakeup, by the kernel's own events: after the owner window, TRACE_S seconds of
# ftrace (sched_wakeup, sched_switch) in the host's trace buffer, read once at the end. The
# tracing costs CPU in the TCG host, so the run figures come from the untraced window before.
TRACE_S = 5
TRACE = "/sys/kernel/tracing"
TRACE_ON = ("mountpoint -q {t} || mount -t tracefs nodev {t}; echo 0 >{t}/tracing_on; "
            "echo >{t}/trace; echo 16384 >{t}/buffer_size_kb; "
            "for e in sched_switch sched_wakeup; do echo 1 >{t}/events/sched/$e/enable; done; "
            "echo 1 >{t}/tracing_on").format(t=TRACE)
TRACE_OFF = ("echo 0 >{t}/tracing_on; "
             "for e in sched_switch sched_wakeup; do echo 0 >{t}/events/sched/$e/enable; done; "
             "gzip -c {t}/trace | base64 -w0; echo >{t}/trace").format(t=TRACE)
SWITCH = re.compile(r"\[(\d+)\].*?\s([\d.]+): sched_switch: prev_comm=.*? prev_pid=(\d+) "
                    r"prev_prio=-?\d+ prev_state=(\S+) ==> next_comm=.*? next_pid=(\d+)")
WAKEUP = re.compile(r"\s([\d.]+): sched_wakeup: comm=.*? pid=(\d+) ")


def wakeup_delays(text, tids):
    """From a trace: per thread of tids, the delays (ms) from each wakeup (sched_wakeup) to its
    next switch in, and from each preemption (switched out still runnable) to its next switch
    in; and the seconds traced."""
    since, kind = {}, {}
    out = {t: {"wakeup": [], "preempted": []} for t in tids}
    first = last = None
    for line in text.splitlines():
        m = SWITCH.search(line)
        if m:
            ts = float(m.group(2))
            first = ts if first is None else first
            last = ts
            prev, state, nxt = int(m.group(3)), m.group(4), int(m.group(5))
            if prev in out and state.startswith("R"):
                since[prev], kind[prev] = ts, "preempted"
            if nxt in out and nxt in since:
                out[nxt][kind.pop(nxt)].append((ts - since.pop(nxt)) * 1000)
            continue
        m = WAKEUP.search(line)
        if m:
            pid = int(m.group(2))
            if pid in out and pid not in since:
                since[pid], kind[pid] = float(m.group(1)), "wakeup"
    return out, (last - first) if first is not None else 0.0


def delay_figures(xs):
    return {"n": len(xs), "p50_ms": pct(xs, 50), "p99_ms": pct(xs, 99),
            "max_ms": max(xs) if xs else float("nan")}


def log(msg):
    mnhost.log(msg)


def domain_xml(name, vcpus, home, kernel):
    xml = S.domain_xml(name, vcpus, home, "soft", kernel)
    return xml.replace("</vcpu>", "</vcpu><cputune><emulatorpin cpuset='%d'/></cputune>" % home, 1)


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def parse_poll(out):
    """[(uptime, {tid: (vm, run, wait, slices, cpu, allowed)}, softaffd ticks or None)]"""
    recs = []
    for line in out.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "@":
            recs.append([float(f[1]), {}, None])
        elif f[0] == "v" and recs and len(f) >= 8:
            recs[-1][1][int(f[2])] = (f[1], int(f[3]), int(f[4]), int(f[5]), int(f[6]),
                                      frozenset(cpulist(f[7])))
        elif f[0] == "d" and recs and len(f) >= 3:
            recs[-1][2] = int(f[1]) + int(f[2])
    return recs


def on_seconds(edges_text, t0, t1, bracket=True):
    """The ON time the spike driver's edge log ("C|S <uptime> <wall before> <wall after>") puts
    inside [t0, t1] (uptime), and the number of ON periods that overlap it. An ON period runs
    from just before its CONT to just after its STOP (bracket), or, with bracket=False, from just
    after its CONT to just after its STOP (the measure before). The wall-clock stamps are put on
    the uptime scale by their median offset from the uptime read just after them (/proc/uptime
    has 10-ms steps: half a step is added back). A line cut off by the driver's end is skipped."""
    edges = []
    for line in edges_text.splitlines():
        f = line.split()
        if len(f) != 4 or f[0] not in ("C", "S"):
            continue
        try:
            edges.append((f[0], float(f[1]), float(f[2]), float(f[3])))
        except ValueError:
            continue
    if not edges:
        return 0.0, 0
    offsets = sorted(up - after for _, up, _, after in edges)
    off = offsets[len(offsets) // 2] + 0.005
    total, n, since = 0.0, 0, None
    for kind, _, before, after in edges:
        t = (before if kind == "C" and bracket else after) + off
        if kind == "C":
            since = t
        elif since is not None:
            o = min(t, t1) - max(since, t0)
            if o > 0:
                total, n = total + o, n + 1
            since = None
    if since is not None and t1 > max(since, t0):
        total, n = total + t1 - max(since, t0), n + 1
    return total, n


def spiky_run(w):
    """A's run time per second of ON in a spiky window."""
    return w["A"]["run_per_on"]


def analyse(recs):
    """The window's figures from the sampler's records."""
    # The sampler is killed at the window's end, maybe in the middle of a record: only records
    # with every vCPU thread count (and softaffd's CPU from the first and last that have it).
    full = max((len(r[1]) for r in recs), default=0)
    sd = [r for r in recs if r[2] is not None]
    recs = [r for r in recs if r[1] and len(r[1]) == full]
    if len(recs) < 3:
        raise AssertionError("too few samples in the window: %d" % len(recs))
    a, b = recs[0], recs[-1]
    secs = b[0] - a[0]
    res = {"seconds": secs, "samples": len(recs), "span": [a[0], b[0]]}
    for vm in ("A", "B"):
        tids = [t for t, v in b[1].items() if v[0] == vm and t in a[1]]
        run = sum(b[1][t][1] - a[1][t][1] for t in tids) / 1e9 / secs
        delays, home_n, n = [], 0, 0
        for x, y in zip(recs, recs[1:]):
            for t in tids:
                if t in x[1] and t in y[1]:
                    dw = y[1][t][2] - x[1][t][2]
                    dn = y[1][t][3] - x[1][t][3]
                    if dn > 0:
                        delays.append(dw / dn / 1e6)
        for r in recs:
            for t in tids:
                if t in r[1]:
                    n += 1
                    home_n += r[1][t][4] == HOME[vm]
        changes = 0
        for x, y in zip(recs, recs[1:]):
            if any(t in x[1] and t in y[1] and x[1][t][5] != y[1][t][5] for t in tids):
                changes += 1
        dwait = sum(b[1][t][2] - a[1][t][2] for t in tids)
        dslices = sum(b[1][t][3] - a[1][t][3] for t in tids)
        res[vm] = {"vcpus": len(tids), "run": run, "delay_p50_ms": pct(delays, 50),
                   "delay_p99_ms": pct(delays, 99),
                   "delay_mean_ms": dwait / dslices / 1e6 if dslices else float("nan"),
                   "home_share_sampled": home_n / n if n else float("nan"),
                   "changes": changes,
                   "allowed_last": sorted(sorted(b[1][t][5]) for t in tids)}
    if len(sd) >= 2 and sd[-1][0] > sd[0][0]:
        res["softaffd_cpu"] = (sd[-1][2] - sd[0][2]) / os.sysconf("SC_CLK_TCK") / (
            sd[-1][0] - sd[0][0])
    return res


class Bench:
    def __init__(self, h, build, quick, seconds, patterns, owner=True):
        self.h, self.build, self.quick, self.seconds = h, build, quick, seconds
        self.patterns, self.with_owner = patterns, owner
        self.ctl = build + "/ctl/softaffctl"
        self.sd = None
        self.kernel = None
        self.tids = {}

    def sh(self, cmd, timeout=120):
        return self.h.check(cmd, timeout=timeout)

    def setup(self):
        self.sh("bash %s/contrib/start-libvirt.sh" % mnhost.SRC_ROOT, timeout=300)
        self.kernel = self.sh("ls /boot/vmlinuz-* | head -1").strip()
        self.sh("cat >/tmp/poll.sh <<'EOF'\n%sEOF\ncat >/tmp/spike.sh <<'EOF'\n%sEOF" % (
            POLL, SPIKE))
        for name, vcpus in (("B", 1), ("A", 2)):
            xml = domain_xml(name, vcpus, HOME[name], self.kernel)
            self.sh("cat >/tmp/mn-%s.xml <<'EOF'\n%s\nEOF\nvirsh -c qemu:///system create "
                    "/tmp/mn-%s.xml" % (name, xml, name), timeout=300)
        # Both guests boot; measured only once all three vCPUs spin.
        t0 = time.monotonic()
        prev = None
        while True:
            recs = parse_poll(self.sample_once())
            cur = recs[0] if recs else None
            if prev and cur:
                runs = {t: (cur[1][t][1] - prev[1][t][1]) / 1e9 / (cur[0] - prev[0])
                        for t in cur[1] if t in prev[1]}
                if len(runs) == 3 and min(runs.values()) > 0.2:
                    log("all 3 vCPUs spin (%s) after %.0f s" % (
                        ", ".join("%.2f" % r for r in runs.values()), time.monotonic() - t0))
                    break
            if time.monotonic() - t0 > 600:
                raise AssertionError("the guests' vCPUs do not all spin after 600 s")
            prev = cur
            time.sleep(5)
        for t, v in cur[1].items():
            self.tids.setdefault(v[0], []).append(t)
        log("vCPU threads: %s" % self.tids)
        self.sh("virsh -c qemu:///system suspend mn-B >/dev/null")

    def sample_once(self):
        # one sample: the loop's first iteration, killed before its sleep is over
        return self.sh("taskset -c 1 timeout 2 bash /tmp/poll.sh; true", timeout=60)

    def set_affinity(self, cpus):
        """cpus: {"A": "1", "B": "0"} or None for 0-1 everywhere."""
        cmds = []
        for vm, tids in self.tids.items():
            for t in tids:
                cmds.append("taskset -pc %s %d >/dev/null" % (cpus[vm] if cpus else "0-1", t))
        self.sh("; ".join(cmds))

    def status(self):
        if not self.sd:
            return None
        out = self.h.run("taskset -c 1 %s status --json" % self.ctl, timeout=60)
        try:
            return json.loads(out.out)
        except ValueError:
            return None

    def window(self, seconds):
        """Runs the sampler for seconds; returns its figures, status and log counts at the
        edges."""
        st0 = self.status()
        lines0 = self.loglines()
        self.sh("nohup taskset -c 1 bash /tmp/poll.sh %s >/tmp/poll.log 2>&1 & "
                "echo $! >/tmp/poll.pid" % (self.sd or ""))
        time.sleep(seconds)
        out = self.sh("kill $(cat /tmp/poll.pid); sleep 0.2; cat /tmp/poll.log", timeout=60)
        res = analyse(parse_poll(out))
        lines1 = self.loglines()
        st1 = self.status()
        res["status"] = {"start": vm_summary(st0), "end": vm_summary(st1)}
        if lines0 is not None and lines1 is not None:
            res["pin_log_lines"] = lines1 - lines0
        return res

    def loglines(self):
        if not self.sd:
            return None
        out = self.h.run("grep -cE 'mn-[AB]: (burst onto|retreat from|home)' "
                         "/var/log/softaffd.log", timeout=30).out.strip()
        try:
            return int(out.split()[0])
        except (ValueError, IndexError):
            return None

    def spiky(self, on, off, seconds):
        self.sh("nohup taskset -c 1 chrt -f %d bash /tmp/spike.sh %.3f %.3f >/dev/null 2>&1 & "
                "echo $! >/tmp/spike.pid" % (SPIKE_RT, on / 1000.0, off / 1000.0))
        try:
            time.sleep(2)
            res = self.window(seconds)
        finally:
            self.sh("kill $(cat /tmp/spike.pid); sleep 0.3; "
                    "kill -CONT $(cat /run/libvirt/qemu/mn-A.pid)")
        edges = self.sh("cat /tmp/spike.edges", timeout=60)
        on_s, periods = on_seconds(edges, *res["span"])
        if on_s <= 0:
            raise AssertionError(
                "no ON time in the spiky window %.2f-%.2f s (uptime): /tmp/spike.edges has %d "
                "lines, the last %r" % (res["span"][0], res["span"][1], len(edges.splitlines()),
                                        edges.splitlines()[-1:]))
        res["on_seconds"], res["on_periods"] = on_s, periods
        res["A"]["run_per_on"] = res["A"]["run"] * res["seconds"] / on_s
        # The same window against the stamps after each CONT (the measure before this one).
        on_after = on_seconds(edges, *res["span"], bracket=False)[0]
        res["on_seconds_after"] = on_after
        res["A"]["run_per_on_after"] = res["A"]["run"] * res["seconds"] / on_after if on_after > 0 else None
        return res

    def owner(self, seconds):
        self.sh("virsh -c qemu:///system resume mn-B >/dev/null")
        try:
            time.sleep(3)
            res = self.window(seconds)
            res["traced"] = self.trace(TRACE_S)
            return res
        finally:
            self.sh("virsh -c qemu:///system suspend mn-B >/dev/null")

    def trace(self, seconds):
        """The vCPU threads' delays per wakeup and per preemption over seconds of ftrace."""
        self.sh(TRACE_ON)
        time.sleep(seconds)
        data = self.sh(TRACE_OFF, timeout=300).strip()
        text = gzip.decompress(base64.b64decode(data)).decode(errors="replace")
        res = {}
        for vm, tids in self.tids.items():
            per, secs = wakeup_delays(text, tids)
            res["seconds"] = secs
            res[vm] = {k: delay_figures([x for t in tids for x in per[t][k]])
                       for k in ("wakeup", "preempted")}
            res[vm]["all"] = delay_figures([x for t in tids for k in ("wakeup", "preempted")
                                            for x in per[t][k]])
        return res

    def start_softaffd(self, mode):
        self.sh("mkdir -p /etc/softaff /run/softaff && cat >/etc/softaff/softaff.conf <<'EOF'\n"
                + CONF.format(mode=mode) + "EOF")
        self.h.start_softaffd(self.build)
        self.sd = int(self.sh("cat /run/softaff/started.pid").strip())
        time.sleep(5)
        st = self.status()
        act = (st or {}).get("daemon", {}).get("actuation")
        sens = (st or {}).get("daemon", {}).get("sensing")
        log("softaffd %d: actuation %s; sensing %s" % (self.sd, act, sens))
        return {"actuation": act, "sensing": sens}

    def stop_softaffd(self):
        if self.sd:
            self.h.run("kill -TERM %d; for i in $(seq 100); do kill -0 %d 2>/dev/null || break; "
                       "sleep 0.2; done; rm -f /run/softaff/softaffd.sock" % (self.sd, self.sd),
                       timeout=60)
            self.sd = None

    def config(self, name):
        log("== %s" % name)
        res = {"config": name}
        self.set_affinity({"A": "1", "B": "0"} if name == "hard" else None)
        if name.startswith("softaff-"):
            res["daemon"] = self.start_softaffd(name.split("-", 1)[1])
        t0 = time.monotonic()
        try:
            secs = 12 if self.quick else self.seconds
            res["spiky"] = {}
            for on, off in self.patterns:
                res["spiky"]["%d/%d" % (on, off)] = self.spiky(on, off, secs)
                w = res["spiky"]["%d/%d" % (on, off)]
                log("%s spiky %d/%d: A run %.3f per s of ON (%.2f s of ON in %d periods, %.1f "
                    "s window; %.3f counting ON from after each CONT)"
                    % (name, on, off, spiky_run(w), w["on_seconds"], w["on_periods"],
                       w["seconds"], w["A"]["run_per_on_after"] or 0.0))
            if self.with_owner:
                res["owner"] = self.owner(secs)
                o = res["owner"]
                log("%s owner: B run %.3f delay p50 %.2f p99 %.2f ms; home A %.3f B %.3f" % (
                    name, o["B"]["run"], o["B"]["delay_p50_ms"], o["B"]["delay_p99_ms"],
                    o["A"]["home_share_sampled"], o["B"]["home_share_sampled"]))
            if self.sd:
                res["log_tail"] = self.h.run("tail -n 15 /var/log/softaffd.log", timeout=30).out
        finally:
            self.stop_softaffd()
        res["elapsed"] = time.monotonic() - t0
        return res


def vm_summary(st):
    if not st:
        return None
    out = {"_daemon": {"tick_cpu_ms": st.get("daemon", {}).get("tick_cpu_ms")}}
    for v in st.get("vms", []):
        keep = {k: v.get(k) for k in ("changes", "bursts", "retreats") if k in v}
        if v.get("scheduler"):
            keep["scheduler"] = {k: v["scheduler"].get(k) for k in (
                "run_home_seconds", "run_away_seconds", "visits", "wait_seconds",
                "preempts", "preempted") if k in v["scheduler"]}
        out[v["name"]] = keep
    return out


def sched_home_share(w, vm):
    """The scheduler's own home share of a VM's run time over a window (sched_ext only)."""
    try:
        a = w["status"]["start"]["mn-" + vm]["scheduler"]
        b = w["status"]["end"]["mn-" + vm]["scheduler"]
        home = b["run_home_seconds"] - a["run_home_seconds"]
        away = b["run_away_seconds"] - a["run_away_seconds"]
        return home / (home + away) if home + away > 0 else None
    except (KeyError, TypeError):
        return None


def windows(c):
    """A configuration's measured windows: the spiky ones, and the owner's if it ran."""
    return list(c["spiky"].values()) + ([c["owner"]] if "owner" in c else [])


def changes_per_10s(c, vm):
    ws = windows(c)
    n = sum(w[vm]["changes"] for w in ws)
    s = sum(w["seconds"] for w in ws)
    return 10.0 * n / s


def status_changes(c, vm):
    n, s = 0, 0.0
    for w in windows(c):
        try:
            n += (w["status"]["end"]["mn-" + vm]["changes"]
                  - w["status"]["start"]["mn-" + vm]["changes"])
            s += w["seconds"]
        except (KeyError, TypeError):
            return None
    return 10.0 * n / s if s else None


def softaffd_cpu(c):
    ws = [w for w in windows(c) if "softaffd_cpu" in w]
    if not ws:
        return None
    return sum(w["softaffd_cpu"] * w["seconds"] for w in ws) / sum(w["seconds"] for w in ws)


def wakeup(owner):
    """B's delay per event (a wakeup or a preemption: a spinning vCPU is mostly preempted, by
    its emulator thread and the host's other work, and seldom sleeps) in the owner phase's
    trace, with the wakeups' count; or None (not traced)."""
    t = owner.get("traced")
    if not t or "B" not in t:
        return None
    return dict(t["B"]["all"], wakeups=t["B"]["wakeup"]["n"])


def fmt(x, f="%.3f"):
    return "-" if x is None else f % x


def table(results):
    by = {c["config"]: c for c in results["configs"]}
    pats = list(by["none"]["spiky"].keys())
    # The owner phase's columns when it ran (not with --no-owner), against hard's.
    owner = "hard" in by and "owner" in by["hard"]
    head = (["config"] + ["A run per s of ON %s (/none)" % p for p in pats]
            + (["B run owner (/hard)", "B delay p50 / p99 ms (p99 - hard)",
                "B delay per wakeup or preemption p50 / p99 ms, n (wakeups) (p99 - hard)",
                "B delay mean ms",
                "home A / B (sampled)", "home A / B (scheduler)"] if owner else [])
            + ["changes/VM/10 s A / B (sampled)", "changes/10 s A / B (status)", "softaffd CPU"])
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in CONFIGS:
        c = by.get(name)
        if not c:
            continue
        cells = [name]
        for p in pats:
            r = spiky_run(c["spiky"][p])
            cells.append("%.3f (%.3f)" % (r, r / spiky_run(by["none"]["spiky"][p])))
        if owner:
            cells += owner_cells(c["owner"], by["hard"]["owner"])
        cells.append("%.2f / %.2f" % (changes_per_10s(c, "A"), changes_per_10s(c, "B")))
        ca, cb = status_changes(c, "A"), status_changes(c, "B")
        cells.append("-" if ca is None else "%.2f / %.2f" % (ca, cb))
        cpu = softaffd_cpu(c)
        cells.append("-" if cpu is None else "%.1f%%" % (100 * cpu))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def owner_cells(o, hard):
    """The owner phase's table cells for one configuration, against hard's owner phase."""
    hard_b = hard["B"]
    cells = []
    cells.append("%.3f (%.3f)" % (o["B"]["run"], o["B"]["run"] / hard_b["run"]))
    cells.append("%.2f / %.2f (%+.2f)" % (o["B"]["delay_p50_ms"], o["B"]["delay_p99_ms"],
                                         o["B"]["delay_p99_ms"] - hard_b["delay_p99_ms"]))
    w, hw = wakeup(o), wakeup(hard)
    cells.append("-" if w is None or hw is None else "%.2f / %.2f, %d (%d) (%+.2f)" % (
        w["p50_ms"], w["p99_ms"], w["n"], w["wakeups"], w["p99_ms"] - hw["p99_ms"]))
    cells.append("%.2f" % o["B"]["delay_mean_ms"])
    cells.append("%.1f%% / %.1f%%" % (100 * o["A"]["home_share_sampled"],
                                      100 * o["B"]["home_share_sampled"]))
    sa, sb = sched_home_share(o, "A"), sched_home_share(o, "B")
    cells.append("-" if sa is None else "%.1f%% / %s" % (
        100 * sa, "-" if sb is None else "%.1f%%" % (100 * sb)))
    return cells


def round_ratios(rnd):
    """One round's figures against none and hard of that same round, per config."""
    by = {c["config"]: c for c in rnd["configs"]}
    out = {}
    if "none" not in by:
        return out
    hard = by["hard"].get("owner") if "hard" in by else None
    for name, c in by.items():
        r = {"spiky %s" % p: spiky_run(c["spiky"][p]) / spiky_run(by["none"]["spiky"][p])
             for p in c["spiky"] if p in by["none"]["spiky"]}
        o = c.get("owner")
        if o and hard:
            r["owner run /hard"] = o["B"]["run"] / hard["B"]["run"]
            r["owner p99 - hard ms"] = o["B"]["delay_p99_ms"] - hard["B"]["delay_p99_ms"]
            w, hw = wakeup(o), wakeup(hard)
            if w is not None and hw is not None:
                r["owner p99 per wakeup or preemption - hard ms"] = w["p99_ms"] - hw["p99_ms"]
        if o:
            sa = sched_home_share(o, "A")
            r["home A"] = sa if sa is not None else o["A"]["home_share_sampled"]
        r["changes A /10 s"] = changes_per_10s(c, "A")
        cpu = softaffd_cpu(c)
        if cpu is not None:
            r["softaffd CPU"] = cpu
        out[name] = r
    return out


def summary(rounds):
    """Per config and figure: the median over the rounds of each round's ratio, with every
    round's value (each round measures none, hard and the rest side by side)."""
    per = [round_ratios(r) for r in rounds]
    keys = []
    for p in per:
        for r in p.values():
            keys += [k for k in r if k not in keys]
    head = ["config"] + ["%s (median; rounds)" % k for k in keys]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in CONFIGS:
        vals = [p[name] for p in per if name in p]
        if not vals:
            continue
        cells = [name]
        for k in keys:
            xs = [v[k] for v in vals if k in v and v[k] == v[k]]
            if not xs:
                cells.append("-")
                continue
            share = k in ("home A", "softaffd CPU")
            f = "%.1f%%" if share else "%.3f"
            m = (lambda x: 100 * x) if share else (lambda x: x)
            cells.append((f + " (%s)") % (m(pct(xs, 50)), ", ".join(f % m(x) for x in xs)))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=".")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--seconds", type=int, default=30, help="each measured window (full run)")
    ap.add_argument("--patterns",
                    help="the spiky patterns to run, ON/OFF in ms, comma-separated (default: all "
                         "of %s; --quick: 100/900)" % ", ".join("%d/%d" % p for p in PATTERNS))
    ap.add_argument("--no-owner", action="store_true",
                    help="leave out the owner phase (B resumed beside A): spiky windows only, "
                         "so more rounds fit; hard is then not needed")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run every config this many times, in turn (none, hard, ..., then "
                         "the reverse order), in the same host; prints each round's table and "
                         "the medians of the rounds' ratios")
    a = ap.parse_args()
    names = a.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    need = ("none",) if a.no_owner else ("none", "hard")
    if unknown or any(n not in names for n in need) or len(set(names)) != len(names):
        ap.error("--configs %r: each of %s at most once, with %s among them (every ratio is "
                 "against %s)%s" % (a.configs, ", ".join(CONFIGS), " and ".join(need),
                                    "it" if a.no_owner else "them",
                                    "; unknown: " + ", ".join(unknown) if unknown else ""))
    known = {"%d/%d" % p: p for p in PATTERNS}
    if a.patterns is None:
        patterns = ((100, 900),) if a.quick else PATTERNS
    else:
        asked = a.patterns.split(",")
        bad = [p for p in asked if p not in known]
        if bad or not asked or len(set(asked)) != len(asked):
            ap.error("--patterns %r: each of %s at most once%s" % (
                a.patterns, ", ".join(known), "; unknown: " + ", ".join(bad) if bad else ""))
        patterns = tuple(known[p] for p in asked)
    # A window holds at least one whole period of the slowest pattern, so every window has ON.
    slowest = max(patterns, key=sum)
    if not a.quick and a.seconds < sum(slowest) / 1000:
        ap.error("--seconds %d: each window must be at least %g s (the %d/%d pattern's period)"
                 % ((a.seconds, sum(slowest) / 1000) + slowest))
    if a.rounds < 1:
        ap.error("--rounds %d: at least one round" % a.rounds)
    build = os.path.abspath(os.environ.get("SOFTAFF_BUILD_DIR", "build"))
    lacking = [p for p in ("softaffd", "ctl/softaffctl")
               if not os.access(os.path.join(build, p), os.X_OK)]
    if lacking:
        ap.error("SOFTAFF_BUILD_DIR %s: no %s (build first: meson setup build && ninja -C build)"
                 % (build, " or ".join(lacking)))
    single = os.environ.get("SOFTAFF_MN_TCG_THREAD", "single") == "single"
    t0 = time.monotonic()
    results = {"quick": a.quick, "seconds": 12 if a.quick else a.seconds, "tcg_single": single,
               "patterns": ["%d/%d" % p for p in patterns], "owner": not a.no_owner,
               "rounds": []}
    os.makedirs(a.out, exist_ok=True)
    with mnhost.Host(build_dir=build, kernel="unstable", tcg_single=single) as h:
        b = Bench(h, build, a.quick, a.seconds, patterns, owner=not a.no_owner)
        results["uname"] = h.check("uname -r").strip()
        results["sched_ext_state"] = h.check("cat /sys/kernel/sched_ext/state").strip()
        b.setup()
        for i in range(a.rounds):
            rnd = {"configs": []}
            results["rounds"].append(rnd)
            # Every other round in reverse order: a drift of the shared machine's speed over
            # the run then does not always favour the configuration measured first.
            log("round %d of %d" % (i + 1, a.rounds))
            for name in names if i % 2 == 0 else names[::-1]:
                rnd["configs"].append(b.config(name))
                with open(os.path.join(a.out, "results.json"), "w") as f:
                    json.dump(results, f, indent=1)
        try:
            results["dmesg_tail"] = h.run("dmesg | tail -n 15", timeout=30).out
        except (mnhost.HostError, OSError):
            pass
    results["elapsed"] = time.monotonic() - t0
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    parts = []
    for i, rnd in enumerate(results["rounds"]):
        parts.append("round %d of %d:\n\n%s" % (i + 1, len(results["rounds"]), table(rnd)))
    if len(results["rounds"]) > 1:
        parts.append("medians over the %d rounds of each round's ratios (none and hard from the "
                     "same round):\n\n%s" % (len(results["rounds"]), summary(results["rounds"])))
    t = "\n\n".join(parts)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(t + "\n")
    print("host kernel %s, TCG %s, %s; %.0f s" % (
        results["uname"], "single" if single else "multi", "quick" if a.quick else "full",
        results["elapsed"]))
    print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
