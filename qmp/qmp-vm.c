/* softaffd — the QMP backend's commands: sched_setaffinity on the threads of a QEMU process.
 *
 * pin gives each vCPU thread its set and every other thread of the process (main loop, I/O
 * threads, thread-pool workers) the emulator set. Each thread's affinity is read first and
 * written only when it differs; the value a thread had before softaff's first write to it is
 * remembered, in memory and in the state file (qmp-state.h) before that write, and restore
 * puts exactly that back. Threads come and go (QEMU's thread pool), so an "other" thread that
 * exits meanwhile is no error, and the memory of exited threads is dropped.
 *
 * A thread id is written only while it is a thread of the process (/proc/PID/task/TID),
 * checked right before each sched_setaffinity: QMP only names thread ids, and one that exited
 * may be reused by any process. These run on the core's worker threads, under the handle's
 * lock (see qmp-vm.h). */
#define G_LOG_DOMAIN "softaffd"

#include "qmp-vm.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "sa-error.h"
#include "sa-paths.h"
#include "sa-proctask.h"
#include "sa-sampler.h"

/* ---- remembered homes --------------------------------------------------------------------- */

struct QmpHomes {
    gint ref; /* atomic */
    GMutex lock;
    GHashTable *home; /* guarded by lock: socket path -> GINT_TO_POINTER(home + 1) */
};

QmpHomes *qmp_homes_new(void)
{
    QmpHomes *homes = g_new0(QmpHomes, 1);
    homes->ref = 1;
    g_mutex_init(&homes->lock);
    homes->home = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return homes;
}

QmpHomes *qmp_homes_ref(QmpHomes *homes)
{
    g_atomic_int_inc(&homes->ref);
    return homes;
}

void qmp_homes_unref(QmpHomes *homes)
{
    if (!homes || !g_atomic_int_dec_and_test(&homes->ref))
        return;
    g_hash_table_unref(homes->home);
    g_mutex_clear(&homes->lock);
    g_free(homes);
}

int qmp_homes_get(QmpHomes *homes, const char *path)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&homes->lock);
    return GPOINTER_TO_INT(g_hash_table_lookup(homes->home, path)) - 1;
}

void qmp_homes_set(QmpHomes *homes, const char *path, int home)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&homes->lock);
    if (home < 0)
        g_hash_table_remove(homes->home, path);
    else
        g_hash_table_insert(homes->home, g_strdup(path), GINT_TO_POINTER(home + 1));
}

/* ---- the handle --------------------------------------------------------------------------- */

QmpVm *qmp_vm_new(const char *path, pid_t pid, guint64 start_time, QmpHomes *homes, QmpState *state)
{
    QmpVm *vm = g_new0(QmpVm, 1);
    vm->ref = 1;
    vm->path = g_strdup(path);
    vm->pid = pid;
    vm->start_time = start_time;
    vm->homes = qmp_homes_ref(homes);
    vm->state = qmp_state_ref(state);
    g_mutex_init(&vm->lock);
    vm->vcpu_tids = g_array_new(FALSE, TRUE, sizeof(pid_t));
    vm->original = start_time
                       ? qmp_state_load(state, path, pid, start_time)
                       : g_hash_table_new_full(NULL, NULL, NULL, (GDestroyNotify)sa_cpuset_free);
    GHashTableIter it;
    gpointer tid;
    g_hash_table_iter_init(&it, vm->original);
    while (g_hash_table_iter_next(&it, &tid, NULL))
        if (!sa_process_has_task(pid, GPOINTER_TO_INT(tid)))
            g_hash_table_iter_remove(&it);
    return vm;
}

SaCpuSet *qmp_vm_original(QmpVm *vm, pid_t tid)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&vm->lock);
    const SaCpuSet *set = g_hash_table_lookup(vm->original, GINT_TO_POINTER(tid));
    return set ? sa_cpuset_copy(set) : NULL;
}

/* Writes what is remembered to the state file. Called with vm->lock held. */
static void save_originals(QmpVm *vm)
{
    if (vm->start_time)
        qmp_state_save(vm->state, vm->path, vm->pid, vm->start_time, vm->original);
}

gpointer qmp_vm_ref(gpointer handle)
{
    QmpVm *vm = handle;
    g_atomic_int_inc(&vm->ref);
    return vm;
}

