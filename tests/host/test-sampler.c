/* Unit tests of host/procstat.c and host/thread.c: /proc/stat parsing and CPU load, thread
 * stat and schedstat parsing, the samplers against tests/data/proc and against the real /proc. */
#define G_LOG_DOMAIN "test-sampler"

#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sa-cpuset.h"
#include "sa-error.h"
#include "sa-sampler.h"

static char *data_path(const char *rel)
{
    const char *dir = g_getenv("SOFTAFF_TEST_DATA");

    g_assert_nonnull(dir);
    return g_build_filename(dir, rel, NULL);
}

static char *read_data(const char *rel, gsize *len)
{
    g_autofree char *path = data_path(rel);
    g_autoptr(GError) error = NULL;
    char *text = NULL;

    g_file_get_contents(path, &text, len, &error);
    g_assert_no_error(error);
    return text;
}

static GArray *parse_ok(const char *text)
{
    g_autoptr(GError) error = NULL;
    GArray *times = sa_procstat_parse(text, strlen(text), &error);

    g_assert_no_error(error);
    g_assert_nonnull(times);
    return times;
}

static const SaCpuTimes *times_at(GArray *a, guint i)
{
    g_assert_cmpuint(i, <, a->len);
    return &g_array_index(a, SaCpuTimes, i);
}

/* ---- /proc/stat ---- */

static void test_procstat_parse(void)
{
    gsize len = 0;
    g_autofree char *real = read_data("proc/stat", &len);
    g_autofree char *old = read_data("proc/stat.old-kernel", NULL);
    g_autoptr(GArray) a = NULL;
    g_autoptr(GArray) b = NULL;
    g_autoptr(GArray) c = NULL;
    g_autoptr(GArray) d = NULL;

    /* This host's capture: 2 CPUs, the aggregate line skipped. */
    a = sa_procstat_parse(real, len, NULL);
    g_assert_nonnull(a);
    g_assert_cmpuint(a->len, ==, 2);
    g_assert_cmpint(times_at(a, 0)->cpu, ==, 0);
    g_assert_cmpint(times_at(a, 1)->cpu, ==, 1);
    g_assert_cmpuint(times_at(a, 0)->user, >, 0);
    g_assert_cmpuint(times_at(a, 0)->idle, >, 0);

    /* Old kernel, 7 columns: the missing ones are 0. */
    b = parse_ok(old);
    g_assert_cmpuint(b->len, ==, 2);
    g_assert_cmpuint(times_at(b, 1)->user, ==, 600);
    g_assert_cmpuint(times_at(b, 1)->nice, ==, 20);
    g_assert_cmpuint(times_at(b, 1)->softirq, ==, 4);
    g_assert_cmpuint(times_at(b, 1)->steal, ==, 0);
    g_assert_cmpuint(times_at(b, 1)->guest_nice, ==, 0);

    /* All ten columns, a future eleventh ignored, sparse CPU numbers kept, tabs allowed. */
    c = parse_ok("cpu 9 9 9 9\ncpu3 1 2 3 4 5 6 7 8 9 10 11\ncpu17\t1 2 3 4\nintr 5\n");
    g_assert_cmpuint(c->len, ==, 2);
    g_assert_cmpint(times_at(c, 0)->cpu, ==, 3);
    g_assert_cmpuint(times_at(c, 0)->steal, ==, 8);
    g_assert_cmpuint(times_at(c, 0)->guest, ==, 9);
    g_assert_cmpuint(times_at(c, 0)->guest_nice, ==, 10);
    g_assert_cmpint(times_at(c, 1)->cpu, ==, 17);
    g_assert_cmpuint(times_at(c, 1)->idle, ==, 4);

    /* The length is honoured: the buffer need not end in a NUL. */
    {
        static const char buf[] = "cpu0 1 2 3 4\ncpu1 5 6 7 8\n";
        g_autoptr(GError) error = NULL;

        d = sa_procstat_parse(buf, 13, &error);
        g_assert_no_error(error);
        g_assert_cmpuint(d->len, ==, 1);
    }
}

