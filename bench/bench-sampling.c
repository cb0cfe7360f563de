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
    /* The vCPU threads of every running domain, found as softaffd finds them. */
    virDomainPtr *doms = NULL;
    int ndom = virConnectListAllDomains(conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    g_autoptr(GPtrArray) samplers =
        g_ptr_array_new_with_free_func((GDestroyNotify)sa_thread_sampler_free);
    for (int i = 0; i < ndom; i++) {
        g_autofree char *pidfile =
            g_strdup_printf("/run/libvirt/qemu/%s.pid", virDomainGetName(doms[i]));
        g_autofree char *text = NULL;
        if (!g_file_get_contents(pidfile, &text, NULL, NULL))
            continue;
        pid_t pid = (pid_t)atoi(text);
        g_autoptr(GArray) tids = sa_process_list_threads(pid, NULL);
        for (guint k = 0; tids && k < tids->len; k++) {
            pid_t tid = g_array_index(tids, pid_t, k);
            SaThreadSampler *t = sa_thread_sampler_new(pid, tid, NULL);
            SaThreadSample s;
            if (t && sa_thread_sampler_read(t, &s, NULL) && g_str_has_prefix(s.comm, "CPU "))
                g_ptr_array_add(samplers, t);
            else
                sa_thread_sampler_free(t);
        }
    }
    guint nvcpu = samplers->len;
    if (nvcpu == 0) {
        fprintf(stderr, "bench-sampling: no running guest with vCPU threads on %s\n", uri);
        return 1;
    }
    pid_t lvd = libvirtd_pid();

    /* Per-thread reads, as softaffd does them. */
    double c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID), w0 = cpu_now(CLOCK_MONOTONIC);
    for (int it = 0; it < iterations; it++) {
        for (guint k = 0; k < nvcpu; k++) {
            SaThreadSample s;
            sa_thread_sampler_read(g_ptr_array_index(samplers, k), &s, NULL);
        }
    }
    double own_cpu = cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    double own_wall = cpu_now(CLOCK_MONOTONIC) - w0;

    /* libvirt's bulk stats: our CPU (RPC, decoding) plus libvirtd's. */
    double l0 = lvd > 0 ? proc_cpu(lvd) : 0;
    c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
    w0 = cpu_now(CLOCK_MONOTONIC);
    for (int it = 0; it < iterations; it++) {
        virDomainStatsRecordPtr *recs = NULL;
        int n = virConnectGetAllDomainStats(conn, VIR_DOMAIN_STATS_VCPU, &recs,
                                            VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE);
        if (n < 0) {
            fprintf(stderr, "bench-sampling: bulk stats failed\n");
            return 1;
        }
        virDomainStatsRecordListFree(recs);
    }
    double bulk_cpu = cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    double bulk_wall = cpu_now(CLOCK_MONOTONIC) - w0;
    double bulk_lvd = lvd > 0 ? proc_cpu(lvd) - l0 : 0;

    printf("vCPU sampling, %d domains, %u vCPUs, %d rounds (one round = one tick)\n", ndom, nvcpu,
           iterations);
    printf("%-34s %12s %12s %14s\n", "method", "CPU us/tick", "wall us/tick", "CPU us/vCPU");
    printf("%-34s %12.1f %12.1f %14.2f\n", "per-thread schedstat+stat (softaff)",
           1e6 * own_cpu / iterations, 1e6 * own_wall / iterations,
           1e6 * own_cpu / iterations / nvcpu);
    printf("%-34s %12.1f %12.1f %14.2f\n", "libvirt bulk stats: client",
           1e6 * bulk_cpu / iterations, 1e6 * bulk_wall / iterations,
           1e6 * bulk_cpu / iterations / nvcpu);
    printf("%-34s %12.1f %12s %14.2f\n", "libvirt bulk stats: + libvirtd",
           1e6 * (bulk_cpu + bulk_lvd) / iterations, "-",
           1e6 * (bulk_cpu + bulk_lvd) / iterations / nvcpu);
    printf("(bulk stats also lack the CPU each vCPU last ran on, which the policy needs)\n");
    for (int i = 0; i < ndom; i++)
        virDomainFree(doms[i]);
    free(doms);
    virConnectClose(conn);
    return 0;
}
