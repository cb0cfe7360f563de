/* softaffd — the core's own structures, shared by the files of daemon/ only.
 *
 * Who writes what:
 *   registry.c  SaVm identity, facts, judgement (status, allowed sets), the VM table
 *   sample.c    SaVmSampling, SaCore host sampling fields
 *   sense-times.c  the sensor's per-thread totals of a tick (a store of its own, sense-times.h)
 *   tick.c      SaPolicyVm input, decisions, SaVmStats, SaCore usage/ticks
 *   actuator.c  SaVmActuation, the lanes (workers, deadlines, stalls, shutdown)
 *   mover.c     its own state, behind its lock (the main loop asks it for copies)
 *   core.c      event sensing (the BPF sensor, its watch, the extra ticks)
 *   scheduler.c actuation by the sched_ext scheduler (SaVmSched, the core's sched fields)
 * The control server and the metrics only read. */
#pragma once

#include <json-c/json.h>

#include "core.h"
#include "partition-load.h"
#include "sa-headroom.h"
#include "sa-numa.h"
#include "sa-policy.h"
#include "sa-sampler.h"
#include "sa-sense.h"
#include "scheduler.h"
#include "sense-times.h"

G_BEGIN_DECLS

typedef struct SaIdleCheck SaIdleCheck; /* sample.c */

typedef enum {
    SA_VM_MANAGED,
    SA_VM_UNMANAGED, /* mode off, manage=explicit without settings, pinned by the user, ... */
    SA_VM_INVALID,   /* its softaff settings are invalid: it runs unmanaged, the problem is shown */
} SaVmStatus;

const char *sa_vm_status_to_string(SaVmStatus status);

/* One decision the policy made for a VM, kept for `softaffctl show`. */
typedef struct {
    gint64 wall_us; /* g_get_real_time() */
    SaVmState state;
    int home;
    char *vcpus; /* cpulist given to the vCPUs */
    char *reason;
} SaDecision;

#define SA_VM_MAX_DECISIONS 32

/* The VM's vCPU threads and their last readings (sample.c). */
typedef struct {
    GPtrArray *threads; /* SaThreadSampler* by vCPU index (NULL where unknown) */
    GArray *prev;       /* SaThreadSample by vCPU index */
    GArray *deltas;     /* SaVcpuSample by vCPU index */
    bool have_prev;
    bool stale;           /* find the threads again before the next sample */
    bool lost_reported;   /* threads_lost was sent for reported thread ids */
    bool stopped;         /* its QEMU process is stopped (SIGSTOP, a debugger) */
    gint64 stopped_since; /* g_get_real_time() */
    guint64 sense_gen;    /* its threads are tracked by the sensor of this generation, 0 none */
    bool via_sense;       /* prev came from the sensor's map, not /proc */
} SaVmSampling;

/* Counters and times while managed; never reset while the daemon runs (tick.c). */
typedef struct {
    guint64 bursts;   /* partitions added (bursts and widenings) */
    guint64 retreats; /* owner-forced retreats */
    guint64 changes;  /* affinity changes decided */
    double seconds_home;
    double seconds_burst;
    guint64 run_ns_total;   /* vCPU run time seen ... */
    guint64 run_ns_home;    /* ... and the part on CPUs of its home partition */
    guint64 delay_ns_total; /* vCPU run delay seen */
    double run_delay_now;   /* run delay in the last interval, in CPUs */
} SaVmStats;

typedef struct SaLane SaLane;
typedef struct SaMover SaMover;

