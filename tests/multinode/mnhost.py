"""softaff multi-node test host: a TCG guest with 2 virtual NUMA nodes running libvirt + QEMU.

Python 3 standard library only. build-host.sh makes the image (cached); Host boots it:

    import mnhost
    with mnhost.Host() as h:          # start(): boot, wait for the agent, mount the shares
        r = h.run("numactl -H", timeout=30)
        print(r.rc, r.out, r.err)
                                      # stop(): QEMU terminated, temporary files removed

Commands run as root inside, one at a time, through a virtio-serial agent (guest-agent.sh).
The meson build dir and the source tree are visible inside, read-only, at the same paths as
here: the cloud kernel has no 9p, so each is an ext4 image made per boot with mkfs.ext4 -d.

Environment:
  SOFTAFF_BUILD_DIR      meson build root to share (default: none)
  SOFTAFF_MN_CACHE       image cache (default /var/cache/softaff-multinode)
  SOFTAFF_MN_KERNEL      the kernel to boot, when Host(kernel=) does not say: "bookworm"
                         (default, Debian 12's 6.1) or "unstable" (Debian unstable's 7.2.x, with
                         sched_ext; build-host.sh fetches it with apt and gives it its own image)
  SOFTAFF_MN_NO_BUILD=1  do not run build-host.sh; use the cache as it is
  SOFTAFF_MN_KEEP=1      keep the work directory (console log) after stop()
"""

import base64
import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC_ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.environ.get("SOFTAFF_MN_CACHE", "/var/cache/softaff-multinode")
AGENT_PORT = "org.softaff.mn.agent"
WORKDIR_PREFIX = "softaff-mnhost-"
CMDLINE = ("root=LABEL=mnhost-root rw console=ttyS0 init=/sbin/softaff-mn-init quiet panic=-1 "
           "no_timer_check mitigations=off")
_T0 = time.monotonic()


def log(msg):
    sys.stderr.write("[%8.3f] mnhost: %s\n" % (time.monotonic() - _T0, msg))
    sys.stderr.flush()


def preflight():
    """What every test in the test host needs: root, QEMU, mkfs.ext4 and a build with softaffd
    (SOFTAFF_BUILD_DIR). Returns that build's absolute path. Without them it prints SKIP and
    exits 77 (1 with SOFTAFF_REQUIRE_VM=1). meson's timeout sends SIGTERM: the test then leaves
    through its `with Host` block, which stops QEMU."""
    build = os.environ.get("SOFTAFF_BUILD_DIR")
    missing = [b for b in ("qemu-system-x86_64", "mkfs.ext4") if not shutil.which(b)]
    why = ("needs root" if os.geteuid() != 0 else "missing " + ", ".join(missing) if missing
           else None if build and os.access(os.path.join(build, "softaffd"), os.X_OK)
           else "SOFTAFF_BUILD_DIR has no softaffd")
    if why:
        print("SKIP: " + why)
        sys.exit(1 if os.environ.get("SOFTAFF_REQUIRE_VM") == "1" else 77)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    return os.path.abspath(build)


def with_host(body, **kw):
    """Boots Host(**kw) and runs body(host) in it; returns the host, stopped.

    When the host itself goes away (HostGone: QEMU exited or closed the agent's channel) before
    softaffd was ever started in it, nothing of softaff's ran there: that is the emulated host
    failing (seen about once in 40 boots of the 7.2 kernel under multi-threaded TCG). Its console
    is logged and body runs once more in a new host. After softaffd started, or a second time, the
    error is the test's."""
    for attempt in (1, 2):
        h = Host(**kw)
        try:
            with h:
                body(h)
            return h
        except HostGone as e:
            if attempt == 2 or h.softaffd_started:
                raise
            log("the test host went away before softaffd started in it: %s" % e)
            log("booting a new test host and starting again (once)")


def log_tail(h, title, cmd):
    """Logs cmd's output at a test's end, or why the host is gone. It never raises, so the
    test's own error is the one reported. Returns whether the host answered."""
    try:
        log("%s:\n%s" % (title, h.run(cmd, timeout=30).out))
        return True
    except (HostError, OSError) as e:
        log("the host is gone: %s" % e)
        if not isinstance(e, HostGone):  # a HostGone's text has the console (once: _gone)
            log("its console:\n" + h.console_tail(80))
        return False


