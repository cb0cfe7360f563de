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

/* The element as it is now in the live (or, for a stopped VM / --config, persistent)
 * definition; an absent element gives the defaults. */
static bool read_current(virDomainPtr dom, unsigned int flags, SaMetadata *md, GError **error)
{
    sa_metadata_init(md);
    char *xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, SA_METADATA_NS, flags);
    if (!xml) {
        virErrorPtr e = virGetLastError();
        if (e && e->code == VIR_ERR_NO_DOMAIN_METADATA) {
            virResetLastError();
            return true;
        }
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "reading the softaff metadata: %s",
                    libvirt_message());
        return false;
    }
    bool ok = sa_metadata_parse(xml, strlen(xml), md, error);
    free(xml);
    if (!ok)
        g_prefix_error(error, "the VM's current softaff metadata is invalid (fix it with --mode, "
                              "--preferred and --softness): ");
    return ok;
}

int sa_ctl_set(int argc, char **argv)
{
    char *config_path = NULL, *uri = NULL, *mode = NULL, *preferred = NULL;
    gint softness = -1;
    gboolean live = FALSE, config = FALSE;
    GOptionEntry entries[] = {
        {"mode", 0, 0, G_OPTION_ARG_STRING, &mode, "soft, strict or off", "MODE"},
        {"preferred", 0, 0, G_OPTION_ARG_STRING, &preferred, "Home partition id, or auto", "ID"},
        {"softness", 0, 0, G_OPTION_ARG_INT, &softness, "0-100", "N"},
        {"live", 0, 0, G_OPTION_ARG_NONE, &live, "Change the running VM", NULL},
        {"config", 0, 0, G_OPTION_ARG_NONE, &config, "Change the persistent definition", NULL},
        {"uri", 'u', 0, G_OPTION_ARG_STRING, &uri, "libvirt URI (default: [daemon] uri)", "URI"},
        {"conf", 'c', 0, G_OPTION_ARG_FILENAME, &config_path,
         "Configuration file (default $SOFTAFF_CONFIG or " SA_DEFAULT_CONFIG ")", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "DOMAIN - write the VM's softaff metadata (default: --live if it runs, --config if "
        "it is persistent)");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    int rc = SA_CTL_OK;
    virConnectPtr conn = NULL;
    virDomainPtr dom = NULL;
    g_autoptr(SaConfig) cfg = NULL;
    g_autoptr(SaTopology) topo = NULL;

    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        rc = sa_ctl_usage_error(ctx, "%s", error->message);
        goto out;
    }
    if (argc != 2) {
        rc = sa_ctl_usage_error(ctx,
                                argc < 2 ? "set: which DOMAIN?%s" : "set: unexpected argument '%s'",
                                argc < 2 ? "" : argv[2]);
        goto out;
    }
    if (!mode && !preferred && softness < 0) {
        rc = sa_ctl_usage_error(ctx, "set: nothing to set: give --mode, --preferred or "
                                     "--softness");
        goto out;
    }
    /* Validate the new values the way the hook does: build the attributes and parse them. */
    GString *probe = g_string_new("<affinity");
    if (mode)
        g_string_append_printf(probe, " mode=\"%s\"", mode);
    if (preferred)
        g_string_append_printf(probe, " preferred=\"%s\"", preferred);
    if (softness >= 0 || g_strv_contains((const char *const *)argv, "--softness"))
        g_string_append_printf(probe, " softness=\"%d\"", softness);
    g_string_append(probe, "/>");
    bool bad_chars = (mode && strpbrk(mode, "\"<>&")) || (preferred && strpbrk(preferred, "\"<>&"));
    SaMetadata wanted;
    bool valid = !bad_chars && sa_metadata_parse(probe->str, probe->len, &wanted, &error);
    g_string_free(probe, TRUE);
    if (!valid) {
        rc = sa_ctl_usage_error(NULL, "set: %s",
                                error ? error->message : "values may not contain \" < > &");
        goto out;
    }

    cfg = sa_config_load(config_path, &error);
    if (!cfg) {
        fprintf(stderr, "softaffctl: %s\n", error->message);
        rc = SA_CTL_FAILED;
        goto out;
    }
    topo = sa_topology_load(cfg->layout, cfg->custom, &error);
    if (!topo) {
        fprintf(stderr, "softaffctl: %s\n", error->message);
        rc = SA_CTL_FAILED;
        goto out;
    }
    virSetErrorFunc(NULL, quiet);
    conn = virConnectOpen(uri ? uri : cfg->uri);
    if (!conn) {
        fprintf(stderr, "softaffctl: cannot connect to %s: %s\n", uri ? uri : cfg->uri,
                libvirt_message());
        rc = SA_CTL_FAILED;
        goto out;
    }
    dom = virDomainLookupByName(conn, argv[1]);
    if (!dom)
        dom = virDomainLookupByUUIDString(conn, argv[1]);
    if (!dom) {
        fprintf(stderr, "softaffctl: no domain named '%s' on %s\n", argv[1], uri ? uri : cfg->uri);
        rc = SA_CTL_FAILED;
        goto out;
    }
    unsigned int flags = 0;
    if (live)
        flags |= VIR_DOMAIN_AFFECT_LIVE;
    if (config)
        flags |= VIR_DOMAIN_AFFECT_CONFIG;
    if (!flags) {
        if (virDomainIsActive(dom) == 1)
            flags |= VIR_DOMAIN_AFFECT_LIVE;
        if (virDomainIsPersistent(dom) == 1)
            flags |= VIR_DOMAIN_AFFECT_CONFIG;
    }
    /* Each definition keeps its other attributes; a new preferred drops the old assigned. */
    unsigned int each[] = {VIR_DOMAIN_AFFECT_LIVE, VIR_DOMAIN_AFFECT_CONFIG};
    for (guint i = 0; i < G_N_ELEMENTS(each); i++) {
        if (!(flags & each[i]))
            continue;
        SaMetadata md;
        if (!read_current(dom, each[i], &md, &error)) {
            fprintf(stderr, "softaffctl: %s: %s\n", argv[1], error->message);
            rc = SA_CTL_FAILED;
            goto out;
        }
        if (mode)
            md.mode = wanted.mode;
        if (preferred) {
            md.preferred = wanted.preferred;
            md.assigned = -1;
        }
        if (softness >= 0)
            md.softness = wanted.softness;
        if (each[i] == VIR_DOMAIN_AFFECT_CONFIG)
            md.assigned = -1; /* assigned= is live only */
        if (!sa_metadata_check_host(&md, topo, &error)) {
            fprintf(stderr, "softaffctl: %s: %s\n", argv[1], error->message);
            rc = SA_CTL_FAILED;
            goto out;
        }
        g_autofree char *xml = sa_metadata_format(&md);
        if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml, SA_METADATA_KEY,
                                 SA_METADATA_NS, each[i]) < 0) {
            fprintf(stderr, "softaffctl: %s: writing the %s metadata: %s\n", argv[1],
                    each[i] == VIR_DOMAIN_AFFECT_LIVE ? "live" : "persistent", libvirt_message());
            rc = SA_CTL_FAILED;
            goto out;
        }
        printf("%s: %s metadata set: %s\n", argv[1],
               each[i] == VIR_DOMAIN_AFFECT_LIVE ? "live" : "persistent", xml);
    }
out:
    if (dom)
        virDomainFree(dom);
    if (conn)
        virConnectClose(conn);
    g_free(config_path);
    g_free(uri);
    g_free(mode);
    g_free(preferred);
    return rc;
}