/* The VM in the sched_ext scheduler (scheduler.c); unused while re-pinning. */
typedef struct {
    guint id;             /* its id in the scheduler (its counters carry it), 0 none yet */
    GHashTable *tids;     /* thread id -> nothing: its vCPU threads in the scheduler */
    GHashTable *refused;  /* thread ids the scheduler refused (real-time): not tried again */
    GHashTable *released; /* thread ids checked for a SCHED_EXT left by an earlier run */
    int home;             /* the partition index the threads were given, -1 none */
    guint softness;       /* ... and the softness and strictness */
    bool strict;
    bool checked_own; /* its threads' affinity was checked against their own sets */
    /* Its threads' counters (since each was added), from the last read of the scheduler. */
    guint64 run_ns_home, run_ns_away, wait_ns, visits, preempts, preempted;
    bool away; /* some vCPU ran away from home since the read before */
    /* Lifetime sums for the metrics, never reset while softaffd runs: what each read added
     * over the one before, per thread (seen: tid -> its SaSchedCounters at the last read). */
    GHashTable *seen;
    guint64 total_run_ns[SA_SCHED_PARTS]; /* by partition index */
    guint64 total_wait_ns, total_visits, total_preempts, total_preempted;
} SaVmSched;

/* What the VM was told and what is on its way (actuator.c, tick.c). */
typedef struct {
    bool touched;          /* softaff changed this VM's pinning: restore it */
    guint64 decided;       /* sequence of the newest decision to apply */
    guint64 applied;       /* sequence of the newest decision applied */
    guint64 outstanding;   /* sequence of the newest pin queued or running, 0 none */
    int written_assigned;  /* assigned= we wrote (or found), -1 none */
    bool assigned_pending; /* a write_assigned is queued or running */
    char *last_error;      /* last transient error, to log each distinct one once */
    gint64 last_error_logged_us;
    gint64 last_error_wall_us; /* g_get_real_time() of the last failure (status) */
    gint64 retry_at_us;        /* no pin before this (g_get_monotonic_time()): back-off */
    guint retry_delay_ms;      /* the next back-off; 0 after a success */
} SaVmActuation;

typedef struct {
    char *key;
    char *name;
    const SaBackendOps *ops;
    SaLane *lane; /* its worker queue; outlives the VM while a command runs */
    SaVmFacts *facts;

    /* The judgement on the facts (registry.c). */
    SaVmStatus status;
    char *status_reason;
    SaMetadata settings;         /* effective: the VM's own, else its rule's, else defaults */
    char *rule;                  /* the [rule NAME] that applies (the VM has no settings of its
                                    own and the rule matches it), else NULL; kept while a rule
                                    leaves it unmanaged (mode=off, pinned by the user) */
    SaCpuSet *allowed;           /* the union of its vCPUs' own sets (the policy's input) */
    GPtrArray *vcpu_allowed;     /* SaCpuSet* per vCPU: its own set (what restore gives back),
                                    pointing into own_sets */
    GPtrArray *own_sets;         /* the distinct sets of vcpu_allowed, owned */
    SaCpuSet *emulator_allowed;  /* the emulator's own set */
    GPtrArray *iothread_allowed; /* SaCpuSet* per I/O thread of the facts; NULL: none */
    gint64 managed_since_us;

    SaVmSampling sampling;
    SaPolicyVm pvm;
    SaVmActuation act;
    SaVmStats stats;
    SaVmSched sched;
    int memory_node;    /* the home node last told to the mover, -1 none (tick.c) */
    bool memory_follow; /* ... and whether its memory follows it */
    bool memory_away;   /* ... and whether the VM was bursting (away from home) */
    GQueue *decisions;  /* SaDecision*, newest last, at most SA_VM_MAX_DECISIONS */
} SaVm;

struct SaCore {
    SaConfig *cfg;
    SaRebalanceState *rebalance; /* homes rebalance (tick.c); restarted on reload */
    SaTopology *topo;
    bool dry_run;
    bool stopping;

    /* host sampling (sample.c) */
    SaStatSampler *stat;
    GArray *loads; /* SaCpuLoad */
    double *cpu_busy;
    guint n_cpu_busy;
    gint64 last_sample_us;
    /* the sensor's per-CPU idle totals at the last sample (sample.c): with the sensor loaded,
     * utilization comes from them (ns resolution; /proc/stat has 10 ms, too coarse for an extra
     * tick 20 ms after the last), else from /proc/stat */
    guint64 *idle_prev;
    bool *idle_known;
    guint n_idle;
    guint64 idle_prev_ns;
    guint64 idle_gen;           /* sense_gen of the sensor those came from, 0 none */
    guint64 *visitor_prev;      /* the sensor's per-CPU visitor run totals at the last sample */
    double *cpu_visitors;       /* per CPU (n_cpu_busy): the visitors' share of the interval
                                   there, NULL when not measured this sample */
    SaIdleCheck *idle_check;    /* the sensor's idle time against /proc/stat's (sample.c) */
    char *utilization_fallback; /* why utilization comes from /proc/stat although the sensor
                                   is loaded (it disagreed), NULL while the sensor's is used */

