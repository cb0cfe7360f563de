/* softaffd — the QMP backend.
 *
 * Every few seconds the [qmp] sockets globs are expanded; softaffd connects to each new
 * socket, negotiates QMP and asks query-name (the VM's name, else the socket path is used) and
 * query-cpus-fast (the thread id of every vCPU). The QEMU process is the socket's peer
 * (SO_PEERCRED). Settings come from the config's [vm NAME] group since there is no libvirt
 * metadata. Pinning is sched_setaffinity on each thread: the vCPU threads get the policy's
 * vCPU set, every other thread (main loop, I/O threads, workers) the home partition.
 *
 * Allowed set: the affinity of QEMU's main thread when softaffd first sees the process,
 * intersected with its cpuset cgroup. Each thread's own affinity is remembered before the first
 * write and put back by restore.
 *
 * The home chosen for preferred=auto (write_assigned) is kept in memory only, per socket: it
 * survives a QEMU reset and a configuration reload, not a restart of softaffd. A state file
 * would need a key that identifies the same QEMU process across daemon restarts (pid plus start
 * time) and would go stale whenever QEMU dies while softaffd is down; since the policy picks an
 * auto home again within one tick and the vCPUs' memory follows the home only on a home change,
 * losing it on restart costs little, while a stale file could pin a new process to a wrong home.
 */
#define G_LOG_DOMAIN "softaffd"

#include "backend-qmp.h"

#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>

#include "sa-error.h"
#include "sa-paths.h"
#include "sa-qmp.h"

#define RESCAN_MS 2000
#define GREETING_TIMEOUT_MS 5000
/* Wait before trying a socket again after a failure. */
#define RETRY_STALE_US (10 * G_USEC_PER_SEC)
#define RETRY_BUSY_US (30 * G_USEC_PER_SEC)
#define RETRY_ERROR_US (5 * G_USEC_PER_SEC)
/* After a connection closed while QEMU seemed to run: wait this long before deciding. */
#define LOST_GRACE_MS 300

struct SaQmp {
    SaDaemon *d;
    GHashTable *conns;       /* socket path -> Conn* */
    GHashTable *retry_after; /* socket path -> gint64* monotonic time */
    GHashTable *assigned;    /* socket path -> home chosen for preferred=auto (GINT_TO_POINTER+1) */
    GSList *lost;            /* LostConn*: closed connections waiting for a verdict */
    guint rescan_source;
    bool closing;
};

/* One QMP connection (one QEMU process). */
typedef struct {
    SaQmp *q;
    char *path;
    char *key; /* "qmp:" + path, the SaVm key */
    SaQmpClient *client;
    pid_t pid;
    char *name;
    GArray *vcpu_tids; /* pid_t by cpu-index, 0 where unknown; NULL until known */
    bool querying;     /* query-name/query-cpus-fast in flight */
    bool shut_down;    /* SHUTDOWN seen: the VM is forgotten until it runs again */
} Conn;

/* Per-VM backend data. */
typedef struct {
    SaQmp *q;
    char *path;
    GArray *vcpu_tids;    /* pid_t by vCPU index */
    GHashTable *original; /* tid -> SaCpuSet*: the thread's affinity before softaff's first write */
    char *denied;         /* a permanent pinning error (EPERM), handled at the next rescan */
} QmpVm;

static void qmp_vm_free(gpointer p)
{
    QmpVm *qv = p;
    g_free(qv->path);
    g_array_unref(qv->vcpu_tids);
    g_hash_table_unref(qv->original);
    g_free(qv->denied);
    g_free(qv);
}

/* ---- thread affinity ---------------------------------------------------------------------- */

typedef struct {
    cpu_set_t *set;
    size_t size;
} CpuMask;

static void mask_init(CpuMask *m)
{
    m->set = CPU_ALLOC(SA_CPUSET_MAX);
    m->size = CPU_ALLOC_SIZE(SA_CPUSET_MAX);
    CPU_ZERO_S(m->size, m->set);
}

