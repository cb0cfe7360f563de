"""Reading every host's headroom from Prometheus: one instant query for all hosts, cached a few
seconds, with a short timeout. A failure (down, slow, bad answer) gives None (every host
unknown) and is logged at most once a minute; the failure is cached like an answer, so a down
Prometheus costs at most one timeout per cache period."""

import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from oslo_log import log as logging

from softaff_nova import fit

LOG = logging.getLogger(__name__)

HEADROOM = 'softaff_headroom_cpus'
MEMORY = 'softaff_partition_memory_available_bytes'
CAPACITY = 'softaff_partition_cpus'
COVERAGE = 'softaff_headroom_window_coverage'
DEMAND = 'softaff_headroom_demand_per_vcpu'
MTIME = 'node_textfile_mtime_seconds'

WARN_EVERY_S = 60.0


def _quote(value):
    return '"%s"' % value.replace('\\', '\\\\').replace('"', '\\"')


def build_query(job, textfile_pattern):
    """The one PromQL query: softaffd's series and the age of its textfile, for every host."""
    job_sel = ',job=%s' % _quote(job) if job else ''
    names = '|'.join((HEADROOM, MEMORY, CAPACITY, COVERAGE, DEMAND))
    return '{__name__=~"%s"%s} or %s{file=~%s%s}' % (names, job_sel, MTIME,
                                                    _quote(textfile_pattern), job_sel)


def host_names(label_value, host_label):
    """The Nova host names a label value stands for (for instance, also without its port)."""
    names = [label_value]
    if host_label == 'instance':
        m = re.match(r'^\[?(.*?)\]?:\d+$', label_value)
        if m:
            names.append(m.group(1))
    return names


def parse_result(result, host_label, now, max_age, min_coverage):
    """Reports by Nova host name from the query's vector: hosts with every piece fresh and
    enough window coverage. Anything else is left out (unknown)."""
    hosts = {}
    for sample in result:
        labels = sample.get('metric', {})
        host = labels.get(host_label)
        if host is None:
            continue
        try:
            ts, value = float(sample['value'][0]), float(sample['value'][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        h = hosts.setdefault(host, {'headroom': {}, 'memory': {}, 'cpus': {}, 'demand': {},
                                    'coverage': None, 'mtime': None, 'ts': ts})
        name = labels.get('__name__')
        if name == HEADROOM and 'partition' in labels:
            h['headroom'][labels['partition']] = value
        elif name == MEMORY and 'partition' in labels:
            h['memory'][labels['partition']] = value
        elif name == CAPACITY and 'partition' in labels:
            h['cpus'][labels['partition']] = value
        elif name == DEMAND and 'class' in labels:
            h['demand'][labels['class']] = value
        elif name == COVERAGE:
            h['coverage'] = value
        elif name == MTIME:
            h['mtime'] = value if h['mtime'] is None else max(h['mtime'], value)
    reports = {}
    for host, h in hosts.items():
        if not h['headroom'] or h['coverage'] is None or h['coverage'] < min_coverage:
            continue
        if h['mtime'] is not None and (now if now is not None else h['ts']) - h['mtime'] > max_age:
            continue
        if set(h['headroom']) - set(h['memory']):
            continue
        parts = {}
        for pid, headroom in h['headroom'].items():
            key = int(pid) if pid.isdigit() else pid
            parts[key] = fit.Partition(headroom, h['memory'][pid], h['cpus'].get(pid))
        report = fit.HostReport(parts, h['demand'])
        for name in host_names(host, host_label):
            reports.setdefault(name, report)
    return reports


class PrometheusSource:
    """One query for every host, cached `cache_seconds`; None while Prometheus fails."""

    def __init__(self, url, timeout, cache_seconds, job, host_label, textfile_pattern,
                 max_age, min_coverage, clock=time.monotonic):
        self.url = url.rstrip('/') + '/api/v1/query'
        self.timeout = timeout
        self.cache_seconds = cache_seconds
        self.host_label = host_label
        self.max_age = max_age
        self.min_coverage = min_coverage
        self.query = build_query(job, textfile_pattern)
        self.clock = clock
        self.queries = 0  # how many queries went out (tests count them)
        self._lock = threading.Lock()
        self._cached_at = None
        self._cached = None
        self._warned_at = None

    def reports(self):
        """Reports by Nova host name, or None when Prometheus could not tell (all unknown)."""
        with self._lock:
            now = self.clock()
            if self._cached_at is not None and now - self._cached_at < self.cache_seconds:
                return self._cached
            self._cached = self._fetch()
            self._cached_at = self.clock()
            return self._cached

    def _fetch(self):
        self.queries += 1
        body = urllib.parse.urlencode({'query': self.query}).encode()
        req = urllib.request.Request(self.url, data=body, method='POST', headers={
            'Content-Type': 'application/x-www-form-urlencoded'})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                answer = json.loads(resp.read(16 << 20))
            if answer.get('status') != 'success':
                raise ValueError('status %r: %s' % (answer.get('status'), answer.get('error')))
            data = answer['data']
            if data.get('resultType') != 'vector':
                raise ValueError('result type %r, expected vector' % data.get('resultType'))
            return parse_result(data['result'], self.host_label, None, self.max_age,
                                self.min_coverage)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            self._warn(e)
            return None

    def _warn(self, error):
        now = self.clock()
        if self._warned_at is not None and now - self._warned_at < WARN_EVERY_S:
            return
        self._warned_at = now
        LOG.warning('softaff: Prometheus at %s did not answer (%s); softaff weights are '
                    'neutral and SoftaffFitFilter passes every host until it does (said at most '
                    'once a minute)', self.url, error)


_sources = {}
_sources_lock = threading.Lock()
_override = None


def override(src):
    """Make every weigher and filter of the process read `src` (an object with reports())
    instead of Prometheus; None restores Prometheus. For a simulator that stands in for the
    fleet (bench/run-consolidation.py), never in Nova."""
    global _override
    _override = src


def from_conf(conf):
    """The process's source for the [softaff] options in force (one per distinct setting)."""
    if _override is not None:
        return _override
    c = conf.softaff
    key = (c.prometheus_url, c.timeout, c.cache_seconds, c.job, c.host_label,
           c.textfile_pattern, c.max_age, c.min_coverage)
    with _sources_lock:
        src = _sources.get(key)
        if src is None:
            src = PrometheusSource(*key)
            _sources[key] = src
        return src
