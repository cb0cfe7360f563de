/* softaffd — the control socket: one JSON request per connection, one JSON reply.
 *
 * Nothing here waits: requests are read and replies written without blocking, as the socket
 * takes them, between the ticks of the main loop. A peer that does not send its whole request,
 * or take its whole reply, within its deadline is dropped. */
#define G_LOG_DOMAIN "softaffd"

#include "control-server.h"
#include "loop-watch.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <json-c/json.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core-private.h"
#include "sa-error.h"

/* From the connection to the request's newline, then from the reply being ready to its last
 * byte taken: a reply of megabytes (status at thousands of VMs) needs a few seconds. */
#define REQUEST_DEADLINE_MS 2000
#define REPLY_DEADLINE_MS 5000
/* Anyone may connect while fewer than OPEN_SLOTS clients are; root has ROOT_SLOTS more, so
 * local users holding connections cannot keep out the hook's vm-event or a reload. */
#define OPEN_SLOTS 15
#define ROOT_SLOTS 5
/* Connections accepted per wake-up: a burst is taken in one go, the loop still turns. */
#define ACCEPT_BATCH 16
/* Out of descriptors, the listening socket stays readable: it is not watched for this long. */
#define ACCEPT_BACKOFF_MS 250

typedef struct {
    SaControl *control;
    int fd;
    uid_t uid;
    pid_t pid;
    GString *in;
    char *out; /* the reply, once there is one */
    gsize out_len, out_off;
    guint watch;
    guint deadline;
} Client;

struct SaControl {
    SaCore *core;
    char *path;
    int fd;
    guint watch;    /* the listening socket; 0 while backing off */
    guint backoff;  /* the timeout that watches it again */
    bool exhausted; /* accept ran out of descriptors (logged once until it works again) */
    GList *clients;
    guint n_clients;
    SaControlActionFunc action;
    gpointer action_data;
};

typedef enum { FLUSH_DONE, FLUSH_AGAIN, FLUSH_FAILED } FlushResult;

static char *error_reply(const char *message)
{
    return sa_core_error_json(message);
}

static void client_free(Client *c)
{
    if (c->watch)
        g_source_remove(c->watch);
    if (c->deadline)
        g_source_remove(c->deadline);
    if (c->fd >= 0)
        close(c->fd);
    g_string_free(c->in, TRUE);
    g_free(c->out);
    c->control->clients = g_list_remove(c->control->clients, c);
    c->control->n_clients--;
    g_free(c);
}

/* One line per dropped peer: who, and why. */
static void client_drop(Client *c, const char *why)
{
    g_info("control socket: dropped the client of uid %u (pid %d): %s", (unsigned)c->uid,
           (int)c->pid, why);
    client_free(c);
}

/* Sends what the socket takes of the reply now. */
static FlushResult client_flush(Client *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return FLUSH_AGAIN;
        if (n <= 0)
            return FLUSH_FAILED;
        c->out_off += (gsize)n;
    }
    return FLUSH_DONE;
}

static gboolean client_writable(int fd, GIOCondition cond, gpointer data)
{
    Client *c = data;
    FlushResult r = client_flush(c);
    if (r == FLUSH_AGAIN)
        return G_SOURCE_CONTINUE;
    c->watch = 0;
    if (r == FLUSH_FAILED)
        g_debug("control socket: the client of pid %d left before its whole reply (%s)",
                (int)c->pid, g_strerror(errno));
    client_free(c);
    return G_SOURCE_REMOVE;
}

static gboolean reply_deadline_cb(gpointer data)
{
    Client *c = data;
    c->deadline = 0;
    g_autofree char *why = g_strdup_printf("took %zu of its %zu-byte reply in %d ms", c->out_off,
                                           c->out_len, REPLY_DEADLINE_MS);
    client_drop(c, why);
    return G_SOURCE_REMOVE;
}

