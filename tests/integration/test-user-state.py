#!/usr/bin/env python3
"""Exact user state: softaff only narrows a VM's own settings, per thread, and gives each thread
exactly its own set back (partitions CPU 0 | CPU 1; every assertion reads /proc and virsh).

- partial pins: vCPU 0 pinned to CPU 1 by the user, home 0: vCPU 0 stays on 1, vCPU 1 goes
  home; after SIGTERM vCPU 0 on 1, vCPU 1 on 0-1; `virsh vcpupin` shows the user's table;
- <emulatorpin> and <iothreadpin> (a guest with one I/O thread) kept while managed and after;
- a user's `virsh vcpupin --live` while managed is the new user setting, during and after;
- SIGKILL + restart with a transient guest: same homes, and SIGTERM afterwards gives back the
  user's sets (softaffd's record in the metadata), not softaff's;
- manage=explicit + SIGHUP releases a VM whose only softaff metadata is softaffd's own.
"""
import re
import time

import softaff_testlib as T

ALL = {0, 1}


def emulatorpin(g):
    out = T.virsh("emulatorpin", g.name, "--live")
    m = re.search(r"\*:\s*(\S+)", out)
    assert m, "virsh emulatorpin: %r" % out
    return T.parse_cpulist(m.group(1))


def iothreadpins(g):
    """{id: set} from `virsh iothreadinfo` (live)."""
    out = {}
    for line in T.virsh("iothreadinfo", g.name, "--live").splitlines():
        m = re.match(r"^\s*(\d+)\s+(\S+)\s*$", line)
        if m:
            out[int(m.group(1))] = T.parse_cpulist(m.group(2))
    return out


def assigned(g):
    m = re.search(r'assigned="(\d+)"', g.metadata_get())
    return int(m.group(1)) if m else None


def settle(what, predicate, timeout=5):
    T.wait_until(predicate, timeout, what=what)


def boot(*guests):
    for g in guests:
        g.start()
    for g in guests:
        g.wait_ready()
        g.wait_vcpu_threads()


def partial_and_io(cfg):
    """Partial pins (persistent), emulator and I/O thread pins (transient), user's live pin."""
    p = T.Guest("p", vcpus=2, vcpupins={0: "1"}, persistent=True,
                metadata=T.softaff_metadata(preferred="0"))
    io = T.Guest("io", vcpus=1, iothreads=1, emulatorpin="1", iothreadpins={1: "1"},
                 metadata=T.softaff_metadata(preferred="0"))
    u = T.Guest("u", vcpus=2, metadata=T.softaff_metadata(preferred="0"))
    boot(p, io, u)
    config_table = p.vcpupin_info(config=True)
    assert config_table == {0: {1}, 1: ALL}, "p's definition: %s" % config_table
    d = T.Daemon(cfg).start(wait_socket=False)
    settle("p: vCPU 0 on its pin 1, vCPU 1 home on 0 (now %s)" % p.affinity_text(),
           lambda: p.affinity() == {0: {1}, 1: {0}})
    settle("io: vCPU home on 0", lambda: io.affinity() == {0: {0}})
    settle("u: both vCPUs home on 0", lambda: u.affinity() == {0: {0}, 1: {0}})
    # The I/O thread and the emulator keep their own pins (CPU 1), though home is CPU 0.
    assert emulatorpin(io) == {1}, "io's emulator while managed: %s" % emulatorpin(io)
    assert iothreadpins(io) == {1: {1}}, "io's I/O thread while managed: %s" % iothreadpins(io)
    # The user pins u's vCPU 1 to CPU 1 live: softaff keeps it (it is outside home 0).
    u.vcpupin(1, "1")
    time.sleep(2.0)  # four ticks
    assert u.affinity() == {0: {0}, 1: {1}}, "u after the user's vcpupin: %s" % u.affinity_text()
    assert "the user pinned vCPU 1 to 1" in d.log_text(), "the daemon did not take the pin"
    assert d.stop() == 0
    assert p.affinity() == {0: {1}, 1: ALL}, "p after SIGTERM: %s" % p.affinity_text()
    assert p.vcpupin_info() == {0: {1}, 1: ALL}, "p's live table: %s" % p.vcpupin_info()
    assert p.vcpupin_info(config=True) == config_table, "p's definition changed"
    assert emulatorpin(io) == {1} and iothreadpins(io) == {1: {1}}, \
        "io after SIGTERM: emulator %s, I/O threads %s" % (emulatorpin(io), iothreadpins(io))
    assert io.affinity() == {0: ALL}, "io's vCPU after SIGTERM: %s" % io.affinity_text()
    assert u.affinity() == {0: ALL, 1: {1}}, "u after SIGTERM: %s" % u.affinity_text()
    assert "<softaffd" not in p.metadata_get() + u.metadata_get(), \
        "the record stayed after SIGTERM: %s" % p.metadata_get()
    for g in (p, io, u):
        g.destroy()


def kill_and_restart(cfg, sock):
    """SIGKILL, restart: same homes; SIGTERM gives back the user's sets, not softaff's."""
    k = T.Guest("k", vcpus=2, vcpupins={0: "0-1"}, metadata=T.softaff_metadata(preferred="auto"))
    boot(k)
    d = T.Daemon(cfg).start(wait_socket=False)
    settle("k's home", lambda: assigned(k) is not None)
    home = {assigned(k)}
    settle("k home on %s" % home, lambda: k.affinity() == {0: home, 1: home})
    record = k.metadata_get()
    assert "<own" in record and "vcpupin" in record, "no record of k's own pins: %s" % record
    d.kill()
    d = T.Daemon(cfg, log_path=T.os.path.join(T.workdir(), "softaffd-2.log"))
    d.start(wait_socket=False)
    time.sleep(1.5)
    assert assigned(k) == min(home), "k's home changed across the restart"
    assert k.affinity() == {0: home, 1: home}, "k after the restart: %s" % k.affinity_text()
    assert "come from softaffd's record" in d.log_text(), d.log_text()[-2000:]
    assert d.stop() == 0
    assert k.affinity() == {0: ALL, 1: ALL}, "k after SIGTERM: %s (softaff's pins?)" % (
        k.affinity_text())
    assert k.vcpupin_info() == {0: ALL, 1: ALL}
    k.destroy()


def explicit_releases(sock):
    """A VM managed by default gets only softaffd's child; manage=explicit releases it."""
    cfg, _ = T.write_config(layout="custom", custom="0;1", interval_ms=500, manage="all",
                            socket_path=sock)
    e = T.Guest("e", vcpus=2)
    boot(e)
    d = T.Daemon(cfg, log_path=T.os.path.join(T.workdir(), "softaffd-3.log"))
    d.start(wait_socket=False)
    settle("e's home", lambda: assigned(e) is not None)
    md = e.metadata_get()
    assert 'created="yes"' in md and "mode=" not in md, "softaffd's element: %s" % md
    T.write_config(path=cfg, layout="custom", custom="0;1", interval_ms=500, manage="explicit",
                   socket_path=sock)
    d.proc.send_signal(T.signal.SIGHUP)
    settle("e released to 0-1 (now %s)" % e.affinity_text(), lambda: e.all_on(ALL))
    assert "no softaff metadata and manage=explicit" in d.log_text(), d.log_text()[-2000:]
    assert d.stop() == 0
    e.destroy()


def main():
    T.require_vm()
    T.wait_host_quiet()
    cfg, sock = T.write_config(layout="custom", custom="0;1", interval_ms=500)
    partial_and_io(cfg)
    kill_and_restart(cfg, sock)
    explicit_releases(sock)


T.run(main)
