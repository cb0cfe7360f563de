/* softaff tests — policy rules from hand-written tables: softness thresholds, the initial home
 * choice (sa_policy_choose_home and homes chosen inside a tick), vocabulary helpers. */
#define G_LOG_DOMAIN "softaff-test-rules"

#include <glib.h>
#include <string.h>

#include "sa-error.h"
#include "sim.h"

#define GIB (G_GUINT64_CONSTANT(1) << 30)

static void test_threshold(void)
{
    g_assert_cmpfloat(sa_policy_burst_threshold(0), >, 1.0);
    g_assert_cmpfloat_with_epsilon(sa_policy_burst_threshold(25), 0.925, 1e-9);
    g_assert_cmpfloat_with_epsilon(sa_policy_burst_threshold(50), 0.85, 1e-9);
    g_assert_cmpfloat_with_epsilon(sa_policy_burst_threshold(75), 0.425, 1e-9);
    g_assert_cmpfloat(sa_policy_burst_threshold(100), ==, 0.0);
    g_assert_cmpfloat(sa_policy_burst_threshold(1), <=, 1.0);
    for (guint s = 1; s < 100; s++)
        g_assert_cmpfloat(sa_policy_burst_threshold(s + 1), <, sa_policy_burst_threshold(s));
    g_assert_cmpfloat(sa_policy_burst_threshold(250), ==, 0.0);
}

static void test_strings(void)
{
    SaMode mode = SA_MODE_OFF;
    g_autoptr(GError) error = NULL;
    for (int m = SA_MODE_SOFT; m <= SA_MODE_OFF; m++) {
        g_assert_true(sa_mode_from_string(sa_mode_to_string((SaMode)m), &mode, NULL));
        g_assert_cmpint(mode, ==, m);
    }
    g_assert_false(sa_mode_from_string("hard", &mode, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, "'hard'"));
    g_assert_cmpstr(sa_vm_state_to_string(SA_STATE_HOME), ==, "home");
    g_assert_cmpstr(sa_vm_state_to_string(SA_STATE_BURST), ==, "burst");
    g_assert_cmpstr(sa_vm_state_to_string(SA_STATE_DOOR), ==, "door");

    SaPolicyConfig cfg;
    sa_policy_config_init(&cfg);
    g_assert_cmpuint(cfg.softness, ==, 50);
    g_assert_cmpuint(cfg.dwell_ms, ==, 2000);
    g_assert_cmpfloat(cfg.smoothing, ==, 0.5);
    g_assert_cmpuint(cfg.max_holdoff_ms, ==, 30000);
}

/* One tick from a table: home partition 0 (CPUs 0-3) at utilization util, the VM's 5 vCPUs
 * wait `wait` CPUs in total, partition 1 (CPUs 4-7) idle. Returns whether the VM burst. */
static bool burst_from_table(int softness, double util, double wait)
{
    g_autoptr(SaTopology) topo = sim_topology_uniform(2, 4, NULL);
    double busy[8] = {0};
    for (guint c = 0; c < 4; c++)
        busy[c] = util;
    const guint64 interval = 500 * G_GUINT64_CONSTANT(1000000);
    SaVcpuSample samples[5];
    for (guint v = 0; v < 5; v++) {
        samples[v].run_ns = (guint64)(util * 4 / 5 * interval);
        samples[v].delay_ns = (guint64)(wait / 5 * interval);
        samples[v].last_cpu = (int)(v % 4);
    }
    SaPolicyVm vm;
    sa_policy_vm_init(&vm);
    vm.name = "table";
    vm.preferred = 0;
    vm.softness = softness;
    vm.n_vcpus = 5;
    vm.allowed = topo->online;
    SaPolicyVm *vms[] = {&vm};
    SaPolicyConfig cfg;
    sa_policy_config_init(&cfg);
    SaPolicyHost host = {.topo = topo, .cpu_busy = busy, .n_cpu_busy = 8, .now_ms = 1000};
    sa_policy_tick(&cfg, &host, vms, 1, NULL); /* placement, no interval yet */
    g_assert_cmpint(vm.st.state, ==, SA_STATE_HOME);
    vm.vcpu_samples = samples;
    host.interval_ns = interval;
    host.now_ms += 500;
    sa_policy_tick(&cfg, &host, vms, 1, NULL);
    bool burst = vm.st.state == SA_STATE_BURST;
    if (burst) {
        g_assert_true(vm.changed);
        g_autofree char *set = sa_cpuset_format(vm.st.vcpus);
        g_assert_cmpstr(set, ==, "0-7");
    }
    g_test_message("softness %d, home %.0f%% busy, wait %.2f: %s (%s)", softness, 100 * util, wait,
                   burst ? "burst" : "home", vm.reason);
    sa_policy_vm_clear(&vm);
    return burst;
}

