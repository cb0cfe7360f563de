/* softaffd — the control socket server: status for everyone, state changes for root. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "core.h"
#include "sa-control.h"

G_BEGIN_DECLS

typedef struct SaControl SaControl;

/* Called for requests that act (vm-event, reload); returns false with *error to refuse. */
typedef bool (*SaControlActionFunc)(const SaControlRequest *req, gpointer user_data,
                                    GError **error);

/* Listens on path (its directory is created; a stale socket is replaced, a live one is an
 * error). The socket is world-connectable: reads are public, actions need uid 0. */
SaControl *sa_control_new(SaDaemon *d, const char *path, SaControlActionFunc action,
                          gpointer user_data, GError **error);
void sa_control_free(SaControl *c);

/* The JSON replies, also used by tests: status of every VM and partition; one VM. */
char *sa_control_status_json(SaDaemon *d);
char *sa_control_show_json(SaDaemon *d, const char *domain, GError **error);

G_END_DECLS
