#!/usr/bin/env python3
"""softaffctl against a running softaffd and real guests:
- `status --json` matches /proc for every vCPU (CPUs it may run on), homes and states;
- `show` lists the VM's decisions with their reasons;
- `set --preferred` (live) is applied within one tick through the metadata event;
- bad values are refused with a message naming them; no daemon -> exit status 3."""
import json
import re
import os
import subprocess
import time

import softaff_testlib as T


def ctl(*args, check=True):
    exe = T.binary("softaffctl")
    p = subprocess.run([exe] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=30)
    if check and p.returncode != 0:
        raise AssertionError("softaffctl %s: status %d\n%s%s" % (
            " ".join(args), p.returncode, p.stdout, p.stderr))
    return p


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? '
                    r'(-?[0-9.eE+-]+|NaN|[+-]Inf)$')


def check_metrics(path, bursting):
    """The textfile parses as Prometheus text exposition and tells the same as /proc."""
    with open(path) as f:
        text = f.read()
    typed = {}
    values = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            typed[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, "not a Prometheus sample line: %r" % line
        name = m.group(1)
        base = re.sub(r"_(sum|count|bucket)$", "", name)
        assert name in typed or base in typed, "sample before its TYPE: %r" % line
        if typed.get(name) == "counter":
            assert name.endswith("_total"), "counter without _total: %s" % name
        values[line.rsplit(" ", 1)[0]] = float(m.group(3))
    key = [k for k in values if k.startswith("softaff_vm_bursting{") and bursting.name in k]
    assert key and values[key[0]] == 1, "metrics do not show %s bursting: %s" % (
        bursting.name, key)
    T.log("metrics file: %d samples, %d metric families, all valid" % (len(values), len(typed)))


def main():
    T.require_vm()
    T.wait_host_quiet()
    prom = os.path.join(T.workdir(), "softaff.prom")
    cfg, sock = T.write_config(layout="custom", custom="0;1", interval_ms=500,
                               extra={"metrics": {"textfile": prom}})
    a = T.Guest("a", vcpus=2, metadata=T.softaff_metadata(preferred=0))
    b = T.Guest("b", vcpus=2, metadata=T.softaff_metadata(preferred=1))
    for g in (a, b):
        g.start()
    for g in (a, b):
        g.wait_ready()
        g.wait_vcpu_threads()

    # Without a daemon: exit status 3, and the message names the socket.
    p = ctl("status", "--config", cfg, check=False)
    assert p.returncode == 3, "status without softaffd: exit %d (%s)" % (p.returncode, p.stderr)
    assert sock in p.stderr, "the error does not name the socket: %s" % p.stderr

    d = T.Daemon(cfg, socket_path=sock).start(wait_socket=True)
    a.wait_affinity({0}, 2)
    b.wait_affinity({1}, 2)
    a.set_load(2)
    a.wait_affinity({0, 1}, 3, what="a to burst")
    time.sleep(0.6)

    st = json.loads(ctl("status", "--json", "--config", cfg).stdout)
    vms = {v["name"]: v for v in st["vms"]}
    for g, home in ((a, 0), (b, 1)):
        v = vms[g.name]
        aff = g.affinity()
        tids = g.vcpu_tids()
        assert v["home"] == home, "%s: status home %s, want %d" % (g.name, v["home"], home)
        assert T.parse_cpulist(v["vcpus"]) == set().union(*aff.values()), \
            "%s: status says vcpus %s, /proc says %s" % (g.name, v["vcpus"], aff)
        assert v["vcpu_tids"] == [tids[i] for i in range(g.vcpus)], \
            "%s: status tids %s, /proc %s" % (g.name, v["vcpu_tids"], tids)
        assert v["backend"] == "libvirt"
    assert vms[a.name]["state"] == "burst" and vms[b.name]["state"] == "home", vms
    # B never left home: all of its vCPU time was there.
    assert vms[b.name]["home_share"] is not None and vms[b.name]["home_share"] > 0.99, \
        "B's home share %r" % vms[b.name]["home_share"]
    assert vms[a.name]["bursts"] >= 1
    parts = {p["id"]: p for p in st["partitions"]}
    assert a.name in parts[1]["visitor_vms"] and a.name in parts[0]["home_vms"], parts
    text = ctl("status", "--config", cfg).stdout
    T.log("softaffctl status:\n" + text)
    assert max(len(l) for l in text.splitlines()) <= 80, "status is wider than 80 columns"
    shown = ctl("show", a.name, "--config", cfg).stdout
    check_metrics(prom, a)
    assert "burst onto partition 1" in shown, "show lacks the burst decision:\n" + shown

    # set --preferred 1 --live: applied within one tick (a is idle, so it goes to its new home).
    a.set_load(0)
    time.sleep(3)
    t0 = time.monotonic()
    ctl("set", a.name, "--preferred", "1", "--live", "--conf", cfg)
    el = a.wait_affinity({1}, 3, what="a moved to partition 1")
    total = time.monotonic() - t0
    T.log("softaffctl set applied %.3fs after the command returned (%.3fs in all)" % (el, total))
    assert total <= 1.0, "set took %.2fs" % total

    # Bad values: usage errors naming them; nothing written.
    for args, needle in ((["--softness", "150"], "150"), (["--mode", "sideways"], "sideways"),
                         (["--preferred", "7"], "7")):
        p = ctl("set", a.name, *args, "--live", "--conf", cfg, check=False)
        assert p.returncode in (1, 2) and needle in p.stderr, "set %s: %d %s" % (
            args, p.returncode, p.stderr)
    p = ctl("show", "no-such-vm", "--config", cfg, check=False)
    assert p.returncode == 1 and "no-such-vm" in p.stderr, p.stderr
    top = ctl("top", "--iterations", "2", "--interval-ms", "200", "--config", cfg).stdout
    assert "P0" in top and "P1" in top, top
    assert d.stop() == 0


T.run(main)