static void test_softness_compared(void)
{
    static const int softness[] = {0, 25, 50, 75, 100};
    static const double util[] = {0.80, 0.88, 0.95, 1.00};
    /* expected[s][u]: bursts iff softness > 0 and utilization >= threshold(softness); with one
     * CPU of waiting the demand (4 × util + 1) exceeds the home's 4 CPUs in every column. */
    static const bool expected[5][4] = {
        {false, false, false, false}, /* 0: never */
        {false, false, true, true},   /* 25: 92.5% */
        {false, true, true, true},    /* 50: 85% */
        {true, true, true, true},     /* 75: 42.5% */
        {true, true, true, true},     /* 100: any wait */
    };
    for (guint s = 0; s < G_N_ELEMENTS(softness); s++)
        for (guint u = 0; u < G_N_ELEMENTS(util); u++)
            g_assert_cmpint(burst_from_table(softness[s], util[u], 1.0), ==, expected[s][u]);

    /* The wait needed: 0.1 CPU at softness 50, 0.05 at 100. */
    g_assert_false(burst_from_table(50, 1.0, 0.08));
    g_assert_true(burst_from_table(100, 1.0, 0.08));
    g_assert_false(burst_from_table(100, 1.0, 0.03));
    g_assert_true(burst_from_table(50, 1.0, 0.3));
    /* Waiting while the home still has room for the whole demand is latency, not a lack of
     * CPUs: no burst even at softness 100. */
    g_assert_false(burst_from_table(100, 0.5, 0.5));
}

/* ---- sa_policy_choose_home ---- */

static void test_choose_least_committed(void)
{
    static const char *const lists[] = {"0-3", "4-5", "6-9"};
    g_autoptr(SaTopology) topo = sim_topology_new(3, lists, NULL);
    SaAdvice advice;
    g_autoptr(GError) error = NULL;

    /* commitments with 2 more vCPUs: (4+2)/4, (1+2)/2, (2+2)/4 -> partition 2 */
    const guint committed[] = {4, 1, 2};
    g_assert_true(sa_policy_choose_home(topo, committed, NULL, 2, 0, &advice, &error));
    g_assert_no_error(error);
    g_assert_cmpint(advice.partition_id, ==, 2);
    g_assert_cmpfloat_with_epsilon(advice.commitment, 1.0, 1e-9);
    g_assert_nonnull(strstr(advice.reason, "least committed"));

    /* Nothing committed: all 0.5 per CPU or more; partition 1 (2 CPUs) is 1.0 -> ties
     * between 0 and 2 at 0.5, equal free memory -> lower id. */
    g_assert_true(sa_policy_choose_home(topo, NULL, NULL, 2, 0, &advice, &error));
    g_assert_cmpint(advice.partition_id, ==, 0);

    /* Ties on commitment: more free memory wins. */
    SaNode *n2 = g_ptr_array_index(topo->nodes, 2);
    n2->mem_free = 20 * GIB;
    g_assert_true(sa_policy_choose_home(topo, NULL, NULL, 2, 0, &advice, &error));
    g_assert_cmpint(advice.partition_id, ==, 2);
}

