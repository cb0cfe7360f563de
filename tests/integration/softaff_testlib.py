"""softaff integration test helpers: real libvirt guests running the load generator.

Python 3 standard library only (Debian 12's /usr/bin/python3 is enough).

Typical use in a test script:

    import softaff_testlib as T

    def main():
        a = T.Guest("a", vcpus=2, metadata=T.softaff_metadata(preferred=0))
        a.start()
        a.wait_ready()
        a.set_load(2)
        ...

    T.run(main)          # skip (77) / fail (1) / pass (0); always cleans up

Environment:
  SOFTAFF_BUILD_DIR    meson build root; softaffd is $SOFTAFF_BUILD_DIR/softaffd
  SOFTAFF_INSTALLED=1  use the installed programs (/usr/sbin/softaffd, ...) instead: binary()
  SOFTAFF_REQUIRE_VM=1 fail instead of skipping when libvirt/QEMU cannot be used
  SOFTAFF_CACHE        guest kernel/initramfs cache (default /var/cache/softaff-test)
  SOFTAFF_TEST_URI     libvirt URI (default qemu:///system)
  SOFTAFF_TEST_KEEP=1  keep the per-test work directory (logs) after the run
  SOFTAFF_QUIET_MAX, SOFTAFF_QUIET_TIMEOUT   see wait_host_quiet()
  SOFTAFF_DOMAIN_TYPE=kvm|qemu  force KVM or TCG guests (default: probe once, see domain_type())
  SOFTAFF_KVM_PROBE_S  seconds the test guest gets to boot under KVM in the probe (default 3)

Leftovers of killed runs (meson's timeout sends SIGTERM, then SIGKILL 0.5 s later, too soon to
destroy a guest) are swept by sweep(): at the start and end of every run(), and by a watchdog
process run() starts in its own session, which sweeps this test's leftovers once the test has
exited, however it died. `python3 softaff_testlib.py --sweep` sweeps by hand.
"""

import atexit
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from xml.sax.saxutils import escape as _xml_escape

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("SOFTAFF_CACHE", "/var/cache/softaff-test")
URI = os.environ.get("SOFTAFF_TEST_URI", "qemu:///system")
NAME_PREFIX = "softaff-t"
METADATA_NS = "urn:softaff:domain:1"

_VCPU_COMM = re.compile(r"^CPU (\d+)/(TCG|KVM)$")
_STALE_NAME = re.compile(r"^" + NAME_PREFIX + r"(\d+)-")
# Every process a test starts (softaffd, QEMU of QemuGuest) inherits this: the sweep finds the
# ones whose test has gone. libvirt's QEMU does not (libvirtd gives it a clean environment).
OWNER_ENV = "SOFTAFF_TEST_PID"
WORKDIR_PREFIX = "softaff-test-"
_STALE_WORKDIR = re.compile(r"^" + WORKDIR_PREFIX + r"(\d+)-")
_SWEPT_COMMS = re.compile(r"^(softaffd|qemu-system-.*)$")
HOOK_PATH = "/etc/libvirt/hooks/qemu.d/50-softaff"
INSTALL_HOOK = os.path.join(SRC_ROOT, "contrib", "install-hook.sh")
# The comment line in test-hook.py's hook wrapper (write_wrapper there): keep the two in step.
_HOOK_WRAPPER = re.compile(r"^# softaff [\w.-]+\.py \(pid (\d+)\)", re.M)

_guests = []
_daemons = []
_watchdog = None  # kept referenced: its stdin closing tells it this test has exited
_workdir = None
_cleaned = False
_lock = threading.Lock()


# --------------------------------------------------------------------------------------------
# logging, skipping, failing


def log(msg):
    sys.stderr.write("[%8.3f] %s\n" % (time.monotonic() - _T0, msg))
    sys.stderr.flush()


_T0 = time.monotonic()


class Skip(Exception):
    """Raised to skip the test (exit 77), or to fail it when SOFTAFF_REQUIRE_VM=1."""


def vm_required():
    return os.environ.get("SOFTAFF_REQUIRE_VM", "") not in ("", "0")


def skip(reason):
    raise Skip(reason)


def workdir():
    """A per-test directory for sockets, logs and configs (removed at exit unless it failed)."""
    global _workdir
    if _workdir is None:
        # The pid in the name lets sweep() tell a killed test's directory.
        _workdir = tempfile.mkdtemp(prefix="%s%d-" % (WORKDIR_PREFIX, os.getpid()))
        # QEMU runs as libvirt-qemu and libvirt's helpers must reach sockets/logs in here.
        os.chmod(_workdir, 0o755)
    return _workdir


# --------------------------------------------------------------------------------------------
# subprocess helpers


def run_cmd(argv, check=True, timeout=120, input=None, env=None):
    """Run argv, return CompletedProcess (text). Raises RuntimeError with output on failure."""
    try:
        p = subprocess.run(argv, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=timeout, env=env)
    except FileNotFoundError as e:
        raise RuntimeError("%s: %s" % (argv[0], e))
    except subprocess.TimeoutExpired:
        raise RuntimeError("timed out after %ss: %s" % (timeout, " ".join(argv)))
    if check and p.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s%s" % (
            p.returncode, " ".join(argv), p.stdout, p.stderr))
    return p


def virsh(*args, check=True, timeout=120):
    """Run `virsh -c URI args...` and return its stdout."""
    return run_cmd(["virsh", "-c", URI] + list(args), check=check, timeout=timeout).stdout


# --------------------------------------------------------------------------------------------
# environment: libvirtd, guest image, skip logic


def ensure_libvirtd():
    """Start virtlogd/libvirtd if needed (contrib/start-libvirt.sh) and wait for readiness."""
    script = os.path.join(SRC_ROOT, "contrib", "start-libvirt.sh")
    # A libvirtd started from here must not look like a test's leftover to sweep().
    env = {k: v for k, v in os.environ.items() if k != OWNER_ENV}
    p = run_cmd(["bash", script], check=False, timeout=180, env=env)
    if p.returncode != 0:
        raise Skip("libvirtd is not usable (contrib/start-libvirt.sh failed):\n%s%s" % (
            p.stdout, p.stderr))
    for line in p.stdout.splitlines():
        if not line.endswith("already running") and " ready (" not in line:
            log(line)  # what it had to do, e.g. /dev/kvm's group and mode


_image = None


def guest_image():
    """Build (or reuse) the guest kernel and initramfs; returns dict kernel/initrd/cmdline."""
    global _image
    if _image is None:
        script = os.path.join(SRC_ROOT, "tests", "guest", "build-guest.sh")
        p = run_cmd(["bash", script, "--print"], check=False, timeout=900)
        if p.returncode != 0:
            raise Skip("cannot build the test guest (tests/guest/build-guest.sh):\n%s" % p.stderr)
        vals = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
        _image = {"kernel": vals["KERNEL"], "initrd": vals["INITRD"], "cmdline": vals["CMDLINE"]}
    return _image


# --------------------------------------------------------------------------------------------
# KVM or TCG: one probe per machine, kernel and QEMU

DOMAIN_TYPE_ENV = "SOFTAFF_DOMAIN_TYPE"
# Seconds the test guest gets under KVM to print 'ready' (it takes well under one where KVM
# works). Short on purpose: a /dev/kvm that cannot run a stock guest kernel at speed (this
# project's test host has a PVM backend, kvm_pvm, on which its first console line takes ~90 s)
# must cost the probe a few seconds, not the guest's boot.
KVM_PROBE_S = float(os.environ.get("SOFTAFF_KVM_PROBE_S", "3"))
_PROBE_FILE = "kvm-probe"
_domain = None  # (type, reason), once per process


