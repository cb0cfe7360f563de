/* softaffd's [actuation] mode, unit tests: the real core on a fake host (2 nodes of 2 CPUs) with
 * a recording backend, and either the host's scheduler calls (sched/sa-sched.h: on this fake
 * sysfs, as on a kernel without sched_ext, they say why not) or a fake scheduler that records
 * what the core gives it and can be told to refuse or to be ejected.
 *
 * Checked: auto takes re-pinning with the kernel's reason, said once, in the status and the
 * metrics; sched_ext refuses with the cause; pin never loads the scheduler; a scheduler that
 * starts gets the partitions and the managed VMs' vCPU threads (soft, strict, softness 0) with
 * home, softness and strictness, the unmanaged VM's none, and no vCPU thread is pinned (the
 * emulator is, home); an ejection is
 * logged with the kernel's reason and every managed VM is pinned at that tick; shutdown stops
 * the scheduler; a VM that stops being managed or goes leaves it; a reload between the modes;
 * a thread left in SCHED_EXT is released once while re-pinning. */
#include <glib.h>
#include <string.h>
#include <unistd.h>

#include "actuator.h"
#include "core-bed.h"
#include "core-private.h"
#include "log-capture.h"
#include "sa-error.h"
#include "sa-metrics.h"

/* ---- the fake scheduler ---- */

typedef struct {
    guint home, softness, vm;
    bool strict;
} FThread;

typedef struct {
    bool fail_start; /* start says why not */
    guint starts, stops, adds, removes, forgets, reads;
    guint cpu_part[8];
    guint n_cpus, n_parts;
    guint distance[4];
    GHashTable *threads;  /* tid -> FThread* (in the ext class) */
    SaSchedExit exit;     /* kind != 0: ejected */
    bool running;         /* started and not stopped */
    GHashTable *ext_left; /* tids still SCHED_EXT from an earlier run (release_thread) */
    guint releases;
} FSched;

static FSched fs;

static bool f_available(gpointer data, GError **error)
{
    if (fs.fail_start) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED, "fake: no scheduler here");
        return false;
    }
    return true;
}

static gpointer f_start(gpointer data, const guint *cpu_part, guint n_cpus, guint n_parts,
                        const guint *distance, GError **error)
{
    fs.starts++;
    if (fs.fail_start) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO,
                    "loading the sched_ext program: Operation not permitted");
        return NULL;
    }
    g_assert_cmpuint(n_cpus, <=, G_N_ELEMENTS(fs.cpu_part));
    g_assert_cmpuint(n_parts * n_parts, <=, G_N_ELEMENTS(fs.distance));
    memcpy(fs.cpu_part, cpu_part, n_cpus * sizeof(guint));
    memcpy(fs.distance, distance, n_parts * n_parts * sizeof(guint));
    fs.n_cpus = n_cpus;
    fs.n_parts = n_parts;
    fs.running = true;
    return &fs;
}

static bool f_set_partitions(gpointer s, const guint *cpu_part, guint n_cpus, guint n_parts,
                             const guint *distance, GError **error)
{
    g_assert_true(s == &fs);
    fs.n_cpus = n_cpus;
    fs.n_parts = n_parts;
    return true;
}

static bool f_add(gpointer s, pid_t tid, guint home, guint softness, bool strict, guint vm,
                  GError **error)
{
    FThread *t = g_new0(FThread, 1);

    g_assert_true(s == &fs && fs.running);
    g_assert_cmpuint(home, <, fs.n_parts);
    t->home = home;
    t->softness = softness;
    t->strict = strict;
    t->vm = vm;
    g_hash_table_insert(fs.threads, GINT_TO_POINTER(tid), t);
    fs.adds++;
    return true;
}

static bool f_remove(gpointer s, pid_t tid, GError **error)
{
    g_assert_true(s == &fs);
    fs.removes++;
    g_hash_table_remove(fs.threads, GINT_TO_POINTER(tid));
    return true;
}

static void f_forget(gpointer s, pid_t tid)
{
    fs.forgets++;
    g_hash_table_remove(fs.threads, GINT_TO_POINTER(tid));
}

static bool f_read(gpointer s, GArray *out, GError **error)
{
    GHashTableIter it;
    gpointer k, v;

    fs.reads++;
    g_hash_table_iter_init(&it, fs.threads);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const FThread *t = v;
        SaSchedCounters c = {.tid = GPOINTER_TO_INT(k), .vm = t->vm, .home = t->home};

        /* A soft thread ran 1 ms away and sits away now; the others stayed home. */
        c.run_ns[t->home] = 5000000;
        c.last_part = t->home;
        if (!t->strict && t->softness > 0) {
            c.run_ns[1 - t->home] = 1000000;
            c.last_part = 1 - t->home;
            c.visits = 1;
        }
        g_array_append_val(out, c);
    }
    return true;
}

