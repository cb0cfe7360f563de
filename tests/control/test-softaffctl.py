#!/usr/bin/env python3
"""Unit tests of softaffctl without a host to manage: status, show and top against a small
unix-socket server standing in for softaffd (canned replies, among them a stalled, an unmanaged
and an invalid VM); partitions and advise on a fixture host (SOFTAFF_SYSFS_ROOT,
SOFTAFF_PROC_ROOT); set through libvirt's in-process test driver (test:///default). TAP output.

Usage: test-softaffctl.py [SOFTAFFCTL]   (default: $SOFTAFF_BUILD_DIR/ctl/softaffctl)
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("SOFTAFF_TEST_DATA", os.path.join(HERE, "..", "data"))


def ctl_path():
    if len(sys.argv) > 1:
        return sys.argv[1]
    build = os.environ.get("SOFTAFF_BUILD_DIR")
    if not build:
        sys.exit("SOFTAFF_BUILD_DIR is not set and no softaffctl path was given")
    return os.path.join(build, "ctl", "softaffctl")


CTL = ctl_path()
WORK = tempfile.mkdtemp(prefix="softaffctl-test-")
SOCK = os.path.join(WORK, "sock")
CONFIG = os.path.join(WORK, "softaff.conf")
LONG_NAME = "db-with-a-very-long-generated-name-t8667-a"


def vm(name, state, **extra):
    o = {"name": name, "uuid": "uuid-" + name, "backend": "libvirt", "state": state,
         "reason": None, "mode": "soft", "preferred": "auto", "softness": 50, "home": None,
         "vcpu_count": 2, "allowed": "0-63", "vcpus": None, "emulator": None, "visiting": [],
         "home_share": None, "bursts": 0, "retreats": 0, "changes": 0, "run_delay_cpus": 0.0,
         "stalled": None}
    o.update(extra)
    return o


STALLED = {"since": "2025-06-01T10:00:03Z", "command": "write-assigned", "seconds": 12.46}
STOPPED = {"since": "2025-06-01T10:00:05Z", "command": None,
           "reason": "QEMU process 4321 is stopped", "seconds": 7.0}
VMS = [
    vm("web", "burst", home=1, vcpu_count=4, vcpus="8-23,40-55", emulator="8-15,40-47",
       visiting=[2], home_share=0.8, bursts=3, retreats=2, changes=7, run_delay_cpus=0.25),
    vm(LONG_NAME, "stalled", home=2, vcpu_count=8, vcpus="16-23,48-55", home_share=1.0,
       stalled={"since": "2025-06-01T10:00:03Z", "command": "pin", "seconds": 3.24}),
    vm("old", "unmanaged", mode="off", reason='mode="off" in its metadata'),
    vm("bad", "invalid", reason='softness="150" is out of range (0-100)'),
]
STATUS = {
    "ok": True,
    "daemon": {"version": "9.9.9", "started": "2025-06-01T10:00:00Z", "ticks": 1234,
               "interval_ms": 500, "layout": "node", "dry_run": False, "tick_cpu_ms": 1.5},
    "vms": VMS,
    "partitions": [
        {"id": 0, "cpus": "0-7,32-39", "utilization": 0.1, "owners": 0.0, "visitors": 0.0,
         "unmanaged": 1.5, "home_vms": [], "visitor_vms": []},
        {"id": 1, "cpus": "8-15,40-47", "utilization": 0.9, "owners": 3.5, "visitors": 0.0,
         "unmanaged": 0.0, "home_vms": ["web"], "visitor_vms": []},
        {"id": 2, "cpus": "16-23,48-55", "utilization": 0.5, "owners": 1.0, "visitors": 1.25,
         "unmanaged": 0.0, "home_vms": [LONG_NAME], "visitor_vms": ["web"]},
    ],
}
DECISIONS = [{"time": "10:00:01", "state": "home", "vcpus": "8-15", "reason": "placed at home"},
             {"time": "10:00:02", "state": "burst", "vcpus": "8-23",
              "reason": "burst onto partition 2"}]


def show_reply(name):
    for v in VMS + [vm("db", "stalled", home=2, stalled=STALLED),
                    vm("frozen", "stalled", home=1, stalled=STOPPED)]:
        if v["name"] == name:
            return {"ok": True, "vm": dict(v, decisions=DECISIONS if name == "web" else [])}
    return {"ok": False, "error": "no VM named '%s'" % name}


def headroom_reply():
    """A "headroom" reply as softaffd gives it (daemon/fleet.c) for the epyc-4n-2llc node layout
    (4 partitions of 16 CPUs, bins of 0.25 CPU): an hour of owners' demand at 12.25 CPUs on
    partition 0, 5.25 on 1, 0.25 on 2 (which has 1 GiB free), 2.25 on 3; class "web" wanted
    0.5 CPU per vCPU."""
    now = int(time.time() * 1000)
    slot = now // 60000
    bins = {0: 48, 1: 20, 2: 0, 3: 8}
    parts, inputs = [], []
    for pid, b in bins.items():
        parts.append({"id": pid, "capacity": 16,
                      "slots": [{"slot": slot - k, "bins": [[b, 60000]]} for k in range(60)]})
        inputs.append({"id": pid, "capacity": 16, "home_vcpus": 4,
                       "memory_available_bytes": (1 if pid == 2 else 16) << 30})
    model = {"version": 1, "window_s": 3600, "slot_ms": 60000, "partitions": parts,
             "classes": [{"name": "web", "used_ms": 1000000.0, "vcpu_ms": 2000000.0,
                          "at_ms": now}]}
    return {"ok": True, "now_ms": now, "quantile": 0.95, "window_s": 3600,
            "partitions": inputs, "model": model}


class FakeDaemon:
    """Listens on SOCK like softaffd, answers status and show from the tables above; in mode
    'garbage' it answers every request with a line that is not JSON."""

    def __init__(self, mode="ok"):
        self.mode = mode
        self.requests = []
        if os.path.exists(SOCK):
            os.unlink(SOCK)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(SOCK)
        self.srv.listen(8)
        self.srv.settimeout(0.1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def answer(self, line):
        req = json.loads(line)
        self.requests.append(req)
        if self.mode == "garbage":
            return b"<html>\n"
        if req["command"] == "status":
            return json.dumps(STATUS).encode() + b"\n"
        if req["command"] == "headroom":
            return json.dumps(headroom_reply()).encode() + b"\n"
        return json.dumps(show_reply(req["domain"])).encode() + b"\n"

    def loop(self):
        while not self.stop.is_set():
            try:
                c, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            with c:
                c.settimeout(2)
                buf = b""
                while b"\n" not in buf:
                    chunk = c.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                c.sendall(self.answer(buf.decode()))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self.srv.close()
        os.unlink(SOCK)


def write_config():
    with open(CONFIG, "w") as f:
        f.write("[daemon]\nsocket=%s\n[partitions]\nlayout=node\n" % SOCK)


def run(*args, host="epyc-4n-2llc"):
    env = dict(os.environ, SOFTAFF_CONFIG=CONFIG, LC_ALL="C",
               SOFTAFF_SYSFS_ROOT=os.path.join(DATA, host, "sys"),
               SOFTAFF_PROC_ROOT=os.path.join(DATA, "proc"))
    p = subprocess.run([CTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def table_rows(text, header):
    """The rows of the table whose header line starts with header, as lists of columns."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(header))
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