static void mask_clear(CpuMask *m)
{
    CPU_FREE(m->set);
}

static SaCpuSet *mask_to_cpuset(const CpuMask *m)
{
    SaCpuSet *s = sa_cpuset_new();
    for (guint c = 0; c < SA_CPUSET_MAX; c++)
        if (CPU_ISSET_S(c, m->size, m->set))
            sa_cpuset_add(s, c);
    return s;
}

static void mask_from_cpuset(CpuMask *m, const SaCpuSet *s)
{
    CPU_ZERO_S(m->size, m->set);
    for (int c = sa_cpuset_next(s, -1); c >= 0; c = sa_cpuset_next(s, c))
        CPU_SET_S((size_t)c, m->size, m->set);
}

/* Running, and not a zombie (an exited process whose parent has not reaped it yet). */
static bool process_alive(pid_t pid)
{
    if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
        return false;
    g_autofree char *path = sa_proc_path("%d/stat", (int)pid);
    g_autofree char *stat = NULL;
    if (!g_file_get_contents(path, &stat, NULL, NULL))
        return false;
    const char *end = strrchr(stat, ')');
    return end && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

static void set_errno_error(GError **error, pid_t pid, pid_t tid, int err, const char *what)
{
    SaErrorCode code = SA_ERROR_IO;
    if (err == ESRCH)
        code = process_alive(pid) ? SA_ERROR_TRANSIENT : SA_ERROR_GONE;
    else if (err == EPERM)
        code = SA_ERROR_UNSUPPORTED;
    else if (err == EINVAL)
        code = SA_ERROR_TRANSIENT; /* no allowed CPU online (cpuset changed under us) */
    g_set_error(error, SA_ERROR, code, "%s of thread %d of QEMU process %d: %s", what, tid, pid,
                g_strerror(err));
}

/* The thread's current affinity; NULL with SA_ERROR_* on failure. */
static SaCpuSet *read_affinity(pid_t pid, pid_t tid, GError **error)
{
    CpuMask m;
    mask_init(&m);
    SaCpuSet *s = NULL;
    if (sched_getaffinity(tid, m.size, m.set) == 0)
        s = mask_to_cpuset(&m);
    else
        set_errno_error(error, pid, tid, errno, "reading the affinity");
    mask_clear(&m);
    return s;
}

/* Gives tid the set want unless it already has it; remembers its own affinity first. */
static bool pin_thread(QmpVm *qv, pid_t pid, pid_t tid, const SaCpuSet *want, GError **error)
{
    g_autoptr(SaCpuSet) cur = read_affinity(pid, tid, error);
    if (!cur)
        return false;
    if (!g_hash_table_contains(qv->original, GINT_TO_POINTER(tid)))
        g_hash_table_insert(qv->original, GINT_TO_POINTER(tid), sa_cpuset_copy(cur));
    if (sa_cpuset_equal(cur, want))
        return true;
    CpuMask m;
    mask_init(&m);
    mask_from_cpuset(&m, want);
    int rc = sched_setaffinity(tid, m.size, m.set);
    int err = errno;
    mask_clear(&m);
    if (rc < 0) {
        set_errno_error(error, pid, tid, err, "setting the affinity");
        return false;
    }
    return true;
}

static bool is_vcpu_tid(const GArray *tids, pid_t tid)
{
    for (guint i = 0; i < tids->len; i++)
        if (g_array_index(tids, pid_t, i) == tid)
            return true;
    return false;
}

/* Other threads come and go (thread pools): one that exited is no error. */
static bool pin_other_threads(QmpVm *qv, SaVm *vm, GHashTable *per_tid, const SaCpuSet *fallback,
                              GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(GArray) tids = sa_process_list_threads(vm->pid, &local);
    if (!tids) {
        g_set_error(error, SA_ERROR, process_alive(vm->pid) ? SA_ERROR_TRANSIENT : SA_ERROR_GONE,
                    "listing the threads of QEMU process %d: %s", vm->pid, local->message);
        return false;
    }
    for (guint i = 0; i < tids->len; i++) {
        pid_t tid = g_array_index(tids, pid_t, i);
        if (is_vcpu_tid(qv->vcpu_tids, tid))
            continue;
        const SaCpuSet *want = fallback;
        if (per_tid && g_hash_table_lookup(per_tid, GINT_TO_POINTER(tid)))
            want = g_hash_table_lookup(per_tid, GINT_TO_POINTER(tid));
        g_autoptr(GError) e = NULL;
        if (!pin_thread(qv, vm->pid, tid, want, &e)) {
            if (g_error_matches(e, SA_ERROR, SA_ERROR_TRANSIENT) && process_alive(vm->pid))
                continue; /* that thread exited */
            g_propagate_error(error, g_steal_pointer(&e));
            return false;
        }
    }
    return true;
}

static void note_denied(QmpVm *qv, const GError *e)
{
    if (g_error_matches(e, SA_ERROR, SA_ERROR_UNSUPPORTED) && !qv->denied)
        qv->denied = g_strdup(e->message);
}

static bool qmp_apply(SaDaemon *d, SaVm *vm, const SaCpuSet *vcpus, const SaCpuSet *emulator,
                      GError **error)
{
    QmpVm *qv = vm->backend_data;
    for (guint i = 0; i < qv->vcpu_tids->len; i++) {
        pid_t tid = g_array_index(qv->vcpu_tids, pid_t, i);
        if (tid <= 0)
            continue;
        g_autoptr(GError) e = NULL;
        if (!pin_thread(qv, vm->pid, tid, vcpus, &e)) {
            /* A vCPU thread that exited while QEMU runs: unplugged, ask QEMU again. */
            if (g_error_matches(e, SA_ERROR, SA_ERROR_TRANSIENT))
                vm->threads_stale = true;
            note_denied(qv, e);
            g_propagate_error(error, g_steal_pointer(&e));
            return false;
        }
    }
    g_autoptr(GError) e = NULL;
    if (!pin_other_threads(qv, vm, NULL, emulator, &e)) {
        note_denied(qv, e);
        g_propagate_error(error, g_steal_pointer(&e));
        return false;
    }
    return true;
}

static bool qmp_restore(SaDaemon *d, SaVm *vm, GError **error)
{
    QmpVm *qv = vm->backend_data;
    const SaCpuSet *fallback = vm->emulator_allowed ? vm->emulator_allowed : vm->allowed;
    for (guint i = 0; i < qv->vcpu_tids->len; i++) {
        pid_t tid = g_array_index(qv->vcpu_tids, pid_t, i);
        if (tid <= 0)
            continue;
        const SaCpuSet *want = g_hash_table_lookup(qv->original, GINT_TO_POINTER(tid));
        g_autoptr(GError) e = NULL;
        if (!pin_thread(qv, vm->pid, tid, want ? want : fallback, &e)) {
            if (g_error_matches(e, SA_ERROR, SA_ERROR_TRANSIENT))
                continue; /* this vCPU is gone, the others are not */
            g_propagate_error(error, g_steal_pointer(&e));
            return false;
        }
    }
    g_autoptr(GHashTable) original = g_hash_table_ref(qv->original);
    return pin_other_threads(qv, vm, original, fallback, error);
}

static bool qmp_write_assigned(SaDaemon *d, SaVm *vm, int home, GError **error)
{
    QmpVm *qv = vm->backend_data;
    g_hash_table_insert(qv->q->assigned, g_strdup(qv->path), GINT_TO_POINTER(home + 1));
    return true;
}

static const SaBackendOps qmp_ops = {
    .name = "qmp",
    .apply = qmp_apply,
    .restore = qmp_restore,
    .write_assigned = qmp_write_assigned,
};

/* ---- the allowed set ---------------------------------------------------------------------- */

/* The effective CPUs of the process's cpuset cgroup (v2, else v1), NULL when there is none. */
static SaCpuSet *read_cgroup_cpus(pid_t pid)
{
    g_autofree char *path = sa_proc_path("%d/cgroup", (int)pid);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    SaCpuSet *v1 = NULL, *v2 = NULL;
    for (char **l = lines; *l; l++) {
        g_auto(GStrv) f = g_strsplit(*l, ":", 3);
        if (g_strv_length(f) != 3)
            continue;
        g_autofree char *file = NULL;
        if (g_str_equal(f[0], "0") && f[1][0] == '\0' && !v2)
            file = sa_sysfs_path("fs/cgroup%s/cpuset.cpus.effective",
                                 g_str_equal(f[2], "/") ? "" : f[2]);
        else if (strstr(f[1], "cpuset") && !v1)
            file = sa_sysfs_path("fs/cgroup/cpuset%s/cpuset.effective_cpus",
                                 g_str_equal(f[2], "/") ? "" : f[2]);
        if (!file)
            continue;
        SaCpuSet *s = sa_read_cpulist(file, NULL);
        if (s && sa_cpuset_is_empty(s))
            g_clear_pointer(&s, sa_cpuset_free);
        if (g_str_equal(f[0], "0"))
            v2 = s;
        else
            v1 = s;
    }
    if (v1 && v2) {
        sa_cpuset_intersect(v2, v1);
        sa_cpuset_free(v1);
        return v2;
    }
    return v2 ? v2 : v1;
}

/* ---- VMs in the daemon -------------------------------------------------------------------- */

static void conn_forget(Conn *c, bool restore)
{
    SaDaemon *d = c->q->d;
    if (sa_daemon_lookup(d, c->key))
        sa_daemon_remove(d, c->key, restore);
}

/* Applies the [vm NAME] settings and decides whether the VM is managed. */
static void evaluate(SaQmp *q, SaVm *vm)
{
    SaDaemon *d = q->d;
    const SaVmConfig *vc = sa_config_find_vm(d->cfg, vm->name);
    QmpVm *qv = vm->backend_data;
    sa_metadata_init(&vm->metadata);
    vm->has_metadata = vc != NULL;
    if (vc) {
        vm->metadata.mode = vc->mode;
        vm->metadata.preferred = vc->preferred;
        vm->metadata.softness = vc->softness;
    }
    gpointer assigned = g_hash_table_lookup(q->assigned, qv->path);
    if (assigned && vm->metadata.preferred < 0)
        vm->metadata.assigned = GPOINTER_TO_INT(assigned) - 1;
    g_autoptr(GError) error = NULL;
    if (!sa_metadata_check_host(&vm->metadata, d->topo, &error)) {
        if (vm->metadata.assigned >= 0 && vm->metadata.preferred < 0) {
            /* A home chosen under an older layout: choose again. */
            vm->metadata.assigned = -1;
            g_hash_table_remove(q->assigned, qv->path);
            g_clear_error(&error);
        }
        if (error || !sa_metadata_check_host(&vm->metadata, d->topo, &error)) {
            g_autofree char *why =
                g_strdup_printf("%s: [vm %s] %s", d->cfg->path ? d->cfg->path : "configuration",
                                vm->name, error->message);
            sa_vm_set_status(d, vm, SA_VM_INVALID, why);
            return;
        }
    }
    vm->written_assigned = vm->metadata.assigned;
    if (vc && vc->mode == SA_MODE_OFF) {
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED, "its [vm NAME] group says mode=off");
        return;
    }
    if (!vc && d->cfg->manage == SA_MANAGE_EXPLICIT) {
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED, "no [vm NAME] group and manage=explicit");
        return;
    }
    if (qv->denied) {
        g_autofree char *why = g_strdup_printf("softaffd may not pin its threads: %s", qv->denied);
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED, why);
        return;
    }
    if (sa_cpuset_is_empty(vm->allowed)) {
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED, "its allowed set has no online CPU");
        return;
    }
    g_autofree char *allowed = sa_cpuset_format(vm->allowed);
    g_autofree char *why = g_strdup_printf("mode %s, allowed CPUs %s, QEMU pid %d%s",
                                           sa_mode_to_string(vm->metadata.mode), allowed, vm->pid,
                                           vc ? "" : " (config defaults)");
    sa_vm_set_status(d, vm, SA_VM_MANAGED, why);
}

