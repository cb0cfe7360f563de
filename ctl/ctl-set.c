/* softaffctl set — writes a VM's softaff metadata through libvirt; softaffd reacts to the
 * metadata-change event. Validates like the hook: the element, and the partition on this host. */
#define G_LOG_DOMAIN "softaffctl"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "sa-config-defs.h"
#include "sa-error.h"
#include "sa-metadata.h"

static void quiet(void *data, virErrorPtr err)
{
}

static const char *libvirt_message(void)
{
    virErrorPtr e = virGetLastError();
    return e && e->message ? e->message : "unknown libvirt error";
}

/* The element of one definition: the user's attributes and softaffd's child, which set keeps. */
typedef struct {
    SaMetadata md;
    SaMetadataRecord rec;
    guint attrs; /* SaMetadataUserAttrs present */
} Element;

/* The element as it is now in the live (or, for a stopped VM / --config, persistent)
 * definition; an absent element gives the defaults. */
static bool read_current(virDomainPtr dom, unsigned int flags, Element *e, GError **error)
{
    sa_metadata_init(&e->md);
    char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, SA_METADATA_NS, flags);
    if (!xml) {
        virErrorPtr err = virGetLastError();
        if (err && err->code == VIR_ERR_NO_DOMAIN_METADATA) {
            virResetLastError();
            return true;
        }
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "reading the softaff metadata: %s",
                    libvirt_message());
        return false;
    }
    bool ok = sa_metadata_parse_full(xml, strlen(xml), &e->md, &e->rec, &e->attrs, error);
    free(xml);
    if (!ok)
        g_prefix_error(error, "the VM's current softaff metadata is invalid (fix it with --mode, "
                              "--preferred and --softness): ");
    return ok;
}

/* The options of set; the strings are the command line's, owned. */
typedef struct {
    gint softness; /* -1: not given */
    gboolean live;
    gboolean config;
    char *mode;
    char *preferred;
    char *uri;
    char *config_path;
} SetOptions;

static void set_options_clear(SetOptions *o)
{
    char **owned[] = {&o->mode, &o->preferred, &o->uri, &o->config_path};

    for (guint i = 0; i < G_N_ELEMENTS(owned); i++)
        g_clear_pointer(owned[i], g_free);
}

static GOptionContext *set_context(SetOptions *o)
{
    GOptionEntry entries[] = {
        {"mode", 0, 0, G_OPTION_ARG_STRING, &o->mode, "soft, strict or off", "MODE"},
        {"preferred", 0, 0, G_OPTION_ARG_STRING, &o->preferred, "Home partition id, or auto", "ID"},
        {"softness", 0, 0, G_OPTION_ARG_INT, &o->softness, "0-100", "N"},
        {"live", 0, 0, G_OPTION_ARG_NONE, &o->live, "Change the running VM", NULL},
        {"config", 0, 0, G_OPTION_ARG_NONE, &o->config, "Change the persistent definition", NULL},
        {"uri", 'u', 0, G_OPTION_ARG_STRING, &o->uri, "libvirt URI (default: [daemon] uri)", "URI"},
        {"conf", 'c', 0, G_OPTION_ARG_FILENAME, &o->config_path,
         "Configuration file (default $SOFTAFF_CONFIG or " SA_DEFAULT_CONFIG ")", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    GOptionContext *ctx = g_option_context_new(
        "DOMAIN - write the VM's softaff metadata (default: --live if it runs, --config if "
        "it is persistent)");
    g_option_context_add_main_entries(ctx, entries, NULL);
    return ctx;
}

/* The command line: options, one DOMAIN, something to set. SA_CTL_OK or the usage error's. */
static int parse_set_command(GOptionContext *ctx, int *argc, char ***argv, const SetOptions *o)
{
    g_autoptr(GError) error = NULL;

    if (!g_option_context_parse(ctx, argc, argv, &error))
        return sa_ctl_usage_error(ctx, "%s", error->message);
    if (*argc != 2)
        return sa_ctl_usage_error(
            ctx, *argc < 2 ? "set: which DOMAIN?%s" : "set: unexpected argument '%s'",
            *argc < 2 ? "" : (*argv)[2]);
    if (!o->mode && !o->preferred && o->softness < 0)
        return sa_ctl_usage_error(ctx, "set: nothing to set: give --mode, --preferred or "
                                       "--softness");
    return SA_CTL_OK;
}

/* The new values, validated the way the hook does: built into attributes and parsed. */
static int check_wanted(const SetOptions *o, char **argv, SaMetadata *wanted)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) probe = g_string_new("<affinity");

    if (o->mode)
        g_string_append_printf(probe, " mode=\"%s\"", o->mode);
    if (o->preferred)
        g_string_append_printf(probe, " preferred=\"%s\"", o->preferred);
    if (o->softness >= 0 || g_strv_contains((const char *const *)argv, "--softness"))
        g_string_append_printf(probe, " softness=\"%d\"", o->softness);
    g_string_append(probe, "/>");
    bool bad_chars =
        (o->mode && strpbrk(o->mode, "\"<>&")) || (o->preferred && strpbrk(o->preferred, "\"<>&"));
    if (!bad_chars && sa_metadata_parse(probe->str, probe->len, wanted, &error))
        return SA_CTL_OK;
    return sa_ctl_usage_error(NULL, "set: %s",
                              error ? error->message : "values may not contain \" < > &");
}

