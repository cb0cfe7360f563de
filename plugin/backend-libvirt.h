/* softaffd — the libvirt backend: connection, events, domain discovery and pinning. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "core.h"

G_BEGIN_DECLS

typedef struct SaLibvirt SaLibvirt;

/* The libvirt event loop must be registered (virEventRegisterDefaultImpl) before this. */
SaLibvirt *sa_libvirt_new(SaDaemon *d, const char *uri);
void sa_libvirt_free(SaLibvirt *lv);
/* Connects now; on failure schedules reconnects with back-off. Returns whether connected. */
bool sa_libvirt_connect(SaLibvirt *lv);
bool sa_libvirt_is_connected(const SaLibvirt *lv);
/* Re-reads every running domain (after a connect, SIGHUP). */
void sa_libvirt_sync(SaLibvirt *lv);

G_END_DECLS
