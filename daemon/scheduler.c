/* softaffd — actuation by the sched_ext scheduler ([actuation] mode=auto|sched_ext|pin).
 *
 * In sched_ext mode the scheduler part (sched/sa-sched.h) places the vCPUs at every wakeup;
 * softaffd still chooses homes (the policy runs every managed VM as if strict: it never widens a
 * set, since no vCPU thread is pinned; the emulator and I/O threads are narrowed home as when
 * re-pinning, by tick.c), rebalances, moves memory and reports. Each tick it feeds the
 * scheduler the managed VMs' vCPU threads with their home partition, softness and strictness
 * (only changes cost a call), reads every thread's counters in one batch, and checks whether
 * the kernel ejected the scheduler: then it logs the kernel's reason and re-pins from that tick
 * on, without a restart. Nothing here pins vCPU threads. */
#define G_LOG_DOMAIN "softaffd"

#include <string.h>

#include "core-private.h"
#include "sa-error.h"
#include "sa-policy-rules.h"
#include "sa-proctask.h"

/* ---- the host's scheduler: sched/sa-sched.h ---- */

static bool fake_proc(void)
{
    const char *root = g_getenv("SOFTAFF_PROC_ROOT");

    return root && root[0];
}

static bool host_available(gpointer data, GError **error)
{
    return sa_sched_available(error);
}

static gpointer host_start(gpointer data, const guint *cpu_part, guint n_cpus, guint n_parts,
                           const guint *distance, GError **error)
{
    g_autoptr(SaSched) s = NULL;

    if (!sa_sched_available(error))
        return NULL;
    if (fake_proc()) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "SOFTAFF_PROC_ROOT points at a fake /proc: its thread ids are no threads of "
                    "this host");
        return NULL;
    }
    s = sa_sched_load(error);
    if (!s || !sa_sched_set_partitions(s, cpu_part, n_cpus, n_parts, distance, error) ||
        !sa_sched_attach(s, error))
        return NULL;
    return g_steal_pointer(&s);
}

static bool host_set_partitions(gpointer s, const guint *cpu_part, guint n_cpus, guint n_parts,
                                const guint *distance, GError **error)
{
    return sa_sched_set_partitions(s, cpu_part, n_cpus, n_parts, distance, error);
}

static bool host_add_thread(gpointer s, pid_t tid, guint home, guint softness, bool strict,
                            guint vm, GError **error)
{
    return sa_sched_add_thread(s, tid, home, softness, strict, vm, error);
}

static bool host_remove_thread(gpointer s, pid_t tid, GError **error)
{
    return sa_sched_remove_thread(s, tid, error);
}

static void host_forget_thread(gpointer s, pid_t tid)
{
    sa_sched_forget_thread(s, tid);
}

static bool host_read(gpointer s, GArray *out, GError **error)
{
    return sa_sched_read(s, out, error);
}

static bool host_ejected(gpointer s, SaSchedExit *out)
{
    return sa_sched_ejected(s, out);
}

static void host_stop(gpointer s)
{
    sa_sched_free(s); /* detaches first: every thread SCHED_OTHER, then the link closed */
}

static bool host_release_thread(gpointer data, pid_t tid, bool *was_ext, GError **error)
{
    *was_ext = false;
    return fake_proc() || sa_sched_release_thread(tid, was_ext, error);
}

const SaSchedOps sa_sched_host_ops = {
    .available = host_available,
    .start = host_start,
    .set_partitions = host_set_partitions,
    .add_thread = host_add_thread,
    .remove_thread = host_remove_thread,
    .forget_thread = host_forget_thread,
    .read = host_read,
    .ejected = host_ejected,
    .stop = host_stop,
    .release_thread = host_release_thread,
};

void sa_core_set_sched_ops(SaCore *core, const SaSchedOps *ops, gpointer data)
{
    core->sched_ops = ops;
    core->sched_data = data;
}

static const SaSchedOps *ops_of(SaCore *core)
{
    if (!core->sched_ops)
        core->sched_ops = &sa_sched_host_ops;
    return core->sched_ops;
}

