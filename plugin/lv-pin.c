/* softaffd — the libvirt backend's commands (worker threads): pin, restore, write assigned=.
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
        /* Before the write: its tunable event may come before this returns. */
        lv_domain_note_applied(h, i, vcpus[i]);
        if (memcmp(maps + (gsize)i * maplen, want, maplen) == 0)
            continue;
        if (virDomainPinVcpuFlags(dom, i, want, (int)maplen, VIR_DOMAIN_AFFECT_LIVE) < 0) {
            g_autofree char *what = g_strdup_printf("pinning vCPU %u", i);
            lv_set_error(error, what);
            return false;
        }
    }
    return true;
}

static bool pin_emulator(virDomainPtr dom, const SaCpuSet *set, gsize maplen, GError **error)
{
    g_autofree unsigned char *current = g_malloc0(maplen);
    g_autofree unsigned char *want = g_malloc0(maplen);
    sa_cpuset_to_cpumap(set, want, maplen);
    if (virDomainGetEmulatorPinInfo(dom, current, (int)maplen, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        lv_set_error(error, "reading the emulator pinning");
        return false;
    }
    if (memcmp(current, want, maplen) != 0 &&
        virDomainPinEmulator(dom, want, (int)maplen, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        lv_set_error(error, "pinning the emulator threads");
        return false;
    }
    return true;
}

/* Gives each known I/O thread others, or (restore) its own pin when it has one. */
static bool pin_iothreads(LvDomain *h, virDomainPtr dom, const SaCpuSet *others, const LvPins *own,
                          gsize maplen, GError **error)
{
    g_autoptr(GArray) ids = NULL;
    g_autoptr(GPtrArray) known = NULL;
    if (!lv_domain_iothreads(h, &ids, &known))
        return true;
    g_autofree unsigned char *want = g_malloc0(maplen);
    for (guint i = 0; i < ids->len; i++) {
        guint id = g_array_index(ids, guint, i);
        const SaCpuSet *set = lv_pins_iothread(own, id);
        const SaCpuSet *current = g_ptr_array_index(known, i);
        if (!set)
            set = others;
        if (current && sa_cpuset_equal(current, set))
            continue;
        sa_cpuset_to_cpumap(set, want, maplen);
        if (virDomainPinIOThread(dom, id, want, (int)maplen, VIR_DOMAIN_AFFECT_LIVE) == 0) {
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
    }
    return true;
}

static bool pin_threads(LvDomain *h, const SaCommand *cmd, const LvPins *own, GError **error)
{
    g_autoptr(virDomain) dom = lv_domain_get_dom(h);
    gsize maplen = lv_shared_maplen(h->shared);
    return pin_vcpus(h, dom, cmd->vcpus, cmd->n_vcpus, maplen, error) &&
           pin_emulator(dom, cmd->others, maplen, error) &&
           pin_iothreads(h, dom, cmd->others, own, maplen, error);
}

static bool lv_pin(gpointer handle, const SaCommand *cmd, GError **error)
{
    return pin_threads(handle, cmd, NULL, error);
}

/* The core's sets for vCPUs and emulator; the I/O threads get their own pins back. */
static bool lv_restore(gpointer handle, const SaCommand *cmd, GError **error)
{
    g_autoptr(LvPins) own = lv_domain_own(handle, NULL);
    return pin_threads(handle, cmd, own, error);
}

static bool lv_write_assigned(gpointer handle, const SaCommand *cmd, GError **error)
{
    g_autoptr(virDomain) dom = lv_domain_get_dom(handle);
    g_autofree char *xml = sa_metadata_format(cmd->settings);
    if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml, SA_METADATA_KEY, SA_METADATA_NS,
                             VIR_DOMAIN_AFFECT_LIVE) < 0) {
        lv_set_error(error, "writing the softaff metadata");
        return false;
    }
    return true;
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