def _first_line(argv):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           universal_newlines=True, timeout=30)
        return p.stdout.splitlines()[0].strip() if p.stdout else ""
    except (OSError, subprocess.TimeoutExpired):
        return ""


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def _kvm_backend():
    """The loaded KVM modules (kvm_intel, kvm_amd, kvm_pvm, ...), e.g. 'kvm_pvm'."""
    try:
        mods = sorted(m for m in os.listdir("/sys/module") if m.startswith("kvm_"))
    except OSError:
        mods = []
    return ",".join(mods) or "none"


def numa_nodes():
    try:
        return len([n for n in os.listdir("/sys/devices/system/node")
                    if re.match(r"^node\d+$", n)]) or 1
    except OSError:
        return 1


def _probe_key():
    """What the probe's answer depends on: host kernel, KVM modules, CPU, QEMU, guest kernel."""
    img = guest_image()
    try:
        guest = os.stat(img["kernel"])
        guest_id = "%s %d %d" % (img["kernel"], guest.st_size, int(guest.st_mtime))
    except OSError:
        guest_id = img["kernel"]
    return "\n".join(["kernel " + " ".join(os.uname()[2:4]), "kvm " + _kvm_backend(),
                      "cpu " + _cpu_model(),
                      "qemu " + _first_line(["qemu-system-x86_64", "--version"]),
                      "guest " + guest_id])


def _boot_under_kvm(timeout):
    """Boot the test guest with qemu-system-x86_64 -accel kvm; None when it printed 'ready'
    within timeout seconds, else why not."""
    img = guest_image()
    d = tempfile.mkdtemp(prefix="softaff-kvm-probe-")
    ctl = os.path.join(d, "ctl")
    logp = os.path.join(d, "qemu.log")
    argv = ["qemu-system-x86_64", "-accel", "kvm", "-machine", "pc",
            "-smp", "1", "-m", "128", "-kernel", img["kernel"], "-initrd", img["initrd"],
            "-append", img["cmdline"], "-serial", "null",
            "-serial", "unix:%s,server=on,wait=off" % ctl,
            "-display", "none", "-no-user-config", "-nodefaults", "-no-reboot"]
    t0 = time.monotonic()
    deadline = t0 + timeout
    proc = None
    sock = None
    try:
        with open(logp, "wb") as lf:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf,
                                    stderr=subprocess.STDOUT)
        buf = b""

        def exited():
            try:
                proc.wait(0.5)
            except subprocess.TimeoutExpired:
                return None
            with open(logp, errors="replace") as f:
                out = " ".join(f.read().split())[-300:]
            return "qemu-system-x86_64 -accel kvm exited with status %d: %s" % (
                proc.returncode, out or "(no output)")

        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return exited()
            if sock is None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(ctl)
                    s.settimeout(0.1)
                    sock = s
                except OSError:
                    s.close()
                    time.sleep(0.05)
                continue
            try:
                data = sock.recv(4096)
            except socket.timeout:
                continue
            except OSError as e:
                return exited() or "the guest's control channel failed: %s" % e
            if not data:
                return exited() or "the guest closed its control channel"
            buf += data
            lines = [ln.strip(b"\r\x00 ") for ln in buf.split(b"\n")]
            if any(ln == b"ready" or ln.startswith(b"work ") for ln in lines):
                return None
        return ("the test guest did not reach 'ready' within %.0f s under KVM (KVM modules: %s; "
                "where KVM runs at hardware speed it takes well under a second)"
                % (timeout, _kvm_backend()))
    finally:
        if sock is not None:
            sock.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(d, ignore_errors=True)


def _kvm_unusable(use_cache=True):
    """Why KVM cannot run the test guest here (None when it can). The answer is cached in
    CACHE/kvm-probe, keyed by what it depends on; use_cache=False probes again."""
    if not os.path.exists("/dev/kvm"):
        return "no /dev/kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "/dev/kvm is not readable and writable for uid %d" % os.geteuid()
    key = _probe_key()
    path = os.path.join(CACHE, _PROBE_FILE)
    try:
        if not use_cache:
            raise OSError("not asked")
        with open(path) as f:
            cached = f.read()
        head, _, answer = cached.partition("\n=\n")
        if head == key and answer.strip():
            answer = answer.strip()
            return None if answer == "ok" else answer + " (cached in %s)" % path
    except OSError:
        pass
    t0 = time.monotonic()
    why = _boot_under_kvm(KVM_PROBE_S)
    log("KVM probe: %s in %.1f s" % ("the test guest is ready under KVM" if why is None
                                     else "no", time.monotonic() - t0))
    try:
        tmp = path + ".%d" % os.getpid()
        with open(tmp, "w") as f:
            f.write("%s\n=\n%s\n" % (key, "ok" if why is None else why))
        os.replace(tmp, path)
    except OSError as e:
        log("KVM probe: answer not cached (%s)" % e)
    return why


def domain_type():
    """'kvm' where the test guest boots under KVM within KVM_PROBE_S, else 'qemu' (TCG), said
    once with the reason. SOFTAFF_DOMAIN_TYPE=kvm|qemu forces either; a forced kvm that cannot
    work fails (AssertionError) instead of waiting for guests that never come up."""
    global _domain
    if _domain is None:
        forced = os.environ.get(DOMAIN_TYPE_ENV, "")
        if forced not in ("", "kvm", "qemu"):
            raise AssertionError("%s=%r: use kvm or qemu (or unset it to probe)"
                                 % (DOMAIN_TYPE_ENV, forced))
        if forced == "qemu":
            _domain = ("qemu", "%s=qemu" % DOMAIN_TYPE_ENV)
        else:
            why = _kvm_unusable(use_cache=not forced)  # forced: ask KVM itself again
            if why is None:
                _domain = ("kvm", "%s=kvm" % DOMAIN_TYPE_ENV if forced else
                           "the test guest boots under KVM")
            elif forced:
                raise AssertionError("%s=kvm, but KVM cannot run the test guest here: %s"
                                     % (DOMAIN_TYPE_ENV, why))
            else:
                _domain = ("qemu", why)
        log("guests run under %s: %s" % ("KVM" if _domain[0] == "kvm" else "TCG (type qemu)",
                                          _domain[1]))
    return _domain[0]


def environment():
    """What a result depends on: domain type (and why), CPU model, NUMA nodes, CPUs, kernel,
    QEMU and libvirt versions. Benchmarks and the demo record it with their figures."""
    dt = domain_type()
    return {"domain_type": dt, "domain_type_reason": _domain[1], "cpu_model": _cpu_model(),
            "numa_nodes": numa_nodes(), "cpus": len(host_cpus()),
            "kernel": " ".join(os.uname()[2:4]), "kvm_modules": _kvm_backend(),
            "qemu": _first_line(["qemu-system-x86_64", "--version"]),
            "libvirt": _first_line(["libvirtd", "--version"])}


def environment_text(env=None):
    env = env or environment()
    return ("domain type %s (%s); CPU %s, %d CPUs, %d NUMA node%s; kernel %s; %s; %s"
            % (env["domain_type"], env["domain_type_reason"], env["cpu_model"], env["cpus"],
               env["numa_nodes"], "" if env["numa_nodes"] == 1 else "s", env["kernel"],
               env["qemu"], env["libvirt"]))


def require_vm(libvirt=True):
    """Make sure real guests can run here; otherwise skip (77), or fail if SOFTAFF_REQUIRE_VM=1.

    libvirt=False: only QEMU itself is needed (QemuGuest, the QMP backend)."""
    if not libvirt:
        if os.geteuid() != 0:
            skip("integration tests need root (/proc of QEMU threads, sched_setaffinity)")
        if shutil.which("qemu-system-x86_64") is None:
            skip("qemu-system-x86_64 not found (run contrib/install-deps.sh)")
        guest_image()
        domain_type()
        return
    if os.geteuid() != 0:
        skip("integration tests need root (libvirt qemu:///system, /proc of QEMU threads)")
    for b in ("virsh", "libvirtd", "virtlogd", "qemu-system-x86_64"):
        if shutil.which(b) is None:
            skip("%s not found (run contrib/install-deps.sh)" % b)
    ensure_libvirtd()
    guest_image()
    dt = domain_type()
    if "<domain>%s</domain>" % dt not in virsh("domcapabilities", "--virttype", dt, "--arch",
                                               "x86_64", check=False, timeout=60):
        if dt == "kvm":
            raise AssertionError("QEMU boots the test guest under KVM, but libvirt offers no "
                                 "x86_64 KVM guests (virsh domcapabilities --virttype kvm)")
        skip("libvirt cannot run x86_64 TCG guests (virsh domcapabilities --virttype qemu)")
    sweep()


