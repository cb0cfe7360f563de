/* softaff — NUMA facts from libnuma, or from a fixture sysfs tree in tests. */
#define G_LOG_DOMAIN "softaff-numa"

#include "sa-numa.h"

#include <errno.h>
#include <numa.h>
#include <string.h>

#include "sa-error.h"
#include "sa-paths.h"

static bool libnuma_ready(GError **error)
{
    if (numa_available() < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "libnuma reports no NUMA support on this host (numa_available() < 0)");
        return false;
    }
    return true;
}

/* ---- fixture sysfs ---- */

static SaCpuSet *fixture_nodes(GError **error)
{
    g_autofree char *path = sa_sysfs_path("devices/system/node/online");

    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED, "no NUMA information: %s does not exist",
                    path);
        return NULL;
    }
    return sa_read_cpulist(path, error);
}

static SaCpuSet *fixture_node_cpus(guint node, GError **error)
{
    g_autofree char *path = sa_sysfs_path("devices/system/node/node%u/cpulist", node);

    return sa_read_cpulist(path, error);
}

/* Finds "Node N <key>: <value> kB" in a node meminfo file. */
static bool meminfo_value(const char *path, const char *text, guint node, const char *key,
                          guint64 *out, GError **error)
{
    g_autofree char *prefix = g_strdup_printf("Node %u %s:", node, key);
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i] != NULL; i++) {
        g_autofree char *line = g_strstrip(g_strdup(lines[i]));
        g_auto(GStrv) words = NULL;
        guint64 kb;

        if (!g_str_has_prefix(line, prefix))
            continue;
        words = g_strsplit_set(line + strlen(prefix), " \t", -1);
        {
            const char *number = NULL, *unit = NULL;

            for (guint w = 0; words[w] != NULL; w++) {
                if (words[w][0] == '\0')
                    continue;
                if (number == NULL)
                    number = words[w];
                else if (unit == NULL)
                    unit = words[w];
            }
            if (number == NULL ||
                !g_ascii_string_to_unsigned(number, 10, 0, G_MAXUINT64 / 1024, &kb, NULL) ||
                (unit != NULL && strcmp(unit, "kB") != 0)) {
                g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: bad line \"%s\"", path, line);
                return false;
            }
        }
        *out = kb * 1024;
        return true;
    }
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: no \"%s\" line", path, prefix);
    return false;
}

static bool fixture_node_memory(guint node, guint64 *total, guint64 *free_bytes, GError **error)
{
    g_autofree char *path = sa_sysfs_path("devices/system/node/node%u/meminfo", node);
    g_autofree char *text = sa_read_file(path, NULL, error);

    if (text == NULL)
        return false;
    return meminfo_value(path, text, node, "MemTotal", total, error) &&
           meminfo_value(path, text, node, "MemFree", free_bytes, error);
}

/* The kernel writes one distance per online node, in increasing node id order. */
static bool fixture_node_distances(guint node, const SaCpuSet *nodes, guint *row, GError **error)
{
    g_autoptr(SaCpuSet) online = fixture_nodes(error);
    g_autofree char *path = sa_sysfs_path("devices/system/node/node%u/distance", node);
    g_autofree char *text = NULL;
    g_auto(GStrv) words = NULL;
    g_autofree guint *all = NULL;
    guint n_online, k = 0, out = 0;

    if (online == NULL)
        return false;
    text = sa_read_file(path, NULL, error);
    if (text == NULL)
        return false;
    n_online = sa_cpuset_count(online);
    all = g_new0(guint, n_online);
    words = g_strsplit_set(g_strstrip(text), " \t", -1);
    for (guint w = 0; words[w] != NULL; w++) {
        guint64 d;

        if (words[w][0] == '\0')
            continue;
        if (!g_ascii_string_to_unsigned(words[w], 10, 1, 255, &d, NULL)) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: \"%s\" is not a distance (1-255)",
                        path, words[w]);
            return false;
        }
        if (k == n_online) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "%s: more distances than the %u online nodes", path, n_online);
            return false;
        }
        all[k++] = (guint)d;
    }
    if (k != n_online) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: %u distances for %u online nodes", path,
                    k, n_online);
        return false;
    }
    k = 0;
    for (int n = sa_cpuset_next(online, -1); n >= 0; n = sa_cpuset_next(online, n), k++)
        if (sa_cpuset_has(nodes, (guint)n))
            row[out++] = all[k];
    if (out != sa_cpuset_count(nodes)) {
        g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND, "%s: some requested nodes are not online",
                    path);
        return false;
    }
    return true;
}

