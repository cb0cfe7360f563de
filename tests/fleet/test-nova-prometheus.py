#!/usr/bin/python3
"""SoftaffWeigher and SoftaffFitFilter in Nova's real scheduler classes (Debian's python3-nova),
reading a real Prometheus that scrapes real prometheus-node-exporter textfile collectors.

Hosts (2 partitions of 8 CPUs each; the flavor m1.small: 2 vCPUs, 4096 MiB, demand 2 CPUs):
  tight   headroom 2.5 and 0.5 CPUs        fits partition 0 with 0.5 CPU to spare
  loose   headroom 6 and 7 CPUs            fits both, with room
  busy    headroom 1 and 0.5 CPUs          fits no partition (CPU)
  nomem   headroom 6 and 6, 1 GiB memory   fits no partition (memory)
  silent  node_exporter up, no softaff textfile: unknown
Checks: pack and spread ranks; the filter refuses busy and nomem when enabled, passes all when
not; a flavor's own demand per vCPU; one query per request; stale data (an exporter stopped, a
textfile not rewritten, a short window) counts as unknown; a stopped (SIGSTOP) or ended
Prometheus leaves scheduling working, fast and neutral, and is logged once.
The textfiles are written here in the shape of softaffd's (the metrics of docs/fleet.md), so
that each host's headroom is exact; test-nova-softaffd.py has real softaffd instances write
them."""

import logging
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import promlib  # noqa: E402

promlib.require([promlib.PROMETHEUS, promlib.NODE_EXPORTER])

import novahelp as nh  # noqa: E402
from softaff_nova import fit, source  # noqa: E402

GIB = 1 << 30
HOSTS = {
    'tight': [(8, 2.5, 32 * GIB), (8, 0.5, 32 * GIB)],
    'loose': [(8, 6.0, 32 * GIB), (8, 7.0, 32 * GIB)],
    'busy': [(8, 1.0, 32 * GIB), (8, 0.5, 32 * GIB)],
    'nomem': [(8, 6.0, 1 * GIB), (8, 6.0, 1 * GIB)],
    'silent': None,
}
TIMEOUT = 0.5

failures = []


def check(ok, what):
    print('%s: %s' % ('ok  ' if ok else 'FAIL', what))
    if not ok:
        failures.append(what)


