/* Unit tests of the QMP backend (qmp/backend-qmp.c, qmp/qmp-vm.c) without the daemon core.
 *
 * The sa_core_*() functions the backend calls are replaced by the fakes below, which record
 * what it reported and forgot (the test links the backend's library, not the core's). A
 * scripted fake QMP peer, a socket this test listens on, answers the backend's queries with the
 * thread ids of threads this test creates; as the socket's peer, the test process plays QEMU,
 * so pin and restore act on real threads whose affinity the test reads back from /proc. */
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "backend-qmp.h"
#include "qmp-state.h"
#include "qmp-vm.h"
#include "sa-error.h"
#include "sa-proctask.h"
#include "sa-sampler.h"

#define GREETING                                                                                   \
    "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, \"major\": 8}, "              \
    "\"package\": \"\"}, \"capabilities\": []}}\r\n"
#define TIMEOUT_MS 5000

/* ---- the core, faked ---------------------------------------------------------------------- */

typedef struct {
    const SaBackendOps *ops;
    gpointer handle; /* a reference, as the core would hold */
    SaVmFacts *facts;
} Report;

struct SaCore {
    SaConfig *cfg;
    SaTopology *topo;
    bool stopping;
    GPtrArray *reports;   /* Report*, in order */
    GPtrArray *forgotten; /* "KEY: WHY", in order */
    GHashTable *known;    /* key -> const SaBackendOps*: what sa_core_list_keys answers */
    guint discovers;
};

static void report_free(gpointer p)
{
    Report *r = p;
    r->ops->handle_unref(r->handle);
    sa_vm_facts_free(r->facts);
    g_free(r);
}

void sa_core_report(SaCore *core, const SaBackendOps *ops, gpointer handle, SaVmFacts *facts)
{
    Report *r = g_new0(Report, 1);
    r->ops = ops;
    r->handle = ops->handle_ref(handle);
    r->facts = facts;
    g_ptr_array_add(core->reports, r);
    g_hash_table_insert(core->known, g_strdup(facts->key), (gpointer)ops);
}

void sa_core_discover(SaCore *core, const SaBackendOps *ops, gpointer handle, const char *key,
                      const char *name)
{
    core->discovers++;
}

void sa_core_forget(SaCore *core, const char *key, const char *why)
{
    g_ptr_array_add(core->forgotten, g_strdup_printf("%s: %s", key, why));
    g_hash_table_remove(core->known, key);
}

GPtrArray *sa_core_list_keys(SaCore *core, const SaBackendOps *ops)
{
    GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, core->known);
    while (g_hash_table_iter_next(&it, &key, &value))
        if (value == ops)
            g_ptr_array_add(keys, g_strdup(key));
    return keys;
}

const SaConfig *sa_core_config(const SaCore *core)
{
    return core->cfg;
}

const SaTopology *sa_core_topology(const SaCore *core)
{
    return core->topo;
}

bool sa_core_is_stopping(const SaCore *core)
{
    return core->stopping;
}

/* ---- threads playing vCPUs ---------------------------------------------------------------- */

typedef struct {
    GThread *thread;
    pid_t tid;
    bool stop;
} TestThread;

static GMutex threads_lock;
static GCond threads_cond;

static gpointer test_thread_main(gpointer data)
{
    TestThread *t = data;
    g_mutex_lock(&threads_lock);
    t->tid = gettid();
    g_cond_broadcast(&threads_cond);
    while (!t->stop)
        g_cond_wait(&threads_cond, &threads_lock);
    g_mutex_unlock(&threads_lock);
    return NULL;
}

static TestThread *thread_start(void)
{
    TestThread *t = g_new0(TestThread, 1);
    t->thread = g_thread_new("test-vcpu", test_thread_main, t);
    g_mutex_lock(&threads_lock);
    while (t->tid == 0)
        g_cond_wait(&threads_cond, &threads_lock);
    g_mutex_unlock(&threads_lock);
    return t;
}

static void thread_stop(TestThread *t)
{
    if (!t)
        return;
    g_mutex_lock(&threads_lock);
    t->stop = true;
    g_cond_broadcast(&threads_cond);
    g_mutex_unlock(&threads_lock);
    g_thread_join(t->thread);
    g_free(t);
}

static SaCpuSet *thread_affinity(pid_t tid)
{
    g_autoptr(GError) error = NULL;
    SaCpuSet *set = sa_thread_read_allowed(getpid(), tid, &error);
    g_assert_no_error(error);
    return set;
}

static void assert_affinity(pid_t tid, const SaCpuSet *want, const char *what)
{
    g_autoptr(SaCpuSet) got = thread_affinity(tid);
    if (!sa_cpuset_equal(got, want)) {
        g_autofree char *g = sa_cpuset_format(got);
        g_autofree char *w = sa_cpuset_format(want);
        g_error("%s (thread %d): affinity %s, want %s", what, (int)tid, g, w);
    }
}

static void set_main_affinity(const SaCpuSet *set)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    for (int c = sa_cpuset_next(set, -1); c >= 0 && c < CPU_SETSIZE; c = sa_cpuset_next(set, c))
        CPU_SET(c, &mask);
    g_assert_cmpint(sched_setaffinity(0, sizeof(mask), &mask), ==, 0);
}

static SaCpuSet *one_cpu(int cpu)
{
    SaCpuSet *set = sa_cpuset_new();
    sa_cpuset_add(set, (guint)cpu);
    return set;
}

/* ---- fixture: config, topology, fake cgroup, listening socket ----------------------------- */

typedef struct {
    struct SaCore core;
    char *dir;
    char *path; /* the socket softaffd finds through the glob */
    char *key;
    int listener;
    int peer; /* the backend's connection, accepted; -1 */
    GString *in;
    SaQmp *q;
    SaCpuSet *own;        /* the test process's affinity at setup */
    SaCpuSet *granted;    /* what its fake cpuset cgroup files grant; NULL: none */
    int cpu0, cpu1;       /* two CPUs of own, cpu1 = -1 when it has one */
    SaCpuSet *c0, *c1;    /* {cpu0}, {cpu1} (NULL when there is no cpu1) */
    TestThread *vcpus[4]; /* the threads playing the guest's vCPUs; NULL once stopped */
} Fixture;

static Fixture *F;
/* SOFTAFF_SYSFS_ROOT of the whole run, set before any thread starts; holds the fake cgroups. */
static char *sysfs_root;

static bool remove_tree(const char *dir)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", dir);
    return system(cmd) == 0;
}

