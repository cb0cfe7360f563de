/* softaffd — the libvirt backend: the connection, domain events and discovery of running
 * domains on the main thread; every call that can wait on a domain job or the QEMU monitor in
 * the SaBackendOps callbacks the core runs on its workers. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "sa-backend.h"

G_BEGIN_DECLS

typedef struct SaLibvirt SaLibvirt;

/* The libvirt event loop must be registered (virEventRegisterDefaultImpl) before this; the
 * GLib main loop runs it. uri: e.g. qemu:///system. */
SaLibvirt *sa_libvirt_new(SaCore *core, const char *uri);
void sa_libvirt_free(SaLibvirt *lv);
/* Connects now, unless connected or connecting: virConnectOpen runs in a thread (it blocks as
 * long as libvirtd does not answer) and the connection is finished on the main loop, which
 * then registers for events and syncs. A failed open is retried with back-off (0.5 s doubling
 * to 30 s), as is a lost connection. Returns whether the connection is up on return: false
 * while it is being opened. */
bool sa_libvirt_connect(SaLibvirt *lv);
bool sa_libvirt_is_connected(const SaLibvirt *lv);
/* Re-discovers every running domain and forgets the VMs that no longer run (after a connect,
 * SIGHUP). The listing runs in a thread (libvirtd may be slow to answer it) and is applied on
 * the main loop; a sync asked for meanwhile runs after it. */
void sa_libvirt_sync(SaLibvirt *lv);
/* Whether a sync's listing is under way. */
bool sa_libvirt_syncing(const SaLibvirt *lv);

G_END_DECLS
