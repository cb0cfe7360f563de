/* softaff-hook — the libvirt qemu hook (/etc/libvirt/hooks/qemu.d/50-softaff).
 *
 * libvirt runs it as `50-softaff DOMAIN OPERATION SUB-OPERATION EXTRA` with the domain XML on
 * stdin and waits for it, holding the domain's lock: it must never call libvirt, never fork,
 * and never take long. Operations it does not handle exit 0 at once (a failure at `reconnect`
 * would kill the VM).
 *
 *   prepare begin     validate the softaff element (an invalid one refuses the start only with
 *                     [hook] strict=true), then tell softaffd the VM is coming
 *   started begin, stopped end, release end     tell softaffd
 *   migrate begin, restore begin                rewrite host-specific softaff data for this
 *                     host on stdout (nothing on stdout = the XML is unchanged): drop assigned,
 *                     make an unknown preferred auto, and put back the VM's own pins that
 *                     softaffd recorded in place of the ones softaff set (docs/metadata.md)
 *
 * Notifications are one request on softaffd's control socket (control/sa-control-client.h), with
 * SA_HOOK_TIMEOUT_MS for connect, write and reply together; a missing daemon is not an error. */
#define G_LOG_DOMAIN "softaff-hook"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "sa-config.h"
#include "sa-control-client.h"
#include "sa-error.h"
#include "sa-metadata.h"
#include "sa-topology.h"

/* Connect + write + read of one notification, in total. */
#define SA_HOOK_TIMEOUT_MS 100
/* softaffd's reply to vm-event is one short line; a longer one is refused unread. */
#define SA_HOOK_MAX_REPLY 4096

enum {
    HOOK_OK = 0,
    HOOK_REFUSED = 1, /* strict mode refused the start, or the rewritten XML could not be written */
    HOOK_USAGE = 2,
};

typedef enum {
    ACTION_PREPARE,
    ACTION_NOTIFY,
    ACTION_REWRITE,
} HookAction;

typedef struct {
    const char *operation;
    const char *sub_operation;
    HookAction action;
    SaVmEvent event; /* ACTION_PREPARE, ACTION_NOTIFY */
} HookCall;

static const HookCall hook_calls[] = {
    {"prepare", "begin", ACTION_PREPARE, SA_VM_EVENT_PREPARE},
    {"started", "begin", ACTION_NOTIFY, SA_VM_EVENT_STARTED},
    {"stopped", "end", ACTION_NOTIFY, SA_VM_EVENT_STOPPED},
    {"release", "end", ACTION_NOTIFY, SA_VM_EVENT_RELEASE},
    {"migrate", "begin", ACTION_REWRITE, 0},
    {"restore", "begin", ACTION_REWRITE, 0},
};

/* ---- logging: stderr (libvirt keeps a hook's stderr in its log, and shows it when the hook
 * fails) and syslog ---- */

static int syslog_priority(GLogLevelFlags level)
{
    switch (level & G_LOG_LEVEL_MASK) {
    case G_LOG_LEVEL_ERROR:
        return LOG_ERR;
    case G_LOG_LEVEL_CRITICAL:
        return LOG_CRIT;
    case G_LOG_LEVEL_WARNING:
        return LOG_WARNING;
    case G_LOG_LEVEL_MESSAGE:
        return LOG_NOTICE;
    case G_LOG_LEVEL_INFO:
        return LOG_INFO;
    default:
        return LOG_DEBUG;
    }
}

static GLogWriterOutput log_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
                                   gpointer user_data)
{
    static bool syslog_open;
    const char *domain = NULL;
    const char *message = NULL;

    for (gsize i = 0; i < n_fields; i++) {
        if (strcmp(fields[i].key, "GLIB_DOMAIN") == 0)
            domain = fields[i].value;
        else if (strcmp(fields[i].key, "MESSAGE") == 0)
            message = fields[i].value;
    }
    if (g_log_writer_default_would_drop(level, domain) || message == NULL)
        return G_LOG_WRITER_HANDLED;

    fprintf(stderr, "softaff-hook: %s\n", message);
    fflush(stderr);
    if (!syslog_open) {
        openlog("softaff-hook", LOG_PID, LOG_DAEMON);
        syslog_open = true;
    }
    syslog(syslog_priority(level), "%s", message);
    return G_LOG_WRITER_HANDLED;
}

