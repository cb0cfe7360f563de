/* softaff — the host's partitions: NUMA nodes, last-level caches or custom CPU sets.
 *
 * Everything is read from sysfs through sa_sysfs_path() (node facts through host/sa-numa.h,
 * which reads devices/system/node), so the same code runs against the real /sys and against
 * the fixture trees in tests/data. A kernel without NUMA support (no devices/system/node) gives
 * one node 0 holding every online CPU, its memory unknown, and says so in topo->note.
 *
 * node:   one partition per NUMA node that lists at least one CPU (a node whose CPUs are all
 *         offline is a partition with no CPU; a memory-only node is not a partition).
 * llc:    one partition per level-3 unified cache (found by its level and type files, not by
 *         its index), id = the cache's id file or, without one, its lowest CPU. A host without
 *         any L3 uses its highest unified level and says so in topo->note. A host that
 *         describes no unified cache at all (many VMs have no cpuN/cache directories) is an
 *         error naming the directory: a guessed cache domain would give ids that mean nothing.
 * custom: the ';'-separated cpulists of [partitions] custom, ids 0, 1, ...
 * Distances between partitions come from their nodes: SA_DISTANCE_LOCAL within one node,
 * SA_DISTANCE_UNKNOWN to or from a partition without a node. */
#define G_LOG_DOMAIN "softaff-topology"

#include "sa-topology.h"

#include <string.h>

#include "sa-numa.h"
#include "sa-error.h"
#include "sa-paths.h"

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

/* A kernel without NUMA support: one node 0 holds every online CPU, SA_DISTANCE_LOCAL from
 * itself, its memory unknown (0); why is said in topo->note. */
static void load_single_node(SaTopology *topo, GPtrArray *listed, const char *why)
{
    SaNode *node = g_new0(SaNode, 1);

    node->cpus = sa_cpuset_copy(topo->online);
    g_ptr_array_add(topo->nodes, node);
    g_ptr_array_add(listed, sa_cpuset_copy(topo->online));
    topo->node_distance = g_new(guint, 1);
    topo->node_distance[0] = SA_DISTANCE_LOCAL;
    topo->note = g_strdup_printf("no NUMA information (%s): one node 0 holds every online "
                                 "CPU, its memory is not known",
                                 why);
}

/* One node: its CPUs (listed: as the kernel lists them; node->cpus: the online ones), its
 * memory and its row of node distances (row i of topo->node_distance). */
static bool load_node(SaTopology *topo, GPtrArray *listed, const SaCpuSet *ids, guint id, guint i,
                      GError **error)
{
    SaNode *node = g_new0(SaNode, 1);
    SaCpuSet *cpus;

    node->id = id;
    node->cpus = sa_cpuset_new();
    g_ptr_array_add(topo->nodes, node);
    cpus = sa_numa_node_cpus(id, error);
    if (cpus == NULL)
        return false;
    g_ptr_array_add(listed, cpus);
    sa_cpuset_assign(node->cpus, cpus);
    sa_cpuset_intersect(node->cpus, topo->online);
    if (!sa_numa_node_memory(id, &node->mem_total, &node->mem_free, error))
        return false;
    return sa_numa_node_distances(id, ids, topo->node_distance + (gsize)i * sa_cpuset_count(ids),
                                  error);
}

/* The nodes of the host into topo->nodes and topo->node_distance; listed gets the CPU numbers
 * the kernel lists for each node, before intersecting with the online set. */
