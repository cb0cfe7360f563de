/* softaff — the soft-affinity policy: initial home choice, burst, retreat and doors.
 *
 * Pure and deterministic: no I/O, no clock, no libnuma. The daemon fills the inputs from its
 * samplers each tick and applies the outputs. See docs/policy.md for the algorithm. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "sa-cpuset.h"
#include "sa-topology.h"

G_BEGIN_DECLS

typedef enum {
    SA_MODE_SOFT,   /* stay home while the host is busy, burst onto idle partitions */
    SA_MODE_STRICT, /* stay home, never burst */
    SA_MODE_OFF,    /* softaff leaves the VM alone */
} SaMode;

const char *sa_mode_to_string(SaMode mode);
bool sa_mode_from_string(const char *text, SaMode *out, GError **error);

typedef enum {
    SA_STATE_HOME,  /* vCPUs may run on the home partition only */
    SA_STATE_BURST, /* vCPUs may also run on visited partitions */
    SA_STATE_DOOR,  /* at home, but the visited partitions were opened early ("door"): their
                       owners are idle, so the kernel may place the VM's spikes there at once */
} SaVmState;

const char *sa_vm_state_to_string(SaVmState state);

typedef struct {
    guint softness;       /* default softness for VMs that do not set one, 0..100 (50) */
    guint dwell_ms;       /* minimum time between two voluntary changes of one VM (2000) */
    double smoothing;     /* EWMA weight of the newest sample, 0 < s <= 1 (0.5) */
    guint max_holdoff_ms; /* cap of the re-burst back-off after owner-forced retreats (30000) */
} SaPolicyConfig;

void sa_policy_config_init(SaPolicyConfig *cfg);

/* Home utilization (0..1) above which a VM of this softness may burst; > 1 means never.
 * softness 0 -> never, 50 -> 0.85, 100 -> 0 (any wait bursts). */
double sa_policy_burst_threshold(guint softness);

/* The host, for one tick. */
typedef struct {
    const SaTopology *topo;
    const double *cpu_busy; /* indexed by CPU number: busy fraction 0..1 over the interval */
    guint n_cpu_busy;       /* length of cpu_busy (CPUs beyond count as idle) */
    /* NULL, or indexed as cpu_busy: the fraction of the interval each CPU ran threads of VMs
     * homed elsewhere (their vCPUs and their QEMU's other threads), measured where they ran
     * (the BPF sensor); never owners' or unmanaged load. */
    const double *cpu_visitors;
    guint64 interval_ns; /* length of the interval the deltas cover */
    gint64 now_ms;       /* monotonic time of this tick */
    /* NULL, or per partition index: its unmanaged load (CPUs) averaged over about the last 2 s
     * before this tick (daemon/partition-load.h), negative where none is known yet; a forced
     * retreat counts the host's load at most at that average with this tick in it. */
    const double *unmanaged_avg;
} SaPolicyHost;

/* One vCPU thread over the interval. */
typedef struct {
    guint64 run_ns;   /* time on a CPU during the interval (delta) */
    guint64 delay_ns; /* time runnable but waiting during the interval (delta) */
    int last_cpu;     /* CPU it last ran on, -1 unknown */
} SaVcpuSample;

/* Since when the owners of one partition have been idle, as one VM saw it (its door). */
typedef struct {
    guint id;     /* partition id */
    gint64 since; /* start of the first idle interval of the current run, G_MININT64 = busy */
} SaPartitionIdle;

/* What the policy remembers about one VM between ticks. Owned by SaPolicyVm. */
typedef struct {
    bool placed; /* a decision was made at least once */
    int home;    /* home partition id, -1 none yet */
    SaVmState state;
    SaCpuSet *vcpus;    /* set the vCPUs were given (NULL before the first decision) */
    SaCpuSet *emulator; /* set the emulator and I/O threads were given */
    GArray *visited;    /* guint partition ids the vCPUs may run on beyond home, nearest first:
                           burst onto (state burst) or opened early (state door) */
    bool doors;         /* the visited partitions are doors opened early, not bursts */
    double demand;      /* smoothed CPUs wanted by the vCPUs (run + delay per interval) */
    /* Times are host->now_ms values; G_MININT64 = never. */
    gint64 last_change_ms;    /* last tick with changed = true */
    gint64 holdoff_until_ms;  /* no burst before this time (back-off after forced retreats) */
    guint forced_retreats;    /* recent owner-forced retreats, drives the back-off */
    gint64 last_voluntary_ms; /* last burst, widening or voluntary return; dwell counts from it */
    gint64 fits_since_ms;     /* since when fewer visited partitions would do */
    gint64 last_forced_ms;    /* last owner-forced retreat (or back-off decay) */
    gint64 outgrow_since_ms;  /* start of its current run of using more than home gives */
    gint64 spike_ms;          /* end of its last spike: such a run of at most 2 s at home */
    GArray *idle;             /* SaPartitionIdle per partition index, for doors */
} SaVmPolicyState;