/* ---- input ---- */

/* The domain XML libvirt writes on stdin, up to one byte more than SA_XML_MAX_BYTES (so that
 * the parser reports an oversize document). stdin is then replaced by /dev/null: libvirt's pipe
 * is not kept open. */
static char *read_stdin(gsize *len)
{
    GString *buf = g_string_sized_new(16 * 1024);
    char chunk[16 * 1024];

    while (buf->len <= SA_XML_MAX_BYTES) {
        gsize want = MIN(sizeof(chunk), (gsize)SA_XML_MAX_BYTES + 1 - buf->len);
        ssize_t n = read(STDIN_FILENO, chunk, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            g_warning("cannot read the domain XML from stdin: %s", g_strerror(errno));
            break;
        }
        if (n == 0)
            break;
        g_string_append_len(buf, chunk, n);
    }
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        close(null_fd);
    } else {
        close(STDIN_FILENO);
    }
    *len = buf->len;
    return g_string_free(buf, FALSE);
}

/* The configuration; a broken file is logged and the defaults are used (the hook must not stop
 * VMs because of a typo in softaff.conf). */
static SaConfig *load_config(void)
{
    g_autoptr(GError) error = NULL;
    SaConfig *cfg = sa_config_load(NULL, &error);

    if (cfg == NULL) {
        g_warning("%s; using the default configuration", error->message);
        cfg = sa_config_new_default();
    }
    return cfg;
}

static const char *config_name(const SaConfig *cfg)
{
    return cfg->path != NULL ? cfg->path : "the default configuration";
}

static SaTopology *load_topology(const SaConfig *cfg, const char *domain)
{
    g_autoptr(GError) error = NULL;
    SaTopology *topo =
        sa_topology_load(cfg->layout, cfg->layout == SA_LAYOUT_CUSTOM ? cfg->custom : NULL, &error);

    if (topo == NULL)
        g_warning("domain '%s': cannot read this host's partitions (layout %s from %s): %s", domain,
                  sa_layout_to_string(cfg->layout), config_name(cfg), error->message);
    return topo;
}

/* ---- notifying softaffd ---- */

/* One vm-event request, answered within SA_HOOK_TIMEOUT_MS in all; a daemon that is not running
 * is no error (debug only), everything else a warning. */
static void notify_daemon(const SaConfig *cfg, SaVmEvent event, const char *domain,
                          const char *uuid)
{
    const char *path = cfg->socket;
    g_autoptr(GError) error = NULL;
    SaControlRequest req = {
        .command = SA_CONTROL_VM_EVENT,
        .domain = (char *)domain,
        .uuid = (char *)uuid,
        .event = event,
    };

    if (path == NULL || path[0] == '\0')
        return;
    const gint64 deadline = g_get_monotonic_time() + SA_HOOK_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
    json_object *reply = sa_control_call(path, &req, deadline, SA_HOOK_MAX_REPLY, &error);
    if (reply != NULL)
        json_object_put(reply);
    else if (g_error_matches(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_NO_DAEMON))
        g_debug("%s; not notified", error->message);
    else
        g_warning("domain '%s': %s; not notified ([daemon] socket from %s)", domain, error->message,
                  config_name(cfg));
}

/* ---- the operations ---- */

static int do_prepare(const char *domain, SaVmEvent event)
{
    g_autoptr(SaConfig) cfg = load_config();
    gsize len = 0;
    g_autofree char *xml = read_stdin(&len);
    g_autoptr(GError) error = NULL;
    g_autoptr(GError) problem = NULL;
    g_autoptr(SaDomainXml) d = sa_domain_xml_parse(xml, len, &error);

    if (d == NULL) {
        /* libvirt's own XML: a reader limit, not the user's softaff element. Never refuse. */
        g_warning("domain '%s': cannot read the domain XML (%s); softaff metadata not checked",
                  domain, error->message);
    } else if (d->metadata_error != NULL) {
        problem = g_error_copy(d->metadata_error);
    } else if (d->has_metadata && d->metadata.mode != SA_MODE_OFF) {
        /* The user's element only: one softaffd created holds no setting of the user's. */
        g_autoptr(SaTopology) topo = load_topology(cfg, domain);
        if (topo != NULL)
            sa_metadata_check_host(&d->metadata, topo, &problem);
    }

    if (problem != NULL) {
        if (cfg->hook_strict) {
            g_warning("domain '%s': %s; start refused ([hook] strict=true in %s)", domain,
                      problem->message, config_name(cfg));
            return HOOK_REFUSED;
        }
        g_warning("domain '%s': %s; the VM starts, softaffd will not manage it until the "
                  "metadata is fixed",
                  domain, problem->message);
    }
    notify_daemon(cfg, event, domain, d != NULL ? d->uuid : NULL);
    return HOOK_OK;
}

