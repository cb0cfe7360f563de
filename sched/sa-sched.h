/* softaff — the scheduler part (sched/): a sched_ext BPF scheduler for vCPU threads in
 * partial-switch mode, and this narrow interface to it. The caller (softaffd) feeds it the
 * partitions, their distances, and per vCPU thread a home, softness and VM id; the scheduler
 * keeps each thread at home, lets it burst onto idle CPUs of other partitions within its own
 * cpumask, and counts where it ran. Nothing here pins: every thread keeps its own affinity.
 *
 * Lifetime: sa_sched_load() (checks the kernel, loads the program) -> sa_sched_set_partitions()
 * -> sa_sched_attach() -> sa_sched_add_thread()... -> sa_sched_detach() -> sa_sched_free().
 * The kernel holds the scheduler through a link owned by this process: if the process dies,
 * the kernel unloads it and every thread runs on the fair class again (its policy still reads
 * SCHED_EXT until changed; sa_sched_detach() sets SCHED_OTHER). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

G_BEGIN_DECLS

#define SA_SCHED_PARTS 16 /* partitions the scheduler knows, ids 0 .. SA_SCHED_PARTS - 1 */
#define SA_SCHED_EXT 7    /* the SCHED_EXT scheduling policy */

typedef struct SaSched SaSched;

/* One thread's counters, as the scheduler keeps them since it was added. */
typedef struct {
    pid_t tid;
    guint vm;
    guint home;
    guint last_part;                /* partition of the last run; G_MAXUINT: none yet */
    guint64 run_ns[SA_SCHED_PARTS]; /* run time per partition */
    guint64 wait_ns;                /* runnable but not running */
    guint64 runs;                   /* times it started running */
    guint64 visits;                 /* arrivals on a partition other than home */
    guint64 preempts;               /* visitors it kicked off its home CPUs */
    guint64 preempted;              /* times it was kicked off as a visitor */
} SaSchedCounters;

/* Why the kernel stopped the scheduler (sa_sched_ejected). */
typedef struct {
    int kind;         /* the kernel's enum scx_exit_kind: 0 still running */
    const char *what; /* kind as a word: "unregistered", "error", "stall", ... */
    gint64 exit_code;
    char reason[128]; /* the kernel's reason, e.g. "runnable task stall" */
    char msg[256];    /* the kernel's message, e.g. which task stalled on which CPU */
    char *dump;       /* the start of the kernel's dump of its state (error exits), or NULL;
                       * the caller frees it */
} SaSchedExit;

/* Whether this build and this kernel can run the scheduler; if not, why (SA_ERROR_UNSUPPORTED):
 * built without BPF, no sched_ext in the kernel, no kernel BTF. */
bool sa_sched_available(GError **error);

/* Loads the program (not yet the scheduler). SA_ERROR_UNSUPPORTED as above; SA_ERROR_IO when the
 * kernel refuses the program (the verifier's or libbpf's reason in the message). */
SaSched *sa_sched_load(GError **error);

/* cpu_part[cpu]: the partition of each CPU (G_MAXUINT: none; its ext tasks are never placed
 * there). distance[a * n_parts + b]: how far b is from a (e.g. the NUMA distance); each
 * partition's other partitions are tried nearest first, ties by id. Callable again at any time. */
bool sa_sched_set_partitions(SaSched *s, const guint *cpu_part, guint n_cpus, guint n_parts,
                             const guint *distance, GError **error);

/* Makes it the kernel's sched_ext scheduler (partial switch). SA_ERROR_TRANSIENT if another
 * sched_ext scheduler is loaded (named in the message). */
bool sa_sched_attach(SaSched *s, GError **error);
bool sa_sched_attached(const SaSched *s);

/* The partitions a thread with this softness may visit, nearest first: 0 for strict or softness
 * 0 (never leaves home), all others at 100, the nearest ceil(softness * (n_parts - 1) / 100)
 * in between. */
guint sa_sched_reach(guint softness, bool strict, guint n_parts);

/* Feeds the thread's home and softness and switches it to SCHED_EXT (its nice value and
 * affinity unchanged). Again for a thread already added: updates home and softness.
 * SA_ERROR_GONE if the thread is gone, SA_ERROR_RANGE for a bad home or softness,
 * SA_ERROR_UNSUPPORTED for a real-time or deadline thread (left alone). */
bool sa_sched_add_thread(SaSched *s, pid_t tid, guint home, guint softness, bool strict, guint vm,
                         GError **error);

/* Switches it back to SCHED_OTHER and forgets it. A thread that is gone is no error. */
bool sa_sched_remove_thread(SaSched *s, pid_t tid, GError **error);

/* Forgets a thread that is gone (its id may be reused: its policy is not touched). */
void sa_sched_forget_thread(SaSched *s, pid_t tid);

/* A thread left in SCHED_EXT by a loader that is gone (SIGKILL): the kernel runs it on the fair
 * class, but a sched_ext scheduler loaded later (anyone's) would take it. Sets SCHED_OTHER, nice
 * and affinity unchanged, and says so in *was_ext; any other policy is left alone. Needs no
 * loaded scheduler (any kernel, any build). A thread that is gone is no error. */
bool sa_sched_release_thread(pid_t tid, bool *was_ext, GError **error);

/* Every added thread's counters in one batch read of the scheduler's map; appends
 * SaSchedCounters to out and returns how many. */
bool sa_sched_read(SaSched *s, GArray *out, GError **error);

/* Whether the kernel has stopped the scheduler (watchdog, error, sysrq, unregistration) and
 * why. Once true, the threads run on the fair class: call sa_sched_detach(). */
bool sa_sched_ejected(SaSched *s, SaSchedExit *out);

/* Switches every added thread back to SCHED_OTHER, then unloads the scheduler. */
void sa_sched_detach(SaSched *s);
void sa_sched_free(SaSched *s);

/* Test-only fault: with on, the scheduler stops dispatching its threads, so the kernel's
 * watchdog ejects it within its timeout (sa_sched_timeout_ms). */
void sa_sched_fault_stall(SaSched *s, bool on);
guint sa_sched_timeout_ms(void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaSched, sa_sched_free)

G_END_DECLS
