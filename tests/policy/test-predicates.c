/* softaff tests — the policy's rules (policies/sa-policy-rules.h) one by one, from tables, in the
 * order the tick applies them; and the attribution rule of the tick against
 * sa_policy_run_partition() on the fixture machines. */
#define G_LOG_DOMAIN "softaff-test-predicates"

#include <glib.h>
#include <string.h>

#include "sa-policy-rules.h"
#include "sim.h"

#define EPS 1e-9
#define NEVER SA_POLICY_NEVER

static SaPolicyConfig config(guint dwell_ms, guint max_holdoff_ms)
{
    SaPolicyConfig cfg;
    sa_policy_config_init(&cfg);
    cfg.dwell_ms = dwell_ms;
    cfg.max_holdoff_ms = max_holdoff_ms;
    return cfg;
}

/* ---- accounting ---- */

static void test_margin(void)
{
    static const struct {
        guint capacity;
        double margin;
    } rows[] = {{0, 0.25}, {1, 0.25}, {2, 0.25}, {3, 0.3}, {4, 0.4}, {22, 2.2}, {64, 6.4}};
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpfloat_with_epsilon(sa_policy_margin(rows[r].capacity), rows[r].margin, EPS);
}

static void test_sample_fractions(void)
{
    static const struct {
        guint64 run_ns, delay_ns;
        double run, delay;
    } rows[] = {
        {0, 0, 0, 0},
        {250000000, 250000000, 0.5, 0.5},
        {100000000, 50000000, 0.2, 0.1},
        {600000000, 0, 1, 0},             /* more run than interval: one CPU */
        {400000000, 300000000, 0.8, 0.2}, /* run + delay at most 1 */
        {0, 900000000, 0, 1},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        SaVcpuSample s = {.run_ns = rows[r].run_ns, .delay_ns = rows[r].delay_ns, .last_cpu = 0};
        double run = -1, delay = -1;
        sa_policy_sample_fractions(&s, 500e6, &run, &delay);
        g_assert_cmpfloat_with_epsilon(run, rows[r].run, EPS);
        g_assert_cmpfloat_with_epsilon(delay, rows[r].delay, EPS);
    }
}