static bool f_ejected(gpointer s, SaSchedExit *out)
{
    if (!fs.exit.kind)
        return false;
    *out = fs.exit;
    out->dump = g_strdup(fs.exit.dump); /* the caller frees it, as sa_sched_ejected's */
    return true;
}

static void f_stop(gpointer s)
{
    g_assert_true(s == &fs);
    fs.stops++;
    fs.running = false;
    g_hash_table_remove_all(fs.threads); /* every thread back to SCHED_OTHER */
}

static bool f_release(gpointer data, pid_t tid, bool *was_ext, GError **error)
{
    fs.releases++;
    *was_ext = g_hash_table_remove(fs.ext_left, GINT_TO_POINTER(tid));
    return true;
}

static const SaSchedOps fake_ops = {
    .available = f_available,
    .start = f_start,
    .set_partitions = f_set_partitions,
    .add_thread = f_add,
    .remove_thread = f_remove,
    .forget_thread = f_forget,
    .read = f_read,
    .ejected = f_ejected,
    .stop = f_stop,
    .release_thread = f_release,
};

static const FThread *fthread(pid_t tid)
{
    return g_hash_table_lookup(fs.threads, GINT_TO_POINTER(tid));
}

/* ---- fixture ---- */

/* The fixture: the bed of tests/support/core-bed.h, its fake kernel placing a vCPU the
 * scheduler has at home (fake_place). */
typedef CoreBed Fx;

static SaConfig *test_config(SaActuationMode mode)
{
    SaConfig *cfg = bed_config();

    cfg->command_timeout_ms = 100;
    cfg->stop_timeout_ms = 300;
    cfg->actuation_mode = mode;
    return cfg;
}

static pid_t vcpu_tid(const BedVm *v, guint i)
{
    return v->pid + 1 + (pid_t)i; /* fake_host_add_process */
}

/* The fake kernel: while the scheduler has a vCPU it runs on the CPUs of its home partition,
 * else on those of its last pin (every CPU before any); vCPU c on the c-th CPU of that set. */
static void fake_place(CoreBed *bed, const BedVm *v, int *cpu)
{
    g_autoptr(SaCpuSet) pinned = bed_pinned_set(bed, v);

    for (guint c = 0; c < v->n_vcpus; c++) {
        const FThread *t = fthread(vcpu_tid(v, c));
        g_autoptr(SaCpuSet) home = sa_cpuset_new();

        if (t)
            sa_cpuset_add_range(home, t->home * 2, t->home * 2 + 1);
        cpu[c] = bed_nth_cpu(t ? home : pinned, c);
    }
}

static void fx_setup(Fx *fx, gconstpointer data)
{
    log_capture_clear();
    memset(&fs, 0, sizeof(fs));
    fs.threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    fs.ext_left = g_hash_table_new(g_direct_hash, g_direct_equal);
    bed_init(fx, test_config(SA_ACTUATION_AUTO));
    fx->place = fake_place;
}

static void fx_teardown(Fx *fx, gconstpointer data)
{
    bed_clear(fx);
    g_hash_table_unref(fs.threads);
    g_hash_table_unref(fs.ext_left);
}

/* A VM: preferred -1 auto; mode and softness as given (softness -1: the default). */
static BedVm *add_vm(Fx *fx, const char *name, guint n_vcpus, int preferred, SaMode mode,
                     int softness, double load)
{
    BedVm *v = bed_vm(fx, name, 0, n_vcpus, load);
    g_autoptr(SaVmFacts) f = bed_facts(v, name, preferred);

    f->settings.mode = mode;
    f->settings.softness = softness;
    bed_report(fx, v, g_steal_pointer(&f));
    return v;
}

static char *status(Fx *fx)
{
    return sa_core_status_json(fx->core);
}

static void assert_in(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle))
        g_error("missing %s in: %s", needle, haystack);
}

static void start(Fx *fx, SaActuationMode mode, bool fake)
{
    g_autoptr(GError) error = NULL;

    fx->core->cfg->actuation_mode = mode;
    if (fake)
        sa_core_set_sched_ops(fx->core, &fake_ops, NULL);
    g_assert_true(sa_core_start_actuation(fx->core, &error));
    g_assert_no_error(error);
}

/* ---- tests ---- */

/* This host's case: no sched_ext (the fake sysfs has no kernel/sched_ext, like 6.18). auto
 * re-pins and says why once: in the log, the status and the metrics. */