/* Gives the core the vCPU threads QEMU reported (its thread names may not say "CPU n/..."). */
static void set_vcpu_threads(SaVm *vm, const GArray *tids)
{
    QmpVm *qv = vm->backend_data;
    g_array_set_size(qv->vcpu_tids, 0);
    g_array_append_vals(qv->vcpu_tids, tids->data, tids->len);
    vm->n_vcpus = tids->len;
    g_ptr_array_set_size(vm->vcpu_threads, 0);
    g_ptr_array_set_size(vm->vcpu_threads, vm->n_vcpus);
    for (guint i = 0; i < tids->len; i++) {
        pid_t tid = g_array_index(tids, pid_t, i);
        if (tid > 0)
            g_ptr_array_index(vm->vcpu_threads, i) = sa_thread_sampler_new(vm->pid, tid, NULL);
    }
    g_array_set_size(vm->prev_samples, vm->n_vcpus);
    g_array_set_size(vm->deltas, vm->n_vcpus);
    vm->have_prev = false;
    vm->threads_stale = false;
}

static void register_vm(Conn *c)
{
    SaQmp *q = c->q;
    SaDaemon *d = q->d;
    SaVm *vm = sa_daemon_lookup(d, c->key);
    if (vm && vm->pid != c->pid) {
        sa_daemon_remove(d, c->key, false);
        vm = NULL;
    }
    if (!vm) {
        vm = sa_vm_new(c->key, c->name, &qmp_ops);
        QmpVm *qv = g_new0(QmpVm, 1);
        qv->q = q;
        qv->path = g_strdup(c->path);
        qv->vcpu_tids = g_array_new(FALSE, TRUE, sizeof(pid_t));
        qv->original = g_hash_table_new_full(NULL, NULL, NULL, (GDestroyNotify)sa_cpuset_free);
        vm->backend_data = qv;
        vm->backend_free = qmp_vm_free;
        vm->pid = c->pid;
        vm = sa_daemon_add(d, vm);

        /* The allowed set: the main thread's own affinity, within the process's cpuset. */
        g_autoptr(GError) error = NULL;
        g_autoptr(SaCpuSet) own = read_affinity(c->pid, c->pid, &error);
        if (!own) {
            g_info("%s: %s", c->name, error->message);
            own = sa_cpuset_copy(d->topo->online);
        }
        vm->emulator_allowed = sa_cpuset_copy(own);
        vm->allowed = sa_cpuset_copy(own);
        g_autoptr(SaCpuSet) cg = read_cgroup_cpus(c->pid);
        if (cg)
            sa_cpuset_intersect(vm->allowed, cg);
        sa_cpuset_intersect(vm->allowed, d->topo->online);
        g_info("%s: found QEMU process %d over QMP (%s, %u vCPUs)", c->name, c->pid, c->path,
               c->vcpu_tids->len);
    }
    set_vcpu_threads(vm, c->vcpu_tids);
    evaluate(q, vm);
}

