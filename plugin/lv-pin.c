/* softaffd — the libvirt backend's commands (worker threads): pin, restore, write assigned=, and
 * the record of the VM's own settings in its metadata (lv-own.c says where they come from).
 *
 * Pins with virDomainPinVcpuFlags / virDomainPinEmulator / virDomainPinIOThread (live), so
 * that `virsh vcpuinfo` tells the truth. Each of those waits for the domain's job; each is made
 * only when the current pinning differs. The current pinning of vCPUs and emulator comes from
 * virDomainGetVcpuPinInfo / virDomainGetEmulatorPinInfo (libvirt's own record: no job, no
 * monitor); the I/O threads' from what discover read in the live XML and softaff wrote since,
 * never from virDomainGetIOThreadInfo (a QEMU monitor round-trip per command). */
#define G_LOG_DOMAIN "softaffd"

#include <libvirt/virterror.h>
#include <string.h>

#include "lv-private.h"
#include "sa-error.h"

static bool pin_vcpus(LvDomain *h, virDomainPtr dom, SaCpuSet *const *vcpus, guint n, gsize maplen,
                      GError **error)
{
    if (n == 0)
        return true;
    g_autofree unsigned char *maps = g_malloc0(maplen * n);
    int got = virDomainGetVcpuPinInfo(dom, (int)n, maps, (int)maplen, VIR_DOMAIN_AFFECT_LIVE);
    if (got < 0) {
        lv_set_error(error, "reading the vCPU pinning");
        return false;
    }
    g_autofree unsigned char *want = g_malloc0(maplen);
    for (guint i = 0; i < (guint)got && i < n; i++) {
        if (!vcpus[i])
            continue;
        sa_cpuset_to_cpumap(vcpus[i], want, maplen);
        if (memcmp(maps + (gsize)i * maplen, want, maplen) == 0)
            continue; /* no write, so no event: nothing to record */
        g_autofree char *field = lv_field_vcpu(i);
        /* Before the write: its tunable event may come before this returns. */
        guint64 id = lv_domain_write_sent(h, field, vcpus[i]);
        int rc = virDomainPinVcpuFlags(dom, i, want, (int)maplen, VIR_DOMAIN_AFFECT_LIVE);
        lv_domain_write_done(h, id);
        if (rc < 0) {
            g_autofree char *what = g_strdup_printf("pinning vCPU %u", i);
            lv_set_error(error, what);
            return false;
        }
    }
    return true;
}

static bool pin_emulator(LvDomain *h, virDomainPtr dom, const SaCpuSet *set, gsize maplen,
                         GError **error)
{
    g_autofree unsigned char *current = g_malloc0(maplen);
    g_autofree unsigned char *want = g_malloc0(maplen);
    sa_cpuset_to_cpumap(set, want, maplen);
    if (virDomainGetEmulatorPinInfo(dom, current, (int)maplen, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        lv_set_error(error, "reading the emulator pinning");
        return false;
    }
    if (memcmp(current, want, maplen) == 0)
        return true;
    guint64 id = lv_domain_write_sent(h, LV_FIELD_EMULATOR, set);
    int rc = virDomainPinEmulator(dom, want, (int)maplen, VIR_DOMAIN_AFFECT_LIVE);
    lv_domain_write_done(h, id);
    if (rc < 0) {
        lv_set_error(error, "pinning the emulator threads");
        return false;
    }
    return true;
}

/* The set the command gives I/O thread id, NULL when it names none (added since the facts). */
static const SaCpuSet *iothread_set(const SaCommand *cmd, guint id)
{
    for (guint i = 0; i < cmd->n_iothreads; i++)
        if (cmd->iothread_ids[i] == id)
            return cmd->iothreads[i];
    return NULL;
}

static bool pin_iothread(LvDomain *h, virDomainPtr dom, guint id, const SaCpuSet *set,
                         unsigned char *want, gsize maplen, GError **error)
{
    g_autofree char *field = lv_field_iothread(id);
    sa_cpuset_to_cpumap(set, want, maplen);
    guint64 write = lv_domain_write_sent(h, field, set);
    int rc = virDomainPinIOThread(dom, id, want, (int)maplen, VIR_DOMAIN_AFFECT_LIVE);
    lv_domain_write_done(h, write);
    if (rc == 0) {
        lv_domain_set_iothread_pin(h, id, set);
    } else if (virGetLastErrorCode() == VIR_ERR_INVALID_ARG) {
        /* Deleted since the last discover (`virsh iothreaddel`): nothing to pin. */
        g_info("%s: I/O thread %u is gone: %s", h->name, id, virGetLastErrorMessage());
        lv_domain_drop_iothread(h, id);
    } else {
        g_autofree char *what = g_strdup_printf("pinning I/O thread %u", id);
        lv_set_error(error, what);
        return false;
    }
    return true;
}

/* Gives each known I/O thread its own pin (restore: own), else its set of the command, else
 * (one added since the facts) the emulator's. */
static bool pin_iothreads(LvDomain *h, virDomainPtr dom, const SaCommand *cmd, const SaOwnPins *own,
                          gsize maplen, GError **error)
{
    g_autoptr(GArray) ids = NULL;
    g_autoptr(GPtrArray) known = NULL;
    if (!lv_domain_iothreads(h, &ids, &known))
        return true;
    g_autofree unsigned char *want = g_malloc0(maplen);
    for (guint i = 0; i < ids->len; i++) {
        guint id = g_array_index(ids, guint, i);
        const SaCpuSet *set = own ? sa_own_pins_iothread(own, id) : NULL;
        const SaCpuSet *current = g_ptr_array_index(known, i);
        if (!set)
            set = iothread_set(cmd, id);
        if (!set)
            set = cmd->others;
        if (current && sa_cpuset_equal(current, set))
            continue;
        if (!pin_iothread(h, dom, id, set, want, maplen, error))
            return false;
    }
    return true;
}

static bool pin_threads(LvDomain *h, const SaCommand *cmd, const SaOwnPins *own, GError **error)
{
    g_autoptr(virDomain) dom = lv_domain_get_dom(h);
    gsize maplen = lv_shared_maplen(h->shared);
    return pin_vcpus(h, dom, cmd->vcpus, cmd->n_vcpus, maplen, error) &&
           pin_emulator(h, dom, cmd->others, maplen, error) &&
           pin_iothreads(h, dom, cmd, own, maplen, error);
}

/* Writes the softaff element (live): with softaffd's record of the VM's own settings, or
 * without it (given back). An invalid element of the user's is never rewritten. */
static bool write_element(LvDomain *h, bool with_own, GError **error)
{
    bool remove = false;
    guint generation = 0;
    g_autofree char *xml = lv_domain_element(h, with_own, &remove, &generation);
    if (!xml && !remove) {
        if (!with_own)
            return true; /* the user's invalid element stays as it is */
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT,
                    "its softaff metadata is invalid or not read yet: its own settings cannot "
                    "be recorded");
        return false;
    }
    g_autoptr(virDomain) dom = lv_domain_get_dom(h);
    if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml, remove ? NULL : SA_METADATA_KEY,
                             SA_METADATA_NS, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        lv_set_error(error, with_own ? "recording its own settings in the softaff metadata"
                                     : "writing the softaff metadata");
        return false;
    }
    lv_domain_element_written(h, with_own, remove, generation);
    return true;
}

