/* softaffd — the libvirt backend.
 *
 * Pins with virDomainPinVcpuFlags/virDomainPinEmulator/virDomainPinIOThread (live), so that
 * `virsh vcpuinfo` tells the truth, and follows lifecycle, metadata and tunable events. */
#define G_LOG_DOMAIN "softaffd"

#include "backend-libvirt.h"

#include <dirent.h>
#include <errno.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sa-error.h"
#include "sa-paths.h"

#define RECONNECT_MIN_MS 500
#define RECONNECT_MAX_MS 30000

struct SaLibvirt {
    SaDaemon *d;
    char *uri;
    virConnectPtr conn;
    int cb_ids[3];
    guint reconnect_source;
    guint reconnect_delay_ms;
    int host_cpus; /* CPUs in libvirt's cpumaps */
    bool closing;
};

/* Per-VM backend data. */
typedef struct {
    virDomainPtr dom;
    GPtrArray *applied_vcpu; /* SaCpuSet* we last wrote per vCPU, to recognise our own events */
    SaCpuSet *applied_emulator;
    GPtrArray *user_pins;    /* SaCpuSet* per vCPU pinned live by the user (tunable event) */
    SaDomainXml *first_seen; /* transient domain: its XML before softaff touched it */
} LvVm;

static void lv_vm_free(gpointer p)
{
    LvVm *l = p;
    if (l->dom)
        virDomainFree(l->dom);
    g_ptr_array_unref(l->applied_vcpu);
    g_ptr_array_unref(l->user_pins);
    sa_cpuset_free(l->applied_emulator);
    sa_domain_xml_free(l->first_seen);
    g_free(l);
}

static LvVm *lv_vm_new(void)
{
    LvVm *l = g_new0(LvVm, 1);
    l->applied_vcpu = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    l->user_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    return l;
}

static SaLibvirt *the_backend; /* the ops table needs it for the libvirt connection */

static void set_error_from_libvirt(GError **error, const char *what)
{
    virErrorPtr e = virGetLastError();
    int code = e ? e->code : VIR_ERR_INTERNAL_ERROR;
    SaErrorCode c = SA_ERROR_TRANSIENT;
    if (code == VIR_ERR_NO_DOMAIN || code == VIR_ERR_OPERATION_INVALID)
        c = SA_ERROR_GONE;
    g_set_error(error, SA_ERROR, c, "%s: %s", what,
                e && e->message ? e->message : "unknown libvirt error");
}

static gsize cpumap_len(void)
{
    return VIR_CPU_MAPLEN(the_backend->host_cpus);
}

