/* softaff — the host's CPU partitions: NUMA nodes, LLC domains or custom CPU sets. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "sa-cpuset.h"

G_BEGIN_DECLS

typedef enum {
    SA_LAYOUT_NODE,
    SA_LAYOUT_LLC,
    SA_LAYOUT_CUSTOM,
} SaLayout;

const char *sa_layout_to_string(SaLayout layout);
bool sa_layout_from_string(const char *text, SaLayout *out, GError **error);

typedef struct {
    guint id;          /* the kernel's node id (sparse ids are kept) */
    SaCpuSet *cpus;    /* online CPUs of the node (may be empty: CPU-less node) */
    guint64 mem_total; /* bytes; 0 for a memoryless node */
    guint64 mem_free;  /* bytes */
} SaNode;

typedef struct {
    guint id;       /* node id (node), cache id (llc), index in [partitions] custom (custom) */
    SaCpuSet *cpus; /* online CPUs of the partition; may be empty (all offline) */
    int node; /* index into SaTopology.nodes of the node holding most of its CPUs, -1 if none */
} SaPartition;

typedef struct {
    SaLayout layout;
    SaCpuSet *online;          /* all online CPUs */
    SaCpuSet *unplaced;        /* online CPUs in no partition (e.g. in no NUMA node) */
    GPtrArray *nodes;          /* SaNode*, sorted by id */
    guint *node_distance;      /* nodes->len × nodes->len, row-major, SLIT units (10 = local) */
    GPtrArray *partitions;     /* SaPartition*, sorted by id */
    guint *partition_distance; /* partitions->len × partitions->len, derived from node distance;
                                  two LLCs of one node are 10 apart, a partition from itself 0;
                                  255 to or from a partition with no node (added) */
    /* Added: filled by sa_topology_load; may stay NULL/0 in topologies built by hand (tests). */
    char *note;            /* how the layout was derived when it is not the plain one (LLC
                              fallback to another cache level, no NUMA support), or NULL */
    int *cpu_partition;    /* partition index of each CPU number, -1 for none; without it
                              sa_topology_partition_of_cpu scans the partitions */
    guint n_cpu_partition; /* entries in cpu_partition */
} SaTopology;

void sa_topology_free(SaTopology *topo);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaTopology, sa_topology_free)

/* Reads the host (through SOFTAFF_SYSFS_ROOT; libnuma when not redirected) and builds the layout.
 * custom: for SA_LAYOUT_CUSTOM, a ';'-separated list of cpulists ("0-15;16-31"); NULL otherwise.
 * Errors name what was wrong (overlapping custom partitions, a CPU that is not online, ...). */
SaTopology *sa_topology_load(SaLayout layout, const char *custom, GError **error);

/* Position of the partition with this id in topo->partitions, or -1. */
int sa_topology_find_partition(const SaTopology *topo, guint id);
/* Position of the partition holding cpu, or -1. Built as a lookup table, O(1). */
int sa_topology_partition_of_cpu(const SaTopology *topo, guint cpu);
guint sa_topology_partition_distance(const SaTopology *topo, guint a_idx, guint b_idx);

/* A stable, human-readable description (used for golden tests and `softaffctl partitions`). */
char *sa_topology_describe(const SaTopology *topo);

G_END_DECLS
