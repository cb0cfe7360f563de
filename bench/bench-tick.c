/* softaff bench — CPU time and memory of one whole daemon tick (sampling + policy + apply) on a
 * large synthetic host, driving the real daemon core (plugin/daemon.c).
 *
 * Host: 256 CPUs in 4 NUMA nodes, a fixture sysfs tree (SOFTAFF_SYSFS_ROOT) and a fake /proc
 * (SOFTAFF_PROC_ROOT) on tmpfs (/dev/shm): proc/stat for 256 CPUs and, for 1000 QEMU processes,
 * proc/<pid>/task/<tid>/{schedstat,stat,status} of 4 vCPU threads named "CPU n/KVM" plus the
 * main thread. The daemon's SaVm entries are filled as backend-libvirt.c fills them; the backend
 * is a recorder (apply, restore and write_assigned count calls and remember the vCPU set, no
 * I/O). Between ticks a crude stand-in for the kernel spreads each VM's load over the CPUs it was
 * given and rewrites the counters in place (the daemon keeps the files open), outside the timed
 * region.
 *
 * The tick is timed as a whole (thread CPU time). Its phases are timed without touching the
 * daemon: the link wraps sa_stat_sampler_sample() and sa_policy_tick() (-Wl,--wrap), so
 *   host sampling  = inside sa_stat_sampler_sample()
 *   vCPU sampling  = from the tick's start to the policy, minus host sampling
 *   policy         = inside sa_policy_tick()
 *   apply          = from the policy's end to the tick's end (accounting, decisions, backend)
 *
 *   bench-tick [--ticks N] [--warmup N] [--interval-ms MS] [--vms N] [--scenario even|hot|both]
 *              [--keep]
 *
 * Instruction counts, stable on a noisy machine:
 *   valgrind --tool=callgrind --toggle-collect=bench_timed_tick BUILD/bench/bench-tick \
 *            --ticks 10 --warmup 2 --scenario even
 * counts the timed ticks only: divide the "Collected" Ir by --ticks
 * (callgrind_annotate --inclusive=yes splits it by function). */
#define G_LOG_DOMAIN "softaff-bench"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "sa-config.h"
#include "sa-policy.h"
#include "sa-sampler.h"
#include "sa-topology.h"

#define N_NODES 4
#define CPUS_PER_NODE 64
#define N_CPUS (N_NODES * CPUS_PER_NODE)
#define VCPUS 4
#define PID_BASE 100000
#define PID_STRIDE 8
#define USER_HZ 100
#define TARGET_TICK_MS 20.0
#define TARGET_POLICY_MS 1.0
#define TARGET_RSS_KIB (16 * 1024)

/* ---- phase timing through the linker's --wrap ---- */

void __real_sa_policy_tick(const SaPolicyConfig *cfg, const SaPolicyHost *host,
                           SaPolicyVm *const *vms, guint n_vms, SaPartitionUsage *usage);
void __wrap_sa_policy_tick(const SaPolicyConfig *cfg, const SaPolicyHost *host,
                           SaPolicyVm *const *vms, guint n_vms, SaPartitionUsage *usage);
bool __real_sa_stat_sampler_sample(SaStatSampler *s, GArray *loads, GError **error);
bool __wrap_sa_stat_sampler_sample(SaStatSampler *s, GArray *loads, GError **error);

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double policy_start_ms, policy_end_ms, host_sample_ms;

void __wrap_sa_policy_tick(const SaPolicyConfig *cfg, const SaPolicyHost *host,
                           SaPolicyVm *const *vms, guint n_vms, SaPartitionUsage *usage)
{
    policy_start_ms = thread_cpu_ms();
    __real_sa_policy_tick(cfg, host, vms, n_vms, usage);
    policy_end_ms = thread_cpu_ms();
}

bool __wrap_sa_stat_sampler_sample(SaStatSampler *s, GArray *loads, GError **error)
{
    double t0 = thread_cpu_ms();
    bool ok = __real_sa_stat_sampler_sample(s, loads, error);
    host_sample_ms = thread_cpu_ms() - t0;
    return ok;
}

/* The timed ticks go through here, so that callgrind can count them alone
 * (--toggle-collect=bench_timed_tick). */
G_GNUC_NO_INLINE static void bench_timed_tick(SaDaemon *d)
{
    sa_daemon_tick(d);
}

