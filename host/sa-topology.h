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

/* Distances between nodes and partitions are in SLIT units, as the kernel gives them in
 * devices/system/node/nodeN/distance (ACPI System Locality Information Table): 10 is local,
 * larger is farther (20 is typically the other socket), 255 means unreachable. */

/* A partition and another one of the same node (two LLCs of one node), and a node from itself
 * (also the one node of a host without NUMA support). */
#define SA_DISTANCE_LOCAL 10u
/* The distance when it is not known: to or from a partition with no node (its CPUs are in no
 * NUMA node), and between any two different partitions of a topology without a distance matrix
 * (one built by hand). It is SLIT's "unreachable", the largest distance there is, so a
 * nearest-first order puts such partitions last. */
#define SA_DISTANCE_UNKNOWN 255u

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
    guint *node_distance;      /* nodes->len × nodes->len, row-major, SLIT units (10 = local);
                                  a host without NUMA support: one node, SA_DISTANCE_LOCAL */
    GPtrArray *partitions;     /* SaPartition*, sorted by id */
    guint *partition_distance; /* partitions->len × partitions->len, derived from node distance;
                                  a partition from itself 0, two partitions of one node
                                  SA_DISTANCE_LOCAL, SA_DISTANCE_UNKNOWN to or from a partition
                                  with no node */
    /* Added: filled by sa_topology_load; may stay NULL/0 in topologies built by hand (tests). */
    char *note;            /* how the layout was derived when it is not the plain one (LLC
                              fallback to another cache level, no NUMA support), or NULL */
    int *cpu_partition;    /* partition index of each CPU number, -1 for none; without it
                              sa_topology_partition_of_cpu scans the partitions */
    guint n_cpu_partition; /* entries in cpu_partition */
} SaTopology;

void sa_topology_free(SaTopology *topo);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaTopology, sa_topology_free)

/* Reads the host from sysfs (below SOFTAFF_SYSFS_ROOT, default /sys: devices/system/cpu and
 * devices/system/node) and builds the layout. A kernel without NUMA support (no
 * devices/system/node) gives one node 0 holding every online CPU (memory unknown, said in
 * note). custom: for SA_LAYOUT_CUSTOM, a ';'-separated list of cpulists ("0-15;16-31"); NULL
 * otherwise. Errors name what was wrong (overlapping custom partitions, a CPU that is not
 * online, an unreadable file, ...). */
SaTopology *sa_topology_load(SaLayout layout, const char *custom, GError **error);

/* Position of the partition with this id in topo->partitions, or -1. */
int sa_topology_find_partition(const SaTopology *topo, guint id);
/* Position of the partition holding cpu, or -1. Built as a lookup table, O(1). */
int sa_topology_partition_of_cpu(const SaTopology *topo, guint cpu);
/* Distance (SLIT units) between the partitions at these positions: 0 from itself, else from
 * partition_distance; without that matrix (a topology built by hand) SA_DISTANCE_UNKNOWN
 * between two different partitions. */
guint sa_topology_partition_distance(const SaTopology *topo, guint a_idx, guint b_idx);

/* The ids of the partitions in order, "0, 2, 5", or "none" when there is none (for messages
 * that say which partitions this host has). Free with g_free. */
char *sa_topology_format_ids(const SaTopology *topo);

/* A stable, human-readable description (used for golden tests and `softaffctl partitions`). */
char *sa_topology_describe(const SaTopology *topo);

G_END_DECLS
