/* softaff — the policy's rules, one small function each, in the order the tick applies them.
 *
 * Internal to policies/ and its tests, not the daemon's interface: tick.c gathers the numbers
 * (docs/policy.md names them) and these judge them. Pure: plain values in, a value out, nothing
 * written, so tests call them one by one from tables. Inline, because the tick runs most of them
 * once per VM or per vCPU. Loads are in CPUs, times in host->now_ms units (ms). */
#pragma once

#include "sa-policy.h"

#include <math.h>

G_BEGIN_DECLS

/* The time constant of the averaged load: status' and metrics' figures of a partition
 * (daemon/partition-load.c) and the host's load a forced retreat counts. */
#define SA_POLICY_LOAD_WINDOW_S 2.0
/* A time that never came (SaVmPolicyState's times start there): long ago. */
#define SA_POLICY_NEVER G_MININT64
/* A burst target must offer at least this many idle CPUs beyond its margin. */
#define SA_POLICY_MIN_SPARE_CPUS 0.5
/* An owner's background noise must not evict visitors: margin = max(0.25 CPU, 10%). */
#define SA_POLICY_MARGIN_MIN_CPUS 0.25
#define SA_POLICY_MARGIN_FRACTION 0.10
/* The CPU time an idle owner's housekeeping takes at once (a timer, a flush; TCG guests take
 * several ms for what KVM does in µs): over a 20-ms event tick, 10 ms reads as 0.5 CPU. */
#define SA_POLICY_OWNER_NOISE_NS 10e6
/* How long a VM below softness 100 stays eligible for doors after its last spike, the longest
 * run of using more than home gives that counts as a spike (longer ones are loads, for bursts),
 * and the softness-point step of door_idle_ms. */
#define SA_POLICY_DOOR_MEMORY_MS 60000
#define SA_POLICY_SPIKE_MAX_MS 2000
#define SA_POLICY_DOOR_IDLE_STEP_MS 100
/* A vCPU busy (run + wait) for at least this fraction of the interval was active in it. */
#define SA_POLICY_ACTIVE_VCPU 0.10
/* Longest back-off shift: dwell_ms << 20 is far beyond any max_holdoff_ms. */
#define SA_POLICY_MAX_HOLDOFF_SHIFT 20

/* Milliseconds from since to now; G_MAXINT64 when since is SA_POLICY_NEVER. */
static inline gint64 sa_policy_elapsed_ms(gint64 now, gint64 since)
{
    return since == SA_POLICY_NEVER ? G_MAXINT64 : now - since;
}

/* ---- accounting ---- */

/* Fills map[c], for c < n, with the index of the partition holding CPU c, -1 for none: the
 * tick's own table for sa_policy_run_partition(). */
void sa_policy_map_cpus(const SaTopology *topo, int *map, guint n);

/* sa_policy_run_partition() on a table from sa_policy_map_cpus() with n entries. */
static inline int sa_policy_run_partition_mapped(const int *map, guint n, int last_cpu,
                                                 int home_idx)
{
    int p = last_cpu >= 0 && (guint)last_cpu < n ? map[last_cpu] : -1;
    return p >= 0 ? p : home_idx;
}

/* The owner load of a partition that is noise, not a claim: max(0.25 CPU, 10% of its CPUs). */
static inline double sa_policy_margin(guint capacity)
{
    return MAX(SA_POLICY_MARGIN_MIN_CPUS, SA_POLICY_MARGIN_FRACTION * capacity);
}

/* A vCPU's run and delay as fractions of the interval, each within 0..1, delay at most
 * 1 − run (one thread cannot want more than one CPU). */
static inline void sa_policy_sample_fractions(const SaVcpuSample *s, double interval_ns,
                                              double *run, double *delay)
{
    double r = (double)s->run_ns / interval_ns, w = (double)s->delay_ns / interval_ns;
    *run = r < 0 ? 0 : r > 1 ? 1 : r;
    *delay = w < 0 ? 0 : w > 1 ? 1 : w;
    if (*delay > 1 - *run)
        *delay = 1 - *run;
}

/* The part of a partition's unexplained busy time (its deficit) that counts as unmanaged load,
 * once the run misattributed elsewhere (Σ excess) is taken off all deficits proportionally. */
static inline double sa_policy_unmanaged_share(double excess, double deficit)
{
    return deficit > excess ? 1.0 - excess / deficit : 0.0;
}