/* ---- the synthetic machine ---- */

typedef struct {
    guint index;
    pid_t pid;
    SaCpuSet *given; /* the vCPU set last applied (NULL: not yet, runs anywhere) */
    double load[VCPUS];
    int cpu[VCPUS];
    double run_ns[VCPUS], delay_ns[VCPUS]; /* cumulative */
    guint64 slices[VCPUS];
} BenchVm;

typedef struct {
    char *root;
    guint n_vms;
    BenchVm *vms;
    double user[N_CPUS], system[N_CPUS], idle[N_CPUS]; /* cumulative USER_HZ ticks */
    GRand *rand;
    guint64 applies, restores, assigned_writes;
} Bench;

static Bench bench;

static void write_file(const char *path, const char *text, gsize len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "bench-tick: cannot write %s: %s\n", path, g_strerror(errno));
        exit(1);
    }
    for (gsize off = 0; off < len;) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "bench-tick: cannot write %s: %s\n", path, g_strerror(errno));
            exit(1);
        }
        off += (gsize)n;
    }
    close(fd);
}

static void write_printf(const char *path, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void write_printf(const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    write_file(path, text, strlen(text));
}

static void make_dir(const char *path)
{
    if (g_mkdir_with_parents(path, 0755) < 0) {
        fprintf(stderr, "bench-tick: cannot create %s: %s\n", path, g_strerror(errno));
        exit(1);
    }
}

static void make_sysfs(const char *root)
{
    g_autofree char *sys = g_build_filename(root, "sys/devices/system", NULL);
    g_autofree char *cpu = g_build_filename(sys, "cpu", NULL);
    make_dir(cpu);
    g_autofree char *online = g_build_filename(cpu, "online", NULL);
    write_printf(online, "0-%d\n", N_CPUS - 1);
    g_autofree char *nodes = g_build_filename(sys, "node", NULL);
    make_dir(nodes);
    g_autofree char *nodes_online = g_build_filename(nodes, "online", NULL);
    write_printf(nodes_online, "0-%d\n", N_NODES - 1);
    for (guint n = 0; n < N_NODES; n++) {
        g_autofree char *dir = g_strdup_printf("%s/node%u", nodes, n);
        make_dir(dir);
        g_autofree char *cpulist = g_build_filename(dir, "cpulist", NULL);
        write_printf(cpulist, "%u-%u\n", n * CPUS_PER_NODE, (n + 1) * CPUS_PER_NODE - 1);
        g_autoptr(GString) dist = g_string_new(NULL);
        for (guint m = 0; m < N_NODES; m++)
            g_string_append_printf(dist, "%s%u", m ? " " : "",
                                   m == n         ? 10
                                   : (m ^ n) == 1 ? 16
                                                  : 32);
        g_string_append_c(dist, '\n');
        g_autofree char *distance = g_build_filename(dir, "distance", NULL);
        write_file(distance, dist->str, dist->len);
        guint64 total_kb = G_GUINT64_CONSTANT(512) << 20, free_kb = G_GUINT64_CONSTANT(400) << 20;
        g_autofree char *meminfo = g_build_filename(dir, "meminfo", NULL);
        write_printf(meminfo,
                     "Node %u MemTotal:       %" G_GUINT64_FORMAT " kB\n"
                     "Node %u MemFree:        %" G_GUINT64_FORMAT " kB\n"
                     "Node %u MemUsed:        %" G_GUINT64_FORMAT " kB\n",
                     n, total_kb, n, free_kb, n, total_kb - free_kb);
    }
}

static void write_proc_stat(void)
{
    g_autoptr(GString) s = g_string_sized_new(16384);
    double u = 0, sy = 0, id = 0;
    for (guint c = 0; c < N_CPUS; c++) {
        u += bench.user[c];
        sy += bench.system[c];
        id += bench.idle[c];
    }
    g_string_append_printf(s, "cpu  %.0f 0 %.0f %.0f 0 0 0 0 0 0\n", u, sy, id);
    for (guint c = 0; c < N_CPUS; c++)
        g_string_append_printf(s, "cpu%u %.0f 0 %.0f %.0f 0 0 0 0 0 0\n", c, bench.user[c],
                               bench.system[c], bench.idle[c]);
    g_string_append(s, "intr 123456 0 0\nctxt 987654321\nbtime 1700000000\nprocesses 4567890\n"
                       "procs_running 3\nprocs_blocked 0\nsoftirq 123 4 5 6 7 8 9 10 11 12 13\n");
    g_autofree char *path = g_build_filename(bench.root, "proc/stat", NULL);
    write_file(path, s->str, s->len);
}

/* /proc/<pid>/task/<tid>/stat: 52 fields, field 39 the CPU last run on. */
static gsize format_thread_stat(char *buf, gsize size, pid_t tid, const char *comm, pid_t ppid,
                                int cpu, guint64 utime)
{
    gsize n = (gsize)g_snprintf(buf, size, "%d (%s)", (int)tid, comm);
    for (guint f = 3; f <= 52 && n < size; f++) {
        switch (f) {
        case 3:
            n += (gsize)g_snprintf(buf + n, size - n, " S");
            break;
        case 4:
            n += (gsize)g_snprintf(buf + n, size - n, " %d", (int)ppid);
            break;
        case 14:
            n += (gsize)g_snprintf(buf + n, size - n, " %" G_GUINT64_FORMAT, utime);
            break;
        case 20:
            n += (gsize)g_snprintf(buf + n, size - n, " %d", VCPUS + 1);
            break;
        case 38:
            n += (gsize)g_snprintf(buf + n, size - n, " 17");
            break;
        case 39:
            n += (gsize)g_snprintf(buf + n, size - n, " %d", cpu);
            break;
        default:
            n += (gsize)g_snprintf(buf + n, size - n, " 0");
        }
    }
    n += (gsize)g_snprintf(buf + n, size - n, "\n");
    return MIN(n, size - 1);
}

static void write_vcpu_counters(const BenchVm *b, guint v)
{
    char path[256], buf[512];
    pid_t tid = b->pid + 1 + (pid_t)v;
    g_snprintf(path, sizeof path, "%s/proc/%d/task/%d/schedstat", bench.root, (int)b->pid,
               (int)tid);
    int n = g_snprintf(buf, sizeof buf, "%.0f %.0f %" G_GUINT64_FORMAT "\n", b->run_ns[v],
                       b->delay_ns[v], b->slices[v]);
    write_file(path, buf, (gsize)n);
    g_snprintf(path, sizeof path, "%s/proc/%d/task/%d/stat", bench.root, (int)b->pid, (int)tid);
    char comm[32];
    g_snprintf(comm, sizeof comm, "CPU %u/KVM", v);
    gsize len =
        format_thread_stat(buf, sizeof buf, tid, comm, 1, b->cpu[v], (guint64)(b->run_ns[v] / 1e7));
    write_file(path, buf, len);
}

static void make_process(BenchVm *b)
{
    char dir[256], path[300], buf[512];
    for (guint t = 0; t <= VCPUS; t++) {
        pid_t tid = b->pid + (pid_t)t;
        g_snprintf(dir, sizeof dir, "%s/proc/%d/task/%d", bench.root, (int)b->pid, (int)tid);
        make_dir(dir);
        g_snprintf(path, sizeof path, "%s/status", dir);
        write_printf(path,
                     "Name:\t%s\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\nThreads:\t%d\n"
                     "Cpus_allowed:\tffffffff,ffffffff,ffffffff,ffffffff,ffffffff,ffffffff,"
                     "ffffffff,ffffffff\nCpus_allowed_list:\t0-%d\n",
                     t ? "CPU n/KVM" : "qemu-system-x86", (int)b->pid, (int)tid, VCPUS + 1,
                     N_CPUS - 1);
        if (t == 0) {
            g_snprintf(path, sizeof path, "%s/schedstat", dir);
            write_printf(path, "123456789 2345678 4567\n");
            g_snprintf(path, sizeof path, "%s/stat", dir);
            gsize len = format_thread_stat(buf, sizeof buf, tid, "qemu-system-x86", 1, 0, 100);
            write_file(path, buf, len);
        } else {
            write_vcpu_counters(b, t - 1);
        }
    }
}

static double load_class(GRand *rand)
{
    double r = g_rand_double(rand);
    if (r < 0.02)
        return 1.0; /* busy */
    if (r < 0.10)
        return 0.2 + 0.2 * g_rand_double(rand); /* medium */
    return 0.01 + 0.02 * g_rand_double(rand);   /* idle */
}

/* The kernel stand-in for an interval of dt_ns: each vCPU runs on a CPU of its VM's set (spread
 * by vCPU number, moving now and then); a CPU with more demand than 1 is shared in proportion,
 * the rest waits. Then every counter file is rewritten in place. */
static void simulate(guint tick, double dt_ns)
{
    static double demand[N_CPUS];
    for (guint c = 0; c < N_CPUS; c++)
        demand[c] = 0.01; /* host noise */
    for (guint i = 0; i < bench.n_vms; i++) {
        BenchVm *b = &bench.vms[i];
        guint n = b->given ? sa_cpuset_count(b->given) : N_CPUS;
        for (guint v = 0; v < VCPUS; v++) {
            guint pick = (i * 7 + v * 13 + tick / 8) % MAX(n, 1);
            int c = (int)pick;
            if (b->given) {
                c = sa_cpuset_next(b->given, -1);
                for (guint k = 0; k < pick && c >= 0; k++)
                    c = sa_cpuset_next(b->given, c);
            }
            b->cpu[v] = MAX(c, 0);
            demand[b->cpu[v]] += b->load[v];
        }
    }
    double dt_ticks = dt_ns / 1e9 * USER_HZ;
    for (guint c = 0; c < N_CPUS; c++) {
        double busy = MIN(1.0, demand[c]);
        bench.user[c] += 0.9 * busy * dt_ticks;
        bench.system[c] += 0.1 * busy * dt_ticks;
        bench.idle[c] += (1.0 - busy) * dt_ticks;
    }
    write_proc_stat();
    for (guint i = 0; i < bench.n_vms; i++) {
        BenchVm *b = &bench.vms[i];
        for (guint v = 0; v < VCPUS; v++) {
            double d = b->load[v], l = demand[b->cpu[v]];
            double run = l > 1 ? d / l : d;
            b->run_ns[v] += run * dt_ns;
            b->delay_ns[v] += (d - run) * dt_ns;
            b->slices[v] += 1 + (guint64)(d * 50);
            write_vcpu_counters(b, v);
        }
    }
}

/* ---- the recording backend ---- */

static bool rec_apply(SaDaemon *d, SaVm *vm, const SaCpuSet *vcpus, const SaCpuSet *emulator,
                      GError **error)
{
    BenchVm *b = vm->backend_data;
    bench.applies++;
    if (b->given)
        sa_cpuset_assign(b->given, vcpus);
    else
        b->given = sa_cpuset_copy(vcpus);
    return true;
}

static bool rec_restore(SaDaemon *d, SaVm *vm, GError **error)
{
    bench.restores++;
    return true;
}

static bool rec_write_assigned(SaDaemon *d, SaVm *vm, int home, GError **error)
{
    bench.assigned_writes++;
    return true;
}

static const SaBackendOps recording_ops = {
    .name = "bench-recorder",
    .threads_by_name = true, /* as libvirt's: the core finds "CPU n/KVM" */
    .apply = rec_apply,
    .restore = rec_restore,
    .write_assigned = rec_write_assigned,
};

/* ---- statistics ---- */

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double percentile(const double *v, guint n, double p)
{
    g_autofree double *s = g_memdup2(v, sizeof(double) * n);
    qsort(s, n, sizeof *s, compare_double);
    guint k = (guint)(p * (n - 1) + 0.5);
    return s[MIN(k, n - 1)];
}

static long rss_kib(const char *key)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents("/proc/self/status", &text, NULL, NULL))
        return -1;
    const char *p = strstr(text, key);
    return p ? strtol(p + strlen(key) + 1, NULL, 10) : -1;
}