/* ---- QMP conversation --------------------------------------------------------------------- */

static void conn_free(gpointer p)
{
    Conn *c = p;
    sa_qmp_client_unref(c->client);
    if (c->vcpu_tids)
        g_array_unref(c->vcpu_tids);
    g_free(c->name);
    g_free(c->path);
    g_free(c->key);
    g_free(c);
}

static void retry_later(SaQmp *q, const char *path, gint64 delay_us)
{
    gint64 *when = g_new(gint64, 1);
    *when = g_get_monotonic_time() + delay_us;
    g_hash_table_insert(q->retry_after, g_strdup(path), when);
}

static void maybe_register(Conn *c)
{
    if (c->querying || !c->name || !c->vcpu_tids || c->shut_down)
        return;
    if (c->pid <= 0) {
        g_warning("%s: the QEMU process behind %s is unknown (no SO_PEERCRED); not managed",
                  c->name, c->path);
        return;
    }
    register_vm(c);
}

static void on_name(SaQmpClient *client, json_object *result, const GError *error,
                    gpointer user_data)
{
    Conn *c = user_data;
    if (error) {
        if (c->client && !sa_qmp_client_is_closed(client))
            g_debug("%s: query-name: %s; naming it after its socket", c->path, error->message);
        if (g_error_matches(error, SA_ERROR, SA_ERROR_GONE))
            return;
    }
    json_object *name = NULL;
    g_free(c->name);
    if (result && json_object_object_get_ex(result, "name", &name) &&
        json_object_is_type(name, json_type_string) && json_object_get_string_len(name) > 0)
        c->name = g_strdup(json_object_get_string(name));
    else
        c->name = g_strdup(c->path);
}

