"""What a Nova request asks for, as a softaff shape: the flavor's vCPUs, memory and name."""

from softaff_nova import fit


def shape_for(report, spec_obj, default_demand_per_vcpu):
    flavor = spec_obj.flavor
    demand = fit.expected_demand(report, flavor.vcpus, flavor.name, default_demand_per_vcpu)
    return fit.Shape(flavor.vcpus, flavor.memory_mb, demand)


def report_for(reports, host_state):
    """The host's report; None (unknown) when Prometheus failed or said nothing fresh of it."""
    if reports is None:
        return None
    return reports.get(host_state.host)
