#!/usr/bin/env python3
"""Boot the multi-node test host (mnhost.py), run commands in it, stop it.

  run-host.py [--build-dir DIR] [--kernel bookworm|unstable] [--cpus N] [--mem MIB] [--libvirt]
              [--timeout S] [CMD ...]

Each CMD runs with bash -c inside, as root; its output is printed as it came (stdout, then
stderr). Without CMD, commands are read from standard input, one per line, until EOF. The exit
status is the last command's (1 when the host does not come up). --libvirt starts virtlogd and
libvirtd inside first (contrib/start-libvirt.sh). The build dir defaults to $SOFTAFF_BUILD_DIR.
"""

import argparse
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnhost  # noqa: E402


def run_one(h, cmd, timeout):
    r = h.run(cmd, timeout)
    sys.stdout.write(r.out)
    sys.stdout.flush()
    sys.stderr.write(r.err)
    if r.rc != 0:
        sys.stderr.write("run-host: %r exited %d\n" % (cmd, r.rc))
    return r.rc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.environ.get("SOFTAFF_BUILD_DIR"))
    ap.add_argument("--kernel", choices=mnhost.KERNELS, default=None,
                    help="bookworm (Debian 12's 6.1, default) or unstable (7.2.x); default "
                         "$SOFTAFF_MN_KERNEL")
    ap.add_argument("--cpus", type=int, default=2, help="CPUs, one NUMA node each (default 2)")
    ap.add_argument("--mem", type=int, default=2048, help="MiB, split evenly over the nodes")
    ap.add_argument("--libvirt", action="store_true", help="start libvirtd inside first")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per command")
    ap.add_argument("cmd", nargs="*")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("run-host: terminated"))
    rc = 0
    with mnhost.Host(cpus=a.cpus, mem_mb=a.mem, build_dir=a.build_dir, kernel=a.kernel) as h:
        mnhost.log("boot to ready: %.1fs" % h.boot_seconds)
        if a.libvirt:
            t0 = time.monotonic()
            rc = run_one(h, "bash %s/contrib/start-libvirt.sh" % mnhost.SRC_ROOT, a.timeout)
            mnhost.log("libvirt: %.1fs" % (time.monotonic() - t0))
            if rc != 0:
                return rc
        cmds = a.cmd or (line.rstrip("\n") for line in sys.stdin)
        for cmd in cmds:
            if cmd.strip():
                rc = run_one(h, cmd, a.timeout)
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except mnhost.HostError as e:
        sys.stderr.write("run-host: %s\n" % e)
        sys.exit(1)
