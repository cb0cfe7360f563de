/* softaffd — actuation that never blocks the tick.
 *
 * Every command to a backend (pin, restore, write assigned=, discover) runs on a worker thread.
 * Each VM key has a lane: its commands run one at a time, in order, so a restore can never
 * overtake a pin. A waiting pin or write is replaced by a newer one (only the latest decision
 * matters). A command that misses its deadline ([daemon] command_timeout_ms) is left to finish:
 * the lane is stalled, the VM is shown so and gets no new command until it answers; other lanes
 * go on. Results come back to the main loop, where the core's state is changed.
 *
 * A retreat does not wait for its lane: a pin that only narrows a vCPU thread's set (the new set
 * within what the thread has now) is applied at once on the main loop with sched_setaffinity
 * (microseconds; narrowing within the thread's cpuset cgroup always succeeds), then the
 * backend's pin is queued as always, so its view (libvirt's cgroups and live pinning) becomes
 * true right after. A widening never takes this path: the backend must widen the cgroup first.
 * Nor does anything before the backend's first pin of the process (since the last restore):
 * that pin records the VM's own settings, which a backend may read from the threads. */
#define G_LOG_DOMAIN "softaffd"

#include "actuator.h"
#include "core-private.h"
#include "judge.h"
#include "sa-error.h"
#include "sa-proctask.h"

/* A transient error is logged when it differs from the last one, else at most this often. */
#define ERROR_REPEAT_US (60 * G_USEC_PER_SEC)

typedef enum {
    JOB_PIN,
    JOB_RESTORE,
    JOB_WRITE_ASSIGNED,
    JOB_DISCOVER,
} JobKind;

static const char *const job_names[] = {
    [JOB_PIN] = "pin",
    [JOB_RESTORE] = "restore",
    [JOB_WRITE_ASSIGNED] = "write-assigned",
    [JOB_DISCOVER] = "discover",
};

typedef struct {
    JobKind kind;
    SaLane *lane; /* a reference */
    const SaBackendOps *ops;
    gpointer handle; /* a reference */
    guint64 generation;
    guint64 seq; /* pin: the decision it applies */
    int home;    /* write-assigned */
    bool for_shutdown;
    /* the command and what it points to */
    SaCommand cmd;
    char *key, *name;
    GArray *tids;
    GPtrArray *vcpus; /* SaCpuSet* per vCPU, pointing into sets */
    GPtrArray *sets;  /* the distinct sets of vcpus, owned (a set is 1 KiB) */
    SaCpuSet *others;
    GPtrArray *iothreads; /* SaCpuSet* per I/O thread, pointing into sets */
    GArray *iothread_ids;
    SaMetadata settings;
    char *allowed_text; /* restore: the vCPUs' own set, for the log */
    /* the result */
    bool ok;
    GError *error;
    SaVmFacts *facts;
    /* Set by the worker when it picks the job up (the deadline counts from there, not from
     * the queue): started_us and started_wall_us first, then the flag. */
    gint started;
    gint64 started_us;      /* g_get_monotonic_time() */
    gint64 started_wall_us; /* g_get_real_time() */
} Job;

struct SaLane {
    int ref;      /* main thread only */
    SaCore *core; /* NULL once the core is freed */
    char *key;
    char *name;
    const SaBackendOps *ops;
    gpointer handle;
    GQueue *queue; /* Job* waiting */
    Job *running;
    bool stalled;
    gint64 stalled_since; /* g_get_real_time() when the running command started */
    guint64 generation;   /* bumped when its VM is forgotten: older results are stale */
    bool attached;        /* a VM uses it */
    pid_t pinned_pid;     /* the process the backend pinned since the last restore, 0 none */
    guint64 start_time;   /* ... and its start time: the same process, not a reused pid */
};

/* The actuator's own state beyond SaCore's fields; it hangs off its pool (the pool's
 * user_data), which only the actuator uses. */
