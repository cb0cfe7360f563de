#!/usr/bin/env python3
"""softaffd scenario: one sick VM must not take soft affinity away from the others.

Partitions 0 = CPU 0 and 1 = CPU 1 (layout=custom), tick 500 ms. Guests A (home 0), B (home 1)
and C (home 1), 2 vCPUs each, all idle and placed.
  1. C's QEMU is stopped (SIGSTOP) and a libvirt job is held on it (a QEMU monitor command
     that cannot be answered), then softaffd gets SIGHUP. `softaffctl status` answers in
     < 100 ms and shows C `stalled`; A bursts within 2 ticks of its load step and retreats
     within 2 ticks of B's.
  2. SIGCONT: C answers again and is managed without a restart (a new home is applied).
  3. C stopped with a held job again, A bursting: SIGTERM. softaffd exits 0 in < 6 s; A and B
     are restored to their allowed set; C, which cannot answer, is logged as left as it is;
     no decision is logged and no vCPU is pinned after the restore started."""

import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import softaff_testlib as T  # noqa: E402

INTERVAL = 0.5
LIMIT = 1.5  # 2 ticks + slack for the sampling and the guest's thread start


def ctl(*args, timeout=30):
    exe = T.binary("softaffctl")
    t0 = time.monotonic()
    p = subprocess.run([exe] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout)
    return p, time.monotonic() - t0


def status(sock):
    p, el = ctl("status", "--json", "--socket", sock)
    assert p.returncode == 0, "softaffctl status: %d %s%s" % (p.returncode, p.stdout, p.stderr)
    return {v["name"]: v for v in json.loads(p.stdout)["vms"]}, el


class HeldJob:
    """A QEMU monitor command on a stopped QEMU: libvirt holds the domain's job until QEMU
    answers, so every call that needs the job (pinning, metadata) waits."""

    def __init__(self, g):
        self.proc = subprocess.Popen(
            ["virsh", "-c", T.URI, "qemu-monitor-command", g.name, '{"execute":"query-status"}'],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # virsh needs a moment to connect and take the job; until then a command to the VM still
        # gets through (a CI run of 2026-12-06 restored C at SIGTERM 0.2 s after this started,
        # and failed on "the unanswered restore of C is not logged").
        time.sleep(1.0)
        if self.proc.poll() is not None:
            raise AssertionError("virsh qemu-monitor-command ended at once: %s" % (
                self.proc.stdout.read().decode(errors="replace")))

    def wait(self):
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def wait_stalled(sock, name, timeout):
    def stalled():
        vms, _ = status(sock)
        return vms.get(name, {}).get("state") == "stalled"
    return T.wait_until(stalled, timeout, 0.2, what="%s shown stalled" % name)


def phase_stopped(a, b, c, daemon, sock, results):
    cpid = c.pid()
    os.kill(cpid, signal.SIGSTOP)
    job = HeldJob(c)
    time.sleep(0.5)
    daemon.proc.send_signal(signal.SIGHUP)
    el = wait_stalled(sock, c.name, 10)
    T.log("C stopped + job held + SIGHUP: C shown stalled after %.2fs" % el)
    vms, el = status(sock)
    results["status (s)"] = el
    assert el < 0.1, "softaffctl status took %.3fs with C stopped" % el
    assert vms[c.name]["stalled"], "no stalled details for C: %s" % vms[c.name]
    T.log("status answered in %.3fs: C %s (%s)" % (el, vms[c.name]["state"],
                                                    vms[c.name]["stalled"]))
    a.set_load(2)
    results["burst"] = a.wait_affinity({0, 1}, 10)
    b.set_load(2)
    results["retreat"] = a.wait_affinity({0}, 10)
    T.log("with C stopped: A burst after %.3fs, retreated after %.3fs" % (
        results["burst"], results["retreat"]))
    b.set_load(0)
    a.set_load(0)
    os.kill(cpid, signal.SIGCONT)
    job.wait()


def phase_continued(c, daemon, sock):
    def managed_again():
        vms, _ = status(sock)
        return vms[c.name]["state"] in ("home", "burst")
    el = T.wait_until(managed_again, 10, 0.2, what="C managed again after SIGCONT")
    T.log("SIGCONT: C managed again after %.2fs" % el)
    p, _ = ctl("set", c.name, "--preferred", "0", "--live")
    assert p.returncode == 0, "softaffctl set: %s%s" % (p.stdout, p.stderr)
    el = c.wait_affinity({0}, 10)
    T.log("C follows a new home again (CPU 0 after %.2fs)" % el)


def phase_sigterm(a, b, c, daemon, sock, results):
    a.set_load(2)
    a.wait_affinity({0, 1}, 10)
    cpid = c.pid()
    os.kill(cpid, signal.SIGSTOP)
    job = HeldJob(c)
    wait_stalled(sock, c.name, 10)
    t0 = time.monotonic()
    rc = daemon.stop(timeout=15)
    results["SIGTERM (s)"] = time.monotonic() - t0
    assert rc == 0, "softaffd exited with %s on SIGTERM" % rc
    assert results["SIGTERM (s)"] < 6, "SIGTERM took %.2fs" % results["SIGTERM (s)"]
    host = T.host_cpus()
    for g in (a, b):
        assert g.all_on(host), "%s not restored to %s after SIGTERM: %s" % (
            g.name, T.format_cpulist(host), g.affinity_text())
    log = daemon.log_text()
    assert "did not answer within" in log and c.name in log, \
        "the unanswered restore of C is not logged:\n" + log[-2000:]
    after = log[log.index("terminating:"):]
    decided = [line for line in after.splitlines() if " -> vCPUs " in line]
    assert not decided, "decisions after the restore started:\n" + "\n".join(decided)
    T.log("SIGTERM: exit 0 after %.2fs; A, B restored; C logged as not answering" %
          results["SIGTERM (s)"])
    os.kill(cpid, signal.SIGCONT)
    job.wait()


def main():
    if len(T.host_cpus()) < 2 or not {0, 1} <= T.host_cpus():
        T.skip("needs host CPUs 0 and 1")
    T.wait_host_quiet()
    cfg, sock = T.write_config(interval_ms=int(INTERVAL * 1000), layout="custom", custom="0;1",
                               manage="explicit")
    daemon = T.Daemon(cfg, socket_path=sock)
    a = T.Guest("A", metadata=T.softaff_metadata(preferred=0))
    b = T.Guest("B", metadata=T.softaff_metadata(preferred=1))
    c = T.Guest("C", metadata=T.softaff_metadata(preferred=1))
    for g in (a, b, c):
        g.start()
    for g in (a, b, c):
        g.wait_ready(180)
        g.wait_vcpu_threads()
    daemon.start(require_socket=True)
    T.wait_until(lambda: a.all_on({0}) and b.all_on({1}) and c.all_on({1}), 10, 0.05,
                 what=lambda: "placed: A %s, B %s, C %s" % (
                     a.affinity_text(), b.affinity_text(), c.affinity_text()))
    T.wait_host_quiet()
    results = {}
    phase_stopped(a, b, c, daemon, sock, results)
    phase_continued(c, daemon, sock)
    phase_sigterm(a, b, c, daemon, sock, results)
    T.log("figures: " + ", ".join("%s %.3f" % kv for kv in results.items()))
    slow = {k: v for k, v in results.items() if k in ("burst", "retreat") and v > LIMIT}
    assert not slow, "reactions slower than %.1fs (2 ticks + slack): %s" % (LIMIT, slow)


if __name__ == "__main__":
    T.run(main)
