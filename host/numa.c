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
#include <numaif.h>
#include <stdio.h>
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

/* ---- a process's guest memory (maps + numa_maps) and move_pages ---- */

typedef struct {
    guint64 end;
    bool writable;
} MapsEntry;

static void mapping_clear(gpointer p)
{
    SaMemMapping *map = p;

    g_clear_pointer(&map->nodes, g_array_unref);
}

void sa_proc_memory_free(SaProcMemory *m)
{
    if (m == NULL)
        return;
    if (m->mappings != NULL)
        g_array_unref(m->mappings);
    g_free(m);
}

/* maps: "start-end perms offset dev inode [path]": start -> (end, writable). */
static GHashTable *parse_maps(const char *maps, const char *what, GError **error)
{
    g_autoptr(GHashTable) out = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
    g_auto(GStrv) lines = g_strsplit(maps, "\n", -1);

    for (guint i = 0; lines[i] != NULL; i++) {
        guint64 start, end;
        char perms[8];

        if (lines[i][0] == '\0')
            continue;
        if (sscanf(lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x %7s", &start, &end,
                   perms) != 3 ||
            end <= start || strlen(perms) < 2) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s maps: bad line \"%s\"", what,
                        lines[i]);
            return NULL;
        }
        MapsEntry *e = g_new(MapsEntry, 1);
        e->end = end;
        e->writable = perms[1] == 'w';
        g_hash_table_insert(out, g_memdup2(&start, sizeof start), e);
    }
    return g_steal_pointer(&out);
}

/* One numa_maps token: N<node>=<pages>, kernelpagesize_kB=, file=, stack, huge. Returns false
 * for a malformed number. */
static bool numa_token(const char *tok, SaMemMapping *map, bool *guest, bool *huge)
{
    guint64 v;

    if (g_str_has_prefix(tok, "file="))
        *guest = *guest && g_str_has_prefix(tok + 5, "/memfd:");
    else if (strcmp(tok, "stack") == 0)
        *guest = false;
    else if (strcmp(tok, "huge") == 0)
        *huge = true;
    else if (g_str_has_prefix(tok, "kernelpagesize_kB=")) {
        if (!g_ascii_string_to_unsigned(tok + 18, 10, 1, G_MAXUINT32, &v, NULL))
            return false;
        map->page_size = v * 1024;
    } else if (tok[0] == 'N' && g_ascii_isdigit(tok[1])) {
        const char *eq = strchr(tok, '=');
        g_autofree char *id = eq ? g_strndup(tok + 1, (gsize)(eq - tok - 1)) : NULL;
        guint64 node;
        if (!eq || !g_ascii_string_to_unsigned(id, 10, 0, G_MAXUINT16, &node, NULL) ||
            !g_ascii_string_to_unsigned(eq + 1, 10, 0, G_MAXUINT64, &v, NULL))
            return false;
        SaNodePages np = {.node = (guint)node, .pages = v};
        g_array_append_val(map->nodes, np);
    }
    return true;
}

/* One numa_maps line into map; *keep: it is guest memory and maps lists it writable. */
static bool numa_line(const char *line, GHashTable *extents, SaMemMapping *map, bool *keep)
{
    g_auto(GStrv) toks = g_strsplit(line, " ", -1);
    bool guest = true, huge = false;
    const MapsEntry *e;

    if (toks[0] == NULL ||
        !g_ascii_string_to_unsigned(toks[0], 16, 0, G_MAXUINT64, &map->start, NULL))
        return false;
    map->page_size = 4096;
    map->nodes = g_array_new(FALSE, FALSE, sizeof(SaNodePages));
    for (guint t = 1; toks[t] != NULL; t++)
        if (toks[t][0] != '\0' && !numa_token(toks[t], map, &guest, &huge))
            return false;
    e = g_hash_table_lookup(extents, &map->start);
    *keep = (guest || huge) && e != NULL && e->writable;
    if (e != NULL)
        map->end = e->end;
    return true;
}

