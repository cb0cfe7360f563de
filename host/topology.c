/* softaff — the host's partitions: NUMA nodes, last-level caches or custom CPU sets.
 *
 * Everything is read through sa_sysfs_path() and host/sa-numa.h, so the same code runs against
 * the real /sys and against the fixture trees in tests/data.
 *
 * node:   one partition per NUMA node that lists at least one CPU (a node whose CPUs are all
 *         offline is a partition with no CPU; a memory-only node is not a partition).
 * llc:    one partition per level-3 unified cache (found by its level and type files, not by
 *         its index), id = the cache's id file or, without one, its lowest CPU. A host without
 *         any L3 uses its highest unified level and says so in topo->note. A host that
 *         describes no unified cache at all (many VMs have no cpuN/cache directories) is an
 *         error naming the directory: a guessed cache domain would give ids that mean nothing.
 * custom: the ';'-separated cpulists of [partitions] custom, ids 0, 1, ...
 * Distances between partitions come from their nodes (10 within one node, 255 without a node). */
#define G_LOG_DOMAIN "softaff-topology"

#include "sa-topology.h"

#include <string.h>

#include "sa-numa.h"
#include "sa-error.h"
#include "sa-paths.h"

#define SA_DISTANCE_LOCAL 10u
#define SA_DISTANCE_NONE 255u

static const char *const layout_names[] = {
    [SA_LAYOUT_NODE] = "node",
    [SA_LAYOUT_LLC] = "llc",
    [SA_LAYOUT_CUSTOM] = "custom",
};

const char *sa_layout_to_string(SaLayout layout)
{
    if ((guint)layout < G_N_ELEMENTS(layout_names))
        return layout_names[layout];
    return "unknown";
}

bool sa_layout_from_string(const char *text, SaLayout *out, GError **error)
{
    for (guint i = 0; i < G_N_ELEMENTS(layout_names); i++) {
        if (text != NULL && strcmp(text, layout_names[i]) == 0) {
            *out = (SaLayout)i;
            return true;
        }
    }
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                "unknown partition layout \"%s\" (expected node, llc or custom)",
                text != NULL ? text : "(null)");
    return false;
}

static void node_free(SaNode *node)
{
    if (node == NULL)
        return;
    sa_cpuset_free(node->cpus);
    g_free(node);
}

static void partition_free(SaPartition *part)
{
    if (part == NULL)
        return;
    sa_cpuset_free(part->cpus);
    g_free(part);
}

void sa_topology_free(SaTopology *topo)
{
    if (topo == NULL)
        return;
    sa_cpuset_free(topo->online);
    sa_cpuset_free(topo->unplaced);
    if (topo->nodes != NULL)
        g_ptr_array_unref(topo->nodes);
    g_free(topo->node_distance);
    if (topo->partitions != NULL)
        g_ptr_array_unref(topo->partitions);
    g_free(topo->partition_distance);
    g_free(topo->note);
    g_free(topo->cpu_partition);
    g_free(topo);
}

static SaPartition *partition_new(guint id, SaCpuSet *cpus)
{
    SaPartition *part = g_new0(SaPartition, 1);

    part->id = id;
    part->cpus = cpus;
    part->node = -1;
    return part;
}

static int compare_partition_ids(gconstpointer a, gconstpointer b)
{
    const SaPartition *pa = *(SaPartition *const *)a;
    const SaPartition *pb = *(SaPartition *const *)b;

    return pa->id < pb->id ? -1 : pa->id > pb->id;
}

/* ---- nodes ---- */

