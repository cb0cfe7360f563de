/* softaff — tests of the headroom model (policies/headroom.c): the histogram's quantile and
 * window from synthetic samples, the fit rule and advise's choice on struct literals, classes,
 * shapes, the JSON form; and, on the policy simulator, owners' demand over time that gives a
 * known p95 and fit. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "sa-error.h"
#include "sa-headroom.h"
#include "sim.h"

/* A wall-clock start (2023-11-14), on a slot boundary of every window. */
#define T0 (G_GINT64_CONSTANT(1700000000000) - G_GINT64_CONSTANT(1700000000000) % 86400000)
#define EPS 1e-9

/* n samples of interval_ms each at demand d on partition 0 of capacity cap, from *now on. */
static void feed_run(SaHeadroom *h, gint64 *now, guint n, guint interval_ms, guint cap, double d)
{
    for (guint i = 0; i < n; i++) {
        SaHeadroomSample s = {.id = 0, .capacity = cap, .owner_demand = d};
        sa_headroom_feed(h, *now, interval_ms, &s, 1);
        *now += interval_ms;
    }
}

static void test_quantile(void)
{
    g_autoptr(SaHeadroom) h = sa_headroom_new(3600);
    gint64 now = T0;
    double cov;
    /* 95 s at 2.0 CPUs, 5 s at 7.0 on 8 CPUs (bins of 8 × 2 / 128 = 0.125 CPU). */
    feed_run(h, &now, 95, 1000, 8, 2.0);
    feed_run(h, &now, 5, 1000, 8, 7.0);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h, now, 0, 8, 0.95, &cov), 2.125, EPS);
    g_assert_cmpfloat_with_epsilon(cov, 100.0 / 3600, EPS);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h, now, 0, 8, 0.96, &cov), 7.125, EPS);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h, now, 0, 8, 0.5, &cov), 2.125, EPS);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h, now, 0, 8, 1.0, &cov), 7.125, EPS);
    /* Unknown partition, or another capacity: nothing known. */
    g_assert_cmpfloat(sa_headroom_quantile(h, now, 1, 8, 0.95, &cov), ==, 0);
    g_assert_cmpfloat(cov, ==, 0);
    g_assert_cmpfloat(sa_headroom_quantile(h, now, 0, 16, 0.95, &cov), ==, 0);

    /* The headroom: capacity − margin (10% of 8) − the p95. */
    SaHeadroomInput in = {.id = 0, .capacity = 8, .home_vcpus = 6, .memory_available = 1 << 30};
    SaHeadroomPartition p;
    sa_headroom_partition(h, now, 0.95, &in, &p);
    g_assert_cmpfloat_with_epsilon(p.margin, 0.8, EPS);
    g_assert_cmpfloat_with_epsilon(p.demand, 2.125, EPS);
    g_assert_cmpfloat_with_epsilon(p.headroom, 8 - 0.8 - 2.125, EPS);
    g_assert_cmpuint(p.home_vcpus, ==, 6);

    /* Beyond the range: the last bin (2 × capacity). */
    g_autoptr(SaHeadroom) h2 = sa_headroom_new(3600);
    now = T0;
    feed_run(h2, &now, 10, 1000, 4, 100.0);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h2, now, 0, 4, 0.95, &cov), 8.0, EPS);
    /* The time weights: one long interval outweighs many short ones. */
    g_autoptr(SaHeadroom) h3 = sa_headroom_new(3600);
    now = T0;
    feed_run(h3, &now, 50, 20, 4, 3.0);   /* 1 s of event ticks at 3 CPUs */
    feed_run(h3, &now, 1, 60000, 4, 1.0); /* a minute at 1 CPU */
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h3, now, 0, 4, 0.95, &cov), 1.0625, EPS);
}

