/* softaffd — the QMP backend: QEMU processes that libvirt does not manage, found through the
 * [qmp] sockets globs, pinned with sched_setaffinity, configured by [vm NAME] groups. */
#pragma once

#include <glib.h>

#include "core.h"

G_BEGIN_DECLS

typedef struct SaQmp SaQmp;

SaQmp *sa_qmp_new(SaDaemon *d);
/* Forgets every QMP VM (without restoring: call sa_daemon_restore_all() first) and closes. */
void sa_qmp_free(SaQmp *q);
/* Scans the globs now and then every few seconds for new sockets. */
void sa_qmp_start(SaQmp *q);
/* After a configuration reload: re-reads every VM's [vm NAME] settings, drops sockets that no
 * longer match a glob, scans for new ones. */
void sa_qmp_sync(SaQmp *q);

G_END_DECLS