static void test_choose_memory_aware(void)
{
    g_autoptr(SaTopology) topo = sim_topology_uniform(3, 4, NULL);
    SaNode *n0 = g_ptr_array_index(topo->nodes, 0);
    SaNode *n1 = g_ptr_array_index(topo->nodes, 1);
    SaNode *n2 = g_ptr_array_index(topo->nodes, 2);
    n0->mem_free = 1 * GIB;
    n1->mem_free = 4 * GIB;
    n2->mem_free = 3 * GIB;
    const guint committed[] = {0, 8, 4};
    SaAdvice advice;

    /* Partition 0 is least committed but its node lacks the memory; 2 has it and is less
     * committed than 1. */
    g_assert_true(sa_policy_choose_home(topo, committed, NULL, 2, 2 * GIB, &advice, NULL));
    g_assert_cmpint(advice.partition_id, ==, 2);
    g_assert_nonnull(strstr(advice.reason, "free"));
    /* Only node 1 has 4 GiB. */
    g_assert_true(sa_policy_choose_home(topo, committed, NULL, 2, 4 * GIB, &advice, NULL));
    g_assert_cmpint(advice.partition_id, ==, 1);
    /* No node has 8 GiB: memory does not decide, commitment does. */
    g_assert_true(sa_policy_choose_home(topo, committed, NULL, 2, 8 * GIB, &advice, NULL));
    g_assert_cmpint(advice.partition_id, ==, 0);
    g_assert_nonnull(strstr(advice.reason, "no node has"));
}

static void test_choose_allowed(void)
{
    static const char *const lists[] = {"0-3", "", "4-7", "8-11"};
    g_autoptr(SaTopology) topo = sim_topology_new(4, lists, NULL);
    SaAdvice advice;
    g_autoptr(GError) error = NULL;
    const guint committed[] = {8, 0, 4, 0};

    /* The CPU-less partition 1 is never chosen, even with nothing committed. */
    g_assert_true(sa_policy_choose_home(topo, committed, NULL, 1, 0, &advice, &error));
    g_assert_cmpint(advice.partition_id, ==, 3);
    /* Allowed set excludes partition 3; one CPU of partition 0 is enough to qualify. */
    g_autoptr(SaCpuSet) allowed = sa_cpuset_parse("3-7", NULL);
    g_assert_true(sa_policy_choose_home(topo, committed, allowed, 1, 0, &advice, &error));
    g_assert_cmpint(advice.partition_id, ==, 2);
    g_autoptr(SaCpuSet) only0 = sa_cpuset_parse("1", NULL);
    g_assert_true(sa_policy_choose_home(topo, committed, only0, 1, 0, &advice, &error));
    g_assert_cmpint(advice.partition_id, ==, 0);
    /* Nothing allowed online: an error naming the set. */
    g_autoptr(SaCpuSet) none = sa_cpuset_parse("12-15", NULL);
    g_assert_false(sa_policy_choose_home(topo, committed, none, 1, 0, &advice, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "12-15"));
}

/* Homes chosen within one tick count the VMs placed before them, in array order, and VMs
 * whose home is already known (preferred, assigned). */
