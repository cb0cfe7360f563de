/* Unit tests of host/topology.c against the fixture sysfs trees in tests/data/<machine>/sys.
 *
 * Every machine × layout is compared with tests/data/<machine>/expected-<layout>.txt; a layout
 * that a machine cannot give has the expected error there instead ("error: ..."). Run with
 * SOFTAFF_REGENERATE_GOLDEN=1 to rewrite the goldens, then review the diff. */
#define G_LOG_DOMAIN "test-topology"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "sa-error.h"
#include "sa-paths.h"
#include "sa-topology.h"

static const char *const machines[] = {
    "this-host", "intel-2s22c-smt", "epyc-4n-2llc", "sparse-8n", "no-l3-4c",
};

static const char *data_dir(void)
{
    const char *dir = g_getenv("SOFTAFF_TEST_DATA");

    g_assert_nonnull(dir);
    return dir;
}

static char *use_machine(const char *machine)
{
    char *root = g_build_filename(data_dir(), machine, "sys", NULL);

    g_assert_true(g_file_test(root, G_FILE_TEST_IS_DIR));
    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
    return root;
}

static SaTopology *load_ok(const char *machine, SaLayout layout, const char *custom)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = use_machine(machine);
    SaTopology *topo = sa_topology_load(layout, custom, &error);

    g_assert_no_error(error);
    g_assert_nonnull(topo);
    return topo;
}

static GError *load_error(const char *machine, SaLayout layout, const char *custom)
{
    GError *error = NULL;
    g_autofree char *root = use_machine(machine);
    g_autoptr(SaTopology) topo = sa_topology_load(layout, custom, &error);

    g_assert_null(topo);
    g_assert_nonnull(error);
    return error;
}

static char *replace_all(const char *text, const char *what, const char *with)
{
    g_auto(GStrv) parts = g_strsplit(text, what, -1);

    return g_strjoinv(with, parts);
}

static char *custom_spec(const char *machine)
{
    g_autofree char *path = g_build_filename(data_dir(), machine, "custom", NULL);
    char *text = NULL;

    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    return g_strstrip(text);
}

/* The describe output, or "error: ..." with the fixture root written as $SYSFS. */
static char *describe_or_error(const char *machine, SaLayout layout, const char *custom)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = use_machine(machine);
    g_autoptr(SaTopology) topo = sa_topology_load(layout, custom, &error);
    g_autofree char *message = NULL;

    if (topo != NULL)
        return sa_topology_describe(topo);
    message = replace_all(error->message, root, "$SYSFS");
    return g_strdup_printf("error: %s\n", message);
}

static void test_golden(gconstpointer data)
{
    const char *machine = data;
    bool regenerate = g_strcmp0(g_getenv("SOFTAFF_REGENERATE_GOLDEN"), "1") == 0;
    g_autofree char *custom = custom_spec(machine);

    for (SaLayout layout = SA_LAYOUT_NODE; layout <= SA_LAYOUT_CUSTOM; layout++) {
        g_autofree char *name = NULL;
        g_autofree char *path = NULL;
        g_autofree char *got = NULL;
        g_autofree char *want = NULL;
        g_autoptr(GError) error = NULL;

        if (layout == SA_LAYOUT_CUSTOM && custom == NULL)
            continue;
        name = g_strdup_printf("expected-%s.txt", sa_layout_to_string(layout));
        path = g_build_filename(data_dir(), machine, name, NULL);
        got = describe_or_error(machine, layout, layout == SA_LAYOUT_CUSTOM ? custom : NULL);
        if (regenerate) {
            g_file_set_contents(path, got, -1, &error);
            g_assert_no_error(error);
            g_test_message("rewrote %s", path);
            continue;
        }
        g_file_get_contents(path, &want, NULL, &error);
        g_assert_no_error(error);
        if (strcmp(got, want) != 0)
            g_test_message("%s differs; got:\n%s", path, got);
        g_assert_cmpstr(got, ==, want);
    }
}

static const SaPartition *part_at(const SaTopology *topo, guint idx)
{
    g_assert_cmpuint(idx, <, topo->partitions->len);
    return g_ptr_array_index(topo->partitions, idx);
}

