/* softaff — tests of a partition's averaged load and totals (daemon/partition-load.c), without a
 * daemon: the first tick sets the average; a 20-ms tick of a busy shell after seconds of idle
 * moves it about 1% (not to 0.75 CPU as the last tick alone would read); a tick as long as the
 * window moves it 63% of the way; the totals are exact sums of load x time whatever the tick
 * lengths, so two readings give a window's exact average; a tick of no time changes nothing;
 * utilization is the sum over the CPUs, clamped to 0-1.
 *
 * The expected figures are written out (1 - e^-0.01, 1 - e^-1), not taken from the module, so
 * that a module whose rule changes fails. */
#define G_LOG_DOMAIN "test-partition-load"

#include "partition-load.h"

#include <math.h>

static SaPartitionUsage use(double owners, double visitors, double unmanaged)
{
    return (SaPartitionUsage){.owners = owners, .visitors = visitors, .unmanaged = unmanaged};
}

static void test_first_tick(void)
{
    SaPartitionLoad l = {0};
    SaPartitionUsage u = use(0.5, 0.25, 0.125);
    sa_partition_load_add(&l, &u, 0.5);
    g_assert_cmpfloat(l.owners, ==, 0.5);
    g_assert_cmpfloat(l.visitors, ==, 0.25);
    g_assert_cmpfloat(l.unmanaged, ==, 0.125);
    g_assert_cmpfloat(l.seconds, ==, 0.5);
    g_assert_cmpfloat_with_epsilon(sa_partition_load_utilization(&l, 1), 0.875, 1e-12);
}

static void test_short_tick_weighs_little(void)
{
    SaPartitionLoad l = {0};
    SaPartitionUsage idle = use(0, 0, 0), shell = use(0, 0, 0.75);
    for (int i = 0; i < 10; i++)
        sa_partition_load_add(&l, &idle, 0.5);
    sa_partition_load_add(&l, &shell, 0.02);
    double w = 1 - exp(-0.02 / 2.0); /* about 0.00995 */
    g_assert_cmpfloat_with_epsilon(l.unmanaged, 0.75 * w, 1e-12);
    g_assert_cmpfloat(sa_partition_load_utilization(&l, 1), <, 0.01);
    /* The total holds the shell's 15 ms exactly. */
    g_assert_cmpfloat_with_epsilon(l.unmanaged_s, 0.015, 1e-12);
    g_assert_cmpfloat_with_epsilon(l.seconds, 5.02, 1e-12);
}

static void test_window_long_tick(void)
{
    SaPartitionLoad l = {0};
    SaPartitionUsage idle = use(0, 0, 0), busy = use(2.0, 0, 0);
    sa_partition_load_add(&l, &idle, 0.5);
    sa_partition_load_add(&l, &busy, 2.0);
    g_assert_cmpfloat_with_epsilon(l.owners, 2.0 * (1 - exp(-1.0)), 1e-12);
    /* On 4 CPUs that is 2 x 0.632 / 4. */
    g_assert_cmpfloat_with_epsilon(sa_partition_load_utilization(&l, 4), 0.5 * (1 - exp(-1.0)),
                                   1e-12);
    /* Steady load converges to itself. */
    for (int i = 0; i < 100; i++)
        sa_partition_load_add(&l, &busy, 0.5);
    g_assert_cmpfloat_with_epsilon(l.owners, 2.0, 1e-9);
}

static void test_totals_any_ticks(void)
{
    /* Two readings around a window give its exact average, whatever the tick lengths. */
    SaPartitionLoad l = {0};
    SaPartitionUsage a = use(1.0, 0.5, 0), b = use(0, 1.0, 0.25);
    sa_partition_load_add(&l, &a, 0.5);
    SaPartitionLoad before = l;
    const double lengths[] = {0.02, 0.5, 0.03, 0.45, 0.5};
    double owners = 0, visitors = 0, unmanaged = 0, secs = 0;
    for (guint i = 0; i < G_N_ELEMENTS(lengths); i++) {
        const SaPartitionUsage *u = i % 2 ? &b : &a;
        sa_partition_load_add(&l, u, lengths[i]);
        owners += u->owners * lengths[i];
        visitors += u->visitors * lengths[i];
        unmanaged += u->unmanaged * lengths[i];
        secs += lengths[i];
    }
    g_assert_cmpfloat_with_epsilon(l.owners_s - before.owners_s, owners, 1e-12);
    g_assert_cmpfloat_with_epsilon(l.visitors_s - before.visitors_s, visitors, 1e-12);
    g_assert_cmpfloat_with_epsilon(l.unmanaged_s - before.unmanaged_s, unmanaged, 1e-12);
    g_assert_cmpfloat_with_epsilon(l.seconds - before.seconds, 1.5, 1e-12);
    g_assert_cmpfloat_with_epsilon(secs, 1.5, 1e-12);
}

static void test_no_time_no_change(void)
{
    SaPartitionLoad l = {0};
    SaPartitionUsage u = use(1, 0, 0), v = use(0, 0, 5);
    sa_partition_load_add(&l, &u, 1.0);
    SaPartitionLoad before = l;
    sa_partition_load_add(&l, &v, 0);
    sa_partition_load_add(&l, &v, -1);
    sa_partition_load_add(&l, &v, NAN);
    g_assert_cmpmem(&l, sizeof l, &before, sizeof before);
    /* Utilization is clamped, and 0 without CPUs. */
    SaPartitionLoad over = {0};
    SaPartitionUsage much = use(3, 0, 0);
    sa_partition_load_add(&over, &much, 1.0);
    g_assert_cmpfloat(sa_partition_load_utilization(&over, 2), ==, 1.0);
    g_assert_cmpfloat(sa_partition_load_utilization(&over, 0), ==, 0.0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/partition-load/first-tick", test_first_tick);
    g_test_add_func("/partition-load/short-tick-weighs-little", test_short_tick_weighs_little);
    g_test_add_func("/partition-load/window-long-tick", test_window_long_tick);
    g_test_add_func("/partition-load/totals-any-ticks", test_totals_any_ticks);
    g_test_add_func("/partition-load/no-time-no-change", test_no_time_no_change);
    return g_test_run();
}