/* Writes set into vCPU i unless it already holds it. */
static bool pin_vcpu_if_needed(virDomainPtr dom, unsigned int i, const unsigned char *current,
                               const SaCpuSet *set, GError **error)
{
    gsize maplen = cpumap_len();
    g_autofree unsigned char *map = g_malloc0(maplen);
    sa_cpuset_to_cpumap(set, map, maplen);
    if (current && memcmp(current, map, maplen) == 0)
        return true;
    if (virDomainPinVcpuFlags(dom, i, map, (int)maplen, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        g_autofree char *what = g_strdup_printf("pinning vCPU %u", i);
        set_error_from_libvirt(error, what);
        return false;
    }
    return true;
}

static void remember(GPtrArray *arr, guint i, const SaCpuSet *set)
{
    if (arr->len <= i)
        g_ptr_array_set_size(arr, i + 1);
    sa_cpuset_free(g_ptr_array_index(arr, i));
    g_ptr_array_index(arr, i) = sa_cpuset_copy(set);
}

static bool pin_threads(SaVm *vm, const SaCpuSet *vcpus_default, GPtrArray *per_vcpu,
                        const SaCpuSet *emulator, GError **error)
{
    LvVm *l = vm->backend_data;
    gsize maplen = cpumap_len();
    guint n = vm->n_vcpus;
    g_autofree unsigned char *maps = g_malloc0(maplen * MAX(n, 1));
    int got = virDomainGetVcpuPinInfo(l->dom, (int)n, maps, (int)maplen, VIR_DOMAIN_AFFECT_LIVE);
    if (got < 0) {
        set_error_from_libvirt(error, "reading vCPU pinning");
        return false;
    }
    for (guint i = 0; i < (guint)got && i < n; i++) {
        const SaCpuSet *set = vcpus_default;
        if (per_vcpu && i < per_vcpu->len && g_ptr_array_index(per_vcpu, i))
            set = g_ptr_array_index(per_vcpu, i);
        remember(l->applied_vcpu, i, set);
        if (!pin_vcpu_if_needed(l->dom, i, maps + i * maplen, set, error))
            return false;
    }

    g_autofree unsigned char *emap = g_malloc0(maplen);
    g_autofree unsigned char *want = g_malloc0(maplen);
    sa_cpuset_to_cpumap(emulator, want, maplen);
    if (virDomainGetEmulatorPinInfo(l->dom, emap, (int)maplen, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        set_error_from_libvirt(error, "reading emulator pinning");
        return false;
    }
    sa_cpuset_free(l->applied_emulator);
    l->applied_emulator = sa_cpuset_copy(emulator);
    if (memcmp(emap, want, maplen) != 0 &&
        virDomainPinEmulator(l->dom, want, (int)maplen, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        set_error_from_libvirt(error, "pinning the emulator threads");
        return false;
    }

    virDomainIOThreadInfoPtr *info = NULL;
    int niot = virDomainGetIOThreadInfo(l->dom, &info, VIR_DOMAIN_AFFECT_LIVE);
    if (niot < 0) {
        /* Not every hypervisor driver has I/O threads: not worth failing the tick. */
        virResetLastError();
        niot = 0;
    }
    bool ok = true;
    for (int i = 0; i < niot; i++) {
        if (ok) {
            g_autofree unsigned char *cur = g_malloc0(maplen);
            memcpy(cur, info[i]->cpumap, MIN((gsize)info[i]->cpumaplen, maplen));
            if (memcmp(cur, want, maplen) != 0 &&
                virDomainPinIOThread(l->dom, info[i]->iothread_id, want, (int)maplen,
                                     VIR_DOMAIN_AFFECT_LIVE) < 0) {
                set_error_from_libvirt(error, "pinning an I/O thread");
                ok = false;
            }
        }
        virDomainIOThreadInfoFree(info[i]);
    }
    free(info);
    return ok;
}

static bool lv_apply(SaDaemon *d, SaVm *vm, const SaCpuSet *vcpus, const SaCpuSet *emulator,
                     GError **error)
{
    (void)d;
    return pin_threads(vm, vcpus, NULL, emulator, error);
}

static bool lv_restore(SaDaemon *d, SaVm *vm, GError **error)
{
    const SaCpuSet *emulator = vm->emulator_allowed ? vm->emulator_allowed : vm->allowed;
    return pin_threads(vm, vm->allowed, vm->vcpu_allowed, emulator, error);
}

static bool lv_write_assigned(SaDaemon *d, SaVm *vm, int home, GError **error)
{
    LvVm *l = vm->backend_data;
    SaMetadata md = vm->metadata;
    md.assigned = home;
    g_autofree char *xml = sa_metadata_format(&md);
    if (virDomainSetMetadata(l->dom, VIR_DOMAIN_METADATA_ELEMENT, xml, SA_METADATA_KEY,
                             SA_METADATA_NS, VIR_DOMAIN_AFFECT_LIVE) < 0) {
        set_error_from_libvirt(error, "writing the softaff metadata");
        return false;
    }
    return true;
}

static const SaBackendOps libvirt_ops = {
    .name = "libvirt",
    .threads_by_name = true,
    .apply = lv_apply,
    .restore = lv_restore,
    .write_assigned = lv_write_assigned,
};

/* QEMU's process id: libvirt's pid file, else a /proc scan for "-name guest=NAME,". */
static pid_t find_qemu_pid(const SaLibvirt *lv, const char *name)
{
    g_autofree char *pidfile = NULL;
    if (g_str_has_prefix(lv->uri, "qemu:///session")) {
        pidfile = g_strdup_printf("%s/libvirt/qemu/run/%s.pid", g_get_user_runtime_dir(), name);
    } else {
        pidfile = g_strdup_printf("/run/libvirt/qemu/%s.pid", name);
    }
    g_autofree char *text = NULL;
    if (g_file_get_contents(pidfile, &text, NULL, NULL)) {
        gint64 pid = g_ascii_strtoll(text, NULL, 10);
        g_autofree char *proc = sa_proc_path("%" G_GINT64_FORMAT, pid);
        if (pid > 0 && g_file_test(proc, G_FILE_TEST_IS_DIR))
            return (pid_t)pid;
    }
    g_autofree char *procdir = sa_proc_path("%s", "");
    g_autoptr(GDir) dir = g_dir_open(procdir, 0, NULL);
    if (!dir)
        return -1;
    g_autofree char *needle = g_strdup_printf("guest=%s,", name);
    const char *ent;
    while ((ent = g_dir_read_name(dir))) {
        if (!g_ascii_isdigit(ent[0]))
            continue;
        g_autofree char *path = sa_proc_path("%s/cmdline", ent);
        g_autofree char *cmd = NULL;
        gsize len = 0;
        if (!g_file_get_contents(path, &cmd, &len, NULL))
            continue;
        for (gsize i = 0; i + 1 < len; i++)
            if (cmd[i] == '\0')
                cmd[i] = ' ';
        if (strstr(cmd, needle) && strstr(cmd, "qemu"))
            return (pid_t)g_ascii_strtoll(ent, NULL, 10);
    }
    return -1;
}

static char *transient_state_path(const SaLibvirt *lv)
{
    g_autofree char *dir = g_path_get_dirname(lv->d->cfg->socket);
    return g_build_filename(dir, "transient-domains.ini", NULL);
}

/* Gives x the pins recorded for this transient domain, or records x's pins when there are
 * none yet. */
static void transient_pins(SaLibvirt *lv, const char *uuid, SaDomainXml *x)
{
    g_autofree char *path = transient_state_path(lv);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, NULL);
    if (g_key_file_has_group(kf, uuid)) {
        g_clear_pointer(&x->vcpupin, g_ptr_array_unref);
        g_clear_pointer(&x->emulatorpin, sa_cpuset_free);
        g_auto(GStrv) keys = g_key_file_get_keys(kf, uuid, NULL, NULL);
        for (guint i = 0; keys && keys[i]; i++) {
            g_autofree char *value = g_key_file_get_string(kf, uuid, keys[i], NULL);
            SaCpuSet *set = value ? sa_cpuset_parse(value, NULL) : NULL;
            guint vcpu;
            char tail;
            if (!set)
                continue;
            if (g_str_equal(keys[i], "emulatorpin")) {
                x->emulatorpin = set;
            } else if (sscanf(keys[i], "vcpupin%u%c", &vcpu, &tail) == 1 && vcpu < x->n_vcpus) {
                if (!x->vcpupin)
                    x->vcpupin = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
                if (x->vcpupin->len <= vcpu)
                    g_ptr_array_set_size(x->vcpupin, vcpu + 1);
                sa_cpuset_free(g_ptr_array_index(x->vcpupin, vcpu));
                g_ptr_array_index(x->vcpupin, vcpu) = set;
            } else {
                sa_cpuset_free(set);
            }
        }
        return;
    }
    g_key_file_set_string(kf, uuid, "name", x->name ? x->name : "");
    for (guint i = 0; x->vcpupin && i < x->vcpupin->len; i++) {
        const SaCpuSet *set = g_ptr_array_index(x->vcpupin, i);
        if (!set)
            continue;
        g_autofree char *key = g_strdup_printf("vcpupin%u", i);
        g_autofree char *text = sa_cpuset_format(set);
        g_key_file_set_string(kf, uuid, key, text);
    }
    if (x->emulatorpin) {
        g_autofree char *text = sa_cpuset_format(x->emulatorpin);
        g_key_file_set_string(kf, uuid, "emulatorpin", text);
    }
    g_autofree char *dir = g_path_get_dirname(path);
    g_autoptr(GError) error = NULL;
    if (g_mkdir_with_parents(dir, 0755) < 0 || !g_key_file_save_to_file(kf, path, &error))
        g_debug("cannot record the pins of %s in %s: %s", x->name, path,
                error ? error->message : g_strerror(errno));
}

static void transient_forget(SaLibvirt *lv, const char *uuid)
{
    g_autofree char *path = transient_state_path(lv);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    if (!g_key_file_load_from_file(kf, path, G_KEY_FILE_NONE, NULL) ||
        !g_key_file_remove_group(kf, uuid, NULL))
        return;
    g_key_file_save_to_file(kf, path, NULL);
}

static char *get_xml(virDomainPtr dom, unsigned int flags, GError **error)
{
    char *xml = virDomainGetXMLDesc(dom, flags);
    if (!xml) {
        set_error_from_libvirt(error, "reading the domain XML");
        return NULL;
    }
    char *copy = g_strdup(xml);
    free(xml);
    return copy;
}

static SaCpuSet *union_of_pins(GPtrArray *pins)
{
    SaCpuSet *u = sa_cpuset_new();
    for (guint i = 0; pins && i < pins->len; i++)
        if (g_ptr_array_index(pins, i))
            sa_cpuset_union(u, g_ptr_array_index(pins, i));
    return u;
}

/* (Re)reads a running domain: metadata, allowed set, vCPUs, process. */
static void refresh_domain(SaLibvirt *lv, virDomainPtr dom)
{
    SaDaemon *d = lv->d;
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0)
        return;
    const char *name = virDomainGetName(dom);
    if (virDomainIsActive(dom) != 1) {
        sa_daemon_remove(d, uuid, false);
        return;
    }
    g_autoptr(GError) error = NULL;
    g_autofree char *live_xml = get_xml(dom, 0, &error);
    if (!live_xml) {
        g_info("%s: %s", name, error->message);
        return;
    }
    g_autoptr(SaDomainXml) live = sa_domain_xml_parse(live_xml, strlen(live_xml), &error);
    if (!live) {
        g_warning("%s: cannot parse its domain XML: %s", name, error->message);
        return;
    }
    /* The user's own pinning lives in the persistent definition: the live one holds ours. */
    g_autoptr(SaDomainXml) conf = NULL;
    bool persistent = virDomainIsPersistent(dom) == 1;
    if (persistent) {
        g_autofree char *conf_xml = get_xml(dom, VIR_DOMAIN_XML_INACTIVE, &error);
        if (conf_xml)
            conf = sa_domain_xml_parse(conf_xml, strlen(conf_xml), NULL);
        g_clear_error(&error);
    }

    SaVm *vm = sa_daemon_lookup(d, uuid);
    if (!vm) {
        vm = sa_vm_new(uuid, name, &libvirt_ops);
        LvVm *l = lv_vm_new();
        vm->backend_data = l;
        vm->backend_free = lv_vm_free;
        vm = sa_daemon_add(d, vm);
        g_info("%s: found (%u vCPUs)", name, live->n_vcpus);
    }
    LvVm *l = vm->backend_data;
    const SaDomainXml *own = conf;
    if (!own) {
        /* A transient domain has no definition apart from the live one, which holds softaff's
         * own pins once it placed the VM: keep the pins it had when first seen, in memory and
         * in a state file beside the control socket, so a restarted daemon knows them too. */
        if (!l->first_seen) {
            g_autofree char *again = get_xml(dom, 0, NULL);
            l->first_seen = again ? sa_domain_xml_parse(again, strlen(again), NULL) : NULL;
            if (l->first_seen)
                transient_pins(lv, uuid, l->first_seen);
        }
        own = l->first_seen ? l->first_seen : live;
    }
    if (l->dom != dom) {
        if (l->dom)
            virDomainFree(l->dom);
        virDomainRef(dom);
        l->dom = dom;
    }
    if (vm->n_vcpus != live->n_vcpus)
        vm->threads_stale = true;
    vm->n_vcpus = live->n_vcpus;
    vm->memory_bytes = live->memory_bytes;
    pid_t pid = find_qemu_pid(lv, name);
    if (pid != vm->pid)
        vm->threads_stale = true;
    vm->pid = pid;

    /* The VM's own allowed set: <vcpu cpuset>, else every online CPU. */
    sa_cpuset_free(vm->allowed);
    vm->allowed = sa_cpuset_copy(d->topo->online);
    if (own->vcpu_cpuset)
        sa_cpuset_intersect(vm->allowed, own->vcpu_cpuset);
    sa_cpuset_free(vm->emulator_allowed);
    vm->emulator_allowed = sa_cpuset_copy(own->emulatorpin ? own->emulatorpin : vm->allowed);

    /* Pins the user made: persistent <vcpupin>, and live `virsh vcpupin` seen as events. */
    g_autoptr(GPtrArray) pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    g_ptr_array_set_size(pins, vm->n_vcpus);
    bool user_pinned = false;
    for (guint i = 0; i < vm->n_vcpus; i++) {
        const SaCpuSet *p = NULL;
        if (i < l->user_pins->len && g_ptr_array_index(l->user_pins, i))
            p = g_ptr_array_index(l->user_pins, i);
        else if (own->vcpupin && i < own->vcpupin->len && g_ptr_array_index(own->vcpupin, i))
            p = g_ptr_array_index(own->vcpupin, i);
        if (p) {
            g_ptr_array_index(pins, i) = sa_cpuset_copy(p);
            user_pinned = true;
        }
    }
    if (vm->vcpu_allowed)
        g_ptr_array_unref(vm->vcpu_allowed);
    vm->vcpu_allowed = user_pinned ? g_ptr_array_ref(pins) : NULL;

    vm->has_metadata = live->has_metadata;
    if (live->metadata_error) {
        sa_vm_set_status(d, vm, SA_VM_INVALID, live->metadata_error->message);
        return;
    }
    /* What the live metadata holds; the daemon writes assigned= when it differs. */
    if (live->has_metadata)
        vm->metadata = live->metadata;
    else
        sa_metadata_init(&vm->metadata);
    vm->written_assigned = vm->metadata.assigned;
    if (live->has_metadata && vm->metadata.mode == SA_MODE_OFF) {
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED, "metadata says mode=\"off\"");
        return;
    }
    if (!live->has_metadata && d->cfg->manage == SA_MANAGE_EXPLICIT) {
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED, "no softaff metadata and manage=explicit");
        return;
    }
    if (user_pinned && !live->has_metadata) {
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED,
                         "its vCPUs are pinned by the user (<vcpupin>); add softaff metadata to "
                         "manage it");
        return;
    }
    if (user_pinned) {
        g_autoptr(SaCpuSet) u = union_of_pins(pins);
        sa_cpuset_intersect(vm->allowed, u);
    }
    if (sa_cpuset_is_empty(vm->allowed)) {
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED, "its allowed set has no online CPU");
        return;
    }
    if (vm->pid <= 0) {
        sa_vm_set_status(d, vm, SA_VM_UNMANAGED, "its QEMU process was not found");
        return;
    }
    g_autofree char *allowed = sa_cpuset_format(vm->allowed);
    g_autofree char *why =
        g_strdup_printf("mode %s, allowed CPUs %s%s", sa_mode_to_string(vm->metadata.mode), allowed,
                        live->has_metadata ? "" : " (config defaults)");
    sa_vm_set_status(d, vm, SA_VM_MANAGED, why);
}

