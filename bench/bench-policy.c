/* softaff bench — CPU time of one policy tick on a large synthetic host, and of parsing a
 * 256-CPU /proc/stat.
 *
 * Host: 256 CPUs in 4 NUMA nodes (64 each, SLIT 10/21), layout node. 1000 VMs × 4 vCPUs, auto
 * homes, with a mix of loads (most idle, some medium, a few busy; a few VMs change class every
 * few ticks, so bursts and retreats happen). Between ticks a crude stand-in for the kernel spreads
 * each VM's vCPUs over the CPUs the policy gave it and turns overcommit into run delay. Only
 * sa_policy_tick() is timed, with CLOCK_THREAD_CPUTIME_ID.
 *
 *   bench-policy [--ticks N] [--warmup N] [--parses N] */
#define G_LOG_DOMAIN "softaff-bench"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench-util.h"
#include "sa-policy.h"
#include "sa-sampler.h"

#define N_NODES 4
#define CPUS_PER_NODE 64
#define N_CPUS (N_NODES * CPUS_PER_NODE)
#define N_VMS 1000
#define VCPUS 4
#define INTERVAL_MS 500
#define TARGET_TICK_US 1000.0

typedef struct {
    SaPolicyVm vm;
    SaVcpuSample samples[VCPUS];
    double load[VCPUS];
    int cpu[VCPUS];
} BenchVm;

static void node_free(gpointer p)
{
    SaNode *n = p;
    sa_cpuset_free(n->cpus);
    g_free(n);
}

static void partition_free(gpointer p)
{
    SaPartition *part = p;
    sa_cpuset_free(part->cpus);
    g_free(part);
}

static SaTopology *make_topology(void)
{
    SaTopology *topo = g_new0(SaTopology, 1);
    topo->layout = SA_LAYOUT_NODE;
    topo->online = sa_cpuset_new();
    topo->unplaced = sa_cpuset_new();
    topo->nodes = g_ptr_array_new_with_free_func(node_free);
    topo->partitions = g_ptr_array_new_with_free_func(partition_free);
    topo->node_distance = g_new0(guint, N_NODES * N_NODES);
    topo->partition_distance = g_new0(guint, N_NODES * N_NODES);
    sa_cpuset_add_range(topo->online, 0, N_CPUS - 1);
    for (guint i = 0; i < N_NODES; i++) {
        SaNode *node = g_new0(SaNode, 1);
        node->id = i;
        node->cpus = sa_cpuset_new();
        sa_cpuset_add_range(node->cpus, i * CPUS_PER_NODE, (i + 1) * CPUS_PER_NODE - 1);
        node->mem_total = G_GUINT64_CONSTANT(512) << 30;
        node->mem_free = G_GUINT64_CONSTANT(400) << 30;
        g_ptr_array_add(topo->nodes, node);
        SaPartition *part = g_new0(SaPartition, 1);
        part->id = i;
        part->cpus = sa_cpuset_copy(node->cpus);
        part->node = (int)i;
        g_ptr_array_add(topo->partitions, part);
        for (guint j = 0; j < N_NODES; j++) {
            topo->node_distance[i * N_NODES + j] = i == j ? 10 : 21;
            topo->partition_distance[i * N_NODES + j] = i == j ? 0 : 21;
        }
    }
    return topo;
}

/* The kernel stand-in: each vCPU runs on a CPU of its VM's set (spread by vCPU number and
 * moving now and then); a CPU with more demand than 1 shares it in proportion. */
static void simulate(BenchVm *vms, double *busy, guint tick)
{
    static double demand[N_CPUS];
    for (guint c = 0; c < N_CPUS; c++)
        demand[c] = 0.01; /* host noise */
    for (guint i = 0; i < N_VMS; i++) {
        BenchVm *b = &vms[i];
        const SaCpuSet *set = b->vm.st.vcpus;
        guint n = set ? sa_cpuset_count(set) : N_CPUS;
        for (guint v = 0; v < VCPUS; v++) {
            guint pick = (i * 7 + v * 13 + tick / 8) % n;
            int c = -1;
            if (set) {
                c = sa_cpuset_next(set, -1);
                for (guint k = 0; k < pick && c >= 0; k++)
                    c = sa_cpuset_next(set, c);
            } else {
                c = (int)pick;
            }
            b->cpu[v] = c;
            demand[c] += b->load[v];
        }
    }
    const double interval_ns = INTERVAL_MS * 1e6;
    for (guint c = 0; c < N_CPUS; c++)
        busy[c] = MIN(1.0, demand[c]);
    for (guint i = 0; i < N_VMS; i++) {
        BenchVm *b = &vms[i];
        for (guint v = 0; v < VCPUS; v++) {
            double d = b->load[v], l = demand[b->cpu[v]];
            double run = l > 1 ? d / l : d;
            b->samples[v].run_ns = (guint64)(run * interval_ns);
            b->samples[v].delay_ns = (guint64)((d - run) * interval_ns);
            b->samples[v].last_cpu = b->cpu[v];
        }
    }
}