static void test_auto_no_sched_ext(Fx *fx, gconstpointer data)
{
    BedVm *a;

    start(fx, SA_ACTUATION_AUTO, false);
    g_autofree char *want = g_strdup_printf("the kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT): "
                                            "%s/sys/kernel/sched_ext: No such file "
                                            "or directory",
                                            fake_host_root(fx->host));
    g_assert_cmpstr(sa_core_actuation_mode(fx->core), ==, "pin");
    g_assert_cmpstr(sa_core_actuation_reason(fx->core), ==, want);
    g_autofree char *line = g_strdup_printf("actuation: re-pinning (affinity): %s\n", want);
    g_assert_cmpuint(log_count(line), ==, 1);
    a = add_vm(fx, "a", 2, 0, SA_MODE_SOFT, -1, 0.2);
    bed_step(fx, 4);
    /* Re-pinning as always: pinned home. */
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 1);
    g_autofree char *pinned = rec_vm_last_vcpus(a->rec);
    g_assert_cmpstr(pinned, ==, "0-1");
    g_assert_cmpuint(log_count("actuation:"), ==, 1); /* said once */
    g_autofree char *json = status(fx);
    g_autofree char *jwant = g_strdup_printf("\"actuation\":{\"mode\":\"pin\",\"configured\":"
                                             "\"auto\",\"reason\":\"%s\",\"threads\":0,"
                                             "\"ejections\":0,\"last_ejection\":null}",
                                             want);
    assert_in(json, jwant);
    assert_in(json, "\"scheduler\":null");
    g_autofree char *metrics = sa_metrics_format(fx->core);
    assert_in(metrics, "\nsoftaff_actuation_sched_ext 0\n");
    assert_in(metrics, "\nsoftaff_sched_ext_ejections_total 0\n");
    assert_in(metrics, "\nsoftaff_sched_ext_threads 0\n");
}