static void test_unmanaged_share(void)
{
    static const struct {
        double excess, deficit, share;
    } rows[] = {
        {0, 1, 1}, {0.25, 1, 0.75}, {0.5, 2, 0.75}, {1, 1, 0}, {2, 1, 0}, {0, 0, 0},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpfloat_with_epsilon(sa_policy_unmanaged_share(rows[r].excess, rows[r].deficit),
                                       rows[r].share, EPS);
}

static void test_hidden_wait(void)
{
    static const struct {
        double unmanaged, visitors, visitor_wait, margin, hidden;
    } rows[] = {
        {1, 1, 0.5, 0.25, 0.5},   /* waits as long per CPU as the visitors */
        {1, 1, 2, 0.25, 1},       /* at most as long as it runs */
        {1, 0, 0.5, 0.25, 0},     /* no visitors: nothing to share with */
        {0.2, 1, 0.5, 0.25, 0},   /* below the margin: noise */
        {0.25, 1, 1, 0.25, 0.25}, /* at the margin: counts */
        {1.8, 2, 1, 0.4, 0.9},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpfloat_with_epsilon(sa_policy_hidden_wait(rows[r].unmanaged, rows[r].visitors,
                                                             rows[r].visitor_wait, rows[r].margin),
                                       rows[r].hidden, EPS);
}

/* ---- one VM: demand and home ---- */

static void test_effective_softness(void)
{
    static const struct {
        guint configured;
        int vm;
        guint softness;
    } rows[] = {
        {50, -1, 50},   {50, 0, 0},     {50, 70, 70}, {50, 100, 100},
        {50, 150, 100}, {120, -1, 100}, {0, -1, 0},   {0, 30, 30},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        SaPolicyConfig cfg = config(2000, 30000);
        cfg.softness = rows[r].configured;
        g_assert_cmpuint(sa_policy_effective_softness(&cfg, rows[r].vm), ==, rows[r].softness);
    }
}

static void test_demand(void)
{
    static const struct {
        double smoothing, smoothed, instant, next;
    } ewma[] = {
        {0.5, 2, 4, 3},
        {1, 2, 4, 4},
        {0.25, 4, 0, 3},
        {0, 2, 4, 2.002},
        /* at least 0.001 */ {2, 2, 4, 4}, /* at most 1 */
    };
    for (guint r = 0; r < G_N_ELEMENTS(ewma); r++) {
        SaPolicyConfig cfg = config(2000, 30000);
        cfg.smoothing = ewma[r].smoothing;
        g_assert_cmpfloat_with_epsilon(
            sa_policy_smoothed_demand(&cfg, ewma[r].smoothed, ewma[r].instant), ewma[r].next, EPS);
    }

    static const struct {
        guint n_vcpus;
        double smoothed, instant, demand;
    } rows[] = {
        {4, 1, 2, 2},   /* rising: the instant value at once */
        {4, 3, 0.5, 3}, /* falling: the smoothed one */
        {2, 3, 5, 2},   /* never more than one CPU per vCPU */
        {0, 1, 1, 0},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpfloat_with_epsilon(
            sa_policy_demand(rows[r].n_vcpus, rows[r].smoothed, rows[r].instant), rows[r].demand,
            EPS);
}

static void test_may_leave_home(void)
{
    static const struct {
        SaMode mode;
        guint softness, home_allowed_cpus;
        bool may;
    } rows[] = {
        {SA_MODE_SOFT, 50, 2, true},  {SA_MODE_SOFT, 1, 1, true},     {SA_MODE_SOFT, 0, 2, false},
        {SA_MODE_SOFT, 50, 0, false}, {SA_MODE_STRICT, 50, 2, false}, {SA_MODE_OFF, 50, 2, false},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(
            sa_policy_may_leave_home(rows[r].mode, rows[r].softness, rows[r].home_allowed_cpus), ==,
            rows[r].may);
}

/* ---- back-off and retreat ---- */

static void test_backoff_decays(void)
{
    static const struct {
        guint forced_retreats;
        gint64 last_forced_ms, holdoff_until_ms, now;
        bool decays;
    } rows[] = {
        {0, 0, 0, 100000, false},         /* nothing to forget */
        {2, 0, 4000, 34000, true},        /* 30 s after the end of the back-off */
        {2, 0, 4000, 33999, false},       /* 1 ms short */
        {2, 10000, 4000, 40000, true},    /* counted from the later of the two */
        {2, 10000, 4000, 39999, false},   /* counted from the later of the two */
        {1, NEVER, NEVER, 0, true},       /* never retreated: long ago */
        {3, 50000, NEVER, 80000, true},   /* no back-off set: from the retreat */
        {3, 50000, 82000, 100000, false}, /* still in the back-off */
    };
    SaPolicyConfig cfg = config(2000, 30000);
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        SaVmPolicyState st = {
            .forced_retreats = rows[r].forced_retreats,
            .last_forced_ms = rows[r].last_forced_ms,
            .holdoff_until_ms = rows[r].holdoff_until_ms,
        };
        g_assert_cmpint(sa_policy_backoff_decays(&cfg, &st, rows[r].now), ==, rows[r].decays);
    }
}

static void test_should_retreat(void)
{
    static const struct {
        double owner_demand;
        guint capacity;
        double visitors_now, margin;
        bool retreat;
    } rows[] = {
        {1.8, 2, 1.0, 0.25, true},   /* the owner woke: 1.8 > 2 − 1 + 0.25 */
        {1.2, 2, 1.0, 0.25, false},  /* fits beside the visitor */
        {1.25, 2, 1.0, 0.25, false}, /* exactly at the margin: stays */
        {0.1, 2, 2.0, 0.25, false},  /* an idle owner's noise */
        {0.3, 2, 2.0, 0.25, true},   /* more than noise beside a full visitor */
        {2.0, 2, 0.0, 0.25, true},   /* owners fill it, the visitor runs elsewhere: leave */
        {1.0, 1, 0.0, 0.25, true},   /* issue 11: 1 > 1 − 0.25 with the visitor kept off */
        {0.75, 1, 0.0, 0.25, false}, /* a quarter CPU free is still room */
        {1.5, 2, 0.0, 0.25, false},  /* half a CPU free, no visitor running: stays allowed */
        {14.3, 16, 0.0, 1.6, false}, /* 14.3 ≤ 16 − 1.6: room */
        {14.5, 16, 0.0, 1.6, true},  /* 14.5 > 16 − 1.6: full */
        {14.3, 16, 3.5, 1.6, true},  /* 14.3 > 16 − 3.5 + 1.6 */
        {14.3, 16, 3.2, 1.6, false}, /* 14.3 ≤ 16 − 3.2 + 1.6 */
        {8.0, 16, 10.0, 1.6, true},  /* 8 > 16 − 10 + 1.6 */
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(sa_policy_should_retreat(rows[r].owner_demand, rows[r].capacity,
                                                 rows[r].visitors_now, rows[r].margin),
                        ==, rows[r].retreat);
}

static void test_owners_fill(void)
{
    static const struct {
        double owner_demand;
        guint capacity;
        double margin;
        bool fill;
    } rows[] = {
        {1.0, 1, 0.25, true},   /* one busy owner vCPU on a 1-CPU partition */
        {0.98, 1, 0.25, true},  /* ... measured a little short */
        {0.75, 1, 0.25, false}, /* exactly the margin free: room */
        {0.02, 1, 0.25, false}, /* an idle owner's noise */
        {1.8, 2, 0.25, true},   /* 1.8 > 2 − 0.25 */
        {1.5, 2, 0.25, false},  /* half a CPU free */
        {14.4, 16, 1.6, false}, /* exactly 10% free */
        {14.5, 16, 1.6, true},  /* less than 10% free */
        {0.0, 0, 0.25, true},   /* no online CPU: nothing to visit */
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(
            sa_policy_owners_fill(rows[r].owner_demand, rows[r].capacity, rows[r].margin), ==,
            rows[r].fill);
}

static void test_holdoff(void)
{
    static const struct {
        guint dwell_ms, max_holdoff_ms, forced_retreats;
        gint64 holdoff_ms;
    } rows[] = {
        {2000, 30000, 0, 0},
        {2000, 30000, 1, 0},
        {2000, 30000, 2, 2000},
        {2000, 30000, 3, 4000},
        {2000, 30000, 4, 8000},
        {2000, 30000, 5, 16000},
        {2000, 30000, 6, 30000},
        {2000, 30000, 1000, 30000},
        {0, 30000, 5, 0},
        {500, 1000000000, 21, 500LL << 19},
        {500, 1000000000, 22, 500LL << 20}, /* the shift stops at 20 */
        {500, 1000000000, 40, 500LL << 20},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        SaPolicyConfig cfg = config(rows[r].dwell_ms, rows[r].max_holdoff_ms);
        g_assert_cmpint(sa_policy_holdoff_ms(&cfg, rows[r].forced_retreats), ==,
                        rows[r].holdoff_ms);
    }
}

/* ---- burst, widen, shrink ---- */

static void test_avail_home(void)
{
    static const struct {
        guint home_allowed_cpus, capacity;
        double owner_demand, relief, self_run, wait, avail;
    } rows[] = {
        {4, 4, 5, 0, 3, 1, 3}, /* a co-owner needs 1 CPU */
        {2, 4, 1, 0, 1, 0, 2}, /* alone: its allowed CPUs */
        {4, 4, 6, 2, 1, 1, 2}, /* relief promised by an earlier burst */
        {4, 4, 2, 0, 3, 1, 4}, /* others never negative */
        {1, 8, 1, 0, 1, 0, 1},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpfloat_with_epsilon(
            sa_policy_avail_home(rows[r].home_allowed_cpus, rows[r].capacity, rows[r].owner_demand,
                                 rows[r].relief, rows[r].self_run, rows[r].wait),
            rows[r].avail, EPS);
}

static void test_needs_burst(void)
{
    static const struct {
        double min_wait; /* sa_policy_min_wait(softness) */
        guint softness;
        double wait, util, demand, avail_home;
        bool needs;
    } rows[] = {
        {0.10, 50, 1.0, 0.90, 5, 4, true},
        {0.10, 50, 0.09, 0.90, 5, 4, false},    /* does not wait enough */
        {0.10, 50, 0.1001, 0.8501, 5, 4, true}, /* just above both thresholds */
        {0.10, 50, 1.0, 0.84, 5, 4, false},     /* home not busy enough */
        {0.10, 50, 1.0, 1.00, 4, 4, false},     /* the home holds it: latency, not CPUs */
        {0.15, 0, 1.0, 1.00, 8, 4, false},      /* softness 0: never */
        {0.05, 100, 0.05, 0.0, 5, 4, true},     /* softness 100: any wait */
        {0.05, 100, 0.04, 1.0, 5, 4, false},
        {0.125, 25, 0.2, 0.93, 5, 4, true},
        {0.125, 25, 0.2, 0.92, 5, 4, false},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        g_assert_cmpfloat_with_epsilon(sa_policy_min_wait(rows[r].softness), rows[r].min_wait, EPS);
        g_assert_cmpint(sa_policy_needs_burst(rows[r].softness, rows[r].wait, rows[r].util,
                                              rows[r].demand, rows[r].avail_home),
                        ==, rows[r].needs);
    }
    g_assert_cmpfloat_with_epsilon(sa_policy_min_wait(250), 0.05, EPS);
}

static void test_may_burst(void)
{
    static const struct {
        guint dwell_ms;
        gint64 holdoff_until_ms, last_voluntary_ms, now;
        bool held_off, dwell_over, may;
    } rows[] = {
        {2000, NEVER, NEVER, 0, false, true, true}, /* steady at home: at once */
        {2000, NEVER, 10000, 11999, false, false, false},
        {2000, NEVER, 10000, 12000, false, true, true},
        {2000, 8000, NEVER, 7999, true, true, false}, /* after a retreat: the back-off decides */
        {2000, 8000, NEVER, 8000, false, true, true},
        {2000, 20000, 10000, 15000, true, true, false},
        {0, NEVER, 10000, 10000, false, true, true}, /* dwell 0: no dwell */
    };
    SaPolicyConfig cfg;
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        cfg = config(rows[r].dwell_ms, 30000);
        SaVmPolicyState st = {
            .holdoff_until_ms = rows[r].holdoff_until_ms,
            .last_voluntary_ms = rows[r].last_voluntary_ms,
        };
        g_assert_cmpint(sa_policy_held_off(&st, rows[r].now), ==, rows[r].held_off);
        g_assert_cmpint(sa_policy_dwell_over(&cfg, &st, rows[r].now), ==, rows[r].dwell_over);
        g_assert_cmpint(sa_policy_may_burst(&cfg, &st, rows[r].now), ==, rows[r].may);
    }
}

static void test_visits_needed(void)
{
    static const struct {
        double need, avail_home;
        guint n;
        double room[3];
        guint keep;
        double held;
    } rows[] = {
        {3, 4, 0, {0}, 0, 4},             /* fits at home */
        {3, 4, 2, {2, 2}, 0, 4},          /* fits at home: return home */
        {5, 2, 2, {2, 2}, 2, 6},          /* needs both */
        {5, 2, 2, {3, 2}, 1, 5},          /* the nearer one suffices */
        {5, 2, 2, {-1, 3}, 2, 5},         /* negative room counts as none */
        {9, 2, 2, {2, 2}, 2, 6},          /* not even all: widen by need − held */
        {4.5, 1.5, 3, {1, 1, 1}, 3, 4.5}, /* exactly */
        {4.5, 4.5, 3, {1, 1, 1}, 0, 4.5},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        double held = -1;
        guint keep = sa_policy_visits_needed(rows[r].need, rows[r].avail_home, rows[r].room,
                                             rows[r].n, &held);
        g_assert_cmpuint(keep, ==, rows[r].keep);
        g_assert_cmpfloat_with_epsilon(held, rows[r].held, EPS);
    }
}

static void test_may_shrink(void)
{
    static const struct {
        gint64 fits_since_ms, last_voluntary_ms, now;
        bool may;
    } rows[] = {
        {10000, NEVER, 12000, true},  {10000, NEVER, 11999, false}, /* has not fit long enough */
        {10000, 11000, 12000, false},                               /* last change too recent */
        {10000, 11000, 13000, true},  {10000, 5000, 12000, true},
    };
    SaPolicyConfig cfg = config(2000, 30000);
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        SaVmPolicyState st = {
            .fits_since_ms = rows[r].fits_since_ms,
            .last_voluntary_ms = rows[r].last_voluntary_ms,
        };
        g_assert_cmpint(sa_policy_may_shrink(&cfg, &st, rows[r].now), ==, rows[r].may);
    }
}

/* ---- attribution: the tick's map against sa_policy_run_partition() ---- */

/* The partition index holding cpu, by looking at every partition; -1 none. */
static int partition_holding(const SaTopology *topo, int cpu)
{
    for (guint p = 0; cpu >= 0 && p < topo->partitions->len; p++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, p);
        if (sa_cpuset_has(part->cpus, (guint)cpu))
            return (int)p;
    }
    return -1;
}

/* For every CPU number around the topology's and several homes: both forms of the rule agree
 * with each other and with the partition that holds the CPU. Returns how many CPUs were in no
 * partition. */
static guint check_attribution(const char *what, const SaTopology *topo)
{
    guint n_map = 0;
    for (guint p = 0; p < topo->partitions->len; p++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, p);
        n_map = MAX(n_map, (guint)(sa_cpuset_last(part->cpus) + 1));
    }
    g_autofree int *map = g_new(int, MAX(n_map, 1));
    sa_policy_map_cpus(topo, map, n_map);
    const int homes[] = {-1, 0, (int)topo->partitions->len - 1};
    int last = MAX(sa_cpuset_last(topo->online), (int)n_map - 1);
    guint outside = 0;
    for (int cpu = -2; cpu <= last + 3; cpu++) {
        int holder = partition_holding(topo, cpu);
        outside += holder < 0 && cpu >= 0 && cpu <= last;
        for (guint h = 0; h < G_N_ELEMENTS(homes); h++) {
            int expected = holder >= 0 ? holder : homes[h];
            int mapped = sa_policy_run_partition_mapped(map, n_map, cpu, homes[h]);
            int by_topo = sa_policy_run_partition(topo, cpu, homes[h]);
            if (mapped != expected || by_topo != expected)
                g_test_message("%s: CPU %d, home %d: tick %d, sa_policy_run_partition %d, "
                               "expected %d",
                               what, cpu, homes[h], mapped, by_topo, expected);
            g_assert_cmpint(mapped, ==, expected);
            g_assert_cmpint(by_topo, ==, expected);
        }
    }
    return outside;
}

static void test_attribution_fixtures(void)
{
    static const char *const machines[] = {
        "this-host", "intel-2s22c-smt", "epyc-4n-2llc", "sparse-8n", "no-l3-4c",
    };
    const char *data = g_getenv("SOFTAFF_TEST_DATA");
    g_assert_nonnull(data);
    guint outside = 0, checked = 0;
    for (guint m = 0; m < G_N_ELEMENTS(machines); m++) {
        g_autofree char *root = g_build_filename(data, machines[m], "sys", NULL);
        g_autofree char *custom_path = g_build_filename(data, machines[m], "custom", NULL);
        g_autofree char *custom = NULL;
        g_assert_true(g_file_get_contents(custom_path, &custom, NULL, NULL));
        g_strstrip(custom);
        g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
        for (int layout = SA_LAYOUT_NODE; layout <= SA_LAYOUT_CUSTOM; layout++) {
            g_autoptr(GError) error = NULL;
            g_autoptr(SaTopology) topo = sa_topology_load(
                (SaLayout)layout, layout == SA_LAYOUT_CUSTOM ? custom : NULL, &error);
            g_autofree char *what =
                g_strdup_printf("%s, layout %s", machines[m], sa_layout_to_string(layout));
            if (topo == NULL) { /* this-host has no cache information: no llc layout */
                g_test_message("%s: %s", what, error->message);
                continue;
            }
            outside += check_attribution(what, topo);
            checked++;
        }
    }
    g_unsetenv("SOFTAFF_SYSFS_ROOT");
    g_assert_cmpuint(checked, ==, 3 * G_N_ELEMENTS(machines) - 1);
    /* sparse-8n has an online CPU in no node: the "else home" branch on a loaded topology. */
    g_assert_cmpuint(outside, >, 0);
}

/* Hand-built topologies have no CPU table: sa_policy_run_partition() scans the partitions. */
static void test_attribution_hand_built(void)
{
    static const char *const gaps[] = {"0-1", "", "4-5,8", "6-7"};
    g_autoptr(SaTopology) uniform = sim_topology_uniform(4, 2, NULL);
    g_autoptr(SaTopology) holes = sim_topology_new(4, gaps, NULL);
    g_assert_null(uniform->cpu_partition);
    check_attribution("uniform", uniform);
    g_assert_cmpuint(check_attribution("holes", holes), ==, 2); /* CPUs 2 and 3 */
}

/* Without partition distances every other partition is equally near: bursts go by index. */
static void test_nearest_first_without_distances(void)
{
    static const struct {
        int home;
        guint n_vcpus;
        const char *vcpus;
    } rows[] = {
        {2, 3, "0-1,4-5"}, /* one more partition: the first by index */
        {2, 4, "0-5"},     /* two: by index, skipping home */
        {0, 3, "0-3"},     {1, 3, "0-3"}, {3, 3, "0-1,6-7"}, {3, 6, "0-7"},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        g_autoptr(Sim) sim = sim_new(sim_topology_uniform(4, 2, NULL), 500);
        g_clear_pointer(&sim->topo->partition_distance, g_free);
        SimVm *vm = sim_add_vm(sim, "a", rows[r].n_vcpus, rows[r].home, NULL);
        sim_vm_set_load(vm, 1.0);
        sim_run(sim, 3);
        g_assert_cmpstr(sim_vcpus(vm), ==, rows[r].vcpus);
        g_assert_cmpint(vm->vm.st.state, ==, SA_STATE_BURST);
    }
}

/* ---- doors ---- */

static void test_door_idle_ms(void)
{
    static const struct {
        guint softness;
        gint64 ms;
    } rows[] = {{0, G_MAXINT64}, {1, 9900}, {25, 7500}, {50, 5000},
                {75, 2500},      {99, 100}, {100, 0},   {150, 0}};
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(sa_policy_door_idle_ms(rows[r].softness), ==, rows[r].ms);
}

static void test_owners_idle(void)
{
    /* a regular 500-ms tick: the margin; event ticks of 20 and 40 ms: 10 ms of CPU time when
     * that is more (0.5 and 0.25 CPU); no interval: the margin */
    static const struct {
        double demand, margin, interval_ms;
        bool idle;
    } rows[] = {
        {0, 0.25, 500, true},     {0.04, 0.25, 500, true}, {0.25, 0.25, 500, true}, /* noise */
        {0.26, 0.25, 500, false}, {1.0, 0.25, 500, false}, {1.6, 1.6, 500, true},
        {1.7, 1.6, 500, false},   {0.38, 0.25, 20, true},  {0.5, 0.25, 20, true},
        {0.51, 0.25, 20, false},  {1.0, 0.25, 20, false},  {0.26, 0.25, 40, false},
        {1.7, 1.6, 20, false},    {0.3, 0.25, 0, false},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(
            sa_policy_owners_idle(rows[r].demand, rows[r].margin, rows[r].interval_ms * 1e6), ==,
            rows[r].idle);
}

static void test_owners_beside(void)
{
    /* demand, owners' wait, the visitor's run there: the wait it explains goes, no more */
    static const struct {
        double demand, wait, run, beside;
    } rows[] = {
        {0.4, 0.3, 1.0, 0.1}, {0.4, 0.3, 0.2, 0.2}, {0.4, 0, 1.0, 0.4},
        {1.0, 0.5, 0.5, 0.5}, {0.1, 0.3, 1.0, 0},   {0.4, 0.3, 0, 0.4},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpfloat_with_epsilon(
            sa_policy_owners_beside(rows[r].demand, rows[r].wait, rows[r].run), rows[r].beside,
            1e-9);
}

static void test_idle_since(void)
{
    static const struct {
        gint64 since;
        bool idle;
        gint64 now, interval, want;
    } rows[] = {
        {NEVER, true, 10000, 500, 9500},  /* idle from the start of this interval */
        {7000, true, 10000, 500, 7000},   /* still idle: the run goes on */
        {7000, false, 10000, 500, NEVER}, /* load: the run ends */
        {NEVER, false, 10000, 500, NEVER},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(
            sa_policy_idle_since(rows[r].since, rows[r].idle, rows[r].now, rows[r].interval), ==,
            rows[r].want);
}

static void test_outgrows_home(void)
{
    static const struct {
        double instant;
        guint active;
        double wait_or_away, avail_home, min_wait;
        bool outgrows;
    } rows[] = {
        {1.2, 2, 0.2, 1.0, 0.1, true},    /* a 300-ms spike of 2 vCPUs on a 1-CPU home */
        {1.05, 2, 0.05, 1.0, 0.1, false}, /* within min_wait of home */
        {0.4, 2, 0.2, 1.0, 0.1, true},    /* 100 ms of 2 vCPUs: the average hides it, the waits
                                             of both active vCPUs do not */
        {0.4, 2, 0.05, 1.0, 0.1, false},  /* two vCPUs that took turns: no wait */
        {0.6, 1, 0.3, 1.0, 0.1, false},   /* one vCPU cannot outgrow a whole CPU */
        {1.2, 4, 0.0, 2.0, 0.1, false},   /* 4 × 0.3 fitting a 2-CPU home */
        {1.2, 4, 0.6, 2.0, 0.1, true},    /* ... spread onto a door */
        {2.0, 2, 0.0, 1.0, 0.1, true},    /* served by a door or a burst, still beyond home */
        {0.5, 1, 0.0, 0.0, 0.1, true},    /* a home the co-owners fill */
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(sa_policy_outgrows_home(rows[r].instant, rows[r].active,
                                                rows[r].wait_or_away, rows[r].avail_home,
                                                rows[r].min_wait),
                        ==, rows[r].outgrows);
}

static void test_was_spike(void)
{
    static const struct {
        gint64 since, end;
        bool spike;
    } rows[] = {
        {NEVER, 10000, false}, {9500, 10000, true}, {8000, 10000, true},
        {7999, 10000, false}, /* longer than SA_POLICY_SPIKE_MAX_MS: a load */
        {0, 10000, false},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(sa_policy_was_spike(rows[r].since, rows[r].end), ==, rows[r].spike);
}

static void test_door_wanted(void)
{
    static const struct {
        guint softness;
        gint64 now, spike;
        bool wanted;
    } rows[] = {
        {0, 100000, 100000, false}, /* softness 0: never */
        {50, 100000, NEVER, false}, /* no spike yet: keeps its locality */
        {50, 100000, 99500, true},  {50, 100000, 40000, true}, /* 60 s ago */
        {50, 100000, 39999, false}, {1, 100000, 99500, true},
        {100, 100000, NEVER, true}, /* softness 100: any idle partition */
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(sa_policy_door_wanted(rows[r].softness, rows[r].now, rows[r].spike), ==,
                        rows[r].wanted);
}

static void test_door_may_open(void)
{
    static const struct {
        guint softness;
        gint64 now, since;
        bool open;
    } rows[] = {
        {50, 100000, 95000, true},   {50, 100000, 95001, false},
        {50, 100000, NEVER, false},  {100, 100000, 99500, true}, /* one idle interval */
        {100, 100000, NEVER, false},                             /* owners busy */
        {0, 100000, 0, false},       {99, 100000, 99900, true},
        {1, 100000, 90200, false},   {1, 100000, 90100, true},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++)
        g_assert_cmpint(sa_policy_door_may_open(rows[r].softness, rows[r].now, rows[r].since), ==,
                        rows[r].open);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/policy/rules/margin", test_margin);
    g_test_add_func("/policy/rules/sample-fractions", test_sample_fractions);
    g_test_add_func("/policy/rules/unmanaged-share", test_unmanaged_share);
    g_test_add_func("/policy/rules/hidden-wait", test_hidden_wait);
    g_test_add_func("/policy/rules/effective-softness", test_effective_softness);
    g_test_add_func("/policy/rules/demand", test_demand);
    g_test_add_func("/policy/rules/may-leave-home", test_may_leave_home);
    g_test_add_func("/policy/rules/backoff-decays", test_backoff_decays);
    g_test_add_func("/policy/rules/owners-fill", test_owners_fill);
    g_test_add_func("/policy/rules/should-retreat", test_should_retreat);
    g_test_add_func("/policy/rules/holdoff", test_holdoff);
    g_test_add_func("/policy/rules/avail-home", test_avail_home);
    g_test_add_func("/policy/rules/needs-burst", test_needs_burst);
    g_test_add_func("/policy/rules/may-burst", test_may_burst);
    g_test_add_func("/policy/rules/visits-needed", test_visits_needed);
    g_test_add_func("/policy/rules/may-shrink", test_may_shrink);
    g_test_add_func("/policy/rules/attribution/fixtures", test_attribution_fixtures);
    g_test_add_func("/policy/rules/attribution/hand-built", test_attribution_hand_built);
    g_test_add_func("/policy/rules/nearest-first-without-distances",
                    test_nearest_first_without_distances);
    g_test_add_func("/policy/rules/door-idle-ms", test_door_idle_ms);
    g_test_add_func("/policy/rules/owners-idle", test_owners_idle);
    g_test_add_func("/policy/rules/owners-beside", test_owners_beside);
    g_test_add_func("/policy/rules/idle-since", test_idle_since);
    g_test_add_func("/policy/rules/outgrows-home", test_outgrows_home);
    g_test_add_func("/policy/rules/was-spike", test_was_spike);
    g_test_add_func("/policy/rules/door-wanted", test_door_wanted);
    g_test_add_func("/policy/rules/door-may-open", test_door_may_open);
    return g_test_run();
}