/* Takes reply: written as the peer reads it, within REPLY_DEADLINE_MS; no more is read. */
static void client_reply(Client *c, char *reply)
{
    if (c->watch)
        g_source_remove(c->watch);
    c->watch = 0;
    if (c->deadline)
        g_source_remove(c->deadline);
    c->deadline = 0;
    c->out = reply;
    c->out_len = strlen(reply);
    FlushResult r = client_flush(c);
    if (r != FLUSH_AGAIN) {
        client_free(c);
        return;
    }
    c->watch = g_unix_fd_add(c->fd, G_IO_OUT, client_writable, c);
    c->deadline = g_timeout_add(REPLY_DEADLINE_MS, reply_deadline_cb, c);
}

static char *handle(SaControl *ctl, Client *c)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaControlRequest) req = sa_control_request_parse(c->in->str, c->in->len, &error);
    if (!req)
        return error_reply(error->message);
    if (sa_control_command_needs_root(req->command) && c->uid != 0) {
        g_autofree char *msg =
            g_strdup_printf("command \"%s\" needs root (peer uid %u)",
                            sa_control_command_to_string(req->command), (unsigned)c->uid);
        return error_reply(msg);
    }
    switch (req->command) {
    case SA_CONTROL_STATUS:
        return sa_core_status_json(ctl->core);
    case SA_CONTROL_HEADROOM:
        return sa_core_headroom_reply(ctl->core);
    case SA_CONTROL_SHOW: {
        char *reply = sa_core_show_json(ctl->core, req->domain, &error);
        return reply ? reply : error_reply(error->message);
    }
    case SA_CONTROL_VM_EVENT:
    case SA_CONTROL_RELOAD:
        if (!ctl->action || !ctl->action(req, ctl->action_data, &error))
            return error_reply(error ? error->message : "not supported by this daemon");
        return g_strdup("{\"ok\":true}\n");
    }
    return error_reply("unknown command");
}

