/* softaffd — the QMP backend, main-thread side: finding QEMU processes and telling the core.
 *
 * Every few seconds the [qmp] sockets globs are expanded; softaffd connects to each new
 * socket, negotiates QMP and asks query-name (the VM's name, else the socket path is used) and
 * query-cpus-fast (the thread id of every vCPU). The QEMU process is the socket's peer
 * (SO_PEERCRED). Settings come from the config's [vm NAME] group since there is no libvirt
 * metadata. All of that is reported to the core as facts (sa_core_report); the core decides
 * whether the VM is managed and sends commands, which qmp-vm.c carries out on its workers.
 *
 * Trust. softaffd pins, as root, the threads QMP names, so it believes a socket only as far as
 * nobody but root and the socket's owner can replace it (sa_path_dirs_trusted, unless [qmp]
 * trust_writable_dirs=true), and it pins only threads of the process listening on it: a vCPU
 * thread id that is not one of them (/proc/PID/task/TID) is refused with one warning, and the
 * VM is not reported (so not managed) until QEMU names only threads of its own. Skipping just
 * that thread would manage a VM whose QEMU gives false answers, with a vCPU left unaccounted.
 *
 * The VM's own settings, read once per connection: the original affinity of QEMU's main thread
 * (its emulator set: the one in the state file for this very process, else the current one),
 * within its cpuset cgroup for the vCPUs.
 *
 * The home chosen for preferred=auto (write_assigned) is kept in memory only, per socket: it
 * survives a QEMU reset and a configuration reload, not a restart of softaffd. Unlike the
 * original affinities (qmp-state.h), which only a file can keep once softaff's pins replaced
 * them, an auto home is picked again within one tick, and the vCPUs' memory follows the home
 * only on a home change: losing it on restart costs little.
 *
 * Everything here runs on the main thread. A VM the core is told to forget while its process
 * still runs (shut down under -no-shutdown, QMP connection lost, socket dropped from the config)
 * gets its threads' own affinity back here, since no later restore will reach it. */
#define G_LOG_DOMAIN "softaffd"

#include "backend-qmp.h"

#include <fnmatch.h>
#include <glob.h>
#include <string.h>
#include <sys/stat.h>

#include "qmp-state.h"
#include "qmp-vm.h"
#include "sa-error.h"
#include "sa-paths.h"
#include "sa-proctask.h"
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
    SaCore *core;
    GHashTable *conns;       /* socket path -> Conn* */
    GHashTable *retry_after; /* socket path -> gint64* monotonic time */
    QmpHomes *homes;         /* assigned homes per socket, shared with the handles */
    QmpState *state;         /* original affinities on disk, shared with the handles */
    GHashTable *refused;     /* socket path -> why, for sockets in untrusted directories at
                                the last scan: each logged once */
    GSList *lost;            /* LostConn*: closed connections waiting for a verdict */
    guint rescan_source;
    bool closing;
};

/* One QMP connection (one QEMU process). */
typedef struct {
    SaQmp *q;
    char *path;
    char *key; /* "qmp:" + path */
    SaQmpClient *client;
    pid_t pid;
    guint64 start_time; /* of pid when connected, 0 unknown */
    char *name;
    GArray *vcpu_tids;      /* pid_t by cpu-index, 0 where unknown; NULL until known */
    QmpVm *vm;              /* the handle, from the first report for as long as this lives */
    SaCpuSet *vcpu_cpuset;  /* at first sight: own affinity within the cpuset cgroup; or NULL */
    SaCpuSet *emulator_pin; /* at first sight: own affinity; or NULL */
    bool querying;          /* query-name/query-cpus-fast in flight */
    bool shut_down;         /* SHUTDOWN seen: forgotten until it runs again */
    bool reported;          /* the core knows the VM (reported and not forgotten since) */
    pid_t refused_tid;      /* a vCPU thread id of another process QMP gave last; 0 none */
} Conn;

static void query(Conn *c);

/* The core found a vCPU thread gone: ask QEMU for the current ones, which reports again. */
static void qmp_threads_lost(gpointer handle)
{
    QmpVm *vm = handle;
    if (vm->conn)
        query(vm->conn);
}

