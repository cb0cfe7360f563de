#!/usr/bin/env python3
"""Derive bench/data/bitbrains-rnd-2013-07-02.csv from the Bitbrains GWA-T-12 Rnd trace.

    derive-bitbrains.py RND_2013_7_DIR [--day EPOCH] [--vms N] > bitbrains-rnd-2013-07-02.csv

RND_2013_7_DIR holds the trace's per-VM files (1.csv ... 500.csv of rnd/2013-7; columns
separated by ';' and a tab, the first being the sample time in seconds although the header says
ms). For one UTC day from --day, each VM's samples go to the nearest 5-minute slot; a VM is kept
when it has a sample with non-zero provisioned CPU and memory in at least 276 of the 288 slots
(missing slots take the previous slot's value) and it has at most --max-vcpus vCPUs and
--max-memory-mib memory (the few larger VMs fit no host of the benchmark). The first --vms kept VMs in file-number order
are written as one line each: vm,vcpus,memory_mib and 288 demands in hundredths of a CPU (CPU
usage in MHz over the MHz of one provisioned core).
"""
import argparse
import os
import sys

SLOT_S = 300
SLOTS = 288


def read_vm(path, day):
    slots = [None] * SLOTS
    cores = mem_kb = 0
    with open(path) as f:
        next(f)
        for line in f:
            cols = [c.strip() for c in line.split(';')]
            if len(cols) < 7:
                continue
            t = int(cols[0])
            k = (t - day + SLOT_S // 2) // SLOT_S
            if not 0 <= k < SLOTS:
                continue
            n, cap_mhz, use_mhz, prov_kb = int(cols[1]), float(cols[2]), float(cols[3]), float(cols[5])
            if n <= 0 or cap_mhz <= 0 or prov_kb <= 0:
                continue
            cores, mem_kb = max(cores, n), max(mem_kb, prov_kb)
            slots[k] = use_mhz / (cap_mhz / n)
    return cores, mem_kb, slots


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('dir')
    ap.add_argument('--day', type=int, default=1372723200)  # 2013-07-02 00:00 UTC, a Tuesday
    ap.add_argument('--vms', type=int, default=300)
    ap.add_argument('--max-vcpus', type=int, default=8)
    ap.add_argument('--max-memory-mib', type=int, default=131072)
    args = ap.parse_args()
    ids = sorted(int(f[:-4]) for f in os.listdir(args.dir) if f.endswith('.csv') and f[:-4].isdigit())
    out = 0
    print('# Bitbrains GWA-T-12 Rnd, 2013-07 directory, one UTC day from %d (see README.md)' % args.day)
    print('# vm,vcpus,memory_mib,then %d demands (5-min slots) in hundredths of a CPU' % SLOTS)
    for i in ids:
        cores, mem_kb, slots = read_vm(os.path.join(args.dir, '%d.csv' % i), args.day)
        if sum(s is not None for s in slots) < SLOTS - 12:
            continue
        if cores > args.max_vcpus or mem_kb / 1024 > args.max_memory_mib:
            continue
        prev = next(s for s in slots if s is not None)
        vals = []
        for s in slots:
            prev = prev if s is None else s
            vals.append(str(max(0, min(cores * 100, round(prev * 100)))))
        print('%d,%d,%d,%s' % (i, cores, round(mem_kb / 1024), ','.join(vals)))
        out += 1
        if out == args.vms:
            break
    print('derive-bitbrains: %d VMs written' % out, file=sys.stderr)


if __name__ == '__main__':
    main()
