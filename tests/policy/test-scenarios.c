/* softaff tests — the policy driven tick by tick through the scheduler simulator (sim.c).
 * Default tick 500 ms, dwell 2000 ms, smoothing 0.5, max_holdoff 30000 ms, softness 50. */
#define G_LOG_DOMAIN "softaff-test-scenarios"

#include <errno.h>
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

#define TICK_MS 500
#define IDLE 0.02 /* an idle guest's timer noise, per vCPU */

static guint count_changes(Sim *sim, SimVm *vm, guint ticks)
{
    guint before = vm->changes;
    sim_run(sim, ticks);
    return vm->changes - before;
}

/* One busy VM, every other partition idle: it bursts at once and uses every CPU. */
static void test_burst_uses_idle(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(4, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 8, 0, NULL);
    SimVm *b = sim_add_vm(sim, "b", 2, 1, NULL);
    sim_vm_set_load(a, IDLE);
    sim_vm_set_load(b, IDLE);
    sim_run(sim, 6);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpstr(sim_emulator(a), ==, "0-1");
    g_assert_cmpuint(a->changes, ==, 1);

    sim_vm_set_load(a, 1.0);
    int step = sim->tick;
    sim_run(sim, 2);
    /* The reaction target: applied within 2 ticks of the load step. */
    g_assert_cmpint(a->last_change, >=, step);
    g_assert_cmpint(a->last_change, <=, step + 1);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-7");
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_BURST);
    g_assert_cmpuint(a->vm.st.visited->len, ==, 3);
    g_assert_cmpstr(sim_emulator(a), ==, "0-1");
    g_assert_nonnull(strstr(a->vm.reason, "burst onto partitions"));

    /* Steady: no further changes, the VM gets (almost) all 8 CPUs, b stays home. */
    g_assert_cmpuint(count_changes(sim, a, 40), ==, 0);
    g_assert_cmpfloat(sim_vm_run(sim, a), >, 7.5);
    g_assert_cmpstr(sim_vcpus(b), ==, "2-3");
    g_assert_cmpuint(b->changes, ==, 1);
    g_assert_cmpuint(a->bursts, ==, 3);
}

/* Both owners busy: everybody stays home, nothing changes after the first placement. */
static void test_two_busy_stay_home(void)
{
    for (guint vcpus = 2; vcpus <= 3; vcpus++) {
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
        SimVm *a = sim_add_vm(sim, "a", vcpus, 0, NULL);
        SimVm *b = sim_add_vm(sim, "b", vcpus, 1, NULL);
        sim_vm_set_load(a, 1.0);
        sim_vm_set_load(b, 1.0);
        for (guint k = 0; k < 60; k++) {
            sim_step(sim);
            g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
            g_assert_cmpstr(sim_vcpus(b), ==, "2-3");
        }
        g_assert_cmpuint(a->changes, ==, 1);
        g_assert_cmpuint(b->changes, ==, 1);
        /* All vCPU time at home. */
        g_assert_cmpfloat(sim_vm_run_on(sim, a, "0-1"), ==, sim_vm_run(sim, a));
        g_assert_cmpfloat(sim_vm_run_on(sim, b, "2-3"), ==, sim_vm_run(sim, b));
    }
}

/* The owner wakes: the visitor leaves in the very tick that first sees the owner's load. */
static void test_owner_wakes_retreat(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 4, 0, NULL);
    SimVm *b = sim_add_vm(sim, "b", 2, 1, NULL);
    sim_vm_set_load(a, 1.0);
    sim_vm_set_load(b, IDLE);
    sim_run(sim, 10);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
    /* An idle owner's noise does not evict the visitor. */
    g_assert_cmpuint(a->changes, ==, 2);

    sim_vm_set_load(b, 1.0);
    int step = sim->tick;
    sim_step(sim);
    g_assert_cmpint(a->last_change, ==, step);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_HOME);
    g_assert_cmpuint(a->retreats, ==, 1);
    g_assert_nonnull(strstr(a->vm.reason, "retreat from partition 1"));

    /* It stays out while the owner is busy; the owner never moved and gets its CPUs. */
    g_assert_cmpuint(count_changes(sim, a, 30), ==, 0);
    g_assert_cmpstr(sim_vcpus(b), ==, "2-3");
    g_assert_cmpuint(b->changes, ==, 1);
    g_assert_cmpfloat(sim_vm_run(sim, b), >, 1.99);

    /* The owner sleeps again: the first forced retreat costs no back-off. */
    sim_vm_set_load(b, IDLE);
    step = sim->tick;
    sim_run(sim, 2);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
    g_assert_cmpint(a->last_change, <=, step + 1);
}

/* The integration layout: partitions of one CPU each (layout=custom "0;1"), two 2-vCPU VMs,
 * a little emulator noise on both CPUs. Burst, retreat and burst again, each within 2 ticks. */
