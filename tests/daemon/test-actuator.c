/* softaffd actuator, unit tests of the fast narrowing: the real core on a fake host with a
 * recording backend and a fake kernel affinity (SaAffinityOps). A pin that narrows a vCPU
 * thread's set reaches the thread at once, before the backend's pin answers; a widening never
 * does; a failure leaves the backend's pin to do the work; a fake /proc is never acted on.
 *
 * The fake kernel: a thread's affinity is what the fast path gave it after the backend's last
 * pin, else that pin's set, else every CPU; vCPUs run on the CPUs of their VM's last pin. */
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "actuator.h"
#include "core-private.h"
#include "fake-host.h"
#include "recorder.h"

#define STEP_MS 15
#define MAX_VMS 2
#define MAX_CALLS 64
#define MAX_VCPUS 4

typedef struct {
    char *key;
    pid_t pid;
    guint n_vcpus;
    RecVm *rec;
    double load;
    double run[MAX_VCPUS], delay[MAX_VCPUS];
} TVm;

typedef struct {
    pid_t tid;
    char *set;
    guint pins; /* the backend pins of its VM that had returned at the time */
} Call;

typedef struct {
    FakeHost *host;
    SaCore *core;
    TVm vms[MAX_VMS];
    guint n_vms;
    gint64 last_us;
    Call calls[MAX_CALLS];
    guint n_calls;
    int fail; /* errno the fake set returns, 0 none */
} Fx;

/* ---- the fake kernel ---- */

static TVm *vm_of_tid(Fx *fx, pid_t tid)
{
    for (guint i = 0; i < fx->n_vms; i++)
        if (tid > fx->vms[i].pid && tid <= fx->vms[i].pid + (pid_t)fx->vms[i].n_vcpus)
            return &fx->vms[i];
    g_assert_not_reached();
}

/* The set of the backend's last pin of v, else every CPU. */
static SaCpuSet *pinned_set(Fx *fx, TVm *v)
{
    g_autofree char *text = rec_vm_last_vcpus(v->rec);
    if (text[0] != '\0')
        return sa_cpuset_parse(text, NULL);
    SaCpuSet *all = sa_cpuset_new();
    sa_cpuset_add_range(all, 0, fake_host_n_cpus(fx->host) - 1);
    return all;
}

static int fake_get(gpointer data, pid_t tid, SaCpuSet **out)
{
    Fx *fx = data;
    TVm *v = vm_of_tid(fx, tid);
    for (guint i = fx->n_calls; i-- > 0;)
        if (fx->calls[i].tid == tid && fx->calls[i].pins == rec_vm_pins(v->rec)) {
            *out = sa_cpuset_parse(fx->calls[i].set, NULL);
            return 0;
        }
    *out = pinned_set(fx, v);
    return 0;
}

static int fake_set(gpointer data, pid_t tid, const SaCpuSet *set)
{
    Fx *fx = data;
    if (fx->fail)
        return fx->fail;
    g_assert_cmpuint(fx->n_calls, <, MAX_CALLS);
    Call *c = &fx->calls[fx->n_calls++];
    c->tid = tid;
    c->set = sa_cpuset_format(set);
    c->pins = rec_vm_pins(vm_of_tid(fx, tid)->rec);
    return 0;
}

static const SaAffinityOps fake_ops = {.get = fake_get, .set = fake_set};

static void clear_calls(Fx *fx)
{
    for (guint i = 0; i < fx->n_calls; i++)
        g_free(fx->calls[i].set);
    fx->n_calls = 0;
}

/* ---- fixture ---- */

static void fx_setup(Fx *fx, gconstpointer data)
{
    rec_log_clear();
    fx->host = fake_host_new(NULL, 2, 2); /* partitions: CPUs 0-1 | 2-3 */
    g_autoptr(GError) error = NULL;
    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    SaConfig *cfg = sa_config_new_default();
    cfg->policy.dwell_ms = 0;
    cfg->policy.smoothing = 1.0;
    cfg->interval_ms = 3 * STEP_MS;
    fx->core = sa_core_new(cfg, topo, FALSE, &error);
    g_assert_no_error(error);
    sa_mover_free(fx->core->mover);
    fx->core->mover = sa_mover_new(&sa_mover_host_ops, NULL, 256, false);
    if (data == NULL)
        sa_actuator_set_affinity_ops(fx->core, &fake_ops, fx);
    fx->last_us = g_get_monotonic_time();
}

