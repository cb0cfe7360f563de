#!/usr/bin/env python3
"""softaffd with backend=qmp: QEMU processes without libvirt, found through QMP sockets.

Partitions 0 = CPU 0 and 1 = CPU 1 (layout=custom), tick 500 ms, softness 50. Guests A
([vm A] preferred=0) and B (preferred=1) are plain `qemu-system-x86_64` processes with an extra
-qmp socket for softaffd; their threads are unnamed, so softaffd can only learn the vCPU threads
from query-cpus-fast. A third guest C (preferred=1) comes and goes.
  0. softaffd finds the sockets, names the VMs (query-name), finds the QEMU pid (SO_PEERCRED):
     idle A on CPU 0, B and C on CPU 1, emulator threads at home too.
  1. C exits: forgotten, without warnings.
  a. A busy, B idle: A's vCPU threads on 0-1 within 2 ticks; B busy: A back on CPU 0 within
     2 ticks.
  b. both busy for 20 s: everybody home, no affinity change at all.
  2. SIGTERM: every QEMU thread gets back the affinity it had before softaffd touched it.
Reaction times are measured from the guest's acknowledgement of the load change.

Trust and original affinities:
  - the QMP sockets are in a private directory (0700 under /run): a socket in the test's
    directory under /tmp (sticky, writable by all) is refused with a log line naming /tmp;
  - a fake QMP peer (a Python script, [vm fake] preferred=0) names a `sleep` process's pid as
    its vCPU thread: softaffd warns and the sleep's affinity ({1}) stays as it was;
  - a vCPU thread of A and one of B get distinctive affinities before softaffd first runs, and
    `softaffd --once` pins everything and exits without restoring: the daemon started after it
    takes the originals from its state file (qmp-originals.ini beside its control socket), so
    SIGTERM (step 2) gives them back, not the pins --once left; the file then holds nothing."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import softaff_testlib as T  # noqa: E402

INTERVAL = 0.5
LIMIT = 1.5  # 2 ticks + slack, as in test-burst-retreat
STEADY = 20.0


def all_threads_affinity(g):
    """{tid: set} of every thread of the QEMU process."""
    out = {}
    for t in os.listdir("/proc/%d/task" % g.pid()):
        try:
            out[int(t)] = T.thread_affinity(g.pid(), int(t))
        except OSError:
            pass
    return out


def others_on(g, cpus):
    aff = all_threads_affinity(g)
    vcpus = set(g.vcpu_tids().values())
    return all(c == cpus for t, c in aff.items() if t not in vcpus)


FAKE_PEER = r"""
import json, os, socket, sys

path, tid = sys.argv[1], int(sys.argv[2])
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(4)
answers = {
    "qmp_capabilities": {},
    "query-name": {"name": "fake"},
    "query-cpus-fast": [{"cpu-index": 0, "qom-path": "/machine/cpu[0]", "thread-id": tid,
                         "target": "x86_64"}],
}
while True:
    conn, _ = srv.accept()
    f = conn.makefile("rwb")
    f.write(b'{"QMP": {"version": {"qemu": {"micro": 0, "minor": 2, "major": 8}, '
            b'"package": ""}, "capabilities": []}}\r\n')
    f.flush()
    try:
        for line in f:
            req = json.loads(line)
            cmd = req.get("execute")
            if cmd in answers:
                msg = {"return": answers[cmd]}
            else:
                msg = {"error": {"class": "CommandNotFound", "desc": cmd}}
            if "id" in req:
                msg["id"] = req["id"]
            f.write(json.dumps(msg).encode() + b"\r\n")
            f.flush()
    except (OSError, ValueError):
        pass
    conn.close()
"""


def private_dir():
    """A 0700 directory outside /tmp, whose parents only root may write."""
    d = tempfile.mkdtemp(prefix="softaff-test-qmp-", dir="/run")
    atexit.register(shutil.rmtree, d, True)
    return d


def start_process(argv, procs):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    procs.append(p)
    return p


def state_groups(path):
    """Group names of softaffd's QMP state file ([] when there is none)."""
    try:
        with open(path) as f:
            return [x.strip()[1:-1] for x in f if x.startswith("[")]
    except FileNotFoundError:
        return []


def set_distinctive(g, cpus):
    """Gives vCPU 0 of g the affinity cpus; returns its tid."""
    tid = g.vcpu_tids()[0]
    os.sched_setaffinity(tid, cpus)
    return tid