void qmp_vm_unref(gpointer handle)
{
    QmpVm *vm = handle;
    if (!vm || !g_atomic_int_dec_and_test(&vm->ref))
        return;
    g_array_unref(vm->vcpu_tids);
    g_hash_table_unref(vm->original);
    g_mutex_clear(&vm->lock);
    qmp_homes_unref(vm->homes);
    qmp_state_unref(vm->state);
    g_free(vm->path);
    g_free(vm);
}

void qmp_vm_update(QmpVm *vm, const GArray *vcpu_tids)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&vm->lock);
    g_array_set_size(vm->vcpu_tids, 0);
    g_array_append_vals(vm->vcpu_tids, vcpu_tids->data, vcpu_tids->len);
    vm->released = false;
}

/* ---- one thread's affinity ---------------------------------------------------------------- */

bool qmp_process_alive(pid_t pid)
{
    if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
        return false;
    char state = sa_process_state(pid);
    return state != 0 && state != 'Z' && state != 'X';
}

static void set_gone(GError **error, pid_t pid)
{
    g_set_error(error, SA_ERROR, SA_ERROR_GONE, "QEMU process %d exited", (int)pid);
}

/* Sorts an affinity call's errno: a process that exited is GONE, one of its threads that exited
 * is TRANSIENT, a refusal (EPERM: not ours to change; EINVAL: none of those CPUs is online or in
 * its cpuset cgroup) is UNSUPPORTED. want is NULL for a read. */
static void set_thread_error(GError **error, pid_t pid, pid_t tid, const SaCpuSet *want, int err)
{
    if (err == ESRCH && !qmp_process_alive(pid)) {
        set_gone(error, pid);
    } else if (err == ESRCH) {
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT, "thread %d of QEMU process %d exited",
                    (int)tid, (int)pid);
    } else if (want && (err == EPERM || err == EINVAL)) {
        g_autofree char *cpus = sa_cpuset_format(want);
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "softaffd may not pin the threads of QEMU process %d: thread %d to CPUs %s: "
                    "%s%s",
                    (int)pid, (int)tid, cpus, g_strerror(err),
                    err == EINVAL ? " (none of them is online or in its cpuset cgroup)" : "");
    } else {
        g_set_error(error, SA_ERROR, SA_ERROR_IO,
                    "%s the affinity of thread %d of QEMU process %d: %s",
                    want ? "setting" : "reading", (int)tid, (int)pid, g_strerror(err));
    }
}

SaCpuSet *qmp_thread_affinity(pid_t pid, pid_t tid, GError **error)
{
    SaCpuSet *set = NULL;
    int err = sa_thread_get_affinity(tid, &set);
    if (err != 0)
        set_thread_error(error, pid, tid, NULL, err);
    return set;
}

/* Whether tid is a thread of the VM's process now; else TRANSIENT (GONE when the process
 * exited), the thread left alone. */
static bool is_task(const QmpVm *vm, pid_t tid, GError **error)
{
    if (sa_process_has_task(vm->pid, tid))
        return true;
    if (!qmp_process_alive(vm->pid))
        set_gone(error, vm->pid);
    else
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT,
                    "thread %d is not a thread of QEMU process %d (any more); left alone", (int)tid,
                    (int)vm->pid);
    return false;
}

/* Remembers tid's own affinity cur before softaff first changes it, on disk first. Called with
 * vm->lock held. */
static void remember(QmpVm *vm, pid_t tid, const SaCpuSet *cur)
{
    if (g_hash_table_contains(vm->original, GINT_TO_POINTER(tid)))
        return;
    g_hash_table_insert(vm->original, GINT_TO_POINTER(tid), sa_cpuset_copy(cur));
    save_originals(vm);
}

/* Gives tid the set want unless it has it already; with record, remembers its own affinity
 * before softaff first changes it. The thread must be one of the process's right before the
 * write: a thread id that is not (any more) is left alone. Called with vm->lock held. */
static bool pin_thread(QmpVm *vm, pid_t tid, const SaCpuSet *want, bool record, GError **error)
{
    g_autoptr(SaCpuSet) cur = NULL;
    int err = sa_thread_get_affinity(tid, &cur);
    if (err != 0) {
        set_thread_error(error, vm->pid, tid, NULL, err);
        return false;
    }
    if (sa_cpuset_equal(cur, want))
        return true;
    if (!is_task(vm, tid, error))
        return false;
    if (record)
        remember(vm, tid, cur);
    /* Again right before the write: the file write above takes time. */
    if (!is_task(vm, tid, error))
        return false;
    err = sa_thread_set_affinity(tid, want);
    if (err != 0) {
        set_thread_error(error, vm->pid, tid, want, err);
        return false;
    }
    return true;
}