static void test_window(void)
{
    g_autoptr(SaHeadroom) h = sa_headroom_new(600); /* slots of 10 s */
    gint64 now = T0;
    double cov;
    /* 10 min at 6 CPUs, then 10 min at 1 CPU: only the second is in the window. */
    feed_run(h, &now, 600, 1000, 8, 6.0);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h, now - 1, 0, 8, 0.95, &cov), 6.125, EPS);
    g_assert_cmpfloat_with_epsilon(cov, 1.0, EPS);
    feed_run(h, &now, 300, 1000, 8, 1.0);
    /* Half the window each: p95 is still the high one. */
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h, now - 1, 0, 8, 0.95, &cov), 6.125, EPS);
    feed_run(h, &now, 300, 1000, 8, 1.0);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h, now - 1, 0, 8, 0.95, &cov), 1.125, EPS);
    g_assert_cmpfloat_with_epsilon(cov, 1.0, EPS);
    /* Nothing fed for a window: nothing known. */
    g_assert_cmpfloat(sa_headroom_quantile(h, now + 600000, 0, 8, 0.95, &cov), ==, 0);
    g_assert_cmpfloat(cov, ==, 0);
    /* A clock that went back: slots "from the future" count for nothing. */
    g_assert_cmpfloat(sa_headroom_quantile(h, T0 - 3600000, 0, 8, 0.95, &cov), ==, 0);

    /* A new capacity starts over; a partition not fed is forgotten. */
    SaHeadroomSample two[] = {{.id = 0, .capacity = 4, .owner_demand = 2.0},
                              {.id = 1, .capacity = 8, .owner_demand = 1.0}};
    sa_headroom_feed(h, now, 1000, two, 2);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(h, now, 0, 4, 0.95, &cov), 2.0625, EPS);
    g_assert_cmpfloat_with_epsilon(cov, 1.0 / 600, EPS);
    sa_headroom_feed(h, now + 1000, 1000, &two[1], 1);
    g_assert_cmpfloat(sa_headroom_quantile(h, now + 1000, 0, 4, 0.95, &cov), ==, 0);
    g_assert_cmpfloat(sa_headroom_quantile(h, now + 1000, 1, 8, 0.95, &cov), >, 0);
}

