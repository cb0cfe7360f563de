/* softaff — tests of the Prometheus metrics (daemon/metrics.c): the exposition is checked by a
 * validator of the text format written here, values are read back from it, and the textfile
 * write is checked for atomic replacement.
 *
 * `test-metrics --emit FILE` writes the exposition of the test daemon to FILE and exits (for
 * the promtool test). */
#define G_LOG_DOMAIN "test-metrics"

#include <glib/gstdio.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core-private.h"
#include "recorder.h"
#include "sa-error.h"
#include "sa-metrics.h"

/* A domain name with every character the label escaping must handle. */
#define NASTY_NAME "a\"b\\c\nd"
#define NASTY_ESCAPED "a\\\"b\\\\c\\nd"

/* ---- the daemon under test: the real core, VMs reported by a recording backend ---- */

static SaVm *add_vm(SaCore *core, const char *uuid, const char *name, pid_t pid, guint n_vcpus,
                    const SaMetadata *settings, const char *settings_error)
{
    SaVmFacts *f = rec_facts(uuid, name, pid, n_vcpus);
    f->has_settings = settings != NULL || settings_error != NULL;
    if (settings)
        f->settings = *settings;
    f->settings_error = g_strdup(settings_error);
    RecVm *r = rec_vm_new(uuid, f);
    sa_core_report(core, &rec_ops, r, f);
    rec_vm_unref(r);
    return sa_core_lookup(core, uuid);
}

static SaCore *test_daemon_new(void)
{
    const char *data = g_getenv("SOFTAFF_TEST_DATA");
    g_assert_nonnull(data);
    g_autofree char *root = g_build_filename(data, "epyc-4n-2llc", "sys", NULL);
    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);

    g_autoptr(GError) error = NULL;
    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(topo->partitions->len, ==, 4);
    SaConfig *cfg = sa_config_new_default();
    g_ptr_array_add(cfg->fleet_shapes, sa_shape_parse("small:2:4096", &error));
    g_assert_no_error(error);
    SaCore *d = sa_core_new(cfg, topo, FALSE, &error);
    g_assert_no_error(error);
    d->usage[1] = (SaPartitionUsage){
        .owners = 3.5, .visitors = 0.25, .unmanaged = 1.0, .n_owner_vms = 1, .owner_vcpus = 4};
    d->usage[2].visitors = 2.0;
    /* Their averages and totals (daemon/partition-load.c): partition 1 for 1 s, 2 for 2 s. */
    sa_partition_load_add(&d->load[1], &d->usage[1], 1.0);
    sa_partition_load_add(&d->load[2], &d->usage[2], 2.0);
    /* The headroom model: a minute of owners' demand, and a class seen. */
    d->usage[1].owner_demand = 4.75;
    for (guint t = 0; t < 60; t++)
        sa_core_fleet_feed(d, G_GUINT64_CONSTANT(1000000000));
    sa_headroom_feed_class(d->headroom, sa_core_fleet_now_ms(), 1000, "m1.small", 1.0, 2);
    d->ticks = 1234;
    d->started_us = G_GINT64_CONSTANT(1700000000500000);
    d->last_tick_cpu_ms = 1.5;

    SaVm *web = add_vm(d, "11111111-2222-3333-4444-555555555555", "web", 100, 4, NULL, NULL);
    g_assert_cmpint(web->status, ==, SA_VM_MANAGED);
    web->pvm.st.placed = true;
    web->pvm.st.home = 1;
    web->pvm.st.state = SA_STATE_BURST;
    web->stats.bursts = 3;
    web->stats.retreats = 2;
    web->stats.changes = 7;
    web->stats.seconds_home = 90.5;
    web->stats.seconds_burst = 9.5;
    web->stats.run_ns_total = G_GUINT64_CONSTANT(12500000000);
    web->stats.run_ns_home = G_GUINT64_CONSTANT(10000000000);
    web->stats.delay_ns_total = 250000000;
    /* The sched_ext scheduler's lifetime sums (scheduler.c), by partition index. */
    web->sched.id = 1;
    web->sched.total_run_ns[1] = G_GUINT64_CONSTANT(7500000000);
    web->sched.total_run_ns[2] = 1250000000;
    web->sched.total_wait_ns = 500000000;
    web->sched.total_visits = 6;
    web->sched.total_preempts = 2;
    web->sched.total_preempted = 1;

    SaMetadata off, strict;
    sa_metadata_init(&off);
    off.mode = SA_MODE_OFF;
    SaVm *nasty = add_vm(d, "99999999-0000-0000-0000-000000000001", NASTY_NAME, 101, 1, &off, NULL);
    g_assert_cmpint(nasty->status, ==, SA_VM_UNMANAGED);

    SaVm *bad = add_vm(d, "99999999-0000-0000-0000-000000000002", "broken", 102, 2, NULL,
                       "softness=\"x\" is not a number");
    g_assert_cmpint(bad->status, ==, SA_VM_INVALID);

    /* Managed, but no decision yet: no home to report. */
    sa_metadata_init(&strict);
    strict.mode = SA_MODE_STRICT;
    SaVm *fresh = add_vm(d, "99999999-0000-0000-0000-000000000003", "fresh", 103, 2, &strict, NULL);
    g_assert_cmpint(fresh->status, ==, SA_VM_MANAGED);
    return d;
}

