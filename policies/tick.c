/* softaff — one policy tick: homes, per-partition accounting, then per VM its demand, home,
 * back-off, retreat, burst (or widen or shrink), doors and CPU sets.
 *
 * This file gathers the numbers and applies the decisions; the rules that judge the numbers are
 * the small inline functions of sa-policy-rules.h. Every formula is explained in
 * docs/policy.md; the names here follow it (capacity, busy, owners, visitors, unmanaged,
 * owner_wait, owner_demand, margin, spare, demand, extra).
 * Cost: O(CPUs + total vCPUs + VMs × partitions) with one scratch allocation per tick. */
#define G_LOG_DOMAIN "softaff-policy"

#include "sa-policy-private.h"
#include "sa-policy-rules.h"

#include <stdarg.h>
#include <string.h>

#define NEVER SA_POLICY_NEVER
/* Partitions named in one reason. */
#define MAX_IDS 16

typedef enum {
    HOME_NONE,
    HOME_PREFERRED,
    HOME_ASSIGNED,
    HOME_KEPT,
    HOME_AUTO,
} HomeHow;

typedef struct {
    const SaPolicyConfig *cfg;
    const SaTopology *topo;
    gint64 now;
    double interval_ns; /* 0: no interval, no samples this tick */
    guint n_parts;
    guint n_nodes;
    guint n_vms;
    const SaCpuSet *all; /* for VMs without an allowed set */
    const double *cpu_busy;
    guint n_cpu_busy;             /* 0 when the host gave no utilization */
    const double *cpu_visitors;   /* NULL: not measured */
    const double *unmanaged_prev; /* NULL: not known (host->unmanaged_avg) */

    /* per CPU */
    guint n_cpu_map;
    int *part_of_cpu; /* from sa_policy_map_cpus() */

    /* per partition, in CPUs */
    guint *capacity;           /* online CPUs */
    double *margin;            /* max(0.25, 10% of capacity) */
    double *busy;              /* Σ cpu_busy */
    double *owners;            /* run of vCPUs homed here, measured here */
    double *visitors;          /* run of vCPUs homed elsewhere, measured here */
    double *visitors_measured; /* the visitors' threads' run here, by CPU (-1: not measured) */
    double *owner_wait;        /* delay of vCPUs homed here, wherever they waited */
    double *visitor_wait;      /* delay of vCPUs homed elsewhere that last ran here */
    double *unmanaged;         /* busy nobody explains */
    double *unmanaged_avg;     /* its average over about 2 s with this tick (the retreat's) */
    double *hidden;            /* unmanaged wait hidden behind visitors */
    double *owner_demand;      /* owners + unmanaged + owner_wait */
    double *visitors_now;      /* visitors minus those that retreated this tick */
    double *reserved;          /* spare promised to bursts decided this tick */
    double *relief;            /* owner demand moved away by bursts decided this tick */
    double *room;              /* room on each visited partition of the VM being decided */
    guint *committed;          /* vCPUs homed here */
    guint *owner_vms;
    guint8 *retreated; /* a visitor was pushed out this tick: no burst target this tick */
    guint8 *order_ready;
    guint *order; /* n_parts × n_parts: per home, the other partitions nearest first */

    /* per node */
    guint64 *claimed; /* memory of VMs given a home on the node this tick */

    /* per VM */
    int *home;
    guint8 *how;
    guint8 *preferred_missing;
    double *run;  /* Σ run/interval of its vCPUs */
    double *wait; /* Σ delay/interval of its vCPUs */

    SaCpuSet *set;
    SaCpuSet *tmp;
    SaCpuSet *own_all; /* t->all when the topology has no online set */
    char *scratch;     /* the one allocation behind every array above */
} Tick;

/* ---- scratch: one allocation, laid out twice (measure, then carve) ---- */

typedef struct {
    char *base;
    gsize used;
} Arena;

/* The next size bytes (16-aligned); NULL while only measuring (no base yet). */
static void *arena_take(Arena *a, gsize size)
{
    void *p = a->base ? a->base + a->used : NULL;
    a->used += (size + 15) & ~(gsize)15;
    return p;
}

#define TAKE(a, field, n) ((field) = arena_take((a), sizeof(*(field)) * (gsize)(n)))

/* Every per-CPU, per-partition, per-node and per-VM array of the tick, in one arena. */
static void tick_layout(Tick *t, Arena *a)
{
    guint np = t->n_parts;
    TAKE(a, t->part_of_cpu, t->n_cpu_map);
    TAKE(a, t->capacity, np);
    TAKE(a, t->margin, np);
    TAKE(a, t->busy, np);
    TAKE(a, t->owners, np);
    TAKE(a, t->visitors, np);
    TAKE(a, t->visitors_measured, np);
    TAKE(a, t->owner_wait, np);
    TAKE(a, t->visitor_wait, np);
    TAKE(a, t->unmanaged, np);
    TAKE(a, t->unmanaged_avg, np);
    TAKE(a, t->hidden, np);
    TAKE(a, t->owner_demand, np);
    TAKE(a, t->visitors_now, np);
    TAKE(a, t->reserved, np);
    TAKE(a, t->relief, np);
    TAKE(a, t->room, np);
    TAKE(a, t->committed, np);
    TAKE(a, t->owner_vms, np);
    TAKE(a, t->retreated, np);
    TAKE(a, t->order_ready, np);
    TAKE(a, t->order, (gsize)np * np);
    TAKE(a, t->claimed, t->n_nodes);
    TAKE(a, t->home, t->n_vms);
    TAKE(a, t->how, t->n_vms);
    TAKE(a, t->preferred_missing, t->n_vms);
    TAKE(a, t->run, t->n_vms);
    TAKE(a, t->wait, t->n_vms);
}

/* ---- small helpers ---- */

/* The partition at index idx. */
static inline const SaPartition *part_at(const Tick *t, int idx)
{
    return g_ptr_array_index(t->topo->partitions, idx);
}

