/* softaffd — the QMP backend's record of original affinities, private to qmp/.
 *
 * The affinity each thread of a QEMU process had before softaff first changed it, kept in a
 * state file beside the control socket (qmp-originals.ini), so that a daemon restarted after
 * --once, a crash or a restart puts back the real originals, not its own pins. One group per
 * process behind a socket, named "<socket, URI-escaped> <pid> <start time>" (the start time,
 * /proc/PID/stat field 22, tells a new QEMU that got the same pid from the old one); one key
 * per thread id, its cpulist as value. Refcounted and locked: the main thread and the workers
 * of different VMs use it. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef struct QmpState QmpState;

QmpState *qmp_state_new(void);
QmpState *qmp_state_ref(QmpState *state);
void qmp_state_unref(QmpState *state);
/* The file beside this control socket; NULL: no file (kept nowhere). */
void qmp_state_set_socket(QmpState *state, const char *control_socket);
/* The file in use, NULL when none; free with g_free. */
char *qmp_state_file(QmpState *state);

/* The originals recorded for the process (tid -> SaCpuSet*); an empty table when none. */
GHashTable *qmp_state_load(QmpState *state, const char *socket, pid_t pid, guint64 start);
/* Replaces the process's entry with originals (tid -> SaCpuSet*); an empty or NULL table
 * removes it. The file is replaced atomically; a failure is logged once (then, a restarted
 * softaffd would take softaff's pins for originals). */
void qmp_state_save(QmpState *state, const char *socket, pid_t pid, guint64 start,
                    GHashTable *originals);
/* Removes the entries of processes that no longer run (no such pid, or another start time). */
void qmp_state_prune(QmpState *state);

G_END_DECLS