static void test_daemon_free(SaCore *d)
{
    sa_core_free(d);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaCore, test_daemon_free)

/* ---- a validator of the text exposition format (0.0.4) ---- */

typedef struct {
    GHashTable *types;   /* family name -> "counter" | "gauge" */
    GHashTable *samples; /* canonical series "name{a=\"x\",...}" (unescaped values) -> double* */
} Exposition;

static void exposition_free(Exposition *e)
{
    if (!e)
        return;
    g_hash_table_unref(e->types);
    g_hash_table_unref(e->samples);
    g_free(e);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Exposition, exposition_free)

static bool is_name(const char *s, gsize len, bool colons)
{
    if (len == 0)
        return false;
    for (gsize i = 0; i < len; i++) {
        char c = s[i];
        bool ok =
            g_ascii_isalpha(c) || c == '_' || (colons && c == ':') || (i > 0 && g_ascii_isdigit(c));
        if (!ok)
            return false;
    }
    return true;
}

static bool parse_value(const char *s, double *out)
{
    if (g_str_equal(s, "NaN")) {
        *out = NAN;
        return true;
    }
    if (g_str_equal(s, "+Inf") || g_str_equal(s, "-Inf")) {
        *out = s[0] == '+' ? INFINITY : -INFINITY;
        return true;
    }
    char *end = NULL;
    *out = g_ascii_strtod(s, &end);
    return end != s && *end == '\0';
}

static bool fail(GError **error, guint line, const char *what)
{
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "line %u: %s", line, what);
    return false;
}

/* Parses a sample's label set at *p ("{" already consumed); appends the canonical form. */
static bool parse_labels(const char **p, GString *series, guint line, GError **error)
{
    const char *s = *p;
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_string_append_c(series, '{');
    bool first = true;
    while (*s != '}') {
        if (!first) {
            if (*s != ',')
                return fail(error, line, "labels must be separated by ','");
            s++;
        }
        const char *name = s;
        while (g_ascii_isalnum(*s) || *s == '_')
            s++;
        gsize name_len = (gsize)(s - name);
        if (!is_name(name, name_len, false))
            return fail(error, line, "bad label name");
        if (name_len >= 2 && name[0] == '_' && name[1] == '_')
            return fail(error, line, "label names starting with __ are reserved");
        if (!g_hash_table_add(seen, g_strndup(name, name_len)))
            return fail(error, line, "a label given twice");
        if (*s++ != '=' || *s++ != '"')
            return fail(error, line, "a label needs =\"value\"");
        g_string_append_printf(series, "%s%.*s=\"", first ? "" : ",", (int)name_len, name);
        g_autoptr(GString) value = g_string_new(NULL);
        for (;;) {
            char c = *s++;
            if (c == '\0' || c == '\n')
                return fail(error, line, "unterminated label value");
            if (c == '"')
                break;
            if (c == '\\') {
                char e = *s++;
                if (e == '\\' || e == '"')
                    g_string_append_c(value, e);
                else if (e == 'n')
                    g_string_append_c(value, '\n');
                else
                    return fail(error, line, "bad escape in a label value");
            } else {
                g_string_append_c(value, c);
            }
        }
        if (!g_utf8_validate(value->str, (gssize)value->len, NULL))
            return fail(error, line, "label value is not UTF-8");
        g_string_append_len(series, value->str, (gssize)value->len);
        g_string_append_c(series, '"');
        first = false;
    }
    g_string_append_c(series, '}');
    *p = s + 1;
    return true;
}