/* Compares (and frees) a string made by the code under test. */
static void assert_made(char *made, const char *want)
{
    g_autofree char *got = made;

    g_assert_cmpstr(got, ==, want);
}

static void assert_cpus(const SaCpuSet *set, const char *want)
{
    assert_made(sa_cpuset_format(set), want);
}

static void test_intel(void)
{
    g_autoptr(SaTopology) node = load_ok("intel-2s22c-smt", SA_LAYOUT_NODE, NULL);
    g_autoptr(SaTopology) llc = load_ok("intel-2s22c-smt", SA_LAYOUT_LLC, NULL);

    g_assert_cmpuint(node->partitions->len, ==, 2);
    assert_cpus(part_at(node, 0)->cpus, "0-21,44-65");
    assert_cpus(part_at(node, 1)->cpus, "22-43,66-87");
    g_assert_cmpint(sa_topology_partition_of_cpu(node, 44), ==, 0);
    g_assert_cmpint(sa_topology_partition_of_cpu(node, 22), ==, 1);
    g_assert_cmpint(sa_topology_partition_of_cpu(node, 87), ==, 1);
    g_assert_cmpint(sa_topology_partition_of_cpu(node, 88), ==, -1);
    g_assert_cmpint(sa_topology_partition_of_cpu(node, 5000), ==, -1);
    g_assert_cmpuint(sa_topology_partition_distance(node, 0, 1), ==, 21);
    g_assert_cmpuint(sa_topology_partition_distance(node, 1, 1), ==, 0);
    g_assert_cmpuint(((SaNode *)g_ptr_array_index(node->nodes, 0))->mem_total, ==,
                     G_GUINT64_CONSTANT(98304000) * 1024);
    g_assert_true(sa_cpuset_is_empty(node->unplaced));
    g_assert_null(node->note);

    /* One L3 per socket: the same sets, ids from the cache id files. */
    g_assert_cmpuint(llc->partitions->len, ==, 2);
    g_assert_cmpuint(part_at(llc, 1)->id, ==, 1);
    g_assert_true(sa_cpuset_equal(part_at(llc, 0)->cpus, part_at(node, 0)->cpus));
    g_assert_true(sa_cpuset_equal(part_at(llc, 1)->cpus, part_at(node, 1)->cpus));
    g_assert_cmpint(part_at(llc, 1)->node, ==, 1);
    g_assert_cmpuint(sa_topology_partition_distance(llc, 0, 1), ==, 21);
}

static void test_epyc(void)
{
    g_autoptr(SaTopology) llc = load_ok("epyc-4n-2llc", SA_LAYOUT_LLC, NULL);
    g_autoptr(SaTopology) node = load_ok("epyc-4n-2llc", SA_LAYOUT_NODE, NULL);

    g_assert_cmpuint(node->partitions->len, ==, 4);
    g_assert_cmpuint(llc->partitions->len, ==, 8);
    for (guint i = 0; i < 8; i++) {
        g_assert_cmpuint(part_at(llc, i)->id, ==, i);
        g_assert_cmpuint(sa_cpuset_count(part_at(llc, i)->cpus), ==, 8);
        g_assert_cmpint(part_at(llc, i)->node, ==, (int)i / 2);
    }
    assert_cpus(part_at(llc, 1)->cpus, "4-7,36-39");
    g_assert_cmpint(sa_topology_partition_of_cpu(llc, 37), ==, 1);
    /* Two LLCs of one node are 10 apart; then the node distances. */
    g_assert_cmpuint(sa_topology_partition_distance(llc, 0, 1), ==, 10);
    g_assert_cmpuint(sa_topology_partition_distance(llc, 0, 2), ==, 12);
    g_assert_cmpuint(sa_topology_partition_distance(llc, 0, 7), ==, 32);
    g_assert_cmpuint(sa_topology_partition_distance(llc, 6, 7), ==, 10);
    g_assert_cmpint(sa_topology_find_partition(llc, 7), ==, 7);
    g_assert_cmpint(sa_topology_find_partition(llc, 8), ==, -1);
}

