/* softaff — the control-socket client (softaffctl, softaff-hook): one request, one reply line,
 * with connect, send and read all bounded by one deadline the caller gives. */
#pragma once

#include <glib.h>
#include <json-c/json.h>

#include "sa-control.h"

G_BEGIN_DECLS

#define SA_CONTROL_CLIENT_ERROR (sa_control_client_error_quark())

/* Every message names the socket path and the request ("the status request", "the started
 * event"). */
typedef enum {
    SA_CONTROL_CLIENT_ERROR_NO_DAEMON, /* no socket file, or nobody listens on it (ECONNREFUSED) */
    SA_CONTROL_CLIENT_ERROR_CONNECT,   /* connect failed otherwise (permission denied, ...) */
    SA_CONTROL_CLIENT_ERROR_TIMED_OUT, /* connect, send or reply not done by the deadline */
    SA_CONTROL_CLIENT_ERROR_BAD_REPLY, /* not one JSON object with a boolean "ok", longer than
                                          the caller's limit, or no reply before the close */
    SA_CONTROL_CLIENT_ERROR_REFUSED,   /* {"ok":false,"error":"..."}: the daemon said no */
    SA_CONTROL_CLIENT_ERROR_FAILED,    /* anything else: a path too long, a socket error */
} SaControlClientError;

GQuark sa_control_client_error_quark(void);

/* Sends req to the daemon listening on socket_path and returns its reply, an object whose "ok"
 * is true (the caller unrefs it with json_object_put()). Connect, send and read end by
 * deadline, a g_get_monotonic_time() value; a reply line longer than max_reply bytes is refused
 * unread. Never blocks past the deadline, never raises SIGPIPE. */
json_object *sa_control_call(const char *socket_path, const SaControlRequest *req, gint64 deadline,
                             gsize max_reply, GError **error);

/* The reply to req in line (len bytes, a trailing newline allowed), as sa_control_call() judges
 * it: the object when "ok" is true; else SA_CONTROL_CLIENT_ERROR_REFUSED with the daemon's
 * message or _BAD_REPLY quoting the line. Pure (no I/O). */
json_object *sa_control_reply_parse(const char *line, gsize len, const char *socket_path,
                                    const SaControlRequest *req, GError **error);

G_END_DECLS
