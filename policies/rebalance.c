/* softaff — homes rebalance: move the home of one preferred="auto" VM off a partition whose
 * owners have wanted more than it has for a long window, onto one that stayed under-used.
 *
 * Pure: no I/O, no clock. Per partition the owners' demand (unmanaged load + the demand of the
 * VMs homed there, wherever they run) is smoothed over an eighth of the window, and each
 * partition remembers since when it is over-committed or under-used. A move must leave both
 * partitions within their capacity, so it cannot merely flip the imbalance; afterwards both
 * partitions cool down for a window and the VM for an hour. See docs/rebalance.md. */
#define G_LOG_DOMAIN "softaff-policy"

#include "sa-error.h"
#include "sa-policy-rules.h"
#include "sa-policy.h"

#include <string.h>

#define NEVER G_MININT64
#define HOUR_MS G_GINT64_CONSTANT(3600000)

typedef struct {
    guint id;
    guint capacity;      /* online CPUs */
    double load;         /* smoothed owners' demand, CPUs */
    gint64 over_since;   /* NEVER while not over-committed */
    gint64 under_since;  /* NEVER while not under-used */
    gint64 cooled_until; /* no move from or to it before this */
} Part;

typedef struct {
    gint64 at_ms; /* NEVER: an empty slot */
    char *vm;
} Record;

struct _SaRebalanceState {
    gint64 last_ms; /* the previous sample, NEVER before the first */
    guint n_parts;
    Part *parts;    /* indexed like topo->partitions */
    double *sample; /* scratch: this call's owners' demand per partition */
    Record moves[SA_REBALANCE_MAX_MOVES];
    guint next_move; /* ring position of the next record */
};

/* A candidate move being judged. */
typedef struct {
    guint vm;
    guint from_idx;
    guint to_idx;
    double demand;
} Move;

void sa_rebalance_config_init(SaRebalanceConfig *cfg)
{
    *cfg = (SaRebalanceConfig){
        .enabled = true,
        .window_ms = 600000,
        .min_gap = 0.2,
        .max_moves_per_hour = 2,
    };
}

bool sa_rebalance_enabled_from_string(const char *text, bool *out, GError **error)
{
    g_return_val_if_fail(out != NULL, false);
    if (g_strcmp0(text, "auto") == 0 || g_strcmp0(text, "off") == 0) {
        *out = text[0] == 'a';
        return true;
    }
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "rebalance '%s': expected auto or off",
                text ? text : "");
    return false;
}

SaRebalanceState *sa_rebalance_state_new(void)
{
    SaRebalanceState *st = g_new0(SaRebalanceState, 1);
    st->last_ms = NEVER;
    for (guint i = 0; i < SA_REBALANCE_MAX_MOVES; i++)
        st->moves[i].at_ms = NEVER;
    return st;
}

void sa_rebalance_state_free(SaRebalanceState *st)
{
    if (st == NULL)
        return;
    for (guint i = 0; i < SA_REBALANCE_MAX_MOVES; i++)
        g_free(st->moves[i].vm);
    g_free(st->parts);
    g_free(st->sample);
    g_free(st);
}

/* ---- observe: the owners' demand per partition, smoothed, and how long it has been so ---- */

/* Forgets the partitions' history when the layout changed (other ids, other CPU counts). */
static void match_layout(SaRebalanceState *st, const SaTopology *topo)
{
    guint n = topo->partitions->len;
    bool same = st->n_parts == n;
    for (guint p = 0; same && p < n; p++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, p);
        same = st->parts[p].id == part->id &&
               st->parts[p].capacity == (part->cpus ? sa_cpuset_count(part->cpus) : 0);
    }
    if (same)
        return;
    g_free(st->parts);
    g_free(st->sample);
    st->n_parts = n;
    st->parts = g_new0(Part, n);
    st->sample = g_new0(double, n);
    for (guint p = 0; p < n; p++) {
        const SaPartition *part = g_ptr_array_index(topo->partitions, p);
        st->parts[p] = (Part){.id = part->id,
                              .capacity = part->cpus ? sa_cpuset_count(part->cpus) : 0,
                              .over_since = NEVER,
                              .under_since = NEVER,
                              .cooled_until = NEVER};
    }
    st->last_ms = NEVER;
}

