#!/usr/bin/python3
"""Consolidation across a fleet: VMs of the Bitbrains trace arrive over a simulated day on a
fleet of 2-node hosts; each placement goes through Nova's real filter and weighing code (Debian's
python3-nova); softaff's headroom model stands in for each host's softaffd.

    bench/run-consolidation.py [--hosts N] [--seed S] [--out DIR] [--model PROGRAM]

Scenarios, on the same arrivals:
  nova-defaults   Nova's default weighers and multipliers (RAM, CPU, ... spread)
  nova-stack      the default weighers set to stack: ram_weight_multiplier=-1,
                  cpu_weight_multiplier=-1 (Nova's documented way to pack)
  softaff-pack    docs/operators.md's pack setting: the default weighers with RAM and CPU
                  stacking (-1), SoftaffWeigher (pack, multiplier 10) and SoftaffFitFilter
  softaff-pack-spreading  the same with the RAM and CPU weighers left spreading (+1)
  softaff-only    SoftaffWeigher (pack) and SoftaffFitFilter alone
  nova-stack-cpu2, softaff-pack-cpu2  nova-stack and softaff-pack with placement's
                  cpu_allocation_ratio 2.0 instead of 4.0 (Nova's own lever against overload)
A VM's flavor is its vCPUs and its memory rounded up to a power of two (at least 1 GiB), as a
cloud offers a few flavors; softaffd learns a demand per vCPU per flavor on each host.
Every scenario has placement's capacity check first (cpu_allocation_ratio 4.0 unless said,
ram_allocation_ratio 1.0: Nova 26's initial ratios), and softaffd's homing on each host.

Figures: hosts used at the end of the day; partition-minutes in which a partition's owners
(the VMs homed there) wanted more CPU than it has; VMs per host. Writes DIR/consolidation.dat
(hosts in use and partitions over capacity per 5-minute slot) and, with gnuplot,
DIR/consolidation.png.

The host model: --model build/bench/bench-headroom runs softaffd's own (policies/headroom.c),
one process per host; without it, bench/fleet_model.py's Python stand-in (same rule).
"""

import argparse
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'fleet'))
sys.path.insert(0, HERE)

import novahelp as nh  # noqa: E402  (puts fleet/ on the path)
import fleet_model  # noqa: E402
from softaff_nova import source  # noqa: E402

SLOTS = 288
SLOT_MIN = 5
NODE_CPUS = 16
NODE_MEM_MIB = 256 * 1024
CPU_RATIO = 4.0
RAM_RATIO = 1.0

NOVA = ['nova.scheduler.weights.all_weighers']
SOFTAFF = NOVA + ['softaff_nova.weigher.SoftaffWeigher']
STACK = {'ram_weight_multiplier': -1.0, 'cpu_weight_multiplier': -1.0}
SCENARIOS = {
    'nova-defaults': dict(weighers=NOVA, filters=[], multipliers={}),
    'nova-stack': dict(weighers=NOVA, filters=[], multipliers=STACK),
    'softaff-pack': dict(weighers=SOFTAFF, filters=['SoftaffFitFilter'], multipliers=STACK),
    'softaff-pack-spreading': dict(weighers=SOFTAFF, filters=['SoftaffFitFilter'],
                                   multipliers={}),
    'softaff-only': dict(weighers=['softaff_nova.weigher.SoftaffWeigher'],
                         filters=['SoftaffFitFilter'], multipliers={}),
    'nova-stack-cpu2': dict(weighers=NOVA, filters=[], multipliers=STACK, cpu_ratio=2.0),
    'softaff-pack-cpu2': dict(weighers=SOFTAFF, filters=['SoftaffFitFilter'], multipliers=STACK,
                              cpu_ratio=2.0),
}


def load_trace(path):
    vms = []
    with open(path) as f:
        for line in f:
            if line.startswith('#') or not line.strip():
                continue
            cols = line.split(',')
            demand = [int(x) / 100.0 for x in cols[3:]]
            if len(demand) != SLOTS:
                raise ValueError('%s: VM %s has %d samples, expected %d'
                                 % (path, cols[0], len(demand), SLOTS))
            vcpus, memory = int(cols[1]), max(1024, int(cols[2]))
            flavor_mib = 1 << (memory - 1).bit_length()
            vms.append({'id': int(cols[0]), 'vcpus': vcpus, 'memory_mib': flavor_mib,
                        'flavor': 'v%d-m%d' % (vcpus, flavor_mib), 'demand': demand})
    return vms


def configure(scenario):
    sc = SCENARIOS[scenario]
    fs = {'available_filters': ['nova.scheduler.filters.all_filters',
                                'softaff_nova.filter.SoftaffFitFilter'],
          'enabled_filters': sc['filters'], 'weight_classes': sc['weighers']}
    fs.update(sc['multipliers'])
    nh.configure(filter_scheduler=fs, softaff={'mode': 'pack', 'weight_multiplier': 10.0})
    return nh.Scheduler()