/* ---- per VM ---- */

void sa_vm_sched_init(SaVmSched *s)
{
    memset(s, 0, sizeof(*s));
    s->tids = g_hash_table_new(g_direct_hash, g_direct_equal);
    s->refused = g_hash_table_new(g_direct_hash, g_direct_equal);
    s->released = g_hash_table_new(g_direct_hash, g_direct_equal);
    s->seen = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    s->home = -1;
}

void sa_vm_sched_clear(SaVmSched *s)
{
    g_clear_pointer(&s->tids, g_hash_table_unref);
    g_clear_pointer(&s->refused, g_hash_table_unref);
    g_clear_pointer(&s->released, g_hash_table_unref);
    g_clear_pointer(&s->seen, g_hash_table_unref);
}

/* Starts the VM's record over (the scheduler went, or the VM left it); the id stays. */
static void vm_sched_reset(SaVmSched *s)
{
    g_hash_table_remove_all(s->tids);
    g_hash_table_remove_all(s->refused);
    g_hash_table_remove_all(s->seen); /* the lifetime sums stay */
    s->home = -1;
    s->checked_own = false;
    s->run_ns_home = s->run_ns_away = s->wait_ns = 0;
    s->visits = s->preempts = s->preempted = 0;
    s->away = false;
}

/* One thread out of the scheduler: back to SCHED_OTHER while it is still a thread of the VM's
 * process; a thread that is gone is only forgotten (its id may be another's by now). */
static void thread_out(SaCore *core, const SaVm *vm, pid_t tid)
{
    const SaSchedOps *ops = ops_of(core);
    g_autoptr(GError) error = NULL;
    pid_t pid = vm->facts ? vm->facts->pid : 0;

    core->sched_threads -= core->sched_threads > 0;
    if (pid <= 0 || !sa_process_has_task(pid, tid)) {
        ops->forget_thread(core->sched, tid);
        return;
    }
    if (!ops->remove_thread(core->sched, tid, &error))
        g_warning("%s: thread %d: back to the fair class: %s", vm->name, (int)tid, error->message);
}

void sa_core_sched_forget(SaCore *core, SaVm *vm)
{
    GHashTableIter it;
    gpointer key;

    if (core->sched) {
        g_hash_table_iter_init(&it, vm->sched.tids);
        while (g_hash_table_iter_next(&it, &key, NULL))
            thread_out(core, vm, GPOINTER_TO_INT(key));
    }
    vm_sched_reset(&vm->sched);
}

/* The vCPU thread ids the sampling knows (0 where unknown). */
static pid_t vcpu_tid(const SaVm *vm, guint i)
{
    const GPtrArray *threads = vm->sampling.threads;
    const SaThreadSampler *t = threads && i < threads->len ? g_ptr_array_index(threads, i) : NULL;

    return t ? sa_thread_sampler_tid(t) : 0;
}

static bool vm_has_tid(const SaVm *vm, pid_t tid)
{
    const GPtrArray *threads = vm->sampling.threads;

    for (guint i = 0; threads && i < threads->len; i++)
        if (vcpu_tid(vm, i) == tid)
            return true;
    return false;
}