/* ---- the process's threads ---------------------------------------------------------------- */

static int compare_tids(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static bool has_tid(const GArray *sorted, pid_t tid)
{
    return sorted->len > 0 &&
           bsearch(&tid, sorted->data, sorted->len, sizeof(pid_t), compare_tids) != NULL;
}

/* The threads of the VM's process, sorted; drops what is remembered of threads that exited (a
 * thread id may be reused). Called with vm->lock held. */
static GArray *list_threads(QmpVm *vm, GError **error)
{
    g_autoptr(GError) local = NULL;
    GArray *threads = sa_process_list_threads(vm->pid, &local);
    if (!threads) {
        if (qmp_process_alive(vm->pid))
            g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT, "QEMU process %d: %s", (int)vm->pid,
                        local->message);
        else
            set_gone(error, vm->pid);
        return NULL;
    }
    /* The pid may name another process now: the threads are not the VM's. */
    if (vm->start_time && sa_process_start_time(vm->pid) != vm->start_time) {
        g_array_unref(threads);
        set_gone(error, vm->pid);
        return NULL;
    }
    g_array_sort(threads, compare_tids);
    GHashTableIter it;
    gpointer tid;
    bool dropped = false;
    g_hash_table_iter_init(&it, vm->original);
    while (g_hash_table_iter_next(&it, &tid, NULL)) {
        if (!has_tid(threads, GPOINTER_TO_INT(tid))) {
            g_hash_table_iter_remove(&it);
            dropped = true;
        }
    }
    if (dropped)
        save_originals(vm);
    return threads;
}

/* The vCPU threads the command was built for, else the ones last reported. */
static const GArray *command_vcpu_tids(const QmpVm *vm, const SaCommand *cmd)
{
    return cmd && cmd->vcpu_tids ? cmd->vcpu_tids : vm->vcpu_tids;
}

static bool pin_vcpus(QmpVm *vm, const SaCommand *cmd, const GArray *vcpu_tids,
                      const GArray *threads, GError **error)
{
    for (guint i = 0; i < cmd->n_vcpus && i < vcpu_tids->len; i++) {
        pid_t tid = g_array_index(vcpu_tids, pid_t, i);
        if (tid <= 0)
            continue;
        /* A vCPU thread that is gone while QEMU runs (unplug, reset): the core asks for the
         * new threads (threads_lost). Checked against the listing, so a recycled thread id
         * of another process is never pinned. */
        if (!has_tid(threads, tid)) {
            g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT,
                        "vCPU %u (thread %d) of QEMU process %d exited", i, (int)tid, (int)vm->pid);
            return false;
        }
        if (!pin_thread(vm, tid, cmd->vcpus[i], true, error))
            return false;
    }
    return true;
}

/* pin_thread for a thread that may exit meanwhile (a thread-pool worker): that is no error. */
static bool pin_thread_if_alive(QmpVm *vm, pid_t tid, const SaCpuSet *want, bool record,
                                GError **error)
{
    g_autoptr(GError) e = NULL;
    if (pin_thread(vm, tid, want, record, &e) || g_error_matches(e, SA_ERROR, SA_ERROR_TRANSIENT))
        return true;
    g_propagate_error(error, g_steal_pointer(&e));
    return false;
}

static bool pin_others(QmpVm *vm, const SaCpuSet *want, const GArray *vcpu_tids,
                       const GArray *threads, GError **error)
{
    g_autoptr(GArray) vcpus = g_array_copy((GArray *)vcpu_tids);
    g_array_sort(vcpus, compare_tids);
    for (guint i = 0; i < threads->len; i++) {
        pid_t tid = g_array_index(threads, pid_t, i);
        if (!has_tid(vcpus, tid) && !pin_thread_if_alive(vm, tid, want, true, error))
            return false;
    }
    return true;
}

/* What a thread softaff never wrote gets back: its vCPU's set in cmd, else cmd's set for the
 * other threads; NULL without a command. */