static const SaBackendOps qmp_ops = {
    .name = "qmp",
    .settings_name = "[vm NAME] group",
    .pin = qmp_vm_pin,
    .restore = qmp_vm_restore,
    .write_assigned = qmp_vm_write_assigned,
    .threads_lost = qmp_threads_lost,
    .handle_ref = qmp_vm_ref,
    .handle_unref = qmp_vm_unref,
};

/* ---- facts -------------------------------------------------------------------------------- */

/* The CPUs one line of /proc/PID/cgroup grants through a cpuset hierarchy (v2 "0::PATH", v1
 * "N:...cpuset...:PATH"), NULL when it is no such line or the file says nothing. */
static SaCpuSet *cgroup_line_cpus(const char *line)
{
    g_auto(GStrv) f = g_strsplit(line, ":", 3);
    if (g_strv_length(f) != 3)
        return NULL;
    const char *dir = g_str_equal(f[2], "/") ? "" : f[2];
    g_autofree char *file = NULL;
    if (g_str_equal(f[0], "0") && f[1][0] == '\0')
        file = sa_sysfs_path("fs/cgroup%s/cpuset.cpus.effective", dir);
    else if (strstr(f[1], "cpuset"))
        file = sa_sysfs_path("fs/cgroup/cpuset%s/cpuset.effective_cpus", dir);
    else
        return NULL;
    SaCpuSet *cpus = sa_read_cpulist(file, NULL);
    if (cpus && sa_cpuset_is_empty(cpus))
        g_clear_pointer(&cpus, sa_cpuset_free);
    return cpus;
}

/* The effective CPUs of the process's cpuset cgroups (v2 and v1), NULL when there is none. */
static SaCpuSet *read_cgroup_cpus(pid_t pid)
{
    g_autofree char *path = sa_proc_path("%d/cgroup", (int)pid);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    SaCpuSet *cpus = NULL;
    for (char **l = lines; *l; l++) {
        g_autoptr(SaCpuSet) more = cgroup_line_cpus(*l);
        if (more && cpus)
            sa_cpuset_intersect(cpus, more);
        else if (more)
            cpus = g_steal_pointer(&more);
    }
    return cpus;
}

/* Reads the VM's own settings when the connection first reports it. */
static void first_sight(Conn *c)
{
    g_autoptr(GError) error = NULL;
    c->emulator_pin = qmp_vm_original(c->vm, c->pid);
    if (!c->emulator_pin)
        c->emulator_pin = qmp_thread_affinity(c->pid, c->pid, &error);
    if (!c->emulator_pin)
        g_info("%s: %s", c->name, error->message);
    g_autoptr(SaCpuSet) cgroup = read_cgroup_cpus(c->pid);
    if (c->emulator_pin) {
        c->vcpu_cpuset = sa_cpuset_copy(c->emulator_pin);
        if (cgroup)
            sa_cpuset_intersect(c->vcpu_cpuset, cgroup);
    } else {
        c->vcpu_cpuset = g_steal_pointer(&cgroup);
    }
}

/* The [vm NAME] group and the home remembered for preferred=auto. An assigned home the host
 * lacks (chosen under an older layout) is dropped, so the core chooses again; a preferred one
 * it lacks makes the settings invalid. */
static void read_settings(SaQmp *q, const Conn *c, SaVmFacts *facts)
{
    const SaConfig *cfg = sa_core_config(q->core);
    const SaTopology *topo = sa_core_topology(q->core);
    const SaVmConfig *vc = sa_config_find_vm(cfg, c->name);
    SaMetadata *md = &facts->settings;
    sa_metadata_init(md);
    facts->has_settings = vc != NULL;
    if (vc) {
        md->mode = vc->mode;
        md->preferred = vc->preferred;
        md->softness = vc->softness;
    }
    if (md->preferred < 0)
        md->assigned = qmp_homes_get(q->homes, c->path);
    if (md->assigned >= 0 && sa_topology_find_partition(topo, (guint)md->assigned) < 0) {
        md->assigned = -1;
        qmp_homes_set(q->homes, c->path, -1);
    }
    g_autoptr(GError) error = NULL;
    if (!sa_metadata_check_host(md, topo, &error))
        facts->settings_error = g_strdup_printf(
            "%s: [vm %s] %s", cfg->path ? cfg->path : "configuration", c->name, error->message);
}