# --------------------------------------------------------------------------------------------
# leftovers of killed runs


def _gone(pid, owner):
    return pid == owner or (pid != os.getpid() and not os.path.exists("/proc/%d" % pid))


def _sweep_guests(owner):
    """Destroy/undefine libvirt guests named softaff-t<PID>-* whose test has gone."""
    try:
        out = virsh("list", "--all", "--name", check=False, timeout=60)
    except RuntimeError:  # no virsh: nothing can have been left in libvirt
        return
    for name in out.split():
        m = _STALE_NAME.match(name)
        if m and _gone(int(m.group(1)), owner):
            log("sweep: removing guest %s left by a killed test" % name)
            virsh("destroy", name, check=False, timeout=60)
            virsh("undefine", name, "--nvram", check=False, timeout=60)


def _test_owner(pid):
    """The test pid in OWNER_ENV of a softaffd/QEMU process, else None."""
    try:
        with open("/proc/%d/comm" % pid) as f:
            if not _SWEPT_COMMS.match(f.read().strip()):
                return None
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    key = OWNER_ENV.encode() + b"="
    for kv in env:
        if kv.startswith(key) and kv[len(key):].isdigit():
            return int(kv[len(key):])
    return None


def _sweep_processes(owner):
    """SIGTERM, then SIGKILL, the softaffd/QEMU processes started by tests that have gone."""
    victims = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            t = _test_owner(int(d))
            if t is not None and _gone(t, owner):
                victims.append(int(d))
    for pid in victims:
        log("sweep: stopping pid %d left by killed test %d" % (pid, _test_owner(pid) or 0))
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while victims and time.monotonic() < deadline:
        time.sleep(0.1)
        victims = [p for p in victims if _test_owner(p) is not None]
    for pid in victims:
        _signal(pid, signal.SIGKILL)


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _sweep_sockets(owner):
    """Unlink the sockets (softaffd's, guests' channels) in killed tests' work directories;
    the logs stay for a look at what happened."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = _STALE_WORKDIR.match(name)
        if not m or not _gone(int(m.group(1)), owner):
            continue
        d = os.path.join(tmp, name)
        for root, _, files in os.walk(d):
            for f in files:
                path = os.path.join(root, f)
                try:
                    if stat.S_ISSOCK(os.lstat(path).st_mode):
                        os.unlink(path)
                        log("sweep: removed socket %s of killed test %s" % (path, m.group(1)))
                except OSError:
                    pass


def _sweep_hook(owner):
    """test-hook.py's wrapper installed as 50-softaff by a killed test: put back what it
    replaced (kept in that test's work directory), or remove it."""
    try:
        with open(HOOK_PATH) as f:
            text = f.read(4096)
    except (OSError, UnicodeDecodeError):
        return
    m = _HOOK_WRAPPER.search(text)
    if not m or not _gone(int(m.group(1)), owner):
        return
    cfg = re.search(r"SOFTAFF_CONFIG=(\S+)", text)
    backup = os.path.join(os.path.dirname(cfg.group(1)), "50-softaff.orig") if cfg else None
    if backup and os.path.lexists(backup):
        shutil.move(backup, HOOK_PATH)
        log("sweep: put back %s, replaced by killed test %s" % (HOOK_PATH, m.group(1)))
    else:
        os.unlink(HOOK_PATH)
        log("sweep: removed %s, the hook wrapper of killed test %s" % (HOOK_PATH, m.group(1)))


class TestHook:
    """softaff-hook installed as 50-softaff with contrib/install-hook.sh, for this test's
    guests only (a wrapper passes every other domain by, with SOFTAFF_CONFIG=config). An
    existing 50-softaff is put aside and put back by uninstall() (by sweep() for a killed
    test)."""

    def __init__(self, config):
        self.config = config
        self.backup = None
        self.installed = False

    def install(self):
        wrapper = os.path.join(workdir(), "hook-wrapper")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n# softaff %s (pid %d)\n"
                    'case "$1" in %s%d-*) SOFTAFF_CONFIG=%s exec %s "$@";; esac\nexit 0\n'
                    % (os.path.basename(sys.argv[0]), os.getpid(), NAME_PREFIX, os.getpid(),
                       self.config, binary("softaff-hook")))
        os.chmod(wrapper, 0o755)
        if os.path.lexists(HOOK_PATH):
            self.backup = os.path.join(workdir(), "50-softaff.orig")
            shutil.move(HOOK_PATH, self.backup)
        self.installed = True
        p = run_cmd(["bash", INSTALL_HOOK, wrapper])
        log("install-hook.sh: " + p.stdout.strip().replace("\n", " | "))
        time.sleep(0.5)  # libvirtd handles SIGHUP in its event loop

    def uninstall(self):
        if not self.installed:
            return
        self.installed = False
        run_cmd(["bash", INSTALL_HOOK, "--uninstall"], check=False)
        if self.backup:
            shutil.move(self.backup, HOOK_PATH)
            self.backup = None


def sweep(owner=None):
    """Remove what tests that are no longer running left behind (and, with owner=PID, what
    test PID left): guests named softaff-t<PID>-*, softaffd/QEMU processes carrying
    SOFTAFF_TEST_PID=PID, sockets in softaff-test-<PID>-* directories, test-hook.py's hook."""
    if os.geteuid() != 0:
        return  # a test that is not root started no guest nor daemon it could leave
    for step in (_sweep_processes, _sweep_guests, _sweep_sockets, _sweep_hook):
        try:
            step(owner)
        except Exception as e:  # noqa: BLE001 - one failed step must not stop the others
            log("sweep: %s: %s" % (step.__name__, e))


def _start_watchdog():
    """A process in its own session (meson kills the test's process group) that waits for this
    test to exit, however it dies, then sweeps what it left. It reads a pipe only this process
    holds open: EOF means the test has exited."""
    if os.geteuid() != 0:
        return None
    logf = open(os.path.join(tempfile.gettempdir(), "softaff-test-sweep.log"), "ab")
    try:
        return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--sweep-after",
                                 str(os.getpid())], stdin=subprocess.PIPE, stdout=logf,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        log("warning: no sweep watchdog: %s" % e)
        return None
    finally:
        logf.close()


# --------------------------------------------------------------------------------------------
# small utilities