static Exposition *exposition_parse(const char *text, GError **error)
{
    g_autoptr(Exposition) e = g_new0(Exposition, 1);
    e->types = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    e->samples = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_autoptr(GHashTable) helps = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GHashTable) done = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autofree char *current = NULL; /* family of the latest sample or comment */

    if (*text == '\0' || !g_str_has_suffix(text, "\n")) {
        fail(error, 0, "the exposition must end with a newline");
        return NULL;
    }
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    guint n_lines = g_strv_length(lines) - 1; /* the last one is empty */
    for (guint i = 0; i < n_lines; i++) {
        const char *l = lines[i];
        guint line = i + 1;
        if (*l == '\0')
            continue;
        const char *family_name = NULL;
        g_autofree char *name = NULL;
        if (g_str_has_prefix(l, "# HELP ") || g_str_has_prefix(l, "# TYPE ")) {
            bool is_help = l[2] == 'H';
            const char *n = l + 7;
            const char *sp = strchr(n, ' ');
            if (!sp || !is_name(n, (gsize)(sp - n), true)) {
                fail(error, line, "HELP/TYPE needs a metric name and text");
                return NULL;
            }
            name = g_strndup(n, (gsize)(sp - n));
            const char *rest = sp + 1;
            if (is_help) {
                for (const char *c = rest; *c; c++) {
                    if (*c == '\\' && c[1] != '\\' && c[1] != 'n') {
                        fail(error, line, "bad escape in HELP");
                        return NULL;
                    }
                    if (*c == '\\')
                        c++;
                }
                if (!g_hash_table_add(helps, g_strdup(name))) {
                    fail(error, line, "HELP given twice");
                    return NULL;
                }
            } else {
                if (!g_str_equal(rest, "counter") && !g_str_equal(rest, "gauge") &&
                    !g_str_equal(rest, "untyped") && !g_str_equal(rest, "summary") &&
                    !g_str_equal(rest, "histogram")) {
                    fail(error, line, "unknown TYPE");
                    return NULL;
                }
                if (g_hash_table_contains(e->types, name)) {
                    fail(error, line, "TYPE given twice");
                    return NULL;
                }
                if (g_hash_table_contains(done, name)) {
                    fail(error, line, "TYPE after the family's samples");
                    return NULL;
                }
                /* Conventions (promtool's lint): counters end in _total, nothing else does. */
                if (g_str_equal(rest, "counter") != g_str_has_suffix(name, "_total")) {
                    fail(error, line, "counters, and only counters, end in _total");
                    return NULL;
                }
                g_hash_table_insert(e->types, g_strdup(name), g_strdup(rest));
            }
            family_name = name;
        } else if (*l == '#') {
            continue; /* another comment */
        } else {
            const char *s = l;
            while (g_ascii_isalnum(*s) || *s == '_' || *s == ':')
                s++;
            if (!is_name(l, (gsize)(s - l), true)) {
                fail(error, line, "bad metric name");
                return NULL;
            }
            name = g_strndup(l, (gsize)(s - l));
            if (!g_hash_table_contains(e->types, name) || !g_hash_table_contains(helps, name)) {
                fail(error, line, "sample before its family's HELP and TYPE");
                return NULL;
            }
            g_autoptr(GString) series = g_string_new(name);
            if (*s == '{') {
                s++;
                if (!parse_labels(&s, series, line, error))
                    return NULL;
            }
            if (*s != ' ') {
                fail(error, line, "a sample needs ' ' before its value");
                return NULL;
            }
            s++;
            g_auto(GStrv) fields = g_strsplit(s, " ", -1);
            double value;
            if (g_strv_length(fields) > 2 || !parse_value(fields[0], &value)) {
                fail(error, line, "bad sample value");
                return NULL;
            }
            if (fields[1]) {
                char *end = NULL;
                g_ascii_strtoll(fields[1], &end, 10);
                if (end == fields[1] || *end) {
                    fail(error, line, "bad timestamp");
                    return NULL;
                }
            }
            const char *type = g_hash_table_lookup(e->types, name);
            if (g_str_equal(type, "counter") && !(value >= 0)) {
                fail(error, line, "a counter must not be negative");
                return NULL;
            }
            if (g_hash_table_contains(e->samples, series->str)) {
                fail(error, line, "the same series twice");
                return NULL;
            }
            g_hash_table_insert(e->samples, g_strdup(series->str), g_memdup2(&value, sizeof value));
            family_name = name;
        }
        /* Every line of a family comes in one block. */
        if (g_strcmp0(current, family_name) != 0) {
            if (g_hash_table_contains(done, family_name)) {
                fail(error, line, "a family's lines are not together");
                return NULL;
            }
            if (current)
                g_hash_table_add(done, g_steal_pointer(&current));
            current = g_strdup(family_name);
        }
    }
    /* A family with HELP/TYPE but no sample is legal; a TYPE without HELP is not ours. */
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, e->types);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        if (!g_hash_table_contains(helps, key)) {
            fail(error, 0, "a family without HELP");
            return NULL;
        }
    }
    return g_steal_pointer(&e);
}

