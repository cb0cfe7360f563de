/* softaff — QMP framing and message classification: bytes in, classified messages out.
 *
 * QEMU sends one JSON object per message, each followed by CRLF, but a reader cannot rely on
 * line ends (a string may hold an escaped newline, a read may end anywhere). The framer tracks
 * nesting and strings to find where a top-level object ends, then json-c parses exactly that
 * span. Pure: no I/O, fuzzed by tests/fuzz/fuzz-qmp.c. */
#define G_LOG_DOMAIN "softaff-qmp"

#include "sa-qmp.h"

#include <string.h>

#include "sa-error.h"

/* Deeper nesting than any QMP reply has; json-c's own default is 32. */
#define MAX_DEPTH 64

struct SaQmpParser {
    GByteArray *buf;
    gsize max_message;
    gsize scan_pos;  /* bytes of buf already scanned */
    gsize msg_start; /* offset of the current message's '{' (valid when depth > 0) */
    int depth;
    bool in_string;
    bool escape;
    GError *failed; /* sticky: the stream is broken */
    json_tokener *tok;
};

const char *sa_qmp_message_kind_to_string(SaQmpMessageKind kind)
{
    switch (kind) {
    case SA_QMP_MSG_GREETING:
        return "greeting";
    case SA_QMP_MSG_RETURN:
        return "return";
    case SA_QMP_MSG_ERROR:
        return "error";
    case SA_QMP_MSG_EVENT:
        return "event";
    }
    return "unknown";
}

void sa_qmp_message_free(SaQmpMessage *msg)
{
    if (!msg)
        return;
    json_object_put(msg->root);
    g_free(msg);
}

static bool get_member(json_object *obj, const char *key, json_object **out)
{
    *out = NULL;
    return json_object_object_get_ex(obj, key, out);
}

SaQmpMessage *sa_qmp_message_classify(json_object *root, GError **error)
{
    json_object *v = NULL;

    if (!json_object_is_type(root, json_type_object)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "QMP message is a JSON %s, not an object",
                    json_type_to_name(json_object_get_type(root)));
        return NULL;
    }
    g_autoptr(SaQmpMessage) msg = g_new0(SaQmpMessage, 1);
    msg->root = json_object_get(root);
    get_member(root, "id", &msg->id);

    if (get_member(root, "QMP", &v)) {
        if (!json_object_is_type(v, json_type_object)) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "QMP greeting: \"QMP\" is not an object");
            return NULL;
        }
        msg->kind = SA_QMP_MSG_GREETING;
        msg->body = v;
    } else if (get_member(root, "return", &v)) {
        msg->kind = SA_QMP_MSG_RETURN;
        msg->body = v;
    } else if (get_member(root, "error", &v)) {
        json_object *cls = NULL, *desc = NULL;
        if (!json_object_is_type(v, json_type_object) || !get_member(v, "class", &cls) ||
            !get_member(v, "desc", &desc) || !json_object_is_type(cls, json_type_string) ||
            !json_object_is_type(desc, json_type_string)) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "QMP error reply without string members \"class\" and \"desc\"");
            return NULL;
        }
        msg->kind = SA_QMP_MSG_ERROR;
        msg->body = v;
        msg->error_class = json_object_get_string(cls);
        msg->error_desc = json_object_get_string(desc);
    } else if (get_member(root, "event", &v)) {
        if (!json_object_is_type(v, json_type_string)) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "QMP event name is not a string");
            return NULL;
        }
        msg->kind = SA_QMP_MSG_EVENT;
        msg->event = json_object_get_string(v);
        get_member(root, "data", &msg->body);
    } else {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "not a QMP message (no \"QMP\", \"return\", \"error\" or \"event\" member)");
        return NULL;
    }
    return g_steal_pointer(&msg);
}

