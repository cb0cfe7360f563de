/* Unit tests of softaffd's event sensing (daemon/core.c) on this host's real topology with no
 * VM: [sensing] mode=auto|bpf|proc, the fallback and its reason in the status and metrics, a
 * reload that changes the mode; where the BPF program loads (root, kernel BTF), an event runs
 * a tick at once, and the tick's watch update (no visitors: nothing watched) stops the events.
 * Tests that need the program skip without it, or fail with SOFTAFF_REQUIRE_VM=1. */
#define G_LOG_DOMAIN "test-core-sensing"

#include <glib.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core-private.h"
#include "recorder.h"
#include "sa-error.h"
#include "sa-metrics.h"
#include "sa-sampler.h"

static SaCore *core_with(SaSensingMode mode)
{
    g_autoptr(GError) error = NULL;
    SaConfig *cfg = sa_config_new_default();
    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    SaCore *core;

    g_assert_no_error(error);
    cfg->sensing_mode = mode;
    cfg->sensing_threshold_us = 1000;
    core = sa_core_new(cfg, topo, TRUE, &error);
    g_assert_no_error(error);
    return core;
}

static void assert_reported(SaCore *core, const char *mode, const char *reason, int bpf)
{
    g_autofree char *status = sa_core_status_json(core);
    g_autofree char *metrics = sa_metrics_format(core);
    g_autofree char *want_mode = g_strdup_printf("\"sensing\":{\"mode\":\"%s\"", mode);
    g_autofree char *want_metric = g_strdup_printf("\nsoftaff_sensing_bpf %d\n", bpf);

    g_assert_cmpstr(sa_core_sensing_mode(core), ==, mode);
    g_assert_nonnull(strstr(core->sensing_reason, reason));
    if (!strstr(status, want_mode) || !strstr(status, reason))
        g_error("status does not show sensing %s (%s): %s", mode, reason, status);
    g_assert_nonnull(strstr(metrics, want_metric));
    g_assert_nonnull(strstr(metrics, "\nsoftaff_event_ticks_total "));
}

