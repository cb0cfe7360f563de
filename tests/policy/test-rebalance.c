/* softaff tests — the homes rebalance (sa_rebalance_step): driven through the simulator (real
 * ticks: the moved VM's home follows its assigned partition), and from synthetic owners' demand
 * over hours of simulated time, one call per 500 ms tick. */
#define G_LOG_DOMAIN "softaff-test-rebalance"

#include <glib.h>
#include <string.h>

#include "sa-error.h"
#include "sim.h"

#define GIB (G_GUINT64_CONSTANT(1) << 30)
#define TICK_MS 500
#define MIN_MS G_GINT64_CONSTANT(60000)
#define HOUR_MS (60 * MIN_MS)

/* ---- through the simulator ---- */

typedef struct {
    char *name;
    guint from, to;
    gint64 at_ms; /* since the start */
} Moved;

static void moved_free(gpointer p)
{
    Moved *m = p;
    g_free(m->name);
    g_free(m);
}

static Moved *moved_new(const char *name, const SaRebalanceMove *move, gint64 at_ms)
{
    Moved *m = g_new0(Moved, 1);
    *m = (Moved){.name = g_strdup(name), .from = move->from, .to = move->to, .at_ms = at_ms};
    return m;
}

static SimVm *add_vm_on(Sim *sim, const char *name, guint n_vcpus, int assigned, double load,
                        guint64 memory_bytes)
{
    SimVm *vm = sim_add_vm(sim, name, n_vcpus, -1, NULL);
    vm->vm.assigned = assigned;
    vm->vm.memory_bytes = memory_bytes;
    sim_vm_set_load(vm, load);
    return vm;
}

/* Runs the simulator and the rebalance for ms; a move is applied as the daemon would: the VM's
 * assigned partition, which the next tick makes its home. */
static void sim_rebalance(Sim *sim, const SaRebalanceConfig *cfg, SaRebalanceState *st,
                          gint64 start_ms, gint64 ms, GPtrArray *moves)
{
    gint64 end = sim->now_ms + ms;
    while (sim->now_ms < end) {
        sim_step(sim);
        GPtrArray *pvms = g_ptr_array_new();
        for (guint i = 0; i < sim->vms->len; i++)
            g_ptr_array_add(pvms, &((SimVm *)g_ptr_array_index(sim->vms, i))->vm);
        SaRebalanceMove move;
        if (sa_rebalance_step(cfg, st, sim->topo, sim->usage, (SaPolicyVm *const *)pvms->pdata,
                              pvms->len, sim->now_ms, &move)) {
            SaPolicyVm *vm = g_ptr_array_index(pvms, move.vm);
            g_test_message("%s", move.reason);
            vm->assigned = (int)move.to;
            g_ptr_array_add(moves, moved_new(vm->name, &move, sim->now_ms - start_ms));
        }
        g_ptr_array_unref(pvms);
    }
}

/* Partition 0 (4 CPUs) is home to 5.6 CPUs of demand, partition 1 (4 CPUs) to none. Moving the
 * 0.2-CPU VM "a" would not fix it; b, c (2 GiB) and d (4 GiB) would: b, the cheapest, by name. */
static void test_converges(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 4, NULL), TICK_MS);
    add_vm_on(sim, "d", 2, 0, 0.9, 4 * GIB);
    add_vm_on(sim, "c", 2, 0, 0.9, 2 * GIB);
    add_vm_on(sim, "b", 2, 0, 0.9, 2 * GIB);
    SimVm *a = add_vm_on(sim, "a", 1, 0, 0.2, GIB);
    SaRebalanceConfig cfg;
    sa_rebalance_config_init(&cfg);
    g_autoptr(SaRebalanceState) st = sa_rebalance_state_new();
    g_autoptr(GPtrArray) moves = g_ptr_array_new_with_free_func(moved_free);

    gint64 start = sim->now_ms;
    sim_rebalance(sim, &cfg, st, start, 40 * MIN_MS, moves);
    g_assert_cmpuint(moves->len, ==, 1);
    Moved *m = g_ptr_array_index(moves, 0);
    g_assert_cmpstr(m->name, ==, "b");
    g_assert_cmpuint(m->from, ==, 0);
    g_assert_cmpuint(m->to, ==, 1);
    /* after the window, plus the smoothing's rise time, not much later */
    g_assert_cmpint(m->at_ms, >=, cfg.window_ms);
    g_assert_cmpint(m->at_ms, <=, cfg.window_ms + 4 * MIN_MS);
    SimVm *b = g_ptr_array_index(sim->vms, 2);
    g_assert_cmpint(b->vm.st.home, ==, 1);
    g_assert_cmpint(a->vm.st.home, ==, 0);
    /* the tick followed: b's threads now live on partition 1 */
    g_assert_cmpstr(sim_emulator(b), ==, "4-7");
    g_assert_cmpstr(sim_vcpus(b), ==, "4-7");
}