/* mode=sched_ext on such a kernel: softaffd refuses to start, naming the cause. */
static void test_sched_ext_refused(Fx *fx, gconstpointer data)
{
    g_autoptr(GError) error = NULL;

    fx->core->cfg->actuation_mode = SA_ACTUATION_SCHED_EXT;
    g_assert_false(sa_core_start_actuation(fx->core, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
    g_autofree char *want = g_strdup_printf(
        "[actuation] mode=sched_ext: the kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT): "
        "%s/sys/kernel/sched_ext: No such file or directory",
        fake_host_root(fx->host));
    g_assert_cmpstr(error->message, ==, want);
    g_assert_cmpstr(sa_core_actuation_mode(fx->core), ==, "pin");

    /* A program that does not load (the fake's reason): auto re-pins, sched_ext refuses. */
    g_clear_error(&error);
    fs.fail_start = true;
    sa_core_set_sched_ops(fx->core, &fake_ops, NULL);
    g_assert_false(sa_core_start_actuation(fx->core, &error));
    g_assert_cmpstr(error->message, ==,
                    "[actuation] mode=sched_ext: loading the sched_ext program: Operation not "
                    "permitted");
    fx->core->cfg->actuation_mode = SA_ACTUATION_AUTO;
    g_clear_error(&error);
    g_assert_true(sa_core_start_actuation(fx->core, &error));
    g_assert_cmpstr(sa_core_actuation_reason(fx->core), ==,
                    "loading the sched_ext program: Operation not permitted");
    g_assert_cmpuint(fs.starts, ==, 2);
    g_assert_cmpstr(sa_core_actuation_mode(fx->core), ==, "pin");
}

/* mode=pin never loads the scheduler, even where it would start. */
static void test_pin(Fx *fx, gconstpointer data)
{
    BedVm *a;

    start(fx, SA_ACTUATION_PIN, true);
    g_assert_cmpuint(fs.starts, ==, 0);
    g_assert_cmpstr(sa_core_actuation_reason(fx->core), ==, "[actuation] mode=pin");
    a = add_vm(fx, "a", 2, 1, SA_MODE_SOFT, -1, 0.2);
    bed_step(fx, 3);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 1);
    g_assert_cmpuint(fs.adds, ==, 0);
}

/* The value of the metric name's sample for the VM domain whose labels end with last (e.g.
 * "partition=\"0\"}"); NULL when there is none. */
static char *metric_value(const char *metrics, const char *name, const char *domain,
                          const char *last)
{
    g_auto(GStrv) lines = g_strsplit(metrics, "\n", -1);
    g_autofree char *start = g_strdup_printf("%s{domain=\"%s\",", name, domain);

    for (char **l = lines; *l; l++) {
        const char *space = strrchr(*l, ' ');
        if (!g_str_has_prefix(*l, start) || !space)
            continue;
        g_autofree char *labels = g_strndup(*l, (gsize)(space - *l));
        if (g_str_has_suffix(labels, last))
            return g_strdup(space + 1);
    }
    return NULL;
}

static void assert_metric(const char *metrics, const char *name, const char *domain,
                          const char *last, const char *want)
{
    g_autofree char *got = metric_value(metrics, name, domain, last);
    if (g_strcmp0(got, want) != 0)
        g_error("%s of %s (%s): %s, not %s, in:\n%s", name, domain, last, got ? got : "none", want,
                metrics);
}

/* The scheduler's counters of a soft VM of home 0 with four vCPUs in the fake (each read: 5 ms
 * at home, 1 ms on partition 1, one visit, a thread): lifetime sums that do not grow while the
 * counters stay, and do not go back when the threads leave the scheduler. */
static void assert_sched_metrics_a(const char *metrics)
{
    assert_in(metrics, "# TYPE softaff_vm_sched_ext_run_seconds_total counter\n");
    assert_metric(metrics, "softaff_vm_sched_ext_run_seconds_total", "a", "partition=\"0\"}",
                  "0.02");
    assert_metric(metrics, "softaff_vm_sched_ext_run_seconds_total", "a", "partition=\"1\"}",
                  "0.004");
    assert_metric(metrics, "softaff_vm_sched_ext_wait_seconds_total", "a", "\"}", "0");
    assert_metric(metrics, "softaff_vm_sched_ext_visits_total", "a", "\"}", "4");
    assert_metric(metrics, "softaff_vm_sched_ext_preempts_total", "a", "\"}", "0");
    assert_metric(metrics, "softaff_vm_sched_ext_preempted_total", "a", "\"}", "0");
}

/* The scheduler places the managed VMs' vCPU threads, each with its home, softness and
 * strictness; the unmanaged VM stays out; no vCPU thread is narrowed, even for a VM that wants
 * more than its home (the scheduler bursts it), while the emulator and I/O threads live at home
 * as when re-pinning; homes of auto VMs are still written. */
static void test_places(Fx *fx, gconstpointer data)
{
    BedVm *a, *b, *c, *d;

    start(fx, SA_ACTUATION_AUTO, true);
    g_assert_cmpuint(fs.starts, ==, 1);
    g_assert_cmpstr(sa_core_actuation_mode(fx->core), ==, "sched_ext");
    assert_in(log_captured(), "actuation: the sched_ext scheduler places the managed VMs' vCPU "
                              "threads, each within its own set; emulator and I/O threads at "
                              "home: the sched_ext scheduler is loaded "
                              "([actuation] mode=auto)");
    /* The partitions: CPUs 0-1 partition 0, 2-3 partition 1, the fake sysfs' distances. */
    g_assert_cmpuint(fs.n_cpus, ==, 4);
    g_assert_cmpuint(fs.n_parts, ==, 2);
    g_assert_cmpuint(fs.cpu_part[0], ==, 0);
    g_assert_cmpuint(fs.cpu_part[1], ==, 0);
    g_assert_cmpuint(fs.cpu_part[2], ==, 1);
    g_assert_cmpuint(fs.cpu_part[3], ==, 1);
    g_assert_cmpuint(fs.distance[0], ==, 0);
    g_assert_cmpuint(fs.distance[1], >, 0);
    g_assert_cmpuint(fs.distance[1], ==, fs.distance[2]);

    a = add_vm(fx, "a", 4, 0, SA_MODE_SOFT, 80, 1.0); /* busy: would burst when re-pinning */
    b = add_vm(fx, "b", 2, -1, SA_MODE_STRICT, -1, 0.1);
    c = add_vm(fx, "c", 1, 1, SA_MODE_SOFT, 0, 0.1);
    d = add_vm(fx, "d", 1, 1, SA_MODE_OFF, -1, 0.1);
    bed_step(fx, 8);

    for (guint i = 0; i < a->n_vcpus; i++) {
        const FThread *t = fthread(vcpu_tid(a, i));
        g_assert_nonnull(t);
        g_assert_cmpuint(t->home, ==, 0);
        g_assert_cmpuint(t->softness, ==, 80);
        g_assert_false(t->strict);
    }
    const FThread *tb = fthread(vcpu_tid(b, 0));
    g_assert_nonnull(tb);
    g_assert_true(tb->strict);
    g_assert_cmpuint(tb->home, ==, (guint)rec_vm_last_assigned(b->rec));
    g_assert_nonnull(fthread(vcpu_tid(b, 1)));
    const FThread *tc = fthread(vcpu_tid(c, 0));
    g_assert_nonnull(tc);
    g_assert_cmpuint(tc->softness, ==, 0);
    g_assert_cmpuint(tc->home, ==, 1);
    g_assert_null(fthread(vcpu_tid(d, 0)));
    g_assert_cmpuint(g_hash_table_size(fs.threads), ==, 7);
    g_assert_cmpuint(fs.adds, ==, 7); /* once each: nothing changed since */
    g_assert_cmpuint(fx->core->sched_threads, ==, 7);

    /* One pin each for the managed VMs: every vCPU thread its own set (0-3), the emulator
     * home; none for d (off); no restore; b's auto home written. */
    for (guint i = 0; i < fx->n_vms; i++) {
        g_assert_cmpuint(rec_vm_pins(fx->vms[i].rec), ==, &fx->vms[i] == d ? 0 : 1);
        g_assert_cmpuint(rec_vm_restores(fx->vms[i].rec), ==, 0);
    }
    g_autofree char *ta = rec_vm_last_threads(a->rec);
    g_assert_cmpstr(ta, ==, "vcpus=0-3;0-3;0-3;0-3 emulator=0-1");
    g_autofree char *tdc = rec_vm_last_threads(c->rec);
    g_assert_cmpstr(tdc, ==, "vcpus=0-3 emulator=2-3");
    g_assert_cmpint(rec_vm_last_assigned(b->rec), >=, 0);
    g_assert_cmpuint(sa_core_lookup(fx->core, a->key)->stats.bursts, ==, 0);
    g_assert_cmpuint(log_count("a: 4 vCPU thread(s) in the scheduler: home partition 0, soft"), ==,
                     1);
    g_assert_cmpuint(log_count("c: 1 vCPU thread(s) in the scheduler: home partition 1, "
                               "softness 0 (never leaves home)"),
                     ==, 1);

    /* Status and metrics: the counters of the scheduler's read (the fake: a's threads away). */
    g_autofree char *json = status(fx);
    assert_in(json, "\"actuation\":{\"mode\":\"sched_ext\",\"configured\":\"auto\"");
    assert_in(json, "\"threads\":7,\"ejections\":0");
    assert_in(json, "\"scheduler\":{\"threads\":4,\"home\":0,\"softness\":80,\"strict\":false,"
                    "\"away\":true,\"run_home_seconds\":0.02,\"run_away_seconds\":0.004");
    assert_in(json, "\"scheduler\":{\"threads\":2,\"home\":");
    g_autofree char *metrics = sa_metrics_format(fx->core);
    assert_in(metrics, "\nsoftaff_actuation_sched_ext 1\n");
    assert_in(metrics, "\nsoftaff_sched_ext_threads 7\n");
    g_assert_cmpuint(fs.reads, >=, 7);
    assert_sched_metrics_a(metrics);
    /* Strict b never left home; d (off) was never in the scheduler. */
    assert_metric(metrics, "softaff_vm_sched_ext_visits_total", "b", "\"}", "0");
    g_assert_null(metric_value(metrics, "softaff_vm_sched_ext_visits_total", "d", "\"}"));

    /* A new softness goes to the scheduler at the next tick. */
    SaVm *va = sa_core_lookup(fx->core, a->key);
    va->settings.softness = 30;
    bed_step(fx, 1);
    g_assert_cmpuint(fthread(vcpu_tid(a, 0))->softness, ==, 30);
    g_assert_cmpuint(fs.adds, ==, 11);
}

/* The kernel ejects the scheduler: logged with its reason once, the threads are the kernel's
 * fair class (the scheduler stopped), every managed VM is pinned at that tick, and re-pinning
 * goes on (a busy VM bursts). */
static void test_ejection(Fx *fx, gconstpointer data)
{
    BedVm *a, *b;

    start(fx, SA_ACTUATION_SCHED_EXT, true);
    a = add_vm(fx, "a", 4, 0, SA_MODE_SOFT, -1, 0.4); /* fits at home */
    b = add_vm(fx, "b", 1, 1, SA_MODE_SOFT, -1, 0.0);
    bed_step(fx, 4);
    g_assert_cmpuint(g_hash_table_size(fs.threads), ==, 5);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 1); /* its emulator home, its vCPUs their own */
    g_autofree char *before = sa_metrics_format(fx->core);
    assert_sched_metrics_a(before);

    fs.exit.kind = 1026;
    fs.exit.what = "stall";
    g_strlcpy(fs.exit.reason, "runnable task stall", sizeof(fs.exit.reason));
    g_strlcpy(fs.exit.msg, "a[1101] failed to run for 5.6s", sizeof(fs.exit.msg));
    fs.exit.dump =
        (char *)"CPU 1   : nr_run=2 flags=0x1 cpu_rel=0 ops_qseq=12\n\n  R a[1101] -5600ms";
    bed_step(fx, 1);
    g_assert_cmpuint(fs.stops, ==, 1);
    g_assert_false(fs.running);
    g_assert_cmpstr(sa_core_actuation_mode(fx->core), ==, "pin");
    g_assert_cmpuint(sa_core_sched_ejections(fx->core), ==, 1);
    g_assert_cmpuint(
        log_count("actuation: the kernel ejected the sched_ext scheduler: stall (kind 1026): "
                  "runnable task stall: a[1101] failed to run for 5.6s; every vCPU thread runs "
                  "on the fair class with its own set; re-pinning from now on"),
        ==, 1);
    /* The kernel's dump, one line each (the empty one left out). */
    g_assert_cmpuint(log_count("actuation: the kernel's dump: CPU 1   : nr_run=2 flags=0x1 "
                               "cpu_rel=0 ops_qseq=12"),
                     ==, 1);
    g_assert_cmpuint(log_count("actuation: the kernel's dump:   R a[1101] -5600ms"), ==, 1);
    /* Pinned at that very tick, vCPUs too. */
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 2);
    g_assert_cmpuint(rec_vm_pins(b->rec), ==, 2);
    g_autofree char *pa = rec_vm_last_vcpus(a->rec);
    g_assert_cmpstr(pa, ==, "0-1");
    g_autofree char *json = status(fx);
    assert_in(json, "\"actuation\":{\"mode\":\"pin\",\"configured\":\"sched_ext\",\"reason\":"
                    "\"the kernel ejected the scheduler: stall (kind 1026): runnable task stall: "
                    "a[1101] failed to run for 5.6s\",\"threads\":0,\"ejections\":1,"
                    "\"last_ejection\":{\"time\":");
    g_autofree char *metrics = sa_metrics_format(fx->core);
    assert_in(metrics, "\nsoftaff_sched_ext_ejections_total 1\n");
    assert_in(metrics, "\nsoftaff_actuation_sched_ext 0\n");
    assert_sched_metrics_a(metrics); /* kept: counters never go back */

    /* Re-pinning goes on: busy, the VM bursts onto the idle partition. */
    bed_vm_set_load(a, 1.0);
    for (guint i = 0; i < 10; i++) {
        g_autofree char *now = rec_vm_last_vcpus(a->rec);
        if (g_str_equal(now, "0-3"))
            break;
        bed_step(fx, 1);
    }
    g_autofree char *burst = rec_vm_last_vcpus(a->rec);
    g_assert_cmpstr(burst, ==, "0-3");
    g_assert_cmpuint(log_count("the kernel ejected"), ==, 1);
}

