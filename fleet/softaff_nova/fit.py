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


def expected_demand(report, vcpus, flavor_name, default_per_vcpu):
    """D for a VM of `vcpus` of a flavor: what the host saw for the class (at least 0.05 per
    vCPU), else the default."""
    per_vcpu = default_per_vcpu
    if report is not None and flavor_name in report.demand_per_vcpu:
        per_vcpu = max(MIN_DEMAND_PER_VCPU, report.demand_per_vcpu[flavor_name])
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


def leftover_share(part, shape):
    """The headroom the partition keeps after the VM, as a share of its capacity (0..1)."""
    left = part.headroom_cpus - shape.demand
    capacity = part.cpus if part.cpus else max(part.headroom_cpus, shape.demand, 1.0)
    return min(1.0, max(0.0, left / capacity))


def best_partition(report, shape, mode):
    """The partition the VM would take: the tightest fit (pack) or the loosest (spread).
    Returns (partition id, leftover share) or None when no partition fits. Ties: lowest id."""
    best = None
    for pid in sorted(report.partitions):
        part = report.partitions[pid]
        if not partition_fits(part, shape):
            continue
        share = leftover_share(part, shape)
        if best is None or (share < best[1] if mode == 'pack' else share > best[1]):
            best = (pid, share)
    return best


def weight(report, shape, mode):
    """SoftaffWeigher's weight of a host: 0.5 unknown (no report), 0 no partition fits, else
    0.5..1: pack gives 1 to a VM that leaves its partition no headroom, spread to one that
    leaves it all."""
    if report is None:
        return WEIGHT_UNKNOWN
    best = best_partition(report, shape, mode)
    if best is None:
        return WEIGHT_NO_FIT
    share = best[1]
    closeness = 1.0 - share if mode == 'pack' else share
    return WEIGHT_FIT_MIN + (WEIGHT_FIT_MAX - WEIGHT_FIT_MIN) * closeness