/* The off switch: the same host, never a move. */
static void test_off(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 4, NULL), TICK_MS);
    add_vm_on(sim, "c", 2, 0, 0.9, 2 * GIB);
    add_vm_on(sim, "b", 2, 0, 0.9, 2 * GIB);
    add_vm_on(sim, "a", 2, 0, 0.9, 2 * GIB);
    SaRebalanceConfig cfg;
    sa_rebalance_config_init(&cfg);
    cfg.enabled = false;
    g_autoptr(SaRebalanceState) st = sa_rebalance_state_new();
    g_autoptr(GPtrArray) moves = g_ptr_array_new_with_free_func(moved_free);
    sim_rebalance(sim, &cfg, st, sim->now_ms, 2 * HOUR_MS, moves);
    g_assert_cmpuint(moves->len, ==, 0);

    bool on = false;
    g_autoptr(GError) error = NULL;
    g_assert_true(sa_rebalance_enabled_from_string("auto", &on, NULL));
    g_assert_true(on);
    g_assert_true(sa_rebalance_enabled_from_string("off", &on, NULL));
    g_assert_false(on);
    g_assert_false(sa_rebalance_enabled_from_string("on", &on, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, "'on'"));
    g_assert_nonnull(strstr(error->message, "auto or off"));
}

/* ---- synthetic owners' demand ---- */

typedef struct {
    SaTopology *topo;
    SaPartitionUsage *usage; /* only unmanaged is read */
    GPtrArray *vms;          /* SaPolicyVm* */
    SaRebalanceConfig cfg;
    SaRebalanceState *st;
    gint64 now_ms;
    GPtrArray *moves; /* Moved* */
} Bench;

static void vm_free(gpointer p)
{
    SaPolicyVm *vm = p;
    g_free((char *)vm->name);
    sa_policy_vm_clear(vm);
    g_free(vm);
}

static Bench *bench_new(guint n_parts)
{
    Bench *b = g_new0(Bench, 1);
    b->topo = sim_topology_uniform(n_parts, 4, NULL);
    b->usage = g_new0(SaPartitionUsage, n_parts);
    b->vms = g_ptr_array_new_with_free_func(vm_free);
    sa_rebalance_config_init(&b->cfg);
    b->st = sa_rebalance_state_new();
    b->now_ms = 1000000;
    b->moves = g_ptr_array_new_with_free_func(moved_free);
    return b;
}

static void bench_free(Bench *b)
{
    sa_topology_free(b->topo);
    g_free(b->usage);
    g_ptr_array_unref(b->vms);
    sa_rebalance_state_free(b->st);
    g_ptr_array_unref(b->moves);
    g_free(b);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Bench, bench_free)

/* A VM homed on partition home with a steady demand (CPUs). */
static SaPolicyVm *bench_vm(Bench *b, const char *name, guint n_vcpus, int home, int preferred,
                            double demand, guint64 memory_bytes)
{
    SaPolicyVm *vm = g_new0(SaPolicyVm, 1);
    sa_policy_vm_init(vm);
    vm->name = g_strdup(name);
    vm->preferred = preferred;
    vm->n_vcpus = n_vcpus;
    vm->memory_bytes = memory_bytes;
    vm->st.placed = true;
    vm->st.home = home;
    vm->st.demand = demand;
    g_ptr_array_add(b->vms, vm);
    return vm;
}

/* Sets the unmanaged load of partitions at time t (ms since the start). */
typedef void (*LoadFn)(Bench *b, gint64 t, gpointer data);

/* One call per tick for ms; a move makes its target the VM's home at once. */
static void bench_run(Bench *b, gint64 ms, LoadFn load, gpointer data)
{
    for (gint64 t = 0; t < ms; t += TICK_MS) {
        b->now_ms += TICK_MS;
        if (load)
            load(b, t, data);
        SaRebalanceMove move;
        if (!sa_rebalance_step(&b->cfg, b->st, b->topo, b->usage,
                               (SaPolicyVm *const *)b->vms->pdata, b->vms->len, b->now_ms, &move))
            continue;
        SaPolicyVm *vm = g_ptr_array_index(b->vms, move.vm);
        g_assert_cmpint(vm->st.home, ==, (int)move.from);
        g_assert_cmpint(vm->preferred, <, 0);
        vm->st.home = (int)move.to;
        g_ptr_array_add(b->moves, moved_new(vm->name, &move, t));
        g_test_message("t=%" G_GINT64_FORMAT " s: %s", t / 1000, move.reason);
    }
}

