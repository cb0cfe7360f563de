/* softaffd — the libvirt backend, main-thread side: the connection (opened in a thread,
 * keepalive, close callback, reconnect with back-off), lifecycle / metadata / tunable events,
 * and listing the running domains. Each running domain is handed to the core with
 * sa_core_discover(); the core then runs lv_backend_ops on its workers. Opening the connection
 * and listing the domains run in threads (libvirtd may be slow to answer either); the calls
 * made on the main loop do not wait on libvirtd, a domain job or the QEMU monitor. */
#define G_LOG_DOMAIN "softaffd"

#include "backend-libvirt.h"

#include <gio/gio.h>
#include <libvirt/virterror.h>
#include <stdlib.h>

#include "lv-private.h"
#include "sa-error.h"

#define RECONNECT_MIN_MS 500
#define RECONNECT_MAX_MS 30000

struct SaLibvirt {
    SaCore *core;
    LvShared *shared; /* URI, host CPUs: shared with the handles */
    virConnectPtr conn;
    int cb_ids[3];
    GHashTable *domains;   /* UUID -> LvDomain* (a reference): events reuse the handle */
    GCancellable *opening; /* an open runs in a thread; NULL when none */
    guint reconnect_source;
    guint reconnect_delay_ms;
    bool closing;
    GCancellable *listing;     /* a sync's listing runs in a thread; NULL when none */
    GHashTable *since_listing; /* UUID -> SEEN_*: what events said while it listed */
    bool list_again;           /* a sync was asked for while one listed */
};

/* An event's word on a domain while a sync lists: newer than the listing. */
enum { SEEN_RUNS = 1, SEEN_GONE = 2 };

/* What the open thread hands to the main loop. */
typedef struct {
    virConnectPtr conn;
    int host_cpus; /* virNodeGetCPUMap, -1 when it failed */
} LvOpened;

static void opened_free(gpointer data)
{
    LvOpened *o = data;
    if (o->conn)
        virConnectClose(o->conn);
    g_free(o);
}

static LvDomain *domain_handle(SaLibvirt *lv, virDomainPtr dom, const char *uuid)
{
    LvDomain *h = g_hash_table_lookup(lv->domains, uuid);
    if (h) {
        lv_domain_set_dom(h, dom);
        return h;
    }
    h = lv_domain_new(lv->shared, uuid, virDomainGetName(dom), dom);
    g_hash_table_insert(lv->domains, h->uuid, h);
    return h;
}

/* The core reads the domain on a worker. */
static void discover_domain(SaLibvirt *lv, virDomainPtr dom)
{
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0)
        return;
    LvDomain *h = domain_handle(lv, dom, uuid);
    if (lv->listing)
        g_hash_table_insert(lv->since_listing, g_strdup(uuid), GINT_TO_POINTER(SEEN_RUNS));
    sa_core_discover(lv->core, &lv_backend_ops, h, uuid, virDomainGetName(dom));
}

static void forget_domain(SaLibvirt *lv, const char *uuid, const char *why)
{
    if (lv->listing)
        g_hash_table_insert(lv->since_listing, g_strdup(uuid), GINT_TO_POINTER(SEEN_GONE));
    sa_core_forget(lv->core, uuid, why);
    g_hash_table_remove(lv->domains, uuid);
}

/* The VMs of this backend the core knows and the handles of domains that no longer run. */
static void forget_missing(SaLibvirt *lv, GHashTable *running)
{
    g_autoptr(GPtrArray) keys = sa_core_list_keys(lv->core, &lv_backend_ops);
    for (guint i = 0; keys && i < keys->len; i++) {
        const char *key = g_ptr_array_index(keys, i);
        if (!g_hash_table_contains(running, key))
            sa_core_forget(lv->core, key, "no longer running");
    }
    GHashTableIter it;
    gpointer key;
    g_hash_table_iter_init(&it, lv->domains);
    while (g_hash_table_iter_next(&it, &key, NULL))
        if (!g_hash_table_contains(running, key))
            g_hash_table_iter_remove(&it);
}

static void free_domain(gpointer dom)
{
    virDomainFree(dom);
}

static void close_conn(gpointer conn)
{
    virConnectClose(conn);
}