/* What a VM's vCPUs want, from the tick's smoothed demand: at most one CPU per vCPU. */
static double vm_demand(const SaPolicyVm *vm)
{
    return CLAMP(vm->st.demand, 0.0, (double)vm->n_vcpus);
}

/* The partition index of a VM's home, or -1 (no home, or softaff does not manage it: a VM with
 * mode off is unmanaged load, already in usage). */
static int home_index(const SaTopology *topo, const SaPolicyVm *vm)
{
    if (vm->mode == SA_MODE_OFF || !vm->st.placed || vm->st.home < 0)
        return -1;
    return sa_topology_find_partition(topo, (guint)vm->st.home);
}

/* Owners' demand: unmanaged load plus the demand of the VMs homed there, including what they
 * run on partitions they visit (usage.owners counts only the run at home, so it would hide
 * exactly the over-commitment that bursting relieves). */
static void sample_demand(SaRebalanceState *st, const SaTopology *topo,
                          const SaPartitionUsage *usage, SaPolicyVm *const *vms, guint n_vms)
{
    for (guint p = 0; p < st->n_parts; p++)
        st->sample[p] = MAX(0.0, usage[p].unmanaged);
    for (guint i = 0; i < n_vms; i++) {
        int p = home_index(topo, vms[i]);
        if (p >= 0)
            st->sample[p] += vm_demand(vms[i]);
    }
}

static bool is_over(const SaRebalanceConfig *cfg, const Part *part)
{
    return part->capacity > 0 && part->load >= (1.0 + cfg->min_gap) * part->capacity;
}

static bool is_under(const SaRebalanceConfig *cfg, const Part *part)
{
    return part->capacity > 0 && part->load <= (1.0 - cfg->min_gap) * part->capacity;
}

/* since: kept while the condition holds, started now when it begins, NEVER when it ends. */
static gint64 since(bool holds, gint64 was, gint64 now)
{
    if (!holds)
        return NEVER;
    return was == NEVER ? now : was;
}

/* EWMA over time with a time constant of an eighth of the window: one quiet tick does not end an
 * imbalance, a load that alternates faster than the window never lasts a window. A gap longer
 * than the window (the daemon stopped) starts afresh. */
static void observe(const SaRebalanceConfig *cfg, SaRebalanceState *st, gint64 now)
{
    if (st->last_ms != NEVER && now <= st->last_ms)
        return; /* the same instant again: nothing new */
    double tau = MAX(1.0, cfg->window_ms / 8.0);
    bool fresh = st->last_ms == NEVER || now - st->last_ms > (gint64)cfg->window_ms;
    double dt = fresh ? 0.0 : (double)(now - st->last_ms);
    for (guint p = 0; p < st->n_parts; p++) {
        Part *part = &st->parts[p];
        if (fresh) {
            part->load = st->sample[p];
            part->over_since = part->under_since = NEVER;
        } else {
            part->load += dt / (tau + dt) * (st->sample[p] - part->load);
        }
        part->over_since = since(is_over(cfg, part), part->over_since, now);
        part->under_since = since(is_under(cfg, part), part->under_since, now);
    }
    st->last_ms = now;
}

/* ---- the moves of the last hour: the hourly cap and each VM's cool-down ---- */

static bool within_hour(const Record *r, gint64 now)
{
    return r->at_ms != NEVER && now - r->at_ms < HOUR_MS;
}

static guint moves_last_hour(const SaRebalanceState *st, gint64 now)
{
    guint n = 0;
    for (guint i = 0; i < SA_REBALANCE_MAX_MOVES; i++)
        n += within_hour(&st->moves[i], now);
    return n;
}

static bool moved_last_hour(const SaRebalanceState *st, const char *name, gint64 now)
{
    for (guint i = 0; i < SA_REBALANCE_MAX_MOVES; i++)
        if (within_hour(&st->moves[i], now) && g_strcmp0(st->moves[i].vm, name) == 0)
            return true;
    return false;
}

/* ---- choose: the most over-committed source, the cheapest VM, the least loaded target ---- */

static bool lasted(const SaRebalanceConfig *cfg, gint64 since_ms, gint64 now)
{
    return since_ms != NEVER && now - since_ms >= (gint64)cfg->window_ms;
}

static bool cooled(const Part *part, gint64 now)
{
    return part->cooled_until == NEVER || now >= part->cooled_until;
}

