/* softaffd — the libvirt backend's per-domain handle and what its workers share: the state
 * both the main thread (events) and the workers (commands) touch, each piece under a lock. The
 * VM's own settings and their record are in lv-own.c. */
#define G_LOG_DOMAIN "softaffd"

#include <libvirt/virterror.h>
#include <stdio.h>
#include <string.h>

#include "lv-private.h"
#include "sa-error.h"

LvShared *lv_shared_new(SaCore *core, const char *uri)
{
    LvShared *s = g_new0(LvShared, 1);
    s->refs = 1;
    s->core = core;
    s->uri = g_strdup(uri);
    return s;
}

LvShared *lv_shared_ref(LvShared *shared)
{
    g_atomic_int_inc(&shared->refs);
    return shared;
}

void lv_shared_unref(LvShared *shared)
{
    if (!shared || !g_atomic_int_dec_and_test(&shared->refs))
        return;
    g_free(shared->uri);
    g_free(shared);
}

gsize lv_shared_maplen(LvShared *shared)
{
    return VIR_CPU_MAPLEN(MAX(g_atomic_int_get(&shared->host_cpus), 1));
}

void lv_shared_set_host_cpus(LvShared *shared, int host_cpus)
{
    g_atomic_int_set(&shared->host_cpus, host_cpus);
}

static GPtrArray *new_set_array(void)
{
    return g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
}

static void write_free(LvWrite *w)
{
    g_free(w->field);
    sa_cpuset_free(w->set);
    g_free(w);
}

LvDomain *lv_domain_new(LvShared *shared, const char *uuid, const char *name, virDomainPtr dom)
{
    LvDomain *h = g_new0(LvDomain, 1);
    h->refs = 1;
    h->uuid = g_strdup(uuid);
    h->name = g_strdup(name);
    h->shared = lv_shared_ref(shared);
    g_mutex_init(&h->lock);
    virDomainRef(dom);
    h->dom = dom;
    h->writes = g_ptr_array_new_with_free_func((GDestroyNotify)write_free);
    h->early_pins = g_ptr_array_new_with_free_func((GDestroyNotify)write_free);
    h->last_sent =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)sa_cpuset_free);
    h->next_write = 1;
    h->element_ok = true;
    sa_metadata_init(&h->user);
    h->assigned = -1;
    return h;
}

gpointer lv_domain_ref(gpointer handle)
{
    LvDomain *h = handle;
    g_atomic_int_inc(&h->refs);
    return h;
}

void lv_domain_unref(gpointer handle)
{
    LvDomain *h = handle;
    if (!h || !g_atomic_int_dec_and_test(&h->refs))
        return;
    virDomainFree(h->dom);
    g_ptr_array_unref(h->writes);
    g_ptr_array_unref(h->early_pins);
    g_hash_table_unref(h->last_sent);
    if (h->iothread_ids)
        g_array_unref(h->iothread_ids);
    if (h->iothread_pins)
        g_ptr_array_unref(h->iothread_pins);
    sa_own_pins_free(h->own);
    g_mutex_clear(&h->lock);
    lv_shared_unref(h->shared);
    g_free(h->name);
    g_free(h->uuid);
    g_free(h);
}

void lv_domain_set_dom(LvDomain *h, virDomainPtr dom)
{
    g_mutex_lock(&h->lock);
    if (virDomainGetConnect(h->dom) != virDomainGetConnect(dom)) {
        virDomainRef(dom);
        virDomainFree(h->dom);
        h->dom = dom;
    }
    g_mutex_unlock(&h->lock);
}

virDomainPtr lv_domain_get_dom(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    virDomainPtr dom = h->dom;
    virDomainRef(dom);
    g_mutex_unlock(&h->lock);
    return dom;
}

char *lv_field_vcpu(guint vcpu)
{
    return g_strdup_printf(VIR_DOMAIN_TUNABLE_CPU_VCPUPIN, vcpu);
}

char *lv_field_iothread(guint id)
{
    return g_strdup_printf(VIR_DOMAIN_TUNABLE_CPU_IOTHREADSPIN, id);
}

