/* softaff — the control socket protocol (/run/softaff/softaffd.sock).
 *
 * One request per connection: a JSON object on one line (at most SA_CONTROL_MAX_REQUEST
 * bytes), answered by one JSON object on one line: {"ok":true,...} or
 * {"ok":false,"error":"message"}. Peers are identified with SO_PEERCRED; requests that change
 * state need uid 0. softaffd gives a peer 2 s to send its request and 5 s to take its reply,
 * then drops it; peers other than root share 15 connections at a time (more are refused with
 * an error line), root has 5 more of its own.
 *
 *   {"command":"status"}                         every VM and partition
 *   {"command":"show","domain":"NAME"}           one VM with its recent decisions
 *   {"command":"vm-event","event":"prepare|started|stopped|release",
 *    "domain":"NAME","uuid":"UUID"}              from softaff-hook (root only)
 *   {"command":"reload"}                         like SIGHUP (root only)
 *   {"command":"headroom"}                       the headroom model's histograms and inputs,
 *                                                for `softaffctl advise` (docs/fleet.md)
 */
#pragma once

#include <glib.h>
#include <stdbool.h>

G_BEGIN_DECLS

#define SA_CONTROL_MAX_REQUEST (64 * 1024)
#define SA_CONTROL_MAX_REPLY (16 * 1024 * 1024)

typedef enum {
    SA_CONTROL_STATUS,
    SA_CONTROL_SHOW,
    SA_CONTROL_VM_EVENT,
    SA_CONTROL_RELOAD,
    SA_CONTROL_HEADROOM,
} SaControlCommand;

typedef enum {
    SA_VM_EVENT_PREPARE,
    SA_VM_EVENT_STARTED,
    SA_VM_EVENT_STOPPED,
    SA_VM_EVENT_RELEASE,
} SaVmEvent;

typedef struct {
    SaControlCommand command;
    char *domain; /* show, vm-event */
    char *uuid;   /* vm-event (optional) */
    SaVmEvent event;
} SaControlRequest;

void sa_control_request_free(SaControlRequest *req);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaControlRequest, sa_control_request_free)

/* Parses one request (pure: no I/O). Errors name what was wrong: not JSON, not an object,
 * unknown command, a missing or mistyped member, an unknown member, oversize. */
SaControlRequest *sa_control_request_parse(const char *buf, gsize len, GError **error);
/* Whether the command changes state (then the peer must be root). */
bool sa_control_command_needs_root(SaControlCommand command);
const char *sa_control_command_to_string(SaControlCommand command);
const char *sa_vm_event_to_string(SaVmEvent event);
/* Formats a request as one line (for clients), newline included. */
char *sa_control_request_format(const SaControlRequest *req);

G_END_DECLS
