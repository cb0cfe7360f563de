/* softaff — tests of the control protocol's requests (control/control-proto.c): a table of
 * lines, each either accepted as a given request or refused with a given message; and every
 * accepted request formats back to a line that parses to the same request. */
#define G_LOG_DOMAIN "test-proto"

#include <glib.h>
#include <string.h>

#include "sa-control.h"
#include "sa-error.h"

typedef struct {
    const char *line;
    SaControlCommand command;
    const char *domain;
    const char *uuid;
    SaVmEvent event;
} GoodCase;

static const GoodCase good_cases[] = {
    {"{\"command\":\"status\"}", SA_CONTROL_STATUS, NULL, NULL, 0},
    {"{\"command\":\"status\"}\n", SA_CONTROL_STATUS, NULL, NULL, 0},
    {"{\"command\":\"status\"}\r\n", SA_CONTROL_STATUS, NULL, NULL, 0},
    {"  {\"command\" : \"status\"}  \t", SA_CONTROL_STATUS, NULL, NULL, 0},
    {"{\"command\":\"reload\"}\n", SA_CONTROL_RELOAD, NULL, NULL, 0},
    {"{\"command\":\"show\",\"domain\":\"web\"}", SA_CONTROL_SHOW, "web", NULL, 0},
    {"{\"domain\":\"d\\u00e9j\\u00e0\",\"command\":\"show\"}", SA_CONTROL_SHOW,
     "d\xc3\xa9j\xc3\xa0", NULL, 0},
    {"{\"command\":\"vm-event\",\"event\":\"prepare\",\"domain\":\"a\"}", SA_CONTROL_VM_EVENT, "a",
     NULL, SA_VM_EVENT_PREPARE},
    {"{\"command\":\"vm-event\",\"event\":\"started\",\"domain\":\"a\",\"uuid\":\"u-1\"}",
     SA_CONTROL_VM_EVENT, "a", "u-1", SA_VM_EVENT_STARTED},
    {"{\"command\":\"vm-event\",\"event\":\"stopped\",\"domain\":\"a b\"}", SA_CONTROL_VM_EVENT,
     "a b", NULL, SA_VM_EVENT_STOPPED},
    {"{\"command\":\"vm-event\",\"event\":\"release\",\"domain\":\"\\\"q\\\"\"}",
     SA_CONTROL_VM_EVENT, "\"q\"", NULL, SA_VM_EVENT_RELEASE},
};

typedef struct {
    const char *line;
    gssize len; /* -1: strlen(line) */
    int code;
    const char *message; /* exact, or a prefix when it ends with '*' */
} BadCase;