    GHashTable *vms;         /* key -> SaVm* */
    GPtrArray *sorted;       /* the VMs by name then key, NULL until asked again */
    SaPartitionUsage *usage; /* per partition index, from the last tick */
    SaPartitionLoad *load;   /* per partition index, averaged and totalled (status, metrics) */
    double *unmanaged_avg;   /* per partition index: load's unmanaged before the tick, -1 none */
    GPtrArray *tick_vms;     /* scratch of the tick: the managed SaVm* ... */
    GPtrArray *tick_pvms;    /* ... and their SaPolicyVm*, in the same order */
    guint64 ticks;
    gint64 started_us;
    double last_tick_cpu_ms;
    bool metrics_failing;

    /* the headroom model (fleet.c) */
    SaHeadroom *headroom;
    gint64 headroom_saved_us; /* g_get_monotonic_time() of the last save (or the start) */
    bool headroom_save_failing;

    /* actuation (actuator.c) */
    GHashTable *lanes; /* key -> SaLane* (one reference) */
    GThreadPool *pool;
    guint running;       /* commands on workers (or waiting for one) */
    guint stalled_lanes; /* lanes whose running command passed its deadline */
    guint watchdog;      /* source checking the deadlines while commands run */
    guint queued;        /* commands waiting in lanes */
    guint restores_left;
    guint stop_timer;
    SaCoreStoppedFunc stopped;
    gpointer stopped_data;

    /* guest memory following the homes (mover.c; its own thread) */
    SaMover *mover;

    /* event sensing (core.c): NULL sense = /proc on the tick alone */
    bool sensing_started; /* sa_core_start_sensing was called (reloads follow the mode) */
    SaSense *sense;
    bool sense_yielded; /* mode=auto left the sensor out: the sched_ext scheduler runs */
    /* its tracked threads' totals, read at once the first time a tick needs them (sample.c,
       kept in sense-times.c) */
    SaSenseTimes *sense_times;
    guint64 sense_gen;      /* bumped per sensor loaded: which one tracks a VM's threads */
    char *sensing_reason;   /* why this mode, for the log and the status */
    guint sense_source;     /* the watch on sa_sense_fd */
    guint event_tick_timer; /* an extra tick deferred by the rate limit */
    guint64 event_ticks;    /* extra ticks the events ran */
    guint64 sense_events;   /* events read */
    guint64 owners_reads;   /* reads of events that held an owners' sign */
    gint64 event_gap_us;    /* least time from a tick to an event tick (SA_EVENT_TICK_MIN_US..) */
    GHashTable *owner_tids; /* vCPU thread ids of the VMs homed where visitors may run: their
                               waits tick at the shortest gap (a tenant, not host noise) */
    gint64 owners_event_us; /* when the owners' last sign reset the gap (at most one a tick) */
    bool event_followup;    /* that sign's tick is followed by one more at the shortest gap */

    /* actuation by the sched_ext scheduler (scheduler.c): sched NULL = re-pinning */
    const SaSchedOps *sched_ops;
    gpointer sched_data;
    gpointer sched;
    bool actuation_started;    /* sa_core_start_actuation was called (reloads follow the mode) */
    char *actuation_reason;    /* why this mode, for the log and the status */
    guint64 sched_ejections;   /* times the kernel ejected the scheduler */
    char *sched_exit;          /* the last ejection: the kernel's kind, reason and message */
    gint64 sched_exit_wall_us; /* ... and when it was noticed (g_get_real_time()) */
    guint sched_next_vm;       /* the next VM id for the scheduler */
    guint sched_threads;       /* threads in the scheduler now */
    GArray *sched_read;        /* scratch: SaSchedCounters of the tick's read */
};