/* The run delay hidden unmanaged load suffers beside visitors: unmanaged × min(1,
 * visitor_wait / visitors); 0 without visitors, and 0 while unmanaged is below the margin. */
static inline double sa_policy_hidden_wait(double unmanaged, double visitors, double visitor_wait,
                                           double margin)
{
    if (visitors > 0 && unmanaged >= margin)
        return unmanaged * MIN(1.0, visitor_wait / visitors);
    return 0;
}

/* ---- one VM: demand and home ---- */

/* The VM's softness, or the configured one when the VM sets none (< 0); at most 100. */
static inline guint sa_policy_effective_softness(const SaPolicyConfig *cfg, int vm_softness)
{
    return vm_softness < 0 ? MIN(cfg->softness, 100u) : MIN((guint)vm_softness, 100u);
}

/* The EWMA of the VM's demand after one more interval of instant (run + wait) CPUs; the weight
 * of the new interval is cfg->smoothing, within 0.001..1. */
static inline double sa_policy_smoothed_demand(const SaPolicyConfig *cfg, double smoothed,
                                               double instant)
{
    double s = CLAMP(cfg->smoothing, 0.001, 1.0);
    return s * instant + (1.0 - s) * smoothed;
}

/* The demand the tick plans for: the larger of the smoothed and the instant one (a rising load
 * counts at once, a falling one slowly), at most one CPU per vCPU. */
static inline double sa_policy_demand(guint n_vcpus, double smoothed, double instant)
{
    return MIN((double)n_vcpus, MAX(smoothed, instant));
}

/* Whether the VM may run anywhere but home: mode soft, softness > 0, and its home has CPUs in
 * its allowed set (home_allowed_cpus > 0). */
static inline bool sa_policy_may_leave_home(SaMode mode, guint softness, guint home_allowed_cpus)
{
    return mode == SA_MODE_SOFT && softness > 0 && home_allowed_cpus > 0;
}

/* ---- back-off and retreat ---- */

/* Whether the back-off forgets half of its history now: there were forced retreats, and
 * max_holdoff_ms passed since the later of the last one and the end of the back-off. */
static inline bool sa_policy_backoff_decays(const SaPolicyConfig *cfg, const SaVmPolicyState *st,
                                            gint64 now)
{
    return st->forced_retreats > 0 &&
           sa_policy_elapsed_ms(now, MAX(st->last_forced_ms, st->holdoff_until_ms)) >=
               cfg->max_holdoff_ms;
}

/* Whether a partition's owners fill it: their demand leaves less than the margin free, no room
 * for any visitor, whether it runs there now or not. */
static inline bool sa_policy_owners_fill(double owner_demand, guint capacity, double margin)
{
    return owner_demand > capacity - margin;
}

/* Whether a visitor allowed on a partition must leave it now: its owners fill it (the kernel
 * may keep the visitor off it for a while, then put a thread there and make an owner wait), or
 * their demand no longer fits beside the visitors still there, even with the margin. */
static inline bool sa_policy_should_retreat(double owner_demand, guint capacity,
                                            double visitors_now, double margin)
{
    return sa_policy_owners_fill(owner_demand, capacity, margin) ||
           owner_demand > capacity - visitors_now + margin;
}

/* An average over about SA_POLICY_LOAD_WINDOW_S seconds, one interval of `seconds` at x at a
 * time, each weighed by its length (an exponential average with that time constant): an
 * interval as long as the window moves it 63% of the way to x, a 20-ms one 1%. */
static inline double sa_policy_window_fold(double avg, double x, double seconds)
{
    if (!(seconds > 0))
        return avg;
    return avg + -expm1(-seconds / SA_POLICY_LOAD_WINDOW_S) * (x - avg);
}

/* The owners' demand a forced retreat judges them by. Owners' run and wait always count in
 * full: a vCPU homed there that wants its CPU gets it at once. The host's part (unmanaged load
 * and the wait it hid behind visitors) counts at most at unmanaged_avg, the unmanaged load
 * averaged over about SA_POLICY_LOAD_WINDOW_S with this interval in it: a shell, a libvirt
 * pinning or a status poll busy for most of a short tick (0.9 CPU over 20 ms, 1.0 over a
 * regular tick in the 1-CPU partitions of the 2-node test host) undid bursts onto a partition
 * whose owner was paused; host work that lasts reaches the margin of a 1-CPU partition within
 * 0.6 s at 1 CPU. Then up to SA_POLICY_OWNER_NOISE_NS of it in the interval is host noise, as for
 * doors (0.02 CPU over 500 ms). */