static const BadCase bad_cases[] = {
    {"", -1, SA_ERROR_PARSE, "empty request"},
    {"\r\n\n", -1, SA_ERROR_PARSE, "empty request"},
    {"{\"command\":\"status\"}\0\n", 22, SA_ERROR_PARSE, "request contains a NUL byte"},
    {"{\"command\":", -1, SA_ERROR_PARSE, "request is not JSON: *"},
    {"{\"command\":\"status\"", -1, SA_ERROR_PARSE, "request is not JSON: *"},
    {"status", -1, SA_ERROR_PARSE, "request is not JSON: *"},
    {"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", -1,
     SA_ERROR_PARSE, "request is not JSON: *"},
    {"{\"command\":\"status\"} {}", -1, SA_ERROR_PARSE,
     "request has trailing data after the JSON object"},
    {"{\"command\":\"status\"}\nx", -1, SA_ERROR_PARSE,
     "request has trailing data after the JSON object"},
    {"[\"status\"]", -1, SA_ERROR_PARSE, "request must be a JSON object"},
    {"\"status\"", -1, SA_ERROR_PARSE, "request must be a JSON object"},
    {"{}", -1, SA_ERROR_PARSE, "request has no \"command\""},
    {"{\"domain\":\"a\"}", -1, SA_ERROR_PARSE, "request has no \"command\""},
    {"{\"command\":5}", -1, SA_ERROR_PARSE, "request member \"command\" must be a string"},
    {"{\"command\":null}", -1, SA_ERROR_PARSE, "request member \"command\" must be a string"},
    {"{\"command\":\"\"}", -1, SA_ERROR_PARSE,
     "request member \"command\" must be a non-empty UTF-8 string of at most 1024 bytes"},
    {"{\"command\":\"show\",\"domain\":\"a\\u0000b\"}", -1, SA_ERROR_PARSE,
     "request member \"domain\" must be a non-empty UTF-8 string of at most 1024 bytes"},
    {"{\"command\":\"dance\"}", -1, SA_ERROR_PARSE,
     "unknown command \"dance\" (known: status, show, vm-event, reload, headroom)"},
    {"{\"command\":\"status\",\"domain\":\"a\"}", -1, SA_ERROR_PARSE,
     "command \"status\" takes no member \"domain\""},
    {"{\"command\":\"status\",\"verbose\":true}", -1, SA_ERROR_PARSE,
     "command \"status\" takes no member \"verbose\""},
    {"{\"command\":\"show\",\"domain\":\"a\",\"uuid\":\"u\"}", -1, SA_ERROR_PARSE,
     "command \"show\" takes no member \"uuid\""},
    {"{\"command\":\"reload\",\"event\":\"started\"}", -1, SA_ERROR_PARSE,
     "command \"reload\" takes no member \"event\""},
    {"{\"command\":\"show\",\"domain\":7}", -1, SA_ERROR_PARSE,
     "request member \"domain\" must be a string"},
    {"{\"command\":\"show\"}", -1, SA_ERROR_PARSE, "command \"show\" needs \"domain\""},
    {"{\"command\":\"vm-event\",\"event\":\"started\"}", -1, SA_ERROR_PARSE,
     "command \"vm-event\" needs \"domain\""},
    {"{\"command\":\"vm-event\",\"domain\":\"a\"}", -1, SA_ERROR_PARSE,
     "command \"vm-event\" needs \"event\""},
    {"{\"command\":\"vm-event\",\"domain\":\"a\",\"event\":\"boot\"}", -1, SA_ERROR_PARSE,
     "unknown event \"boot\" (known: prepare, started, stopped, release)"},
    {"{\"command\":\"vm-event\",\"domain\":\"a\",\"event\":\"started\",\"uuid\":[]}", -1,
     SA_ERROR_PARSE, "request member \"uuid\" must be a string"},
};

static void check_good(const GoodCase *c)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaControlRequest) req = sa_control_request_parse(c->line, strlen(c->line), &error);
    g_assert_no_error(error);
    g_assert_nonnull(req);
    g_assert_cmpint(req->command, ==, c->command);
    g_assert_cmpstr(req->domain, ==, c->domain);
    g_assert_cmpstr(req->uuid, ==, c->uuid);
    if (c->command == SA_CONTROL_VM_EVENT)
        g_assert_cmpint(req->event, ==, c->event);

    /* Formatted: one line, which parses back to the same request. */
    g_autofree char *line = sa_control_request_format(req);
    g_assert_true(g_str_has_suffix(line, "\n"));
    g_assert_true(strchr(line, '\n') == line + strlen(line) - 1);
    g_autoptr(SaControlRequest) again = sa_control_request_parse(line, strlen(line), &error);
    g_assert_no_error(error);
    g_assert_cmpint(again->command, ==, req->command);
    g_assert_cmpstr(again->domain, ==, req->domain);
    g_assert_cmpstr(again->uuid, ==, req->uuid);
    g_assert_cmpint(again->event, ==, req->event);
}

static void test_good(void)
{
    for (gsize i = 0; i < G_N_ELEMENTS(good_cases); i++) {
        g_autofree char *shown = g_strescape(good_cases[i].line, NULL);
        g_test_message("good case %" G_GSIZE_FORMAT ": %s", i, shown);
        check_good(&good_cases[i]);
    }
}

