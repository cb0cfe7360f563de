/* softaffd — a libvirt domain's own settings (what softaff narrows and gives back) and
 * softaffd's record of them in the domain's live softaff metadata (docs/metadata.md).
 *
 * Where own comes from, first match:
 *   1. what the daemon already knows of this QEMU process (the record it read or made, and the
 *      user's live pins since: tunable events, lv-domain.c);
 *   2. softaffd's record in the live metadata: written before softaff first pinned the VM, it
 *      survives a daemon restart or crash, an undefine, a save image and a migration stream;
 *   3. the live XML, when nothing of softaff's is in it yet: the VM's pins as the user left them.
 * Never the persistent definition: a `virsh vcpupin --live` made while softaffd was down is the
 * user's current choice. */
#define G_LOG_DOMAIN "softaffd"

#include <string.h>

#include "lv-private.h"

/* The live XML's own settings (3.). */
static SaOwnPins *own_of_live(const SaDomainXml *live)
{
    SaOwnPins *own = sa_own_pins_new();
    own->n_vcpus = live->n_vcpus;
    if (live->vcpu_cpuset)
        own->vcpu_cpuset = sa_cpuset_copy(live->vcpu_cpuset);
    for (guint i = 0; live->vcpupin && i < live->vcpupin->len; i++)
        if (g_ptr_array_index(live->vcpupin, i))
            sa_own_pins_set_vcpu(own, i, g_ptr_array_index(live->vcpupin, i));
    if (live->emulatorpin)
        own->emulatorpin = sa_cpuset_copy(live->emulatorpin);
    for (guint i = 0; live->iothread_ids && i < live->iothread_ids->len; i++)
        if (g_ptr_array_index(live->iothreadpin, i))
            sa_own_pins_set_iothread(own, g_array_index(live->iothread_ids, guint, i),
                                     g_ptr_array_index(live->iothreadpin, i));
    return own;
}

/* Another QEMU process: nothing known of the old one applies. */
static void start_over(LvDomain *h, pid_t pid)
{
    if (h->pid != 0)
        g_info("%s: a new QEMU process (%d, was %d): its own settings are read afresh", h->name,
               (int)pid, (int)h->pid);
    h->pid = pid;
    g_clear_pointer(&h->own, sa_own_pins_free);
    h->own_generation++;
    h->recorded = false;
    h->assigned = -1;
    g_ptr_array_set_size(h->writes, 0);
    g_hash_table_remove_all(h->last_sent);
}

static void learn_element(LvDomain *h, const SaDomainXml *live)
{
    h->has_element = live->has_element;
    h->element_ok = live->metadata_error == NULL;
    if (!h->element_ok)
        return;
    h->user_attrs = live->metadata_attrs;
    h->user = live->metadata;
    h->created = live->record.created;
    if (live->has_element && live->metadata.assigned >= 0)
        h->assigned = live->metadata.assigned;
}

void lv_domain_mark_unheard(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    h->unheard = true;
    /* The events of the writes that returned went with the old connection. */
    for (guint i = 0; i < h->writes->len;) {
        if (((const LvWrite *)g_ptr_array_index(h->writes, i))->done_at != 0)
            g_ptr_array_remove_index(h->writes, i);
        else
            i++;
    }
    g_mutex_unlock(&h->lock);
}

/* Under the lock: a write of softaff's to field waits for its event. */
static bool write_pending(const LvDomain *h, const char *field)
{
    for (guint i = 0; i < h->writes->len; i++)
        if (strcmp(((const LvWrite *)g_ptr_array_index(h->writes, i))->field, field) == 0)
            return true;
    return false;
}

/* Under the lock: the live pin of field, when it cannot be softaff's: the user's, pinned while
 * no event was heard. It is not softaff's when it differs from the last set softaff sent to that
 * field; for a field softaff has not written since this daemon started, when it lies outside the
 * thread's own set (softaff only narrows within it, and restores exactly it). */
static void unheard_pin(LvDomain *h, char *field, const SaCpuSet *pin, const SaCpuSet *own)
{
    g_autofree char *f = field;
    if (!pin || write_pending(h, f))
        return;
    const SaCpuSet *sent = g_hash_table_lookup(h->last_sent, f);
    if (sent ? !sa_cpuset_equal(pin, sent) : own && !sa_cpuset_is_subset(pin, own)) {
        g_info("%s: its live XML holds a pin no event told of (%s)", h->name, f);
        lv_domain_user_pin_locked(h, f, pin);
    }
}

/* Under the lock: the user's live pins made while the daemon did not listen (it was down, or
 * reconnecting to libvirtd): a live pin outside the thread's own set as known is the user's.
 * (A pin within it may be softaff's narrowing: it cannot be told, and own stays.) */
