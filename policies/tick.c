/* softaff — one policy tick: homes, per-partition accounting, retreat, burst, return home.
 *
 * Every formula is explained in docs/policy.md; the names here follow it (capacity, busy,
 * owners, visitors, unmanaged, owner_wait, owner_demand, margin, spare, demand, extra).
 * Cost: O(CPUs + total vCPUs + VMs × partitions) with one scratch allocation per tick. */
#define G_LOG_DOMAIN "softaff-policy"

#include "sa-policy-private.h"

#include <stdarg.h>
#include <string.h>

#define NEVER G_MININT64
/* An owner's background noise must not evict visitors: margin = max(0.25 CPU, 10%). */
#define MARGIN_MIN_CPUS 0.25
#define MARGIN_FRACTION 0.10
/* A burst target must offer at least half an idle CPU. */
#define MIN_SPARE_CPUS 0.5
/* Longest back-off shift: dwell_ms << 20 is far beyond any max_holdoff_ms. */
#define MAX_HOLDOFF_SHIFT 20

typedef enum {
    HOME_NONE,
    HOME_PREFERRED,
    HOME_ASSIGNED,
    HOME_KEPT,
    HOME_AUTO,
} HomeHow;

typedef struct {
    const SaPolicyConfig *cfg;
    const SaPolicyHost *host;
    const SaTopology *topo;
    gint64 now;
    double interval_ns; /* 0: no interval, no samples this tick */
    guint n_parts;
    guint n_nodes;
    guint n_vms;
    const SaCpuSet *all; /* for VMs without an allowed set */
    const double *cpu_busy;
    guint n_cpu_busy; /* 0 when the host gave no utilization */

    /* per CPU */
    guint n_cpu_map;
    int *part_of_cpu;

    /* per partition, in CPUs */
    guint *capacity;      /* online CPUs */
    double *margin;       /* max(0.25, 10% of capacity) */
    double *busy;         /* Σ cpu_busy */
    double *owners;       /* run of vCPUs homed here, measured here */
    double *visitors;     /* run of vCPUs homed elsewhere, measured here */
    double *owner_wait;   /* delay of vCPUs homed here, wherever they waited */
    double *visitor_wait; /* delay of vCPUs homed elsewhere that last ran here */
    double *unmanaged;    /* busy nobody explains */
    double *owner_demand; /* owners + unmanaged + owner_wait */
    double *visitors_now; /* visitors minus those that retreated this tick */
    double *reserved;     /* spare promised to bursts decided this tick */
    double *relief;       /* owner demand moved away by bursts decided this tick */
    guint *committed;     /* vCPUs homed here */
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
} Tick;

/* ---- scratch: one allocation, laid out twice (measure, then carve) ---- */

typedef struct {
    char *base;
    gsize used;
} Arena;

static void *arena_take(Arena *a, gsize size)
{
    void *p = a->base ? a->base + a->used : NULL;
    a->used += (size + 15) & ~(gsize)15;
    return p;
}

#define TAKE(a, field, n) ((field) = arena_take((a), sizeof(*(field)) * (gsize)(n)))