static void write_file(const char *path, const char *text)
{
    g_autofree char *dir = g_path_get_dirname(path);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_autoptr(GError) error = NULL;
    g_assert_true(g_file_set_contents(path, text, -1, &error));
}

/* One cpuset cgroup file per cpuset hierarchy of this process: v2 grants cpu0 alone, v1 all of
 * its own CPUs, so the vCPUs' set is own ∩ {cpu0} where a v2 line exists. */
static void fake_cgroup(const char *sysfs)
{
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents("/proc/self/cgroup", &text, NULL, NULL));
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        g_auto(GStrv) f = g_strsplit(*l, ":", 3);
        if (g_strv_length(f) != 3)
            continue;
        const char *dir = g_str_equal(f[2], "/") ? "" : f[2];
        g_autoptr(SaCpuSet) grant = NULL;
        g_autofree char *file = NULL;
        if (g_str_equal(f[0], "0") && f[1][0] == '\0') {
            file = g_strdup_printf("%s/fs/cgroup%s/cpuset.cpus.effective", sysfs, dir);
            grant = one_cpu(F->cpu0);
        } else if (strstr(f[1], "cpuset")) {
            file = g_strdup_printf("%s/fs/cgroup/cpuset%s/cpuset.effective_cpus", sysfs, dir);
            grant = sa_cpuset_copy(F->own);
        } else {
            continue;
        }
        g_autofree char *list = sa_cpuset_format(grant);
        write_file(file, list);
        if (F->granted)
            sa_cpuset_intersect(F->granted, grant);
        else
            F->granted = g_steal_pointer(&grant);
    }
}

/* Partitions 0 = {cpu0} and 1 = the rest of the test's CPUs (custom layout). */
static SaTopology *make_topology(void)
{
    SaTopology *topo = g_new0(SaTopology, 1);
    topo->layout = SA_LAYOUT_CUSTOM;
    topo->online = sa_cpuset_copy(F->own);
    topo->unplaced = sa_cpuset_new();
    topo->partitions = g_ptr_array_new();
    for (guint id = 0; id < 2; id++) {
        SaPartition *p = g_new0(SaPartition, 1);
        p->id = id;
        p->node = -1;
        p->cpus = id == 0 ? one_cpu(F->cpu0) : sa_cpuset_copy(F->own);
        if (id == 1)
            sa_cpuset_remove(p->cpus, (guint)F->cpu0);
        g_ptr_array_add(topo->partitions, p);
    }
    return topo;
}

static void free_topology(SaTopology *topo)
{
    for (guint i = 0; i < topo->partitions->len; i++) {
        SaPartition *p = g_ptr_array_index(topo->partitions, i);
        sa_cpuset_free(p->cpus);
        g_free(p);
    }
    sa_topology_free(topo);
}

static SaConfig *make_config(void)
{
    SaConfig *cfg = sa_config_new_default();
    cfg->path = g_strdup("/etc/softaff/test.conf");
    /* The state file goes beside the control socket: in the test's directory. */
    g_free(cfg->socket);
    cfg->socket = g_build_filename(F->dir, "run", "softaffd.sock", NULL);
    /* The test's directory is in $TMPDIR, writable by all: trusted here, refused in its own
     * tests. */
    cfg->qmp_trust_writable_dirs = true;
    g_strfreev(cfg->qmp_sockets);
    cfg->qmp_sockets = g_new0(char *, 2);
    cfg->qmp_sockets[0] = g_build_filename(F->dir, "*.qmp", NULL);
    SaVmConfig *vc = g_new0(SaVmConfig, 1);
    vc->name = g_strdup("guest-a");
    vc->mode = SA_MODE_SOFT;
    vc->preferred = 1;
    vc->softness = 30;
    g_ptr_array_add(cfg->vms, vc);
    return cfg;
}

/* A bound socket; listening unless the caller leaves that to another process. */
static int bind_socket(bool listen_now)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    g_assert_cmpuint(strlen(F->path), <, sizeof(addr.sun_path));
    strcpy(addr.sun_path, F->path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
    if (listen_now)
        g_assert_cmpint(listen(fd, 4), ==, 0);
    return fd;
}

static void fixture_setup(bool listen_now)
{
    F = g_new0(Fixture, 1);
    F->dir = g_dir_make_tmp("test-backend-qmp-XXXXXX", NULL);
    g_assert_nonnull(F->dir);
    F->path = g_build_filename(F->dir, "a.qmp", NULL);
    F->key = g_strdup_printf("qmp:%s", F->path);
    F->peer = -1;
    F->in = g_string_new(NULL);
    F->own = thread_affinity(getpid());
    F->cpu0 = sa_cpuset_next(F->own, -1);
    F->cpu1 = sa_cpuset_next(F->own, F->cpu0);
    F->c0 = one_cpu(F->cpu0);
    F->c1 = F->cpu1 >= 0 ? one_cpu(F->cpu1) : NULL;
    fake_cgroup(sysfs_root);
    F->core.cfg = make_config();
    F->core.topo = make_topology();
    F->core.reports = g_ptr_array_new_with_free_func(report_free);
    F->core.forgotten = g_ptr_array_new_with_free_func(g_free);
    F->core.known = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    F->listener = bind_socket(listen_now);
    F->q = sa_qmp_new(&F->core);
}

static void fixture_teardown(void)
{
    sa_qmp_free(F->q);
    for (guint i = 0; i < G_N_ELEMENTS(F->vcpus); i++)
        thread_stop(F->vcpus[i]);
    set_main_affinity(F->own);
    if (F->peer >= 0)
        close(F->peer);
    close(F->listener);
    g_ptr_array_unref(F->core.reports);
    g_ptr_array_unref(F->core.forgotten);
    g_hash_table_unref(F->core.known);
    sa_config_free(F->core.cfg);
    free_topology(F->core.topo);
    sa_cpuset_free(F->own);
    sa_cpuset_free(F->granted);
    sa_cpuset_free(F->c0);
    sa_cpuset_free(F->c1);
    g_string_free(F->in, TRUE);
    g_assert_true(remove_tree(F->dir));
    g_free(F->dir);
    g_free(F->path);
    g_free(F->key);
    g_clear_pointer(&F, g_free);
    while (g_main_context_iteration(NULL, FALSE))
        ;
}

/* ---- the fake QMP peer -------------------------------------------------------------------- */

static void pump_until(bool (*done)(void), const char *what)
{
    gint64 end = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    while (!done()) {
        if (g_get_monotonic_time() > end)
            g_error("timed out waiting for %s", what);
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    }
}

