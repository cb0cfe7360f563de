"""The sensing scenario of issue 23 in the multi-node test host (mnhost.py), shared by
test-sensing.py (assertions) and bench/run-sensing.py (figures).

Inside the host (nodes 0 and 1, one CPU each), with libvirt:
  A  2 vCPUs, softaff preferred="1", spinning: it boots the host's kernel with idle=poll and no
     root device (rootwait), so both vCPUs poll in the guest's idle loop for good;
  B  1 vCPU, softaff preferred="0", created paused: truly idle; resumed, it boots the same way
     on its one vCPU, a busy owner on node 0.
Phases (Run methods): A's vCPU run time with no affinity and no softaffd (free); softaffd with
A strict (partition 0 idle: the sensor's utilization against /proc/stat); A soft (bursts onto
node 0: forced retreats, A's run time, the partitions as status shows them); B resumed (A's
vCPUs leave CPU 0). Python 3 standard library only."""

import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnhost  # noqa: E402

INTERVAL_MS = 500
# [actuation] mode=pin: issue 23 is the re-pinning path, the fallback wherever sched_ext is not
# there (on 7.2, auto would take sched_ext; test-sched-ext.py covers that).
CONF = """[daemon]
interval_ms={interval}
socket=/run/softaff/softaffd.sock
[partitions]
layout=node
[policy]
manage=explicit
[memory]
migrate=off
[sensing]
mode={mode}
[actuation]
mode=pin
"""
# One record: "@@ <uptime>", /proc/stat's cpu lines, A's vCPU run times, and status (JSON) when
# softaffd runs; polled from the test, on CPU 0 (on CPU 1, behind A's two spinning vCPUs, it
# starves; its few % of CPU 0 are unmanaged load there, well under the margin).
POLL = """read -r up _ </proc/uptime
echo "@@ $up"
grep '^cpu[0-9]' /proc/stat
pid=$(cat /run/libvirt/qemu/mn-A.pid)
for t in /proc/$pid/task/*; do
    case "$(cat $t/comm)" in "CPU "*) echo "vcpu $(cut -d' ' -f1 $t/schedstat)";; esac
done
[ -S /run/softaff/softaffd.sock ] && timeout 20 {ctl} status --json 2>/dev/null
exit 0
"""


# softaffd in the sched_ext tests and benchmark (test-sched-ext.py, test-sched-home.py,
# bench/run-sched.py): [actuation] mode={mode}, [sensing] at its default (auto).
SCHED_CONF = """[daemon]
interval_ms=500
socket=/run/softaff/softaffd.sock
[partitions]
layout=node
[policy]
manage=explicit
[memory]
migrate=off
[actuation]
mode={mode}
"""


def expect(cond, what, detail=""):
    """Raises AssertionError(what, detail) unless cond; logs "ok: what" otherwise."""
    if not cond:
        raise AssertionError(what + ("\n" + detail if detail else ""))
    mnhost.log("ok: " + what)


def cpulist(text):
    """A CPU list ("0,1", "0-1", "1") as a set of CPUs."""
    cpus = set()
    for part in text.split(","):
        if not part or part == "-":
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def log(msg):
    mnhost.log(msg)


def log_tails(h, log_lines, dmesg_lines):
    """At a test's end: softaffd's log and the kernel's, or why the host is gone."""
    if mnhost.log_tail(h, "softaffd log tail", "tail -n %d /var/log/softaffd.log" % log_lines):
        mnhost.log_tail(h, "dmesg tail", "dmesg | tail -n %d" % dmesg_lines)


def domain_xml(name, vcpus, preferred, mode, kernel, mib=128):
    meta = ("<metadata><softaff:affinity xmlns:softaff='urn:softaff:domain:1' mode='%s' "
            "preferred='%d'/></metadata>" % (mode, preferred))
    # No disk: the kernel waits for its root device for good; idle=poll keeps every vCPU busy.
    boot = ("<kernel>%s</kernel><cmdline>console=ttyS0 root=/dev/vda rootwait idle=poll "
            "panic=0</cmdline>" % kernel)
    return ("<domain type='qemu'><name>mn-{n}</name>{meta}<memory unit='MiB'>{mib}</memory>"
            "<vcpu placement='static'>{vcpus}</vcpu>"
            "<os><type arch='x86_64' machine='pc'>hvm</type>{boot}</os>"
            "<features><acpi/><apic/></features><on_crash>destroy</on_crash>"
            "<devices><controller type='usb' model='none'/><memballoon model='none'/>"
            "<serial type='file'><source path='/tmp/mn-{n}.console'/></serial></devices>"
            "</domain>").format(n=name, meta=meta, mib=mib, vcpus=vcpus, boot=boot)