static void on_cpus(SaQmpClient *client, json_object *result, const GError *error,
                    gpointer user_data)
{
    Conn *c = user_data;
    c->querying = false;
    if (error) {
        if (!g_error_matches(error, SA_ERROR, SA_ERROR_GONE))
            g_warning("%s: cannot list its vCPU threads: %s", c->path, error->message);
        return;
    }
    g_autoptr(GArray) tids = g_array_new(FALSE, TRUE, sizeof(pid_t));
    bool ok = json_object_is_type(result, json_type_array);
    for (size_t i = 0; ok && i < json_object_array_length(result); i++) {
        json_object *cpu = json_object_array_get_idx(result, i);
        json_object *idx = NULL, *tid = NULL;
        if (!json_object_object_get_ex(cpu, "cpu-index", &idx) ||
            !json_object_object_get_ex(cpu, "thread-id", &tid) ||
            !json_object_is_type(idx, json_type_int) || !json_object_is_type(tid, json_type_int)) {
            ok = false;
            break;
        }
        gint64 index = json_object_get_int64(idx);
        gint64 thread = json_object_get_int64(tid);
        if (index < 0 || index >= SA_CPUSET_MAX || thread <= 0 || thread > G_MAXINT) {
            ok = false;
            break;
        }
        if ((guint)index >= tids->len)
            g_array_set_size(tids, (guint)index + 1);
        g_array_index(tids, pid_t, index) = (pid_t)thread;
    }
    if (!ok || tids->len == 0) {
        g_warning("%s: query-cpus-fast gave no usable cpu-index/thread-id list", c->path);
        return;
    }
    if (c->vcpu_tids)
        g_array_unref(c->vcpu_tids);
    c->vcpu_tids = g_steal_pointer(&tids);
    maybe_register(c);
}

