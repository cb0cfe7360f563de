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
 *                     host on stdout (nothing on stdout = the XML is unchanged)
 *
 * Notifications are one request on softaffd's control socket, with SA_HOOK_TIMEOUT_MS for
 * connect, write and reply together; a missing daemon is not an error. */
#define G_LOG_DOMAIN "softaff-hook"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "sa-config.h"
#include "sa-control.h"
#include "sa-error.h"
#include "sa-metadata.h"
#include "sa-topology.h"

/* Connect + write + read of one notification, in total. */
#define SA_HOOK_TIMEOUT_MS 100
/* softaffd's reply to vm-event is one short line; more is not read. */
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

static int ms_left(gint64 deadline)
{
    gint64 left = deadline - g_get_monotonic_time();
    return left <= 0 ? 0 : (int)((left + 999) / 1000);
}

/* Waits for events on fd until the deadline; false on timeout or error. */
static bool wait_fd(int fd, short events, gint64 deadline)
{
    for (;;) {
        int timeout = ms_left(deadline);
        if (timeout == 0)
            return false;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, timeout);
        if (rc > 0)
            return true;
        if (rc == 0 || errno != EINTR)
            return false;
    }
}

typedef enum {
    CONNECT_OK,
    CONNECT_NO_DAEMON,
    CONNECT_FAILED, /* logged */
} ConnectResult;

static ConnectResult connect_daemon(int fd, const struct sockaddr_un *addr, const char *path,
                                    gint64 deadline)
{
    for (;;) {
        if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0)
            return CONNECT_OK;
        int err = errno;
        if (err == EINTR)
            continue;
        if (err == ENOENT || err == ECONNREFUSED)
            return CONNECT_NO_DAEMON;
        if (err == EAGAIN) {
            /* The listen backlog is full: the daemon is busy. Try again shortly. */
            if (ms_left(deadline) <= 2) {
                g_warning("softaffd on %s is not accepting connections (backlog full after %d "
                          "ms); not notified",
                          path, SA_HOOK_TIMEOUT_MS);
                return CONNECT_FAILED;
            }
            g_usleep(1000);
            continue;
        }
        if (err == EINPROGRESS) {
            int so_error = 0;
            socklen_t len = sizeof(so_error);
            if (!wait_fd(fd, POLLOUT, deadline)) {
                g_warning("connecting to softaffd on %s timed out after %d ms; not notified", path,
                          SA_HOOK_TIMEOUT_MS);
                return CONNECT_FAILED;
            }
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) < 0)
                so_error = errno;
            if (so_error == 0)
                return CONNECT_OK;
            err = so_error;
            if (err == ENOENT || err == ECONNREFUSED)
                return CONNECT_NO_DAEMON;
        }
        g_warning("cannot connect to softaffd on %s: %s; not notified", path, g_strerror(err));
        return CONNECT_FAILED;
    }
}

static bool send_all(int fd, const char *data, gsize len, gint64 deadline)
{
    gsize done = 0;

    while (done < len) {
        ssize_t n = send(fd, data + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            done += (gsize)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN && wait_fd(fd, POLLOUT, deadline))
            continue;
        return false;
    }
    return true;
}

/* Reads one reply line; NULL on timeout or error (errno-less: the caller logs). */
static char *read_reply(int fd, gint64 deadline, bool *timed_out)
{
    g_autoptr(GString) buf = g_string_new(NULL);
    char chunk[512];

    *timed_out = false;
    while (buf->len < SA_HOOK_MAX_REPLY && memchr(buf->str, '\n', buf->len) == NULL) {
        ssize_t n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
        if (n > 0) {
            g_string_append_len(buf, chunk, n);
            continue;
        }
        if (n == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN) {
            if (wait_fd(fd, POLLIN, deadline))
                continue;
            *timed_out = true;
            return NULL;
        }
        return NULL;
    }
    char *nl = memchr(buf->str, '\n', buf->len);
    if (nl != NULL)
        g_string_truncate(buf, (gsize)(nl - buf->str));
    return g_string_free(g_steal_pointer(&buf), FALSE);
}

static void check_reply(const char *reply, const char *event, const char *domain, const char *path)
{
    json_object *root = json_tokener_parse(reply);
    json_object *ok = NULL;
    json_object *err = NULL;

    if (root == NULL || !json_object_is_type(root, json_type_object) ||
        !json_object_object_get_ex(root, "ok", &ok) ||
        !json_object_is_type(ok, json_type_boolean)) {
        g_autofree char *shown = g_strndup(reply, 200);
        g_warning("domain '%s': softaffd on %s answered the %s event with \"%s\", not "
                  "{\"ok\":...}",
                  domain, path, event, shown);
    } else if (!json_object_get_boolean(ok)) {
        const char *msg = json_object_object_get_ex(root, "error", &err) &&
                                  json_object_is_type(err, json_type_string)
                              ? json_object_get_string(err)
                              : "no error message";
        g_warning("domain '%s': softaffd on %s refused the %s event: %s", domain, path, event, msg);
    }
    json_object_put(root);
}

static void notify_daemon(const SaConfig *cfg, SaVmEvent event, const char *domain,
                          const char *uuid)
{
    const gint64 deadline = g_get_monotonic_time() + SA_HOOK_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
    const char *path = cfg->socket;
    const char *event_name = sa_vm_event_to_string(event);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};

    if (path == NULL || path[0] == '\0')
        return;
    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_warning("[daemon] socket=%s in %s is longer than %zu bytes; softaffd not notified", path,
                  config_name(cfg), sizeof(addr.sun_path) - 1);
        return;
    }
    memcpy(addr.sun_path, path, strlen(path) + 1);

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        g_warning("cannot create a socket to notify softaffd: %s", g_strerror(errno));
        return;
    }

    SaControlRequest req = {
        .command = SA_CONTROL_VM_EVENT,
        .domain = (char *)domain,
        .uuid = (char *)uuid,
        .event = event,
    };
    g_autofree char *line = sa_control_request_format(&req);
    bool timed_out = false;
    g_autofree char *reply = NULL;

    switch (connect_daemon(fd, &addr, path, deadline)) {
    case CONNECT_NO_DAEMON:
        g_debug("softaffd is not running (no listener on %s); not notified", path);
        goto out;
    case CONNECT_FAILED:
        goto out;
    case CONNECT_OK:
        break;
    }
    if (!send_all(fd, line, strlen(line), deadline)) {
        g_warning("domain '%s': cannot send the %s event to softaffd on %s: %s", domain, event_name,
                  path, ms_left(deadline) == 0 ? "timed out" : g_strerror(errno));
        goto out;
    }
    reply = read_reply(fd, deadline, &timed_out);
    if (reply == NULL)
        g_warning("domain '%s': softaffd on %s did not answer the %s event %s", domain, path,
                  event_name,
                  timed_out ? "within " G_STRINGIFY(SA_HOOK_TIMEOUT_MS) " ms" : "(read error)");
    else
        check_reply(reply, event_name, domain, path);
out:
    close(fd);
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