class Fleet:
    def __init__(self, n_hosts, model, cpu_ratio):
        self.hosts = ['host%02d' % i for i in range(n_hosts)]
        self.model = model
        self.cpu_ratio = cpu_ratio
        self.vcpus_used = {h: 0 for h in self.hosts}
        self.ram_used = {h: 0 for h in self.hosts}
        self.vms = {h: [] for h in self.hosts}

    def host_states(self, vm):
        """Host states of the hosts placement would offer (allocation ratios)."""
        out = []
        for h in self.hosts:
            if self.vcpus_used[h] + vm['vcpus'] > 2 * NODE_CPUS * self.cpu_ratio:
                continue
            if self.ram_used[h] + vm['memory_mib'] > 2 * NODE_MEM_MIB * RAM_RATIO:
                continue
            out.append(nh.host_state(h, 2 * NODE_CPUS, 2 * NODE_MEM_MIB,
                                     vcpus_used=self.vcpus_used[h], ram_used_mb=self.ram_used[h],
                                     num_instances=len(self.vms[h]),
                                     cpu_allocation_ratio=self.cpu_ratio))
        return out

    def place(self, host, vm, slot):
        self.vcpus_used[host] += vm['vcpus']
        self.ram_used[host] += vm['memory_mib']
        self.vms[host].append(vm)
        self.model.add_vm(host, vm, slot)


class ModelSource:
    """SoftaffWeigher's and SoftaffFitFilter's view: the model's reports at the current slot."""

    def __init__(self, model):
        self.model = model
        self.slot = 0

    def reports(self):
        return self.model.reports(self.slot)


def run(scenario, vms, arrivals, n_hosts, model_factory):
    sched = configure(scenario)
    model = model_factory(n_hosts)
    fleet = Fleet(n_hosts, model, SCENARIOS[scenario].get('cpu_ratio', CPU_RATIO))
    src = ModelSource(model)
    source.override(src)
    refused = narrowed = 0
    for slot, vm in arrivals:
        src.slot = slot
        spec = nh.request_spec(vm['flavor'], vm['vcpus'], vm['memory_mib'])
        offered = fleet.host_states(vm)
        passed = sched.filter(offered, spec)
        # The fit filter refused a host placement offered (the only filter enabled here).
        narrowed += len(passed) < len(offered)
        picked = sched.weigh(passed, spec)
        if not picked:
            refused += 1
            continue
        fleet.place(picked[0].obj.host, vm, slot)
    source.override(None)
    return fleet, refused, narrowed