static void test_single_cpu_partitions(void)
{
    static const char *const lists[] = {"0", "1"};
    g_autoptr(Sim) sim = sim_new(sim_topology_new(2, lists, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 2, 0, NULL);
    SimVm *b = sim_add_vm(sim, "b", 2, 1, NULL);
    sim->unmanaged[0] = sim->unmanaged[1] = 0.02;
    sim_vm_set_load(a, IDLE);
    sim_vm_set_load(b, IDLE);
    sim_run(sim, 8);
    g_assert_cmpstr(sim_vcpus(a), ==, "0");
    g_assert_cmpstr(sim_vcpus(b), ==, "1");

    for (guint round = 0; round < 3; round++) {
        sim_vm_set_load(a, 1.0);
        int step = sim->tick;
        sim_run(sim, 2);
        g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
        g_assert_cmpint(a->last_change, <=, step + 1);
        sim_run(sim, 6);
        g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
        g_assert_cmpfloat(sim_vm_run(sim, a), >, 1.9);

        sim_vm_set_load(b, 1.0);
        step = sim->tick;
        sim_run(sim, 2);
        g_assert_cmpstr(sim_vcpus(a), ==, "0");
        g_assert_cmpint(a->last_change, <=, step + 1);
        sim_run(sim, 10);
        g_assert_cmpstr(sim_vcpus(a), ==, "0");
        g_assert_cmpstr(sim_vcpus(b), ==, "1");

        sim_vm_set_load(b, IDLE);
        step = sim->tick;
        sim_run(sim, 2);
        g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
        g_assert_cmpint(a->last_change, <=, step + 1);
        sim_vm_set_load(a, IDLE);
        sim_run(sim, 20);
        g_assert_cmpstr(sim_vcpus(a), ==, "0");
    }
    g_assert_cmpuint(b->changes, ==, 1);
}

/* The owners fill their partition while the kernel keeps the visitor off it (issue 11): a
 * (2 vCPUs, home 1) bursts onto CPU 0; b (1 vCPU, home 0) starts a 1-CPU load and the balancer
 * moves a's thread back to CPU 1, so a runs nowhere on partition 0. a must still leave it
 * within 2 ticks, else the kernel may put a's thread there later and make b wait. It comes
 * back only when b leaves room again, and does not flap meanwhile. */
static void test_owners_fill_partition(void)
{
    static const char *const lists[] = {"0", "1"};
    g_autoptr(Sim) sim = sim_new(sim_topology_new(2, lists, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 2, 1, NULL);
    SimVm *b = sim_add_vm(sim, "b", 1, 0, NULL);
    sim_vm_set_load(a, 0.6);
    sim_vm_set_load(b, 0.0);
    sim_run(sim, 8);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpfloat(sim_vm_run_on(sim, a, "0"), >, 0.5);

    for (guint round = 0; round < 3; round++) {
        sim_vm_set_load(b, 1.0);
        int step = sim->tick;
        sim_step(sim);
        /* The kernel's part of the case: a runs only on CPU 1, b has CPU 0 to itself. */
        g_assert_cmpfloat(sim_vm_run_on(sim, a, "0"), ==, 0.0);
        g_assert_cmpfloat(sim_vm_run(sim, b), >, 0.99);
        sim_step(sim);
        g_assert_cmpstr(sim_vcpus(a), ==, "1");
        g_assert_cmpint(a->last_change, <=, step + 1);
        g_assert_cmpuint(a->retreats, ==, round + 1);

        /* No room on 0 while b is busy: a stays home, however long it waits. */
        g_assert_cmpuint(count_changes(sim, a, 20), ==, 0);
        g_assert_cmpuint(a->retreats, ==, round + 1);

        /* b sleeps: room again, a comes back at once (its back-off ran out meanwhile). */
        g_assert_cmpint(a->vm.st.holdoff_until_ms, <=, sim->now_ms);
        sim_vm_set_load(b, 0.0);
        step = sim->tick;
        sim_run(sim, 2);
        g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
        g_assert_cmpint(a->last_change, <=, step + 1);
    }
    g_assert_cmpuint(b->changes, ==, 1);
}

/* The VM's own load switches every 2 ticks: it bursts once and does not flap. */
static void test_own_load_oscillates(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 4, 0, NULL);
    SimVm *b = sim_add_vm(sim, "b", 2, 1, NULL);
    sim_vm_set_load(b, IDLE);
    guint changes_late = 0;
    for (guint k = 0; k < 120; k++) {
        sim_vm_set_load(a, (k / 2) % 2 ? 1.0 : IDLE);
        guint before = a->changes;
        sim_step(sim);
        if (k >= 20)
            changes_late += a->changes - before;
    }
    g_test_message("a: %u changes, %u in the last 100 ticks", a->changes, changes_late);
    g_assert_cmpuint(changes_late, <=, 100 / 20);
    g_assert_cmpuint(a->changes, <=, 3);
    g_assert_cmpuint(b->changes, ==, 1);
}

/* The neighbour's owner switches every 2 ticks: the visitor backs off exponentially, still
 * bursts now and then, and in steady state changes at most once per 20 ticks. */
static void test_owner_load_oscillates(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 4, 0, NULL);
    SimVm *b = sim_add_vm(sim, "b", 2, 1, NULL);
    sim_vm_set_load(a, 1.0);
    guint changes_late = 0, bursts_late = 0;
    for (guint k = 0; k < 240; k++) {
        sim_vm_set_load(b, (k / 2) % 2 ? 1.0 : IDLE);
        guint before = a->changes;
        sim_step(sim);
        if (k >= 80) {
            changes_late += a->changes - before;
            bursts_late += a->vm.bursts;
        }
        g_assert_cmpstr(sim_vcpus(b), ==, "2-3");
    }
    g_test_message("a: %u changes, %u in the last 160 ticks, %u forced retreats pending",
                   a->changes, changes_late, a->vm.st.forced_retreats);
    g_assert_cmpuint(changes_late, <=, 160 / 20);
    g_assert_cmpuint(bursts_late, >=, 1);
    g_assert_cmpuint(a->vm.st.forced_retreats, >=, 3);
    g_assert_cmpuint(b->changes, ==, 1);
}

