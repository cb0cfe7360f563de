/* softaff — event sensing: a BPF program on the scheduler's tracepoints that tells softaffd,
 * within milliseconds, that threads wait or start running on CPUs it watches (partitions whose
 * door is open to visitors), and keeps every tracked thread's run and wait in one map.
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
 * within the program's window, more than the threshold; or (ran) the tracked ones (vCPUs) not
 * ignored ran that long in the window after one in which they ran less (they started running,
 * perhaps alone: no wait). */
typedef struct {
    int cpu;
    pid_t tid;       /* the thread whose wait (or run) crossed the threshold */
    guint64 wait_ns; /* the window's accumulated wait on that CPU (ran: its run) */
    guint64 when_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
    bool ran;
} SaSenseEvent;

/* Loads and attaches the program; NULL with *error (SA_ERROR_UNSUPPORTED for a host without
 * what it needs, with the reason) otherwise. */
SaSense *sa_sense_new(GError **error);
void sa_sense_free(SaSense *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaSense, sa_sense_free)

/* The ring buffer's fd: readable when events wait (a main-loop watch, then sa_sense_drain). */
int sa_sense_fd(const SaSense *s);

/* A thread, or a process for all of its threads, whose waits and runs are no events on the
 * watched CPUs outside its home: a visitor (at home it is one of the owners). */
typedef struct {
    pid_t id;
    int home; /* a place of sa_sense_watch's cpu_place; -1: ignored everywhere */
} SaSenseIgnore;

/* The CPUs whose waits and starts of running are events (empty or NULL: none); cpu_place[cpu]
 * (n_places entries; NULL: none) the place (partition) each CPU is in, -1 none; and the
 * threads ignored outside their home place (NULL: none). Replaces the previous sets. */
bool sa_sense_watch(SaSense *s, const SaCpuSet *cpus, const int *cpu_place, guint n_places,
                    const SaSenseIgnore *ignore, guint n_ignore, GError **error);

/* A watched CPU's waits within window_us that add up to more than threshold_us make an event,
 * and so does its tracked threads' run past threshold_us in a window after one that did not
 * pass it; at most one event of each kind per CPU per window. Defaults: 2000 µs in 10000 µs. */
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
 * /proc/stat). visitor_ns (may be NULL): the same for the run of visitors' threads on each
 * watched CPU, the threads ignored at its place (sa_sense_watch: a visiting VM's vCPUs and its
 * QEMU process), the stretch under way included. False when the map cannot be read. */
bool sa_sense_cpu_idle(SaSense *s, guint n, guint64 *idle_ns, bool *known, guint64 *now_ns,
                       guint64 *visitor_ns);

G_END_DECLS