/* The domain, by name or UUID, on the given URI or the configuration's. */
static int open_domain(const SetOptions *o, const SaConfig *cfg, const char *name,
                       virConnectPtr *conn, virDomainPtr *dom)
{
    const char *uri = o->uri ? o->uri : cfg->uri;

    virSetErrorFunc(NULL, quiet);
    *conn = virConnectOpen(uri);
    if (!*conn) {
        fprintf(stderr, "softaffctl: cannot connect to %s: %s\n", uri, libvirt_message());
        return SA_CTL_FAILED;
    }
    *dom = virDomainLookupByName(*conn, name);
    if (!*dom)
        *dom = virDomainLookupByUUIDString(*conn, name);
    if (!*dom) {
        fprintf(stderr, "softaffctl: no domain named '%s' on %s\n", name, uri);
        return SA_CTL_FAILED;
    }
    return SA_CTL_OK;
}

/* --live and --config as given; without either, what the domain has. */
static unsigned int target_flags(const SetOptions *o, virDomainPtr dom)
{
    unsigned int flags = 0;

    if (o->live)
        flags |= VIR_DOMAIN_AFFECT_LIVE;
    if (o->config)
        flags |= VIR_DOMAIN_AFFECT_CONFIG;
    if (!flags) {
        if (virDomainIsActive(dom) == 1)
            flags |= VIR_DOMAIN_AFFECT_LIVE;
        if (virDomainIsPersistent(dom) == 1)
            flags |= VIR_DOMAIN_AFFECT_CONFIG;
    }
    return flags;
}

/* The element of one definition with the new values: it keeps its other attributes and
 * softaffd's record of the VM's own settings; a new preferred drops the old assigned, and the
 * persistent definition never has one. mode and preferred are always written (as before the
 * record existed), so the element now holds the user's settings: no longer "created". */
static void merge_wanted(Element *e, const SetOptions *o, const SaMetadata *wanted,
                         unsigned int which)
{
    if (o->mode)
        e->md.mode = wanted->mode;
    if (o->preferred) {
        e->md.preferred = wanted->preferred;
        e->md.assigned = -1;
    }
    if (o->softness >= 0) {
        e->md.softness = wanted->softness;
        e->attrs |= SA_METADATA_HAS_SOFTNESS;
    }
    if (which == VIR_DOMAIN_AFFECT_CONFIG)
        e->md.assigned = -1; /* assigned is live only */
    e->attrs |= SA_METADATA_HAS_MODE | SA_METADATA_HAS_PREFERRED;
    e->rec.created = false;
}

/* Reads, merges, checks against this host and writes one definition (live or persistent). */
static int write_definition(virDomainPtr dom, const char *name, unsigned int which,
                            const SetOptions *o, const SaMetadata *wanted, const SaTopology *topo)
{
    const char *label = which == VIR_DOMAIN_AFFECT_LIVE ? "live" : "persistent";
    g_autoptr(GError) error = NULL;
    Element e = {.attrs = 0};

    bool ok = read_current(dom, which, &e, &error);
    if (ok) {
        merge_wanted(&e, o, wanted, which);
        ok = sa_metadata_check_host(&e.md, topo, &error);
    }
    if (!ok) {
        fprintf(stderr, "softaffctl: %s: %s\n", name, error->message);
        sa_metadata_record_clear(&e.rec);
        return SA_CTL_FAILED;
    }
    g_autofree char *xml = sa_metadata_format_full(&e.md, e.attrs, &e.rec);
    sa_metadata_record_clear(&e.rec);
    if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml, SA_METADATA_KEY, SA_METADATA_NS,
                             which) < 0) {
        fprintf(stderr, "softaffctl: %s: writing the %s metadata: %s\n", name, label,
                libvirt_message());
        return SA_CTL_FAILED;
    }
    printf("%s: %s metadata set: %s\n", name, label, xml);
    return SA_CTL_OK;
}

/* The configuration and this host's partitions, to check a new preferred against. */
static int load_host(const SetOptions *o, SaConfig **cfg, SaTopology **topo)
{
    g_autoptr(GError) error = NULL;

    *cfg = sa_config_load(o->config_path, &error);
    if (*cfg)
        *topo = sa_topology_load((*cfg)->layout, (*cfg)->custom, &error);
    if (!*cfg || !*topo) {
        fprintf(stderr, "softaffctl: %s\n", error->message);
        return SA_CTL_FAILED;
    }
    return SA_CTL_OK;
}

/* Writes the element of each definition the flags name, live first. */
static int write_definitions(virDomainPtr dom, const char *name, unsigned int flags,
                             const SetOptions *o, const SaMetadata *wanted, const SaTopology *topo)
{
    const unsigned int each[] = {VIR_DOMAIN_AFFECT_LIVE, VIR_DOMAIN_AFFECT_CONFIG};
    int rc = SA_CTL_OK;

    for (guint i = 0; rc == SA_CTL_OK && i < G_N_ELEMENTS(each); i++)
        if (flags & each[i])
            rc = write_definition(dom, name, each[i], o, wanted, topo);
    return rc;
}

int sa_ctl_set(int argc, char **argv)
{
    SetOptions o = {.softness = -1};
    g_autoptr(GOptionContext) ctx = set_context(&o);
    g_autoptr(SaConfig) cfg = NULL;
    g_autoptr(SaTopology) topo = NULL;
    virConnectPtr conn = NULL;
    virDomainPtr dom = NULL;
    SaMetadata wanted;

    int rc = parse_set_command(ctx, &argc, &argv, &o);
    if (rc == SA_CTL_OK)
        rc = check_wanted(&o, argv, &wanted);
    if (rc == SA_CTL_OK)
        rc = load_host(&o, &cfg, &topo);
    if (rc == SA_CTL_OK)
        rc = open_domain(&o, cfg, argv[1], &conn, &dom);
    if (rc == SA_CTL_OK)
        rc = write_definitions(dom, argv[1], target_flags(&o, dom), &o, &wanted, topo);
    if (dom)
        virDomainFree(dom);
    if (conn)
        virConnectClose(conn);
    set_options_clear(&o);
    return rc;
}