/* A thread: listing the domains waits on libvirtd, which may be slow to answer (right after
 * its restart, while it reconnects to its guests and a domain job holds it). */
static void list_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(data, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    if (n < 0) {
        g_task_return_new_error(task, SA_ERROR, SA_ERROR_TRANSIENT, "%s", virGetLastErrorMessage());
        return;
    }
    GPtrArray *list = g_ptr_array_new_full((guint)n, free_domain);
    for (int i = 0; i < n; i++)
        g_ptr_array_add(list, doms[i]);
    free(doms);
    g_task_return_pointer(task, list, (GDestroyNotify)g_ptr_array_unref);
}

/* Main loop: every listed domain is discovered again and the VMs that no longer run are
 * forgotten, except where an event since the listing said otherwise (a domain stopped after
 * it is not discovered; one started after it is not forgotten). */
static void apply_listing(SaLibvirt *lv, GPtrArray *list)
{
    g_autoptr(GHashTable) running = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < list->len; i++) {
        virDomainPtr dom = g_ptr_array_index(list, i);
        char uuid[VIR_UUID_STRING_BUFLEN];
        if (virDomainGetUUIDString(dom, uuid) < 0 ||
            GPOINTER_TO_INT(g_hash_table_lookup(lv->since_listing, uuid)) == SEEN_GONE)
            continue;
        g_hash_table_add(running, g_strdup(uuid));
        discover_domain(lv, dom);
    }
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, lv->since_listing);
    while (g_hash_table_iter_next(&it, &key, &value))
        if (GPOINTER_TO_INT(value) == SEEN_RUNS)
            g_hash_table_add(running, g_strdup(key));
    forget_missing(lv, running);
}

/* Main loop: the listing thread finished. A cancelled one belongs to a freed SaLibvirt; one
 * of an earlier connection, or overtaken by a newer sync, is dropped. */
static void list_done(GObject *source, GAsyncResult *result, gpointer data)
{
    GTask *task = G_TASK(result);
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task)))
        return;
    SaLibvirt *lv = data;
    g_clear_object(&lv->listing);
    g_autoptr(GError) error = NULL;
    g_autoptr(GPtrArray) list = g_task_propagate_pointer(task, &error);
    if (!list)
        g_warning("listing domains failed: %s", error->message);
    else if (g_task_get_task_data(task) == lv->conn && !lv->list_again)
        apply_listing(lv, list);
    g_hash_table_remove_all(lv->since_listing);
    if (lv->list_again) {
        lv->list_again = false;
        sa_libvirt_sync(lv);
    }
}

void sa_libvirt_sync(SaLibvirt *lv)
{
    if (!lv->conn)
        return;
    if (lv->listing) {
        lv->list_again = true;
        return;
    }
    virConnectRef(lv->conn);
    lv->listing = g_cancellable_new();
    GTask *task = g_task_new(NULL, lv->listing, list_done, lv);
    g_task_set_task_data(task, lv->conn, close_conn);
    g_task_run_in_thread(task, list_thread);
    g_object_unref(task);
}

bool sa_libvirt_syncing(const SaLibvirt *lv)
{
    return lv->listing != NULL;
}

/* Events come with the domain's id at the time: -1 for a domain that does not run. */
static bool event_domain_runs(virDomainPtr dom)
{
    return virDomainGetID(dom) != (unsigned int)-1;
}

static int lifecycle_cb(virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
    SaLibvirt *lv = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0)
        return 0;
    g_debug("%s: lifecycle event %d/%d", virDomainGetName(dom), event, detail);
    switch (event) {
    case VIR_DOMAIN_EVENT_STARTED:
    case VIR_DOMAIN_EVENT_RESUMED:
        discover_domain(lv, dom);
        break;
    case VIR_DOMAIN_EVENT_DEFINED:
    case VIR_DOMAIN_EVENT_UNDEFINED:
        /* Read again: its name or persistence may have changed. */
        if (event_domain_runs(dom))
            discover_domain(lv, dom);
        break;
    case VIR_DOMAIN_EVENT_STOPPED:
        forget_domain(lv, uuid, "stopped");
        break;
    case VIR_DOMAIN_EVENT_CRASHED:
        forget_domain(lv, uuid, "crashed");
        break;
    default:
        break;
    }
    return 0;
}