/* Partitions are sorted by id: binary search. */
static int find_part(const Tick *t, guint id)
{
    int lo = 0, hi = (int)t->n_parts - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        guint mid_id = part_at(t, mid)->id;
        if (mid_id == id)
            return mid;
        if (mid_id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static inline double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

/* The other partitions, nearest to home first, ties by id (= index order). */
static const guint *nearest_first(Tick *t, int home)
{
    guint *ord = t->order + (gsize)home * t->n_parts;
    if (t->order_ready[home])
        return ord;
    guint n = 0;
    for (guint p = 0; p < t->n_parts; p++) {
        if ((int)p == home)
            continue;
        guint d = sa_topology_partition_distance(t->topo, (guint)home, p);
        guint j = n++;
        while (j > 0 && sa_topology_partition_distance(t->topo, (guint)home, ord[j - 1]) > d) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = p;
    }
    t->order_ready[home] = 1;
    return ord;
}

/* The VM's allowed set; none or an empty one means every online CPU (never an empty set). */
static inline const SaCpuSet *vm_allowed(const Tick *t, const SaPolicyVm *vm)
{
    return vm->allowed && !sa_cpuset_is_empty(vm->allowed) ? vm->allowed : t->all;
}

/* Online CPUs of partition p the VM may use. */
static guint allowed_capacity(Tick *t, const SaCpuSet *allowed, int p)
{
    const SaPartition *part = part_at(t, p);
    if (t->capacity[p] == 0)
        return 0;
    if (sa_cpuset_is_subset(part->cpus, allowed))
        return t->capacity[p];
    if (!sa_cpuset_intersects(part->cpus, allowed))
        return 0;
    sa_cpuset_assign(t->tmp, part->cpus);
    sa_cpuset_intersect(t->tmp, allowed);
    return sa_cpuset_count(t->tmp);
}

/* Busy fraction of the allowed CPUs of partition p. */
static double allowed_utilization(Tick *t, const SaCpuSet *allowed, int p, guint cap_allowed)
{
    const SaPartition *part = part_at(t, p);
    if (cap_allowed == 0)
        return 0;
    if (cap_allowed == t->capacity[p])
        return t->busy[p] / t->capacity[p];
    double busy = 0;
    for (int c = sa_cpuset_next(part->cpus, -1); c >= 0; c = sa_cpuset_next(part->cpus, c))
        if (sa_cpuset_has(allowed, (guint)c) && (guint)c < t->n_cpu_busy)
            busy += clamp01(t->cpu_busy[c]);
    return busy / cap_allowed;
}

/* The partition a vCPU's run is attributed to: sa_policy_run_partition() on the tick's map. */
static inline int sample_partition(const Tick *t, int last_cpu, int home)
{
    return sa_policy_run_partition_mapped(t->part_of_cpu, t->n_cpu_map, last_cpu, home);
}

/* Whether the VM brings vCPU samples for this tick's interval. */
static bool has_samples(const Tick *t, const SaPolicyVm *vm)
{
    return t->interval_ns > 0 && vm->vcpu_samples != NULL && vm->n_vcpus > 0;
}

/* This VM's run measured on partition p during the interval. */
static double vm_run_on(const Tick *t, const SaPolicyVm *vm, guint i, int p)
{
    if (!has_samples(t, vm))
        return 0;
    double total = 0;
    for (guint v = 0; v < vm->n_vcpus; v++) {
        const SaVcpuSample *s = &vm->vcpu_samples[v];
        if (sample_partition(t, s->last_cpu, t->home[i]) != p)
            continue;
        double run, delay;
        sa_policy_sample_fractions(s, t->interval_ns, &run, &delay);
        total += run;
    }
    return total;
}

/* Whether partition id is among the VM's visited ones. */
static bool visited_has(const SaVmPolicyState *st, guint id)
{
    for (guint k = 0; k < st->visited->len; k++)
        if (g_array_index(st->visited, guint, k) == id)
            return true;
    return false;
}

/* "1" or "1, 2, 3" */
static void format_ids(char *buf, gsize size, const guint *ids, guint n)
{
    gsize used = 0;
    buf[0] = '\0';
    for (guint k = 0; k < n && used < size; k++) {
        int w = g_snprintf(buf + used, size - used, "%s%u", k ? ", " : "", ids[k]);
        if (w < 0)
            break;
        used += (gsize)w;
    }
}

/* Appends one clause to a reason, "; "-separated. */
static void G_GNUC_PRINTF(2, 3) append(GString *why, const char *fmt, ...)
{
    va_list ap;
    if (why->len > 0)
        g_string_append(why, "; ");
    va_start(ap, fmt);
    g_string_append_vprintf(why, fmt, ap);
    va_end(ap);
}

/* How a home was found, as the reason says it. */
static const char *how_text(HomeHow how)
{
    switch (how) {
    case HOME_PREFERRED:
        return "preferred";
    case HOME_ASSIGNED:
        return "assigned earlier";
    case HOME_KEPT:
        return "kept";
    case HOME_AUTO:
        return "auto";
    case HOME_NONE:
        break;
    }
    return "none";
}

/* ---- phase 1: the per-CPU map and the per-partition busy time ---- */

/* The CPU table, and per partition its online CPUs, busy time and margin. */
static void measure_partitions(Tick *t)
{
    sa_policy_map_cpus(t->topo, t->part_of_cpu, t->n_cpu_map);
    for (guint p = 0; p < t->n_parts; p++) {
        const SaCpuSet *cpus = part_at(t, (int)p)->cpus;
        double busy = 0, visitors = 0;
        guint cap = 0;
        for (int c = sa_cpuset_next(cpus, -1); c >= 0; c = sa_cpuset_next(cpus, c)) {
            cap++;
            if ((guint)c < t->n_cpu_busy) {
                busy += clamp01(t->cpu_busy[c]);
                if (t->cpu_visitors)
                    visitors += clamp01(t->cpu_visitors[c]);
            }
        }
        t->capacity[p] = cap;
        t->busy[p] = busy;
        t->visitors_measured[p] = t->cpu_visitors ? MIN(visitors, busy) : -1;
        t->margin[p] = sa_policy_margin(cap);
    }
}

/* ---- phase 2: homes, in array order ---- */

/* Whether partition p can be the VM's home: it exists and has online CPUs the VM may use. */
static bool home_usable(Tick *t, const SaPolicyVm *vm, int p)
{
    const SaCpuSet *allowed = vm_allowed(t, vm);
    return p >= 0 && t->capacity[p] > 0 && allowed_capacity(t, allowed, p) > 0;
}

/* The home the VM brings into this tick, first match wins: preferred, assigned earlier, kept
 * from earlier ticks; -1 when it needs an automatic one. */
static int known_home(Tick *t, const SaPolicyVm *vm, guint i, HomeHow *how)
{
    int p;
    if (vm->preferred >= 0) {
        p = find_part(t, (guint)vm->preferred);
        *how = HOME_PREFERRED;
        if (p >= 0 && t->capacity[p] > 0)
            return p;
        t->preferred_missing[i] = 1;
    }
    if (vm->assigned >= 0) {
        p = find_part(t, (guint)vm->assigned);
        *how = HOME_ASSIGNED;
        if (home_usable(t, vm, p))
            return p;
    }
    if (vm->st.placed && vm->st.home >= 0) {
        p = find_part(t, (guint)vm->st.home);
        *how = HOME_KEPT;
        if (home_usable(t, vm, p))
            return p;
    }
    *how = HOME_NONE;
    return -1;
}

/* The VM's home is p for this tick: its vCPUs count as committed there. */
static void set_home(Tick *t, const SaPolicyVm *vm, guint i, int p, HomeHow how)
{
    t->home[i] = p;
    t->how[i] = how;
    t->committed[p] += vm->n_vcpus;
    t->owner_vms[p]++;
}

/* The least committed partition, counting every home set so far, memory promised included. */
static void choose_home(Tick *t, const SaPolicyVm *vm, guint i)
{
    SaAdvice advice;
    if (!sa_policy_choose_home_claimed(t->topo, t->committed, t->claimed, vm_allowed(t, vm),
                                       vm->n_vcpus, vm->memory_bytes, &advice, NULL))
        return;
    int p = find_part(t, (guint)advice.partition_id);
    if (p < 0)
        return;
    set_home(t, vm, i, p, HOME_AUTO);
    int node = part_at(t, p)->node;
    if (node >= 0 && (guint)node < t->n_nodes)
        t->claimed[node] += vm->memory_bytes;
}

/* Every managed VM's home: the known ones first, then automatic ones in array order. */
static void resolve_homes(Tick *t, SaPolicyVm *const *vms)
{
    for (guint i = 0; i < t->n_vms; i++) {
        HomeHow how;
        t->home[i] = -1;
        if (vms[i]->mode == SA_MODE_OFF)
            continue;
        int p = known_home(t, vms[i], i, &how);
        if (p >= 0)
            set_home(t, vms[i], i, p, how);
    }
    /* Homes chosen now count every home above and those chosen before them in this tick. */
    for (guint i = 0; i < t->n_vms; i++)
        if (vms[i]->mode != SA_MODE_OFF && t->home[i] < 0)
            choose_home(t, vms[i], i);
}

/* ---- phase 3: who runs where ---- */

/* Each vCPU's run counts on the partition it is attributed to, its delay on its home. Unplaced
 * and unmanaged VMs stay in "unmanaged". */
static void account_vcpus(Tick *t, SaPolicyVm *const *vms)
{
    for (guint i = 0; i < t->n_vms; i++) {
        const SaPolicyVm *vm = vms[i];
        int home = t->home[i];
        if (home < 0 || !has_samples(t, vm))
            continue;
        for (guint v = 0; v < vm->n_vcpus; v++) {
            const SaVcpuSample *s = &vm->vcpu_samples[v];
            double run, delay;
            sa_policy_sample_fractions(s, t->interval_ns, &run, &delay);
            int p = sample_partition(t, s->last_cpu, home);
            if (p == home) {
                t->owners[p] += run;
            } else {
                t->visitors[p] += run;
                t->visitor_wait[p] += delay;
            }
            t->owner_wait[home] += delay;
            t->run[i] += run;
            t->wait[i] += delay;
        }
    }
}

/* The visitors' run on p: where the sensor measured their threads by CPU, the larger of that
 * and their vCPUs' run by last CPU. Right after a burst a moved vCPU's last CPU may still be at
 * home, and its QEMU's other threads are never sampled: the measure keeps both out of the
 * owners' and unmanaged load. */
static double visitors_on(const Tick *t, guint p)
{
    return MAX(t->visitors[p], t->visitors_measured[p]);
}

/* A vCPU that moved during the interval is counted where it last ran: one partition then shows
 * more run than busy time (excess) and another less (deficit). The deficit nobody explains is
 * unmanaged load, after taking the misattributed excess off, proportionally. */
static void account_partitions(Tick *t)
{
    double excess = 0, deficit = 0;
    for (guint p = 0; p < t->n_parts; p++) {
        double d = t->busy[p] - t->owners[p] - visitors_on(t, p);
        if (d > 0)
            deficit += d;
        else
            excess -= d;
    }
    double keep = sa_policy_unmanaged_share(excess, deficit);
    for (guint p = 0; p < t->n_parts; p++) {
        double d = t->busy[p] - t->owners[p] - visitors_on(t, p);
        t->unmanaged[p] = d > 0 ? d * keep : 0;
        double hidden = sa_policy_hidden_wait(t->unmanaged[p], t->visitors[p], t->visitor_wait[p],
                                              t->margin[p]);
        t->hidden[p] = hidden;
        t->owner_demand[p] = t->owners[p] + t->unmanaged[p] + hidden + t->owner_wait[p];
        double prev = t->unmanaged_prev ? t->unmanaged_prev[p] : -1;
        t->unmanaged_avg[p] =
            prev < 0 ? t->unmanaged[p]
                     : sa_policy_window_fold(prev, t->unmanaged[p], t->interval_ns / 1e9);
        /* Visitors cannot have run more than the partition was busy: when several of a VM's
         * vCPUs were last seen here, their whole interval is charged here, and without the cap
         * the owners' share would look negative and force a retreat on any owner noise. */
        t->visitors_now[p] = MIN(t->visitors[p], t->busy[p]);
    }
}

/* ---- phase 4: one VM's decision ---- */

/* One VM's decision in progress: what its phases share. */
typedef struct {
    SaPolicyVm *vm;
    SaVmPolicyState *st;
    guint i;                 /* its index in the tick's per-VM arrays */
    int home;                /* home partition index, -1 none */
    int home_id;             /* home partition id, -1 none */
    bool new_home;           /* first placement or a home that moved */
    const SaCpuSet *allowed; /* never empty */
    guint softness;
    bool samples;   /* it has samples for this interval */
    double instant; /* run + wait this interval, CPUs */
    double wait;    /* wait this interval, CPUs */
    guint cap_home; /* allowed CPUs of home */
    bool soft;      /* it may run beyond home */
    guint n_forced; /* partitions it left for their owners this tick */
    bool rejected;  /* a burst was wanted and not made: the reason says why */
    guint active;   /* vCPUs active (run + wait >= SA_POLICY_ACTIVE_VCPU) this interval */
    GString *why;   /* the reason being written */
} Decision;

/* What the VM wants and what its home can give it, for bursting, widening and shrinking. */
typedef struct {
    double demand;     /* CPUs to plan for */
    double self_home;  /* its run at home */
    double avail_home; /* CPUs its home can give it */
    double need;       /* demand + margin(home) */
} Want;

/* No visited partition any more, burst or door. */
static void clear_visits(SaVmPolicyState *st)
{
    g_array_set_size(st->visited, 0);
    st->doors = false;
}

/* Mode off: the policy lets go of a placed VM (no home, no sets) and says so once. */
static void forget(SaPolicyVm *vm)
{
    SaVmPolicyState *st = &vm->st;
    if (!st->placed)
        return;
    g_clear_pointer(&st->vcpus, sa_cpuset_free);
    g_clear_pointer(&st->emulator, sa_cpuset_free);
    clear_visits(st);
    g_array_set_size(st->idle, 0);
    st->placed = false;
    st->state = SA_STATE_HOME;
    st->home = -1;
    st->fits_since_ms = NEVER;
    g_strlcpy(vm->reason, "mode off: left alone", sizeof vm->reason);
}

/* What the VM could get on partition p (not counting the margin). */
static double room_on(Tick *t, const Decision *d, int p)
{
    guint cap_allowed = allowed_capacity(t, d->allowed, p);
    if (cap_allowed == 0)
        return 0;
    double others = MAX(0.0, t->visitors_now[p] - vm_run_on(t, d->vm, d->i, p));
    double room = t->capacity[p] - t->owner_demand[p] - others - t->reserved[p];
    return MIN((double)cap_allowed, room);
}

/* What the VM wants this tick and what its home can give it. */
static Want want_of(Tick *t, const Decision *d)
{
    const int home = d->home;
    Want w;
    w.demand = sa_policy_demand(d->vm->n_vcpus, d->st->demand, d->instant);
    w.self_home = vm_run_on(t, d->vm, d->i, home);
    w.avail_home = sa_policy_avail_home(d->cap_home, t->capacity[home], t->owner_demand[home],
                                        t->relief[home], w.self_home, d->wait);
    w.need = w.demand + t->margin[home];
    return w;
}

/* Adds candidate partitions nearest first until their spare covers extra: not the home, none
 * left or visited already, each with at least SA_POLICY_MIN_SPARE_CPUS spare (so with allowed
 * CPUs). Returns how many (at most MAX_IDS, their ids in ids); *covered is their spare. */
static guint add_partitions(Tick *t, Decision *d, double extra, double *covered, guint *ids)
{
    const guint *ord = nearest_first(t, d->home);
    guint n = 0;
    *covered = 0;
    for (guint j = 0; j + 1 < t->n_parts && *covered < extra && n < MAX_IDS; j++) {
        int p = (int)ord[j];
        guint id = part_at(t, p)->id;
        if (t->retreated[p] || visited_has(d->st, id))
            continue;
        double spare = room_on(t, d, p) - t->margin[p];
        if (spare < SA_POLICY_MIN_SPARE_CPUS)
            continue;
        t->reserved[p] += MIN(spare, extra - *covered);
        *covered += spare;
        ids[n++] = id;
        g_array_append_val(d->st->visited, id);
    }
    return n;
}

/* A burst or a widening added n partitions: this tick's event, and the dwell time restarts. */
static void count_added(const Tick *t, Decision *d, guint n)
{
    d->vm->bursts += n;
    d->st->last_voluntary_ms = t->now;
}

/* Starts a decision: last tick's output cleared. A VM in mode off is forgotten; it needs no
 * further phase (false). */
static bool decision_start(Tick *t, SaPolicyVm *vm, guint i, GString *why, Decision *d)
{
    vm->changed = false;
    g_string_truncate(why, 0);
    if (vm->st.visited == NULL)
        vm->st.visited = g_array_new(FALSE, FALSE, sizeof(guint));
    if (vm->st.idle == NULL)
        vm->st.idle = g_array_new(FALSE, FALSE, sizeof(SaPartitionIdle));
    if (vm->mode == SA_MODE_OFF) {
        forget(vm);
        return false;
    }
    int home = t->home[i];
    *d = (Decision){
        .vm = vm,
        .st = &vm->st,
        .i = i,
        .home = home,
        .home_id = home >= 0 ? (int)part_at(t, home)->id : -1,
        .allowed = vm_allowed(t, vm),
        .softness = sa_policy_effective_softness(t->cfg, vm->softness),
        .samples = has_samples(t, vm),
        .why = why,
    };
    return true;
}

/* Demand: this interval's run + wait, and their EWMA. */
static void update_demand(const Tick *t, Decision *d)
{
    if (!d->samples)
        return;
    d->instant = t->run[d->i] + t->wait[d->i];
    d->wait = t->wait[d->i];
    for (guint v = 0; v < d->vm->n_vcpus; v++) {
        double run, delay;
        sa_policy_sample_fractions(&d->vm->vcpu_samples[v], t->interval_ns, &run, &delay);
        d->active += run + delay >= SA_POLICY_ACTIVE_VCPU;
    }
    d->st->demand = sa_policy_smoothed_demand(t->cfg, d->st->demand, d->instant);
}

/* Home: the one resolved for this tick; a new home ends every visit. */
static void settle_home(const Tick *t, Decision *d)
{
    SaVmPolicyState *st = d->st;
    if (t->preferred_missing[d->i])
        append(d->why,
               "preferred partition %d is not in the layout or has no online CPU, using auto",
               d->vm->preferred);
    d->new_home = !st->placed || d->home_id != st->home;
    if (d->new_home) {
        if (d->home < 0)
            append(d->why, "no partition has an online CPU the VM is allowed on: vCPUs get the "
                           "allowed set");
        else if (!st->placed)
            append(d->why, "placed at home partition %d (%s)", d->home_id, how_text(t->how[d->i]));
        else
            append(d->why, "home moved from partition %d to %d (%s)", st->home, d->home_id,
                   how_text(t->how[d->i]));
        clear_visits(st);
        st->fits_since_ms = NEVER;
    }
    st->home = d->home_id;
}

/* Reach: whether the VM may run beyond home. A home without allowed CPUs, mode strict and
 * softness 0 end every visit. */
static void settle_reach(Tick *t, Decision *d)
{
    SaVmPolicyState *st = d->st;
    d->cap_home = d->home >= 0 ? allowed_capacity(t, d->allowed, d->home) : 0;
    if (d->home >= 0 && d->cap_home == 0) {
        if (d->new_home || st->visited->len > 0)
            append(d->why,
                   "home partition %d has no CPU in the allowed set: vCPUs get the allowed set",
                   d->home_id);
        clear_visits(st);
    }
    d->soft = sa_policy_may_leave_home(d->vm->mode, d->softness, d->cap_home);
    if (!d->soft && st->visited->len > 0) {
        append(d->why, "%s: back to home partition %d only",
               d->vm->mode == SA_MODE_STRICT ? "mode strict" : "softness 0", d->home_id);
        clear_visits(st);
        st->fits_since_ms = NEVER;
    }
}

/* Back-off decay: after a quiet max_holdoff_ms the back-off forgets half of its history. */
static void decay_backoff(const Tick *t, Decision *d)
{
    if (!sa_policy_backoff_decays(t->cfg, d->st, t->now))
        return;
    d->st->forced_retreats /= 2;
    d->st->last_forced_ms = t->now;
}

/* The VM left n_forced partitions for their owners (ids, the first one's owners needing need of
 * cap CPUs): this tick's event, the back-off grows, and the reason says so. */
static void start_backoff(const Tick *t, Decision *d, const guint *ids, double need, guint cap)
{
    SaVmPolicyState *st = d->st;
    char text[64];
    format_ids(text, sizeof text, ids, MIN(d->n_forced, MAX_IDS));
    st->forced_retreats++;
    st->last_forced_ms = t->now;
    d->vm->retreats += d->n_forced;
    st->fits_since_ms = NEVER;
    st->last_voluntary_ms = NEVER; /* from here the back-off decides, not the dwell */
    gint64 h = sa_policy_holdoff_ms(t->cfg, st->forced_retreats);
    st->holdoff_until_ms = t->now + h;
    append(d->why, "retreat from partition%s %s: %s owners need %.1f of %u CPUs",
           d->n_forced > 1 ? "s" : "", text, d->n_forced > 1 ? "their" : "its", need, cap);
    if (h > 0)
        g_string_append_printf(d->why, ", no burst for %.1f s", h / 1000.0);
}

/* Whether visited[k] is gone, home or no longer allowed: then it is left quietly (removed). */
static bool visit_gone(Tick *t, Decision *d, guint k, int *p)
{
    guint id = g_array_index(d->st->visited, guint, k);
    *p = find_part(t, id);
    if (*p >= 0 && *p != d->home && allowed_capacity(t, d->allowed, *p) > 0)
        return false;
    append(d->why, "left partition %u: no allowed online CPU", id);
    g_array_remove_index(d->st->visited, k);
    return true;
}

/* Doors close the tick their owners show load (more than their noise): not a forced retreat, no
 * back-off; the owners' idle time restarts, and that is the wait before the door reopens. */
static void close_doors(Tick *t, Decision *d)
{
    GArray *visited = d->st->visited;
    guint ids[MAX_IDS], n = 0;
    double need = 0;
    int p;
    for (guint k = 0; k < visited->len;) {
        if (visit_gone(t, d, k, &p))
            continue;
        if (sa_policy_owners_idle(t->owner_demand[p], t->margin[p], t->interval_ns)) {
            k++;
            continue;
        }
        t->visitors_now[p] = MAX(0.0, t->visitors_now[p] - vm_run_on(t, d->vm, d->i, p));
        if (n == 0)
            need = t->owner_demand[p];
        if (n < MAX_IDS)
            ids[n++] = g_array_index(visited, guint, k);
        g_array_remove_index(visited, k);
    }
    d->st->doors = visited->len > 0;
    if (n == 0)
        return;
    char text[64];
    format_ids(text, sizeof text, ids, n);
    append(d->why, "door closed on partition%s %s: %s owners need %.2f CPUs, above the margin",
           n > 1 ? "s" : "", text, n > 1 ? "their" : "its", need);
}

/* Retreat: owners first, immediately. Visited partitions that are gone or no longer allowed are
 * left quietly. */
static void retreat(Tick *t, Decision *d)
{
    if (d->st->doors) {
        close_doors(t, d);
        return;
    }
    GArray *visited = d->st->visited;
    guint ids[MAX_IDS], cap = 0;
    double need = 0;
    int p;
    for (guint k = 0; k < visited->len;) {
        guint id = g_array_index(visited, guint, k);
        if (visit_gone(t, d, k, &p))
            continue;
        double demand = sa_policy_retreat_demand(t->owner_demand[p], t->unmanaged[p], t->hidden[p],
                                                 t->unmanaged_avg[p], t->interval_ns);
        if (!sa_policy_should_retreat(demand, t->capacity[p], t->visitors_now[p], t->margin[p])) {
            k++;
            continue;
        }
        t->visitors_now[p] = MAX(0.0, t->visitors_now[p] - vm_run_on(t, d->vm, d->i, p));
        t->retreated[p] = 1;
        if (d->n_forced < MAX_IDS)
            ids[d->n_forced] = id;
        if (d->n_forced == 0) {
            need = demand;
            cap = t->capacity[p];
        }
        d->n_forced++;
        g_array_remove_index(visited, k);
    }
    if (d->n_forced > 0)
        start_backoff(t, d, ids, need, cap);
}

/* Whether a burst that fits at home stays where it is until its doors may open: doors are
 * wanted (a spike is remembered) and the visited partitions' owners are idle now, but not yet
 * for door_idle_ms. Returning home then would leave the next spike to wait out the dwell time
 * at home (a 300/2700-ms spike returns home just before the next one); once the door may open,
 * the return home opens it in the same tick and the VM's CPUs do not change. */
static bool door_pending(const Tick *t, const Decision *d)
{
    const GArray *visited = d->st->visited;
    bool pending = false;
    if (!sa_policy_door_wanted(d->softness, t->now, d->st->spike_ms))
        return false;
    for (guint k = 0; k < visited->len; k++) {
        int p = find_part(t, g_array_index(visited, guint, k));
        if (p < 0 || !sa_policy_owners_idle(t->owner_demand[p], t->margin[p], t->interval_ns))
            return false;
        gint64 since = g_array_index(d->st->idle, SaPartitionIdle, p).since;
        pending |= !sa_policy_door_may_open(d->softness, t->now, since);
    }
    return pending;
}

/* Shrink or return home: keeps the first keep visited partitions (none: home) once fewer have
 * sufficed for dwell_ms. */
static void shrink(const Tick *t, Decision *d, const Want *w, guint keep)
{
    SaVmPolicyState *st = d->st;
    if (st->fits_since_ms == NEVER)
        st->fits_since_ms = t->now;
    if (!sa_policy_may_shrink(t->cfg, st, t->now) || (keep == 0 && door_pending(t, d)))
        return;
    double secs = (t->now - st->fits_since_ms) / 1000.0;
    g_array_set_size(st->visited, keep);
    st->last_voluntary_ms = t->now;
    st->fits_since_ms = NEVER;
    if (keep == 0)
        append(d->why,
               "return home: demand %.1f CPUs has fit in home partition %d (%.1f CPUs free) for "
               "%.1f s",
               w->demand, d->home_id, w->avail_home, secs);
    else
        append(d->why, "shrink to %u visited partition%s: demand %.1f CPUs has fit for %.1f s",
               keep, keep > 1 ? "s" : "", w->demand, secs);
}

/* Widen: extra CPUs are still missing with every visited partition; while the VM still waits
 * and may change, more partitions are added, nearest first. */
static void widen(Tick *t, Decision *d, double extra)
{
    if (!(extra > 0 && d->wait >= sa_policy_min_wait(d->softness) &&
          sa_policy_may_burst(t->cfg, d->st, t->now)))
        return;
    guint ids[MAX_IDS];
    double covered;
    guint n = add_partitions(t, d, extra, &covered, ids);
    if (n == 0)
        return;
    char text[64];
    format_ids(text, sizeof text, ids, n);
    count_added(t, d, n);
    append(d->why, "widen onto partition%s %s: still %.1f vCPUs waiting, %.1f idle CPUs there",
           n > 1 ? "s" : "", text, d->wait, covered);
}

/* While bursting: the fewest visited partitions (nearest first) that hold the demand; fewer
 * than now shrinks, more than all widens. */
static void fit_visits(Tick *t, Decision *d)
{
    GArray *visited = d->st->visited;
    const Want w = want_of(t, d);
    for (guint k = 0; k < visited->len; k++)
        t->room[k] = room_on(t, d, find_part(t, g_array_index(visited, guint, k)));
    double held;
    guint keep = sa_policy_visits_needed(w.need, w.avail_home, t->room, visited->len, &held);
    if (keep < visited->len) {
        shrink(t, d, &w, keep);
        return;
    }
    d->st->fits_since_ms = NEVER;
    widen(t, d, w.need - held);
}

/* A VM that still waits with its doors open bursts through them: they become burst partitions
 * (the burst's retreat, shrink and back-off rules from now on). Returns their spare, reserved
 * for up to extra; 0 when no door was open. */
static double promote_doors(Tick *t, Decision *d, double extra, double util)
{
    GArray *visited = d->st->visited;
    if (!d->st->doors)
        return 0;
    guint ids[MAX_IDS], n = 0;
    double covered = 0;
    for (guint k = 0; k < visited->len; k++) {
        guint id = g_array_index(visited, guint, k);
        int p = find_part(t, id);
        double spare = MAX(0.0, room_on(t, d, p) - t->margin[p]);
        t->reserved[p] += MAX(0.0, MIN(spare, extra - covered));
        covered += spare;
        if (n < MAX_IDS)
            ids[n++] = id;
    }
    d->st->doors = false;
    count_added(t, d, 0);
    char text[64];
    format_ids(text, sizeof text, ids, n);
    append(d->why,
           "burst through the open door onto partition%s %s: home %.0f%% busy, %.1f vCPUs "
           "waiting",
           n > 1 ? "s" : "", text, 100 * util, d->wait);
    return covered;
}

/* Bursts onto the nearest partitions with spare CPUs for extra (through its open doors first);
 * says so, or why it could not. */
static void burst(Tick *t, Decision *d, const Want *w, double util)
{
    guint ids[MAX_IDS];
    double covered = 0;
    const double extra = w->need - w->avail_home;
    const bool had_doors = d->st->doors;
    const double through = promote_doors(t, d, extra, util);
    guint n = through < extra ? add_partitions(t, d, extra - through, &covered, ids) : 0;
    covered += through;
    if (n == 0 && had_doors) {
        t->relief[d->home] += MIN(MIN(covered, extra), w->self_home + d->wait);
        return;
    }
    if (n == 0) {
        d->rejected = true;
        append(d->why,
               "no burst: home %.0f%% busy, %.1f vCPUs waiting, but no allowed partition has "
               "%.1f idle CPUs",
               100 * util, d->wait, SA_POLICY_MIN_SPARE_CPUS);
        return;
    }
    char text[64];
    format_ids(text, sizeof text, ids, n);
    count_added(t, d, n);
    t->relief[d->home] += MIN(MIN(covered, extra), w->self_home + d->wait);
    append(d->why,
           "burst onto partition%s %s: home %.0f%% busy, %.1f vCPUs waiting, partition%s %s idle "
           "%.1f CPUs",
           n > 1 ? "s" : "", text, 100 * util, d->wait, n > 1 ? "s" : "", text, covered);
}

/* At home: a VM that needs more than its home bursts, unless the back-off or the dwell time
 * holds it back (the reason says which). */
static void consider_burst(Tick *t, Decision *d)
{
    SaVmPolicyState *st = d->st;
    const Want w = want_of(t, d);
    st->fits_since_ms = NEVER;
    double util = allowed_utilization(t, d->allowed, d->home, d->cap_home);
    if (!sa_policy_needs_burst(d->softness, d->wait, util, w.demand, w.avail_home))
        return;
    if (sa_policy_held_off(st, t->now)) {
        d->rejected = true;
        append(d->why,
               "burst held off for %.1f s more after %u owner-forced retreats (home %.0f%% busy, "
               "%.1f vCPUs waiting)",
               (st->holdoff_until_ms - t->now) / 1000.0, st->forced_retreats, 100 * util, d->wait);
    } else if (!sa_policy_dwell_over(t->cfg, st, t->now)) {
        d->rejected = true;
        append(d->why,
               "burst waits for the dwell time: last change %.1f s ago, dwell %.1f s (home "
               "%.0f%% busy, %.1f vCPUs waiting)",
               (t->now - st->last_voluntary_ms) / 1000.0, t->cfg->dwell_ms / 1000.0, 100 * util,
               d->wait);
    } else {
        burst(t, d, &w, util);
    }
}

/* ---- doors ---- */

/* Since when the owners of each partition have been idle, after this interval; st->idle is
 * rebuilt when the partitions changed. While bursting, the owners' wait behind this VM's own run
 * there does not count (sa_policy_owners_beside). */
static void track_idle(const Tick *t, Decision *d)
{
    GArray *idle = d->st->idle;
    const bool bursting = d->st->visited->len > 0 && !d->st->doors;
    gint64 interval_ms = (gint64)(t->interval_ns / 1e6);
    if (idle->len != t->n_parts)
        g_array_set_size(idle, 0);
    for (guint p = 0; p < t->n_parts; p++) {
        guint id = part_at(t, (int)p)->id;
        if (idle->len <= p)
            g_array_append_val(idle, ((SaPartitionIdle){.id = id, .since = NEVER}));
        SaPartitionIdle *e = &g_array_index(idle, SaPartitionIdle, p);
        if (e->id != id)
            *e = (SaPartitionIdle){.id = id, .since = NEVER};
        double demand = bursting ? sa_policy_owners_beside(t->owner_demand[p], t->owner_wait[p],
                                                           vm_run_on(t, d->vm, d->i, (int)p))
                                 : t->owner_demand[p];
        bool quiet =
            t->capacity[p] > 0 && sa_policy_owners_idle(demand, t->margin[p], t->interval_ns);
        e->since = sa_policy_idle_since(e->since, quiet, t->now, interval_ms);
    }
}

/* Opens doors onto the nearest partitions whose owners have been idle long enough, until their
 * spare covers every vCPU (a spike's width hides in the interval's average); says so. */
static void open_doors(Tick *t, Decision *d, const Want *w)
{
    GArray *visited = d->st->visited;
    double extra = d->vm->n_vcpus + t->margin[d->home] - w->avail_home;
    for (guint k = 0; k < visited->len; k++)
        extra -= MAX(0.0, room_on(t, d, find_part(t, g_array_index(visited, guint, k))));
    const guint *ord = nearest_first(t, d->home);
    guint ids[MAX_IDS], n = 0;
    gint64 idle_for = G_MAXINT64;
    double covered = 0;
    for (guint j = 0; j + 1 < t->n_parts && covered < extra && n < MAX_IDS; j++) {
        int p = (int)ord[j];
        guint id = part_at(t, p)->id;
        gint64 since = g_array_index(d->st->idle, SaPartitionIdle, p).since;
        if (t->retreated[p] || visited_has(d->st, id) ||
            !sa_policy_door_may_open(d->softness, t->now, since))
            continue;
        double spare = room_on(t, d, p) - t->margin[p];
        if (spare < SA_POLICY_MIN_SPARE_CPUS)
            continue;
        covered += spare;
        idle_for = MIN(idle_for, t->now - since);
        ids[n++] = id;
        g_array_append_val(visited, id);
    }
    if (n == 0)
        return;
    d->st->doors = true;
    char text[64];
    format_ids(text, sizeof text, ids, n);
    append(d->why, "door open: owners of partition%s %s idle for %s%.1f s", n > 1 ? "s" : "", text,
           n > 1 ? "at least " : "", idle_for / 1000.0);
}

/* A run of intervals using more than home gives starts, or ends; one that ended within
 * SA_POLICY_SPIKE_MAX_MS was a spike. While bursting only run + wait counts: spreading over the
 * visited partitions is what a burst is for. */
static void note_spike(Tick *t, Decision *d, bool bursting)
{
    SaVmPolicyState *st = d->st;
    const Want w = want_of(t, d);
    gint64 start = t->now - (gint64)(t->interval_ns / 1e6);
    double away = MAX(0.0, t->run[d->i] - w.self_home);
    if (sa_policy_outgrows_home(d->instant, bursting ? 0 : d->active, d->wait + away, w.avail_home,
                                sa_policy_min_wait(d->softness))) {
        if (st->outgrow_since_ms == NEVER)
            st->outgrow_since_ms = start;
        return;
    }
    if (sa_policy_was_spike(st->outgrow_since_ms, start))
        st->spike_ms = t->now;
    st->outgrow_since_ms = NEVER;
}

/* At home or with doors open: closes the doors once no spike came for
 * SA_POLICY_DOOR_MEMORY_MS (below softness 100), else opens more where owners are idle. */
static void tend_doors(Tick *t, Decision *d)
{
    SaVmPolicyState *st = d->st;
    const Want w = want_of(t, d);
    if (sa_policy_door_wanted(d->softness, t->now, st->spike_ms)) {
        open_doors(t, d, &w);
        return;
    }
    if (!st->doors)
        return;
    char text[64];
    format_ids(text, sizeof text, &g_array_index(st->visited, guint, 0),
               MIN(st->visited->len, MAX_IDS));
    append(d->why, "door closed on partition%s %s: no demand beyond home for %.0f s",
           st->visited->len > 1 ? "s" : "", text, SA_POLICY_DOOR_MEMORY_MS / 1000.0);
    clear_visits(st);
}

/* Stores set in *stored (allocated on first use); whether that changed it. */
static bool store_set(SaCpuSet **stored, const SaCpuSet *set)
{
    if (*stored == NULL) {
        *stored = sa_cpuset_copy(set);
        return true;
    }
    if (sa_cpuset_equal(*stored, set))
        return false;
    sa_cpuset_assign(*stored, set);
    return true;
}

/* CPU sets: vCPUs on (home ∪ visited) ∩ allowed, emulator and I/O threads on home ∩ allowed;
 * the allowed set itself when home has none of it. Then changed and the reason. */
static void set_cpus(Tick *t, Decision *d)
{
    SaVmPolicyState *st = d->st;
    if (d->cap_home > 0) {
        sa_cpuset_assign(t->set, part_at(t, d->home)->cpus);
        sa_cpuset_intersect(t->set, d->allowed);
    } else {
        sa_cpuset_assign(t->set, d->allowed);
    }
    bool emulator_changed = store_set(&st->emulator, t->set);
    for (guint k = 0; k < st->visited->len; k++) {
        int p = find_part(t, g_array_index(st->visited, guint, k));
        sa_cpuset_assign(t->tmp, part_at(t, p)->cpus);
        sa_cpuset_intersect(t->tmp, d->allowed);
        sa_cpuset_union(t->set, t->tmp);
    }
    bool vcpus_changed = store_set(&st->vcpus, t->set);
    st->placed = true;
    if (emulator_changed || vcpus_changed) {
        d->vm->changed = true;
        st->last_change_ms = t->now;
        if (d->why->len == 0)
            append(d->why, "the allowed set or the partitions' CPUs changed");
    }
    if (d->vm->changed || d->rejected || d->why->len > 0)
        g_strlcpy(d->vm->reason, d->why->str, sizeof d->vm->reason);
}

/* One VM, phase by phase (docs/policy.md, "The tick, phase by phase"). */
static void decide(Tick *t, SaPolicyVm *vm, guint i, GString *why)
{
    Decision d;
    if (!decision_start(t, vm, i, why, &d))
        return;
    update_demand(t, &d);
    settle_home(t, &d);
    settle_reach(t, &d);
    if (d.soft && d.samples)
        track_idle(t, &d);
    decay_backoff(t, &d);
    if (d.soft && d.samples)
        note_spike(t, &d, d.st->visited->len > 0 && !d.st->doors);
    retreat(t, &d);
    if (d.soft && d.n_forced == 0 && d.samples) {
        if (d.st->visited->len > 0 && !d.st->doors)
            fit_visits(t, &d);
        else
            consider_burst(t, &d);
        if (d.st->visited->len == 0 || d.st->doors)
            tend_doors(t, &d);
    }
    d.st->state = d.st->visited->len == 0 ? SA_STATE_HOME
                  : d.st->doors           ? SA_STATE_DOOR
                                          : SA_STATE_BURST;
    set_cpus(t, &d);
}

/* ---- the tick ---- */

/* Sizes, scratch and sets of one tick; undone by tick_end(). */
static void tick_begin(Tick *t, const SaPolicyConfig *cfg, const SaPolicyHost *host, guint n_vms)
{
    const SaTopology *topo = host->topo;
    *t = (Tick){
        .cfg = cfg,
        .topo = topo,
        .now = host->now_ms,
        .interval_ns = (double)host->interval_ns,
        .n_parts = topo->partitions ? topo->partitions->len : 0,
        .n_nodes = topo->nodes ? topo->nodes->len : 0,
        .n_vms = n_vms,
        .cpu_busy = host->cpu_busy,
        .n_cpu_busy = host->cpu_busy ? host->n_cpu_busy : 0,
        .cpu_visitors = host->cpu_busy ? host->cpu_visitors : NULL,
        .unmanaged_prev = host->unmanaged_avg,
        .set = sa_cpuset_new(),
        .tmp = sa_cpuset_new(),
    };
    for (guint p = 0; p < t->n_parts; p++)
        t->n_cpu_map = MAX(t->n_cpu_map, (guint)(sa_cpuset_last(part_at(t, (int)p)->cpus) + 1));

    Arena arena = {0};
    tick_layout(t, &arena);
    t->scratch = g_malloc0(MAX(arena.used, 1));
    arena = (Arena){.base = t->scratch};
    tick_layout(t, &arena);

    t->all = topo->online;
    if (t->all == NULL) {
        t->own_all = sa_cpuset_new();
        for (guint p = 0; p < t->n_parts; p++)
            sa_cpuset_union(t->own_all, part_at(t, (int)p)->cpus);
        t->all = t->own_all;
    }
}

/* Frees what tick_begin() allocated. */
static void tick_end(Tick *t)
{
    g_clear_pointer(&t->scratch, g_free);
    g_clear_pointer(&t->set, sa_cpuset_free);
    g_clear_pointer(&t->tmp, sa_cpuset_free);
    g_clear_pointer(&t->own_all, sa_cpuset_free);
}

/* Every VM, in array order. */
static void decide_all(Tick *t, SaPolicyVm *const *vms)
{
    g_autoptr(GString) why = g_string_sized_new(256);
    for (guint i = 0; i < t->n_vms; i++)
        decide(t, vms[i], i, why);
}

/* The per-partition split, for status and metrics. */
static void report_usage(const Tick *t, SaPartitionUsage *usage)
{
    for (guint p = 0; p < t->n_parts; p++) {
        usage[p] = (SaPartitionUsage){
            .owners = t->owners[p],
            .visitors = MIN(visitors_on(t, p), t->busy[p]),
            .unmanaged = t->unmanaged[p],
            .owner_demand = t->owner_demand[p],
            .n_owner_vms = t->owner_vms[p],
            .owner_vcpus = t->committed[p],
        };
    }
}

void sa_policy_tick(const SaPolicyConfig *cfg, const SaPolicyHost *host, SaPolicyVm *const *vms,
                    guint n_vms, SaPartitionUsage *usage)
{
    g_return_if_fail(host != NULL && host->topo != NULL);
    g_return_if_fail(n_vms == 0 || vms != NULL);

    SaPolicyConfig defaults;
    if (cfg == NULL) {
        sa_policy_config_init(&defaults);
        cfg = &defaults;
    }
    for (guint i = 0; i < n_vms; i++)
        vms[i]->bursts = vms[i]->retreats = 0; /* this tick's events */

    Tick t;
    tick_begin(&t, cfg, host, n_vms);
    measure_partitions(&t);
    resolve_homes(&t, vms);
    account_vcpus(&t, vms);
    account_partitions(&t);
    decide_all(&t, vms);
    if (usage)
        report_usage(&t, usage);
    tick_end(&t);
}