/* Distances: 0-2 is 12, 0-1 is 21, 0-3 is 31. */
static const guint four_nodes[16] = {
    10, 21, 12, 31, /**/ 21, 10, 31, 12, /**/ 12, 31, 10, 21, /**/ 31, 12, 21, 10,
};

static void test_nearest_first(void)
{
    {
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(4, 2, four_nodes), TICK_MS);
        SimVm *a = sim_add_vm(sim, "a", 3, 0, NULL);
        sim_vm_set_load(a, 1.0);
        sim_run(sim, 3);
        g_assert_cmpstr(sim_vcpus(a), ==, "0-1,4-5");
    }
    {
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(4, 2, four_nodes), TICK_MS);
        SimVm *a = sim_add_vm(sim, "a", 4, 0, NULL);
        sim_vm_set_load(a, 1.0);
        sim_run(sim, 3);
        /* two partitions needed: node 2, then node 1, never the far node 3 */
        g_assert_cmpstr(sim_vcpus(a), ==, "0-5");
        g_assert_cmpuint(g_array_index(a->vm.st.visited, guint, 0), ==, 2);
        g_assert_cmpuint(g_array_index(a->vm.st.visited, guint, 1), ==, 1);
        g_assert_cmpuint(count_changes(sim, a, 20), ==, 0);
    }
    {
        /* From node 3: node 1 (12), then node 2 (21). */
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(4, 2, four_nodes), TICK_MS);
        SimVm *a = sim_add_vm(sim, "a", 4, 3, NULL);
        sim_vm_set_load(a, 1.0);
        sim_run(sim, 3);
        g_assert_cmpstr(sim_vcpus(a), ==, "2-7");
        g_assert_cmpuint(g_array_index(a->vm.st.visited, guint, 0), ==, 1);
    }
}

/* Bursting on two partitions, the owner of the nearer one wakes: only that one is left. */
static void test_partial_retreat(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(4, 2, four_nodes), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 5, 0, NULL);
    SimVm *c = sim_add_vm(sim, "c", 2, 2, NULL);
    sim_vm_set_load(a, 1.0);
    sim_vm_set_load(c, IDLE);
    sim_run(sim, 6);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-5");
    sim_vm_set_load(c, 1.0);
    int step = sim->tick;
    sim_step(sim);
    g_assert_cmpint(a->last_change, ==, step);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_BURST);
    g_assert_cmpuint(a->vm.st.visited->len, ==, 1);
    g_assert_cmpuint(g_array_index(a->vm.st.visited, guint, 0), ==, 1);
    g_assert_cmpstr(sim_vcpus(c), ==, "4-5");
}

/* A bursting VM that needs more later widens, but only after the dwell time. */
static void test_widen_after_dwell(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(4, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 8, 0, NULL);
    for (guint v = 0; v < 8; v++)
        a->load[v] = v < 3 ? 1.0 : 0.0;
    sim_run(sim, 3);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
    int burst = a->last_change;
    for (guint v = 0; v < 8; v++)
        a->load[v] = 1.0;
    guint changes = a->changes;
    sim_run(sim, 12);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-7");
    g_assert_cmpuint(a->changes, ==, changes + 1);
    g_assert_cmpint(a->last_change, >=, burst + 4);
    g_assert_nonnull(strstr(a->vm.reason, "widen onto partitions 2, 3"));
    g_assert_cmpuint(count_changes(sim, a, 20), ==, 0);
}

/* Only as many partitions as needed. */
static void test_partial_burst(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(4, 4, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 6, 0, NULL);
    sim_vm_set_load(a, 1.0);
    sim_run(sim, 3);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-7");
    g_assert_cmpuint(a->vm.st.visited->len, ==, 1);
    g_assert_cmpuint(count_changes(sim, a, 30), ==, 0);
    g_assert_cmpfloat(sim_vm_wait(sim, a), <, 0.01);
}

/* A VM with more vCPUs than its home has CPUs: bursts when it can, lives at home when not. */
static void test_vm_larger_than_home(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 6, 0, NULL);
    SimVm *b = sim_add_vm(sim, "b", 2, 1, NULL);
    sim_vm_set_load(a, 1.0);
    sim_vm_set_load(b, 1.0);
    sim_run(sim, 20);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpuint(a->changes, ==, 1);
    g_assert_cmpfloat(sim_vm_wait(sim, a), >, 3.9);

    sim_vm_set_load(b, IDLE);
    sim_run(sim, 2);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
    g_assert_cmpstr(sim_emulator(a), ==, "0-1");
    sim_run(sim, 10);
    g_assert_cmpfloat(sim_vm_run(sim, a), >, 3.9);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
}

static void test_strict_and_softness_zero(void)
{
    for (int variant = 0; variant < 2; variant++) {
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
        SimVm *a = sim_add_vm(sim, "a", 4, 0, NULL);
        if (variant == 0)
            a->vm.mode = SA_MODE_STRICT;
        else
            a->vm.softness = 0;
        sim_vm_set_load(a, 1.0);
        for (guint k = 0; k < 30; k++) {
            sim_step(sim);
            g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
            g_assert_cmpint(a->vm.st.state, ==, SA_STATE_HOME);
        }
        g_assert_cmpuint(a->changes, ==, 1);

        /* Made strict while bursting: back home in the same tick. */
        if (variant == 0) {
            a->vm.mode = SA_MODE_SOFT;
            sim_run(sim, 2);
            g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
            a->vm.mode = SA_MODE_STRICT;
            sim_step(sim);
            g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
            g_assert_nonnull(strstr(a->vm.reason, "strict"));
        }
    }
}

