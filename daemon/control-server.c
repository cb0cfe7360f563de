/* softaffd — the control socket: one JSON request per connection, one JSON reply. */
#define G_LOG_DOMAIN "softaffd"

#include "control-server.h"

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

#define CLIENT_TIMEOUT_MS 2000
#define MAX_CLIENTS 16

typedef struct {
    SaControl *control;
    int fd;
    uid_t uid;
    pid_t pid;
    GString *buf;
    guint watch;
    guint timeout;
} Client;

struct SaControl {
    SaCore *core;
    char *path;
    int fd;
    guint watch;
    GList *clients;
    SaControlActionFunc action;
    gpointer action_data;
};

static char *error_reply(const char *message)
{
    return sa_core_error_json(message);
}

static void client_free(Client *c)
{
    if (c->watch)
        g_source_remove(c->watch);
    if (c->timeout)
        g_source_remove(c->timeout);
    if (c->fd >= 0)
        close(c->fd);
    g_string_free(c->buf, TRUE);
    c->control->clients = g_list_remove(c->control->clients, c);
    g_free(c);
}

static void send_reply(Client *c, const char *reply)
{
    /* The reply is written in one go; a peer that does not read gets cut off by the timeout. */
    int flags = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, flags & ~O_NONBLOCK);
    struct timeval tv = {.tv_sec = 2};
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    gsize len = strlen(reply), off = 0;
    while (off < len) {
        ssize_t n = send(c->fd, reply + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (gsize)n;
    }
}

static char *handle(SaControl *ctl, Client *c)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaControlRequest) req = sa_control_request_parse(c->buf->str, c->buf->len, &error);
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

static gboolean client_timeout(gpointer data)
{
    Client *c = data;
    c->timeout = 0;
    g_autofree char *reply = error_reply("request not complete within 2 s");
    send_reply(c, reply);
    client_free(c);
    return G_SOURCE_REMOVE;
}

static gboolean client_readable(int fd, GIOCondition cond, gpointer data)
{
    Client *c = data;
    char chunk[4096];
    ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return G_SOURCE_CONTINUE;
    bool eof = n <= 0;
    if (n > 0)
        g_string_append_len(c->buf, chunk, n);
    const char *nl = memchr(c->buf->str, '\n', c->buf->len);
    if (!nl && c->buf->len > SA_CONTROL_MAX_REQUEST) {
        c->watch = 0;
        g_autofree char *reply = error_reply("request larger than 65536 bytes");
        send_reply(c, reply);
        client_free(c);
        return G_SOURCE_REMOVE;
    }
    if (!nl && !eof)
        return G_SOURCE_CONTINUE;
    if (nl)
        g_string_truncate(c->buf, (gsize)(nl - c->buf->str));
    c->watch = 0;
    if (c->buf->len > 0) {
        g_autofree char *reply = handle(c->control, c);
        send_reply(c, reply);
    }
    client_free(c);
    return G_SOURCE_REMOVE;
}

static gboolean accept_cb(int fd, GIOCondition cond, gpointer data)
{
    SaControl *ctl = data;
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0)
        return G_SOURCE_CONTINUE;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    if (g_list_length(ctl->clients) >= MAX_CLIENTS) {
        g_autofree char *reply = error_reply("too many clients, try again");
        send(cfd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    Client *c = g_new0(Client, 1);
    c->control = ctl;
    c->fd = cfd;
    c->uid = cred.uid;
    c->pid = cred.pid;
    c->buf = g_string_new(NULL);
    c->watch = g_unix_fd_add(cfd, G_IO_IN | G_IO_HUP | G_IO_ERR, client_readable, c);
    c->timeout = g_timeout_add(CLIENT_TIMEOUT_MS, client_timeout, c);
    ctl->clients = g_list_prepend(ctl->clients, c);
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
    close(ctl->fd);
    unlink(ctl->path);
    g_free(ctl->path);
    g_free(ctl);
}
