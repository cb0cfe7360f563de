#!/usr/bin/env python3
"""The soak as a benchmark: tests/soak/soak.py for --duration seconds (default one hour), its
report kept.

    SOFTAFF_BUILD_DIR=build python3 bench/run-soak.py [--duration 3600] [--seed N] [--out DIR]

Runs the driver (four real libvirt guests, random operations and faults from a seed, invariants
checked all along; tests/soak/soak.py says which) and writes DIR/soak-SEED.json (the report:
seed, start and end, operations by kind, invariant checks made, violations with their seed and
step, status latency p50/p99/max) and DIR/soak-SEED.log (every step), then prints a summary.
Root, libvirtd and QEMU; the host's other libvirt users must wait (hold
/run/softaff-host-libvirt.lock around it on a shared host). Exit status: the driver's (0: no
violation)."""
import argparse
import json
import os
import random
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description="the soak, as a benchmark")
    ap.add_argument("--duration", type=float, default=3600, help="seconds of operations")
    ap.add_argument("--seed", type=int, default=None, help="replay this seed (default: fresh)")
    ap.add_argument("--out", default="soak-out", help="directory for the report and the log")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2 ** 31)
    os.makedirs(args.out, exist_ok=True)
    report = os.path.join(args.out, "soak-%d.json" % seed)
    log = os.path.join(args.out, "soak-%d.log" % seed)
    env = dict(os.environ)
    env.setdefault("SOFTAFF_BUILD_DIR", os.path.join(TOP, "build"))
    env.setdefault("SOFTAFF_REQUIRE_VM", "1")
    print("run-soak: seed %d, %s s; log %s, report %s" % (seed, args.duration, log, report),
          flush=True)
    with open(log, "w") as f:
        rc = subprocess.call([sys.executable, os.path.join(TOP, "tests", "soak", "soak.py"),
                              "--seed", str(seed), "--duration", str(args.duration),
                              "--report", report], stdout=f, stderr=subprocess.STDOUT, env=env)
    try:
        with open(report) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        print("run-soak: no report (%s); the driver exited %d, see %s" % (e, rc, log))
        return rc or 1
    lat = r["status_latency_ms"]
    print("seed %d, %s to %s, %s s of operations, %d steps (%s guests)" % (
        r["seed"], r["started"], r["ended"], r["operations_s"], r["steps"], r["domain_type"]))
    print("operations: " + ", ".join("%s %d" % kv for kv in r["operations"].items()))
    print("checks: " + ", ".join("%s %d" % kv for kv in r["checks"].items()))
    print("status latency (ms, n=%d): p50 %s, p99 %s, max %s" % (
        lat["n"], lat["p50"], lat["p99"], lat["max"]))
    print("SIGTERM (longest): %s s" % r["sigterm_s_max"])
    print("violations: %d" % len(r["violations"]))
    for v in r["violations"]:
        print("  seed %d step %d (%s) %s: %s" % (v["seed"], v["step"], v["op"], v["invariant"],
                                                 v["detail"]))
    for i in r.get("incidents", []):
        print("  incident (an operation that did not complete; the guest started afresh): seed %d "
              "step %d (%s): %s" % (i["seed"], i["step"], i["op"], i["error"]))
    if r.get("driver_error"):
        print("driver error: " + r["driver_error"])
    return rc


if __name__ == "__main__":
    sys.exit(main())