typedef struct {
    const SaAffinityOps *affinity; /* NULL: no fast narrowing */
    gpointer affinity_data;
    SaFastStats fast;
} ActState;

static ActState *act_state(const SaCore *core)
{
    return core->pool->user_data;
}

/* ---- lanes ---- */

static SaLane *lane_ref(SaLane *lane)
{
    lane->ref++;
    return lane;
}

static void lane_unref(SaLane *lane)
{
    if (--lane->ref > 0)
        return;
    /* Waiting jobs hold references: the queue is empty here. */
    g_queue_free(lane->queue);
    if (lane->handle)
        lane->ops->handle_unref(lane->handle);
    g_free(lane->key);
    g_free(lane->name);
    g_free(lane);
}

static SaLane *lane_get(SaCore *core, const char *key, const char *name)
{
    SaLane *lane = g_hash_table_lookup(core->lanes, key);
    if (lane)
        return lane;
    lane = g_new0(SaLane, 1);
    lane->ref = 1;
    lane->core = core;
    lane->key = g_strdup(key);
    lane->name = g_strdup(name);
    lane->queue = g_queue_new();
    g_hash_table_insert(core->lanes, lane->key, lane);
    return lane;
}

/* Drops the lane from the table once nothing uses it. */
static void lane_maybe_drop(SaLane *lane)
{
    if (!lane->core || lane->attached || lane->running || !g_queue_is_empty(lane->queue))
        return;
    g_hash_table_remove(lane->core->lanes, lane->key); /* unrefs */
}

SaLane *sa_actuator_lane(SaCore *core, const char *key, const char *name)
{
    SaLane *lane = lane_get(core, key, name);
    lane->attached = true;
    g_free(lane->name);
    lane->name = g_strdup(name);
    return lane;
}

void sa_lane_set_handle(SaLane *lane, const SaBackendOps *ops, gpointer handle)
{
    if (lane->handle == handle && lane->ops == ops)
        return;
    if (lane->handle)
        lane->ops->handle_unref(lane->handle);
    lane->ops = ops;
    lane->handle = handle ? ops->handle_ref(handle) : NULL;
}

gpointer sa_lane_handle(const SaLane *lane)
{
    return lane->handle;
}

bool sa_lane_is_stalled(const SaLane *lane)
{
    return lane && lane->stalled;
}

const char *sa_lane_stalled_command(const SaLane *lane, gint64 *since_wall_us)
{
    if (!lane || !lane->stalled || !lane->running)
        return NULL;
    if (since_wall_us)
        *since_wall_us = lane->stalled_since;
    return job_names[lane->running->kind];
}

/* ---- jobs ---- */

static void job_free(Job *job)
{
    if (job->handle)
        job->ops->handle_unref(job->handle);
    if (job->lane)
        lane_unref(job->lane);
    g_free(job->key);
    g_free(job->name);
    if (job->tids)
        g_array_unref(job->tids);
    if (job->vcpus)
        g_ptr_array_unref(job->vcpus);
    if (job->iothreads)
        g_ptr_array_unref(job->iothreads);
    if (job->iothread_ids)
        g_array_unref(job->iothread_ids);
    if (job->sets)
        g_ptr_array_unref(job->sets);
    sa_cpuset_free(job->others);
    g_free(job->allowed_text);
    g_clear_error(&job->error);
    sa_vm_facts_free(job->facts);
    g_free(job);
}

static Job *job_new(SaLane *lane, JobKind kind, const SaBackendOps *ops, gpointer handle)
{
    Job *job = g_new0(Job, 1);
    job->kind = kind;
    job->lane = lane_ref(lane);
    job->ops = ops;
    job->handle = handle ? ops->handle_ref(handle) : NULL;
    job->generation = lane->generation;
    job->key = g_strdup(lane->key);
    job->name = g_strdup(lane->name);
    job->cmd.key = job->key;
    job->cmd.name = job->name;
    sa_metadata_init(&job->settings);
    return job;
}

