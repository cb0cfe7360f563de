/* softaff — attribution: the partition a vCPU's run counts on. One rule, in two forms: on a
 * topology (sa_policy_run_partition(), for the daemon) and on the tick's per-CPU table
 * (sa_policy_map_cpus() and sa_policy_run_partition_mapped() in sa-policy-rules.h). */
#define G_LOG_DOMAIN "softaff-policy"

#include "sa-policy-rules.h"

int sa_policy_run_partition(const SaTopology *topo, int last_cpu, int home_idx)
{
    int p = last_cpu >= 0 ? sa_topology_partition_of_cpu(topo, (guint)last_cpu) : -1;
    return p >= 0 ? p : home_idx;
}

void sa_policy_map_cpus(const SaTopology *topo, int *map, guint n)
{
    for (guint c = 0; c < n; c++)
        map[c] = -1;
    for (guint p = 0; topo->partitions && p < topo->partitions->len; p++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, p);
        for (int c = sa_cpuset_next(part->cpus, -1); c >= 0 && (guint)c < n;
             c = sa_cpuset_next(part->cpus, c))
            map[c] = (int)p;
    }
}
