/* softaff — the control-socket client: a non-blocking connect, the request line sent, the reply
 * line read, each step waiting in poll() for what is left of the caller's one deadline. */
#define G_LOG_DOMAIN "softaff-control"

#include "sa-control-client.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control-json.h"

/* How long a connect waits before it tries again when the daemon's listen queue is full. */
#define CONNECT_RETRY_US 1000
/* A bad reply is quoted up to this many bytes. */
#define QUOTE_MAX 200

G_DEFINE_QUARK(sa - control - client - error - quark, sa_control_client_error)

/* One request and its reply. */
typedef struct {
    const char *path;
    char *what; /* "the status request", "the started event" */
    gint64 start;
    gint64 deadline;
    int fd;
} Exchange;

static char *describe(const SaControlRequest *req)
{
    if (req->command == SA_CONTROL_VM_EVENT)
        return g_strdup_printf("the %s event", sa_vm_event_to_string(req->event));
    return g_strdup_printf("the %s request", sa_control_command_to_string(req->command));
}

/* Milliseconds to the deadline, rounded up (poll() must not wake before it); 0 once passed. */
static int ms_left(gint64 deadline)
{
    gint64 left = deadline - g_get_monotonic_time();
    if (left <= 0)
        return 0;
    return (int)MIN((left + 999) / 1000, G_MAXINT);
}

/* The time this exchange was given, for messages. */
static int ms_given(const Exchange *x)
{
    return (int)MAX((x->deadline - x->start + 500) / 1000, 0);
}

/* Waits until fd is ready for events: 1 ready, 0 the deadline passed, -1 an error (errno). */
static int wait_fd(int fd, short events, gint64 deadline)
{
    for (;;) {
        int timeout = ms_left(deadline);
        if (timeout == 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int rc = poll(&p, 1, timeout);
        if (rc > 0)
            return 1;
        if (rc < 0 && errno != EINTR)
            return -1;
    }
}

static void set_timed_out(const Exchange *x, const char *doing, GError **error)
{
    g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_TIMED_OUT,
                "softaffd on %s did not %s %s within %d ms", x->path, doing, x->what, ms_given(x));
}

static bool connect_error(const Exchange *x, int err, GError **error)
{
    if (err == ENOENT)
        g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_NO_DAEMON,
                    "softaffd is not running: there is no socket %s", x->path);
    else if (err == ECONNREFUSED)
        g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_NO_DAEMON,
                    "softaffd is not running: nobody listens on %s", x->path);
    else
        g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_CONNECT,
                    "cannot connect to softaffd on %s: %s", x->path, g_strerror(err));
    return false;
}

/* The end of a connect that returned EINPROGRESS: 0 connected, else an errno value
 * (ETIMEDOUT when the deadline passed). */
static int finish_connect(const Exchange *x)
{
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    int ready = wait_fd(x->fd, POLLOUT, x->deadline);

    if (ready == 0)
        return ETIMEDOUT;
    if (ready < 0 || getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &so_error, &len) < 0)
        return errno;
    return so_error;
}

static bool open_socket(Exchange *x, struct sockaddr_un *addr, GError **error)
{
    gsize len = strlen(x->path);

    if (len == 0 || len >= sizeof(addr->sun_path)) {
        g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_FAILED,
                    "the control socket path \"%s\" is empty or longer than %zu bytes", x->path,
                    sizeof(addr->sun_path) - 1);
        return false;
    }
    memcpy(addr->sun_path, x->path, len + 1);
    x->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (x->fd < 0) {
        g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_FAILED,
                    "cannot create a socket to reach softaffd on %s: %s", x->path,
                    g_strerror(errno));
        return false;
    }
    return true;
}

/* A full listen queue (EAGAIN) means a busy daemon: try again until the deadline. */
static bool connect_daemon(Exchange *x, GError **error)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};

    if (!open_socket(x, &addr, error))
        return false;
    for (;;) {
        if (connect(x->fd, (const struct sockaddr *)&addr, sizeof(addr)) == 0)
            return true;
        int err = errno;
        if (err == EINTR)
            continue;
        if (err == EAGAIN) {
            gint64 left = x->deadline - g_get_monotonic_time();
            if (left <= 0)
                break;
            g_usleep((gulong)MIN(left, CONNECT_RETRY_US));
            continue;
        }
        if (err == EINPROGRESS)
            err = finish_connect(x);
        if (err == 0)
            return true;
        if (err != ETIMEDOUT)
            return connect_error(x, err, error);
        break;
    }
    set_timed_out(x, "accept the connection for", error);
    return false;
}

/* After send() or recv() failed with err: true to try again (EINTR, or EAGAIN and the socket
 * became ready before the deadline); false with the error set. */