# ---- the daemon's commands -----------------------------------------------------------------


def test_status_table():
    with FakeDaemon() as d:
        rc, out, err = run("status")
    check(rc == 0 and err == "", "exit %d, stderr %r" % (rc, err))
    check(d.requests == [{"command": "status"}], "requests %r" % d.requests)
    check(out.startswith("softaffd 9.9.9: layout node, tick 500 ms, 1234 ticks\n"), out)
    states = {r[0]: r[1] for r in table_rows(out, "VM ")}
    check(states == {"web": "burst", "~-name-t8667-a": "stalled", "old": "unmanaged",
                     "bad": "invalid"}, "states %r in\n%s" % (states, out))
    parts = table_rows(out, "PARTITION")
    check([r[0] for r in parts] == ["0", "1", "2"] and parts[1][2] == "90%", "partitions %r" % parts)
    notes = out.split("\n\n")[-1].splitlines()
    check(notes == [" %s: stalled: pin command unanswered for 3.2 s" % LONG_NAME,
                    ' old: mode="off" in its metadata',
                    ' bad: softness="150" is out of range (0-100)'], "notes %r" % notes)
    tables = out.split("\n\n")[:-1]
    widest = max(len(l) for t in tables for l in t.splitlines())
    check(widest <= 80, "the tables are %d columns wide:\n%s" % (widest, out))


