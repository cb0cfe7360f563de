/* softaff — the libvirt backend against libvirt's in-library test driver (a test:///FILE
 * connection: no daemon, no VM), with the core replaced by the fakes below.
 *
 * The fakes follow libvirt's tests/virnumamock.c: this file defines the sa_core_*() functions
 * the backend calls (they record the calls; the backend library is linked without the core),
 * and wraps four libvirt calls to count them. virDomainPinVcpuFlags is also passed on with
 * VIR_DOMAIN_AFFECT_CURRENT: libvirt 9.0's test driver refuses the LIVE flag (it only changes
 * the running domain anyway), while softaff must send LIVE to QEMU domains, which the wrapper
 * checks. The callbacks run on a thread of their own, as the core's workers run them. */
#define G_LOG_DOMAIN "test-backend-libvirt"

#include <dlfcn.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <string.h>

#include "backend-libvirt.h"
#include "lv-private.h"
#include "sa-error.h"

#define WEB_UUID "6f1d1a44-5e5b-4c1c-9b52-000000000001"
#define SCRATCH_UUID "6f1d1a44-5e5b-4c1c-9b52-000000000002"
#define OFF_UUID "6f1d1a44-5e5b-4c1c-9b52-000000000003"
#define WEB_PID 4242

/* web: persistent, softaff metadata, a pinned vCPU, emulator and one of two I/O threads
 * pinned. scratch: transient, vCPU 0 pinned, a title, a description and OpenStack Nova's
 * metadata (flavor m1.large). off: defined, shut off. */
static const char node_xml[] =
    "<node>\n"
    "<domain type='test'>\n"
    "  <name>web</name><uuid>" WEB_UUID "</uuid>\n"
    "  <metadata><softaff:affinity xmlns:softaff='urn:softaff:domain:1' mode='strict'"
    " preferred='1' softness='30'/></metadata>\n"
    "  <memory unit='MiB'>1024</memory>\n"
    "  <vcpu cpuset='0-5'>4</vcpu>\n"
    "  <iothreads>2</iothreads>\n"
    "  <cputune><vcpupin vcpu='1' cpuset='2-3'/><emulatorpin cpuset='4-5'/>"
    "<iothreadpin iothread='2' cpuset='5'/></cputune>\n"
    "  <os><type>hvm</type></os>\n"
    "</domain>\n"
    "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>\n"
    "  <name>scratch</name><uuid>" SCRATCH_UUID "</uuid>\n"
    "  <title>Scratch runner</title>\n"
    "  <description>tier: bronze</description>\n"
    "  <metadata><nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>"
    "<nova:name>scratch-1</nova:name><nova:flavor name='m1.large'><nova:vcpus>2</nova:vcpus>"
    "</nova:flavor><nova:owner><nova:project uuid='p1'>ci</nova:project></nova:owner>"
    "</nova:instance></metadata>\n"
    "  <memory unit='MiB'>512</memory>\n"
    "  <vcpu>2</vcpu>\n"
    "  <cputune><vcpupin vcpu='0' cpuset='6'/></cputune>\n"
    "  <os><type>hvm</type></os>\n"
    "  <test:transient/>\n"
    "</domain>\n"
    "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>\n"
    "  <name>off</name><uuid>" OFF_UUID "</uuid>\n"
    "  <memory unit='MiB'>512</memory>\n"
    "  <vcpu>1</vcpu>\n"
    "  <os><type>hvm</type></os>\n"
    "  <test:runstate>5</test:runstate>\n"
    "</domain>\n"
    "</node>\n";

/* The fake core. */
typedef struct {
    char *key;
    char *name;
    gpointer handle; /* referenced, as the core does */
} Discovered;

static struct {
    SaConfig cfg;
    SaTopology topo;
    GPtrArray *discovered; /* Discovered* */
    GPtrArray *forgotten;  /* "KEY: WHY" */
    GHashTable *keys;      /* the VMs the fake core knows */
    guint list_keys_calls;
    /* calls of the wrapped libvirt functions */
    guint pin_vcpu;
    guint pin_emulator;
    guint pin_iothread;
    guint iothread_info;
} fake;

static int core_token;
#define CORE ((SaCore *)&core_token)

static void discovered_free(gpointer data)
{
    Discovered *d = data;
    lv_backend_ops.handle_unref(d->handle);
    g_free(d->key);
    g_free(d->name);
    g_free(d);
}

void sa_core_discover(SaCore *core, const SaBackendOps *ops, gpointer handle, const char *key,
                      const char *name)
{
    g_assert_true(core == CORE);
    g_assert_true(ops == &lv_backend_ops);
    Discovered *d = g_new0(Discovered, 1);
    d->key = g_strdup(key);
    d->name = g_strdup(name);
    d->handle = ops->handle_ref(handle);
    g_ptr_array_add(fake.discovered, d);
    g_hash_table_add(fake.keys, g_strdup(key));
}

void sa_core_forget(SaCore *core, const char *key, const char *why)
{
    g_assert_true(core == CORE);
    g_ptr_array_add(fake.forgotten, g_strdup_printf("%s: %s", key, why));
    g_hash_table_remove(fake.keys, key);
}

GPtrArray *sa_core_list_keys(SaCore *core, const SaBackendOps *ops)
{
    g_assert_true(ops == &lv_backend_ops);
    fake.list_keys_calls++;
    GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, fake.keys);
    while (g_hash_table_iter_next(&it, &key, NULL))
        g_ptr_array_add(keys, g_strdup(key));
    return keys;
}

const SaConfig *sa_core_config(const SaCore *core)
{
    return &fake.cfg;
}

const SaTopology *sa_core_topology(const SaCore *core)
{
    return &fake.topo;
}

/* The wrapped libvirt calls: the real one, found with dlsym(RTLD_NEXT). */
static void *real_symbol(const char *name)
{
    void *sym = dlsym(RTLD_NEXT, name);
    if (!sym)
        g_error("dlsym(%s): %s", name, dlerror());
    return sym;
}

int virDomainPinVcpuFlags(virDomainPtr domain, unsigned int vcpu, unsigned char *cpumap, int maplen,
                          unsigned int flags)
{
    union {
        void *sym;
        int (*fn)(virDomainPtr, unsigned int, unsigned char *, int, unsigned int);
    } real = {real_symbol("virDomainPinVcpuFlags")};
    g_assert_cmpuint(flags, ==, VIR_DOMAIN_AFFECT_LIVE);
    g_atomic_int_inc(&fake.pin_vcpu);
    return real.fn(domain, vcpu, cpumap, maplen, VIR_DOMAIN_AFFECT_CURRENT);
}

int virDomainPinEmulator(virDomainPtr domain, unsigned char *cpumap, int maplen, unsigned int flags)
{
    union {
        void *sym;
        int (*fn)(virDomainPtr, unsigned char *, int, unsigned int);
    } real = {real_symbol("virDomainPinEmulator")};
    g_assert_cmpuint(flags, ==, VIR_DOMAIN_AFFECT_LIVE);
    g_atomic_int_inc(&fake.pin_emulator);
    return real.fn(domain, cpumap, maplen, flags);
}

int virDomainPinIOThread(virDomainPtr domain, unsigned int iothread_id, unsigned char *cpumap,
                         int maplen, unsigned int flags)
{
    union {
        void *sym;
        int (*fn)(virDomainPtr, unsigned int, unsigned char *, int, unsigned int);
    } real = {real_symbol("virDomainPinIOThread")};
    g_assert_cmpuint(flags, ==, VIR_DOMAIN_AFFECT_LIVE);
    g_atomic_int_inc(&fake.pin_iothread);
    return real.fn(domain, iothread_id, cpumap, maplen, flags);
}