/* The job's copy of set: one copy per distinct set (a set is 1 KiB; most vCPUs share one). */
static SaCpuSet *job_keep(Job *job, SaCpuSet *set)
{
    for (guint i = 0; i < job->sets->len; i++) {
        SaCpuSet *kept = g_ptr_array_index(job->sets, i);
        if (sa_cpuset_equal(kept, set)) {
            sa_cpuset_free(set);
            return kept;
        }
    }
    g_ptr_array_add(job->sets, set);
    return set;
}

/* The thread sets of a command: each thread gets policy (the vCPUs' or the others' set) within
 * its own set, or, with policy NULL (restore), exactly its own set. */
static void job_set_threads(Job *job, const SaVm *vm, const SaCpuSet *vcpu_policy,
                            const SaCpuSet *other_policy)
{
    guint n = vm->facts->n_vcpus;
    job->vcpus = g_ptr_array_sized_new(n);
    job->sets = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    for (guint i = 0; i < n; i++) {
        const SaCpuSet *own =
            i < vm->vcpu_allowed->len ? g_ptr_array_index(vm->vcpu_allowed, i) : vm->allowed;
        g_ptr_array_add(job->vcpus, job_keep(job, sa_narrow(vcpu_policy, own)));
    }
    job->others = sa_narrow(other_policy, vm->emulator_allowed);
    guint n_io = vm->iothread_allowed ? vm->iothread_allowed->len : 0;
    job->iothreads = g_ptr_array_sized_new(n_io);
    for (guint i = 0; i < n_io; i++)
        g_ptr_array_add(
            job->iothreads,
            job_keep(job, sa_narrow(other_policy, g_ptr_array_index(vm->iothread_allowed, i))));
    if (n_io > 0)
        job->iothread_ids = g_array_ref(vm->facts->iothread_ids);
    if (vm->facts->vcpu_tids)
        job->tids = g_array_ref(vm->facts->vcpu_tids);
    job->cmd.pid = vm->facts->pid;
    job->cmd.n_vcpus = n;
    job->cmd.vcpu_tids = job->tids;
    job->cmd.vcpus = (SaCpuSet *const *)job->vcpus->pdata;
    job->cmd.others = job->others;
    job->cmd.n_iothreads = n_io;
    job->cmd.iothread_ids = n_io > 0 ? &g_array_index(job->iothread_ids, guint, 0) : NULL;
    job->cmd.iothreads = (SaCpuSet *const *)job->iothreads->pdata;
}

/* Worker thread. */
static void job_run(gpointer data, gpointer user_data);

/* Workers: a few, plus one for each stalled lane, whose command holds its worker until it
 * returns; the healthy VMs always have WORKERS threads. */
#define WORKERS 8

static void set_pool_size(SaCore *core)
{
    g_thread_pool_set_max_threads(core->pool, (gint)(WORKERS + core->stalled_lanes), NULL);
}

static void lane_deadline_missed(SaCore *core, SaLane *lane)
{
    Job *job = lane->running;
    lane->stalled = true;
    lane->stalled_since = job->started_wall_us;
    core->stalled_lanes++;
    set_pool_size(core);
    g_warning("%s: %s command unanswered after %u ms: stalled; it gets no command until it "
              "answers, every other VM goes on",
              lane->name, job_names[job->kind], core->cfg->command_timeout_ms);
}

/* Marks the lanes whose running command passed its deadline. */
static gboolean watchdog_cb(gpointer data)
{
    SaCore *core = data;
    gint64 now = g_get_monotonic_time();
    gint64 limit = (gint64)core->cfg->command_timeout_ms * 1000;
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, core->lanes);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        SaLane *lane = value;
        Job *job = lane->running;
        if (job && !lane->stalled && g_atomic_int_get(&job->started) &&
            now - job->started_us >= limit)
            lane_deadline_missed(core, lane);
    }
    if (core->running > 0)
        return G_SOURCE_CONTINUE;
    core->watchdog = 0;
    return G_SOURCE_REMOVE;
}

