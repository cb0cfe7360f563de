/* bench-sampling — what one tick's vCPU sampling costs, measured side by side on the running
 * libvirt guests: libvirt's bulk stats (virConnectGetAllDomainStats, VCPU group: one RPC; the
 * work happens in libvirtd) against softaff's per-thread reads (schedstat + stat of each vCPU
 * thread, files kept open across ticks, as softaffd does), and, where the BPF sensor loads
 * (root, kernel BTF), one map lookup per vCPU (sa_sense_thread_times). Needs running guests.
 *
 * With --threads N, no guest: N idle threads of this process stand for the vCPUs, and the
 * figures are their run/wait read from /proc schedstat against one sensor lookup each.
 *
 *   bench-sampling [URI] [ITERATIONS]      (default qemu:///system, 2000)
 *   bench-sampling --threads N [ITERATIONS] (e.g. 4000 200) */
#include <libvirt/libvirt.h>
#include <pthread.h>
#include <sys/resource.h>
#include <libvirt/virterror.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "sa-paths.h"
#include "sa-sampler.h"
#include "sa-sense.h"

static double cpu_now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* utime + stime of a process, seconds. */
static double proc_cpu(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", pid);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    const char *p = strrchr(text, ')');
    if (!p)
        return 0;
    g_auto(GStrv) f = g_strsplit(p + 2, " ", 0);
    if (g_strv_length(f) < 13)
        return 0;
    return (g_ascii_strtod(f[11], NULL) + g_ascii_strtod(f[12], NULL)) / sysconf(_SC_CLK_TCK);
}

static pid_t libvirtd_pid(void)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents("/run/libvirtd.pid", &text, NULL, NULL))
        return -1;
    return (pid_t)atoi(text);
}

static void quiet(void *data, virErrorPtr err)
{
}

/* The vCPU threads of every running domain, found as softaffd finds them. */
static GPtrArray *vcpu_samplers(virConnectPtr conn, int *ndom)
{
    virDomainPtr *doms = NULL;
    *ndom = virConnectListAllDomains(conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    GPtrArray *samplers = g_ptr_array_new_with_free_func((GDestroyNotify)sa_thread_sampler_free);
    for (int i = 0; i < *ndom; i++) {
        g_autofree char *pidfile =
            g_strdup_printf("/run/libvirt/qemu/%s.pid", virDomainGetName(doms[i]));
        g_autofree char *text = NULL;
        pid_t pid = g_file_get_contents(pidfile, &text, NULL, NULL) ? (pid_t)atoi(text) : -1;
        g_autoptr(GArray) tids = pid > 0 ? sa_process_list_threads(pid, NULL) : NULL;
        for (guint k = 0; tids && k < tids->len; k++) {
            SaThreadSampler *t = sa_thread_sampler_new(pid, g_array_index(tids, pid_t, k), NULL);
            SaThreadSample sample;
            if (t && sa_thread_sampler_read(t, &sample, NULL) &&
                g_str_has_prefix(sample.comm, "CPU "))
                g_ptr_array_add(samplers, t);
            else
                sa_thread_sampler_free(t);
        }
        virDomainFree(doms[i]);
    }
    free(doms);
    return samplers;
}

typedef struct {
    double cpu, wall, libvirtd; /* seconds for all the rounds */
} Cost;

/* Per-thread reads, as softaffd does them. */
static Cost time_per_thread(GPtrArray *samplers, int iterations)
{
    double c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID), w0 = cpu_now(CLOCK_MONOTONIC);
    for (int it = 0; it < iterations; it++) {
        for (guint k = 0; k < samplers->len; k++) {
            SaThreadSample s;
            sa_thread_sampler_read(g_ptr_array_index(samplers, k), &s, NULL);
        }
    }
    return (Cost){cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0, cpu_now(CLOCK_MONOTONIC) - w0, 0};
}

/* Run time and wait only, from schedstat (the reads a sensor lookup replaces). */
static Cost time_schedstat(GPtrArray *samplers, int iterations)
{
    double c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID), w0 = cpu_now(CLOCK_MONOTONIC);
    for (int it = 0; it < iterations; it++) {
        for (guint k = 0; k < samplers->len; k++) {
            guint64 run, delay;
            sa_thread_sampler_read_times(g_ptr_array_index(samplers, k), &run, &delay, NULL);
        }
    }
    return (Cost){cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0, cpu_now(CLOCK_MONOTONIC) - w0, 0};
}