static double thread_cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static char *synthetic_proc_stat(void)
{
    GString *s = g_string_new(NULL);
    g_string_append(s, "cpu  123456789 2345 34567890 987654321 12345 0 67890 0 45678901 0\n");
    for (guint c = 0; c < N_CPUS; c++)
        g_string_append_printf(s, "cpu%u %u 12 %u %u 321 0 %u 0 %u 0\n", c, 482000 + c * 37,
                               131000 + c * 11, 3850000 + c * 101, 260 + c, 179000 + c * 17);
    g_string_append(s, "intr 9876543210 27 9 0 0 0 0 0 0 0 1 0 0 156 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
    g_string_append(s, "ctxt 12345678901\nbtime 1700000000\nprocesses 4567890\n");
    g_string_append(s, "procs_running 3\nprocs_blocked 0\nsoftirq 123 4 5 6 7 8 9 10 11 12 13\n");
    return g_string_free(s, FALSE);
}

typedef struct {
    double median, p95, max;
    guint64 changes, bursts, retreats, bursting;
    double host_load;
} PolicyResult;

/* Runs warmup + ticks policy ticks; hot: fraction of the VMs that prefer node 0 (the others are
 * auto), so that node 0 is overcommitted and its VMs burst. */
static void make_vms(BenchVm *vms, SaPolicyVm **pvms, char **names, const SaTopology *topo,
                     GRand *rand, double hot)
{
    for (guint i = 0; i < N_VMS; i++) {
        sa_policy_vm_init(&vms[i].vm);
        names[i] = g_strdup_printf("vm%04u", i);
        vms[i].vm.name = names[i];
        vms[i].vm.n_vcpus = VCPUS;
        vms[i].vm.allowed = topo->online;
        vms[i].vm.memory_bytes = G_GUINT64_CONSTANT(4) << 30;
        vms[i].vm.preferred = i < hot * N_VMS ? 0 : -1;
        double l = bench_load_class(rand);
        for (guint v = 0; v < VCPUS; v++)
            vms[i].load[v] = l;
        pvms[i] = &vms[i].vm;
    }
}

/* Every 4 ticks, 1% of the VMs change their load class. */
static void change_loads(BenchVm *vms, GRand *rand, guint t)
{
    if (t % 4 != 0)
        return;
    for (guint k = 0; k < N_VMS / 100; k++) {
        BenchVm *b = &vms[g_rand_int_range(rand, 0, N_VMS)];
        double l = bench_load_class(rand);
        for (guint v = 0; v < VCPUS; v++)
            b->load[v] = l;
    }
}

static PolicyResult run_policy(guint ticks, guint warmup, double hot)
{
    g_autoptr(SaTopology) topo = make_topology();
    g_autoptr(GRand) rand = g_rand_new_with_seed(20240601);
    BenchVm *vms = g_new0(BenchVm, N_VMS);
    SaPolicyVm **pvms = g_new(SaPolicyVm *, N_VMS);
    char **names = g_new0(char *, N_VMS);
    make_vms(vms, pvms, names, topo, rand, hot);

    SaPolicyConfig cfg;
    sa_policy_config_init(&cfg);
    double *busy = g_new0(double, N_CPUS);
    SaPartitionUsage usage[N_NODES];
    SaPolicyHost host = {
        .topo = topo,
        .cpu_busy = busy,
        .n_cpu_busy = N_CPUS,
        .interval_ns = 0,
        .now_ms = 1000000,
    };
    double *times = g_new(double, ticks);
    PolicyResult r = {0};
    double host_busy = 0;
    for (guint t = 0; t < warmup + ticks; t++) {
        if (t > 0) {
            change_loads(vms, rand, t);
            simulate(vms, busy, t);
            host.interval_ns = (guint64)INTERVAL_MS * 1000000;
            host.now_ms += INTERVAL_MS;
            for (guint i = 0; i < N_VMS; i++)
                vms[i].vm.vcpu_samples = vms[i].samples;
        }
        double t0 = thread_cpu_us();
        sa_policy_tick(&cfg, &host, pvms, N_VMS, usage);
        double t1 = thread_cpu_us();
        for (guint i = 0; i < N_VMS; i++) {
            r.bursts += vms[i].vm.bursts;
            r.retreats += vms[i].vm.retreats;
        }
        if (t >= warmup) {
            times[t - warmup] = t1 - t0;
            for (guint i = 0; i < N_VMS; i++)
                r.changes += vms[i].vm.changed;
            for (guint c = 0; c < N_CPUS; c++)
                host_busy += busy[c];
        }
    }
    for (guint i = 0; i < N_VMS; i++) {
        r.bursting += vms[i].vm.st.state == SA_STATE_BURST;
        sa_policy_vm_clear(&vms[i].vm);
        g_free(names[i]);
    }
    r.median = bench_percentile(times, ticks, 0.5);
    r.p95 = bench_percentile(times, ticks, 0.95);
    r.max = bench_percentile(times, ticks, 1.0);
    r.host_load = host_busy / ((double)ticks * N_CPUS);
    g_free(names);
    g_free(vms);
    g_free(pvms);
    g_free(busy);
    g_free(times);
    return r;
}

static bool print_policy(const char *what, const PolicyResult *r, guint ticks)
{
    bool ok = r->p95 <= TARGET_TICK_US;
    printf("policy tick, %s (mean host load %.0f%%):\n", what, 100 * r->host_load);
    printf("  median %7.1f us   p95 %7.1f us   max %7.1f us   target <= %.0f us   %s\n", r->median,
           r->p95, r->max, TARGET_TICK_US, ok ? "OK" : "OVER");
    printf("  %u ticks: %" G_GUINT64_FORMAT " changes applied (%.3f per VM per 10 s, target <= 1), "
           "%" G_GUINT64_FORMAT " partitions added by bursts, %" G_GUINT64_FORMAT
           " forced retreats, %" G_GUINT64_FORMAT " VMs bursting at the end\n",
           ticks, r->changes, r->changes / (double)N_VMS / (ticks * INTERVAL_MS / 10000.0),
           r->bursts, r->retreats, r->bursting);
    return ok;
}

int main(int argc, char **argv)
{
    gint ticks = 2000, warmup = 200, parses = 2000;
    GOptionEntry entries[] = {
        {"ticks", 0, 0, G_OPTION_ARG_INT, &ticks, "timed policy ticks (2000)", "N"},
        {"warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "untimed ticks first (200)", "N"},
        {"parses", 0, 0, G_OPTION_ARG_INT, &parses, "timed /proc/stat parses (2000)", "N"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- softaff policy benchmark");
    g_autoptr(GError) error = NULL;
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "bench-policy: %s\n", error->message);
        return 2;
    }
    if (ticks < 1 || warmup < 0 || parses < 1) {
        fprintf(stderr, "bench-policy: --ticks and --parses need at least 1\n");
        return 2;
    }

    printf("host: %d CPUs in %d NUMA nodes (layout node), %d VMs x %d vCPUs, tick %d ms\n", N_CPUS,
           N_NODES, N_VMS, VCPUS, INTERVAL_MS);
    PolicyResult even = run_policy((guint)ticks, (guint)warmup, 0.0);
    bool ok = print_policy("auto homes", &even, (guint)ticks);
    PolicyResult hot = run_policy((guint)ticks, (guint)warmup, 0.4);
    ok = print_policy("40% of the VMs homed on node 0 (bursting)", &hot, (guint)ticks) && ok;

    /* /proc/stat parsing. */
    g_autofree char *stat = synthetic_proc_stat();
    gsize stat_len = strlen(stat);
    g_autofree double *ptimes = g_new(double, (guint)parses);
    for (guint k = 0; k < (guint)parses; k++) {
        double t0 = thread_cpu_us();
        g_autoptr(GArray) cpus = sa_procstat_parse(stat, stat_len, &error);
        double t1 = thread_cpu_us();
        if (!cpus || cpus->len != N_CPUS) {
            fprintf(stderr, "bench-policy: parsing the synthetic /proc/stat failed: %s\n",
                    error ? error->message : "wrong CPU count");
            return 1;
        }
        ptimes[k] = t1 - t0;
    }
    double pmedian = bench_percentile(ptimes, (guint)parses, 0.5);
    double pp95 = bench_percentile(ptimes, (guint)parses, 0.95);
    printf("procstat parse (%d CPUs, %zu bytes):\n", N_CPUS, stat_len);
    printf("  median %7.1f us   p95 %7.1f us   (part of the sampling + policy + apply budget of "
           "20 ms a tick)\n",
           pmedian, pp95);
    return ok ? 0 : 1;
}