/* A QEMU monitor round-trip: the backend must never ask. */
int virDomainGetIOThreadInfo(virDomainPtr domain, virDomainIOThreadInfoPtr **info,
                             unsigned int flags)
{
    g_atomic_int_inc(&fake.iothread_info);
    union {
        void *sym;
        int (*fn)(virDomainPtr, virDomainIOThreadInfoPtr **, unsigned int);
    } real = {real_symbol("virDomainGetIOThreadInfo")};
    return real.fn(domain, info, flags);
}

/* The backend's warnings for a failed open are expected: counted, neither printed as a
 * failure nor fatal. Every other message goes to GLib's handler (warnings stay fatal). */
static guint failed_opens;

static bool expected_message(const char *domain, GLogLevelFlags level, const char *message)
{
    return g_strcmp0(domain, "softaffd") == 0 && (level & G_LOG_LEVEL_WARNING) &&
           strstr(message, "cannot connect to ") != NULL;
}

static void log_handler(const char *domain, GLogLevelFlags level, const char *message,
                        gpointer data)
{
    if (expected_message(domain, level, message)) {
        g_atomic_int_inc(&failed_opens);
        g_test_message("expected: %s", message);
        return;
    }
    g_log_default_handler(domain, level, message, data);
}

static gboolean log_fatal_handler(const char *domain, GLogLevelFlags level, const char *message,
                                  gpointer data)
{
    return !expected_message(domain, level, message);
}

typedef struct {
    char *dir;
    char *node_path;
    char *uri;
    SaLibvirt *lv;
} Fixture;

static void write_file(const char *path, const char *text, gssize len)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_path_get_dirname(path);
    g_assert_cmpint(g_mkdir_with_parents(dir, 0700), ==, 0);
    g_file_set_contents(path, text, len, &error);
    g_assert_no_error(error);
}

static void quiet_errors(void *data, virErrorPtr err)
{
    g_test_message("libvirt: %s", err && err->message ? err->message : "?");
}

/* A fake /proc with web's QEMU, for the whole run (set before any thread starts). */
static char *make_proc(void)
{
    static const char cmdline[] = "/usr/bin/qemu-system-x86_64\0-name\0guest=web,debug-threads="
                                  "on\0-smp\0"
                                  "4\0";
    char *proc = g_dir_make_tmp("softaff-lv-proc-XXXXXX", NULL);
    g_assert_nonnull(proc);
    g_autofree char *cmd = g_strdup_printf("%s/%d/cmdline", proc, WEB_PID);
    write_file(cmd, cmdline, sizeof(cmdline));
    g_setenv("SOFTAFF_PROC_ROOT", proc, TRUE);
    return proc;
}

/* The config's socket and the test driver's node.xml in the fixture's directory. */
static void fixture_setup(Fixture *f, gconstpointer data)
{
    /* Reset at the start of every test case. */
    g_test_log_set_fatal_handler(log_fatal_handler, NULL);
    f->dir = g_dir_make_tmp("softaff-lv-XXXXXX", NULL);
    g_assert_nonnull(f->dir);
    f->node_path = g_build_filename(f->dir, "node.xml", NULL);
    f->uri = g_strdup_printf("test://%s", f->node_path);

    memset(&fake, 0, sizeof(fake));
    failed_opens = 0;
    fake.cfg.socket = g_build_filename(f->dir, "run", "softaffd.sock", NULL);
    fake.topo.online = sa_cpuset_parse("0-7", NULL);
    fake.discovered = g_ptr_array_new_with_free_func(discovered_free);
    fake.forgotten = g_ptr_array_new_with_free_func(g_free);
    fake.keys = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
}

static void remove_tree(const char *path)
{
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *name;
    while (dir && (name = g_dir_read_name(dir))) {
        g_autofree char *child = g_build_filename(path, name, NULL);
        if (g_file_test(child, G_FILE_TEST_IS_DIR) && !g_file_test(child, G_FILE_TEST_IS_SYMLINK))
            remove_tree(child);
        else
            g_unlink(child);
    }
    g_rmdir(path);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    g_ptr_array_unref(fake.discovered); /* drops the core's handle references */
    sa_libvirt_free(f->lv);
    g_ptr_array_unref(fake.forgotten);
    g_hash_table_unref(fake.keys);
    g_free(fake.cfg.socket);
    sa_cpuset_free(fake.topo.online);
    remove_tree(f->dir);
    g_free(f->dir);
    g_free(f->node_path);
    g_free(f->uri);
}

static gboolean wake(gpointer data)
{
    return G_SOURCE_CONTINUE;
}

/* Runs the main loop until lv is connected, or fails after 10 s. */
/* Connected, and the connection's sync applied. */
static void wait_connected(SaLibvirt *lv)
{
    guint ticker = g_timeout_add(10, wake, NULL);
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (!sa_libvirt_is_connected(lv) || sa_libvirt_syncing(lv)) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_main_context_iteration(NULL, TRUE);
    }
    g_source_remove(ticker);
}

/* A sync, and its listing applied. */
static void sync_now(SaLibvirt *lv)
{
    sa_libvirt_sync(lv);
    wait_connected(lv);
}

/* Dispatches what is pending (libvirt's domain events). */
static void run_events(void)
{
    for (int i = 0; i < 5; i++)
        while (g_main_context_iteration(NULL, FALSE))
            ;
}

static void connect_backend(Fixture *f)
{
    write_file(f->node_path, node_xml, -1);
    f->lv = sa_libvirt_new(CORE, f->uri);
    g_assert_false(sa_libvirt_connect(f->lv)); /* the open runs in a thread */
    wait_connected(f->lv);
}

static const Discovered *find_discovered(const char *key, guint nth)
{
    for (guint i = 0; i < fake.discovered->len; i++) {
        const Discovered *d = g_ptr_array_index(fake.discovered, i);
        if (g_str_equal(d->key, key) && nth-- == 0)
            return d;
    }
    return NULL;
}

static guint count_discovered(const char *key)
{
    guint n = 0;
    while (find_discovered(key, n))
        n++;
    return n;
}

/* A callback on a worker thread, as the core runs it. */
typedef struct {
    bool (*command)(gpointer, const SaCommand *, GError **);
    gpointer handle;
    const SaCommand *cmd;
    bool ok;
    SaVmFacts *facts;
    GError *error;
} Job;

static gpointer job_thread(gpointer data)
{
    Job *job = data;
    if (job->command)
        job->ok = job->command(job->handle, job->cmd, &job->error);
    else
        job->facts = lv_backend_ops.discover(job->handle, &job->error);
    return NULL;
}

static void run_job(Job *job)
{
    g_thread_join(g_thread_new("worker", job_thread, job));
}

static SaVmFacts *discover(gpointer handle, GError **error)
{
    Job job = {.handle = handle};
    run_job(&job);
    g_assert_true((job.facts == NULL) == (job.error != NULL));
    if (job.error)
        g_propagate_error(error, job.error);
    return job.facts;
}

static bool command(bool (*fn)(gpointer, const SaCommand *, GError **), gpointer handle,
                    const SaCommand *cmd, GError **error)
{
    Job job = {.command = fn, .handle = handle, .cmd = cmd};
    run_job(&job);
    g_assert_true(job.ok == (job.error == NULL));
    if (job.error)
        g_propagate_error(error, job.error);
    return job.ok;
}

static void assert_cpuset(const SaCpuSet *set, const char *expected)
{
    g_autofree char *text = set ? sa_cpuset_format(set) : g_strdup("(none)");
    g_assert_cmpstr(text, ==, expected);
}