static void test_mode_off(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 2, 0, NULL);
    SimVm *b = sim_add_vm(sim, "b", 2, 1, NULL);
    a->vm.mode = SA_MODE_OFF;
    sim_vm_set_load(a, 1.0);
    sim_vm_set_load(b, 1.0);
    sim_run(sim, 10);
    g_assert_false(a->vm.st.placed);
    g_assert_null(a->vm.st.vcpus);
    g_assert_cmpuint(a->changes, ==, 0);
    /* Its load is somebody else's: unmanaged load where it ran. */
    double unmanaged = sim->usage[0].unmanaged + sim->usage[1].unmanaged;
    g_assert_cmpfloat(unmanaged, >, 1.0);
    g_assert_cmpuint(sim->usage[0].owner_vcpus, ==, 0);
    g_assert_cmpuint(sim->usage[1].owner_vcpus, ==, 2);

    /* Managed again: placed again, changed. */
    a->vm.mode = SA_MODE_SOFT;
    sim_step(sim);
    g_assert_true(a->vm.changed);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    a->vm.mode = SA_MODE_OFF;
    sim_step(sim);
    g_assert_false(a->vm.changed);
    g_assert_false(a->vm.st.placed);
}

/* The allowed set forbids the nearest partition: the burst skips it. Only allowed CPUs of a
 * partition are used. */
static void test_allowed_forbids_partition(void)
{
    static const guint three[9] = {10, 12, 20, /**/ 12, 10, 20, /**/ 20, 20, 10};
    {
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(3, 2, three), TICK_MS);
        SimVm *a = sim_add_vm(sim, "a", 4, 0, "0-1,4-5");
        sim_vm_set_load(a, 1.0);
        sim_run(sim, 20);
        g_assert_cmpstr(sim_vcpus(a), ==, "0-1,4-5");
        g_assert_cmpuint(a->changes, ==, 2);
    }
    {
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(3, 2, three), TICK_MS);
        SimVm *a = sim_add_vm(sim, "a", 3, 0, "0-2");
        sim_vm_set_load(a, 1.0);
        sim_run(sim, 20);
        g_assert_cmpstr(sim_vcpus(a), ==, "0-2");
        g_assert_cmpstr(sim_emulator(a), ==, "0-1");
    }
    {
        /* Home has no allowed CPU: the vCPUs get the allowed set, nothing else. */
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(3, 2, three), TICK_MS);
        SimVm *a = sim_add_vm(sim, "a", 2, 0, "4-5");
        sim_vm_set_load(a, 1.0);
        sim_run(sim, 5);
        g_assert_cmpint(a->vm.st.home, ==, 0);
        g_assert_cmpstr(sim_vcpus(a), ==, "4-5");
        g_assert_cmpstr(sim_emulator(a), ==, "4-5");
        g_assert_cmpuint(a->changes, ==, 1);
    }
}

/* Load softaff does not manage counts as owner load: visitors leave when it rises. */
static void test_unmanaged_load(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 6, 0, NULL);
    sim_vm_set_load(a, 1.0);
    /* A little host noise is tolerated, even though the visitor's own vCPUs queue there. */
    sim->unmanaged[2] = 0.2;
    sim_run(sim, 30);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
    g_assert_cmpuint(a->changes, ==, 2);

    sim->unmanaged[2] = 0.9;
    sim->unmanaged[3] = 0.9;
    int step = sim->tick;
    sim_step(sim);
    g_assert_cmpint(a->last_change, ==, step);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpfloat(sim->usage[1].unmanaged, >, 0.9);
    g_assert_cmpfloat(sim->usage[1].visitors, >, 0.9);
    sim_run(sim, 10);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpfloat(sim->usage[1].unmanaged, >, 1.7);
    g_assert_cmpfloat(sim->usage[1].visitors, ==, 0);
}

/* Three VMs share one home, the other partition is idle: nobody starves, the home keeps at
 * least one of them, and the arrangement is stable. */
static void test_three_share_home(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 4, NULL), TICK_MS);
    SimVm *vm[3] = {
        sim_add_vm(sim, "a", 2, 0, NULL),
        sim_add_vm(sim, "b", 2, 0, NULL),
        sim_add_vm(sim, "c", 2, 0, NULL),
    };
    for (guint i = 0; i < 3; i++)
        sim_vm_set_load(vm[i], 1.0);
    sim_run(sim, 6);
    guint changes[3], at_home = 0;
    double wait = 0;
    for (guint i = 0; i < 3; i++) {
        changes[i] = vm[i]->changes;
        wait += sim_vm_wait(sim, vm[i]);
        at_home += vm[i]->vm.st.state == SA_STATE_HOME;
        g_assert_cmpstr(sim_emulator(vm[i]), ==, "0-3");
        g_assert_cmpint(vm[i]->vm.st.home, ==, 0);
    }
    g_assert_cmpfloat(wait, <, 0.05);
    g_assert_cmpuint(at_home, >=, 1);
    g_assert_cmpuint(sim->usage[0].n_owner_vms, ==, 3);
    g_assert_cmpuint(sim->usage[0].owner_vcpus, ==, 6);
    sim_run(sim, 40);
    for (guint i = 0; i < 3; i++)
        g_assert_cmpuint(vm[i]->changes, ==, changes[i]);
}