/* The watchdog looks a few times per deadline, at most every 100 ms, while commands run. */
static void watchdog_start(SaCore *core)
{
    if (core->watchdog)
        return;
    guint period = CLAMP(core->cfg->command_timeout_ms / 4, 10, 100);
    core->watchdog = g_timeout_add(period, watchdog_cb, core);
}

static void lane_next(SaLane *lane)
{
    SaCore *core = lane->core;
    if (!core || lane->running || g_queue_is_empty(lane->queue)) {
        lane_maybe_drop(lane);
        return;
    }
    Job *job = g_queue_pop_head(lane->queue);
    core->queued--;
    core->running++;
    lane->running = job;
    watchdog_start(core);
    g_thread_pool_push(core->pool, job, NULL);
}

/* Queues job; a waiting job of the same kind (pin, write, discover) is replaced. */
static void lane_push(SaCore *core, SaLane *lane, Job *job)
{
    for (GList *l = lane->queue->head; l; l = l->next) {
        Job *old = l->data;
        if (old->kind == job->kind && job->kind != JOB_RESTORE) {
            l->data = job;
            job_free(old);
            lane_next(lane);
            return;
        }
    }
    g_queue_push_tail(lane->queue, job);
    core->queued++;
    lane_next(lane);
}

static void shutdown_step(SaCore *core);

/* Drops waiting jobs of one kind (all kinds with kind < 0). */
static void lane_drop(SaCore *core, SaLane *lane, int kind)
{
    guint restores = 0;
    GList *l = lane->queue->head;
    while (l) {
        GList *next = l->next;
        Job *job = l->data;
        if (kind < 0 || job->kind == (JobKind)kind) {
            g_queue_delete_link(lane->queue, l);
            restores += job->for_shutdown;
            job_free(job);
            core->queued--;
        }
        l = next;
    }
    if (restores > 0 && core->restores_left > 0) {
        core->restores_left -= MIN(restores, core->restores_left);
        if (core->restores_left == 0)
            shutdown_step(core);
    }
}

/* ---- narrowing at once ---- */

static int host_get_affinity(gpointer data, pid_t tid, SaCpuSet **out)
{
    return sa_thread_get_affinity(tid, out);
}

static int host_set_affinity(gpointer data, pid_t tid, const SaCpuSet *set)
{
    return sa_thread_set_affinity(tid, set);
}

const SaAffinityOps sa_affinity_host_ops = {
    .get = host_get_affinity,
    .set = host_set_affinity,
};

void sa_actuator_set_affinity_ops(SaCore *core, const SaAffinityOps *ops, gpointer data)
{
    act_state(core)->affinity = ops;
    act_state(core)->affinity_data = data;
}

void sa_actuator_fast_stats(const SaCore *core, SaFastStats *out)
{
    /* A core without workers (the metrics' tests build one by hand) has narrowed nothing. */
    *out = core->pool && core->pool->user_data ? act_state(core)->fast : (SaFastStats){0};
}

/* A pin of process pid succeeded: the backend has taken its record of the VM's own settings
 * (the QMP backend reads them from the threads' affinity), so narrowing may go first now. */
static void lane_pinned(SaLane *lane, pid_t pid)
{
    if (lane->pinned_pid == pid || pid <= 0)
        return;
    lane->pinned_pid = pid;
    lane->start_time = sa_process_start_time(pid);
}

/* Whether the backend pinned this very process (a pid is reused after an exit). */
static bool lane_may_narrow(const SaLane *lane, pid_t pid)
{
    return pid > 0 && lane->pinned_pid == pid && sa_process_start_time(pid) == lane->start_time;
}