static int do_notify(const char *domain, SaVmEvent event)
{
    g_autoptr(SaConfig) cfg = load_config();
    gsize len = 0;
    g_autofree char *xml = read_stdin(&len);
    g_autoptr(SaDomainXml) d = sa_domain_xml_parse(xml, len, NULL);

    notify_daemon(cfg, event, domain, d != NULL ? d->uuid : NULL);
    return HOOK_OK;
}

static int do_rewrite(const char *domain, const char *operation)
{
    g_autoptr(SaConfig) cfg = load_config();
    gsize len = 0;
    g_autofree char *xml = read_stdin(&len);
    g_autoptr(GError) error = NULL;
    g_autofree char *out = NULL;
    g_autoptr(SaTopology) topo = load_topology(cfg, domain);

    if (topo == NULL)
        return HOOK_OK;
    if (!sa_domain_xml_rewrite_for_host(xml, len, topo, &out, &error)) {
        g_warning("domain '%s': %s: softaff data not rewritten for this host: %s", domain,
                  operation, error->message);
        return HOOK_OK;
    }
    if (out == NULL)
        return HOOK_OK;
    gsize out_len = strlen(out);
    if (fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout) != 0) {
        g_warning("domain '%s': %s: cannot write the rewritten domain XML to stdout: %s", domain,
                  operation, g_strerror(errno));
        return HOOK_REFUSED;
    }
    return HOOK_OK;
}

static int usage(FILE *to, int code)
{
    fprintf(to, "usage: softaff-hook DOMAIN OPERATION SUB-OPERATION [EXTRA]  (domain XML on "
                "stdin)\n"
                "The libvirt qemu hook of softaff, installed as /etc/libvirt/hooks/qemu.d/"
                "50-softaff.\n"
                "Handles prepare/begin, started/begin, stopped/end, release/end (notify "
                "softaffd)\nand migrate/begin, restore/begin (rewrite softaff data for this "
                "host);\nevery other operation exits 0 at once.\n");
    return code;
}

int main(int argc, char **argv)
{
    /* libvirtd closing the pipe early must give an error, not kill the hook. */
    signal(SIGPIPE, SIG_IGN);
    /* Options are not parsed: a domain may be called "--help". */
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return usage(stdout, HOOK_OK);
    if (argc < 4 || argc > 5) {
        fprintf(stderr,
                "softaff-hook: expected 3 or 4 arguments (DOMAIN OPERATION "
                "SUB-OPERATION [EXTRA]) as libvirt passes them, got %d\n",
                argc - 1);
        return usage(stderr, HOOK_USAGE);
    }

    const char *domain = argv[1];
    const char *operation = argv[2];
    const char *sub_operation = argv[3];
    const HookCall *call = NULL;

    for (gsize i = 0; i < G_N_ELEMENTS(hook_calls); i++) {
        if (strcmp(operation, hook_calls[i].operation) == 0 &&
            strcmp(sub_operation, hook_calls[i].sub_operation) == 0) {
            call = &hook_calls[i];
            break;
        }
    }
    if (call == NULL)
        return HOOK_OK; /* reconnect, attach, start, ...: nothing to do, and at once */

    g_log_set_writer_func(log_writer, NULL, NULL);

    switch (call->action) {
    case ACTION_PREPARE:
        return do_prepare(domain, call->event);
    case ACTION_NOTIFY:
        return do_notify(domain, call->event);
    case ACTION_REWRITE:
        return do_rewrite(domain, operation);
    }
    return HOOK_OK;
}