void sa_core_sched_apply(SaCore *core, SaVm *vm)
{
    const SaSchedOps *ops = ops_of(core);
    SaVmSched *s = &vm->sched;
    const GPtrArray *threads = vm->sampling.threads;
    int home = vm->pvm.st.placed && vm->pvm.st.home >= 0
                   ? sa_topology_find_partition(core->topo, (guint)vm->pvm.st.home)
                   : -1;
    guint softness = sa_policy_effective_softness(&core->cfg->policy, vm->settings.softness);
    bool strict = vm->settings.mode == SA_MODE_STRICT;
    bool changed;
    GHashTableIter it;
    gpointer key;

    if (!core->sched || home < 0 || !threads)
        return;
    if (!s->id)
        s->id = ++core->sched_next_vm;
    changed = home != s->home || softness != s->softness || strict != s->strict;
    /* Threads that are no vCPU of the VM any more (a new thread list) leave. */
    g_hash_table_iter_init(&it, s->tids);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        if (vm_has_tid(vm, GPOINTER_TO_INT(key)))
            continue;
        thread_out(core, vm, GPOINTER_TO_INT(key));
        g_hash_table_iter_remove(&it);
    }
    for (guint i = 0; i < threads->len; i++) {
        pid_t tid = vcpu_tid(vm, i);
        g_autoptr(GError) error = NULL;
        bool known;

        if (tid <= 0 || g_hash_table_contains(s->refused, GINT_TO_POINTER(tid)))
            continue;
        known = g_hash_table_contains(s->tids, GINT_TO_POINTER(tid));
        if (known && !changed)
            continue;
        if (!ops->add_thread(core->sched, tid, (guint)home, softness, strict, s->id, &error)) {
            if (g_error_matches(error, SA_ERROR, SA_ERROR_GONE)) {
                g_debug("%s: vCPU %u: %s", vm->name, i, error->message);
            } else {
                /* Real-time, deadline, or the kernel said no: that thread keeps its class. */
                g_warning("%s: vCPU %u: not given to the scheduler: %s", vm->name, i,
                          error->message);
                g_hash_table_add(s->refused, GINT_TO_POINTER(tid));
            }
            if (known) {
                g_hash_table_remove(s->tids, GINT_TO_POINTER(tid));
                core->sched_threads -= core->sched_threads > 0;
            }
            continue;
        }
        if (!known) {
            g_hash_table_add(s->tids, GINT_TO_POINTER(tid));
            core->sched_threads++;
        }
    }
    if (changed && g_hash_table_size(s->tids) > 0) {
        const SaPartition *p = g_ptr_array_index(core->topo->partitions, (guint)home);

        g_info("%s: %u vCPU thread(s) in the scheduler: home partition %u, %s", vm->name,
               g_hash_table_size(s->tids), p->id,
               strict ? "strict (never leaves home)"
                      : (softness ? "soft" : "softness 0 (never leaves home)"));
        s->home = home;
        s->softness = softness;
        s->strict = strict;
    }
    if (!s->checked_own && g_hash_table_size(s->tids) > 0) {
        s->checked_own = true;
        sa_actuator_restore_if_narrowed(core, vm);
    }
}

void sa_core_sched_release(SaCore *core, SaVm *vm)
{
    const SaSchedOps *ops = ops_of(core);
    const GPtrArray *threads = vm->sampling.threads;

    if (!ops->release_thread || core->dry_run)
        return;
    for (guint i = 0; threads && i < threads->len; i++) {
        pid_t tid = vcpu_tid(vm, i);
        g_autoptr(GError) error = NULL;
        bool was_ext = false;

        if (tid <= 0 || g_hash_table_contains(vm->sched.released, GINT_TO_POINTER(tid)))
            continue;
        g_hash_table_add(vm->sched.released, GINT_TO_POINTER(tid));
        if (!ops->release_thread(core->sched_data, tid, &was_ext, &error))
            g_warning("%s: vCPU %u: %s", vm->name, i, error->message);
        else if (was_ext)
            g_info("%s: vCPU %u: thread %d was left in SCHED_EXT (by a softaffd that was "
                   "killed?): back to SCHED_OTHER",
                   vm->name, i, (int)tid);
    }
}

/* ---- the scheduler's life ---- */

/* The scheduler's partitions: each CPU's partition index (G_MAXUINT: none), the distances
 * between partition indexes. */
typedef struct {
    guint *cpu_part;
    guint n_cpus;
    guint n_parts;
    guint *distance;
} Parts;