/* a->load / a->capacity > b->load / b->capacity (both capacities > 0). */
static bool busier(const Part *a, const Part *b)
{
    return a->load * b->capacity > b->load * a->capacity;
}

/* The node of a target must hold the VM's memory when it is another node whose memory is
 * known (a topology built by hand has none: then memory does not decide). */
static bool memory_fits(const SaTopology *topo, const SaPolicyVm *vm, guint from, guint to)
{
    const SaPartition *src = g_ptr_array_index(topo->partitions, from);
    const SaPartition *dst = g_ptr_array_index(topo->partitions, to);
    if (dst->node < 0 || dst->node == src->node || topo->nodes == NULL ||
        (guint)dst->node >= topo->nodes->len)
        return true;
    const SaNode *node = g_ptr_array_index(topo->nodes, dst->node);
    return node->mem_total == 0 || node->mem_free >= vm->memory_bytes;
}

/* Whether to may take the VM: under-used for a window, not cooling down, allowed, and after the
 * move within its capacity and the noise margin (not over-committed, and not merely the new
 * over-committed one). */
static bool target_fits(const SaRebalanceConfig *cfg, const SaRebalanceState *st,
                        const SaTopology *topo, const Move *m, const SaPolicyVm *vm, gint64 now)
{
    const Part *to = &st->parts[m->to_idx];
    const SaPartition *part = g_ptr_array_index(topo->partitions, m->to_idx);
    if (m->to_idx == m->from_idx || !lasted(cfg, to->under_since, now) || !cooled(to, now))
        return false;
    if (vm->allowed && !sa_cpuset_intersects(part->cpus, vm->allowed))
        return false;
    /* The margin: measured noise (the host's own threads) must not veto a move that fits. */
    return to->load + m->demand <= to->capacity + sa_policy_margin(to->capacity) &&
           memory_fits(topo, vm, m->from_idx, m->to_idx);
}

/* The least loaded target after the move, ties nearer, then lower id (array order). */
static bool best_target(const SaRebalanceConfig *cfg, const SaRebalanceState *st,
                        const SaTopology *topo, const SaPolicyVm *vm, Move *m, gint64 now)
{
    bool found = false;
    Move best = *m;
    for (guint p = 0; p < st->n_parts; p++) {
        Move c = *m;
        c.to_idx = p;
        if (!target_fits(cfg, st, topo, &c, vm, now))
            continue;
        if (found) {
            const Part *a = &st->parts[p], *b = &st->parts[best.to_idx];
            double lhs = (a->load + m->demand) * b->capacity;
            double rhs = (b->load + m->demand) * a->capacity;
            guint da = sa_topology_partition_distance(topo, m->from_idx, p);
            guint db = sa_topology_partition_distance(topo, m->from_idx, best.to_idx);
            if (lhs > rhs || (lhs == rhs && da >= db))
                continue;
        }
        best = c;
        found = true;
    }
    *m = best;
    return found;
}

/* Least memory to move first; ties by name, then array order: the same inputs, the same VM. */
static bool cheaper(SaPolicyVm *const *vms, guint a, guint b)
{
    if (vms[a]->memory_bytes != vms[b]->memory_bytes)
        return vms[a]->memory_bytes < vms[b]->memory_bytes;
    int order = g_strcmp0(vms[a]->name, vms[b]->name);
    return order != 0 ? order < 0 : a < b;
}

/* Never a home the user chose (preferred set, by the VM or a rule), an unmanaged VM, or one
 * moved in the last hour. */
static bool movable(const SaRebalanceState *st, const SaPolicyVm *vm, gint64 now)
{
    return vm->preferred < 0 && vm->mode != SA_MODE_OFF && !moved_last_hour(st, vm->name, now);
}

/* The cheapest VM homed on from whose move leaves from within its capacity, with its target. */
static bool move_from(const SaRebalanceConfig *cfg, const SaRebalanceState *st,
                      const SaTopology *topo, SaPolicyVm *const *vms, guint n_vms, guint from,
                      gint64 now, Move *out)
{
    const Part *src = &st->parts[from];
    bool found = false;
    for (guint i = 0; i < n_vms; i++) {
        if (home_index(topo, vms[i]) != (int)from || !movable(st, vms[i], now))
            continue;
        Move m = {.vm = i, .from_idx = from, .demand = vm_demand(vms[i])};
        if (src->load - m.demand > src->capacity + sa_policy_margin(src->capacity))
            continue; /* would not fix the source (within the noise margin) */
        if (found && !cheaper(vms, i, out->vm))
            continue;
        if (!best_target(cfg, st, topo, vms[i], &m, now))
            continue;
        *out = m;
        found = true;
    }
    return found;
}

