"""A real Prometheus and real prometheus-node-exporter instances on loopback for the fleet tests:
each exporter serves a textfile-collector directory, Prometheus scrapes them every second with
a nova_host label naming the Nova host. Everything lives in one temporary directory."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

PROMETHEUS = os.environ.get('SOFTAFF_PROMETHEUS', '/usr/bin/prometheus')
NODE_EXPORTER = os.environ.get('SOFTAFF_NODE_EXPORTER', '/usr/bin/prometheus-node-exporter')
SKIP = 77  # meson: the test was skipped


def require(paths):
    """Exit as skipped when a program is missing; with SOFTAFF_REQUIRE_VM=1, fail instead."""
    missing = [p for p in paths if not os.access(p, os.X_OK)]
    if not missing:
        return
    what = ', '.join(missing) + ' missing (contrib/install-fleet-deps.sh installs them)'
    if os.environ.get('SOFTAFF_REQUIRE_VM') == '1':
        print('FAIL: ' + what + ' and SOFTAFF_REQUIRE_VM=1', file=sys.stderr)
        sys.exit(1)
    print('SKIP: ' + what)
    sys.exit(SKIP)


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def http_get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def wait_for(what, check, seconds=60.0, step=0.2):
    deadline = time.monotonic() + seconds
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError('waited %g s for %s' % (seconds, what))
        time.sleep(step)


class Process:
    def __init__(self, argv, log):
        self.argv = argv
        self.log_path = log
        self.log = open(log, 'wb')
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def pause(self):
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.proc.pid, signal.SIGCONT)

    def tail(self, n=20):
        with open(self.log_path, 'rb') as f:
            return b''.join(f.readlines()[-n:]).decode(errors='replace')


class NodeExporter(Process):
    """prometheus-node-exporter with only the textfile collector, on a loopback port."""

    def __init__(self, workdir, name):
        self.name = name
        self.textfile_dir = os.path.join(workdir, 'textfile-' + name)
        os.makedirs(self.textfile_dir, exist_ok=True)
        self.port = free_port()
        super().__init__([NODE_EXPORTER, '--web.listen-address=127.0.0.1:%d' % self.port,
                          '--collector.disable-defaults', '--collector.textfile',
                          '--collector.textfile.directory=' + self.textfile_dir],
                         os.path.join(workdir, 'node-exporter-%s.log' % name))
        wait_for('node_exporter %s on port %d' % (name, self.port),
                 lambda: http_get('http://127.0.0.1:%d/metrics' % self.port)[0] == 200, 30)

    @property
    def target(self):
        return '127.0.0.1:%d' % self.port


class Prometheus(Process):
    """Prometheus scraping the exporters every second, job "node", label nova_host=NAME."""

    def __init__(self, workdir, exporters):
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        cfg = os.path.join(workdir, 'prometheus.yml')
        scrape = {'job_name': 'node', 'scrape_interval': '1s', 'scrape_timeout': '900ms',
                  'static_configs': [{'targets': [e.target], 'labels': {'nova_host': e.name}}
                                     for e in exporters]}
        with open(cfg, 'w') as f:
            json.dump({'global': {'scrape_interval': '1s', 'evaluation_interval': '1s'},
                       'scrape_configs': [scrape]}, f)  # JSON is YAML
        data = os.path.join(workdir, 'prometheus-data')
        super().__init__([PROMETHEUS, '--config.file=' + cfg, '--storage.tsdb.path=' + data,
                          '--web.listen-address=127.0.0.1:%d' % self.port,
                          '--storage.tsdb.retention.time=1h'],
                         os.path.join(workdir, 'prometheus.log'))
        try:
            wait_for('Prometheus ready on port %d' % self.port,
                     lambda: http_get(self.url + '/-/ready')[0] == 200, 60)
        except TimeoutError:
            raise TimeoutError('Prometheus did not become ready:\n' + self.tail())

    def query(self, expr):
        q = urllib.parse.urlencode({'query': expr})
        status, body = http_get(self.url + '/api/v1/query?' + q, timeout=5)
        return json.loads(body)['data']['result']


def write_textfile(exporter, text, name='softaff.prom', mtime=None):
    """Write a textfile as softaffd does (a temporary file renamed over the old one)."""
    path = os.path.join(exporter.textfile_dir, name)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        f.write(text)
    os.rename(tmp, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def contract_textfile(partitions, coverage=1.0, demand=None):
    """The headroom metrics of the fleet contract for partitions [(cpus, headroom, mem_bytes)]."""
    lines = ['# TYPE softaff_partition_cpus gauge']
    lines += ['softaff_partition_cpus{partition="%d"} %g' % (i, p[0])
              for i, p in enumerate(partitions)]
    lines += ['# TYPE softaff_headroom_cpus gauge']
    lines += ['softaff_headroom_cpus{partition="%d"} %g' % (i, p[1])
              for i, p in enumerate(partitions)]
    lines += ['# TYPE softaff_partition_memory_available_bytes gauge']
    lines += ['softaff_partition_memory_available_bytes{partition="%d"} %d' % (i, p[2])
              for i, p in enumerate(partitions)]
    lines += ['# TYPE softaff_headroom_quantile gauge', 'softaff_headroom_quantile 0.95',
              '# TYPE softaff_headroom_window_seconds gauge', 'softaff_headroom_window_seconds 3600',
              '# TYPE softaff_headroom_window_coverage gauge',
              'softaff_headroom_window_coverage %g' % coverage]
    if demand:
        lines += ['# TYPE softaff_headroom_demand_per_vcpu gauge']
        lines += ['softaff_headroom_demand_per_vcpu{class="%s"} %g' % kv for kv in demand.items()]
    return '\n'.join(lines) + '\n'


def cleanup(workdir, processes):
    for p in processes:
        p.stop()
    shutil.rmtree(workdir, ignore_errors=True)
