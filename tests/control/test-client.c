/* softaff — tests of the control-socket client (control/control-client.c) against a fake
 * softaffd: a thread of this test listening on a socket in a temporary directory, answering one
 * connection as each test tells it (a reply, in pieces, garbage, too long, nothing at all). The
 * timing checks are one-sided or generous: a timed-out call must not return before its deadline,
 * and must return well within a second after it. */
#define G_LOG_DOMAIN "test-client"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sa-control-client.h"

/* What a call may take beyond its deadline on a busy, shared machine. */
#define SLACK_US (2 * G_USEC_PER_SEC)

typedef struct {
    char *dir;
    char *path;
    int listen_fd;
    GThread *thread;
    /* what the server does with its one connection */
    const char *reply; /* sent after the request line; NULL: nothing */
    gsize reply_len;   /* 0: strlen(reply) */
    gsize piece;       /* send the reply in pieces of this many bytes, 1 ms apart; 0: at once */
    bool repeat;       /* send the reply again and again until the client closes */
    bool hold;         /* keep the connection open until the client closes it */
    bool no_accept;    /* never accept (the listen queue fills up) */
    /* what the server saw */
    char *request;
} FakeDaemon;

static int listen_on(const char *path, int backlog)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpuint(strlen(path), <, sizeof(addr.sun_path));
    strcpy(addr.sun_path, path);
    g_assert_cmpint(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
    g_assert_cmpint(listen(fd, backlog), ==, 0);
    return fd;
}

static char *read_request(int fd)
{
    GString *buf = g_string_new(NULL);
    char chunk[512];

    while (memchr(buf->str, '\n', buf->len) == NULL) {
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        g_string_append_len(buf, chunk, n);
    }
    return g_string_free(buf, FALSE);
}

/* Sends the reply, at once or in pieces; false when the client has gone. */
static bool send_reply(int fd, const FakeDaemon *f)
{
    gsize len = f->reply_len ? f->reply_len : strlen(f->reply);
    gsize step = f->piece ? f->piece : len;

    for (gsize off = 0; off < len;) {
        ssize_t n = send(fd, f->reply + off, MIN(step, len - off), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        off += (gsize)n;
        if (f->piece)
            g_usleep(1000);
    }
    return true;
}

static void wait_close(int fd)
{
    char chunk[512];
    ssize_t n;

    while ((n = recv(fd, chunk, sizeof(chunk), 0)) > 0 || (n < 0 && errno == EINTR))
        ;
}

static gpointer serve_one(gpointer data)
{
    FakeDaemon *f = data;
    int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);

    g_assert_cmpint(fd, >=, 0);
    f->request = read_request(fd);
    if (f->reply)
        while (send_reply(fd, f) && f->repeat)
            ;
    if (f->hold)
        wait_close(fd);
    close(fd);
    return NULL;
}

static FakeDaemon *fake_new(void)
{
    g_autoptr(GError) error = NULL;
    FakeDaemon *f = g_new0(FakeDaemon, 1);

    f->dir = g_dir_make_tmp("softaff-client-XXXXXX", &error);
    g_assert_no_error(error);
    f->path = g_build_filename(f->dir, "sock", NULL);
    f->listen_fd = -1;
    return f;
}

static void fake_start(FakeDaemon *f)
{
    f->listen_fd = listen_on(f->path, 8);
    f->thread = g_thread_new("fake-softaffd", serve_one, f);
}

