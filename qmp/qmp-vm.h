/* softaffd — the QMP backend's per-VM handle (what the core's SaBackendOps callbacks receive)
 * and its per-socket memory of assigned homes. Private to qmp/.
 *
 * Threads. The handle is shared by the main thread (the QMP conversation, backend-qmp.c) and
 * the core's worker threads (pin, restore, write_assigned): what both touch is guarded by a
 * lock, named next to each field below. Workers never see the connection. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "qmp-state.h"
#include "sa-backend.h"

G_BEGIN_DECLS

/* The home softaff chose for preferred=auto, per QMP socket path. In memory only: it survives a
 * QEMU reset, a reconnect and a reload, not a restart of softaffd. Refcounted, so that handles
 * the core still holds after the backend is gone keep it; every call is thread-safe. */
typedef struct QmpHomes QmpHomes;

QmpHomes *qmp_homes_new(void);
QmpHomes *qmp_homes_ref(QmpHomes *homes);
void qmp_homes_unref(QmpHomes *homes);
/* The home recorded for the socket, -1 when none. */
int qmp_homes_get(QmpHomes *homes, const char *path);
/* Records a home; home < 0 forgets it. */
void qmp_homes_set(QmpHomes *homes, const char *path, int home);

/* One QEMU process behind one QMP connection. The backend keeps the same handle for as long as
 * the connection lives (reports after a reset or a reload reuse it). */
typedef struct {
    gint ref; /* atomic */

    /* Set by qmp_vm_new, never changed: read without a lock. */
    char *path;         /* the QMP socket */
    pid_t pid;          /* the QEMU process (SO_PEERCRED) */
    guint64 start_time; /* of pid (/proc/PID/stat field 22) when first seen; 0 unknown */
    QmpHomes *homes;    /* a reference; locks itself */
    QmpState *state;    /* a reference; locks itself */

    /* Main thread only, no lock: the backend's connection while it lives, NULL after. */
    gpointer conn;

    /* lock guards the fields below, touched by the main thread and by workers. */
    GMutex lock;
    GArray *vcpu_tids;    /* pid_t per vCPU index as last reported (0 = unknown) */
    GHashTable *original; /* tid -> SaCpuSet*: the thread's affinity before softaff's first
                             write to it, also in the state file (written before that write);
                             entries of exited threads are dropped at each command, all of
                             them once every thread got its own back */
    bool released;        /* its threads were handed back (the VM was forgotten): commands
                             are refused with SA_ERROR_GONE until it is reported again */
} QmpVm;

/* Main thread. The originals the state file holds for this very process (same pid and start
 * time) are taken for threads it still has: a restarted softaffd puts those back, not the
 * affinities it finds, which may be its own pins. */
QmpVm *qmp_vm_new(const char *path, pid_t pid, guint64 start_time, QmpHomes *homes,
                  QmpState *state);
/* Main thread: the remembered original affinity of one thread, NULL when none. */
SaCpuSet *qmp_vm_original(QmpVm *vm, pid_t tid);
/* SaBackendOps.handle_ref/handle_unref: any thread. */
gpointer qmp_vm_ref(gpointer handle);
void qmp_vm_unref(gpointer handle);

/* Main thread, before reporting the VM: takes the vCPU threads QEMU listed and accepts
 * commands again. */
void qmp_vm_update(QmpVm *vm, const GArray *vcpu_tids);
/* Main thread, after the core forgot a VM whose process still runs (shut down with
 * -no-shutdown, QMP connection lost, socket dropped from the config): gives every thread softaff
 * wrote its remembered affinity back and refuses later commands. Threads that exited are no
 * error. */
bool qmp_vm_release(QmpVm *vm, GError **error);

/* SaBackendOps callbacks (worker threads; each takes the handle's lock). Only threads of the
 * process are written: each is checked to be one right before its sched_setaffinity. Errors:
 * SA_ERROR_GONE when the process exited (or its pid is another process's now),
 * SA_ERROR_TRANSIENT when one of its vCPU threads exited (or is no thread of it) while it
 * runs, SA_ERROR_UNSUPPORTED when the kernel refuses the affinity (EPERM, EINVAL). */
bool qmp_vm_pin(gpointer handle, const SaCommand *cmd, GError **error);
bool qmp_vm_restore(gpointer handle, const SaCommand *cmd, GError **error);
bool qmp_vm_write_assigned(gpointer handle, const SaCommand *cmd, GError **error);

/* A thread's current affinity (sched_getaffinity); NULL with an SA_ERROR when it cannot be
 * read. */
SaCpuSet *qmp_thread_affinity(pid_t pid, pid_t tid, GError **error);
/* Running, and not a zombie (a process that exited but was not reaped yet). */
bool qmp_process_alive(pid_t pid);

G_END_DECLS
