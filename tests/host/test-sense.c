/* Unit tests of host/sense.c: the fallback (disabled, no BTF, built without BPF) always; the
 * real program where this host can load it (root and kernel BTF; SOFTAFF_REQUIRE_VM=1 makes
 * "cannot load" a failure): events from threads competing on a watched CPU, none naming an
 * ignored thread, and tracked run/wait against /proc's schedstat. */
#define G_LOG_DOMAIN "test-sense"

#include <glib.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sa-cpuset.h"
#include "sa-error.h"
#include "sa-sampler.h"
#include "sa-sense.h"

static void assert_unsupported(const char *why)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaSense) s = sa_sense_new(&error);

    g_assert_null(s);
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
    g_test_message("sa_sense_new: %s", error->message);
    if (!strstr(error->message, why) && !strstr(error->message, "built without BPF"))
        g_error("\"%s\" does not say \"%s\"", error->message, why);
}

static void test_disabled(void)
{
    g_setenv("SOFTAFF_SENSE_DISABLE", "1", TRUE);
    assert_unsupported("disabled by SOFTAFF_SENSE_DISABLE");
    g_unsetenv("SOFTAFF_SENSE_DISABLE");
}

static void test_no_btf(void)
{
    g_autofree char *empty = g_dir_make_tmp("test-sense-XXXXXX", NULL);

    g_setenv("SOFTAFF_SYSFS_ROOT", empty, TRUE);
    assert_unsupported("no kernel BTF");
    g_unsetenv("SOFTAFF_SYSFS_ROOT");
    g_rmdir(empty);
}

/* The real program, or NULL after skipping (or failing under SOFTAFF_REQUIRE_VM=1). */
static SaSense *sense_or_skip(void)
{
    g_autoptr(GError) error = NULL;
    SaSense *s = sa_sense_new(&error);

    if (s)
        return s;
    if (g_strcmp0(g_getenv("SOFTAFF_REQUIRE_VM"), "1") == 0)
        g_error("SOFTAFF_REQUIRE_VM=1 and the BPF program cannot load: %s", error->message);
    if (geteuid() != 0 || !g_file_test("/sys/kernel/btf/vmlinux", G_FILE_TEST_EXISTS) ||
        strstr(error->message, "built without BPF")) {
        g_test_skip_printf("needs root, kernel BTF and a BPF build: %s", error->message);
        return NULL;
    }
    g_error("root with BTF, yet the program does not load: %s", error->message);
    return NULL;
}

typedef struct {
    int cpu;       /* pinned here */
    guint busy_us; /* spins this long, then sleeps sleep_us (0: never) */
    guint sleep_us;
    atomic_int tid; /* set once running */
    atomic_bool stop;
    pthread_t thread;
} Spinner;

static void *spin(void *data)
{
    Spinner *sp = data;
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(sp->cpu, &set);
    g_assert_cmpint(sched_setaffinity(0, sizeof(set), &set), ==, 0);
    atomic_store(&sp->tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&sp->stop)) {
        gint64 until = g_get_monotonic_time() + sp->busy_us;

        while (g_get_monotonic_time() < until && !atomic_load(&sp->stop))
            ;
        if (sp->sleep_us)
            g_usleep(sp->sleep_us);
    }
    return NULL;
}

static void spinner_start(Spinner *sp, int cpu, guint busy_us, guint sleep_us)
{
    *sp = (Spinner){.cpu = cpu, .busy_us = busy_us, .sleep_us = sleep_us};
    g_assert_cmpint(pthread_create(&sp->thread, NULL, spin, sp), ==, 0);
    while (!atomic_load(&sp->tid))
        g_usleep(100);
}

static void spinner_stop(Spinner *sp)
{
    atomic_store(&sp->stop, true);
    pthread_join(sp->thread, NULL);
}