/* At most one event-driven tick per this long after any tick. */
#define SA_EVENT_TICK_MIN_US (20 * 1000)
/* Event ticks that change nothing (waits the policy does not act on: host noise, owners that
 * still fit) double the gap before the next one, up to this; one that acts resets it. */
#define SA_EVENT_TICK_MAX_GAP_US (320 * 1000)

/* ---- sample.c: the sensor's idle time checked against /proc/stat ----
 * The sensor's per-CPU idle time is only worth using where it says what /proc/stat says, over
 * a span long enough for /proc/stat's 10-ms ticks: each sample adds both per CPU; once
 * SA_IDLE_CHECK_SPAN_NS have gathered (SA_IDLE_CHECK_MIN_SAMPLES samples at least), a CPU
 * whose two idle times differ by more than SA_IDLE_CHECK_TOLERANCE of the span fails the check.
 * A small bias that each span passes is judged over the last SA_IDLE_CHECK_LONG_SPANS spans
 * that passed, at SA_IDLE_CHECK_LONG_TOLERANCE (on 6.1 in the 2-node TCG test host the sensor
 * read a busy CPU 3-5 points idler than /proc/stat in every span, and the utilization a visited
 * partition showed over 30 s was 5.2 points off). Then softaffd says so once and takes
 * utilization from /proc/stat for good (events still come from the sensor). A span that passes
 * starts the next one. */
#define SA_IDLE_CHECK_SPAN_NS (G_GUINT64_CONSTANT(2000000000))
#define SA_IDLE_CHECK_MIN_SAMPLES 3
#define SA_IDLE_CHECK_TOLERANCE 0.10
#define SA_IDLE_CHECK_LONG_SPANS 5
#define SA_IDLE_CHECK_LONG_TOLERANCE 0.04

SaIdleCheck *sa_idle_check_new(void);
void sa_idle_check_free(SaIdleCheck *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaIdleCheck, sa_idle_check_free)
/* Starts over (a new sensor, a CPU count that changed). */
void sa_idle_check_reset(SaIdleCheck *c);
/* One sample of n CPUs over interval_ns: per CPU, /proc/stat's idle fraction (idle + iowait)
 * and the sensor's idle ns, where known[cpu] (the sensor saw that CPU both times). Returns
 * false when a span ends failing; then *cpu, *proc_idle and *sense_idle (fractions of the
 * span) name the worst CPU. */
bool sa_idle_check_add(SaIdleCheck *c, guint n, const double *proc_idle, const guint64 *sense_ns,
                       const bool *known, guint64 interval_ns, guint *cpu, double *proc_frac,
                       double *sense_frac);
/* Spans checked so far (all passed: the first failure ends the checking). */
guint sa_idle_check_spans(const SaIdleCheck *c);
/* The seconds the last failed verdict judged (one span, or the ring's). */
double sa_idle_check_verdict_seconds(const SaIdleCheck *c);

/* ---- core.c: event sensing ---- */
/* Loads the sensor as [sensing] mode says and watches its events (softaffd's start; tests and
 * benchmarks that never call it sense on the tick alone). Logs the mode and why once. False
 * only for mode=bpf when the program cannot load, naming why. */
bool sa_core_start_sensing(SaCore *core, GError **error);
/* Unloads the sensor and its watch (shutdown, free). */
void sa_core_stop_sensing(SaCore *core);
/* After the actuation changed (the scheduler started, stopped or was ejected): mode=auto loads
 * the sensor while re-pinning and leaves it out while the sched_ext scheduler runs. */
void sa_core_refit_sensing(SaCore *core);
/* "bpf" or "proc", and why. */
const char *sa_core_sensing_mode(const SaCore *core);
/* Where per-CPU utilization comes from: "bpf" (the sensor's idle time) or "proc" (/proc/stat:
 * no sensor, or its idle time failed the check against /proc/stat). */