/* Sources over-committed for a window, the most over-committed first (ties: lower id). */
static bool choose(const SaRebalanceConfig *cfg, const SaRebalanceState *st, const SaTopology *topo,
                   SaPolicyVm *const *vms, guint n_vms, gint64 now, Move *out)
{
    bool found = false;
    for (guint p = 0; p < st->n_parts; p++) {
        const Part *src = &st->parts[p];
        if (!lasted(cfg, src->over_since, now) || !cooled(src, now))
            continue;
        if (found && !busier(src, &st->parts[out->from_idx]))
            continue;
        Move m;
        if (move_from(cfg, st, topo, vms, n_vms, p, now, &m)) {
            *out = m;
            found = true;
        }
    }
    return found;
}

/* ---- commit: remember the move, shift the loads, cool both partitions down ---- */

static void describe(const SaRebalanceConfig *cfg, const SaRebalanceState *st, const Move *m,
                     const SaPolicyVm *vm, SaRebalanceMove *out)
{
    const Part *from = &st->parts[m->from_idx], *to = &st->parts[m->to_idx];
    g_autofree char *mem = g_format_size_full(vm->memory_bytes, G_FORMAT_SIZE_IEC_UNITS);
    g_snprintf(out->reason, sizeof out->reason,
               "rebalance: home of %s from partition %u to %u: owners want %.1f of %u CPUs on "
               "%u and %.1f of %u on %u for %u s; moving %.1f CPUs (%s) leaves %.1f and %.1f",
               vm->name ? vm->name : "?", from->id, to->id, from->load, from->capacity, from->id,
               to->load, to->capacity, to->id, cfg->window_ms / 1000, m->demand, mem,
               from->load - m->demand, to->load + m->demand);
}

static void commit(const SaRebalanceConfig *cfg, SaRebalanceState *st, const Move *m,
                   const SaPolicyVm *vm, gint64 now)
{
    Record *r = &st->moves[st->next_move];
    g_free(r->vm);
    *r = (Record){.at_ms = now, .vm = g_strdup(vm->name)};
    st->next_move = (st->next_move + 1) % SA_REBALANCE_MAX_MOVES;

    Part *from = &st->parts[m->from_idx], *to = &st->parts[m->to_idx];
    from->load = MAX(0.0, from->load - m->demand);
    to->load += m->demand;
    from->over_since = from->under_since = to->over_since = to->under_since = NEVER;
    from->cooled_until = to->cooled_until = now + (gint64)cfg->window_ms;
}

bool sa_rebalance_step(const SaRebalanceConfig *cfg, SaRebalanceState *st, const SaTopology *topo,
                       const SaPartitionUsage *usage, SaPolicyVm *const *vms, guint n_vms,
                       gint64 now_ms, SaRebalanceMove *out)
{
    g_return_val_if_fail(cfg != NULL && st != NULL && topo != NULL && out != NULL, false);
    g_return_val_if_fail(n_vms == 0 || vms != NULL, false);
    if (!cfg->enabled || usage == NULL || topo->partitions == NULL)
        return false;

    SaRebalanceConfig c = *cfg;
    c.min_gap = CLAMP(c.min_gap, 0.0, 0.9);
    match_layout(st, topo);
    sample_demand(st, topo, usage, vms, n_vms);
    observe(&c, st, now_ms);

    guint cap = MIN(c.max_moves_per_hour, SA_REBALANCE_MAX_MOVES);
    Move m = {0};
    if (moves_last_hour(st, now_ms) >= cap || !choose(&c, st, topo, vms, n_vms, now_ms, &m))
        return false;
    *out = (SaRebalanceMove){
        .vm = m.vm,
        .from = st->parts[m.from_idx].id,
        .to = st->parts[m.to_idx].id,
    };
    describe(&c, st, &m, vms[m.vm], out);
    commit(&c, st, &m, vms[m.vm], now_ms);
    return true;
}