static int metadata_cb(virConnectPtr conn, virDomainPtr dom, int type, const char *nsuri,
                       void *opaque)
{
    SaLibvirt *lv = opaque;
    if (type == VIR_DOMAIN_METADATA_ELEMENT && g_strcmp0(nsuri, SA_METADATA_NS) == 0 &&
        event_domain_runs(dom))
        discover_domain(lv, dom);
    return 0;
}

/* A pin changed: softaff's own write, or the user's (`virsh vcpupin --live`), which is
 * recorded and reported. */
static int tunable_cb(virConnectPtr conn, virDomainPtr dom, virTypedParameterPtr params,
                      int nparams, void *opaque)
{
    SaLibvirt *lv = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0)
        return 0;
    LvDomain *h = g_hash_table_lookup(lv->domains, uuid);
    if (h && lv_domain_tunables(h, params, nparams))
        discover_domain(lv, dom);
    return 0;
}

static void schedule_reconnect(SaLibvirt *lv);

static void close_cb(virConnectPtr conn, int reason, void *opaque)
{
    SaLibvirt *lv = opaque;
    if (lv->closing)
        return;
    g_warning("connection to %s lost (reason %d); reconnecting", lv->shared->uri, reason);
    /* The connection is closed from a timer: not inside libvirt's own callback. */
    schedule_reconnect(lv);
}

static void drop_connection(SaLibvirt *lv)
{
    if (!lv->conn)
        return;
    lv->closing = true;
    for (guint i = 0; i < G_N_ELEMENTS(lv->cb_ids); i++) {
        if (lv->cb_ids[i] >= 0)
            virConnectDomainEventDeregisterAny(lv->conn, lv->cb_ids[i]);
        lv->cb_ids[i] = -1;
    }
    virConnectUnregisterCloseCallback(lv->conn, close_cb);
    virConnectClose(lv->conn);
    lv->conn = NULL;
    lv->closing = false;
    virResetLastError();
}

static gboolean reconnect_cb(gpointer data)
{
    SaLibvirt *lv = data;
    lv->reconnect_source = 0;
    sa_libvirt_connect(lv);
    return G_SOURCE_REMOVE;
}

static void schedule_reconnect(SaLibvirt *lv)
{
    if (lv->reconnect_source)
        return;
    guint delay = lv->reconnect_delay_ms ? lv->reconnect_delay_ms : RECONNECT_MIN_MS;
    lv->reconnect_delay_ms = MIN(delay * 2, RECONNECT_MAX_MS);
    lv->reconnect_source = g_timeout_add(delay, reconnect_cb, lv);
}

static void register_events(SaLibvirt *lv)
{
    lv->cb_ids[0] =
        virConnectDomainEventRegisterAny(lv->conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                         VIR_DOMAIN_EVENT_CALLBACK(lifecycle_cb), lv, NULL);
    lv->cb_ids[1] =
        virConnectDomainEventRegisterAny(lv->conn, NULL, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
                                         VIR_DOMAIN_EVENT_CALLBACK(metadata_cb), lv, NULL);
    lv->cb_ids[2] =
        virConnectDomainEventRegisterAny(lv->conn, NULL, VIR_DOMAIN_EVENT_ID_TUNABLE,
                                         VIR_DOMAIN_EVENT_CALLBACK(tunable_cb), lv, NULL);
    if (lv->cb_ids[0] < 0 || lv->cb_ids[1] < 0 || lv->cb_ids[2] < 0)
        g_warning("cannot register for domain events on %s: %s", lv->shared->uri,
                  virGetLastErrorMessage());
}

