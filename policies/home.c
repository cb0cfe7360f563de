/* softaff — the initial home of a VM: the least committed partition it is allowed on.
 *
 * commitment(P) = (vCPUs already homed on P + this VM's vCPUs) / online CPUs of P.
 * Among partitions with at least one online CPU in the allowed set, the home is the one whose
 * node has memory_bytes free (when any has), then the lowest commitment, then the most free
 * memory, then the lowest id. Integer cross-multiplication keeps ties exact. */
#define G_LOG_DOMAIN "softaff-policy"

#include "sa-error.h"
#include "sa-policy-private.h"

typedef struct {
    const SaPartition *part;
    guint cpus;       /* online CPUs of the partition */
    guint64 load;     /* homed vCPUs with this VM */
    guint64 mem_free; /* free memory of its node, minus what this tick already promised */
    bool mem_ok;      /* mem_free >= the VM's memory */
} Candidate;

static guint64 partition_mem_free(const SaTopology *topo, const SaPartition *part,
                                  const guint64 *claimed_bytes)
{
    if (part->node < 0 || topo->nodes == NULL || (guint)part->node >= topo->nodes->len)
        return 0;
    const SaNode *node = g_ptr_array_index(topo->nodes, part->node);
    guint64 claimed = claimed_bytes ? claimed_bytes[part->node] : 0;
    return node->mem_free > claimed ? node->mem_free - claimed : 0;
}

static bool candidate_better(const Candidate *a, const Candidate *b)
{
    if (a->mem_ok != b->mem_ok)
        return a->mem_ok;
    /* a->load / a->cpus < b->load / b->cpus, exactly */
    guint64 lhs = a->load * b->cpus;
    guint64 rhs = b->load * a->cpus;
    if (lhs != rhs)
        return lhs < rhs;
    if (a->mem_free != b->mem_free)
        return a->mem_free > b->mem_free;
    return a->part->id < b->part->id;
}

/* The partition of the best candidate, why, and its commitment. */
static void advise(const Candidate *best, guint64 memory_bytes, SaAdvice *out)
{
    out->partition_id = (int)best->part->id;
    out->commitment = (double)best->load / best->cpus;
    int len = g_snprintf(out->reason, sizeof out->reason,
                         "partition %u: least committed, %.2f home vCPUs per CPU with this VM",
                         best->part->id, out->commitment);
    if (memory_bytes == 0 || len <= 0 || (gsize)len >= sizeof out->reason)
        return;
    g_autofree char *need = g_format_size_full(memory_bytes, G_FORMAT_SIZE_IEC_UNITS);
    g_autofree char *have = g_format_size_full(best->mem_free, G_FORMAT_SIZE_IEC_UNITS);
    if (best->mem_ok)
        g_snprintf(out->reason + len, sizeof out->reason - (gsize)len,
                   "; its node has %s free for %s", have, need);
    else
        g_snprintf(out->reason + len, sizeof out->reason - (gsize)len,
                   "; no node has %s free (its node: %s)", need, have);
}

static void no_home_error(const SaCpuSet *allowed, GError **error)
{
    if (allowed) {
        g_autofree char *text = sa_cpuset_format(allowed);
        g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND,
                    "no partition has an online CPU in the allowed set '%s'", text);
    } else {
        g_set_error_literal(error, SA_ERROR, SA_ERROR_NOT_FOUND, "no partition has an online CPU");
    }
}

bool sa_policy_choose_home_claimed(const SaTopology *topo, const guint *committed_vcpus,
                                   const guint64 *claimed_bytes, const SaCpuSet *allowed,
                                   guint n_vcpus, guint64 memory_bytes, SaAdvice *out,
                                   GError **error)
{
    g_return_val_if_fail(topo != NULL && out != NULL, false);
    g_return_val_if_fail(error == NULL || *error == NULL, false);

    Candidate best = {0};
    bool found = false;
    guint n_parts = topo->partitions ? topo->partitions->len : 0;

    for (guint i = 0; i < n_parts; i++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, i);
        if (part->cpus == NULL || sa_cpuset_is_empty(part->cpus))
            continue;
        if (allowed && !sa_cpuset_intersects(part->cpus, allowed))
            continue;
        Candidate c = {
            .part = part,
            .cpus = sa_cpuset_count(part->cpus),
            .load = (guint64)(committed_vcpus ? committed_vcpus[i] : 0) + n_vcpus,
            .mem_free = partition_mem_free(topo, part, claimed_bytes),
        };
        c.mem_ok = memory_bytes == 0 || c.mem_free >= memory_bytes;
        if (!found || candidate_better(&c, &best)) {
            best = c;
            found = true;
        }
    }
    if (!found) {
        no_home_error(allowed, error);
        return false;
    }
    advise(&best, memory_bytes, out);
    return true;
}

bool sa_policy_choose_home(const SaTopology *topo, const guint *committed_vcpus,
                           const SaCpuSet *allowed, guint n_vcpus, guint64 memory_bytes,
                           SaAdvice *out, GError **error)
{
    return sa_policy_choose_home_claimed(topo, committed_vcpus, NULL, allowed, n_vcpus,
                                         memory_bytes, out, error);
}