static int nftw_remove(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

typedef struct {
    double total[5][3]; /* total, host, vcpus, policy, apply × median, p95, max */
    double daemon_ms;   /* the daemon's own last_tick_cpu_ms, median */
    double first_ms;    /* tick 0: finds the vCPU threads, opens their files */
    guint64 changes, bursts, retreats, bursting, applies, assigned;
    long rss_before, rss_after, anon_before, anon_after;
} TickResult;

static bool run_scenario(const char *what, double hot, guint ticks, guint warmup, guint interval_ms,
                         TickResult *r)
{
    g_autoptr(GError) error = NULL;
    memset(&bench.user, 0, sizeof bench.user);
    memset(&bench.system, 0, sizeof bench.system);
    for (guint c = 0; c < N_CPUS; c++)
        bench.idle[c] = 1e6;
    write_proc_stat();
    bench.applies = bench.restores = bench.assigned_writes = 0;
    for (guint i = 0; i < bench.n_vms; i++) {
        BenchVm *b = &bench.vms[i];
        memset(b, 0, sizeof *b);
        b->index = i;
        b->pid = PID_BASE + (pid_t)(i * PID_STRIDE);
        double l = load_class(bench.rand);
        for (guint v = 0; v < VCPUS; v++) {
            b->load[v] = l;
            b->run_ns[v] = 1e9 + i * 1e6;
            b->cpu[v] = (int)((i * VCPUS + v) % N_CPUS);
        }
        make_process(b);
    }

    r->rss_before = rss_kib("VmRSS:");
    r->anon_before = rss_kib("RssAnon:");
    SaConfig *cfg = sa_config_new_default();
    cfg->layout = SA_LAYOUT_NODE;
    cfg->interval_ms = interval_ms;
    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    if (!topo) {
        fprintf(stderr, "bench-tick: fixture topology: %s\n", error->message);
        return false;
    }
    SaDaemon *d = sa_daemon_new(cfg, topo, false, &error);
    if (!d) {
        fprintf(stderr, "bench-tick: sa_daemon_new: %s\n", error->message);
        return false;
    }
    for (guint i = 0; i < bench.n_vms; i++) {
        BenchVm *b = &bench.vms[i];
        g_autofree char *key = g_strdup_printf("00000000-0000-4000-8000-%012u", i);
        g_autofree char *name = g_strdup_printf("bench-vm%04u", i);
        SaVm *vm = sa_vm_new(key, name, &recording_ops);
        vm->backend_data = b;
        vm->n_vcpus = VCPUS;
        vm->memory_bytes = G_GUINT64_CONSTANT(4) << 30;
        vm->pid = b->pid;
        vm->threads_stale = true;
        vm->allowed = sa_cpuset_copy(d->topo->online);
        vm->emulator_allowed = sa_cpuset_copy(vm->allowed);
        sa_metadata_init(&vm->metadata);
        vm->has_metadata = i < hot * bench.n_vms;
        if (vm->has_metadata)
            vm->metadata.preferred = 0;
        vm->written_assigned = vm->metadata.assigned;
        vm = sa_daemon_add(d, vm);
        sa_vm_set_status(d, vm, SA_VM_MANAGED, "bench");
    }

    guint n = warmup + ticks;
    g_autofree double *t_total = g_new0(double, ticks);
    g_autofree double *t_host = g_new0(double, ticks);
    g_autofree double *t_vcpus = g_new0(double, ticks);
    g_autofree double *t_policy = g_new0(double, ticks);
    g_autofree double *t_apply = g_new0(double, ticks);
    g_autofree double *t_daemon = g_new0(double, ticks);
    guint64 applies0 = 0;
    gint64 last_write = g_get_monotonic_time();
    gint64 next_tick = last_write;
    /* Tick 0 scans the threads and has no interval yet; ticks 1.. are complete ones. */
    for (guint t = 0; t <= n; t++) {
        if (t > 0) {
            next_tick += (gint64)interval_ms * 1000;
            gint64 now = g_get_monotonic_time();
            if (next_tick > now)
                g_usleep((gulong)(next_tick - now));
            else
                next_tick = now;
            if (t % 4 == 0) {
                /* 1% of the VMs change their load class. */
                for (guint k = 0; k < bench.n_vms / 100; k++) {
                    BenchVm *b = &bench.vms[g_rand_int_range(bench.rand, 0, (gint32)bench.n_vms)];
                    double l = load_class(bench.rand);
                    for (guint v = 0; v < VCPUS; v++)
                        b->load[v] = l;
                }
            }
            now = g_get_monotonic_time();
            simulate(t, (double)(now - last_write) * 1e3);
            last_write = now;
        }
        if (t == warmup + 1)
            applies0 = bench.applies;
        double t0 = thread_cpu_ms();
        if (t > warmup)
            bench_timed_tick(d);
        else
            sa_daemon_tick(d);
        double t1 = thread_cpu_ms();
        if (t == 0)
            r->first_ms = t1 - t0;
        if (t > warmup) {
            guint k = t - warmup - 1;
            t_total[k] = t1 - t0;
            t_host[k] = host_sample_ms;
            t_vcpus[k] = policy_start_ms - t0 - host_sample_ms;
            t_policy[k] = policy_end_ms - policy_start_ms;
            t_apply[k] = t1 - policy_end_ms;
            t_daemon[k] = d->last_tick_cpu_ms;
        }
    }
    double *series[5] = {t_total, t_host, t_vcpus, t_policy, t_apply};
    for (guint s = 0; s < 5; s++) {
        r->total[s][0] = percentile(series[s], ticks, 0.5);
        r->total[s][1] = percentile(series[s], ticks, 0.95);
        r->total[s][2] = percentile(series[s], ticks, 1.0);
    }
    r->daemon_ms = percentile(t_daemon, ticks, 0.5);
    r->applies = bench.applies - applies0;
    r->assigned = bench.assigned_writes;
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, d->vms);
    guint managed = 0;
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        SaVm *vm = value;
        managed += vm->status == SA_VM_MANAGED && vm->pvm.vcpu_samples != NULL;
        r->changes += vm->pvm.st.changes;
        r->bursts += vm->pvm.st.bursts;
        r->retreats += vm->pvm.st.retreats;
        r->bursting += vm->pvm.st.state == SA_STATE_BURST;
    }
    r->rss_after = rss_kib("VmRSS:");
    r->anon_after = rss_kib("RssAnon:");
    if (managed != bench.n_vms)
        fprintf(stderr, "bench-tick: only %u of %u VMs were sampled (open files limit?)\n", managed,
                bench.n_vms);

    printf("daemon tick, %s: %u ticks of %u ms (after %u warmup)\n", what, ticks, interval_ms,
           warmup);
    static const char *names[5] = {"sampling + policy + apply", "  sampling: host /proc/stat",
                                   "  sampling: vCPU threads", "  policy", "  apply + accounting"};
    for (guint s = 0; s < 5; s++)
        printf("  %-28s median %7.3f ms   p95 %7.3f ms   max %7.3f ms\n", names[s], r->total[s][0],
               r->total[s][1], r->total[s][2]);
    printf("  (the daemon's own last_tick_cpu_ms, process CPU: median %.3f ms; the first tick, "
           "which finds the threads and opens their files: %.1f ms)\n",
           r->daemon_ms, r->first_ms);
    printf("  %" G_GUINT64_FORMAT
           " applies in the timed ticks (%.3f per VM per 10 s), %" G_GUINT64_FORMAT
           " assigned= writes in all; policy counters: %" G_GUINT64_FORMAT
           " changes, %" G_GUINT64_FORMAT " bursts, %" G_GUINT64_FORMAT
           " retreats, %" G_GUINT64_FORMAT " VMs bursting at the end\n",
           r->applies, r->applies / (double)bench.n_vms / (ticks * interval_ms / 10000.0),
           r->assigned, r->changes, r->bursts, r->retreats, r->bursting);
    printf("  RSS %ld KiB before the daemon, %ld KiB after the ticks (RssAnon %ld -> %ld KiB)\n",
           r->rss_before, r->rss_after, r->anon_before, r->anon_after);

    sa_daemon_free(d);
    for (guint i = 0; i < bench.n_vms; i++)
        g_clear_pointer(&bench.vms[i].given, sa_cpuset_free);
    return managed == bench.n_vms;
}