static SaVmFacts *conn_facts(const Conn *c)
{
    SaVmFacts *facts = sa_vm_facts_new(c->key, c->name);
    facts->pid = c->pid;
    facts->n_vcpus = c->vcpu_tids->len;
    facts->vcpu_tids = g_array_copy(c->vcpu_tids);
    facts->vcpu_cpuset = c->vcpu_cpuset ? sa_cpuset_copy(c->vcpu_cpuset) : NULL;
    facts->emulator_pin = c->emulator_pin ? sa_cpuset_copy(c->emulator_pin) : NULL;
    read_settings(c->q, c, facts);
    return facts;
}

/* Tells the core what the connection knows, with settings read again. */
static void report(Conn *c)
{
    if (!c->vm) {
        c->vm = qmp_vm_new(c->path, c->pid, c->start_time, c->q->homes, c->q->state);
        c->vm->conn = c;
        first_sight(c);
    }
    if (!c->reported)
        g_info("%s: found QEMU process %d over QMP (%s, %u vCPUs)", c->name, (int)c->pid, c->path,
               c->vcpu_tids->len);
    qmp_vm_update(c->vm, c->vcpu_tids);
    c->reported = true;
    sa_core_report(c->q->core, &qmp_ops, c->vm, conn_facts(c));
}

/* The core forgets the VM; when its process still runs, its threads get their own affinity
 * back, since nothing will restore them later. */
static void forget(SaQmp *q, const char *key, QmpVm *vm, const char *why)
{
    sa_core_forget(q->core, key, why);
    g_autoptr(GError) error = NULL;
    if (vm && qmp_process_alive(vm->pid) && !qmp_vm_release(vm, &error))
        g_info("%s: giving the threads their own affinity back: %s", vm->path, error->message);
    else if (vm && !qmp_process_alive(vm->pid))
        qmp_state_prune(q->state);
}

static void conn_forget(Conn *c, const char *why)
{
    if (!c->reported)
        return;
    c->reported = false;
    forget(c->q, c->key, c->vm, why);
}

/* ---- QMP conversation --------------------------------------------------------------------- */

