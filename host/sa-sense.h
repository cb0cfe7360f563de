/* softaff — event sensing: a BPF program on the scheduler's tracepoints that tells softaffd,
 * within milliseconds, that threads wait on CPUs it watches (partitions whose door is open to
 * visitors), and keeps every tracked thread's run and wait in one map.
 *
 * Where BPF cannot load (built without it, no BTF, no privilege, an old kernel) sa_sense_new()
 * fails with SA_ERROR_UNSUPPORTED naming why, and softaffd samples /proc on its tick alone.
 * docs/policy.md ("Sensing") explains how the daemon uses the events. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sa-cpuset.h"

G_BEGIN_DECLS

typedef struct SaSense SaSense;

/* One event: on watched CPU cpu, threads other than the ignored ones waited wait_ns in all
 * within the program's window, more than the threshold. */
typedef struct {
    int cpu;
    pid_t tid;       /* the thread whose wait crossed the threshold */
    guint64 wait_ns; /* the window's accumulated wait on that CPU */
    guint64 when_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
} SaSenseEvent;

/* Loads and attaches the program; NULL with *error (SA_ERROR_UNSUPPORTED for a host without
 * what it needs, with the reason) otherwise. */
SaSense *sa_sense_new(GError **error);
void sa_sense_free(SaSense *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaSense, sa_sense_free)

/* The ring buffer's fd: readable when events wait (a main-loop watch, then sa_sense_drain). */
int sa_sense_fd(const SaSense *s);

/* The CPUs whose waits are events (empty or NULL: none), and the threads whose own waits never
 * are (the visitors themselves; NULL: none): each id a thread's, or a process's for all of its
 * threads. Replaces the previous sets. */
bool sa_sense_watch(SaSense *s, const SaCpuSet *cpus, const pid_t *ignore, guint n_ignore,
                    GError **error);

/* A watched CPU's waits within window_us that add up to more than threshold_us make an event;
 * at most one event per CPU per window. Defaults: 2000 µs in 10000 µs. */
void sa_sense_set_threshold(SaSense *s, guint threshold_us, guint window_us);

/* Reads the waiting events into out (at most max), without blocking; returns how many. */
guint sa_sense_drain(SaSense *s, SaSenseEvent *out, guint max);

/* Tracks tid's run and wait (from the next switch on) until it exits; false when the map is
 * full. */
bool sa_sense_track(SaSense *s, pid_t tid);
void sa_sense_untrack(SaSense *s, pid_t tid);
/* The tracked thread's run and wait totals in ns since sa_sense_track (one map lookup), and the
 * CPU it last ran on (-1: not yet); false when it is not tracked (never, untracked, exited). */
bool sa_sense_thread_times(SaSense *s, pid_t tid, guint64 *run_ns, guint64 *delay_ns,
                           int *last_cpu);

/* Every tracked thread's times at once, in batches of map entries (a few system calls for
 * thousands of threads, where sa_sense_thread_times is one each): fn is called per thread;
 * returns how many. */
typedef void (*SaSenseTimesFunc)(pid_t tid, guint64 run_ns, guint64 delay_ns, int last_cpu,
                                 gpointer data);
guint sa_sense_all_times(SaSense *s, SaSenseTimesFunc fn, gpointer data);

/* Each CPU's idle time in ns since the program loaded, up to now (the idle stretch under way
 * included) into idle_ns[cpu] for cpu < n, and the monotonic time of the reading into *now_ns;
 * known[cpu] false where no switch was seen yet (an idle CPU that never woke: the caller asks
 * /proc/stat). False when the map cannot be read. */
bool sa_sense_cpu_idle(SaSense *s, guint n, guint64 *idle_ns, bool *known, guint64 *now_ns);

G_END_DECLS