def test_status_without_stalled_vm():
    global VMS
    saved = VMS
    VMS = [v for v in VMS if v["state"] != "stalled"]
    STATUS["vms"] = VMS
    try:
        with FakeDaemon():
            rc, out, err = run("status")
    finally:
        VMS = saved
        STATUS["vms"] = VMS
    check(rc == 0 and "stalled" not in out, "%d %r" % (rc, out))
    check(out.endswith('\n\n old: mode="off" in its metadata\n'
                       ' bad: softness="150" is out of range (0-100)\n'), out)


def test_json_passthrough():
    with FakeDaemon():
        rc, out, err = run("status", "--json")
        check(rc == 0 and json.loads(out) == STATUS, "status --json: %d %r" % (rc, out[:200]))
        rc, out, err = run("show", "db", "--json")
        check(rc == 0 and json.loads(out) == show_reply("db"), "show --json: %d %r" % (rc, out))


def test_show():
    with FakeDaemon() as d:
        rc, out, err = run("show", "db")
        check(rc == 0 and err == "", "%d %r" % (rc, err))
        lines = out.splitlines()
        check(lines[0] == "db (uuid-db, backend libvirt)", lines)
        check(lines[1].startswith("  state stalled, mode soft,"), lines)
        check("  stalled: write-assigned command unanswered for 12.5 s "
              "(since 2025-06-01T10:00:03Z)" in lines, out)
        rc, out, err = run("show", "frozen")
        check(rc == 0 and "  stalled: QEMU process 4321 is stopped for 7.0 s "
              "(since 2025-06-01T10:00:05Z)" in out.splitlines(), out)
        rc, out, err = run("show", "web")
        check(rc == 0 and "stalled" not in out, out)
        check("  10:00:02  burst vCPUs 8-23      burst onto partition 2" in out.splitlines(), out)
        rc, out, err = run("show", "old")
        check(rc == 0 and '  mode="off" in its metadata' in out.splitlines(), out)
    check([r.get("domain") for r in d.requests] == ["db", "frozen", "web", "old"], d.requests)


def test_show_unknown_vm():
    with FakeDaemon():
        rc, out, err = run("show", "no-such-vm")
    check(rc == 1 and out == "", "exit %d out %r" % (rc, out))
    check("refused the show request: no VM named 'no-such-vm'" in err and SOCK in err, err)


def test_top():
    with FakeDaemon() as d:
        rc, out, err = run("top", "--iterations", "2", "--interval-ms", "10")
    check(rc == 0 and err == "", "%d %r" % (rc, err))
    check(len(d.requests) == 2, "requests %r" % d.requests)
    screens = out.split("softaff top  ")[1:]
    check(len(screens) == 2, out)
    for s in screens:
        check("P1   CPUs 8-15,40-47   [##################..]  90%" in s, s)
        check(" %s: stalled: pin command unanswered for 3.2 s" % LONG_NAME in s, s)
        states = {r[0]: r[1] for r in table_rows(s, "VM ")}
        check(states["~-name-t8667-a"] == "stalled" and states["bad"] == "invalid", states)


def test_no_daemon():
    for args in (["status"], ["show", "web"], ["top", "-n", "1"]):
        rc, out, err = run(*args)
        check(rc == 3, "%s: exit %d %r" % (args, rc, err))
        check(SOCK in err and "not running" in err, "%s: %r" % (args, err))
    # A socket file nobody listens on.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(SOCK)
    s.close()
    try:
        rc, out, err = run("status")
    finally:
        os.unlink(SOCK)
    check(rc == 3 and SOCK in err, "stale socket: %d %r" % (rc, err))