static double sample(const Exposition *e, const char *series)
{
    const double *v = g_hash_table_lookup(e->samples, series);
    if (!v)
        g_error("series missing: %s", series);
    return *v;
}

/* ---- tests ---- */

static void test_validator_rejects(void)
{
    static const struct {
        const char *text;
        const char *problem;
    } bad[] = {
        {"x 1\n", "sample before"},
        {"# HELP x h\n# TYPE x gauge\nx 1", "newline"},
        {"# HELP x h\n# TYPE x counter\nx 1\n", "_total"},
        {"# HELP x_total h\n# TYPE x_total gauge\nx_total 1\n", "_total"},
        {"# HELP x h\n# TYPE x gauge\nx{a=\"\\t\"} 1\n", "escape"},
        {"# HELP x h\n# TYPE x gauge\nx{a=\"b} 1\n", "unterminated"},
        {"# HELP x h\n# TYPE x gauge\nx{a=\"1\",a=\"2\"} 1\n", "twice"},
        {"# HELP x h\n# TYPE x gauge\nx{__a=\"1\"} 1\n", "reserved"},
        {"# HELP x h\n# TYPE x gauge\nx 1\nx 2\n", "same series"},
        {"# HELP x h\n# TYPE x gauge\nx{a=\"1\"} one\n", "value"},
        {"# HELP x h\n# TYPE x gauge\nx{a=\"1\"} 1\n# HELP y h\n# TYPE y gauge\ny 1\n"
         "x{a=\"2\"} 1\n",
         "together"},
        {"# HELP 1x h\n# TYPE 1x gauge\n", "name"},
        {"# HELP x_total h\n# TYPE x_total counter\nx_total -1\n", "negative"},
    };
    for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(Exposition) e = exposition_parse(bad[i].text, &error);
        g_assert_null(e);
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        if (!strstr(error->message, bad[i].problem))
            g_error("case %u: '%s' does not mention '%s'", i, error->message, bad[i].problem);
    }
    g_autoptr(GError) error = NULL;
    g_autoptr(Exposition) ok = exposition_parse(
        "# HELP x h \\\\ \\n\n# TYPE x gauge\nx{a=\"\\\"\"} +Inf 17\nx NaN\n", &error);
    g_assert_no_error(error);
    g_assert_true(isinf(sample(ok, "x{a=\"\"\"}")));
}