static void test_procstat_errors(void)
{
    static const struct {
        const char *text, *named;
    } bad[] = {
        {"cpu0 1 2 x 4\n", "cpu0 1 2 x 4"},
        {"cpu0 1 2\n", "cpu0 1 2"},
        {"cpuX 1 2 3 4\n", "cpuX 1 2 3 4"},
        {"cpu0 99999999999999999999999 1 1 1\n", "99999999999999999999999"},
        {"cpu0 1 2 3 -4\n", "cpu0 1 2 3 -4"},
        {"cpu1 1 2 3 4\ncpu2 1 2 3 4z\n", "cpu2 1 2 3 4z"},
        {"cpu99999999999 1 2 3 4\n", "cpu99999999999"},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(GArray) times = sa_procstat_parse(bad[i].text, strlen(bad[i].text), &error);

        g_test_message("case \"%s\": %s", bad[i].text, error ? error->message : "(none)");
        g_assert_null(times);
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        g_assert_nonnull(strstr(error->message, bad[i].named));
    }
}

static void assert_load(const SaCpuLoad *l, double busy, double idle, double iowait, double steal)
{
    g_assert_cmpfloat_with_epsilon(l->busy, busy, 1e-9);
    g_assert_cmpfloat_with_epsilon(l->idle, idle, 1e-9);
    g_assert_cmpfloat_with_epsilon(l->iowait, iowait, 1e-9);
    g_assert_cmpfloat_with_epsilon(l->steal, steal, 1e-9);
}

/* Counters so large that their integer sum would wrap: every fraction stays within 0..1 (found
 * by fuzz-proc; the input is in tests/fuzz/corpus/proc/wrapping-counters). */
static void test_load_compute_huge(void)
{
    SaCpuTimes prev = {.cpu = 0}, cur = {.cpu = 0};
    cur.user = G_MAXUINT64 / 2 + 1; /* user + idle is 2^64 + 9: wraps to 9 in integers */
    cur.idle = G_MAXUINT64 / 2 + 9;
    SaCpuLoad load;
    sa_cpu_load_compute(&prev, &cur, &load);
    g_assert_cmpfloat(load.busy, >, 0.4);
    g_assert_cmpfloat(load.busy, <=, 1.0);
    g_assert_cmpfloat(load.idle, >=, 0.0);
    g_assert_cmpfloat(load.idle, <=, 1.0);
    g_assert_cmpfloat(load.busy + load.idle, <=, 1.0 + 1e-9);
}

static void test_load_compute(void)
{
    SaCpuTimes prev = {.cpu = 4,
                       .user = 1000,
                       .nice = 10,
                       .system = 300,
                       .idle = 5000,
                       .iowait = 40,
                       .irq = 5,
                       .softirq = 6,
                       .steal = 7,
                       .guest = 500};
    SaCpuTimes cur = prev;
    SaCpuLoad load;

    /* 100 ticks: 40 user of which 30 are guest, 10 system, 20 idle, 10 iowait, 10 irq+softirq,
     * 10 steal. Guest counts once (inside user): busy = 40+10+10 = 60 of 100. */
    cur.user += 40;
    cur.guest += 30;
    cur.system += 10;
    cur.idle += 20;
    cur.iowait += 10;
    cur.irq += 4;
    cur.softirq += 6;
    cur.steal += 10;
    sa_cpu_load_compute(&prev, &cur, &load);
    g_assert_cmpint(load.cpu, ==, 4);
    assert_load(&load, 0.6, 0.2, 0.1, 0.1);

    /* guest_nice is inside nice in the same way. */
    cur = prev;
    cur.nice += 50;
    cur.guest_nice += 50;
    cur.idle += 50;
    sa_cpu_load_compute(&prev, &cur, &load);
    assert_load(&load, 0.5, 0.5, 0.0, 0.0);

    /* A counter going backwards (iowait on some kernels) counts as 0, never negative. */
    cur = prev;
    cur.iowait -= 30;
    cur.user += 25;
    cur.idle += 75;
    sa_cpu_load_compute(&prev, &cur, &load);
    assert_load(&load, 0.25, 0.75, 0.0, 0.0);

    /* Every counter reset (CPU hot-plugged): no interval, idle. */
    memset(&cur, 0, sizeof(cur));
    cur.cpu = 4;
    sa_cpu_load_compute(&prev, &cur, &load);
    assert_load(&load, 0.0, 1.0, 0.0, 0.0);

    /* Wrap-around of a 64-bit counter: the huge previous value gives 0, not a huge delta. */
    prev.user = G_MAXUINT64 - 5;
    cur = prev;
    cur.user = 3;
    cur.idle += 10;
    sa_cpu_load_compute(&prev, &cur, &load);
    assert_load(&load, 0.0, 1.0, 0.0, 0.0);
}