/* The CPU numbers the kernel lists for each node, before intersecting with the online set. */
static bool load_nodes(SaTopology *topo, GPtrArray *listed, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(SaCpuSet) ids = sa_numa_nodes(&local);
    guint n, i = 0;

    if (ids == NULL) {
        SaNode *node;

        if (!g_error_matches(local, SA_ERROR, SA_ERROR_UNSUPPORTED)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return false;
        }
        /* A kernel without NUMA support: one node 0 holds every online CPU. */
        node = g_new0(SaNode, 1);
        node->cpus = sa_cpuset_copy(topo->online);
        g_ptr_array_add(topo->nodes, node);
        g_ptr_array_add(listed, sa_cpuset_copy(topo->online));
        topo->node_distance = g_new(guint, 1);
        topo->node_distance[0] = SA_DISTANCE_LOCAL;
        topo->note = g_strdup_printf("no NUMA information (%s): one node 0 holds every online "
                                     "CPU, its memory is not known",
                                     local->message);
        return true;
    }

    n = sa_cpuset_count(ids);
    topo->node_distance = g_new0(guint, (gsize)n * n);
    for (int id = sa_cpuset_next(ids, -1); id >= 0; id = sa_cpuset_next(ids, id), i++) {
        SaNode *node = g_new0(SaNode, 1);
        SaCpuSet *cpus;

        node->id = (guint)id;
        node->cpus = sa_cpuset_new();
        g_ptr_array_add(topo->nodes, node);
        cpus = sa_numa_node_cpus((guint)id, error);
        if (cpus == NULL)
            return false;
        g_ptr_array_add(listed, cpus);
        sa_cpuset_assign(node->cpus, cpus);
        sa_cpuset_intersect(node->cpus, topo->online);
        if (!sa_numa_node_memory((guint)id, &node->mem_total, &node->mem_free, error))
            return false;
        if (!sa_numa_node_distances((guint)id, ids, topo->node_distance + (gsize)i * n, error))
            return false;
    }
    return true;
}

/* Index into topo->nodes of the node holding most CPUs of cpus (ties: the lower id), -1 if none. */
static int majority_node(const SaTopology *topo, const SaCpuSet *cpus)
{
    int best = -1;
    guint best_count = 0;

    for (guint i = 0; i < topo->nodes->len; i++) {
        const SaNode *node = g_ptr_array_index(topo->nodes, i);
        g_autoptr(SaCpuSet) common = sa_cpuset_copy(cpus);
        guint count;

        sa_cpuset_intersect(common, node->cpus);
        count = sa_cpuset_count(common);
        if (count > best_count) {
            best = (int)i;
            best_count = count;
        }
    }
    return best;
}

/* ---- layout node ---- */

static bool build_node_layout(SaTopology *topo, GPtrArray *listed)
{
    for (guint i = 0; i < topo->nodes->len; i++) {
        const SaNode *node = g_ptr_array_index(topo->nodes, i);
        const SaCpuSet *cpus = g_ptr_array_index(listed, i);
        SaPartition *part;

        /* A node without CPUs (memory only) is not a partition; a node whose CPUs are all
         * offline still is, with an empty set. */
        if (sa_cpuset_is_empty(cpus))
            continue;
        part = partition_new(node->id, sa_cpuset_copy(node->cpus));
        part->node = (int)i;
        g_ptr_array_add(topo->partitions, part);
    }
    return true;
}

/* ---- layout llc ---- */

typedef struct {
    guint level;
    bool has_id;
    guint id;
    SaCpuSet *shared;
    char *dir; /* for error messages */
} CacheInfo;

static void cache_info_free(CacheInfo *c)
{
    if (c == NULL)
        return;
    sa_cpuset_free(c->shared);
    g_free(c->dir);
    g_free(c);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(CacheInfo, cache_info_free)

static bool read_trimmed(const char *dir, const char *name, char **out, GError **error)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    char *text = sa_read_file(path, NULL, error);

    if (text == NULL)
        return false;
    *out = g_strstrip(text);
    return true;
}

/* The unified caches of one CPU (GPtrArray of CacheInfo*), or NULL with *error. A CPU without
 * a cache directory gives an empty array. */