static void peer_accept(void)
{
    struct pollfd pfd = {F->listener, POLLIN, 0};
    gint64 end = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    while (poll(&pfd, 1, 5) != 1) {
        g_main_context_iteration(NULL, FALSE);
        if (g_get_monotonic_time() > end)
            g_error("the backend did not connect to %s", F->path);
    }
    F->peer = accept4(F->listener, NULL, NULL, SOCK_CLOEXEC);
    g_assert_cmpint(F->peer, >=, 0);
}

static void peer_send(const char *text)
{
    gsize len = strlen(text);
    g_assert_cmpint(write(F->peer, text, len), ==, (ssize_t)len);
}

/* Reads bytes from the backend while its main loop runs; false at end of stream. */
static bool peer_read_some(void)
{
    g_main_context_iteration(NULL, FALSE);
    struct pollfd pfd = {F->peer, POLLIN, 0};
    if (poll(&pfd, 1, 5) != 1)
        return true;
    char buf[512];
    ssize_t n = read(F->peer, buf, sizeof(buf));
    g_assert_cmpint(n, >=, 0);
    g_string_append_len(F->in, buf, n);
    return n > 0;
}

static void peer_wait_eof(void)
{
    gint64 end = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    while (peer_read_some())
        if (g_get_monotonic_time() > end)
            g_error("the backend did not close its connection");
}

/* The next command from the backend: checks its name, returns its id. */
static gint64 peer_expect(const char *command)
{
    gint64 end = g_get_monotonic_time() + TIMEOUT_MS * 1000;
    while (!strchr(F->in->str, '\n')) {
        if (!peer_read_some())
            g_error("the backend closed the connection instead of sending %s", command);
        if (g_get_monotonic_time() > end)
            g_error("no %s command from the backend", command);
    }
    char *nl = strchr(F->in->str, '\n');
    g_autofree char *line = g_strndup(F->in->str, nl - F->in->str);
    g_string_erase(F->in, 0, nl - F->in->str + 1);
    json_object *req = json_tokener_parse(line);
    g_assert_nonnull(req);
    json_object *execute = NULL, *id = NULL;
    g_assert_true(json_object_object_get_ex(req, "execute", &execute));
    g_assert_cmpstr(json_object_get_string(execute), ==, command);
    g_assert_true(json_object_object_get_ex(req, "id", &id));
    gint64 v = json_object_get_int64(id);
    json_object_put(req);
    return v;
}

static void peer_reply(gint64 id, const char *value)
{
    g_autofree char *text =
        g_strdup_printf("{\"return\": %s, \"id\": %" G_GINT64_FORMAT "}\r\n", value, id);
    peer_send(text);
}

static void peer_event(const char *name, const char *data)
{
    g_autofree char *text = g_strdup_printf(
        "{\"event\": \"%s\", \"data\": %s, \"timestamp\": {\"seconds\": 1, \"microseconds\": 0}}"
        "\r\n",
        name, data);
    peer_send(text);
}

static guint want_reports;

static bool reported_enough(void)
{
    return F->core.reports->len >= want_reports;
}

/* Answers query-name and query-cpus-fast, then waits for the backend's report. */
static const Report *serve_queries(const char *name, const pid_t *tids, guint n)
{
    g_autofree char *name_json = g_strdup_printf("{\"name\": \"%s\"}", name);
    peer_reply(peer_expect("query-name"), name_json);
    g_autoptr(GString) cpus = g_string_new("[");
    for (guint i = 0; i < n; i++)
        g_string_append_printf(cpus,
                               "%s{\"cpu-index\": %u, \"qom-path\": \"/machine/cpu[%u]\", "
                               "\"thread-id\": %d, \"target\": \"x86_64\"}",
                               i ? ", " : "", i, i, (int)tids[i]);
    g_string_append_c(cpus, ']');
    peer_reply(peer_expect("query-cpus-fast"), cpus->str);
    want_reports = F->core.reports->len + 1;
    pump_until(reported_enough, "a report");
    return g_ptr_array_index(F->core.reports, F->core.reports->len - 1);
}

/* The backend finds the socket, negotiates, asks, and reports the VM. */
static const Report *connect_vm(const char *name, const pid_t *tids, guint n)
{
    sa_qmp_start(F->q);
    peer_accept();
    peer_send(GREETING);
    peer_reply(peer_expect("qmp_capabilities"), "{}");
    return serve_queries(name, tids, n);
}

static guint want_forgotten;

static bool forgot_enough(void)
{
    return F->core.forgotten->len >= want_forgotten;
}

static const char *wait_forgotten(void)
{
    want_forgotten = F->core.forgotten->len + 1;
    pump_until(forgot_enough, "the backend to forget the VM");
    return g_ptr_array_index(F->core.forgotten, F->core.forgotten->len - 1);
}

static void assert_forgotten(const char *got, const char *why_prefix)
{
    g_autofree char *want = g_strdup_printf("%s: %s", F->key, why_prefix);
    if (!g_str_has_prefix(got, want))
        g_error("forgotten: \"%s\", want \"%s...\"", got, want);
}

/* ---- commands ----------------------------------------------------------------------------- */

typedef bool (*CommandFunc)(gpointer handle, const SaCommand *cmd, GError **error);

typedef struct {
    CommandFunc fn;
    gpointer handle;
    const SaCommand *cmd;
    GError *error;
    bool ok;
} Call;

static gpointer call_main(gpointer data)
{
    Call *call = data;
    call->ok = call->fn(call->handle, call->cmd, &call->error);
    return NULL;
}

/* Runs a command on a thread of its own, as the core's workers do. */
static bool run_on_worker(CommandFunc fn, const Report *r, const SaCommand *cmd, GError **error)
{
    Call call = {fn, r->handle, cmd, NULL, false};
    g_thread_join(g_thread_new("test-worker", call_main, &call));
    g_assert_true(call.ok == (call.error == NULL));
    if (call.error)
        g_propagate_error(error, call.error);
    return call.ok;
}

/* A command for the reported VM: vCPU i gets vcpus[i], the other threads others. */
static SaCommand make_command(const Report *r, SaCpuSet *const *vcpus, const SaCpuSet *others)
{
    SaCommand cmd = {
        .key = r->facts->key,
        .name = r->facts->name,
        .pid = r->facts->pid,
        .n_vcpus = r->facts->n_vcpus,
        .vcpu_tids = r->facts->vcpu_tids,
        .vcpus = vcpus,
        .others = others,
    };
    return cmd;
}

/* A fixture for a test that moves threads between two CPUs; false (skipped) without them. */
static bool setup_two_cpus(void)
{
    fixture_setup(true);
    if (F->cpu1 >= 0)
        return true;
    g_test_skip("needs two CPUs in this process's affinity");
    fixture_teardown();
    return false;
}