SaQmpParser *sa_qmp_parser_new(gsize max_message)
{
    SaQmpParser *p = g_new0(SaQmpParser, 1);
    p->buf = g_byte_array_new();
    p->max_message = max_message ? max_message : SA_QMP_DEFAULT_MAX_MESSAGE;
    p->tok = json_tokener_new_ex(MAX_DEPTH + 1);
    json_tokener_set_flags(p->tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    return p;
}

void sa_qmp_parser_free(SaQmpParser *p)
{
    if (!p)
        return;
    g_byte_array_unref(p->buf);
    json_tokener_free(p->tok);
    g_clear_error(&p->failed);
    g_free(p);
}

void sa_qmp_parser_feed(SaQmpParser *p, const char *buf, gsize len)
{
    if (p->failed || len == 0)
        return;
    g_byte_array_append(p->buf, (const guint8 *)buf, (guint)len);
}

gsize sa_qmp_parser_pending(const SaQmpParser *p)
{
    return p->buf->len;
}

static SaQmpMessage *fail(SaQmpParser *p, GError **error, SaErrorCode code, const char *fmt, ...)
    G_GNUC_PRINTF(4, 5);

static SaQmpMessage *fail(SaQmpParser *p, GError **error, SaErrorCode code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    p->failed = g_error_new_literal(SA_ERROR, code, text);
    g_byte_array_set_size(p->buf, 0);
    if (error)
        *error = g_error_copy(p->failed);
    return NULL;
}

static bool is_space(guint8 c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Parses buf[start, end) as one JSON object and classifies it. */
static SaQmpMessage *parse_span(SaQmpParser *p, gsize start, gsize end, GError **error)
{
    json_tokener_reset(p->tok);
    int len = (int)(end - start);
    json_object *root = json_tokener_parse_ex(p->tok, (const char *)p->buf->data + start, len);
    enum json_tokener_error jerr = json_tokener_get_error(p->tok);
    if (!root || jerr != json_tokener_success || (int)json_tokener_get_parse_end(p->tok) != len) {
        json_object_put(root);
        return fail(p, error, SA_ERROR_PARSE, "invalid JSON from the QMP peer: %s",
                    jerr != json_tokener_success ? json_tokener_error_desc(jerr)
                                                 : "trailing bytes in a message");
    }
    g_autoptr(GError) local = NULL;
    SaQmpMessage *msg = sa_qmp_message_classify(root, &local);
    json_object_put(root);
    if (!msg)
        return fail(p, error, SA_ERROR_PARSE, "%s", local->message);
    return msg;
}

SaQmpMessage *sa_qmp_parser_next(SaQmpParser *p, GError **error)
{
    if (p->failed) {
        if (error)
            *error = g_error_copy(p->failed);
        return NULL;
    }
    const guint8 *b = p->buf->data;
    gsize n = p->buf->len;
    for (gsize i = p->scan_pos; i < n; i++) {
        guint8 c = b[i];
        if (p->depth == 0) {
            if (is_space(c))
                continue;
            if (c != '{')
                return fail(p, error, SA_ERROR_PARSE,
                            "unexpected byte 0x%02x outside a JSON object from the QMP peer", c);
            p->depth = 1;
            p->msg_start = i;
            continue;
        }
        if (i - p->msg_start + 1 > p->max_message)
            return fail(p, error, SA_ERROR_RANGE,
                        "QMP message larger than %" G_GSIZE_FORMAT " bytes", p->max_message);
        if (p->in_string) {
            if (p->escape)
                p->escape = false;
            else if (c == '\\')
                p->escape = true;
            else if (c == '"')
                p->in_string = false;
            continue;
        }
        switch (c) {
        case '"':
            p->in_string = true;
            break;
        case '{':
        case '[':
            if (++p->depth > MAX_DEPTH)
                return fail(p, error, SA_ERROR_PARSE, "QMP message nested deeper than %d levels",
                            MAX_DEPTH);
            break;
        case '}':
        case ']':
            if (--p->depth == 0) {
                SaQmpMessage *msg = parse_span(p, p->msg_start, i + 1, error);
                if (!msg)
                    return NULL;
                g_byte_array_remove_range(p->buf, 0, (guint)(i + 1));
                p->scan_pos = 0;
                return msg;
            }
            break;
        default:
            break;
        }
    }
    if (p->depth == 0) {
        /* Only whitespace since the last message. */
        g_byte_array_set_size(p->buf, 0);
        p->scan_pos = 0;
    } else {
        p->scan_pos = n;
    }
    return NULL;
}