void sa_libvirt_sync(SaLibvirt *lv)
{
    if (!lv->conn)
        return;
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(lv->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    if (n < 0) {
        virErrorPtr e = virGetLastError();
        g_warning("listing domains failed: %s", e && e->message ? e->message : "unknown error");
        return;
    }
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (int i = 0; i < n; i++) {
        char uuid[VIR_UUID_STRING_BUFLEN];
        if (virDomainGetUUIDString(doms[i], uuid) == 0)
            g_hash_table_add(seen, g_strdup(uuid));
        refresh_domain(lv, doms[i]);
        virDomainFree(doms[i]);
    }
    free(doms);
    /* Recorded pins of transient domains that no longer run are of no use. */
    g_autofree char *state = transient_state_path(lv);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    if (g_key_file_load_from_file(kf, state, G_KEY_FILE_NONE, NULL)) {
        g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
        bool changed = false;
        for (guint i = 0; groups && groups[i]; i++)
            if (!g_hash_table_contains(seen, groups[i]))
                changed |= g_key_file_remove_group(kf, groups[i], NULL);
        if (changed)
            g_key_file_save_to_file(kf, state, NULL);
    }
    /* Forget VMs that are no longer running. */
    g_autoptr(GPtrArray) gone = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, lv->d->vms);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        SaVm *vm = value;
        if (vm->ops == &libvirt_ops && !g_hash_table_contains(seen, key))
            g_ptr_array_add(gone, g_strdup(key));
    }
    for (guint i = 0; i < gone->len; i++) {
        SaVm *vm = sa_daemon_lookup(lv->d, g_ptr_array_index(gone, i));
        g_info("%s: no longer running; forgotten", vm->name);
        transient_forget(lv, g_ptr_array_index(gone, i));
        sa_daemon_remove(lv->d, g_ptr_array_index(gone, i), false);
    }
}