static LvDomain *handle_of(const char *key)
{
    const Discovered *d = find_discovered(key, 0);
    g_assert_nonnull(d);
    return d->handle;
}

/* Connecting discovers every running domain (not the shut-off one) on the main thread; the
 * facts come from discover on a worker. */
static void test_connect_discover(Fixture *f, gconstpointer data)
{
    connect_backend(f);
    g_assert_cmpuint(count_discovered(WEB_UUID), ==, 1);
    g_assert_cmpuint(count_discovered(SCRATCH_UUID), ==, 1);
    g_assert_cmpuint(count_discovered(OFF_UUID), ==, 0);
    g_assert_cmpstr(find_discovered(WEB_UUID, 0)->name, ==, "web");
    g_assert_cmpuint(fake.list_keys_calls, ==, 1);
    g_assert_cmpuint(fake.forgotten->len, ==, 0);

    LvDomain *web = handle_of(WEB_UUID);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaVmFacts) facts = discover(web, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(facts->key, ==, WEB_UUID);
    g_assert_cmpstr(facts->name, ==, "web");
    g_assert_cmpint(facts->pid, ==, WEB_PID);
    g_assert_cmpuint(facts->n_vcpus, ==, 4);
    g_assert_cmpuint(facts->memory_bytes, ==, G_GUINT64_CONSTANT(1024) << 20);
    g_assert_null(facts->vcpu_tids);
    assert_cpuset(facts->vcpu_cpuset, "0-5");
    g_assert_nonnull(facts->vcpu_pins);
    g_assert_cmpuint(facts->vcpu_pins->len, ==, 4);
    g_assert_null(g_ptr_array_index(facts->vcpu_pins, 0));
    assert_cpuset(g_ptr_array_index(facts->vcpu_pins, 1), "2-3");
    g_assert_null(g_ptr_array_index(facts->vcpu_pins, 3));
    assert_cpuset(facts->emulator_pin, "4-5");
    g_assert_true(facts->has_settings);
    g_assert_null(facts->settings_error);
    g_assert_cmpint(facts->settings.mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(facts->settings.preferred, ==, 1);
    g_assert_cmpint(facts->settings.softness, ==, 30);
    g_assert_cmpint(facts->settings.assigned, ==, -1);
    g_assert_null(facts->flavor);
    g_assert_null(facts->title);
    g_assert_null(facts->description);

    /* The I/O threads and their pins, learnt from the live XML. */
    g_autoptr(GArray) ids = NULL;
    g_autoptr(GPtrArray) pins = NULL;
    g_assert_true(lv_domain_iothreads(web, &ids, &pins));
    g_assert_cmpuint(ids->len, ==, 2);
    g_assert_cmpuint(g_array_index(ids, guint, 0), ==, 1);
    g_assert_cmpuint(g_array_index(ids, guint, 1), ==, 2);
    g_assert_null(g_ptr_array_index(pins, 0));
    assert_cpuset(g_ptr_array_index(pins, 1), "5");
    g_assert_cmpuint(fake.iothread_info, ==, 0);
}

static virTypedParameter string_param(const char *field, char *value)
{
    virTypedParameter p = {.type = VIR_TYPED_PARAM_STRING};
    g_strlcpy(p.field, field, sizeof(p.field));
    p.value.s = value;
    return p;
}

/* The live softaff element, parsed. */
typedef struct {
    SaMetadata md;
    SaMetadataRecord rec; /* softaffd's record (own NULL: none) */
    guint attrs;          /* the user's attributes (SA_METADATA_HAS_*) */
} LiveElement;

static void live_element_clear(LiveElement *el)
{
    sa_metadata_record_clear(&el->rec);
}

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(LiveElement, live_element_clear)

/* h's live softaff element into el (zeroed): false when there is none. */
static bool live_element(LvDomain *h, LiveElement *el)
{
    g_autoptr(virDomain) dom = lv_domain_get_dom(h);
    char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, SA_METADATA_NS,
                                     VIR_DOMAIN_AFFECT_LIVE);
    if (!xml)
        return false;
    g_autoptr(GError) error = NULL;
    g_test_message("live element: %s", xml);
    g_assert_true(sa_metadata_parse_full(xml, strlen(xml), &el->md, &el->rec, &el->attrs, &error));
    free(xml);
    return true;
}

static void assert_pin(const GPtrArray *pins, guint i, const char *expected)
{
    const SaCpuSet *set = pins && i < pins->len ? g_ptr_array_index(pins, i) : NULL;
    assert_cpuset(set, expected);
}

/* A command for n vCPUs: each vCPU its cpulist (';'-separated), the other threads others. */
typedef struct {
    SaCommand cmd;
    GPtrArray *sets;
    SaCpuSet *others;
} TestCommand;

static void test_command_init(TestCommand *t, const char *key, const char *vcpus,
                              const char *others)
{
    g_auto(GStrv) parts = g_strsplit(vcpus, ";", -1);
    t->sets = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    for (guint i = 0; parts[i]; i++)
        g_ptr_array_add(t->sets, sa_cpuset_parse(parts[i], NULL));
    t->others = sa_cpuset_parse(others, NULL);
    t->cmd = (SaCommand){
        .key = key,
        .name = key,
        .n_vcpus = t->sets->len,
        .vcpus = (SaCpuSet *const *)t->sets->pdata,
        .others = t->others,
    };
}

static void test_command_clear(TestCommand *t)
{
    g_ptr_array_unref(t->sets);
    sa_cpuset_free(t->others);
}

/* One pin or restore (fn) of key's VM through h, on a worker as the core runs it: vCPU i gets
 * the i-th of the ';'-separated cpulists of vcpus, the other threads others. It must work. */
static void run_command(bool (*fn)(gpointer, const SaCommand *, GError **), LvDomain *h,
                        const char *key, const char *vcpus, const char *others)
{
    g_autoptr(GError) error = NULL;
    TestCommand t;
    test_command_init(&t, key, vcpus, others);
    g_assert_true(command(fn, h, &t.cmd, &error));
    g_assert_no_error(error);
    test_command_clear(&t);
}

/* softaff's pin of web homed on CPUs 0-1: vCPU 1, which its user pinned to 2-3, keeps that. */
#define WEB_HOME "0-1;2-3;0-1;0-1"

static void pin_web(LvDomain *web, const char *vcpus, const char *others)
{
    run_command(lv_backend_ops.pin, web, WEB_UUID, vcpus, others);
}

/* The pinning libvirt holds for the domain: "vCPU0 vCPU1 ... | emulator". */
static char *live_pinning(LvDomain *h, guint n_vcpus)
{
    g_autoptr(virDomain) dom = lv_domain_get_dom(h);
    gsize maplen = lv_shared_maplen(h->shared);
    g_autofree unsigned char *maps = g_malloc0(maplen * n_vcpus);
    g_assert_cmpint(
        virDomainGetVcpuPinInfo(dom, (int)n_vcpus, maps, (int)maplen, VIR_DOMAIN_AFFECT_LIVE), ==,
        (int)n_vcpus);
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < n_vcpus; i++) {
        g_autoptr(SaCpuSet) set = sa_cpuset_from_cpumap(maps + i * maplen, maplen);
        g_autofree char *text = sa_cpuset_format(set);
        g_string_append_printf(s, "%s ", text);
    }
    g_assert_cmpint(virDomainGetEmulatorPinInfo(dom, maps, (int)maplen, VIR_DOMAIN_AFFECT_LIVE), ==,
                    1);
    g_autoptr(SaCpuSet) emulator = sa_cpuset_from_cpumap(maps, maplen);
    g_autofree char *text = sa_cpuset_format(emulator);
    g_string_append_printf(s, "| %s", text);
    return g_string_free(s, FALSE);
}

