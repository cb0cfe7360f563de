/* softaffd — the actuator's fast narrowing: what the tests inject and what status and the
 * metrics may read. Main thread only. */
#pragma once

#include <glib.h>
#include <sys/types.h>

#include "core.h"
#include "sa-cpuset.h"

G_BEGIN_DECLS

/* The kernel's affinity calls on one thread; each returns 0 or an errno. */
typedef struct {
    int (*get)(gpointer data, pid_t tid, SaCpuSet **out);
    int (*set)(gpointer data, pid_t tid, const SaCpuSet *set);
} SaAffinityOps;

/* The host's (sched_getaffinity/sched_setaffinity); NULL turns the fast path off. The default is
 * the host's, or none while SOFTAFF_PROC_ROOT points at a fake /proc (its thread ids are no
 * threads of this host). */
extern const SaAffinityOps sa_affinity_host_ops;
void sa_actuator_set_affinity_ops(SaCore *core, const SaAffinityOps *ops, gpointer data);

/* Lifetime counters of the fast path (never reset while the daemon runs). */
typedef struct {
    guint64 narrowed; /* vCPU threads narrowed at once, ahead of their backend pin */
    guint64 failed;   /* tries that failed (the pin still ran) */
} SaFastStats;

void sa_actuator_fast_stats(const SaCore *core, SaFastStats *out);

G_END_DECLS
