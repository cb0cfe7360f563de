/* Unit tests of qmp/: the message parser, and the client against a scripted fake QMP peer on
 * the other end of a socketpair (greeting, capabilities, replies by id, events in between,
 * split messages, error replies, disconnects, garbage, oversized messages, timeouts). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sa-error.h"
#include "sa-qmp.h"

#define GREETING                                                                                   \
    "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, \"major\": 7}, "              \
    "\"package\": \"\"}, \"capabilities\": [\"oob\"]}}\r\n"

/* ---- parser ------------------------------------------------------------------------------- */

static void test_parser_stream(void)
{
    g_autoptr(SaQmpParser) p = sa_qmp_parser_new(0);
    const char *text = GREETING "{\"return\": {}, \"id\": 1}\r\n"
                                "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, "
                                "\"event\": \"STOP\"}\r\n"
                                "  {\"return\": {\"name\": \"a}\\\"{[b\"}, \"id\": \"x\"}\n"
                                "{\"error\": {\"class\": \"GenericError\", \"desc\": \"no\"}}";
    sa_qmp_parser_feed(p, text, strlen(text));
    static const SaQmpMessageKind want[] = {SA_QMP_MSG_GREETING, SA_QMP_MSG_RETURN,
                                            SA_QMP_MSG_EVENT, SA_QMP_MSG_RETURN, SA_QMP_MSG_ERROR};
    for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(SaQmpMessage) m = sa_qmp_parser_next(p, &error);
        g_assert_no_error(error);
        g_assert_nonnull(m);
        g_assert_cmpint(m->kind, ==, want[i]);
        if (i == 2) {
            g_assert_cmpstr(m->event, ==, "STOP");
            g_assert_null(m->body);
        }
        if (i == 3) {
            json_object *name = NULL;
            g_assert_true(json_object_object_get_ex(m->body, "name", &name));
            g_assert_cmpstr(json_object_get_string(name), ==, "a}\"{[b");
            g_assert_cmpstr(json_object_get_string(m->id), ==, "x");
        }
        if (i == 4) {
            g_assert_cmpstr(m->error_class, ==, "GenericError");
            g_assert_cmpstr(m->error_desc, ==, "no");
            g_assert_null(m->id);
        }
    }
    g_autoptr(GError) error = NULL;
    g_assert_null(sa_qmp_parser_next(p, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(sa_qmp_parser_pending(p), ==, 0);
}

static void test_parser_byte_by_byte(void)
{
    g_autoptr(SaQmpParser) p = sa_qmp_parser_new(0);
    const char *text = GREETING "{\"event\": \"SHUTDOWN\", \"data\": {\"guest\": true, "
                                "\"reason\": \"x\\\\y\"}}\r\n";
    guint got = 0;
    for (gsize i = 0; text[i]; i++) {
        sa_qmp_parser_feed(p, text + i, 1);
        g_autoptr(GError) error = NULL;
        g_autoptr(SaQmpMessage) m = sa_qmp_parser_next(p, &error);
        g_assert_no_error(error);
        if (m)
            got++;
        if (m && m->kind == SA_QMP_MSG_EVENT) {
            json_object *reason = NULL;
            g_assert_true(json_object_object_get_ex(m->body, "reason", &reason));
            g_assert_cmpstr(json_object_get_string(reason), ==, "x\\y");
        }
    }
    g_assert_cmpuint(got, ==, 2);
}

static void expect_parse_failure(const char *text, gsize max, int code, const char *fragment)
{
    g_autoptr(SaQmpParser) p = sa_qmp_parser_new(max);
    sa_qmp_parser_feed(p, text, strlen(text));
    g_autoptr(GError) error = NULL;
    SaQmpMessage *m = NULL;
    while ((m = sa_qmp_parser_next(p, &error)))
        sa_qmp_message_free(m);
    g_assert_error(error, SA_ERROR, code);
    if (!strstr(error->message, fragment))
        g_error("\"%s\": error \"%s\" lacks \"%s\"", text, error->message, fragment);
    /* Sticky: the stream cannot be trusted any more. */
    g_clear_error(&error);
    sa_qmp_parser_feed(p, "{\"return\": {}}", 14);
    g_assert_null(sa_qmp_parser_next(p, &error));
    g_assert_error(error, SA_ERROR, code);
}

static void test_parser_errors(void)
{
    expect_parse_failure("hello\r\n", 0, SA_ERROR_PARSE, "0x68 outside a JSON object");
    expect_parse_failure("{\"return\": {}}\n]", 0, SA_ERROR_PARSE, "outside a JSON object");
    expect_parse_failure("[1, 2]", 0, SA_ERROR_PARSE, "outside a JSON object");
    expect_parse_failure("{\"return\": }", 0, SA_ERROR_PARSE, "invalid JSON");
    expect_parse_failure("{\"return\": {}]", 0, SA_ERROR_PARSE, "invalid JSON");
    expect_parse_failure("{\"foo\": 1}", 0, SA_ERROR_PARSE, "not a QMP message");
    expect_parse_failure("{\"error\": {\"class\": 1}}", 0, SA_ERROR_PARSE, "\"class\" and");
    expect_parse_failure("{\"event\": 5}", 0, SA_ERROR_PARSE, "event name");
    expect_parse_failure("{\"QMP\": 5}", 0, SA_ERROR_PARSE, "greeting");
    expect_parse_failure("{\"return\": \"\xff\xfe\"}", 0, SA_ERROR_PARSE, "invalid JSON");
    g_autoptr(GString) deep = g_string_new("{\"return\": ");
    for (int i = 0; i < 100; i++)
        g_string_append_c(deep, '[');
    expect_parse_failure(deep->str, 0, SA_ERROR_PARSE, "nested deeper");
    g_autoptr(GString) big = g_string_new("{\"return\": \"");
    for (int i = 0; i < 5000; i++)
        g_string_append_c(big, 'x');
    g_string_append(big, "\"}");
    expect_parse_failure(big->str, 1024, SA_ERROR_RANGE, "larger than 1024 bytes");
    /* Incomplete and oversized: detected before the end arrives. */
    big->str[3000] = '\0';
    expect_parse_failure(big->str, 1024, SA_ERROR_RANGE, "larger than 1024 bytes");
}

/* ---- client against a fake peer ----------------------------------------------------------- */

typedef struct {
    int peer;
    SaQmpClient *c;
    GString *in; /* bytes from the client not yet consumed */
    int ready;
    GPtrArray *log; /* "event NAME", "reply TAG ok JSON", "reply TAG error MSG", "closed MSG" */
    int closed;
    GError *closed_error;
} Fixture;

static Fixture *F;

static void on_ready(SaQmpClient *c, gpointer data)
{
    F->ready++;
    g_ptr_array_add(F->log, g_strdup("ready"));
}

static void on_event(SaQmpClient *c, const char *event, json_object *data, gpointer user_data)
{
    g_ptr_array_add(F->log, g_strdup_printf("event %s", event));
}

static void on_closed(SaQmpClient *c, const GError *error, gpointer data)
{
    F->closed++;
    g_clear_error(&F->closed_error);
    F->closed_error = g_error_copy(error);
    g_ptr_array_add(F->log, g_strdup_printf("closed %s", error->message));
}

static void on_reply(SaQmpClient *c, json_object *result, const GError *error, gpointer data)
{
    const char *tag = data;
    if (error)
        g_ptr_array_add(F->log,
                        g_strdup_printf("reply %s error %d %s", tag, error->code, error->message));
    else
        g_ptr_array_add(F->log, g_strdup_printf("reply %s ok %s", tag,
                                                json_object_to_json_string_ext(
                                                    result, JSON_C_TO_STRING_PLAIN)));
}

static const SaQmpHandlers handlers = {on_ready, on_event, on_closed};

static void fixture_setup(void)
{
    int sv[2];
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    F = g_new0(Fixture, 1);
    F->peer = sv[1];
    F->in = g_string_new(NULL);
    F->log = g_ptr_array_new_with_free_func(g_free);
    F->c = sa_qmp_client_new_fd(sv[0], &handlers, NULL);
    g_assert_cmpint(sa_qmp_client_get_peer_pid(F->c), ==, getpid());
}

static void fixture_teardown(void)
{
    sa_qmp_client_unref(F->c);
    if (F->peer >= 0)
        close(F->peer);
    g_string_free(F->in, TRUE);
    g_ptr_array_unref(F->log);
    g_clear_error(&F->closed_error);
    g_clear_pointer(&F, g_free);
    while (g_main_context_iteration(NULL, FALSE))
        ;
}

static void pump(void)
{
    for (int i = 0; i < 20; i++)
        g_main_context_iteration(NULL, FALSE);
}

static void pump_until(bool (*done)(void), guint timeout_ms)
{
    gint64 end = g_get_monotonic_time() + timeout_ms * 1000;
    while (!done()) {
        if (g_get_monotonic_time() > end)
            g_error("timed out waiting in the test");
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(1000);
    }
}

static void peer_send(const char *text)
{
    gsize len = strlen(text);
    g_assert_cmpint(write(F->peer, text, len), ==, (ssize_t)len);
}

/* Reads the next command the client sent (one line); returns its id, checks its name. */
static gint64 peer_expect(const char *command)
{
    gint64 end = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    while (!strchr(F->in->str, '\n')) {
        g_main_context_iteration(NULL, FALSE);
        struct pollfd pfd = {F->peer, POLLIN, 0};
        if (poll(&pfd, 1, 5) == 1) {
            char buf[512];
            ssize_t n = read(F->peer, buf, sizeof(buf));
            g_assert_cmpint(n, >, 0);
            g_string_append_len(F->in, buf, n);
        }
        if (g_get_monotonic_time() > end)
            g_error("no %s command from the client", command);
    }
    char *nl = strchr(F->in->str, '\n');
    g_autofree char *line = g_strndup(F->in->str, nl - F->in->str);
    g_string_erase(F->in, 0, nl - F->in->str + 1);
    g_assert_true(g_str_has_suffix(line, "\r"));
    json_object *req = json_tokener_parse(line);
    g_assert_nonnull(req);
    json_object *execute = NULL, *id = NULL;
    g_assert_true(json_object_object_get_ex(req, "execute", &execute));
    g_assert_cmpstr(json_object_get_string(execute), ==, command);
    g_assert_true(json_object_object_get_ex(req, "id", &id));
    g_assert_true(json_object_is_type(id, json_type_int));
    gint64 v = json_object_get_int64(id);
    json_object_put(req);
    return v;
}

static bool is_ready(void)
{
    return F->ready > 0;
}

static bool is_closed(void)
{
    return F->closed > 0;
}

static void handshake(void)
{
    peer_send(GREETING);
    gint64 id = peer_expect("qmp_capabilities");
    g_autofree char *reply =
        g_strdup_printf("{\"return\": {}, \"id\": %" G_GINT64_FORMAT "}\r\n", id);
    peer_send(reply);
    pump_until(is_ready, 5000);
    g_assert_true(sa_qmp_client_is_ready(F->c));
    json_object *caps = NULL;
    g_assert_true(
        json_object_object_get_ex(sa_qmp_client_get_greeting(F->c), "capabilities", &caps));
}

static void assert_log(const char *const *want)
{
    guint n = g_strv_length((char **)want);
    for (guint i = 0; i < MAX(n, F->log->len); i++) {
        const char *got = i < F->log->len ? g_ptr_array_index(F->log, i) : "(nothing)";
        const char *exp = i < n ? want[i] : "(nothing)";
        if (!g_str_has_prefix(got, exp))
            g_error("log entry %u: got \"%s\", want \"%s...\"", i, got, exp);
    }
}

static void test_client_handshake_and_queueing(void)
{
    fixture_setup();
    /* Queued before the greeting: goes out only after the capabilities negotiation. */
    sa_qmp_client_execute(F->c, "query-name", NULL, on_reply, "name");
    pump();
    g_assert_cmpuint(F->in->len, ==, 0);
    handshake();
    gint64 id = peer_expect("query-name");
    g_autofree char *r =
        g_strdup_printf("{\"return\": {\"name\": \"vm1\"}, \"id\": %" G_GINT64_FORMAT "}\r\n", id);
    peer_send(r);
    pump();
    const char *want[] = {"ready", "reply name ok {\"name\":\"vm1\"}", NULL};
    assert_log(want);
    fixture_teardown();
}

static void test_client_events_between_replies(void)
{
    fixture_setup();
    handshake();
    sa_qmp_client_execute(F->c, "query-name", NULL, on_reply, "a");
    json_object *args = json_object_new_object();
    json_object_object_add(args, "x", json_object_new_int(1));
    sa_qmp_client_execute(F->c, "query-cpus-fast", args, on_reply, "b");
    gint64 ida = peer_expect("query-name");
    gint64 idb = peer_expect("query-cpus-fast");
    g_assert_cmpint(ida, !=, idb);
    /* Out of order, with events around and between, all in one write. */
    g_autofree char *text = g_strdup_printf(
        "{\"event\": \"STOP\", \"timestamp\": {\"seconds\": 1, \"microseconds\": 0}}\r\n"
        "{\"return\": [{\"cpu-index\": 0, \"thread-id\": 42}], \"id\": %" G_GINT64_FORMAT "}\r\n"
        "{\"event\": \"RESUME\", \"timestamp\": {\"seconds\": 1, \"microseconds\": 5}}\r\n"
        "{\"return\": {}, \"id\": %" G_GINT64_FORMAT "}\r\n"
        "{\"event\": \"SHUTDOWN\", \"data\": {\"guest\": true}}\r\n",
        idb, ida);
    peer_send(text);
    pump();
    const char *want[] = {"ready",
                          "event STOP",
                          "reply b ok [{\"cpu-index\":0,\"thread-id\":42}]",
                          "event RESUME",
                          "reply a ok {}",
                          "event SHUTDOWN",
                          NULL};
    assert_log(want);
    /* A reply to a command nobody sent is ignored. */
    peer_send("{\"return\": {}, \"id\": 999}\r\n");
    pump();
    assert_log(want);
    g_assert_cmpint(F->closed, ==, 0);
    fixture_teardown();
}

static void test_client_byte_by_byte(void)
{
    fixture_setup();
    for (const char *p = GREETING; *p; p++) {
        g_assert_cmpint(write(F->peer, p, 1), ==, 1);
        pump();
    }
    gint64 id = peer_expect("qmp_capabilities");
    g_autofree char *text =
        g_strdup_printf("{\"return\": {}, \"id\": %" G_GINT64_FORMAT "}\r\n"
                        "{\"event\": \"DEVICE_DELETED\", \"data\": {\"path\": \"/m/{x}\\\"\"}}\r\n",
                        id);
    for (const char *p = text; *p; p++) {
        g_assert_cmpint(write(F->peer, p, 1), ==, 1);
        pump();
    }
    const char *want[] = {"ready", "event DEVICE_DELETED", NULL};
    assert_log(want);
    fixture_teardown();
}

static void test_client_error_replies(void)
{
    fixture_setup();
    handshake();
    sa_qmp_client_execute(F->c, "query-name", NULL, on_reply, "a");
    sa_qmp_client_execute(F->c, "no-such-command", NULL, on_reply, "b");
    sa_qmp_client_execute(F->c, "query-cpus-fast", NULL, on_reply, "c");
    gint64 ida = peer_expect("query-name");
    gint64 idb = peer_expect("no-such-command");
    peer_expect("query-cpus-fast");
    g_autofree char *text = g_strdup_printf(
        "{\"error\": {\"class\": \"GenericError\", \"desc\": \"it broke\"}, \"id\": "
        "%" G_GINT64_FORMAT "}\r\n"
        "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command no-such-command "
        "has not been found\"}, \"id\": %" G_GINT64_FORMAT "}\r\n"
        /* No id: QEMU could not read the request; it answers the oldest one. */
        "{\"error\": {\"class\": \"GenericError\", \"desc\": \"JSON parse error\"}}\r\n",
        ida, idb);
    peer_send(text);
    pump();
    g_autofree char *a = g_strdup_printf(
        "reply a error %d QMP command query-name failed: GenericError: it broke", SA_ERROR_IO);
    g_autofree char *b = g_strdup_printf(
        "reply b error %d QMP command no-such-command failed: CommandNotFound: The command",
        SA_ERROR_UNSUPPORTED);
    g_autofree char *c =
        g_strdup_printf("reply c error %d QMP command query-cpus-fast failed: GenericError: "
                        "JSON parse error",
                        SA_ERROR_IO);
    const char *want[] = {"ready", a, b, c, NULL};
    assert_log(want);
    g_assert_cmpint(F->closed, ==, 0);
    fixture_teardown();
}

static void test_client_disconnect_mid_command(void)
{
    fixture_setup();
    handshake();
    sa_qmp_client_execute(F->c, "query-name", NULL, on_reply, "a");
    sa_qmp_client_execute(F->c, "query-cpus-fast", NULL, on_reply, "b");
    gint64 ida = peer_expect("query-name");
    peer_expect("query-cpus-fast");
    g_autofree char *text = g_strdup_printf(
        "{\"return\": {}, \"id\": %" G_GINT64_FORMAT "}\r\n{\"return\": [{\"cpu", ida);
    peer_send(text);
    close(F->peer);
    F->peer = -1;
    pump_until(is_closed, 5000);
    pump();
    g_autofree char *b = g_strdup_printf("reply b error %d QMP command query-cpus-fast: the QMP "
                                         "peer closed the connection in the middle of a message",
                                         SA_ERROR_GONE);
    const char *want[] = {"ready", "reply a ok {}", b, "closed the QMP peer closed", NULL};
    assert_log(want);
    g_assert_error(F->closed_error, SA_ERROR, SA_ERROR_GONE);
    g_assert_true(sa_qmp_client_is_closed(F->c));
    g_assert_cmpint(F->closed, ==, 1);
    /* A command on a closed client fails, later, from the main loop. */
    sa_qmp_client_execute(F->c, "query-name", NULL, on_reply, "late");
    g_assert_cmpuint(F->log->len, ==, 4);
    pump();
    g_autofree char *late = g_strdup_printf("reply late error %d", SA_ERROR_GONE);
    const char *want2[] = {"ready", "reply a ok {}", b, "closed", late, NULL};
    assert_log(want2);
    fixture_teardown();
}

static void test_client_garbage(void)
{
    fixture_setup();
    handshake();
    sa_qmp_client_execute(F->c, "query-name", NULL, on_reply, "a");
    peer_expect("query-name");
    peer_send("{\"return\": {}, \"id\": 99 }}garbage\r\n");
    pump_until(is_closed, 5000);
    g_assert_error(F->closed_error, SA_ERROR, SA_ERROR_PARSE);
    g_autofree char *a = g_strdup_printf("reply a error %d", SA_ERROR_GONE);
    const char *want[] = {"ready", a, "closed unexpected byte 0x7d", NULL};
    assert_log(want);
    fixture_teardown();

    /* Not even a greeting: a reply first is a protocol error. */
    fixture_setup();
    peer_send("{\"return\": {}}\r\n");
    pump_until(is_closed, 5000);
    g_assert_error(F->closed_error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(F->closed_error->message, "before its greeting"));
    fixture_teardown();
}

static void test_client_oversized(void)
{
    fixture_setup();
    sa_qmp_client_set_max_message(F->c, 4096);
    handshake();
    sa_qmp_client_execute(F->c, "query-cpus-fast", NULL, on_reply, "a");
    gint64 id = peer_expect("query-cpus-fast");
    g_autoptr(GString) big = g_string_new("{\"return\": [");
    for (int i = 0; i < 1000; i++)
        g_string_append_printf(big, "%s{\"cpu-index\": %d, \"thread-id\": %d}", i ? ", " : "", i,
                               1000 + i);
    g_string_append_printf(big, "], \"id\": %" G_GINT64_FORMAT "}\r\n", id);
    peer_send(big->str);
    pump_until(is_closed, 5000);
    g_assert_error(F->closed_error, SA_ERROR, SA_ERROR_RANGE);
    g_autofree char *a = g_strdup_printf("reply a error %d", SA_ERROR_GONE);
    const char *want[] = {"ready", a, "closed QMP message larger than 4096 bytes", NULL};
    assert_log(want);
    fixture_teardown();
}

static void test_client_greeting_timeout(void)
{
    fixture_setup();
    sa_qmp_client_set_greeting_timeout(F->c, 100);
    sa_qmp_client_execute(F->c, "query-name", NULL, on_reply, "a");
    pump_until(is_closed, 5000);
    g_assert_error(F->closed_error, SA_ERROR, SA_ERROR_TRANSIENT);
    g_autofree char *a = g_strdup_printf("reply a error %d", SA_ERROR_GONE);
    const char *want[] = {a, "closed no QMP greeting", NULL};
    assert_log(want);
    fixture_teardown();
}

static void test_client_capabilities_refused(void)
{
    fixture_setup();
    peer_send(GREETING);
    gint64 id = peer_expect("qmp_capabilities");
    g_autofree char *r = g_strdup_printf(
        "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"Capabilities negotiation is "
        "already complete\"}, \"id\": %" G_GINT64_FORMAT "}\r\n",
        id);
    peer_send(r);
    pump_until(is_closed, 5000);
    g_assert_cmpint(F->ready, ==, 0);
    g_assert_nonnull(strstr(F->closed_error->message, "already complete"));
    fixture_teardown();
}

/* The closed handler may drop the last reference. */
static void drop_on_close(SaQmpClient *c, const GError *error, gpointer data)
{
    F->closed++;
    sa_qmp_client_unref(F->c);
    F->c = NULL;
}

static void test_client_unref_in_closed(void)
{
    int sv[2];
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), ==, 0);
    F = g_new0(Fixture, 1);
    F->peer = sv[1];
    F->in = g_string_new(NULL);
    F->log = g_ptr_array_new_with_free_func(g_free);
    SaQmpHandlers h = {NULL, NULL, drop_on_close};
    F->c = sa_qmp_client_new_fd(sv[0], &h, NULL);
    peer_send(GREETING "junk");
    pump_until(is_closed, 5000);
    g_assert_null(F->c);
    fixture_teardown();
}

