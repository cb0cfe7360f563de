/* softaff — the QMP client: a non-blocking Unix-socket session inside the GLib main loop.
 *
 * greeting -> qmp_capabilities -> ready; then commands carry an integer "id" and replies are
 * matched by it (a reply without id, which QEMU sends when it could not even read the
 * command's id, goes to the oldest command: QMP answers in order). Events may arrive between
 * replies at any time. Writes never happen inside sa_qmp_client_execute(): they wait for the
 * socket to be writable, so no user callback runs from inside a call into the client. */
#define G_LOG_DOMAIN "softaff-qmp"

#include "sa-qmp.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sa-error.h"

#define READ_CHUNK 4096

typedef enum {
    STATE_GREETING,
    STATE_NEGOTIATING,
    STATE_READY,
    STATE_CLOSED,
} State;

typedef struct {
    gint64 id;
    char *command;
    char *text; /* the serialized request, until it is handed to the output buffer */
    SaQmpReplyFunc callback;
    gpointer user_data;
} Pending;

struct SaQmpClient {
    gint ref;
    int fd;
    State state;
    SaQmpHandlers handlers;
    gpointer user_data;
    SaQmpParser *parser;
    GByteArray *out;
    guint read_source;
    guint write_source;
    guint timeout_source;
    GQueue *queued; /* Pending*: waiting for the session to be ready */
    GQueue *sent;   /* Pending*: in the output buffer or on the wire, waiting for a reply */
    gint64 next_id;
    json_object *greeting;
    pid_t peer_pid;
};

static void pending_free(Pending *p)
{
    if (!p)
        return;
    g_free(p->command);
    g_free(p->text);
    g_free(p);
}

static void update_write_watch(SaQmpClient *c);

SaQmpClient *sa_qmp_client_ref(SaQmpClient *c)
{
    g_atomic_int_inc(&c->ref);
    return c;
}

static void remove_sources(SaQmpClient *c)
{
    if (c->read_source)
        g_source_remove(c->read_source);
    if (c->write_source)
        g_source_remove(c->write_source);
    if (c->timeout_source)
        g_source_remove(c->timeout_source);
    c->read_source = c->write_source = c->timeout_source = 0;
}

void sa_qmp_client_unref(SaQmpClient *c)
{
    if (!c || !g_atomic_int_dec_and_test(&c->ref))
        return;
    remove_sources(c);
    if (c->fd >= 0)
        close(c->fd);
    g_queue_free_full(c->queued, (GDestroyNotify)pending_free);
    g_queue_free_full(c->sent, (GDestroyNotify)pending_free);
    sa_qmp_parser_free(c->parser);
    g_byte_array_unref(c->out);
    json_object_put(c->greeting);
    g_free(c);
}

/* Fails every command, then tells the owner. Idempotent. */
static void close_with(SaQmpClient *c, const GError *why)
{
    if (c->state == STATE_CLOSED)
        return;
    sa_qmp_client_ref(c);
    c->state = STATE_CLOSED;
    remove_sources(c);
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    g_byte_array_set_size(c->out, 0);
    Pending *p;
    while ((p = g_queue_pop_head(c->sent)) || (p = g_queue_pop_head(c->queued))) {
        if (p->callback) {
            g_autoptr(GError) e = g_error_new(SA_ERROR, SA_ERROR_GONE, "QMP command %s: %s",
                                              p->command, why->message);
            p->callback(c, NULL, e, p->user_data);
        }
        pending_free(p);
    }
    if (c->handlers.closed)
        c->handlers.closed(c, why, c->user_data);
    sa_qmp_client_unref(c);
}

static void close_error(SaQmpClient *c, SaErrorCode code, const char *fmt, ...) G_GNUC_PRINTF(3, 4);

static void close_error(SaQmpClient *c, SaErrorCode code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_autoptr(GError) e = g_error_new_literal(SA_ERROR, code, text);
    close_with(c, e);
}

