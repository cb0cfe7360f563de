/* softaff — tests of the config file loader (config/config.c). */
#define G_LOG_DOMAIN "test-config"

#include <glib/gstdio.h>
#include <string.h>

#include "sa-config-defs.h"
#include "sa-config.h"
#include "sa-error.h"

#ifndef SA_SOURCE_ROOT
#error "SA_SOURCE_ROOT must name the source tree"
#endif

typedef struct {
    char *dir;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    g_autoptr(GError) error = NULL;

    f->dir = g_dir_make_tmp("softaff-config-XXXXXX", &error);
    g_assert_no_error(error);
    g_unsetenv("SOFTAFF_CONFIG");
}

/* Removes dir and what it holds (files and directories, one level of drop-ins deep or more). */
static void remove_tree(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *name;

    while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
        g_autofree char *child = g_build_filename(path, name, NULL);
        if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
            remove_tree(child);
        else
            g_assert_cmpint(g_unlink(child), ==, 0);
    }
    g_assert_cmpint(g_rmdir(path), ==, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    remove_tree(f->dir);
    g_free(f->dir);
    g_unsetenv("SOFTAFF_CONFIG");
    g_unsetenv("SOFTAFF_SYSFS_ROOT");
}

static char *write_conf(Fixture *f, const char *name, const char *contents, gssize len)
{
    g_autoptr(GError) error = NULL;
    char *path = g_build_filename(f->dir, name, NULL);

    g_assert_true(g_file_set_contents(path, contents, len, &error));
    g_assert_no_error(error);
    return path;
}

/* A drop-in: softaff.conf.d/NAME beside the fixture's files. */
static char *write_dropin(Fixture *f, const char *name, const char *contents)
{
    g_autofree char *dir = g_build_filename(f->dir, "softaff.conf.d", NULL);
    g_autofree char *rel = g_build_filename("softaff.conf.d", name, NULL);

    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    return write_conf(f, rel, contents, -1);
}

static char *data_path(const char *name)
{
    const char *dir = g_getenv("SOFTAFF_TEST_DATA");
    g_assert_nonnull(dir);
    return g_build_filename(dir, "config", name, NULL);
}

static void assert_defaults(const SaConfig *cfg)
{
    SaPolicyConfig policy;

    sa_policy_config_init(&policy);
    g_assert_cmpuint(cfg->interval_ms, ==, 500);
    g_assert_cmpstr(cfg->uri, ==, "qemu:///system");
    g_assert_cmpstr(cfg->socket, ==, "/run/softaff/softaffd.sock");
    g_assert_cmpint(cfg->backend, ==, SA_BACKEND_LIBVIRT);
    g_assert_cmpuint(cfg->command_timeout_ms, ==, 2000);
    g_assert_cmpuint(cfg->stop_timeout_ms, ==, 5000);
    g_assert_cmpint(cfg->layout, ==, SA_LAYOUT_NODE);
    g_assert_null(cfg->custom);
    g_assert_cmpuint(cfg->policy.softness, ==, policy.softness);
    g_assert_cmpuint(cfg->policy.dwell_ms, ==, policy.dwell_ms);
    g_assert_cmpfloat(cfg->policy.smoothing, ==, policy.smoothing);
    g_assert_cmpuint(cfg->policy.max_holdoff_ms, ==, policy.max_holdoff_ms);
    g_assert_cmpint(cfg->manage, ==, SA_MANAGE_ALL);
    g_assert_false(cfg->hook_strict);
    g_assert_nonnull(cfg->qmp_sockets);
    g_assert_null(cfg->qmp_sockets[0]);
    g_assert_false(cfg->qmp_trust_writable_dirs);
    g_assert_null(cfg->metrics_textfile);
    g_assert_cmpuint(cfg->metrics_every, ==, 1);
    g_assert_true(cfg->memory_migrate);
    g_assert_cmpuint(cfg->memory_rate_mib_s, ==, 256);
    g_assert_cmpint(cfg->sensing_mode, ==, SA_SENSING_AUTO);
    g_assert_cmpuint(cfg->sensing_threshold_us, ==, 2000);
    g_assert_cmpuint(cfg->sensing_window_us, ==, 10000);
    g_assert_cmpint(cfg->actuation_mode, ==, SA_ACTUATION_AUTO);
    g_assert_cmpuint(cfg->fleet_window_s, ==, 3600);
    g_assert_cmpfloat(cfg->fleet_quantile, ==, 0.95);
    g_assert_cmpuint(cfg->fleet_shapes->len, ==, 0);
    g_assert_cmpstr(cfg->fleet_state_file, ==, "/var/lib/softaff/headroom.json");
    g_assert_cmpuint(cfg->fleet_save_interval_s, ==, 300);
}

static void test_defaults(void)
{
    g_autoptr(SaConfig) cfg = sa_config_new_default();
    SaPolicyConfig policy;

    assert_defaults(cfg);
    g_assert_null(cfg->path);
    /* The documented policy defaults (BRIEF.md), as the policy module gives them. */
    sa_policy_config_init(&policy);
    g_assert_cmpuint(policy.softness, ==, 50);
    g_assert_cmpuint(policy.dwell_ms, ==, 2000);
    g_assert_cmpfloat(policy.smoothing, ==, 0.5);
    g_assert_cmpuint(policy.max_holdoff_ms, ==, 30000);
}

static void test_strings(void)
{
    g_assert_cmpstr(sa_manage_to_string(SA_MANAGE_ALL), ==, "all");
    g_assert_cmpstr(sa_manage_to_string(SA_MANAGE_EXPLICIT), ==, "explicit");
    g_assert_cmpstr(sa_backend_to_string(SA_BACKEND_LIBVIRT), ==, "libvirt");
    g_assert_cmpstr(sa_backend_to_string(SA_BACKEND_QMP), ==, "qmp");
    g_assert_cmpstr(sa_backend_to_string(SA_BACKEND_BOTH), ==, "both");
}

static void test_every_key(Fixture *f, gconstpointer data)
{
    g_autofree char *path = data_path("every-key.conf");
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_no_error(error);
    g_assert_nonnull(cfg);
    g_assert_cmpstr(cfg->path, ==, path);
    g_assert_cmpuint(cfg->interval_ms, ==, 250);
    g_assert_cmpstr(cfg->uri, ==, "qemu+ssh://host/system");
    g_assert_cmpstr(cfg->socket, ==, "/tmp/softaff test.sock");
    g_assert_cmpint(cfg->backend, ==, SA_BACKEND_BOTH);
    g_assert_cmpuint(cfg->command_timeout_ms, ==, 750);
    g_assert_cmpuint(cfg->stop_timeout_ms, ==, 0);
    g_assert_cmpint(cfg->layout, ==, SA_LAYOUT_CUSTOM);
    g_assert_cmpstr(cfg->custom, ==, "0-3;4-5,7;8-15");
    g_assert_cmpuint(cfg->policy.softness, ==, 75);
    g_assert_cmpint(cfg->manage, ==, SA_MANAGE_EXPLICIT);
    g_assert_cmpuint(cfg->policy.dwell_ms, ==, 1000);
    g_assert_cmpfloat_with_epsilon(cfg->policy.smoothing, 0.25, 1e-12);
    g_assert_cmpuint(cfg->policy.max_holdoff_ms, ==, 60000);
    g_assert_true(cfg->hook_strict);
    g_assert_cmpuint(g_strv_length(cfg->qmp_sockets), ==, 2);
    g_assert_cmpstr(cfg->qmp_sockets[0], ==, "/run/qemu/*.qmp");
    g_assert_cmpstr(cfg->qmp_sockets[1], ==, "/var/lib/vms/*/qmp.sock");
    g_assert_cmpstr(cfg->metrics_textfile, ==, "/var/lib/node-exporter/softaff.prom");
    g_assert_cmpuint(cfg->metrics_every, ==, 4);
}

