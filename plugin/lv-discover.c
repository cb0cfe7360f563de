/* softaffd — the libvirt backend's discover callback (a worker thread): what a running domain
 * is, from its live XML (which may wait on the QEMU monitor: libvirt refreshes the balloon
 * size) and its QEMU process; the VM's own settings as lv-own.c finds them. The decision managed /
 * unmanaged / invalid is the core's: this only reports. */
#define G_LOG_DOMAIN "softaffd"

#include <stdlib.h>
#include <string.h>

#include "lv-private.h"
#include "sa-error.h"
#include "sa-paths.h"

static bool pid_runs(gint64 pid)
{
    g_autofree char *proc = sa_proc_path("%" G_GINT64_FORMAT, pid);
    return pid > 0 && g_file_test(proc, G_FILE_TEST_IS_DIR);
}

/* The QEMU started for domain name: a process whose command line holds "guest=NAME,". */
static pid_t scan_proc_for_qemu(const char *name)
{
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

/* QEMU's process id: libvirt's pid file, else a /proc scan. */
static pid_t find_qemu_pid(const char *uri, const char *name)
{
    g_autofree char *pidfile = NULL;
    if (g_str_has_prefix(uri, "qemu:///session"))
        pidfile = g_strdup_printf("%s/libvirt/qemu/run/%s.pid", g_get_user_runtime_dir(), name);
    else
        pidfile = g_strdup_printf("/run/libvirt/qemu/%s.pid", name);
    g_autofree char *text = NULL;
    if (g_file_get_contents(pidfile, &text, NULL, NULL)) {
        gint64 pid = g_ascii_strtoll(text, NULL, 10);
        if (pid_runs(pid))
            return (pid_t)pid;
    }
    return scan_proc_for_qemu(name);
}

SaDomainXml *lv_read_xml(virDomainPtr dom, unsigned int flags, GError **error)
{
    const char *what =
        flags & VIR_DOMAIN_XML_INACTIVE ? "the persistent domain XML" : "the live domain XML";
    char *xml = virDomainGetXMLDesc(dom, flags);
    if (!xml) {
        g_autofree char *reading = g_strdup_printf("reading %s", what);
        lv_set_error(error, reading);
        return NULL;
    }
    g_autoptr(GError) local = NULL;
    SaDomainXml *x = sa_domain_xml_parse(xml, strlen(xml), &local);
    free(xml);
    if (!x)
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: %s", what, local->message);
    return x;
}

/* The facts: the VM's own settings per thread, and the user's softaff settings. */
static SaVmFacts *build_facts(LvDomain *h, pid_t pid, const SaDomainXml *live, const SaOwnPins *own)
{
    SaVmFacts *f = sa_vm_facts_new(h->uuid, live->name);
    f->pid = pid;
    f->n_vcpus = live->n_vcpus;
    f->memory_bytes = live->memory_bytes;
    f->vcpu_tids = NULL; /* the core finds the "CPU N/KVM" threads of pid */
    f->vcpu_cpuset = own->vcpu_cpuset ? sa_cpuset_copy(own->vcpu_cpuset) : NULL;
    if (own->vcpupin) {
        f->vcpu_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
        for (guint i = 0; i < live->n_vcpus; i++) {
            const SaCpuSet *p = i < own->vcpupin->len ? g_ptr_array_index(own->vcpupin, i) : NULL;
            g_ptr_array_add(f->vcpu_pins, p ? sa_cpuset_copy(p) : NULL);
        }
    }
    f->emulator_pin = own->emulatorpin ? sa_cpuset_copy(own->emulatorpin) : NULL;
    if (live->iothread_ids) {
        f->iothread_ids = g_array_copy(live->iothread_ids);
        f->iothread_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
        for (guint i = 0; i < live->iothread_ids->len; i++) {
            const SaCpuSet *p =
                sa_own_pins_iothread(own, g_array_index(live->iothread_ids, guint, i));
            g_ptr_array_add(f->iothread_pins, p ? sa_cpuset_copy(p) : NULL);
        }
    }
    f->flavor = g_strdup(live->nova_flavor);
    f->title = g_strdup(live->title);
    f->description = g_strdup(live->description);
    f->has_numatune = live->has_numatune;
    f->has_settings = live->has_metadata;
    if (live->metadata_error)
        f->settings_error = g_strdup(live->metadata_error->message);
    else if (live->has_metadata)
        f->settings = live->metadata;
    return f;
}

SaVmFacts *lv_discover(gpointer handle, GError **error)
{
    LvDomain *h = handle;
    g_autoptr(virDomain) dom = lv_domain_get_dom(h);

    int active = virDomainIsActive(dom);
    if (active < 0) {
        lv_set_error(error, "asking whether the domain runs");
        return NULL;
    }
    if (active == 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_GONE, "the domain is not running");
        return NULL;
    }
    g_autoptr(SaDomainXml) live = lv_read_xml(dom, 0, error);
    if (!live)
        return NULL;
    pid_t pid = find_qemu_pid(h->shared->uri, live->name);
    g_autoptr(SaOwnPins) own = lv_domain_adopt(h, pid, live);
    /* softaff narrows the VM and its record is behind the user's live pin: rewritten now, so a
     * daemon killed before its next pin, a save image or a migration carries the user's word
     * (softaff may have nothing more to pin: the user's set can be what it holds already). */
    if (lv_domain_record_stale(h) && !lv_domain_write_record(h, error))
        return NULL;
    SaVmFacts *facts = build_facts(h, pid, live, own);
    facts->narrowed = lv_domain_has_record(h);
    facts->user_pins = lv_domain_user_pins(h);
    return facts;
}