bool lv_domain_write_record(LvDomain *h, GError **error)
{
    return write_element(h, true, error);
}

/* Before softaff's first pin (and after a user's pin changed them): the VM's own settings go
 * into its metadata, so that nothing that carries the VM mistakes softaff's pins for them. */
static bool ensure_recorded(LvDomain *h, GError **error)
{
    g_mutex_lock(&h->lock);
    bool recorded = h->recorded;
    bool known = h->own != NULL;
    g_mutex_unlock(&h->lock);
    if (recorded)
        return true;
    if (!known) {
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT, "its own settings are not known yet");
        return false;
    }
    return write_element(h, true, error);
}

static bool lv_pin(gpointer handle, const SaCommand *cmd, GError **error)
{
    return ensure_recorded(handle, error) && pin_threads(handle, cmd, NULL, error);
}

/* The VM's own settings as the backend knows them (newer than the core's when the user pinned
 * a thread since the last report): each thread gets exactly its own set back. */
static void own_command(const SaCommand *cmd, const SaOwnPins *own, SaCommand *out, GPtrArray *keep)
{
    *out = *cmd;
    SaCpuSet **vcpus = g_new0(SaCpuSet *, MAX(cmd->n_vcpus, 1));
    g_ptr_array_add(keep, vcpus);
    for (guint i = 0; i < cmd->n_vcpus; i++) {
        const SaCpuSet *p =
            own->vcpupin && i < own->vcpupin->len ? g_ptr_array_index(own->vcpupin, i) : NULL;
        vcpus[i] = p ? (SaCpuSet *)p : cmd->vcpus[i];
    }
    out->vcpus = vcpus;
    if (own->emulatorpin)
        out->others = own->emulatorpin;
}

/* Every thread back to its own set, then the record goes: the VM is as the user left it. */
static bool lv_restore(gpointer handle, const SaCommand *cmd, GError **error)
{
    LvDomain *h = handle;
    if (lv_domain_is_unheard(h)) {
        /* A new connection whose discover has not run yet (SIGTERM right after it): the user's
         * pins made meanwhile are what to give back. */
        g_autoptr(virDomain) dom = lv_domain_get_dom(h);
        g_autoptr(SaDomainXml) live = lv_read_xml(dom, 0, error);
        if (!live)
            return false;
        lv_domain_catch_up(h, live);
    }
    g_autoptr(SaOwnPins) own = lv_domain_own(h);
    g_autoptr(GPtrArray) keep = g_ptr_array_new_with_free_func(g_free);
    SaCommand mine;
    if (own)
        own_command(cmd, own, &mine, keep);
    return pin_threads(h, own ? &mine : cmd, own, error) && write_element(h, false, error);
}

static bool lv_write_assigned(gpointer handle, const SaCommand *cmd, GError **error)
{
    LvDomain *h = handle;
    lv_domain_set_assigned(h, cmd->settings->assigned);
    g_mutex_lock(&h->lock);
    bool known = h->own != NULL;
    g_mutex_unlock(&h->lock);
    if (!known) {
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT, "its domain XML was not read yet");
        return false;
    }
    return write_element(h, true, error);
}

/* Main thread: a vCPU thread went away (vCPU unplug, reset); the domain is read again, and the
 * core finds the threads anew. */
static void lv_threads_lost(gpointer handle)
{
    LvDomain *h = handle;
    sa_core_discover(h->shared->core, &lv_backend_ops, h, h->uuid, h->name);
}

const SaBackendOps lv_backend_ops = {
    .name = "libvirt",
    .settings_name = "softaff metadata",
    .pin = lv_pin,
    .restore = lv_restore,
    .write_assigned = lv_write_assigned,
    .discover = lv_discover,
    .threads_lost = lv_threads_lost,
    .handle_ref = lv_domain_ref,
    .handle_unref = lv_domain_unref,
};