const char *sa_core_utilization_source(const SaCore *core);
/* After a tick: watch the CPUs of every partition some managed VM of another home is allowed
 * onto, ignoring those visitors' vCPU threads. */
void sa_core_sense_update(SaCore *core);
/* What that update gives the sensor: the CPUs to watch into watch, the threads it ignores
 * (SaSenseIgnore) appended to ignore. */
void sa_core_sense_plan(const SaCore *core, SaCpuSet *watch, GArray *ignore);

/* ---- scheduler.c: actuation by the sched_ext scheduler ---- */
void sa_vm_sched_init(SaVmSched *s);
void sa_vm_sched_clear(SaVmSched *s);
/* Whether the scheduler places the vCPUs now (else re-pinning). */
bool sa_core_sched_active(const SaCore *core);
/* At the tick's start: an ejection by the kernel is logged with its reason and re-pinning takes
 * over (every managed VM is pinned again); else every thread's counters in one read. */
void sa_core_sched_tick(SaCore *core);
/* The VM's vCPU threads (as the sampling knows them) into the scheduler with its home, softness
 * and strictness; threads that left it out. Its first time in, threads a pin narrowed (an
 * earlier run, re-pinning before) get their own sets back. */
void sa_core_sched_apply(SaCore *core, SaVm *vm);
/* Re-pinning: each vCPU thread of the VM seen for the first time is checked once for a
 * SCHED_EXT an earlier softaffd left (it was killed) and set back to SCHED_OTHER. */
void sa_core_sched_release(SaCore *core, SaVm *vm);
/* The VM leaves the scheduler: its live threads back to the fair class (not managed any more,
 * stopped). */
void sa_core_sched_forget(SaCore *core, SaVm *vm);
/* A reload: a mode that changed starts or stops the scheduler; new partitions go to it. */
void sa_core_reload_actuation(SaCore *core, SaActuationMode old_mode);

/* ---- registry.c ---- */
SaVm *sa_core_lookup(const SaCore *core, const char *key);
/* Every VM, ordered by name then key (the policy, status and metrics use this order). */
GPtrArray *sa_core_sorted_vms(const SaCore *core);
/* Finds a VM by key, else by name. */
SaVm *sa_core_find(const SaCore *core, const char *key_or_name);
/* Sets status with a reason; logs a change. Leaving MANAGED restores the VM. */
void sa_vm_set_status(SaCore *core, SaVm *vm, SaVmStatus status, const char *reason);
/* Forgets the VM at once (no restore); its lane finishes what runs. */
void sa_core_remove(SaCore *core, SaVm *vm);
/* Starts the policy over for this VM (a reload, managed again). */
void sa_vm_reset_policy(SaVm *vm);
/* Whether a stalled VM is skipped: a command missed its deadline or QEMU is stopped. */
bool sa_vm_is_stalled(const SaVm *vm);

/* ---- sample.c ---- */
void sa_core_sample_host(SaCore *core);
/* Reads the VM's vCPU threads into vm->sampling.deltas; false when there is no interval yet. */
bool sa_core_sample_vm(SaCore *core, SaVm *vm);
void sa_vm_sampling_init(SaVmSampling *s);
void sa_vm_sampling_clear(SaVmSampling *s);

/* ---- actuator.c ---- */
void sa_actuator_init(SaCore *core);
void sa_actuator_clear(SaCore *core);
/* Queues commands; each returns at once. A pin under the sched_ext scheduler leaves every
 * vCPU thread its own set and narrows only the emulator and I/O threads (home). */
void sa_actuator_pin(SaCore *core, SaVm *vm);
void sa_actuator_restore(SaCore *core, SaVm *vm);
void sa_actuator_write_assigned(SaCore *core, SaVm *vm, int home);
void sa_actuator_discover(SaCore *core, const SaBackendOps *ops, gpointer handle, const char *key,
                          const char *name);
