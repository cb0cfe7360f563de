/* softaff — tests of the headroom model in the daemon (daemon/fleet.c): the real core on a
 * fixture host (epyc-4n-2llc: 4 nodes of 16 CPUs), fed the owners' demand of its ticks; what
 * status, the metrics and the control socket's "headroom" reply show; the state file's round
 * trip, a corrupt one, an aged one; a reload. */
#define G_LOG_DOMAIN "test-fleet"

#include <glib/gstdio.h>
#include <json-c/json.h>
#include <string.h>

#include "core-private.h"
#include "recorder.h"
#include "sa-error.h"
#include "sa-metrics.h"

#define EPS 1e-9
#define GiB (G_GUINT64_CONSTANT(1) << 30)

typedef struct {
    char *dir;
    char *state;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    const char *tdata = g_getenv("SOFTAFF_TEST_DATA");
    g_assert_nonnull(tdata);
    g_autofree char *root = g_build_filename(tdata, "epyc-4n-2llc", "sys", NULL);
    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
    f->dir = g_dir_make_tmp("softaff-fleet-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->state = g_build_filename(f->dir, "lib", "headroom.json", NULL);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    g_autofree char *lib = g_build_filename(f->dir, "lib", NULL);
    g_unlink(f->state);
    g_rmdir(lib);
    g_rmdir(f->dir);
    g_free(f->state);
    g_free(f->dir);
}

static SaConfig *fleet_config(const Fixture *f, guint window_s)
{
    SaConfig *cfg = sa_config_new_default();
    g_autoptr(GError) error = NULL;
    const char *shapes[] = {"small:2:4096", "big:8:8192:web"};
    for (gsize i = 0; i < G_N_ELEMENTS(shapes); i++) {
        SaShape *s = sa_shape_parse(shapes[i], &error);
        g_assert_no_error(error);
        g_ptr_array_add(cfg->fleet_shapes, s);
    }
    g_free(cfg->fleet_state_file);
    cfg->fleet_state_file = g_strdup(f->state);
    cfg->fleet_window_s = window_s;
    return cfg;
}

static SaCore *fleet_core(const Fixture *f, guint window_s)
{
    g_autoptr(GError) error = NULL;
    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    SaCore *core = sa_core_new(fleet_config(f, window_s), topo, FALSE, &error);
    g_assert_no_error(error);
    return core;
}

static void core_free(SaCore *core)
{
    sa_core_free(core);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaCore, core_free)

/* 100 ticks of 1 s: partition 1's owners want 3 CPUs, partition 2's 40 (more than twice its 16). */
static void feed(SaCore *core)
{
    for (guint t = 0; t < 100; t++) {
        memset(core->usage, 0, sizeof(SaPartitionUsage) * core->topo->partitions->len);
        core->usage[1].owner_demand = 3.0;
        core->usage[2].owner_demand = 40.0;
        sa_core_fleet_feed(core, G_GUINT64_CONSTANT(1000000000));
    }
}

static double p95(const SaCore *core, guint id)
{
    double cov;
    return sa_headroom_quantile(core->headroom, sa_core_fleet_now_ms(), id, 16, 0.95, &cov);
}

static json_object *member(json_object *o, const char *key)
{
    json_object *v = NULL;
    g_assert_true(json_object_object_get_ex(o, key, &v));
    return v;
}

/* The metric sample's value in an exposition. */
static double metric(const char *text, const char *series)
{
    g_autofree char *needle = g_strdup_printf("\n%s ", series);
    const char *at = strstr(text, needle);
    if (!at)
        g_error("no sample %s in:\n%s", series, text);
    return g_ascii_strtod(at + strlen(needle), NULL);
}

static void test_status_metrics(Fixture *f, gconstpointer data)
{
    g_autoptr(SaCore) core = fleet_core(f, 3600);
    feed(core);
    /* Bins of 16 × 2 / 128 = 0.25 CPU: 3.0 is in [3.0, 3.25); 40 is over 2 × 16: the last bin. */
    g_assert_cmpfloat_with_epsilon(p95(core, 1), 3.25, EPS);
    g_assert_cmpfloat_with_epsilon(p95(core, 2), 32.0, EPS);
    g_assert_cmpfloat(p95(core, 0), ==, 0.25); /* 0 demand: bin 0, whose upper edge is 0.25 */

    g_autofree char *status = sa_core_status_json(core);
    json_object *root = json_tokener_parse(status);
    g_assert_nonnull(root);
    json_object *hr = member(root, "headroom");
    g_assert_cmpfloat(json_object_get_double(member(hr, "quantile")), ==, 0.95);
    g_assert_cmpint(json_object_get_int(member(hr, "window_s")), ==, 3600);
    json_object *parts = member(hr, "partitions");
    g_assert_cmpuint(json_object_array_length(parts), ==, 4);
    json_object *p1 = json_object_array_get_idx(parts, 1);
    g_assert_cmpint(json_object_get_int(member(p1, "capacity")), ==, 16);
    g_assert_cmpfloat_with_epsilon(json_object_get_double(member(p1, "margin")), 1.6, EPS);
    g_assert_cmpfloat_with_epsilon(json_object_get_double(member(p1, "demand")), 3.25, EPS);
    g_assert_cmpfloat_with_epsilon(json_object_get_double(member(p1, "headroom")), 16 - 1.6 - 3.25,
                                   EPS);
    g_assert_cmpfloat_with_epsilon(json_object_get_double(member(p1, "coverage")), 100.0 / 3600,
                                   1e-6);
    /* Node 1's MemFree in the fixture, no VM homed. */
    g_assert_cmpint(json_object_get_int64(member(p1, "memory_available_bytes")), ==,
                    G_GINT64_CONSTANT(30111111) * 1024);
    /* Fit: small = 2 CPUs, 4 GiB: p0 floor(14.15 / 2) = 7 (memory 28.6 GiB -> 7), p1
     * floor(11.15 / 2) = 5, p2 none (headroom 16 − 1.6 − 32 < 0), p3 7: 19. big = 8 CPUs:
     * p0 1, p1 1, p3 1: 3. */
    json_object *shapes = member(hr, "shapes");
    g_assert_cmpuint(json_object_array_length(shapes), ==, 2);
    json_object *small = json_object_array_get_idx(shapes, 0);
    g_assert_cmpstr(json_object_get_string(member(small, "shape")), ==, "small");
    g_assert_cmpfloat(json_object_get_double(member(small, "demand")), ==, 2.0);
    g_assert_false(json_object_get_boolean(member(small, "demand_learned")));
    g_assert_cmpint(json_object_get_int(member(small, "fit")), ==, 19);
    json_object *big = json_object_array_get_idx(shapes, 1);
    g_assert_cmpstr(json_object_get_string(member(big, "class")), ==, "web");
    g_assert_cmpint(json_object_get_int(member(big, "fit")), ==, 3);
    json_object_put(root);

    g_autofree char *text = sa_metrics_format(core);
    g_assert_cmpfloat_with_epsilon(metric(text, "softaff_headroom_cpus{partition=\"1\"}"),
                                   16 - 1.6 - 3.25, 1e-12);
    g_assert_cmpfloat_with_epsilon(metric(text, "softaff_headroom_cpus{partition=\"2\"}"),
                                   16 - 1.6 - 32, 1e-12);
    g_assert_cmpfloat(metric(text, "softaff_headroom_quantile"), ==, 0.95);
    g_assert_cmpfloat(metric(text, "softaff_headroom_window_seconds"), ==, 3600);
    g_assert_cmpfloat_with_epsilon(metric(text, "softaff_headroom_window_coverage"), 100.0 / 3600,
                                   1e-6);
    g_assert_cmpfloat(metric(text, "softaff_partition_memory_available_bytes{partition=\"3\"}"), ==,
                      30333333.0 * 1024);
    g_assert_cmpfloat(
        metric(text, "softaff_fit_vms{shape=\"small\",vcpus=\"2\",memory_mib=\"4096\"}"), ==, 19);
    g_assert_cmpfloat(
        metric(text, "softaff_fit_vms{shape=\"big\",vcpus=\"8\",memory_mib=\"8192\"}"), ==, 3);
    g_assert_null(strstr(text, "softaff_headroom_demand_per_vcpu"));

    /* A class seen: its mean per vCPU, and the shape of that class uses it. */
    for (guint t = 0; t < 10; t++)
        sa_headroom_feed_class(core->headroom, sa_core_fleet_now_ms(), 1000, "web", 2.0, 8);
    g_free(text);
    text = sa_metrics_format(core);
    g_assert_cmpfloat_with_epsilon(metric(text, "softaff_headroom_demand_per_vcpu{class=\"web\"}"),
                                   0.25, 1e-12);
    /* big: 8 × 0.25 = 2 CPUs, 8 GiB: p0 min(7, 3) = 3, p1 min(5, 3) = 3, p3 3: 9. */
    g_assert_cmpfloat(
        metric(text, "softaff_fit_vms{shape=\"big\",vcpus=\"8\",memory_mib=\"8192\"}"), ==, 9);
}

/* The control socket's reply carries the inputs and the histograms: read back with the model's
 * own functions, it gives the same headroom (what softaffctl advise does). */
static void test_reply(Fixture *f, gconstpointer data)
{
    g_autoptr(SaCore) core = fleet_core(f, 3600);
    feed(core);
    g_autofree char *line = sa_core_headroom_reply(core);
    g_assert_true(g_str_has_suffix(line, "\n"));
    json_object *root = json_tokener_parse(line);
    g_assert_nonnull(root);
    g_assert_true(json_object_get_boolean(member(root, "ok")));
    gint64 now = json_object_get_int64(member(root, "now_ms"));
    g_autoptr(GError) error = NULL;
    g_autoptr(SaHeadroom) model = sa_headroom_from_json(member(root, "model"), 3600, now, &error);
    g_assert_no_error(error);
    json_object *parts = member(root, "partitions");
    g_autofree SaHeadroomPartition *mine = sa_core_fleet_partitions(core, now);
    for (guint i = 0; i < 4; i++) {
        json_object *jp = json_object_array_get_idx(parts, i);
        SaHeadroomInput in = {
            .id = (guint)json_object_get_int(member(jp, "id")),
            .capacity = (guint)json_object_get_int(member(jp, "capacity")),
            .home_vcpus = (guint)json_object_get_int(member(jp, "home_vcpus")),
            .memory_available =
                (guint64)json_object_get_int64(member(jp, "memory_available_bytes")),
        };
        SaHeadroomPartition theirs;
        sa_headroom_partition(model, now, 0.95, &in, &theirs);
        g_assert_cmpfloat(theirs.headroom, ==, mine[i].headroom);
        g_assert_cmpfloat(theirs.coverage, ==, mine[i].coverage);
        g_assert_cmpuint(theirs.memory_available, ==, mine[i].memory_available);
    }
    json_object_put(root);
}

static void test_persist(Fixture *f, gconstpointer data)
{
    g_autoptr(GError) error = NULL;
    {
        g_autoptr(SaCore) core = fleet_core(f, 3600);
        /* Nothing saved yet: not found, the model stays empty. */
        g_assert_false(sa_core_fleet_load(core, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
        g_clear_error(&error);
        feed(core);
        g_assert_true(sa_core_fleet_save(core, &error)); /* creates lib/ */
        g_assert_no_error(error);
    }
    g_autoptr(SaCore) core = fleet_core(f, 3600);
    g_assert_cmpfloat(p95(core, 1), ==, 0);
    g_assert_true(sa_core_fleet_load(core, &error));
    g_assert_no_error(error);
    g_assert_cmpfloat_with_epsilon(p95(core, 1), 3.25, EPS);
    g_assert_cmpfloat_with_epsilon(p95(core, 2), 32.0, EPS);

    /* No temporary file left beside it. */
    g_autofree char *lib = g_path_get_dirname(f->state);
    g_autoptr(GDir) dir = g_dir_open(lib, 0, NULL);
    guint files = 0;
    while (g_dir_read_name(dir))
        files++;
    g_assert_cmpuint(files, ==, 1);

    /* Corrupt files: an error naming the path; the model as it was; never a crash. */
    g_autofree char *good = NULL;
    g_assert_true(g_file_get_contents(f->state, &good, NULL, NULL));
    const char *corrupt[] = {"", "{\"version\":1,", "garbage\n", "[1,2,3]",
                             ("{\"version\":1,\"window_s\":3600,\"partitions\":[{\"id\":1}],"
                              "\"classes\":[]}")};
    for (gsize i = 0; i < G_N_ELEMENTS(corrupt); i++) {
        g_assert_true(g_file_set_contents(f->state, corrupt[i], -1, NULL));
        g_assert_false(sa_core_fleet_load(core, &error));
        g_assert_nonnull(strstr(error->message, f->state));
        g_assert_false(g_error_matches(error, SA_ERROR, SA_ERROR_NOT_FOUND));
        g_clear_error(&error);
        g_assert_cmpfloat_with_epsilon(p95(core, 1), 3.25, EPS);
        g_test_expect_message("softaffd", G_LOG_LEVEL_WARNING,
                              "fleet: ignoring the saved headroom history: *");
        sa_core_fleet_start(core); /* logs a warning, goes on */
        g_test_assert_expected_messages();
    }
    /* A file half as long as the good one (a torn write would look like this). */
    g_assert_true(g_file_set_contents(f->state, good, (gssize)strlen(good) / 2, NULL));
    g_assert_false(sa_core_fleet_load(core, &error));
    g_assert_nonnull(strstr(error->message, f->state));
    g_clear_error(&error);

    /* Saved with another window: refused, said. */
    g_autoptr(SaCore) other = fleet_core(f, 600);
    g_assert_true(g_file_set_contents(f->state, good, -1, NULL));
    g_assert_false(sa_core_fleet_load(other, &error));
    g_assert_nonnull(strstr(error->message, "window_s=3600, now 600"));
    g_clear_error(&error);

    /* Saved two hours ago (its slots moved back by 2 windows): loads, but has aged out. */
    json_object *obj = json_tokener_parse(good);
    json_object *parts = member(obj, "partitions");
    for (size_t i = 0; i < json_object_array_length(parts); i++) {
        json_object *slots = member(json_object_array_get_idx(parts, i), "slots");
        for (size_t k = 0; k < json_object_array_length(slots); k++) {
            json_object *s = json_object_array_get_idx(slots, k);
            gint64 no = json_object_get_int64(member(s, "slot"));
            json_object_object_add(s, "slot", json_object_new_int64(no - 120));
        }
    }
    g_assert_true(g_file_set_contents(f->state, json_object_to_json_string(obj), -1, NULL));
    json_object_put(obj);
    g_assert_true(sa_core_fleet_load(core, &error));
    g_assert_no_error(error);
    g_assert_cmpfloat(p95(core, 1), ==, 0);
}

/* SIGHUP keeps the histograms; a new window_s starts them over. */
static void test_reload(Fixture *f, gconstpointer data)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaCore) core = fleet_core(f, 3600);
    feed(core);
    sa_core_reload(core, fleet_config(f, 3600), sa_topology_load(SA_LAYOUT_NODE, NULL, &error));
    g_assert_no_error(error);
    g_assert_cmpfloat_with_epsilon(p95(core, 1), 3.25, EPS);
    sa_core_reload(core, fleet_config(f, 7200), sa_topology_load(SA_LAYOUT_NODE, NULL, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(sa_headroom_window_s(core->headroom), ==, 7200);
    g_assert_cmpfloat(p95(core, 1), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
    ADD("/fleet/status-metrics", test_status_metrics);
    ADD("/fleet/reply", test_reply);
    ADD("/fleet/persist", test_persist);
    ADD("/fleet/reload", test_reload);
    return g_test_run();
}