static bool may_retry(const Exchange *x, int err, short events, GError **error)
{
    const char *doing = events == POLLOUT ? "send" : "read the answer to";

    if (err == EINTR)
        return true;
    if (err == EAGAIN) {
        int ready = wait_fd(x->fd, events, x->deadline);
        if (ready > 0)
            return true;
        if (ready == 0) {
            set_timed_out(x, events == POLLOUT ? "read" : "answer", error);
            return false;
        }
        err = errno;
    }
    g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_FAILED,
                "softaffd on %s: cannot %s %s: %s", x->path, doing, x->what, g_strerror(err));
    return false;
}

static bool send_request(const Exchange *x, const char *line, GError **error)
{
    gsize len = strlen(line);
    gsize done = 0;

    while (done < len) {
        ssize_t n = send(x->fd, line + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0)
            done += (gsize)n;
        else if (!may_retry(x, errno, POLLOUT, error))
            return false;
    }
    return true;
}

/* Whether buf holds the whole reply line; its length (newline excluded) in *line_len. */
static bool line_complete(const GString *buf, gsize *line_len)
{
    const char *nl = memchr(buf->str, '\n', buf->len);

    *line_len = nl != NULL ? (gsize)(nl - buf->str) : buf->len;
    return nl != NULL;
}

/* One recv() into buf: 1 data, 0 the peer closed, -1 an error (errno). */
static int receive_some(int fd, GString *buf)
{
    char chunk[16 * 1024];
    ssize_t n = recv(fd, chunk, sizeof(chunk), 0);

    if (n > 0)
        g_string_append_len(buf, chunk, n);
    return n > 0 ? 1 : (int)n;
}

/* Reads until a newline, the peer's close, more than max_reply bytes, or the deadline; the line
 * without its newline, its length in *len. */
static char *read_reply(const Exchange *x, gsize max_reply, gsize *len, GError **error)
{
    g_autoptr(GString) buf = g_string_new(NULL);
    bool complete = false;

    while (!(complete = line_complete(buf, len)) && *len <= max_reply) {
        if (ms_left(x->deadline) == 0) {
            /* Also when data keeps coming: a reply is due by the deadline. */
            set_timed_out(x, "answer", error);
            return NULL;
        }
        int got = receive_some(x->fd, buf);
        if (got == 0)
            break;
        if (got < 0 && !may_retry(x, errno, POLLIN, error))
            return NULL;
    }
    if (*len > max_reply) {
        g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_BAD_REPLY,
                    "softaffd on %s answered %s with more than %" G_GSIZE_FORMAT " bytes", x->path,
                    x->what, max_reply);
        return NULL;
    }
    if (!complete && *len == 0) {
        g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_BAD_REPLY,
                    "softaffd on %s closed the connection without answering %s", x->path, x->what);
        return NULL;
    }
    g_string_truncate(buf, *len);
    return g_string_free(g_steal_pointer(&buf), FALSE);
}

static void set_bad_reply(const char *line, gsize len, const char *path, const char *what,
                          const char *problem, GError **error)
{
    g_autofree char *cut = g_strndup(line, MIN(len, QUOTE_MAX));
    g_autofree char *quoted = g_strescape(cut, NULL);

    g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_BAD_REPLY,
                "softaffd on %s answered %s with \"%s%s\": %s", path, what, quoted,
                len > QUOTE_MAX ? "..." : "", problem);
}

json_object *sa_control_reply_parse(const char *line, gsize len, const char *socket_path,
                                    const SaControlRequest *req, GError **error)
{
    g_autofree char *what = describe(req);
    g_autoptr(GError) parse_error = NULL;
    json_object *reply = sa_control_json_parse(line, len, "reply", &parse_error);
    json_object *ok = NULL;
    json_object *message = NULL;

    if (reply == NULL) {
        set_bad_reply(line, len, socket_path, what, parse_error->message, error);
        return NULL;
    }
    if (!json_object_object_get_ex(reply, "ok", &ok) ||
        !json_object_is_type(ok, json_type_boolean)) {
        set_bad_reply(line, len, socket_path, what, "the reply has no boolean \"ok\"", error);
        json_object_put(reply);
        return NULL;
    }
    if (json_object_get_boolean(ok))
        return reply;
    json_object_object_get_ex(reply, "error", &message);
    g_set_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_REFUSED,
                "softaffd on %s refused %s: %s", socket_path, what,
                json_object_is_type(message, json_type_string) ? json_object_get_string(message)
                                                               : "no error message");
    json_object_put(reply);
    return NULL;
}

json_object *sa_control_call(const char *socket_path, const SaControlRequest *req, gint64 deadline,
                             gsize max_reply, GError **error)
{
    Exchange x = {
        .path = socket_path,
        .what = describe(req),
        .start = g_get_monotonic_time(),
        .deadline = deadline,
        .fd = -1,
    };
    g_autofree char *line = sa_control_request_format(req);
    g_autofree char *reply = NULL;
    gsize len = 0;

    if (connect_daemon(&x, error) && send_request(&x, line, error))
        reply = read_reply(&x, max_reply, &len, error);
    if (x.fd >= 0)
        close(x.fd);
    g_free(x.what);
    if (reply == NULL)
        return NULL;
    return sa_control_reply_parse(reply, len, socket_path, req, error);
}