static void find_unheard_pins(LvDomain *h, const SaDomainXml *live)
{
    const SaOwnPins *own = h->own;
    for (guint i = 0; live->vcpupin && i < live->vcpupin->len && i < live->n_vcpus; i++) {
        const SaCpuSet *mine =
            own->vcpupin && i < own->vcpupin->len ? g_ptr_array_index(own->vcpupin, i) : NULL;
        unheard_pin(h, lv_field_vcpu(i), g_ptr_array_index(live->vcpupin, i),
                    mine ? mine : own->vcpu_cpuset);
    }
    unheard_pin(h, g_strdup(LV_FIELD_EMULATOR), live->emulatorpin,
                own->emulatorpin ? own->emulatorpin : own->vcpu_cpuset);
    for (guint i = 0; live->iothread_ids && i < live->iothread_ids->len; i++) {
        guint id = g_array_index(live->iothread_ids, guint, i);
        const SaCpuSet *mine = sa_own_pins_iothread(own, id);
        unheard_pin(h, lv_field_iothread(id), g_ptr_array_index(live->iothreadpin, i),
                    mine ? mine : own->vcpu_cpuset);
    }
}

bool lv_domain_is_unheard(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    bool unheard = h->unheard && h->own;
    g_mutex_unlock(&h->lock);
    return unheard;
}

void lv_domain_catch_up(LvDomain *h, const SaDomainXml *live)
{
    g_mutex_lock(&h->lock);
    if (h->unheard && h->own) {
        find_unheard_pins(h, live);
        h->unheard = false;
    }
    g_mutex_unlock(&h->lock);
}

SaOwnPins *lv_domain_adopt(LvDomain *h, pid_t pid, const SaDomainXml *live)
{
    g_mutex_lock(&h->lock);
    if (pid > 0 && pid != h->pid)
        start_over(h, pid);
    lv_domain_learn_iothreads_locked(h, live);
    learn_element(h, live);
    const SaOwnPins *rec = h->element_ok ? live->record.own : NULL;
    if (h->own && h->unheard)
        find_unheard_pins(h, live);
    h->unheard = false;
    if (!h->own) {
        h->own = rec ? sa_own_pins_copy(rec) : own_of_live(live);
        h->own_generation++;
        if (rec) {
            g_info("%s: its own settings come from softaffd's record in its metadata", h->name);
            find_unheard_pins(h, live);
        }
        /* The user's live pins since this daemon listened and before it knew own (a record
         * read now predates them). */
        for (guint i = 0; i < h->early_pins->len; i++) {
            const LvWrite *w = g_ptr_array_index(h->early_pins, i);
            lv_domain_user_pin_locked(h, w->field, w->set);
        }
    }
    g_ptr_array_set_size(h->early_pins, 0);
    /* The record must say what the daemon knows (the user may have replaced the element). */
    h->recorded = rec && sa_own_pins_equal(rec, h->own);
    h->has_record = rec != NULL;
    SaOwnPins *copy = sa_own_pins_copy(h->own);
    g_mutex_unlock(&h->lock);
    return copy;
}

SaOwnPins *lv_domain_own(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    SaOwnPins *own = h->own ? sa_own_pins_copy(h->own) : NULL;
    g_mutex_unlock(&h->lock);
    return own;
}

char *lv_domain_element(LvDomain *h, bool with_own, bool *remove, guint *generation)
{
    *remove = false;
    g_mutex_lock(&h->lock);
    char *xml = NULL;
    *generation = h->own_generation;
    /* Before the first discover the user's element is not known: nothing may be written. */
    if (h->own && h->element_ok) {
        SaMetadata md = h->user;
        md.assigned = h->assigned;
        SaMetadataRecord rec = {
            .created = h->created || !h->has_element,
            .own = with_own ? h->own : NULL,
        };
        if (rec.created && h->user_attrs == 0 && md.assigned < 0 && !rec.own)
            *remove = true;
        else
            xml = sa_metadata_format_full(&md, h->user_attrs, &rec);
    }
    g_mutex_unlock(&h->lock);
    return xml;
}

void lv_domain_element_written(LvDomain *h, bool with_own, bool removed, guint generation)
{
    g_mutex_lock(&h->lock);
    if (generation == h->own_generation)
        h->recorded = with_own && !removed;
    /* What was written is now the live element. */
    h->created = !removed && (h->created || !h->has_element);
    h->has_record = with_own && !removed;
    h->has_element = !removed;
    g_mutex_unlock(&h->lock);
}

bool lv_domain_has_record(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    bool has = h->has_record;
    g_mutex_unlock(&h->lock);
    return has;
}

bool lv_domain_record_stale(LvDomain *h)
{
    g_mutex_lock(&h->lock);
    bool stale = h->own && h->element_ok && h->has_record && !h->recorded;
    g_mutex_unlock(&h->lock);
    return stale;
}

void lv_domain_set_assigned(LvDomain *h, int assigned)
{
    g_mutex_lock(&h->lock);
    h->assigned = assigned;
    g_mutex_unlock(&h->lock);
}