/* Gives thread tid (vCPU vcpu of vm) the set want at once when that narrows what it has. */
static void narrow_thread(ActState *st, const SaVm *vm, guint vcpu, pid_t tid, const SaCpuSet *want)
{
    g_autoptr(SaCpuSet) now = NULL;
    if (tid <= 0 || sa_cpuset_is_empty(want))
        return;
    if (!sa_process_has_task(vm->facts->pid, tid)) {
        g_debug("%s: vCPU %u: thread %d is no longer one of process %d: not narrowed at once",
                vm->name, vcpu, (int)tid, (int)vm->facts->pid);
        return;
    }
    int err = st->affinity->get(st->affinity_data, tid, &now);
    if (err == 0 && (sa_cpuset_equal(now, want) || !sa_cpuset_is_subset(want, now)))
        return; /* nothing to do, or a widening: the backend widens the cgroup first */
    if (err == 0)
        err = st->affinity->set(st->affinity_data, tid, want);
    if (err != 0) {
        st->fast.failed++;
        g_debug("%s: vCPU %u: narrowing thread %d at once failed: %s; its pin follows", vm->name,
                vcpu, (int)tid, g_strerror(err));
        return;
    }
    st->fast.narrowed++;
    g_autofree char *text = sa_cpuset_format(want);
    g_debug("%s: vCPU %u: thread %d narrowed at once to %s", vm->name, vcpu, (int)tid, text);
}

/* The job's vCPU sets, on the threads the sampling knows, wherever they narrow. */
static void narrow_now(SaCore *core, SaVm *vm, const Job *job)
{
    ActState *st = act_state(core);
    const GPtrArray *threads = vm->sampling.threads;
    if (!st->affinity || !threads || !lane_may_narrow(vm->lane, vm->facts->pid))
        return;
    for (guint i = 0; i < job->vcpus->len && i < threads->len; i++) {
        const SaThreadSampler *t = g_ptr_array_index(threads, i);
        if (t)
            narrow_thread(st, vm, i, sa_thread_sampler_tid(t), g_ptr_array_index(job->vcpus, i));
    }
}

/* ---- what the core asks ---- */

void sa_actuator_pin(SaCore *core, SaVm *vm)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    /* While the sched_ext scheduler places the vCPUs, each vCPU thread gets exactly its own set
     * (policy NULL) and nothing narrows at once; the emulator and I/O threads go home alike. */
    bool sched = sa_core_sched_active(core);
    if (core->stopping || !st->vcpus || !vm->lane->handle)
        return;
    Job *job = job_new(vm->lane, JOB_PIN, vm->lane->ops, vm->lane->handle);
    job->seq = vm->act.decided;
    job_set_threads(job, vm, sched ? NULL : st->vcpus, st->emulator ? st->emulator : st->vcpus);
    vm->act.outstanding = job->seq;
    vm->act.touched = true;
    if (!sched)
        narrow_now(core, vm, job);
    lane_push(core, vm->lane, job);
}

static void queue_restore(SaCore *core, SaVm *vm, bool for_shutdown)
{
    lane_drop(core, vm->lane, JOB_PIN);
    lane_drop(core, vm->lane, JOB_WRITE_ASSIGNED);
    vm->lane->pinned_pid = 0; /* the backend forgets its record when it gives them back */
    vm->act.outstanding = 0;
    vm->act.assigned_pending = false;
    if (!vm->act.touched || core->dry_run || !vm->lane->handle)
        return;
    Job *job = job_new(vm->lane, JOB_RESTORE, vm->lane->ops, vm->lane->handle);
    job->for_shutdown = for_shutdown;
    job_set_threads(job, vm, NULL, NULL);
    job->allowed_text = sa_cpuset_format(vm->allowed);
    if (for_shutdown)
        core->restores_left++;
    lane_push(core, vm->lane, job);
}

void sa_actuator_restore(SaCore *core, SaVm *vm)
{
    queue_restore(core, vm, false);
}