static bool load_nodes(SaTopology *topo, GPtrArray *listed, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(SaCpuSet) ids = sa_numa_nodes(&local);
    guint n, i = 0;

    if (ids == NULL) {
        if (!g_error_matches(local, SA_ERROR, SA_ERROR_UNSUPPORTED)) {
            g_propagate_error(error, g_steal_pointer(&local));
            return false;
        }
        load_single_node(topo, listed, local->message);
        return true;
    }
    n = sa_cpuset_count(ids);
    topo->node_distance = g_new0(guint, MAX((gsize)n * n, 1));
    for (int id = sa_cpuset_next(ids, -1); id >= 0; id = sa_cpuset_next(ids, id), i++)
        if (!load_node(topo, listed, ids, (guint)id, i, error))
            return false;
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

/* Reads one cache directory (cpu/cacheN/indexM) of cpu: true with *out set for a unified cache,
 * true with *out NULL for any other type, false with *error. */
static bool read_cache_info(const char *dir, int cpu, CacheInfo **out, GError **error)
{
    g_autoptr(CacheInfo) info = g_new0(CacheInfo, 1);
    g_autofree char *type = NULL;
    g_autofree char *level_path = g_build_filename(dir, "level", NULL);
    g_autofree char *id_path = g_build_filename(dir, "id", NULL);
    g_autofree char *shared_path = g_build_filename(dir, "shared_cpu_list", NULL);
    guint64 v;

    *out = NULL;
    info->dir = g_strdup(dir);
    if (!read_trimmed(dir, "type", &type, error))
        return false;
    if (strcmp(type, "Unified") != 0)
        return true;
    if (!sa_read_u64(level_path, &v, error))
        return false;
    info->level = (guint)MIN(v, G_MAXUINT);
    if (g_file_test(id_path, G_FILE_TEST_EXISTS)) {
        if (!sa_read_u64(id_path, &v, error))
            return false;
        if (v > G_MAXUINT) {
            g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                        "%s: cache id %" G_GUINT64_FORMAT " is too large", id_path, v);
            return false;
        }
        info->has_id = true;
        info->id = (guint)v;
    }
    info->shared = sa_read_cpulist(shared_path, error);
    if (info->shared == NULL)
        return false;
    if (!sa_cpuset_has(info->shared, (guint)cpu)) {
        g_autofree char *text = sa_cpuset_format(info->shared);

        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "%s: shared_cpu_list \"%s\" does not contain CPU %d itself", shared_path, text,
                    cpu);
        return false;
    }
    *out = g_steal_pointer(&info);
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
        g_autofree char *path = NULL;
        CacheInfo *info = NULL;

        if (!g_str_has_prefix(name, "index"))
            continue;
        path = g_build_filename(base, name, NULL);
        if (!read_cache_info(path, cpu, &info, error))
            return NULL;
        if (info != NULL)
            g_ptr_array_add(caches, info);
    }
    return g_steal_pointer(&caches);
}

/* The state of one build_llc_layout() run. */
typedef struct {
    SaTopology *topo;
    GPtrArray *per_cpu; /* per online CPU, in order: its unified caches (GPtrArray*) */
    guint level;        /* the cache level whose caches are the partitions */
    GHashTable *by_id;  /* cache id + 1 -> SaPartition* */
    GHashTable *dir_of; /* SaPartition* -> the cache directory it was made from */
    SaCpuSet *placed;   /* CPUs already in a partition */
} LlcBuild;

static void llc_build_clear(LlcBuild *b)
{
    g_clear_pointer(&b->per_cpu, g_ptr_array_unref);
    g_clear_pointer(&b->by_id, g_hash_table_unref);
    g_clear_pointer(&b->dir_of, g_hash_table_unref);
    g_clear_pointer(&b->placed, sa_cpuset_free);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(LlcBuild, llc_build_clear)

/* Step 1: every online CPU's unified caches, into b->per_cpu. */
static bool llc_read_caches(LlcBuild *b, GError **error)
{
    const SaCpuSet *online = b->topo->online;

    for (int c = sa_cpuset_next(online, -1); c >= 0; c = sa_cpuset_next(online, c)) {
        GPtrArray *caches = read_cpu_caches(c, error);

        if (caches == NULL)
            return false;
        g_ptr_array_add(b->per_cpu, caches);
    }
    return true;
}

/* Step 2: one cache level for the whole host: 3 when any CPU has a level-3 unified cache,
 * otherwise the highest unified level (said in topo->note). */
static bool llc_choose_level(LlcBuild *b, GError **error)
{
    guint max_unified = 0;

    b->level = 0;
    for (guint k = 0; k < b->per_cpu->len; k++) {
        const GPtrArray *caches = g_ptr_array_index(b->per_cpu, k);

        for (guint i = 0; i < caches->len; i++) {
            const CacheInfo *info = g_ptr_array_index(caches, i);

            if (info->level == 3)
                b->level = 3;
            max_unified = MAX(max_unified, info->level);
        }
    }
    if (max_unified == 0) {
        int first = sa_cpuset_next(b->topo->online, -1);
        g_autofree char *where = sa_sysfs_path("devices/system/cpu/cpu%d/cache", MAX(first, 0));

        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "layout llc: no online CPU describes a unified cache (nothing in %s and the "
                    "other CPUs' cache directories); use layout node or custom",
                    where);
        return false;
    }
    if (b->level == 0) {
        b->level = max_unified;
        b->topo->note = g_strdup_printf("no level-3 cache on this host: the partitions are the "
                                        "level-%u unified caches",
                                        b->level);
    }
    return true;
}

/* The cache of that level among one CPU's caches, or NULL. */
static const CacheInfo *cache_of_level(const GPtrArray *caches, guint level)
{
    for (guint i = 0; i < caches->len; i++) {
        const CacheInfo *info = g_ptr_array_index(caches, i);

        if (info->level == level)
            return info;
    }
    return NULL;
}