def test_bad_reply():
    with FakeDaemon("garbage"):
        rc, out, err = run("status")
    check(rc == 1 and out == "", "exit %d out %r" % (rc, out))
    check('answered the status request with "<html>"' in err and SOCK in err, err)


def test_usage_errors():
    for args, needle in ((["status", "x"], "unexpected argument 'x'"),
                         (["show"], "which DOMAIN?"),
                         (["show", "a", "b"], "unexpected argument 'b'"),
                         (["top", "-i", "70000"], "--interval-ms 0-60000"),
                         (["bogus"], "unknown command 'bogus'")):
        rc, out, err = run(*args)
        check(rc == 2 and needle in err, "%s: %d %r" % (args, rc, err))


# ---- the host's commands -------------------------------------------------------------------


def test_partitions():
    rc, out, err = run("partitions", "--interval-ms", "10")
    check(rc == 0 and err == "", "%d %r" % (rc, err))
    check(out.startswith("layout node, 4 partitions, online CPUs 0-63\n"), out)
    rows = table_rows(out, "PARTITION")
    rc, js, err = run("partitions", "--interval-ms", "10", "--json")
    check(rc == 0, err)
    parts = json.loads(js)["partitions"]
    check([[str(p["id"]), str(p["node"]), str(p["cpu_count"]), p["cpus"]] for p in parts] ==
          [[r[0], r[1], r[2], r[-1]] for r in rows], "text %r, json %r" % (rows, parts))
    check(parts[0]["distances"] == [0, 12, 32, 32], parts[0])
    dist = out.split("\ndistances\n")[1].splitlines()
    check(dist[0].split() == ["0", "1", "2", "3"] and dist[3].split() == ["2", "32", "32", "0",
                                                                           "12"], dist)
    # A partition without online CPUs, a CPU in none, and one partition: no distance matrix.
    rc, out, err = run("partitions", "--interval-ms", "10", host="sparse-8n")
    check(rc == 0 and "CPUs in no partition: 28\n" in out and "(none online)" in out, out)
    rc, out, err = run("partitions", "--interval-ms", "10", "--layout", "custom", "--custom",
                       "0-63")
    check(rc == 0 and "distances" not in out, out)
    for args, needle in ((["--interval-ms", "5"], "allowed 10-60000"),
                         (["--layout", "custom"], "needs --custom"),
                         (["--custom", "0-3"], "needs --layout custom")):
        rc, out, err = run("partitions", *args)
        check(rc == 2 and needle in err, "%s: %d %r" % (args, rc, err))


def test_advise():
    rc, out, err = run("advise", "--vcpus", "4", "--allowed", "8-15", "--layout", "llc")
    check(rc == 0 and err == "", "%d %r" % (rc, err))
    lines = out.splitlines()
    check(lines[0] == "partition 2 (layout llc, node 1): CPUs 8-11,40-43", lines)
    check(lines[1] == 'metadata: <softaff:affinity xmlns:softaff="urn:softaff:domain:1" '
          'preferred="2"/>', lines)
    rc, out, err = run("advise", "--vcpus", "4", "--allowed", "8-15", "--layout", "llc", "--json")
    j = json.loads(out)
    check(rc == 0 and (j["partition"], j["node"], j["cpus"]) == (2, 1, "8-11,40-43"), j)
    check(lines[2] == "reason: " + j["reason"], (lines, j))
    check(j["history"] is False and j["history_source"].startswith("none: ") and
          SOCK in j["history_source"], j)
    check(lines[3].startswith("history: none: "), lines)
    for args, code, needle in ((["--vcpus", "0"], 2, "a VM needs"),
                               (["--vcpus", "2", "--demand", "3"], 2, "--demand 3"),
                               (["--vcpus", "2", "--memory", "-1"], 2, "not a size in MiB"),
                               (["--vcpus", "2", "--allowed", "x"], 2, "--allowed"),
                               (["--vcpus", "2", "--allowed", "200-300"], 1, "200-300")):
        rc, out, err = run("advise", *args)
        check(rc == code and needle in err, "%s: %d %r" % (args, rc, err))