/* The live XML's I/O thread pins: "ID=SET ...". */
static char *live_iothread_pins(LvDomain *h)
{
    g_autoptr(virDomain) dom = lv_domain_get_dom(h);
    char *xml = virDomainGetXMLDesc(dom, 0);
    g_assert_nonnull(xml);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaDomainXml) d = sa_domain_xml_parse(xml, strlen(xml), &error);
    free(xml);
    g_assert_no_error(error);
    GString *s = g_string_new(NULL);
    for (guint i = 0; d->iothread_ids && i < d->iothread_ids->len; i++) {
        const SaCpuSet *set = g_ptr_array_index(d->iothreadpin, i);
        g_autofree char *text = set ? sa_cpuset_format(set) : g_strdup("-");
        g_string_append_printf(s, "%s%u=%s", i ? " " : "", g_array_index(d->iothread_ids, guint, i),
                               text);
    }
    return g_string_free(s, FALSE);
}

static void reset_counts(void)
{
    fake.pin_vcpu = fake.pin_emulator = fake.pin_iothread = 0;
}

/* Connects and discovers web once (the I/O threads are known after a discover). */
static LvDomain *connect_discover_web(Fixture *f)
{
    connect_backend(f);
    LvDomain *web = handle_of(WEB_UUID);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaVmFacts) facts = discover(web, &error);
    g_assert_no_error(error);
    return web;
}

/* Web, connected, discovered and pinned once by softaff: WEB_HOME, the other threads on others. */
static LvDomain *pinned_web(Fixture *f, const char *others)
{
    LvDomain *web = connect_discover_web(f);
    pin_web(web, WEB_HOME, others);
    return web;
}

/* The core's restore of web through h (the own sets as the core knows them: every vCPU on its
 * cpuset 0-5 but vCPU 1 on 2-3, the other threads on the emulator's 4-5); returns the live
 * pinning after it (live_pinning). */
static char *restore_web(LvDomain *h)
{
    run_command(lv_backend_ops.restore, h, WEB_UUID, "0-5;2-3;0-5;0-5", "4-5");
    return live_pinning(h, 4);
}

/* pin writes what differs only, and never asks QEMU for its I/O threads. */
static void test_pin(Fixture *f, gconstpointer data)
{
    LvDomain *web = connect_discover_web(f);
    g_autofree char *before = live_pinning(web, 4);
    g_assert_cmpstr(before, ==, "0-5 2-3 0-5 0-5 | 4-5");

    reset_counts();
    pin_web(web, WEB_HOME, "6-7");
    g_autofree char *after = live_pinning(web, 4);
    g_assert_cmpstr(after, ==, "0-1 2-3 0-1 0-1 | 6-7");
    g_assert_cmpuint(fake.pin_vcpu, ==, 3); /* vCPU 1 had its set already */
    g_assert_cmpuint(fake.pin_emulator, ==, 1);
    g_assert_cmpuint(fake.pin_iothread, ==, 2);
    g_autofree char *iothreads = live_iothread_pins(web);
    g_assert_cmpstr(iothreads, ==, "1=6-7 2=6-7");

    /* Before the first pin, the VM's own settings went into its element, beside the user's
     * attributes. */
    g_auto(LiveElement) el = {0};
    g_assert_true(live_element(web, &el));
    g_assert_cmpint(el.md.mode, ==, SA_MODE_STRICT);
    g_assert_cmpint(el.md.preferred, ==, 1);
    g_assert_cmpint(el.md.softness, ==, 30);
    g_assert_cmpuint(el.attrs, ==,
                     SA_METADATA_HAS_MODE | SA_METADATA_HAS_PREFERRED | SA_METADATA_HAS_SOFTNESS);
    g_assert_false(el.rec.created);
    g_assert_nonnull(el.rec.own);
    g_assert_cmpuint(el.rec.own->n_vcpus, ==, 4);
    assert_cpuset(el.rec.own->vcpu_cpuset, "0-5");
    assert_pin(el.rec.own->vcpupin, 0, "(none)");
    assert_pin(el.rec.own->vcpupin, 1, "2-3");
    assert_cpuset(el.rec.own->emulatorpin, "4-5");
    assert_cpuset(sa_own_pins_iothread(el.rec.own, 2), "5");
    assert_cpuset(sa_own_pins_iothread(el.rec.own, 1), "(none)");

    /* The same command again: nothing to write. */
    reset_counts();
    pin_web(web, WEB_HOME, "6-7");
    g_assert_cmpuint(fake.pin_vcpu + fake.pin_emulator + fake.pin_iothread, ==, 0);
    g_assert_cmpuint(fake.iothread_info, ==, 0);
}

/* restore puts the core's sets back, and each I/O thread its own pin when it has one. */
static void test_restore(Fixture *f, gconstpointer data)
{
    LvDomain *web = connect_discover_web(f);
    pin_web(web, "6;6;7;7", "0");
    g_autofree char *pinned = live_iothread_pins(web);
    g_assert_cmpstr(pinned, ==, "1=0 2=0");

    reset_counts();
    g_autofree char *after = restore_web(web);
    g_assert_cmpstr(after, ==, "0-5 2-3 0-5 0-5 | 4-5");
    g_autofree char *iothreads = live_iothread_pins(web);
    g_assert_cmpstr(iothreads, ==, "1=4-5 2=5");
    g_assert_cmpuint(fake.pin_vcpu, ==, 4);
    g_assert_cmpuint(fake.pin_iothread, ==, 2);
    g_assert_cmpuint(fake.iothread_info, ==, 0);
    /* Given back: the record goes, the user's element stays. */
    g_auto(LiveElement) el = {0};
    g_assert_true(live_element(web, &el));
    g_assert_null(el.rec.own);
    g_assert_cmpint(el.md.mode, ==, SA_MODE_STRICT);
}

/* restore gives back what the backend knows best: a thread's own set even when the core's
 * command says otherwise (a user's pin it has not heard of yet). */
static void test_restore_own(Fixture *f, gconstpointer data)
{
    LvDomain *web = connect_discover_web(f);
    pin_web(web, "6;6;7;7", "0");
    run_command(lv_backend_ops.restore, web, WEB_UUID, "0-7;0-7;0-7;0-7", "0-7");
    g_autofree char *after = live_pinning(web, 4);
    g_assert_cmpstr(after, ==, "0-7 2-3 0-7 0-7 | 4-5");
}

/* An I/O thread deleted since discover is dropped, not an error on every command. */
static void test_iothread_deleted(Fixture *f, gconstpointer data)
{
    LvDomain *web = connect_discover_web(f);
    g_autoptr(virDomain) dom = lv_domain_get_dom(web);
    g_assert_cmpint(virDomainDelIOThread(dom, 1, VIR_DOMAIN_AFFECT_LIVE), ==, 0);

    pin_web(web, WEB_HOME, "6-7");
    g_autoptr(GArray) ids = NULL;
    g_autoptr(GPtrArray) pins = NULL;
    g_assert_true(lv_domain_iothreads(web, &ids, &pins));
    g_assert_cmpuint(ids->len, ==, 1);
    g_assert_cmpuint(g_array_index(ids, guint, 0), ==, 2);
    assert_cpuset(g_ptr_array_index(pins, 0), "6-7");
}