static void test_fit(void)
{
    const guint64 GiB = G_GUINT64_CONSTANT(1) << 30;
    const SaHeadroomPartition parts[] = {
        {.id = 0, .capacity = 8, .headroom = 5.0, .memory_available = 16 * GiB},
        {.id = 1, .capacity = 8, .headroom = 2.0, .memory_available = 64 * GiB},
        {.id = 2, .capacity = 8, .headroom = -1.0, .memory_available = 64 * GiB},
        {.id = 3, .capacity = 8, .headroom = 9.0, .memory_available = 3 * GiB},
    };
    /* 2 CPUs, 4 GiB: p0 min(2.5, 4) = 2; p1 min(1, 16) = 1; p2 none; p3 memory 0.75 -> 0. */
    g_assert_true(sa_headroom_fits(&parts[0], 2.0, 4 * GiB));
    g_assert_true(sa_headroom_fits(&parts[1], 2.0, 4 * GiB)); /* demand == headroom fits */
    g_assert_false(sa_headroom_fits(&parts[2], 2.0, 4 * GiB));
    g_assert_false(sa_headroom_fits(&parts[3], 2.0, 4 * GiB));
    g_assert_cmpuint(sa_headroom_fit_count_partition(&parts[0], 2.0, 4 * GiB), ==, 2);
    g_assert_cmpuint(sa_headroom_fit_count_partition(&parts[1], 2.0, 4 * GiB), ==, 1);
    g_assert_cmpuint(sa_headroom_fit_count_partition(&parts[2], 2.0, 4 * GiB), ==, 0);
    g_assert_cmpuint(sa_headroom_fit_count_partition(&parts[3], 2.0, 4 * GiB), ==, 0);
    g_assert_cmpuint(sa_headroom_fit_count(parts, 4, 2.0, 4 * GiB), ==, 3);
    /* Small VMs: memory bounds p0 (16 / 1), CPUs p1 (2 / 0.5). */
    g_assert_cmpuint(sa_headroom_fit_count(parts, 2, 0.25, GiB), ==, 16 + 8);

    /* advise: where it fits with the most headroom left. */
    bool fits;
    double left;
    g_assert_cmpint(sa_headroom_choose(parts, 4, NULL, 2, 2.0, 4 * GiB, &fits, &left), ==, 0);
    g_assert_true(fits);
    g_assert_cmpfloat_with_epsilon(left, 3.0, EPS);
    /* p3 has the most headroom but not the memory: p0 all the same. */
    g_assert_cmpint(sa_headroom_choose(parts, 4, NULL, 1, 0.5, 3 * GiB, &fits, &left), ==, 3);
    g_assert_cmpint(sa_headroom_choose(parts, 4, NULL, 1, 0.5, 4 * GiB, &fits, &left), ==, 0);
    const bool only_12[] = {false, true, true, false};
    g_assert_cmpint(sa_headroom_choose(parts, 4, only_12, 2, 2.0, GiB, &fits, &left), ==, 1);
    g_assert_true(fits);
    /* Fits nowhere: the most headroom among those with the memory, said. */
    g_assert_cmpint(sa_headroom_choose(parts, 4, NULL, 16, 16.0, 4 * GiB, &fits, &left), ==, 0);
    g_assert_false(fits);
    g_assert_cmpint(sa_headroom_choose(parts, 4, NULL, 16, 16.0, GiB, &fits, &left), ==, 3);
    /* Fits nowhere: the most headroom, said. */
    g_assert_cmpint(sa_headroom_choose(parts, 4, only_12, 4, 4.0, GiB, &fits, &left), ==, 1);
    g_assert_false(fits);
    g_assert_cmpfloat_with_epsilon(left, -2.0, EPS);
    const bool none[] = {false, false, false, false};
    g_assert_cmpint(sa_headroom_choose(parts, 4, none, 2, 2.0, GiB, &fits, &left), ==, -1);
    /* Ties on headroom: the lower commitment, then the lower id. */
    const SaHeadroomPartition tie[] = {
        {.id = 4, .capacity = 8, .home_vcpus = 8, .headroom = 3.0, .memory_available = GiB},
        {.id = 5, .capacity = 8, .home_vcpus = 4, .headroom = 3.0, .memory_available = GiB},
        {.id = 6, .capacity = 8, .home_vcpus = 4, .headroom = 3.0, .memory_available = GiB},
    };
    g_assert_cmpint(sa_headroom_choose(tie, 3, NULL, 2, 1.0, GiB, &fits, &left), ==, 1);

    /* Memory per partition: node free less untouched, shared by CPUs. */
    g_assert_cmpuint(sa_headroom_memory_share(10 * GiB, 2 * GiB, 8, 16), ==, 4 * GiB);
    g_assert_cmpuint(sa_headroom_memory_share(10 * GiB, 2 * GiB, 8, 8), ==, 8 * GiB);
    g_assert_cmpuint(sa_headroom_memory_share(GiB, 2 * GiB, 8, 8), ==, 0);
    g_assert_cmpuint(sa_headroom_memory_share(GiB, 0, 4, 0), ==, GiB);
}