/* A partition without online CPUs is never a home and never a burst target. */
static void test_cpuless_partition(void)
{
    static const char *const lists[] = {"0-1", "", "2-3"};
    g_autoptr(Sim) sim = sim_new(sim_topology_new(3, lists, NULL), TICK_MS);
    SimVm *vms[4];
    for (guint i = 0; i < 4; i++) {
        g_autofree char *name = g_strdup_printf("vm%u", i);
        vms[i] = sim_add_vm(sim, name, 1, -1, NULL);
    }
    SimVm *p = sim_add_vm(sim, "pref1", 1, 1, NULL);
    SimVm *big = sim_add_vm(sim, "big", 4, -1, NULL);
    sim_step(sim);
    for (guint i = 0; i < 4; i++)
        g_assert_cmpint(vms[i]->vm.st.home, !=, 1);
    g_assert_cmpint(p->vm.st.home, !=, 1);
    g_assert_cmpint(big->vm.st.home, !=, 1);
    g_assert_nonnull(strstr(p->vm.reason, "preferred partition 1"));
    g_assert_cmpuint(sim->usage[1].owner_vcpus, ==, 0);

    /* A busy VM bursts past it onto the other partition. */
    sim_vm_set_load(big, 1.0);
    sim_run(sim, 5);
    g_assert_cmpstr(sim_vcpus(big), ==, "0-3");
    g_assert_cmpuint(big->vm.st.visited->len, ==, 1);
    g_assert_cmpuint(g_array_index(big->vm.st.visited, guint, 0), !=, 1);
}

/* A preferred id that the layout lacks falls back to auto and says so. */
static void test_preferred_missing(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 2, 0, NULL);
    SimVm *b = sim_add_vm(sim, "b", 2, 7, NULL);
    sim_step(sim);
    g_assert_cmpint(a->vm.st.home, ==, 0);
    g_assert_cmpint(b->vm.st.home, ==, 1); /* the least committed */
    g_assert_nonnull(strstr(b->vm.reason, "preferred partition 7"));
    g_assert_nonnull(strstr(b->vm.reason, "auto"));
    g_assert_true(b->vm.changed);
}

/* The VM's load drops: it returns home once the smaller demand has fit for dwell_ms. */
static void test_return_home(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 2, NULL), TICK_MS);
    SimVm *a = sim_add_vm(sim, "a", 4, 0, NULL);
    sim_vm_set_load(a, 1.0);
    sim_run(sim, 10);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
    sim_vm_set_load(a, 0.3);
    int step = sim->tick;
    sim_run(sim, 20);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpuint(a->changes, ==, 3);
    /* Not before dwell_ms of fitting (4 ticks), not much later either. */
    g_assert_cmpint(a->last_change, >=, step + 4);
    g_assert_cmpint(a->last_change, <=, step + 8);
    g_assert_cmpuint(a->retreats, ==, 0);
    g_assert_nonnull(strstr(a->vm.reason, "return home"));

    /* Busy again right away: the dwell time holds the burst back, then it bursts. */
    sim_vm_set_load(a, 1.0);
    int back = a->last_change;
    sim_run(sim, 10);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-3");
    g_assert_cmpint(a->last_change, >=, back + 4);
}

/* Same inputs, same outputs: two identical runs agree on every tick. */
static void test_determinism(void)
{
    g_autoptr(Sim) s1 = sim_new(sim_topology_uniform(4, 2, four_nodes), TICK_MS);
    g_autoptr(Sim) s2 = sim_new(sim_topology_uniform(4, 2, four_nodes), TICK_MS);
    Sim *sims[2] = {s1, s2};
    for (guint s = 0; s < 2; s++) {
        for (guint i = 0; i < 6; i++) {
            g_autofree char *name = g_strdup_printf("vm%u", i);
            sim_add_vm(sims[s], name, 1 + i % 3, -1, NULL);
        }
    }
    for (guint k = 0; k < 80; k++) {
        for (guint s = 0; s < 2; s++) {
            for (guint i = 0; i < 6; i++) {
                SimVm *vm = g_ptr_array_index(sims[s]->vms, i);
                sim_vm_set_load(vm, ((k / (3 + i)) + i) % 3 == 0 ? 1.0 : IDLE);
            }
            sim_step(sims[s]);
        }
        for (guint i = 0; i < 6; i++) {
            SimVm *v1 = g_ptr_array_index(s1->vms, i);
            SimVm *v2 = g_ptr_array_index(s2->vms, i);
            g_assert_cmpstr(sim_vcpus(v1), ==, sim_vcpus(v2));
            g_assert_cmpstr(sim_emulator(v1), ==, sim_emulator(v2));
            g_assert_cmpint(v1->vm.st.home, ==, v2->vm.st.home);
            g_assert_cmpint(v1->vm.changed, ==, v2->vm.changed);
            g_assert_cmpstr(v1->vm.reason, ==, v2->vm.reason);
        }
    }
}

/* ---- doors (issue 13): spikes shorter than a tick onto partitions whose owners are idle ----
 * The integration layout: partitions CPU 0 | CPU 1, a (2 vCPUs, home 1) spikes for 300 ms every
 * 3 s (one interval at 0.6 per vCPU, then five idle ones), b (1 vCPU, home 0) is the neighbour.
 * The simulator shares an interval's CPU time in proportion to demand, so an unserved spike runs
 * 1.0 of its 1.2 CPUs and waits the rest. */

#define SPIKE 0.6
#define SPIKE_PERIOD 6

typedef struct {
    double run, demand; /* Σ over the spike intervals */
    double wait;        /* Σ wait over the spike intervals */
    int door_tick;      /* first tick that ended with a's door open, -1 none */
    guint door_ticks;   /* ticks that ended in state door */
    bool left_home;     /* a's vCPUs ran off home in a tick when b was busy */
} Spikes;