/* SIGTERM's path: the scheduler stops first (every thread back to the fair class with its own
 * set), then the emulator, narrowed home, gets its own set back with the rest. */
static void test_shutdown(Fx *fx, gconstpointer data)
{
    BedVm *a;

    start(fx, SA_ACTUATION_AUTO, true);
    a = add_vm(fx, "a", 2, 0, SA_MODE_SOFT, -1, 0.5);
    bed_step(fx, 3);
    g_assert_cmpuint(g_hash_table_size(fs.threads), ==, 2);
    sa_core_shutdown(fx->core, bed_stopped_cb, fx);
    sa_core_settle(fx->core, 1000);
    g_assert_true(fx->stopped);
    g_assert_cmpuint(fs.stops, ==, 1);
    g_assert_cmpuint(g_hash_table_size(fs.threads), ==, 0);
    g_assert_cmpuint(rec_vm_restores(a->rec), ==, 1);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 1);
    assert_in(log_captured(), "restored: every thread back to its own set (vCPUs: 0-3)");
    assert_in(log_captured(), "actuation: the scheduler stops: every vCPU thread back to the fair "
                              "class with its own set");
}

/* A VM that stops being managed leaves the scheduler (its threads back to the fair class); a
 * VM whose process is gone is only forgotten (its thread ids may be reused). */
