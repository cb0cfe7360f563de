"""The [softaff] group of nova.conf: where the headroom comes from and how it weighs."""

from oslo_config import cfg

GROUP = 'softaff'

OPTS = [
    cfg.StrOpt('mode', default='pack', choices=[
        ('pack', 'the host whose fullest partition where the flavor fits has the least '
                 'headroom wins'),
        ('spread', 'the host whose emptiest partition has the most headroom wins')],
        help='How SoftaffWeigher ranks the hosts where the flavor fits.'),
    cfg.FloatOpt('weight_multiplier', default=1.0,
                 help='Multiplier of SoftaffWeigher\'s weight (0..1 per host: 0 no partition '
                      'fits, 0.5 unknown, above 0.5 fits). An aggregate\'s metadata key '
                      'softaff_weight_multiplier overrides it for its hosts.'),
    cfg.URIOpt('prometheus_url', default='http://127.0.0.1:9090', schemes=['http', 'https'],
               help='Base URL of the Prometheus server that scrapes the compute hosts\' '
                    'node_exporter (its /api/v1/query is used).'),
    cfg.FloatOpt('timeout', default=0.5, min=0.05, max=10.0,
                 help='Seconds one query to Prometheus may take; after that the request is '
                      'scheduled with neutral softaff weights.'),
    cfg.FloatOpt('cache_seconds', default=5.0, min=1.0, max=300.0,
                 help='Seconds one answer (or one failure) of Prometheus is reused for: one '
                      'query serves every host of a request and the requests that follow.'),
    cfg.StrOpt('job', default='node',
               help='The job label of the scrape that carries softaffd\'s textfile metrics '
                    '(the node_exporter job). Empty: any job.'),
    cfg.StrOpt('host_label', default='instance',
               help='The label whose value names the Nova compute host (the host of '
                    '"openstack compute service list"). For "instance" a ":port" suffix is '
                    'ignored.'),
    cfg.StrOpt('textfile_pattern', default='.*softaff.*',
               help='Regular expression matching the file label of softaffd\'s textfile in '
                    'node_textfile_mtime_seconds: a host whose file is older than max_age '
                    'counts as unknown.'),
    cfg.FloatOpt('max_age', default=120.0, min=1.0,
                 help='Seconds after which softaffd\'s textfile counts as stale (softaffd '
                      'stopped): the host counts as unknown, not as empty.'),
    cfg.FloatOpt('min_coverage', default=0.25, min=0.0, max=1.0,
                 help='Share of the headroom window that must hold samples '
                      '(softaff_headroom_window_coverage) before a host\'s headroom is '
                      'trusted; below it the host counts as unknown.'),
    cfg.FloatOpt('default_demand_per_vcpu', default=1.0, min=0.0, max=1.0,
                 help='Expected demand of a new VM in CPUs per vCPU when its host has not '
                      'seen VMs of the flavor (softaff_headroom_demand_per_vcpu{class=FLAVOR}).'),
]


def register_opts(conf):
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    """For oslo-config-generator: the options of the [softaff] group."""
    return {GROUP: OPTS}