static void test_sparse(void)
{
    g_autoptr(SaTopology) node = load_ok("sparse-8n", SA_LAYOUT_NODE, NULL);
    g_autoptr(SaTopology) llc = load_ok("sparse-8n", SA_LAYOUT_LLC, NULL);
    static const guint node_ids[] = {0, 1, 2, 3, 5, 6, 8};
    static const guint llc_ids[] = {0, 4, 8, 12, 20, 24, 28};
    const SaNode *n4;
    int idx;

    /* Sparse node ids kept; the memory-only node 4 is a node but not a partition. */
    g_assert_cmpuint(node->nodes->len, ==, 8);
    g_assert_cmpuint(node->partitions->len, ==, G_N_ELEMENTS(node_ids));
    for (guint i = 0; i < G_N_ELEMENTS(node_ids); i++)
        g_assert_cmpuint(part_at(node, i)->id, ==, node_ids[i]);
    g_assert_cmpint(sa_topology_find_partition(node, 4), ==, -1);
    g_assert_cmpint(sa_topology_find_partition(node, 7), ==, -1);
    n4 = g_ptr_array_index(node->nodes, 4);
    g_assert_cmpuint(n4->id, ==, 4);
    g_assert_true(sa_cpuset_is_empty(n4->cpus));
    g_assert_cmpuint(n4->mem_total, >, 0);

    /* Memoryless node 2 still is a partition. */
    idx = sa_topology_find_partition(node, 2);
    g_assert_cmpint(idx, >=, 0);
    g_assert_cmpuint(
        ((SaNode *)g_ptr_array_index(node->nodes, part_at(node, idx)->node))->mem_total, ==, 0);

    /* Node 3 is half offline, node 5 all offline: an empty partition. */
    assert_cpus(part_at(node, (guint)sa_topology_find_partition(node, 3))->cpus, "12-13");
    idx = sa_topology_find_partition(node, 5);
    g_assert_cmpint(idx, >=, 0);
    g_assert_true(sa_cpuset_is_empty(part_at(node, idx)->cpus));
    g_assert_cmpint(sa_topology_partition_of_cpu(node, 14), ==, -1);
    g_assert_cmpint(sa_topology_partition_of_cpu(node, 16), ==, -1);

    /* CPU 28 is online but in no node. */
    assert_cpus(node->unplaced, "28");
    g_assert_cmpint(sa_topology_partition_of_cpu(node, 28), ==, -1);
    g_assert_cmpuint(sa_topology_partition_distance(node, 0, 1), ==, 12);
    g_assert_cmpuint(sa_topology_partition_distance(node,
                                                    (guint)sa_topology_find_partition(node, 8),
                                                    (guint)sa_topology_find_partition(node, 6)),
                     ==, 12);

    /* L3 in index4 without id files: ids are the lowest CPU of each cache. */
    g_assert_cmpuint(llc->partitions->len, ==, G_N_ELEMENTS(llc_ids));
    for (guint i = 0; i < G_N_ELEMENTS(llc_ids); i++)
        g_assert_cmpuint(part_at(llc, i)->id, ==, llc_ids[i]);
    assert_cpus(part_at(llc, 3)->cpus, "12-13");
    /* The cache of CPU 28 is a partition with no node, infinitely far. */
    g_assert_cmpint(part_at(llc, 6)->node, ==, -1);
    g_assert_cmpuint(sa_topology_partition_distance(llc, 6, 0), ==, 255);
    g_assert_cmpint(sa_topology_partition_of_cpu(llc, 28), ==, 6);
    g_assert_true(sa_cpuset_is_empty(llc->unplaced));
    g_assert_null(llc->note);
}

static void test_llc_fallbacks(void)
{
    g_autoptr(SaTopology) l2 = load_ok("no-l3-4c", SA_LAYOUT_LLC, NULL);
    g_autoptr(GError) error = NULL;

    /* No L3: the highest unified level, said in the note and the description. */
    g_assert_nonnull(l2->note);
    g_assert_nonnull(strstr(l2->note, "level-2"));
    g_assert_cmpuint(l2->partitions->len, ==, 2);
    assert_cpus(part_at(l2, 0)->cpus, "0-1");
    assert_cpus(part_at(l2, 1)->cpus, "2-3");

    /* No cache information at all (this machine, a VM): a clear error. */
    error = load_error("this-host", SA_LAYOUT_LLC, NULL);
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, "cpu0/cache"));
}