/* Starts n threads playing vCPUs and lets the backend find them in guest-a. */
static const Report *start_guest(guint n)
{
    pid_t tids[G_N_ELEMENTS(F->vcpus)];
    g_assert_cmpuint(n, <=, G_N_ELEMENTS(F->vcpus));
    for (guint i = 0; i < n; i++) {
        F->vcpus[i] = thread_start();
        tids[i] = F->vcpus[i]->tid;
    }
    return connect_vm("guest-a", tids, n);
}

static pid_t vcpu_tid(guint i)
{
    return F->vcpus[i]->tid;
}

static void stop_vcpu(guint i)
{
    thread_stop(F->vcpus[i]);
    F->vcpus[i] = NULL;
}

static void run_ok(CommandFunc fn, const Report *r, const SaCommand *cmd)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(run_on_worker(fn, r, cmd, &error));
    g_assert_no_error(error);
}

/* The command fails with code; returns its message. */
static char *run_failing(CommandFunc fn, const Report *r, const SaCommand *cmd, int code)
{
    g_autoptr(GError) error = NULL;
    g_assert_false(run_on_worker(fn, r, cmd, &error));
    g_assert_error(error, SA_ERROR, code);
    return g_strdup(error->message);
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_report(void)
{
    fixture_setup(true);
    g_test_expect_message("softaffd", G_LOG_LEVEL_INFO,
                          "guest-a: found QEMU process * over QMP (*a.qmp, 2 vCPUs)");
    const Report *r = start_guest(2);
    g_test_assert_expected_messages();

    const SaVmFacts *f = r->facts;
    g_assert_cmpstr(r->ops->name, ==, "qmp");
    g_assert_cmpstr(f->key, ==, F->key);
    g_assert_cmpstr(f->name, ==, "guest-a");
    g_assert_cmpint(f->pid, ==, getpid());
    g_assert_cmpuint(f->n_vcpus, ==, 2);
    g_assert_cmpuint(f->vcpu_tids->len, ==, 2);
    g_assert_cmpint(g_array_index(f->vcpu_tids, pid_t, 0), ==, vcpu_tid(0));
    g_assert_cmpint(g_array_index(f->vcpu_tids, pid_t, 1), ==, vcpu_tid(1));
    /* Its own affinity, within what its cpuset cgroups grant. */
    g_autoptr(SaCpuSet) want = sa_cpuset_copy(F->own);
    if (F->granted)
        sa_cpuset_intersect(want, F->granted);
    g_assert_true(sa_cpuset_equal(f->vcpu_cpuset, want));
    g_assert_true(sa_cpuset_equal(f->emulator_pin, F->own));
    g_assert_null(f->vcpu_pins);
    g_assert_true(f->has_settings);
    g_assert_cmpint(f->settings.mode, ==, SA_MODE_SOFT);
    g_assert_cmpint(f->settings.preferred, ==, 1);
    g_assert_cmpint(f->settings.softness, ==, 30);
    g_assert_cmpint(f->settings.assigned, ==, -1);
    g_assert_null(f->settings_error);
    g_assert_cmpuint(F->core.discovers, ==, 0);
    g_assert_cmpuint(F->core.forgotten->len, ==, 0);

    /* Freeing the backend forgets the VM; the handle the core still holds stays usable. */
    sa_qmp_free(F->q);
    F->q = NULL;
    g_assert_cmpuint(F->core.forgotten->len, ==, 1);
    assert_forgotten(g_ptr_array_index(F->core.forgotten, 0), "the QMP backend stops");
    SaMetadata md;
    sa_metadata_init(&md);
    md.assigned = 0;
    SaCommand cmd = make_command(r, NULL, NULL);
    cmd.settings = &md;
    run_ok(r->ops->write_assigned, r, &cmd);
    fixture_teardown();
}

static void test_pin_restore(void)
{
    if (!setup_two_cpus())
        return;
    const Report *r = start_guest(2);
    SaCpuSet *first[] = {F->c0, F->c1};
    SaCommand pin = make_command(r, first, F->c1);
    run_ok(r->ops->pin, r, &pin);
    assert_affinity(vcpu_tid(0), F->c0, "vCPU 0 after pin");
    assert_affinity(vcpu_tid(1), F->c1, "vCPU 1 after pin");
    assert_affinity(getpid(), F->c1, "main thread after pin");

    /* Pinned again elsewhere: what is remembered is still the affinity before the first. */
    SaCpuSet *second[] = {F->c1, F->c0};
    pin = make_command(r, second, F->c1);
    run_ok(r->ops->pin, r, &pin);
    assert_affinity(vcpu_tid(0), F->c1, "vCPU 0 after the second pin");
    assert_affinity(vcpu_tid(1), F->c0, "vCPU 1 after the second pin");

    /* A thread started after the pin inherits the main thread's set; softaff never wrote it. */
    TestThread *late = thread_start();
    assert_affinity(late->tid, F->c1, "a thread started after the pin");

    /* Restore: remembered originals, not the command's sets; the late thread, which has no
     * original, gets the command's set for the other threads. */
    SaCpuSet *fallback[] = {F->c0, F->c0};
    SaCommand restore = make_command(r, fallback, F->own);
    run_ok(r->ops->restore, r, &restore);
    assert_affinity(vcpu_tid(0), F->own, "vCPU 0 after restore");
    assert_affinity(vcpu_tid(1), F->own, "vCPU 1 after restore");
    assert_affinity(getpid(), F->own, "main thread after restore");
    assert_affinity(late->tid, F->own, "the late thread after restore");
    thread_stop(late);
    fixture_teardown();
}

static void test_pin_errors(void)
{
    fixture_setup(true);
    const Report *r = start_guest(2);

    /* EINVAL: a CPU this machine does not have. Permanent: SA_ERROR_UNSUPPORTED. */
    g_autoptr(SaCpuSet) absent = one_cpu(SA_CPUSET_MAX - 1);
    SaCpuSet *bad[] = {absent, F->c0};
    SaCommand pin = make_command(r, bad, F->own);
    g_autofree char *refused = run_failing(r->ops->pin, r, &pin, SA_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(refused, "softaffd may not pin the threads of QEMU process"));
    g_assert_nonnull(strstr(refused, g_strerror(EINVAL)));
    assert_affinity(vcpu_tid(0), F->own, "vCPU 0 after a refused pin");

    /* A vCPU thread that exited while its process runs: SA_ERROR_TRANSIENT. */
    g_autofree char *what = g_strdup_printf("vCPU 1 (thread %d) ", (int)vcpu_tid(1));
    stop_vcpu(1);
    SaCpuSet *home[] = {F->c0, F->c0};
    pin = make_command(r, home, F->own);
    g_autofree char *gone = run_failing(r->ops->pin, r, &pin, SA_ERROR_TRANSIENT);
    g_assert_nonnull(strstr(gone, what));
    assert_affinity(vcpu_tid(0), F->c0, "vCPU 0, pinned before vCPU 1 was found gone");

    /* Restore skips the thread that is gone and puts the others back. */
    SaCommand restore = make_command(r, home, F->own);
    run_ok(r->ops->restore, r, &restore);
    assert_affinity(vcpu_tid(0), F->own, "vCPU 0 after restore");
    fixture_teardown();
}

/* In a child that dropped root: pinning this process is refused (EPERM), SA_ERROR_UNSUPPORTED.
 * Exits 0 when so, 77 when root could not be dropped. */
static void eperm_child(const Report *r, const SaCommand *pin)
{
    if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
        setresuid(65534, 65534, 65534) < 0)
        _exit(77);
    /* Nor may it write the state file in root's directory: said once, and no reason not to
     * pin. */
    g_test_expect_message("softaffd", G_LOG_LEVEL_WARNING,
                          "cannot record the original affinities of QMP-managed threads in *");
    GError *error = NULL;
    bool ok = r->ops->pin(r->handle, pin, &error);
    g_test_assert_expected_messages();
    if (!ok && g_error_matches(error, SA_ERROR, SA_ERROR_UNSUPPORTED) &&
        strstr(error->message, g_strerror(EPERM)))
        _exit(0);
    fprintf(stderr, "child: pin %s: %s\n", ok ? "succeeded" : "failed",
            error ? error->message : "");
    _exit(1);
}

