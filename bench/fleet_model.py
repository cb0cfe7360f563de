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

ProgramModel runs softaffd's own model as a program: it writes one JSON object a line to its
stdin ({"op": "add_vm", ...} and {"op": "reports", "slot": T}) and reads one JSON line back for
each "reports": {"HOST": {"partitions": {"P": [headroom_cpus, memory_bytes, cpus]},
"demand_per_vcpu": {"CLASS": x}, "homes": {"VMID": P}}}.
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
        """Reports of the hosts whose window is covered enough ([softaff] min_coverage 0.25):
        the others are unknown, as the weigher sees them through Prometheus."""
        if min(1.0, slot / self.window) < 0.25:
            return {}
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


class ProgramModel:
    """softaffd's model as a program speaking JSON lines (see the module's docstring)."""

    def __init__(self, program, n_hosts, node_cpus, node_mem_mib, margin, window=WINDOW):
        self.proc = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.vms = {}
        self.homes = {'host%02d' % i: {0: [], 1: []} for i in range(n_hosts)}
        self._send({'op': 'fleet', 'hosts': sorted(self.homes), 'node_cpus': node_cpus,
                    'node_memory_mib': node_mem_mib, 'margin': margin, 'window_slots': window,
                    'quantile': QUANTILE})

    def _send(self, obj):
        self.proc.stdin.write(json.dumps(obj) + '\n')

    def add_vm(self, host, vm, slot):
        self.vms[vm['id']] = vm
        self._send({'op': 'add_vm', 'host': host, 'slot': slot, 'id': vm['id'],
                    'vcpus': vm['vcpus'], 'memory_mib': vm['memory_mib'], 'class': vm['flavor'],
                    'demand': vm['demand']})

    def reports(self, slot):
        self._send({'op': 'reports', 'slot': slot})
        answer = json.loads(self.proc.stdout.readline())
        out = {}
        for host, r in answer.items():
            parts = {int(p): fit.Partition(*v) for p, v in r['partitions'].items()}
            out[host] = fit.HostReport(parts, r.get('demand_per_vcpu', {}))
            homes = {0: [], 1: []}
            for vid, p in r.get('homes', {}).items():
                homes.setdefault(int(p), []).append(self.vms[int(vid)])
            self.homes[host] = homes
        return out

    def homed(self, host):
        return self.homes[host]