static int test_cpu(void)
{
    return (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
}

/* Events read within timeout_ms (poll on the fd, then drain), appended to out. */
static void collect(SaSense *s, GArray *out, int timeout_ms)
{
    gint64 end = g_get_monotonic_time() + (gint64)timeout_ms * 1000;
    SaSenseEvent ev[64];

    for (gint64 left; (left = end - g_get_monotonic_time()) > 0;) {
        struct pollfd p = {.fd = sa_sense_fd(s), .events = POLLIN};

        if (poll(&p, 1, (int)(left / 1000) + 1) > 0)
            g_array_append_vals(out, ev, sa_sense_drain(s, ev, G_N_ELEMENTS(ev)));
    }
}

/* Watches cpu (place 0) and ignores ignore[] everywhere. */
static void watch(SaSense *s, int cpu, const pid_t *ignore, guint n)
{
    g_autoptr(SaCpuSet) cpus = sa_cpuset_new();
    g_autoptr(GError) error = NULL;
    SaSenseIgnore ig[4];

    g_assert_cmpuint(n, <=, G_N_ELEMENTS(ig));
    for (guint i = 0; i < n; i++)
        ig[i] = (SaSenseIgnore){.id = ignore[i], .home = -1};
    sa_cpuset_add(cpus, (guint)cpu);
    g_assert_true(sa_sense_watch(s, cpus, NULL, 0, ig, n, &error));
    g_assert_no_error(error);
}

static bool names(GArray *events, pid_t tid)
{
    for (guint i = 0; i < events->len; i++)
        if (g_array_index(events, SaSenseEvent, i).tid == tid)
            return true;
    return false;
}

static guint on_cpu(GArray *events, int cpu)
{
    guint n = 0;

    for (guint i = 0; i < events->len; i++) {
        SaSenseEvent *e = &g_array_index(events, SaSenseEvent, i);

        g_assert_cmpint(e->cpu, ==, cpu); /* only the watched CPU makes events */
        g_assert_cmpuint(e->wait_ns, >, 1000 * 1000);
        n++;
    }
    return n;
}

/* An ignored spinner and a plain one on the watched CPU: the plain one's waits make an event,
 * and no more than one per window. */
static void test_event(void)
{
    g_autoptr(SaSense) s = sense_or_skip();
    g_autoptr(GArray) events = g_array_new(FALSE, FALSE, sizeof(SaSenseEvent));
    int cpu = test_cpu();
    Spinner visitor, owner;
    pid_t ignore[1];
    gint64 start;

    if (!s)
        return;
    sa_sense_set_threshold(s, 1000, 10000);
    spinner_start(&visitor, cpu, 1000000, 0);
    ignore[0] = atomic_load(&visitor.tid);
    watch(s, cpu, ignore, 1);
    collect(s, events, 20);
    g_array_set_size(events, 0);
    start = g_get_monotonic_time();
    spinner_start(&owner, cpu, 1000000, 0);
    /* Within a window or two on a quiet host; the deadline only bounds a host too loaded to
     * run the spinners (how fast the event comes is bench-sensing's figure). */
    while (events->len == 0 && g_get_monotonic_time() - start < 2000000)
        collect(s, events, 5);
    g_test_message("first event after %" G_GINT64_FORMAT " µs", g_get_monotonic_time() - start);
    g_assert_cmpuint(events->len, >, 0);
    collect(s, events, 200);
    spinner_stop(&owner);
    spinner_stop(&visitor);
    /* At most one event per 10 ms window since the owner started, and a window on each side. */
    gint64 windows = (g_get_monotonic_time() - start) / 10000 + 2;
    g_assert_cmpuint(on_cpu(events, cpu), <=, (guint)windows);
    g_assert_false(names(events, ignore[0]));
}

/* The RUN events naming tid. */
static guint runs_of(GArray *events, pid_t tid)
{
    guint n = 0;

    for (guint i = 0; i < events->len; i++) {
        const SaSenseEvent *e = &g_array_index(events, SaSenseEvent, i);

        n += e->ran && e->tid == tid;
    }
    return n;
}

/* A tracked thread (a vCPU) that starts running alone on a watched CPU never waits, yet is an
 * event (ran) within a few windows; one that keeps running makes no second; one that runs 300
 * ms in every 600 makes one per start; a thread that wakes briefly, an ignored one or an
 * untracked one (a kernel thread, a daemon) makes none. */
static void test_run(void)
{
    g_autoptr(SaSense) s = sense_or_skip();
    g_autoptr(GArray) events = g_array_new(FALSE, FALSE, sizeof(SaSenseEvent));
    int cpu = test_cpu();
    Spinner owner, visitor, ticker;
    pid_t ignore[1];
    gint64 start;

    if (!s)
        return;
    sa_sense_set_threshold(s, 2000, 10000);
    spinner_start(&visitor, cpu, 1000000, 0);
    ignore[0] = atomic_load(&visitor.tid);
    watch(s, cpu, ignore, 1);
    spinner_start(&ticker, cpu, 100, 5000); /* 2% of the CPU */
    collect(s, events, 300);
    g_assert_cmpuint(runs_of(events, ignore[0]), ==, 0);
    g_assert_cmpuint(runs_of(events, atomic_load(&ticker.tid)), ==, 0);
    spinner_stop(&visitor);
    watch(s, cpu, NULL, 0);
    collect(s, events, 50);
    g_array_set_size(events, 0);

    spinner_start(&owner, cpu, 1000000, 0); /* untracked */
    collect(s, events, 200);
    g_assert_cmpuint(runs_of(events, atomic_load(&owner.tid)), ==, 0);
    spinner_stop(&owner);
    collect(s, events, 50);
    g_array_set_size(events, 0);

    start = g_get_monotonic_time();
    spinner_start(&owner, cpu, 1000000, 0);
    g_assert_true(sa_sense_track(s, atomic_load(&owner.tid)));
    while (runs_of(events, atomic_load(&owner.tid)) == 0 && g_get_monotonic_time() - start < 100000)
        collect(s, events, 2);
    g_test_message("run event after %" G_GINT64_FORMAT " µs", g_get_monotonic_time() - start);
    g_assert_cmpuint(runs_of(events, atomic_load(&owner.tid)), ==, 1);
    collect(s, events, 300);
    g_assert_cmpuint(runs_of(events, atomic_load(&owner.tid)), ==, 1);
    g_assert_cmpuint(runs_of(events, atomic_load(&ticker.tid)), ==, 0);
    spinner_stop(&owner);

    g_array_set_size(events, 0);
    spinner_start(&owner, cpu, 300000, 300000);
    g_assert_true(sa_sense_track(s, atomic_load(&owner.tid)));
    collect(s, events, 1500); /* starts at 0, 600 and 1200 ms */
    g_assert_cmpuint(runs_of(events, atomic_load(&owner.tid)), >=, 2);
    g_assert_cmpuint(runs_of(events, atomic_load(&owner.tid)), <=, 3);
    spinner_stop(&owner);
    spinner_stop(&ticker);
}

/* A visitor is ignored where it visits, not at home: a thread ignored with home place 1 that
 * starts running on a CPU of place 1 is an event; with home place 0, or everywhere (-1), not. */
static void test_ignored_at_home(void)
{
    g_autoptr(SaSense) s = sense_or_skip();
    g_autoptr(GArray) events = g_array_new(FALSE, FALSE, sizeof(SaSenseEvent));
    g_autoptr(SaCpuSet) cpus = sa_cpuset_new();
    int cpu = test_cpu(), place[64];
    static const int homes[] = {0, -1, 1};
    Spinner sp;

    if (!s)
        return;
    g_assert_cmpint(cpu, <, (int)G_N_ELEMENTS(place));
    for (guint c = 0; c < G_N_ELEMENTS(place); c++)
        place[c] = (int)c == cpu ? 1 : 0;
    sa_cpuset_add(cpus, (guint)cpu);
    sa_sense_set_threshold(s, 2000, 10000);
    for (guint h = 0; h < G_N_ELEMENTS(homes); h++) {
        spinner_start(&sp, cpu, 300000, 300000);
        g_assert_true(sa_sense_track(s, atomic_load(&sp.tid)));
        SaSenseIgnore ig = {.id = atomic_load(&sp.tid), .home = homes[h]};
        g_assert_true(sa_sense_watch(s, cpus, place, G_N_ELEMENTS(place), &ig, 1, NULL));
        g_array_set_size(events, 0);
        collect(s, events, 700); /* one start at least */
        spinner_stop(&sp);
        g_test_message("home %d: %u run events", homes[h], runs_of(events, ig.id));
        if (homes[h] == 1)
            g_assert_cmpuint(runs_of(events, ig.id), >=, 1);
        else
            g_assert_cmpuint(runs_of(events, ig.id), ==, 0);
    }
    sa_sense_watch(s, NULL, NULL, 0, NULL, 0, NULL);
}

/* Two ignored spinners competing make no event naming them; once one is no longer ignored,
 * the CPU's waits are events again. Nothing watched: nothing at all. */
static void test_ignored(void)
{
    g_autoptr(SaSense) s = sense_or_skip();
    g_autoptr(GArray) events = g_array_new(FALSE, FALSE, sizeof(SaSenseEvent));
    int cpu = test_cpu();
    Spinner a, b;
    pid_t ignore[2];

    if (!s)
        return;
    sa_sense_set_threshold(s, 1000, 10000);
    spinner_start(&a, cpu, 1000000, 0);
    spinner_start(&b, cpu, 1000000, 0);
    ignore[0] = atomic_load(&a.tid);
    ignore[1] = atomic_load(&b.tid);
    watch(s, cpu, ignore, 2);
    collect(s, events, 300);
    g_assert_false(names(events, ignore[0]));
    g_assert_false(names(events, ignore[1]));
    sa_sense_watch(s, NULL, NULL, 0, NULL, 0, NULL);
    collect(s, events, 20);
    g_array_set_size(events, 0);
    collect(s, events, 200);
    g_assert_cmpuint(events->len, ==, 0);
    /* Other threads of a busy host may cross the threshold first in a window: b within 1 s. */
    watch(s, cpu, ignore, 1);
    for (int i = 0; i < 20 && !names(events, ignore[1]); i++)
        collect(s, events, 50);
    g_assert_true(names(events, ignore[1]));
    /* The process ignored: none of its threads makes an event. */
    pid_t self = getpid();
    watch(s, cpu, &self, 1);
    collect(s, events, 20);
    g_array_set_size(events, 0);
    collect(s, events, 300);
    g_assert_false(names(events, ignore[0]));
    g_assert_false(names(events, ignore[1]));
    spinner_stop(&a);
    spinner_stop(&b);
}

static void schedstat(pid_t tid, guint64 *run, guint64 *delay)
{
    g_autofree char *path = g_strdup_printf("/proc/self/task/%d/schedstat", tid);
    g_autofree char *text = NULL;
    g_autoptr(GError) error = NULL;

    g_assert_true(g_file_get_contents(path, &text, NULL, &error));
    g_assert_true(sa_schedstat_parse(text, run, delay, &error));
    g_assert_no_error(error);
}

static void assert_close(const char *what, guint64 bpf, guint64 proc)
{
    double diff = (double)bpf - (double)proc;
    double tol = MAX(0.05 * (double)proc, 3e6);

    g_test_message("%s: BPF %.2f ms, /proc %.2f ms", what, bpf / 1e6, proc / 1e6);
    if (diff > tol || -diff > tol)
        g_error("%s: BPF says %.2f ms, /proc %.2f ms", what, bpf / 1e6, proc / 1e6);
}

typedef struct {
    pid_t tid;
    guint seen, others;
    guint64 run_ns, delay_ns;
} AllTimes;

static void collect_times(pid_t tid, guint64 run_ns, guint64 delay_ns, int last_cpu, gpointer data)
{
    AllTimes *a = data;

    if (tid != a->tid) {
        a->others++;
        return;
    }
    a->seen++;
    a->run_ns = run_ns;
    a->delay_ns = delay_ns;
}

/* A tracked thread that spins, sleeps and competes: its run and wait over 400 ms agree with
 * /proc's schedstat, and the batched read of every tracked thread finds it among 1000 others;
 * an untracked one has no times. */
static void test_times(void)
{
    g_autoptr(SaSense) s = sense_or_skip();
    guint64 r0, d0, r1, d1, pr0, pd0, pr1, pd1;
    int cpu = test_cpu(), last = -1;
    Spinner busy, rival;
    AllTimes all = {0};
    pid_t tid;

    if (!s)
        return;
    spinner_start(&rival, cpu, 3000, 2000);
    spinner_start(&busy, cpu, 2000, 1000);
    tid = atomic_load(&busy.tid);
    g_assert_false(sa_sense_thread_times(s, tid, &r0, &d0, &last));
    /* 1000 others (tids that no thread has: they stay at zero), so the batches turn over. */
    for (pid_t other = 1; other <= 1000; other++)
        g_assert_true(sa_sense_track(s, -other));
    g_assert_true(sa_sense_track(s, tid));
    g_usleep(50000); /* counted from its next switch on */
    g_assert_true(sa_sense_thread_times(s, tid, &r0, &d0, &last));
    schedstat(tid, &pr0, &pd0);
    g_usleep(400000);
    g_assert_true(sa_sense_thread_times(s, tid, &r1, &d1, &last));
    schedstat(tid, &pr1, &pd1);
    all.tid = tid;
    g_assert_cmpuint(sa_sense_all_times(s, collect_times, &all), ==, 1 + 1000);
    g_assert_cmpuint(all.seen, ==, 1);
    g_assert_cmpuint(all.others, ==, 1000);
    g_assert_cmpuint(all.run_ns, >=, r1);
    g_assert_cmpuint(all.delay_ns, >=, d1);
    spinner_stop(&busy);
    spinner_stop(&rival);
    g_assert_cmpint(last, ==, cpu);
    g_assert_cmpuint(r1 - r0, >, 20 * 1000 * 1000); /* it ran, even on a loaded host */
    assert_close("run", r1 - r0, pr1 - pr0);
    assert_close("wait", d1 - d0, pd1 - pd0);
    sa_sense_untrack(s, tid);
    g_assert_false(sa_sense_thread_times(s, tid, &r1, &d1, &last));
}

/* pthread_join returns when the thread clears its tid, before the rest of its exit (the
 * tracepoint among it); its /proc entry goes last. */
static void wait_gone(pid_t tid)
{
    g_autofree char *path = g_strdup_printf("/proc/self/task/%d", tid);

    for (int i = 0; i < 1000 && g_file_test(path, G_FILE_TEST_EXISTS); i++)
        g_usleep(1000);
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
}

/* A tracked thread that exits is no longer tracked; one tracked before it ever ran has no CPU. */
static void test_exit(void)
{
    g_autoptr(SaSense) s = sense_or_skip();
    guint64 run, delay;
    int last = 0;
    Spinner sp;
    pid_t tid;

    if (!s)
        return;
    spinner_start(&sp, test_cpu(), 1000, 1000);
    tid = atomic_load(&sp.tid);
    g_assert_true(sa_sense_track(s, tid));
    g_assert_true(sa_sense_track(s, -1));
    g_assert_true(sa_sense_thread_times(s, -1, &run, &delay, &last));
    g_assert_cmpint(last, ==, -1);
    g_usleep(20000);
    g_assert_true(sa_sense_thread_times(s, tid, &run, &delay, &last));
    g_assert_cmpint(last, ==, test_cpu());
    spinner_stop(&sp);
    wait_gone(tid);
    g_assert_false(sa_sense_thread_times(s, tid, &run, &delay, &last));
}

/* Per-CPU idle time: a CPU kept busy by a spinner for 300 ms shows under 20% idle over those
 * 300 ms; a CPU's idle total never goes back. */
static void test_cpu_idle(void)
{
    g_autoptr(SaSense) s = sense_or_skip();
    if (!s)
        return;
    int cpu = test_cpu();
    guint n = (guint)cpu + 1;
    g_autofree guint64 *idle0 = g_new0(guint64, n);
    g_autofree guint64 *idle1 = g_new0(guint64, n);
    g_autofree bool *known = g_new0(bool, n);
    guint64 t0, t1;
    Spinner sp;

    spinner_start(&sp, cpu, 1000000, 0);
    g_usleep(20000); /* the spinner's first switch makes the CPU known */
    g_assert_true(sa_sense_cpu_idle(s, n, idle0, known, &t0, NULL));
    g_assert_true(known[cpu]);
    g_usleep(300000);
    g_assert_true(sa_sense_cpu_idle(s, n, idle1, known, &t1, NULL));
    spinner_stop(&sp);
    g_assert_cmpuint(t1, >, t0);
    g_assert_cmpuint(idle1[cpu], >=, idle0[cpu]);
    double idle = (double)(idle1[cpu] - idle0[cpu]) / (double)(t1 - t0);
    g_test_message("CPU %d idle %.1f%% of %.0f ms while spun", cpu, 100 * idle, (t1 - t0) / 1e6);
    g_assert_cmpfloat(idle, <, 0.2);
    /* Idle again: the total grows with the stretch under way. */
    g_usleep(50000);
    g_assert_true(sa_sense_cpu_idle(s, n, idle0, known, &t0, NULL));
    g_assert_cmpuint(idle0[cpu], >=, idle1[cpu]);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/sense/fallback/disabled", test_disabled);
    g_test_add_func("/sense/fallback/no-btf", test_no_btf);
    g_test_add_func("/sense/bpf/event", test_event);
    g_test_add_func("/sense/bpf/ignored", test_ignored);
    g_test_add_func("/sense/bpf/run", test_run);
    g_test_add_func("/sense/bpf/ignored-at-home", test_ignored_at_home);
    g_test_add_func("/sense/bpf/times", test_times);
    g_test_add_func("/sense/bpf/exit", test_exit);
    g_test_add_func("/sense/bpf/cpu-idle", test_cpu_idle);
    return g_test_run();
}