static void fake_free(FakeDaemon *f)
{
    if (f->thread)
        g_thread_join(f->thread);
    if (f->listen_fd >= 0)
        close(f->listen_fd);
    g_unlink(f->path);
    g_rmdir(f->dir);
    g_free(f->request);
    g_free(f->path);
    g_free(f->dir);
    g_free(f);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC(FakeDaemon, fake_free)

static const SaControlRequest status_req = {.command = SA_CONTROL_STATUS};
static const SaControlRequest show_req = {.command = SA_CONTROL_SHOW, .domain = (char *)"web"};
static const SaControlRequest event_req = {
    .command = SA_CONTROL_VM_EVENT,
    .domain = (char *)"web",
    .uuid = (char *)"u-1",
    .event = SA_VM_EVENT_STARTED,
};

static gint64 deadline_in_ms(int ms)
{
    return g_get_monotonic_time() + ms * G_TIME_SPAN_MILLISECOND;
}

static void assert_message_has(const GError *error, const char *part)
{
    if (strstr(error->message, part) == NULL)
        g_error("message \"%s\" lacks \"%s\"", error->message, part);
}

/* ---- replies ---- */

static void test_reply(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    f->reply = "{\"ok\":true,\"vm\":{\"name\":\"web\",\"state\":\"home\"}}\n";
    fake_start(f);

    json_object *reply = sa_control_call(f->path, &show_req, deadline_in_ms(5000), 4096, &error);
    g_assert_no_error(error);
    g_assert_nonnull(reply);
    json_object *vm = NULL, *state = NULL;
    g_assert_true(json_object_object_get_ex(reply, "vm", &vm));
    g_assert_true(json_object_object_get_ex(vm, "state", &state));
    g_assert_cmpstr(json_object_get_string(state), ==, "home");
    json_object_put(reply);
    g_thread_join(g_steal_pointer(&f->thread));
    g_assert_cmpstr(f->request, ==, "{\"command\":\"show\",\"domain\":\"web\"}\n");
}

/* A reply that comes in small pieces, then the connection stays open: the newline ends it. */
static void test_reply_in_pieces(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    f->reply = "{\"ok\":true,\"daemon\":{\"ticks\":1234}}\n";
    f->piece = 5;
    f->hold = true;
    fake_start(f);

    json_object *reply = sa_control_call(f->path, &event_req, deadline_in_ms(5000), 4096, &error);
    g_assert_no_error(error);
    json_object *d = NULL, *ticks = NULL;
    g_assert_true(json_object_object_get_ex(reply, "daemon", &d));
    g_assert_true(json_object_object_get_ex(d, "ticks", &ticks));
    g_assert_cmpint(json_object_get_int(ticks), ==, 1234);
    json_object_put(reply);
    g_thread_join(g_steal_pointer(&f->thread));
    g_assert_cmpstr(f->request, ==,
                    "{\"command\":\"vm-event\",\"domain\":\"web\",\"event\":\"started\","
                    "\"uuid\":\"u-1\"}\n");
}

/* A reply as large as a status of many VMs, ended by the close instead of a newline. */
static void test_large_reply_until_close(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) text = g_string_new("{\"ok\":true,\"vms\":[");
    for (int i = 0; i < 20000; i++)
        g_string_append_printf(text, "%s{\"name\":\"vm-%05d\"}", i ? "," : "", i);
    g_string_append(text, "]}");
    f->reply = text->str;
    fake_start(f);

    json_object *reply =
        sa_control_call(f->path, &status_req, deadline_in_ms(10000), SA_CONTROL_MAX_REPLY, &error);
    g_assert_no_error(error);
    json_object *vms = NULL;
    g_assert_true(json_object_object_get_ex(reply, "vms", &vms));
    g_assert_cmpuint(json_object_array_length(vms), ==, 20000);
    json_object_put(reply);
}

