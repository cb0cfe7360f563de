/* softaff — the JSON framing both directions of the control socket share (internal to
 * control/: the request parser and the client). */
#pragma once

#include <glib.h>
#include <json-c/json.h>

G_BEGIN_DECLS

/* Parses one line (a trailing newline allowed) that must hold exactly one JSON object. Errors
 * (SA_ERROR_PARSE) start with `what` ("request", "reply"): empty, a NUL byte, not JSON, trailing
 * data, not an object. */
json_object *sa_control_json_parse(const char *buf, gsize len, const char *what, GError **error);

G_END_DECLS