def control_request(sock, line, timeout=10):
    """Send one request line to softaffd's control socket; returns the reply line (bytes)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(sock)
        s.sendall(line)
        got = b""
        while not got.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    finally:
        s.close()
    return got


def wait_until(predicate, timeout, interval=0.05, what=None):
    """Poll predicate() until it returns a true value; return the elapsed seconds.

    On timeout raise AssertionError (mentioning `what`, a string or a function returning one)
    or, if what is False, return None."""
    t0 = time.monotonic()
    while True:
        if predicate():
            return time.monotonic() - t0
        if time.monotonic() - t0 >= timeout:
            if what is False:
                return None
            if callable(what):
                what = what()
            raise AssertionError("timed out after %.1fs waiting for %s" % (
                timeout, what or getattr(predicate, "__name__", "condition")))
        time.sleep(interval)


def parse_cpulist(text):
    """'0-2,5' -> {0,1,2,5}"""
    cpus = set()
    text = text.strip()
    if not text:
        return cpus
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        else:
            cpus.add(int(part))
    return cpus


def format_cpulist(cpus):
    """{0,1,2,5} -> '0-2,5'"""
    cpus = sorted(set(cpus))
    out = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else "%d-%d" % (cpus[i], cpus[j]))
        i = j + 1
    return ",".join(out)


def host_cpus():
    with open("/sys/devices/system/cpu/online") as f:
        return parse_cpulist(f.read())


def _cpu_times():
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3:4].isdigit():
                a = line.split()
                vals = [int(x) for x in a[1:]]
                idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
                out[int(a[0][3:])] = (sum(vals[:8]), idle)
    return out


def cpu_utilization(seconds=1.0):
    """{cpu: busy fraction} of every host CPU over the next `seconds` (from /proc/stat)."""
    a = _cpu_times()
    time.sleep(seconds)
    b = _cpu_times()
    out = {}
    for c in b:
        if c in a:
            total = b[c][0] - a[c][0]
            out[c] = 1.0 - (b[c][1] - a[c][1]) / total if total > 0 else 0.0
    return out


def format_utilization(util):
    return ", ".join("cpu%d %.0f%%" % (c, 100 * u) for c, u in sorted(util.items()))


def other_daemons(mine=None):
    """PIDs of softaffd processes other than mine (a Daemon). Another softaffd on the host
    manages these guests too (they carry softaff metadata) and restores their pins when it
    stops, which this test's daemon then takes for a pin by the user."""
    own = mine.proc.pid if mine is not None and mine.proc is not None else None
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == own:
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                if f.read().strip() == "softaffd":
                    pids.append(int(d))
        except OSError:
            pass
    return pids


def wait_alone(timeout=300):
    """Wait until no other softaffd runs on this host; skip after timeout."""
    t0 = time.monotonic()
    while other_daemons():
        if time.monotonic() - t0 > timeout:
            skip("another softaffd has been running for %ds (%s): it would manage these "
                 "guests too" % (timeout, other_daemons()))
        time.sleep(2)
    if time.monotonic() - t0 > 1:
        log("waited %.0fs for other softaffd processes to exit" % (time.monotonic() - t0))


def assert_alone(daemon, what):
    """Skip (like a busy host) when another softaffd runs now: its pins would be its own."""
    others = other_daemons(daemon)
    if others:
        skip("another softaffd (pids %s) ran during %s: it manages these guests too and "
             "restores their pins when it exits; run this test alone" % (others, what))


def wait_host_quiet(max_busy=None, timeout=None):
    """Wait until no host CPU is busier than max_busy (default 0.3, env SOFTAFF_QUIET_MAX)
    over a 1 s sample, for up to timeout s (default 90, env SOFTAFF_QUIET_TIMEOUT).

    Load that softaff does not manage belongs to the partition's owners, so a daemon rightly
    refuses to burst onto a CPU someone else keeps busy: timing scenarios are meaningless on a
    busy host. Still busy at the end -> Skip (a failure with SOFTAFF_REQUIRE_VM=1)."""
    max_busy = float(os.environ.get("SOFTAFF_QUIET_MAX", 0.3)) if max_busy is None else max_busy
    timeout = float(os.environ.get("SOFTAFF_QUIET_TIMEOUT", 90)) if timeout is None else timeout
    t0 = time.monotonic()
    while True:
        util = cpu_utilization(1.0)
        if max(util.values()) <= max_busy:
            log("host quiet: %s" % format_utilization(util))
            return util
        if time.monotonic() - t0 >= timeout:
            skip("host CPUs stay busy with other work (%s, limit %.0f%%, waited %.0fs); the "
                 "scenario needs idle partitions" % (format_utilization(util), 100 * max_busy,
                                                     timeout))
        log("host busy (%s), waiting for it to quiet down" % format_utilization(util))
        time.sleep(2)


def read_comm(pid, tid):
    """The thread's comm from /proc/PID/task/TID/stat (comm may contain spaces and slashes)."""
    with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
        stat = f.read()
    return stat[stat.index("(") + 1:stat.rindex(")")]


def thread_status_field(pid, tid, field):
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].strip()
    raise KeyError(field)


def thread_affinity(pid, tid):
    """Cpus_allowed_list of one thread as a set."""
    return parse_cpulist(thread_status_field(pid, tid, "Cpus_allowed_list"))


def thread_schedstat(pid, tid):
    """(run_ns, wait_ns, timeslices) from /proc/PID/task/TID/schedstat."""
    with open("/proc/%d/task/%d/schedstat" % (pid, tid)) as f:
        a = f.read().split()
    return int(a[0]), int(a[1]), int(a[2])


def softaff_metadata(preferred=None, mode=None, softness=None, **extra):
    """The softaff metadata element string for Guest(metadata=...)."""
    attrs = []
    for k, v in (("mode", mode), ("preferred", preferred), ("softness", softness)):
        if v is not None:
            attrs.append('%s="%s"' % (k, _xml_escape(str(v), {'"': "&quot;"})))
    for k, v in sorted(extra.items()):
        attrs.append('%s="%s"' % (k, _xml_escape(str(v), {'"': "&quot;"})))
    return '<softaff:affinity xmlns:softaff="%s" %s/>' % (METADATA_NS, " ".join(attrs))


# --------------------------------------------------------------------------------------------
# guests