/* The BPF sensor: every thread tracked, then one map lookup per thread and round. NULL with
 * the reason printed when the sensor does not load here. */
static bool time_sense(GPtrArray *samplers, int iterations, Cost *cost)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaSense) s = sa_sense_new(&error);
    guint found = 0;
    if (!s) {
        printf("BPF sensor: not measured: %s\n", error->message);
        return false;
    }
    for (guint k = 0; k < samplers->len; k++)
        sa_sense_track(s, sa_thread_sampler_tid(g_ptr_array_index(samplers, k)));
    double c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID), w0 = cpu_now(CLOCK_MONOTONIC);
    for (int it = 0; it < iterations; it++) {
        for (guint k = 0; k < samplers->len; k++) {
            guint64 run, delay;
            int cpu;
            found += sa_sense_thread_times(s, sa_thread_sampler_tid(g_ptr_array_index(samplers, k)),
                                           &run, &delay, &cpu);
        }
    }
    *cost = (Cost){cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0, cpu_now(CLOCK_MONOTONIC) - w0, 0};
    if (found != samplers->len * (guint)iterations)
        printf("BPF sensor: %u of %u lookups found their thread\n", found,
               samplers->len * (guint)iterations);
    return true;
}

static void count_times(pid_t tid, guint64 run_ns, guint64 delay_ns, int last_cpu, gpointer data)
{
    (*(guint *)data)++;
}

/* The same through batched reads of the whole map. */
static Cost time_sense_batch(GPtrArray *samplers, int iterations)
{
    g_autoptr(SaSense) s = sa_sense_new(NULL);
    guint found = 0;
    for (guint k = 0; k < samplers->len; k++)
        sa_sense_track(s, sa_thread_sampler_tid(g_ptr_array_index(samplers, k)));
    double c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID), w0 = cpu_now(CLOCK_MONOTONIC);
    for (int it = 0; it < iterations; it++)
        sa_sense_all_times(s, count_times, &found);
    Cost cost = {cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0, cpu_now(CLOCK_MONOTONIC) - w0, 0};
    if (found != samplers->len * (guint)iterations)
        printf("BPF sensor: the batches gave %u of %u threads\n", found,
               samplers->len * (guint)iterations);
    return cost;
}

static void print_row(const char *what, Cost c, int iterations, guint n)
{
    printf("%-34s %12.1f %12.1f %14.3f\n", what, 1e6 * c.cpu / iterations,
           1e6 * c.wall / iterations, 1e6 * c.cpu / iterations / n);
}

/* /proc schedstat against the sensor, side by side, and their ratio. */
static void print_sense_rows(GPtrArray *samplers, int iterations)
{
    Cost proc = time_schedstat(samplers, iterations), bpf;
    print_row("run/wait from /proc schedstat", proc, iterations, samplers->len);
    if (!time_sense(samplers, iterations, &bpf))
        return;
    Cost batch = time_sense_batch(samplers, iterations);
    print_row("run/wait from the BPF map, 1 each", bpf, iterations, samplers->len);
    print_row("run/wait from the BPF map, batched", batch, iterations, samplers->len);
    printf("BPF map, 1 lookup each, vs /proc schedstat: %.1fx less CPU, %.1fx less wall time\n",
           bpf.cpu > 0 ? proc.cpu / bpf.cpu : 0, bpf.wall > 0 ? proc.wall / bpf.wall : 0);
    printf("BPF map, batched, vs /proc schedstat: %.1fx less CPU, %.1fx less wall time\n",
           batch.cpu > 0 ? proc.cpu / batch.cpu : 0, batch.wall > 0 ? proc.wall / batch.wall : 0);
}

/* libvirt's bulk stats: our CPU (RPC, decoding) plus libvirtd's. */
static bool time_bulk(virConnectPtr conn, int iterations, Cost *cost)
{
    pid_t lvd = libvirtd_pid();
    double l0 = lvd > 0 ? proc_cpu(lvd) : 0;
    double c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID), w0 = cpu_now(CLOCK_MONOTONIC);
    for (int it = 0; it < iterations; it++) {
        virDomainStatsRecordPtr *recs = NULL;
        int n = virConnectGetAllDomainStats(conn, VIR_DOMAIN_STATS_VCPU, &recs,
                                            VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
        if (n < 0)
            return false;
        virDomainStatsRecordListFree(recs);
    }
    cost->cpu = cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    cost->wall = cpu_now(CLOCK_MONOTONIC) - w0;
    cost->libvirtd = lvd > 0 ? proc_cpu(lvd) - l0 : 0;
    return true;
}