static void assert_custom_error(const char *machine, const char *custom, const char *needle)
{
    g_autoptr(GError) error = load_error(machine, SA_LAYOUT_CUSTOM, custom);

    g_test_message("custom \"%s\": %s", custom ? custom : "(null)", error->message);
    g_assert_error(error, SA_ERROR, SA_ERROR_CONFIG);
    g_assert_nonnull(strstr(error->message, needle));
}

static void test_custom(void)
{
    g_autoptr(SaTopology) topo = load_ok("sparse-8n", SA_LAYOUT_CUSTOM, " 0-7 ; 8-13;20-28\n");

    g_assert_cmpuint(topo->partitions->len, ==, 3);
    assert_cpus(part_at(topo, 2)->cpus, "20-28");
    /* 20-23 in node 6 and 24-27 in node 8: the tie goes to the lower id. */
    g_assert_cmpuint(((SaNode *)g_ptr_array_index(topo->nodes, part_at(topo, 2)->node))->id, ==, 6);
    g_assert_cmpuint(sa_topology_partition_distance(topo, 0, 1), ==, 20);
    g_assert_true(sa_cpuset_is_empty(topo->unplaced));

    assert_custom_error("sparse-8n", "0-3;2-5",
                        "custom partitions 0 \"0-3\" and 1 \"2-5\" overlap on CPUs 2-3");
    assert_custom_error("sparse-8n", "0-3;8;1", "overlap on CPUs 1");
    assert_custom_error("sparse-8n", "0-3;;4-7", "custom partition 1 is empty");
    assert_custom_error("sparse-8n", "0-3;4-7;", "custom partition 2 is empty");
    assert_custom_error("sparse-8n", "0-3;12-15",
                        "custom partition 1 \"12-15\": CPUs 14-15 are not online");
    assert_custom_error("sparse-8n", "0-3;abc", "custom partition 1 \"abc\"");
    assert_custom_error("sparse-8n", "0-3;3-1", "\"3-1\"");
    assert_custom_error("sparse-8n", "", "layout custom needs");
    assert_custom_error("sparse-8n", NULL, "layout custom needs");
}

static void test_layout_names(void)
{
    g_autoptr(GError) error = NULL;
    SaLayout layout = SA_LAYOUT_CUSTOM;

    for (SaLayout l = SA_LAYOUT_NODE; l <= SA_LAYOUT_CUSTOM; l++) {
        g_assert_true(sa_layout_from_string(sa_layout_to_string(l), &layout, NULL));
        g_assert_cmpint(layout, ==, l);
    }
    g_assert_false(sa_layout_from_string("numa", &layout, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, "\"numa\""));
}

/* Writes rel (under root) with the given text, creating the directories. */
static void put(const char *root, const char *rel, const char *text)
{
    g_autofree char *path = g_build_filename(root, rel, NULL);
    g_autofree char *dir = g_path_get_dirname(path);
    g_autoptr(GError) error = NULL;

    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_file_set_contents(path, text, -1, &error);
    g_assert_no_error(error);
}

static void remove_tree(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *name;

    if (dir != NULL) {
        while ((name = g_dir_read_name(dir)) != NULL) {
            g_autofree char *child = g_build_filename(path, name, NULL);

            remove_tree(child);
        }
    }
    g_remove(path);
}

static char *small_tree(void)
{
    g_autoptr(GError) error = NULL;
    char *root = g_dir_make_tmp("softaff-topo-XXXXXX", &error);

    g_assert_no_error(error);
    put(root, "devices/system/cpu/online", "0-3\n");
    put(root, "devices/system/node/online", "0-1\n");
    put(root, "devices/system/node/node0/cpulist", "0-1\n");
    put(root, "devices/system/node/node0/distance", "10 20\n");
    put(root, "devices/system/node/node0/meminfo",
        "Node 0 MemTotal: 1024 kB\nNode 0 MemFree: 512 kB\n");
    put(root, "devices/system/node/node1/cpulist", "2-3\n");
    put(root, "devices/system/node/node1/distance", "20 10\n");
    put(root, "devices/system/node/node1/meminfo",
        "Node 1 MemTotal: 2048 kB\nNode 1 MemFree: 1024 kB\n");
    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
    return root;
}