static void test_format(void)
{
    g_autoptr(SaCore) d = test_daemon_new();
    g_autofree char *text = sa_metrics_format(d);
    g_test_message("%s", text);
    g_autoptr(GError) error = NULL;
    g_autoptr(Exposition) e = exposition_parse(text, &error);
    g_assert_no_error(error);

    /* Daemon. */
    g_assert_cmpfloat(sample(e, "softaff_ticks_total"), ==, 1234);
    g_assert_cmpfloat(sample(e, "softaff_tick_cpu_seconds"), ==, 0.0015);
    g_assert_cmpfloat(sample(e, "softaff_start_time_seconds"), ==, 1700000000.5);
    g_assert_cmpfloat(sample(e, "softaff_vms{status=\"managed\"}"), ==, 2);
    g_assert_cmpfloat(sample(e, "softaff_vms{status=\"unmanaged\"}"), ==, 1);
    g_assert_cmpfloat(sample(e, "softaff_vms{status=\"invalid\"}"), ==, 1);
    g_assert_cmpstr(g_hash_table_lookup(e->types, "softaff_ticks_total"), ==, "counter");
    g_assert_cmpstr(g_hash_table_lookup(e->types, "softaff_tick_cpu_seconds"), ==, "gauge");

    /* Partitions. */
    for (guint p = 0; p < 4; p++) {
        g_autofree char *s = g_strdup_printf("softaff_partition_cpus{partition=\"%u\"}", p);
        g_assert_cmpfloat(sample(e, s), ==, 16);
    }
    g_assert_cmpfloat(sample(e, "softaff_partition_busy_cpus{partition=\"1\",load=\"owners\"}"), ==,
                      3.5);
    g_assert_cmpfloat(sample(e, "softaff_partition_busy_cpus{partition=\"1\",load=\"visitors\"}"),
                      ==, 0.25);
    g_assert_cmpfloat(sample(e, "softaff_partition_busy_cpus{partition=\"1\",load=\"unmanaged\"}"),
                      ==, 1.0);
    g_assert_cmpfloat(sample(e, "softaff_partition_busy_cpus{partition=\"2\",load=\"visitors\"}"),
                      ==, 2.0);
    g_assert_cmpfloat(
        sample(e, "softaff_partition_busy_seconds_total{partition=\"1\",load=\"owners\"}"), ==,
        3.5);
    g_assert_cmpfloat(
        sample(e, "softaff_partition_busy_seconds_total{partition=\"2\",load=\"visitors\"}"), ==,
        4.0);
    g_assert_cmpfloat(
        sample(e, "softaff_partition_busy_seconds_total{partition=\"0\",load=\"unmanaged\"}"), ==,
        0.0);
    g_assert_cmpfloat(sample(e, "softaff_partition_home_vcpus{partition=\"1\"}"), ==, 4);
    g_assert_cmpfloat(sample(e, "softaff_partition_home_vcpus{partition=\"0\"}"), ==, 0);

    /* The managed, bursting VM. */
#define WEB "{domain=\"web\",uuid=\"11111111-2222-3333-4444-555555555555\""
    g_assert_cmpfloat(sample(e, "softaff_vm_info" WEB ",status=\"managed\",mode=\"soft\"}"), ==, 1);
    g_assert_cmpfloat(sample(e, "softaff_vm_vcpus" WEB "}"), ==, 4);
    g_assert_cmpfloat(sample(e, "softaff_vm_home_partition" WEB "}"), ==, 1);
    g_assert_cmpfloat(sample(e, "softaff_vm_bursting" WEB "}"), ==, 1);
    g_assert_cmpfloat(sample(e, "softaff_vm_state_seconds_total" WEB ",state=\"home\"}"), ==, 90.5);
    g_assert_cmpfloat(sample(e, "softaff_vm_state_seconds_total" WEB ",state=\"burst\"}"), ==, 9.5);
    g_assert_cmpfloat(sample(e, "softaff_vm_bursts_total" WEB "}"), ==, 3);
    g_assert_cmpfloat(sample(e, "softaff_vm_retreats_total" WEB "}"), ==, 2);
    g_assert_cmpfloat(sample(e, "softaff_vm_affinity_changes_total" WEB "}"), ==, 7);
    g_assert_cmpfloat(sample(e, "softaff_vm_vcpu_run_seconds_total" WEB "}"), ==, 12.5);
    g_assert_cmpfloat(sample(e, "softaff_vm_vcpu_run_home_seconds_total" WEB "}"), ==, 10);
    g_assert_cmpfloat(sample(e, "softaff_vm_vcpu_run_delay_seconds_total" WEB "}"), ==, 0.25);
    /* The scheduler's counters, run time per partition (every partition of the layout). */
    g_assert_cmpfloat(sample(e, "softaff_vm_sched_ext_run_seconds_total" WEB ",partition=\"0\"}"),
                      ==, 0);
    g_assert_cmpfloat(sample(e, "softaff_vm_sched_ext_run_seconds_total" WEB ",partition=\"1\"}"),
                      ==, 7.5);
    g_assert_cmpfloat(sample(e, "softaff_vm_sched_ext_run_seconds_total" WEB ",partition=\"2\"}"),
                      ==, 1.25);
    g_assert_cmpfloat(sample(e, "softaff_vm_sched_ext_wait_seconds_total" WEB "}"), ==, 0.5);
    g_assert_cmpfloat(sample(e, "softaff_vm_sched_ext_visits_total" WEB "}"), ==, 6);
    g_assert_cmpfloat(sample(e, "softaff_vm_sched_ext_preempts_total" WEB "}"), ==, 2);
    g_assert_cmpfloat(sample(e, "softaff_vm_sched_ext_preempted_total" WEB "}"), ==, 1);
#undef WEB
    /* Only VMs the scheduler had. */
    g_assert_null(strstr(text, "softaff_vm_sched_ext_visits_total{domain=\"fresh\""));

    /* The label value round-trips through the escaping, and is escaped exactly so. */
    g_assert_cmpfloat(sample(e, "softaff_vm_info{domain=\"" NASTY_NAME "\",uuid=\"99999999-"
                                "0000-0000-0000-000000000001\",status=\"unmanaged\","
                                "mode=\"off\"}"),
                      ==, 1);
    g_assert_nonnull(strstr(text, "softaff_vm_vcpus{domain=\"" NASTY_ESCAPED "\","));
    g_assert_cmpfloat(sample(e, "softaff_vm_info{domain=\"broken\",uuid=\"99999999-0000-0000-"
                                "0000-000000000002\",status=\"invalid\",mode=\"soft\"}"),
                      ==, 1);

    /* Only managed VMs with a home have home/bursting series. */
    guint homes = 0;
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, e->samples);
    while (g_hash_table_iter_next(&it, &key, NULL))
        homes += g_str_has_prefix(key, "softaff_vm_home_partition{");
    g_assert_cmpuint(homes, ==, 1);
    g_assert_false(g_hash_table_contains(
        e->samples,
        "softaff_vm_bursting{domain=\"fresh\",uuid=\"99999999-0000-0000-0000-000000000003\"}"));

    /* VMs in name order: deterministic output. */
    const char *broken = strstr(text, "softaff_vm_vcpus{domain=\"broken\"");
    const char *fresh = strstr(text, "softaff_vm_vcpus{domain=\"fresh\"");
    const char *web = strstr(text, "softaff_vm_vcpus{domain=\"web\"");
    g_assert_true(broken && fresh && web && broken < fresh && fresh < web);
    g_autofree char *again = sa_metrics_format(d);
    g_assert_cmpstr(again, ==, text);
}

