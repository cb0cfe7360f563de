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

/* ---- a process's guest memory, page by page ---- */

/* Resident pages of one mapping on one node. */
typedef struct {
    guint node;
    guint64 pages;
} SaNodePages;

/* One mapping that may hold guest memory: writable, and anonymous (the heap included, stacks
 * not), a memfd ("/memfd:...") or hugetlbfs ("huge" in numa_maps). QEMU's guest RAM is one of
 * these whatever its memory backend; the rest of them (the heap, small anonymous areas) is the
 * process's own memory, moved with it on purpose: it serves the vCPUs too. */
typedef struct {
    guint64 start; /* [start, end) */
    guint64 end;
    guint64 page_size; /* bytes (numa_maps kernelpagesize_kB) */
    GArray *nodes;     /* SaNodePages, as numa_maps lists them (N<node>=<pages>) */
} SaMemMapping;

typedef struct {
    GArray *mappings; /* SaMemMapping, in address order */
} SaProcMemory;

void sa_proc_memory_free(SaProcMemory *m);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaProcMemory, sa_proc_memory_free)

/* Joins the texts of /proc/PID/maps (extents, permissions) and /proc/PID/numa_maps (resident
 * pages per node, page size) into the guest-memory mappings. what names the files in errors. */
SaProcMemory *sa_proc_memory_parse(const char *maps, const char *numa_maps, const char *what,
                                   GError **error);
/* Reads PID/maps and PID/numa_maps through sa_proc_path() (SOFTAFF_PROC_ROOT in tests).
 * numa_maps walks the process's page tables: read it rarely. SA_ERROR_GONE when pid is gone. */
SaProcMemory *sa_numa_proc_memory(pid_t pid, GError **error);
/* Resident bytes of the mapping on node, or on every node when node < 0. */
guint64 sa_mem_mapping_bytes(const SaMemMapping *map, int node);
/* The same summed over every mapping. */
guint64 sa_proc_memory_bytes(const SaProcMemory *m, int node);

/* move_pages(2) through libnuma, on count page addresses of pid, moving each to node (flag
 * MPOL_MF_MOVE: pages other processes also map stay). status[i] gets the node a page is on
 * after the call, or a negative errno (-ENOMEM: node has no room, -ENOENT: not resident,
 * -EFAULT: not mapped, -EBUSY/-EACCES: not movable now). No memory policy is set: the kernel
 * may put new pages elsewhere later. false with *error when the call itself failed
 * (SA_ERROR_GONE: pid is gone; SA_ERROR_UNSUPPORTED: no NUMA support). The same caveat as
 * sa_numa_migrate_pages: pid must be a real process softaff manages. */
bool sa_numa_move_pages(pid_t pid, gulong count, void **pages, int node, int *status,
                        GError **error);
/* The same with no move: status[i] gets the node of each page (move_pages with nodes NULL). */
bool sa_numa_query_pages(pid_t pid, gulong count, void **pages, int *status, GError **error);

G_END_DECLS