def check_refusals(daemon, wd, private, fake, stranger):
    """The socket under /tmp is refused; the peer naming the sleep process is refused."""
    def logged():
        text = daemon.log_text()
        return ("%s: refused: directory " % os.path.join(wd, "fake.qmp") in text
                and "QMP names thread %d as vCPU 0" % stranger.pid in text)
    T.wait_until(logged, 10, what=lambda: "refusals in the log:\n%s" % daemon.log_text()[-3000:])
    text = daemon.log_text()
    lines = [x for x in text.splitlines() if "refused" in x]
    T.log("refusals:\n  " + "\n  ".join(lines))
    want = ("%s: QMP names thread %d as vCPU 0, but it is not a thread of QEMU process %d"
            % (os.path.join(private, "fake.qmp"), stranger.pid, fake.pid))
    assert want in text, "daemon log lacks %r" % want
    if os.path.dirname(wd) == "/tmp":
        assert "directory /tmp is writable by every user (mode 1777, sticky)" in text, \
            "no reason given for /tmp"
    assert text.count("QMP names thread %d " % stranger.pid) == 1, "warned more than once"
    assert os.sched_getaffinity(stranger.pid) == {1}, "the sleep process was pinned: %s" % (
        os.sched_getaffinity(stranger.pid))


def wait_or_explain(g, cpus, timeout):
    try:
        return g.wait_affinity(cpus, timeout)
    except AssertionError as e:
        raise AssertionError("%s\n  host CPU utilization now: %s" % (
            e, T.format_utilization(T.cpu_utilization(0.5))))


