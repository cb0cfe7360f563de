/* softaff tests — a recording backend: it implements the backend contract (sa-backend.h) by
 * remembering every command, in one ordered log for all VMs, and can be told to fail a VM's
 * commands (transiently, as gone, as refused) or to block them until released. */
#pragma once

#include <glib.h>

#include "sa-backend.h"

G_BEGIN_DECLS

typedef enum {
    REC_OK,
    REC_TRANSIENT, /* SA_ERROR_TRANSIENT */
    REC_GONE,      /* SA_ERROR_GONE */
    REC_REFUSED,   /* SA_ERROR_UNSUPPORTED */
    REC_BLOCK,     /* wait until rec_vm_release() (or the mode changes) */
} RecMode;

typedef struct RecVm RecVm;

extern const SaBackendOps rec_ops;

/* A handle for one VM; facts is what discover returns (copied each time). */
RecVm *rec_vm_new(const char *key, const SaVmFacts *facts);
void rec_vm_unref(RecVm *r);
void rec_vm_set_mode(RecVm *r, RecMode mode);
/* Wakes commands blocked in REC_BLOCK (they return success). */
void rec_vm_release(RecVm *r);
/* Counters of commands that returned. */
guint rec_vm_pins(RecVm *r);
/* Pins and restores tried, failed ones included. */
guint rec_vm_attempts(RecVm *r);
/* Every thread's set of the last successful pin or restore: "vcpus=1;0-3 emulator=0-1 io1=2". */
char *rec_vm_last_threads(RecVm *r);
guint rec_vm_restores(RecVm *r);
guint rec_vm_writes(RecVm *r);
/* The vCPU set of the last successful pin or restore (vCPU 0), "" before any; g_free. */
char *rec_vm_last_vcpus(RecVm *r);
/* The last settings written (assigned), -1 before any. */
int rec_vm_last_assigned(RecVm *r);
/* Whether a command is blocked right now. */
gboolean rec_vm_blocked(RecVm *r);

/* Every command that returned, in order: "pin KEY 0-1 | 2-3", "restore KEY ...",
 * "write KEY assigned=1", "discover KEY". */
GPtrArray *rec_log(void);
void rec_log_clear(void);

/* Facts as a test backend reports them: pid, n vCPUs found by name, 1 GiB. */
SaVmFacts *rec_facts(const char *key, const char *name, pid_t pid, guint n_vcpus);

G_END_DECLS
