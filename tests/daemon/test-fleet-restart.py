#!/usr/bin/env python3
"""The headroom history of the real softaffd across SIGHUP, SIGTERM and a restart.

softaffd runs with backend=qmp and no QMP socket (no VM, no libvirt: nothing shared with other
runs on the host), [sensing] mode=proc, a 200-ms tick, its own control socket and [fleet]
state_file in a temporary directory. The owners' demand is the host's own load (unmanaged).
Checked: status shows headroom and coverage, which a SIGHUP keeps (coverage goes on growing);
SIGTERM writes the state file; a restart reads it (coverage continues from where it was); a
corrupt file is logged with its path and ignored (the daemon runs, coverage starts over).
Usage: test-fleet-restart.py SOFTAFFD SOFTAFFCTL"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SOFTAFFD, CTL = sys.argv[1], sys.argv[2]
WORK = tempfile.mkdtemp(prefix="softaff-fleet-restart-")
SOCK = os.path.join(WORK, "sock")
STATE = os.path.join(WORK, "lib", "headroom.json")
CONF = os.path.join(WORK, "softaff.conf")
checks = []


def check(cond, what):
    checks.append((bool(cond), what))
    print("%s - %s" % ("ok" if cond else "not ok", what))


def start(log):
    p = subprocess.Popen([SOFTAFFD, "--config", CONF, "--foreground"],
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    for _ in range(100):
        if os.path.exists(SOCK):
            break
        time.sleep(0.05)
    time.sleep(0.6)
    return p


def headroom():
    out = subprocess.run([CTL, "status", "--json", "--socket", SOCK], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)["headroom"]


def stop(p):
    p.send_signal(signal.SIGTERM)
    return p.wait(timeout=15)


def main():
    with open(CONF, "w") as f:
        f.write("[daemon]\nbackend=qmp\nsocket=%s\ninterval_ms=200\n[sensing]\nmode=proc\n"
                "[fleet]\nwindow_s=600\nshapes=small:1:64\nstate_file=%s\n" % (SOCK, STATE))
    log1 = os.path.join(WORK, "log1")
    p = start(log1)
    h1 = headroom()
    part = h1["partitions"][0]
    check(part["coverage"] > 0 and part["capacity"] >= 1, "coverage and capacity: %s" % part)
    check(abs(part["headroom"] - (part["capacity"] - part["margin"] - part["demand"])) < 1e-9,
          "headroom = capacity - margin - demand")
    check(h1["shapes"][0]["shape"] == "small", "the shape's fit: %s" % h1["shapes"])
    p.send_signal(signal.SIGHUP)
    time.sleep(2.0)
    h2 = headroom()
    check(h2["partitions"][0]["coverage"] > part["coverage"],
          "SIGHUP keeps the histograms: %s -> %s" % (part["coverage"],
                                                     h2["partitions"][0]["coverage"]))
    rc = stop(p)
    check(rc == 0 and os.path.exists(STATE), "SIGTERM saves %s (rc %d)" % (STATE, rc))
    saved = json.load(open(STATE))
    check(saved["window_s"] == 600 and saved["partitions"][0]["slots"], "the state file")
    before = h2["partitions"][0]["coverage"]

    log2 = os.path.join(WORK, "log2")
    p = start(log2)
    h3 = headroom()
    check(h3["partitions"][0]["coverage"] > before,
          "a restart reads the history back: %s -> %s" % (before, h3["partitions"][0]["coverage"]))
    check("headroom history read from %s" % STATE in open(log2).read(), "said in the log")
    stop(p)

    with open(STATE, "w") as f:
        f.write('{"version":1,"window_s":600,"partitions":[{"id":0')
    log3 = os.path.join(WORK, "log3")
    p = start(log3)
    h4 = headroom()
    text = open(log3).read()
    check("ignoring the saved headroom history: %s: not JSON: cut short" % STATE in text,
          "a corrupt file is named in the log: %r" % text)
    check(h4["partitions"][0]["coverage"] < before, "and ignored: coverage starts over")
    check(stop(p) == 0, "the daemon ran and stopped normally")
    subprocess.run(["rm", "-rf", WORK], check=False)
    return 0 if all(c for c, _ in checks) else 1


sys.exit(main())