static void test_refused(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    f->reply = "{\"ok\":false,\"error\":\"no VM named 'web'\"}\n";
    fake_start(f);

    g_assert_null(sa_control_call(f->path, &show_req, deadline_in_ms(5000), 4096, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_REFUSED);
    g_autofree char *want =
        g_strdup_printf("softaffd on %s refused the show request: no VM named 'web'", f->path);
    g_assert_cmpstr(error->message, ==, want);
}

/* ---- no daemon ---- */

static void test_no_socket(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    gint64 start = g_get_monotonic_time();

    g_assert_null(sa_control_call(f->path, &status_req, deadline_in_ms(5000), 4096, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_NO_DAEMON);
    assert_message_has(error, f->path);
    /* Nothing to wait for: far less than the deadline. */
    g_assert_cmpint(g_get_monotonic_time() - start, <, G_USEC_PER_SEC);
}

/* A socket file nobody listens on: a daemon that crashed. */
static void test_stale_socket(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    close(listen_on(f->path, 1));
    gint64 start = g_get_monotonic_time();

    g_assert_null(sa_control_call(f->path, &event_req, deadline_in_ms(5000), 4096, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_NO_DAEMON);
    assert_message_has(error, f->path);
    g_assert_cmpint(g_get_monotonic_time() - start, <, G_USEC_PER_SEC);
}

static void test_path_too_long(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = g_strnfill(200, 'p');

    g_assert_null(sa_control_call(path, &status_req, deadline_in_ms(100), 4096, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_FAILED);
    assert_message_has(error, path);
}

/* ---- deadlines ---- */

/* Asserts that a call given timeout_ms timed out, not before its deadline nor long after. */
static void check_timed_out(const char *path, const SaControlRequest *req, int timeout_ms,
                            const char *part)
{
    g_autoptr(GError) error = NULL;
    gint64 deadline = deadline_in_ms(timeout_ms);

    g_assert_null(sa_control_call(path, req, deadline, 4096, &error));
    gint64 end = g_get_monotonic_time();
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_TIMED_OUT);
    g_assert_cmpint(end, >=, deadline);
    g_assert_cmpint(end, <, deadline + SLACK_US);
    assert_message_has(error, path);
    assert_message_has(error, part);
}

/* A daemon that accepts and reads the request, then never answers (a stalled main loop). */
static void test_silent_daemon(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    f->hold = true;
    fake_start(f);

    check_timed_out(f->path, &event_req, 300, "did not answer the started event within 300 ms");
    g_thread_join(g_steal_pointer(&f->thread));
    g_assert_cmpstr(f->request, ==,
                    "{\"command\":\"vm-event\",\"domain\":\"web\",\"event\":\"started\","
                    "\"uuid\":\"u-1\"}\n");
}

/* A reply that starts, then stops before its newline. */
static void test_reply_stops_halfway(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    f->reply = "{\"ok\":true,\"vms\":[";
    f->hold = true;
    fake_start(f);

    check_timed_out(f->path, &status_req, 200, "did not answer the status request");
}

/* A daemon that never accepts: connects are refused with EAGAIN once its queue is full. */
static void test_listen_queue_full(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    f->listen_fd = listen_on(f->path, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, f->path);
    int fillers[64];
    guint n = 0;
    bool full = false;

    while (!full && n < G_N_ELEMENTS(fillers)) {
        fillers[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        g_assert_cmpint(fillers[n], >=, 0);
        full = connect(fillers[n], (struct sockaddr *)&addr, sizeof(addr)) < 0;
        if (full)
            g_assert_cmpint(errno, ==, EAGAIN);
        n++;
    }
    g_assert_true(full);
    check_timed_out(f->path, &status_req, 200, "did not accept the connection");
    for (guint i = 0; i < n; i++)
        close(fillers[i]);
}

/* A deadline already passed: the call returns at once, with an error. */
static void test_deadline_passed(void)
{
    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    f->hold = true;
    fake_start(f);
    gint64 start = g_get_monotonic_time();

    g_assert_null(sa_control_call(f->path, &status_req, start - 1, 4096, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_TIMED_OUT);
    g_assert_cmpint(g_get_monotonic_time() - start, <, SLACK_US);
}

/* ---- bad replies ---- */

static void check_bad_reply(const char *reply, gsize reply_len, gsize max_reply, const char *part)
{
    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    f->reply = reply;
    f->reply_len = reply_len;
    fake_start(f);

    g_assert_null(sa_control_call(f->path, &status_req, deadline_in_ms(5000), max_reply, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_BAD_REPLY);
    assert_message_has(error, f->path);
    assert_message_has(error, part);
}

static void test_garbage(void)
{
    check_bad_reply("hello\n", 0, 4096, "answered the status request with \"hello\"");
    check_bad_reply("{\"ok\":true} {\"ok\":true}\n", 0, 4096, "trailing data");
    check_bad_reply("[true]\n", 0, 4096, "must be a JSON object");
    check_bad_reply("{\"ok\":\"yes\"}\n", 0, 4096, "no boolean \"ok\"");
    check_bad_reply("{\"result\":1}\n", 0, 4096, "no boolean \"ok\"");
    check_bad_reply("{\"ok\":tr\0ue}\n", 13, 4096, "NUL byte");
    check_bad_reply("\n", 0, 4096, "with \"\": empty reply");
}

static void test_closed_without_reply(void)
{
    check_bad_reply(NULL, 0, 4096, "closed the connection without answering the status request");
}

static void test_oversize(void)
{
    /* 1 KiB of one string: one byte over the limit of 1023, then exactly the limit. */
    g_autoptr(GString) text = g_string_new("{\"ok\":true,\"pad\":\"");
    while (text->len < 1024 - 2)
        g_string_append_c(text, 'x');
    g_string_append(text, "\"}\n");
    g_assert_cmpuint(text->len, ==, 1024 + 1);
    check_bad_reply(text->str, 0, 1023, "with more than 1023 bytes");

    g_autoptr(FakeDaemon) f = fake_new();
    g_autoptr(GError) error = NULL;
    f->reply = text->str;
    fake_start(f);
    json_object *reply = sa_control_call(f->path, &status_req, deadline_in_ms(5000), 1024, &error);
    g_assert_no_error(error);
    json_object_put(reply);

    /* A reply with no end at all is cut off at the limit, not read until the deadline. */
    /* ys first: cleanups run in reverse, so the fake daemon's thread is joined before ys goes. */
    g_autofree char *ys = g_strnfill(64 * 1024, 'y');
    g_autoptr(FakeDaemon) endless = fake_new();
    endless->reply = ys;
    endless->repeat = true;
    fake_start(endless);
    g_clear_error(&error);
    gint64 deadline = deadline_in_ms(5000);
    g_assert_null(sa_control_call(endless->path, &status_req, deadline, 4096, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_BAD_REPLY);
    assert_message_has(error, "with more than 4096 bytes");
    g_assert_cmpint(g_get_monotonic_time(), <, deadline);
}

/* ---- the reply parser alone ---- */

static void test_reply_parse(void)
{
    g_autoptr(GError) error = NULL;
    const char *ok = "{\"ok\":true,\"n\":1}\r\n";
    json_object *reply = sa_control_reply_parse(ok, strlen(ok), "/s", &status_req, &error);
    g_assert_no_error(error);
    json_object_put(reply);

    const char *no = "{\"ok\":false}";
    g_assert_null(sa_control_reply_parse(no, strlen(no), "/s", &event_req, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_REFUSED);
    g_assert_cmpstr(error->message, ==,
                    "softaffd on /s refused the started event: no error message");
    g_clear_error(&error);

    /* A long bad reply is quoted in part, escaped. */
    g_autofree char *zs = g_strnfill(300, 'z');
    g_autofree char *junk = g_strdup_printf("\x01%s", zs);
    g_assert_null(sa_control_reply_parse(junk, strlen(junk), "/s", &status_req, &error));
    g_assert_error(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_BAD_REPLY);
    g_assert_true(g_str_has_prefix(error->message,
                                   "softaffd on /s answered the status request with \"\\001zz"));
    assert_message_has(error, "zzz...\": reply is not JSON");
    g_assert_cmpuint(strlen(error->message), <, 400);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/control/client/reply", test_reply);
    g_test_add_func("/control/client/reply-in-pieces", test_reply_in_pieces);
    g_test_add_func("/control/client/large-reply-until-close", test_large_reply_until_close);
    g_test_add_func("/control/client/refused", test_refused);
    g_test_add_func("/control/client/no-socket", test_no_socket);
    g_test_add_func("/control/client/stale-socket", test_stale_socket);
    g_test_add_func("/control/client/path-too-long", test_path_too_long);
    g_test_add_func("/control/client/silent-daemon", test_silent_daemon);
    g_test_add_func("/control/client/reply-stops-halfway", test_reply_stops_halfway);
    g_test_add_func("/control/client/listen-queue-full", test_listen_queue_full);
    g_test_add_func("/control/client/deadline-passed", test_deadline_passed);
    g_test_add_func("/control/client/garbage", test_garbage);
    g_test_add_func("/control/client/closed-without-reply", test_closed_without_reply);
    g_test_add_func("/control/client/oversize", test_oversize);
    g_test_add_func("/control/client/reply-parse", test_reply_parse);
    return g_test_run();
}