/* EPERM needs a process that may not change this one's affinity: a child that dropped root.
 * Without root the case is skipped. */
static void test_pin_eperm(void)
{
    if (geteuid() != 0) {
        g_test_skip("needs root, to drop it in a child that then may not pin this process");
        return;
    }
    if (!setup_two_cpus())
        return;
    pid_t tids[] = {getpid()};
    const Report *r = connect_vm("guest-a", tids, 1);
    SaCpuSet *home[] = {F->c0};
    SaCommand pin = make_command(r, home, F->c0);
    pid_t child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0)
        eperm_child(r, &pin);
    int status = 0;
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    g_assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        g_test_skip("could not drop root in the child");
    } else {
        g_assert_cmpint(WEXITSTATUS(status), ==, 0);
        assert_affinity(getpid(), F->own, "this process after a refused pin");
    }
    fixture_teardown();
}

static void test_shutdown_reset(void)
{
    if (!setup_two_cpus())
        return;
    const Report *r = start_guest(2);
    gpointer handle = r->handle;
    SaCpuSet *sets[] = {F->c0, F->c1};
    SaCommand pin = make_command(r, sets, F->c1);
    run_ok(r->ops->pin, r, &pin);

    /* SHUTDOWN: forgotten; the process lives on (-no-shutdown), so its threads get their own
     * affinity back, and later commands are refused. */
    peer_event("SHUTDOWN", "{\"guest\": true, \"reason\": \"guest-shutdown\"}");
    assert_forgotten(wait_forgotten(), "shut down (guest-shutdown)");
    assert_affinity(vcpu_tid(0), F->own, "vCPU 0 after SHUTDOWN");
    assert_affinity(vcpu_tid(1), F->own, "vCPU 1 after SHUTDOWN");
    assert_affinity(getpid(), F->own, "main thread after SHUTDOWN");
    g_free(run_failing(r->ops->pin, r, &pin, SA_ERROR_GONE));
    assert_affinity(vcpu_tid(0), F->own, "vCPU 0 after a pin that came too late");

    /* RESET: it runs again; reported again with the same handle, which pins again. */
    peer_event("RESET", "{\"guest\": true, \"reason\": \"guest-reset\"}");
    pid_t tids[] = {vcpu_tid(0), vcpu_tid(1)};
    r = serve_queries("guest-a", tids, 2);
    g_assert_true(r->handle == handle);
    pin = make_command(r, sets, F->c1);
    run_ok(r->ops->pin, r, &pin);
    assert_affinity(vcpu_tid(1), F->c1, "vCPU 1 after the reset");
    fixture_teardown();
}

static void test_threads_lost(void)
{
    fixture_setup(true);
    const Report *r = start_guest(2);
    gpointer handle = r->handle;
    stop_vcpu(1);
    F->vcpus[1] = thread_start();
    r->ops->threads_lost(handle);
    pid_t now[] = {vcpu_tid(0), vcpu_tid(1)};
    r = serve_queries("guest-a", now, 2);
    g_assert_true(r->handle == handle);
    g_assert_cmpuint(r->facts->vcpu_tids->len, ==, 2);
    g_assert_cmpint(g_array_index(r->facts->vcpu_tids, pid_t, 1), ==, vcpu_tid(1));
    g_assert_cmpuint(F->core.forgotten->len, ==, 0);
    fixture_teardown();
}

static const Report *sync_and_report(void)
{
    want_reports = F->core.reports->len + 1;
    sa_qmp_sync(F->q);
    g_assert_cmpuint(F->core.reports->len, ==, want_reports);
    return g_ptr_array_index(F->core.reports, F->core.reports->len - 1);
}

static void write_assigned(const Report *r, int home)
{
    SaMetadata md;
    sa_metadata_init(&md);
    md.assigned = home;
    SaCommand cmd = make_command(r, NULL, NULL);
    cmd.settings = &md;
    run_ok(r->ops->write_assigned, r, &cmd);
}