/* A new partition for the cache info (id = its id); its CPUs may be in no other partition. */
static bool llc_add_partition(LlcBuild *b, const CacheInfo *info, guint id, GError **error)
{
    g_autoptr(SaCpuSet) cpus = sa_cpuset_copy(info->shared);
    SaPartition *part;

    sa_cpuset_intersect(cpus, b->topo->online);
    if (sa_cpuset_intersects(cpus, b->placed)) {
        g_autofree char *text = sa_cpuset_format(cpus);

        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "%s: cache %u shares CPUs %s with another level-%u cache", info->dir, id, text,
                    b->level);
        return false;
    }
    sa_cpuset_union(b->placed, cpus);
    part = partition_new(id, g_steal_pointer(&cpus));
    g_ptr_array_add(b->topo->partitions, part);
    g_hash_table_insert(b->by_id, GSIZE_TO_POINTER((gsize)id + 1), part);
    g_hash_table_insert(b->dir_of, part, info->dir);
    return true;
}

/* Step 3: each online CPU joins the partition of its cache of the chosen level (made on first
 * sight); a CPU without such a cache stays unplaced. */
static bool llc_place_cpus(LlcBuild *b, GError **error)
{
    const SaCpuSet *online = b->topo->online;
    guint k = 0;

    for (int c = sa_cpuset_next(online, -1); c >= 0; c = sa_cpuset_next(online, c), k++) {
        const CacheInfo *info = cache_of_level(g_ptr_array_index(b->per_cpu, k), b->level);
        const SaPartition *part;
        guint id;

        if (info == NULL)
            continue;
        id = info->has_id ? info->id : (guint)sa_cpuset_next(info->shared, -1);
        part = g_hash_table_lookup(b->by_id, GSIZE_TO_POINTER((gsize)id + 1));
        if (part == NULL) {
            if (!llc_add_partition(b, info, id, error))
                return false;
        } else if (!sa_cpuset_has(part->cpus, (guint)c)) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "%s and %s: two level-%u caches have the same id %u but different CPUs",
                        info->dir, (const char *)g_hash_table_lookup(b->dir_of, part), b->level,
                        id);
            return false;
        }
    }
    return true;
}

static bool build_llc_layout(SaTopology *topo, GError **error)
{
    g_auto(LlcBuild) b = {
        .topo = topo,
        .per_cpu = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref),
        .by_id = g_hash_table_new(g_direct_hash, g_direct_equal),
        .dir_of = g_hash_table_new(g_direct_hash, g_direct_equal),
        .placed = sa_cpuset_new(),
    };

    return llc_read_caches(&b, error) && llc_choose_level(&b, error) && llc_place_cpus(&b, error);
}

/* ---- layout custom ---- */

/* One entry of [partitions] custom (index i): a cpulist of online CPUs, or NULL with *error. */
static SaCpuSet *parse_custom_entry(const SaTopology *topo, guint i, const char *entry,
                                    const char *custom, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(SaCpuSet) cpus = NULL;
    g_autoptr(SaCpuSet) offline = NULL;

    if (entry[0] == '\0') {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "custom partition %u is empty in \"%s\"", i,
                    custom);
        return NULL;
    }
    cpus = sa_cpuset_parse(entry, &local);
    if (cpus == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "custom partition %u \"%s\": %s", i, entry,
                    local->message);
        return NULL;
    }
    offline = sa_cpuset_copy(cpus);
    sa_cpuset_subtract(offline, topo->online);
    if (!sa_cpuset_is_empty(offline)) {
        g_autofree char *bad = sa_cpuset_format(offline);
        g_autofree char *online = sa_cpuset_format(topo->online);

        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "custom partition %u \"%s\": CPUs %s are not online (online: %s)", i, entry,
                    bad, online);
        return NULL;
    }
    return g_steal_pointer(&cpus);
}

/* Names the first earlier custom partition that cpus (entry i) overlaps, and the CPUs. */
static void report_custom_overlap(const SaTopology *topo, char **entries, guint i,
                                  const SaCpuSet *cpus, GError **error)
{
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
                    g_strstrip(entries[j]), i, g_strstrip(entries[i]), text);
        return;
    }
}

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
        SaCpuSet *cpus = parse_custom_entry(topo, i, g_strstrip(entries[i]), custom, error);

        if (cpus == NULL)
            return false;
        if (sa_cpuset_intersects(cpus, placed)) {
            report_custom_overlap(topo, entries, i, cpus, error);
            sa_cpuset_free(cpus);
            return false;
        }
        sa_cpuset_union(placed, cpus);
        g_ptr_array_add(topo->partitions, partition_new(i, cpus));
    }
    return true;
}

/* ---- derived tables ---- */

/* The distance between two different partitions, from their nodes. */
static guint distance_between(const SaTopology *topo, const SaPartition *pa, const SaPartition *pb)
{
    if (pa->node < 0 || pb->node < 0)
        return SA_DISTANCE_UNKNOWN;
    if (pa->node == pb->node)
        return SA_DISTANCE_LOCAL;
    return topo->node_distance[(gsize)pa->node * topo->nodes->len + (guint)pb->node];
}