static const SaCpuSet *fallback_for(const SaCommand *cmd, const GArray *vcpu_tids, pid_t tid)
{
    if (!cmd)
        return NULL;
    for (guint i = 0; cmd->vcpus && i < cmd->n_vcpus && i < vcpu_tids->len; i++)
        if (g_array_index(vcpu_tids, pid_t, i) == tid)
            return cmd->vcpus[i];
    return cmd->others;
}

/* Remembers, in one write of the state file, the own affinity of every thread the command
 * changes that has none remembered yet. Called with vm->lock held. */
static void remember_all(QmpVm *vm, const SaCommand *cmd, const GArray *vcpu_tids,
                         const GArray *threads)
{
    bool added = false;
    for (guint i = 0; i < threads->len; i++) {
        pid_t tid = g_array_index(threads, pid_t, i);
        const SaCpuSet *want = fallback_for(cmd, vcpu_tids, tid);
        g_autoptr(SaCpuSet) cur = NULL;
        if (!want || g_hash_table_contains(vm->original, GINT_TO_POINTER(tid)) ||
            sa_thread_get_affinity(tid, &cur) != 0 || sa_cpuset_equal(cur, want))
            continue;
        g_hash_table_insert(vm->original, GINT_TO_POINTER(tid), g_steal_pointer(&cur));
        added = true;
    }
    if (added)
        save_originals(vm);
}

bool qmp_vm_pin(gpointer handle, const SaCommand *cmd, GError **error)
{
    QmpVm *vm = handle;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&vm->lock);
    if (vm->released) {
        g_set_error(error, SA_ERROR, SA_ERROR_GONE, "QEMU process %d is no longer watched over QMP",
                    (int)vm->pid);
        return false;
    }
    g_autoptr(GArray) threads = list_threads(vm, error);
    if (!threads)
        return false;
    const GArray *vcpu_tids = command_vcpu_tids(vm, cmd);
    remember_all(vm, cmd, vcpu_tids, threads);
    return pin_vcpus(vm, cmd, vcpu_tids, threads, error) &&
           (!cmd->others || pin_others(vm, cmd->others, vcpu_tids, threads, error));
}

/* Puts every thread's remembered affinity back, else the fallback (see fallback_for). Threads
 * that exited meanwhile are skipped. Once all are back, nothing is left to remember: the
 * memory and the process's entry in the state file are dropped, so that a later pin reads the
 * originals afresh. Called with vm->lock held. */
static bool put_back(QmpVm *vm, const SaCommand *cmd, GError **error)
{
    g_autoptr(GArray) threads = list_threads(vm, error);
    if (!threads)
        return false;
    const GArray *vcpu_tids = command_vcpu_tids(vm, cmd);
    for (guint i = 0; i < threads->len; i++) {
        pid_t tid = g_array_index(threads, pid_t, i);
        /* Points into vm->original: pin_thread without record adds nothing. */
        const SaCpuSet *want = g_hash_table_lookup(vm->original, GINT_TO_POINTER(tid));
        if (!want)
            want = fallback_for(cmd, vcpu_tids, tid);
        if (want && !pin_thread_if_alive(vm, tid, want, false, error))
            return false;
    }
    g_hash_table_remove_all(vm->original);
    save_originals(vm);
    return true;
}

bool qmp_vm_restore(gpointer handle, const SaCommand *cmd, GError **error)
{
    QmpVm *vm = handle;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&vm->lock);
    return put_back(vm, cmd, error);
}

bool qmp_vm_release(QmpVm *vm, GError **error)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&vm->lock);
    vm->released = true;
    if (put_back(vm, NULL, error))
        return true;
    /* The process exited while it was released (QEMU shutting down): nothing is left to give
     * back, and nothing to remember for a restarted daemon. */
    if (error && g_error_matches(*error, SA_ERROR, SA_ERROR_GONE)) {
        g_hash_table_remove_all(vm->original);
        save_originals(vm);
    }
    return false;
}

bool qmp_vm_write_assigned(gpointer handle, const SaCommand *cmd, GError **error)
{
    QmpVm *vm = handle;
    if (!cmd->settings) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE, "%s: write_assigned without settings",
                    cmd->name);
        return false;
    }
    qmp_homes_set(vm->homes, vm->path, cmd->settings->assigned);
    return true;
}