class Warnings(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def configure(prom_url, mode='pack', weighers=('softaff_nova.weigher.SoftaffWeigher',),
              filters=('SoftaffFitFilter',), multiplier=1.0):
    nh.configure(
        filter_scheduler={
            'available_filters': ['nova.scheduler.filters.all_filters',
                                  'softaff_nova.filter.SoftaffFitFilter'],
            'enabled_filters': list(filters), 'weight_classes': list(weighers)},
        softaff={'prometheus_url': prom_url, 'mode': mode, 'timeout': TIMEOUT,
                 'cache_seconds': 1.0, 'job': 'node', 'host_label': 'nova_host',
                 'weight_multiplier': multiplier})
    return nh.Scheduler()


def host_states():
    return [nh.host_state(name, 16, 131072) for name in HOSTS]


def softaff_weights(sched, spec):
    """host -> SoftaffWeigher's raw weight, from one weigh_objects call (one query)."""
    w = [x for x in sched.weighers if x.__class__.__name__ == 'SoftaffWeigher'][0]
    hosts = host_states()
    objs = [nh.nova_weights.WeighedHost(h, 0.0) for h in hosts]
    return dict(zip([h.host for h in hosts], w.weigh_objects(objs, spec)))


def wait_until(what, fn, seconds=30.0):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last is True:
            return True
        time.sleep(0.3)
    print('     (waited %g s for %s; last: %r)' % (seconds, what, last))
    return False


def main():
    workdir = tempfile.mkdtemp(prefix='softaff-fleet-')
    procs = []
    try:
        exporters = {}
        for name in HOSTS:
            exporters[name] = promlib.NodeExporter(workdir, name)
            procs.append(exporters[name])
        for name, parts in HOSTS.items():
            if parts:
                promlib.write_textfile(exporters[name], promlib.contract_textfile(parts))
        prom = promlib.Prometheus(workdir, exporters.values())
        procs.append(prom)
        promlib.wait_for('every host scraped', lambda: len(
            prom.query('softaff_headroom_window_coverage')) == 4, 60)
        print('Prometheus %s scrapes %d node_exporters' % (prom.url, len(exporters)))

        spec = nh.request_spec('m1.small', 2, 4096)
        # m1.small: 2 vCPUs, 2 CPUs of demand (no host saw it). The weight is by the headroom of
        # the partition it would take: tight's 2.5 (its 0.5 is too small), loose's 6.0 (pack:
        # the fuller) or 7.0 (spread: the emptier).
        want_pack = {'tight': 0.5 + 0.5 * (1 - 2.5 / 8), 'loose': 0.5 + 0.5 * (1 - 6.0 / 8),
                     'busy': 0.0, 'nomem': 0.0, 'silent': 0.5}
        want_spread = {'tight': 0.5 + 0.5 * (2.5 / 8), 'loose': 0.5 + 0.5 * (7.0 / 8),
                       'busy': 0.0, 'nomem': 0.0, 'silent': 0.5}

        def close(got, want):
            return all(abs(got[h] - want[h]) < 1e-6 for h in want)

        # Ranks by soft fit, pack and spread.
        sched = configure(prom.url, 'pack')
        got = softaff_weights(sched, spec)
        check(close(got, want_pack), 'pack weights %s' % got)
        order = [w.obj.host for w in sched.weigh(host_states(), spec)]
        check(order[:3] == ['tight', 'loose', 'silent'] and set(order[3:]) == {'busy', 'nomem'},
              'pack order through HostWeightHandler: %s' % order)
        sched = configure(prom.url, 'spread')
        got = softaff_weights(sched, spec)
        check(close(got, want_spread), 'spread weights %s' % got)
        order = [w.obj.host for w in sched.weigh(host_states(), spec)]
        check(order[:3] == ['loose', 'tight', 'silent'], 'spread order: %s' % order)

        # Beside Nova's default weighers (RAM, CPU, ... spread): softaff's multiplier decides.
        sched = configure(prom.url, 'pack', weighers=('nova.scheduler.weights.all_weighers',
                                                       'softaff_nova.weigher.SoftaffWeigher'),
                          multiplier=10.0)
        hs = host_states()
        hs[0].free_ram_mb -= 65536  # tight is the fuller host by RAM: the defaults prefer others
        order = [w.obj.host for w in sched.weigh(hs, spec)]
        check(order[0] == 'tight', 'with the default weighers, multiplier 10: %s' % order)

        # The filter refuses the hosts where no partition fits, when enabled; one query per request.
        sched = configure(prom.url, 'pack')
        time.sleep(1.1)  # the cache expires
        src = source.from_conf(nh.CONF)
        before = src.queries
        picked = sched.select(host_states(), spec)
        check(src.queries - before == 1, 'one query for the filter and the weigher of a request '
              '(%d)' % (src.queries - before))
        passed = sorted(w.obj.host for w in picked)
        check(passed == ['loose', 'silent', 'tight'], 'filter enabled passes %s' % passed)
        big = nh.request_spec('m1.xlarge', 8, 8192)
        passed = sorted(h.host for h in sched.filter(host_states(), big))
        check(passed == ['silent'], 'filter, 8 vCPUs (no partition has 8 CPUs of headroom): %s'
              % passed)
        sched_nf = configure(prom.url, 'pack', filters=())
        passed = sorted(h.host for h in sched_nf.filter(host_states(), spec))
        check(passed == sorted(HOSTS), 'filter not enabled: every host passes (%s)' % passed)

        # The flavor's own demand as the host saw it: 0.25 CPU per vCPU fits busy's 1.0.
        promlib.write_textfile(exporters['busy'], promlib.contract_textfile(
            HOSTS['busy'], demand={'m1.small': 0.25}))
        sched = configure(prom.url, 'pack')
        check(wait_until('busy to fit m1.small at its demand', lambda: 'busy' in [
            h.host for h in sched.filter(host_states(), spec)]),
            'a flavor that idles on busy (0.25 CPU per vCPU) fits it')
        # A host that has not seen the flavor counts what the fleet saw (busy's 0.25 per vCPU):
        # 0.5 CPU, so tight's fuller partition (0.5 of headroom) now fits and packs.
        want = 0.5 + 0.5 * (1 - 0.5 / 8)
        check(abs(softaff_weights(sched, spec)['tight'] - want) < 1e-6,
              'tight, which never saw m1.small, counts the fleet\'s 0.25 per vCPU: weight %.4f '
              '(%.4f)' % (softaff_weights(sched, spec)['tight'], want))

        # Stale data counts as unknown (neutral, passes the filter), not as empty.
        sched = configure(prom.url, 'pack')
        exporters['busy'].stop()  # the host stops reporting
        check(wait_until('busy to be unknown', lambda: softaff_weights(sched, spec)['busy'] ==
                         fit.WEIGHT_UNKNOWN), 'an exporter that stopped: its host is unknown (0.5)')
        check('busy' in [h.host for h in sched.filter(host_states(), spec)],
              'an exporter that stopped: its host passes the filter')
        # softaffd stopped, node_exporter serves its last textfile: too old.
        promlib.write_textfile(exporters['nomem'], promlib.contract_textfile(HOSTS['nomem']),
                               mtime=time.time() - 600)
        check(wait_until('nomem to be unknown', lambda: softaff_weights(sched, spec)['nomem'] ==
                         fit.WEIGHT_UNKNOWN),
              'a textfile 600 s old (softaffd stopped): its host is unknown (0.5)')
        promlib.write_textfile(exporters['loose'], promlib.contract_textfile(
            HOSTS['loose'], coverage=0.1))
        check(wait_until('loose to be unknown', lambda: softaff_weights(sched, spec)['loose']
                         == fit.WEIGHT_UNKNOWN),
              'a window 10% covered: its host is unknown (0.5)')
        promlib.write_textfile(exporters['loose'], promlib.contract_textfile(HOSTS['loose']))
        check(abs(softaff_weights(sched, spec)['tight'] - want_pack['tight']) < 1e-6,
              'tight is still known and fits (busy, which saw m1.small, no longer reports)')

        # A stopped Prometheus (SIGSTOP: it accepts, never answers) and an ended one.
        warnings = Warnings()
        logging.getLogger('softaff_nova.source').addHandler(warnings)
        all_names = sorted(HOSTS)
        for how in ('stopped (SIGSTOP)', 'ended'):
            if how.startswith('stopped'):
                prom.pause()
            else:
                prom.resume()
                prom.stop()
            for i in range(3):
                time.sleep(1.1)  # past the cache: every request asks again
                t0 = time.monotonic()
                picked = sched.select(host_states(), spec)
                took = time.monotonic() - t0
                weights = softaff_weights(sched, spec)
                check(took < TIMEOUT + 1.0, 'Prometheus %s: a request took %.2f s (timeout %g s)'
                      % (how, took, TIMEOUT))
                check(sorted(w.obj.host for w in picked) == all_names and
                      set(weights.values()) == {fit.WEIGHT_UNKNOWN},
                      'Prometheus %s: every host passes, every weight neutral (%s)'
                      % (how, weights))
        check(len(warnings.messages) == 1, 'one warning for both outages within a minute: %s'
              % warnings.messages)
    finally:
        promlib.cleanup(workdir, reversed(procs))
    if failures:
        print('%d check(s) failed' % len(failures))
        return 1
    print('all checks passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