static inline double sa_policy_retreat_demand(double owner_demand, double unmanaged, double hidden,
                                              double unmanaged_avg, double interval_ns)
{
    double host = MAX(0.0, unmanaged) + MAX(0.0, hidden);
    double share = unmanaged > 0 ? CLAMP(unmanaged_avg / unmanaged, 0.0, 1.0) : 1.0;
    double noise = interval_ns > 0 ? SA_POLICY_OWNER_NOISE_NS / interval_ns : 0;
    double counted = share * host - MIN(share * MAX(0.0, unmanaged), noise);
    return MAX(0.0, owner_demand - host + counted);
}

/* The back-off after the forced_retreats-th forced retreat in a row: none after the first (the
 * owner may have woken briefly), then dwell_ms doubling each time, at most max_holdoff_ms. */
static inline gint64 sa_policy_holdoff_ms(const SaPolicyConfig *cfg, guint forced_retreats)
{
    if (forced_retreats <= 1)
        return 0;
    guint shift = MIN(forced_retreats - 2, (guint)SA_POLICY_MAX_HOLDOFF_SHIFT);
    gint64 h = (gint64)cfg->dwell_ms << shift;
    return MIN(h, (gint64)cfg->max_holdoff_ms);
}

/* ---- burst, widen, shrink ---- */

/* CPUs the home can give the VM, owners first: the home's allowed CPUs, at most its capacity
 * minus what the others there need (owner demand, less relief promised earlier in the tick, the
 * VM's own run there and its wait). */
static inline double sa_policy_avail_home(guint home_allowed_cpus, guint capacity,
                                          double owner_demand, double relief, double self_run,
                                          double wait)
{
    double others = MAX(0.0, owner_demand - relief - self_run - wait);
    return MIN((double)home_allowed_cpus, capacity - others);
}

/* The least wait, in CPUs, that shows a VM of this softness lacks CPUs: 0.15 at softness 0,
 * 0.10 at 50, 0.05 at 100. */
static inline double sa_policy_min_wait(guint softness)
{
    return 0.05 + 0.001 * (100 - MIN(softness, 100u));
}

/* Whether a VM at home needs more CPUs than its home gives: it waits at least min_wait, its
 * home's allowed CPUs are at least threshold(softness) busy, and its demand exceeds avail_home. */
static inline bool sa_policy_needs_burst(guint softness, double wait, double home_util,
                                         double demand, double avail_home)
{
    return wait >= sa_policy_min_wait(softness) &&
           home_util >= sa_policy_burst_threshold(softness) && demand > avail_home;
}

/* Whether the back-off still forbids bursts and widenings. */
static inline bool sa_policy_held_off(const SaVmPolicyState *st, gint64 now)
{
    return now < st->holdoff_until_ms;
}

/* Whether dwell_ms passed since the last voluntary change (always true when there was none). */
static inline bool sa_policy_dwell_over(const SaPolicyConfig *cfg, const SaVmPolicyState *st,
                                        gint64 now)
{
    return sa_policy_elapsed_ms(now, st->last_voluntary_ms) >= (gint64)cfg->dwell_ms;
}

/* Whether the VM may burst or widen now: the back-off is over and so is the dwell time. */
static inline bool sa_policy_may_burst(const SaPolicyConfig *cfg, const SaVmPolicyState *st,
                                       gint64 now)
{
    return !sa_policy_held_off(st, now) && sa_policy_dwell_over(cfg, st, now);
}

/* How many visited partitions, nearest first, the VM needs: the fewest whose room (room[k], a
 * negative room counts as none), with avail_home, holds need (demand + margin); n when even all
 * of them do not. *held receives avail_home plus the rooms counted. */
static inline guint sa_policy_visits_needed(double need, double avail_home, const double *room,
                                            guint n, double *held)
{
    double cum = avail_home;
    guint keep = n;
    if (need <= cum) {
        keep = 0;
    } else {
        for (guint k = 0; k < n; k++) {
            cum += MAX(0.0, room[k]);
            if (need <= cum) {
                keep = k + 1;
                break;
            }
        }
    }
    *held = cum;
    return keep;
}

/* Whether a VM that needs fewer visited partitions may drop the rest now: fewer have sufficed
 * for dwell_ms (since st->fits_since_ms) and its last voluntary change is dwell_ms old. */