/* write_assigned sets the live metadata; its event makes the backend discover the domain. */
static void test_write_assigned(Fixture *f, gconstpointer data)
{
    connect_backend(f);
    LvDomain *web = handle_of(WEB_UUID);
    /* The core's effective settings: only assigned is written, the rest is the user's. */
    SaMetadata md = {SA_MODE_SOFT, -1, 50, 1};
    SaCommand cmd = {.key = WEB_UUID, .name = "web", .settings = &md};
    g_autoptr(GError) error = NULL;
    /* Never before the domain was read: its element is not known. */
    g_assert_false(command(lv_backend_ops.write_assigned, web, &cmd, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_TRANSIENT);
    g_clear_error(&error);
    g_autoptr(SaVmFacts) first = discover(web, &error);
    g_assert_true(command(lv_backend_ops.write_assigned, web, &cmd, &error));
    g_assert_no_error(error);
    md = (SaMetadata){SA_MODE_STRICT, 1, 30, 1};

    g_autoptr(virDomain) dom = lv_domain_get_dom(web);
    char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, SA_METADATA_NS,
                                     VIR_DOMAIN_AFFECT_LIVE);
    g_assert_nonnull(xml);
    SaMetadata got;
    g_assert_true(sa_metadata_parse(xml, strlen(xml), &got, &error));
    free(xml);
    g_assert_cmpmem(&got, sizeof(got), &md, sizeof(md));

    run_events();
    g_assert_cmpuint(count_discovered(WEB_UUID), ==, 2);
    g_autoptr(SaVmFacts) facts = discover(web, &error);
    g_assert_cmpint(facts->settings.assigned, ==, 1);
}

/* Invalid metadata is reported as it is: the core decides. */
static void test_settings_error(Fixture *f, gconstpointer data)
{
    connect_backend(f);
    LvDomain *web = handle_of(WEB_UUID);
    g_autoptr(virDomain) dom = lv_domain_get_dom(web);
    g_assert_cmpint(virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT,
                                         "<affinity softness=\"150\"/>", SA_METADATA_KEY,
                                         SA_METADATA_NS, VIR_DOMAIN_AFFECT_LIVE),
                    ==, 0);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaVmFacts) facts = discover(web, &error);
    g_assert_no_error(error);
    g_assert_true(facts->has_settings);
    g_assert_cmpstr(facts->settings_error, ==,
                    "softaff metadata: softness=\"150\" is out of range (allowed: 0-100)");
}

/* A domain without softaff metadata: softaffd's element (created="yes") records its own pins
 * before the first pin; a restarted daemon (a new handle) takes them from there, not from the
 * live XML that now holds softaff's pins; restore gives them back and removes the element. */
static void test_record(Fixture *f, gconstpointer data)
{
    connect_backend(f);
    LvDomain *scratch = handle_of(SCRATCH_UUID);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaVmFacts) first = discover(scratch, &error);
    g_assert_no_error(error);
    g_assert_cmpint(first->pid, ==, -1); /* no QEMU in the fake /proc */
    g_assert_false(first->has_settings);
    g_assert_cmpstr(first->flavor, ==, "m1.large");
    g_assert_cmpstr(first->title, ==, "Scratch runner");
    g_assert_cmpstr(first->description, ==, "tier: bronze");
    assert_pin(first->vcpu_pins, 0, "6");
    assert_pin(first->vcpu_pins, 1, "(none)");

    run_command(lv_backend_ops.pin, scratch, SCRATCH_UUID, "6;0-3", "4");
    g_auto(LiveElement) el = {0};
    g_assert_true(live_element(scratch, &el));
    g_assert_true(el.rec.created);
    g_assert_cmpuint(el.attrs, ==, 0);
    assert_pin(el.rec.own->vcpupin, 0, "6");
    g_assert_null(el.rec.own->emulatorpin);

    /* Softaff's pins in the live XML are not the VM's own: the element without user
     * attributes is no user metadata either. */
    g_autoptr(virDomain) dom = lv_domain_get_dom(scratch);
    LvDomain *fresh = lv_domain_new(scratch->shared, SCRATCH_UUID, "scratch", dom);
    g_autoptr(SaVmFacts) restarted = discover(fresh, &error);
    g_assert_no_error(error);
    g_assert_false(restarted->has_settings);
    /* softaffd's element sits next to Nova's, which stays. */
    g_assert_cmpstr(restarted->flavor, ==, "m1.large");
    assert_pin(restarted->vcpu_pins, 0, "6");
    assert_pin(restarted->vcpu_pins, 1, "(none)");
    g_assert_null(restarted->emulator_pin);

    run_command(lv_backend_ops.restore, fresh, SCRATCH_UUID, "6;0-7", "0-7");
    g_autofree char *after = live_pinning(fresh, 2);
    g_assert_cmpstr(after, ==, "6 0-7 | 0-7");
    g_auto(LiveElement) none = {0};
    g_assert_false(live_element(fresh, &none));
    lv_domain_unref(fresh);
}

/* A user's live pins, seen as tunable events, are the VM's own from then on: recorded again
 * before the next pin. */
static void test_user_pin_recorded(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "6-7");
    virTypedParameter user[] = {string_param("cputune.vcpupin0", "7"),
                                string_param("cputune.emulatorpin", "1")};
    g_assert_true(lv_domain_tunables(web, user, G_N_ELEMENTS(user)));
    pin_web(web, WEB_HOME, "6-7");
    g_auto(LiveElement) el = {0};
    g_assert_true(live_element(web, &el));
    assert_pin(el.rec.own->vcpupin, 0, "7");
    assert_pin(el.rec.own->vcpupin, 1, "2-3");
    assert_cpuset(el.rec.own->emulatorpin, "1");
}

/* A user's live pin of vCPU vcpu through libvirt (the test driver sends no event). */
static void live_pin_vcpu(LvDomain *h, guint vcpu, const char *cpus)
{
    g_autoptr(virDomain) dom = lv_domain_get_dom(h);
    gsize maplen = lv_shared_maplen(h->shared);
    g_autofree unsigned char *map = g_malloc0(maplen);
    g_autoptr(SaCpuSet) set = sa_cpuset_parse(cpus, NULL);
    sa_cpuset_to_cpumap(set, map, maplen);
    g_assert_cmpint(virDomainPinVcpuFlags(dom, vcpu, map, (int)maplen, VIR_DOMAIN_AFFECT_LIVE), ==,
                    0);
}

/* A user's live pin after softaff recorded and pinned: the record is rewritten by the discover
 * the event asks for, without waiting for a pin softaff may never need (a daemon killed then,
 * a save image or a migration would carry the old record). */
static void test_user_pin_record_at_once(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "5");
    g_autoptr(GError) error = NULL;
    /* `virsh vcpupin web 0 7 --live`: the pin, then its event. */
    live_pin_vcpu(web, 0, "7");
    virTypedParameter user[] = {string_param("cputune.vcpupin0", "7")};
    g_assert_true(lv_domain_tunables(web, user, G_N_ELEMENTS(user)));
    g_autoptr(SaVmFacts) facts = discover(web, &error);
    g_assert_no_error(error);
    assert_pin(facts->vcpu_pins, 0, "7");
    g_auto(LiveElement) el = {0};
    g_assert_true(live_element(web, &el));
    assert_pin(el.rec.own->vcpupin, 0, "7");
    assert_pin(el.rec.own->vcpupin, 1, "2-3");
    /* A restarted daemon (a new handle) reads the user's pin from the record. */
    g_autoptr(virDomain) dom = lv_domain_get_dom(web);
    LvDomain *fresh = lv_domain_new(web->shared, WEB_UUID, "web", dom);
    g_autoptr(SaVmFacts) restarted = discover(fresh, &error);
    g_assert_no_error(error);
    assert_pin(restarted->vcpu_pins, 0, "7");
    lv_domain_unref(fresh);

    /* A VM softaff has not pinned has no record: discover writes none. */
    LvDomain *scratch = handle_of(SCRATCH_UUID);
    g_autoptr(SaVmFacts) first = discover(scratch, &error);
    virTypedParameter mine[] = {string_param("cputune.vcpupin1", "3")};
    g_assert_true(lv_domain_tunables(scratch, mine, G_N_ELEMENTS(mine)));
    g_autoptr(SaVmFacts) again = discover(scratch, &error);
    g_assert_no_error(error);
    g_auto(LiveElement) none = {0};
    g_assert_false(live_element(scratch, &none));
}

