/* softaff — NUMA nodes as the kernel describes them in sysfs, and page migration through libnuma.
 *
 * Node facts come from the kernel's sysfs ABI (devices/system/node/{online, nodeN/cpulist,
 * nodeN/meminfo, nodeN/distance}), read through sa_sysfs_path(): the files libnuma itself reads,
 * so a real host gives the same answers, and a fixture tree under SOFTAFF_SYSFS_ROOT gives the
 * fixture's. libnuma is used only where it does what sysfs cannot: moving pages. */
#define G_LOG_DOMAIN "softaff-numa"

#include "sa-numa.h"

#include <errno.h>
#include <numa.h>
#include <string.h>

#include "sa-error.h"
#include "sa-paths.h"

/* ---- node facts (sysfs) ---- */

SaCpuSet *sa_numa_nodes(GError **error)
{
    g_autofree char *dir = sa_sysfs_path("devices/system/node");
    g_autofree char *path = sa_sysfs_path("devices/system/node/online");

    /* The kernel registers devices/system/node only when built with NUMA support. */
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR)) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "%s does not exist: the kernel has no NUMA support", dir);
        return NULL;
    }
    return sa_read_cpulist(path, error);
}

SaCpuSet *sa_numa_node_cpus(guint node, GError **error)
{
    g_autofree char *path = sa_sysfs_path("devices/system/node/node%u/cpulist", node);

    return sa_read_cpulist(path, error);
}

/* "<number> kB" (the unit may be left out) in bytes. */
static bool parse_kb(const char *text, guint64 *bytes)
{
    g_auto(GStrv) words = g_strsplit_set(text, " \t", -1);
    const char *number = NULL, *unit = NULL;
    guint64 kb;

    for (guint w = 0; words[w] != NULL; w++) {
        if (words[w][0] == '\0')
            continue;
        if (number == NULL)
            number = words[w];
        else if (unit == NULL)
            unit = words[w];
        else
            return false;
    }
    if (number == NULL || !g_ascii_string_to_unsigned(number, 10, 0, G_MAXUINT64 / 1024, &kb, NULL))
        return false;
    if (unit != NULL && strcmp(unit, "kB") != 0)
        return false;
    *bytes = kb * 1024;
    return true;
}

/* Finds "Node N <key>: <value> kB" among the lines of a node's meminfo file. */
static bool meminfo_value(const char *path, char *const *lines, guint node, const char *key,
                          guint64 *out, GError **error)
{
    g_autofree char *prefix = g_strdup_printf("Node %u %s:", node, key);

    for (guint i = 0; lines[i] != NULL; i++) {
        g_autofree char *line = g_strstrip(g_strdup(lines[i]));

        if (!g_str_has_prefix(line, prefix))
            continue;
        if (parse_kb(line + strlen(prefix), out))
            return true;
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: bad line \"%s\"", path, line);
        return false;
    }
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: no \"%s\" line", path, prefix);
    return false;
}

bool sa_numa_node_memory(guint node, guint64 *total, guint64 *free_bytes, GError **error)
{
    g_autofree char *path = sa_sysfs_path("devices/system/node/node%u/meminfo", node);
    g_autofree char *text = sa_read_file(path, NULL, error);
    g_auto(GStrv) lines = NULL;

    if (text == NULL)
        return false;
    lines = g_strsplit(text, "\n", -1);
    return meminfo_value(path, lines, node, "MemTotal", total, error) &&
           meminfo_value(path, lines, node, "MemFree", free_bytes, error);
}

/* The numbers of a distance file: exactly n_online of them, each 1-255. */
static bool parse_distance_row(const char *path, char *text, guint n_online, guint *all,
                               GError **error)
{
    g_auto(GStrv) words = g_strsplit_set(g_strstrip(text), " \t", -1);
    guint k = 0;

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
    return true;
}

/* The kernel writes one distance per online node, in increasing node id order. */
bool sa_numa_node_distances(guint node, const SaCpuSet *nodes, guint *row, GError **error)
{
    g_autoptr(SaCpuSet) online = sa_numa_nodes(error);
    g_autofree char *path = sa_sysfs_path("devices/system/node/node%u/distance", node);
    g_autofree char *text = NULL;
    g_autofree guint *all = NULL;
    guint k = 0, out = 0;

    if (online == NULL)
        return false;
    text = sa_read_file(path, NULL, error);
    if (text == NULL)
        return false;
    all = g_new0(guint, MAX(sa_cpuset_count(online), 1));
    if (!parse_distance_row(path, text, sa_cpuset_count(online), all, error))
        return false;
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

/* ---- page migration (libnuma) ---- */

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

    if (numa_available() < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "cannot migrate the memory of process %d: libnuma reports no NUMA support "
                    "on this host",
                    (int)pid);
        return -1;
    }
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