static void test_classes(void)
{
    g_autoptr(SaHeadroom) h = sa_headroom_new(3600);
    bool learned;
    double per;
    /* Unknown class: 1.0 per vCPU. */
    g_assert_cmpfloat(sa_headroom_expected_demand(h, T0, "web", 4, &learned), ==, 4.0);
    g_assert_false(learned);
    g_assert_cmpfloat(sa_headroom_expected_demand(NULL, T0, "web", 2, &learned), ==, 2.0);
    /* Two VMs of 4 vCPUs: one wanting 1 CPU, one 3: 0.5 per vCPU. */
    for (gint64 t = T0; t < T0 + 60000; t += 500) {
        sa_headroom_feed_class(h, t, 500, "web", 1.0, 4);
        sa_headroom_feed_class(h, t, 500, "web", 3.0, 4);
        sa_headroom_feed_class(h, t, 500, "idle", 0.0, 2);
    }
    g_assert_true(sa_headroom_class_per_vcpu(h, T0 + 60000, "web", &per));
    g_assert_cmpfloat_with_epsilon(per, 0.5, 1e-9);
    g_assert_cmpfloat_with_epsilon(sa_headroom_expected_demand(h, T0 + 60000, "web", 2, &learned),
                                   1.0, 1e-9);
    g_assert_true(learned);
    /* A class idle so far still counts for the minimum. */
    g_assert_cmpfloat_with_epsilon(sa_headroom_expected_demand(h, T0 + 60000, "idle", 4, NULL),
                                   4 * SA_HEADROOM_MIN_PER_VCPU, 1e-9);
    /* Older samples weigh less: after a window at 0.25 per vCPU the mean is nearer 0.25. */
    for (gint64 t = T0 + 60000; t < T0 + 60000 + 3600000; t += 10000)
        sa_headroom_feed_class(h, t, 10000, "web", 1.0, 4);
    g_assert_true(sa_headroom_class_per_vcpu(h, T0 + 3660000, "web", &per));
    g_assert_cmpfloat(per, <, 0.26);
    g_assert_cmpfloat(per, >, 0.25);
    /* Forgotten after many windows without a sample. */
    g_assert_false(sa_headroom_class_per_vcpu(h, T0 + 3660000 + 20 * 3600000LL, "web", &per));
    g_auto(GStrv) names = sa_headroom_classes(h);
    g_assert_cmpuint(g_strv_length(names), ==, 2);
    g_assert_cmpstr(names[0], ==, "idle");
    g_assert_cmpstr(names[1], ==, "web");
}

static void test_shapes(void)
{
    static const struct {
        const char *text;
        const char *name, *cls;
        guint vcpus;
        guint64 mib;
        const char *error;
    } cases[] = {
        {"small:2:4096", "small", "small", 2, 4096, NULL},
        {" large : 8 : 32768 : m1.large ", "large", "m1.large", 8, 32768, NULL},
        {"small:2", NULL, NULL, 0, 0, "expected NAME:VCPUS:MEMORY_MIB[:CLASS]"},
        {"small:2:4096:a:b", NULL, NULL, 0, 0, "expected NAME"},
        {"small:x:4096", NULL, NULL, 0, 0, "vCPUs 'x' not a number 1-4096"},
        {"small:4097:4096", NULL, NULL, 0, 0, "vCPUs '4097'"},
        {"small:2:0", NULL, NULL, 0, 0, "memory '0' not a size"},
        {":2:4096", NULL, NULL, 0, 0, "a name or class is"},
        {"s/1:2:4096", NULL, NULL, 0, 0, "a name or class is"},
        {"s:2:4096:", NULL, NULL, 0, 0, "a name or class is"},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(SaShape) s = sa_shape_parse(cases[i].text, &error);
        if (cases[i].error) {
            g_assert_null(s);
            g_assert_nonnull(strstr(error->message, cases[i].error));
            g_assert_nonnull(strstr(error->message, cases[i].text));
            continue;
        }
        g_assert_no_error(error);
        g_assert_cmpstr(s->name, ==, cases[i].name);
        g_assert_cmpstr(s->class_name, ==, cases[i].cls);
        g_assert_cmpuint(s->vcpus, ==, cases[i].vcpus);
        g_assert_cmpuint(s->memory_mib, ==, cases[i].mib);
        g_autofree char *text = sa_shape_format(s);
        g_autoptr(SaShape) again = sa_shape_parse(text, &error);
        g_assert_no_error(error);
        g_assert_cmpstr(again->class_name, ==, s->class_name);
    }
}