def test_advise_headroom():
    """advise by softaffd's histograms: the fitting partition with the most headroom left."""
    with FakeDaemon() as d:
        rc, out, err = run("advise", "--vcpus", "4", "--memory", "4096", "--json")
        j = json.loads(out)
        check(rc == 0 and err == "", "%d %r" % (rc, err))
        check(d.requests[-1] == {"command": "headroom"}, d.requests)
        check(j["history"] is True and j["history_source"] == "softaffd (%s)" % SOCK, j)
        # Headroom 16 - 1.6 - p95: 2.15, 9.15, 14.15 (1 GiB: no room), 12.15.
        heads = [round(p["headroom"], 6) for p in j["partitions"]]
        check(heads == [2.15, 9.15, 14.15, 12.15], heads)
        check((j["partition"], j["fits"], j["demand"], j["demand_learned"]) == (3, True, 4.0, False),
              j)
        check(abs(j["headroom_left"] - 8.15) < 1e-9, j)
        check(abs(j["partitions"][0]["coverage"] - 1.0) < 1e-9, j)
        # The class's mean: 0.5 per vCPU.
        rc, out, err = run("advise", "--vcpus", "4", "--memory", "4096", "--class", "web",
                           "--json")
        j = json.loads(out)
        check((j["partition"], j["demand"], j["demand_learned"]) == (3, 2.0, True), j)
        # Only partition 1's CPUs allowed.
        rc, out, err = run("advise", "--vcpus", "4", "--allowed", "8-15", "--json")
        j = json.loads(out)
        check((j["partition"], j["fits"]) == (1, True) and abs(j["headroom_left"] - 5.15) < 1e-9,
              j)
        # Too big for any: the most headroom all the same, said.
        rc, out, err = run("advise", "--vcpus", "16", "--memory", "4096")
        lines = out.splitlines()
        check(rc == 0 and lines[0].startswith("partition 3 "), out)
        check(lines[2].startswith("reason: fits nowhere"), lines)
        check(lines[3] == "history: softaffd (%s)" % SOCK, lines)
        # softaffd's partitions are not these: no history.
        rc, out, err = run("advise", "--vcpus", "4", "--layout", "llc", "--json")
        j = json.loads(out)
        check(j["history"] is False and "differ" in j["history_source"], j)


def test_set_through_libvirt_test_driver():
    uri = ["--uri", "test:///default"]
    rc, out, err = run("set", "test", "--preferred", "1", "--softness", "20", *uri)
    check(rc == 0 and err == "", "%d %r" % (rc, err))
    check(out.splitlines() == [
        'test: live metadata set: <affinity mode="soft" preferred="1" softness="20"/>',
        'test: persistent metadata set: <affinity mode="soft" preferred="1" softness="20"/>'],
        out)
    rc, out, err = run("set", "test", "--mode", "strict", "--config", *uri)
    check(rc == 0 and out == 'test: persistent metadata set: <affinity mode="strict" '
          'preferred="auto"/>\n', out)
    for args, code, needle in ((["test", "--preferred", "7"] + uri, 1, 'preferred="7"'),
                               (["nope", "--mode", "soft"] + uri, 1, "no domain named 'nope'"),
                               (["test", "--mode", "sideways"] + uri, 2, "sideways"),
                               (["test", "--softness", "150"] + uri, 2, "150"),
                               (["test"] + uri, 2, "nothing to set"),
                               (["test", "--mode", 'a"b'] + uri, 2, "may not contain")):
        rc, out, err = run("set", *args)
        check(rc == code and needle in err and out == "", "%s: %d %r %r" % (args, rc, out, err))


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    if not os.access(CTL, os.X_OK):
        print("1..0 # SKIP %s not built" % CTL)
        return 1
    write_config()
    print("1..%d" % len(tests))
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        try:
            fn()
            print("ok %d %s" % (i, name))
        except Exception as e:  # noqa: BLE001 - report every failure
            failed += 1
            for line in str(e).splitlines() or [repr(e)]:
                print("# %s" % line)
            print("not ok %d %s" % (i, name))
        sys.stdout.flush()
    subprocess.run(["rm", "-rf", WORK], check=False)
    return 1 if failed else 0


sys.exit(main())