static void parts_of(const SaTopology *topo, Parts *out)
{
    guint n = topo->partitions->len;

    out->n_cpus = 0;
    for (guint i = 0; i < n; i++) {
        const SaPartition *p = g_ptr_array_index(topo->partitions, i);
        int last = sa_cpuset_last(p->cpus);

        if (last >= 0)
            out->n_cpus = MAX(out->n_cpus, (guint)last + 1);
    }
    out->cpu_part = g_new(guint, MAX(out->n_cpus, 1));
    for (guint c = 0; c < out->n_cpus; c++)
        out->cpu_part[c] = G_MAXUINT;
    for (guint i = 0; i < n; i++) {
        const SaPartition *p = g_ptr_array_index(topo->partitions, i);

        for (int c = sa_cpuset_next(p->cpus, -1); c >= 0; c = sa_cpuset_next(p->cpus, c))
            out->cpu_part[c] = i;
    }
    out->n_parts = n;
    out->distance = g_new(guint, MAX(n * n, 1));
    for (guint a = 0; a < n; a++)
        for (guint b = 0; b < n; b++)
            out->distance[a * n + b] = sa_topology_partition_distance(topo, a, b);
}

static void parts_clear(Parts *p)
{
    g_free(p->cpu_part);
    g_free(p->distance);
}

/* Every VM leaves the scheduler's books (it stopped: its threads are on the fair class). */
static void forget_all(SaCore *core)
{
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);

    for (guint i = 0; i < vms->len; i++)
        vm_sched_reset(&((SaVm *)g_ptr_array_index(vms, i))->sched);
    core->sched_threads = 0;
}

/* Re-pinning takes over: every managed VM with a decision gets it pinned at this tick. */
static void repin_all(SaCore *core)
{
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);

    for (guint i = 0; i < vms->len; i++) {
        SaVm *vm = g_ptr_array_index(vms, i);

        if (vm->status == SA_VM_MANAGED && vm->pvm.st.vcpus)
            vm->act.decided++;
    }
}

/* Pinned VMs get their own sets back before the scheduler places them (a reload from pin). */
static void restore_all(SaCore *core)
{
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);

    for (guint i = 0; i < vms->len; i++) {
        SaVm *vm = g_ptr_array_index(vms, i);

        if (vm->status == SA_VM_MANAGED && vm->act.touched)
            sa_actuator_restore(core, vm);
    }
}

static void stop_scheduler(SaCore *core)
{
    if (!core->sched)
        return;
    ops_of(core)->stop(core->sched);
    core->sched = NULL;
    forget_all(core);
}

void sa_core_stop_actuation(SaCore *core)
{
    if (!core->sched)
        return;
    g_info("actuation: the scheduler stops: every vCPU thread back to the fair class with its "
           "own set");
    stop_scheduler(core);
    g_free(core->actuation_reason);
    core->actuation_reason = g_strdup("the scheduler was stopped (shutdown)");
}

/* The scheduler per the mode, or NULL with why in *reason; *cannot: it was wanted but cannot
 * run (not: mode=pin, or a dry run where it could). */
static gpointer start_scheduler(SaCore *core, char **reason, bool *cannot)
{
    const SaSchedOps *ops = ops_of(core);
    g_autoptr(GError) error = NULL;
    Parts p;
    gpointer s;

    *cannot = false;
    if (core->cfg->actuation_mode == SA_ACTUATION_PIN) {
        *reason = g_strdup("[actuation] mode=pin");
        return NULL;
    }
    if (core->dry_run) {
        *cannot = !ops->available(core->sched_data, &error);
        *reason = *cannot ? g_strdup(error->message)
                          : g_strdup("dry run: the scheduler could run, but is not loaded");
        return NULL;
    }
    parts_of(core->topo, &p);
    s = ops->start(core->sched_data, p.cpu_part, p.n_cpus, p.n_parts, p.distance, &error);
    parts_clear(&p);
    if (!s) {
        *cannot = true;
        *reason = g_strdup(error->message);
        return NULL;
    }
    *reason = g_strdup_printf("the sched_ext scheduler is loaded ([actuation] mode=%s)",
                              sa_actuation_mode_to_string(core->cfg->actuation_mode));
    return s;
}

