#!/usr/bin/python3
"""Real softaffd instances → node_exporter textfiles → a real Prometheus → SoftaffWeigher and
SoftaffFitFilter in Nova's scheduler classes.

Two softaffd (backend=qmp without sockets: no VM, no libvirt; [sensing] mode=proc; no state
file) on fixture sysfs trees: "big" (epyc-4n-2llc: 4 partitions of 16 CPUs) and "small"
(no-l3-4c: one partition of 4 CPUs). Their owners' demand is this machine's own load. The
flavor (8 vCPUs, 4096 MiB, demand 8 CPUs) fits big's partitions, not small's.
Checks: the weigher's view equals what softaffd wrote (weight from the textfile's numbers by the
fit rule); big ranks first, small gets 0 and the filter refuses it; a softaffd that stopped
(its textfile left behind, older than max_age) makes its host unknown, as does an exporter that
stopped. Usage: test-nova-softaffd.py SOFTAFFD DATA_DIR"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import promlib  # noqa: E402

SOFTAFFD, DATA = sys.argv[1], sys.argv[2]
promlib.require([promlib.PROMETHEUS, promlib.NODE_EXPORTER, SOFTAFFD])

import novahelp as nh  # noqa: E402
from softaff_nova import fit, source  # noqa: E402

FIXTURES = {'big': 'epyc-4n-2llc', 'small': 'no-l3-4c'}
failures = []


def check(ok, what):
    print('%s: %s' % ('ok  ' if ok else 'FAIL', what))
    if not ok:
        failures.append(what)


class Softaffd(promlib.Process):
    def __init__(self, workdir, name, exporter):
        self.name = name
        d = os.path.join(workdir, 'softaffd-' + name)
        os.makedirs(d)
        self.textfile = os.path.join(exporter.textfile_dir, 'softaff.prom')
        conf = os.path.join(d, 'softaff.conf')
        with open(conf, 'w') as f:
            f.write('[daemon]\nbackend=qmp\nsocket=%s/sock\ninterval_ms=200\n[sensing]\n'
                    'mode=proc\n[metrics]\ntextfile=%s\n[fleet]\nwindow_s=600\nstate_file=\n'
                    % (d, self.textfile))
        env = dict(os.environ, SOFTAFF_SYSFS_ROOT=os.path.join(DATA, FIXTURES[name], 'sys'))
        self.log_path = os.path.join(d, 'log')
        self.log = open(self.log_path, 'wb')
        self.argv = [SOFTAFFD, '--config', conf, '--foreground']
        self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env)
        promlib.wait_for('softaffd %s to write %s' % (name, self.textfile),
                         lambda: os.path.exists(self.textfile), 30)

    def partitions(self):
        """The partitions as the textfile says: {id: Partition}."""
        text = open(self.textfile).read()

        def series(name):
            return {int(m.group(1)): float(m.group(2)) for m in re.finditer(
                r'^%s\{partition="(\d+)"\} (\S+)$' % name, text, re.M)}
        h, m, c = (series('softaff_headroom_cpus'),
                   series('softaff_partition_memory_available_bytes'),
                   series('softaff_partition_cpus'))
        return {p: fit.Partition(h[p], m[p], c.get(p)) for p in h}


def main():
    workdir = tempfile.mkdtemp(prefix='softaff-fleet-softaffd-')
    procs = []
    try:
        exporters, daemons = {}, {}
        for name in FIXTURES:
            exporters[name] = promlib.NodeExporter(workdir, name)
            procs.append(exporters[name])
            daemons[name] = Softaffd(workdir, name, exporters[name])
            procs.append(daemons[name])
        prom = promlib.Prometheus(workdir, exporters.values())
        procs.append(prom)
        promlib.wait_for('both softaffd scraped', lambda: len(
            prom.query('softaff_headroom_window_coverage')) == 2, 60)
        nh.configure(
            filter_scheduler={
                'available_filters': ['nova.scheduler.filters.all_filters',
                                      'softaff_nova.filter.SoftaffFitFilter'],
                'enabled_filters': ['SoftaffFitFilter'],
                'weight_classes': ['softaff_nova.weigher.SoftaffWeigher']},
            # fresh daemons: a few seconds of a 600-s window; max_age: a stopped softaffd shows
            # within seconds
            softaff={'prometheus_url': prom.url, 'mode': 'pack', 'timeout': 0.5,
                     'cache_seconds': 1.0, 'job': 'node', 'host_label': 'nova_host',
                     'min_coverage': 0.0, 'max_age': 3.0})
        sched = nh.Scheduler()
        weigher = sched.weighers[0]
        spec = nh.request_spec('m1.large', 8, 4096)
        shape = fit.Shape(8, 4096, 8.0)
        hosts = [nh.host_state(n, 64, 131072) for n in FIXTURES]

        def weights():
            objs = [nh.nova_weights.WeighedHost(h, 0.0) for h in hosts]
            return dict(zip(FIXTURES, weigher.weigh_objects(objs, spec)))

        # The weigher's numbers are softaffd's: a sample of each textfile, then the weights
        # (headroom moves with this machine's load: compare within the rounding of a scrape).
        time.sleep(1.1)
        got = weights()
        want = {n: fit.weight(fit.HostReport(d.partitions()), shape, 'pack')
                for n, d in daemons.items()}
        print('softaffd big: %s' % daemons['big'].partitions())
        print('softaffd small: %s' % daemons['small'].partitions())
        check(got['small'] == fit.WEIGHT_NO_FIT and want['small'] == fit.WEIGHT_NO_FIT,
              'small (4 CPUs): no partition fits 8 CPUs of demand: weight %s' % got['small'])
        check(got['big'] > fit.WEIGHT_UNKNOWN and abs(got['big'] - want['big']) < 0.05,
              'big fits, weight %.4f as softaffd\'s textfile says (%.4f)'
              % (got['big'], want['big']))
        order = [w.obj.host for w in sched.select(hosts, spec)]
        check(order == ['big'], 'the filter refuses small, big is chosen: %s' % order)

        # softaffd stopped: its textfile stays, ages past max_age: unknown, not empty.
        daemons['big'].proc.send_signal(signal.SIGTERM)
        daemons['big'].proc.wait(15)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and weights()['big'] != fit.WEIGHT_UNKNOWN:
            time.sleep(0.5)
        check(os.path.exists(daemons['big'].textfile) and weights()['big'] == fit.WEIGHT_UNKNOWN,
              'softaffd of big stopped (its textfile left): big is unknown (0.5)')
        exporters['small'].stop()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and weights()['small'] != fit.WEIGHT_UNKNOWN:
            time.sleep(0.5)
        check(weights()['small'] == fit.WEIGHT_UNKNOWN,
              'the exporter of small stopped: small is unknown (0.5)')
        order = sorted(w.obj.host for w in sched.select(hosts, spec))
        check(order == ['big', 'small'], 'both unknown: both pass the filter (%s)' % order)
        check(source.from_conf(nh.CONF).queries > 0, 'the weigher asked Prometheus')
    finally:
        promlib.cleanup(workdir, reversed(procs))
    if failures:
        print('%d check(s) failed' % len(failures))
        return 1
    print('all checks passed')
    return 0


if __name__ == '__main__':
    sys.exit(main())
