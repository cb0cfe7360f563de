/* softaff tests — a fake host (see fake-host.h). */
#include "fake-host.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define USER_HZ 100
#define STAT_FIELDS 52

struct FakeHost {
    char *root;
    guint n_nodes, cpus_per_node;
    double *user, *system, *idle; /* cumulative USER_HZ ticks per CPU */
    GHashTable *vcpus;            /* pid -> number of vCPU threads */
    GHashTable *tids;             /* pid -> pid_t[n_vcpus], the vCPU tids when not pid+1+v */
};

static void die(const char *what, const char *path)
{
    fprintf(stderr, "fake-host: %s %s: %s\n", what, path, g_strerror(errno));
    abort();
}

static void write_file(const char *path, const char *text, gsize len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        die("cannot write", path);
    for (gsize off = 0; off < len;) {
        ssize_t n = write(fd, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die("cannot write", path);
        off += (gsize)n;
    }
    close(fd);
}

static void G_GNUC_PRINTF(2, 3) write_printf(const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    write_file(path, text, strlen(text));
}

static void make_dir(const char *path)
{
    if (g_mkdir_with_parents(path, 0755) < 0)
        die("cannot create", path);
}

/* SLIT distances: 10 local, 16 to the sibling node, 32 further. */
static guint node_distance(guint a, guint b)
{
    return a == b ? 10 : (a ^ b) == 1 ? 16 : 32;
}

static void make_node(const FakeHost *h, const char *nodes, guint n)
{
    g_autofree char *dir = g_strdup_printf("%s/node%u", nodes, n);
    make_dir(dir);
    g_autofree char *cpulist = g_build_filename(dir, "cpulist", NULL);
    write_printf(cpulist, "%u-%u\n", n * h->cpus_per_node, (n + 1) * h->cpus_per_node - 1);
    g_autoptr(GString) dist = g_string_new(NULL);
    for (guint m = 0; m < h->n_nodes; m++)
        g_string_append_printf(dist, "%s%u", m ? " " : "", node_distance(n, m));
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

static void make_sysfs(const FakeHost *h)
{
    g_autofree char *sys = g_build_filename(h->root, "sys/devices/system", NULL);
    g_autofree char *cpu = g_build_filename(sys, "cpu", NULL);
    make_dir(cpu);
    g_autofree char *online = g_build_filename(cpu, "online", NULL);
    write_printf(online, "0-%u\n", fake_host_n_cpus(h) - 1);
    g_autofree char *nodes = g_build_filename(sys, "node", NULL);
    make_dir(nodes);
    g_autofree char *nodes_online = g_build_filename(nodes, "online", NULL);
    write_printf(nodes_online, "0-%u\n", h->n_nodes - 1);
    for (guint n = 0; n < h->n_nodes; n++)
        make_node(h, nodes, n);
}

FakeHost *fake_host_new(const char *parent, guint n_nodes, guint cpus_per_node)
{
    FakeHost *h = g_new0(FakeHost, 1);
    if (!parent)
        parent = g_file_test("/dev/shm", G_FILE_TEST_IS_DIR) ? "/dev/shm" : g_get_tmp_dir();
    g_autofree char *tmpl = g_build_filename(parent, "softaff-fake-host-XXXXXX", NULL);
    if (!g_mkdtemp(tmpl))
        die("cannot create a directory in", parent);
    h->root = g_steal_pointer(&tmpl);
    h->n_nodes = n_nodes;
    h->cpus_per_node = cpus_per_node;
    guint n = fake_host_n_cpus(h);
    h->user = g_new0(double, n);
    h->system = g_new0(double, n);
    h->idle = g_new0(double, n);
    for (guint c = 0; c < n; c++)
        h->idle[c] = 1e6;
    h->vcpus = g_hash_table_new(NULL, NULL);
    h->tids = g_hash_table_new_full(NULL, NULL, NULL, g_free);
    make_sysfs(h);
    g_autofree char *proc = g_build_filename(h->root, "proc", NULL);
    make_dir(proc);
    fake_host_write_stat(h);
    g_autofree char *sysroot = g_build_filename(h->root, "sys", NULL);
    g_setenv("SOFTAFF_SYSFS_ROOT", sysroot, TRUE);
    g_setenv("SOFTAFF_PROC_ROOT", proc, TRUE);
    return h;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

void fake_host_free(FakeHost *h, gboolean keep)
{
    if (!h)
        return;
    if (!keep)
        nftw(h->root, remove_entry, 32, FTW_DEPTH | FTW_PHYS);
    g_hash_table_unref(h->vcpus);
    g_hash_table_unref(h->tids);
    g_free(h->user);
    g_free(h->system);
    g_free(h->idle);
    g_free(h->root);
    g_free(h);
}

const char *fake_host_root(const FakeHost *h)
{
    return h->root;
}

guint fake_host_n_cpus(const FakeHost *h)
{
    return h->n_nodes * h->cpus_per_node;
}

void fake_host_account_cpu(FakeHost *h, guint cpu, double busy, double dt_ns)
{
    double ticks = dt_ns / 1e9 * USER_HZ;
    busy = CLAMP(busy, 0.0, 1.0);
    h->user[cpu] += 0.9 * busy * ticks;
    h->system[cpu] += 0.1 * busy * ticks;
    h->idle[cpu] += (1.0 - busy) * ticks;
}

void fake_host_write_stat(FakeHost *h)
{
    guint n = fake_host_n_cpus(h);
    g_autoptr(GString) s = g_string_sized_new(64 * (n + 2));
    double u = 0, sy = 0, id = 0;
    for (guint c = 0; c < n; c++) {
        u += h->user[c];
        sy += h->system[c];
        id += h->idle[c];
    }
    g_string_append_printf(s, "cpu  %.0f 0 %.0f %.0f 0 0 0 0 0 0\n", u, sy, id);
    for (guint c = 0; c < n; c++)
        g_string_append_printf(s, "cpu%u %.0f 0 %.0f %.0f 0 0 0 0 0 0\n", c, h->user[c],
                               h->system[c], h->idle[c]);
    g_string_append(s, "intr 123456 0 0\nctxt 987654321\nbtime 1700000000\nprocesses 4567890\n"
                       "procs_running 3\nprocs_blocked 0\nsoftirq 123 4 5 6 7 8 9 10 11 12 13\n");
    g_autofree char *path = g_build_filename(h->root, "proc/stat", NULL);
    write_file(path, s->str, s->len);
}

/* /proc/<pid>/task/<tid>/stat: 52 fields, field 3 the state, field 39 the CPU last run on. */
static gsize format_stat(char *buf, gsize size, pid_t tid, const char *comm, char state, int cpu,
                         guint threads)
{
    gsize n = (gsize)g_snprintf(buf, size, "%d (%s) %c", (int)tid, comm, state);
    for (guint f = 4; f <= STAT_FIELDS && n < size; f++) {
        long v = f == 4 ? 1 : f == 20 ? (long)threads : f == 38 ? 17 : f == 39 ? cpu : 0;
        n += (gsize)g_snprintf(buf + n, size - n, " %ld", v);
    }
    n += (gsize)g_snprintf(buf + n, size - n, "\n");
    return MIN(n, size - 1);
}

/* Paths go into stack buffers: the counters are rewritten for every vCPU between ticks, and
 * heap churn there would change what the benchmark measures inside the tick (malloc state). */
#define PATH_MAX_LEN 512

static void task_path(char *out, const FakeHost *h, pid_t pid, pid_t tid, const char *file)
{
    g_snprintf(out, PATH_MAX_LEN, "%s/proc/%d/task/%d/%s", h->root, (int)pid, (int)tid, file);
}

static void write_thread(FakeHost *h, pid_t pid, pid_t tid, const char *comm, char state, int cpu)
{
    char buf[512], path[PATH_MAX_LEN];
    guint threads = GPOINTER_TO_UINT(g_hash_table_lookup(h->vcpus, GINT_TO_POINTER(pid))) + 1;
    gsize len = format_stat(buf, sizeof buf, tid, comm, state, cpu, threads);
    task_path(path, h, pid, tid, "stat");
    write_file(path, buf, len);
    if (tid == pid) {
        g_snprintf(path, sizeof path, "%s/proc/%d/stat", h->root, (int)pid);
        write_file(path, buf, len);
    }
}

/* The tid of vCPU v of pid: pid+1+v, or the one fake_host_add_process_tids was given. */
static pid_t vcpu_tid(const FakeHost *h, pid_t pid, guint vcpu)
{
    const pid_t *tids = g_hash_table_lookup(h->tids, GINT_TO_POINTER(pid));
    return tids ? tids[vcpu] : pid + 1 + (pid_t)vcpu;
}

void fake_host_add_process_tids(FakeHost *h, pid_t pid, guint n_vcpus, const pid_t *tids)
{
    g_hash_table_insert(h->tids, GINT_TO_POINTER(pid), g_memdup2(tids, n_vcpus * sizeof *tids));
    fake_host_add_process(h, pid, n_vcpus);
}

void fake_host_add_process(FakeHost *h, pid_t pid, guint n_vcpus)
{
    g_hash_table_insert(h->vcpus, GINT_TO_POINTER(pid), GUINT_TO_POINTER(n_vcpus));
    for (guint t = 0; t <= n_vcpus; t++) {
        pid_t tid = t ? vcpu_tid(h, pid, t - 1) : pid;
        g_autofree char *dir = g_strdup_printf("%s/proc/%d/task/%d", h->root, (int)pid, (int)tid);
        make_dir(dir);
        char status[PATH_MAX_LEN];
        task_path(status, h, pid, tid, "status");
        write_printf(status, "Name:\t%s\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\n",
                     t ? "CPU n/KVM" : "qemu-system-x86", (int)pid, (int)tid);
        if (t == 0) {
            char sched[PATH_MAX_LEN];
            task_path(sched, h, pid, tid, "schedstat");
            write_printf(sched, "123456789 2345678 4567\n");
            write_thread(h, pid, tid, "qemu-system-x86", 'S', 0);
        } else {
            fake_host_set_vcpu(h, pid, t - 1, 1e9, 0, 0);
        }
    }
}

void fake_host_set_vcpu(FakeHost *h, pid_t pid, guint vcpu, double run_ns, double delay_ns, int cpu)
{
    pid_t tid = vcpu_tid(h, pid, vcpu);
    char sched[PATH_MAX_LEN], text[96];
    task_path(sched, h, pid, tid, "schedstat");
    int n = g_snprintf(text, sizeof text, "%.0f %.0f %u\n", run_ns, delay_ns,
                       1u + (guint)(run_ns / 1e7));
    write_file(sched, text, (gsize)n);
    char comm[32];
    g_snprintf(comm, sizeof comm, "CPU %u/KVM", vcpu);
    write_thread(h, pid, tid, comm, 'S', cpu);
}

void fake_host_set_state(FakeHost *h, pid_t pid, char state)
{
    write_thread(h, pid, pid, "qemu-system-x86", state, 0);
}

void fake_host_remove_process(FakeHost *h, pid_t pid)
{
    g_autofree char *dir = g_strdup_printf("%s/proc/%d", h->root, (int)pid);
    nftw(dir, remove_entry, 32, FTW_DEPTH | FTW_PHYS);
    g_hash_table_remove(h->vcpus, GINT_TO_POINTER(pid));
    g_hash_table_remove(h->tids, GINT_TO_POINTER(pid));
}