class Guest:
    """A libvirt guest running the load generator: <domain type='kvm'> where KVM runs the test
    guest, else 'qemu' (TCG); see domain_type().

    name      a short label; the libvirt name is softaff-t<testpid>-<label>
    vcpus     number of vCPUs
    cpuset    <vcpu cpuset='...'> (string or set), or None
    vcpupins  {vcpu: cpulist} for <cputune><vcpupin>, or None
    emulatorpin  cpulist for <cputune><emulatorpin>, or None
    iothreads  number of I/O threads (<iothreads>); iothreadpins {id: cpulist} for <iothreadpin>
    metadata  an XML element string put under <metadata> (see softaff_metadata())
    persistent  define + start (virsh define/start) instead of a transient create
    """

    def __init__(self, name, vcpus=2, memory_mib=128, cpuset=None, vcpupins=None,
                 emulatorpin=None, metadata=None, persistent=False, extra_cmdline="",
                 iothreads=0, iothreadpins=None):
        self.label = name
        self.name = "%s%d-%s" % (NAME_PREFIX, os.getpid(), name)
        self.vcpus = vcpus
        self.memory_mib = memory_mib
        self.cpuset = cpuset
        self.vcpupins = vcpupins or {}
        self.emulatorpin = emulatorpin
        self.metadata = metadata
        self.persistent = persistent
        self.extra_cmdline = extra_cmdline
        self.iothreads = iothreads
        self.iothreadpins = iothreadpins or {}
        d = workdir()
        self.console_log = os.path.join(d, self.label + ".console.log")
        self.control_path = os.path.join(d, self.label + ".ctl")
        self.xml_path = os.path.join(d, self.label + ".xml")
        self.created = False
        self.start_time = None
        self.ready_time = None  # seconds from start() to the first 'ready'/'work' line
        self._sock = None
        self._reader = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._cond = threading.Condition()
        self._replies = []
        self.lines = []   # (monotonic time, line) of everything received
        self.series = []  # (monotonic time, work units/s, threads)
        with _lock:
            _guests.append(self)

    # ---- definition ----
    def xml(self):
        img = guest_image()
        cmdline = img["cmdline"] + (" " + self.extra_cmdline if self.extra_cmdline else "")
        cpuset = self.cpuset
        if isinstance(cpuset, (set, frozenset, list, tuple)):
            cpuset = format_cpulist(cpuset)
        vcpu = "<vcpu placement='static'%s>%d</vcpu>" % (
            " cpuset='%s'" % cpuset if cpuset else "", self.vcpus)
        tune = []
        for v in sorted(self.vcpupins):
            cl = self.vcpupins[v]
            if not isinstance(cl, str):
                cl = format_cpulist(cl)
            tune.append("    <vcpupin vcpu='%d' cpuset='%s'/>" % (v, cl))
        if self.emulatorpin is not None:
            cl = self.emulatorpin
            if not isinstance(cl, str):
                cl = format_cpulist(cl)
            tune.append("    <emulatorpin cpuset='%s'/>" % cl)
        tune += ["    <iothreadpin iothread='%d' cpuset='%s'/>" % (i, c)
                 for i, c in sorted(self.iothreadpins.items())]
        if self.iothreads:
            vcpu += "\n  <iothreads>%d</iothreads>" % self.iothreads
        cputune = "  <cputune>\n%s\n  </cputune>\n" % "\n".join(tune) if tune else ""
        metadata = "  <metadata>\n    %s\n  </metadata>\n" % self.metadata if self.metadata else ""
        return """<domain type='{type}'>
  <name>{name}</name>
{metadata}  <memory unit='MiB'>{mem}</memory>
  {vcpu}
{cputune}  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <controller type='usb' model='none'/>
    <serial type='file'>
      <source path='{console}'/>
      <target port='0'/>
    </serial>
    <serial type='unix'>
      <source mode='bind' path='{control}'/>
      <target port='1'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
""".format(type=domain_type(), name=self.name, metadata=metadata, mem=self.memory_mib, vcpu=vcpu, cputune=cputune,
           kernel=_xml_escape(img["kernel"]), initrd=_xml_escape(img["initrd"]),
           cmdline=_xml_escape(cmdline), console=_xml_escape(self.console_log),
           control=_xml_escape(self.control_path))

    # ---- lifecycle ----
    def start(self, connect=True):
        """Create (transient) or define+start (persistent) the guest; connect to its control
        channel right away so the guest's 'ready' line is not missed."""
        with open(self.xml_path, "w") as f:
            f.write(self.xml())
        for p in (self.control_path,):
            if os.path.exists(p):
                os.unlink(p)
        self.start_time = time.monotonic()
        if self.persistent:
            virsh("define", self.xml_path)
            self.created = True
            virsh("start", self.name)
        else:
            self.created = True
            virsh("create", self.xml_path)
        log("guest %s started (%d vCPUs%s)" % (self.name, self.vcpus,
                                               ", cpuset " + str(self.cpuset) if self.cpuset else ""))
        if connect:
            self.connect()
        return self

    def connect(self, timeout=30):
        wait_until(lambda: os.path.exists(self.control_path), timeout,
                   what="control socket %s" % self.control_path)
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.control_path)
                break
            except OSError:
                s.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._sock = s
        self._reader = threading.Thread(target=self._read_loop, name="reader-" + self.label,
                                        daemon=True)
        self._reader.start()

    def _read_loop(self):
        buf = b""
        while not self._stop.is_set():
            try:
                data = self._sock.recv(4096)
            except OSError:
                break
            if not data:
                break
            buf += data
            while b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                line = raw.decode("utf-8", "replace").strip("\r\x00 ")
                if line:
                    self._on_line(line)
        with self._cond:
            self._cond.notify_all()

    def _on_line(self, line):
        now = time.monotonic()
        with self._cond:
            self.lines.append((now, line))
            parts = line.split()
            if line == "ready" or (parts and parts[0] == "work"):
                if not self._ready.is_set():
                    self.ready_time = now - (self.start_time or now)
                    self._ready.set()
            if len(parts) == 4 and parts[0] == "work" and parts[2] == "threads":
                try:
                    self.series.append((now, float(parts[1]), int(parts[3])))
                except ValueError:
                    pass
            elif parts and parts[0] in ("ok", "error"):
                self._replies.append(line)
            self._cond.notify_all()

    def wait_ready(self, timeout=120):
        """Wait for the load generator; returns seconds from start() to ready."""
        if not self._ready.wait(timeout):
            raise AssertionError("guest %s not ready after %ss; console:\n%s" % (
                self.name, timeout, self.console_text()[-2000:]))
        log("guest %s ready %.2fs after start" % (self.name, self.ready_time))
        return self.ready_time

    def command(self, line, want=None, timeout=15, report_now=False):
        """Send one line to the load generator and wait for its acknowledgement, want (default
        "ok " + line). report_now: a '?' follows, so the next work report starts at this step.
        Returns (send time, acknowledgement time), monotonic."""
        want = want or "ok " + line
        with self._cond:
            self._replies.clear()
        t_send = time.monotonic()
        self._sock.sendall(line.encode() + (b"\n?\n" if report_now else b"\n"))
        deadline = t_send + timeout
        with self._cond:
            while want not in self._replies:
                errs = [r for r in self._replies if r.startswith("error")]
                if errs:
                    raise AssertionError("guest %s: %s after %r (an image older than this "
                                         "command? run tests/guest/build-guest.sh)"
                                         % (self.name, errs[0], line))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("guest %s did not acknowledge %r" % (self.name, line))
                self._cond.wait(left)
            t_ack = next((t for t, ln in reversed(self.lines) if t >= t_send and ln == want), None)
        return t_send, t_ack or time.monotonic()

    def set_load(self, n, timeout=15):
        """Run n spinning threads in the guest; waits for the guest's acknowledgement."""
        self.command("%d" % n, timeout=timeout)
        log("guest %s load %d" % (self.name, n))

    def latest(self):
        """(time, work/s, threads) of the newest report, or None."""
        with self._cond:
            return self.series[-1] if self.series else None

    def wait_report(self, after=None, timeout=10):
        """Wait for a report newer than `after` (monotonic, default now); return it."""
        after = time.monotonic() if after is None else after
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (self.series and self.series[-1][0] > after):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("guest %s: no work report for %ss" % (self.name, timeout))
                self._cond.wait(left)
            return self.series[-1]

    def work_between(self, t0, t1):
        """Mean work/s of the reports received in [t0, t1] (None if there were none)."""
        with self._cond:
            vals = [w for (t, w, _) in self.series if t0 <= t <= t1]
        return sum(vals) / len(vals) if vals else None

    def console_text(self):
        try:
            with open(self.console_log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def close_control(self):
        """Stop reading the guest's control channel and close it."""
        self._stop.set()
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

    def destroy(self):
        """Destroy (and undefine) the guest; safe to call more than once."""
        self.close_control()
        if self.created:
            virsh("destroy", self.name, check=False, timeout=60)
            if self.persistent:
                virsh("undefine", self.name, "--nvram", check=False, timeout=60)
            self.created = False
            log("guest %s destroyed" % self.name)

    # ---- host side view ----
    def pid(self):
        with open("/run/libvirt/qemu/%s.pid" % self.name) as f:
            return int(f.read().strip())

    def threads(self):
        """{tid: comm} of all QEMU threads."""
        pid = self.pid()
        out = {}
        for t in os.listdir("/proc/%d/task" % pid):
            try:
                out[int(t)] = read_comm(pid, int(t))
            except (OSError, ValueError):
                pass
        return out

    def vcpu_tids(self):
        """{vcpu index: tid} from thread names 'CPU n/TCG' or 'CPU n/KVM'."""
        out = {}
        for tid, comm in self.threads().items():
            m = _VCPU_COMM.match(comm)
            if m:
                out[int(m.group(1))] = tid
        return out

    def wait_vcpu_threads(self, timeout=30):
        wait_until(lambda: len(self.vcpu_tids()) == self.vcpus, timeout,
                   what="%d vCPU threads of %s" % (self.vcpus, self.name))
        return self.vcpu_tids()

    def affinity(self, tids=None):
        """{vcpu: set of CPUs} from /proc (Cpus_allowed_list of each vCPU thread)."""
        pid = self.pid()
        tids = tids or self.vcpu_tids()
        return {v: thread_affinity(pid, tid) for v, tid in tids.items()}

    def schedstat(self, tids=None):
        """{vcpu: (run_ns, wait_ns, slices)}."""
        pid = self.pid()
        tids = tids or self.vcpu_tids()
        return {v: thread_schedstat(pid, tid) for v, tid in tids.items()}

    def current_cpus(self, tids=None):
        """{vcpu: CPU it last ran on} (field 39 of /proc/PID/task/TID/stat)."""
        pid = self.pid()
        tids = tids or self.vcpu_tids()
        out = {}
        for v, tid in tids.items():
            with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
                rest = f.read().rsplit(")", 1)[1].split()
            out[v] = int(rest[36])  # fields after comm start at field 3
        return out

    def all_on(self, cpus):
        """True when every vCPU thread's affinity is exactly `cpus` (set or cpulist)."""
        if isinstance(cpus, str):
            cpus = parse_cpulist(cpus)
        aff = self.affinity()
        return len(aff) == self.vcpus and all(a == set(cpus) for a in aff.values())

    def wait_affinity(self, cpus, timeout, interval=0.01, what=None):
        """Wait until every vCPU's affinity is exactly `cpus`; return the elapsed seconds."""
        if isinstance(cpus, str):
            cpus = parse_cpulist(cpus)
        tids = self.vcpu_tids()
        want = set(cpus)
        return wait_until(lambda: all(a == want for a in self.affinity(tids).values()),
                          timeout, interval,
                          what=what or (lambda: "%s vCPUs on %s (now %s)" % (
                              self.name, format_cpulist(want), self.affinity_text())))

    def affinity_text(self):
        try:
            return ", ".join("%d:%s" % (v, format_cpulist(c)) for v, c in sorted(self.affinity().items()))
        except OSError as e:
            return str(e)

    def vcpuinfo(self):
        """Parse `virsh vcpuinfo`: {vcpu: {'cpu': int, 'state': str, 'affinity': set}}."""
        out = {}
        cur = None
        for line in virsh("vcpuinfo", self.name).splitlines():
            if ":" not in line:
                continue
            k, v = (x.strip() for x in line.split(":", 1))
            if k == "VCPU":
                cur = out.setdefault(int(v), {})
            elif cur is None:
                continue
            elif k == "CPU":
                cur["cpu"] = int(v) if v.lstrip("-").isdigit() else None
            elif k == "State":
                cur["state"] = v
            elif k == "CPU Affinity":
                cur["affinity"] = {i for i, c in enumerate(v) if c == "y"}
        return out

    def vcpupin_info(self, config=False):
        """Parse `virsh vcpupin NAME` ({vcpu: set}), live unless config=True."""
        out = {}
        for line in virsh("vcpupin", self.name, "--config" if config else "--live").splitlines():
            m = re.match(r"^\s*(\d+)\s+(\S+)\s*$", line)
            if m:
                out[int(m.group(1))] = parse_cpulist(m.group(2))
        return out

    def vcpupin(self, vcpu, cpus):
        if not isinstance(cpus, str):
            cpus = format_cpulist(cpus)
        virsh("vcpupin", self.name, str(vcpu), cpus, "--live")

    def dumpxml(self):
        return virsh("dumpxml", self.name)

    def metadata_get(self):
        return virsh("metadata", self.name, "--uri", METADATA_NS, check=False)

    def metadata_set(self, element, live=True, config=False):
        args = ["metadata", self.name, "--uri", METADATA_NS, "--key", "softaff", "--set", element]
        if live:
            args.append("--live")
        if config:
            args.append("--config")
        virsh(*args)


class QemuGuest(Guest):
    """A guest run by `qemu-system-x86_64` directly (-accel as domain_type() says), without
    libvirt (the QMP backend).

    It has two QMP monitors: `qmp_path` (<workdir>/<label>.qmp) for softaffd, and a private one
    the test uses to learn the vCPU thread ids (query-cpus-fast), since a QMP socket serves one
    client at a time. debug_threads=False leaves QEMU's threads unnamed (all "qemu-system-x86"),
    so nothing can find the vCPUs by thread name: only QMP tells. The load generator is
    controlled over the second serial port exactly as in Guest."""

    def __init__(self, name, vcpus=2, memory_mib=128, debug_threads=False, qemu_name=None,
                 extra_cmdline=""):
        Guest.__init__(self, name, vcpus=vcpus, memory_mib=memory_mib,
                       extra_cmdline=extra_cmdline)
        self.qemu_name = qemu_name if qemu_name is not None else self.name
        self.debug_threads = debug_threads
        d = workdir()
        self.qmp_path = os.path.join(d, self.label + ".qmp")
        self.monitor_path = os.path.join(d, self.label + ".monitor")
        self.qemu_log = os.path.join(d, self.label + ".qemu.log")
        self.proc = None
        self._tids = None

    def argv(self):
        img = guest_image()
        cmdline = img["cmdline"] + (" " + self.extra_cmdline if self.extra_cmdline else "")
        argv = ["qemu-system-x86_64", "-accel", "tcg" if domain_type() == "qemu" else "kvm",
                "-machine", "pc",
                "-smp", str(self.vcpus), "-m", str(self.memory_mib),
                "-kernel", img["kernel"], "-initrd", img["initrd"], "-append", cmdline,
                "-qmp", "unix:%s,server=on,wait=off" % self.qmp_path,
                "-qmp", "unix:%s,server=on,wait=off" % self.monitor_path,
                "-serial", "file:%s" % self.console_log,
                "-serial", "unix:%s,server=on,wait=off" % self.control_path,
                "-display", "none", "-no-user-config", "-nodefaults", "-no-reboot"]
        if self.qemu_name:
            argv += ["-name", self.qemu_name + (",debug-threads=on" if self.debug_threads else "")]
        return argv

    def start(self, connect=True):
        for p in (self.control_path, self.qmp_path, self.monitor_path):
            if os.path.exists(p):
                os.unlink(p)
        self.start_time = time.monotonic()
        with open(self.qemu_log, "ab") as logf:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=logf,
                                         stderr=subprocess.STDOUT)
        self.created = True
        log("qemu %s started (pid %d, %d vCPUs)" % (self.name, self.proc.pid, self.vcpus))
        if connect:
            self.connect()
        return self

    def destroy(self):
        """Stop QEMU (SIGTERM, then SIGKILL); safe to call more than once."""
        self._stop.set()
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            log("qemu %s stopped" % self.name)
        self.created = False

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def pid(self):
        return self.proc.pid

    def qmp(self, command, arguments=None, timeout=10):
        """Run one command on the private monitor; returns its "return" value."""
        import json
        wait_until(lambda: os.path.exists(self.monitor_path), timeout,
                   what="QMP monitor %s" % self.monitor_path)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(self.monitor_path)
            f = s.makefile("rwb")

            def reply():
                while True:
                    line = f.readline()
                    if not line:
                        raise AssertionError("QMP monitor of %s closed" % self.name)
                    msg = json.loads(line)
                    if "event" in msg:
                        continue
                    return msg

            if "QMP" not in reply():
                raise AssertionError("no QMP greeting from %s" % self.name)
            for cmd, args in (("qmp_capabilities", None), (command, arguments)):
                req = {"execute": cmd}
                if args:
                    req["arguments"] = args
                f.write(json.dumps(req).encode() + b"\r\n")
                f.flush()
                msg = reply()
                if "error" in msg:
                    raise AssertionError("QMP %s on %s: %s" % (cmd, self.name, msg["error"]))
            return msg["return"]
        finally:
            s.close()

    def vcpu_tids(self):
        """{vCPU index: tid} from query-cpus-fast (thread names do not tell)."""
        if self._tids is None:
            cpus = self.qmp("query-cpus-fast")
            self._tids = {c["cpu-index"]: c["thread-id"] for c in cpus}
        return dict(self._tids)

    def other_tids(self):
        """Thread ids of QEMU that are not vCPU threads."""
        vcpus = set(self.vcpu_tids().values())
        return [int(t) for t in os.listdir("/proc/%d/task" % self.pid()) if int(t) not in vcpus]

    def vcpuinfo(self):
        raise AssertionError("QemuGuest has no libvirt: use affinity()")