static void test_format_empty(void)
{
    /* No VMs, no topology yet: still a valid exposition with the daemon's families. */
    SaCore d = {0};
    d.vms = g_hash_table_new(g_str_hash, g_str_equal);
    g_autofree char *text = sa_metrics_format(&d);
    g_clear_pointer(&d.sorted, g_ptr_array_unref);
    g_hash_table_unref(d.vms);
    g_autoptr(GError) error = NULL;
    g_autoptr(Exposition) e = exposition_parse(text, &error);
    g_assert_no_error(error);
    g_assert_cmpfloat(sample(e, "softaff_ticks_total"), ==, 0);
    g_assert_cmpfloat(sample(e, "softaff_vms{status=\"managed\"}"), ==, 0);
    g_assert_null(strstr(text, "softaff_vm_info"));
    g_assert_null(strstr(text, "softaff_partition_cpus"));
}

static void test_label_escaping(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"", ""},
        {NASTY_NAME, NASTY_ESCAPED},
        {"tab\there", "tab\there"},
        {"\\n", "\\\\n"},
        {"caf\xc3\xa9", "caf\xc3\xa9"},
        {"bad\xff", "bad\xef\xbf\xbd"}, /* invalid UTF-8 is replaced */
    };
    for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(GString) s = g_string_new(NULL);
        sa_metrics_append_label_value(s, cases[i].in);
        g_assert_cmpstr(s->str, ==, cases[i].out);
    }
}

static char *read_file(const char *path)
{
    g_autoptr(GError) error = NULL;
    char *text = NULL;
    g_file_get_contents(path, &text, NULL, &error);
    g_assert_no_error(error);
    return text;
}