/* The example config documents every key with its default: it loads, and gives the defaults. */
static void test_contrib_example(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(SA_SOURCE_ROOT, "contrib", "softaff.conf", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_no_error(error);
    assert_defaults(cfg);
    g_assert_cmpstr(cfg->path, ==, path);

    /* Every key is documented: each "#key=" line names a key, and every key appears. */
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, &error));
    static const char *const keys[] = {
        "[daemon]",
        "#interval_ms=500",
        "#uri=qemu:///system",
        "#socket=/run/softaff/softaffd.sock",
        "#backend=libvirt",
        "#command_timeout_ms=2000",
        "#stop_timeout_ms=5000",
        "[partitions]",
        "#layout=node",
        "#custom=",
        "[policy]",
        "#softness=50",
        "#manage=all",
        "#dwell_ms=2000",
        "#smoothing=0.5",
        "#max_holdoff_ms=30000",
        "#rebalance=auto",
        "#rebalance_window_ms=600000",
        "#rebalance_max_moves_per_hour=2",
        "[hook]",
        "#strict=false",
        "[qmp]",
        "#sockets=",
        "#trust_writable_dirs=false",
        "[metrics]",
        "#textfile=",
        "#every=1",
        "[memory]",
        "#migrate=auto",
        "#rate_mib_s=256",
        "[sensing]",
        "#mode=auto",
        "#wait_threshold_us=2000",
        "#window_us=10000",
        "[actuation]",
        "#mode=auto",
        "[fleet]",
        "#window_s=3600",
        "#quantile=0.95",
        "#shapes=",
        "#state_file=/var/lib/softaff/headroom.json",
        "#save_interval_s=300",
    };
    for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
        if (strstr(text, keys[i]) == NULL)
            g_error("contrib/softaff.conf does not document %s", keys[i]);

    /* Uncommenting every default line gives the same defaults. */
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    GString *uncommented = g_string_new(NULL);
    for (char **l = lines; *l != NULL; l++) {
        bool is_default = false;
        for (gsize i = 0; i < G_N_ELEMENTS(keys); i++)
            if (keys[i][0] == '#' && g_str_has_prefix(*l, keys[i]) &&
                !g_str_has_suffix(keys[i], "="))
                is_default = true;
        g_string_append_printf(uncommented, "%s\n", is_default ? *l + 1 : *l);
    }
    g_autofree char *copy = write_conf(f, "uncommented.conf", uncommented->str, -1);
    g_string_free(uncommented, TRUE);
    g_autoptr(SaConfig) cfg2 = sa_config_load(copy, &error);
    g_assert_no_error(error);
    assert_defaults(cfg2);
}

/* The example config documents the drop-ins, and its [rule NAME] example loads uncommented. */
static void test_contrib_rules(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(SA_SOURCE_ROOT, "contrib", "softaff.conf", NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *text = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, &error));
    g_assert_nonnull(strstr(text, "softaff.conf.d"));
    const char *start = strstr(text, "\n#[rule ");
    g_assert_nonnull(start);
    GString *rules = g_string_new(NULL);
    g_auto(GStrv) example = g_strsplit(start + 1, "\n", -1);
    for (char **l = example; *l != NULL && (*l)[0] == '#'; l++)
        g_string_append_printf(rules, "%s\n", *l + 1);
    g_autofree char *rules_path = write_conf(f, "rules.conf", rules->str, -1);
    g_string_free(rules, TRUE);
    g_autoptr(SaConfig) cfg3 = sa_config_load(rules_path, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(cfg3->rules->len, ==, 2);
    const SaRule *large = g_ptr_array_index(cfg3->rules, 0);
    g_assert_cmpstr(large->match_flavor, ==, "m1.large*");
    g_assert_cmpint(large->preferred, ==, 1);
    g_assert_cmpint(large->softness, ==, 80);
}

static void test_empty_file(Fixture *f, gconstpointer data)
{
    g_autofree char *path = write_conf(f, "empty.conf", "", 0);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_no_error(error);
    assert_defaults(cfg);
    g_assert_cmpstr(cfg->path, ==, path);
}