class HostError(Exception):
    pass


class HostGone(HostError):
    """The test host itself went away (QEMU exited, or the agent's channel closed)."""


class Result:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def __repr__(self):
        return "Result(rc=%d, out=%r, err=%r)" % (self.rc, self.out[-400:], self.err[-400:])


def _b64(field):
    return "" if field == "-" else base64.b64decode(field).decode("utf-8", "replace")


def _die_with_parent():
    # QEMU must not outlive a test killed with SIGKILL (meson's timeout): PR_SET_PDEATHSIG.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)


def sweep_workdirs():
    """Removes work dirs of runs whose process has gone (SIGKILL skips stop(); QEMU dies with
    its parent, but its share images would stay)."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        m = re.match(re.escape(WORKDIR_PREFIX) + r"(\d+)-", name)
        if m and not os.path.exists("/proc/" + m.group(1)):
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


KERNELS = ("bookworm", "unstable")


def kernel_name(kernel=None):
    """The kernel to boot: kernel, else $SOFTAFF_MN_KERNEL, else "bookworm"."""
    name = kernel or os.environ.get("SOFTAFF_MN_KERNEL") or "bookworm"
    if name not in KERNELS:
        raise HostError("unknown kernel %r (SOFTAFF_MN_KERNEL: %s)" % (name, " or ".join(KERNELS)))
    return name


def cached_paths(kernel):
    """What build-host.sh makes for kernel, without running it."""
    if kernel == "bookworm":
        return {"KERNEL": CACHE + "/vmlinuz", "INITRD": CACHE + "/initrd.img",
                "IMAGE": CACHE + "/host.img"}
    return {"KERNEL": CACHE + "/vmlinuz-" + kernel, "INITRD": CACHE + "/initrd-%s.img" % kernel,
            "IMAGE": CACHE + "/host-%s.img" % kernel}


def build_image(kernel="bookworm"):
    """Runs build-host.sh for kernel (a no-op when the cache is current); returns its KEY=path
    map (KERNEL, INITRD, IMAGE)."""
    out = subprocess.run(["bash", os.path.join(HERE, "build-host.sh"), "--print", "--kernel", kernel],
                         check=True, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, SOFTAFF_MN_CACHE=CACHE)).stdout
    paths = dict(line.split("=", 1) for line in out.split() if "=" in line)
    paths.pop("KERNEL_NAME", None)
    return paths


def make_share(src, image, exclude=()):
    """An ext4 image of directory src (no loop mount: mkfs.ext4 -d), minus top-level exclude."""
    tree = src
    if any(os.path.lexists(os.path.join(src, e)) for e in exclude):
        tree = image + ".tree"
        shutil.copytree(src, tree, symlinks=True,
                        ignore=lambda d, names: [n for n in names if d == src and n in exclude])
    size = sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(tree) for f in fs)
    with open(image, "wb") as f:
        f.truncate(size * 2 + 64 * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", tree, image], check=True,
                   stdout=subprocess.DEVNULL)
    if tree != src:
        shutil.rmtree(tree)


class Host:
    def __init__(self, cpus=2, mem_mb=2048, build_dir=None, boot_timeout=600, kernel=None,
                 tcg_single=False):
        """tcg_single: one host thread for every vCPU (-accel tcg,thread=single). Slower, and
        both CPUs share the wall clock, but the kernel's live code patching (static branches,
        e.g. while sched_ext is enabled or disabled) never meets TCG's handling of code another
        vCPU modifies, which oopsed at an int3 in 2 of 8 runs of tests/sched/run-tcg.sh."""
        self.cpus, self.mem_mb, self.boot_timeout = cpus, mem_mb, boot_timeout
        self.tcg_single = tcg_single
        self.kernel = kernel_name(kernel)  # "bookworm" or "unstable"
        self.build_dir = build_dir or os.environ.get("SOFTAFF_BUILD_DIR")
        self.shares = [("sa-src", SRC_ROOT)]
        if self.build_dir:
            self.shares.append(("sa-build", os.path.abspath(self.build_dir)))
        self.proc = None
        self.sock = None
        self.workdir = None
        self.prepare_seconds = None
        self.boot_seconds = None  # QEMU start to agent ready
        self.softaffd_started = False  # see with_host()
        self._gone_what = None  # see _gone()
        self._buf = b""
        self._seq = 0

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    # ----------------------------------------------------------------------------------------

    def qemu_argv(self, paths):
        node_mb = self.mem_mb // self.cpus
        accel = "tcg,thread=single" if self.tcg_single else "tcg"
        argv = ["qemu-system-x86_64", "-accel", accel, "-nodefaults", "-no-user-config",
                "-display", "none", "-no-reboot", "-m", str(self.mem_mb),
                "-smp", "%d,sockets=%d,cores=1,threads=1" % (self.cpus, self.cpus),
                "-kernel", paths["KERNEL"], "-initrd", paths["INITRD"], "-append", CMDLINE,
                "-serial", "file:" + os.path.join(self.workdir, "console.log")]
        for n in range(self.cpus):  # one node per CPU, each with its own memory
            argv += ["-object", "memory-backend-ram,id=m%d,size=%dM" % (n, node_mb),
                     "-numa", "node,nodeid=%d,cpus=%d,memdev=m%d" % (n, n, n)]
        argv += ["-drive", "file=%s,if=none,id=root,format=raw,snapshot=on" % paths["IMAGE"],
                 "-device", "virtio-blk-pci,drive=root,serial=sa-root"]
        for serial, _ in self.shares:
            img = os.path.join(self.workdir, serial + ".img")
            argv += ["-drive", "file=%s,if=none,id=%s,format=raw,readonly=on" % (img, serial),
                     "-device", "virtio-blk-pci,drive=%s,serial=%s" % (serial, serial)]
        argv += ["-device", "virtio-serial-pci",
                 "-chardev", "socket,id=agent,path=%s,server=on,wait=off" % self._sock_path(),
                 "-device", "virtserialport,chardev=agent,name=" + AGENT_PORT]
        return argv

    def _sock_path(self):
        return os.path.join(self.workdir, "agent.sock")

    def start(self):
        """Boots the host and mounts the shares; on any failure stops what it started."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self):
        t0 = time.monotonic()
        paths = build_image(self.kernel) if os.environ.get("SOFTAFF_MN_NO_BUILD") != "1" \
            else cached_paths(self.kernel)
        for key, path in paths.items():
            if not os.path.exists(path):
                raise HostError("%s %s missing: run tests/multinode/build-host.sh" % (key, path))
        sweep_workdirs()
        self.workdir = tempfile.mkdtemp(prefix="%s%d-" % (WORKDIR_PREFIX, os.getpid()))
        for serial, src in self.shares:
            make_share(src, os.path.join(self.workdir, serial + ".img"), exclude=(".git",))
        argv = self.qemu_argv(paths)
        self.prepare_seconds = time.monotonic() - t0  # image check or build, shares
        t0 = time.monotonic()
        log("starting: " + " ".join(argv))
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent,
                                     stdout=open(os.path.join(self.workdir, "qemu.log"), "w"),
                                     stderr=subprocess.STDOUT)
        self._connect(t0 + self.boot_timeout)
        self._wait_agent(t0 + self.boot_timeout)
        self.boot_seconds = time.monotonic() - t0
        log("agent ready after %.1fs (%s kernel)" % (self.boot_seconds, self.kernel))
        for serial, path in self.shares:
            self.check("for d in /sys/block/vd*; do [ \"$(cat $d/serial)\" = %s ] && "
                       "mkdir -p %s && mount -o ro,noload /dev/${d##*/} %s && exit 0; done; "
                       "echo 'no disk with serial %s' >&2; exit 1" % (serial, path, path, serial),
                       timeout=60)

    def _alive(self):
        if self.proc.poll() is not None:
            raise HostGone(self._gone())

    def _gone(self):
        """Why the host went: QEMU's exit status (a guest panic ends it, -no-reboot) and the
        console's last lines, the console only the first time (a test's error, then its log
        tails at the end, both find the host gone). QEMU closes the agent's socket before it
        exits, so wait a little."""
        if self._gone_what is not None:
            return "%s (its console is in the first report of it)" % self._gone_what
        try:
            self._gone_what = "QEMU exited with status %d" % self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self._gone_what = "QEMU still runs"
        return "%s; console:\n%s" % (self._gone_what, self.console_tail(60))

    def _connect(self, deadline):
        while True:
            self._alive()
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(self._sock_path())
                self.sock = s
                return
            except OSError:
                s.close()
            if time.monotonic() > deadline:
                raise HostError("no agent socket %s" % self._sock_path())
            time.sleep(0.1)

    def _wait_agent(self, deadline):
        # PINGs queue up until the agent opens its port; any PONG of ours means it is serving.
        while True:
            self._alive()
            if time.monotonic() > deadline:
                raise HostError("agent silent after %ds; console:\n%s" % (self.boot_timeout,
                                                                          self.console_tail()))
            self._send("PING %d" % self._next())
            line = self._readline(time.monotonic() + 2)
            while line is not None:
                if line.startswith("PONG "):
                    self._drain()
                    return
                line = self._readline(time.monotonic() + 0.1)

    def _drain(self):
        # The agent answers every queued PING: read them all before the first RUN.
        self._send("PING drain")
        while True:
            line = self._readline(time.monotonic() + 60)
            if line is None or line.startswith("PONG drain"):
                return

    def _next(self):
        self._seq += 1
        return self._seq

    def _send(self, line):
        # Blocking: _readline leaves a short timeout behind, and a loaded host may not read yet.
        self.sock.settimeout(None)
        try:
            self.sock.sendall(line.encode() + b"\n")
        except ConnectionError as e:
            raise HostGone("agent channel: %s; %s" % (e, self._gone()))

    def _readline(self, deadline):
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            except ConnectionError as e:
                raise HostGone("agent channel: %s; %s" % (e, self._gone()))
            if not chunk:
                raise HostGone("agent channel closed; %s" % self._gone())
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    # ----------------------------------------------------------------------------------------

    def run(self, cmd, timeout=60):
        """Runs cmd with bash -c inside; Result(rc, out, err). rc 124: killed at timeout."""
        if self.sock is None:
            raise HostError("host not started")
        seq = self._next()
        enc = base64.b64encode(cmd.encode()).decode() or "-"
        self._send("RUN %d %d %s" % (seq, timeout, enc))
        deadline = time.monotonic() + timeout + 30  # the agent kills it at timeout (+5 s -k)
        while True:
            self._alive()
            line = self._readline(deadline)
            if line is None:
                raise HostError("no answer to %r within %ds" % (cmd, timeout + 30))
            f = line.split(" ")
            if f[0] == "DONE" and f[1] == str(seq) and len(f) == 5:
                return Result(int(f[2]), _b64(f[3]), _b64(f[4]))

    def check(self, cmd, timeout=60):
        """run() that raises HostError unless the command exits 0; returns its stdout."""
        r = self.run(cmd, timeout)
        if r.rc != 0:
            raise HostError("%r exited %d\nstdout: %s\nstderr: %s" % (cmd, r.rc, r.out, r.err))
        return r.out

    def start_softaffd(self, build, timeout=90):
        """Starts build's softaffd in the background and waits for its socket. Raises HostError
        with softaffd's log when it exits first or the socket does not come. Its PID is taken
        from the shell that starts it ($!), not found by name: under TCG the forked shell can
        still be "nohup" when the wait begins."""
        self.softaffd_started = True
        self.check("mkdir -p /run/softaff; nohup %s/softaffd --foreground "
                   ">/var/log/softaffd.log 2>&1 & echo $! >/run/softaff/started.pid" % build)
        self.check("p=$(cat /run/softaff/started.pid); for i in $(seq %d); do "
                   "[ -S /run/softaff/softaffd.sock ] && exit 0; kill -0 $p 2>/dev/null || break; "
                   "sleep 0.5; done; echo \"softaffd ($p) gave no socket\"; "
                   "cat /var/log/softaffd.log; dmesg | grep -i softaffd | tail -n 5; exit 1" % (2 * timeout), timeout=timeout + 10)

    def console_tail(self, lines=30):
        try:
            with open(os.path.join(self.workdir, "console.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return "(no console log: %s)" % e

    def stop(self):
        """Ends QEMU (the root disk is snapshot=on: nothing to flush) and removes the work dir."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.workdir:
            if os.environ.get("SOFTAFF_MN_KEEP") == "1":
                log("kept " + self.workdir)
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
