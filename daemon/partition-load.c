/* softaffd — each partition's averaged load and its totals (see partition-load.h). */
#include "partition-load.h"

#include "sa-policy-rules.h"

void sa_partition_load_add(SaPartitionLoad *l, const SaPartitionUsage *u, double seconds)
{
    if (!(seconds > 0))
        return;
    /* The first tick sets the average; then each tick weighs by its length (the same average
     * a forced retreat counts the host's load at, policies/sa-policy-rules.h). */
    bool first = !(l->seconds > 0);
    l->owners = first ? u->owners : sa_policy_window_fold(l->owners, u->owners, seconds);
    l->visitors = first ? u->visitors : sa_policy_window_fold(l->visitors, u->visitors, seconds);
    l->unmanaged =
        first ? u->unmanaged : sa_policy_window_fold(l->unmanaged, u->unmanaged, seconds);
    l->owners_s += u->owners * seconds;
    l->visitors_s += u->visitors * seconds;
    l->unmanaged_s += u->unmanaged * seconds;
    l->seconds += seconds;
}

double sa_partition_load_utilization(const SaPartitionLoad *l, guint ncpu)
{
    if (ncpu == 0)
        return 0;
    return CLAMP((l->owners + l->visitors + l->unmanaged) / ncpu, 0.0, 1.0);
}