/* The VM's lane, created when missing. */
SaLane *sa_actuator_lane(SaCore *core, const char *key, const char *name);
void sa_actuator_detach(SaCore *core, SaVm *vm);
/* When a vCPU thread the sampling knows has an affinity narrower than its own set (a pin of an
 * earlier run, or of re-pinning before the scheduler took over), queues a restore: the
 * scheduler wants each thread's own set. Needs the host's affinity calls (not with a fake
 * /proc). */
void sa_actuator_restore_if_narrowed(SaCore *core, SaVm *vm);
/* A VM the core does not know yet stopped: drop what is queued for it, and the result of a
 * discovery still running. */
void sa_actuator_forget_key(SaCore *core, const char *key);
/* Replaces the lane's handle (a backend reported another one). */
void sa_lane_set_handle(SaLane *lane, const SaBackendOps *ops, gpointer handle);
/* The backend's handle for this VM (for main-thread callbacks such as threads_lost). */
gpointer sa_lane_handle(const SaLane *lane);
/* A command of this lane missed its deadline and has not answered yet. */
bool sa_lane_is_stalled(const SaLane *lane);
/* What the stalled command is ("pin", ...) and since when (g_get_real_time()). */
const char *sa_lane_stalled_command(const SaLane *lane, gint64 *since_wall_us);

/* ---- mover.c: guest memory follows the home node ----
 * One mover thread for the daemon, apart from the actuator's lanes: a move can take minutes
 * and must never hold a VM's pin commands. Each VM has at most one job (toward its current
 * home node); a new home cancels it between two chunks and starts one toward the new home.
 * A chunk is one query and one move_pages(2) call on at most SA_MOVER_CHUNK_BYTES of address
 * space; chunks are paced to [memory] rate_mib_s for all VMs together. Nothing binds the VM's
 * memory: a full node leaves the rest where it is (said once in the log). */

#define SA_MOVER_CHUNK_BYTES (G_GUINT64_CONSTANT(2) << 20)
/* numa_maps walks the page tables: each VM's placement is read this often, and after a move. */
#define SA_MOVER_MEASURE_US (30 * G_USEC_PER_SEC)
#define SA_MOVER_REHOME_RATIO 0.9

/* The host calls of the mover (sa_mover_host_ops: host/numa.c); tests give fakes. */
typedef struct {
    SaProcMemory *(*read_memory)(gpointer data, pid_t pid, GError **error);
    bool (*query_pages)(gpointer data, pid_t pid, gulong count, void **pages, int *status,
                        GError **error);
    bool (*move_pages)(gpointer data, pid_t pid, gulong count, void **pages, int node, int *status,
                       GError **error);
    /* migrate_pages(2): every page of the process on other nodes to node, in one call; the
     * pages not moved, or -1 with *error. Used only where move_pages cannot see the pages. */
    long (*migrate_all)(gpointer data, pid_t pid, int node, GError **error);
} SaMoverOps;

/* The real host. Refuses to move while SOFTAFF_PROC_ROOT points at a fake /proc: its pids are
 * no processes of this host. */
extern const SaMoverOps sa_mover_host_ops;

/* One VM's memory as the mover knows it (a copy for status, show and the metrics). */
typedef struct {
    int node;                  /* its home node, -1: none */
    bool follow;               /* its memory may move there */
    bool moving;               /* a job is under way */
    guint64 move_done_bytes;   /* this move: moved so far ... */
    guint64 move_total_bytes;  /* ... of what was elsewhere when it started */
    double move_rate;          /* this move: bytes per second since it started */
    gint64 measured_wall_us;   /* g_get_real_time() of the last reading; 0: none yet */
    guint64 resident_bytes;    /* the last reading: resident guest memory ... */
    guint64 home_bytes;        /* ... and the part on node */
    guint64 moved_bytes_total; /* moved by softaff, lifetime */
    guint64 moves;             /* moves finished (full node included) */
    guint64 cancels;           /* moves cancelled by a new home */
    bool node_full;            /* the last move stopped: node had no room */
} SaMemoryStatus;

/* Pacing: bytes moved since start_us. */
typedef struct {
    gint64 start_us; /* 0: not started */
    guint64 bytes;
} SaPacer;