static void test_leaves(Fx *fx, gconstpointer data)
{
    BedVm *a, *b;

    start(fx, SA_ACTUATION_AUTO, true);
    a = add_vm(fx, "a", 2, 0, SA_MODE_SOFT, -1, 0.2);
    b = add_vm(fx, "b", 2, 1, SA_MODE_SOFT, -1, 0.2);
    bed_step(fx, 3);
    g_assert_cmpuint(g_hash_table_size(fs.threads), ==, 4);

    g_autoptr(SaVmFacts) f = rec_facts(a->key, "a", a->pid, a->n_vcpus);
    f->has_settings = true;
    f->settings.mode = SA_MODE_OFF;
    sa_core_report(fx->core, &rec_ops, a->rec, g_steal_pointer(&f));
    g_assert_cmpuint(fs.removes, ==, 2);
    g_assert_null(fthread(vcpu_tid(a, 0)));
    g_assert_nonnull(fthread(vcpu_tid(b, 0)));

    fake_host_remove_process(fx->host, b->pid);
    sa_core_forget(fx->core, b->key, "stopped");
    g_assert_cmpuint(fs.forgets, ==, 2);
    g_assert_cmpuint(fs.removes, ==, 2);
    g_assert_cmpuint(g_hash_table_size(fs.threads), ==, 0);
    g_assert_cmpuint(fx->core->sched_threads, ==, 0);
}