static void expect_broken(const char *root, const char *rel, const char *text, const char *needle)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaTopology) topo = NULL;
    g_autofree char *path = g_build_filename(root, rel, NULL);
    g_autofree char *saved = NULL;

    g_assert_true(g_file_get_contents(path, &saved, NULL, NULL));
    put(root, rel, text);
    topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_test_message("%s = \"%s\": %s", rel, text, error ? error->message : "(no error)");
    g_assert_null(topo);
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, path));
    g_assert_nonnull(strstr(error->message, needle));
    put(root, rel, saved);
}

static void test_broken_trees(void)
{
    g_autofree char *root = small_tree();
    g_autoptr(SaTopology) topo = sa_topology_load(SA_LAYOUT_NODE, NULL, NULL);
    g_autoptr(GError) error = NULL;
    g_autofree char *online = g_build_filename(root, "devices/system/cpu/online", NULL);

    g_assert_nonnull(topo);
    g_assert_cmpuint(topo->partitions->len, ==, 2);
    g_assert_cmpuint(sa_topology_partition_distance(topo, 0, 1), ==, 20);
    g_assert_cmpuint(((SaNode *)g_ptr_array_index(topo->nodes, 1))->mem_free, ==, 1024 * 1024);

    expect_broken(root, "devices/system/cpu/online", "0-3,\n", "0-3,");
    expect_broken(root, "devices/system/cpu/online", "\n", "no online CPU");
    expect_broken(root, "devices/system/node/node1/cpulist", "garbage\n", "garbage");
    expect_broken(root, "devices/system/node/node0/distance", "10\n", "1 distances for 2");
    expect_broken(root, "devices/system/node/node0/distance", "10 20 30\n", "more distances");
    expect_broken(root, "devices/system/node/node0/distance", "10 x\n", "\"x\"");
    expect_broken(root, "devices/system/node/node1/meminfo", "Node 1 MemFree: 1 kB\n", "MemTotal");
    expect_broken(root, "devices/system/node/node1/meminfo",
                  "Node 1 MemTotal: lots kB\nNode 1 MemFree: 1 kB\n", "lots");
    expect_broken(root, "devices/system/node/node1/meminfo",
                  "Node 1 MemTotal: 2048 MB\nNode 1 MemFree: 1 kB\n", "2048 MB");
    expect_broken(root, "devices/system/node/node1/meminfo",
                  "Node 1 MemTotal: 2048 kB\nNode 1 MemFree: 1 kB 2\n", "1 kB 2");
    expect_broken(root, "devices/system/node/node1/meminfo",
                  "Node 0 MemTotal: 2048 kB\nNode 0 MemFree: 1 kB\n", "Node 1 MemTotal");
    expect_broken(root, "devices/system/node/node1/distance", "0 10\n", "\"0\"");
    expect_broken(root, "devices/system/node/node1/distance", "20 256\n", "\"256\"");

    /* A missing file is named. */
    g_remove(online);
    g_clear_pointer(&topo, sa_topology_free);
    topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_null(topo);
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, online));

    remove_tree(root);
}

static void test_llc_conflicts(void)
{
    g_autofree char *root = small_tree();
    g_autoptr(GError) error = NULL;
    g_autoptr(SaTopology) topo = NULL;

    for (guint c = 0; c < 4; c++) {
        g_autofree char *l3 = g_strdup_printf("devices/system/cpu/cpu%u/cache/index7", c);
        g_autofree char *f = NULL;

        f = g_build_filename(l3, "type", NULL);
        put(root, f, "Unified\n");
        g_free(f);
        f = g_build_filename(l3, "level", NULL);
        put(root, f, "3\n");
        g_free(f);
        f = g_build_filename(l3, "id", NULL);
        put(root, f, "0\n"); /* the same id for two different caches */
        g_free(f);
        f = g_build_filename(l3, "shared_cpu_list", NULL);
        put(root, f, c < 2 ? "0-1\n" : "2-3\n");
    }
    topo = sa_topology_load(SA_LAYOUT_LLC, NULL, &error);
    g_assert_null(topo);
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, "cpu2/cache/index7"));
    g_clear_error(&error);

    put(root, "devices/system/cpu/cpu2/cache/index7/id", "1\n");
    put(root, "devices/system/cpu/cpu3/cache/index7/id", "1\n");
    put(root, "devices/system/cpu/cpu3/cache/index7/shared_cpu_list", "0-1\n");
    topo = sa_topology_load(SA_LAYOUT_LLC, NULL, &error);
    g_assert_null(topo);
    g_assert_nonnull(strstr(error->message, "does not contain CPU 3"));
    g_clear_error(&error);

    put(root, "devices/system/cpu/cpu3/cache/index7/shared_cpu_list", "2-3\n");
    put(root, "devices/system/cpu/cpu1/cache/index7/level", "three\n");
    topo = sa_topology_load(SA_LAYOUT_LLC, NULL, &error);
    g_assert_null(topo);
    g_assert_nonnull(strstr(error->message, "cpu1/cache/index7/level"));
    g_assert_nonnull(strstr(error->message, "three"));
    g_clear_error(&error);

    put(root, "devices/system/cpu/cpu1/cache/index7/level", "3\n");
    topo = sa_topology_load(SA_LAYOUT_LLC, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(topo->partitions->len, ==, 2);
    g_assert_cmpuint(sa_topology_partition_distance(topo, 0, 1), ==, 20);

    remove_tree(root);
}