/* ---- public ---- */

SaCpuSet *sa_numa_nodes(GError **error)
{
    SaCpuSet *nodes;
    int max;

    if (sa_sysfs_is_redirected())
        return fixture_nodes(error);
    if (!libnuma_ready(error))
        return NULL;
    nodes = sa_cpuset_new();
    max = numa_max_node();
    for (int n = 0; n <= max && n < SA_CPUSET_MAX; n++)
        if (numa_bitmask_isbitset(numa_nodes_ptr, (unsigned int)n))
            sa_cpuset_add(nodes, (guint)n);
    return nodes;
}

SaCpuSet *sa_numa_node_cpus(guint node, GError **error)
{
    struct bitmask *mask;
    SaCpuSet *cpus;

    if (sa_sysfs_is_redirected())
        return fixture_node_cpus(node, error);
    if (!libnuma_ready(error))
        return NULL;
    mask = numa_allocate_cpumask();
    if (numa_node_to_cpus((int)node, mask) < 0) {
        int saved = errno;

        numa_free_cpumask(mask);
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "libnuma: cannot read the CPUs of node %u: %s",
                    node, g_strerror(saved));
        return NULL;
    }
    cpus = sa_cpuset_new();
    for (unsigned int c = 0; c < mask->size && c < SA_CPUSET_MAX; c++)
        if (numa_bitmask_isbitset(mask, c))
            sa_cpuset_add(cpus, c);
    numa_free_cpumask(mask);
    return cpus;
}

bool sa_numa_node_memory(guint node, guint64 *total, guint64 *free_bytes, GError **error)
{
    long long size, free_size = 0;

    if (sa_sysfs_is_redirected())
        return fixture_node_memory(node, total, free_bytes, error);
    if (!libnuma_ready(error))
        return false;
    size = numa_node_size64((int)node, &free_size);
    if (size < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "libnuma: cannot read the memory of node %u",
                    node);
        return false;
    }
    *total = (guint64)size;
    *free_bytes = free_size > 0 ? (guint64)free_size : 0;
    return true;
}

bool sa_numa_node_distances(guint node, const SaCpuSet *nodes, guint *row, GError **error)
{
    guint k = 0;

    if (sa_sysfs_is_redirected())
        return fixture_node_distances(node, nodes, row, error);
    if (!libnuma_ready(error))
        return false;
    for (int n = sa_cpuset_next(nodes, -1); n >= 0; n = sa_cpuset_next(nodes, n)) {
        int d = numa_distance((int)node, n);

        if (d <= 0) {
            g_set_error(error, SA_ERROR, SA_ERROR_IO,
                        "libnuma: no distance between node %u and node %d", node, n);
            return false;
        }
        row[k++] = (guint)d;
    }
    return true;
}

static struct bitmask *nodemask_from_set(const SaCpuSet *set)
{
    struct bitmask *mask = numa_allocate_nodemask();

    for (int n = sa_cpuset_next(set, -1); n >= 0; n = sa_cpuset_next(set, n))
        if ((unsigned int)n < mask->size)
            numa_bitmask_setbit(mask, (unsigned int)n);
    return mask;
}

long sa_numa_migrate_pages(pid_t pid, const SaCpuSet *from, const SaCpuSet *to, GError **error)
{
    struct bitmask *from_mask, *to_mask;
    int ret, saved;

    if (sa_sysfs_is_redirected()) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "not migrating the memory of process %d: SOFTAFF_SYSFS_ROOT points at a "
                    "fixture tree, not this host",
                    (int)pid);
        return -1;
    }
    if (!libnuma_ready(error))
        return -1;
    from_mask = nodemask_from_set(from);
    to_mask = nodemask_from_set(to);
    ret = numa_migrate_pages((int)pid, from_mask, to_mask);
    saved = errno;
    numa_free_nodemask(from_mask);
    numa_free_nodemask(to_mask);
    if (ret < 0) {
        g_autofree char *f = sa_cpuset_format(from);
        g_autofree char *t = sa_cpuset_format(to);

        g_set_error(error, SA_ERROR, saved == ESRCH ? SA_ERROR_GONE : SA_ERROR_IO,
                    "cannot migrate the memory of process %d from nodes %s to nodes %s: %s",
                    (int)pid, f, t, g_strerror(saved));
        return -1;
    }
    return ret;
}