/* Partition 0 and 1 swap a 3.5-CPU unmanaged load every half_ms (never when 0). VMs "a" on 0
 * and "b" on 1 want 1.5 CPUs each: while the load stays, 5.0 on 4 CPUs is over-committed, and
 * moving the other VM over would fix it. */
static void alternate(Bench *b, gint64 t, gpointer data)
{
    gint64 half_ms = *(gint64 *)data;
    bool phase = half_ms > 0 && (t / half_ms) % 2 == 1;
    b->usage[0].unmanaged = phase ? 0.0 : 3.5;
    b->usage[1].unmanaged = phase ? 3.5 : 0.0;
}

static guint alternating_moves(gint64 half_ms)
{
    g_autoptr(Bench) b = bench_new(2);
    bench_vm(b, "a", 2, 0, -1, 1.5, GIB);
    bench_vm(b, "b", 2, 1, -1, 1.5, GIB);
    bench_run(b, 2 * HOUR_MS, alternate, &half_ms);
    return b->moves->len;
}

static void test_alternating(void)
{
    g_assert_cmpuint(alternating_moves(0), ==, 1); /* a steady load: one move */
    g_assert_cmpuint(alternating_moves(2 * MIN_MS), ==, 0);
    g_assert_cmpuint(alternating_moves(4 * MIN_MS), ==, 0);
    g_assert_cmpuint(alternating_moves(8 * MIN_MS), ==, 0); /* shorter than the 10 min window */
}

/* Partition 0: "big" (2.5 CPUs) and "small" (0.5) plus 2.0 unmanaged = 5.0 of 4; partition 1:
 * other_load unmanaged. Moving big fixes 0 only if 1 then holds 2.5 more. */
static void set_unmanaged(Bench *b, gint64 t, gpointer data)
{
    (void)t;
    const double *load = data;
    b->usage[0].unmanaged = load[0];
    b->usage[1].unmanaged = load[1];
}

static guint borderline_moves(double other_load)
{
    g_autoptr(Bench) b = bench_new(2);
    bench_vm(b, "big", 3, 0, -1, 2.5, GIB);
    bench_vm(b, "small", 1, 0, -1, 0.5, GIB);
    double load[2] = {2.0, other_load};
    bench_run(b, HOUR_MS, set_unmanaged, load);
    if (b->moves->len > 0)
        g_assert_cmpstr(((Moved *)g_ptr_array_index(b->moves, 0))->name, ==, "big");
    return b->moves->len;
}

static void test_borderline(void)
{
    g_assert_cmpuint(borderline_moves(1.0), ==, 1); /* 2.5 and 3.5 after: fixed */
    /* 1 is under-used (2.5 <= 3.2) but would end at 5.0: the imbalance would only flip; moving
     * small would leave 4.5 on 0: no fix */
    g_assert_cmpuint(borderline_moves(2.5), ==, 0);
    /* The noise margin (max(0.25, 10%) = 0.4 CPU of 4): 4.1 after is within it, 4.5 is not. */
    g_assert_cmpuint(borderline_moves(1.6), ==, 1);
    g_assert_cmpuint(borderline_moves(2.0), ==, 0);
}

/* A home the user chose is never moved, even as the only candidate; next to an auto VM with
 * more memory, the auto one moves. */
static void test_user_home(void)
{
    double load[2] = {3.5, 0.0}; /* 5.0 of 4; 3.5 after the move */
    for (int preferred = -1; preferred <= 0; preferred++) {
        g_autoptr(Bench) b = bench_new(2);
        bench_vm(b, "mine", 2, 0, preferred, 1.5, GIB);
        bench_run(b, 2 * HOUR_MS, set_unmanaged, load);
        g_assert_cmpuint(b->moves->len, ==, preferred < 0 ? 1 : 0);
    }
    g_autoptr(Bench) b = bench_new(2);
    bench_vm(b, "chosen", 2, 0, 0, 1.5, GIB);
    bench_vm(b, "free", 2, 0, -1, 1.5, 8 * GIB);
    load[0] = 2.0;
    bench_run(b, 2 * HOUR_MS, set_unmanaged, load);
    g_assert_cmpuint(b->moves->len, ==, 1);
    g_assert_cmpstr(((Moved *)g_ptr_array_index(b->moves, 0))->name, ==, "free");
}