static int lifecycle_cb(virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
    SaLibvirt *lv = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0)
        return 0;
    const char *name = virDomainGetName(dom);
    switch (event) {
    case VIR_DOMAIN_EVENT_STARTED:
    case VIR_DOMAIN_EVENT_RESUMED:
    case VIR_DOMAIN_EVENT_DEFINED:
        g_debug("%s: lifecycle event %d/%d", name, event, detail);
        refresh_domain(lv, dom);
        break;
    case VIR_DOMAIN_EVENT_STOPPED:
    case VIR_DOMAIN_EVENT_CRASHED:
        if (sa_daemon_lookup(lv->d, uuid)) {
            g_info("%s: stopped; forgotten", name);
            sa_daemon_remove(lv->d, uuid, false);
        }
        transient_forget(lv, uuid);
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
    if (type != VIR_DOMAIN_METADATA_ELEMENT || g_strcmp0(nsuri, SA_METADATA_NS) != 0)
        return 0;
    refresh_domain(lv, dom);
    return 0;
}

static int tunable_cb(virConnectPtr conn, virDomainPtr dom, virTypedParameterPtr params,
                      int nparams, void *opaque)
{
    SaLibvirt *lv = opaque;
    char uuid[VIR_UUID_STRING_BUFLEN];
    if (virDomainGetUUIDString(dom, uuid) < 0)
        return 0;
    SaVm *vm = sa_daemon_lookup(lv->d, uuid);
    if (!vm || vm->ops != &libvirt_ops)
        return 0;
    LvVm *l = vm->backend_data;
    bool user_change = false;
    for (int i = 0; i < nparams; i++) {
        guint vcpu;
        char tail;
        if (params[i].type != VIR_TYPED_PARAM_STRING ||
            sscanf(params[i].field, "cputune.vcpupin%u%c", &vcpu, &tail) != 1)
            continue;
        g_autoptr(SaCpuSet) set = sa_cpuset_parse(params[i].value.s, NULL);
        if (!set)
            continue;
        const SaCpuSet *ours =
            vcpu < l->applied_vcpu->len ? g_ptr_array_index(l->applied_vcpu, vcpu) : NULL;
        if (ours && sa_cpuset_equal(ours, set))
            continue; /* our own write */
        g_info("%s: the user pinned vCPU %u to %s", vm->name, vcpu, params[i].value.s);
        remember(l->user_pins, vcpu, set);
        user_change = true;
    }
    if (user_change)
        refresh_domain(lv, dom);
    return 0;
}