static void conn_free(gpointer p)
{
    Conn *c = p;
    sa_qmp_client_unref(c->client);
    if (c->vm) {
        c->vm->conn = NULL;
        qmp_vm_unref(c->vm);
    }
    if (c->vcpu_tids)
        g_array_unref(c->vcpu_tids);
    sa_cpuset_free(c->vcpu_cpuset);
    sa_cpuset_free(c->emulator_pin);
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

/* The first vCPU thread id QMP gave that is not a thread of the socket's peer; 0 when all
 * are its own. */
static pid_t foreign_tid(const Conn *c, guint *vcpu)
{
    for (guint i = 0; i < c->vcpu_tids->len; i++) {
        pid_t tid = g_array_index(c->vcpu_tids, pid_t, i);
        if (tid > 0 && !sa_process_has_task(c->pid, tid)) {
            *vcpu = i;
            return tid;
        }
    }
    return 0;
}

/* QMP named a thread that is not QEMU's own: not reported (forgotten if it was, which gives
 * the process's own threads their affinity back), warned once per thread id. */
static void refuse(Conn *c, pid_t tid, guint vcpu)
{
    if (tid != c->refused_tid)
        g_warning("%s: QMP names thread %d as vCPU %u, but it is not a thread of QEMU process %d "
                  "(the socket's peer): refused, its affinity is left alone; %s is not managed",
                  c->path, (int)tid, vcpu, (int)c->pid, c->name);
    c->refused_tid = tid;
    g_autofree char *why = g_strdup_printf("QMP named thread %d, not a thread of QEMU process %d",
                                           (int)tid, (int)c->pid);
    conn_forget(c, why);
}

static void maybe_report(Conn *c)
{
    if (c->querying || !c->name || !c->vcpu_tids || c->shut_down)
        return;
    if (c->pid <= 0) {
        g_warning("%s: the QEMU process behind %s is unknown (no SO_PEERCRED); not managed",
                  c->name, c->path);
        return;
    }
    /* A process that exited has no threads at all: reported, its commands find it gone. */
    guint vcpu = 0;
    pid_t tid = foreign_tid(c, &vcpu);
    if (tid > 0 && qmp_process_alive(c->pid)) {
        refuse(c, tid, vcpu);
        return;
    }
    c->refused_tid = 0;
    report(c);
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

/* query-cpus-fast's reply as thread ids by cpu-index; NULL when it is not usable. */
static GArray *parse_vcpu_tids(json_object *result)
{
    if (!json_object_is_type(result, json_type_array) || json_object_array_length(result) == 0)
        return NULL;
    g_autoptr(GArray) tids = g_array_new(FALSE, TRUE, sizeof(pid_t));
    for (size_t i = 0; i < json_object_array_length(result); i++) {
        json_object *cpu = json_object_array_get_idx(result, i);
        json_object *idx = NULL, *tid = NULL;
        if (!json_object_object_get_ex(cpu, "cpu-index", &idx) ||
            !json_object_object_get_ex(cpu, "thread-id", &tid) ||
            !json_object_is_type(idx, json_type_int) || !json_object_is_type(tid, json_type_int))
            return NULL;
        gint64 index = json_object_get_int64(idx);
        gint64 thread = json_object_get_int64(tid);
        if (index < 0 || index >= SA_CPUSET_MAX || thread <= 0 || thread > G_MAXINT)
            return NULL;
        if ((guint)index >= tids->len)
            g_array_set_size(tids, (guint)index + 1);
        g_array_index(tids, pid_t, index) = (pid_t)thread;
    }
    return g_steal_pointer(&tids);
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
    GArray *tids = parse_vcpu_tids(result);
    if (!tids) {
        g_warning("%s: query-cpus-fast gave no usable cpu-index/thread-id list", c->path);
        return;
    }
    if (c->vcpu_tids)
        g_array_unref(c->vcpu_tids);
    c->vcpu_tids = tids;
    maybe_report(c);
}

static void query(Conn *c)
{
    if (c->querying || !sa_qmp_client_is_ready(c->client))
        return;
    c->querying = true;
    sa_qmp_client_execute(c->client, "query-name", NULL, on_name, c);
    sa_qmp_client_execute(c->client, "query-cpus-fast", NULL, on_cpus, c);
}

static void on_ready(SaQmpClient *client, gpointer user_data)
{
    Conn *c = user_data;
    g_debug("%s: QMP session ready (QEMU pid %d)", c->path, (int)c->pid);
    query(c);
}

static void on_event(SaQmpClient *client, const char *event, json_object *data, gpointer user_data)
{
    Conn *c = user_data;
    if (g_str_equal(event, "SHUTDOWN")) {
        json_object *reason = NULL;
        g_autofree char *why = g_strdup_printf(
            "shut down (%s)", data && json_object_object_get_ex(data, "reason", &reason)
                                  ? json_object_get_string(reason)
                                  : "SHUTDOWN event");
        c->shut_down = true;
        conn_forget(c, why);
    } else if (g_str_equal(event, "RESET") || g_str_equal(event, "RESUME")) {
        /* Runs again after a shutdown (-no-shutdown), or its vCPUs may have been re-created. */
        if (c->shut_down || !c->reported) {
            c->shut_down = false;
            query(c);
        }
    } else if (g_str_equal(event, "DEVICE_DELETED") || g_str_equal(event, "ACPI_DEVICE_OST")) {
        query(c); /* maybe a vCPU unplugged or plugged */
    }
}

/* A closed connection to a QEMU process that looked alive: decided a moment later, since QEMU
 * closes its sockets while it exits, before it becomes a zombie. Its socket is not tried again
 * until then. */
typedef struct {
    SaQmp *q;
    char *key;
    char *path;
    char *why;
    QmpVm *vm; /* a reference */
    guint source;
} LostConn;

static void lost_conn_free(gpointer p)
{
    LostConn *l = p;
    if (l->source)
        g_source_remove(l->source);
    qmp_vm_unref(l->vm);
    g_free(l->key);
    g_free(l->path);
    g_free(l->why);
    g_free(l);
}

static gboolean judge_lost(gpointer data)
{
    LostConn *l = data;
    SaQmp *q = l->q;
    l->source = 0;
    q->lost = g_slist_remove(q->lost, l);
    g_autofree char *why = NULL;
    if (qmp_process_alive(l->vm->pid)) {
        why = g_strdup_printf("QMP connection lost (%s); until it reconnects", l->why);
        retry_later(q, l->path, RETRY_ERROR_US);
    } else {
        why = g_strdup_printf("QEMU process %d exited", (int)l->vm->pid);
    }
    forget(q, l->key, l->vm, why);
    lost_conn_free(l);
    return G_SOURCE_REMOVE;
}

static void lose_later(Conn *c, const GError *error)
{
    LostConn *l = g_new0(LostConn, 1);
    l->q = c->q;
    l->key = g_strdup(c->key);
    l->path = g_strdup(c->path);
    l->why = g_strdup(error->message);
    l->vm = qmp_vm_ref(c->vm);
    l->source = g_timeout_add(LOST_GRACE_MS, judge_lost, l);
    c->q->lost = g_slist_prepend(c->q->lost, l);
}

static void on_closed(SaQmpClient *client, const GError *error, gpointer user_data)
{
    Conn *c = user_data;
    SaQmp *q = c->q;
    if (q->closing)
        return;
    bool alive = qmp_process_alive(c->pid);
    if (g_error_matches(error, SA_ERROR, SA_ERROR_TRANSIENT)) {
        g_info("%s: %s; trying again later", c->path, error->message);
        retry_later(q, c->path, RETRY_BUSY_US);
    } else if (!c->reported) {
        g_debug("%s: %s", c->path, error->message);
        if (alive)
            retry_later(q, c->path, RETRY_ERROR_US);
    }
    if (c->reported && alive) {
        lose_later(c, error);
    } else if (c->reported) {
        g_autofree char *why = g_strdup_printf("QEMU process %d exited", (int)c->pid);
        conn_forget(c, why);
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
    c->start_time = sa_process_start_time(c->pid);
    sa_qmp_client_set_greeting_timeout(c->client, GREETING_TIMEOUT_MS);
    g_hash_table_insert(q->conns, c->path, c);
}

/* ---- scanning ----------------------------------------------------------------------------- */

static bool matches_config(SaQmp *q, const char *path)
{
    const SaConfig *cfg = sa_core_config(q->core);
    for (char **g = cfg->qmp_sockets; g && *g; g++)
        if (fnmatch(*g, path, FNM_PATHNAME) == 0)
            return true;
    return false;
}

/* A socket not to try yet: it failed recently, or its last connection awaits a verdict. */
static bool waiting(SaQmp *q, const char *path, gint64 now)
{
    gint64 *when = g_hash_table_lookup(q->retry_after, path);
    if (when && now < *when)
        return true;
    for (GSList *l = q->lost; l; l = l->next)
        if (g_str_equal(((LostConn *)l->data)->path, path))
            return true;
    return false;
}

/* Whether nobody but root and the socket's owner can replace the socket, or the config trusts
 * writable directories; why not in *why. */
static bool socket_trusted(SaQmp *q, const char *path, const struct stat *st, char **why)
{
    g_autoptr(GError) error = NULL;
    if (sa_core_config(q->core)->qmp_trust_writable_dirs ||
        sa_path_dirs_trusted(path, st->st_uid, &error))
        return true;
    *why = g_strdup(error->message);
    return false;
}

/* A socket in an untrusted directory: logged when first found so (or for another reason),
 * then kept in refused until a scan no longer finds it so. */
static void refuse_socket(SaQmp *q, GHashTable *refused, const char *path, char *why)
{
    const char *before = g_hash_table_lookup(q->refused, path);
    if (g_strcmp0(before, why) != 0)
        g_warning("%s: refused: %s; whoever can write there could make softaffd pin threads of "
                  "any process ([qmp] trust_writable_dirs=true accepts it)",
                  path, why);
    g_hash_table_insert(refused, g_strdup(path), why);
}

static void consider_socket(SaQmp *q, GHashTable *refused, const char *path, gint64 now)
{
    struct stat st;
    char *why = NULL;
    if (g_hash_table_contains(q->conns, path) || stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
        return;
    if (!socket_trusted(q, path, &st, &why)) {
        refuse_socket(q, refused, path, why);
        return;
    }
    if (waiting(q, path, now))
        return;
    g_hash_table_remove(q->retry_after, path);
    connect_socket(q, path);
}

/* Drops the retry times that passed: sockets that went away must not pile up. */
static void drop_old_retries(SaQmp *q, gint64 now)
{
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, q->retry_after);
    while (g_hash_table_iter_next(&it, NULL, &value))
        if (*(gint64 *)value <= now)
            g_hash_table_iter_remove(&it);
}

/* Connections whose VM the core does not know: not reported yet (a query failed), or dropped
 * by the core (a command found the process gone): ask QEMU again. */
static void requery_unknown(SaQmp *q)
{
    g_autoptr(GPtrArray) keys = sa_core_list_keys(q->core, &qmp_ops);
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, q->conns);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        Conn *c = value;
        if (c->reported &&
            !(keys && g_ptr_array_find_with_equal_func(keys, c->key, g_str_equal, NULL)))
            c->reported = false;
        /* One refused waits for an event (RESET, a hot-plug) rather than asking every scan. */
        if (!c->reported && c->vcpu_tids && c->pid > 0 && !c->shut_down && !c->refused_tid)
            query(c);
    }
}

static void rescan(SaQmp *q)
{
    if (sa_core_is_stopping(q->core))
        return;
    const SaConfig *cfg = sa_core_config(q->core);
    gint64 now = g_get_monotonic_time();
    GHashTable *refused = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    drop_old_retries(q, now);
    for (char **g = cfg->qmp_sockets; g && *g; g++) {
        glob_t gl = {0};
        if (glob(*g, GLOB_NOSORT, NULL, &gl) == 0)
            for (size_t i = 0; i < gl.gl_pathc; i++)
                consider_socket(q, refused, gl.gl_pathv[i], now);
        globfree(&gl);
    }
    g_hash_table_unref(q->refused);
    q->refused = refused;
    requery_unknown(q);
}

static gboolean rescan_cb(gpointer data)
{
    rescan(data);
    return G_SOURCE_CONTINUE;
}

/* Why a connection is dropped after a reload, NULL to keep it. */
static char *drop_reason(SaQmp *q, const Conn *c)
{
    struct stat st;
    char *why = NULL;
    if (!matches_config(q, c->path))
        return g_strdup("no longer in [qmp] sockets; released");
    if (stat(c->path, &st) == 0 && !socket_trusted(q, c->path, &st, &why)) {
        g_autofree char *owned = why;
        return g_strdup_printf("its socket is refused now (%s); released", owned);
    }
    return NULL;
}

/* The state file follows the control socket; entries of processes gone are dropped. */
static void sync_state(SaQmp *q)
{
    qmp_state_set_socket(q->state, sa_core_config(q->core)->socket);
    qmp_state_prune(q->state);
}

void sa_qmp_sync(SaQmp *q)
{
    g_autoptr(GPtrArray) drop = g_ptr_array_new();
    g_autoptr(GPtrArray) why = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer value;
    sync_state(q);
    g_hash_table_iter_init(&it, q->conns);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        Conn *c = value;
        char *reason = drop_reason(q, c);
        if (reason) {
            g_ptr_array_add(drop, c);
            g_ptr_array_add(why, reason);
        } else if (c->reported) {
            report(c);
        }
    }
    for (guint i = 0; i < drop->len; i++) {
        Conn *c = g_ptr_array_index(drop, i);
        conn_forget(c, g_ptr_array_index(why, i));
        g_hash_table_remove(q->conns, c->path); /* closes it without callbacks */
    }
    g_hash_table_remove_all(q->retry_after);
    g_hash_table_remove_all(q->refused); /* logged again after a reload */
    rescan(q);
}

void sa_qmp_start(SaQmp *q)
{
    sync_state(q);
    rescan(q);
    if (!q->rescan_source)
        q->rescan_source = g_timeout_add(RESCAN_MS, rescan_cb, q);
}

SaQmp *sa_qmp_new(SaCore *core)
{
    SaQmp *q = g_new0(SaQmp, 1);
    q->core = core;
    q->conns = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, conn_free);
    q->retry_after = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    q->homes = qmp_homes_new();
    q->state = qmp_state_new();
    q->refused = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
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
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        Conn *c = value;
        if (c->reported)
            sa_core_forget(q->core, c->key, "the QMP backend stops");
    }
    for (GSList *l = q->lost; l; l = l->next)
        sa_core_forget(q->core, ((LostConn *)l->data)->key, "the QMP backend stops");
    g_slist_free_full(q->lost, lost_conn_free);
    g_hash_table_unref(q->conns);
    g_hash_table_unref(q->retry_after);
    qmp_homes_unref(q->homes);
    qmp_state_unref(q->state);
    g_hash_table_unref(q->refused);
    g_free(q);
}