def figures(fleet, arrivals_by_id):
    used = [h for h in fleet.hosts if fleet.vms[h]]
    over_min = 0
    over_parts = set()
    per_slot = []
    for t in range(SLOTS):
        in_use = sum(1 for h in fleet.hosts
                     if any(arrivals_by_id[v['id']] <= t for v in fleet.vms[h]))
        over_now = 0
        for h in fleet.hosts:
            for p, owners in fleet.model.homed(h).items():
                want = sum(v['demand'][t] for v in owners if arrivals_by_id[v['id']] <= t)
                if want > NODE_CPUS + 1e-9:
                    over_now += 1
                    over_parts.add((h, p))
        over_min += over_now * SLOT_MIN
        per_slot.append((t, in_use, over_now))
    counts = [len(fleet.vms[h]) for h in used]
    return {'hosts': len(used), 'over_min': over_min, 'over_parts': len(over_parts),
            'vms_mean': sum(counts) / len(counts) if counts else 0.0,
            'vms_max': max(counts) if counts else 0, 'vms_min': min(counts) if counts else 0,
            'per_slot': per_slot}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--trace', default=os.path.join(HERE, 'data', 'bitbrains-rnd-2013-07-02.csv'))
    ap.add_argument('--hosts', type=int, default=30)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--margin', type=float, default=1.0,
                    help='burst margin of a partition in CPUs (default 1)')
    ap.add_argument('--window', type=int, default=12,
                    help='the headroom window in 5-minute slots (default 12: [fleet] window_s=3600)')
    ap.add_argument('--seeds', type=int, default=1,
                    help='repeat with seeds SEED..SEED+N-1 (other arrival orders) and sum up')
    ap.add_argument('--out', default=None, help='where the .dat and .png go')
    ap.add_argument('--model', default=None,
                    help='bench-headroom (build/bench/bench-headroom): softaffd\'s own model '
                         'per host; without it, the Python stand-in of bench/fleet_model.py')
    args = ap.parse_args()

    vms = load_trace(args.trace)
    shapes = sorted({(v['flavor'], v['vcpus'], v['memory_mib']) for v in vms})

    def model_factory(n):
        if args.model:
            return fleet_model.CModel(args.model, n, NODE_CPUS, NODE_MEM_MIB, shapes,
                                      args.window * 300)
        return fleet_model.PyModel(n, NODE_CPUS, NODE_MEM_MIB, args.margin, args.window)

    print('trace: %s: %d VMs, %d vCPUs, %.0f GiB; arrivals over %d 5-min slots'
          % (os.path.basename(args.trace), len(vms), sum(v['vcpus'] for v in vms),
             sum(v['memory_mib'] for v in vms) / 1024, SLOTS))
    print('fleet: %d hosts of 2 nodes x %d CPUs x %d GiB; placement ratios cpu %.1f ram %.1f; '
          'burst margin %.1f CPU; window %d slots; model: %s'
          % (args.hosts, NODE_CPUS, NODE_MEM_MIB // 1024, CPU_RATIO, RAM_RATIO, args.margin,
             args.window, args.model or 'bench/fleet_model.py PyModel'))
    print()
    print('| seed | scenario | hosts used | partition-minutes over capacity | partitions ever over '
          '| VMs per host (mean / min / max) | VMs refused | placements where the fit filter '
          'refused a host |')
    print('|---:|---|---:|---:|---:|---|---:|---:|')
    totals = {name: [] for name in SCENARIOS}
    first = None
    for seed in range(args.seed, args.seed + args.seeds):
        rng = random.Random(seed)
        arrivals = sorted(((rng.randrange(SLOTS), vm) for vm in vms),
                          key=lambda a: (a[0], a[1]['id']))
        arrivals_by_id = {vm['id']: slot for slot, vm in arrivals}
        results = {}
        for name in SCENARIOS:
            fleet, refused, narrowed = run(name, vms, arrivals, args.hosts, model_factory)
            if hasattr(fleet.model, 'close'):
                fleet.model.close()
            results[name] = dict(figures(fleet, arrivals_by_id), refused=refused,
                                 narrowed=narrowed)
            r = results[name]
            totals[name].append(r)
            print('| %d | %s | %d | %d | %d | %.1f / %d / %d | %d | %d |' % (
                seed, name, r['hosts'], r['over_min'], r['over_parts'], r['vms_mean'],
                r['vms_min'], r['vms_max'], r['refused'], r['narrowed']), flush=True)
        first = first or results
    if args.seeds > 1:
        print()
        print('| scenario (%d seeds) | hosts used, mean | partition-minutes over capacity, mean '
              '| seeds with fewer hosts than nova-stack | seeds with fewer over-capacity minutes '
              'than nova-stack |' % args.seeds)
        print('|---|---:|---:|---:|---:|')
        base = totals.get('nova-stack')
        for name, rs in totals.items():
            fewer_h = sum(1 for r, b in zip(rs, base) if r['hosts'] < b['hosts'])
            fewer_o = sum(1 for r, b in zip(rs, base) if r['over_min'] < b['over_min'])
            print('| %s | %.1f | %.0f | %d | %d |' % (
                name, sum(r['hosts'] for r in rs) / len(rs),
                sum(r['over_min'] for r in rs) / len(rs), fewer_h, fewer_o))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        dat = os.path.join(args.out, 'consolidation.dat')
        with open(dat, 'w') as f:
            f.write('# seed %d; hour ' % args.seed + ' '.join(
                '%s_hosts %s_over' % (n, n) for n in first) + '\n')
            for t in range(SLOTS):
                f.write('%.3f %s\n' % (t * SLOT_MIN / 60.0, ' '.join(
                    '%d %d' % r['per_slot'][t][1:] for r in first.values())))
        png = os.path.join(args.out, 'consolidation.png')
        plot(dat, png, list(first))
        print('wrote %s and %s' % (dat, png))


def plot(dat, png, names):
    cmds = ['set terminal png size 900,620', 'set output "%s"' % png,
            'set multiplot layout 2,1', 'set key left top', 'set xrange [0:24]',
            'set ylabel "hosts in use"', 'set grid']
    cmds.append('plot ' + ', '.join('"%s" using 1:%d with steps lw 2 title "%s"' % (
        dat, 2 + 2 * i, n) for i, n in enumerate(names)))
    cmds += ['set xlabel "hour of the day (VMs arrive all day)"',
             'set ylabel "partitions over capacity"']
    cmds.append('plot ' + ', '.join('"%s" using 1:%d with steps lw 2 title "%s"' % (
        dat, 3 + 2 * i, n) for i, n in enumerate(names)))
    cmds.append('unset multiplot')
    subprocess.run(['gnuplot'], input='\n'.join(cmds).encode(), check=True)


if __name__ == '__main__':
    main()
