/* softaff — samplers of /proc: per-CPU utilization and per-thread run time, run delay, last CPU. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

G_BEGIN_DECLS

/* One CPU's counters from /proc/stat, in USER_HZ ticks. */
typedef struct {
    int cpu;
    guint64 user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice;
} SaCpuTimes;

/* Parses the "cpuN ..." lines of a /proc/stat buffer (the aggregate "cpu" line is skipped).
 * Returns a GArray of SaCpuTimes ordered as in the file. */
GArray *sa_procstat_parse(const char *buf, gsize len, GError **error);

/* Utilization of one CPU between two samples, as fractions of the elapsed ticks (0..1).
 * busy = user+nice+system+irq+softirq (guest time is already inside user/nice: counted once);
 * steal is reported apart and not counted as busy or idle. */
typedef struct {
    int cpu;
    double busy, idle, iowait, steal;
} SaCpuLoad;

void sa_cpu_load_compute(const SaCpuTimes *prev, const SaCpuTimes *cur, SaCpuLoad *out);

/* Keeps /proc/stat open and samples it; the first sample only primes. */
typedef struct SaStatSampler SaStatSampler;
SaStatSampler *sa_stat_sampler_new(GError **error);
void sa_stat_sampler_free(SaStatSampler *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaStatSampler, sa_stat_sampler_free)
/* Fills loads (GArray of SaCpuLoad, cleared first) with the utilization since the previous call.
 * Returns false with *error only on a read/parse failure; the first call returns true and an
 * empty array. */
bool sa_stat_sampler_sample(SaStatSampler *s, GArray *loads, GError **error);

/* Thread counters. */
typedef struct {
    guint64 run_ns;   /* schedstat field 1: time on CPU */
    guint64 delay_ns; /* schedstat field 2: time runnable but waiting */
    int last_cpu;     /* stat field 39 "processor" */
    char comm[64];    /* stat field 2, without the parentheses */
} SaThreadSample;

bool sa_schedstat_parse(const char *buf, guint64 *run_ns, guint64 *delay_ns, GError **error);
/* Parses /proc/<pid>/task/<tid>/stat; comm may contain spaces and ')': fields are read after
 * the last ')'. */
bool sa_thread_stat_parse(const char *buf, char *comm, gsize comm_size, int *last_cpu,
                          GError **error);

/* Keeps a thread's schedstat and stat open across ticks (pread). */
typedef struct SaThreadSampler SaThreadSampler;
SaThreadSampler *sa_thread_sampler_new(pid_t pid, pid_t tid, GError **error);
void sa_thread_sampler_free(SaThreadSampler *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaThreadSampler, sa_thread_sampler_free)
/* SA_ERROR_GONE when the thread has exited. */
bool sa_thread_sampler_read(SaThreadSampler *t, SaThreadSample *out, GError **error);

/* Run time and run delay only (schedstat): half the reads, for threads whose CPU is known. */
bool sa_thread_sampler_read_times(SaThreadSampler *t, guint64 *run_ns, guint64 *delay_ns,
                                  GError **error);

/* Whether the kernel gives threads a schedstat (CONFIG_SCHED_INFO): checked on a live thread
 * (the caller's own), whose stat must be there. Without it the thread samplers cannot measure
 * anything; the error names the missing file and the kernel option (SA_ERROR_UNSUPPORTED), or
 * why the thread's directory cannot be read. */
bool sa_schedstat_check(pid_t pid, pid_t tid, GError **error);

/* The thread id the sampler reads. */
pid_t sa_thread_sampler_tid(const SaThreadSampler *t);

/* The state letter of /proc/<pid>/stat ('R', 'S', 'T' stopped, 'Z' zombie, ...), read after
 * the last ')' since the command name may hold one; 0 when the file cannot be read. */
char sa_process_state(pid_t pid);
/* Lists the thread ids of a process (/proc/<pid>/task). */
GArray *sa_process_list_threads(pid_t pid, GError **error);
/* Reads /proc/<pid>/task/<tid>/status "Cpus_allowed_list". */
struct SaCpuSet *sa_thread_read_allowed(pid_t pid, pid_t tid, GError **error);

G_END_DECLS
