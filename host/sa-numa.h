/* softaff — NUMA nodes and page migration (internal to host/: named sa-numa.h so that it does
 * not hide the system <numa.h>; not installed).
 *
 * Node facts are read from the kernel's sysfs ABI, devices/system/node/..., through
 * sa_sysfs_path(): below SOFTAFF_SYSFS_ROOT when it is set (fixture trees in tests), /sys
 * otherwise. These are the files libnuma reads itself, so on a real host the answers are
 * libnuma's. libnuma is used only to move pages (sa_numa_migrate_pages), which sysfs cannot do;
 * nothing outside this file calls libnuma. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sa-cpuset.h"

G_BEGIN_DECLS

/* The online node ids of the host (devices/system/node/online; sparse ids kept), as a set of
 * numbers. SA_ERROR_UNSUPPORTED when the kernel has no NUMA support (no devices/system/node). */
SaCpuSet *sa_numa_nodes(GError **error);
/* The CPUs the kernel lists for a node (nodeN/cpulist: offline ones may be included; callers
 * intersect with the online set). */
SaCpuSet *sa_numa_node_cpus(guint node, GError **error);
/* Memory of a node in bytes (nodeN/meminfo: MemTotal, MemFree); both 0 for a memoryless node. */
bool sa_numa_node_memory(guint node, guint64 *total, guint64 *free_bytes, GError **error);
/* Distances (SLIT units) from node to every node of nodes, in increasing id order (nodeN/distance,
 * which holds one entry per online node): row must hold sa_cpuset_count(nodes) entries. */
bool sa_numa_node_distances(guint node, const SaCpuSet *nodes, guint *row, GError **error);
/* Moves the pages of pid from the nodes in from to the nodes in to, with libnuma
 * (numa_migrate_pages). Returns the number of pages that could not be moved, or -1 with *error
 * (SA_ERROR_GONE when pid does not exist, SA_ERROR_UNSUPPORTED without NUMA support). This acts
 * on the running kernel whatever SOFTAFF_SYSFS_ROOT says: the caller is responsible for giving
 * the pid of a real process of this host whose memory may be moved (a QEMU it manages), never
 * a pid taken from a fixture or a fake /proc. */
long sa_numa_migrate_pages(pid_t pid, const SaCpuSet *from, const SaCpuSet *to, GError **error);

G_END_DECLS