/* A restarted daemon hears a user's live pin before its first discover of a VM softaff had
 * recorded: the record it then reads predates the pin, which stays the user's word. */
static void test_user_pin_before_discover(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "5");
    g_autoptr(GError) error = NULL;

    g_autoptr(virDomain) dom = lv_domain_get_dom(web);
    LvDomain *fresh = lv_domain_new(web->shared, WEB_UUID, "web", dom);
    virTypedParameter user[] = {string_param("cputune.vcpupin2", "4"),
                                string_param("cputune.emulatorpin", "1")};
    g_assert_false(lv_domain_tunables(fresh, user, G_N_ELEMENTS(user)));
    g_autoptr(SaVmFacts) facts = discover(fresh, &error);
    g_assert_no_error(error);
    assert_pin(facts->vcpu_pins, 1, "2-3"); /* the record's */
    assert_pin(facts->vcpu_pins, 2, "4");
    assert_cpuset(facts->emulator_pin, "1");
    /* And the record says so at once. */
    g_auto(LiveElement) el = {0};
    g_assert_true(live_element(fresh, &el));
    assert_pin(el.rec.own->vcpupin, 2, "4");
    assert_cpuset(el.rec.own->emulatorpin, "1");
    lv_domain_unref(fresh);
}

/* The user pins while the backend does not listen (libvirtd restarted, softaffd down): a live
 * pin outside the thread's own set cannot be softaff's (it only narrows within it) and is the
 * user's, found by the discover of the next sync or of a restarted daemon's first look. A pin
 * within the own set cannot be told from softaff's narrowing: own stays. */
static void test_user_pin_unheard(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "5");
    g_autoptr(GError) error = NULL;

    /* `virsh vcpupin web 0 6 --live` and `... 2 1`, no event heard (the test driver sends
     * none; the fake core does not hear this call). */
    live_pin_vcpu(web, 0, "6");
    live_pin_vcpu(web, 2, "1");
    g_autoptr(virDomain) dom = lv_domain_get_dom(web);

    /* A restarted daemon: the record says vCPU 0 has no pin of its own (0-5, its cpuset). */
    LvDomain *fresh = lv_domain_new(web->shared, WEB_UUID, "web", dom);
    g_autoptr(SaVmFacts) restarted = discover(fresh, &error);
    g_assert_no_error(error);
    assert_pin(restarted->vcpu_pins, 0, "6");
    assert_pin(restarted->vcpu_pins, 2, "(none)"); /* 1 is within 0-5: may be softaff's */
    lv_domain_unref(fresh);

    /* The same daemon after a new connection (what finish_connect does), then the sync. */
    g_autoptr(SaVmFacts) before = discover(web, &error);
    assert_pin(before->vcpu_pins, 0, "(none)"); /* nothing heard yet */
    lv_domain_mark_unheard(web);
    sync_now(f->lv);
    g_autoptr(SaVmFacts) after = discover(web, &error);
    g_assert_no_error(error);
    assert_pin(after->vcpu_pins, 0, "6");
    assert_pin(after->vcpu_pins, 1, "2-3");
    g_auto(LiveElement) el = {0};
    g_assert_true(live_element(web, &el));
    assert_pin(el.rec.own->vcpupin, 0, "6");
}

/* SIGTERM right after a new connection: the restore runs before the sync's discover and still
 * gives back the user's pin made while no event was heard, not the own set as it was. */
static void test_restore_unheard(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "5");
    live_pin_vcpu(web, 0, "3");
    lv_domain_mark_unheard(web);
    g_autofree char *after = restore_web(web);
    g_assert_cmpstr(after, ==, "3 2-3 0-5 0-5 | 4-5");
}

/* A running domain undefined (now transient) keeps its own pins, not softaff's: a restarted
 * daemon finds them in the record. */
static void test_undefined_while_running(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "5");
    g_autoptr(GError) error = NULL;

    g_autoptr(virDomain) dom = lv_domain_get_dom(web);
    g_assert_cmpint(virDomainUndefine(dom), ==, 0);
    run_events();
    g_autoptr(SaVmFacts) facts = discover(web, &error);
    g_assert_no_error(error);
    assert_pin(facts->vcpu_pins, 0, "(none)");
    assert_pin(facts->vcpu_pins, 1, "2-3");
    assert_cpuset(facts->emulator_pin, "4-5");

    /* A restarted daemon restores from the record. */
    LvDomain *fresh = lv_domain_new(web->shared, WEB_UUID, "web", dom);
    g_autoptr(SaVmFacts) restarted = discover(fresh, &error);
    g_assert_no_error(error);
    assert_pin(restarted->vcpu_pins, 1, "2-3");
    assert_cpuset(restarted->emulator_pin, "4-5");
    g_autofree char *pins = restore_web(fresh);
    g_autofree char *iothreads = live_iothread_pins(fresh);
    g_assert_cmpstr(iothreads, ==, "1=4-5 2=5");
    g_assert_cmpstr(pins, ==, "0-5 2-3 0-5 0-5 | 4-5");
    lv_domain_unref(fresh);
}

/* Lifecycle events: a stopped domain is forgotten, a started one discovered; discover of a
 * domain that no longer runs says GONE. */
static void test_lifecycle(Fixture *f, gconstpointer data)
{
    connect_backend(f);
    LvDomain *web = handle_of(WEB_UUID);
    g_autoptr(virDomain) dom = lv_domain_get_dom(web);
    g_assert_cmpint(virDomainDestroy(dom), ==, 0);
    run_events();
    g_assert_cmpuint(fake.forgotten->len, ==, 1);
    g_assert_cmpstr(g_ptr_array_index(fake.forgotten, 0), ==, WEB_UUID ": stopped");
    g_autoptr(GError) error = NULL;
    g_autoptr(SaVmFacts) none = discover(web, &error);
    g_assert_null(none);
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);
    g_clear_error(&error);

    g_autoptr(virDomain) off = virDomainLookupByUUIDString(virDomainGetConnect(dom), OFF_UUID);
    g_assert_nonnull(off);
    g_assert_cmpint(virDomainCreate(off), ==, 0);
    run_events();
    g_assert_cmpuint(count_discovered(OFF_UUID), ==, 1);
    g_autoptr(SaVmFacts) facts = discover(handle_of(OFF_UUID), &error);
    g_assert_no_error(error);
    g_assert_cmpstr(facts->name, ==, "off");
    g_assert_false(facts->has_settings);
    g_assert_null(facts->vcpu_pins);
}

/* A sync forgets the VMs the core knows that no longer run; threads_lost discovers again. The
 * listing runs in a thread, never on the caller's stack (the main loop: libvirtd may take
 * seconds to answer it right after its restart). */