static GPtrArray *read_cpu_caches(int cpu, GError **error)
{
    g_autoptr(GPtrArray) caches = g_ptr_array_new_with_free_func((GDestroyNotify)cache_info_free);
    g_autofree char *base = sa_sysfs_path("devices/system/cpu/cpu%d/cache", cpu);
    g_autoptr(GDir) dir = NULL;
    const char *name;

    if (!g_file_test(base, G_FILE_TEST_IS_DIR))
        return g_steal_pointer(&caches);
    dir = g_dir_open(base, 0, NULL);
    if (dir == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot list %s", base);
        return NULL;
    }
    while ((name = g_dir_read_name(dir)) != NULL) {
        g_autoptr(CacheInfo) info = g_new0(CacheInfo, 1);
        g_autofree char *type = NULL;
        g_autofree char *level_path = NULL;
        g_autofree char *id_path = NULL;
        g_autofree char *shared_path = NULL;
        guint64 v;

        if (!g_str_has_prefix(name, "index"))
            continue;
        info->dir = g_build_filename(base, name, NULL);
        if (!read_trimmed(info->dir, "type", &type, error))
            return NULL;
        if (strcmp(type, "Unified") != 0)
            continue;
        level_path = g_build_filename(info->dir, "level", NULL);
        if (!sa_read_u64(level_path, &v, error))
            return NULL;
        info->level = (guint)MIN(v, G_MAXUINT);
        id_path = g_build_filename(info->dir, "id", NULL);
        if (g_file_test(id_path, G_FILE_TEST_EXISTS)) {
            if (!sa_read_u64(id_path, &v, error))
                return NULL;
            if (v > G_MAXUINT) {
                g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                            "%s: cache id %" G_GUINT64_FORMAT " is too large", id_path, v);
                return NULL;
            }
            info->has_id = true;
            info->id = (guint)v;
        }
        shared_path = g_build_filename(info->dir, "shared_cpu_list", NULL);
        info->shared = sa_read_cpulist(shared_path, error);
        if (info->shared == NULL)
            return NULL;
        if (!sa_cpuset_has(info->shared, (guint)cpu)) {
            g_autofree char *text = sa_cpuset_format(info->shared);

            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "%s: shared_cpu_list \"%s\" does not contain CPU %d itself", shared_path,
                        text, cpu);
            return NULL;
        }
        g_ptr_array_add(caches, g_steal_pointer(&info));
    }
    return g_steal_pointer(&caches);
}

static bool build_llc_layout(SaTopology *topo, GError **error)
{
    g_autoptr(GPtrArray) per_cpu =
        g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    g_autoptr(GHashTable) by_id = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GHashTable) dir_of = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(SaCpuSet) placed = sa_cpuset_new();
    guint level = 0, max_unified = 0;
    guint k = 0;

    /* Read every online CPU's unified caches; the cache level is chosen for the whole host. */
    for (int c = sa_cpuset_next(topo->online, -1); c >= 0; c = sa_cpuset_next(topo->online, c)) {
        GPtrArray *caches = read_cpu_caches(c, error);

        if (caches == NULL)
            return false;
        for (guint i = 0; i < caches->len; i++) {
            const CacheInfo *info = g_ptr_array_index(caches, i);

            if (info->level == 3)
                level = 3;
            max_unified = MAX(max_unified, info->level);
        }
        g_ptr_array_add(per_cpu, caches);
    }
    if (max_unified == 0) {
        int first = sa_cpuset_next(topo->online, -1);
        g_autofree char *where = sa_sysfs_path("devices/system/cpu/cpu%d/cache", MAX(first, 0));

        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "layout llc: no online CPU describes a unified cache (nothing in %s and the "
                    "other CPUs' cache directories); use layout node or custom",
                    where);
        return false;
    }
    if (level == 0) {
        level = max_unified;
        topo->note = g_strdup_printf("no level-3 cache on this host: the partitions are the "
                                     "level-%u unified caches",
                                     level);
    }

    for (int c = sa_cpuset_next(topo->online, -1); c >= 0;
         c = sa_cpuset_next(topo->online, c), k++) {
        GPtrArray *caches = g_ptr_array_index(per_cpu, k);
        const CacheInfo *info = NULL;
        SaPartition *part;
        guint id;

        for (guint i = 0; i < caches->len && info == NULL; i++) {
            const CacheInfo *candidate = g_ptr_array_index(caches, i);

            if (candidate->level == level)
                info = candidate;
        }
        if (info == NULL)
            continue; /* no cache of that level: the CPU stays unplaced */
        id = info->has_id ? info->id : (guint)sa_cpuset_next(info->shared, -1);
        part = g_hash_table_lookup(by_id, GSIZE_TO_POINTER((gsize)id + 1));
        if (part == NULL) {
            SaCpuSet *cpus = sa_cpuset_copy(info->shared);

            sa_cpuset_intersect(cpus, topo->online);
            if (sa_cpuset_intersects(cpus, placed)) {
                g_autofree char *text = sa_cpuset_format(cpus);

                g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                            "%s: cache %u shares CPUs %s with another level-%u cache", info->dir,
                            id, text, level);
                sa_cpuset_free(cpus);
                return false;
            }
            sa_cpuset_union(placed, cpus);
            part = partition_new(id, cpus);
            g_ptr_array_add(topo->partitions, part);
            g_hash_table_insert(by_id, GSIZE_TO_POINTER((gsize)id + 1), part);
            g_hash_table_insert(dir_of, part, info->dir);
        } else if (!sa_cpuset_has(part->cpus, (guint)c)) {
            const char *other = g_hash_table_lookup(dir_of, part);

            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "%s and %s: two level-%u caches have the same id %u but different CPUs",
                        info->dir, other, level, id);
            return false;
        }
    }
    return true;
}