static void test_json(void)
{
    g_autoptr(SaHeadroom) h = sa_headroom_new(600);
    gint64 now = T0;
    double cov, cov2;
    feed_run(h, &now, 300, 1000, 8, 6.0);
    feed_run(h, &now, 200, 1000, 8, 1.0);
    sa_headroom_feed_class(h, now, 1000, "web", 1.0, 4);
    json_object *obj = sa_headroom_to_json(h, now);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaHeadroom) back = sa_headroom_from_json(obj, 600, now, &error);
    g_assert_no_error(error);
    for (double q = 0.1; q <= 1.0; q += 0.1)
        g_assert_cmpfloat(sa_headroom_quantile(back, now, 0, 8, q, &cov2), ==,
                          sa_headroom_quantile(h, now, 0, 8, q, &cov));
    g_assert_cmpfloat(cov, ==, cov2);
    double per;
    g_assert_true(sa_headroom_class_per_vcpu(back, now, "web", &per));
    g_assert_cmpfloat_with_epsilon(per, 0.25, 1e-12);

    /* Read back later: what aged out of the window is gone. */
    g_autoptr(SaHeadroom) later = sa_headroom_from_json(obj, 600, now + 400000, &error);
    g_assert_no_error(error);
    g_assert_cmpfloat_with_epsilon(sa_headroom_quantile(later, now + 400000, 0, 8, 0.95, &cov),
                                   1.125, EPS);
    g_autoptr(SaHeadroom) old = sa_headroom_from_json(obj, 600, now + 3600000, &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(sa_headroom_quantile(old, now + 3600000, 0, 8, 0.95, &cov), ==, 0);
    /* Another window: refused. */
    g_assert_null(sa_headroom_from_json(obj, 3600, now, &error));
    g_assert_nonnull(strstr(error->message, "window_s=600, now 3600"));
    g_clear_error(&error);
    json_object_put(obj);

    static const struct {
        const char *text, *error;
    } bad[] = {
        {"[]", "member \"version\" missing"},
        {"{\"version\":2}", "version 2"},
        {"{\"version\":1,\"window_s\":600,\"partitions\":{},\"classes\":[]}",
         "\"partitions\" missing or not a array"},
        {"{\"version\":1,\"window_s\":600,\"partitions\":[{\"id\":0,\"capacity\":0,\"slots\":[]}],"
         "\"classes\":[]}",
         "\"capacity\" 0 out of range"},
        {"{\"version\":1,\"window_s\":600,\"partitions\":[{\"id\":0,\"capacity\":8,\"slots\":"
         "[{\"slot\":1,\"bins\":[[128,5]]}]}],\"classes\":[]}",
         "bin [128, 5] out of range"},
        {"{\"version\":1,\"window_s\":600,\"partitions\":[{\"id\":0,\"capacity\":8,\"slots\":"
         "[{\"slot\":1,\"bins\":[[1,-5]]}]}],\"classes\":[]}",
         "out of range"},
        {"{\"version\":1,\"window_s\":600,\"partitions\":[{\"id\":0,\"capacity\":8,\"slots\":"
         "[{\"slot\":1,\"bins\":[3]}]}],\"classes\":[]}",
         "not [BIN, MS]"},
        {"{\"version\":1,\"window_s\":600,\"partitions\":[{\"id\":0,\"capacity\":8,\"slots\":[]},"
         "{\"id\":0,\"capacity\":8,\"slots\":[]}],\"classes\":[]}",
         "partition 0 given twice"},
        {"{\"version\":1,\"window_s\":600,\"partitions\":[],\"classes\":[{\"name\":\"a\","
         "\"used_ms\":-1,\"vcpu_ms\":5,\"at_ms\":0}]}",
         "class \"a\""},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        json_object *o = json_tokener_parse(bad[i].text);
        g_assert_nonnull(o);
        g_autoptr(SaHeadroom) none = sa_headroom_from_json(o, 600, T0, &error);
        g_assert_null(none);
        if (!strstr(error->message, bad[i].error))
            g_error("case %zu: %s", i, error->message);
        g_clear_error(&error);
        json_object_put(o);
    }
}

/* On the simulator: a VM of 4 vCPUs homed on partition 0 (4 CPUs) of two; its vCPUs want 0.25
 * CPU each, except one tick in 25 (4% of the time) when they want a whole CPU. The owners'
 * demand the policy measures each tick feeds the model: at p95 it is the 1 CPU of the quiet
 * ticks (the busy 4% are above the quantile); at p99 the busy ticks' 4 CPUs. */
