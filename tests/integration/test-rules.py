#!/usr/bin/env python3
"""[rule NAME]: policy by VM class (partitions CPU 0 | CPU 1, manage=explicit).

- a guest with OpenStack Nova's metadata (flavor m1.large) and no softaff metadata gets the
  rule's home and softness (rule m1-large: preferred=1, softness=0): its vCPUs go to CPU 1;
  `softaffctl status --json` shows rule "m1-large" and softness 0, `show` names the rule;
- a guest of the same flavor with softaff metadata of its own (preferred=0) ignores the rule:
  CPU 0, rule null;
- the rule changed to preferred=0 + SIGHUP: the first guest moves to CPU 0, still by the rule.
manage=explicit: the rule is an explicit choice, other VMs on a shared host are left alone
(the rule also matches only this test's guest names).
"""
import json
import os
import subprocess

import softaff_testlib as T

NOVA_NS = "http://openstack.org/xmlns/libvirt/nova/1.1"
RULE = "m1-large"


class NovaGuest(T.Guest):
    """A guest carrying Nova's <nova:instance> metadata, as Nova defines its domains."""

    def __init__(self, name, flavor, **kw):
        super().__init__(name, **kw)
        self.flavor = flavor

    def nova_instance(self):
        return ("<nova:instance xmlns:nova='{ns}'>"
                "<nova:package version='27.1.0'/>"
                "<nova:name>{label}</nova:name>"
                "<nova:creationTime>2026-12-03 09:00:00</nova:creationTime>"
                "<nova:flavor name='{flavor}'><nova:memory>{mem}</nova:memory>"
                "<nova:disk>1</nova:disk><nova:swap>0</nova:swap>"
                "<nova:ephemeral>0</nova:ephemeral><nova:vcpus>{vcpus}</nova:vcpus>"
                "</nova:flavor>"
                "<nova:owner><nova:user uuid='u-1'>test</nova:user>"
                "<nova:project uuid='p-1'>softaff</nova:project></nova:owner>"
                "<nova:root type='image' uuid='i-1'/>"
                "</nova:instance>").format(ns=NOVA_NS, label=self.label, flavor=self.flavor,
                                           mem=self.memory_mib, vcpus=self.vcpus)

    def xml(self):
        x = super().xml()
        if "  </metadata>" in x:
            return x.replace("  </metadata>", "    %s\n  </metadata>" % self.nova_instance(), 1)
        return x.replace("  <memory ", "  <metadata>\n    %s\n  </metadata>\n  <memory "
                         % self.nova_instance(), 1)


def ctl(*args):
    exe = T.binary("softaffctl")
    p = subprocess.run([exe] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=30)
    if p.returncode != 0:
        raise AssertionError("softaffctl %s: status %d\n%s%s" % (
            " ".join(args), p.returncode, p.stdout, p.stderr))
    return p.stdout


def config(preferred, sock=None, path=None):
    rule = {"match_flavor": "m1.large", "match_name": "%s%d-*" % (T.NAME_PREFIX, os.getpid()),
            "preferred": preferred, "softness": 0}
    return T.write_config(path=path, layout="custom", custom="0;1", interval_ms=500,
                          manage="explicit", socket_path=sock, extra={"rule " + RULE: rule})


def vms_status(cfg):
    st = json.loads(ctl("status", "--json", "--config", cfg))
    return {v["name"]: v for v in st["vms"]}


def main():
    T.require_vm()
    if not {0, 1} <= T.host_cpus():
        T.skip("the test needs host CPUs 0 and 1")
    T.wait_host_quiet()
    cfg, sock = config(preferred=1)
    with open(cfg) as f:
        T.log("config:\n" + f.read())
    a = NovaGuest("a", "m1.large", vcpus=2)
    b = NovaGuest("b", "m1.large", vcpus=2, metadata=T.softaff_metadata(preferred=0))
    for g in (a, b):
        g.start()
    for g in (a, b):
        g.wait_ready()
        g.wait_vcpu_threads()
    assert "nova:flavor" in a.dumpxml(), "libvirt dropped Nova's metadata: %s" % a.dumpxml()
    d = T.Daemon(cfg, socket_path=sock).start(wait_socket=True, require_socket=True)
    a.wait_affinity({1}, 10, what="a (rule %s, preferred=1) home on CPU 1" % RULE)
    b.wait_affinity({0}, 10, what="b (own metadata preferred=0) home on CPU 0")

    vms = vms_status(cfg)
    va, vb = vms[a.name], vms[b.name]
    T.log("a: %s\nb: %s" % (json.dumps(va), json.dumps(vb)))
    assert va["rule"] == RULE and va["softness"] == 0 and va["preferred"] == 1, va
    assert va["state"] != "unmanaged" and va["home"] == 1, va
    assert "(rule %s)" % RULE in va["reason"], va["reason"]
    assert vb["rule"] is None and vb["preferred"] == 0 and vb["home"] == 0, vb
    shown = ctl("show", a.name, "--config", cfg)
    assert "rule %s" % RULE in shown, "show does not name the rule:\n" + shown

    # The rule changes: SIGHUP applies it without a restart.
    config(preferred=0, sock=sock, path=cfg)
    d.proc.send_signal(T.signal.SIGHUP)
    a.wait_affinity({0}, 10, what="a moved to CPU 0 by the changed rule")
    va = vms_status(cfg)[a.name]
    assert va["rule"] == RULE and va["preferred"] == 0 and va["home"] == 0, va
    assert b.all_on({0}), "b left CPU 0: %s" % b.affinity_text()
    d.check_alive()
    assert d.stop() == 0
    for g in (a, b):
        g.destroy()


T.run(main)