static void fill_partition_distances(SaTopology *topo)
{
    guint n = topo->partitions->len;

    topo->partition_distance = g_new0(guint, MAX((gsize)n * n, 1));
    for (guint a = 0; a < n; a++) {
        const SaPartition *pa = g_ptr_array_index(topo->partitions, a);

        for (guint b = 0; b < n; b++) {
            const SaPartition *pb = g_ptr_array_index(topo->partitions, b);

            topo->partition_distance[(gsize)a * n + b] =
                a == b ? 0 : distance_between(topo, pa, pb);
        }
    }
}

static void fill_cpu_partition(SaTopology *topo)
{
    topo->n_cpu_partition = (guint)(sa_cpuset_last(topo->online) + 1);
    topo->cpu_partition = g_new(int, MAX(topo->n_cpu_partition, 1));
    for (guint c = 0; c < topo->n_cpu_partition; c++)
        topo->cpu_partition[c] = -1;
    for (guint i = 0; i < topo->partitions->len; i++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, i);

        for (int c = sa_cpuset_next(part->cpus, -1); c >= 0; c = sa_cpuset_next(part->cpus, c))
            if ((guint)c < topo->n_cpu_partition)
                topo->cpu_partition[c] = (int)i;
    }
}

/* Sorts the partitions, gives each its node (node layout: already set) and derives the
 * unplaced CPUs, the partition distances and the CPU lookup table. */
static void finish(SaTopology *topo)
{
    g_ptr_array_sort(topo->partitions, compare_partition_ids);
    sa_cpuset_assign(topo->unplaced, topo->online);
    for (guint i = 0; i < topo->partitions->len; i++) {
        SaPartition *part = g_ptr_array_index(topo->partitions, i);

        if (topo->layout != SA_LAYOUT_NODE)
            part->node = majority_node(topo, part->cpus);
        sa_cpuset_subtract(topo->unplaced, part->cpus);
    }
    fill_partition_distances(topo);
    fill_cpu_partition(topo);
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

    g_return_val_if_fail(topo != NULL && topo->partitions != NULL, SA_DISTANCE_UNKNOWN);
    n = topo->partitions->len;
    g_return_val_if_fail(a_idx < n && b_idx < n, SA_DISTANCE_UNKNOWN);
    if (topo->partition_distance == NULL)
        return a_idx == b_idx ? 0 : SA_DISTANCE_UNKNOWN;
    return topo->partition_distance[(gsize)a_idx * n + b_idx];
}

/* ---- description ---- */

char *sa_topology_format_ids(const SaTopology *topo)
{
    GString *out;

    g_return_val_if_fail(topo != NULL, NULL);
    out = g_string_new(NULL);
    for (guint i = 0; topo->partitions != NULL && i < topo->partitions->len; i++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, i);

        g_string_append_printf(out, "%s%u", i > 0 ? ", " : "", part->id);
    }
    if (out->len == 0)
        g_string_append(out, "none");
    return g_string_free(out, FALSE);
}

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

/* "nodes: N", one line per node and the node distance matrix. */
static void append_nodes(GString *out, const SaTopology *topo)
{
    guint n_nodes = topo->nodes != NULL ? topo->nodes->len : 0;
    g_autofree guint *ids = g_new0(guint, MAX(n_nodes, 1));

    g_string_append_printf(out, "nodes: %u\n", n_nodes);
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
}

/* "partitions: N", one line per partition (with its node) and the partition distance matrix. */
static void append_partitions(GString *out, const SaTopology *topo)
{
    guint n_nodes = topo->nodes != NULL ? topo->nodes->len : 0;
    guint n_parts = topo->partitions != NULL ? topo->partitions->len : 0;
    g_autofree guint *ids = g_new0(guint, MAX(n_parts, 1));

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
}

char *sa_topology_describe(const SaTopology *topo)
{
    GString *out;
    g_autofree char *unplaced = NULL;

    g_return_val_if_fail(topo != NULL, NULL);
    out = g_string_new(NULL);
    g_string_append_printf(out, "layout: %s\n", sa_layout_to_string(topo->layout));
    if (topo->note != NULL)
        g_string_append_printf(out, "note: %s\n", topo->note);
    g_string_append(out, "online: ");
    append_cpus(out, topo->online);
    g_string_append_c(out, '\n');
    append_nodes(out, topo);
    append_partitions(out, topo);
    unplaced = topo->unplaced != NULL ? sa_cpuset_format(topo->unplaced) : g_strdup("");
    g_string_append_printf(out, "unplaced: %s\n", unplaced[0] != '\0' ? unplaced : "none");
    return g_string_free(out, FALSE);
}
