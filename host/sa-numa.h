/* softaff — our own thin layer over libnuma (internal to host/: named sa-numa.h so that it does
 * not hide the system <numa.h>; not installed).
 *
 * In production it asks libnuma; when SOFTAFF_SYSFS_ROOT is redirected it reads the fixture
 * tree instead (devices/system/node/...), because libnuma cannot be pointed at another root.
 * Nothing outside host/ calls libnuma directly. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sa-cpuset.h"

G_BEGIN_DECLS

/* The node ids of the host (sparse ids kept), as a set of numbers. SA_ERROR_UNSUPPORTED when
 * the kernel has no NUMA support (no devices/system/node). */
SaCpuSet *sa_numa_nodes(GError **error);
/* The CPUs the kernel lists for a node (offline ones may be included; callers intersect with
 * the online set). */
SaCpuSet *sa_numa_node_cpus(guint node, GError **error);
/* Memory of a node in bytes; both 0 for a memoryless node. */
bool sa_numa_node_memory(guint node, guint64 *total, guint64 *free_bytes, GError **error);
/* Distances (SLIT units) from node to every node of nodes, in increasing id order: row must
 * hold sa_cpuset_count(nodes) entries. */
bool sa_numa_node_distances(guint node, const SaCpuSet *nodes, guint *row, GError **error);
/* Moves the pages of pid from the nodes in from to the nodes in to. Returns the number of pages
 * that could not be moved, or -1 with *error. Refused while sysfs is redirected to a fixture. */
long sa_numa_migrate_pages(pid_t pid, const SaCpuSet *from, const SaCpuSet *to, GError **error);

G_END_DECLS