static void test_sync_forgets(Fixture *f, gconstpointer data)
{
    connect_backend(f);
    g_hash_table_add(fake.keys, g_strdup("0bad0000-0000-4000-8000-00000000dead"));
    sa_libvirt_sync(f->lv);
    g_assert_true(sa_libvirt_syncing(f->lv));
    g_assert_cmpuint(fake.forgotten->len, ==, 0);
    g_assert_cmpuint(count_discovered(WEB_UUID), ==, 1);
    wait_connected(f->lv);
    g_assert_cmpuint(fake.forgotten->len, ==, 1);
    g_assert_cmpstr(g_ptr_array_index(fake.forgotten, 0), ==,
                    "0bad0000-0000-4000-8000-00000000dead: no longer running");
    /* Every running domain again, with the same handle. */
    g_assert_cmpuint(count_discovered(WEB_UUID), ==, 2);
    g_assert_true(find_discovered(WEB_UUID, 0)->handle == find_discovered(WEB_UUID, 1)->handle);

    /* The core lost a vCPU thread: the domain is read again. */
    lv_backend_ops.threads_lost(handle_of(SCRATCH_UUID));
    g_assert_cmpuint(count_discovered(SCRATCH_UUID), ==, 3);

    /* A sync asked for while one lists runs after it, once. */
    sa_libvirt_sync(f->lv);
    sa_libvirt_sync(f->lv);
    wait_connected(f->lv);
    g_assert_cmpuint(count_discovered(WEB_UUID), ==, 3);
}

/* A domain stopped while a sync lists is forgotten and stays so, whether the listing saw it
 * or not; one started meanwhile is discovered and not forgotten by the sync. The stop's event
 * always forgets it. When the listing ran after the stop and was applied before that event was
 * dispatched, the listing forgot it first (no longer running; seen in CI under ASan): the core
 * takes a second forget of a VM it no longer knows as nothing. */
static void test_sync_events_meanwhile(Fixture *f, gconstpointer data)
{
    connect_backend(f);
    g_autoptr(virDomain) web = lv_domain_get_dom(handle_of(WEB_UUID));
    g_autoptr(virDomain) off = virDomainLookupByUUIDString(virDomainGetConnect(web), OFF_UUID);
    g_assert_nonnull(off);
    sa_libvirt_sync(f->lv);
    g_assert_cmpint(virDomainDestroy(web), ==, 0);
    g_assert_cmpint(virDomainCreate(off), ==, 0);
    wait_connected(f->lv);
    run_events();
    guint forgets = fake.forgotten->len;
    g_assert_cmpuint(forgets, >=, 1);
    g_assert_cmpuint(forgets, <=, 2);
    if (forgets == 2)
        g_assert_cmpstr(g_ptr_array_index(fake.forgotten, 0), ==, WEB_UUID ": no longer running");
    g_assert_cmpstr(g_ptr_array_index(fake.forgotten, forgets - 1), ==, WEB_UUID ": stopped");
    guint web_seen = count_discovered(WEB_UUID);
    g_assert_cmpuint(count_discovered(OFF_UUID), >=, 1);
    sync_now(f->lv);
    g_assert_cmpuint(count_discovered(WEB_UUID), ==, web_seen);
    g_assert_cmpuint(fake.forgotten->len, ==, forgets);
}

/* Tunable events (the test driver sends none for pins: the callback's logic is called as the
 * event would): softaff's own writes are recognised, the user's are kept and reported. */
static void test_tunables(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "6-7");
    g_autoptr(GError) error = NULL;
    pin_web(web, "2-3;2-3;2-3;2-3", "6-7");

    /* The events of both writes, the first arriving late. */
    virTypedParameter ours[] = {string_param("cputune.vcpupin0", "0-1"),
                                string_param("cputune.vcpupin0", "2-3"),
                                string_param("cputune.emulatorpin", "6-7")};
    g_assert_false(lv_domain_tunables(web, ours, G_N_ELEMENTS(ours)));
    g_autoptr(SaVmFacts) before = discover(web, &error);
    assert_pin(before->vcpu_pins, 0, "(none)");
    assert_cpuset(before->emulator_pin, "4-5");
    g_assert_cmpuint(before->user_pins, ==, 0); /* softaff's own events are not the user's */

    /* `virsh vcpupin web 3 7 --live` */
    virTypedParameter user[] = {string_param("cputune.vcpupin3", "7")};
    g_assert_true(lv_domain_tunables(web, user, G_N_ELEMENTS(user)));
    g_autoptr(SaVmFacts) after = discover(web, &error);
    g_assert_cmpuint(after->user_pins, ==, 1);
    assert_cpuset(g_ptr_array_index(after->vcpu_pins, 1), "2-3"); /* its definition's */
    assert_cpuset(g_ptr_array_index(after->vcpu_pins, 3), "7");
    g_assert_null(g_ptr_array_index(after->vcpu_pins, 0));

    /* A user's I/O thread pin: its own from now on, and the known pinning follows; an unknown
     * I/O thread asks for a discover. */
    virTypedParameter io[] = {string_param("cputune.iothreadpin1", "3")};
    g_assert_true(lv_domain_tunables(web, io, G_N_ELEMENTS(io)));
    reset_counts();
    pin_web(web, "2-3;2-3;2-3;2-3", "6-7");
    g_assert_cmpuint(fake.pin_iothread, ==, 1);
    g_autoptr(SaVmFacts) io_after = discover(web, &error);
    assert_pin(io_after->iothread_pins, 0, "3");
    assert_pin(io_after->iothread_pins, 1, "5");
    virTypedParameter added[] = {string_param("cputune.iothreadpin9", "3")};
    g_assert_true(lv_domain_tunables(web, added, G_N_ELEMENTS(added)));
}

/* A user's live pin equal to the one softaff just wrote is the user's, not softaff's: an event
 * is softaff's only while one of softaff's writes of that set waits for it. The user's
 * `virsh vcpupin web 0 0-1 --live` after softaff's own event becomes the thread's own setting,
 * its record, and what restore gives back. */
static void test_user_pin_equal(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "6-7");
    g_autoptr(GError) error = NULL;

    /* softaff's own event for vCPU 0. */
    virTypedParameter ours[] = {string_param("cputune.vcpupin0", "0-1")};
    g_assert_false(lv_domain_tunables(web, ours, G_N_ELEMENTS(ours)));
    /* The user's pin of the same value: the user's word now. */
    virTypedParameter user[] = {string_param("cputune.vcpupin0", "0-1")};
    g_assert_true(lv_domain_tunables(web, user, G_N_ELEMENTS(user)));
    /* vCPU 1 had its set: softaff wrote nothing, so 2-3 now is the user's too. */
    virTypedParameter same[] = {string_param("cputune.vcpupin1", "2-3")};
    g_assert_true(lv_domain_tunables(web, same, G_N_ELEMENTS(same)));
    g_autoptr(SaVmFacts) facts = discover(web, &error);
    g_assert_no_error(error);
    assert_pin(facts->vcpu_pins, 0, "0-1");
    assert_pin(facts->vcpu_pins, 1, "2-3");
    /* Both counted, though neither changed an own set: the core pins the VM again. */
    g_assert_cmpuint(facts->user_pins, ==, 2);

    /* The record follows before the next pin, and restore gives the user's sets back. */
    pin_web(web, WEB_HOME, "6-7");
    g_auto(LiveElement) el = {0};
    g_assert_true(live_element(web, &el));
    assert_pin(el.rec.own->vcpupin, 0, "0-1");
    assert_pin(el.rec.own->vcpupin, 1, "2-3");
    assert_pin(el.rec.own->vcpupin, 2, "(none)");
    g_autofree char *after = restore_web(web);
    g_assert_cmpstr(after, ==, "0-1 2-3 0-5 0-5 | 4-5");
}

/* Each of softaff's writes waits for one event: consumed by it, or dropped LV_WRITE_WINDOW_US
 * after the call returned (an event lost with a connection). A write the pin did not need
 * (the thread had the set) leaves nothing to match. */