void sa_actuator_restore_if_narrowed(SaCore *core, SaVm *vm)
{
    ActState *st = act_state(core);
    const GPtrArray *threads = vm->sampling.threads;

    if (!st->affinity || !threads || core->dry_run)
        return;
    for (guint i = 0; i < threads->len; i++) {
        const SaThreadSampler *t = g_ptr_array_index(threads, i);
        const SaCpuSet *own =
            i < vm->vcpu_allowed->len ? g_ptr_array_index(vm->vcpu_allowed, i) : vm->allowed;
        g_autoptr(SaCpuSet) now = NULL;
        pid_t tid = t ? sa_thread_sampler_tid(t) : 0;

        if (tid <= 0 || st->affinity->get(st->affinity_data, tid, &now) != 0 ||
            sa_cpuset_is_subset(own, now))
            continue;
        g_autofree char *has = sa_cpuset_format(now);
        g_autofree char *wants = sa_cpuset_format(own);
        g_info("%s: vCPU %u runs on %s, narrower than its own set %s (an earlier pin): every "
               "thread gets its own set back",
               vm->name, i, has, wants);
        vm->act.touched = true;
        queue_restore(core, vm, false);
        return;
    }
}

void sa_actuator_write_assigned(SaCore *core, SaVm *vm, int home)
{
    if (core->stopping || !vm->lane->handle)
        return;
    Job *job = job_new(vm->lane, JOB_WRITE_ASSIGNED, vm->lane->ops, vm->lane->handle);
    job->home = home;
    job->settings = vm->settings;
    job->settings.assigned = home;
    job->cmd.pid = vm->facts->pid;
    job->cmd.settings = &job->settings;
    vm->act.assigned_pending = true;
    lane_push(core, vm->lane, job);
}

void sa_actuator_discover(SaCore *core, const SaBackendOps *ops, gpointer handle, const char *key,
                          const char *name)
{
    g_return_if_fail(ops->discover != NULL);
    SaLane *lane = lane_get(core, key, name);
    lane_push(core, lane, job_new(lane, JOB_DISCOVER, ops, handle));
}

void sa_actuator_forget_key(SaCore *core, const char *key)
{
    SaLane *lane = g_hash_table_lookup(core->lanes, key);
    if (!lane)
        return;
    /* A discovery still running for it must not bring it back. */
    lane->generation++;
    lane_drop(core, lane, -1);
    lane_maybe_drop(lane);
}

void sa_actuator_detach(SaCore *core, SaVm *vm)
{
    SaLane *lane = vm->lane;
    lane->attached = false;
    lane->generation++;
    lane_drop(core, lane, -1);
    lane_maybe_drop(lane);
    vm->lane = NULL;
}

/* ---- results, on the main loop ---- */

static void log_transient(SaVm *vm, const char *what, const GError *error)
{
    gint64 now = g_get_monotonic_time();
    SaVmActuation *a = &vm->act;
    if (g_strcmp0(a->last_error, error->message) != 0 ||
        now - a->last_error_logged_us > ERROR_REPEAT_US) {
        g_warning("%s: %s failed, trying again later: %s", vm->name, what, error->message);
        g_free(a->last_error);
        a->last_error = g_strdup(error->message);
        a->last_error_logged_us = now;
    }
}

/* An error of a command for vm: forget a VM that is gone, stop managing one a backend refuses
 * for good, retry the rest. Returns false when vm was forgotten. */
static bool command_failed(SaCore *core, SaVm *vm, const char *what, const GError *error)
{
    if (g_error_matches(error, SA_ERROR, SA_ERROR_GONE)) {
        g_info("%s: gone (%s); forgetting it", vm->name, error->message);
        sa_core_remove(core, vm);
        return false;
    }
    if (g_error_matches(error, SA_ERROR, SA_ERROR_UNSUPPORTED)) {
        g_autofree char *why = g_strdup_printf("%s was refused: %s", what, error->message);
        sa_vm_set_status(core, vm, SA_VM_UNMANAGED, why);
        return true;
    }
    vm->act.last_error_wall_us = g_get_real_time();
    log_transient(vm, what, error);
    return true;
}

/* A failed pin is tried again after a back-off: one tick, doubling up to RETRY_MAX_MS. */
#define RETRY_MAX_MS 30000