static void test_sim_p95(void)
{
    g_autoptr(Sim) sim = sim_new(sim_topology_uniform(2, 4, NULL), 500);
    SimVm *vm = sim_add_vm(sim, "owner", 4, 0, NULL);
    vm->vm.mode = SA_MODE_STRICT; /* stays home: its whole demand is its partition's owners' */
    g_autoptr(SaHeadroom) h = sa_headroom_new(600);
    const gint64 wall0 = T0;
    guint over = 0;
    for (guint t = 0; t < 1300; t++) {
        sim_vm_set_load(vm, t % 25 == 24 ? 1.0 : 0.25);
        sim_step(sim);
        if (sim->tick < 2)
            continue; /* the first tick has no interval */
        SaHeadroomSample s[2];
        for (guint p = 0; p < 2; p++)
            s[p] = (SaHeadroomSample){
                .id = p, .capacity = 4, .owner_demand = sim->usage[p].owner_demand};
        over += sim->usage[0].owner_demand > 4 + EPS;
        sa_headroom_feed(h, wall0 + sim->now_ms, sim->interval_ms, s, 2);
        double run = sim_vm_run(sim, vm), wait = sim_vm_wait(sim, vm);
        sa_headroom_feed_class(h, wall0 + sim->now_ms, sim->interval_ms, "m1.owner", run + wait, 4);
    }
    g_assert_cmpuint(over, ==, 0);
    gint64 now = wall0 + sim->now_ms;
    double cov;
    /* Bins of 4 × 2 / 128 = 0.0625 CPU: 1.0 is the lower edge of bin 16. */
    double p95 = sa_headroom_quantile(h, now, 0, 4, 0.95, &cov);
    g_assert_cmpfloat(p95, >=, 1.0);
    g_assert_cmpfloat(p95, <=, 1.0625 + EPS);
    g_assert_cmpfloat_with_epsilon(cov, 1.0, 0.01);
    double p99 = sa_headroom_quantile(h, now, 0, 4, 0.99, &cov);
    g_assert_cmpfloat(p99, >=, 4.0);
    g_assert_cmpfloat(p99, <=, 4.0625 + EPS);
    g_assert_cmpfloat(sa_headroom_quantile(h, now, 1, 4, 0.95, &cov), <=, 0.0625 + EPS);

    /* Fit of a 2-vCPU 4-GiB shape: headroom 4 − 0.4 − p95 ≈ 2.54 on partition 0, 3.54 on 1. */
    const guint64 GiB = G_GUINT64_CONSTANT(1) << 30;
    SaHeadroomPartition parts[2];
    for (guint p = 0; p < 2; p++) {
        SaHeadroomInput in = {.id = p, .capacity = 4, .memory_available = 64 * GiB};
        sa_headroom_partition(h, now, 0.95, &in, &parts[p]);
    }
    g_assert_cmpfloat_with_epsilon(parts[0].headroom, 4 - 0.4 - p95, EPS);
    /* Without a class: 2 CPUs each, one per partition. */
    double d = sa_headroom_expected_demand(h, now, "m1.small", 2, NULL);
    g_assert_cmpfloat(d, ==, 2.0);
    g_assert_cmpuint(sa_headroom_fit_count(parts, 2, d, 4 * GiB), ==, 2);
    /* With the class the owner showed: 0.25 × 24/25 + 1 × 1/25 = 0.28 per vCPU. */
    bool learned;
    d = sa_headroom_expected_demand(h, now, "m1.owner", 2, &learned);
    g_assert_true(learned);
    g_assert_cmpfloat_with_epsilon(d, 0.56, 0.01);
    /* floor(2.5375 / 0.56) + floor(3.5375 / 0.56) = 4 + 6 */
    g_assert_cmpuint(sa_headroom_fit_count(parts, 2, d, 4 * GiB), ==, 10);
    bool fits;
    double left;
    g_assert_cmpint(sa_headroom_choose(parts, 2, NULL, 2, d, 4 * GiB, &fits, &left), ==, 1);
    g_assert_true(fits);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/headroom/quantile", test_quantile);
    g_test_add_func("/headroom/window", test_window);
    g_test_add_func("/headroom/fit", test_fit);
    g_test_add_func("/headroom/classes", test_classes);
    g_test_add_func("/headroom/shapes", test_shapes);
    g_test_add_func("/headroom/json", test_json);
    g_test_add_func("/headroom/sim-p95", test_sim_p95);
    return g_test_run();
}