static void test_missing_explicit(Fixture *f, gconstpointer data)
{
    g_autofree char *path = g_build_filename(f->dir, "nope.conf", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_null(cfg);
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    g_autofree char *expected = g_strdup_printf("%s: no such config file", path);
    g_assert_cmpstr(error->message, ==, expected);
}

static void test_env_override(Fixture *f, gconstpointer data)
{
    g_autofree char *path = write_conf(f, "env.conf", "[policy]\nsoftness=7\n", -1);

    g_setenv("SOFTAFF_CONFIG", path, TRUE);
    {
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(NULL, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(cfg->policy.softness, ==, 7);
        g_assert_cmpstr(cfg->path, ==, path);
    }
    /* An explicit path wins over the environment. */
    {
        g_autofree char *other = write_conf(f, "other.conf", "[policy]\nsoftness=9\n", -1);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(other, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(cfg->policy.softness, ==, 9);
    }
    /* A file named by SOFTAFF_CONFIG must exist. */
    {
        g_autofree char *missing = g_build_filename(f->dir, "missing.conf", NULL);
        g_setenv("SOFTAFF_CONFIG", missing, TRUE);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(NULL, &error);
        g_assert_null(cfg);
        g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
        g_autofree char *expected =
            g_strdup_printf("%s: no such config file (named by SOFTAFF_CONFIG)", missing);
        g_assert_cmpstr(error->message, ==, expected);
    }
}

/* No path, no SOFTAFF_CONFIG (or an empty one): the default file, and the defaults when it is
 * missing. What /etc holds on this machine decides which branch is checked. */
static void test_default_path(Fixture *f, gconstpointer data)
{
    for (int round = 0; round < 2; round++) {
        if (round == 1)
            g_setenv("SOFTAFF_CONFIG", "", TRUE);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(NULL, &error);

        if (!g_file_test(SA_DEFAULT_CONFIG, G_FILE_TEST_EXISTS)) {
            g_assert_no_error(error);
            g_assert_null(cfg->path);
            assert_defaults(cfg);
        } else if (cfg != NULL) {
            g_assert_cmpstr(cfg->path, ==, SA_DEFAULT_CONFIG);
        } else {
            g_assert_true(g_str_has_prefix(error->message, SA_DEFAULT_CONFIG ": "));
        }
    }
}

static void test_not_a_file(Fixture *f, gconstpointer data)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(f->dir, &error);

    g_assert_null(cfg);
    g_assert_error(error, SA_ERROR, SA_ERROR_IO);
    g_assert_nonnull(strstr(error->message, f->dir));
}

/* Each bad file gives exactly this message ("@" stands for the file's path). */
static const struct {
    const char *contents;
    int code;
    const char *message;
} bad_files[] = {
    /* unknown groups and keys */
    {"[vms web]\nsoftness=1\n", SA_ERROR_CONFIG,
     "@: [vms web]: unknown group (known: daemon, partitions, policy, hook, qmp, metrics, memory, "
     "sensing, actuation, fleet, vm NAME, rule NAME)"},
    {"[policy]\nsofness=40\n", SA_ERROR_CONFIG,
     "@: [policy] sofness=40: unknown key (known in [policy]: softness, manage, dwell_ms, "
     "smoothing, max_holdoff_ms, rebalance, rebalance_window_ms, rebalance_max_moves_per_hour)"},
    {"[policy]\nrebalance=on\n", SA_ERROR_CONFIG, "@: [policy] rebalance=on: not one of auto, off"},
    {"[policy]\nrebalance_window_ms=59999\n", SA_ERROR_CONFIG,
     "@: [policy] rebalance_window_ms=59999: out of range (allowed: 60000-86400000)"},
    {"[policy]\nrebalance_max_moves_per_hour=17\n", SA_ERROR_CONFIG,
     "@: [policy] rebalance_max_moves_per_hour=17: out of range (allowed: 0-16)"},
    {"[daemon]\nlayout=node\n", SA_ERROR_CONFIG,
     "@: [daemon] layout=node: unknown key (known in [daemon]: interval_ms, uri, socket, "
     "backend, command_timeout_ms, stop_timeout_ms)"},
    {"[daemon]\ncommand_timeout_ms=50\n", SA_ERROR_CONFIG,
     "@: [daemon] command_timeout_ms=50: out of range (allowed: 100-60000)"},
    {"[daemon]\nstop_timeout_ms=60001\n", SA_ERROR_CONFIG,
     "@: [daemon] stop_timeout_ms=60001: out of range (allowed: 0-60000)"},
    {"[daemon]\nstop_timeout_ms=5s\n", SA_ERROR_CONFIG,
     "@: [daemon] stop_timeout_ms=5s: not a whole number 0-60000"},
    {"[policy]\nsoftness=1\nsoftness=2\n", SA_ERROR_CONFIG,
     "@: [policy] softness=2: key given more than once in [policy]"},
    /* not a key file */
    {"softness=50\n", SA_ERROR_CONFIG, "@: Key file does not start with a group"},
    {"[policy]\nsoftness\n", SA_ERROR_CONFIG,
     "@: Key file contains line “softness” which is not a key-value pair, group, or comment"},
    {"[policy]\nsoftness=\xff\n", SA_ERROR_CONFIG, "@: line 2: not valid UTF-8"},
    /* [daemon] */
    {"[daemon]\ninterval_ms=abc\n", SA_ERROR_CONFIG,
     "@: [daemon] interval_ms=abc: not a whole number 50-60000"},
    {"[daemon]\ninterval_ms=10\n", SA_ERROR_CONFIG,
     "@: [daemon] interval_ms=10: out of range (allowed: 50-60000)"},
    {"[daemon]\ninterval_ms=60001\n", SA_ERROR_CONFIG,
     "@: [daemon] interval_ms=60001: out of range (allowed: 50-60000)"},
    {"[daemon]\ninterval_ms=99999999999999999999999\n", SA_ERROR_CONFIG,
     "@: [daemon] interval_ms=99999999999999999999999: out of range (allowed: 50-60000)"},
    {"[daemon]\ninterval_ms=-500\n", SA_ERROR_CONFIG,
     "@: [daemon] interval_ms=-500: not a whole number 50-60000"},
    {"[daemon]\ninterval_ms=500ms\n", SA_ERROR_CONFIG,
     "@: [daemon] interval_ms=500ms: not a whole number 50-60000"},
    {"[daemon]\ninterval_ms=\n", SA_ERROR_CONFIG,
     "@: [daemon] interval_ms=: not a whole number 50-60000"},
    {"[daemon]\nuri=\n", SA_ERROR_CONFIG, "@: [daemon] uri=: empty (e.g. qemu:///system)"},
    {"[daemon]\nsocket=softaffd.sock\n", SA_ERROR_CONFIG,
     "@: [daemon] socket=softaffd.sock: not an absolute path"},
    {"[daemon]\nbackend=xen\n", SA_ERROR_CONFIG,
     "@: [daemon] backend=xen: not one of libvirt, qmp, both"},
    {"[daemon]\nbackend=LIBVIRT\n", SA_ERROR_CONFIG,
     "@: [daemon] backend=LIBVIRT: not one of libvirt, qmp, both"},
    /* [partitions] */
    {"[partitions]\nlayout=socket\n", SA_ERROR_CONFIG,
     "@: [partitions] layout=socket: not one of node, llc, custom"},
    {"[partitions]\nlayout=custom\n", SA_ERROR_CONFIG,
     "@: [partitions] layout=custom: needs custom= in [partitions] (e.g. custom=0-15;16-31)"},
    {"[partitions]\ncustom=0-3\n", SA_ERROR_CONFIG,
     "@: [partitions] custom=0-3: only used with layout=custom (layout is node)"},
    {"[partitions]\nlayout=llc\ncustom=0-3\n", SA_ERROR_CONFIG,
     "@: [partitions] custom=0-3: only used with layout=custom (layout is llc)"},
    {"[partitions]\nlayout=custom\ncustom=0-3;2-5\n", SA_ERROR_CONFIG,
     "@: [partitions] custom=0-3;2-5: partitions 0 and 1 overlap on CPUs 2-3"},
    {"[partitions]\nlayout=custom\ncustom=0-3;4-7;8,1\n", SA_ERROR_CONFIG,
     "@: [partitions] custom=0-3;4-7;8,1: partitions 0 and 2 overlap on CPUs 1"},
    {"[partitions]\nlayout=custom\ncustom=0-3;;4-7\n", SA_ERROR_CONFIG,
     "@: [partitions] custom=0-3;;4-7: partition 1 is empty"},
    {"[partitions]\nlayout=custom\ncustom=\n", SA_ERROR_CONFIG,
     "@: [partitions] custom=: no partitions (e.g. custom=0-15;16-31: one cpulist per "
     "partition)"},
    /* [policy] */
    {"[policy]\nsoftness=abc\n", SA_ERROR_CONFIG,
     "@: [policy] softness=abc: not a whole number 0-100"},
    {"[policy]\nsoftness=101\n", SA_ERROR_CONFIG,
     "@: [policy] softness=101: out of range (allowed: 0-100)"},
    {"[policy]\nsoftness=+5\n", SA_ERROR_CONFIG,
     "@: [policy] softness=+5: not a whole number 0-100"},
    {"[policy]\nsoftness=5.5\n", SA_ERROR_CONFIG,
     "@: [policy] softness=5.5: not a whole number 0-100"},
    {"[policy]\nmanage=some\n", SA_ERROR_CONFIG,
     "@: [policy] manage=some: not one of all, explicit"},
    {"[policy]\ndwell_ms=600001\n", SA_ERROR_CONFIG,
     "@: [policy] dwell_ms=600001: out of range (allowed: 0-600000)"},
    {"[policy]\nsmoothing=0\n", SA_ERROR_CONFIG,
     "@: [policy] smoothing=0: out of range (allowed: more than 0, at most 1)"},
    {"[policy]\nsmoothing=1.01\n", SA_ERROR_CONFIG,
     "@: [policy] smoothing=1.01: out of range (allowed: more than 0, at most 1)"},
    {"[policy]\nsmoothing=half\n", SA_ERROR_CONFIG,
     "@: [policy] smoothing=half: not a decimal number (allowed: more than 0, at most 1)"},
    {"[policy]\nsmoothing=nan\n", SA_ERROR_CONFIG,
     "@: [policy] smoothing=nan: not a decimal number (allowed: more than 0, at most 1)"},
    {"[policy]\nsmoothing=1e-1\n", SA_ERROR_CONFIG,
     "@: [policy] smoothing=1e-1: not a decimal number (allowed: more than 0, at most 1)"},
    {"[policy]\nsmoothing=0.5.1\n", SA_ERROR_CONFIG,
     "@: [policy] smoothing=0.5.1: not a decimal number (allowed: more than 0, at most 1)"},
    {"[policy]\nsmoothing=.\n", SA_ERROR_CONFIG,
     "@: [policy] smoothing=.: not a decimal number (allowed: more than 0, at most 1)"},
    {"[policy]\nmax_holdoff_ms=1000\n", SA_ERROR_CONFIG,
     "@: [policy] max_holdoff_ms=1000: less than dwell_ms (2000); the back-off cannot be "
     "shorter than the dwell time"},
    {"[policy]\ndwell_ms=5000\nmax_holdoff_ms=4999\n", SA_ERROR_CONFIG,
     "@: [policy] max_holdoff_ms=4999: less than dwell_ms (5000); the back-off cannot be "
     "shorter than the dwell time"},
    {"[policy]\nmax_holdoff_ms=3600001\n", SA_ERROR_CONFIG,
     "@: [policy] max_holdoff_ms=3600001: out of range (allowed: 0-3600000)"},
    /* [hook] */
    {"[hook]\nstrict=yes\n", SA_ERROR_CONFIG, "@: [hook] strict=yes: not true or false"},
    {"[hook]\nstrict=\n", SA_ERROR_CONFIG, "@: [hook] strict=: not true or false"},
    /* [qmp] */
    {"[qmp]\nsockets=/run/a.qmp;relative/*.qmp\n", SA_ERROR_CONFIG,
     "@: [qmp] sockets=/run/a.qmp;relative/*.qmp: entry 1 \"relative/*.qmp\" is not an "
     "absolute path"},
    {"[qmp]\ntrust_writable_dirs=1\n", SA_ERROR_CONFIG,
     "@: [qmp] trust_writable_dirs=1: not true or false"},
    {"[qmp]\ntrust_writable_dir=true\n", SA_ERROR_CONFIG,
     "@: [qmp] trust_writable_dir=true: unknown key (known in [qmp]: sockets, "
     "trust_writable_dirs)"},
    /* [vm NAME] */
    {"[vm web]\nmode=hard\n", SA_ERROR_CONFIG,
     "@: [vm web] mode=hard: not one of soft, strict, off"},
    {"[vm web]\npreferred=-1\n", SA_ERROR_CONFIG,
     "@: [vm web] preferred=-1: not auto or a partition id (a plain decimal number)"},
    {"[vm web]\npreferred=01\n", SA_ERROR_CONFIG,
     "@: [vm web] preferred=01: not auto or a partition id (a plain decimal number)"},
    {"[vm web]\npreferred=99999999999\n", SA_ERROR_CONFIG,
     "@: [vm web] preferred=99999999999: out of range (allowed: auto or 0-2147483647)"},
    {"[vm web]\nsoftness=101\n", SA_ERROR_CONFIG,
     "@: [vm web] softness=101: out of range (allowed: 0-100)"},
    {"[vm web]\nassigned=1\n", SA_ERROR_CONFIG,
     "@: [vm web] assigned=1: unknown key (known in [vm web]: mode, preferred, softness)"},
    {"[vm ]\nmode=soft\n", SA_ERROR_CONFIG,
     "@: [vm ]: no VM name (e.g. [vm web1], the name given to QEMU with -name)"},
    {"[vm a]\nmode=soft\n[vm  a]\nmode=off\n", SA_ERROR_CONFIG,
     "@: [vm  a]: VM \"a\" configured twice"},
    /* [rule NAME] */
    {"[rule m1-large]\nmatch_flavor=m1.large\nsoftness=150\n", SA_ERROR_CONFIG,
     "@: [rule m1-large] softness=150: out of range (allowed: 0-100)"},
    {"[rule x]\nmode=soft\n", SA_ERROR_CONFIG,
     "@: [rule x]: has no match_* key (allowed: match_name, match_flavor, match_title, "
     "match_description)"},
    {"[rule x]\nmatch_name=\nmode=soft\n", SA_ERROR_CONFIG,
     "@: [rule x] match_name=: empty pattern (a shell glob, e.g. m1.*)"},
    {"[rule x]\nmatch_flavor=m1.*\nmatch_title=  \nmode=soft\n", SA_ERROR_CONFIG,
     "@: [rule x] match_title=: empty pattern (a shell glob, e.g. m1.*)"},
    {"[rule x]\nmatch_description=\nmode=soft\n", SA_ERROR_CONFIG,
     "@: [rule x] match_description=: empty pattern (a shell glob, e.g. m1.*)"},
    {"[rule x]\nmatch_name=web*\n", SA_ERROR_CONFIG,
     "@: [rule x]: sets nothing (needs at least one of mode, preferred, softness)"},
    {"[rule x]\nmatch_name=web*\nmode=hard\n", SA_ERROR_CONFIG,
     "@: [rule x] mode=hard: not one of soft, strict, off"},
    {"[rule x]\nmatch_name=web*\npreferred=-1\n", SA_ERROR_CONFIG,
     "@: [rule x] preferred=-1: not auto or a partition id (a plain decimal number)"},
    {"[rule x]\nmatch_name=web*\nsoftness=soft\n", SA_ERROR_CONFIG,
     "@: [rule x] softness=soft: not a whole number 0-100"},
    {"[rule x]\nmatch_flavour=m1.*\nmode=soft\n", SA_ERROR_CONFIG,
     "@: [rule x] match_flavour=m1.*: unknown key (known in [rule x]: match_name, match_flavor, "
     "match_title, match_description, mode, preferred, softness)"},
    {"[rule x]\nmatch_name=a\nmatch_name=b\nmode=off\n", SA_ERROR_CONFIG,
     "@: [rule x] match_name=b: key given more than once in [rule x]"},
    {"[rule ]\nmatch_name=a\nmode=off\n", SA_ERROR_CONFIG,
     "@: [rule ]: no rule name (e.g. [rule large-flavors])"},
    {"[rule a]\nmatch_name=a\nmode=off\n[rule  a]\nmatch_name=b\nmode=off\n", SA_ERROR_CONFIG,
     "@: [rule  a]: rule \"a\" configured twice"},
    {"[rules a]\nmatch_name=a\n", SA_ERROR_CONFIG,
     "@: [rules a]: unknown group (known: daemon, partitions, policy, hook, qmp, metrics, memory, "
     "sensing, actuation, fleet, vm NAME, rule NAME)"},
    /* [fleet] */
    {"[fleet]\nwindow_s=60\n", SA_ERROR_CONFIG,
     "@: [fleet] window_s=60: out of range (allowed: 600-86400)"},
    {"[fleet]\nquantile=95\n", SA_ERROR_CONFIG,
     "@: [fleet] quantile=95: out of range (allowed: more than 0, at most 1)"},
    {"[fleet]\nquantile=p95\n", SA_ERROR_CONFIG,
     "@: [fleet] quantile=p95: not a decimal number (allowed: more than 0, at most 1)"},
    {"[fleet]\nshapes=small:2\n", SA_ERROR_CONFIG,
     "@: [fleet] shapes=small:2: shape 'small:2': expected NAME:VCPUS:MEMORY_MIB[:CLASS]"},
    {"[fleet]\nshapes=small:2:4096;large:0:32768\n", SA_ERROR_CONFIG,
     "@: [fleet] shapes=small:2:4096;large:0:32768: shape 'large:0:32768': vCPUs '0' not a "
     "number 1-4096"},
    {"[fleet]\nshapes=small:2:4G\n", SA_ERROR_CONFIG,
     "@: [fleet] shapes=small:2:4G: shape 'small:2:4G': memory '4G' not a size in MiB "
     "(1-1073741824)"},
    {"[fleet]\nshapes=a b:2:4096\n", SA_ERROR_CONFIG,
     "@: [fleet] shapes=a b:2:4096: shape 'a b:2:4096': a name or class is letters, digits, "
     "'_', '-' or '.'"},
    {"[fleet]\nshapes=small:2:4096;small:4:8192\n", SA_ERROR_CONFIG,
     "@: [fleet] shapes=small:2:4096;small:4:8192: shape 'small' given twice"},
    {"[fleet]\nstate_file=headroom.json\n", SA_ERROR_CONFIG,
     "@: [fleet] state_file=headroom.json: not an absolute path"},
    {"[fleet]\nsave_interval_s=5\n", SA_ERROR_CONFIG,
     "@: [fleet] save_interval_s=5: out of range (allowed: 60-86400)"},
    {"[fleet]\nwindow=3600\n", SA_ERROR_CONFIG,
     "@: [fleet] window=3600: unknown key (known in [fleet]: window_s, quantile, shapes, "
     "state_file, save_interval_s)"},
    /* [metrics] */
    {"[metrics]\ntextfile=softaff.prom\n", SA_ERROR_CONFIG,
     "@: [metrics] textfile=softaff.prom: not an absolute path"},
    {"[metrics]\nevery=0\n", SA_ERROR_CONFIG,
     "@: [metrics] every=0: out of range (allowed: 1-1000000)"},
    {"[metrics]\nevery=often\n", SA_ERROR_CONFIG,
     "@: [metrics] every=often: not a whole number 1-1000000"},
    /* [memory] */
    {"[memory]\nmigrate=on\n", SA_ERROR_CONFIG, "@: [memory] migrate=on: not one of auto, off"},
    {"[memory]\nrate_mib_s=0\n", SA_ERROR_CONFIG,
     "@: [memory] rate_mib_s=0: out of range (allowed: 1-65536)"},
    {"[memory]\nrate_mib_s=65537\n", SA_ERROR_CONFIG,
     "@: [memory] rate_mib_s=65537: out of range (allowed: 1-65536)"},
    {"[memory]\nrate_mib_s=1.5\n", SA_ERROR_CONFIG,
     "@: [memory] rate_mib_s=1.5: not a whole number 1-65536"},
    {"[memory]\nbind=true\n", SA_ERROR_CONFIG,
     "@: [memory] bind=true: unknown key (known in [memory]: migrate, rate_mib_s)"},
    /* [actuation] */
    {"[actuation]\nmode=scx\n", SA_ERROR_CONFIG,
     "@: [actuation] mode=scx: not one of auto, sched_ext, pin"},
    {"[actuation]\nmode=\n", SA_ERROR_CONFIG,
     "@: [actuation] mode=: not one of auto, sched_ext, pin"},
    {"[actuation]\nsoftness=5\n", SA_ERROR_CONFIG,
     "@: [actuation] softness=5: unknown key (known in [actuation]: mode)"},
    /* [sensing] */
    {"[sensing]\nmode=ebpf\n", SA_ERROR_CONFIG,
     "@: [sensing] mode=ebpf: not one of auto, bpf, proc"},
    {"[sensing]\nwait_threshold_us=99\n", SA_ERROR_CONFIG,
     "@: [sensing] wait_threshold_us=99: out of range (allowed: 100-100000)"},
    {"[sensing]\nwait_threshold_us=100001\nwindow_us=200000\n", SA_ERROR_CONFIG,
     "@: [sensing] wait_threshold_us=100001: out of range (allowed: 100-100000)"},
    {"[sensing]\nwindow_us=999\n", SA_ERROR_CONFIG,
     "@: [sensing] window_us=999: out of range (allowed: 1000-1000000)"},
    {"[sensing]\nwindow_us=1000001\n", SA_ERROR_CONFIG,
     "@: [sensing] window_us=1000001: out of range (allowed: 1000-1000000)"},
    {"[sensing]\nwait_threshold_us=5000\nwindow_us=4000\n", SA_ERROR_CONFIG,
     "@: [sensing] window_us=4000: shorter than wait_threshold_us=5000 (the window must hold the "
     "threshold)"},
    {"[sensing]\nwindow_us=2ms\n", SA_ERROR_CONFIG,
     "@: [sensing] window_us=2ms: not a whole number 1000-1000000"},
    {"[sensing]\nthreshold_us=2000\n", SA_ERROR_CONFIG,
     "@: [sensing] threshold_us=2000: unknown key (known in [sensing]: mode, wait_threshold_us, "
     "window_us)"},
};

static void test_bad_values(Fixture *f, gconstpointer data)
{
    for (gsize i = 0; i < G_N_ELEMENTS(bad_files); i++) {
        g_autofree char *name = g_strdup_printf("bad-%02" G_GSIZE_FORMAT ".conf", i);
        g_autofree char *path = write_conf(f, name, bad_files[i].contents, -1);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

        g_autofree char *shown = g_strescape(bad_files[i].contents, NULL);
        g_test_message("case %" G_GSIZE_FORMAT ": %s", i, shown);
        g_assert_null(cfg);
        g_assert_nonnull(error);
        g_test_message("  -> %s", error->message);
        g_auto(GStrv) parts = g_strsplit(bad_files[i].message, "@", -1);
        g_autofree char *expected = g_strjoinv(path, parts);
        g_assert_error(error, SA_ERROR, bad_files[i].code);
        g_assert_cmpstr(error->message, ==, expected);
    }
}

static void test_socket_too_long(Fixture *f, gconstpointer data)
{
    g_autofree char *longpath = g_strnfill(120, 'x');
    longpath[0] = '/';
    g_autofree char *text = g_strdup_printf("[daemon]\nsocket=%s\n", longpath);
    g_autofree char *path = write_conf(f, "long.conf", text, -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_null(cfg);
    g_assert_error(error, SA_ERROR, SA_ERROR_CONFIG);
    g_autofree char *expected = g_strdup_printf(
        "%s: [daemon] socket=%s: longer than 107 bytes (Unix socket limit)", path, longpath);
    g_assert_cmpstr(error->message, ==, expected);
}

/* Values on the edges that are allowed. */
static void test_good_edges(Fixture *f, gconstpointer data)
{
    static const char text[] = "# comment\n"
                               "[daemon]\n"
                               "interval_ms = 50 \n"
                               "[partitions]\n"
                               "layout=custom\n"
                               "custom= 0-1 ; 2 ;\n"
                               "[policy]\n"
                               "softness=0\n"
                               "dwell_ms=600000\n"
                               "smoothing=1\n"
                               "[qmp]\n"
                               "sockets=\n"
                               "[metrics]\n"
                               "textfile=\n"
                               "every=1000000\n";
    g_autofree char *path = write_conf(f, "edges.conf", text, -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_no_error(error);
    g_assert_cmpuint(cfg->interval_ms, ==, 50);
    g_assert_cmpstr(cfg->custom, ==, "0-1;2");
    g_assert_cmpuint(cfg->policy.softness, ==, 0);
    g_assert_cmpuint(cfg->policy.dwell_ms, ==, 600000);
    /* max_holdoff_ms not given: it follows a dwell time above its default. */
    g_assert_cmpuint(cfg->policy.max_holdoff_ms, ==, 600000);
    g_assert_cmpfloat(cfg->policy.smoothing, ==, 1.0);
    g_assert_nonnull(cfg->qmp_sockets);
    g_assert_null(cfg->qmp_sockets[0]);
    g_assert_null(cfg->metrics_textfile);
    g_assert_cmpuint(cfg->metrics_every, ==, 1000000);

    /* Leading-dot decimals, and the other ends. */
    g_autofree char *path2 = write_conf(
        f, "edges2.conf",
        "[daemon]\ninterval_ms=60000\n[policy]\nsmoothing=.125\nsoftness=100\nstrict=\n", -1);
    g_autoptr(SaConfig) bad = sa_config_load(path2, &error);
    /* "strict" belongs to [hook], not [policy]. */
    g_assert_null(bad);
    g_assert_error(error, SA_ERROR, SA_ERROR_CONFIG);
    g_clear_error(&error);

    g_autofree char *path3 = write_conf(f, "edges3.conf",
                                        "[daemon]\ninterval_ms=60000\n[policy]\nsmoothing=."
                                        "125\nsoftness=100\n[hook]\nstrict=false\n",
                                        -1);
    g_autoptr(SaConfig) cfg3 = sa_config_load(path3, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(cfg3->interval_ms, ==, 60000);
    g_assert_cmpfloat(cfg3->policy.smoothing, ==, 0.125);
    g_assert_cmpuint(cfg3->policy.softness, ==, 100);
    g_assert_false(cfg3->hook_strict);
}

/* [qmp] trust_writable_dirs: false unless set, either way. */
static void test_qmp_trust(Fixture *f, gconstpointer data)
{
    static const struct {
        const char *text;
        bool want;
    } cases[] = {
        {"[qmp]\nsockets=/tmp/*.qmp\n", false},
        {"[qmp]\nsockets=/tmp/*.qmp\ntrust_writable_dirs=true\n", true},
        {"[qmp]\ntrust_writable_dirs=false\n", false},
    };
    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *name = g_strdup_printf("trust%zu.conf", i);
        g_autofree char *path = write_conf(f, name, cases[i].text, -1);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(path, &error);
        g_assert_no_error(error);
        g_assert_cmpint(cfg->qmp_trust_writable_dirs, ==, cases[i].want);
    }
}

/* [vm NAME] groups: settings of QEMU processes found over QMP. */
static void test_vm_groups(Fixture *f, gconstpointer data)
{
    static const char text[] = "[qmp]\n"
                               "sockets=/run/qemu/*.qmp\n"
                               "[vm web1]\n"
                               "mode=strict\n"
                               "preferred=1\n"
                               "softness=20\n"
                               "[vm db]\n"
                               "preferred=auto\n"
                               "[vm /run/qemu/x.qmp]\n"
                               "mode=off\n";
    g_autofree char *path = write_conf(f, "vms.conf", text, -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_no_error(error);
    g_assert_cmpuint(cfg->vms->len, ==, 3);
    const SaVmConfig *web = sa_config_find_vm(cfg, "web1");
    g_assert_nonnull(web);
    g_assert_cmpint(web->mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(web->preferred, ==, 1);
    g_assert_cmpint(web->softness, ==, 20);
    const SaVmConfig *db = sa_config_find_vm(cfg, "db");
    g_assert_nonnull(db);
    g_assert_cmpint(db->mode, ==, SA_MODE_SOFT);
    g_assert_cmpint(db->preferred, ==, -1);
    g_assert_cmpint(db->softness, ==, -1);
    const SaVmConfig *x = sa_config_find_vm(cfg, "/run/qemu/x.qmp");
    g_assert_nonnull(x);
    g_assert_cmpint(x->mode, ==, SA_MODE_OFF);
    g_assert_null(sa_config_find_vm(cfg, "web"));

    g_autoptr(SaConfig) defaults = sa_config_new_default();
    g_assert_cmpuint(defaults->vms->len, ==, 0);
    g_assert_null(sa_config_find_vm(defaults, "web1"));
}

/* A drop-in overrides the keys it sets, one by one; the main file's other keys stay. Drop-ins
 * are read in byte order of their names; only NAME.conf counts, dotfiles do not. */
static void test_dropins_override(Fixture *f, gconstpointer data)
{
    g_autofree char *path = write_conf(f, "softaff.conf",
                                       "[daemon]\ninterval_ms=100\n"
                                       "[policy]\nsoftness=10\ndwell_ms=3000\n",
                                       -1);
    g_autofree char *a = write_dropin(f, "10-a.conf", "[policy]\nsoftness=20\nmanage=explicit\n");
    g_autofree char *b = write_dropin(f, "20-b.conf", "[policy]\nsoftness=30\n");
    /* "9-z" sorts after "20-b" in byte order: it wins, though 9 < 20. */
    g_autofree char *z = write_dropin(f, "9-z.conf", "[policy]\nsoftness=40\n");
    /* Byte order, not the locale's: '1' (0x31) < '9' < 'A' (0x41) < 'a' (0x61). */
    g_autofree char *upper = write_dropin(f, "A.conf", "[daemon]\ninterval_ms=200\n");
    g_autofree char *lower = write_dropin(f, "a.conf", "[daemon]\ninterval_ms=300\n");
    /* Not drop-ins: each would fail the load if it were read. */
    static const char *const ignored[] = {"30-c.conf.bak", "README",    ".40-hidden.conf",
                                          "50-x.conf~",    "#60.conf#", "70.CONF",
                                          "80.conf.swp",   ".conf"};
    for (gsize i = 0; i < G_N_ELEMENTS(ignored); i++)
        g_free(write_dropin(f, ignored[i], "[nope]\nbad=1\n"));

    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(cfg->path, ==, path);
    g_assert_cmpuint(g_strv_length(cfg->dropins), ==, 5);
    g_assert_cmpstr(cfg->dropins[0], ==, a);
    g_assert_cmpstr(cfg->dropins[1], ==, b);
    g_assert_cmpstr(cfg->dropins[2], ==, z);
    g_assert_cmpstr(cfg->dropins[3], ==, upper);
    g_assert_cmpstr(cfg->dropins[4], ==, lower);
    g_assert_cmpuint(cfg->policy.softness, ==, 40);
    g_assert_cmpint(cfg->manage, ==, SA_MANAGE_EXPLICIT);
    g_assert_cmpuint(cfg->policy.dwell_ms, ==, 3000);
    g_assert_cmpuint(cfg->interval_ms, ==, 300);
    /* Untouched by any file. */
    g_assert_cmpstr(cfg->uri, ==, "qemu:///system");

    /* Without the directory there are no drop-ins. */
    g_autofree char *dir = g_build_filename(f->dir, "softaff.conf.d", NULL);
    remove_tree(dir);
    g_autoptr(SaConfig) alone = sa_config_load(path, &error);
    g_assert_no_error(error);
    g_assert_nonnull(alone->dropins);
    g_assert_null(alone->dropins[0]);
    g_assert_cmpuint(alone->policy.softness, ==, 10);
    g_assert_cmpuint(alone->interval_ms, ==, 100);
}

/* Cross-key checks see the merged result; each error names the file that gave the value. */
static void test_dropins_cross_keys(Fixture *f, gconstpointer data)
{
    g_autofree char *path =
        write_conf(f, "softaff.conf", "[partitions]\nlayout=custom\n[policy]\ndwell_ms=500\n", -1);
    g_autofree char *d1 = write_dropin(f, "10-custom.conf", "[partitions]\ncustom=0-1;2-3\n");
    g_autofree char *d2 = write_dropin(f, "20-holdoff.conf", "[policy]\nmax_holdoff_ms=1000\n");
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    /* layout=custom in the main file, custom= in a drop-in: fine together. */
    g_assert_no_error(error);
    g_assert_cmpint(cfg->layout, ==, SA_LAYOUT_CUSTOM);
    g_assert_cmpstr(cfg->custom, ==, "0-1;2-3");
    g_assert_cmpuint(cfg->policy.max_holdoff_ms, ==, 1000);

    /* A later drop-in sets layout=node: custom= (from 10-custom.conf) is now the mistake. */
    g_autofree char *d3 = write_dropin(f, "30-node.conf", "[partitions]\nlayout=node\n");
    g_autoptr(SaConfig) bad = sa_config_load(path, &error);
    g_assert_null(bad);
    g_autofree char *want =
        g_strdup_printf("%s: [partitions] custom=0-1;2-3: only used with layout=custom (layout "
                        "is node)",
                        d1);
    g_assert_cmpstr(error->message, ==, want);
    g_clear_error(&error);

    /* A later drop-in raises dwell_ms above the back-off 20-holdoff.conf set: its file is named. */
    g_assert_cmpint(g_unlink(d3), ==, 0);
    g_autofree char *d4 = write_dropin(f, "40-dwell.conf", "[policy]\ndwell_ms=5000\n");
    g_autoptr(SaConfig) bad2 = sa_config_load(path, &error);
    g_assert_null(bad2);
    g_autofree char *want2 = g_strdup_printf(
        "%s: [policy] max_holdoff_ms=1000: less than dwell_ms (5000); the back-off cannot be "
        "shorter than the dwell time",
        d2);
    g_assert_cmpstr(error->message, ==, want2);
}

/* An error in a drop-in names the drop-in, with group, key and value. */
static void test_dropin_errors(Fixture *f, gconstpointer data)
{
    static const struct {
        const char *contents;
        const char *message; /* "@": the drop-in's path */
    } cases[] = {
        {"[policy]\nsoftness=101\n", "@: [policy] softness=101: out of range (allowed: 0-100)"},
        {"[policy]\nsofness=4\n",
         "@: [policy] sofness=4: unknown key (known in [policy]: softness, manage, dwell_ms, "
         "smoothing, max_holdoff_ms, rebalance, rebalance_window_ms, "
         "rebalance_max_moves_per_hour)"},
        {"[policy]\nsoftness=1\nsoftness=2\n",
         "@: [policy] softness=2: key given more than once in [policy]"},
        {"[polcy]\nsoftness=1\n", "@: [polcy]: unknown group (known: daemon, partitions, policy, "
                                  "hook, qmp, metrics, memory, sensing, actuation, "
                                  "fleet, vm NAME, rule NAME)"},
        {"softness=1\n", "@: Key file does not start with a group"},
        {"[vm web]\nmode=hard\n", "@: [vm web] mode=hard: not one of soft, strict, off"},
        {"[rule big]\nmode=off\n",
         "@: [rule big]: has no match_* key (allowed: match_name, match_flavor, match_title, "
         "match_description)"},
        {"[rule m1]\nsoftness=150\n", "@: [rule m1] softness=150: out of range (allowed: 0-100)"},
    };
    g_autofree char *path =
        write_conf(f, "softaff.conf", "[rule m1]\nmatch_flavor=m1.*\nmode=soft\n", -1);
    g_free(write_dropin(f, "00-good.conf", "[policy]\nsoftness=3\n"));

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autofree char *dropin = write_dropin(f, "50-bad.conf", cases[i].contents);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(path, &error);
        g_test_message("case %" G_GSIZE_FORMAT ": %s", i, error ? error->message : "(loaded)");
        g_assert_null(cfg);
        g_assert_error(error, SA_ERROR, SA_ERROR_CONFIG);
        g_auto(GStrv) parts = g_strsplit(cases[i].message, "@", -1);
        g_autofree char *expected = g_strjoinv(dropin, parts);
        g_assert_cmpstr(error->message, ==, expected);
    }
}

/* [rule NAME] groups: every key, defaults of the unset ones, file order. */
static void test_rules(Fixture *f, gconstpointer data)
{
    static const char text[] = "[rule m1-large]\n"
                               "match_flavor=m1.large*\n"
                               "mode=strict\n"
                               "preferred=1\n"
                               "softness=20\n"
                               "[rule web]\n"
                               "match_name=web-*\n"
                               "match_title= Web [0-9]* \n"
                               "match_description=*frontend*\n"
                               "preferred=auto\n"
                               "[rule quiet]\n"
                               "match_name=batch?\n"
                               "softness=0\n";
    g_autofree char *path = write_conf(f, "softaff.conf", text, -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_no_error(error);
    g_assert_cmpuint(cfg->rules->len, ==, 3);
    const SaRule *r = g_ptr_array_index(cfg->rules, 0);
    g_assert_cmpstr(r->name, ==, "m1-large");
    g_assert_cmpstr(r->file, ==, path);
    g_assert_cmpstr(r->match_flavor, ==, "m1.large*");
    g_assert_null(r->match_name);
    g_assert_null(r->match_title);
    g_assert_null(r->match_description);
    g_assert_true(r->has_mode);
    g_assert_cmpint(r->mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(r->preferred, ==, 1);
    g_assert_cmpstr(r->preferred_file, ==, path);
    g_assert_cmpint(r->softness, ==, 20);

    r = g_ptr_array_index(cfg->rules, 1);
    g_assert_cmpstr(r->name, ==, "web");
    g_assert_cmpstr(r->match_name, ==, "web-*");
    g_assert_cmpstr(r->match_title, ==, "Web [0-9]*");
    g_assert_cmpstr(r->match_description, ==, "*frontend*");
    g_assert_null(r->match_flavor);
    g_assert_false(r->has_mode);
    g_assert_cmpint(r->preferred, ==, -1);
    g_assert_cmpint(r->softness, ==, -1);

    r = g_ptr_array_index(cfg->rules, 2);
    g_assert_cmpstr(r->name, ==, "quiet");
    g_assert_false(r->has_mode);
    g_assert_cmpint(r->preferred, ==, -2);
    g_assert_null(r->preferred_file);
    g_assert_cmpint(r->softness, ==, 0);

    g_autoptr(SaConfig) defaults = sa_config_new_default();
    g_assert_cmpuint(defaults->rules->len, ==, 0);
}

/* A rule in a later file overrides the same rule's keys and keeps its place; new rules come
 * after, in file order. */
static void test_rule_merge(Fixture *f, gconstpointer data)
{
    g_autofree char *path = write_conf(f, "softaff.conf",
                                       "[rule a]\nmatch_flavor=m1.*\nsoftness=10\n"
                                       "[rule b]\nmatch_name=web*\nmode=strict\n",
                                       -1);
    g_autofree char *d1 = write_dropin(f, "10-fleet.conf",
                                       "[rule c]\nmatch_title=x\nmode=off\n"
                                       "[rule a]\nsoftness=20\npreferred=1\n");
    g_autofree char *d2 = write_dropin(f, "20-site.conf",
                                       "[rule d]\nmatch_name=d*\nsoftness=5\n"
                                       "[rule b]\nmatch_name=db*\n");
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

    g_assert_no_error(error);
    g_assert_cmpuint(cfg->rules->len, ==, 4);
    static const char *const order[] = {"a", "b", "c", "d"};
    for (guint i = 0; i < G_N_ELEMENTS(order); i++)
        g_assert_cmpstr(((SaRule *)g_ptr_array_index(cfg->rules, i))->name, ==, order[i]);
    const SaRule *a = g_ptr_array_index(cfg->rules, 0);
    g_assert_cmpstr(a->file, ==, path);
    g_assert_cmpstr(a->match_flavor, ==, "m1.*");
    g_assert_cmpint(a->softness, ==, 20);
    g_assert_cmpint(a->preferred, ==, 1);
    g_assert_cmpstr(a->preferred_file, ==, d1);
    const SaRule *b = g_ptr_array_index(cfg->rules, 1);
    g_assert_cmpstr(b->file, ==, path);
    g_assert_cmpstr(b->match_name, ==, "db*");
    g_assert_true(b->has_mode);
    g_assert_cmpint(b->mode, ==, SA_MODE_STRICT);
    const SaRule *c = g_ptr_array_index(cfg->rules, 2);
    g_assert_cmpstr(c->file, ==, d1);
    const SaRule *d = g_ptr_array_index(cfg->rules, 3);
    g_assert_cmpstr(d->file, ==, d2);

    /* [vm NAME] groups merge the same way. */
    g_autofree char *d3 = write_dropin(f, "30-vm.conf", "[vm web]\nsoftness=7\n");
    g_autofree char *d4 = write_dropin(f, "40-vm.conf", "[vm web]\nmode=off\n");
    g_autoptr(SaConfig) cfg2 = sa_config_load(path, &error);
    g_assert_no_error(error);
    const SaVmConfig *vc = sa_config_find_vm(cfg2, "web");
    g_assert_nonnull(vc);
    g_assert_cmpint(vc->softness, ==, 7);
    g_assert_cmpint(vc->mode, ==, SA_MODE_OFF);
}

/* A rule's preferred must name a partition of the host (the fixture's 4 nodes: 0-3); the
 * error names the file that set preferred. */
static void test_rule_host_check(Fixture *f, gconstpointer data)
{
    g_autofree char *root =
        g_build_filename(g_getenv("SOFTAFF_TEST_DATA"), "epyc-4n-2llc", "sys", NULL);
    g_autoptr(GError) error = NULL;
    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
    g_autoptr(SaTopology) topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);

    g_autofree char *path = write_conf(f, "softaff.conf",
                                       "[rule a]\nmatch_flavor=m1.*\npreferred=3\n"
                                       "[rule b]\nmatch_name=x\npreferred=auto\n",
                                       -1);
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);
    g_assert_no_error(error);
    g_assert_true(sa_config_check_host(cfg, topo, &error));
    g_assert_no_error(error);

    g_autofree char *dropin = write_dropin(f, "10-x.conf", "[rule a]\npreferred=4\n");
    g_autoptr(SaConfig) cfg2 = sa_config_load(path, &error);
    g_assert_no_error(error);
    g_assert_false(sa_config_check_host(cfg2, topo, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_CONFIG);
    g_autofree char *want = g_strdup_printf("%s: [rule a] preferred=4: names no partition of this "
                                            "host (partitions of layout node: 0, 1, 2, 3)",
                                            dropin);
    g_assert_cmpstr(error->message, ==, want);
}

/* Everything but where it came from: path, drop-ins, rule files. */
static void assert_same_config(const SaConfig *a, const SaConfig *b)
{
    g_assert_cmpuint(a->interval_ms, ==, b->interval_ms);
    g_assert_cmpstr(a->uri, ==, b->uri);
    g_assert_cmpstr(a->socket, ==, b->socket);
    g_assert_cmpint(a->backend, ==, b->backend);
    g_assert_cmpuint(a->command_timeout_ms, ==, b->command_timeout_ms);
    g_assert_cmpuint(a->stop_timeout_ms, ==, b->stop_timeout_ms);
    g_assert_cmpint(a->layout, ==, b->layout);
    g_assert_cmpstr(a->custom, ==, b->custom);
    g_assert_cmpuint(a->policy.softness, ==, b->policy.softness);
    g_assert_cmpuint(a->policy.dwell_ms, ==, b->policy.dwell_ms);
    g_assert_cmpfloat(a->policy.smoothing, ==, b->policy.smoothing);
    g_assert_cmpuint(a->policy.max_holdoff_ms, ==, b->policy.max_holdoff_ms);
    g_assert_cmpint(a->manage, ==, b->manage);
    g_assert_cmpint(a->hook_strict, ==, b->hook_strict);
    g_assert_cmpuint(g_strv_length(a->qmp_sockets), ==, g_strv_length(b->qmp_sockets));
    for (guint i = 0; a->qmp_sockets[i] != NULL; i++)
        g_assert_cmpstr(a->qmp_sockets[i], ==, b->qmp_sockets[i]);
    g_assert_cmpint(a->qmp_trust_writable_dirs, ==, b->qmp_trust_writable_dirs);
    g_assert_cmpstr(a->metrics_textfile, ==, b->metrics_textfile);
    g_assert_cmpuint(a->metrics_every, ==, b->metrics_every);
    g_assert_cmpint(a->memory_migrate, ==, b->memory_migrate);
    g_assert_cmpuint(a->memory_rate_mib_s, ==, b->memory_rate_mib_s);
    g_assert_cmpint(a->sensing_mode, ==, b->sensing_mode);
    g_assert_cmpuint(a->sensing_threshold_us, ==, b->sensing_threshold_us);
    g_assert_cmpuint(a->sensing_window_us, ==, b->sensing_window_us);
    g_assert_cmpuint(a->vms->len, ==, b->vms->len);
    for (guint i = 0; i < a->vms->len; i++) {
        const SaVmConfig *x = g_ptr_array_index(a->vms, i), *y = g_ptr_array_index(b->vms, i);
        g_assert_cmpstr(x->name, ==, y->name);
        g_assert_cmpint(x->mode, ==, y->mode);
        g_assert_cmpint(x->preferred, ==, y->preferred);
        g_assert_cmpint(x->softness, ==, y->softness);
    }
    g_assert_cmpuint(a->rules->len, ==, b->rules->len);
    for (guint i = 0; i < a->rules->len; i++) {
        const SaRule *x = g_ptr_array_index(a->rules, i), *y = g_ptr_array_index(b->rules, i);
        g_assert_cmpstr(x->name, ==, y->name);
        g_assert_cmpstr(x->match_name, ==, y->match_name);
        g_assert_cmpstr(x->match_flavor, ==, y->match_flavor);
        g_assert_cmpstr(x->match_title, ==, y->match_title);
        g_assert_cmpstr(x->match_description, ==, y->match_description);
        g_assert_cmpint(x->has_mode, ==, y->has_mode);
        if (x->has_mode)
            g_assert_cmpint(x->mode, ==, y->mode);
        g_assert_cmpint(x->preferred, ==, y->preferred);
        g_assert_cmpint(x->softness, ==, y->softness);
    }
}

/* Loads path, writes sa_config_to_keyfile's text, loads that: the same configuration. */
static void assert_round_trip(Fixture *f, const char *path, const char *copy_name)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);
    g_assert_no_error(error);
    g_autofree char *text = sa_config_to_keyfile(cfg);
    g_test_message("%s", text);
    g_autofree char *copy = write_conf(f, copy_name, text, -1);
    g_autoptr(SaConfig) again = sa_config_load(copy, &error);
    g_assert_no_error(error);
    assert_same_config(cfg, again);
    /* And the text is a fixed point. */
    g_autofree char *text2 = sa_config_to_keyfile(again);
    g_autofree char *header = g_strdup_printf("# read: %s\n", copy);
    g_assert_true(g_str_has_prefix(text2, header));
}

/* [memory]: both values, the edges, and a round trip through sa_config_to_keyfile. */
static void test_memory(Fixture *f, gconstpointer data)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *off =
        write_conf(f, "memory-off.conf", "[memory]\nmigrate=off\nrate_mib_s=1\n", -1);
    g_autoptr(SaConfig) a = sa_config_load(off, &error);
    g_assert_no_error(error);
    g_assert_false(a->memory_migrate);
    g_assert_cmpuint(a->memory_rate_mib_s, ==, 1);
    assert_round_trip(f, off, "copy-memory-off.conf");

    g_autofree char *fast =
        write_conf(f, "memory-fast.conf", "[memory]\nmigrate = auto \nrate_mib_s=65536\n", -1);
    g_autoptr(SaConfig) b = sa_config_load(fast, &error);
    g_assert_no_error(error);
    g_assert_true(b->memory_migrate);
    g_assert_cmpuint(b->memory_rate_mib_s, ==, 65536);
    g_autofree char *text = sa_config_to_keyfile(b);
    g_assert_nonnull(strstr(text, "\n[memory]\nmigrate=auto\nrate_mib_s=65536\n"));
}

/* [sensing]: every mode, the edges (a window equal to the threshold is allowed), a round trip. */
static void test_sensing(Fixture *f, gconstpointer data)
{
    static const char *const modes[] = {"auto", "bpf", "proc"};

    for (guint i = 0; i < G_N_ELEMENTS(modes); i++) {
        g_autofree char *text = g_strdup_printf(
            "[sensing]\nmode = %s \nwait_threshold_us=100000\nwindow_us=100000\n", modes[i]);
        g_autofree char *name = g_strdup_printf("sensing-%s.conf", modes[i]);
        g_autofree char *copy = g_strdup_printf("copy-sensing-%s.conf", modes[i]);
        g_autofree char *path = write_conf(f, name, text, -1);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

        g_assert_no_error(error);
        g_assert_cmpint(cfg->sensing_mode, ==, (SaSensingMode)i);
        g_assert_cmpstr(sa_sensing_mode_to_string(cfg->sensing_mode), ==, modes[i]);
        g_assert_cmpuint(cfg->sensing_threshold_us, ==, 100000);
        g_assert_cmpuint(cfg->sensing_window_us, ==, 100000);
        assert_round_trip(f, path, copy);
    }

    g_autofree char *low =
        write_conf(f, "sensing-low.conf", "[sensing]\nwait_threshold_us=100\nwindow_us=1000\n", -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(low, &error);
    g_assert_no_error(error);
    g_autofree char *text = sa_config_to_keyfile(cfg);
    g_assert_nonnull(
        strstr(text, "\n[sensing]\nmode=auto\nwait_threshold_us=100\nwindow_us=1000\n"));
}

/* [actuation]: every mode, its name back, a round trip. */
static void test_actuation(Fixture *f, gconstpointer data)
{
    static const char *const modes[] = {"auto", "sched_ext", "pin"};

    for (guint i = 0; i < G_N_ELEMENTS(modes); i++) {
        g_autofree char *text = g_strdup_printf("[actuation]\nmode = %s \n", modes[i]);
        g_autofree char *name = g_strdup_printf("actuation-%s.conf", modes[i]);
        g_autofree char *copy = g_strdup_printf("copy-actuation-%s.conf", modes[i]);
        g_autofree char *path = write_conf(f, name, text, -1);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaConfig) cfg = sa_config_load(path, &error);

        g_assert_no_error(error);
        g_assert_cmpint(cfg->actuation_mode, ==, (SaActuationMode)i);
        g_assert_cmpstr(sa_actuation_mode_to_string(cfg->actuation_mode), ==, modes[i]);
        g_autofree char *back = sa_config_to_keyfile(cfg);
        g_autofree char *want = g_strdup_printf("\n[actuation]\nmode=%s\n", modes[i]);
        g_assert_nonnull(strstr(back, want));
        assert_round_trip(f, path, copy);
    }
}

/* [fleet]: defaults, every key, shapes with and without a class, a round trip. */
static void test_fleet(Fixture *f, gconstpointer data)
{
    g_autoptr(SaConfig) defaults = sa_config_new_default();
    g_assert_cmpuint(defaults->fleet_window_s, ==, 3600);
    g_assert_cmpfloat(defaults->fleet_quantile, ==, 0.95);
    g_assert_cmpuint(defaults->fleet_shapes->len, ==, 0);
    g_assert_cmpstr(defaults->fleet_state_file, ==, "/var/lib/softaff/headroom.json");
    g_assert_cmpuint(defaults->fleet_save_interval_s, ==, 300);

    g_autofree char *path = write_conf(f, "fleet.conf",
                                       "[fleet]\nwindow_s=600\nquantile=.5\n"
                                       "shapes= small:2:4096 ; large:8:32768:m1.large;\n"
                                       "state_file=/tmp/x/headroom.json\nsave_interval_s=60\n",
                                       -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(path, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(cfg->fleet_window_s, ==, 600);
    g_assert_cmpfloat(cfg->fleet_quantile, ==, 0.5);
    g_assert_cmpuint(cfg->fleet_shapes->len, ==, 2);
    const SaShape *small = g_ptr_array_index(cfg->fleet_shapes, 0);
    const SaShape *large = g_ptr_array_index(cfg->fleet_shapes, 1);
    g_assert_cmpstr(small->name, ==, "small");
    g_assert_cmpuint(small->vcpus, ==, 2);
    g_assert_cmpuint(small->memory_mib, ==, 4096);
    g_assert_cmpstr(small->class_name, ==, "small");
    g_assert_cmpstr(large->class_name, ==, "m1.large");
    g_assert_cmpstr(cfg->fleet_state_file, ==, "/tmp/x/headroom.json");
    g_assert_cmpuint(cfg->fleet_save_interval_s, ==, 60);
    g_autofree char *text = sa_config_to_keyfile(cfg);
    g_assert_nonnull(strstr(text, "\n[fleet]\nwindow_s=600\nquantile=0.5\n"
                                  "shapes=small:2:4096;large:8:32768:m1.large;\n"
                                  "state_file=/tmp/x/headroom.json\nsave_interval_s=60\n"));
    assert_round_trip(f, path, "copy-fleet.conf");

    /* An empty state_file: not saved. */
    g_autofree char *off = write_conf(f, "fleet-off.conf", "[fleet]\nstate_file=\n", -1);
    g_autoptr(SaConfig) c2 = sa_config_load(off, &error);
    g_assert_no_error(error);
    g_assert_null(c2->fleet_state_file);
    assert_round_trip(f, off, "copy-fleet-off.conf");
}

static void test_to_keyfile(Fixture *f, gconstpointer data)
{
    /* Every key set; the merged main file and drop-ins, with rules and VMs. */
    g_autofree char *every = data_path("every-key.conf");
    assert_round_trip(f, every, "copy-every.conf");

    g_autoptr(SaConfig) defaults = sa_config_new_default();
    g_autofree char *text = sa_config_to_keyfile(defaults);
    g_assert_true(g_str_has_prefix(text, "# read: nothing (the defaults)\n"));
    g_autofree char *dpath = write_conf(f, "copy-defaults.conf", text, -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) dcfg = sa_config_load(dpath, &error);
    g_assert_no_error(error);
    assert_same_config(defaults, dcfg);

    g_autofree char *dir = g_build_filename(f->dir, "sub", NULL);
    g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
    g_autofree char *path =
        write_conf(f, "sub/softaff.conf",
                   "[policy]\nsmoothing=0.1\ndwell_ms=40000\n[daemon]\nsocket=/run/a b;c.sock\n"
                   "[qmp]\nsockets=/run/x\\;y/*.qmp;/run/z\\\\*.qmp\n"
                   "[vm web]\n[vm db]\nmode=strict\npreferred=2\nsoftness=0\n"
                   "[rule m1]\nmatch_flavor=m1.*\nsoftness=20\n",
                   -1);
    g_autofree char *dropdir = g_build_filename(dir, "softaff.conf.d", NULL);
    g_assert_cmpint(g_mkdir(dropdir, 0755), ==, 0);
    g_autofree char *dropin =
        write_conf(f, "sub/softaff.conf.d/10-fleet.conf",
                   "[policy]\nsmoothing=0.0000001\n[rule m1]\npreferred=auto\nmode=off\n"
                   "[rule web]\nmatch_name= web#1 \nmatch_title=a=b\nmatch_description=x\\ty\n"
                   "mode=soft\n",
                   -1);
    assert_round_trip(f, path, "copy-merged.conf");

    g_autoptr(SaConfig) merged = sa_config_load(path, &error);
    g_assert_no_error(error);
    g_autofree char *mtext = sa_config_to_keyfile(merged);
    g_autofree char *header = g_strdup_printf("# read: %s\n# read: %s\n", path, dropin);
    g_assert_true(g_str_has_prefix(mtext, header));
    g_assert_nonnull(strstr(mtext, "\nsmoothing=0.0000001\n"));
    g_assert_nonnull(strstr(mtext, "\nmax_holdoff_ms=40000\n"));
    g_assert_nonnull(strstr(mtext, "\n[rule m1]\nmatch_flavor=m1.*\nmode=off\npreferred=auto\n"
                                   "softness=20\n"));
}

/* Every file in tests/data/config/bad-*.conf fails, and names its file. */
static void test_data_bad_files(void)
{
    const char *dir_path = g_getenv("SOFTAFF_TEST_DATA");
    g_autofree char *config_dir = g_build_filename(dir_path, "config", NULL);
    g_autoptr(GError) error = NULL;
    g_autoptr(GDir) dir = g_dir_open(config_dir, 0, &error);
    const char *name;
    guint n = 0;

    g_assert_no_error(error);
    while ((name = g_dir_read_name(dir)) != NULL) {
        if (!g_str_has_prefix(name, "bad-"))
            continue;
        g_autofree char *path = g_build_filename(config_dir, name, NULL);
        g_autoptr(SaConfig) cfg = sa_config_load(path, &error);
        g_test_message("%s: %s", name, error != NULL ? error->message : "(loaded)");
        g_assert_null(cfg);
        g_assert_error(error, SA_ERROR, SA_ERROR_CONFIG);
        g_assert_true(g_str_has_prefix(error->message, path));
        g_clear_error(&error);
        n++;
    }
    g_assert_cmpuint(n, >=, 1);
}

#define ADD(name, fn) g_test_add(name, Fixture, NULL, fixture_setup, fn, fixture_teardown)

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/config/defaults", test_defaults);
    g_test_add_func("/config/strings", test_strings);
    ADD("/config/every-key", test_every_key);
    ADD("/config/memory", test_memory);
    ADD("/config/sensing", test_sensing);
    ADD("/config/actuation", test_actuation);
    ADD("/config/contrib-example", test_contrib_example);
    ADD("/config/contrib-rules", test_contrib_rules);
    ADD("/config/empty-file", test_empty_file);
    ADD("/config/missing-explicit", test_missing_explicit);
    ADD("/config/env-override", test_env_override);
    ADD("/config/default-path", test_default_path);
    ADD("/config/not-a-file", test_not_a_file);
    ADD("/config/bad-values", test_bad_values);
    ADD("/config/socket-too-long", test_socket_too_long);
    ADD("/config/good-edges", test_good_edges);
    ADD("/config/vm-groups", test_vm_groups);
    ADD("/config/qmp-trust", test_qmp_trust);
    ADD("/config/dropins-override", test_dropins_override);
    ADD("/config/dropins-cross-keys", test_dropins_cross_keys);
    ADD("/config/dropin-errors", test_dropin_errors);
    ADD("/config/rules", test_rules);
    ADD("/config/rule-merge", test_rule_merge);
    ADD("/config/rule-host-check", test_rule_host_check);
    ADD("/config/to-keyfile", test_to_keyfile);
    ADD("/config/fleet", test_fleet);
    g_test_add_func("/config/data-bad-files", test_data_bad_files);

    return g_test_run();
}