static Sim *door_sim(SimVm **a, SimVm **b, int softness)
{
    static const char *const lists[] = {"0", "1"};
    Sim *sim = sim_new(sim_topology_new(2, lists, NULL), TICK_MS);
    *a = sim_add_vm(sim, "a", 2, 1, NULL);
    *b = sim_add_vm(sim, "b", 1, 0, NULL);
    (*a)->vm.softness = softness;
    sim->unmanaged[0] = sim->unmanaged[1] = 0.02; /* emulator noise */
    sim_vm_set_load(*a, IDLE);
    sim_vm_set_load(*b, IDLE);
    sim_run(sim, 4);
    return sim;
}

/* periods × (one spike interval, SPIKE_PERIOD − 1 idle ones) of a, b at b_load; sums the spike
 * intervals as the ticks after them saw them. */
static void run_spikes(Sim *sim, SimVm *a, SimVm *b, guint periods, double b_load, Spikes *out)
{
    sim_vm_set_load(b, b_load);
    for (guint k = 0; k < periods * SPIKE_PERIOD; k++) {
        bool spike = k % SPIKE_PERIOD == 0;
        sim_vm_set_load(a, spike ? SPIKE : IDLE);
        sim_step(sim);
        if (spike) {
            out->run += sim_vm_run(sim, a);
            out->wait += sim_vm_wait(sim, a);
            out->demand += 2 * SPIKE;
        }
        if (b_load > IDLE && sim_vm_run_on(sim, a, "0") > 0)
            out->left_home = true;
        if (a->vm.st.state == SA_STATE_DOOR) {
            out->door_ticks++;
            if (out->door_tick < 0)
                out->door_tick = sim->tick - 1;
        }
    }
}

/* The neighbour idle: the first spike bursts onto CPU 0 in the tick after it; the burst stays
 * (serving the second spike) until b has been idle 5 s and it has fit at home for dwell_ms, then
 * becomes a door in one tick, and from then on every spike runs at once, unwaited, with no burst
 * and no retreat. */
static void test_door_spiky_idle_neighbour(void)
{
    SimVm *a, *b;
    g_autoptr(Sim) sim = door_sim(&a, &b, -1);
    Spikes first = {.door_tick = -1}, rest = {.door_tick = -1};
    run_spikes(sim, a, b, 2, IDLE, &first);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpstr(sim_emulator(a), ==, "1");
    g_assert_cmpint(first.door_tick, >=, 0);
    g_assert_cmpint(first.door_tick, <=, 4 + 2 * SPIKE_PERIOD);
    g_assert_cmpfloat(first.wait, >, 0.1); /* the first spike was unserved */

    run_spikes(sim, a, b, 20, IDLE, &rest);
    /* Every spike served in full: the kernel placed it at once. */
    g_assert_cmpfloat(rest.wait, <, 1e-6);
    g_assert_cmpfloat(rest.run / rest.demand, >, 0.999);
    g_assert_cmpuint(rest.door_ticks, ==, 20 * SPIKE_PERIOD);
    /* Over the whole run: ≥ 0.90 of what no affinity gives (all of it). */
    g_assert_cmpfloat((first.run + rest.run) / (first.demand + rest.demand), >=, 0.90);
    g_assert_cmpuint(a->retreats, ==, 0);
    g_assert_cmpuint(b->changes, ==, 1);
    g_assert_nonnull(strstr(a->vm.reason, "door open: owners of partition 0 idle for"));
}

/* The owners show load: the door closes in the first tick that sees it, without a back-off, and
 * reopens only after b has been idle door_idle_ms (5 s) again. */
static void test_door_owner_wakes(void)
{
    SimVm *a, *b;
    g_autoptr(Sim) sim = door_sim(&a, &b, -1);
    Spikes s = {.door_tick = -1};
    run_spikes(sim, a, b, 3, IDLE, &s);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);

    for (guint round = 0; round < 2; round++) {
        /* A light load (0.4 CPU), then a full one: more than the margin closes the door. */
        const double load = round == 0 ? 0.4 : 1.0, noise = 0.02;
        sim_vm_set_load(b, load);
        int step = sim->tick;
        sim_step(sim);
        g_assert_cmpint(a->last_change, ==, step);
        g_assert_cmpstr(sim_vcpus(a), ==, "1");
        g_assert_cmpint(a->vm.st.state, ==, SA_STATE_HOME);
        g_assert_nonnull(strstr(a->vm.reason, "door closed on partition 0"));
        g_assert_cmpuint(a->retreats, ==, 0);
        g_assert_cmpint(a->vm.st.holdoff_until_ms, <=, sim->now_ms);

        /* Shut while b is busy, a's spikes stay home (b keeps its CPU); b gets all it asks. */
        Spikes busy = {.door_tick = -1};
        run_spikes(sim, a, b, 3, load, &busy);
        g_assert_cmpuint(busy.door_ticks, ==, 0);
        g_assert_false(busy.left_home);
        g_assert_cmpfloat(sim_vm_run(sim, b), >=,
                          (load + noise > 1 ? load / (load + noise) : load) - 1e-6);

        /* b idle again: the door reopens in the tick that sees its 10th idle interval (5 s), or,
         * when a spike burst in between, once that burst has fit at home for dwell_ms. */
        Spikes idle = {.door_tick = -1};
        step = sim->tick;
        run_spikes(sim, a, b, 3, IDLE, &idle);
        g_assert_cmpint(idle.door_tick, >=, step + 9);
        g_assert_cmpint(idle.door_tick, <=, step + 10 + 4);
    }
    g_assert_cmpuint(b->changes, ==, 1);
}