/* ---- layout custom ---- */

static bool build_custom_layout(SaTopology *topo, const char *custom, GError **error)
{
    g_auto(GStrv) entries = NULL;
    g_autoptr(SaCpuSet) placed = sa_cpuset_new();

    if (custom == NULL || custom[0] == '\0') {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "layout custom needs a list of cpulists such as \"0-15;16-31\" "
                    "([partitions] custom), got \"%s\"",
                    custom != NULL ? custom : "");
        return false;
    }
    entries = g_strsplit(custom, ";", -1);
    for (guint i = 0; entries[i] != NULL; i++) {
        g_autoptr(GError) local = NULL;
        const char *entry = g_strstrip(entries[i]);
        g_autoptr(SaCpuSet) cpus = NULL;
        g_autoptr(SaCpuSet) offline = NULL;

        if (entry[0] == '\0') {
            g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "custom partition %u is empty in \"%s\"",
                        i, custom);
            return false;
        }
        cpus = sa_cpuset_parse(entry, &local);
        if (cpus == NULL) {
            g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "custom partition %u \"%s\": %s", i,
                        entry, local->message);
            return false;
        }
        offline = sa_cpuset_copy(cpus);
        sa_cpuset_subtract(offline, topo->online);
        if (!sa_cpuset_is_empty(offline)) {
            g_autofree char *bad = sa_cpuset_format(offline);
            g_autofree char *online = sa_cpuset_format(topo->online);

            g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                        "custom partition %u \"%s\": CPUs %s are not online (online: %s)", i, entry,
                        bad, online);
            return false;
        }
        if (sa_cpuset_intersects(cpus, placed)) {
            for (guint j = 0; j < i; j++) {
                const SaPartition *prev = g_ptr_array_index(topo->partitions, j);
                g_autoptr(SaCpuSet) common = sa_cpuset_copy(cpus);
                g_autofree char *text = NULL;

                sa_cpuset_intersect(common, prev->cpus);
                if (sa_cpuset_is_empty(common))
                    continue;
                text = sa_cpuset_format(common);
                g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                            "custom partitions %u \"%s\" and %u \"%s\" overlap on CPUs %s", j,
                            g_strstrip(entries[j]), i, entry, text);
                return false;
            }
        }
        sa_cpuset_union(placed, cpus);
        g_ptr_array_add(topo->partitions, partition_new(i, g_steal_pointer(&cpus)));
    }
    return true;
}

/* ---- derived tables ---- */

