/* softaff — libFuzzer target: both directions of the control socket (control/). The input is
 * parsed as a request and as a reply. An accepted request must survive
 * sa_control_request_format() and parse back to the same request; an accepted reply is an object
 * whose "ok" is true, and a refused one fails with a message. */
#define G_LOG_DOMAIN "fuzz-control"

#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sa-control-client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request(const uint8_t *data, size_t size)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaControlRequest) req = sa_control_request_parse((const char *)data, size, &error);
    if (!req)
        return;
    /* Cheap checks that hold for every accepted request. */
    (void)sa_control_command_needs_root(req->command);
    g_assert_cmpstr(sa_control_command_to_string(req->command), !=, "unknown");

    g_autofree char *line = sa_control_request_format(req);
    g_autoptr(SaControlRequest) again = sa_control_request_parse(line, strlen(line), &error);
    if (!again) {
        g_printerr("formatted request does not parse back: %s\n%s", error->message, line);
        abort();
    }
    if (again->command != req->command || g_strcmp0(again->domain, req->domain) != 0 ||
        (req->command == SA_CONTROL_VM_EVENT &&
         (again->event != req->event || g_strcmp0(again->uuid, req->uuid) != 0))) {
        g_printerr("request changed through format/parse: %s", line);
        abort();
    }
}

static void check_reply(const uint8_t *data, size_t size)
{
    static const SaControlRequest status = {.command = SA_CONTROL_STATUS};
    g_autoptr(GError) error = NULL;
    json_object *reply = sa_control_reply_parse((const char *)data, size, "/fuzz", &status, &error);
    json_object *ok = NULL;

    if (reply == NULL) {
        if (error == NULL || strstr(error->message, "/fuzz") == NULL) {
            g_printerr("a refused reply without a message naming the socket\n");
            abort();
        }
        return;
    }
    if (!json_object_is_type(reply, json_type_object) ||
        !json_object_object_get_ex(reply, "ok", &ok) || !json_object_get_boolean(ok)) {
        g_printerr("an accepted reply is not an object with \"ok\":true\n");
        abort();
    }
    json_object_put(reply);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_request(data, size);
    check_reply(data, size);
    return 0;
}