/* A kernel without NUMA support (no devices/system/node): one node 0 with every online CPU. */
static void test_no_numa(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = g_dir_make_tmp("softaff-topo-XXXXXX", &error);
    g_autoptr(SaTopology) topo = NULL;
    g_autofree char *text = NULL;
    const SaNode *node;

    g_assert_no_error(error);
    put(root, "devices/system/cpu/online", "0-2,5\n");
    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
    topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(topo->nodes->len, ==, 1);
    g_assert_cmpuint(topo->partitions->len, ==, 1);
    assert_cpus(part_at(topo, 0)->cpus, "0-2,5");
    g_assert_nonnull(topo->note);
    text = sa_topology_describe(topo);
    g_assert_nonnull(strstr(text, "note: no NUMA information"));
    g_assert_cmpint(sa_topology_partition_of_cpu(topo, 5), ==, 0);
    g_assert_cmpint(sa_topology_partition_of_cpu(topo, 4), ==, -1);
    node = g_ptr_array_index(topo->nodes, 0);
    g_assert_cmpuint(node->id, ==, 0);
    g_assert_cmpuint(node->mem_total, ==, 0);
    g_assert_cmpuint(topo->node_distance[0], ==, SA_DISTANCE_LOCAL);
    g_clear_pointer(&topo, sa_topology_free);

    /* devices/system/node without its online file is a broken tree, not a host without NUMA. */
    put(root, "devices/system/node/node0/cpulist", "0-2,5\n");
    topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_null(topo);
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "devices/system/node/online"));
    remove_tree(root);
}

/* The real host (/sys) agrees with the fixture captured from it. */
static void test_real_host(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaTopology) real = NULL;
    g_autoptr(SaTopology) captured = NULL;
    g_autoptr(SaCpuSet) online = NULL;

    g_unsetenv("SOFTAFF_SYSFS_ROOT");
    real = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    online = sa_read_cpulist("/sys/devices/system/cpu/online", &error);
    g_assert_no_error(error);
    g_assert_true(sa_cpuset_equal(real->online, online));
    g_assert_cmpuint(real->partitions->len, >=, 1);
    for (int c = sa_cpuset_next(online, -1); c >= 0; c = sa_cpuset_next(online, c))
        g_assert_cmpint(sa_topology_partition_of_cpu(real, (guint)c), >=, 0);

    /* Only meaningful on the machine this-host was captured from (same node layout). */
    captured = load_ok("this-host", SA_LAYOUT_NODE, NULL);
    if (captured->partitions->len != real->partitions->len ||
        !sa_cpuset_equal(captured->online, real->online)) {
        g_test_skip("this machine is not the one tests/data/this-host was captured from");
        return;
    }
    for (guint i = 0; i < real->partitions->len; i++) {
        const SaNode *a = g_ptr_array_index(real->nodes, part_at(real, i)->node);
        const SaNode *b = g_ptr_array_index(captured->nodes, part_at(captured, i)->node);

        g_assert_cmpuint(part_at(real, i)->id, ==, part_at(captured, i)->id);
        g_assert_true(sa_cpuset_equal(part_at(real, i)->cpus, part_at(captured, i)->cpus));
        g_assert_cmpuint(a->mem_total, >, 0);
        g_assert_cmpuint(b->mem_total, >, 0);
    }
    for (guint i = 0; i < real->nodes->len * real->nodes->len; i++)
        g_assert_cmpuint(real->node_distance[i], ==, captured->node_distance[i]);
}

