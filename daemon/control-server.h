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
SaControl *sa_control_new(SaCore *core, const char *path, SaControlActionFunc action,
                          gpointer user_data, GError **error);
void sa_control_free(SaControl *c);

G_END_DECLS
