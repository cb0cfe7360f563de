#!/usr/bin/env python3
"""softaffd's options and signals on real guests:
--dry-run decides and logs but changes nothing; --once places every VM and exits 0 without
restoring; SIGHUP reloads the configuration (a new custom layout moves the homes); a bad
configuration on SIGHUP is refused and the daemon keeps running with the old one."""
import os
import signal
import subprocess
import time

import softaff_testlib as T


def main():
    T.require_vm()
    cfg, sock = T.write_config(layout="custom", custom="0;1", interval_ms=500)
    a = T.Guest("a", vcpus=2, metadata=T.softaff_metadata(preferred=0))
    a.start()
    a.wait_ready()
    a.wait_vcpu_threads()
    before = a.affinity()

    # --dry-run: the decision is logged, nothing is pinned.
    d = T.Daemon(cfg, log_path=os.path.join(T.workdir(), "dry.log"), args=["--dry-run"])
    d.start(wait_socket=False)
    T.wait_until(lambda: "[dry-run]" in d.log_text(), 5, what="a dry-run decision in the log")
    time.sleep(1)
    assert a.affinity() == before, "--dry-run changed the pinning: %s" % a.affinity_text()
    assert d.stop() == 0

    # --once: placed home, then exit 0 with the pinning left in place.
    p = subprocess.run([T.softaffd_path(), "--config", cfg, "--once"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=30)
    T.log("--once output:\n" + p.stdout)
    assert p.returncode == 0, "--once exit status %d" % p.returncode
    assert a.all_on({0}), "--once did not leave a at home: %s" % a.affinity_text()

    # SIGHUP with a swapped layout: partition 0 is now CPU 1.
    d = T.Daemon(cfg, log_path=os.path.join(T.workdir(), "hup.log")).start(wait_socket=False)
    T.wait_until(lambda: "connected to" in d.log_text(), 5, what="softaffd connected")
    a.wait_affinity({0}, 2)
    T.write_config(path=cfg, layout="custom", custom="1;0", interval_ms=500)
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGHUP)
    a.wait_affinity({1}, 3, what="a moved to the new partition 0 (CPU 1) after SIGHUP")
    T.log("SIGHUP applied in %.2fs" % (time.monotonic() - t0))
    # A bad configuration is refused, named, and the daemon keeps its old one.
    with open(cfg, "a") as f:
        f.write("[policy]\nsoftnes=3\n")
    d.proc.send_signal(signal.SIGHUP)
    T.wait_until(lambda: "reload refused" in d.log_text(), 3, what="the reload refusal")
    assert "softnes" in d.log_text(), "the refusal does not name the bad key"
    time.sleep(1)
    assert d.running() and a.all_on({1}), "daemon lost its configuration: %s" % a.affinity_text()
    assert d.stop() == 0


T.run(main)