def main():
    if not {0, 1} <= T.host_cpus():
        T.skip("the two-partition scenario needs host CPUs 0 and 1")
    T.wait_host_quiet()
    wd = T.workdir()
    private = private_dir()
    a = T.QemuGuest("A", vcpus=2)
    b = T.QemuGuest("B", vcpus=2)
    c = T.QemuGuest("C", vcpus=1)
    for g in (a, b, c):
        g.qmp_path = os.path.join(private, g.label + ".qmp")
    procs = []
    atexit.register(lambda: [p.kill() for p in procs if p.poll() is None])
    # A process that is not QEMU, and a fake QMP peer naming it as its vCPU thread.
    stranger = start_process(["sleep", "1000"], procs)
    os.sched_setaffinity(stranger.pid, {1})
    fake_script = os.path.join(wd, "fake-qmp.py")
    with open(fake_script, "w") as f:
        f.write(FAKE_PEER)
    fake = start_process([sys.executable, fake_script, os.path.join(private, "fake.qmp"),
                          str(stranger.pid)], procs)
    # The same peer on a socket in the test's directory under /tmp: refused.
    untrusted = start_process([sys.executable, fake_script, os.path.join(wd, "fake.qmp"),
                               str(stranger.pid)], procs)
    cfg, sock = T.write_config(interval_ms=int(INTERVAL * 1000), layout="custom", custom="0;1",
                               manage="explicit", extra={
                                   "daemon": {"backend": "qmp"},
                                   "qmp": {"sockets": "%s;%s" % (os.path.join(private, "*.qmp"),
                                                                 os.path.join(wd, "*.qmp"))},
                                   "vm " + a.qemu_name: {"preferred": 0},
                                   "vm " + b.qemu_name: {"preferred": 1, "mode": "soft"},
                                   "vm " + c.qemu_name: {"preferred": 1},
                                   "vm fake": {"preferred": 0},
                               })
    state_file = os.path.join(os.path.dirname(sock), "qmp-originals.ini")
    for g in (a, b, c):
        g.start()
    for g in (a, b, c):
        g.wait_ready(180)
    for g in (a, b, c):
        tids = g.vcpu_tids()
        assert sorted(tids) == list(range(g.vcpus)), "query-cpus-fast of %s: %s" % (g.name, tids)
        comms = {T.read_comm(g.pid(), t) for t in tids.values()}
        assert not any(x.startswith("CPU ") for x in comms), "threads are named: %s" % comms
    # Originals softaff's pins cannot pass for: A's home is 0, B's 1.
    set_distinctive(a, {1})
    set_distinctive(b, {0})
    original = {g.label: all_threads_affinity(g) for g in (a, b)}
    T.log("original affinities: " + "; ".join("%s %s" % (k, sorted(
        {T.format_cpulist(s) for s in v.values()})) for k, v in original.items()))

    # --once: places every VM, exits without restoring; the originals stay in the state file.
    once = T.Daemon(cfg, socket_path=sock, log_path=os.path.join(wd, "softaffd-once.log"),
                    args=["--once"]).start(wait_socket=False)
    rc = once.proc.wait(60)
    once.stop()
    assert rc == 0, "softaffd --once exited with %s:\n%s" % (rc, once.log_text()[-2000:])
    assert a.all_on({0}) and b.all_on({1}), "--once did not place A on 0 and B on 1: A %s, B %s" % (
        a.affinity_text(), b.affinity_text())
    groups = state_groups(state_file)
    for g in (a, b):
        assert any(x.split(" ")[-2] == str(g.pid()) for x in groups), \
            "%s lacks QEMU %s (pid %d): %s" % (state_file, g.name, g.pid(), groups)
    T.log("--once placed A and B and recorded their originals in %s" % state_file)

    daemon = T.Daemon(cfg, socket_path=sock).start(wait_socket=False)

    # 0. Found, named and placed; emulator threads at home as well.
    settle = 10 * INTERVAL + 5

    def found_all():
        text = daemon.log_text()
        return all("%s: found QEMU process %d over QMP" % (g.qemu_name, g.pid()) in text
                   for g in (a, b, c))

    def settled():
        daemon.check_alive()
        # --once placed them already: the new daemon must have found them too.
        return (found_all() and a.all_on({0}) and b.all_on({1}) and c.all_on({1}) and others_on(a, {0})
                and others_on(b, {1}))
    el = T.wait_until(settled, settle, 0.05, what=lambda: "idle guests at home: A %s, B %s, C %s"
                      % (a.affinity_text(), b.affinity_text(), c.affinity_text()))
    T.log("settled after %.2fs: A on 0, B and C on 1, emulator threads at home" % el)
    text = daemon.log_text()
    for g in (a, b, c):
        want = "%s: found QEMU process %d over QMP" % (g.qemu_name, g.pid())
        assert want in text, "daemon log lacks %r:\n%s" % (want, text[-2000:])
    check_refusals(daemon, wd, private, fake, stranger)

    # 1. A QEMU that exits is forgotten, quietly.
    before = len(daemon.log_text().splitlines())
    c.destroy()
    T.wait_until(lambda: "forgotten" in "\n".join(daemon.log_text().splitlines()[before:]), 5,
                 what="C to be forgotten")
    time.sleep(2 * INTERVAL)
    after = daemon.log_text().splitlines()[before:]
    T.log("daemon log after C exited:\n  " + "\n  ".join(after))
    noisy = [x for x in after if " warning: " in x or " critical: " in x]
    assert not noisy, "warnings after a QEMU exit: %s" % noisy
    assert daemon.running(), "softaffd died after a QEMU exit"

    # a. Burst and retreat.
    T.wait_host_quiet(max_busy=0.5)
    results = {}
    a.set_load(2)
    results["burst"] = wait_or_explain(a, {0, 1}, 10)
    T.log("A busy, B idle: A on 0-1 after %.3fs" % results["burst"])
    assert b.all_on({1}), "B moved while idle: %s" % b.affinity_text()
    assert others_on(a, {0}), "A's emulator threads left home while it bursts"
    b.set_load(2)
    results["retreat"] = wait_or_explain(a, {0}, 10)
    T.log("B busy: A back on 0 after %.3fs" % results["retreat"])
    assert b.all_on({1}), "B left its home while busy: %s" % b.affinity_text()

    # b. Both busy: everybody home, no affinity change.
    time.sleep(2.0)
    T.wait_until(lambda: a.all_on({0}) and b.all_on({1}), 5, 0.05,
                 what=lambda: "busy guests at home: A %s, B %s" % (a.affinity_text(),
                                                                   b.affinity_text()))
    time.sleep(1.0)
    t0 = time.monotonic()
    with T.AffinityWatcher([a, b], interval=0.1) as w:
        time.sleep(STEADY)
    T.log("%d samples in %.1fs, %d affinity changes" % (w.samples, time.monotonic() - t0,
                                                        len(w.changes)))
    for (t, label, v, old, new) in w.changes:
        T.log("  change at +%.2fs: %s vcpu %d %s -> %s" % (
            t - t0, label, v, T.format_cpulist(old or ()), T.format_cpulist(new)))
    home_a, home_b = w.fraction_on("A", {0}), w.fraction_on("B", {1})
    T.log("vCPU samples at home: A %.1f%%, B %.1f%%" % (100 * home_a, 100 * home_b))
    assert w.samples >= STEADY / 0.1 * 0.8, "watcher took only %d samples" % w.samples
    assert not w.changes, "%d affinity changes under steady load" % len(w.changes)
    assert home_a >= 0.99 and home_b >= 0.99, "vCPUs ran away from home: A %.3f, B %.3f" % (
        home_a, home_b)

    # 2. SIGTERM restores every thread's own affinity.
    a.set_load(0)
    b.set_load(0)
    rc = daemon.stop()
    assert rc == 0, "softaffd exited with %s on SIGTERM" % rc
    for g in (a, b):
        now = all_threads_affinity(g)
        wrong = {t: (T.format_cpulist(original[g.label][t]), T.format_cpulist(s))
                 for t, s in now.items() if t in original[g.label] and s != original[g.label][t]}
        assert not wrong, "after SIGTERM %s threads not restored (tid: (before, now)): %s" % (
            g.name, wrong)
    T.log("SIGTERM: softaffd exited 0, every QEMU thread has its own affinity back, the ones "
          "set before --once included")
    left = state_groups(state_file)
    assert not left, "%s still holds %s after every VM was restored or exited" % (state_file, left)
    assert os.sched_getaffinity(stranger.pid) == {1}, "the sleep process was pinned: %s" % (
        os.sched_getaffinity(stranger.pid))

    T.log("reaction times: " + ", ".join("%s %.3fs" % kv for kv in results.items()))
    slow = {k: v for k, v in results.items() if v > LIMIT}
    assert not slow, "reactions slower than %.1fs (2 ticks + slack): %s" % (LIMIT, slow)


if __name__ == "__main__":
    T.run(main, libvirt=False)