/* Event ticks come 20 ms apart: an idle owner's few ms of housekeeping read as 0.4 CPU there.
 * That keeps the door open (within 10 ms of CPU time); a real load (1.0 CPU) closes it in the
 * first 20-ms tick; a regular tick that sees 0.4 closes it as before. */
static void test_door_event_ticks(void)
{
    SimVm *a, *b;
    g_autoptr(Sim) sim = door_sim(&a, &b, -1);
    Spikes s = {.door_tick = -1};
    run_spikes(sim, a, b, 3, IDLE, &s);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);
    guint regular = sim->interval_ms;

    sim->interval_ms = 20;
    sim_vm_set_load(b, 0.4);
    sim_step(sim);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    sim_vm_set_load(b, IDLE);
    sim_step(sim);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);

    sim_vm_set_load(b, 1.0);
    int step = sim->tick;
    sim_step(sim);
    g_assert_cmpint(a->last_change, ==, step);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_HOME);
    g_assert_cmpstr(sim_vcpus(a), ==, "1");

    /* b idle 5 s again (regular ticks), then 0.4 on a regular tick: closed. */
    sim->interval_ms = regular;
    Spikes idle = {.door_tick = -1};
    run_spikes(sim, a, b, 3, IDLE, &idle);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);
    sim_vm_set_load(b, 0.4);
    sim_step(sim);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_HOME);
    g_assert_cmpuint(a->retreats, ==, 0);
}

/* Event sensing bursts a spike as it starts (a 20-ms tick sees a's vCPUs wait at home); b's
 * vCPU, a little busy (0.28 CPU), waits behind a's on CPU 0 meanwhile. That wait is a's doing:
 * b's idle run goes on, so when the burst has fit at home for dwell_ms and returns home, the
 * door onto CPU 0 opens in the same tick (a's CPUs never change). Counting that wait would
 * restart b's idle run: a at home, the door 5 s later, the next spike waiting out the dwell. */
static void test_door_after_event_burst(void)
{
    SimVm *a, *b;
    g_autoptr(Sim) sim = door_sim(&a, &b, -1);
    guint regular = sim->interval_ms;
    sim_run(sim, 8); /* b idle 6 s */

    sim->interval_ms = 20;
    sim_vm_set_load(a, 1.0);
    sim_step(sim);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_BURST);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");

    sim->interval_ms = regular;
    sim_vm_set_load(b, 0.28);
    sim_step(sim);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_BURST);
    g_assert_cmpfloat(sim_vm_wait(sim, b), >, 0.05);
    sim_vm_set_load(a, IDLE);
    sim_vm_set_load(b, IDLE);
    for (guint k = 0; k < 8; k++) {
        sim_step(sim);
        g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    }
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);
    g_assert_cmpuint(a->retreats, ==, 0);
    g_assert_cmpuint(a->changes, ==, 2); /* placed, burst: the door changed no CPU */
}

/* A burst that fits at home again while its door may not open yet (b was busy a moment ago)
 * stays: returning home would hold the next spike at home for the dwell time. It becomes a door
 * once b has been idle 5 s. */
static void test_burst_waits_for_door(void)
{
    SimVm *a, *b;
    g_autoptr(Sim) sim = door_sim(&a, &b, -1);
    guint regular = sim->interval_ms;
    sim_run(sim, 8);

    sim->interval_ms = 20;
    sim_vm_set_load(a, 1.0);
    sim_step(sim);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_BURST);
    sim->interval_ms = regular;
    sim_vm_set_load(a, 0.4);
    sim_step(sim);
    sim_vm_set_load(a, IDLE);
    sim_vm_set_load(b, 0.3); /* b's idle run starts again */
    sim_step(sim);
    sim_vm_set_load(b, IDLE);
    sim_run(sim, 5); /* a has fit at home for dwell_ms, b idle 2.5 s */
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_BURST);

    sim_vm_set_load(a, SPIKE);
    sim_step(sim);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpfloat(sim_vm_wait(sim, a), <, 1e-6);
    sim_vm_set_load(a, IDLE);
    sim_run(sim, 10);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);
    g_assert_cmpstr(sim_vcpus(a), ==, "0-1");
    g_assert_cmpuint(a->retreats, ==, 0);
}

/* Both busy: no door, and a's vCPU time stays at home (the locality promise). */
static void test_door_both_busy(void)
{
    SimVm *a, *b;
    g_autoptr(Sim) sim = door_sim(&a, &b, -1);
    Spikes s = {.door_tick = -1};
    run_spikes(sim, a, b, 20, 1.0, &s);
    g_assert_cmpuint(s.door_ticks, ==, 0);
    g_assert_false(s.left_home);
    g_assert_cmpstr(sim_vcpus(a), ==, "1");
    g_assert_cmpuint(a->changes, ==, 1);
    g_assert_cmpuint(b->changes, ==, 1);
}

/* Softness 0 never opens a door; softness 100 opens one after a single idle interval, spike or
 * not; the default keeps a VM that fits at home at home. */