/* A reload from pin to sched_ext gives pinned VMs their own sets back and the scheduler their
 * threads; back to pin stops it and pins again. */
static void test_reload(Fx *fx, gconstpointer data)
{
    g_autoptr(GError) error = NULL;
    BedVm *a;

    start(fx, SA_ACTUATION_PIN, true);
    a = add_vm(fx, "a", 2, 0, SA_MODE_SOFT, -1, 0.2);
    bed_step(fx, 3);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 1);

    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    sa_core_reload(fx->core, test_config(SA_ACTUATION_SCHED_EXT), topo);
    sa_core_settle(fx->core, 500);
    g_assert_cmpstr(sa_core_actuation_mode(fx->core), ==, "sched_ext");
    g_assert_cmpuint(rec_vm_restores(a->rec), ==, 1);
    bed_step(fx, 3);
    g_assert_cmpuint(g_hash_table_size(fs.threads), ==, 2);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 2); /* the emulator home again, vCPUs their own */
    g_autofree char *t = rec_vm_last_threads(a->rec);
    g_assert_cmpstr(t, ==, "vcpus=0-3;0-3 emulator=0-1");

    /* The same mode again: the scheduler stays, each thread gets its home again. */
    guint adds = fs.adds;
    topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    sa_core_reload(fx->core, test_config(SA_ACTUATION_SCHED_EXT), topo);
    g_assert_cmpuint(g_hash_table_size(fs.threads), ==, 2);
    bed_step(fx, 2);
    g_assert_cmpuint(fs.starts, ==, 1);
    g_assert_cmpuint(fs.adds, ==, adds + 2);
    g_assert_cmpuint(fx->core->sched_threads, ==, 2);
    /* A reload decides afresh (as when re-pinning): the emulator is pinned home again. */
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 3);

    topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    sa_core_reload(fx->core, test_config(SA_ACTUATION_PIN), topo);
    g_assert_cmpuint(fs.stops, ==, 1);
    g_assert_cmpstr(sa_core_actuation_mode(fx->core), ==, "pin");
    bed_step(fx, 3);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 4);
}

/* While re-pinning, a vCPU thread left in SCHED_EXT (a softaffd killed in sched_ext mode) is
 * set back to SCHED_OTHER: each thread is checked once, the one found is said once. */
static void test_release(Fx *fx, gconstpointer data)
{
    BedVm *a;

    fs.fail_start = true;
    start(fx, SA_ACTUATION_AUTO, true);
    g_hash_table_add(fs.ext_left, GINT_TO_POINTER(1101 + 1));
    a = add_vm(fx, "a", 2, 0, SA_MODE_SOFT, -1, 0.2);
    g_assert_cmpint(vcpu_tid(a, 1), ==, 1102);
    bed_step(fx, 4);
    g_assert_cmpuint(fs.releases, ==, 2);
    g_assert_cmpuint(log_count("a: vCPU 1: thread 1102 was left in SCHED_EXT"), ==, 1);
    g_assert_cmpuint(g_hash_table_size(fs.ext_left), ==, 0);
}

/* The scheduler wants each thread's own set: a VM whose threads an earlier pin narrowed gets
 * a restore when it first enters the scheduler (the fake kernel affinity says vCPU 1 is on
 * CPU 0 only); one whose threads have their own sets gets none. */
static GHashTable *narrowed_tids;

static int f_get_affinity(gpointer data, pid_t tid, SaCpuSet **out)
{
    *out = sa_cpuset_new();
    if (g_hash_table_contains(narrowed_tids, GINT_TO_POINTER(tid)))
        sa_cpuset_add(*out, 0);
    else
        sa_cpuset_add_range(*out, 0, 3);
    return 0;
}

static int f_set_affinity(gpointer data, pid_t tid, const SaCpuSet *set)
{
    return 0;
}

static const SaAffinityOps fake_affinity = {.get = f_get_affinity, .set = f_set_affinity};

