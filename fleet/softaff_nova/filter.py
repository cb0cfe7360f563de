"""SoftaffFitFilter: is there a partition of this host where the flavor fits?

Enable it with [filter_scheduler] available_filters and enabled_filters (docs/operators.md).
A host that softaffd reports with no partition where the flavor fits (its demand within the
partition's headroom, its memory within the partition's available memory) is refused. An
unknown host (Prometheus down or slow, the host not reporting, its window too short) passes.
"""

import nova.conf
from nova.scheduler import filters

from softaff_nova import conf as softaff_conf
from softaff_nova import fit
from softaff_nova import request
from softaff_nova import source

CONF = nova.conf.CONF
softaff_conf.register_opts(CONF)


class SoftaffFitFilter(filters.BaseHostFilter):
    # A rebuild stays on its host: headroom does not matter there.
    RUN_ON_REBUILD = False

    def host_passes(self, host_state, spec_obj):
        reports = source.from_conf(CONF).reports()
        report = request.report_for(reports, host_state)
        if report is None:
            return True
        shape = request.shape_for(report, spec_obj, CONF.softaff.default_demand_per_vcpu,
                                  reports)
        return fit.fit_count(report, shape) > 0
