"""SoftaffWeigher: hosts ranked by how the flavor fits their partitions' headroom.

Enable it with [filter_scheduler] weight_classes (docs/operators.md). Weights are 0..1 with
fixed bounds: 0 when no partition of the host fits the flavor, 0.5 when the host is unknown
(Prometheus down or slow, the host not reporting, or its window too short), and 0.5..1 when it
fits: pack ([softaff] mode) weighs highest the host whose fullest partition where the flavor fits
has the least headroom, spread the one whose emptiest has the most.
"""

import nova.conf
from nova.scheduler import utils
from nova.scheduler import weights

from softaff_nova import conf as softaff_conf
from softaff_nova import fit
from softaff_nova import request
from softaff_nova import source

CONF = nova.conf.CONF
softaff_conf.register_opts(CONF)


class SoftaffWeigher(weights.BaseHostWeigher):
    minval = fit.WEIGHT_NO_FIT
    maxval = fit.WEIGHT_FIT_MAX

    def weight_multiplier(self, host_state):
        return utils.get_weight_multiplier(host_state, 'softaff_weight_multiplier',
                                           CONF.softaff.weight_multiplier)

    def weigh_objects(self, weighed_obj_list, weight_properties):
        # One answer of Prometheus for every host of the request.
        reports = source.from_conf(CONF).reports()
        return [self._weigh(obj.obj, weight_properties, reports) for obj in weighed_obj_list]

    def _weigh_object(self, host_state, weight_properties):
        return self._weigh(host_state, weight_properties, source.from_conf(CONF).reports())

    def _weigh(self, host_state, spec_obj, reports):
        report = request.report_for(reports, host_state)
        shape = request.shape_for(report, spec_obj, CONF.softaff.default_demand_per_vcpu,
                                  reports)
        return fit.weight(report, shape, CONF.softaff.mode)
