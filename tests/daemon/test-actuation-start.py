#!/usr/bin/env python3
"""The real softaffd's [actuation] mode at start on this host.

softaffd runs with backend=qmp and no QMP socket (no VM, no libvirt), [sensing] mode=proc, its
own control socket in a temporary directory. On a kernel without sched_ext (no
/sys/kernel/sched_ext, like CI's): mode=auto starts, re-pins, and says why once (log, status,
metrics textfile); mode=sched_ext refuses to start (exit 1) naming the cause; mode=pin says so.
On a kernel with sched_ext the refusal is only checked where it must happen (not root); as root
softaffd would load the scheduler, which is the sched_ext host's test (tests/multinode).
Usage: test-actuation-start.py SOFTAFFD SOFTAFFCTL"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SOFTAFFD, CTL = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="softaff-actuation-")
SOCK = os.path.join(WORK, "sock")
CONF = os.path.join(WORK, "softaff.conf")
PROM = os.path.join(WORK, "softaff.prom")
HAS_SCHED_EXT = os.path.exists("/sys/kernel/sched_ext")
NO_SCHED_EXT = ("the kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT): /sys/kernel/sched_ext: "
                "No such file or directory")
checks = []
# The refusal is a critical message: not fatal here, softaffd must exit 1 by itself.
ENV = {k: v for k, v in os.environ.items() if k != "G_DEBUG"}


def check(cond, what):
    checks.append((bool(cond), what))
    print("%s - %s" % ("ok" if cond else "not ok", what))


def write_conf(mode):
    with open(CONF, "w") as f:
        f.write("[daemon]\nbackend=qmp\nsocket=%s\ninterval_ms=200\n[sensing]\nmode=proc\n"
                "[metrics]\ntextfile=%s\n[fleet]\nstate_file=\n[actuation]\nmode=%s\n"
                % (SOCK, PROM, mode))


def start(log):
    p = subprocess.Popen([SOFTAFFD, "--config", CONF, "--foreground"], env=ENV,
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    for _ in range(100):
        if os.path.exists(SOCK) or p.poll() is not None:
            break
        time.sleep(0.05)
    time.sleep(0.5)
    return p


def status():
    out = subprocess.run([CTL, "status", "--json", "--socket", SOCK], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)["daemon"]["actuation"]


def stop(p):
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=15)
    if os.path.exists(SOCK):
        os.unlink(SOCK)
    return rc


def main():
    # auto
    write_conf("auto")
    log = os.path.join(WORK, "log-auto")
    p = start(log)
    if HAS_SCHED_EXT:
        print("# this kernel has sched_ext: mode=auto's fallback is checked on kernels without")
        stop(p)
    else:
        a = status()
        check(a["mode"] == "pin" and a["configured"] == "auto" and a["reason"] == NO_SCHED_EXT,
              "auto re-pins and says why: %s" % a)
        check(a["ejections"] == 0 and a["last_ejection"] is None and a["threads"] == 0,
              "no ejection, no thread in a scheduler")
        time.sleep(0.5)
        prom = open(PROM).read()
        check("\nsoftaff_actuation_sched_ext 0\n" in prom, "metric softaff_actuation_sched_ext 0")
        check(stop(p) == 0, "SIGTERM: exit 0")
        text = open(log).read()
        line = "actuation: re-pinning (affinity): " + NO_SCHED_EXT
        check(text.count(line) == 1 and text.count("actuation:") == 1,
              "said once in the log: %r" % text)

    # sched_ext
    write_conf("sched_ext")
    log = os.path.join(WORK, "log-sched-ext")
    if HAS_SCHED_EXT and os.geteuid() == 0:
        print("# root on a sched_ext kernel: mode=sched_ext would run; skipped here")
    else:
        p = start(log)
        try:
            rc = p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            rc = stop(p)
        text = open(log).read()
        want = "[actuation] mode=sched_ext: " + (NO_SCHED_EXT if not HAS_SCHED_EXT else "")
        check(rc == 1 and want in text, "sched_ext refuses to start, naming why (rc %s): %r"
              % (rc, text))
        check(not os.path.exists(SOCK), "no control socket was left")

    # pin
    write_conf("pin")
    p = start(os.path.join(WORK, "log-pin"))
    a = status()
    check(a["mode"] == "pin" and a["reason"] == "[actuation] mode=pin", "pin: %s" % a)
    check(stop(p) == 0, "SIGTERM: exit 0")

    subprocess.run(["rm", "-rf", WORK], check=False)
    return 0 if all(c for c, _ in checks) else 1


sys.exit(main())
