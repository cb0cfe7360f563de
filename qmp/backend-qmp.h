/* softaffd — the QMP backend: QEMU processes that libvirt does not manage, found through the
 * [qmp] sockets globs, pinned with sched_setaffinity, configured by [vm NAME] groups. It reports
 * what it finds to the core and carries out the core's commands (daemon/sa-backend.h). */
#pragma once

#include <glib.h>

#include "sa-backend.h"

G_BEGIN_DECLS

typedef struct SaQmp SaQmp;

SaQmp *sa_qmp_new(SaCore *core);
/* Forgets every VM it reported (sa_core_forget, without restoring: the core restores them
 * before this) and closes its connections. */
void sa_qmp_free(SaQmp *q);
/* Scans the [qmp] sockets globs now and then every few seconds for new sockets. */
void sa_qmp_start(SaQmp *q);
/* After a configuration reload: reports every VM again with its re-read [vm NAME] settings,
 * drops sockets that no longer match a glob, scans for new ones. */
void sa_qmp_sync(SaQmp *q);

G_END_DECLS
