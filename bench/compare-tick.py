#!/usr/bin/env python3
"""Runs two bench-tick binaries alternately (old, new, old, new, ...) on the same machine in one
run and prints their figures side by side: the tick's median and p95 (sampling + policy + apply),
the policy's p95 and the peak RSS, per scenario, as the median over the rounds.

  bench/compare-tick.py --old OLD/bench/bench-tick --new NEW/bench/bench-tick [--rounds 3]
                        [-- extra bench-tick arguments]

Build both with --buildtype=release. Alternating spreads the machine's noise over both."""
import argparse
import re
import statistics
import subprocess
import sys

LINE = re.compile(r"^\s+(sampling \+ policy \+ apply|policy)\s+median\s+([\d.]+) ms\s+p95\s+([\d.]+) ms")
SCENARIO = re.compile(r"^daemon tick, (.*?):")
RSS = re.compile(r"peak RSS of the whole bench process (\d+) KiB")


def run(binary, extra):
    out = subprocess.run([binary] + extra, stdout=subprocess.PIPE, text=True, check=False).stdout
    figures, scenario = {}, None
    for line in out.splitlines():
        m = SCENARIO.match(line)
        if m:
            scenario = m.group(1)
            continue
        m = LINE.match(line)
        if m and scenario:
            key = "tick" if m.group(1).startswith("sampling") else "policy"
            figures[(scenario, key, "median")] = float(m.group(2))
            figures[(scenario, key, "p95")] = float(m.group(3))
        m = RSS.search(line)
        if m:
            figures[("all", "rss", "KiB")] = float(m.group(1))
    return figures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()
    runs = {"old": [], "new": []}
    for r in range(args.rounds):
        for which in ("old", "new"):
            figures = run(getattr(args, which), args.extra)
            runs[which].append(figures)
            print("round %d %s: %s" % (r + 1, which, ", ".join(
                "%s %s %s %.3f" % (k + (v,)) for k, v in sorted(figures.items()))), flush=True)
    keys = sorted(set(runs["old"][0]) | set(runs["new"][0]))
    print("\n| scenario | figure | old | new | new/old |")
    print("|---|---|---|---|---|")
    for k in keys:
        old = statistics.median(f[k] for f in runs["old"] if k in f)
        new = statistics.median(f[k] for f in runs["new"] if k in f)
        unit = "KiB" if k[1] == "rss" else "ms"
        print("| %s | %s %s | %.3f %s | %.3f %s | %.2f |" % (
            k[0], k[1], k[2], old, unit, new, unit, new / old if old else float("nan")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
