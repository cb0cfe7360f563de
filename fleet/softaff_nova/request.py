"""What a Nova request asks for, as a softaff shape: the flavor's vCPUs, memory and name."""

import threading

from softaff_nova import fit

_fleet_lock = threading.Lock()
_fleet_cache = (None, None)  # (the reports it was made from, fit.fleet_demand_per_vcpu of them)


def fleet_view(reports):
    """fit.fleet_demand_per_vcpu(reports), computed once per answer of the source (the weigher
    and the filter ask for every host of a request, and the answer is cached for seconds)."""
    global _fleet_cache
    if not reports:
        return None
    with _fleet_lock:
        if _fleet_cache[0] is not reports:
            _fleet_cache = (reports, fit.fleet_demand_per_vcpu(reports))
        return _fleet_cache[1]


def shape_for(report, spec_obj, default_demand_per_vcpu, reports=None):
    """The request's shape on the host of `report`; a flavor the host has not seen counts what
    the other hosts of `reports` (every host's report) saw of it, else the default."""
    flavor = spec_obj.flavor
    demand = fit.expected_demand(report, flavor.vcpus, flavor.name, default_demand_per_vcpu,
                                 fleet_view(reports))
    return fit.Shape(flavor.vcpus, flavor.memory_mb, demand)


def report_for(reports, host_state):
    """The host's report; None (unknown) when Prometheus failed or said nothing fresh of it."""
    if reports is None:
        return None
    return reports.get(host_state.host)