static void fx_teardown(Fx *fx, gconstpointer data)
{
    for (guint i = 0; i < fx->n_vms; i++) {
        rec_vm_set_mode(fx->vms[i].rec, REC_OK);
        rec_vm_release(fx->vms[i].rec);
    }
    sa_core_settle(fx->core, 2000);
    sa_core_free(fx->core);
    for (guint i = 0; i < fx->n_vms; i++) {
        rec_vm_unref(fx->vms[i].rec);
        g_free(fx->vms[i].key);
    }
    clear_calls(fx);
    fake_host_free(fx->host, FALSE);
}

static TVm *add_vm(Fx *fx, const char *name, guint n_vcpus, int home, double load)
{
    TVm *v = &fx->vms[fx->n_vms++];
    v->key = g_strdup_printf("key-%s", name);
    v->pid = 1000 + 100 * (pid_t)fx->n_vms;
    v->n_vcpus = n_vcpus;
    v->load = load;
    fake_host_add_process(fx->host, v->pid, v->n_vcpus);
    SaVmFacts *f = rec_facts(v->key, name, v->pid, v->n_vcpus);
    f->has_settings = true;
    f->settings.preferred = home;
    v->rec = rec_vm_new(v->key, f);
    sa_core_report(fx->core, &rec_ops, v->rec, f);
    return v;
}

/* The fake kernel since the last step: vCPU v of a VM on the v-th CPU of its pinned set (round
 * robin). */
static void simulate(Fx *fx)
{
    gint64 now = g_get_monotonic_time();
    double dt = (double)(now - fx->last_us) * 1e3, demand[4] = {0};
    int cpu[MAX_VMS][MAX_VCPUS];
    fx->last_us = now;
    for (guint i = 0; i < fx->n_vms; i++) {
        g_autoptr(SaCpuSet) set = pinned_set(fx, &fx->vms[i]);
        int c = sa_cpuset_next(set, -1);
        for (guint v = 0; v < fx->vms[i].n_vcpus; v++) {
            cpu[i][v] = c;
            demand[c] += fx->vms[i].load;
            int next = sa_cpuset_next(set, c);
            c = next >= 0 ? next : sa_cpuset_next(set, -1);
        }
    }
    for (guint c = 0; c < 4; c++)
        fake_host_account_cpu(fx->host, c, demand[c], dt);
    fake_host_write_stat(fx->host);
    for (guint i = 0; i < fx->n_vms; i++) {
        TVm *t = &fx->vms[i];
        for (guint v = 0; v < t->n_vcpus; v++) {
            double l = demand[cpu[i][v]], run = l > 1 ? t->load / l : t->load;
            t->run[v] += run * dt;
            t->delay[v] += (t->load - run) * dt;
            fake_host_set_vcpu(fx->host, t->pid, v, t->run[v], t->delay[v], cpu[i][v]);
        }
    }
}

static void step(Fx *fx)
{
    g_usleep(STEP_MS * 1000);
    simulate(fx);
    sa_core_tick(fx->core);
    sa_core_settle(fx->core, 50);
}

static guint step_until_pinned(Fx *fx, TVm *v, const char *want, guint max)
{
    for (guint i = 1; i <= max; i++) {
        step(fx);
        g_autofree char *got = rec_vm_last_vcpus(v->rec);
        if (g_str_equal(got, want))
            return i;
    }
    return G_MAXUINT;
}

/* A (4 busy vCPUs) on home 0 bursts onto B's idle partition: the widening is the backend's
 * alone. */
static TVm *burst(Fx *fx)
{
    TVm *a = add_vm(fx, "a", 4, 0, 1.0);
    add_vm(fx, "b", 2, 1, 0.0);
    g_assert_cmpuint(step_until_pinned(fx, a, "0-1", 3), <=, 3);
    clear_calls(fx);
    g_assert_cmpuint(step_until_pinned(fx, a, "0-3", 6), <=, 6);
    return a;
}