/* Partitions 0 and 2 over-committed (5.5 of 4), 1 and 3 idle: two moves wanted. */
static Bench *two_imbalances(guint max_moves_per_hour)
{
    Bench *b = bench_new(4);
    b->cfg.max_moves_per_hour = max_moves_per_hour;
    b->usage[0].unmanaged = b->usage[2].unmanaged = 3.5;
    bench_vm(b, "p0", 2, 0, -1, 2.0, GIB);
    bench_vm(b, "p2", 2, 2, -1, 2.0, GIB);
    bench_run(b, 3 * HOUR_MS, NULL, NULL);
    return b;
}

static void test_hourly_cap(void)
{
    g_autoptr(Bench) two = two_imbalances(2);
    g_assert_cmpuint(two->moves->len, ==, 2);
    Moved *m0 = g_ptr_array_index(two->moves, 0), *m1 = g_ptr_array_index(two->moves, 1);
    g_assert_cmpint(m1->at_ms - m0->at_ms, <, MIN_MS);
    g_assert_cmpuint(m0->to, !=, m1->to); /* the first target cools down */

    g_autoptr(Bench) one = two_imbalances(1);
    g_assert_cmpuint(one->moves->len, ==, 2);
    m0 = g_ptr_array_index(one->moves, 0);
    m1 = g_ptr_array_index(one->moves, 1);
    g_assert_cmpint(m1->at_ms - m0->at_ms, >=, HOUR_MS);
    g_assert_cmpint(m1->at_ms - m0->at_ms, <, HOUR_MS + MIN_MS);

    g_autoptr(Bench) none = two_imbalances(0);
    g_assert_cmpuint(none->moves->len, ==, 0);
}

/* Equal memory and demand: the lowest name moves, whatever the array order, with the same
 * reason at the same time. */
static void test_ties(void)
{
    static const char *const orders[][3] = {
        {"m2", "m1", "m3"}, {"m3", "m2", "m1"}, {"m1", "m3", "m2"}};
    double load[2] = {1.5, 0.0}; /* 5.1 of 4; 3.9 after one move */
    g_autofree char *first = NULL;
    for (guint o = 0; o < G_N_ELEMENTS(orders); o++) {
        g_autoptr(Bench) b = bench_new(2);
        for (guint i = 0; i < 3; i++)
            bench_vm(b, orders[o][i], 2, 0, -1, 1.2, 2 * GIB);
        bench_run(b, HOUR_MS, set_unmanaged, load);
        g_assert_cmpuint(b->moves->len, ==, 1);
        Moved *m = g_ptr_array_index(b->moves, 0);
        g_assert_cmpstr(m->name, ==, "m1");
        g_autofree char *got =
            g_strdup_printf("%s %u->%u at %" G_GINT64_FORMAT, m->name, m->from, m->to, m->at_ms);
        if (first == NULL)
            first = g_steal_pointer(&got);
        else
            g_assert_cmpstr(got, ==, first);
    }
}

/* v moves 0 -> 1 at 10 min; at 20 min the load swaps and only moving v back would fix it: not
 * within the hour after its move (the partitions' own cool-down ended at 20 min). */
static void swap_at_20_min(Bench *b, gint64 t, gpointer data)
{
    (void)data;
    b->usage[0].unmanaged = t < 20 * MIN_MS ? 3.5 : 0.0;
    b->usage[1].unmanaged = t < 20 * MIN_MS ? 0.0 : 3.5;
}

static void test_vm_cooldown(void)
{
    g_autoptr(Bench) b = bench_new(2);
    bench_vm(b, "v", 2, 0, -1, 1.5, GIB);
    bench_run(b, 3 * HOUR_MS, swap_at_20_min, NULL);
    g_assert_cmpuint(b->moves->len, ==, 2);
    Moved *m0 = g_ptr_array_index(b->moves, 0), *m1 = g_ptr_array_index(b->moves, 1);
    g_assert_cmpint(m0->at_ms, ==, 10 * MIN_MS);
    g_assert_cmpuint(m1->from, ==, 1);
    g_assert_cmpuint(m1->to, ==, 0);
    g_assert_cmpint(m1->at_ms, ==, m0->at_ms + HOUR_MS);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/rebalance/converges", test_converges);
    g_test_add_func("/rebalance/off", test_off);
    g_test_add_func("/rebalance/alternating", test_alternating);
    g_test_add_func("/rebalance/borderline", test_borderline);
    g_test_add_func("/rebalance/user-home", test_user_home);
    g_test_add_func("/rebalance/hourly-cap", test_hourly_cap);
    g_test_add_func("/rebalance/ties", test_ties);
    g_test_add_func("/rebalance/vm-cooldown", test_vm_cooldown);
    return g_test_run();
}
