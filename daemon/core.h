/* softaffd — the daemon core: the VMs the backends reported, the tick (sample, decide, act) and
 * the actuation that never blocks it. This is the interface of softaffd's main, its tests and
 * the benchmarks; backends use sa-backend.h; the control server and the metrics read the
 * internals through core-private.h. Main thread only. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "sa-backend.h"
#include "sa-config.h"
#include "sa-topology.h"

G_BEGIN_DECLS

/* Takes cfg and topo. dry_run: decide and log, send no command. */
SaCore *sa_core_new(SaConfig *cfg, SaTopology *topo, bool dry_run, GError **error);
/* Frees the core. Commands still running keep what they need alive and are abandoned. */
void sa_core_free(SaCore *core);

/* Swaps in a new configuration and topology (SIGHUP; takes both). Every home is decided again;
 * counters keep counting. Backends should report every VM again (their sync). */
void sa_core_reload(SaCore *core, SaConfig *cfg, SaTopology *topo);

/* One tick: sample the host and the managed VMs, run the policy, queue the commands. Returns
 * at once: commands run on workers and report back through the main loop. */
void sa_core_tick(SaCore *core);

/* The regular timer's tick: sa_core_tick(), unless a tick ran less than the shortest event gap
 * (20 ms) ago. A tick then would measure a few ms, too short to judge anyone's load, and would
 * cancel the event tick that follows up the owners' sign; the next regular tick keeps the
 * schedule. Returns whether it ticked. */
bool sa_core_regular_tick(SaCore *core);

/* Runs the default main context until no command is queued or running, or timeout_ms passed.
 * Returns whether everything settled (for --once, tests and benchmarks). */
bool sa_core_settle(SaCore *core, guint timeout_ms);

typedef void (*SaCoreStoppedFunc)(gpointer user_data);
/* Stops deciding and restores every VM softaff changed; calls done from the main loop when
 * every restore answered or [daemon] stop_timeout_ms passed (those that did not answer are
 * logged). No command but restores is sent once this was called. */
void sa_core_shutdown(SaCore *core, SaCoreStoppedFunc done, gpointer user_data);
/* Commands still running on workers (after a shutdown: those that never answered). */
guint sa_core_commands_running(const SaCore *core);

G_END_DECLS