static void check_bad(const BadCase *c)
{
    g_autoptr(GError) error = NULL;
    gsize len = c->len < 0 ? strlen(c->line) : (gsize)c->len;
    g_autoptr(SaControlRequest) req = sa_control_request_parse(c->line, len, &error);
    g_assert_null(req);
    g_assert_error(error, SA_ERROR, c->code);
    gsize mlen = strlen(c->message);
    if (mlen > 0 && c->message[mlen - 1] == '*')
        g_assert_true(strncmp(error->message, c->message, mlen - 1) == 0 &&
                      strlen(error->message) > mlen - 1);
    else
        g_assert_cmpstr(error->message, ==, c->message);
}

static void test_bad(void)
{
    for (gsize i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
        g_autofree char *shown = g_strescape(bad_cases[i].line, NULL);
        g_test_message("bad case %" G_GSIZE_FORMAT ": %s", i, shown);
        check_bad(&bad_cases[i]);
    }
}

/* Requests up to SA_CONTROL_MAX_REQUEST bytes are read; one byte more is refused as such. */
static void test_size_limit(void)
{
    const char *head = "{\"command\":\"status\"}";
    g_autoptr(GError) error = NULL;
    g_autoptr(GString) line = g_string_new(head);
    while (line->len < SA_CONTROL_MAX_REQUEST)
        g_string_append_c(line, ' ');
    g_autoptr(SaControlRequest) req = sa_control_request_parse(line->str, line->len, &error);
    g_assert_no_error(error);
    g_assert_cmpint(req->command, ==, SA_CONTROL_STATUS);

    g_string_append_c(line, ' ');
    g_autoptr(SaControlRequest) big = sa_control_request_parse(line->str, line->len, &error);
    g_assert_null(big);
    g_assert_error(error, SA_ERROR, SA_ERROR_RANGE);
    g_autofree char *want = g_strdup_printf("request of %d bytes is larger than the limit of %d",
                                            SA_CONTROL_MAX_REQUEST + 1, SA_CONTROL_MAX_REQUEST);
    g_assert_cmpstr(error->message, ==, want);
}

/* String members: at most 1024 bytes. */
static void test_string_limit(void)
{
    g_autofree char *name = g_strnfill(1024, 'n');
    g_autofree char *ok = g_strdup_printf("{\"command\":\"show\",\"domain\":\"%s\"}", name);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaControlRequest) req = sa_control_request_parse(ok, strlen(ok), &error);
    g_assert_no_error(error);
    g_assert_cmpstr(req->domain, ==, name);

    g_autofree char *longer = g_strdup_printf("{\"command\":\"show\",\"domain\":\"%sn\"}", name);
    g_autoptr(SaControlRequest) bad = sa_control_request_parse(longer, strlen(longer), &error);
    g_assert_null(bad);
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, "\"domain\""));
}

static void test_names(void)
{
    g_assert_cmpstr(sa_control_command_to_string(SA_CONTROL_VM_EVENT), ==, "vm-event");
    g_assert_cmpstr(sa_control_command_to_string((SaControlCommand)99), ==, "unknown");
    g_assert_cmpstr(sa_vm_event_to_string(SA_VM_EVENT_RELEASE), ==, "release");
    g_assert_cmpstr(sa_vm_event_to_string((SaVmEvent)-1), ==, "unknown");
    g_assert_true(sa_control_command_needs_root(SA_CONTROL_VM_EVENT));
    g_assert_true(sa_control_command_needs_root(SA_CONTROL_RELOAD));
    g_assert_false(sa_control_command_needs_root(SA_CONTROL_STATUS));
    g_assert_false(sa_control_command_needs_root(SA_CONTROL_SHOW));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/control/request/good", test_good);
    g_test_add_func("/control/request/bad", test_bad);
    g_test_add_func("/control/request/size-limit", test_size_limit);
    g_test_add_func("/control/request/string-limit", test_string_limit);
    g_test_add_func("/control/names", test_names);
    return g_test_run();
}