bool sa_core_start_actuation(SaCore *core, GError **error)
{
    const SaConfig *cfg = core->cfg;
    g_autofree char *reason = NULL;
    bool was_sched = core->sched != NULL, cannot;

    stop_scheduler(core);
    core->actuation_started = true;
    core->sched = start_scheduler(core, &reason, &cannot);
    g_free(core->actuation_reason);
    core->actuation_reason = g_steal_pointer(&reason);
    if (cannot && cfg->actuation_mode == SA_ACTUATION_SCHED_EXT) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED, "[actuation] mode=sched_ext: %s",
                    core->actuation_reason);
        if (was_sched)
            repin_all(core);
        sa_core_refit_sensing(core);
        return false;
    }
    if (core->sched) {
        g_info("actuation: the sched_ext scheduler places the managed VMs' vCPU threads, each "
               "within its own set; emulator and I/O threads at home: %s",
               core->actuation_reason);
        restore_all(core);
    } else {
        g_info("actuation: re-pinning (affinity): %s", core->actuation_reason);
        if (was_sched)
            repin_all(core);
    }
    sa_core_refit_sensing(core);
    return true;
}

void sa_core_reload_actuation(SaCore *core, SaActuationMode old_mode)
{
    g_autoptr(GError) error = NULL;

    if (!core->actuation_started)
        return;
    if (core->cfg->actuation_mode != old_mode) {
        if (!sa_core_start_actuation(core, &error))
            g_warning("reload: %s; re-pinning", error->message);
        return;
    }
    /* The homes are decided again (sa_core_reload): every thread gets its new home at the next
     * tick (the threads stay in: a VM the reload leaves unmanaged takes its own out). */
    if (core->sched) {
        g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);
        Parts p;

        for (guint i = 0; i < vms->len; i++)
            ((SaVm *)g_ptr_array_index(vms, i))->sched.home = -1;
        parts_of(core->topo, &p);
        if (!ops_of(core)->set_partitions(core->sched, p.cpu_part, p.n_cpus, p.n_parts, p.distance,
                                          &error)) {
            g_warning("reload: the scheduler refuses the new partitions: %s; re-pinning",
                      error->message);
            stop_scheduler(core);
            g_free(core->actuation_reason);
            core->actuation_reason =
                g_strdup_printf("the scheduler refused the partitions: %s", error->message);
            repin_all(core);
            sa_core_refit_sensing(core);
        }
        parts_clear(&p);
    }
}

bool sa_core_sched_active(const SaCore *core)
{
    return core->sched != NULL;
}

const char *sa_core_actuation_mode(const SaCore *core)
{
    return core->sched ? "sched_ext" : "pin";
}

const char *sa_core_actuation_reason(const SaCore *core)
{
    return core->actuation_reason ? core->actuation_reason : "not started (re-pinning)";
}

guint64 sa_core_sched_ejections(const SaCore *core)
{
    return core->sched_ejections;
}

/* The kernel stopped the scheduler: say why, and re-pin from this tick on. */
static void ejected(SaCore *core, const SaSchedExit *x)
{
    g_autofree char *what =
        g_strdup_printf("%s (kind %d)%s%s%s%s", x->what, x->kind, x->reason[0] ? ": " : "",
                        x->reason, x->msg[0] ? ": " : "", x->msg);

    core->sched_ejections++;
    g_free(core->sched_exit);
    core->sched_exit = g_strdup(what);
    core->sched_exit_wall_us = g_get_real_time();
    g_warning("actuation: the kernel ejected the sched_ext scheduler: %s; every vCPU thread runs "
              "on the fair class with its own set; re-pinning from now on",
              what);
    if (x->dump) {
        /* The kernel's own account of its state at the error (where each runnable thread was
         * queued, since when): one log line per line of it. */
        g_auto(GStrv) lines = g_strsplit(x->dump, "\n", -1);
        for (guint i = 0; lines[i]; i++)
            if (lines[i][0])
                g_message("actuation: the kernel's dump: %s", lines[i]);
    }
    stop_scheduler(core);
    g_free(core->actuation_reason);
    core->actuation_reason = g_strdup_printf("the kernel ejected the scheduler: %s", what);
    repin_all(core);
    /* Re-pinning again: mode=auto's BPF events come back. */
    sa_core_refit_sensing(core);
}

