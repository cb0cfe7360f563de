/* softaff — libFuzzer target: control socket requests (plugin/control-proto.c). An accepted
 * request must survive sa_control_request_format() and parse back to the same request. */
#define G_LOG_DOMAIN "fuzz-control"

#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sa-control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaControlRequest) req = sa_control_request_parse((const char *)data, size, &error);
    if (!req)
        return 0;
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
    return 0;
}