def cpu_busy(a, b):
    """Per CPU: busy fraction between two /proc/stat readings {cpu: [fields]}."""
    out = {}
    for cpu in a:
        d = [y - x for x, y in zip(a[cpu], b[cpu])]
        total = sum(d[:8])
        idle = d[3] + d[4]
        out[cpu] = 1.0 - idle / total if total > 0 else 0.0
    return out


class Record:
    def __init__(self, t, stat, vcpus, status):
        self.t, self.stat, self.vcpus, self.status = t, stat, vcpus, status

    def part(self, pid):
        for p in (self.status or {}).get("partitions", []):
            if p["id"] == pid:
                return p
        return None

    def vm(self, name):
        for v in (self.status or {}).get("vms", []):
            if v["name"] == "mn-" + name:
                return v
        return None


class Run:
    def __init__(self, h, build, mode="auto"):
        self.h, self.build, self.mode = h, build, mode
        self.ctl = build + "/ctl/softaffctl"
        self.kernel = None

    def sh(self, cmd, timeout=120):
        return self.h.check(cmd, timeout=timeout)

    def uptime(self):
        return float(self.sh("cut -d' ' -f1 /proc/uptime").split()[0])

    def start_libvirt(self):
        self.sh("bash %s/contrib/start-libvirt.sh" % mnhost.SRC_ROOT, timeout=300)
        self.kernel = self.sh("ls /boot/vmlinuz-* | head -1").strip()

    def create(self, name, vcpus, preferred, mode="soft", paused=False):
        xml = domain_xml(name, vcpus, preferred, mode, self.kernel)
        self.sh("cat >/tmp/mn-%s.xml <<'EOF'\n%s\nEOF\nvirsh -c qemu:///system create %s "
                "/tmp/mn-%s.xml" % (name, xml, "--paused" if paused else "", name), timeout=300)

    def start_guests(self, a_mode="strict"):
        """B paused, A running; waits until both of A's vCPUs spin (its kernel brought up the
        second one) and starts the poller."""
        self.create("B", 1, 0, paused=True)
        self.create("A", 2, 1, mode=a_mode)
        self.sh("cat >/tmp/poll.sh <<'EOF'\n%sEOF" % POLL.format(ctl=self.ctl))
        t0 = time.monotonic()
        recs = []
        while True:
            recs = (recs + [self.poll()])[-3:]
            if len(recs) >= 3:
                a, b = recs[-3], recs[-1]
                runs = [(y - x) / 1e9 / (b.t - a.t) for x, y in zip(a.vcpus, b.vcpus)]
                if len(runs) == 2 and min(runs) > 0.2:
                    log("A's 2 vCPUs spin (%s CPU-s/s) after %.0fs" % (
                        ", ".join("%.2f" % r for r in runs), time.monotonic() - t0))
                    return
            if time.monotonic() - t0 > 300:
                raise AssertionError("A's vCPUs do not both spin after 300 s: %s" % (
                    [r.vcpus for r in recs[-3:]]))
            time.sleep(3)

    def start_softaffd(self):
        self.sh("mkdir -p /etc/softaff /run/softaff && cat >/etc/softaff/softaff.conf <<'EOF'\n"
                + CONF.format(interval=INTERVAL_MS, mode=self.mode) + "EOF")
        # softaffd on CPU 1 too at first (its start is a burst of CPU); it ticks from there.
        self.h.start_softaffd(self.build)

    def stop_softaffd(self):
        self.h.run("pkill -x softaffd; for i in $(seq 50); do pgrep -x softaffd >/dev/null || "
                   "break; sleep 0.2; done; rm -f /run/softaff/softaffd.sock", timeout=60)

    def status(self):
        return json.loads(self.sh("taskset -c 0 %s status --json" % self.ctl, timeout=60))

    def poll(self):
        """One record now (see POLL)."""
        out = self.h.run("taskset -c 0 bash /tmp/poll.sh", timeout=60).out
        for rec in parse(out):
            return rec
        raise AssertionError("no record in the poll's output: %r" % out[-500:])

    def a_run(self, recs):
        """A's vCPU run over the records, in CPUs."""
        full = [r for r in recs if len(r.vcpus) == 2]  # a record may miss a thread's read
        if len(full) < 2 or full[-1].t <= full[0].t:
            raise AssertionError("A's vCPU threads not read in the window: %s" % (
                [r.vcpus for r in recs]))
        a, b = full[0], full[-1]
        return sum(y - x for x, y in zip(a.vcpus, b.vcpus)) / 1e9 / (b.t - a.t)

    def measure(self, seconds):
        """A record now and one after seconds. Nothing in between: in this TCG host a poll
        (bash, softaffctl) costs tens of ms of CPU 0, itself load on the partition measured
        (polled every 2 s it read 42-60% of CPU 0 and sent A home)."""
        recs = [self.poll()]
        time.sleep(seconds)
        recs.append(self.poll())
        return recs

    def set_a(self, mode):
        self.sh("%s set mn-A --mode %s --live" % (self.ctl, mode), timeout=60)

    def log_tail(self, n=40):
        return self.h.run("tail -n %d /var/log/softaffd.log" % n, timeout=30).out

    def stop(self):
        pass