static void query(Conn *c)
{
    if (c->querying)
        return;
    c->querying = true;
    sa_qmp_client_execute(c->client, "query-name", NULL, on_name, c);
    sa_qmp_client_execute(c->client, "query-cpus-fast", NULL, on_cpus, c);
}

static void on_ready(SaQmpClient *client, gpointer user_data)
{
    Conn *c = user_data;
    g_debug("%s: QMP session ready (QEMU pid %d)", c->path, c->pid);
    query(c);
}

static void on_event(SaQmpClient *client, const char *event, json_object *data, gpointer user_data)
{
    Conn *c = user_data;
    if (g_str_equal(event, "SHUTDOWN")) {
        SaVm *vm = sa_daemon_lookup(c->q->d, c->key);
        json_object *reason = NULL;
        if (vm)
            g_info("%s: shut down (%s); forgotten", vm->name,
                   data && json_object_object_get_ex(data, "reason", &reason)
                       ? json_object_get_string(reason)
                       : "SHUTDOWN event");
        c->shut_down = true;
        conn_forget(c, true);
    } else if (g_str_equal(event, "RESET") || g_str_equal(event, "RESUME")) {
        /* Runs again after a shutdown (-no-shutdown), or its vCPUs may have been re-created. */
        if (c->shut_down || !sa_daemon_lookup(c->q->d, c->key)) {
            c->shut_down = false;
            query(c);
        }
    } else if (g_str_equal(event, "DEVICE_DELETED") || g_str_equal(event, "ACPI_DEVICE_OST")) {
        query(c); /* maybe a vCPU unplugged or plugged */
    }
}