/* Under the lock: drops the writes whose event is overdue (see LV_WRITE_WINDOW_US). */
static void expire_writes(LvDomain *h, gint64 now)
{
    for (guint i = 0; i < h->writes->len;) {
        const LvWrite *w = g_ptr_array_index(h->writes, i);
        if (w->done_at != 0 && now - w->done_at > LV_WRITE_WINDOW_US) {
            g_debug("%s: no event came for softaff's write of %s (sent %.3f s ago)", h->name,
                    w->field, (double)(now - w->sent_at) / G_USEC_PER_SEC);
            g_ptr_array_remove_index(h->writes, i);
        } else {
            i++;
        }
    }
}

guint64 lv_domain_write_sent(LvDomain *h, const char *field, const SaCpuSet *set)
{
    gint64 now = g_get_monotonic_time();
    LvWrite *w = g_new0(LvWrite, 1);
    w->field = g_strdup(field);
    w->set = sa_cpuset_copy(set);
    w->sent_at = now;
    g_mutex_lock(&h->lock);
    expire_writes(h, now);
    w->id = h->next_write++;
    g_ptr_array_add(h->writes, w);
    g_hash_table_replace(h->last_sent, g_strdup(field), sa_cpuset_copy(set));
    g_mutex_unlock(&h->lock);
    return w->id;
}

void lv_domain_write_done(LvDomain *h, guint64 id)
{
    g_mutex_lock(&h->lock);
    for (guint i = 0; i < h->writes->len; i++) {
        LvWrite *w = g_ptr_array_index(h->writes, i);
        if (w->id == id) {
            w->done_at = MAX(g_get_monotonic_time(), 1);
            break;
        }
    }
    g_mutex_unlock(&h->lock);
}

guint lv_domain_pending_writes(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    guint n = h->writes->len;
    g_mutex_unlock(&h->lock);
    return n;
}

/* Under the lock: the event of field with set is softaff's when a write of that set to that
 * field is waiting for its event; that write is then consumed (the oldest, as libvirt sends a
 * domain's events in order). */
static bool take_write(LvDomain *h, const char *field, const SaCpuSet *set)
{
    for (guint i = 0; i < h->writes->len; i++) {
        const LvWrite *w = g_ptr_array_index(h->writes, i);
        if (strcmp(w->field, field) == 0 && sa_cpuset_equal(w->set, set)) {
            g_ptr_array_remove_index(h->writes, i);
            return true;
        }
    }
    return false;
}

static void set_at(GPtrArray *sets, guint i, const SaCpuSet *set)
{
    if (sets->len <= i)
        g_ptr_array_set_size(sets, (gint)i + 1);
    sa_cpuset_free(g_ptr_array_index(sets, i));
    g_ptr_array_index(sets, i) = set ? sa_cpuset_copy(set) : NULL;
}

static int iothread_position(const LvDomain *h, guint id)
{
    for (guint i = 0; h->iothread_ids && i < h->iothread_ids->len; i++)
        if (g_array_index(h->iothread_ids, guint, i) == id)
            return (int)i;
    return -1;
}

bool lv_domain_user_pin_locked(LvDomain *h, const char *field, const SaCpuSet *set)
{
    guint index = 0;
    char tail = 0;
    g_autofree char *what = NULL;

    if (sscanf(field, VIR_DOMAIN_TUNABLE_CPU_VCPUPIN "%c", &index, &tail) == 1) {
        sa_own_pins_set_vcpu(h->own, index, set);
        what = g_strdup_printf("vCPU %u", index);
    } else if (strcmp(field, LV_FIELD_EMULATOR) == 0) {
        g_clear_pointer(&h->own->emulatorpin, sa_cpuset_free);
        h->own->emulatorpin = sa_cpuset_copy(set);
        what = g_strdup("the emulator");
    } else if (sscanf(field, VIR_DOMAIN_TUNABLE_CPU_IOTHREADSPIN "%c", &index, &tail) == 1) {
        sa_own_pins_set_iothread(h->own, index, set);
        what = g_strdup_printf("I/O thread %u", index);
    } else {
        return false;
    }
    g_autofree char *text = sa_cpuset_format(set);
    g_info("%s: the user pinned %s to %s: now its own setting", h->name, what, text);
    h->own_generation++;
    h->user_pins++;
    h->recorded = false;
    return true;
}

guint lv_domain_user_pins(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    guint n = h->user_pins;
    g_mutex_unlock(&h->lock);
    return n;
}