static inline bool sa_policy_may_shrink(const SaPolicyConfig *cfg, const SaVmPolicyState *st,
                                        gint64 now)
{
    return sa_policy_elapsed_ms(now, st->fits_since_ms) >= (gint64)cfg->dwell_ms &&
           sa_policy_dwell_over(cfg, st, now);
}

/* ---- doors: partitions opened early onto idle owners ---- */

/* How long a partition's owners must have been idle before a VM of this softness may get a door
 * onto it: (100 − softness) × 100 ms, so 0 at 100 (the first idle interval seen), 5 s at 50;
 * never at softness 0 (G_MAXINT64). */
static inline gint64 sa_policy_door_idle_ms(guint softness)
{
    if (softness == 0)
        return G_MAXINT64;
    return (gint64)(100 - MIN(softness, 100u)) * SA_POLICY_DOOR_IDLE_STEP_MS;
}

/* Whether a partition's owners are idle over an interval of interval_ns: their demand (owners,
 * unmanaged, their wait) is within the noise an idle owner makes, the margin or
 * SA_POLICY_OWNER_NOISE_NS of CPU time, whichever is more (the second only matters in the short
 * intervals of event ticks). More closes a door at once. */
static inline bool sa_policy_owners_idle(double owner_demand, double margin, double interval_ns)
{
    double noise = interval_ns > 0 ? SA_POLICY_OWNER_NOISE_NS / interval_ns : 0;
    return owner_demand <= MAX(margin, noise);
}

/* The owners' demand a bursting VM's door wait judges them by: without the part of their wait
 * that its own run there explains (owner_wait, at most visitor_run). An idle owner's vCPUs that
 * wake behind the visitor's wait as long as it runs; counted, they would restart the owners' idle
 * run on every burst, and the burst would return home to no door. Their own run still counts. */
static inline double sa_policy_owners_beside(double owner_demand, double owner_wait,
                                             double visitor_run)
{
    return MAX(0.0, owner_demand - MIN(owner_wait, visitor_run));
}

/* The start of the owners' idle run after one more interval [now − interval_ms, now]: kept
 * while idle (started now − interval_ms when it was not), SA_POLICY_NEVER when they showed load. */
static inline gint64 sa_policy_idle_since(gint64 since, bool idle, gint64 now, gint64 interval_ms)
{
    if (!idle)
        return SA_POLICY_NEVER;
    return since == SA_POLICY_NEVER ? now - interval_ms : since;
}

/* Whether a VM used more than its home gives this interval, without a burst: its run + wait is
 * at least min_wait above avail_home, or more of its vCPUs were active than avail_home has CPUs
 * (an interval's average hides how wide a short spike was) and they waited at home or ran
 * elsewhere (wait_or_away) at least min_wait. */
static inline bool sa_policy_outgrows_home(double instant, guint active_vcpus, double wait_or_away,
                                           double avail_home, double min_wait)
{
    return instant >= avail_home + min_wait ||
           ((double)active_vcpus > avail_home && wait_or_away >= min_wait);
}

/* Whether a run of using more than home gives, from since to run_end, was a spike: there was
 * one (since is not SA_POLICY_NEVER) and it lasted at most SA_POLICY_SPIKE_MAX_MS. */
static inline bool sa_policy_was_spike(gint64 since, gint64 run_end)
{
    return since != SA_POLICY_NEVER && run_end - since <= SA_POLICY_SPIKE_MAX_MS;
}

/* Whether a VM at home of this softness may have doors: softness 100 always; 1..99 only for
 * SA_POLICY_DOOR_MEMORY_MS after its last spike ended (spike_ms), so a VM that fits at home
 * keeps its locality, and one whose load lasts gets bursts instead; softness 0 never. */
static inline bool sa_policy_door_wanted(guint softness, gint64 now, gint64 spike_ms)
{
    if (softness == 0)
        return false;
    if (softness >= 100)
        return true;
    return sa_policy_elapsed_ms(now, spike_ms) <= SA_POLICY_DOOR_MEMORY_MS;
}

/* Whether a door may open onto a partition whose owners have been idle since since: they are
 * idle now and for at least door_idle_ms(softness). */
static inline bool sa_policy_door_may_open(guint softness, gint64 now, gint64 since)
{
    return since != SA_POLICY_NEVER && softness > 0 &&
           now - since >= sa_policy_door_idle_ms(softness);
}

G_END_DECLS