static void test_door_softness(void)
{
    SimVm *a, *b;
    g_autoptr(Sim) s0 = door_sim(&a, &b, 0);
    Spikes s = {.door_tick = -1};
    run_spikes(s0, a, b, 20, IDLE, &s);
    g_assert_cmpuint(s.door_ticks, ==, 0);
    g_assert_cmpstr(sim_vcpus(a), ==, "1");
    g_assert_cmpuint(a->changes, ==, 1);

    static const char *const lists[] = {"0", "1"};
    g_autoptr(Sim) s100 = sim_new(sim_topology_new(2, lists, NULL), TICK_MS);
    SimVm *soft = sim_add_vm(s100, "a", 2, 1, NULL);
    SimVm *fits = sim_add_vm(s100, "b", 1, 0, NULL);
    soft->vm.softness = 100;
    sim_vm_set_load(soft, IDLE);
    sim_vm_set_load(fits, 0.5); /* fits at home at the default softness: no door */
    sim_step(s100);
    g_assert_cmpstr(sim_vcpus(soft), ==, "1");
    sim_step(s100); /* the first interval: b's 0.5 CPU is load, CPU 1 idle */
    g_assert_cmpstr(sim_vcpus(soft), ==, "1");
    sim_vm_set_load(fits, IDLE);
    sim_step(s100); /* one idle interval of b */
    g_assert_cmpint(soft->vm.st.state, ==, SA_STATE_DOOR);
    g_assert_cmpstr(sim_vcpus(soft), ==, "0-1");
    g_assert_nonnull(strstr(soft->vm.reason, "door open: owners of partition 0 idle for 0.5 s"));
    sim_vm_set_load(fits, 0.5);
    sim_run(s100, 60);
    g_assert_cmpuint(fits->changes, ==, 1);
    g_assert_cmpstr(sim_vcpus(fits), ==, "0");
}

/* Spikes stop: the door closes SA_POLICY_DOOR_MEMORY_MS (60 s) after the last one. */
static void test_door_closes_without_spikes(void)
{
    SimVm *a, *b;
    g_autoptr(Sim) sim = door_sim(&a, &b, -1);
    Spikes s = {.door_tick = -1};
    run_spikes(sim, a, b, 3, IDLE, &s);
    g_assert_cmpint(a->vm.st.state, ==, SA_STATE_DOOR);
    sim_vm_set_load(a, IDLE);
    int quiet = sim->tick;
    while (a->vm.st.state == SA_STATE_DOOR && sim->tick < quiet + 200)
        sim_step(sim);
    /* The last spike ended in the tick after it (quiet − SPIKE_PERIOD + 1); the door stays while
     * that is at most 60 s ago, 120 ticks. */
    g_assert_cmpint(sim->tick - 1, ==, quiet - SPIKE_PERIOD + 1 + 121);
    g_assert_cmpstr(sim_vcpus(a), ==, "1");
    g_assert_nonnull(strstr(a->vm.reason, "no demand beyond home for 60 s"));
    g_assert_cmpuint(a->retreats, ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* SOFTAFF_DECISION_LOG=path writes every decision of every scenario there (the golden test,
     * test-decisions.c, compares it with tests/data/policy/decisions.golden). */
    const char *log_path = g_getenv("SOFTAFF_DECISION_LOG");
    FILE *log = NULL;
    if (log_path != NULL) {
        log = fopen(log_path, "w");
        if (log == NULL) {
            g_printerr("%s: %s\n", log_path, g_strerror(errno));
            return 1;
        }
        sim_log_decisions(log);
    }
    g_test_add_func("/policy/burst-uses-idle", test_burst_uses_idle);
    g_test_add_func("/policy/two-busy-stay-home", test_two_busy_stay_home);
    g_test_add_func("/policy/owner-wakes-retreat", test_owner_wakes_retreat);
    g_test_add_func("/policy/single-cpu-partitions", test_single_cpu_partitions);
    g_test_add_func("/policy/own-load-oscillates", test_own_load_oscillates);
    g_test_add_func("/policy/owner-load-oscillates", test_owner_load_oscillates);
    g_test_add_func("/policy/owners-fill-partition", test_owners_fill_partition);
    g_test_add_func("/policy/nearest-first", test_nearest_first);
    g_test_add_func("/policy/partial-burst", test_partial_burst);
    g_test_add_func("/policy/partial-retreat", test_partial_retreat);
    g_test_add_func("/policy/widen-after-dwell", test_widen_after_dwell);
    g_test_add_func("/policy/vm-larger-than-home", test_vm_larger_than_home);
    g_test_add_func("/policy/strict-and-softness-zero", test_strict_and_softness_zero);
    g_test_add_func("/policy/mode-off", test_mode_off);
    g_test_add_func("/policy/allowed-forbids-partition", test_allowed_forbids_partition);
    g_test_add_func("/policy/unmanaged-load", test_unmanaged_load);
    g_test_add_func("/policy/three-share-home", test_three_share_home);
    g_test_add_func("/policy/cpuless-partition", test_cpuless_partition);
    g_test_add_func("/policy/preferred-missing", test_preferred_missing);
    g_test_add_func("/policy/return-home", test_return_home);
    g_test_add_func("/policy/determinism", test_determinism);
    g_test_add_func("/policy/door-spiky-idle-neighbour", test_door_spiky_idle_neighbour);
    g_test_add_func("/policy/door-owner-wakes", test_door_owner_wakes);
    g_test_add_func("/policy/door-event-ticks", test_door_event_ticks);
    g_test_add_func("/policy/door-after-event-burst", test_door_after_event_burst);
    g_test_add_func("/policy/burst-waits-for-door", test_burst_waits_for_door);
    g_test_add_func("/policy/door-both-busy", test_door_both_busy);
    g_test_add_func("/policy/door-softness", test_door_softness);
    g_test_add_func("/policy/door-closes-without-spikes", test_door_closes_without_spikes);
    int status = g_test_run();
    if (log != NULL) {
        sim_log_decisions(NULL);
        if (fclose(log) != 0) {
            g_printerr("%s: %s\n", log_path, g_strerror(errno));
            status = 1;
        }
    }
    return status;
}