/* Adds bytes moved at now_us; returns how long to wait (us) before the next chunk so that the
 * bytes since the start stay within rate_mib_s. Idle time earns no credit: after a pause the
 * count starts again at now_us, so no window of the move ever exceeds the rate by more than
 * the chunk just moved. */
gint64 sa_pacer_wait(SaPacer *p, guint64 bytes, gint64 now_us, guint rate_mib_s);

/* threaded: its own thread runs the jobs; else the caller drives sa_mover_step (tests). */
SaMover *sa_mover_new(const SaMoverOps *ops, gpointer data, guint rate_mib_s, bool threaded);
/* Stops the thread between two chunks and frees everything. */
void sa_mover_free(SaMover *m);
void sa_mover_set_rate(SaMover *m, guint rate_mib_s);
/* Main thread: the VM's home node (-1: none) and whether its memory may move there. A new node
 * (or follow) cancels a job under way and, when follow, starts one toward node. */
void sa_mover_set_home(SaMover *m, const char *key, const char *name, pid_t pid, int node,
                       bool follow);
void sa_mover_forget(SaMover *m, const char *key);
/* Main thread: whether the VM is bursting. While it is not, a reading that finds less than
 * SA_MOVER_REHOME_RATIO of its memory at home (pages a burst first touched on another node,
 * pages the kernel put elsewhere) starts a move of the rest home; while it is, nothing moves. */
void sa_mover_set_away(SaMover *m, const char *key, bool away);
/* A copy of what the mover knows of the VM; false when it knows nothing. */
bool sa_mover_status(SaMover *m, const char *key, SaMemoryStatus *out);
/* One unit of work due at now_us (a reading, a job's plan, a chunk); false when none was due.
 * *wait_us: until the next one is due, -1 when none is planned. */
bool sa_mover_step(SaMover *m, gint64 now_us, gint64 *wait_us);

/* ---- fleet.c: the headroom model ([fleet], policies/sa-headroom.h) ---- */
/* Wall-clock ms, the model's time. */
gint64 sa_core_fleet_now_ms(void);
void sa_core_fleet_init(SaCore *core);
void sa_core_fleet_clear(SaCore *core);
/* After the policy's tick: the owners' demand per partition, each managed VM's by class. */
void sa_core_fleet_feed(SaCore *core, guint64 interval_ns);
/* A reload: the histograms stay, unless window_s changed (their slots would mean other times). */
void sa_core_fleet_reload(SaCore *core, guint old_window_s);
/* Per partition index: capacity, home vCPUs, memory available now (reads node meminfo). */
SaHeadroomInput *sa_core_fleet_inputs(const SaCore *core);
/* Per partition index: the headroom at [fleet] quantile. */
SaHeadroomPartition *sa_core_fleet_partitions(const SaCore *core, gint64 now_ms);
/* The status's "headroom" object. */
json_object *sa_core_fleet_json(const SaCore *core);
/* The control socket's reply to "headroom": the inputs and the model, one line. */
char *sa_core_headroom_reply(const SaCore *core);
/* [fleet] state_file: writes it atomically (nothing when not set); errors name the path. */
bool sa_core_fleet_save(SaCore *core, GError **error);
/* From the tick: saves when save_interval_s passed since the last save (not in dry-run). */
void sa_core_fleet_maybe_save(SaCore *core);
/* Reads state_file into the model; SA_ERROR_NOT_FOUND when there is none; other errors (a
 * corrupt file) name the path and leave the model as it was. */
bool sa_core_fleet_load(SaCore *core, GError **error);
/* softaffd's start: sa_core_fleet_load, its outcome logged (a corrupt file is a warning). */
void sa_core_fleet_start(SaCore *core);

/* ---- tick.c ---- */
void sa_decision_free(gpointer decision);

/* ---- status.c (the control socket's replies) ---- */
char *sa_core_status_json(SaCore *core);
char *sa_core_show_json(SaCore *core, const char *domain, GError **error);
/* {"ok":false,"error":message}, one line. */
char *sa_core_error_json(const char *message);

G_END_DECLS
