#!/usr/bin/env python3
"""SIGTERM while softaffd waits to reconnect to libvirtd still gives every thread back
(partitions CPU 0 | CPU 1).

libvirtd stops under a running softaffd that narrows a guest (home 1: its vCPUs on CPU 1); the
daemon's reconnect backs off (0.5, 1, 2, 4, then 8 s). libvirtd starts again and softaffd gets
SIGTERM before its next attempt: it must connect at once and restore, not exit with the guest
still pinned and its record left (the soak found that: seed 1814198809, step 155, SIGTERM
2.4 s after a libvirtd restart).
"""
import subprocess

import softaff_testlib as T

ALL = {0, 1}


def stop_libvirtd():
    subprocess.run(["pkill", "-TERM", "-x", "libvirtd"], check=False)
    T.wait_until(lambda: subprocess.run(["pgrep", "-x", "libvirtd"],
                                        stdout=subprocess.DEVNULL).returncode != 0,
                 30, what="libvirtd to exit")


def main():
    T.require_vm()
    T.wait_host_quiet()
    cfg, _ = T.write_config(layout="custom", custom="0;1", interval_ms=500, manage="explicit")
    g = T.Guest("rc", vcpus=2, metadata=T.softaff_metadata(preferred="1"))
    g.start()
    g.wait_ready()
    g.wait_vcpu_threads()
    d = T.Daemon(cfg).start(wait_socket=False)
    T.wait_until(lambda: g.affinity() == {0: {1}, 1: {1}} and "<own" in g.metadata_get(), 15,
                 what=lambda: "rc home on CPU 1 and recorded (now %s)" % g.affinity_text())
    try:
        stop_libvirtd()
        T.wait_until(lambda: "retrying in 8000 ms" in d.log_text(), 30,
                     what="softaffd's reconnect to back off to 8 s")
    finally:
        T.ensure_libvirtd()
    d.check_alive()
    assert "retrying in 16000 ms" not in d.log_text(), "libvirtd took too long to start"
    assert g.affinity() == {0: {1}, 1: {1}}, "before SIGTERM: %s" % g.affinity_text()
    assert d.stop() == 0
    assert g.affinity() == {0: ALL, 1: ALL}, \
        "after SIGTERM: %s; softaff's pins stayed (log: %s)" % (
            g.affinity_text(), d.log_text()[-1500:])
    assert "<own" not in g.metadata_get(), "the record stayed: %s" % g.metadata_get()
    g.destroy()


T.run(main)