/* A topology built by hand (as policy tests do) has no lookup table: the lookup still works. */
static void test_hand_built(void)
{
    g_autoptr(SaCpuSet) a = sa_cpuset_parse("0-3", NULL);
    g_autoptr(SaCpuSet) b = sa_cpuset_parse("4-7", NULL);
    SaPartition pa = {.id = 0, .cpus = a, .node = -1};
    SaPartition pb = {.id = 3, .cpus = b, .node = -1};
    gpointer parts[] = {&pa, &pb};
    GPtrArray array = {.pdata = parts, .len = 2};
    SaTopology topo = {.partitions = &array};

    g_assert_cmpint(sa_topology_partition_of_cpu(&topo, 5), ==, 1);
    g_assert_cmpint(sa_topology_partition_of_cpu(&topo, 9), ==, -1);
    g_assert_cmpint(sa_topology_find_partition(&topo, 3), ==, 1);
    g_assert_cmpint(sa_topology_find_partition(&topo, 2), ==, -1);
    /* No distance matrix: 0 from itself, the documented fallback between two partitions. */
    g_assert_cmpuint(sa_topology_partition_distance(&topo, 1, 1), ==, 0);
    g_assert_cmpuint(sa_topology_partition_distance(&topo, 0, 1), ==, SA_DISTANCE_UNKNOWN);
    g_assert_cmpuint(sa_topology_partition_distance(&topo, 1, 0), ==, 255);
}

/* The partition ids as messages list them: in order, sparse ids kept, "none" for none. */
static void test_format_ids(void)
{
    g_autoptr(SaTopology) node = load_ok("sparse-8n", SA_LAYOUT_NODE, NULL);
    g_autoptr(SaTopology) llc = load_ok("sparse-8n", SA_LAYOUT_LLC, NULL);
    g_autoptr(SaTopology) one = load_ok("this-host", SA_LAYOUT_NODE, NULL);
    g_autoptr(SaCpuSet) cpus = sa_cpuset_parse("0-3", NULL);
    SaPartition part = {.id = 7, .cpus = cpus, .node = -1};
    gpointer parts[] = {&part};
    GPtrArray array = {.pdata = parts, .len = 1};
    GPtrArray empty = {.pdata = NULL, .len = 0};
    SaTopology hand = {.partitions = &array};
    SaTopology none = {.partitions = &empty};
    SaTopology no_array = {.partitions = NULL};

    assert_made(sa_topology_format_ids(node), "0, 1, 2, 3, 5, 6, 8");
    assert_made(sa_topology_format_ids(llc), "0, 4, 8, 12, 20, 24, 28");
    assert_made(sa_topology_format_ids(one), "0");
    assert_made(sa_topology_format_ids(&hand), "7");
    assert_made(sa_topology_format_ids(&none), "none");
    assert_made(sa_topology_format_ids(&no_array), "none");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(machines); i++) {
        g_autofree char *name = g_strdup_printf("/topology/golden/%s", machines[i]);

        g_test_add_data_func(name, machines[i], test_golden);
    }
    g_test_add_func("/topology/intel", test_intel);
    g_test_add_func("/topology/epyc", test_epyc);
    g_test_add_func("/topology/sparse", test_sparse);
    g_test_add_func("/topology/llc-fallbacks", test_llc_fallbacks);
    g_test_add_func("/topology/custom", test_custom);
    g_test_add_func("/topology/layout-names", test_layout_names);
    g_test_add_func("/topology/broken-trees", test_broken_trees);
    g_test_add_func("/topology/llc-conflicts", test_llc_conflicts);
    g_test_add_func("/topology/no-numa", test_no_numa);
    g_test_add_func("/topology/real-host", test_real_host);
    g_test_add_func("/topology/hand-built", test_hand_built);
    g_test_add_func("/topology/format-ids", test_format_ids);
    return g_test_run();
}