static void test_sync(void)
{
    fixture_setup(true);
    const Report *r = start_guest(1);
    gpointer handle = r->handle;
    SaVmConfig *vc = g_ptr_array_index(F->core.cfg->vms, 0);

    /* preferred=auto: the assigned home is remembered across a reload. */
    vc->preferred = -1;
    write_assigned(r, 1);
    r = sync_and_report();
    g_assert_true(r->handle == handle);
    g_assert_true(r->facts->has_settings);
    g_assert_cmpint(r->facts->settings.preferred, ==, -1);
    g_assert_cmpint(r->facts->settings.assigned, ==, 1);
    g_assert_null(r->facts->settings_error);

    /* An assigned home this host lacks is dropped: the core chooses again. */
    write_assigned(r, 7);
    r = sync_and_report();
    g_assert_cmpint(r->facts->settings.assigned, ==, -1);
    g_assert_null(r->facts->settings_error);

    /* A preferred partition this host lacks: invalid settings, naming file and group. */
    vc->preferred = 5;
    r = sync_and_report();
    g_assert_nonnull(r->facts->settings_error);
    g_assert_true(
        g_str_has_prefix(r->facts->settings_error, "/etc/softaff/test.conf: [vm guest-a] "));
    g_assert_nonnull(strstr(r->facts->settings_error, "preferred=\"5\""));

    /* No [vm NAME] group any more. */
    g_ptr_array_remove_index(F->core.cfg->vms, 0);
    r = sync_and_report();
    g_assert_false(r->facts->has_settings);
    g_assert_null(r->facts->settings_error);

    /* The socket no longer matches a glob: forgotten and closed. */
    g_free(F->core.cfg->qmp_sockets[0]);
    F->core.cfg->qmp_sockets[0] = g_build_filename(F->dir, "*.other", NULL);
    guint reports = F->core.reports->len;
    sa_qmp_sync(F->q);
    g_assert_cmpuint(F->core.reports->len, ==, reports);
    g_assert_cmpuint(F->core.forgotten->len, ==, 1);
    assert_forgotten(g_ptr_array_index(F->core.forgotten, 0), "no longer in [qmp] sockets");
    peer_wait_eof();
    fixture_teardown();
}

static void test_connection_lost(void)
{
    if (!setup_two_cpus())
        return;
    const Report *r = start_guest(1);
    SaCpuSet *sets[] = {F->c1};
    SaCommand pin = make_command(r, sets, F->c1);
    run_ok(r->ops->pin, r, &pin);
    assert_affinity(vcpu_tid(0), F->c1, "vCPU 0 after pin");

    /* The process lives on: forgotten after the grace, its threads get their own back. */
    close(F->peer);
    F->peer = -1;
    assert_forgotten(wait_forgotten(), "QMP connection lost (");
    assert_affinity(vcpu_tid(0), F->own, "vCPU 0 after the connection was lost");
    assert_affinity(getpid(), F->own, "main thread after the connection was lost");
    fixture_teardown();
}

/* The socket's listener is a child that exits at once: the "QEMU process" is gone. */
static void test_process_exited(void)
{
    fixture_setup(false);
    pid_t child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0)
        _exit(listen(F->listener, 4) == 0 ? 0 : 1);
    int status = 0;
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    pid_t tids[] = {child};
    const Report *r = connect_vm("guest-b", tids, 1);
    g_assert_cmpint(r->facts->pid, ==, child);
    g_assert_false(r->facts->has_settings);
    g_assert_null(r->facts->emulator_pin);
    SaCpuSet *sets[] = {F->c0};
    SaCommand pin = make_command(r, sets, F->c0);
    g_free(run_failing(r->ops->pin, r, &pin, SA_ERROR_GONE));

    close(F->peer);
    F->peer = -1;
    g_autofree char *why = g_strdup_printf("QEMU process %d exited", (int)child);
    assert_forgotten(wait_forgotten(), why);
    fixture_teardown();
}

/* ---- trust ---------------------------------------------------------------------------------- */