static void test_homes_in_one_tick(void)
{
    g_autoptr(SaTopology) topo = sim_topology_uniform(2, 4, NULL);
    SaPolicyVm vm[6];
    SaPolicyVm *vms[6];
    for (guint i = 0; i < 6; i++) {
        sa_policy_vm_init(&vm[i]);
        vm[i].name = "vm";
        vm[i].n_vcpus = 2;
        vm[i].allowed = topo->online;
        vms[i] = &vm[i];
    }
    vm[5].assigned = 0; /* last in the array, but its home is known: counted from the start */
    vm[5].n_vcpus = 4;
    double busy[8] = {0};
    SaPolicyHost host = {.topo = topo, .cpu_busy = busy, .n_cpu_busy = 8, .now_ms = 0};
    SaPolicyConfig cfg;
    sa_policy_config_init(&cfg);
    g_autofree SaPartitionUsage *usage = g_new0(SaPartitionUsage, 2);
    sa_policy_tick(&cfg, &host, vms, 6, usage);
    /* P0 starts with vm5's 4 vCPUs. vm0: 6/4 vs 2/4 -> P1; vm1: 6/4 vs 4/4 -> P1; vm2: 6/4
     * vs 6/4, same free memory -> lower id P0; vm3: 8/4 vs 6/4 -> P1; vm4: 8/4 vs 8/4 -> P0. */
    const int expected[] = {1, 1, 0, 1, 0, 0};
    for (guint i = 0; i < 6; i++) {
        g_assert_cmpint(vm[i].st.home, ==, expected[i]);
        g_assert_true(vm[i].changed);
        g_assert_true(vm[i].st.placed);
    }
    g_assert_cmpuint(usage[0].owner_vcpus, ==, 8);
    g_assert_cmpuint(usage[1].owner_vcpus, ==, 6);
    g_assert_cmpuint(usage[0].n_owner_vms, ==, 3);
    g_assert_nonnull(strstr(vm[0].reason, "auto"));
    g_assert_nonnull(strstr(vm[5].reason, "assigned"));

    /* The next tick keeps every home and changes nothing. */
    host.now_ms += 500;
    sa_policy_tick(&cfg, &host, vms, 6, usage);
    for (guint i = 0; i < 6; i++) {
        g_assert_cmpint(vm[i].st.home, ==, expected[i]);
        g_assert_false(vm[i].changed);
        sa_policy_vm_clear(&vm[i]);
    }
}

/* Both vCPUs of a bursting VM last seen on the visited 1-CPU partition: their whole interval is
 * charged there (2 CPUs of run on 1 CPU). That is no reason for a retreat while the owner idles. */
static void test_visitors_seen_on_one_cpu(void)
{
    g_autoptr(SaTopology) topo = sim_topology_uniform(2, 1, NULL);
    SaPolicyVm a, b;
    SaPolicyVm *vms[2] = {&a, &b};
    sa_policy_vm_init(&a);
    sa_policy_vm_init(&b);
    a.name = "a";
    b.name = "b";
    a.preferred = 0;
    b.preferred = 1;
    a.n_vcpus = b.n_vcpus = 2;
    a.allowed = b.allowed = topo->online;
    double busy[2] = {1.0, 0.02};
    SaPolicyHost host = {
        .topo = topo, .cpu_busy = busy, .n_cpu_busy = 2, .interval_ns = 500000000, .now_ms = 0};
    SaPolicyConfig cfg;
    sa_policy_config_init(&cfg);
    sa_policy_tick(&cfg, &host, vms, 2, NULL);
    /* A waits at home (two busy vCPUs on one CPU), B idles: A bursts. */
    SaVcpuSample sa_[2] = {{250000000, 250000000, 0}, {250000000, 250000000, 0}};
    SaVcpuSample sb[2] = {{5000000, 0, 1}, {5000000, 0, 1}};
    a.vcpu_samples = sa_;
    b.vcpu_samples = sb;
    host.now_ms += 500;
    sa_policy_tick(&cfg, &host, vms, 2, NULL);
    g_assert_cmpint(a.st.state, ==, SA_STATE_BURST);
    /* Next intervals: each vCPU ran on its own CPU, but both were last seen on CPU 1. */
    for (guint k = 0; k < 6; k++) {
        SaVcpuSample seen[2] = {{500000000, 0, 1}, {500000000, 0, 1}};
        a.vcpu_samples = seen;
        busy[0] = busy[1] = 1.0;
        host.now_ms += 500;
        sa_policy_tick(&cfg, &host, vms, 2, NULL);
        g_assert_cmpint(a.st.state, ==, SA_STATE_BURST);
        g_assert_false(a.changed);
    }
    sa_policy_vm_clear(&a);
    sa_policy_vm_clear(&b);
}