class AffinityWatcher:
    """Polls the vCPU threads of some guests every `interval` s in a thread.

    changes   list of (time, guest label, vcpu, old set, new set): every affinity change seen
    on_cpu    {label: {cpu: samples}}: the CPU each vCPU thread last ran on, per sample
    samples   number of polls done"""

    def __init__(self, guests, interval=0.1):
        self.guests = guests
        self.interval = interval
        self.changes = []
        self.samples = 0
        self.on_cpu = {g.label: {} for g in guests}
        self._stop = threading.Event()
        self._tids = {g.label: g.vcpu_tids() for g in guests}
        self._pids = {g.label: g.pid() for g in guests}
        self._last = {g.label: g.affinity(self._tids[g.label]) for g in guests}
        self._thread = threading.Thread(target=self._loop, name="affinity-watcher", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def _loop(self):
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            for g in self.guests:
                pid = self._pids[g.label]
                try:
                    cur = {v: thread_affinity(pid, tid) for v, tid in self._tids[g.label].items()}
                    for tid in self._tids[g.label].values():
                        with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
                            cpu = int(f.read().rsplit(")", 1)[1].split()[36])
                        self.on_cpu[g.label][cpu] = self.on_cpu[g.label].get(cpu, 0) + 1
                except (OSError, ValueError, IndexError):
                    continue
                for v, cpus in cur.items():
                    if cpus != self._last[g.label].get(v):
                        self.changes.append((now, g.label, v, self._last[g.label].get(v), cpus))
                self._last[g.label] = cur
            self.samples += 1

    def fraction_on(self, label, cpus):
        """Share of the samples in which the guest's vCPU threads were last on one of `cpus`."""
        counts = self.on_cpu[label]
        total = sum(counts.values())
        return sum(n for c, n in counts.items() if c in cpus) / total if total else 0.0

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


# --------------------------------------------------------------------------------------------
# softaffd


# Where each program is in a meson build root, and where the Debian package installs it.
_BUILT = {"softaffd": "softaffd", "softaffctl": "ctl/softaffctl",
          "softaff-hook": "plugin/softaff-hook"}
_INSTALLED = {"softaffd": "/usr/sbin/softaffd", "softaffctl": "/usr/bin/softaffctl",
              "softaff-hook": "/usr/libexec/softaff-hook"}


def installed():
    """True when the tests run against the installed programs (SOFTAFF_INSTALLED=1, as the
    autopkgtest debian/tests/integration does) instead of a build root."""
    return os.environ.get("SOFTAFF_INSTALLED", "") not in ("", "0")


def binary(name):
    """Path of softaffd, softaffctl or softaff-hook: $SOFTAFF_BUILD_DIR's, or the installed one
    with SOFTAFF_INSTALLED=1."""
    if installed():
        return _INSTALLED[name]
    build = os.environ.get("SOFTAFF_BUILD_DIR")
    if not build:
        raise AssertionError("SOFTAFF_BUILD_DIR is not set (meson build root), nor "
                             "SOFTAFF_INSTALLED=1 (the installed programs)")
    return os.path.join(build, _BUILT[name])


def softaffd_path():
    return binary("softaffd")


def write_config(path=None, interval_ms=500, socket_path=None, layout="custom", custom="0;1",
                 softness=50, uri=None, manage=None, extra=None):
    """Write a softaffd config file; returns (path, socket path).

    extra: {group: {key: value}} added to (or overriding) the generated groups."""
    d = workdir()
    path = path or os.path.join(d, "softaff.conf")
    socket_path = socket_path or os.path.join(d, "sock")
    groups = {
        "daemon": {"interval_ms": interval_ms, "uri": uri or URI, "socket": socket_path},
        "partitions": {"layout": layout},
        "policy": {"softness": softness},
    }
    if manage is not None:
        groups["policy"]["manage"] = manage
    if layout == "custom":
        groups["partitions"]["custom"] = custom
    for g, kv in (extra or {}).items():
        groups.setdefault(g, {}).update(kv)
    with open(path, "w") as f:
        for g, kv in groups.items():
            f.write("[%s]\n" % g)
            for k, v in kv.items():
                f.write("%s=%s\n" % (k, v))
            f.write("\n")
    return path, socket_path


class Daemon:
    """A softaffd process: Daemon(config).start(); ...; rc = d.stop()."""

    def __init__(self, config, socket_path=None, log_path=None, args=None, env=None):
        self.config = config
        self.socket_path = socket_path
        self.log_path = log_path or os.path.join(workdir(), "softaffd.log")
        self.args = args or []
        self.env = env
        self.proc = None
        self.start_time = None
        self._logf = None
        with _lock:
            _daemons.append(self)

    def start(self, wait_socket=True, timeout=10, require_socket=False):
        """Start softaffd. With wait_socket, wait (up to timeout) for its control socket; a
        missing socket is then only a warning unless require_socket (readiness for the
        scenarios is judged from the affinities anyway). Exiting early is always an error."""
        binary = softaffd_path()
        if not os.access(binary, os.X_OK):
            raise AssertionError("softaffd not built: %s" % binary)
        self._logf = open(self.log_path, "ab")
        env = dict(os.environ)
        env.update(self.env or {})
        argv = [binary, "--config", self.config, "--foreground"] + self.args
        log("starting %s" % " ".join(argv))
        self.start_time = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._logf,
                                     stderr=subprocess.STDOUT, env=env)
        if wait_socket and self.socket_path:
            def up():
                self.check_alive()
                return os.path.exists(self.socket_path)
            el = wait_until(up, timeout, what=False if not require_socket else
                            "softaffd socket %s" % self.socket_path)
            if el is None:
                log("warning: softaffd has no control socket %s after %ss" % (
                    self.socket_path, timeout))
            else:
                log("softaffd up (socket after %.2fs)" % el)
        return self

    def check_alive(self):
        """AssertionError (with the log) if softaffd has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError("softaffd exited with %d; log:\n%s" % (
                self.proc.returncode, self.log_text()[-3000:]))

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=15):
        """SIGTERM and wait; returns the exit status (SIGKILL after timeout -> AssertionError)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._close()
                raise AssertionError("softaffd ignored SIGTERM for %ss (killed)" % timeout)
        rc = self.proc.returncode
        self._close()
        log("softaffd stopped, status %d" % rc)
        return rc

    def _close(self):
        if self._logf:
            self._logf.close()
            self._logf = None

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close()

    def log_text(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


# --------------------------------------------------------------------------------------------
# cleanup and the test runner


def cleanup():
    """Stop every daemon and destroy every guest this process created. Idempotent."""
    global _cleaned
    with _lock:
        if _cleaned:
            return
        _cleaned = True
        daemons, guests = list(_daemons), list(_guests)
    for d in daemons:
        try:
            if d.running():
                d.stop(timeout=10)
        except Exception as e:  # noqa: BLE001 - clean up as much as possible
            log("cleanup: softaffd: %s" % e)
            d.kill()
    def destroy(g):
        try:
            g.destroy()
        except Exception as e:  # noqa: BLE001
            log("cleanup: guest %s: %s" % (g.name, e))
    # virsh destroy takes ~2 s per TCG guest here; do them in parallel.
    threads = [threading.Thread(target=destroy, args=(g,)) for g in guests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _on_signal(signum, frame):
    raise SystemExit(128 + signum)


atexit.register(cleanup)
os.environ[OWNER_ENV] = str(os.getpid())
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, _on_signal)


def run(main, libvirt=True):
    """Run a test's main(): exit 0 on success, 77 on skip (1 if SOFTAFF_REQUIRE_VM=1),
    1 on failure (dumping daemon logs and guest consoles). Always cleans up.
    libvirt=False: the test runs QEMU directly (QemuGuest) and needs no libvirtd."""
    global _watchdog
    rc = 1
    failed = False
    _watchdog = _start_watchdog()
    try:
        require_vm(libvirt=libvirt)
        main()
        rc = 0
    except Skip as e:
        if vm_required():
            log("FAIL (SOFTAFF_REQUIRE_VM=1 but cannot run): %s" % e)
            rc = 1
        else:
            log("SKIP: %s" % e)
            rc = SKIP
    except AssertionError as e:
        log("FAIL: %s" % e)
        failed = True
    except Exception:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        failed = True
    finally:
        if failed:
            _dump_diagnostics()
        cleanup()
        sweep()  # what other killed tests left since this one started
        if _workdir:
            if failed or os.environ.get("SOFTAFF_TEST_KEEP"):
                log("logs kept in %s" % _workdir)
            else:
                shutil.rmtree(_workdir, ignore_errors=True)
        if not failed and not os.environ.get("SOFTAFF_TEST_KEEP"):
            # libvirt's per-guest QEMU logs: names are unique per run, so they would pile up.
            for g in _guests:
                try:
                    os.unlink("/var/log/libvirt/qemu/%s.log" % g.name)
                except OSError:
                    pass
    if rc == 0:
        log("PASS")
    sys.exit(rc)


def _dump_diagnostics():
    for d in _daemons:
        txt = d.log_text()
        if txt:
            sys.stderr.write("---- softaffd log (%s), last 4000 chars ----\n%s\n" % (
                d.log_path, txt[-4000:]))
    for g in _guests:
        txt = g.console_text()
        if txt:
            sys.stderr.write("---- console of %s, last 1500 chars ----\n%s\n" % (g.name, txt[-1500:]))


# --------------------------------------------------------------------------------------------
# the two-partition scenario used by the softaffd tests


def wait_guests_quiet(guests, busy_cpus=0.1, window=0.5, timeout=30):
    """Wait until each guest's vCPUs together ran under `busy_cpus` CPUs over one `window`
    (schedstat, one poll at each end of it)."""
    t0 = time.monotonic()
    while True:
        before = [g.schedstat() for g in guests]
        time.sleep(window)
        after = [g.schedstat() for g in guests]
        used = [sum(a[v][0] - b[v][0] for v in a if v in b) / 1e9 / window
                for b, a in zip(before, after)]
        if all(u < busy_cpus for u in used):
            log("guests quiet: %s CPUs" % ", ".join("%s %.2f" % (g.label, u)
                                                   for g, u in zip(guests, used)))
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise AssertionError("guests still busy after %ds: %s CPUs" % (
                timeout, ", ".join("%s %.2f" % (g.label, u) for g, u in zip(guests, used))))


def two_partition_scenario(daemon_first=False, interval_ms=500, softness=50, vcpus=2):
    """Config `layout=custom custom=0;1`, guests A (preferred 0) and B (preferred 1), both
    idle and ready, softaffd running and settled (A on CPU 0, B on CPU 1).

    daemon_first: start softaffd before the guests (they arrive through lifecycle events)
    instead of after (softaffd finds them running); then A and B are only required to have
    been placed at homes 0 and 1, not to run there (their boots may have left them doors).
    Returns (a, b, daemon)."""
    if len(host_cpus()) < 2 or not {0, 1} <= host_cpus():
        skip("the two-partition scenario needs host CPUs 0 and 1")
    if not os.access(softaffd_path(), os.X_OK):
        raise AssertionError("softaffd not built: %s" % softaffd_path())
    wait_host_quiet()
    # manage=explicit: other people's VMs on a shared test host are left alone (A and B carry
    # metadata, so this changes nothing for them).
    cfg, sock = write_config(interval_ms=interval_ms, layout="custom", custom="0;1",
                             softness=softness, manage="explicit")
    daemon = Daemon(cfg, socket_path=sock)
    if daemon_first:
        daemon.start(wait_socket=False)
    a = Guest("A", vcpus=vcpus, metadata=softaff_metadata(preferred=0))
    b = Guest("B", vcpus=vcpus, metadata=softaff_metadata(preferred=1))
    a.start()
    b.start()
    a.wait_ready(180)
    b.wait_ready(180)
    a.wait_vcpu_threads()
    b.wait_vcpu_threads()
    # 'ready' comes before the end of the guests' boot: the tail of it (up to a second or two
    # of vCPU time under TCG) is real load, and a daemon already running may burst it onto
    # the other, idle partition. Idle guests are what this scenario starts from.
    wait_guests_quiet([a, b])
    if not daemon_first:
        daemon.start(wait_socket=False)
    settle = 10 * interval_ms / 1000.0 + 5
    if daemon_first:
        # softaffd saw the boots: a boot's tail that ended within 2 s is a spike, a VM remembers
        # its last spike for 60 s (docs/policy.md section 9) and meanwhile opens doors onto the
        # other partition while its owners are idle; an idle guest's own blips (0.6 CPUs in one
        # tick, seen) renew it. On a slow host (first boots 5.5 s instead of 3) that left both
        # guests on 0-1 for over a minute: correct, but not a start to wait for. So the guests
        # are only required to have been placed at their homes; the caller's scenario (its own
        # load) says where they must run next.
        def placed():
            daemon.check_alive()
            text = daemon.log_text()
            return all("%s: placed at home partition %d" % (g.name, p) in text
                       for g, p in ((a, 0), (b, 1)))
        el = wait_until(placed, settle, 0.05, what=lambda: "A and B placed at homes 0 and 1")
        log("placed: A at home 0, B at home 1 after %.2fs (now A %s, B %s)" % (
            el, a.affinity_text(), b.affinity_text()))
        return a, b, daemon
    def settled():
        daemon.check_alive()
        return a.all_on({0}) and b.all_on({1})
    el = wait_until(settled, settle, 0.05,
                    what=lambda: "idle guests at home: A %s, B %s" % (a.affinity_text(),
                                                                      b.affinity_text()))
    log("settled: idle A on 0, B on 1 after %.2fs" % el)
    # Stay settled for a few ticks before measuring anything.
    t_end = time.monotonic() + 3 * interval_ms / 1000.0
    while time.monotonic() < t_end:
        assert a.all_on({0}) and b.all_on({1}), "idle guests left home: A %s, B %s" % (
            a.affinity_text(), b.affinity_text())
        time.sleep(0.05)
    return a, b, daemon


def assert_libvirt_agrees(g):
    """/proc and `virsh vcpuinfo` report the same affinity for every vCPU (the daemon pins
    through libvirt, so libvirt must tell the truth). The two are read one after the other,
    and softaffd may be pinning meanwhile (its fast narrowing goes first, libvirt's pin a few ms
    later): a disagreement is read again, 5 times 50 ms apart, before it fails."""
    for _ in range(5):
        proc = g.affinity()
        info = g.vcpuinfo()
        if g.affinity() == proc and all(info[v]["affinity"] == c for v, c in proc.items()):
            return
        time.sleep(0.05)
    for v, cpus in proc.items():
        assert info[v]["affinity"] == cpus, "%s vcpu %d: /proc %s but virsh vcpuinfo %s" % (
            g.name, v, format_cpulist(cpus), format_cpulist(info[v]["affinity"]))


def _main(argv):
    if len(argv) == 2 and argv[0] == "--sweep-after" and argv[1].isdigit():
        sys.stdin.buffer.read()  # returns at EOF: the test has exited
        sweep(int(argv[1]))
    elif argv == ["--sweep"]:
        sweep()
    else:
        sys.exit("usage: softaff_testlib.py --sweep | --sweep-after TEST-PID")


if __name__ == "__main__":
    _main(sys.argv[1:])