/* What a counter of the scheduler grew by since the last read: all of it when it went back
 * (the thread was added again, its counters start over). */
static guint64 grown(guint64 now, guint64 before)
{
    return now >= before ? now - before : now;
}

/* Adds what a thread's counters grew by since the last read to the VM's lifetime sums. */
static void add_growth(SaVmSched *s, const SaSchedCounters *c)
{
    static const SaSchedCounters zero;
    SaSchedCounters *before = g_hash_table_lookup(s->seen, GINT_TO_POINTER(c->tid));
    const SaSchedCounters *b = before ? before : &zero;

    for (guint p = 0; p < SA_SCHED_PARTS; p++)
        s->total_run_ns[p] += grown(c->run_ns[p], b->run_ns[p]);
    s->total_wait_ns += grown(c->wait_ns, b->wait_ns);
    s->total_visits += grown(c->visits, b->visits);
    s->total_preempts += grown(c->preempts, b->preempts);
    s->total_preempted += grown(c->preempted, b->preempted);
    if (!before)
        g_hash_table_insert(s->seen, GINT_TO_POINTER(c->tid), g_memdup2(c, sizeof(*c)));
    else
        *before = *c;
}

static gboolean not_in_scheduler(gpointer key, gpointer value, gpointer tids)
{
    return !g_hash_table_contains(tids, key);
}

/* One batch read: each VM's counters from its threads'. */
static void read_counters(SaCore *core)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GHashTable) by_id = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);

    if (!core->sched_read)
        core->sched_read = g_array_new(FALSE, FALSE, sizeof(SaSchedCounters));
    g_array_set_size(core->sched_read, 0);
    if (!ops_of(core)->read(core->sched, core->sched_read, &error)) {
        g_warning_once("actuation: reading the scheduler's counters: %s (said once)",
                       error->message);
        return;
    }
    for (guint i = 0; i < vms->len; i++) {
        SaVm *vm = g_ptr_array_index(vms, i);
        SaVmSched *s = &vm->sched;

        if (!s->id || g_hash_table_size(s->tids) == 0)
            continue;
        g_hash_table_insert(by_id, GUINT_TO_POINTER(s->id), vm);
        s->away = false;
        s->run_ns_home = s->run_ns_away = s->wait_ns = 0;
        s->visits = s->preempts = s->preempted = 0;
    }
    for (guint i = 0; i < core->sched_read->len; i++) {
        const SaSchedCounters *c = &g_array_index(core->sched_read, SaSchedCounters, i);
        SaVm *vm = g_hash_table_lookup(by_id, GUINT_TO_POINTER(c->vm));
        SaVmSched *s = vm ? &vm->sched : NULL;

        if (!s || !g_hash_table_contains(s->tids, GINT_TO_POINTER(c->tid)))
            continue;
        for (guint p = 0; p < SA_SCHED_PARTS; p++) {
            if (p == c->home)
                s->run_ns_home += c->run_ns[p];
            else
                s->run_ns_away += c->run_ns[p];
        }
        s->away |= c->last_part != G_MAXUINT && c->last_part != c->home;
        s->wait_ns += c->wait_ns;
        s->visits += c->visits;
        s->preempts += c->preempts;
        s->preempted += c->preempted;
        add_growth(s, c);
    }
    /* Threads that left the scheduler start from nothing if they come back. */
    for (guint i = 0; i < vms->len; i++) {
        SaVmSched *s = &((SaVm *)g_ptr_array_index(vms, i))->sched;

        g_hash_table_foreach_remove(s->seen, not_in_scheduler, s->tids);
    }
}

void sa_core_sched_tick(SaCore *core)
{
    SaSchedExit x = {0};

    if (!core->sched)
        return;
    if (ops_of(core)->ejected(core->sched, &x)) {
        ejected(core, &x);
        g_free(x.dump);
        return;
    }
    read_counters(core);
}