static void test_user_pin_window(Fixture *f, gconstpointer data)
{
    LvDomain *web = pinned_web(f, "6-7");
    g_autoptr(GError) error = NULL;
    /* vCPUs 0, 2, 3, the emulator and the two I/O threads; not vCPU 1. */
    g_assert_cmpuint(lv_domain_pending_writes(web), ==, 6);
    virTypedParameter ours[] = {string_param("cputune.vcpupin2", "0-1")};
    g_assert_false(lv_domain_tunables(web, ours, G_N_ELEMENTS(ours)));
    g_assert_cmpuint(lv_domain_pending_writes(web), ==, 5);

    /* Within the window, an event equal to a waiting write is softaff's. */
    virTypedParameter early[] = {string_param("cputune.vcpupin0", "0-1")};
    g_assert_false(lv_domain_tunables_at(web, early, G_N_ELEMENTS(early),
                                         g_get_monotonic_time() + LV_WRITE_WINDOW_US / 2));
    g_assert_cmpuint(lv_domain_pending_writes(web), ==, 4);
    /* Past it, the user's: vCPU 3's event never came. */
    virTypedParameter late[] = {string_param("cputune.vcpupin3", "0-1")};
    g_assert_true(lv_domain_tunables_at(web, late, G_N_ELEMENTS(late),
                                        g_get_monotonic_time() + LV_WRITE_WINDOW_US + 1));
    g_assert_cmpuint(lv_domain_pending_writes(web), ==, 0);
    g_autoptr(SaVmFacts) facts = discover(web, &error);
    assert_pin(facts->vcpu_pins, 0, "(none)");
    assert_pin(facts->vcpu_pins, 3, "0-1");
}

/* A failed open is retried with back-off on the main loop; the new connection syncs. */
static void test_reconnect(Fixture *f, gconstpointer data)
{
    f->lv = sa_libvirt_new(CORE, f->uri); /* node.xml does not exist yet */
    g_assert_false(sa_libvirt_connect(f->lv));
    guint ticker = g_timeout_add(10, wake, NULL);
    gint64 deadline = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;
    while (g_atomic_int_get(&failed_opens) < 2) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_main_context_iteration(NULL, TRUE);
    }
    g_source_remove(ticker);
    g_assert_false(sa_libvirt_is_connected(f->lv));
    g_assert_false(sa_libvirt_connect(f->lv)); /* connects now: the open is under way */
    g_assert_cmpuint(fake.discovered->len, ==, 0);

    write_file(f->node_path, node_xml, -1);
    wait_connected(f->lv);
    g_assert_cmpuint(count_discovered(WEB_UUID), ==, 1);
    g_assert_true(sa_libvirt_connect(f->lv)); /* connected: nothing to do */
    g_assert_cmpuint(count_discovered(WEB_UUID), ==, 1);
}

/* After a reconnect a handle holds the new connection's domain object. */
static void test_handle_new_connection(Fixture *f, gconstpointer data)
{
    write_file(f->node_path, node_xml, -1);
    virConnectPtr a = virConnectOpen(f->uri);
    virConnectPtr b = virConnectOpen(f->uri);
    g_autoptr(virDomain) da = virDomainLookupByUUIDString(a, WEB_UUID);
    g_autoptr(virDomain) da2 = virDomainLookupByUUIDString(a, WEB_UUID);
    g_autoptr(virDomain) db = virDomainLookupByUUIDString(b, WEB_UUID);
    LvShared *shared = lv_shared_new(CORE, f->uri);
    LvDomain *h = lv_domain_new(shared, WEB_UUID, "web", da);
    lv_shared_unref(shared);

    lv_domain_set_dom(h, da2); /* same connection: kept */
    g_autoptr(virDomain) got = lv_domain_get_dom(h);
    g_assert_true(got == da);
    lv_domain_set_dom(h, db);
    g_autoptr(virDomain) now = lv_domain_get_dom(h);
    g_assert_true(now == db);
    g_assert_true(virDomainGetConnect(now) == b);
    lv_domain_unref(h);
    virConnectClose(a);
    virConnectClose(b);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_log_set_handler("softaffd", G_LOG_LEVEL_MASK | G_LOG_FLAG_FATAL, log_handler, NULL);
    virSetErrorFunc(NULL, quiet_errors);
    if (virEventRegisterDefaultImpl() < 0)
        g_error("cannot register libvirt's event loop");

    g_test_add("/backend-libvirt/connect-discover", Fixture, NULL, fixture_setup,
               test_connect_discover, fixture_teardown);
    g_test_add("/backend-libvirt/pin", Fixture, NULL, fixture_setup, test_pin, fixture_teardown);
    g_test_add("/backend-libvirt/restore", Fixture, NULL, fixture_setup, test_restore,
               fixture_teardown);
    g_test_add("/backend-libvirt/iothread-deleted", Fixture, NULL, fixture_setup,
               test_iothread_deleted, fixture_teardown);
    g_test_add("/backend-libvirt/write-assigned", Fixture, NULL, fixture_setup, test_write_assigned,
               fixture_teardown);
    g_test_add("/backend-libvirt/settings-error", Fixture, NULL, fixture_setup, test_settings_error,
               fixture_teardown);
    g_test_add("/backend-libvirt/restore-own", Fixture, NULL, fixture_setup, test_restore_own,
               fixture_teardown);
    g_test_add("/backend-libvirt/record", Fixture, NULL, fixture_setup, test_record,
               fixture_teardown);
    g_test_add("/backend-libvirt/user-pin-recorded", Fixture, NULL, fixture_setup,
               test_user_pin_recorded, fixture_teardown);
    g_test_add("/backend-libvirt/user-pin-record-at-once", Fixture, NULL, fixture_setup,
               test_user_pin_record_at_once, fixture_teardown);
    g_test_add("/backend-libvirt/user-pin-before-discover", Fixture, NULL, fixture_setup,
               test_user_pin_before_discover, fixture_teardown);
    g_test_add("/backend-libvirt/user-pin-unheard", Fixture, NULL, fixture_setup,
               test_user_pin_unheard, fixture_teardown);
    g_test_add("/backend-libvirt/restore-unheard", Fixture, NULL, fixture_setup,
               test_restore_unheard, fixture_teardown);
    g_test_add("/backend-libvirt/undefined-while-running", Fixture, NULL, fixture_setup,
               test_undefined_while_running, fixture_teardown);
    g_test_add("/backend-libvirt/lifecycle", Fixture, NULL, fixture_setup, test_lifecycle,
               fixture_teardown);
    g_test_add("/backend-libvirt/sync-forgets", Fixture, NULL, fixture_setup, test_sync_forgets,
               fixture_teardown);
    g_test_add("/backend-libvirt/sync-events-meanwhile", Fixture, NULL, fixture_setup,
               test_sync_events_meanwhile, fixture_teardown);
    g_test_add("/backend-libvirt/tunables", Fixture, NULL, fixture_setup, test_tunables,
               fixture_teardown);
    g_test_add("/backend-libvirt/user-pin-equal", Fixture, NULL, fixture_setup, test_user_pin_equal,
               fixture_teardown);
    g_test_add("/backend-libvirt/user-pin-window", Fixture, NULL, fixture_setup,
               test_user_pin_window, fixture_teardown);
    g_test_add("/backend-libvirt/reconnect", Fixture, NULL, fixture_setup, test_reconnect,
               fixture_teardown);
    g_test_add("/backend-libvirt/handle-new-connection", Fixture, NULL, fixture_setup,
               test_handle_new_connection, fixture_teardown);
    g_autofree char *proc = make_proc();
    int status = g_test_run();
    remove_tree(proc);
    return status;
}