static void pin_backoff(SaCore *core, SaVm *vm)
{
    SaVmActuation *a = &vm->act;
    a->retry_delay_ms =
        a->retry_delay_ms == 0 ? core->cfg->interval_ms : MIN(a->retry_delay_ms * 2, RETRY_MAX_MS);
    a->retry_at_us = g_get_monotonic_time() + (gint64)a->retry_delay_ms * 1000;
}

static void pin_done(SaCore *core, SaVm *vm, Job *job)
{
    if (vm->act.outstanding == job->seq)
        vm->act.outstanding = 0;
    if (!job->ok) {
        if (command_failed(core, vm, "pinning", job->error))
            pin_backoff(core, vm);
        return;
    }
    vm->act.applied = MAX(vm->act.applied, job->seq);
    lane_pinned(vm->lane, job->cmd.pid);
    vm->act.retry_delay_ms = 0;
    vm->act.retry_at_us = 0;
    g_clear_pointer(&vm->act.last_error, g_free);
}

static void assigned_done(SaCore *core, SaVm *vm, Job *job)
{
    vm->act.assigned_pending = false;
    if (!job->ok) {
        command_failed(core, vm, "writing assigned= metadata", job->error);
        return;
    }
    vm->act.written_assigned = job->home;
    vm->settings.assigned = job->home;
}

static void restore_done(SaCore *core, SaVm *vm, Job *job)
{
    job->lane->pinned_pid = 0; /* a pin that answered after the restore was queued set it */
    if (job->ok) {
        g_info("%s: restored: every thread back to its own set (vCPUs: %s)", job->name,
               job->allowed_text);
        if (vm)
            vm->act.touched = false;
    } else if (g_error_matches(job->error, SA_ERROR, SA_ERROR_GONE)) {
        g_info("%s: gone before its pinning could be restored", job->name);
    } else {
        g_warning("%s: could not restore its pinning: %s", job->name, job->error->message);
    }
}

static void job_result(SaCore *core, Job *job)
{
    bool current = job->generation == job->lane->generation;
    SaVm *vm = current ? sa_core_lookup(core, job->key) : NULL;
    switch (job->kind) {
    case JOB_PIN:
        if (vm)
            pin_done(core, vm, job);
        break;
    case JOB_WRITE_ASSIGNED:
        if (vm)
            assigned_done(core, vm, job);
        break;
    case JOB_RESTORE:
        restore_done(core, vm, job);
        break;
    case JOB_DISCOVER:
        if (current && job->ok)
            sa_core_report(core, job->ops, job->handle, g_steal_pointer(&job->facts));
        else if (current && g_error_matches(job->error, SA_ERROR, SA_ERROR_GONE))
            sa_core_forget(core, job->key, "no longer running");
        else if (current)
            g_warning("%s: cannot read its state: %s", job->name, job->error->message);
        break;
    }
    if (job->for_shutdown && core->restores_left > 0 && --core->restores_left == 0)
        shutdown_step(core);
}

static gboolean job_done_cb(gpointer data)
{
    Job *job = data;
    SaLane *lane = job->lane;
    SaCore *core = lane->core;
    if (core) {
        core->running--;
        lane->running = NULL;
        if (lane->stalled) {
            g_info("%s: %s command answered after %.1f s; handled again", lane->name,
                   job_names[job->kind], (g_get_monotonic_time() - job->started_us) / 1e6);
            core->stalled_lanes--;
            set_pool_size(core);
        }
        lane->stalled = false;
        lane_ref(lane);
        job_result(core, job);
        lane_next(lane);
        lane_unref(lane);
    }
    job_free(job);
    return G_SOURCE_REMOVE;
}