int main(int argc, char **argv)
{
    gint ticks = 40, warmup = 6, interval_ms = 500, n_vms = 1000;
    gboolean keep = FALSE;
    g_autofree char *scenario = NULL;
    GOptionEntry entries[] = {
        {"ticks", 0, 0, G_OPTION_ARG_INT, &ticks, "timed ticks per scenario (40)", "N"},
        {"warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "untimed ticks first (6)", "N"},
        {"interval-ms", 0, 0, G_OPTION_ARG_INT, &interval_ms, "time between ticks (500)", "MS"},
        {"vms", 0, 0, G_OPTION_ARG_INT, &n_vms, "VMs of 4 vCPUs (1000)", "N"},
        {"scenario", 0, 0, G_OPTION_ARG_STRING, &scenario, "even, hot or both (both)", "S"},
        {"keep", 0, 0, G_OPTION_ARG_NONE, &keep, "keep the fixture tree", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- softaff daemon tick benchmark");
    g_autoptr(GError) error = NULL;
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "bench-tick: %s\n", error->message);
        return 2;
    }
    if (ticks < 1 || warmup < 0 || interval_ms < 1 || n_vms < 1 || n_vms > 100000) {
        fprintf(stderr, "bench-tick: bad --ticks, --warmup, --interval-ms or --vms\n");
        return 2;
    }
    bool even = !scenario || g_str_equal(scenario, "even") || g_str_equal(scenario, "both");
    bool hot = !scenario || g_str_equal(scenario, "hot") || g_str_equal(scenario, "both");
    if (!even && !hot) {
        fprintf(stderr, "bench-tick: --scenario is even, hot or both\n");
        return 2;
    }

    /* The daemon keeps two files open per vCPU thread. */
    struct rlimit rl;
    guint need = (guint)n_vms * VCPUS * 2 + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        printf("note: open files limit %lu < %u needed (2 per vCPU thread); ",
               (unsigned long)rl.rlim_cur, need);
        if (rl.rlim_max >= need) {
            rl.rlim_cur = need;
            setrlimit(RLIMIT_NOFILE, &rl);
            printf("raised to %u\n", need);
        } else {
            printf("cannot raise it (hard limit %lu)\n", (unsigned long)rl.rlim_max);
        }
    }

    const char *shm = g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) ? "/dev/shm" : g_get_tmp_dir();
    g_autofree char *tmpl = g_build_filename(shm, "softaff-bench-tick-XXXXXX", NULL);
    bench.root = g_mkdtemp(tmpl) ? g_strdup(tmpl) : NULL;
    if (!bench.root) {
        fprintf(stderr, "bench-tick: cannot create a directory in %s: %s\n", shm,
                g_strerror(errno));
        return 1;
    }
    g_autofree char *sysroot = g_build_filename(bench.root, "sys", NULL);
    g_autofree char *procroot = g_build_filename(bench.root, "proc", NULL);
    make_sysfs(bench.root);
    make_dir(procroot);
    g_setenv("SOFTAFF_SYSFS_ROOT", sysroot, TRUE);
    g_setenv("SOFTAFF_PROC_ROOT", procroot, TRUE);
    bench.n_vms = (guint)n_vms;
    bench.vms = g_new0(BenchVm, bench.n_vms);
    bench.rand = g_rand_new_with_seed(20240601);

    printf("host: %d CPUs in %d NUMA nodes (layout node, fixture in %s), %d VMs x %d vCPUs\n",
           N_CPUS, N_NODES, bench.root, n_vms, VCPUS);
    bool ok = true;
    TickResult r_even = {0}, r_hot = {0};
    if (even)
        ok = run_scenario("auto homes", 0.0, (guint)ticks, (guint)warmup, (guint)interval_ms,
                          &r_even) &&
             ok;
    if (hot)
        ok = run_scenario("40% of the VMs homed on node 0 (bursting)", 0.4, (guint)ticks,
                          (guint)warmup, (guint)interval_ms, &r_hot) &&
             ok;

    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double worst_total = MAX(r_even.total[0][1], r_hot.total[0][1]);
    double worst_policy = MAX(r_even.total[3][1], r_hot.total[3][1]);
    bool tick_ok = worst_total <= TARGET_TICK_MS, policy_ok = worst_policy <= TARGET_POLICY_MS;
    bool rss_ok = ru.ru_maxrss <= TARGET_RSS_KIB;
    printf("summary: tick p95 %.3f ms (target <= %.0f) %s; policy p95 %.3f ms (target <= %.0f) %s; "
           "peak RSS of the whole bench process %ld KiB (target <= %d) %s\n",
           worst_total, TARGET_TICK_MS, tick_ok ? "OK" : "OVER", worst_policy, TARGET_POLICY_MS,
           policy_ok ? "OK" : "OVER", ru.ru_maxrss, TARGET_RSS_KIB, rss_ok ? "OK" : "OVER");

    if (!keep)
        nftw(bench.root, nftw_remove, 32, FTW_DEPTH | FTW_PHYS);
    else
        printf("fixture kept in %s\n", bench.root);
    g_rand_free(bench.rand);
    g_free(bench.vms);
    g_free(bench.root);
    return ok && tick_ok && policy_ok && rss_ok ? 0 : 1;
}
