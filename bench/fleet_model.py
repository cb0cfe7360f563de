"""softaff's headroom model for the consolidation benchmark (bench/run-consolidation.py).

PyModel is a Python stand-in of softaffd's model, with the fit rule of docs/operators.md:
- a partition's owners' demand, one sample per 5-minute slot, kept over a window (12 slots, one
  hour, by default); the headroom is its capacity minus the burst margin minus the demand at the 0.95
  quantile (nearest rank) of the window;
- the memory available to a new VM homed there: the node's memory minus what homed VMs have;
- the demand per vCPU of a class (flavor) seen on the host: its VMs' mean over the window;
- a new VM is homed, among the partitions where it fits, on the one with the lowest commitment
  (homed vCPUs / CPUs, as softaffd's choose_home), then more free memory, then the lower id;
  where it fits none, on the lowest commitment among all.

CModel runs softaffd's own model (policies/headroom.c through bench/bench-headroom, one process
per host); PyModel is what the benchmark used before that program existed, kept to compare.
"""

import json
import math
import subprocess

from softaff_nova import fit

WINDOW = 12
QUANTILE = 0.95
MIB = 1 << 20


def quantile(values, q):
    if not values:
        return 0.0
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


class PyModel:
    def __init__(self, n_hosts, node_cpus, node_mem_mib, margin, window=WINDOW):
        self.window = window
        self.node_cpus = node_cpus
        self.node_mem = node_mem_mib * MIB
        self.margin = margin
        self.homes = {'host%02d' % i: {0: [], 1: []} for i in range(n_hosts)}
        self.arrival = {}

    def homed(self, host):
        return self.homes[host]

    def _window(self, slot):
        return range(max(0, slot - self.window), slot)

    def _owner_demand(self, vms, t):
        return sum(v['demand'][t] for v in vms if self.arrival[v['id']] <= t)

    def _partition(self, vms, slot):
        demand = quantile([self._owner_demand(vms, t) for t in self._window(slot)], QUANTILE)
        headroom = self.node_cpus - self.margin - demand
        memory = self.node_mem - sum(v['memory_mib'] for v in vms) * MIB
        return fit.Partition(headroom, memory, self.node_cpus)

    def _classes(self, host, slot):
        used, vcpus = {}, {}
        for vms in self.homes[host].values():
            for v in vms:
                for t in self._window(slot):
                    if self.arrival[v['id']] <= t:
                        used[v['flavor']] = used.get(v['flavor'], 0.0) + v['demand'][t]
                        vcpus[v['flavor']] = vcpus.get(v['flavor'], 0) + v['vcpus']
        return {c: used[c] / vcpus[c] for c in used if vcpus[c]}

    def report(self, host, slot):
        parts = {p: self._partition(vms, slot) for p, vms in self.homes[host].items()}
        return fit.HostReport(parts, self._classes(host, slot))

    def reports(self, slot):
        """Every host's report: their softaffd ran before the day began (idle: no owners'
        demand), so each window is covered from the first slot."""
        return {h: self.report(h, slot) for h in self.homes}

    def add_vm(self, host, vm, slot):
        self.arrival[vm['id']] = slot
        report = self.report(host, slot)
        demand = fit.expected_demand(report, vm['vcpus'], vm['flavor'], 1.0)
        shape = fit.Shape(vm['vcpus'], vm['memory_mib'], demand)
        homes = self.homes[host]

        def key(p):
            committed = sum(v['vcpus'] for v in homes[p]) + vm['vcpus']
            return (committed / self.node_cpus, -report.partitions[p].memory_bytes, p)

        fitting = [p for p in homes if fit.partition_fits(report.partitions[p], shape)]
        home = min(fitting or list(homes), key=key)
        homes[home].append(vm)


class CModel:
    """softaffd's own model: one bench/bench-headroom process per host (its protocol is at the
    top of bench/bench-headroom.c). Each host is fed its homed VMs' demand step by step up to
    the slot asked for; a new VM is homed where the model's fit says advise would home one of
    its flavor, else on the partition with the most memory available."""

    def __init__(self, program, n_hosts, node_cpus, node_mem_mib, shapes, window_s):
        self.procs = {}
        self.homes = {}
        self.fed = {}
        self.last = {}
        self.arrival = {}
        first = {'partitions': [{'id': 0, 'cpus': node_cpus, 'node': 0},
                                {'id': 1, 'cpus': node_cpus, 'node': 1}],
                 'nodes': [{'id': 0, 'memory_mib': node_mem_mib},
                           {'id': 1, 'memory_mib': node_mem_mib}],
                 'window_s': window_s, 'quantile': QUANTILE,
                 'shapes': [{'name': n, 'vcpus': v, 'memory_mib': m, 'class': n}
                            for n, v, m in shapes]}
        for i in range(n_hosts):
            h = 'host%02d' % i
            self.procs[h] = subprocess.Popen([program], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, text=True, bufsize=1)
            self.homes[h] = {0: [], 1: []}
            answer = self._ask(h, first)
            if not answer.get('ok'):
                raise RuntimeError('%s: %s' % (program, answer))
            # The host ran idle before the day: one empty step.
            self.last[h] = self._ask(h, {'t': 0, 'step_s': 300, 'vms': []})
            self.fed[h] = 0

    def _ask(self, host, obj):
        p = self.procs[host]
        p.stdin.write(json.dumps(obj) + '\n')
        line = p.stdout.readline()
        if not line:
            raise RuntimeError('bench-headroom for %s ended' % host)
        return json.loads(line)

    def _feed(self, host, slot):
        while self.fed[host] < slot:
            t = self.fed[host]
            vms = [{'partition': p, 'vcpus': v['vcpus'], 'memory_mib': v['memory_mib'],
                    'demand': v['demand'][t], 'class': v['flavor']}
                   for p, owners in self.homes[host].items() for v in owners
                   if self.arrival[v['id']] <= t]
            self.last[host] = self._ask(host, {'t': (t + 1) * 300, 'step_s': 300, 'vms': vms})
            self.fed[host] += 1

    def report(self, host, slot):
        self._feed(host, slot)
        a = self.last[host]
        parts = {p['id']: fit.Partition(p['headroom'], p['memory_available_mib'] * MIB,
                                        p['capacity']) for p in a['partitions']}
        demand = {f['shape']: f['demand'] / f['vcpus'] for f in a['fit'] if f['learned']}
        return fit.HostReport(parts, demand)

    def reports(self, slot):
        return {h: self.report(h, slot) for h in self.procs}

    def add_vm(self, host, vm, slot):
        self._feed(host, slot)
        self.arrival[vm['id']] = slot
        a = self.last[host]
        home = None
        for f in a['fit']:
            if f['shape'] == vm['flavor'] and f['partition'] >= 0:
                home = f['partition']
        if home is None:
            raise RuntimeError('bench-headroom for %s: no partition for %s' % (host, vm['flavor']))
        self.homes[host][home].append(vm)

    def homed(self, host):
        return self.homes[host]

    def close(self):
        for p in self.procs.values():
            p.stdin.close()
            p.wait()