def parse(out):
    """The records in a poll's output."""
    recs = []
    for chunk in out.split("@@ ")[1:]:
        lines = chunk.split("\n")
        t = float(lines[0])
        stat, vcpus, status = {}, [], None
        for k, line in enumerate(lines[1:]):
            f = line.split()
            if f and re.match(r"cpu\d+$", f[0]):
                stat[int(f[0][3:])] = [int(x) for x in f[1:]]
            elif f and f[0] == "vcpu":
                vcpus.append(int(f[1]))
            elif line.startswith("{"):
                # softaffctl's JSON, on one line or more: the rest of the record
                try:
                    status = json.JSONDecoder().raw_decode("\n".join(lines[1 + k:]))[0]
                except ValueError:
                    log("unreadable status: %r" % "\n".join(lines[1 + k:])[:300])
                break
        recs.append(Record(t, stat, vcpus, status))
    return recs


def utilization_pairs(recs, pid):
    """(status utilization of partition pid, /proc/stat busy of its CPU) per consecutive records
    with a status; the partition is one CPU, its id."""
    pairs = []
    for a, b in zip(recs, recs[1:]):
        p = b.part(pid)
        if p is None or a.stat.get(pid) is None:
            continue
        pairs.append((p["utilization"], cpu_busy(a.stat, b.stat)[pid]))
    return pairs


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def partition_summary(recs, pid):
    """Partition pid over the records' window, from status' running totals (cpu_seconds: the
    difference of the first and last reading is the window's exact average, as /proc/stat's
    is): utilization, owners, visitors and unmanaged; status' own averaged utilization at the
    last record (about its last 2 s: what `softaffctl status` shows); and its CPU's busy share
    from /proc/stat over the same records (the partition is one CPU, its id)."""
    stat = cpu_busy(recs[0].stat, recs[-1].stat)[pid]
    parts = [r.part(pid) for r in recs]
    if len(parts) < 2 or not parts[0] or not parts[-1]:
        raise AssertionError("no status of partition %d at both ends of the window" % pid)
    a, b = parts[0]["cpu_seconds"], parts[-1]["cpu_seconds"]
    secs = b["seconds"] - a["seconds"]
    if secs <= 0:
        raise AssertionError("softaffd did not tick in the window: %s, %s" % (a, b))
    ncpu = parts[-1]["cpu_count"]
    d = {k: (b[k] - a[k]) / secs for k in ("owners", "visitors", "unmanaged")}
    return {"utilization": (d["owners"] + d["visitors"] + d["unmanaged"]) / ncpu,
            "owners": d["owners"], "visitors": d["visitors"], "unmanaged": d["unmanaged"],
            "status_now": parts[-1]["utilization"], "proc_stat_busy": stat,
            "sensed_s": secs}


def vm_counter(recs, name, key):
    """The increase of a VM's status counter over the records."""
    vals = [r.vm(name)[key] for r in recs if r.vm(name)]
    return vals[-1] - vals[0] if vals else None
