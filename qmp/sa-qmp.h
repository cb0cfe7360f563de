/* softaff — a QMP (QEMU Machine Protocol) client on json-c.
 *
 * Two layers: SaQmpParser turns a byte stream into classified messages (pure, fuzzed), and
 * SaQmpClient runs the protocol on a Unix socket inside the GLib main loop: it waits for the
 * greeting, negotiates capabilities, sends commands with an id, matches replies by id and hands
 * asynchronous events to a callback. Nothing blocks. */
#pragma once

#include <glib.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* Largest single message accepted by default (query-cpus-fast of a few hundred vCPUs is well
 * below 1 MiB). */
#define SA_QMP_DEFAULT_MAX_MESSAGE (1024 * 1024)

/* ---- messages ------------------------------------------------------------------------------ */

typedef enum {
    SA_QMP_MSG_GREETING, /* {"QMP": {"version": ..., "capabilities": [...]}} */
    SA_QMP_MSG_RETURN,   /* {"return": ..., "id": ...} */
    SA_QMP_MSG_ERROR,    /* {"error": {"class": ..., "desc": ...}, "id": ...} */
    SA_QMP_MSG_EVENT,    /* {"event": NAME, "data": ..., "timestamp": ...} */
} SaQmpMessageKind;

typedef struct {
    SaQmpMessageKind kind;
    json_object *root;       /* the whole message (owned) */
    json_object *id;         /* "id" member or NULL (borrowed from root) */
    json_object *body;       /* greeting: the "QMP" object; return: the value; error: the
                                "error" object; event: "data" or NULL (borrowed) */
    const char *event;       /* event name (borrowed) */
    const char *error_class; /* error class, "GenericError"... (borrowed) */
    const char *error_desc;  /* error description (borrowed) */
} SaQmpMessage;

void sa_qmp_message_free(SaQmpMessage *msg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaQmpMessage, sa_qmp_message_free)
const char *sa_qmp_message_kind_to_string(SaQmpMessageKind kind);

/* Classifies one parsed JSON value (takes a reference of its own on success). Anything that is
 * not one of the four shapes is an SA_ERROR_PARSE error naming what is wrong. */
SaQmpMessage *sa_qmp_message_classify(json_object *root, GError **error);

/* Splits a byte stream into top-level JSON objects, whatever the chunking. */
typedef struct SaQmpParser SaQmpParser;
SaQmpParser *sa_qmp_parser_new(gsize max_message);
void sa_qmp_parser_free(SaQmpParser *p);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaQmpParser, sa_qmp_parser_free)
/* Appends bytes. Never fails; problems are reported by sa_qmp_parser_next(). */
void sa_qmp_parser_feed(SaQmpParser *p, const char *buf, gsize len);
/* The next complete message, or NULL: with *error set on garbage, invalid JSON, a message
 * that is not QMP or one larger than max_message (the stream cannot be trusted after that:
 * every later call fails too), without when more bytes are needed. */
SaQmpMessage *sa_qmp_parser_next(SaQmpParser *p, GError **error);
/* Bytes buffered that do not form a complete message yet. */
gsize sa_qmp_parser_pending(const SaQmpParser *p);

/* ---- client -------------------------------------------------------------------------------- */

typedef struct SaQmpClient SaQmpClient;

/* A command's outcome: result (borrowed, may be any JSON value) or error (its message holds the
 * QMP class and description, or why the connection failed). Exactly one is non-NULL. */
typedef void (*SaQmpReplyFunc)(SaQmpClient *c, json_object *result, const GError *error,
                               gpointer user_data);
/* An asynchronous event; data may be NULL. */
typedef void (*SaQmpEventFunc)(SaQmpClient *c, const char *event, json_object *data,
                               gpointer user_data);
/* The session is usable (greeting seen, capabilities negotiated). */
typedef void (*SaQmpReadyFunc)(SaQmpClient *c, gpointer user_data);
/* The connection ended: error says why (peer closed, protocol error, timeout). Called once;
 * pending commands have been failed before. The client may be unreffed from here. */
typedef void (*SaQmpClosedFunc)(SaQmpClient *c, const GError *error, gpointer user_data);

typedef struct {
    SaQmpReadyFunc ready;
    SaQmpEventFunc event;
    SaQmpClosedFunc closed;
} SaQmpHandlers;

/* Wraps a connected stream socket (made non-blocking; the client owns and closes it). */
SaQmpClient *sa_qmp_client_new_fd(int fd, const SaQmpHandlers *handlers, gpointer user_data);
/* Connects to a Unix socket. SA_ERROR_NOT_FOUND when nothing listens there (stale or missing
 * socket), SA_ERROR_TRANSIENT when the listener is saturated, SA_ERROR_IO otherwise. */
SaQmpClient *sa_qmp_client_connect(const char *path, const SaQmpHandlers *handlers,
                                   gpointer user_data, GError **error);
SaQmpClient *sa_qmp_client_ref(SaQmpClient *c);
/* Dropping the last reference closes the socket; callbacks are not called any more. */
void sa_qmp_client_unref(SaQmpClient *c);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaQmpClient, sa_qmp_client_unref)

void sa_qmp_client_set_max_message(SaQmpClient *c, gsize max_message);
/* The greeting (and the capabilities negotiation) must complete within timeout_ms, else the
 * connection is closed with SA_ERROR_TRANSIENT: a QMP socket that already serves another client
 * accepts the connection but stays silent. 0 = no limit. Call before the main loop runs. */
void sa_qmp_client_set_greeting_timeout(SaQmpClient *c, guint timeout_ms);

/* Queues a command. arguments (an object, or NULL) is taken over. Commands queued before the
 * session is ready go out after the capabilities negotiation. callback may be NULL. If the
 * client is already closed, the callback runs from an idle source with the error. */
void sa_qmp_client_execute(SaQmpClient *c, const char *command, json_object *arguments,
                           SaQmpReplyFunc callback, gpointer user_data);
/* Closes the connection now: pending commands fail, closed() is called (with error, or a
 * "closed by the client" error when NULL). */
void sa_qmp_client_close(SaQmpClient *c, const GError *error);

bool sa_qmp_client_is_ready(const SaQmpClient *c);
bool sa_qmp_client_is_closed(const SaQmpClient *c);
/* The "QMP" object of the greeting (borrowed), NULL before it arrived. */
json_object *sa_qmp_client_get_greeting(const SaQmpClient *c);
/* The peer process (SO_PEERCRED), -1 when unknown. */
pid_t sa_qmp_client_get_peer_pid(const SaQmpClient *c);
int sa_qmp_client_get_fd(const SaQmpClient *c);

G_END_DECLS