/* tests/data/proc/256cpu: CPU c is (c % 101)% busy between stat.1 and stat.2, with guest
 * time inside user on odd CPUs; CPU 255 is missing from stat.2. */
static void check_256(GArray *loads)
{
    g_assert_cmpuint(loads->len, ==, 255);
    for (guint i = 0; i < loads->len; i++) {
        const SaCpuLoad *l = &g_array_index(loads, SaCpuLoad, i);

        g_assert_cmpint(l->cpu, ==, (int)i);
        g_assert_cmpfloat_with_epsilon(l->busy, (i % 101) / 100.0, 1e-9);
        g_assert_cmpfloat_with_epsilon(l->idle, 1.0 - (i % 101) / 100.0, 1e-9);
    }
}

static void test_load_256(void)
{
    gsize len1 = 0, len2 = 0;
    g_autofree char *s1 = read_data("proc/256cpu/stat.1", &len1);
    g_autofree char *s2 = read_data("proc/256cpu/stat.2", &len2);
    g_autoptr(GArray) a = sa_procstat_parse(s1, len1, NULL);
    g_autoptr(GArray) b = sa_procstat_parse(s2, len2, NULL);
    g_autoptr(GArray) loads = g_array_new(FALSE, FALSE, sizeof(SaCpuLoad));

    g_assert_cmpuint(a->len, ==, 256);
    g_assert_cmpuint(b->len, ==, 255);
    for (guint i = 0; i < b->len; i++) {
        SaCpuLoad l;

        g_assert_cmpint(times_at(a, i)->cpu, ==, times_at(b, i)->cpu);
        sa_cpu_load_compute(times_at(a, i), times_at(b, i), &l);
        g_array_append_val(loads, l);
    }
    check_256(loads);
}

/* Rewrites path in place (same inode), as the kernel's /proc/stat changes under an open fd. */
static void overwrite(const char *path, const char *text, gsize len)
{
    FILE *f = fopen(path, "w");

    g_assert_nonnull(f);
    g_assert_cmpuint(fwrite(text, 1, len, f), ==, len);
    g_assert_cmpint(fclose(f), ==, 0);
}

static void test_stat_sampler_fixture(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = g_dir_make_tmp("softaff-proc-XXXXXX", &error);
    g_autofree char *path = g_build_filename(root, "stat", NULL);
    gsize len1 = 0, len2 = 0;
    g_autofree char *s1 = read_data("proc/256cpu/stat.1", &len1);
    g_autofree char *s2 = read_data("proc/256cpu/stat.2", &len2);
    g_autoptr(GArray) loads = g_array_new(FALSE, FALSE, sizeof(SaCpuLoad));
    g_autoptr(SaStatSampler) s = NULL;
    g_autoptr(GString) big = NULL;

    g_assert_no_error(error);
    g_setenv("SOFTAFF_PROC_ROOT", root, TRUE);
    overwrite(path, s1, len1);
    s = sa_stat_sampler_new(&error);
    g_assert_no_error(error);

    /* The first sample only primes. */
    g_assert_true(sa_stat_sampler_sample(s, loads, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(loads->len, ==, 0);

    /* CPU 255 disappears. */
    overwrite(path, s2, len2);
    g_assert_true(sa_stat_sampler_sample(s, loads, &error));
    g_assert_no_error(error);
    check_256(loads);

    /* CPU 255 comes back (no interval for it yet) and every other counter went backwards. */
    overwrite(path, s1, len1);
    g_assert_true(sa_stat_sampler_sample(s, loads, &error));
    g_assert_cmpuint(loads->len, ==, 255);
    for (guint i = 0; i < loads->len; i++) {
        g_assert_cmpint(g_array_index(loads, SaCpuLoad, i).cpu, ==, (int)i);
        g_assert_cmpfloat(g_array_index(loads, SaCpuLoad, i).busy, ==, 0.0);
    }

    /* A file larger than the initial buffer (a long intr line): the buffer grows. */
    big = g_string_new(s2);
    g_string_append(big, "intr 1");
    for (guint i = 0; i < 60000; i++)
        g_string_append(big, " 0");
    g_string_append(big, "\ncpu255 0 0 0 0\n");
    overwrite(path, big->str, big->len);
    g_assert_true(sa_stat_sampler_sample(s, loads, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(loads->len, ==, 256);
    g_assert_cmpint(g_array_index(loads, SaCpuLoad, 255).cpu, ==, 255);

    /* Garbage: the error names the file and the line. */
    overwrite(path, "cpu0 1 2 oops 4\n", 16);
    g_assert_false(sa_stat_sampler_sample(s, loads, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, path));
    g_assert_nonnull(strstr(error->message, "oops"));
    g_clear_error(&error);

    g_clear_pointer(&s, sa_stat_sampler_free);
    g_remove(path);
    g_rmdir(root);

    /* A missing /proc/stat is named. */
    s = sa_stat_sampler_new(&error);
    g_assert_null(s);
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, path));
    g_unsetenv("SOFTAFF_PROC_ROOT");
}

static void burn_cpu(guint ms)
{
    gint64 until = g_get_monotonic_time() + ms * 1000;
    volatile guint64 x = 0;

    while (g_get_monotonic_time() < until)
        x = x + 1;
}

/* Runs until this thread has had ms of CPU time, however busy the machine is. */
static void burn_thread_cpu(guint ms)
{
    struct timespec start, now;
    volatile guint64 x = 0;

    g_assert_cmpint(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start), ==, 0);
    do {
        for (guint i = 0; i < 10000; i++)
            x = x + 1;
        g_assert_cmpint(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now), ==, 0);
    } while ((now.tv_sec - start.tv_sec) * G_GINT64_CONSTANT(1000000000) +
                 (now.tv_nsec - start.tv_nsec) <
             (gint64)ms * 1000000);
}

