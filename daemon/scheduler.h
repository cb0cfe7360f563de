/* softaffd — actuation by the sched_ext scheduler ([actuation] mode, daemon/scheduler.c): the
 * calls into the scheduler part (sched/sa-sched.h) as a table, so the core's unit tests drive
 * its sched_ext mode with a fake scheduler on a kernel without sched_ext. Main thread only. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "core.h"
#include "sa-sched.h"

G_BEGIN_DECLS

typedef struct {
    /* Whether the scheduler could run on this host; else why (SA_ERROR_UNSUPPORTED). */
    bool (*available)(gpointer data, GError **error);
    /* Loads it, gives it the partitions (see sa_sched_set_partitions) and makes it the
     * kernel's sched_ext scheduler; NULL with why. */
    gpointer (*start)(gpointer data, const guint *cpu_part, guint n_cpus, guint n_parts,
                      const guint *distance, GError **error);
    bool (*set_partitions)(gpointer sched, const guint *cpu_part, guint n_cpus, guint n_parts,
                           const guint *distance, GError **error);
    /* As sa_sched_add_thread, sa_sched_remove_thread, sa_sched_forget_thread, sa_sched_read,
     * sa_sched_ejected. */
    bool (*add_thread)(gpointer sched, pid_t tid, guint home, guint softness, bool strict, guint vm,
                       GError **error);
    bool (*remove_thread)(gpointer sched, pid_t tid, GError **error);
    void (*forget_thread)(gpointer sched, pid_t tid);
    bool (*read)(gpointer sched, GArray *out, GError **error);
    bool (*ejected)(gpointer sched, SaSchedExit *out);
    /* Every thread back to SCHED_OTHER, the scheduler unloaded, sched freed. */
    void (*stop)(gpointer sched);
    /* As sa_sched_release_thread (needs no scheduler); NULL: never. */
    bool (*release_thread)(gpointer data, pid_t tid, bool *was_ext, GError **error);
} SaSchedOps;

/* The host's: sched/sa-sched.h. While SOFTAFF_PROC_ROOT points at a fake /proc (its thread ids
 * are no threads of this host), start refuses and release_thread does nothing. */
extern const SaSchedOps sa_sched_host_ops;
/* Before sa_core_start_actuation (tests). */
void sa_core_set_sched_ops(SaCore *core, const SaSchedOps *ops, gpointer data);

/* Chooses the actuation as [actuation] mode says: auto takes the scheduler when it starts,
 * else re-pinning, logging which and why once; sched_ext returns false naming why (softaffd
 * then refuses to start); pin never loads it. Not called: re-pinning ("not started"). dry_run
 * cores only check that the scheduler could run (auto and pin re-pin, which sends nothing). */
bool sa_core_start_actuation(SaCore *core, GError **error);
/* Every thread the scheduler runs back to the fair class with its own set, the scheduler
 * unloaded; re-pinning from then on (SIGTERM, freeing the core). */
void sa_core_stop_actuation(SaCore *core);
/* "sched_ext" or "pin". */
const char *sa_core_actuation_mode(const SaCore *core);
/* Why that mode, and how often the kernel ejected the scheduler. */
const char *sa_core_actuation_reason(const SaCore *core);
guint64 sa_core_sched_ejections(const SaCore *core);

G_END_DECLS
