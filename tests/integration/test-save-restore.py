#!/usr/bin/env python3
"""Save images carry the user's settings, never softaff's pins (partitions CPU 0 | CPU 1).

A managed guest whose user pinned vCPU 0 to CPU 1 (home 0: softaff pins vCPU 1 and the emulator
to CPU 0) is saved while managed and restored:
- `virsh save` + `virsh restore` of a transient guest, and `virsh managedsave` + `virsh start`
  of a persistent one, with softaff-hook installed (its restore rewrite): the restored XML holds
  exactly the user's pins (vCPU 0 on 1, no pin for vCPU 1, no emulatorpin) and no softaff
  record; softaffd is SIGSTOPped meanwhile, so what is read is what libvirt restored;
- softaffd then manages the restored guest again, and after SIGTERM every thread has the
  user's own set.
The hook is installed with contrib/install-hook.sh as a wrapper that runs it for this test's
guests only (see test-hook.py), and removed afterwards.
"""
import os
import re
import signal

import softaff_testlib as T

ALL = {0, 1}


def cputune(xml):
    """(vcpupins {vcpu: cpulist}, emulatorpin or None) of a domain XML."""
    pins = {int(v): c for v, c in re.findall(r"<vcpupin vcpu='(\d+)' cpuset='([^']+)'/>", xml)}
    m = re.search(r"<emulatorpin cpuset='([^']+)'/>", xml)
    return pins, m.group(1) if m else None


def check_user_xml(xml, what):
    pins, emu = cputune(xml)
    assert pins == {0: "1"} and emu is None, \
        "%s: pins %s, emulatorpin %s; want only vCPU 0 on 1" % (what, pins, emu)
    assert "softaffd" not in xml and "assigned=" not in xml, "%s kept softaff's record:\n%s" % (
        what, xml)


def managed(g):
    return g.affinity() == {0: {1}, 1: {0}}


def round_trip(g, d, save, load):
    """Save while managed, restore with softaffd stopped, read the XML, let softaffd go on."""
    T.wait_until(lambda: managed(g), 5, what="%s managed (now %s)" % (g.name, g.affinity_text()))
    pins, emu = cputune(g.dumpxml())
    assert pins == {0: "1", 1: "0"} and emu == "0", "softaff's live pins: %s %s" % (pins, emu)
    save()
    d.proc.send_signal(signal.SIGSTOP)
    try:
        load()
        g.wait_vcpu_threads()
        check_user_xml(g.dumpxml(), "%s's restored XML" % g.name)
        assert g.affinity() == {0: {1}, 1: ALL}, "%s restored with %s" % (g.name, g.affinity_text())
    finally:
        d.proc.send_signal(signal.SIGCONT)
    T.wait_until(lambda: managed(g), 5, what="%s managed again (now %s)" % (
        g.name, g.affinity_text()))


def main():
    T.require_vm()
    cfg, sock = T.write_config(layout="custom", custom="0;1", interval_ms=500)
    hook = T.TestHook(cfg)
    hook.install()
    try:
        md = T.softaff_metadata(preferred="0")
        t = T.Guest("t", vcpus=2, vcpupins={0: "1"}, metadata=md)
        p = T.Guest("p", vcpus=2, vcpupins={0: "1"}, metadata=md, persistent=True)
        for g in (t, p):
            g.start(connect=False)
        for g in (t, p):
            g.wait_vcpu_threads()
        # Saved mid-boot, a guest boots on after its restore: that is load, which softaffd may
        # burst (and, a spike, remember with doors for 60 s) instead of pinning it home, as on a
        # slow host where boots took 5.5 s (CI 2026-12-06). Idle guests are what this test saves.
        T.wait_guests_quiet([t, p], timeout=120)
        d = T.Daemon(cfg).start(wait_socket=False)
        image = os.path.join(T.workdir(), "t.save")
        round_trip(t, d, lambda: T.virsh("save", t.name, image, timeout=120),
                   lambda: T.virsh("restore", image, timeout=120))
        round_trip(p, d, lambda: T.virsh("managedsave", p.name, timeout=120),
                   lambda: T.virsh("start", p.name, timeout=120))
        assert d.stop() == 0
        for g in (t, p):
            assert g.affinity() == {0: {1}, 1: ALL}, "%s after SIGTERM: %s" % (
                g.name, g.affinity_text())
            assert "<softaffd" not in g.dumpxml(), "%s kept softaff's record" % g.name
            g.destroy()
    finally:
        hook.uninstall()


T.run(main)