static void job_run(gpointer data, gpointer user_data)
{
    Job *job = data;
    job->started_us = g_get_monotonic_time();
    job->started_wall_us = g_get_real_time();
    g_atomic_int_set(&job->started, 1);
    switch (job->kind) {
    case JOB_PIN:
        job->ok = job->ops->pin(job->handle, &job->cmd, &job->error);
        break;
    case JOB_RESTORE:
        job->ok = job->ops->restore(job->handle, &job->cmd, &job->error);
        break;
    case JOB_WRITE_ASSIGNED:
        job->ok = job->ops->write_assigned(job->handle, &job->cmd, &job->error);
        break;
    case JOB_DISCOVER:
        job->facts = job->ops->discover(job->handle, &job->error);
        job->ok = job->facts != NULL;
        break;
    }
    if (!job->ok && !job->error)
        g_set_error(&job->error, SA_ERROR, SA_ERROR_IO, "%s failed without a reason",
                    job_names[job->kind]);
    /* An idle source, never g_main_context_invoke(): that may run the callback right here, on
     * the worker, when the main thread does not hold the context at this moment. */
    GSource *source = g_idle_source_new();
    g_source_set_callback(source, job_done_cb, job, NULL);
    g_source_attach(source, g_main_context_default());
    g_source_unref(source);
}

/* ---- shutdown ---- */

static void log_unanswered(SaCore *core)
{
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, core->lanes);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        SaLane *lane = value;
        if (lane->running)
            g_warning("%s: did not answer within %u ms (%s command running): its pinning is "
                      "left as it is",
                      lane->name, core->cfg->stop_timeout_ms, job_names[lane->running->kind]);
    }
}

static void shutdown_step(SaCore *core)
{
    if (!core->stopped)
        return;
    if (core->stop_timer)
        g_source_remove(core->stop_timer);
    core->stop_timer = 0;
    if (core->restores_left > 0)
        log_unanswered(core);
    SaCoreStoppedFunc done = core->stopped;
    core->stopped = NULL;
    done(core->stopped_data);
}

static gboolean stop_timeout_cb(gpointer data)
{
    SaCore *core = data;
    core->stop_timer = 0;
    shutdown_step(core);
    return G_SOURCE_REMOVE;
}

void sa_core_shutdown(SaCore *core, SaCoreStoppedFunc done, gpointer user_data)
{
    /* The scheduler's threads first: back to the fair class with their own sets, at once. */
    sa_core_stop_actuation(core);
    core->stopping = true;
    core->stopped = done;
    core->stopped_data = user_data;
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);
    for (guint i = 0; i < vms->len; i++)
        queue_restore(core, g_ptr_array_index(vms, i), true);
    if (core->restores_left == 0) {
        shutdown_step(core);
        return;
    }
    core->stop_timer = g_timeout_add(core->cfg->stop_timeout_ms, stop_timeout_cb, core);
}

guint sa_core_commands_running(const SaCore *core)
{
    return core->running;
}

bool sa_core_settle(SaCore *core, guint timeout_ms)
{
    gint64 until = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    while (core->running + core->queued > 0) {
        if (g_get_monotonic_time() >= until)
            return false;
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    }
    return true;
}

/* ---- setup ---- */

void sa_actuator_init(SaCore *core)
{
    core->lanes = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)lane_unref);
    ActState *st = g_new0(ActState, 1);
    /* A fake /proc's thread ids may be any threads of this host. */
    const char *proc_root = g_getenv("SOFTAFF_PROC_ROOT");
    st->affinity = proc_root && proc_root[0] ? NULL : &sa_affinity_host_ops;
    core->pool = g_thread_pool_new(job_run, st, WORKERS, FALSE, NULL);
}

void sa_actuator_clear(SaCore *core)
{
    if (core->stop_timer)
        g_source_remove(core->stop_timer);
    core->stop_timer = 0;
    if (core->watchdog)
        g_source_remove(core->watchdog);
    core->watchdog = 0;
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, core->lanes);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        SaLane *lane = value;
        lane_drop(core, lane, -1);
        lane->core = NULL; /* results still to come are dropped */
    }
    ActState *st = act_state(core);
    g_thread_pool_free(core->pool, TRUE, FALSE);
    g_free(st);
    g_hash_table_unref(core->lanes);
}
