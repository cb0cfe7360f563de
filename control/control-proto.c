/* softaff — control socket requests: parsing and formatting (pure, fuzzed). */
#define G_LOG_DOMAIN "softaff-control"

#include "sa-control.h"

#include <json-c/json.h>
#include <string.h>

#include "control-json.h"
#include "sa-error.h"

static const char *const command_names[] = {"status", "show", "vm-event", "reload", "headroom"};
static const char *const event_names[] = {"prepare", "started", "stopped", "release"};

const char *sa_control_command_to_string(SaControlCommand command)
{
    return (guint)command < G_N_ELEMENTS(command_names) ? command_names[command] : "unknown";
}

const char *sa_vm_event_to_string(SaVmEvent event)
{
    return (guint)event < G_N_ELEMENTS(event_names) ? event_names[event] : "unknown";
}

bool sa_control_command_needs_root(SaControlCommand command)
{
    return command == SA_CONTROL_VM_EVENT || command == SA_CONTROL_RELOAD;
}

void sa_control_request_free(SaControlRequest *req)
{
    if (!req)
        return;
    g_free(req->domain);
    g_free(req->uuid);
    g_free(req);
}

/* The index of text in names; else an error naming the known ones ("unknown command ..."). */
static bool lookup_name(const char *const *names, guint n, const char *kind, const char *text,
                        int *out, GError **error)
{
    for (guint i = 0; i < n; i++) {
        if (g_str_equal(names[i], text)) {
            *out = (int)i;
            return true;
        }
    }
    g_autoptr(GString) known = g_string_new(NULL);
    for (guint i = 0; i < n; i++)
        g_string_append_printf(known, "%s%s", i ? ", " : "", names[i]);
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "unknown %s \"%s\" (known: %s)", kind, text,
                known->str);
    return false;
}

/* A string member; NULL (no error) when absent. */
static bool get_string(json_object *obj, const char *key, char **out, GError **error)
{
    json_object *v = NULL;
    *out = NULL;
    if (!json_object_object_get_ex(obj, key, &v))
        return true;
    if (!json_object_is_type(v, json_type_string)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "request member \"%s\" must be a string", key);
        return false;
    }
    const char *s = json_object_get_string(v);
    gsize len = (gsize)json_object_get_string_len(v);
    if (len == 0 || len > 1024 || strlen(s) != len || !g_utf8_validate(s, (gssize)len, NULL)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "request member \"%s\" must be a non-empty UTF-8 string of at most 1024 bytes",
                    key);
        return false;
    }
    *out = g_strdup(s);
    return true;
}

json_object *sa_control_json_parse(const char *buf, gsize len, const char *what, GError **error)
{
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
        len--;
    if (len == 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "empty %s", what);
        return NULL;
    }
    if (memchr(buf, '\0', len)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s contains a NUL byte", what);
        return NULL;
    }
    json_tokener *tok = json_tokener_new_ex(32);
    json_object *root = json_tokener_parse_ex(tok, buf, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    gsize consumed = (gsize)json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (!root || jerr != json_tokener_success) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s is not JSON: %s", what,
                    root ? "incomplete object" : json_tokener_error_desc(jerr));
        json_object_put(root);
        return NULL;
    }
    for (gsize i = consumed; i < len; i++) {
        if (!g_ascii_isspace(buf[i])) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "%s has trailing data after the JSON object", what);
            json_object_put(root);
            return NULL;
        }
    }
    if (!json_object_is_type(root, json_type_object)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s must be a JSON object", what);
        json_object_put(root);
        return NULL;
    }
    return root;
}

/* The "command" member, which must name a known command. */
static bool parse_command(json_object *root, SaControlCommand *out, GError **error)
{
    g_autofree char *command = NULL;
    int c;

    if (!get_string(root, "command", &command, error))
        return false;
    if (!command) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "request has no \"command\"");
        return false;
    }
    if (!lookup_name(command_names, G_N_ELEMENTS(command_names), "command", command, &c, error))
        return false;
    *out = (SaControlCommand)c;
    return true;
}

/* Whether a command takes the member key. */
static bool member_allowed(SaControlCommand command, const char *key)
{
    if (g_str_equal(key, "command"))
        return true;
    if (g_str_equal(key, "domain"))
        return command == SA_CONTROL_SHOW || command == SA_CONTROL_VM_EVENT;
    if (g_str_equal(key, "uuid") || g_str_equal(key, "event"))
        return command == SA_CONTROL_VM_EVENT;
    return false;
}

/* Members a command does not take are errors, like unknown ones. */
static bool check_members(json_object *root, SaControlCommand command, GError **error)
{
    struct json_object_iter it;

    /* The C99 iterator: json_object_object_foreach() is a GNU statement expression. */
    json_object_object_foreachC(root, it)
    {
        if (!member_allowed(command, it.key)) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "command \"%s\" takes no member \"%.64s\"",
                        sa_control_command_to_string(command), it.key);
            return false;
        }
    }
    return true;
}

/* Whether a member the command needs is there; else an error naming both. */
static bool needs(bool present, const char *command, const char *member, GError **error)
{
    if (!present)
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "command \"%s\" needs \"%s\"", command,
                    member);
    return present;
}

/* The members the command needs: "domain" for show and vm-event, a known "event" for vm-event. */
static bool check_needed(SaControlRequest *req, const char *event, GError **error)
{
    const char *command = sa_control_command_to_string(req->command);
    bool takes_domain = req->command == SA_CONTROL_SHOW || req->command == SA_CONTROL_VM_EVENT;
    int e;

    if (takes_domain && !needs(req->domain != NULL, command, "domain", error))
        return false;
    if (req->command != SA_CONTROL_VM_EVENT)
        return true;
    if (!needs(event != NULL, command, "event", error) ||
        !lookup_name(event_names, G_N_ELEMENTS(event_names), "event", event, &e, error))
        return false;
    req->event = (SaVmEvent)e;
    return true;
}

/* The request's members, checked in the order the messages promise: the command, the types of
 * the string members, members the command does not take, members it needs. */
static bool parse_members(json_object *root, SaControlRequest *req, GError **error)
{
    g_autofree char *event = NULL;

    return parse_command(root, &req->command, error) &&
           get_string(root, "domain", &req->domain, error) &&
           get_string(root, "uuid", &req->uuid, error) &&
           get_string(root, "event", &event, error) && check_members(root, req->command, error) &&
           check_needed(req, event, error);
}

SaControlRequest *sa_control_request_parse(const char *buf, gsize len, GError **error)
{
    if (len > SA_CONTROL_MAX_REQUEST) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                    "request of %" G_GSIZE_FORMAT " bytes is larger than the limit of %d", len,
                    SA_CONTROL_MAX_REQUEST);
        return NULL;
    }
    json_object *root = sa_control_json_parse(buf, len, "request", error);
    if (!root)
        return NULL;
    g_autoptr(SaControlRequest) req = g_new0(SaControlRequest, 1);
    bool ok = parse_members(root, req, error);
    json_object_put(root);
    return ok ? g_steal_pointer(&req) : NULL;
}

char *sa_control_request_format(const SaControlRequest *req)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "command",
                           json_object_new_string(sa_control_command_to_string(req->command)));
    if (req->domain)
        json_object_object_add(o, "domain", json_object_new_string(req->domain));
    if (req->command == SA_CONTROL_VM_EVENT) {
        json_object_object_add(o, "event",
                               json_object_new_string(sa_vm_event_to_string(req->event)));
        if (req->uuid)
            json_object_object_add(o, "uuid", json_object_new_string(req->uuid));
    }
    char *line = g_strdup_printf(
        "%s\n",
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return line;
}
