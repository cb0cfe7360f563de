/* softaffd — the libvirt backend's discover callback (a worker thread): what a running domain
 * is, from its live XML (which may wait on the QEMU monitor: libvirt refreshes the balloon
 * size), its persistent definition and its QEMU process. The decision managed / unmanaged /
 * invalid is the core's: this only reports. */
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

static SaDomainXml *read_xml(virDomainPtr dom, unsigned int flags, GError **error)
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

/* The persistent definition, or NULL in *conf for a transient domain. */
static bool read_definition(virDomainPtr dom, SaDomainXml **conf, GError **error)
{
    int persistent = virDomainIsPersistent(dom);
    *conf = NULL;
    if (persistent < 0) {
        lv_set_error(error, "asking whether the domain is persistent");
        return false;
    }
    if (persistent == 1)
        *conf = read_xml(dom, VIR_DOMAIN_XML_INACTIVE, error);
    return persistent == 0 || *conf != NULL;
}

/* A transient domain's own pins: the first ones seen, in memory and in the state file. A
 * domain that was persistent until now (undefined while running) keeps its definition's. */
static LvPins *first_seen_pins(LvDomain *h, SaDomainXml *live)
{
    bool first_seen = false;
    g_autoptr(LvPins) known = lv_domain_own(h, &first_seen);
    if (known && first_seen)
        return g_steal_pointer(&known);
    g_autoptr(LvPins) seen = known ? g_steal_pointer(&known) : lv_pins_take(live);
    LvPins *own = lv_transient_first_seen(h->shared, h->uuid, live->name, live->n_vcpus, seen);
    lv_domain_set_own(h, own, true);
    return own;
}

/* The user's pins: live `virsh vcpupin` seen as events, else the VM's own. */
static GPtrArray *vcpu_pins(LvDomain *h, const LvPins *own, guint n_vcpus)
{
    g_autoptr(GPtrArray) user = lv_domain_user_pins(h);
    g_autoptr(GPtrArray) pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    bool any = false;
    for (guint i = 0; i < n_vcpus; i++) {
        const SaCpuSet *p = NULL;
        if (user && i < user->len)
            p = g_ptr_array_index(user, i);
        if (!p && own->vcpupin && i < own->vcpupin->len)
            p = g_ptr_array_index(own->vcpupin, i);
        g_ptr_array_add(pins, p ? sa_cpuset_copy(p) : NULL);
        any |= p != NULL;
    }
    return any ? g_steal_pointer(&pins) : NULL;
}

static SaVmFacts *build_facts(LvDomain *h, const SaDomainXml *live, const SaDomainXml *def,
                              const LvPins *own)
{
    SaVmFacts *f = sa_vm_facts_new(h->uuid, live->name);
    f->pid = find_qemu_pid(h->shared->uri, live->name);
    f->n_vcpus = live->n_vcpus;
    f->memory_bytes = live->memory_bytes;
    f->vcpu_tids = NULL; /* the core finds the "CPU N/KVM" threads of pid */
    f->vcpu_cpuset = def->vcpu_cpuset ? sa_cpuset_copy(def->vcpu_cpuset) : NULL;
    f->vcpu_pins = vcpu_pins(h, own, live->n_vcpus);
    f->emulator_pin = own->emulatorpin ? sa_cpuset_copy(own->emulatorpin) : NULL;
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
    g_autoptr(SaDomainXml) live = read_xml(dom, 0, error);
    g_autoptr(SaDomainXml) conf = NULL;
    if (!live || !read_definition(dom, &conf, error))
        return NULL;
    /* The live XML holds the I/O threads and their current pins (softaff's included). */
    lv_domain_learn_iothreads(h, live);
    g_autoptr(LvPins) own = NULL;
    if (conf) {
        own = lv_pins_take(conf);
        lv_domain_set_own(h, own, false);
    } else {
        own = first_seen_pins(h, live);
    }
    return build_facts(h, live, conf ? conf : live, own);
}