/* Two 1-CPU partitions: A (2 vCPUs, home 1, spinning) has just burst onto CPU 0, whose owner B
 * (1 vCPU) is paused. The caller sets the next tick's figures and runs it (burst_next). */
typedef struct {
    SaTopology *topo;
    SaPolicyVm a, b;
    SaPolicyVm *vms[2];
    double busy[2], visitors[2];
    SaVcpuSample sa[2], sb[1];
    SaPolicyHost host;
    SaPolicyConfig cfg;
} BurstBed;

static void burst_bed_init(BurstBed *bed)
{
    *bed = (BurstBed){.topo = sim_topology_uniform(2, 1, NULL), .busy = {0.02, 1.0}};
    SaPolicyVm *a = &bed->a, *b = &bed->b;
    bed->vms[0] = a;
    bed->vms[1] = b;
    sa_policy_vm_init(a);
    sa_policy_vm_init(b);
    a->name = "a";
    b->name = "b";
    a->preferred = 1;
    b->preferred = 0;
    a->n_vcpus = 2;
    b->n_vcpus = 1;
    a->allowed = b->allowed = bed->topo->online;
    bed->host = (SaPolicyHost){.topo = bed->topo,
                               .cpu_busy = bed->busy,
                               .n_cpu_busy = 2,
                               .interval_ns = 500000000,
                               .now_ms = 0};
    sa_policy_config_init(&bed->cfg);
    sa_policy_tick(&bed->cfg, &bed->host, bed->vms, 2, NULL);
    /* Both of A's vCPUs wait half the interval on CPU 1: it bursts. */
    bed->sa[0] = bed->sa[1] = (SaVcpuSample){250000000, 250000000, 1};
    bed->sb[0] = (SaVcpuSample){0, 0, 0};
    a->vcpu_samples = bed->sa;
    b->vcpu_samples = bed->sb;
    bed->host.now_ms += 500;
    sa_policy_tick(&bed->cfg, &bed->host, bed->vms, 2, NULL);
    g_assert_cmpint(a->st.state, ==, SA_STATE_BURST);
}

/* The next tick, of interval_ms, with A's samples `after`; whether A left CPU 0. */
static bool burst_next(BurstBed *bed, SaVcpuSample *after, guint64 interval_ms,
                       SaPartitionUsage *usage)
{
    bed->a.vcpu_samples = after;
    bed->host.interval_ns = interval_ms * 1000000;
    bed->host.now_ms += (gint64)interval_ms;
    sa_policy_tick(&bed->cfg, &bed->host, bed->vms, 2, usage);
    return bed->a.retreats > 0 || bed->a.st.state != SA_STATE_BURST;
}

static void burst_bed_clear(BurstBed *bed)
{
    sa_policy_vm_clear(&bed->a);
    sa_policy_vm_clear(&bed->b);
    sa_topology_free(bed->topo);
}

/* The tick right after a burst (a short event tick): A's vCPUs were last seen at home (one
 * moved to CPU 0 only late in the interval, or its QEMU's other threads ran there), CPU 0 was
 * busy with them and B, its owner, is paused. Without a measure of the visitors' own run by CPU
 * that busy time is unmanaged, the owners' (need 1.0 of 1) and A retreats; with the sensor's
 * measure (cpu_visitors) it is A's, and A stays. */