static void finish(SaTopology *topo)
{
    guint n = topo->partitions->len;
    guint n_nodes = topo->nodes->len;
    int last;

    g_ptr_array_sort(topo->partitions, compare_partition_ids);
    sa_cpuset_assign(topo->unplaced, topo->online);
    for (guint i = 0; i < n; i++) {
        SaPartition *part = g_ptr_array_index(topo->partitions, i);

        if (topo->layout != SA_LAYOUT_NODE)
            part->node = majority_node(topo, part->cpus);
        sa_cpuset_subtract(topo->unplaced, part->cpus);
    }

    topo->partition_distance = g_new0(guint, MAX((gsize)n * n, 1));
    for (guint a = 0; a < n; a++) {
        const SaPartition *pa = g_ptr_array_index(topo->partitions, a);

        for (guint b = 0; b < n; b++) {
            const SaPartition *pb = g_ptr_array_index(topo->partitions, b);
            guint d;

            if (a == b)
                d = 0;
            else if (pa->node < 0 || pb->node < 0)
                d = SA_DISTANCE_NONE;
            else if (pa->node == pb->node)
                d = SA_DISTANCE_LOCAL;
            else
                d = topo->node_distance[(gsize)pa->node * n_nodes + (guint)pb->node];
            topo->partition_distance[(gsize)a * n + b] = d;
        }
    }

    last = sa_cpuset_last(topo->online);
    topo->n_cpu_partition = (guint)(last + 1);
    topo->cpu_partition = g_new(int, MAX(topo->n_cpu_partition, 1));
    for (guint c = 0; c < topo->n_cpu_partition; c++)
        topo->cpu_partition[c] = -1;
    for (guint i = 0; i < n; i++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, i);

        for (int c = sa_cpuset_next(part->cpus, -1); c >= 0; c = sa_cpuset_next(part->cpus, c))
            if ((guint)c < topo->n_cpu_partition)
                topo->cpu_partition[c] = (int)i;
    }
}

SaTopology *sa_topology_load(SaLayout layout, const char *custom, GError **error)
{
    g_autoptr(SaTopology) topo = g_new0(SaTopology, 1);
    g_autoptr(GPtrArray) listed = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    g_autofree char *online_path = sa_sysfs_path("devices/system/cpu/online");

    topo->layout = layout;
    topo->nodes = g_ptr_array_new_with_free_func((GDestroyNotify)node_free);
    topo->partitions = g_ptr_array_new_with_free_func((GDestroyNotify)partition_free);
    topo->unplaced = sa_cpuset_new();
    topo->online = sa_read_cpulist(online_path, error);
    if (topo->online == NULL)
        return NULL;
    if (sa_cpuset_is_empty(topo->online)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: no online CPU", online_path);
        return NULL;
    }
    if (!load_nodes(topo, listed, error))
        return NULL;

    switch (layout) {
    case SA_LAYOUT_NODE:
        if (!build_node_layout(topo, listed))
            return NULL;
        break;
    case SA_LAYOUT_LLC:
        if (!build_llc_layout(topo, error))
            return NULL;
        break;
    case SA_LAYOUT_CUSTOM:
        if (!build_custom_layout(topo, custom, error))
            return NULL;
        break;
    default:
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE, "unknown partition layout %d", (int)layout);
        return NULL;
    }
    if (topo->partitions->len == 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND,
                    "layout %s: the host (%s) has no partition", sa_layout_to_string(layout),
                    online_path);
        return NULL;
    }
    finish(topo);
    return g_steal_pointer(&topo);
}

