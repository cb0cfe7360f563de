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
#include "core-bed.h"
#include "core-private.h"

#define MAX_CALLS 64

typedef struct {
    pid_t tid;
    char *set;
    guint pins; /* the backend pins of its VM that had returned at the time */
} Call;

/* The bed of tests/support/core-bed.h (its fake kernel runs the vCPUs on their VM's last pin),
 * and the fake kernel affinity's calls. */
typedef struct {
    CoreBed bed;
    Call calls[MAX_CALLS];
    guint n_calls;
    int fail; /* errno the fake set returns, 0 none */
} Fx;

/* ---- the fake kernel ---- */

static BedVm *vm_of_tid(Fx *fx, pid_t tid)
{
    for (guint i = 0; i < fx->bed.n_vms; i++) {
        BedVm *v = &fx->bed.vms[i];
        if (tid > v->pid && tid <= v->pid + (pid_t)v->n_vcpus)
            return v;
    }
    g_assert_not_reached();
}

static int fake_get(gpointer data, pid_t tid, SaCpuSet **out)
{
    Fx *fx = data;
    BedVm *v = vm_of_tid(fx, tid);
    for (guint i = fx->n_calls; i-- > 0;)
        if (fx->calls[i].tid == tid && fx->calls[i].pins == rec_vm_pins(v->rec)) {
            *out = sa_cpuset_parse(fx->calls[i].set, NULL);
            return 0;
        }
    *out = bed_pinned_set(&fx->bed, v);
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
    bed_init(&fx->bed, bed_config());
    if (data == NULL)
        sa_actuator_set_affinity_ops(fx->bed.core, &fake_ops, fx);
}

static void fx_teardown(Fx *fx, gconstpointer data)
{
    bed_clear(&fx->bed);
    clear_calls(fx);
}

static BedVm *add_vm(Fx *fx, const char *name, guint n_vcpus, int home, double load)
{
    BedVm *v = bed_vm(&fx->bed, name, 0, n_vcpus, load);
    bed_report(&fx->bed, v, bed_facts(v, name, home));
    return v;
}

/* A (4 busy vCPUs) on home 0 bursts onto B's idle partition: the widening is the backend's
 * alone. */
static BedVm *burst(Fx *fx)
{
    BedVm *a = add_vm(fx, "a", 4, 0, 1.0);
    add_vm(fx, "b", 2, 1, 0.0);
    g_assert_cmpuint(bed_step_until_pinned(&fx->bed, a, "0-1", 3), <=, 3);
    clear_calls(fx);
    g_assert_cmpuint(bed_step_until_pinned(&fx->bed, a, "0-3", 6), <=, 6);
    return a;
}

/* B's load makes A retreat while A's backend pin hangs: steps until that pin is under way. */
static void retreat_blocked(Fx *fx, BedVm *a)
{
    rec_vm_set_mode(a->rec, REC_BLOCK);
    bed_vm_set_load(&fx->bed.vms[1], 1.0);
    for (guint i = 0; i < 4 && !rec_vm_blocked(a->rec); i++)
        bed_step(&fx->bed, 1);
    g_assert_true(rec_vm_blocked(a->rec));
}

/* ---- tests ---- */

/* The retreat reaches every vCPU thread at once, before the backend's pin answers; the pin
 * still runs and gives the same set. */
static void test_narrowing_at_once(Fx *fx, gconstpointer data)
{
    BedVm *a = burst(fx);
    g_assert_cmpuint(fx->n_calls, ==, 0); /* the burst widened: never at once */
    guint pins = rec_vm_pins(a->rec);
    SaFastStats before;
    sa_actuator_fast_stats(fx->bed.core, &before);
    retreat_blocked(fx, a);
    g_assert_cmpuint(fx->n_calls, ==, 4);
    for (guint v = 0; v < 4; v++) {
        g_assert_cmpint(fx->calls[v].tid, ==, a->pid + 1 + (pid_t)v);
        g_assert_cmpstr(fx->calls[v].set, ==, "0-1");
        g_assert_cmpuint(fx->calls[v].pins, ==, pins);
    }
    SaFastStats after;
    sa_actuator_fast_stats(fx->bed.core, &after);
    g_assert_cmpuint(after.narrowed, ==, before.narrowed + 4);
    rec_vm_set_mode(a->rec, REC_OK);
    rec_vm_release(a->rec);
    g_assert_true(sa_core_settle(fx->bed.core, 2000));
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
    BedVm *a = add_vm(fx, "a", 2, 1, 0.2);
    g_assert_cmpuint(bed_step_until_pinned(&fx->bed, a, "2-3", 3), <=, 3);
    g_assert_cmpuint(fx->n_calls, ==, 0);
}

/* A refused sched_setaffinity is counted; the backend's pin does the retreat. */
static void test_failure_leaves_pin(Fx *fx, gconstpointer data)
{
    BedVm *a = burst(fx);
    fx->fail = EINVAL;
    bed_vm_set_load(&fx->bed.vms[1], 1.0);
    g_assert_cmpuint(bed_step_until_pinned(&fx->bed, a, "0-1", 3), <=, 3);
    SaFastStats st;
    sa_actuator_fast_stats(fx->bed.core, &st);
    g_assert_cmpuint(st.failed, ==, 4);
    g_assert_cmpuint(fx->n_calls, ==, 0);
}

/* Under a fake /proc its thread ids are any threads of this host: no fast path at all. */
static void test_fake_proc_untouched(Fx *fx, gconstpointer data)
{
    BedVm *a = burst(fx);
    retreat_blocked(fx, a);
    SaFastStats st;
    sa_actuator_fast_stats(fx->bed.core, &st);
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