/* A closed connection whose process looked alive: decided a moment later, since QEMU closes
 * its sockets while it exits, before it becomes a zombie. */
typedef struct {
    SaQmp *q;
    char *key;
    char *path;
    char *why;
    pid_t pid;
    guint source;
} LostConn;

static void lost_conn_free(gpointer p)
{
    LostConn *l = p;
    if (l->source)
        g_source_remove(l->source);
    g_free(l->key);
    g_free(l->path);
    g_free(l->why);
    g_free(l);
}

static gboolean judge_lost(gpointer data)
{
    LostConn *l = data;
    SaQmp *q = l->q;
    bool alive = process_alive(l->pid);
    SaVm *vm = sa_daemon_lookup(q->d, l->key);
    /* A new connection to the same socket may have registered the VM again meanwhile. */
    if (vm && !g_hash_table_contains(q->conns, l->path)) {
        if (alive)
            g_warning("%s: QMP connection lost (%s); forgotten until it reconnects", vm->name,
                      l->why);
        else
            g_info("%s: QEMU process %d exited; forgotten", vm->name, l->pid);
        sa_daemon_remove(q->d, l->key, alive);
    }
    if (alive)
        retry_later(q, l->path, RETRY_ERROR_US);
    q->lost = g_slist_remove(q->lost, l);
    l->source = 0;
    lost_conn_free(l);
    return G_SOURCE_REMOVE;
}

static void on_closed(SaQmpClient *client, const GError *error, gpointer user_data)
{
    Conn *c = user_data;
    SaQmp *q = c->q;
    if (q->closing)
        return;
    SaVm *vm = sa_daemon_lookup(q->d, c->key);
    if (g_error_matches(error, SA_ERROR, SA_ERROR_TRANSIENT)) {
        g_info("%s: %s; trying again later", c->path, error->message);
        retry_later(q, c->path, RETRY_BUSY_US);
    } else if (!vm) {
        g_debug("%s: %s", c->path, error->message);
    }
    if (vm && !process_alive(c->pid)) {
        g_info("%s: QEMU process %d exited; forgotten", vm->name, c->pid);
        conn_forget(c, false);
    } else if (vm || process_alive(c->pid)) {
        LostConn *l = g_new0(LostConn, 1);
        l->q = q;
        l->key = g_strdup(c->key);
        l->path = g_strdup(c->path);
        l->why = g_strdup(error->message);
        l->pid = c->pid;
        q->lost = g_slist_prepend(q->lost, l);
        l->source = g_timeout_add(LOST_GRACE_MS, judge_lost, l);
    }
    g_hash_table_remove(q->conns, c->path); /* frees c */
}

static void connect_socket(SaQmp *q, const char *path)
{
    static const SaQmpHandlers handlers = {
        .ready = on_ready,
        .event = on_event,
        .closed = on_closed,
    };
    Conn *c = g_new0(Conn, 1);
    c->q = q;
    c->path = g_strdup(path);
    c->key = g_strdup_printf("qmp:%s", path);
    g_autoptr(GError) error = NULL;
    c->client = sa_qmp_client_connect(path, &handlers, c, &error);
    if (!c->client) {
        if (g_error_matches(error, SA_ERROR, SA_ERROR_NOT_FOUND)) {
            g_debug("%s: nothing listens (stale socket?): %s", path, error->message);
            retry_later(q, path, RETRY_STALE_US);
        } else {
            g_info("%s: %s", path, error->message);
            retry_later(q, path, RETRY_ERROR_US);
        }
        conn_free(c);
        return;
    }
    c->pid = sa_qmp_client_get_peer_pid(c->client);
    sa_qmp_client_set_greeting_timeout(c->client, GREETING_TIMEOUT_MS);
    g_hash_table_insert(q->conns, c->path, c);
}