/* One cputune.* parameter of a tunable event; true when the facts should be read again. */
static bool note_tunable(LvDomain *h, const char *field, const SaCpuSet *set)
{
    guint index = 0;
    char tail = 0;
    bool ours = take_write(h, field, set);

    if (!ours && !h->own) {
        /* Before the first discover: kept for it, which may read an older record. */
        LvWrite *w = g_new0(LvWrite, 1);
        w->field = g_strdup(field);
        w->set = sa_cpuset_copy(set);
        g_ptr_array_add(h->early_pins, w);
    }
    if (sscanf(field, VIR_DOMAIN_TUNABLE_CPU_IOTHREADSPIN "%c", &index, &tail) == 1) {
        int i = iothread_position(h, index);
        if (i < 0)
            return true; /* an I/O thread added since the last discover */
        set_at(h->iothread_pins, (guint)i, set);
    }
    if (ours || !h->own)
        return false; /* softaff's own write; or the first discover takes it */
    return lv_domain_user_pin_locked(h, field, set);
}

bool lv_domain_tunables(LvDomain *h, const virTypedParameter *params, int n_params)
{
    return lv_domain_tunables_at(h, params, n_params, g_get_monotonic_time());
}

bool lv_domain_tunables_at(LvDomain *h, const virTypedParameter *params, int n_params, gint64 now)
{
    bool again = false;

    g_mutex_lock(&h->lock);
    expire_writes(h, now);
    for (int i = 0; i < n_params; i++) {
        if (params[i].type != VIR_TYPED_PARAM_STRING)
            continue;
        g_autoptr(SaCpuSet) set = sa_cpuset_parse(params[i].value.s, NULL);
        if (set && !sa_cpuset_is_empty(set))
            again |= note_tunable(h, params[i].field, set);
    }
    g_mutex_unlock(&h->lock);
    return again;
}

static GPtrArray *copy_sets(const GPtrArray *sets)
{
    GPtrArray *copy = new_set_array();
    for (guint i = 0; i < sets->len; i++) {
        const SaCpuSet *set = g_ptr_array_index(sets, i);
        g_ptr_array_add(copy, set ? sa_cpuset_copy(set) : NULL);
    }
    return copy;
}

/* Under the lock: the I/O threads of the live XML and their pins become the known ones. */
void lv_domain_learn_iothreads_locked(LvDomain *h, const SaDomainXml *live)
{
    g_clear_pointer(&h->iothread_ids, g_array_unref);
    g_clear_pointer(&h->iothread_pins, g_ptr_array_unref);
    if (live->iothread_ids) {
        h->iothread_ids = g_array_copy(live->iothread_ids);
        h->iothread_pins = copy_sets(live->iothreadpin);
    }
}

bool lv_domain_iothreads(LvDomain *h, GArray **ids, GPtrArray **pins)
{
    g_mutex_lock(&h->lock);
    bool any = h->iothread_ids && h->iothread_ids->len > 0;
    *ids = any ? g_array_copy(h->iothread_ids) : NULL;
    *pins = any ? copy_sets(h->iothread_pins) : NULL;
    g_mutex_unlock(&h->lock);
    return any;
}

void lv_domain_set_iothread_pin(LvDomain *h, guint id, const SaCpuSet *set)
{
    g_mutex_lock(&h->lock);
    int i = iothread_position(h, id);
    if (i >= 0)
        set_at(h->iothread_pins, (guint)i, set);
    g_mutex_unlock(&h->lock);
}

void lv_domain_drop_iothread(LvDomain *h, guint id)
{
    g_mutex_lock(&h->lock);
    int i = iothread_position(h, id);
    if (i >= 0) {
        g_array_remove_index(h->iothread_ids, (guint)i);
        g_ptr_array_remove_index(h->iothread_pins, (guint)i);
    }
    g_mutex_unlock(&h->lock);
}

void lv_set_error(GError **error, const char *what)
{
    virErrorPtr e = virGetLastError();
    int code = e ? e->code : VIR_ERR_INTERNAL_ERROR;
    SaErrorCode c = code == VIR_ERR_NO_DOMAIN ? SA_ERROR_GONE : SA_ERROR_TRANSIENT;
    g_set_error(error, SA_ERROR, c, "%s: %s", what,
                e && e->message ? e->message : "unknown libvirt error");
}