/* A process that is not the "QEMU" (this test): a child waiting to be killed, on cpu1. */
static pid_t start_stranger(void)
{
    pid_t child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        /* Gone with the test, even when it fails. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        pause();
        _exit(0);
    }
    cpu_set_t mask;
    CPU_ZERO(&mask);
    CPU_SET(F->cpu1, &mask);
    g_assert_cmpint(sched_setaffinity(child, sizeof(mask), &mask), ==, 0);
    return child;
}

static void stop_stranger(pid_t child)
{
    kill(child, SIGKILL);
    g_assert_cmpint(waitpid(child, NULL, 0), ==, child);
}

static SaCpuSet *process_affinity(pid_t pid)
{
    g_autoptr(GError) error = NULL;
    SaCpuSet *set = sa_thread_read_allowed(pid, pid, &error);
    g_assert_no_error(error);
    return set;
}

/* Runs the main loop a moment (for messages that come with no other sign). */
static void pump_a_while(void)
{
    gint64 end = g_get_monotonic_time() + 200 * 1000;
    while (g_get_monotonic_time() < end)
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
}

/* Answers the queries with thread ids; the backend is not expected to report. */
static void serve_refused(const pid_t *tids, guint n)
{
    peer_reply(peer_expect("query-name"), "{\"name\": \"guest-a\"}");
    g_autoptr(GString) cpus = g_string_new("[");
    for (guint i = 0; i < n; i++)
        g_string_append_printf(cpus, "%s{\"cpu-index\": %u, \"thread-id\": %d}", i ? ", " : "", i,
                               (int)tids[i]);
    g_string_append_c(cpus, ']');
    peer_reply(peer_expect("query-cpus-fast"), cpus->str);
    pump_a_while();
}

/* QMP names a thread of another process: refused with one warning, that process's affinity
 * unchanged, the VM not reported (forgotten when it was), until QEMU names its own threads. */
static void test_foreign_thread(void)
{
    if (!setup_two_cpus())
        return;
    pid_t stranger = start_stranger();
    F->vcpus[0] = thread_start();
    const Report *r = connect_vm("guest-a", (pid_t[]){vcpu_tid(0)}, 1);
    SaCpuSet *sets[] = {F->c0};
    SaCommand pin = make_command(r, sets, F->c0);
    run_ok(r->ops->pin, r, &pin);
    guint reports = F->core.reports->len;

    /* A "hot-plug": now vCPU 1 is the stranger. */
    g_autofree char *warning = g_strdup_printf(
        "*a.qmp: QMP names thread %d as vCPU 1, but it is not a thread of QEMU process %d (the "
        "socket's peer): refused, its affinity is left alone; guest-a is not managed",
        (int)stranger, (int)getpid());
    g_test_expect_message("softaffd", G_LOG_LEVEL_WARNING, warning);
    peer_event("DEVICE_DELETED", "{\"path\": \"/machine/peripheral/cpu1\"}");
    pid_t both[] = {vcpu_tid(0), stranger};
    serve_refused(both, 2);
    g_test_assert_expected_messages();
    g_assert_cmpuint(F->core.reports->len, ==, reports);
    assert_forgotten(g_ptr_array_index(F->core.forgotten, 0), "QMP named thread ");
    assert_affinity(vcpu_tid(0), F->own, "vCPU 0 once its VM was refused");
    g_autoptr(SaCpuSet) theirs = process_affinity(stranger);
    g_assert_true(sa_cpuset_equal(theirs, F->c1));

    /* The same answer again: no second warning (one would be fatal here). */
    peer_event("RESET", "{\"guest\": true, \"reason\": \"host-qmp-system-reset\"}");
    serve_refused(both, 2);
    g_assert_cmpuint(F->core.reports->len, ==, reports);

    /* QEMU names its own threads again: reported. */
    peer_event("RESET", "{\"guest\": true, \"reason\": \"host-qmp-system-reset\"}");
    r = serve_queries("guest-a", (pid_t[]){vcpu_tid(0)}, 1);
    g_assert_cmpuint(r->facts->n_vcpus, ==, 1);
    g_autoptr(SaCpuSet) still = process_affinity(stranger);
    g_assert_true(sa_cpuset_equal(still, F->c1));
    stop_stranger(stranger);
    fixture_teardown();
}

/* A command naming a thread of another process writes nothing to it. */
static void test_foreign_thread_command(void)
{
    if (!setup_two_cpus())
        return;
    pid_t stranger = start_stranger();
    const Report *r = start_guest(1);
    GArray *tids = g_array_new(FALSE, TRUE, sizeof(pid_t));
    g_array_append_val(tids, stranger);
    SaCpuSet *sets[] = {F->c0};
    SaCommand pin = make_command(r, sets, NULL);
    pin.vcpu_tids = tids;
    g_free(run_failing(r->ops->pin, r, &pin, SA_ERROR_TRANSIENT));
    g_autoptr(SaCpuSet) theirs = process_affinity(stranger);
    g_assert_true(sa_cpuset_equal(theirs, F->c1));
    g_array_unref(tids);
    stop_stranger(stranger);
    fixture_teardown();
}

/* Sockets in a directory others may write are refused, by default; trust_writable_dirs=true
 * accepts them. */
static void test_untrusted_dir(void)
{
    fixture_setup(true);
    F->core.cfg->qmp_trust_writable_dirs = false;
    g_assert_cmpint(chmod(F->dir, 0777), ==, 0);
    g_autofree char *warning = g_strdup_printf(
        "%s: refused: directory %s is writable by every user (mode 0777); whoever can write "
        "there could make softaffd pin threads of any process ([qmp] trust_writable_dirs=true "
        "accepts it)",
        F->path, F->dir);
    g_test_expect_message("softaffd", G_LOG_LEVEL_WARNING, warning);
    sa_qmp_start(F->q);
    g_test_assert_expected_messages();
    pump_a_while();
    struct pollfd pfd = {F->listener, POLLIN, 0};
    g_assert_cmpint(poll(&pfd, 1, 0), ==, 0);

    F->core.cfg->qmp_trust_writable_dirs = true;
    sa_qmp_sync(F->q);
    peer_accept();
    peer_send(GREETING);
    peer_reply(peer_expect("qmp_capabilities"), "{}");
    F->vcpus[0] = thread_start();
    const Report *r = serve_queries("guest-a", (pid_t[]){vcpu_tid(0)}, 1);
    g_assert_cmpstr(r->facts->key, ==, F->key);

    /* Refused again after a reload: forgotten and closed. */
    F->core.cfg->qmp_trust_writable_dirs = false;
    g_test_expect_message("softaffd", G_LOG_LEVEL_WARNING, warning);
    sa_qmp_sync(F->q);
    g_test_assert_expected_messages();
    assert_forgotten(g_ptr_array_index(F->core.forgotten, 0), "its socket is refused now (");
    peer_wait_eof();
    fixture_teardown();
}

/* ---- original affinities across restarts -------------------------------------------------- */

static QmpState *state_of_fixture(void)
{
    QmpState *state = qmp_state_new();
    qmp_state_set_socket(state, F->core.cfg->socket);
    return state;
}

/* The originals the state file holds for this process behind the fixture's socket. */
static GHashTable *recorded(void)
{
    QmpState *state = state_of_fixture();
    GHashTable *t = qmp_state_load(state, F->path, getpid(), sa_process_start_time(getpid()));
    qmp_state_unref(state);
    return t;
}

static void assert_recorded(pid_t tid, const SaCpuSet *want, const char *what)
{
    g_autoptr(GHashTable) t = recorded();
    const SaCpuSet *got = g_hash_table_lookup(t, GINT_TO_POINTER(tid));
    if (want ? !got || !sa_cpuset_equal(got, want) : got != NULL)
        g_error("%s: thread %d recorded %s", what, (int)tid, got ? "wrongly" : "not at all");
}

/* The daemon stops without restoring (--once, a crash) and starts again: the originals come
 * from the state file, not from the threads, which hold softaff's pins. */
static void test_state_restart(void)
{
    if (!setup_two_cpus())
        return;
    const Report *r = start_guest(1);
    TestThread *worker = thread_start();
    SaCpuSet *sets[] = {F->c0};
    SaCommand pin = make_command(r, sets, F->c1);
    run_ok(r->ops->pin, r, &pin);
    assert_recorded(vcpu_tid(0), F->own, "vCPU 0 after the first pin");
    assert_recorded(getpid(), F->own, "main thread after the first pin");
    assert_recorded(worker->tid, F->own, "worker after the first pin");

    /* A thread that is gone is forgotten, in memory and in the file. */
    pid_t gone = worker->tid;
    thread_stop(worker);
    run_ok(r->ops->pin, r, &pin);
    assert_recorded(gone, NULL, "a thread that exited");

    /* "Restart": the backend goes without restoring; a new one finds the same process. */
    sa_qmp_free(F->q);
    close(F->peer);
    F->peer = -1;
    g_ptr_array_set_size(F->core.reports, 0);
    F->q = sa_qmp_new(&F->core);
    r = connect_vm("guest-a", (pid_t[]){vcpu_tid(0)}, 1);
    g_assert_true(sa_cpuset_equal(r->facts->emulator_pin, F->own));
    SaCpuSet *fallback[] = {F->c1};
    SaCommand restore = make_command(r, fallback, F->c0);
    run_ok(r->ops->restore, r, &restore);
    assert_affinity(vcpu_tid(0), F->own, "vCPU 0 restored after a restart");
    assert_affinity(getpid(), F->own, "main thread restored after a restart");
    /* Everything is back: nothing left in the file. */
    g_autoptr(GHashTable) left = recorded();
    g_assert_cmpuint(g_hash_table_size(left), ==, 0);
    fixture_teardown();
}

/* Round trip of the state file, entries of other processes and of processes gone. */
static void test_state_file(void)
{
    fixture_setup(true);
    QmpState *state = state_of_fixture();
    pid_t me = getpid();
    guint64 start = sa_process_start_time(me);
    g_autoptr(GHashTable) t =
        g_hash_table_new_full(NULL, NULL, NULL, (GDestroyNotify)sa_cpuset_free);
    g_hash_table_insert(t, GINT_TO_POINTER(me), sa_cpuset_copy(F->c0));
    g_hash_table_insert(t, GINT_TO_POINTER(me + 1), sa_cpuset_copy(F->own));
    /* A socket path with characters a group name may not hold. */
    const char *odd = "/run/vm [a]\n.qmp";
    qmp_state_save(state, odd, me, start, t);
    qmp_state_save(state, F->path, me, start, t);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    g_assert_cmpint(waitpid(child, NULL, 0), ==, child);
    qmp_state_save(state, F->path, child, start, t);  /* exited */
    qmp_state_save(state, F->path, me, start + 1, t); /* same pid, another process */

    g_autoptr(GHashTable) back = qmp_state_load(state, odd, me, start);
    g_assert_cmpuint(g_hash_table_size(back), ==, 2);
    g_assert_true(sa_cpuset_equal(g_hash_table_lookup(back, GINT_TO_POINTER(me)), F->c0));
    g_assert_true(sa_cpuset_equal(g_hash_table_lookup(back, GINT_TO_POINTER(me + 1)), F->own));
    g_autoptr(GHashTable) other = qmp_state_load(state, F->path, me, start + 1);
    g_assert_cmpuint(g_hash_table_size(other), ==, 2);

    qmp_state_prune(state);
    g_autoptr(GHashTable) pruned = qmp_state_load(state, F->path, child, start);
    g_assert_cmpuint(g_hash_table_size(pruned), ==, 0);
    g_autoptr(GHashTable) pruned2 = qmp_state_load(state, F->path, me, start + 1);
    g_assert_cmpuint(g_hash_table_size(pruned2), ==, 0);
    g_autoptr(GHashTable) kept = qmp_state_load(state, F->path, me, start);
    g_assert_cmpuint(g_hash_table_size(kept), ==, 2);

    /* An empty table removes the entry. */
    g_hash_table_remove_all(t);
    qmp_state_save(state, odd, me, start, t);
    g_autoptr(GHashTable) removed = qmp_state_load(state, odd, me, start);
    g_assert_cmpuint(g_hash_table_size(removed), ==, 0);
    g_autofree char *file = qmp_state_file(state);
    g_autofree char *want = g_build_filename(F->dir, "run", "qmp-originals.ini", NULL);
    g_assert_cmpstr(file, ==, want);
    qmp_state_unref(state);
    fixture_teardown();
}

/* A QEMU that exits while softaffd lets it go (it shut down): release finds it gone, and its
 * entry leaves the state file at once, not at the next start (seen in CI: the entry of a QEMU
 * that shut down stayed until softaffd exited). */
static void test_release_exited(void)
{
    fixture_setup(true);
    QmpState *state = state_of_fixture();
    int ready[2];
    g_assert_cmpint(pipe(ready), ==, 0);
    pid_t child = fork();
    if (child == 0) {
        char c;
        close(ready[1]);
        (void)!read(ready[0], &c, 1); /* exits once the parent has read its start time */
        _exit(0);
    }
    close(ready[0]);
    guint64 start = sa_process_start_time(child);
    g_assert_cmpuint(start, >, 0);
    g_autoptr(GHashTable) t =
        g_hash_table_new_full(NULL, NULL, NULL, (GDestroyNotify)sa_cpuset_free);
    g_hash_table_insert(t, GINT_TO_POINTER(child), sa_cpuset_copy(F->c0));
    qmp_state_save(state, F->path, child, start, t);
    QmpHomes *homes = qmp_homes_new();
    QmpVm *vm = qmp_vm_new(F->path, child, start, homes, state);
    g_autoptr(GHashTable) before = qmp_state_load(state, F->path, child, start);
    g_assert_cmpuint(g_hash_table_size(before), ==, 1);
    close(ready[1]);
    g_assert_cmpint(waitpid(child, NULL, 0), ==, child);
    g_autoptr(GError) error = NULL;
    g_assert_false(qmp_vm_release(vm, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);
    g_autoptr(GHashTable) after = qmp_state_load(state, F->path, child, start);
    g_assert_cmpuint(g_hash_table_size(after), ==, 0);
    qmp_vm_unref(vm);
    qmp_homes_unref(homes);
    qmp_state_unref(state);
    fixture_teardown();
}

/* Once the core is stopping, no new socket is taken on. */
static void test_stopping(void)
{
    fixture_setup(true);
    F->core.stopping = true;
    sa_qmp_start(F->q);
    for (int i = 0; i < 20; i++)
        g_main_context_iteration(NULL, FALSE);
    struct pollfd pfd = {F->listener, POLLIN, 0};
    g_assert_cmpint(poll(&pfd, 1, 0), ==, 0);
    g_assert_cmpuint(F->core.reports->len, ==, 0);
    fixture_teardown();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    sysfs_root = g_dir_make_tmp("test-backend-qmp-sys-XXXXXX", NULL);
    g_assert_nonnull(sysfs_root);
    g_setenv("SOFTAFF_SYSFS_ROOT", sysfs_root, TRUE);
    g_test_add_func("/qmp-backend/report", test_report);
    g_test_add_func("/qmp-backend/pin-restore", test_pin_restore);
    g_test_add_func("/qmp-backend/pin-errors", test_pin_errors);
    g_test_add_func("/qmp-backend/pin-eperm", test_pin_eperm);
    g_test_add_func("/qmp-backend/shutdown-reset", test_shutdown_reset);
    g_test_add_func("/qmp-backend/threads-lost", test_threads_lost);
    g_test_add_func("/qmp-backend/sync", test_sync);
    g_test_add_func("/qmp-backend/connection-lost", test_connection_lost);
    g_test_add_func("/qmp-backend/process-exited", test_process_exited);
    g_test_add_func("/qmp-backend/stopping", test_stopping);
    g_test_add_func("/qmp-backend/foreign-thread", test_foreign_thread);
    g_test_add_func("/qmp-backend/foreign-thread-command", test_foreign_thread_command);
    g_test_add_func("/qmp-backend/untrusted-dir", test_untrusted_dir);
    g_test_add_func("/qmp-backend/state-restart", test_state_restart);
    g_test_add_func("/qmp-backend/state-file", test_state_file);
    g_test_add_func("/qmp-backend/release-exited", test_release_exited);
    int rc = g_test_run();
    if (!remove_tree(sysfs_root))
        rc = 1;
    g_free(sysfs_root);
    return rc;
}
