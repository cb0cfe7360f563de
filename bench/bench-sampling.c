/* bench-sampling — what one tick's vCPU sampling costs, measured side by side on the running
 * libvirt guests: libvirt's bulk stats (virConnectGetAllDomainStats, VCPU group: one RPC; the
 * work happens in libvirtd) against softaff's per-thread reads (schedstat + stat of each vCPU
 * thread, files kept open across ticks, as softaffd does). Needs running guests.
 *
 *   bench-sampling [URI] [ITERATIONS]      (default qemu:///system, 2000) */
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "sa-paths.h"
#include "sa-sampler.h"

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

int main(int argc, char **argv)
{
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
    virConnectClose(conn);
    return 0;
}