static void schedule_reconnect(SaLibvirt *lv);

static void close_cb(virConnectPtr conn, int reason, void *opaque)
{
    SaLibvirt *lv = opaque;
    if (lv->closing)
        return;
    g_warning("connection to %s lost (reason %d); reconnecting", lv->uri, reason);
    /* The connection object is released from an idle callback: not inside libvirt's own. */
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

bool sa_libvirt_connect(SaLibvirt *lv)
{
    drop_connection(lv);
    lv->conn = virConnectOpen(lv->uri);
    if (!lv->conn) {
        virErrorPtr e = virGetLastError();
        g_warning("cannot connect to %s: %s; retrying in %u ms", lv->uri,
                  e && e->message ? e->message : "unknown error",
                  lv->reconnect_delay_ms ? lv->reconnect_delay_ms : RECONNECT_MIN_MS);
        schedule_reconnect(lv);
        return false;
    }
    if (virConnectSetKeepAlive(lv->conn, 5, 3) < 0)
        g_debug("keepalive not supported by %s", lv->uri);
    virConnectRegisterCloseCallback(lv->conn, close_cb, lv, NULL);
    unsigned char *map = NULL;
    int ncpus = virNodeGetCPUMap(lv->conn, &map, NULL, 0);
    free(map);
    lv->host_cpus = ncpus > 0 ? ncpus : sa_cpuset_last(lv->d->topo->online) + 1;
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
        g_warning("cannot register for domain events on %s", lv->uri);
    lv->reconnect_delay_ms = 0;
    g_info("connected to %s (%d host CPUs)", lv->uri, lv->host_cpus);
    sa_libvirt_sync(lv);
    return true;
}

bool sa_libvirt_is_connected(const SaLibvirt *lv)
{
    return lv->conn && !lv->reconnect_source && virConnectIsAlive(lv->conn) == 1;
}

SaLibvirt *sa_libvirt_new(SaDaemon *d, const char *uri)
{
    SaLibvirt *lv = g_new0(SaLibvirt, 1);
    lv->d = d;
    lv->uri = g_strdup(uri);
    for (guint i = 0; i < G_N_ELEMENTS(lv->cb_ids); i++)
        lv->cb_ids[i] = -1;
    the_backend = lv;
    return lv;
}

void sa_libvirt_free(SaLibvirt *lv)
{
    if (!lv)
        return;
    if (lv->reconnect_source)
        g_source_remove(lv->reconnect_source);
    drop_connection(lv);
    if (the_backend == lv)
        the_backend = NULL;
    g_free(lv->uri);
    g_free(lv);
}