void sa_qmp_client_close(SaQmpClient *c, const GError *error)
{
    if (error) {
        close_with(c, error);
        return;
    }
    close_error(c, SA_ERROR_GONE, "connection closed by the client");
}

/* ---- sending ------------------------------------------------------------------------------ */

static Pending *pending_new(SaQmpClient *c, const char *command, json_object *arguments,
                            SaQmpReplyFunc callback, gpointer user_data)
{
    Pending *p = g_new0(Pending, 1);
    p->id = c->next_id++;
    p->command = g_strdup(command);
    p->callback = callback;
    p->user_data = user_data;
    json_object *req = json_object_new_object();
    json_object_object_add(req, "execute", json_object_new_string(command));
    if (arguments)
        json_object_object_add(req, "arguments", arguments);
    json_object_object_add(req, "id", json_object_new_int64(p->id));
    p->text =
        g_strdup_printf("%s\r\n", json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN));
    json_object_put(req);
    return p;
}

/* Moves a request into the output buffer and waits for its reply. */
static void send_pending(SaQmpClient *c, Pending *p)
{
    g_byte_array_append(c->out, (const guint8 *)p->text, (guint)strlen(p->text));
    g_clear_pointer(&p->text, g_free);
    g_queue_push_tail(c->sent, p);
    update_write_watch(c);
}