static void tick_layout(Tick *t, Arena *a)
{
    guint np = t->n_parts;
    TAKE(a, t->part_of_cpu, t->n_cpu_map);
    TAKE(a, t->capacity, np);
    TAKE(a, t->margin, np);
    TAKE(a, t->busy, np);
    TAKE(a, t->owners, np);
    TAKE(a, t->visitors, np);
    TAKE(a, t->owner_wait, np);
    TAKE(a, t->visitor_wait, np);
    TAKE(a, t->unmanaged, np);
    TAKE(a, t->owner_demand, np);
    TAKE(a, t->visitors_now, np);
    TAKE(a, t->reserved, np);
    TAKE(a, t->relief, np);
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

static inline gint64 elapsed(gint64 now, gint64 since)
{
    return since == NEVER ? G_MAXINT64 : now - since;
}

static inline double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

static inline guint distance(const Tick *t, guint a, guint b)
{
    if (t->topo->partition_distance)
        return t->topo->partition_distance[a * t->n_parts + b];
    return a == b ? 0 : 10;
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
        guint d = distance(t, (guint)home, p);
        guint j = n++;
        while (j > 0 && distance(t, (guint)home, ord[j - 1]) > d) {
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

/* The partition a vCPU's run is attributed to: where it last ran, else its home. */
static inline int sample_partition(const Tick *t, int last_cpu, int home)
{
    if (last_cpu >= 0 && (guint)last_cpu < t->n_cpu_map && t->part_of_cpu[last_cpu] >= 0)
        return t->part_of_cpu[last_cpu];
    return home;
}

static inline void sample_fractions(const Tick *t, const SaVcpuSample *s, double *run,
                                    double *delay)
{
    *run = clamp01((double)s->run_ns / t->interval_ns);
    *delay = clamp01((double)s->delay_ns / t->interval_ns);
    if (*delay > 1 - *run)
        *delay = 1 - *run;
}

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
        sample_fractions(t, s, &run, &delay);
        total += run;
    }
    return total;
}

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

static void G_GNUC_PRINTF(2, 3) append(GString *why, const char *fmt, ...)
{
    va_list ap;
    if (why->len > 0)
        g_string_append(why, "; ");
    va_start(ap, fmt);
    g_string_append_vprintf(why, fmt, ap);
    va_end(ap);
}

static double min_wait(guint softness)
{
    /* 0.15 CPU at softness 1, 0.1 at 50, 0.05 at 100 */
    return 0.05 + 0.001 * (100 - MIN(softness, 100u));
}

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

static void measure_partitions(Tick *t)
{
    for (guint c = 0; c < t->n_cpu_map; c++)
        t->part_of_cpu[c] = -1;
    for (guint p = 0; p < t->n_parts; p++) {
        const SaCpuSet *cpus = part_at(t, (int)p)->cpus;
        double busy = 0;
        guint cap = 0;
        for (int c = sa_cpuset_next(cpus, -1); c >= 0; c = sa_cpuset_next(cpus, c)) {
            t->part_of_cpu[c] = (int)p;
            cap++;
            if ((guint)c < t->n_cpu_busy)
                busy += clamp01(t->cpu_busy[c]);
        }
        t->capacity[p] = cap;
        t->busy[p] = busy;
        t->margin[p] = MAX(MARGIN_MIN_CPUS, MARGIN_FRACTION * cap);
    }
}

/* ---- phase 2: homes, in array order ---- */

static bool home_usable(Tick *t, const SaPolicyVm *vm, int p)
{
    const SaCpuSet *allowed = vm_allowed(t, vm);
    return p >= 0 && t->capacity[p] > 0 && allowed_capacity(t, allowed, p) > 0;
}

static void resolve_homes(Tick *t, SaPolicyVm *const *vms)
{
    for (guint i = 0; i < t->n_vms; i++) {
        SaPolicyVm *vm = vms[i];
        int p = -1;
        HomeHow how = HOME_NONE;
        t->home[i] = -1;
        if (vm->mode == SA_MODE_OFF)
            continue;
        if (vm->preferred >= 0) {
            p = find_part(t, (guint)vm->preferred);
            if (p >= 0 && t->capacity[p] > 0)
                how = HOME_PREFERRED;
            else
                t->preferred_missing[i] = 1;
        }
        if (how == HOME_NONE && vm->assigned >= 0) {
            p = find_part(t, (guint)vm->assigned);
            if (home_usable(t, vm, p))
                how = HOME_ASSIGNED;
        }
        if (how == HOME_NONE && vm->st.placed && vm->st.home >= 0) {
            p = find_part(t, (guint)vm->st.home);
            if (home_usable(t, vm, p))
                how = HOME_KEPT;
        }
        if (how == HOME_NONE)
            continue;
        t->home[i] = p;
        t->how[i] = how;
        t->committed[p] += vm->n_vcpus;
        t->owner_vms[p]++;
    }

    /* Homes chosen now count every home above and those chosen before them in this tick. */
    for (guint i = 0; i < t->n_vms; i++) {
        SaPolicyVm *vm = vms[i];
        if (vm->mode == SA_MODE_OFF || t->home[i] >= 0)
            continue;
        SaAdvice advice;
        if (!sa_policy_choose_home_claimed(t->topo, t->committed, t->claimed, vm_allowed(t, vm),
                                           vm->n_vcpus, vm->memory_bytes, &advice, NULL))
            continue;
        int p = find_part(t, (guint)advice.partition_id);
        if (p < 0)
            continue;
        t->home[i] = p;
        t->how[i] = HOME_AUTO;
        t->committed[p] += vm->n_vcpus;
        t->owner_vms[p]++;
        int node = part_at(t, p)->node;
        if (node >= 0 && (guint)node < t->n_nodes)
            t->claimed[node] += vm->memory_bytes;
    }
}

/* ---- phase 3: who runs where ---- */

static void account(Tick *t, SaPolicyVm *const *vms)
{
    for (guint i = 0; i < t->n_vms; i++) {
        const SaPolicyVm *vm = vms[i];
        int home = t->home[i];
        /* Unplaced and unmanaged VMs stay in "unmanaged". */
        if (home < 0 || !has_samples(t, vm))
            continue;
        for (guint v = 0; v < vm->n_vcpus; v++) {
            const SaVcpuSample *s = &vm->vcpu_samples[v];
            double run, delay;
            sample_fractions(t, s, &run, &delay);
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

    /* A vCPU that moved during the interval is counted where it last ran: one partition then
     * shows more run than busy time (excess) and another less (deficit). The deficit nobody
     * explains is unmanaged load, after taking the misattributed excess off, proportionally. */
    double excess = 0, deficit = 0;
    for (guint p = 0; p < t->n_parts; p++) {
        double d = t->busy[p] - t->owners[p] - t->visitors[p];
        if (d > 0)
            deficit += d;
        else
            excess -= d;
    }
    double keep = deficit > excess ? 1.0 - excess / deficit : 0.0;
    for (guint p = 0; p < t->n_parts; p++) {
        double d = t->busy[p] - t->owners[p] - t->visitors[p];
        t->unmanaged[p] = d > 0 ? d * keep : 0;
        /* Unmanaged load's own run delay is invisible. Where it shares CPUs with visitors, it
         * waits about as long per CPU second of run as they do, at most as long as it runs (the
         * scheduler favours light tasks): hidden = unmanaged × min(1, visitor_wait / visitors).
         * Unmanaged load below the margin is noise and gets no estimate. */
        double hidden = 0;
        if (t->visitors[p] > 0 && t->unmanaged[p] >= t->margin[p])
            hidden = t->unmanaged[p] * MIN(1.0, t->visitor_wait[p] / t->visitors[p]);
        t->owner_demand[p] = t->owners[p] + t->unmanaged[p] + hidden + t->owner_wait[p];
        /* Visitors cannot have run more than the partition was busy: when several of a VM's
         * vCPUs were last seen here, their whole interval is charged here, and without the cap
         * the owners' share would look negative and force a retreat on any owner noise. */
        t->visitors_now[p] = MIN(t->visitors[p], t->busy[p]);
    }
}

/* ---- phase 4: one VM's decision ---- */

static void forget(SaPolicyVm *vm)
{
    SaVmPolicyState *st = &vm->st;
    if (!st->placed)
        return;
    g_clear_pointer(&st->vcpus, sa_cpuset_free);
    g_clear_pointer(&st->emulator, sa_cpuset_free);
    g_array_set_size(st->visited, 0);
    st->placed = false;
    st->state = SA_STATE_HOME;
    st->home = -1;
    st->fits_since_ms = NEVER;
    g_strlcpy(vm->reason, "mode off: left alone", sizeof vm->reason);
}

/* What the VM could get on visited/candidate partition p (not counting the margin). */
static double room_on(Tick *t, const SaPolicyVm *vm, guint i, const SaCpuSet *allowed, int p)
{
    guint cap_allowed = allowed_capacity(t, allowed, p);
    if (cap_allowed == 0)
        return 0;
    double others = MAX(0.0, t->visitors_now[p] - vm_run_on(t, vm, i, p));
    double room = t->capacity[p] - t->owner_demand[p] - others - t->reserved[p];
    return MIN((double)cap_allowed, room);
}

/* Adds candidate partitions nearest first until their spare covers extra. Returns how many
 * were added; *covered receives their total spare. */
static guint add_partitions(Tick *t, SaPolicyVm *vm, guint i, const SaCpuSet *allowed, int home,
                            double extra, double *covered, guint *ids, guint max_ids)
{
    const guint *ord = nearest_first(t, home);
    guint n = 0;
    *covered = 0;
    for (guint j = 0; j + 1 < t->n_parts && *covered < extra && n < max_ids; j++) {
        int p = (int)ord[j];
        guint id = part_at(t, p)->id;
        if (t->retreated[p] || visited_has(&vm->st, id))
            continue;
        double spare = room_on(t, vm, i, allowed, p) - t->margin[p];
        if (spare < MIN_SPARE_CPUS) /* also skips partitions without allowed CPUs */
            continue;
        t->reserved[p] += MIN(spare, extra - *covered);
        *covered += spare;
        ids[n++] = id;
        g_array_append_val(vm->st.visited, id);
    }
    return n;
}

static gint64 holdoff_ms(const SaPolicyConfig *cfg, guint forced_retreats)
{
    /* The first forced retreat costs nothing (the owner may have woken briefly); each further
     * one doubles the back-off, from dwell_ms up to max_holdoff_ms. */
    if (forced_retreats <= 1)
        return 0;
    guint shift = MIN(forced_retreats - 2, (guint)MAX_HOLDOFF_SHIFT);
    gint64 h = (gint64)cfg->dwell_ms << shift;
    return MIN(h, (gint64)cfg->max_holdoff_ms);
}

static void decide(Tick *t, SaPolicyVm *vm, guint i, GString *why)
{
    const SaPolicyConfig *cfg = t->cfg;
    SaVmPolicyState *st = &vm->st;
    const gint64 now = t->now;
    const int home = t->home[i];
    const SaCpuSet *allowed = vm_allowed(t, vm);
    const guint softness =
        vm->softness < 0 ? MIN(cfg->softness, 100u) : MIN((guint)vm->softness, 100u);
    const bool samples = has_samples(t, vm);
    bool rejected = false;

    vm->changed = false;
    g_string_truncate(why, 0);
    if (st->visited == NULL)
        st->visited = g_array_new(FALSE, FALSE, sizeof(guint));
    if (vm->mode == SA_MODE_OFF) {
        forget(vm);
        return;
    }

    /* Smoothed demand: EWMA of Σ (run + delay) / interval. */
    double inst = 0, wait = 0;
    if (samples) {
        double s = CLAMP(cfg->smoothing, 0.001, 1.0);
        inst = t->run[i] + t->wait[i];
        wait = t->wait[i];
        st->demand = s * inst + (1.0 - s) * st->demand;
    }

    /* Home. */
    int home_id = home >= 0 ? (int)part_at(t, home)->id : -1;
    if (t->preferred_missing[i])
        append(why, "preferred partition %d is not in the layout or has no online CPU, using auto",
               vm->preferred);
    const bool home_event = !st->placed || home_id != st->home;
    if (home_event) {
        if (home < 0)
            append(why, "no partition has an online CPU the VM is allowed on: vCPUs get the "
                        "allowed set");
        else if (!st->placed)
            append(why, "placed at home partition %d (%s)", home_id, how_text(t->how[i]));
        else
            append(why, "home moved from partition %d to %d (%s)", st->home, home_id,
                   how_text(t->how[i]));
        g_array_set_size(st->visited, 0);
        st->fits_since_ms = NEVER;
    }
    st->home = home_id;

    guint cap_home = home >= 0 ? allowed_capacity(t, allowed, home) : 0;
    if (home >= 0 && cap_home == 0) {
        if (home_event || st->visited->len > 0)
            append(why,
                   "home partition %d has no CPU in the allowed set: vCPUs get the allowed set",
                   home_id);
        g_array_set_size(st->visited, 0);
    }
    const bool soft = vm->mode == SA_MODE_SOFT && softness > 0 && cap_home > 0;
    if (!soft && st->visited->len > 0) {
        append(why, "%s: back to home partition %d only",
               vm->mode == SA_MODE_STRICT ? "mode strict" : "softness 0", home_id);
        g_array_set_size(st->visited, 0);
        st->fits_since_ms = NEVER;
    }

    /* The back-off forgets half of its history after a quiet max_holdoff_ms. */
    if (st->forced_retreats > 0 &&
        elapsed(now, MAX(st->last_forced_ms, st->holdoff_until_ms)) >= cfg->max_holdoff_ms) {
        st->forced_retreats /= 2;
        st->last_forced_ms = now;
    }

    /* Retreat: owners first, immediately. Visited partitions that are gone or no longer
     * allowed are left quietly. */
    guint forced_ids[16], n_forced = 0;
    double forced_need = 0;
    guint forced_cap = 0;
    for (guint k = 0; k < st->visited->len;) {
        guint id = g_array_index(st->visited, guint, k);
        int p = find_part(t, id);
        if (p < 0 || p == home || allowed_capacity(t, allowed, p) == 0) {
            append(why, "left partition %u: no allowed online CPU", id);
            g_array_remove_index(st->visited, k);
            continue;
        }
        if (t->owner_demand[p] > t->capacity[p] - t->visitors_now[p] + t->margin[p]) {
            t->visitors_now[p] = MAX(0.0, t->visitors_now[p] - vm_run_on(t, vm, i, p));
            t->retreated[p] = 1;
            if (n_forced < G_N_ELEMENTS(forced_ids))
                forced_ids[n_forced] = id;
            if (n_forced == 0) {
                forced_need = t->owner_demand[p];
                forced_cap = t->capacity[p];
            }
            n_forced++;
            g_array_remove_index(st->visited, k);
            continue;
        }
        k++;
    }
    if (n_forced > 0) {
        char ids[64];
        format_ids(ids, sizeof ids, forced_ids, MIN(n_forced, G_N_ELEMENTS(forced_ids)));
        st->forced_retreats++;
        st->last_forced_ms = now;
        vm->retreats += n_forced;
        st->fits_since_ms = NEVER;
        st->last_voluntary_ms = NEVER; /* from here the back-off decides, not the dwell */
        gint64 h = holdoff_ms(cfg, st->forced_retreats);
        st->holdoff_until_ms = now + h;
        append(why, "retreat from partition%s %s: %s owners need %.1f of %u CPUs",
               n_forced > 1 ? "s" : "", ids, n_forced > 1 ? "their" : "its", forced_need,
               forced_cap);
        if (h > 0)
            g_string_append_printf(why, ", no burst for %.1f s", h / 1000.0);
    }

    /* Burst, widen, or go home. */
    if (soft && n_forced == 0 && samples) {
        const double demand = MIN((double)vm->n_vcpus, MAX(st->demand, inst));
        const double self_home = vm_run_on(t, vm, i, home);
        const double others = MAX(0.0, t->owner_demand[home] - t->relief[home] - self_home - wait);
        const double avail_home = MIN((double)cap_home, t->capacity[home] - others);
        const double margin = t->margin[home];
        const bool may_change = now >= st->holdoff_until_ms &&
                                elapsed(now, st->last_voluntary_ms) >= (gint64)cfg->dwell_ms;
        guint added_ids[16];
        double covered = 0;

        if (st->visited->len > 0) {
            /* Keep the fewest visited partitions (nearest first) that hold the demand. */
            guint len = st->visited->len, keep = len;
            double cum = avail_home;
            if (demand + margin <= cum) {
                keep = 0;
            } else {
                for (guint k = 0; k < len; k++) {
                    int p = find_part(t, g_array_index(st->visited, guint, k));
                    cum += MAX(0.0, room_on(t, vm, i, allowed, p));
                    if (demand + margin <= cum) {
                        keep = k + 1;
                        break;
                    }
                }
            }
            if (keep < len) {
                if (st->fits_since_ms == NEVER)
                    st->fits_since_ms = now;
                if (elapsed(now, st->fits_since_ms) >= (gint64)cfg->dwell_ms &&
                    elapsed(now, st->last_voluntary_ms) >= (gint64)cfg->dwell_ms) {
                    double secs = (now - st->fits_since_ms) / 1000.0;
                    g_array_set_size(st->visited, keep);
                    st->last_voluntary_ms = now;
                    st->fits_since_ms = NEVER;
                    if (keep == 0)
                        append(why,
                               "return home: demand %.1f CPUs has fit in home partition %d "
                               "(%.1f CPUs free) for %.1f s",
                               demand, home_id, avail_home, secs);
                    else
                        append(why,
                               "shrink to %u visited partition%s: demand %.1f CPUs has fit for "
                               "%.1f s",
                               keep, keep > 1 ? "s" : "", demand, secs);
                }
            } else {
                st->fits_since_ms = NEVER;
                double extra = demand + margin - cum;
                if (extra > 0 && wait >= min_wait(softness) && may_change) {
                    guint n = add_partitions(t, vm, i, allowed, home, extra, &covered, added_ids,
                                             G_N_ELEMENTS(added_ids));
                    if (n > 0) {
                        char ids[64];
                        format_ids(ids, sizeof ids, added_ids, n);
                        vm->bursts += n;
                        st->last_voluntary_ms = now;
                        append(why,
                               "widen onto partition%s %s: still %.1f vCPUs waiting, %.1f idle "
                               "CPUs there",
                               n > 1 ? "s" : "", ids, wait, covered);
                    }
                }
            }
        } else {
            st->fits_since_ms = NEVER;
            double util = allowed_utilization(t, allowed, home, cap_home);
            if (wait >= min_wait(softness) && util >= sa_policy_burst_threshold(softness) &&
                demand > avail_home) {
                if (now < st->holdoff_until_ms) {
                    rejected = true;
                    append(why,
                           "burst held off for %.1f s more after %u owner-forced retreats "
                           "(home %.0f%% busy, %.1f vCPUs waiting)",
                           (st->holdoff_until_ms - now) / 1000.0, st->forced_retreats, 100 * util,
                           wait);
                } else if (!may_change) {
                    rejected = true;
                    append(why,
                           "burst waits for the dwell time: last change %.1f s ago, dwell %.1f s "
                           "(home %.0f%% busy, %.1f vCPUs waiting)",
                           (now - st->last_voluntary_ms) / 1000.0, cfg->dwell_ms / 1000.0,
                           100 * util, wait);
                } else {
                    double extra = demand + margin - avail_home;
                    guint n = add_partitions(t, vm, i, allowed, home, extra, &covered, added_ids,
                                             G_N_ELEMENTS(added_ids));
                    if (n > 0) {
                        char ids[64];
                        format_ids(ids, sizeof ids, added_ids, n);
                        vm->bursts += n;
                        st->last_voluntary_ms = now;
                        t->relief[home] += MIN(MIN(covered, extra), self_home + wait);
                        append(why,
                               "burst onto partition%s %s: home %.0f%% busy, %.1f vCPUs "
                               "waiting, partition%s %s idle %.1f CPUs",
                               n > 1 ? "s" : "", ids, 100 * util, wait, n > 1 ? "s" : "", ids,
                               covered);
                    } else {
                        rejected = true;
                        append(why,
                               "no burst: home %.0f%% busy, %.1f vCPUs waiting, but no allowed "
                               "partition has %.1f idle CPUs",
                               100 * util, wait, MIN_SPARE_CPUS);
                    }
                }
            }
        }
    }
    st->state = st->visited->len > 0 ? SA_STATE_BURST : SA_STATE_HOME;

    /* The sets: vCPUs on (home ∪ visited) ∩ allowed, emulator and I/O threads on home ∩ allowed;
     * the allowed set itself when home has none of it. */
    if (cap_home > 0) {
        sa_cpuset_assign(t->set, part_at(t, home)->cpus);
        sa_cpuset_intersect(t->set, allowed);
    } else {
        sa_cpuset_assign(t->set, allowed);
    }
    bool changed = false;
    if (st->emulator == NULL) {
        st->emulator = sa_cpuset_copy(t->set);
        changed = true;
    } else if (!sa_cpuset_equal(st->emulator, t->set)) {
        sa_cpuset_assign(st->emulator, t->set);
        changed = true;
    }
    for (guint k = 0; k < st->visited->len; k++) {
        int p = find_part(t, g_array_index(st->visited, guint, k));
        sa_cpuset_assign(t->tmp, part_at(t, p)->cpus);
        sa_cpuset_intersect(t->tmp, allowed);
        sa_cpuset_union(t->set, t->tmp);
    }
    if (st->vcpus == NULL) {
        st->vcpus = sa_cpuset_copy(t->set);
        changed = true;
    } else if (!sa_cpuset_equal(st->vcpus, t->set)) {
        sa_cpuset_assign(st->vcpus, t->set);
        changed = true;
    }
    st->placed = true;
    if (changed) {
        vm->changed = true;
        st->last_change_ms = now;
        if (why->len == 0)
            append(why, "the allowed set or the partitions' CPUs changed");
    }
    if (changed || rejected || why->len > 0)
        g_strlcpy(vm->reason, why->str, sizeof vm->reason);
}

/* ---- the tick ---- */

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

    Tick t = {
        .cfg = cfg,
        .host = host,
        .topo = host->topo,
        .now = host->now_ms,
        .interval_ns = (double)host->interval_ns,
        .n_parts = host->topo->partitions ? host->topo->partitions->len : 0,
        .n_nodes = host->topo->nodes ? host->topo->nodes->len : 0,
        .n_vms = n_vms,
        .cpu_busy = host->cpu_busy,
        .n_cpu_busy = host->cpu_busy ? host->n_cpu_busy : 0,
    };
    for (guint p = 0; p < t.n_parts; p++) {
        int last = sa_cpuset_last(part_at(&t, (int)p)->cpus);
        t.n_cpu_map = MAX(t.n_cpu_map, (guint)(last + 1));
    }

    Arena arena = {0};
    tick_layout(&t, &arena);
    g_autofree char *scratch = g_malloc0(MAX(arena.used, 1));
    arena = (Arena){.base = scratch};
    tick_layout(&t, &arena);

    g_autoptr(SaCpuSet) set = sa_cpuset_new();
    g_autoptr(SaCpuSet) tmp = sa_cpuset_new();
    g_autoptr(SaCpuSet) all = NULL;
    t.set = set;
    t.tmp = tmp;
    if (host->topo->online) {
        t.all = host->topo->online;
    } else {
        all = sa_cpuset_new();
        for (guint p = 0; p < t.n_parts; p++)
            sa_cpuset_union(all, part_at(&t, (int)p)->cpus);
        t.all = all;
    }

    measure_partitions(&t);
    resolve_homes(&t, vms);
    account(&t, vms);

    for (guint i = 0; i < n_vms; i++)
        vms[i]->bursts = vms[i]->retreats = 0;
    g_autoptr(GString) why = g_string_sized_new(256);
    for (guint i = 0; i < n_vms; i++)
        decide(&t, vms[i], i, why);

    if (usage) {
        for (guint p = 0; p < t.n_parts; p++) {
            usage[p] = (SaPartitionUsage){
                .owners = t.owners[p],
                .visitors = t.visitors[p],
                .unmanaged = t.unmanaged[p],
                .n_owner_vms = t.owner_vms[p],
                .owner_vcpus = t.committed[p],
            };
        }
    }
}