static void test_connect_errors(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("test-qmp-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "none.qmp", NULL);
    g_assert_null(sa_qmp_client_connect(path, &handlers, NULL, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/qmp/parser/stream", test_parser_stream);
    g_test_add_func("/qmp/parser/byte-by-byte", test_parser_byte_by_byte);
    g_test_add_func("/qmp/parser/errors", test_parser_errors);
    g_test_add_func("/qmp/client/handshake-and-queueing", test_client_handshake_and_queueing);
    g_test_add_func("/qmp/client/events-between-replies", test_client_events_between_replies);
    g_test_add_func("/qmp/client/byte-by-byte", test_client_byte_by_byte);
    g_test_add_func("/qmp/client/error-replies", test_client_error_replies);
    g_test_add_func("/qmp/client/disconnect-mid-command", test_client_disconnect_mid_command);
    g_test_add_func("/qmp/client/garbage", test_client_garbage);
    g_test_add_func("/qmp/client/oversized", test_client_oversized);
    g_test_add_func("/qmp/client/greeting-timeout", test_client_greeting_timeout);
    g_test_add_func("/qmp/client/capabilities-refused", test_client_capabilities_refused);
    g_test_add_func("/qmp/client/unref-in-closed", test_client_unref_in_closed);
    g_test_add_func("/qmp/client/connect-errors", test_connect_errors);
    return g_test_run();
}