SaProcMemory *sa_proc_memory_parse(const char *maps, const char *numa_maps, const char *what,
                                   GError **error)
{
    g_autoptr(GHashTable) extents = parse_maps(maps, what, error);
    g_auto(GStrv) lines = NULL;
    g_autoptr(SaProcMemory) m = g_new0(SaProcMemory, 1);

    if (extents == NULL)
        return NULL;
    m->mappings = g_array_new(FALSE, TRUE, sizeof(SaMemMapping));
    g_array_set_clear_func(m->mappings, mapping_clear);
    lines = g_strsplit(numa_maps, "\n", -1);
    for (guint i = 0; lines[i] != NULL; i++) {
        SaMemMapping map = {0};
        bool keep = false;

        if (lines[i][0] == '\0')
            continue;
        if (!numa_line(lines[i], extents, &map, &keep)) {
            mapping_clear(&map);
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s numa_maps: bad line \"%s\"", what,
                        lines[i]);
            return NULL;
        }
        if (keep)
            g_array_append_val(m->mappings, map);
        else
            mapping_clear(&map);
    }
    return g_steal_pointer(&m);
}

static char *read_proc_file(pid_t pid, const char *name, GError **error)
{
    g_autofree char *path = sa_proc_path("%d/%s", (int)pid, name);
    g_autofree char *dir = sa_proc_path("%d", (int)pid);
    g_autoptr(GError) local = NULL;
    char *text = sa_read_file(path, NULL, &local);

    if (text != NULL)
        return text;
    /* The process ended (a missing numa_maps in a live process: a kernel without NUMA). */
    if (!g_file_test(dir, G_FILE_TEST_IS_DIR))
        g_set_error(error, SA_ERROR, SA_ERROR_GONE, "%s", local->message);
    else
        g_propagate_error(error, g_steal_pointer(&local));
    return NULL;
}

SaProcMemory *sa_numa_proc_memory(pid_t pid, GError **error)
{
    g_autofree char *maps = read_proc_file(pid, "maps", error);
    g_autofree char *numa_maps = NULL;
    g_autofree char *what = g_strdup_printf("process %d", (int)pid);

    if (maps == NULL)
        return NULL;
    numa_maps = read_proc_file(pid, "numa_maps", error);
    if (numa_maps == NULL)
        return NULL;
    return sa_proc_memory_parse(maps, numa_maps, what, error);
}

guint64 sa_mem_mapping_bytes(const SaMemMapping *map, int node)
{
    guint64 pages = 0;

    for (guint k = 0; k < map->nodes->len; k++) {
        const SaNodePages *np = &g_array_index(map->nodes, SaNodePages, k);
        if (node < 0 || np->node == (guint)node)
            pages += np->pages;
    }
    return pages * map->page_size;
}

guint64 sa_proc_memory_bytes(const SaProcMemory *m, int node)
{
    guint64 bytes = 0;

    for (guint i = 0; i < m->mappings->len; i++)
        bytes += sa_mem_mapping_bytes(&g_array_index(m->mappings, SaMemMapping, i), node);
    return bytes;
}

static bool move_pages_call(pid_t pid, gulong count, void **pages, const int *nodes, int *status,
                            GError **error)
{
    if (numa_available() < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "cannot move the pages of process %d: libnuma reports no NUMA support on "
                    "this host",
                    (int)pid);
        return false;
    }
    /* >= 0: done, or that many pages not moved for reasons each status gives. */
    if (numa_move_pages((int)pid, count, pages, nodes, status, MPOL_MF_MOVE) >= 0)
        return true;
    int saved = errno;
    g_set_error(error, SA_ERROR,
                saved == ESRCH    ? SA_ERROR_GONE
                : saved == ENOSYS ? SA_ERROR_UNSUPPORTED
                                  : SA_ERROR_IO,
                "move_pages on %lu pages of process %d%s: %s", count, (int)pid,
                nodes ? "" : " (query)", g_strerror(saved));
    return false;
}

bool sa_numa_move_pages(pid_t pid, gulong count, void **pages, int node, int *status,
                        GError **error)
{
    g_autofree int *nodes = g_new(int, MAX(count, 1));

    for (gulong i = 0; i < count; i++)
        nodes[i] = node;
    return move_pages_call(pid, count, pages, nodes, status, error);
}

bool sa_numa_query_pages(pid_t pid, gulong count, void **pages, int *status, GError **error)
{
    return move_pages_call(pid, count, pages, NULL, status, error);
}