/* Main loop: the open succeeded. */
static void finish_connect(SaLibvirt *lv, LvOpened *opened)
{
    lv->conn = g_steal_pointer(&opened->conn);
    if (virConnectRegisterCloseCallback(lv->conn, close_cb, lv, NULL) < 0)
        g_debug("no close callback on %s: %s", lv->shared->uri, virGetLastErrorMessage());
    int host_cpus = opened->host_cpus;
    if (host_cpus <= 0)
        host_cpus = sa_cpuset_last(sa_core_topology(lv->core)->online) + 1;
    lv_shared_set_host_cpus(lv->shared, host_cpus);
    register_events(lv);
    lv->reconnect_delay_ms = 0;
    virResetLastError();
    g_info("connected to %s (%d host CPUs)", lv->shared->uri, host_cpus);
    /* The events since the last connection are lost: the user may have pinned meanwhile. */
    GHashTableIter it;
    gpointer h;
    g_hash_table_iter_init(&it, lv->domains);
    while (g_hash_table_iter_next(&it, NULL, &h))
        lv_domain_mark_unheard(h);
    sa_libvirt_sync(lv);
}

/* A thread: virConnectOpen may wait as long as libvirtd does not answer. */
static void open_thread(GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
    const char *uri = data;
    LvOpened *o = g_new0(LvOpened, 1);
    o->conn = virConnectOpen(uri);
    if (!o->conn) {
        g_task_return_new_error(task, SA_ERROR, SA_ERROR_TRANSIENT, "%s", virGetLastErrorMessage());
        g_free(o);
        return;
    }
    /* Both may wait on libvirtd too. */
    if (virConnectSetKeepAlive(o->conn, 5, 3) < 0)
        g_debug("keepalive not supported by %s: %s", uri, virGetLastErrorMessage());
    unsigned char *map = NULL;
    o->host_cpus = virNodeGetCPUMap(o->conn, &map, NULL, 0);
    free(map);
    virResetLastError();
    g_task_return_pointer(task, o, opened_free);
}

/* Main loop: the open thread finished. A cancelled open belongs to a freed SaLibvirt. */
static void open_done(GObject *source, GAsyncResult *result, gpointer data)
{
    GTask *task = G_TASK(result);
    if (g_cancellable_is_cancelled(g_task_get_cancellable(task)))
        return;
    SaLibvirt *lv = data;
    g_clear_object(&lv->opening);
    g_autoptr(GError) error = NULL;
    LvOpened *opened = g_task_propagate_pointer(task, &error);
    if (!opened) {
        g_warning("cannot connect to %s: %s; retrying in %u ms", lv->shared->uri, error->message,
                  lv->reconnect_delay_ms ? lv->reconnect_delay_ms : RECONNECT_MIN_MS);
        schedule_reconnect(lv);
        return;
    }
    finish_connect(lv, opened);
    opened_free(opened);
}

bool sa_libvirt_connect(SaLibvirt *lv)
{
    if (sa_libvirt_is_connected(lv))
        return true;
    if (lv->opening)
        return false;
    if (lv->reconnect_source) {
        g_source_remove(lv->reconnect_source);
        lv->reconnect_source = 0;
    }
    drop_connection(lv);
    lv->opening = g_cancellable_new();
    GTask *task = g_task_new(NULL, lv->opening, open_done, lv);
    g_task_set_task_data(task, g_strdup(lv->shared->uri), g_free);
    g_task_run_in_thread(task, open_thread);
    g_object_unref(task);
    return false;
}

bool sa_libvirt_is_connected(const SaLibvirt *lv)
{
    return lv->conn && !lv->reconnect_source && virConnectIsAlive(lv->conn) == 1;
}

SaLibvirt *sa_libvirt_new(SaCore *core, const char *uri)
{
    SaLibvirt *lv = g_new0(SaLibvirt, 1);
    lv->core = core;
    lv->shared = lv_shared_new(core, uri);
    lv->domains = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, lv_domain_unref);
    lv->since_listing = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < G_N_ELEMENTS(lv->cb_ids); i++)
        lv->cb_ids[i] = -1;
    return lv;
}

void sa_libvirt_free(SaLibvirt *lv)
{
    if (!lv)
        return;
    if (lv->opening) {
        g_cancellable_cancel(lv->opening);
        g_clear_object(&lv->opening);
    }
    if (lv->listing) {
        g_cancellable_cancel(lv->listing);
        g_clear_object(&lv->listing);
    }
    if (lv->reconnect_source)
        g_source_remove(lv->reconnect_source);
    drop_connection(lv);
    g_hash_table_unref(lv->domains);
    g_hash_table_unref(lv->since_listing);
    lv_shared_unref(lv->shared);
    g_free(lv);
}
