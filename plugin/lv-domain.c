/* softaffd — the libvirt backend's per-domain handle and what its workers share: the state
 * both the main thread (events) and the workers (commands) touch, each piece under a lock. */
#define G_LOG_DOMAIN "softaffd"

#include <libvirt/virterror.h>
#include <stdio.h>
#include <string.h>

#include "lv-private.h"
#include "sa-error.h"

LvShared *lv_shared_new(SaCore *core, const char *uri, const char *socket_path)
{
    LvShared *s = g_new0(LvShared, 1);
    s->refs = 1;
    s->core = core;
    s->uri = g_strdup(uri);
    g_mutex_init(&s->state_lock);
    lv_shared_set_socket(s, socket_path);
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
    g_mutex_clear(&shared->state_lock);
    g_free(shared->state_path);
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

void lv_shared_set_socket(LvShared *shared, const char *socket_path)
{
    g_autofree char *dir = g_path_get_dirname(socket_path ? socket_path : "");
    g_mutex_lock(&shared->state_lock);
    g_free(shared->state_path);
    shared->state_path = g_build_filename(dir, "transient-domains.ini", NULL);
    g_mutex_unlock(&shared->state_lock);
}

static GPtrArray *new_set_array(void)
{
    return g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
}

LvPins *lv_pins_new(void)
{
    return g_atomic_rc_box_new0(LvPins);
}

LvPins *lv_pins_take(SaDomainXml *x)
{
    LvPins *p = lv_pins_new();
    p->vcpupin = g_steal_pointer(&x->vcpupin);
    p->emulatorpin = g_steal_pointer(&x->emulatorpin);
    for (guint i = 0; x->iothread_ids && i < x->iothread_ids->len; i++) {
        SaCpuSet *set = g_ptr_array_index(x->iothreadpin, i);
        if (set)
            lv_pins_add_iothread(p, g_array_index(x->iothread_ids, guint, i), sa_cpuset_copy(set));
    }
    g_clear_pointer(&x->iothreadpin, g_ptr_array_unref);
    g_clear_pointer(&x->iothread_ids, g_array_unref);
    return p;
}

LvPins *lv_pins_ref(LvPins *pins)
{
    return g_atomic_rc_box_acquire(pins);
}

static void pins_clear(gpointer data)
{
    LvPins *p = data;
    g_clear_pointer(&p->vcpupin, g_ptr_array_unref);
    g_clear_pointer(&p->emulatorpin, sa_cpuset_free);
    g_clear_pointer(&p->iothread_ids, g_array_unref);
    g_clear_pointer(&p->iothreadpin, g_ptr_array_unref);
}

void lv_pins_unref(LvPins *pins)
{
    if (pins)
        g_atomic_rc_box_release_full(pins, pins_clear);
}

void lv_pins_add_iothread(LvPins *pins, guint id, SaCpuSet *set)
{
    if (!pins->iothread_ids) {
        pins->iothread_ids = g_array_new(FALSE, FALSE, sizeof(guint));
        pins->iothreadpin = new_set_array();
    }
    g_array_append_val(pins->iothread_ids, id);
    g_ptr_array_add(pins->iothreadpin, set);
}

const SaCpuSet *lv_pins_iothread(const LvPins *pins, guint id)
{
    for (guint i = 0; pins && pins->iothread_ids && i < pins->iothread_ids->len; i++)
        if (g_array_index(pins->iothread_ids, guint, i) == id)
            return g_ptr_array_index(pins->iothreadpin, i);
    return NULL;
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
    h->applied = g_ptr_array_new_with_free_func((GDestroyNotify)g_ptr_array_unref);
    h->user_pins = new_set_array();
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
    g_ptr_array_unref(h->applied);
    g_ptr_array_unref(h->user_pins);
    if (h->iothread_ids)
        g_array_unref(h->iothread_ids);
    if (h->iothread_pins)
        g_ptr_array_unref(h->iothread_pins);
    lv_pins_unref(h->own);
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

static GPtrArray *applied_of(LvDomain *h, guint vcpu)
{
    if (h->applied->len <= vcpu)
        g_ptr_array_set_size(h->applied, (gint)vcpu + 1);
    if (!g_ptr_array_index(h->applied, vcpu))
        g_ptr_array_index(h->applied, vcpu) = new_set_array();
    return g_ptr_array_index(h->applied, vcpu);
}

void lv_domain_note_applied(LvDomain *h, guint vcpu, const SaCpuSet *set)
{
    g_mutex_lock(&h->lock);
    GPtrArray *recent = applied_of(h, vcpu);
    if (recent->len == 0 || !sa_cpuset_equal(g_ptr_array_index(recent, recent->len - 1), set)) {
        g_ptr_array_add(recent, sa_cpuset_copy(set));
        if (recent->len > LV_APPLIED_KEEP)
            g_ptr_array_remove_index(recent, 0);
    }
    g_mutex_unlock(&h->lock);
}

static bool applied_recently(LvDomain *h, guint vcpu, const SaCpuSet *set)
{
    GPtrArray *recent = vcpu < h->applied->len ? g_ptr_array_index(h->applied, vcpu) : NULL;
    for (guint i = 0; recent && i < recent->len; i++)
        if (sa_cpuset_equal(g_ptr_array_index(recent, i), set))
            return true;
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

/* One cputune.* parameter of a tunable event; true when the facts should be read again. */
static bool note_tunable(LvDomain *h, const char *field, const SaCpuSet *set, const char *text)
{
    guint index = 0;
    char tail = 0;

    if (sscanf(field, VIR_DOMAIN_TUNABLE_CPU_VCPUPIN "%c", &index, &tail) == 1) {
        if (applied_recently(h, index, set))
            return false; /* softaff's own write */
        g_info("%s: the user pinned vCPU %u to %s", h->name, index, text);
        set_at(h->user_pins, index, set);
        return true;
    }
    if (sscanf(field, VIR_DOMAIN_TUNABLE_CPU_IOTHREADSPIN "%c", &index, &tail) == 1) {
        int i = iothread_position(h, index);
        if (i < 0)
            return true; /* an I/O thread added since the last discover */
        set_at(h->iothread_pins, (guint)i, set);
    }
    return false;
}

bool lv_domain_tunables(LvDomain *h, const virTypedParameter *params, int n_params)
{
    bool again = false;

    g_mutex_lock(&h->lock);
    for (int i = 0; i < n_params; i++) {
        if (params[i].type != VIR_TYPED_PARAM_STRING)
            continue;
        g_autoptr(SaCpuSet) set = sa_cpuset_parse(params[i].value.s, NULL);
        if (set && !sa_cpuset_is_empty(set))
            again |= note_tunable(h, params[i].field, set, params[i].value.s);
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

GPtrArray *lv_domain_user_pins(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    GPtrArray *pins = h->user_pins->len > 0 ? copy_sets(h->user_pins) : NULL;
    g_mutex_unlock(&h->lock);
    return pins;
}

void lv_domain_learn_iothreads(LvDomain *h, const SaDomainXml *live)
{
    GArray *ids = NULL;
    GPtrArray *pins = NULL;
    if (live->iothread_ids) {
        ids = g_array_copy(live->iothread_ids);
        pins = copy_sets(live->iothreadpin);
    }
    g_mutex_lock(&h->lock);
    g_clear_pointer(&h->iothread_ids, g_array_unref);
    g_clear_pointer(&h->iothread_pins, g_ptr_array_unref);
    h->iothread_ids = ids;
    h->iothread_pins = pins;
    g_mutex_unlock(&h->lock);
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

LvPins *lv_domain_own(LvDomain *h, bool *first_seen)
{
    g_mutex_lock(&h->lock);
    LvPins *own = h->own ? lv_pins_ref(h->own) : NULL;
    if (first_seen)
        *first_seen = h->own_first_seen;
    g_mutex_unlock(&h->lock);
    return own;
}

void lv_domain_set_own(LvDomain *h, LvPins *own, bool first_seen)
{
    LvPins *old;
    g_mutex_lock(&h->lock);
    old = h->own;
    h->own = own ? lv_pins_ref(own) : NULL;
    h->own_first_seen = first_seen;
    g_mutex_unlock(&h->lock);
    lv_pins_unref(old);
}

void lv_set_error(GError **error, const char *what)
{
    virErrorPtr e = virGetLastError();
    int code = e ? e->code : VIR_ERR_INTERNAL_ERROR;
    SaErrorCode c = SA_ERROR_TRANSIENT;
    if (code == VIR_ERR_NO_DOMAIN || code == VIR_ERR_OPERATION_INVALID)
        c = SA_ERROR_GONE;
    g_set_error(error, SA_ERROR, c, "%s: %s", what,
                e && e->message ? e->message : "unknown libvirt error");
}