static gboolean on_writable(int fd, GIOCondition cond, gpointer data)
{
    SaQmpClient *c = data;
    while (c->out->len > 0) {
        ssize_t n = send(c->fd, c->out->data, c->out->len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return G_SOURCE_CONTINUE;
        if (n < 0) {
            int e = errno;
            c->write_source = 0; /* removed by our return value, not by close */
            close_error(c, e == EPIPE || e == ECONNRESET ? SA_ERROR_GONE : SA_ERROR_IO,
                        "writing to the QMP socket: %s", g_strerror(e));
            return G_SOURCE_REMOVE;
        }
        g_byte_array_remove_range(c->out, 0, (guint)n);
    }
    c->write_source = 0;
    return G_SOURCE_REMOVE;
}

static void update_write_watch(SaQmpClient *c)
{
    if (c->state == STATE_CLOSED || c->out->len == 0 || c->write_source)
        return;
    c->write_source = g_unix_fd_add(c->fd, G_IO_OUT, on_writable, c);
}

typedef struct {
    SaQmpClient *c;
    char *command;
    SaQmpReplyFunc callback;
    gpointer user_data;
} LateFailure;

static gboolean fail_late(gpointer data)
{
    LateFailure *lf = data;
    g_autoptr(GError) e = g_error_new(SA_ERROR, SA_ERROR_GONE,
                                      "QMP command %s: the connection is closed", lf->command);
    lf->callback(lf->c, NULL, e, lf->user_data);
    sa_qmp_client_unref(lf->c);
    g_free(lf->command);
    g_free(lf);
    return G_SOURCE_REMOVE;
}

void sa_qmp_client_execute(SaQmpClient *c, const char *command, json_object *arguments,
                           SaQmpReplyFunc callback, gpointer user_data)
{
    g_return_if_fail(c != NULL && command != NULL);
    if (c->state == STATE_CLOSED) {
        json_object_put(arguments);
        if (callback) {
            LateFailure *lf = g_new0(LateFailure, 1);
            lf->c = sa_qmp_client_ref(c);
            lf->command = g_strdup(command);
            lf->callback = callback;
            lf->user_data = user_data;
            g_idle_add(fail_late, lf);
        }
        return;
    }
    Pending *p = pending_new(c, command, arguments, callback, user_data);
    if (c->state == STATE_READY)
        send_pending(c, p);
    else
        g_queue_push_tail(c->queued, p);
}

/* ---- receiving ---------------------------------------------------------------------------- */

static void capabilities_done(SaQmpClient *c, json_object *result, const GError *error,
                              gpointer user_data)
{
    if (error) {
        if (c->state != STATE_CLOSED)
            close_error(c, SA_ERROR_IO, "QMP capabilities negotiation failed: %s", error->message);
        return;
    }
    c->state = STATE_READY;
    if (c->timeout_source) {
        g_source_remove(c->timeout_source);
        c->timeout_source = 0;
    }
    Pending *p;
    while ((p = g_queue_pop_head(c->queued)))
        send_pending(c, p);
    if (c->handlers.ready)
        c->handlers.ready(c, c->user_data);
}

static Pending *take_pending(SaQmpClient *c, json_object *id)
{
    if (!id)
        return g_queue_pop_head(c->sent);
    if (!json_object_is_type(id, json_type_int))
        return NULL;
    gint64 want = json_object_get_int64(id);
    for (GList *l = c->sent->head; l; l = l->next) {
        Pending *p = l->data;
        if (p->id == want) {
            g_queue_delete_link(c->sent, l);
            return p;
        }
    }
    return NULL;
}

static void handle_message(SaQmpClient *c, SaQmpMessage *msg)
{
    switch (msg->kind) {
    case SA_QMP_MSG_GREETING: {
        if (c->state != STATE_GREETING) {
            close_error(c, SA_ERROR_PARSE, "unexpected second QMP greeting");
            return;
        }
        c->greeting = json_object_get(msg->body);
        c->state = STATE_NEGOTIATING;
        send_pending(c, pending_new(c, "qmp_capabilities", NULL, capabilities_done, NULL));
        return;
    }
    case SA_QMP_MSG_RETURN:
    case SA_QMP_MSG_ERROR: {
        if (c->state == STATE_GREETING) {
            close_error(c, SA_ERROR_PARSE, "QMP peer sent a %s before its greeting",
                        sa_qmp_message_kind_to_string(msg->kind));
            return;
        }
        Pending *p = take_pending(c, msg->id);
        if (!p) {
            g_autofree char *id = g_strdup(msg->id ? json_object_to_json_string(msg->id) : "none");
            g_debug("QMP %s for an unknown command (id %s) ignored",
                    sa_qmp_message_kind_to_string(msg->kind), id);
            return;
        }
        if (p->callback) {
            if (msg->kind == SA_QMP_MSG_RETURN) {
                p->callback(c, msg->body, NULL, p->user_data);
            } else {
                SaErrorCode code = g_strcmp0(msg->error_class, "CommandNotFound") == 0
                                       ? SA_ERROR_UNSUPPORTED
                                       : SA_ERROR_IO;
                g_autoptr(GError) e = g_error_new(SA_ERROR, code, "QMP command %s failed: %s: %s",
                                                  p->command, msg->error_class, msg->error_desc);
                p->callback(c, NULL, e, p->user_data);
            }
        }
        pending_free(p);
        return;
    }
    case SA_QMP_MSG_EVENT:
        if (c->handlers.event)
            c->handlers.event(c, msg->event, msg->body, c->user_data);
        return;
    }
}

static gboolean on_readable(int fd, GIOCondition cond, gpointer data)
{
    SaQmpClient *c = data;
    sa_qmp_client_ref(c);
    char buf[READ_CHUNK];
    bool eof = false;
    while (c->state != STATE_CLOSED) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n < 0) {
            close_error(c, errno == ECONNRESET ? SA_ERROR_GONE : SA_ERROR_IO,
                        "reading from the QMP socket: %s", g_strerror(errno));
            break;
        }
        if (n == 0) {
            eof = true;
            break;
        }
        sa_qmp_parser_feed(c->parser, buf, (gsize)n);
        /* Hand out what is complete before reading more: a flood cannot grow the buffer. */
        while (c->state != STATE_CLOSED) {
            g_autoptr(GError) error = NULL;
            g_autoptr(SaQmpMessage) msg = sa_qmp_parser_next(c->parser, &error);
            if (!msg) {
                if (error)
                    close_with(c, error);
                break;
            }
            handle_message(c, msg);
        }
    }
    if (eof && c->state != STATE_CLOSED) {
        gsize left = sa_qmp_parser_pending(c->parser);
        if (left > 0)
            close_error(
                c, SA_ERROR_GONE,
                "the QMP peer closed the connection in the middle of a message (%" G_GSIZE_FORMAT
                " bytes unread)",
                left);
        else
            close_error(c, SA_ERROR_GONE, "the QMP peer closed the connection");
    }
    gboolean keep = c->state != STATE_CLOSED;
    if (!keep)
        c->read_source = 0;
    sa_qmp_client_unref(c);
    return keep ? G_SOURCE_CONTINUE : G_SOURCE_REMOVE;
}