static bool retreats_after_burst(bool measured, guint64 interval_ms)
{
    BurstBed bed;
    burst_bed_init(&bed);
    /* 21 ms later: CPU 0 was 95% busy, all of it A's threads (its QEMU's other threads, a vCPU
     * that moved at the very end); both vCPUs last seen on CPU 1, sharing it. */
    guint64 half = interval_ms * 1000000 / 2;
    SaVcpuSample after[2] = {{half, half, 1}, {half, half, 1}};
    bed.busy[0] = 0.95;
    bed.busy[1] = 1.0;
    bed.visitors[0] = 0.95;
    bed.host.cpu_visitors = measured ? bed.visitors : NULL;
    bool retreated = burst_next(&bed, after, interval_ms, NULL);
    burst_bed_clear(&bed);
    return retreated;
}

static void test_visitors_measured_after_burst(void)
{
    /* Over 60 ms, unmeasured, that is 0.95 - 0.17 (noise) of unmanaged load: A leaves, as it
     * did after every burst; measured, it is A's own and A stays. */
    g_assert_true(retreats_after_burst(false, 60));
    g_assert_false(retreats_after_burst(true, 60));
    /* Over a 21-ms event tick, 10 ms of it is host noise (sa_policy_retreat_demand): 0.95 - 0.48
     * is below the 0.75 a 1-CPU partition's owners fill it at. */
    g_assert_false(retreats_after_burst(false, 21));
}

/* A regular tick (500 ms) after the burst: CPU 0 was all busy, half of it A's vCPU, which waited
 * the other half behind host work (a shell, a pinning): 0.5 CPU unmanaged and 0.5 of wait it
 * hid, the owners' 1.0 of 1 CPU. unmanaged_prev is the partitions' unmanaged load averaged
 * before this tick (-1: none known, NULL: not given). */
static bool retreats_for_host_work(const double *unmanaged_prev)
{
    BurstBed bed;
    burst_bed_init(&bed);
    SaVcpuSample after[2] = {{250000000, 250000000, 0}, {500000000, 0, 1}};
    bed.busy[0] = bed.busy[1] = 1.0;
    bed.visitors[0] = 0.5;
    bed.host.cpu_visitors = bed.visitors;
    bed.host.unmanaged_avg = unmanaged_prev;
    SaPartitionUsage usage[2];
    bool retreated = burst_next(&bed, after, 500, usage);
    g_assert_cmpfloat_with_epsilon(usage[0].unmanaged, 0.5, 1e-9);
    g_assert_cmpfloat_with_epsilon(usage[0].owner_demand, 1.0, 1e-9);
    burst_bed_clear(&bed);
    return retreated;
}

static void test_host_work_averaged(void)
{
    /* Without an average (or none known yet) the tick's own figure counts: A leaves. */
    g_assert_true(retreats_for_host_work(NULL));
    const double none[2] = {-1, -1};
    g_assert_true(retreats_for_host_work(none));
    /* After seconds of a quiet CPU 0 it is a burst of host work: averaged with this tick, 0.11
     * CPU of it and of the wait it hid counts (0.2 of 1 CPU), and A stays. */
    const double quiet[2] = {0, 0};
    g_assert_false(retreats_for_host_work(quiet));
    /* Host work that lasted (0.5 CPU for seconds) counts in full: A leaves. */
    const double lasting[2] = {0.5, 0};
    g_assert_true(retreats_for_host_work(lasting));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/policy/visitors-seen-on-one-cpu", test_visitors_seen_on_one_cpu);
    g_test_add_func("/policy/visitors-measured-after-burst", test_visitors_measured_after_burst);
    g_test_add_func("/policy/host-work-averaged", test_host_work_averaged);
    g_test_add_func("/policy/threshold", test_threshold);
    g_test_add_func("/policy/strings", test_strings);
    g_test_add_func("/policy/softness-compared", test_softness_compared);
    g_test_add_func("/policy/choose-home/least-committed", test_choose_least_committed);
    g_test_add_func("/policy/choose-home/memory-aware", test_choose_memory_aware);
    g_test_add_func("/policy/choose-home/allowed", test_choose_allowed);
    g_test_add_func("/policy/choose-home/in-one-tick", test_homes_in_one_tick);
    return g_test_run();
}