static guint count_entries(const char *dir_path)
{
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, NULL);
    g_assert_nonnull(dir);
    guint n = 0;
    while (g_dir_read_name(dir))
        n++;
    return n;
}

static void test_write(void)
{
    g_autoptr(SaCore) d = test_daemon_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("softaff-metrics-XXXXXX", &error);
    g_assert_no_error(error);
    g_autofree char *path = g_build_filename(dir, "softaff.prom", NULL);

    /* The mode is 0644 whatever the umask. */
    mode_t old_umask = umask(077);
    g_assert_true(sa_metrics_write(d, path, &error));
    umask(old_umask);
    g_assert_no_error(error);
    g_autofree char *first = read_file(path);
    g_autofree char *expected = sa_metrics_format(d);
    g_assert_cmpstr(first, ==, expected);
    struct stat st1;
    g_assert_cmpint(g_stat(path, &st1), ==, 0);
    g_assert_cmpint(st1.st_mode & 07777, ==, 0644);
    g_assert_cmpuint(count_entries(dir), ==, 1); /* no temporary file left */

    /* A reader that opened the old file keeps reading all of the old one: the file is
     * replaced, never rewritten in place. */
    int old_fd = g_open(path, O_RDONLY | O_CLOEXEC, 0);
    g_assert_cmpint(old_fd, >=, 0);
    d->ticks = 99999;
    g_assert_true(sa_metrics_write(d, path, &error));
    g_assert_no_error(error);
    struct stat st2;
    g_assert_cmpint(g_stat(path, &st2), ==, 0);
    g_assert_cmpuint(st2.st_ino, !=, st1.st_ino);
    g_autofree char *second = read_file(path);
    g_assert_nonnull(strstr(second, "\nsoftaff_ticks_total 99999\n"));
    gsize len = strlen(first);
    g_autofree char *buf = g_malloc(len + 2);
    ssize_t n = read(old_fd, buf, len + 1);
    g_assert_cmpint(n, ==, (ssize_t)len);
    buf[n] = '\0';
    g_assert_cmpstr(buf, ==, first);
    close(old_fd);
    g_assert_cmpuint(count_entries(dir), ==, 1);

    g_assert_cmpint(g_unlink(path), ==, 0);
    g_assert_cmpint(g_rmdir(dir), ==, 0);
}

static void test_write_errors(void)
{
    g_autoptr(SaCore) d = test_daemon_new();
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("softaff-metrics-XXXXXX", &error);
    g_assert_no_error(error);

    /* The directory does not exist: the error names the file and the cause. */
    g_autofree char *missing = g_build_filename(dir, "nodir", "softaff.prom", NULL);
    g_assert_false(sa_metrics_write(d, missing, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_IO);
    g_assert_nonnull(strstr(error->message, missing));
    g_assert_nonnull(strstr(error->message, g_strerror(ENOENT)));
    g_clear_error(&error);

    /* The path is a directory: the rename fails, the temporary file is removed again. */
    g_autofree char *sub = g_build_filename(dir, "softaff.prom", NULL);
    g_assert_cmpint(g_mkdir(sub, 0755), ==, 0);
    g_assert_false(sa_metrics_write(d, sub, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_IO);
    g_assert_nonnull(strstr(error->message, sub));
    g_assert_nonnull(strstr(error->message, "rename"));
    g_assert_cmpuint(count_entries(dir), ==, 1);

    g_assert_cmpint(g_rmdir(sub), ==, 0);
    g_assert_cmpint(g_rmdir(dir), ==, 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && g_str_equal(argv[1], "--emit")) {
        g_autoptr(SaCore) d = test_daemon_new();
        g_autoptr(GError) error = NULL;
        if (!sa_metrics_write(d, argv[2], &error)) {
            g_printerr("%s\n", error->message);
            return 1;
        }
        return 0;
    }
    g_test_init(&argc, &argv, NULL);
    /* The invalid VM is reported with a warning, on purpose. */
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
    g_test_add_func("/metrics/validator-rejects", test_validator_rejects);
    g_test_add_func("/metrics/format", test_format);
    g_test_add_func("/metrics/format-empty", test_format_empty);
    g_test_add_func("/metrics/label-escaping", test_label_escaping);
    g_test_add_func("/metrics/write", test_write);
    g_test_add_func("/metrics/write-errors", test_write_errors);
    return g_test_run();
}