/* B's load makes A retreat while A's backend pin hangs: steps until that pin is under way. */
static void retreat_blocked(Fx *fx, TVm *a)
{
    rec_vm_set_mode(a->rec, REC_BLOCK);
    fx->vms[1].load = 1.0;
    for (guint i = 0; i < 4 && !rec_vm_blocked(a->rec); i++)
        step(fx);
    g_assert_true(rec_vm_blocked(a->rec));
}

/* ---- tests ---- */

/* The retreat reaches every vCPU thread at once, before the backend's pin answers; the pin
 * still runs and gives the same set. */
static void test_narrowing_at_once(Fx *fx, gconstpointer data)
{
    TVm *a = burst(fx);
    g_assert_cmpuint(fx->n_calls, ==, 0); /* the burst widened: never at once */
    guint pins = rec_vm_pins(a->rec);
    SaFastStats before;
    sa_actuator_fast_stats(fx->core, &before);
    retreat_blocked(fx, a);
    g_assert_cmpuint(fx->n_calls, ==, 4);
    for (guint v = 0; v < 4; v++) {
        g_assert_cmpint(fx->calls[v].tid, ==, a->pid + 1 + (pid_t)v);
        g_assert_cmpstr(fx->calls[v].set, ==, "0-1");
        g_assert_cmpuint(fx->calls[v].pins, ==, pins);
    }
    SaFastStats after;
    sa_actuator_fast_stats(fx->core, &after);
    g_assert_cmpuint(after.narrowed, ==, before.narrowed + 4);
    rec_vm_set_mode(a->rec, REC_OK);
    rec_vm_release(a->rec);
    g_assert_true(sa_core_settle(fx->core, 2000));
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, pins + 1);
    g_autofree char *last = rec_vm_last_threads(a->rec);
    g_assert_true(g_str_has_prefix(last, "vcpus=0-1;0-1;0-1;0-1 "));
    g_assert_cmpuint(fx->n_calls, ==, 4);
}

/* The first placement narrows every CPU to the home, but the backend's first pin goes alone: it
 * records the VM's own settings, which a backend may read from the threads (QMP). Once it
 * answered, a narrowing goes first. */
static void test_first_pin_alone(Fx *fx, gconstpointer data)
{
    TVm *a = add_vm(fx, "a", 2, 1, 0.2);
    g_assert_cmpuint(step_until_pinned(fx, a, "2-3", 3), <=, 3);
    g_assert_cmpuint(fx->n_calls, ==, 0);
}

/* A refused sched_setaffinity is counted; the backend's pin does the retreat. */
static void test_failure_leaves_pin(Fx *fx, gconstpointer data)
{
    TVm *a = burst(fx);
    fx->fail = EINVAL;
    fx->vms[1].load = 1.0;
    g_assert_cmpuint(step_until_pinned(fx, a, "0-1", 3), <=, 3);
    SaFastStats st;
    sa_actuator_fast_stats(fx->core, &st);
    g_assert_cmpuint(st.failed, ==, 4);
    g_assert_cmpuint(fx->n_calls, ==, 0);
}

/* Under a fake /proc its thread ids are any threads of this host: no fast path at all. */
static void test_fake_proc_untouched(Fx *fx, gconstpointer data)
{
    TVm *a = burst(fx);
    retreat_blocked(fx, a);
    SaFastStats st;
    sa_actuator_fast_stats(fx->core, &st);
    g_assert_cmpuint(st.narrowed + st.failed, ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
#define ADD(path, fn, data) g_test_add(path, Fx, data, fx_setup, fn, fx_teardown)
    ADD("/actuator/narrowing-at-once", test_narrowing_at_once, NULL);
    ADD("/actuator/first-pin-alone", test_first_pin_alone, NULL);
    ADD("/actuator/failure-leaves-pin", test_failure_leaves_pin, NULL);
    ADD("/actuator/fake-proc-untouched", test_fake_proc_untouched, "host");
    return g_test_run();
}
