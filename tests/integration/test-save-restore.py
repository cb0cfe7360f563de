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
import shutil
import signal
import time

import softaff_testlib as T

HOOK_DIR = "/etc/libvirt/hooks/qemu.d"
HOOK_PATH = os.path.join(HOOK_DIR, "50-softaff")
INSTALL = os.path.join(T.SRC_ROOT, "contrib", "install-hook.sh")
ALL = {0, 1}
_state = {"installed": False}


def install_hook(config):
    hook = T.binary("softaff-hook")
    wrapper = os.path.join(T.workdir(), "hook-wrapper")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n# softaff test-save-restore.py (pid %d)\n"
                'case "$1" in %s%d-*) SOFTAFF_CONFIG=%s exec %s "$@";; esac\nexit 0\n'
                % (os.getpid(), T.NAME_PREFIX, os.getpid(), config, hook))
    os.chmod(wrapper, 0o755)
    if os.path.lexists(HOOK_PATH):
        backup = os.path.join(T.workdir(), "50-softaff.orig")
        shutil.move(HOOK_PATH, backup)
        _state["backup"] = backup
    _state["installed"] = True
    p = T.run_cmd(["bash", INSTALL, wrapper])
    T.log("install-hook.sh: " + p.stdout.strip().replace("\n", " | "))
    time.sleep(0.5)  # libvirtd handles SIGHUP in its event loop


def uninstall_hook():
    if not _state["installed"]:
        return
    _state["installed"] = False
    T.run_cmd(["bash", INSTALL, "--uninstall"], check=False)
    if _state.get("backup"):
        shutil.move(_state["backup"], HOOK_PATH)


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
    install_hook(cfg)
    try:
        md = T.softaff_metadata(preferred="0")
        t = T.Guest("t", vcpus=2, vcpupins={0: "1"}, metadata=md)
        p = T.Guest("p", vcpus=2, vcpupins={0: "1"}, metadata=md, persistent=True)
        for g in (t, p):
            g.start(connect=False)
        for g in (t, p):
            g.wait_vcpu_threads()
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
        uninstall_hook()


T.run(main)
