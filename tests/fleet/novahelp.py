"""Real Nova scheduler objects for the fleet tests and the consolidation benchmark: host states
updated from ComputeNode objects, request specs from flavors, and Nova's own weight and filter
handlers, all from Debian's python3-nova."""

import datetime
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'fleet'))

import nova.conf  # noqa: E402
from nova import objects  # noqa: E402
from nova.scheduler import filters as nova_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import weights as nova_weights  # noqa: E402

objects.register_all()
CONF = nova.conf.CONF

import softaff_nova.filter  # noqa: E402,F401  (registers [softaff])
import softaff_nova.weigher  # noqa: E402,F401  (registers [softaff] too)

CELL = str(uuid.UUID(int=1))


_overridden = []


def configure(**groups):
    """Load nova.conf's defaults, then set options: configure(softaff={'mode': 'pack'}, ...).
    The options set by an earlier call go back to their defaults first."""
    CONF([], project='nova', default_config_files=[], default_config_dirs=[])
    while _overridden:
        name, group = _overridden.pop()
        CONF.clear_override(name, group=group)
    for group, opts in groups.items():
        for name, value in opts.items():
            CONF.set_override(name, value, group=group)
            _overridden.append((name, group))


def host_state(host, vcpus, memory_mb, vcpus_used=0, ram_used_mb=0, num_instances=0,
               cpu_allocation_ratio=4.0):
    """A HostState filled by HostState.update() from a ComputeNode, as the HostManager does."""
    cn = objects.ComputeNode(
        uuid=str(uuid.uuid5(uuid.NAMESPACE_DNS, host)), host=host, hypervisor_hostname=host,
        vcpus=vcpus, vcpus_used=vcpus_used, memory_mb=memory_mb, memory_mb_used=ram_used_mb,
        free_ram_mb=memory_mb - ram_used_mb, local_gb=1000, local_gb_used=0, free_disk_gb=1000,
        disk_available_least=1000, host_ip='127.0.0.1', hypervisor_type='QEMU',
        hypervisor_version=7002000, cpu_info='{}', supported_hv_specs=[], numa_topology=None,
        pci_device_pools=None, stats={'num_instances': str(num_instances)}, metrics='[]',
        cpu_allocation_ratio=cpu_allocation_ratio, ram_allocation_ratio=1.0,
        disk_allocation_ratio=1.0,
        updated_at=datetime.datetime.now(datetime.timezone.utc))
    hs = host_manager.HostState(host, host, CELL)
    hs.update(compute=cn, service={}, aggregates=[], inst_dict={})
    return hs


def request_spec(name, vcpus, memory_mb):
    flavor = objects.Flavor(name=name, flavorid=name, vcpus=vcpus, memory_mb=memory_mb,
                            root_gb=1, ephemeral_gb=0, swap=0, extra_specs={})
    return objects.RequestSpec(flavor=flavor, num_instances=1, project_id='p', user_id='u',
                               ignore_hosts=None, force_hosts=None, force_nodes=None,
                               scheduler_hints={}, instance_uuid=str(uuid.uuid4()),
                               image=objects.ImageMeta.from_dict({}), is_bfv=False,
                               requested_destination=None, retry=None,
                               instance_group=None, pci_requests=None, numa_topology=None)


class Scheduler:
    """The filter and weigh steps of Nova's scheduler, with the classes nova.conf names."""

    def __init__(self):
        self.filter_handler = nova_filters.HostFilterHandler()
        self.weight_handler = nova_weights.HostWeightHandler()
        fs = CONF.filter_scheduler
        classes = {c.__name__: c for c in
                   self.filter_handler.get_matching_classes(fs.available_filters)}
        missing = [n for n in fs.enabled_filters if n not in classes]
        if missing:
            raise ValueError('enabled_filters names unknown filters: %s' % missing)
        self.filters = [classes[n]() for n in fs.enabled_filters]
        self.weighers = [c() for c in
                         self.weight_handler.get_matching_classes(fs.weight_classes)]

    def filter(self, hosts, spec):
        return self.filter_handler.get_filtered_objects(self.filters, hosts, spec) or []

    def weigh(self, hosts, spec):
        return self.weight_handler.get_weighed_objects(self.weighers, hosts, spec)

    def select(self, hosts, spec):
        """Filtered and weighed hosts, best first (what Nova's scheduler picks from)."""
        return self.weigh(self.filter(hosts, spec), spec)