static gboolean on_greeting_timeout(gpointer data)
{
    SaQmpClient *c = data;
    c->timeout_source = 0;
    close_error(c, SA_ERROR_TRANSIENT,
                "no QMP %s within the time limit (is another client connected to this socket?)",
                c->state == STATE_GREETING ? "greeting" : "capabilities reply");
    return G_SOURCE_REMOVE;
}

/* ---- construction ------------------------------------------------------------------------- */

SaQmpClient *sa_qmp_client_new_fd(int fd, const SaQmpHandlers *handlers, gpointer user_data)
{
    SaQmpClient *c = g_new0(SaQmpClient, 1);
    c->ref = 1;
    c->fd = fd;
    c->state = STATE_GREETING;
    if (handlers)
        c->handlers = *handlers;
    c->user_data = user_data;
    c->parser = sa_qmp_parser_new(SA_QMP_DEFAULT_MAX_MESSAGE);
    c->out = g_byte_array_new();
    c->queued = g_queue_new();
    c->sent = g_queue_new();
    c->next_id = 1;
    c->peer_pid = -1;
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0)
        fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof(cred) &&
        cred.pid > 0)
        c->peer_pid = cred.pid;
    c->read_source = g_unix_fd_add(fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_readable, c);
    return c;
}

SaQmpClient *sa_qmp_client_connect(const char *path, const SaQmpHandlers *handlers,
                                   gpointer user_data, GError **error)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE, "%s: longer than %zu bytes (socket limit)",
                    path, sizeof(addr.sun_path) - 1);
        return NULL;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "socket: %s", g_strerror(errno));
        return NULL;
    }
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        int e = errno;
        close(fd);
        SaErrorCode code = SA_ERROR_IO;
        if (e == ENOENT || e == ECONNREFUSED)
            code = SA_ERROR_NOT_FOUND;
        else if (e == EAGAIN || e == EINPROGRESS)
            code = SA_ERROR_TRANSIENT;
        g_set_error(error, SA_ERROR, code, "connecting to %s: %s", path, g_strerror(e));
        return NULL;
    }
    return sa_qmp_client_new_fd(fd, handlers, user_data);
}

void sa_qmp_client_set_max_message(SaQmpClient *c, gsize max_message)
{
    sa_qmp_parser_free(c->parser);
    c->parser = sa_qmp_parser_new(max_message);
}

void sa_qmp_client_set_greeting_timeout(SaQmpClient *c, guint timeout_ms)
{
    if (c->timeout_source) {
        g_source_remove(c->timeout_source);
        c->timeout_source = 0;
    }
    if (timeout_ms > 0 && c->state != STATE_READY && c->state != STATE_CLOSED)
        c->timeout_source = g_timeout_add(timeout_ms, on_greeting_timeout, c);
}

bool sa_qmp_client_is_ready(const SaQmpClient *c)
{
    return c->state == STATE_READY;
}

bool sa_qmp_client_is_closed(const SaQmpClient *c)
{
    return c->state == STATE_CLOSED;
}

json_object *sa_qmp_client_get_greeting(const SaQmpClient *c)
{
    return c->greeting;
}

pid_t sa_qmp_client_get_peer_pid(const SaQmpClient *c)
{
    return c->peer_pid;
}

int sa_qmp_client_get_fd(const SaQmpClient *c)
{
    return c->fd;
}