static void print_costs(int ndom, guint nvcpu, int iterations, Cost own, Cost bulk)
{
    printf("vCPU sampling, %d domains, %u vCPUs, %d rounds (one round = one tick)\n", ndom, nvcpu,
           iterations);
    printf("%-34s %12s %12s %14s\n", "method", "CPU us/tick", "wall us/tick", "CPU us/vCPU");
    printf("%-34s %12.1f %12.1f %14.2f\n", "per-thread schedstat+stat (softaff)",
           1e6 * own.cpu / iterations, 1e6 * own.wall / iterations,
           1e6 * own.cpu / iterations / nvcpu);
    printf("%-34s %12.1f %12.1f %14.2f\n", "libvirt bulk stats: client",
           1e6 * bulk.cpu / iterations, 1e6 * bulk.wall / iterations,
           1e6 * bulk.cpu / iterations / nvcpu);
    printf("%-34s %12.1f %12s %14.2f\n", "libvirt bulk stats: + libvirtd",
           1e6 * (bulk.cpu + bulk.libvirtd) / iterations, "-",
           1e6 * (bulk.cpu + bulk.libvirtd) / iterations / nvcpu);
    printf("(bulk stats also lack the CPU each vCPU last ran on, which the policy needs)\n");
}

static void *idle_thread(void *data)
{
    GMutex *lock = data;
    g_mutex_lock(lock); /* held by main until the end */
    g_mutex_unlock(lock);
    return NULL;
}

/* --threads N: N idle threads of this process, sampled like vCPUs (two files open each). */
static int run_threads(guint n, int iterations)
{
    struct rlimit rl;
    GMutex lock;
    pthread_attr_t attr;
    g_autofree pthread_t *threads = g_new0(pthread_t, n);
    g_autoptr(GPtrArray) samplers =
        g_ptr_array_new_with_free_func((GDestroyNotify)sa_thread_sampler_free);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    g_mutex_init(&lock);
    g_mutex_lock(&lock);
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    guint started = 0;
    while (started < n && pthread_create(&threads[started], &attr, idle_thread, &lock) == 0)
        started++;
    g_autoptr(GArray) tids = sa_process_list_threads(getpid(), NULL);
    for (guint k = 0; tids && k < tids->len; k++) {
        pid_t tid = g_array_index(tids, pid_t, k);
        SaThreadSampler *t = tid != getpid() ? sa_thread_sampler_new(getpid(), tid, NULL) : NULL;
        if (t)
            g_ptr_array_add(samplers, t);
    }
    printf("thread run/wait, %u threads (%u asked), %d rounds (one round = one tick)\n",
           samplers->len, n, iterations);
    printf("%-34s %12s %12s %14s\n", "method", "CPU us/tick", "wall us/tick", "CPU us/thread");
    if (samplers->len > 0)
        print_sense_rows(samplers, iterations);
    g_mutex_unlock(&lock);
    for (guint k = 0; k < started; k++)
        pthread_join(threads[k], NULL);
    g_mutex_clear(&lock);
    return samplers->len > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "--threads") == 0)
        return run_threads((guint)atoi(argv[2]), argc > 3 ? atoi(argv[3]) : 200);
    const char *uri = argc > 1 ? argv[1] : "qemu:///system";
    int iterations = argc > 2 ? atoi(argv[2]) : 2000;
    virSetErrorFunc(NULL, quiet);
    virConnectPtr conn = virConnectOpen(uri);
    if (!conn) {
        fprintf(stderr, "bench-sampling: cannot connect to %s\n", uri);
        return 1;
    }
    int ndom = 0;
    g_autoptr(GPtrArray) samplers = vcpu_samplers(conn, &ndom);
    if (samplers->len == 0) {
        fprintf(stderr, "bench-sampling: no running guest with vCPU threads on %s\n", uri);
        return 1;
    }
    Cost own = time_per_thread(samplers, iterations), bulk = {0};
    if (!time_bulk(conn, iterations, &bulk)) {
        fprintf(stderr, "bench-sampling: bulk stats failed\n");
        return 1;
    }
    print_costs(ndom, samplers->len, iterations, own, bulk);
    print_sense_rows(samplers, iterations);
    virConnectClose(conn);
    return 0;
}