typedef struct {
    /* --- input, set by the caller before each tick --- */
    const char *name;
    SaMode mode;
    int preferred;           /* partition id, or -1 for "auto" */
    int assigned;            /* home chosen earlier for "auto" (metadata assigned=), -1 none */
    int softness;            /* 0..100, or -1 for the config default */
    const SaCpuSet *allowed; /* the VM's own allowed set: <vcpu cpuset>, <vcpupin>, affinity */
    guint n_vcpus;
    const SaVcpuSample *vcpu_samples; /* n_vcpus entries; NULL when there is no interval yet */
    guint64 memory_bytes;             /* guest memory, for the initial home choice */

    /* --- state carried across ticks --- */
    SaVmPolicyState st;

    /* --- output of the last sa_policy_tick --- */
    bool changed;     /* vcpus/emulator sets differ from what was applied: apply them */
    char reason[192]; /* why (set whenever changed, and for rejected bursts at debug level) */
    guint bursts;     /* partitions added this tick (bursts and widenings) */
    guint retreats;   /* owner-forced retreats this tick */
} SaPolicyVm;

void sa_policy_vm_init(SaPolicyVm *vm);
void sa_policy_vm_clear(SaPolicyVm *vm);

/* Per partition (indexed like topo->partitions), in CPUs (1.0 = one CPU fully busy). */
typedef struct {
    double owners;       /* home VMs' vCPUs */
    double visitors;     /* vCPUs of VMs homed elsewhere */
    double unmanaged;    /* everything else (counted as owner load) */
    double owner_demand; /* what the owners wanted: owners + unmanaged + their wait (the
                            headroom model's input, policies/sa-headroom.h) */
    guint n_owner_vms;
    guint owner_vcpus; /* vCPUs homed here (commitment) */
} SaPartitionUsage;

/* The partition index a vCPU's run is attributed to: the partition of the CPU it last ran on, else
 * (unknown CPU, or a CPU in no partition) home_idx. */
int sa_policy_run_partition(const SaTopology *topo, int last_cpu, int home_idx);

/* One tick: decides home, state and CPU sets for every VM. usage, when not NULL, has
 * topo->partitions->len entries and receives the utilization split. */
void sa_policy_tick(const SaPolicyConfig *cfg, const SaPolicyHost *host, SaPolicyVm *const *vms,
                    guint n_vms, SaPartitionUsage *usage);

/* Initial home choice, also used by `softaffctl advise`: the least committed partition
 * (home vCPUs / partition CPUs after adding this VM) among those with an online CPU in allowed
 * (NULL = any), preferring nodes with memory_bytes free, ties by lower id.
 * committed_vcpus: per partition index, vCPUs already homed there (NULL = none). */
typedef struct {
    int partition_id;
    double commitment; /* home vCPUs per CPU of that partition, this VM included */
    char reason[256];
} SaAdvice;

bool sa_policy_choose_home(const SaTopology *topo, const guint *committed_vcpus,
                           const SaCpuSet *allowed, guint n_vcpus, guint64 memory_bytes,
                           SaAdvice *out, GError **error);

/* ---- Homes rebalance (policies/rebalance.c, docs/rebalance.md) ----
 * When one partition's owners stay over-committed for window_ms while another stays under-used,
 * move the home of the cheapest preferred="auto" VM whose move fixes it. Pure, like the tick:
 * time comes in as now_ms. At most one move per call. */

/* Most moves per hour a config may allow (the state remembers that many). */
#define SA_REBALANCE_MAX_MOVES 16u

typedef struct {
    bool enabled;    /* rebalance=auto: true, rebalance=off: false (true) */
    guint window_ms; /* how long an imbalance must last; also the cool-down of both
                        partitions after a move (600000 = 10 min) */
    double min_gap;  /* over-committed: owners' demand >= (1 + gap) × capacity; under-used:
                        <= (1 - gap) × capacity; 0..0.9 (0.2) */
    guint max_moves_per_hour; /* moves in any hour, at most SA_REBALANCE_MAX_MOVES; 0 = none (2) */
} SaRebalanceConfig;

void sa_rebalance_config_init(SaRebalanceConfig *cfg);
/* "auto" -> true, "off" -> false; anything else is an error naming the value. */
bool sa_rebalance_enabled_from_string(const char *text, bool *out, GError **error);

/* What the rebalance remembers between calls: per partition the smoothed owners' demand and
 * since when it is over or under, and the moves of the last hour. Bounded by the partitions. */
typedef struct _SaRebalanceState SaRebalanceState;

SaRebalanceState *sa_rebalance_state_new(void);
void sa_rebalance_state_free(SaRebalanceState *st);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaRebalanceState, sa_rebalance_state_free)

typedef struct {
    guint vm;         /* index in vms */
    guint from;       /* partition id of the current home */
    guint to;         /* partition id of the new home (the caller writes it as assigned) */
    char reason[256]; /* one line for the log */
} SaRebalanceMove;

/* Feeds one sample (usage from the last tick, indexed like topo->partitions; the VMs' homes and
 * st.demand) and, when an imbalance has lasted the window, returns true with one move in out.
 * The move counts as done: the caller applies it (assigned = to) before the next tick. */
bool sa_rebalance_step(const SaRebalanceConfig *cfg, SaRebalanceState *st, const SaTopology *topo,
                       const SaPartitionUsage *usage, SaPolicyVm *const *vms, guint n_vms,
                       gint64 now_ms, SaRebalanceMove *out);

G_END_DECLS
