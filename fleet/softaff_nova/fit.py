"""The fit rule (docs/operators.md), pure: no I/O, no clock; the same rule as softaffd's.

A VM of V vCPUs, M MiB and expected demand D CPUs fits partition P when D <= P's headroom
(softaff_headroom_cpus) and M MiB <= the memory available to a VM homed on P
(softaff_partition_memory_available_bytes). How many VMs of one shape fit a host: the sum over
its partitions of floor(min(headroom / D, memory / M)), 0 where either is <= 0.
"""

import math

MIB = 1024 * 1024

# The weights SoftaffWeigher gives (fixed bounds, so Nova's normalisation keeps them as they are).
WEIGHT_NO_FIT = 0.0
WEIGHT_UNKNOWN = 0.5
WEIGHT_FIT_MIN = 0.5
WEIGHT_FIT_MAX = 1.0


class Partition:
    """One partition of a host as softaffd reports it."""

    __slots__ = ('headroom_cpus', 'memory_bytes', 'cpus')

    def __init__(self, headroom_cpus, memory_bytes, cpus=None):
        self.headroom_cpus = float(headroom_cpus)
        self.memory_bytes = float(memory_bytes)
        self.cpus = None if cpus is None else float(cpus)

    def __repr__(self):
        return 'Partition(headroom_cpus=%g, memory_bytes=%g, cpus=%s)' % (
            self.headroom_cpus, self.memory_bytes, self.cpus)


class HostReport:
    """What one host's softaffd says: its partitions by id and its demand per vCPU by class."""

    __slots__ = ('partitions', 'demand_per_vcpu')

    def __init__(self, partitions, demand_per_vcpu=None):
        self.partitions = dict(partitions)
        self.demand_per_vcpu = dict(demand_per_vcpu or {})

    def __repr__(self):
        return 'HostReport(%r, %r)' % (self.partitions, self.demand_per_vcpu)


class Shape:
    """A VM to place: vCPUs, memory (MiB) and expected demand (CPUs)."""

    __slots__ = ('vcpus', 'memory_mib', 'demand')

    def __init__(self, vcpus, memory_mib, demand):
        self.vcpus = int(vcpus)
        self.memory_mib = int(memory_mib)
        self.demand = float(demand)

    def __repr__(self):
        return 'Shape(vcpus=%d, memory_mib=%d, demand=%g)' % (
            self.vcpus, self.memory_mib, self.demand)


# softaffd's floor on a learned demand per vCPU (a class seen idle still costs something).
MIN_DEMAND_PER_VCPU = 0.05
# Fit comparisons allow for floating-point sums, as softaffd's do.
EPSILON = 1e-9


def fleet_demand_per_vcpu(reports):
    """The fleet's view of each class: per class (flavor), the mean over the hosts that report
    it of their demand per vCPU (each at least 0.05). `reports`: host name -> HostReport."""
    sums, counts = {}, {}
    for report in reports.values():
        if report is None:
            continue
        for cls, per_vcpu in report.demand_per_vcpu.items():
            sums[cls] = sums.get(cls, 0.0) + max(MIN_DEMAND_PER_VCPU, per_vcpu)
            counts[cls] = counts.get(cls, 0) + 1
    return {cls: sums[cls] / counts[cls] for cls in sums}


def expected_demand(report, vcpus, flavor_name, default_per_vcpu, fleet=None):
    """D for a VM of `vcpus` of a flavor: what this host saw for the class (at least 0.05 per
    vCPU); else what the fleet saw of it (fleet_demand_per_vcpu(), when given); else the
    default."""
    per_vcpu = default_per_vcpu
    if report is not None and flavor_name in report.demand_per_vcpu:
        per_vcpu = max(MIN_DEMAND_PER_VCPU, report.demand_per_vcpu[flavor_name])
    elif fleet and flavor_name in fleet:
        per_vcpu = fleet[flavor_name]
    return vcpus * per_vcpu


def partition_fits(part, shape):
    return (shape.demand <= part.headroom_cpus + EPSILON and
            shape.memory_mib * MIB <= part.memory_bytes)


def partition_count(part, shape):
    """How many VMs of the shape fit the partition (the contract's floor(min(...)))."""
    if part.headroom_cpus <= 0 or part.memory_bytes <= 0:
        return 0
    by_cpu = math.inf if shape.demand <= 0 else (part.headroom_cpus + EPSILON) / shape.demand
    by_mem = math.inf if shape.memory_mib <= 0 else part.memory_bytes / (shape.memory_mib * MIB)
    n = min(by_cpu, by_mem, float(1 << 20))  # a shape of no demand and no memory: "many"
    return int(math.floor(n))


def fit_count(report, shape):
    return sum(partition_count(p, shape) for p in report.partitions.values())


def free_share(part):
    """The partition's headroom as a share of its CPUs (0..1), before the VM."""
    capacity = part.cpus if part.cpus else max(part.headroom_cpus, 1.0)
    return min(1.0, max(0.0, part.headroom_cpus / capacity))


def best_partition(report, shape, mode):
    """The partition the VM would take among those where it fits: the one with the least
    headroom (pack: the fullest first) or the most (spread). Returns (partition id, its
    headroom as a share of its CPUs, before the VM) or None when no partition fits. Ties:
    lowest id.

    Partitions are compared by their headroom before the VM, not by what the VM would leave:
    the VM's expected demand differs between hosts (one learned the flavor, another counts the
    default), and "what it would leave" made a host that had never seen the flavor look like
    the tightest fit only because the VM counted bigger there."""
    best = None
    for pid in sorted(report.partitions):
        part = report.partitions[pid]
        if not partition_fits(part, shape):
            continue
        share = free_share(part)
        if best is None or (share < best[1] if mode == 'pack' else share > best[1]):
            best = (pid, share)
    return best


def weight(report, shape, mode):
    """SoftaffWeigher's weight of a host: 0.5 unknown (no report), 0 no partition fits, else
    0.5..1 by the headroom of the partition the VM would take: pack 0.5 + 0.5 x (1 - headroom
    / CPUs), the fuller the higher; spread 0.5 + 0.5 x headroom / CPUs."""
    if report is None:
        return WEIGHT_UNKNOWN
    best = best_partition(report, shape, mode)
    if best is None:
        return WEIGHT_NO_FIT
    share = best[1]
    closeness = 1.0 - share if mode == 'pack' else share
    return WEIGHT_FIT_MIN + (WEIGHT_FIT_MAX - WEIGHT_FIT_MIN) * closeness