static void test_narrowed(Fx *fx, gconstpointer data)
{
    BedVm *a, *b;

    narrowed_tids = g_hash_table_new(g_direct_hash, g_direct_equal);
    sa_actuator_set_affinity_ops(fx->core, &fake_affinity, NULL);
    start(fx, SA_ACTUATION_AUTO, true);
    a = add_vm(fx, "a", 2, 0, SA_MODE_SOFT, -1, 0.2);
    b = add_vm(fx, "b", 2, 1, SA_MODE_SOFT, -1, 0.2);
    g_hash_table_add(narrowed_tids, GINT_TO_POINTER(vcpu_tid(a, 1)));
    bed_step(fx, 4);
    g_assert_cmpuint(rec_vm_restores(a->rec), ==, 1);
    g_assert_cmpuint(rec_vm_restores(b->rec), ==, 0);
    assert_in(log_captured(), "a: vCPU 1 runs on 0, narrower than its own set 0-3 (an earlier "
                              "pin): every thread gets its own set back");
    g_autofree char *threads = rec_vm_last_threads(a->rec);
    assert_in(threads, "vcpus=0-3;0-3");
    g_hash_table_unref(narrowed_tids);
}

/* The BPF sensor while the scheduler runs: mode=auto leaves it out (the reason in the status)
 * and loads it again at the ejection, when re-pinning needs its events; mode=bpf keeps it. */
static void test_sensing(Fx *fx, gconstpointer data)
{
    SaCore *core = fx->core;
    g_autofree char *btf_dir =
        g_build_filename(g_getenv("SOFTAFF_SYSFS_ROOT"), "kernel", "btf", NULL);
    g_autofree char *btf = g_build_filename(btf_dir, "vmlinux", NULL);

    /* The sensor is the host's real one: the fake sysfs lends it the kernel's BTF. */
    g_assert_cmpint(g_mkdir_with_parents(btf_dir, 0755), ==, 0);
    if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
        g_assert_cmpint(symlink("/sys/kernel/btf/vmlinux", btf), ==, 0);
    core->cfg->sensing_mode = SA_SENSING_AUTO;
    g_assert_true(sa_core_start_sensing(core, NULL));
    if (!core->sense) {
        if (g_strcmp0(g_getenv("SOFTAFF_REQUIRE_VM"), "1") == 0)
            g_error("SOFTAFF_REQUIRE_VM=1 and the BPF sensor does not load: %s",
                    core->sensing_reason);
        g_test_skip_printf("the BPF sensor does not load here: %s", core->sensing_reason);
        return;
    }
    start(fx, SA_ACTUATION_SCHED_EXT, true);
    g_assert_null(core->sense);
    g_assert_cmpstr(sa_core_sensing_mode(core), ==, "proc");
    g_autofree char *json = status(fx);
    assert_in(json, "\"sensing\":{\"mode\":\"proc\",\"reason\":\"the sched_ext scheduler "
                    "places the vCPUs at each wakeup: no BPF events while it runs ([sensing] "
                    "mode=auto)\"");
    /* A reload that keeps the modes keeps it out. */
    g_autoptr(GError) error = NULL;
    SaConfig *cfg = test_config(SA_ACTUATION_SCHED_EXT);
    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);

    g_assert_no_error(error);
    cfg->sensing_mode = SA_SENSING_AUTO;
    sa_core_reload(core, cfg, topo);
    g_assert_true(core->sched != NULL);
    g_assert_null(core->sense);

    fs.exit.kind = 1026;
    fs.exit.what = "stall";
    bed_step(fx, 1);
    g_assert_cmpstr(sa_core_actuation_mode(core), ==, "pin");
    g_assert_nonnull(core->sense);
    g_assert_cmpstr(sa_core_sensing_mode(core), ==, "bpf");
    g_autofree char *after = status(fx);
    assert_in(after, "\"sensing\":{\"mode\":\"bpf\",\"reason\":\"BPF program loaded "
                     "([sensing] mode=auto)\"");

    /* mode=bpf asked for the sensor: it stays beside the scheduler. */
    fs.exit.kind = 0;
    core->cfg->sensing_mode = SA_SENSING_BPF;
    g_assert_true(sa_core_start_sensing(core, NULL));
    start(fx, SA_ACTUATION_SCHED_EXT, true);
    g_assert_nonnull(core->sense);
    g_assert_cmpstr(sa_core_sensing_mode(core), ==, "bpf");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* An ejection is a warning, and the tests read it from the log. */
    log_capture_start();
#define ADD(path, fn) g_test_add(path, Fx, NULL, fx_setup, fn, fx_teardown)
    ADD("/scheduler/auto-no-sched-ext", test_auto_no_sched_ext);
    ADD("/scheduler/sched-ext-refused", test_sched_ext_refused);
    ADD("/scheduler/pin", test_pin);
    ADD("/scheduler/places", test_places);
    ADD("/scheduler/ejection", test_ejection);
    ADD("/scheduler/shutdown", test_shutdown);
    ADD("/scheduler/leaves", test_leaves);
    ADD("/scheduler/reload", test_reload);
    ADD("/scheduler/release", test_release);
    ADD("/scheduler/narrowed", test_narrowed);
    ADD("/scheduler/sensing", test_sensing);
    return g_test_run();
}