/* A short error line, sent only if the socket takes it at once: the peer is going anyway. */
static void send_last_words(int fd, const char *message)
{
    g_autofree char *reply = error_reply(message);
    if (send(fd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        g_debug("control socket: could not tell a peer \"%s\": %s", message, g_strerror(errno));
}

static gboolean request_deadline_cb(gpointer data)
{
    Client *c = data;
    c->deadline = 0;
    g_autofree char *why = g_strdup_printf("no complete request within %d ms (%zu bytes)",
                                           REQUEST_DEADLINE_MS, c->in->len);
    g_autofree char *message =
        g_strdup_printf("request not complete within %d ms", REQUEST_DEADLINE_MS);
    send_last_words(c->fd, message);
    client_drop(c, why);
    return G_SOURCE_REMOVE;
}

static gboolean client_readable(int fd, GIOCondition cond, gpointer data)
{
    Client *c = data;
    char chunk[4096];
    ssize_t n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return G_SOURCE_CONTINUE;
    bool eof = n <= 0;
    if (n > 0)
        g_string_append_len(c->in, chunk, n);
    const char *nl = memchr(c->in->str, '\n', c->in->len);
    if (!nl && c->in->len > SA_CONTROL_MAX_REQUEST) {
        c->watch = 0;
        client_reply(c, error_reply("request larger than 65536 bytes"));
        return G_SOURCE_REMOVE;
    }
    if (!nl && !eof)
        return G_SOURCE_CONTINUE;
    if (nl)
        g_string_truncate(c->in, (gsize)(nl - c->in->str));
    c->watch = 0;
    if (c->in->len > 0) {
        sa_loop_watch_step("a control request (status, show, reload, vm-event)");
        client_reply(c, handle(c->control, c));
        sa_loop_watch_step(NULL);
    } else {
        client_free(c);
    }
    return G_SOURCE_REMOVE;
}

/* Takes cfd; refused with an error line when the peer's slots are taken. */
static void admit(SaControl *ctl, int cfd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        close(cfd);
        return;
    }
    guint slots = cred.uid == 0 ? OPEN_SLOTS + ROOT_SLOTS : OPEN_SLOTS;
    if (ctl->n_clients >= slots) {
        g_debug("control socket: refused uid %u (pid %d): %u clients connected", (unsigned)cred.uid,
                (int)cred.pid, ctl->n_clients);
        send_last_words(cfd, "too many clients, try again");
        close(cfd);
        return;
    }
    Client *c = g_new0(Client, 1);
    c->control = ctl;
    c->fd = cfd;
    c->uid = cred.uid;
    c->pid = cred.pid;
    c->in = g_string_new(NULL);
    c->watch = g_unix_fd_add(cfd, G_IO_IN | G_IO_HUP | G_IO_ERR, client_readable, c);
    c->deadline = g_timeout_add(REQUEST_DEADLINE_MS, request_deadline_cb, c);
    ctl->clients = g_list_prepend(ctl->clients, c);
    ctl->n_clients++;
}

static gboolean accept_cb(int fd, GIOCondition cond, gpointer data);

static gboolean resume_accepting(gpointer data)
{
    SaControl *ctl = data;
    ctl->backoff = 0;
    ctl->watch = g_unix_fd_add(ctl->fd, G_IO_IN, accept_cb, ctl);
    return G_SOURCE_REMOVE;
}

/* Out of descriptors (or memory): the pending connection stays queued and the socket readable,
 * so it is left alone for a while instead of waking the loop again and again. */
static void pause_accepting(SaControl *ctl, int err)
{
    if (!ctl->exhausted)
        g_warning("control socket %s: cannot accept a connection: %s; trying again every %d ms",
                  ctl->path, g_strerror(err), ACCEPT_BACKOFF_MS);
    ctl->exhausted = true;
    ctl->watch = 0;
    ctl->backoff = g_timeout_add(ACCEPT_BACKOFF_MS, resume_accepting, ctl);
}

static gboolean accept_cb(int fd, GIOCondition cond, gpointer data)
{
    SaControl *ctl = data;
    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0 && errno == EINTR)
            continue;
        if (cfd < 0 &&
            (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)) {
            pause_accepting(ctl, errno);
            return G_SOURCE_REMOVE;
        }
        if (cfd < 0)
            break; /* EAGAIN: all taken; ECONNABORTED: that peer left */
        if (ctl->exhausted)
            g_info("control socket %s: accepting connections again", ctl->path);
        ctl->exhausted = false;
        admit(ctl, cfd);
    }
    return G_SOURCE_CONTINUE;
}

SaControl *sa_control_new(SaCore *core, const char *path, SaControlActionFunc action,
                          gpointer user_data, GError **error)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "control socket path %s is too long", path);
        return NULL;
    }
    g_autofree char *dir = g_path_get_dirname(path);
    if (g_mkdir_with_parents(dir, 0755) < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot create %s: %s", dir, g_strerror(errno));
        return NULL;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "socket: %s", g_strerror(errno));
        return NULL;
    }
    /* A socket file nobody answers on is stale; one that answers belongs to a running daemon. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
        close(probe);
        close(fd);
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "another softaffd is already listening on %s",
                    path);
        return NULL;
    }
    if (probe >= 0)
        close(probe);
    unlink(path);
    mode_t old = umask(0);
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
    umask(old);
    if (rc < 0 || listen(fd, 16) < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot listen on %s: %s", path,
                    g_strerror(errno));
        close(fd);
        return NULL;
    }
    chmod(path, 0666);
    SaControl *ctl = g_new0(SaControl, 1);
    ctl->core = core;
    ctl->path = g_strdup(path);
    ctl->fd = fd;
    ctl->action = action;
    ctl->action_data = user_data;
    ctl->watch = g_unix_fd_add(fd, G_IO_IN, accept_cb, ctl);
    return ctl;
}

void sa_control_free(SaControl *ctl)
{
    if (!ctl)
        return;
    while (ctl->clients)
        client_free(ctl->clients->data);
    if (ctl->watch)
        g_source_remove(ctl->watch);
    if (ctl->backoff)
        g_source_remove(ctl->backoff);
    close(ctl->fd);
    unlink(ctl->path);
    g_free(ctl->path);
    g_free(ctl);
}