static void test_disabled(void)
{
    g_autoptr(GError) error = NULL;
    SaCore *core = core_with(SA_SENSING_AUTO);

    g_setenv("SOFTAFF_SENSE_DISABLE", "1", TRUE);
    g_assert_true(sa_core_start_sensing(core, &error));
    g_assert_no_error(error);
    assert_reported(core, "proc", "disabled by SOFTAFF_SENSE_DISABLE", 0);
    sa_core_free(core);

    /* mode=bpf will not run without it. */
    core = core_with(SA_SENSING_BPF);
    g_assert_false(sa_core_start_sensing(core, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
    g_assert_cmpstr(error->message, ==, "[sensing] mode=bpf: disabled by SOFTAFF_SENSE_DISABLE");
    g_unsetenv("SOFTAFF_SENSE_DISABLE");
    sa_core_free(core);
}

static void test_proc(void)
{
    g_autoptr(GError) error = NULL;
    SaCore *core = core_with(SA_SENSING_PROC);

    g_assert_true(sa_core_start_sensing(core, &error));
    g_assert_null(core->sense);
    assert_reported(core, "proc", "[sensing] mode=proc", 0);
    sa_core_free(core);
}

static bool bpf_or_skip(SaCore *core)
{
    if (core->sense)
        return true;
    if (g_strcmp0(g_getenv("SOFTAFF_REQUIRE_VM"), "1") == 0)
        g_error("SOFTAFF_REQUIRE_VM=1 and the BPF program does not load: %s", core->sensing_reason);
    g_test_skip_printf("the BPF program does not load here: %s", core->sensing_reason);
    return false;
}

/* proc -> auto loads the program, auto -> proc unloads it; the same mode keeps it. */
static void test_reload(void)
{
    SaCore *core = core_with(SA_SENSING_PROC);
    SaConfig *cfg = sa_config_new_default();
    g_autoptr(GError) error = NULL;
    SaSense *before;

    g_assert_true(sa_core_start_sensing(core, NULL));
    g_assert_null(core->sense);
    cfg->sensing_mode = SA_SENSING_AUTO;
    sa_core_reload(core, cfg, sa_topology_load(SA_LAYOUT_NODE, NULL, &error));
    g_assert_no_error(error);
    if (!bpf_or_skip(core)) {
        sa_core_free(core);
        return;
    }
    assert_reported(core, "bpf", "BPF program loaded ([sensing] mode=auto)", 1);
    before = core->sense;
    sa_core_reload(core, sa_config_new_default(), sa_topology_load(SA_LAYOUT_NODE, NULL, NULL));
    g_assert_true(core->sense == before);
    cfg = sa_config_new_default();
    cfg->sensing_mode = SA_SENSING_PROC;
    sa_core_reload(core, cfg, sa_topology_load(SA_LAYOUT_NODE, NULL, NULL));
    g_assert_null(core->sense);
    assert_reported(core, "proc", "[sensing] mode=proc", 0);
    sa_core_free(core);
}

typedef struct {
    int cpu;
    atomic_int tid;
    atomic_bool stop;
    pthread_t thread;
} Spinner;

static void *spin(void *data)
{
    Spinner *sp = data;
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(sp->cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
    atomic_store(&sp->tid, (int)gettid());
    while (!atomic_load(&sp->stop))
        ;
    return NULL;
}

static void spin_start(Spinner *sp, int cpu)
{
    sp->cpu = cpu;
    atomic_store(&sp->tid, 0);
    atomic_store(&sp->stop, false);
    g_assert_cmpint(pthread_create(&sp->thread, NULL, spin, sp), ==, 0);
    while (!atomic_load(&sp->tid))
        g_usleep(100);
}

static void spin_stop(Spinner *sp)
{
    atomic_store(&sp->stop, true);
    pthread_join(sp->thread, NULL);
}

static void run_main_loop(guint ms, SaCore *core, guint64 until_event_ticks)
{
    gint64 end = g_get_monotonic_time() + (gint64)ms * 1000;

    while (g_get_monotonic_time() < end && core->event_ticks < until_event_ticks)
        g_main_context_iteration(NULL, FALSE) || (g_usleep(1000), 0);
}

/* Two threads compete on a watched CPU: an event tick. That tick finds no VM
 * visiting another home, so it watches nothing: the events stop (without the update they
 * would come every window, an extra tick per 20 ms). */
static void test_event_tick(void)
{
    SaCore *core = core_with(SA_SENSING_AUTO);
    g_autoptr(SaCpuSet) cpus = sa_cpuset_new();
    int cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
    guint64 ticks, first;
    Spinner a, b;

    g_assert_true(sa_core_start_sensing(core, NULL));
    if (!bpf_or_skip(core)) {
        sa_core_free(core);
        return;
    }
    sa_cpuset_add(cpus, (guint)cpu);
    g_assert_true(sa_sense_watch(core->sense, cpus, NULL, 0, NULL, 0, NULL));
    ticks = core->ticks;
    spin_start(&a, cpu);
    spin_start(&b, cpu);
    run_main_loop(1000, core, 1); /* a bound for a loaded host, not a figure */
    first = core->event_ticks;
    g_assert_cmpuint(first, >=, 1);
    g_assert_cmpuint(core->ticks, >, ticks);
    run_main_loop(200, core, G_MAXUINT64);
    spin_stop(&a);
    spin_stop(&b);
    g_test_message("event ticks: %" G_GUINT64_FORMAT " then %" G_GUINT64_FORMAT, first,
                   core->event_ticks);
    g_assert_cmpuint(core->event_ticks, <=, first + 1);
    sa_core_free(core);
}

/* Watches cpu from a quiet window on, starts the tracked spinner *a there and runs the loop to
 * the next event tick. True if that tick answered the spinner's start (the owners' sign). On a
 * loaded host another thread's wait behind the spinner may be read first: that tick finds no VM
 * visiting anywhere and stops watching, so the sign may never come (seen in CI under ASan, and
 * every time with a thread waking every 5 ms on that CPU). Then the spinner is stopped and the
 * caller tries again. */
static bool sign_ticked(SaCore *core, Spinner *a, int cpu)
{
    g_autoptr(SaCpuSet) cpus = sa_cpuset_new();
    guint64 ticks = core->event_ticks, reads = core->owners_reads;

    sa_cpuset_add(cpus, (guint)cpu);
    g_assert_true(sa_sense_watch(core->sense, cpus, NULL, 0, NULL, 0, NULL));
    g_usleep(30000); /* a quiet window first: a CPU's first window after watching counts busy */
    spin_start(a, cpu);
    g_assert_true(sa_sense_track(core->sense, atomic_load(&a->tid)));
    run_main_loop(1000, core, ticks + 1); /* a bound for a loaded host, not a figure */
    g_assert_cmpuint(core->event_ticks, ==, ticks + 1);
    if (core->owners_reads > reads)
        return true;
    g_test_message("CPU %d: another thread's wait was read before the owners' sign", cpu);
    spin_stop(a);
    return false;
}

#define SIGN_TRIES 5

/* A core with the sensor (NULL: skipped, no BPF), ticking every 2 s, at the owners' sign: this
 * thread off the last CPU (its waits behind a spinner there would be events too; its old
 * affinity in *mine), that CPU watched from a quiet window on, and a tracked spinner started
 * there (*a, on *cpu). Returns once the sign's event tick, the core's first, ran. A try whose
 * first tick answered another thread starts again with a new core (the late sign would count as
 * the interval's first). */
static SaCore *core_at_sign(cpu_set_t *mine, Spinner *a, int *cpu)
{
    cpu_set_t other;

    *cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
    g_assert_cmpint(sched_getaffinity(0, sizeof(*mine), mine), ==, 0);
    CPU_ZERO(&other);
    for (int c = 0; c < *cpu; c++)
        CPU_SET(c, &other);
    for (int i = 0; i < SIGN_TRIES; i++) {
        SaCore *core = core_with(SA_SENSING_AUTO);

        g_assert_true(sa_core_start_sensing(core, NULL));
        if (!bpf_or_skip(core)) {
            sa_core_free(core);
            return NULL;
        }
        core->cfg->interval_ms = 2000;
        if (*cpu > 0)
            g_assert_cmpint(sched_setaffinity(0, sizeof(other), &other), ==, 0);
        g_usleep(50000); /* the tick interval starts well before the sign */
        if (sign_ticked(core, a, *cpu)) {
            g_assert_cmpuint(core->event_ticks, ==, 1);
            return core;
        }
        sa_core_free(core);
    }
    g_error("CPU %d: %d tries, and each time another thread's wait was read before the owners' "
            "sign (a busy host)",
            *cpu, SIGN_TRIES);
}

/* A vCPU-like (tracked) thread that starts running alone on a watched CPU never waits: its run
 * is the owners' sign, an event tick, and since that tick's interval is mostly from
 * before the sign, one more tick follows. A second sign within the same tick interval ticks once,
 * with no follow-up (a load that comes on like a clock doubles the gap as any event does). */
static void test_owners_sign(void)
{
    cpu_set_t mine;
    Spinner a;
    int cpu, i;
    SaCore *core = core_at_sign(&mine, &a, &cpu);
    gint64 first;

    if (!core)
        return;
    g_assert_cmpuint(core->event_tick_timer, !=, 0); /* the follow-up, 20 ms on */
    first = core->owners_event_us;
    run_main_loop(1000, core, 2); /* a bound for a loaded host, not a figure */
    run_main_loop(100, core, G_MAXUINT64);
    spin_stop(&a);
    g_assert_cmpuint(core->event_ticks, ==, 2);

    for (i = 0; i < SIGN_TRIES && !sign_ticked(core, &a, cpu); i++)
        run_main_loop(100, core, G_MAXUINT64); /* the lost sign's leftovers, if any */
    g_assert_cmpint(i, <, SIGN_TRIES);
    /* no follow-up: the sign did not count as the interval's first */
    g_assert_cmpuint(core->event_tick_timer, ==, 0);
    g_assert_cmpint(core->owners_event_us, ==, first);
    spin_stop(&a);
    sched_setaffinity(0, sizeof(mine), &mine);
    sa_core_free(core);
}

/* The regular timer firing right after the event tick that answered the owners' sign (seen in
 * the spiky bench: 6 ms after) is skipped: it would measure 6 ms and cancel the follow-up, and
 * the owners' load would wait for the next event or tick (362 ms there). The follow-up still
 * comes; a regular tick 20 ms or more after the last one runs. */
static void test_regular_after_event(void)
{
    cpu_set_t mine;
    Spinner a;
    int cpu;
    SaCore *core = core_at_sign(&mine, &a, &cpu);
    guint64 ticks;

    if (!core)
        return;
    g_assert_cmpuint(core->event_tick_timer, !=, 0); /* the follow-up, 20 ms on */
    ticks = core->ticks;
    g_assert_false(sa_core_regular_tick(core));
    g_assert_cmpuint(core->ticks, ==, ticks);
    run_main_loop(1000, core, 2); /* a bound for a loaded host, not a figure */
    run_main_loop(100, core, G_MAXUINT64);
    spin_stop(&a);
    g_assert_cmpuint(core->event_ticks, ==, 2);
    g_assert_true(sa_core_regular_tick(core));
    g_assert_cmpuint(core->ticks, ==, ticks + 2);
    sched_setaffinity(0, sizeof(mine), &mine);
    sa_core_free(core);
}

static void schedstat(pid_t tid, guint64 *run)
{
    g_autofree char *path = g_strdup_printf("/proc/self/task/%d/schedstat", tid);
    g_autofree char *text = NULL;
    guint64 delay;

    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_assert_true(sa_schedstat_parse(text, run, &delay, NULL));
}

/* A managed VM whose "vCPUs" are two spinning threads of this process: with the sensor, the
 * tick reads them from its map (run time as /proc's schedstat says), and a vCPU thread that
 * exits reads as gone. */
static void test_vcpus_via_sensor(void)
{
    SaCore *core = core_with(SA_SENSING_AUTO);
    int cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
    Spinner v[2] = {0};
    guint64 p0, p1;

    g_assert_true(sa_core_start_sensing(core, NULL));
    if (!bpf_or_skip(core)) {
        sa_core_free(core);
        return;
    }
    g_autoptr(GArray) tids = g_array_new(FALSE, TRUE, sizeof(pid_t));
    for (guint i = 0; i < 2; i++) {
        spin_start(&v[i], cpu);
        pid_t tid = atomic_load(&v[i].tid);
        g_array_append_val(tids, tid);
    }
    SaVmFacts *f = rec_facts("key-spin", "spin", getpid(), 2);
    f->vcpu_tids = g_array_ref(tids);
    RecVm *rec = rec_vm_new("key-spin", f);
    sa_core_report(core, &rec_ops, rec, f);
    SaVm *vm = sa_core_lookup(core, "key-spin");
    g_assert_nonnull(vm);
    g_assert_cmpint(vm->status, ==, SA_VM_MANAGED);

    sa_core_tick(core);
    g_assert_true(vm->sampling.via_sense);
    g_usleep(30000); /* a switch or two: the totals count from the next one */
    sa_core_tick(core);
    schedstat(g_array_index(tids, pid_t, 0), &p0);
    g_usleep(300000);
    sa_core_tick(core);
    schedstat(g_array_index(tids, pid_t, 0), &p1);
    const SaVcpuSample *d = &g_array_index(vm->sampling.deltas, SaVcpuSample, 0);
    g_test_message("vCPU 0: map %.1f ms, /proc %.1f ms", d->run_ns / 1e6, (p1 - p0) / 1e6);
    g_assert_cmpint(d->last_cpu, ==, cpu);
    g_assert_cmpfloat(fabs((double)d->run_ns - (double)(p1 - p0)), <, 0.1 * (p1 - p0) + 5e6);

    spin_stop(&v[1]);
    /* Its exit is done (the map forgot it) once /proc forgot it too. */
    g_autofree char *gone = g_strdup_printf("/proc/self/task/%d", g_array_index(tids, pid_t, 1));
    for (int i = 0; i < 1000 && g_file_test(gone, G_FILE_TEST_EXISTS); i++)
        g_usleep(1000);
    sa_core_tick(core);
    d = &g_array_index(vm->sampling.deltas, SaVcpuSample, 1);
    g_assert_cmpint(d->last_cpu, ==, -1);
    g_assert_cmpuint(d->run_ns, ==, 0);
    spin_stop(&v[0]);
    sa_core_free(core);
    rec_vm_unref(rec);
}

static guint lost_reports;

static void count_lost(gpointer handle)
{
    lost_reports++;
}

/* The tick reads the sensor's map at once, when the first VM needs it: a VM whose threads are
 * found (and tracked) later in the same tick still reads them, from the map, and none of them
 * reads as gone. Two VMs reported together: the first tick finds both, "a-vm" first. */
static bool ran_since_tick(const SaVm *vm)
{
    return vm->sampling.deltas->len &&
           g_array_index(vm->sampling.deltas, SaVcpuSample, 0).run_ns > 0;
}

static void test_vcpus_found_after_reading(void)
{
    SaCore *core = core_with(SA_SENSING_AUTO);
    int cpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
    const char *names[2] = {"a-vm", "b-vm"};
    SaBackendOps ops = rec_ops;
    Spinner v[2] = {0};
    RecVm *rec[2];
    SaVm *vm[2];

    g_assert_true(sa_core_start_sensing(core, NULL));
    if (!bpf_or_skip(core)) {
        sa_core_free(core);
        return;
    }
    ops.threads_lost = count_lost;
    lost_reports = 0;
    for (guint i = 0; i < 2; i++) {
        g_autoptr(GArray) tids = g_array_new(FALSE, TRUE, sizeof(pid_t));
        g_autofree char *key = g_strdup_printf("key-%s", names[i]);

        spin_start(&v[i], cpu);
        pid_t tid = atomic_load(&v[i].tid);
        g_array_append_val(tids, tid);
        SaVmFacts *f = rec_facts(key, names[i], getpid(), 1);
        f->vcpu_tids = g_array_ref(tids);
        rec[i] = rec_vm_new(key, f);
        sa_core_report(core, &ops, rec[i], f);
        vm[i] = sa_core_lookup(core, key);
        g_assert_nonnull(vm[i]);
        g_assert_cmpint(vm[i]->status, ==, SA_VM_MANAGED);
    }
    sa_core_tick(core);
    g_usleep(30000);
    sa_core_tick(core);
    /* Both spinners share the CPU: each runs within a tick of 200 ms on a quiet host; a loaded
     * one gets a few more ticks (a bound, not a figure). */
    for (guint round = 0; round < 10 && !(ran_since_tick(vm[0]) && ran_since_tick(vm[1]));
         round++) {
        g_usleep(200000);
        sa_core_tick(core);
    }
    g_assert_cmpuint(lost_reports, ==, 0);
    for (guint i = 0; i < 2; i++) {
        const SaVcpuSample *d = &g_array_index(vm[i]->sampling.deltas, SaVcpuSample, 0);

        g_assert_true(vm[i]->sampling.via_sense);
        g_test_message("%s: vCPU 0 ran %.1f ms of the last tick", names[i], d->run_ns / 1e6);
        g_assert_cmpint(d->last_cpu, ==, cpu);
        g_assert_cmpuint(d->run_ns, >, 0);
    }
    /* The second VM's thread exits: it reads as gone, and the first's still reads. */
    spin_stop(&v[1]);
    g_autofree char *gone = g_strdup_printf("/proc/self/task/%d", atomic_load(&v[1].tid));
    for (int i = 0; i < 1000 && g_file_test(gone, G_FILE_TEST_EXISTS); i++)
        g_usleep(1000);
    sa_core_tick(core);
    g_assert_cmpuint(lost_reports, ==, 1);
    g_assert_cmpint(g_array_index(vm[1]->sampling.deltas, SaVcpuSample, 0).last_cpu, ==, -1);
    g_assert_cmpint(g_array_index(vm[0]->sampling.deltas, SaVcpuSample, 0).last_cpu, ==, cpu);
    spin_stop(&v[0]);
    sa_core_free(core);
    for (guint i = 0; i < 2; i++)
        rec_vm_unref(rec[i]);
}

/* The sensor's idle time against /proc/stat's (sample.c): spans of 2 s or more, 3 samples at
 * least; a CPU beyond 10 points fails the span, beyond 4 points over the last 5 spans that
 * passed fails too; CPUs the sensor did not know over half the span are not judged. */
static void test_idle_check(void)
{
    g_autoptr(SaIdleCheck) c = sa_idle_check_new();
    const guint64 tick = 500 * G_GUINT64_CONSTANT(1000000);
    double proc[2] = {0.91, 0.0};
    guint64 sense[2] = {tick * 91 / 100, 0};
    bool known[2] = {true, true};
    guint cpu = 99;
    double p = -1, s = -1;

    /* Agreeing (an idle CPU 0 at 91%, a busy CPU 1): every span passes. */
    for (guint i = 0; i < 12; i++)
        g_assert_true(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));
    g_assert_cmpuint(sa_idle_check_spans(c), ==, 3);

    /* Within the tolerance (8 points): still passes. */
    sense[0] = tick * 83 / 100;
    for (guint i = 0; i < 4; i++)
        g_assert_true(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));
    g_assert_cmpuint(sa_idle_check_spans(c), ==, 4);

    /* The 7.2 case: the sensor says CPU 0 is 1% idle, /proc/stat 91%: the span's end fails,
     * not before (one odd sample is no verdict). */
    sense[0] = tick / 100;
    for (guint i = 0; i < 3; i++)
        g_assert_true(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));
    g_assert_false(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));
    g_assert_cmpuint(cpu, ==, 0);
    g_assert_cmpfloat_with_epsilon(p, 0.91, 1e-9);
    g_assert_cmpfloat_with_epsilon(s, 0.01, 1e-9);

    /* A CPU the sensor knew for under half the span is not judged. */
    sa_idle_check_reset(c);
    known[0] = false;
    for (guint i = 0; i < 4; i++)
        g_assert_true(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));

    /* Too few samples over a long interval: no verdict yet. */
    sa_idle_check_reset(c);
    known[0] = true;
    g_assert_true(sa_idle_check_add(c, 2, proc, sense, known, 4 * tick, &cpu, &p, &s));
    g_assert_true(sa_idle_check_add(c, 2, proc, sense, known, 4 * tick, &cpu, &p, &s));
    g_assert_false(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));
    g_assert_cmpfloat_with_epsilon(sa_idle_check_verdict_seconds(c), 4.5, 1e-9);

    /* The 6.1 case: a busy CPU 1 the sensor reads 5 points idler than /proc/stat. Each span
     * passes (within 10 points); the last 5 spans together (10 s) fail at 4 points, at the
     * fifth span's end and not before. */
    sa_idle_check_reset(c);
    proc[0] = 0.91;
    sense[0] = tick * 91 / 100;
    proc[1] = 0.09;
    sense[1] = tick * 14 / 100;
    guint before = sa_idle_check_spans(c);
    for (guint i = 0; i < 19; i++)
        g_assert_true(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));
    g_assert_false(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));
    g_assert_cmpuint(sa_idle_check_spans(c), ==, before + 5);
    g_assert_cmpuint(cpu, ==, 1);
    g_assert_cmpfloat_with_epsilon(p, 0.09, 1e-9);
    g_assert_cmpfloat_with_epsilon(s, 0.14, 1e-9);
    g_assert_cmpfloat_with_epsilon(sa_idle_check_verdict_seconds(c), 10.0, 1e-9);

    /* 3 points off, for good: every span and every 10 s pass. */
    sa_idle_check_reset(c);
    sense[1] = tick * 12 / 100;
    for (guint i = 0; i < 60; i++)
        g_assert_true(sa_idle_check_add(c, 2, proc, sense, known, tick, &cpu, &p, &s));
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/core/sensing/disabled", test_disabled);
    g_test_add_func("/core/sensing/idle-check", test_idle_check);
    g_test_add_func("/core/sensing/proc", test_proc);
    g_test_add_func("/core/sensing/reload", test_reload);
    g_test_add_func("/core/sensing/event-tick", test_event_tick);
    g_test_add_func("/core/sensing/owners-sign", test_owners_sign);
    g_test_add_func("/core/sensing/regular-after-event", test_regular_after_event);
    g_test_add_func("/core/sensing/vcpus-via-sensor", test_vcpus_via_sensor);
    g_test_add_func("/core/sensing/vcpus-found-after-reading", test_vcpus_found_after_reading);
    return g_test_run();
}