static bool matches_config(SaQmp *q, const char *path)
{
    for (char **g = q->d->cfg->qmp_sockets; g && *g; g++)
        if (fnmatch(*g, path, FNM_PATHNAME) == 0)
            return true;
    return false;
}

static void rescan(SaQmp *q)
{
    gint64 now = g_get_monotonic_time();
    for (char **g = q->d->cfg->qmp_sockets; g && *g; g++) {
        glob_t gl = {0};
        if (glob(*g, GLOB_NOSORT, NULL, &gl) != 0) {
            globfree(&gl);
            continue;
        }
        for (size_t i = 0; i < gl.gl_pathc; i++) {
            const char *path = gl.gl_pathv[i];
            struct stat st;
            if (g_hash_table_contains(q->conns, path) || stat(path, &st) < 0 ||
                !S_ISSOCK(st.st_mode))
                continue;
            gint64 *when = g_hash_table_lookup(q->retry_after, path);
            if (when && now < *when)
                continue;
            g_hash_table_remove(q->retry_after, path);
            connect_socket(q, path);
        }
        globfree(&gl);
    }
    /* VMs whose threads changed, or that may not be pinned. */
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, q->conns);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        Conn *c = value;
        SaVm *vm = sa_daemon_lookup(q->d, c->key);
        if (!vm) {
            /* Not registered yet, or dropped by the core (a vCPU thread vanished): ask again. */
            if (c->vcpu_tids && c->pid > 0 && !c->shut_down && sa_qmp_client_is_ready(c->client))
                query(c);
            continue;
        }
        QmpVm *qv = vm->backend_data;
        if (vm->threads_stale && sa_qmp_client_is_ready(c->client))
            query(c);
        if (qv->denied && vm->status == SA_VM_MANAGED)
            evaluate(q, vm);
    }
}

static gboolean rescan_cb(gpointer data)
{
    rescan(data);
    return G_SOURCE_CONTINUE;
}

void sa_qmp_sync(SaQmp *q)
{
    g_autoptr(GPtrArray) drop = g_ptr_array_new();
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, q->conns);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        Conn *c = value;
        if (!matches_config(q, c->path)) {
            g_ptr_array_add(drop, c);
            continue;
        }
        SaVm *vm = sa_daemon_lookup(q->d, c->key);
        if (vm)
            evaluate(q, vm);
    }
    for (guint i = 0; i < drop->len; i++) {
        Conn *c = g_ptr_array_index(drop, i);
        g_info("%s: no longer in [qmp] sockets; released", c->path);
        conn_forget(c, true);
        q->closing = true;
        g_hash_table_remove(q->conns, c->path);
        q->closing = false;
    }
    g_hash_table_remove_all(q->retry_after);
    rescan(q);
}

void sa_qmp_start(SaQmp *q)
{
    rescan(q);
    if (!q->rescan_source)
        q->rescan_source = g_timeout_add(RESCAN_MS, rescan_cb, q);
}

SaQmp *sa_qmp_new(SaDaemon *d)
{
    SaQmp *q = g_new0(SaQmp, 1);
    q->d = d;
    q->conns = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, conn_free);
    q->retry_after = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    q->assigned = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    return q;
}

void sa_qmp_free(SaQmp *q)
{
    if (!q)
        return;
    q->closing = true;
    if (q->rescan_source)
        g_source_remove(q->rescan_source);
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, q->conns);
    while (g_hash_table_iter_next(&it, NULL, &value))
        conn_forget(value, false);
    g_slist_free_full(q->lost, lost_conn_free);
    g_hash_table_unref(q->conns);
    g_hash_table_unref(q->retry_after);
    g_hash_table_unref(q->assigned);
    g_free(q);
}