static void test_stat_sampler_real(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaStatSampler) s = NULL;
    g_autoptr(GArray) loads = g_array_new(FALSE, FALSE, sizeof(SaCpuLoad));
    long n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    double total_busy = 0;

    g_unsetenv("SOFTAFF_PROC_ROOT");
    s = sa_stat_sampler_new(&error);
    g_assert_no_error(error);
    g_assert_true(sa_stat_sampler_sample(s, loads, &error));
    burn_cpu(150);
    g_assert_true(sa_stat_sampler_sample(s, loads, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(loads->len, ==, (guint)n_cpus);
    for (guint i = 0; i < loads->len; i++) {
        const SaCpuLoad *l = &g_array_index(loads, SaCpuLoad, i);

        g_assert_cmpfloat(l->busy, >=, 0.0);
        g_assert_cmpfloat(l->busy, <=, 1.0);
        g_assert_cmpfloat_with_epsilon(l->busy + l->idle + l->iowait + l->steal, 1.0, 1e-9);
        total_busy += l->busy;
    }
    /* We kept one CPU busy for the whole interval (give or take a tick). */
    g_assert_cmpfloat(total_busy, >, 0.5);
}

/* ---- threads ---- */

static void test_schedstat_parse(void)
{
    static const char *const bad[] = {"",      "\n",      "abc",    "1",
                                      "1 x 3", "1 2 3 4", "-1 2 3", "99999999999999999999999 1 1"};
    guint64 run = 0, delay = 0;

    g_assert_true(sa_schedstat_parse("987654321012 123456789 40212\n", &run, &delay, NULL));
    g_assert_cmpuint(run, ==, G_GUINT64_CONSTANT(987654321012));
    g_assert_cmpuint(delay, ==, 123456789);
    g_assert_true(sa_schedstat_parse("5 6", &run, &delay, NULL));
    g_assert_cmpuint(run, ==, 5);
    g_assert_cmpuint(delay, ==, 6);
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autofree char *stripped = g_strstrip(g_strdup(bad[i]));
        g_autofree char *shown = g_strescape(stripped, NULL);

        g_test_message("case \"%s\"", bad[i]);
        g_assert_false(sa_schedstat_parse(bad[i], &run, &delay, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        g_assert_nonnull(strstr(error->message, shown));
    }
}

static void test_stat_parse(void)
{
    g_autofree char *vcpu = read_data("proc/4242/task/4243/stat", NULL);
    g_autofree char *nasty = read_data("proc/4242/task/4244/stat", NULL);
    char comm[64];
    char small[4];
    int cpu = -1;
    static const char *const bad[] = {
        "",
        "1234 (CPU 0/KVM) R 1 2 3",
        "1234 CPU 0/KVM R 1",
        "(x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 "
        "31 32 33 34 35 36 37",
        "12a4 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 "
        "29 30 31 32 33 34 35 36 37",
        "1234 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 "
        "30 31 32 33 34 35 -1 0",
        "1234 (x) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 "
        "30 31 32 33 34 -1 cpu 0",
    };

    g_assert_true(sa_thread_stat_parse(vcpu, comm, sizeof(comm), &cpu, NULL));
    g_assert_cmpstr(comm, ==, "CPU 0/KVM");
    g_assert_cmpint(cpu, ==, 3);

    g_assert_true(sa_thread_stat_parse(nasty, comm, sizeof(comm), &cpu, NULL));
    g_assert_cmpstr(comm, ==, "a) b) c");
    g_assert_cmpint(cpu, ==, 7);

    /* The field count starts after the last ')', whatever comm holds. */
    g_assert_true(sa_thread_stat_parse("1 (a) b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 "
                                       "19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 "
                                       "17 12 0 0\n",
                                       comm, sizeof(comm), &cpu, NULL));
    g_assert_cmpstr(comm, ==, "a) b) c");
    g_assert_cmpint(cpu, ==, 12);
    g_assert_true(sa_thread_stat_parse("9 ((x)) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 "
                                       "19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 -1 0",
                                       small, sizeof(small), &cpu, NULL));
    g_assert_cmpstr(small, ==, "(x)"); /* truncated to the buffer */
    g_assert_cmpint(cpu, ==, 0);

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;

        g_test_message("case \"%s\"", bad[i]);
        g_assert_false(sa_thread_stat_parse(bad[i], comm, sizeof(comm), &cpu, &error));
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        g_assert_nonnull(strstr(error->message, "stat \""));
    }
}

static void test_thread_fixture(void)
{
    g_autofree char *root = data_path("proc");
    g_autoptr(GError) error = NULL;
    g_autoptr(SaThreadSampler) t = NULL;
    g_autoptr(GArray) tids = NULL;
    g_autoptr(SaCpuSet) allowed = NULL;
    g_autofree char *text = NULL;
    SaThreadSample sample;

    g_setenv("SOFTAFF_PROC_ROOT", root, TRUE);

    t = sa_thread_sampler_new(4242, 4243, &error);
    g_assert_no_error(error);
    g_assert_true(sa_thread_sampler_read(t, &sample, &error));
    g_assert_cmpuint(sample.run_ns, ==, G_GUINT64_CONSTANT(987654321012));
    g_assert_cmpuint(sample.delay_ns, ==, 123456789);
    g_assert_cmpint(sample.last_cpu, ==, 3);
    g_assert_cmpstr(sample.comm, ==, "CPU 0/KVM");
    /* Reading again rereads from the start. */
    memset(&sample, 0, sizeof(sample));
    g_assert_true(sa_thread_sampler_read(t, &sample, &error));
    g_assert_cmpint(sample.last_cpu, ==, 3);
    /* Run time and delay alone: the same counters, from schedstat only. */
    guint64 run = 0, delay = 0;
    g_assert_true(sa_thread_sampler_read_times(t, &run, &delay, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(run, ==, G_GUINT64_CONSTANT(987654321012));
    g_assert_cmpuint(delay, ==, 123456789);
    g_clear_pointer(&t, sa_thread_sampler_free);

    t = sa_thread_sampler_new(4242, 4244, &error);
    g_assert_no_error(error);
    g_assert_true(sa_thread_sampler_read(t, &sample, &error));
    g_assert_cmpstr(sample.comm, ==, "a) b) c");
    g_assert_cmpint(sample.last_cpu, ==, 7);
    g_assert_cmpuint(sample.run_ns, ==, 5);
    g_clear_pointer(&t, sa_thread_sampler_free);

    tids = sa_process_list_threads(4242, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(tids->len, ==, 3);
    g_assert_cmpint(g_array_index(tids, pid_t, 0), ==, 4242);
    g_assert_cmpint(g_array_index(tids, pid_t, 2), ==, 4244);

    allowed = sa_thread_read_allowed(4242, 4243, &error);
    g_assert_no_error(error);
    text = sa_cpuset_format(allowed);
    g_assert_cmpstr(text, ==, "0-3,8");

    /* Threads and processes that are not there. */
    t = sa_thread_sampler_new(4242, 4299, &error);
    g_assert_null(t);
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);
    g_assert_nonnull(strstr(error->message, "4242/task/4299/schedstat"));
    g_clear_error(&error);
    g_assert_null(sa_process_list_threads(4299, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);
    g_clear_error(&error);
    g_assert_null(sa_thread_read_allowed(4242, 4299, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);

    g_unsetenv("SOFTAFF_PROC_ROOT");
}

typedef struct {
    GMutex lock;
    GCond cond;
    pid_t tid;
    bool stop;
} Worker;

static gpointer worker_main(gpointer data)
{
    Worker *w = data;

    g_mutex_lock(&w->lock);
    w->tid = gettid();
    g_cond_broadcast(&w->cond);
    g_mutex_unlock(&w->lock);
    burn_cpu(30);
    g_mutex_lock(&w->lock);
    while (!w->stop)
        g_cond_wait(&w->cond, &w->lock);
    g_mutex_unlock(&w->lock);
    return NULL;
}

/* A joined thread may still be in /proc (and its counters readable) for a moment: the kernel
 * wakes the joiner before it releases the task. Waits, bounded, until its directory is gone. */
static void wait_task_released(pid_t tid)
{
    g_autofree char *dir = g_strdup_printf("/proc/%d/task/%d", (int)getpid(), (int)tid);
    gint64 until = g_get_monotonic_time() + 10 * G_USEC_PER_SEC;

    while (g_file_test(dir, G_FILE_TEST_EXISTS) && g_get_monotonic_time() < until)
        g_usleep(1000);
    g_assert_false(g_file_test(dir, G_FILE_TEST_EXISTS));
}

/* A real thread named like a vCPU: sampled through the real /proc, then it exits. */
static void test_thread_real(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaThreadSampler) t = NULL;
    g_autoptr(SaThreadSampler) self = NULL;
    g_autoptr(GArray) tids = NULL;
    g_autoptr(SaCpuSet) allowed = NULL;
    g_autoptr(SaCpuSet) expected = sa_cpuset_new();
    SaThreadSample a, b;
    Worker w = {0};
    GThread *thread;
    cpu_set_t mask;
    bool listed = false;

    g_unsetenv("SOFTAFF_PROC_ROOT");
    g_mutex_init(&w.lock);
    g_cond_init(&w.cond);
    thread = g_thread_new("CPU 0/KVM", worker_main, &w);
    g_mutex_lock(&w.lock);
    while (w.tid == 0)
        g_cond_wait(&w.cond, &w.lock);
    g_mutex_unlock(&w.lock);

    t = sa_thread_sampler_new(getpid(), w.tid, &error);
    g_assert_no_error(error);
    g_assert_true(sa_thread_sampler_read(t, &a, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(a.comm, ==, "CPU 0/KVM");
    g_assert_cmpint(a.last_cpu, >=, 0);
    g_assert_cmpint(a.last_cpu, <, CPU_SETSIZE);

    tids = sa_process_list_threads(getpid(), &error);
    g_assert_no_error(error);
    for (guint i = 0; i < tids->len; i++)
        listed = listed || g_array_index(tids, pid_t, i) == w.tid;
    g_assert_true(listed);

    /* Our own thread: run time grows while we burn CPU. */
    self = sa_thread_sampler_new(getpid(), gettid(), &error);
    g_assert_no_error(error);
    g_assert_true(sa_thread_sampler_read(self, &a, &error));
    burn_thread_cpu(30);
    g_assert_true(sa_thread_sampler_read(self, &b, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(b.run_ns, >, a.run_ns + 25 * G_GUINT64_CONSTANT(1000000));
    g_assert_cmpuint(b.delay_ns, >=, a.delay_ns);

    /* Cpus_allowed_list agrees with sched_getaffinity. */
    allowed = sa_thread_read_allowed(getpid(), gettid(), &error);
    g_assert_no_error(error);
    g_assert_cmpint(sched_getaffinity(0, sizeof(mask), &mask), ==, 0);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &mask))
            sa_cpuset_add(expected, (guint)c);
    g_assert_true(sa_cpuset_equal(allowed, expected));

    /* The thread exits: the open sampler reports it gone, and so does a new one. */
    g_mutex_lock(&w.lock);
    w.stop = true;
    g_cond_broadcast(&w.cond);
    g_mutex_unlock(&w.lock);
    g_thread_join(thread);
    wait_task_released(w.tid);
    g_assert_false(sa_thread_sampler_read(t, &a, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);
    g_clear_error(&error);
    g_clear_pointer(&t, sa_thread_sampler_free);
    t = sa_thread_sampler_new(getpid(), w.tid, &error);
    g_assert_null(t);
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);
    g_clear_error(&error);
    g_assert_null(sa_thread_read_allowed(getpid(), w.tid, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);

    g_mutex_clear(&w.lock);
    g_cond_clear(&w.cond);
}

/* The process state letter, read after the last ')' (a comm may hold one); 0 when unreadable. */
static void test_process_state(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = g_dir_make_tmp("softaff-state-XXXXXX", &error);
    g_assert_no_error(error);
    g_autofree char *dir = g_build_filename(root, "4321", NULL);
    g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
    g_autofree char *stat = g_build_filename(dir, "stat", NULL);
    g_assert_true(g_file_set_contents(stat, "4321 (CPU 0/KVM) (x) T 1 2 3\n", -1, NULL));
    g_setenv("SOFTAFF_PROC_ROOT", root, TRUE);
    g_assert_cmpint(sa_process_state(4321), ==, 'T');
    g_assert_true(g_file_set_contents(stat, "4321 (qemu) S 1 2 3\n", -1, NULL));
    g_assert_cmpint(sa_process_state(4321), ==, 'S');
    g_assert_cmpint(sa_process_state(4322), ==, 0);
    g_assert_true(g_file_set_contents(stat, "4321 (no state\n", -1, NULL));
    g_assert_cmpint(sa_process_state(4321), ==, 0);
    g_unsetenv("SOFTAFF_PROC_ROOT");
    g_unlink(stat);
    g_rmdir(dir);
    g_rmdir(root);
}

/* A kernel without CONFIG_SCHED_INFO: the thread's stat is there, its schedstat is not. */
static void test_schedstat_check(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = g_dir_make_tmp("softaff-nosched-XXXXXX", &error);
    g_assert_no_error(error);
    g_autofree char *task = g_strdup_printf("%s/%d/task/%d", root, (int)getpid(), (int)gettid());
    g_autofree char *stat = g_build_filename(task, "stat", NULL);
    g_autofree char *schedstat = g_build_filename(task, "schedstat", NULL);

    /* The real /proc of this host has it. */
    g_unsetenv("SOFTAFF_PROC_ROOT");
    g_assert_true(sa_schedstat_check(getpid(), gettid(), &error));
    g_assert_no_error(error);

    g_setenv("SOFTAFF_PROC_ROOT", root, TRUE);
    g_assert_false(sa_schedstat_check(getpid(), gettid(), &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, "is /proc mounted?"));
    g_clear_error(&error);

    g_assert_cmpint(g_mkdir_with_parents(task, 0755), ==, 0);
    g_assert_true(g_file_set_contents(stat, "1 (softaffd) S 0\n", -1, NULL));
    g_assert_false(sa_schedstat_check(getpid(), gettid(), &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, schedstat));
    g_assert_nonnull(strstr(error->message, "CONFIG_SCHED_INFO"));
    g_clear_error(&error);

    g_assert_true(g_file_set_contents(schedstat, "1 2 3\n", -1, NULL));
    g_assert_true(sa_schedstat_check(getpid(), gettid(), &error));
    g_assert_no_error(error);

    g_unsetenv("SOFTAFF_PROC_ROOT");
    g_unlink(schedstat);
    g_unlink(stat);
    for (int up = 0; up < 3; up++) {
        g_autofree char *dir = g_path_get_dirname(task);
        g_rmdir(task);
        g_free(task);
        task = g_steal_pointer(&dir);
    }
    g_rmdir(root);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/procstat/parse", test_procstat_parse);
    g_test_add_func("/procstat/errors", test_procstat_errors);
    g_test_add_func("/procstat/load-compute", test_load_compute);
    g_test_add_func("/procstat/load-compute-huge", test_load_compute_huge);
    g_test_add_func("/procstat/load-256", test_load_256);
    g_test_add_func("/procstat/sampler-fixture", test_stat_sampler_fixture);
    g_test_add_func("/procstat/sampler-real", test_stat_sampler_real);
    g_test_add_func("/thread/schedstat-parse", test_schedstat_parse);
    g_test_add_func("/thread/stat-parse", test_stat_parse);
    g_test_add_func("/thread/fixture", test_thread_fixture);
    g_test_add_func("/thread/real", test_thread_real);
    g_test_add_func("/thread/process-state", test_process_state);
    g_test_add_func("/thread/schedstat-check", test_schedstat_check);
    return g_test_run();
}