int sa_topology_find_partition(const SaTopology *topo, guint id)
{
    guint lo = 0, hi;

    g_return_val_if_fail(topo != NULL && topo->partitions != NULL, -1);
    hi = topo->partitions->len;
    while (lo < hi) {
        guint mid = lo + (hi - lo) / 2;
        const SaPartition *part = g_ptr_array_index(topo->partitions, mid);

        if (part->id == id)
            return (int)mid;
        if (part->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

int sa_topology_partition_of_cpu(const SaTopology *topo, guint cpu)
{
    g_return_val_if_fail(topo != NULL, -1);
    if (topo->cpu_partition != NULL)
        return cpu < topo->n_cpu_partition ? topo->cpu_partition[cpu] : -1;
    /* A topology built by hand, without the lookup table. */
    for (guint i = 0; topo->partitions != NULL && i < topo->partitions->len; i++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, i);

        if (sa_cpuset_has(part->cpus, cpu))
            return (int)i;
    }
    return -1;
}

guint sa_topology_partition_distance(const SaTopology *topo, guint a_idx, guint b_idx)
{
    guint n;

    g_return_val_if_fail(topo != NULL && topo->partitions != NULL, SA_DISTANCE_NONE);
    n = topo->partitions->len;
    g_return_val_if_fail(a_idx < n && b_idx < n, SA_DISTANCE_NONE);
    if (topo->partition_distance == NULL)
        return a_idx == b_idx ? 0 : SA_DISTANCE_NONE;
    return topo->partition_distance[(gsize)a_idx * n + b_idx];
}

/* ---- description ---- */

static void append_cpus(GString *out, const SaCpuSet *cpus)
{
    g_autofree char *text = sa_cpuset_format(cpus);
    guint count = sa_cpuset_count(cpus);

    if (count == 0)
        g_string_append(out, "cpus none");
    else
        g_string_append_printf(out, "cpus %s (%u)", text, count);
}

static void append_memory(GString *out, const SaNode *node)
{
    g_string_append_printf(out, "memory %" G_GUINT64_FORMAT " MiB, %" G_GUINT64_FORMAT " MiB free",
                           node->mem_total / (1024 * 1024), node->mem_free / (1024 * 1024));
}

static void append_matrix(GString *out, guint n, const guint *ids, const guint *matrix)
{
    g_string_append(out, "       ");
    for (guint b = 0; b < n; b++)
        g_string_append_printf(out, " %4u", ids[b]);
    g_string_append_c(out, '\n');
    for (guint a = 0; a < n; a++) {
        g_string_append_printf(out, "  %4u:", ids[a]);
        for (guint b = 0; b < n; b++)
            g_string_append_printf(out, " %4u", matrix[(gsize)a * n + b]);
        g_string_append_c(out, '\n');
    }
}

char *sa_topology_describe(const SaTopology *topo)
{
    GString *out;
    g_autofree guint *ids = NULL;
    guint n_nodes, n_parts;
    g_autofree char *unplaced = NULL;

    g_return_val_if_fail(topo != NULL, NULL);
    out = g_string_new(NULL);
    n_nodes = topo->nodes != NULL ? topo->nodes->len : 0;
    n_parts = topo->partitions != NULL ? topo->partitions->len : 0;

    g_string_append_printf(out, "layout: %s\n", sa_layout_to_string(topo->layout));
    if (topo->note != NULL)
        g_string_append_printf(out, "note: %s\n", topo->note);
    g_string_append(out, "online: ");
    append_cpus(out, topo->online);
    g_string_append_c(out, '\n');

    g_string_append_printf(out, "nodes: %u\n", n_nodes);
    ids = g_new0(guint, MAX(MAX(n_nodes, n_parts), 1));
    for (guint i = 0; i < n_nodes; i++) {
        const SaNode *node = g_ptr_array_index(topo->nodes, i);

        g_string_append_printf(out, "  node %u: ", node->id);
        append_cpus(out, node->cpus);
        g_string_append(out, ", ");
        append_memory(out, node);
        g_string_append_c(out, '\n');
        ids[i] = node->id;
    }
    if (topo->node_distance != NULL && n_nodes > 0) {
        g_string_append(out, "node distances:\n");
        append_matrix(out, n_nodes, ids, topo->node_distance);
    }

    g_string_append_printf(out, "partitions: %u\n", n_parts);
    for (guint i = 0; i < n_parts; i++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, i);

        g_string_append_printf(out, "  partition %u: ", part->id);
        append_cpus(out, part->cpus);
        if (part->node >= 0 && (guint)part->node < n_nodes) {
            const SaNode *node = g_ptr_array_index(topo->nodes, part->node);

            g_string_append_printf(out, ", node %u (", node->id);
            append_memory(out, node);
            g_string_append_c(out, ')');
        } else {
            g_string_append(out, ", no node");
        }
        g_string_append_c(out, '\n');
        ids[i] = part->id;
    }
    if (topo->partition_distance != NULL && n_parts > 0) {
        g_string_append(out, "partition distances:\n");
        append_matrix(out, n_parts, ids, topo->partition_distance);
    }

    unplaced = topo->unplaced != NULL ? sa_cpuset_format(topo->unplaced) : g_strdup("");
    g_string_append_printf(out, "unplaced: %s\n", unplaced[0] != '\0' ? unplaced : "none");
    return g_string_free(out, FALSE);
}
