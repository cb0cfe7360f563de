#!/usr/bin/env python3
"""The fit rule of softaff_nova.fit (no Nova, no Prometheus): fit counts, the partition a VM
would take in pack and spread mode, and the weights."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'fleet'))

from softaff_nova import fit  # noqa: E402

GIB = 1 << 30


def host(*parts):
    return fit.HostReport({i: fit.Partition(h, m, c) for i, (c, h, m) in enumerate(parts)})


class FitRule(unittest.TestCase):
    def test_count_is_min_of_cpu_and_memory(self):
        r = host((8, 6.5, 10 * GIB), (8, 3.0, 64 * GIB))
        s = fit.Shape(2, 4096, 2.0)
        # partition 0: min(6.5/2, 10/4) = 2.5 -> 2; partition 1: min(1.5, 16) -> 1
        self.assertEqual(fit.fit_count(r, s), 3)

    def test_nothing_fits_negative_headroom_or_no_memory(self):
        r = host((8, -1.0, 64 * GIB), (8, 4.0, 0))
        self.assertEqual(fit.fit_count(r, fit.Shape(1, 512, 1.0)), 0)
        self.assertIsNone(fit.best_partition(r, fit.Shape(1, 512, 1.0), 'pack'))
        self.assertEqual(fit.weight(r, fit.Shape(1, 512, 1.0), 'pack'), fit.WEIGHT_NO_FIT)

    def test_fit_is_within_headroom_inclusive(self):
        r = host((8, 2.0, 4 * GIB))
        self.assertTrue(fit.partition_fits(r.partitions[0], fit.Shape(2, 4096, 2.0)))
        self.assertFalse(fit.partition_fits(r.partitions[0], fit.Shape(2, 4097, 2.0)))
        self.assertFalse(fit.partition_fits(r.partitions[0], fit.Shape(3, 1024, 2.01)))

    def test_pack_takes_the_fullest_spread_the_emptiest(self):
        r = host((8, 7.0, 64 * GIB), (8, 2.5, 64 * GIB), (8, 1.0, 64 * GIB))
        s = fit.Shape(2, 1024, 2.0)  # fits partitions 0 and 1, not 2
        self.assertEqual(fit.best_partition(r, s, 'pack'), (1, 2.5 / 8))
        self.assertEqual(fit.best_partition(r, s, 'spread'), (0, 7.0 / 8))
        self.assertAlmostEqual(fit.weight(r, s, 'pack'), 0.5 + 0.5 * (1 - 2.5 / 8))
        self.assertAlmostEqual(fit.weight(r, s, 'spread'), 0.5 + 0.5 * 7.0 / 8)

    def test_pack_weighs_the_headroom_not_what_the_vm_leaves(self):
        # A host that learned the flavor (0.2 CPU per vCPU) and whose owners use 2.5 CPUs more
        # than the other's must outrank a host that never saw the flavor (1.0 per vCPU): the
        # VM counts 4 CPUs there, so it would leave less there, yet that host is the emptier.
        # (Weighing what the VM would leave, 9.2 against 8.5 CPUs, ranked them the other way.)
        seen = fit.HostReport({0: fit.Partition(10.0, 64 * GIB, 16)}, {'m1.large': 0.2})
        unseen = fit.HostReport({0: fit.Partition(12.5, 64 * GIB, 16)})
        d_seen = fit.expected_demand(seen, 4, 'm1.large', 1.0)
        d_unseen = fit.expected_demand(unseen, 4, 'm1.large', 1.0)
        self.assertAlmostEqual(d_seen, 0.8)
        self.assertEqual(d_unseen, 4.0)
        w_seen = fit.weight(seen, fit.Shape(4, 8192, d_seen), 'pack')
        w_unseen = fit.weight(unseen, fit.Shape(4, 8192, d_unseen), 'pack')
        self.assertAlmostEqual(w_seen, 0.5 + 0.5 * (1 - 10.0 / 16))
        self.assertAlmostEqual(w_unseen, 0.5 + 0.5 * (1 - 12.5 / 16))
        self.assertGreater(w_seen, w_unseen)

    def test_unknown_is_neutral_between_no_fit_and_fit(self):
        s = fit.Shape(2, 1024, 2.0)
        self.assertEqual(fit.weight(None, s, 'pack'), fit.WEIGHT_UNKNOWN)
        loose = fit.weight(host((8, 8.0, 64 * GIB)), s, 'pack')
        self.assertGreaterEqual(loose, fit.WEIGHT_UNKNOWN)
        self.assertLess(fit.WEIGHT_NO_FIT, fit.WEIGHT_UNKNOWN)

    def test_expected_demand_of_a_class(self):
        r = fit.HostReport({}, {'m1.small': 0.25})
        self.assertEqual(fit.expected_demand(r, 4, 'm1.small', 1.0), 1.0)
        self.assertEqual(fit.expected_demand(r, 4, 'm1.large', 1.0), 4.0)
        self.assertEqual(fit.expected_demand(None, 4, 'm1.small', 0.5), 2.0)

    def test_a_flavor_the_host_has_not_seen_counts_what_the_fleet_saw(self):
        reports = {'a': fit.HostReport({}, {'m1.small': 0.25, 'm1.idle': 0.0}),
                   'b': fit.HostReport({}, {'m1.small': 0.75}),
                   'c': fit.HostReport({}, {}),
                   'gone': None}
        fleet = fit.fleet_demand_per_vcpu(reports)
        # the mean over the hosts that saw it; a class seen idle counts the floor, 0.05
        self.assertEqual(fleet, {'m1.small': 0.5, 'm1.idle': 0.05})
        # the host's own figure first, then the fleet's, then the default
        self.assertEqual(fit.expected_demand(reports['a'], 4, 'm1.small', 1.0, fleet), 1.0)
        self.assertEqual(fit.expected_demand(reports['c'], 4, 'm1.small', 1.0, fleet), 2.0)
        self.assertEqual(fit.expected_demand(reports['c'], 4, 'm1.large', 1.0, fleet), 4.0)
        self.assertEqual(fit.expected_demand(None, 4, 'm1.idle', 1.0, fleet), 0.2)


if __name__ == '__main__':
    unittest.main()
