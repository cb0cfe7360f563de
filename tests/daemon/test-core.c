/* softaffd core, unit tests: the real core (registry, sampling, policy, actuator) on a fake
 * host (sysfs + /proc in a temporary directory) with a recording backend, the bed of
 * tests/support/core-bed.h. No libvirt, no VM.
 *
 * The fake kernel: between ticks, each VM's vCPUs run on the CPUs of the set last pinned (every
 * CPU before the first pin), vCPU v on the v-th CPU of that set (round robin); a CPU with more
 * demand than 1 is shared in proportion, the rest waits. */
#include <errno.h>
#include <glib.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core-bed.h"
#include "core-private.h"
#include "judge.h"
#include "log-capture.h"
#include "sa-error.h"
#include "sa-metrics.h"

#define MAX_VMS BED_MAX_VMS

/* The fixture: the bed, its fake kernel placing each VM's vCPUs on its last pin. */
typedef CoreBed Fx;

static SaConfig *test_config(void)
{
    SaConfig *cfg = bed_config();
    cfg->command_timeout_ms = 100;
    cfg->stop_timeout_ms = 300;
    return cfg;
}

static void fx_setup(Fx *fx, gconstpointer data)
{
    log_capture_clear();
    bed_init(fx, test_config());
}

static void fx_teardown(Fx *fx, gconstpointer data)
{
    bed_clear(fx);
}

/* A VM with a Nova flavor (NULL: none), reported to the core. */
static BedVm *add_vm_flavor(Fx *fx, const char *name, guint n_vcpus, int preferred, double load,
                            const char *flavor)
{
    BedVm *v = bed_vm(fx, name, 0, n_vcpus, load);
    g_autoptr(SaVmFacts) f = bed_facts(v, name, preferred);
    f->flavor = g_strdup(flavor);
    bed_report(fx, v, g_steal_pointer(&f));
    return v;
}

static BedVm *add_vm(Fx *fx, const char *name, guint n_vcpus, int preferred, double load)
{
    return add_vm_flavor(fx, name, n_vcpus, preferred, load, NULL);
}

static SaVm *core_vm(Fx *fx, const BedVm *v)
{
    return sa_core_lookup(fx->core, v->key);
}

/* The member of the VM's status object, as text. */
static char *status_member(Fx *fx, const char *name, const char *member)
{
    g_autofree char *json = sa_core_status_json(fx->core);
    g_autofree char *needle = g_strdup_printf("\"name\":\"%s\"", name);
    const char *vm = strstr(json, needle);
    g_assert_nonnull(vm);
    g_autofree char *key = g_strdup_printf("\"%s\":", member);
    const char *p = strstr(vm, key);
    g_assert_nonnull(p);
    p += strlen(key);
    gsize len = strcspn(p, ",}");
    return g_strndup(p, len);
}

/* ---- tests ---- */

/* Two auto VMs get different homes, are pinned there once, and their homes are written. */
static void test_placement(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 2, -1, 0.05);
    BedVm *b = add_vm(fx, "b", 2, -1, 0.05);
    bed_step(fx, 4);
    g_autofree char *va = rec_vm_last_vcpus(a->rec);
    g_autofree char *vb = rec_vm_last_vcpus(b->rec);
    g_assert_cmpstr(va, ==, "0-1");
    g_assert_cmpstr(vb, ==, "2-3");
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 1);
    g_assert_cmpuint(rec_vm_pins(b->rec), ==, 1);
    g_assert_cmpint(rec_vm_last_assigned(a->rec), ==, 0);
    g_assert_cmpint(rec_vm_last_assigned(b->rec), ==, 1);
    g_assert_cmpuint(rec_vm_writes(a->rec), ==, 1);
    g_assert_cmpuint(core_vm(fx, a)->stats.changes, ==, 1);
    g_autofree char *state = status_member(fx, "a", "state");
    g_assert_cmpstr(state, ==, "\"home\"");
}

/* A busy VM bursts onto the idle partition, and retreats when that partition's owner works. */
static void test_burst_and_retreat(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 4, 0, 1.0);
    BedVm *b = add_vm(fx, "b", 2, 1, 0.0);
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-1", 3), <=, 3);
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-3", 6), <=, 6);
    g_assert_cmpuint(core_vm(fx, a)->stats.bursts, >=, 1);
    g_autofree char *state = status_member(fx, "a", "state");
    g_assert_cmpstr(state, ==, "\"burst\"");
    bed_vm_set_load(b, 1.0);
    /* The owner's load step: A leaves within two ticks. */
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-1", 2), <=, 2);
    g_assert_cmpuint(core_vm(fx, a)->stats.retreats, >=, 1);
}

/* The sensor's watch while A bursts onto every partition it may (B's, idle): B's CPUs, where A
 * visits; not A's home, where only A's own vCPUs would wait (no further burst to sense: in a
 * 2-node test host those waits were most of ~8 event ticks a second). */
static void test_sense_watch_in_burst(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 4, 0, 1.0);
    add_vm(fx, "b", 2, 1, 0.0);
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-3", 6), <=, 6);
    g_autoptr(SaCpuSet) watch = sa_cpuset_new();
    g_autoptr(GArray) ignore = g_array_new(FALSE, FALSE, sizeof(SaSenseIgnore));
    sa_core_sense_plan(fx->core, watch, ignore);
    g_autofree char *text = sa_cpuset_format(watch);
    g_assert_cmpstr(text, ==, "2-3");
    /* A's vCPUs are ignored there (visitors), softaffd's own threads everywhere. */
    g_assert_cmpuint(ignore->len, >=, 1 + 4);
}

/* The index of the first line of log starting with prefix at or after from, else -1. */
static int find_line(GPtrArray *log, const char *prefix, guint from)
{
    for (guint i = from; i < log->len; i++)
        if (g_str_has_prefix(g_ptr_array_index(log, i), prefix))
            return (int)i;
    return -1;
}

/* SIGTERM's path: every touched VM gets its own sets back; no pin is sent once the shutdown
 * began, and a pin already running when it began ends before that VM's restore starts. */
static void test_restore_on_shutdown(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 4, 0, 1.0);
    BedVm *b = add_vm(fx, "b", 2, 1, 0.0);
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-3", 8), <=, 8);
    /* B's owner load makes A retreat; A's pin is held up while the shutdown begins. */
    rec_vm_set_mode(a->rec, REC_BLOCK);
    bed_vm_set_load(b, 1.0);
    for (guint i = 0; i < 4 && !rec_vm_blocked(a->rec); i++)
        bed_step(fx, 1);
    g_assert_true(rec_vm_blocked(a->rec));
    g_autoptr(GPtrArray) before = rec_log();
    guint mark = before->len;
    sa_core_shutdown(fx->core, bed_stopped_cb, fx);
    bed_step(fx, 2); /* ticks after the shutdown decide nothing */
    rec_vm_set_mode(a->rec, REC_OK);
    sa_core_settle(fx->core, 2000);
    g_assert_true(fx->stopped);
    g_autoptr(GPtrArray) log = rec_log();
    g_autofree char *ra = g_strdup_printf("restore %s 0-3 | 0-3", a->key);
    g_autofree char *rb = g_strdup_printf("restore %s 0-3 | 0-3", b->key);
    int ia = find_line(log, ra, mark), ib = find_line(log, rb, mark);
    g_assert_cmpint(ia, >=, 0);
    g_assert_cmpint(ib, >=, 0);
    /* No pin was sent after the shutdown began: B has none, A only the one already running,
     * which ended before A's restore began. */
    g_autofree char *pa = g_strdup_printf("pin %s", a->key);
    g_autofree char *pb = g_strdup_printf("pin %s", b->key);
    g_assert_cmpint(find_line(log, pb, mark), ==, -1);
    int last_pin = find_line(log, pa, mark);
    g_assert_cmpint(last_pin, >=, 0);
    g_assert_cmpint(find_line(log, pa, (guint)last_pin + 1), ==, -1);
    g_assert_cmpint(last_pin, <, ia);
    g_assert_cmpuint(log_count("restored: every thread back to its own set (vCPUs: 0-3)"), ==, 2);
}

/* A VM an earlier softaffd narrowed (its facts say so: its record is in the metadata) is
 * given back at shutdown even when this daemon never pinned it (SIGTERM right after a restart:
 * the soak's seed 1814198809, step 199); one without is left alone. */
static void test_restore_narrowed_by_earlier(Fx *fx, gconstpointer data)
{
    BedVm *v = bed_vm(fx, "earlier", 1700, 2, 0.0);
    g_autoptr(SaVmFacts) f = bed_facts(v, "earlier", 0);
    f->narrowed = true;
    bed_report(fx, v, g_steal_pointer(&f));
    BedVm *plain = add_vm(fx, "plain", 2, 1, 0.0);
    /* No tick: nothing pinned by this daemon. */
    sa_core_shutdown(fx->core, bed_stopped_cb, fx);
    sa_core_settle(fx->core, 2000);
    g_assert_true(fx->stopped);
    g_assert_cmpuint(rec_vm_pins(v->rec), ==, 0);
    g_assert_cmpuint(rec_vm_restores(v->rec), ==, 1);
    g_assert_cmpuint(rec_vm_restores(plain->rec), ==, 0);
}

/* SIGHUP's path: a new configuration and topology; homes are decided again, counters go on. */
static void test_reload_keeps_counters(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 4, 0, 1.0);
    add_vm(fx, "b", 2, 1, 0.0);
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-3", 8), <=, 8);
    SaVm *vm = core_vm(fx, a);
    guint64 bursts = vm->stats.bursts, changes = vm->stats.changes;
    double run = vm->stats.run_ns_total;
    g_assert_cmpuint(bursts, >=, 1);
    g_autoptr(GError) error = NULL;
    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    g_assert_no_error(error);
    sa_core_reload(fx->core, test_config(), topo);
    g_assert_false(vm->pvm.st.placed);
    bed_step(fx, 4);
    g_assert_cmpuint(vm->stats.bursts, >=, bursts);
    g_assert_cmpuint(vm->stats.changes, >, changes);
    g_assert_cmpfloat(vm->stats.run_ns_total, >, run);
    g_autofree char *last = rec_vm_last_vcpus(a->rec);
    g_assert_cmpstr(last, ==, "0-3");
}

/* A VM that vanishes while its pin runs: the late answer changes nothing, the other VM goes
 * on, and its lane is dropped. */
static void test_vanish_mid_tick(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 2, 0, 0.2);
    BedVm *b = add_vm(fx, "b", 2, 1, 0.2);
    rec_vm_set_mode(a->rec, REC_BLOCK);
    sa_core_tick(fx->core);
    bed_step(fx, 1);
    g_assert_true(rec_vm_blocked(a->rec));
    fake_host_remove_process(fx->host, a->pid);
    a->gone = TRUE;
    sa_core_forget(fx->core, a->key, "stopped");
    g_assert_null(core_vm(fx, a));
    rec_vm_set_mode(a->rec, REC_OK);
    bed_step(fx, 3);
    g_assert_null(core_vm(fx, a));
    g_assert_null(g_hash_table_lookup(fx->core->lanes, a->key));
    g_autofree char *vb = rec_vm_last_vcpus(b->rec);
    g_assert_cmpstr(vb, ==, "2-3");
    g_assert_cmpuint(log_count("a: stopped; forgotten"), ==, 1);
}

/* A transient failure keeps the VM, is logged once, shown in the status, and tried again with
 * a back-off (one tick, then doubling) until it works. */
static void test_apply_transient(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 2, 0, 0.2);
    rec_vm_set_mode(a->rec, REC_TRANSIENT);
    /* 24 steps of 15 ms: back-offs of 45, 90, 180 ms (interval 45 ms) leave room for ~4. */
    bed_step(fx, 24);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 0);
    guint tries = rec_vm_attempts(a->rec);
    g_test_message("%u tries in 24 ticks", tries);
    g_assert_cmpuint(tries, >=, 2);
    g_assert_cmpuint(tries, <=, 6);
    g_assert_cmpuint(log_count("a: pinning failed, trying again later"), ==, 1);
    g_assert_cmpint(core_vm(fx, a)->status, ==, SA_VM_MANAGED);
    g_autofree char *err = status_member(fx, "a", "error");
    g_assert_nonnull(strstr(err, "injected"));
    rec_vm_set_mode(a->rec, REC_OK);
    for (guint i = 0; i < 40 && rec_vm_pins(a->rec) == 0; i++)
        bed_step(fx, 1);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 1);
    g_autofree char *cleared = status_member(fx, "a", "error");
    g_assert_cmpstr(cleared, ==, "null");
    g_autofree char *va = rec_vm_last_vcpus(a->rec);
    g_assert_cmpstr(va, ==, "0-1");
}

/* GONE forgets the VM; a refusal leaves it unmanaged with the backend's reason. */
static void test_apply_gone_and_refused(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 2, 0, 0.2);
    BedVm *b = add_vm(fx, "b", 2, 1, 0.2);
    rec_vm_set_mode(a->rec, REC_GONE);
    rec_vm_set_mode(b->rec, REC_REFUSED);
    bed_step(fx, 2);
    g_assert_null(core_vm(fx, a));
    g_assert_cmpuint(log_count("a: gone (pin: the VM is gone (injected)); forgetting it"), ==, 1);
    SaVm *vb = core_vm(fx, b);
    g_assert_nonnull(vb);
    g_assert_cmpint(vb->status, ==, SA_VM_UNMANAGED);
    g_assert_nonnull(strstr(vb->status_reason, "pinning was refused"));
}

/* A backend that never answers: the VM is shown stalled, the others go on, the status answers
 * and the shutdown ends within its bound; the VM is handled again once it answers. */
static void test_stalled_backend(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 2, 0, 0.2);
    BedVm *b = add_vm(fx, "b", 4, 1, 0.2);
    rec_vm_set_mode(a->rec, REC_BLOCK);
    bed_step(fx, 1);
    g_usleep(150 * 1000); /* past command_timeout_ms (100) */
    sa_core_settle(fx->core, 20);
    g_assert_true(sa_vm_is_stalled(core_vm(fx, a)));
    g_autofree char *state = status_member(fx, "a", "state");
    g_assert_cmpstr(state, ==, "\"stalled\"");
    g_autofree char *stalled = status_member(fx, "a", "stalled");
    g_assert_true(g_str_has_prefix(stalled, "{\"since\":"));
    g_assert_cmpuint(log_count("a: pin command unanswered after 100 ms: stalled"), ==, 1);
    /* B bursts while A is stuck. */
    bed_vm_set_load(b, 1.0);
    g_assert_cmpuint(bed_step_until_pinned(fx, b, "0-3", 6), <=, 6);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, 0);
    /* A answers: handled again. */
    rec_vm_set_mode(a->rec, REC_OK);
    bed_step(fx, 2);
    g_assert_false(sa_vm_is_stalled(core_vm(fx, a)));
    g_assert_cmpuint(rec_vm_pins(a->rec), >=, 1);
    g_assert_cmpuint(log_count("a: pin command answered after"), ==, 1);
    /* Stuck again at shutdown: the restore of B is done, A's is given up after the bound. */
    rec_vm_set_mode(a->rec, REC_BLOCK);
    bed_vm_set_load(b, 0.0);
    bed_step(fx, 1);
    sa_core_shutdown(fx->core, bed_stopped_cb, fx);
    sa_core_settle(fx->core, 1000);
    g_assert_true(fx->stopped);
    g_assert_true(rec_vm_blocked(a->rec) || rec_vm_restores(a->rec) == 0);
    g_assert_cmpuint(rec_vm_restores(b->rec), ==, 1);
    g_assert_cmpuint(log_count("a: did not answer within 300 ms"), ==, 1);
}

/* More stuck VMs than workers: the pool grows by one thread per stalled VM, so a healthy VM is
 * still pinned at once. */
static void test_many_stalled(Fx *fx, gconstpointer data)
{
    char name[16];
    for (guint i = 0; i < MAX_VMS - 1; i++) {
        g_snprintf(name, sizeof name, "stuck%02u", i);
        rec_vm_set_mode(add_vm(fx, name, 1, 0, 0.1)->rec, REC_BLOCK);
    }
    BedVm *ok = add_vm(fx, "zz-ok", 1, 1, 0.1);
    g_assert_cmpuint(bed_step_until_pinned(fx, ok, "2-3", 20), <=, 20);
    g_assert_false(sa_vm_is_stalled(core_vm(fx, ok)));
    /* Every stuck VM gets a worker in the end, and is shown stalled. */
    for (guint i = 0; i < 20 && fx->core->stalled_lanes < MAX_VMS - 1; i++)
        bed_step(fx, 1);
    guint stalled = 0;
    for (guint i = 0; i + 1 < fx->n_vms; i++)
        stalled += sa_vm_is_stalled(core_vm(fx, &fx->vms[i]));
    g_assert_cmpuint(stalled, ==, MAX_VMS - 1);
    g_assert_cmpuint(fx->core->stalled_lanes, ==, MAX_VMS - 1);
}

/* A stopped QEMU process (SIGSTOP) is stalled until it runs again; no command is sent to it. */
static void test_stopped_process(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 2, 0, 0.2);
    bed_step(fx, 2);
    guint pins = rec_vm_pins(a->rec);
    bed_vm_set_load(a, 0.0);
    fake_host_set_state(fx->host, a->pid, 'T');
    bed_step(fx, 2);
    g_assert_true(sa_vm_is_stalled(core_vm(fx, a)));
    g_autofree char *state = status_member(fx, "a", "state");
    g_assert_cmpstr(state, ==, "\"stalled\"");
    sa_core_reload(fx->core, test_config(), sa_topology_load(SA_LAYOUT_NODE, NULL, NULL));
    bed_step(fx, 2);
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, pins);
    fake_host_set_state(fx->host, a->pid, 'S');
    bed_vm_set_load(a, 0.2);
    bed_step(fx, 2);
    g_assert_false(sa_vm_is_stalled(core_vm(fx, a)));
    g_assert_cmpuint(rec_vm_pins(a->rec), ==, pins + 1);
}

/* Discovery runs on the VM's worker and reports; a discovery that finds nothing forgets. */
static void test_discover(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 2, 0, 0.2);
    g_autoptr(SaVmFacts) f = bed_facts(a, "renamed", 1);
    RecVm *r = rec_vm_new(a->key, f);
    sa_core_discover(fx->core, &rec_ops, r, a->key, "a");
    sa_core_settle(fx->core, 1000);
    g_assert_cmpstr(core_vm(fx, a)->name, ==, "renamed");
    g_assert_cmpint(core_vm(fx, a)->settings.preferred, ==, 1);
    rec_vm_set_mode(r, REC_GONE);
    sa_core_discover(fx->core, &rec_ops, r, a->key, "renamed");
    sa_core_settle(fx->core, 1000);
    g_assert_null(core_vm(fx, a));
    /* A VM that stops while its first discovery runs is not brought back by its result. */
    rec_vm_set_mode(r, REC_BLOCK);
    sa_core_discover(fx->core, &rec_ops, r, a->key, "renamed");
    for (guint i = 0; i < 100 && !rec_vm_blocked(r); i++)
        g_usleep(1000);
    sa_core_forget(fx->core, a->key, "stopped");
    rec_vm_set_mode(r, REC_OK);
    sa_core_settle(fx->core, 1000);
    g_assert_null(core_vm(fx, a));
    rec_vm_unref(r);
}

/* Each thread gets the policy's set within its own: vCPU 0 pinned by the user to CPU 3 stays
 * there while vCPU 1 goes home (node 0); the emulator keeps its pin, an I/O thread its own, the
 * unpinned one follows the emulator's set; restore gives every thread exactly its own set. */
static void test_per_thread_own(Fx *fx, gconstpointer data)
{
    BedVm *v = bed_vm(fx, "own", 1900, 2, 0.0);
    g_autoptr(SaVmFacts) f = bed_facts(v, "own", 0);
    f->vcpu_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    g_ptr_array_add(f->vcpu_pins, sa_cpuset_parse("3", NULL));
    g_ptr_array_add(f->vcpu_pins, NULL);
    f->emulator_pin = sa_cpuset_parse("1-2", NULL);
    f->iothread_ids = g_array_new(FALSE, FALSE, sizeof(guint));
    guint ids[] = {1, 2};
    g_array_append_vals(f->iothread_ids, ids, 2);
    f->iothread_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    g_ptr_array_add(f->iothread_pins, sa_cpuset_parse("2-3", NULL));
    g_ptr_array_add(f->iothread_pins, NULL);
    bed_report(fx, v, g_steal_pointer(&f));
    g_assert_cmpuint(bed_step_until_pinned(fx, v, "3", 8), <=, 8);
    g_autofree char *pinned = rec_vm_last_threads(v->rec);
    g_assert_cmpstr(pinned, ==, "vcpus=3;0-1 emulator=1 io1=2-3 io2=0-1");
    g_autofree char *json = sa_core_status_json(fx->core);
    g_assert_nonnull(strstr(json, "\"own\":{\"vcpus\":[\"3\",\"0-3\"],\"emulator\":\"1-2\","
                                  "\"iothreads\":{\"1\":\"2-3\",\"2\":\"0-3\"}}"));
    sa_core_shutdown(fx->core, bed_stopped_cb, fx);
    sa_core_settle(fx->core, 2000);
    g_autofree char *restored = rec_vm_last_threads(v->rec);
    g_assert_cmpstr(restored, ==, "vcpus=3;0-3 emulator=1-2 io1=2-3 io2=0-3");
}

/* The user pins the emulator live while softaff holds the VM's threads (the emulator narrowed to
 * home, CPU 1 here): the new own set comes with the next report, and the next tick pins the VM
 * again with the emulator within it, though the decision did not change. Before, the emulator
 * kept softaff's last pin (CPU 1) outside its new own set (CPU 2) until the decision changed. */
static void test_own_pin_live(Fx *fx, gconstpointer data)
{
    BedVm *v = bed_vm(fx, "live", 1950, 2, 0.0);
    g_autoptr(SaVmFacts) f = bed_facts(v, "live", 0);
    f->emulator_pin = sa_cpuset_parse("1-2", NULL);
    bed_report(fx, v, g_steal_pointer(&f));
    g_assert_cmpuint(bed_step_until_pinned(fx, v, "0-1", 8), <=, 8);
    g_autofree char *pinned = rec_vm_last_threads(v->rec);
    g_assert_cmpstr(pinned, ==, "vcpus=0-1;0-1 emulator=1");
    guint pins = rec_vm_pins(v->rec);
    bed_step(fx, 3);
    g_assert_cmpuint(rec_vm_pins(v->rec), ==, pins); /* nothing new: no pin */

    g_autoptr(SaVmFacts) g = bed_facts(v, "live", 0);
    g->emulator_pin = sa_cpuset_parse("2", NULL);
    sa_core_report(fx->core, &rec_ops, v->rec, g_steal_pointer(&g)); /* the same recorder */
    bed_step(fx, 3);
    g_assert_cmpuint(rec_vm_pins(v->rec), ==, pins + 1);
    g_autofree char *again = rec_vm_last_threads(v->rec);
    g_assert_cmpstr(again, ==, "vcpus=0-1;0-1 emulator=2");
    /* The same facts again change nothing. */
    g_autoptr(SaVmFacts) h = bed_facts(v, "live", 0);
    h->emulator_pin = sa_cpuset_parse("2", NULL);
    sa_core_report(fx->core, &rec_ops, v->rec, g_steal_pointer(&h));
    bed_step(fx, 3);
    g_assert_cmpuint(rec_vm_pins(v->rec), ==, pins + 1);
}

/* The user pins a vCPU live to every CPU, which its own set was: the own sets do not change, yet
 * the thread now runs where the user put it, not on softaff's home set. The report carries a new
 * count of the user's pins, and the next tick pins the VM again, though neither the decision nor
 * the own sets changed. Before, the vCPUs stayed on every CPU (soak seed 1775393844). */
static void test_own_pin_same_set(Fx *fx, gconstpointer data)
{
    BedVm *v = bed_vm(fx, "same", 1960, 2, 0.0);
    bed_report(fx, v, bed_facts(v, "same", 0));
    g_assert_cmpuint(bed_step_until_pinned(fx, v, "0-1", 8), <=, 8);
    guint pins = rec_vm_pins(v->rec);
    bed_step(fx, 3);
    g_assert_cmpuint(rec_vm_pins(v->rec), ==, pins);

    for (guint n = 1; n <= 2; n++) {
        /* The second time the very same pin: only the count tells it. */
        g_autoptr(SaVmFacts) g = bed_facts(v, "same", 0);
        g->vcpu_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
        g_ptr_array_add(g->vcpu_pins, sa_cpuset_parse("0-3", NULL));
        g_ptr_array_add(g->vcpu_pins, NULL);
        g->user_pins = n;
        sa_core_report(fx->core, &rec_ops, v->rec, g_steal_pointer(&g));
        bed_step(fx, 3);
        g_assert_cmpuint(rec_vm_pins(v->rec), ==, pins + n);
        g_autofree char *again = rec_vm_last_vcpus(v->rec);
        g_assert_true(g_str_has_prefix(again, "0-1"));
    }
    /* The same facts again, the count unchanged: nothing pinned. */
    g_autoptr(SaVmFacts) h = bed_facts(v, "same", 0);
    h->vcpu_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    g_ptr_array_add(h->vcpu_pins, sa_cpuset_parse("0-3", NULL));
    g_ptr_array_add(h->vcpu_pins, NULL);
    h->user_pins = 2;
    sa_core_report(fx->core, &rec_ops, v->rec, g_steal_pointer(&h));
    bed_step(fx, 3);
    g_assert_cmpuint(rec_vm_pins(v->rec), ==, pins + 2);
}

/* Homes rebalance: two busy auto VMs homed (assigned) on node 0's two CPUs with 2 vCPUs each
 * over-commit it while node 1 idles; after the window one of them gets node 1 as its home: it is
 * pinned there and the home is written, once. With rebalance=off nothing moves. */
static guint run_rebalance(Fx *fx, bool enabled, BedVm **out_a, BedVm **out_b)
{
    SaConfig *cfg = (SaConfig *)sa_core_config(fx->core);
    cfg->rebalance.enabled = enabled;
    cfg->rebalance.window_ms = 300;
    BedVm *a = add_vm(fx, "a", 2, -1, 1.0);
    BedVm *b = add_vm(fx, "b", 2, -1, 1.0);
    for (guint k = 0; k < 2; k++) {
        BedVm *v = k ? b : a;
        g_autoptr(SaVmFacts) f = bed_facts(v, v->key + 4, -1);
        f->settings.assigned = 0;
        sa_core_report(fx->core, &rec_ops, v->rec, g_steal_pointer(&f));
    }
    bed_step(fx, 60); /* 0.9 s: three windows */
    *out_a = a;
    *out_b = b;
    return log_count(": rebalance: home of ");
}

static void test_rebalance(Fx *fx, gconstpointer data)
{
    BedVm *a, *b;
    g_assert_cmpuint(run_rebalance(fx, true, &a, &b), ==, 1);
    /* The cheapest by name: a. It lives on node 1 now; b stays home on node 0. */
    g_assert_cmpint(rec_vm_last_assigned(a->rec), ==, 1);
    g_autofree char *va = rec_vm_last_vcpus(a->rec);
    g_assert_true(g_str_has_prefix(va, "2"));
    g_assert_cmpint(core_vm(fx, b)->pvm.st.home, ==, 0);
}

static void test_rebalance_off(Fx *fx, gconstpointer data)
{
    BedVm *a, *b;
    g_assert_cmpuint(run_rebalance(fx, false, &a, &b), ==, 0);
    g_assert_cmpint(core_vm(fx, a)->pvm.st.home, ==, 0);
    g_assert_cmpint(core_vm(fx, b)->pvm.st.home, ==, 0);
}

/* A new QEMU process behind a known key is a new VM: its decisions start over. */
static void test_new_process(Fx *fx, gconstpointer data)
{
    BedVm *a = add_vm(fx, "a", 2, 1, 0.2);
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "2-3", 8), <=, 8);
    g_assert_cmpuint(g_queue_get_length(core_vm(fx, a)->decisions), >, 0);
    a->pid += 7;
    fake_host_add_process(fx->host, a->pid, 2);
    g_autoptr(SaVmFacts) f = bed_facts(a, "a", 1);
    sa_core_report(fx->core, &rec_ops, a->rec, g_steal_pointer(&f));
    g_assert_cmpuint(log_count("a: a new QEMU process"), ==, 1);
    g_assert_cmpuint(g_queue_get_length(core_vm(fx, a)->decisions), ==, 0);
    g_assert_cmpint(core_vm(fx, a)->facts->pid, ==, a->pid);
}

/* ---- the managed/unmanaged rule, from a table ---- */

typedef struct {
    const char *what;
    bool has_settings;
    SaMode mode;
    SaManage manage;
    const char *pin0; /* vCPU 0's user pin, NULL none */
    const char *cpuset;
    pid_t pid;
    const char *error;
    SaVmStatus status;
    const char *reason; /* a part of it */
    const char *allowed;
} JudgeRow;

static const JudgeRow judge_rows[] = {
    {"defaults", false, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 10, NULL, SA_VM_MANAGED,
     "(config defaults)", "0-3"},
    {"settings", true, SA_MODE_STRICT, SA_MANAGE_ALL, NULL, "1-2", 10, NULL, SA_VM_MANAGED,
     "mode strict, allowed CPUs 1-2", "1-2"},
    {"mode off", true, SA_MODE_OFF, SA_MANAGE_ALL, NULL, NULL, 10, NULL, SA_VM_UNMANAGED,
     "says mode=\"off\"", "0-3"},
    {"explicit", false, SA_MODE_SOFT, SA_MANAGE_EXPLICIT, NULL, NULL, 10, NULL, SA_VM_UNMANAGED,
     "manage=explicit", "0-3"},
    {"explicit, settings", true, SA_MODE_SOFT, SA_MANAGE_EXPLICIT, NULL, NULL, 10, NULL,
     SA_VM_MANAGED, "mode soft", "0-3"},
    {"user pins", false, SA_MODE_SOFT, SA_MANAGE_ALL, "1", NULL, 10, NULL, SA_VM_UNMANAGED,
     "pinned by the user", "0-3"},
    /* vCPU 0 pinned to 3, vCPU 1 has the <vcpu cpuset>: together they may use 2-3 (a partial
     * pin never narrows the other vCPUs). */
    {"user pins, settings", true, SA_MODE_SOFT, SA_MANAGE_ALL, "3", "2-3", 10, NULL, SA_VM_MANAGED,
     "allowed CPUs 2-3", "2-3"},
    {"pin outside the cpuset", true, SA_MODE_SOFT, SA_MANAGE_ALL, "0", "2-3", 10, NULL,
     SA_VM_MANAGED, "allowed CPUs 0,2-3", "0,2-3"},
    {"no online CPU", false, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, "8-9", 10, NULL, SA_VM_UNMANAGED,
     "no online CPU", ""},
    {"no process", false, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 0, NULL, SA_VM_UNMANAGED,
     "QEMU process was not found", "0-3"},
    {"invalid", true, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 10, "softness=\"x\" is bad",
     SA_VM_INVALID, "softness=\"x\" is bad", "0-3"},
};

/* [rule NAME] rows: the rules are judge_rules()'s. */
typedef struct {
    JudgeRow row;
    const char *name;     /* the VM's name, NULL "vm" */
    const char *flavor;   /* its Nova flavor, NULL none */
    const char *rule;     /* the rule that applies, NULL none */
    const char *settings; /* "mode/preferred/softness" of the judgement, NULL: not checked */
} RuleRow;

static const RuleRow rule_rows[] = {
    {.row = {"rule", false, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 10, NULL, SA_VM_MANAGED,
             "mode soft, allowed CPUs 0-3 (rule m1-large)", "0-3"},
     .flavor = "m1.large",
     .rule = "m1-large",
     .settings = "soft/1/0"},
    {.row = {"rule, explicit", false, SA_MODE_SOFT, SA_MANAGE_EXPLICIT, NULL, NULL, 10, NULL,
             SA_VM_MANAGED, "(rule m1-large)", "0-3"},
     .flavor = "m1.large",
     .rule = "m1-large",
     .settings = "soft/1/0"},
    {.row = {"own settings beat the rule", true, SA_MODE_STRICT, SA_MANAGE_ALL, NULL, NULL, 10,
             NULL, SA_VM_MANAGED, "mode strict, allowed CPUs 0-3", "0-3"},
     .flavor = "m1.large",
     .settings = "strict/-1/-1"},
    {.row = {"invalid settings, rule", true, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 10, "bad",
             SA_VM_INVALID, "bad", "0-3"},
     .flavor = "m1.large"},
    {.row = {"rule mode off", false, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 10, NULL,
             SA_VM_UNMANAGED, "rule offline says mode=off", "0-3"},
     .flavor = "off.small",
     .rule = "offline"},
    {.row = {"rule, user pins", false, SA_MODE_SOFT, SA_MANAGE_ALL, "1", NULL, 10, NULL,
             SA_VM_UNMANAGED, "pinned by the user", "0-3"},
     .flavor = "m1.large",
     .rule = "m1-large"},
    {.row = {"rule by name", false, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 10, NULL,
             SA_VM_MANAGED, "mode strict, allowed CPUs 0-3 (rule strict-web)", "0-3"},
     .name = "web-3",
     .rule = "strict-web",
     .settings = "strict/-1/-1"},
    {.row = {"first rule wins", false, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 10, NULL,
             SA_VM_MANAGED, "(rule m1-large)", "0-3"},
     .name = "web-3",
     .flavor = "m1.large",
     .rule = "m1-large",
     .settings = "soft/1/0"},
    {.row = {"no rule matches, explicit", false, SA_MODE_SOFT, SA_MANAGE_EXPLICIT, NULL, NULL, 10,
             NULL, SA_VM_UNMANAGED, "no test settings and manage=explicit", "0-3"},
     .flavor = "m2.small"},
    {.row = {"no rule matches", false, SA_MODE_SOFT, SA_MANAGE_ALL, NULL, NULL, 10, NULL,
             SA_VM_MANAGED, "(config defaults)", "0-3"},
     .flavor = "m2.small",
     .settings = "soft/-1/-1"},
};

/* ---- [rule NAME] groups, built by hand (the loader is config.c's) ---- */

static SaRule *rule_new(const char *name, const char *match_name, const char *flavor)
{
    SaRule *r = g_new0(SaRule, 1);
    r->name = g_strdup(name);
    r->file = g_strdup("test.conf");
    r->match_name = g_strdup(match_name);
    r->match_flavor = g_strdup(flavor);
    r->preferred = -2;
    r->softness = -1;
    return r;
}

static void rule_free(gpointer p)
{
    SaRule *r = p;
    g_free(r->name);
    g_free(r->file);
    g_free(r->match_name);
    g_free(r->match_flavor);
    g_free(r);
}

/* m1-large: flavor m1.large, preferred 1, softness 0; offline: flavor off.*, mode off;
 * strict-web: name web-*, mode strict. */
static GPtrArray *judge_rules(void)
{
    GPtrArray *rules = g_ptr_array_new_with_free_func(rule_free);
    SaRule *r = rule_new("m1-large", NULL, "m1.large");
    r->preferred = 1;
    r->softness = 0;
    g_ptr_array_add(rules, r);
    r = rule_new("offline", NULL, "off.*");
    r->has_mode = true;
    r->mode = SA_MODE_OFF;
    g_ptr_array_add(rules, r);
    r = rule_new("strict-web", "web-*", NULL);
    r->has_mode = true;
    r->mode = SA_MODE_STRICT;
    g_ptr_array_add(rules, r);
    return rules;
}

/* Puts rules into cfg, returning what was there: the test gives it back before cfg is freed
 * (the rules are the test's, not the loader's). */
static GPtrArray *swap_rules(SaConfig *cfg, GPtrArray *rules)
{
    GPtrArray *old = cfg->rules;
    cfg->rules = rules;
    return old;
}

static char *settings_text(const SaMetadata *md)
{
    return g_strdup_printf("%s/%d/%d", sa_mode_to_string(md->mode), md->preferred, md->softness);
}

/* One row: the facts it describes, judged with rules in the configuration. */
static void judge_row(const JudgeRow *row, const RuleRow *extra, GPtrArray *rules)
{
    g_autoptr(SaCpuSet) online = sa_cpuset_parse("0-3", NULL);
    g_autoptr(SaConfig) cfg = sa_config_new_default();
    cfg->manage = row->manage;
    GPtrArray *theirs = swap_rules(cfg, rules);
    g_autoptr(SaVmFacts) f = rec_facts("k", extra && extra->name ? extra->name : "vm", row->pid, 2);
    f->flavor = g_strdup(extra ? extra->flavor : NULL);
    f->has_settings = row->has_settings;
    f->settings.mode = row->mode;
    f->settings_error = g_strdup(row->error);
    f->vcpu_cpuset = row->cpuset ? sa_cpuset_parse(row->cpuset, NULL) : NULL;
    if (row->pin0) {
        f->vcpu_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
        g_ptr_array_add(f->vcpu_pins, sa_cpuset_parse(row->pin0, NULL));
        g_ptr_array_add(f->vcpu_pins, NULL);
    }
    SaJudgement j;
    sa_judge_vm(f, cfg, online, "test settings", &j);
    g_test_message("%s: %s (%s)", row->what, sa_vm_status_to_string(j.status), j.reason);
    g_assert_cmpint(j.status, ==, row->status);
    g_assert_nonnull(strstr(j.reason, row->reason));
    g_autofree char *allowed = sa_cpuset_format(j.allowed);
    g_assert_cmpstr(allowed, ==, row->allowed);
    g_assert_cmpstr(j.rule, ==, extra ? extra->rule : NULL);
    g_autofree char *settings = settings_text(&j.settings);
    if (extra && extra->settings)
        g_assert_cmpstr(settings, ==, extra->settings);
    sa_judgement_clear(&j);
    swap_rules(cfg, theirs);
}

static void test_judge_table(void)
{
    /* The rules are there for every row: the VMs of judge_rows match none. */
    g_autoptr(GPtrArray) rules = judge_rules();
    for (guint i = 0; i < G_N_ELEMENTS(judge_rows); i++)
        judge_row(&judge_rows[i], NULL, rules);
    for (guint i = 0; i < G_N_ELEMENTS(rule_rows); i++)
        judge_row(&rule_rows[i].row, &rule_rows[i], rules);
}

/* The rule m1-large (preferred 1, softness 0) gives a VM of flavor m1.large without settings
 * of its own its home and softness; a VM with its own settings ignores it. Status and metrics
 * name the rule; a reload with the rule changed moves the VM once the backend reports it again
 * (its sync after SIGHUP). */
static void test_rule(Fx *fx, gconstpointer data)
{
    g_autoptr(GPtrArray) rules = judge_rules();
    GPtrArray *theirs = swap_rules(fx->core->cfg, rules);
    /* Alone, an automatic home would be partition 0. */
    BedVm *a = add_vm_flavor(fx, "a", 2, -2, 0.2, "m1.large");
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "2-3", 8), <=, 8);
    BedVm *b = add_vm_flavor(fx, "b", 2, 0, 0.2, "m1.large");
    g_assert_cmpuint(bed_step_until_pinned(fx, b, "0-1", 8), <=, 8);
    SaVm *va = core_vm(fx, a);
    g_assert_cmpstr(va->rule, ==, "m1-large");
    g_assert_cmpint(va->settings.softness, ==, 0);
    g_assert_cmpstr(va->status_reason, ==, "mode soft, allowed CPUs 0-3 (rule m1-large)");
    g_assert_null(core_vm(fx, b)->rule);
    g_autofree char *rule_a = status_member(fx, "a", "rule");
    g_autofree char *softness_a = status_member(fx, "a", "softness");
    g_autofree char *rule_b = status_member(fx, "b", "rule");
    g_assert_cmpstr(rule_a, ==, "\"m1-large\"");
    g_assert_cmpstr(softness_a, ==, "0");
    g_assert_cmpstr(rule_b, ==, "null");
    g_autofree char *metrics = sa_metrics_format(fx->core);
    g_assert_nonnull(strstr(metrics,
                            "softaff_vm_info{domain=\"a\",uuid=\"key-a\",status=\"managed\","
                            "mode=\"soft\",rule=\"m1-large\"} 1\n"));
    g_assert_nonnull(strstr(metrics,
                            "softaff_vm_info{domain=\"b\",uuid=\"key-b\",status=\"managed\","
                            "mode=\"soft\"} 1\n"));

    g_autoptr(GPtrArray) changed = judge_rules();
    ((SaRule *)g_ptr_array_index(changed, 0))->preferred = 0;
    swap_rules(fx->core->cfg, theirs); /* the old configuration goes */
    SaConfig *cfg = test_config();
    theirs = swap_rules(cfg, changed);
    sa_core_reload(fx->core, cfg, sa_topology_load(SA_LAYOUT_NODE, NULL, NULL));
    g_autoptr(SaVmFacts) f = bed_facts(a, "a", -2);
    f->flavor = g_strdup("m1.large");
    sa_core_report(fx->core, &rec_ops, a->rec, g_steal_pointer(&f));
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-1", 8), <=, 8);
    g_assert_cmpstr(core_vm(fx, a)->rule, ==, "m1-large");
    g_assert_cmpint(core_vm(fx, a)->settings.preferred, ==, 0);
    swap_rules(fx->core->cfg, theirs);
}

/* ---- the mover (guest memory follows the home) ---- */

#define FM_BASE G_GUINT64_CONSTANT(0x7f0000000000)
#define FM_PAGE 4096u
#define FM_MAX_PAGES 4096

/* A fake process memory: one anonymous mapping of n pages, each on a node; move_pages moves
 * them (node 1 holds at most cap1 pages: -ENOMEM beyond) and records every call. */
typedef struct {
    pid_t pid;
    guint n;
    int node[FM_MAX_PAGES];
    guint cap1;
    guint reads, queries, moves, migrations;
    bool blind;        /* move_pages finds no page mapped (-EFAULT), migrate_pages moves */
    guint blind_below; /* ... or only the pages below this index */
    bool stuck;        /* migrate_pages moves nothing either */
    bool lazy_status;  /* move_pages moves but writes no status (as with a partial move) */
    gulong max_pages;  /* most pages in one query or move call */
    GString *calls;    /* "move 512->1;" per move call */
} FakeMem;

static guint fm_count(const FakeMem *fm, int node)
{
    guint k = 0;
    for (guint i = 0; i < fm->n; i++)
        k += fm->node[i] == node;
    return k;
}

static SaProcMemory *fm_read(gpointer data, pid_t pid, GError **error)
{
    FakeMem *fm = data;
    fm->reads++;
    if (pid != fm->pid) {
        g_set_error(error, SA_ERROR, SA_ERROR_GONE, "no process %d", (int)pid);
        return NULL;
    }
    SaProcMemory *m = g_new0(SaProcMemory, 1);
    m->mappings = g_array_new(FALSE, TRUE, sizeof(SaMemMapping));
    SaMemMapping map = {
        .start = FM_BASE, .end = FM_BASE + (guint64)fm->n * FM_PAGE, .page_size = FM_PAGE};
    map.nodes = g_array_new(FALSE, FALSE, sizeof(SaNodePages));
    for (guint node = 0; node < 2; node++) {
        SaNodePages np = {.node = node, .pages = fm_count(fm, (int)node)};
        if (np.pages)
            g_array_append_val(map.nodes, np);
    }
    g_array_append_val(m->mappings, map);
    return m;
}

static int fm_index(const FakeMem *fm, void *page)
{
    guint64 a = (guint64)(guintptr)page;
    g_assert_cmpuint(a % FM_PAGE, ==, 0);
    g_assert_cmpuint(a, >=, FM_BASE);
    g_assert_cmpuint(a, <, FM_BASE + (guint64)fm->n * FM_PAGE);
    return (int)((a - FM_BASE) / FM_PAGE);
}

static bool fm_query(gpointer data, pid_t pid, gulong count, void **pages, int *status,
                     GError **error)
{
    FakeMem *fm = data;
    g_assert_cmpint(pid, ==, fm->pid);
    fm->queries++;
    fm->max_pages = MAX(fm->max_pages, count);
    for (gulong i = 0; i < count; i++)
        status[i] = fm->blind || (guint)fm_index(fm, pages[i]) < fm->blind_below
                        ? -EFAULT
                        : fm->node[fm_index(fm, pages[i])];
    return true;
}

static bool fm_move(gpointer data, pid_t pid, gulong count, void **pages, int node, int *status,
                    GError **error)
{
    FakeMem *fm = data;
    g_assert_cmpint(pid, ==, fm->pid);
    fm->moves++;
    fm->max_pages = MAX(fm->max_pages, count);
    g_string_append_printf(fm->calls, "move %lu->%d;", count, node);
    for (gulong i = 0; i < count; i++) {
        int k = fm_index(fm, pages[i]);
        if (node == 1 && fm->node[k] != 1 && fm_count(fm, 1) >= fm->cap1) {
            status[i] = -ENOMEM;
            continue;
        }
        fm->node[k] = node;
        if (!fm->lazy_status)
            status[i] = node;
    }
    return true;
}

static long fm_migrate_all(gpointer data, pid_t pid, int node, GError **error)
{
    FakeMem *fm = data;
    g_assert_cmpint(pid, ==, fm->pid);
    fm->migrations++;
    for (guint i = 0; i < fm->n && !fm->stuck; i++)
        fm->node[i] = node;
    return 0;
}

static const SaMoverOps fm_ops = {.read_memory = fm_read,
                                  .query_pages = fm_query,
                                  .move_pages = fm_move,
                                  .migrate_all = fm_migrate_all};

static FakeMem *fm_new(pid_t pid, guint n, int node)
{
    FakeMem *fm = g_new0(FakeMem, 1);
    g_assert_cmpuint(n, <=, FM_MAX_PAGES);
    fm->pid = pid;
    fm->n = n;
    fm->cap1 = n;
    for (guint i = 0; i < n; i++)
        fm->node[i] = node;
    fm->calls = g_string_new(NULL);
    return fm;
}

static void fm_free(FakeMem *fm)
{
    g_string_free(fm->calls, TRUE);
    g_free(fm);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC(FakeMem, fm_free)

/* Runs the mover's work from now on, the fake clock moving on by each pacing wait (at 65536
 * MiB/s, microseconds) but never to the next 30 s reading; returns the steps taken. */
static guint drain(SaMover *m, gint64 now)
{
    gint64 wait;
    guint n = 0;
    for (;;) {
        if (sa_mover_step(m, now, &wait))
            g_assert_cmpuint(++n, <, 10000);
        else if (wait > 0 && wait < G_USEC_PER_SEC)
            now += wait;
        else
            return n;
    }
}

static SaMemoryStatus mover_status(SaMover *m, const char *key)
{
    SaMemoryStatus st;
    g_assert_true(sa_mover_status(m, key, &st));
    return st;
}

/* The pacing function: bytes over the rate, from the elapsed time, computed; no credit for
 * idle time. */
static void test_mover_pacer(void)
{
    SaPacer p = {0};
    const gint64 t0 = 1000000000;
    const guint64 chunk = SA_MOVER_CHUNK_BYTES;
    /* 2 MiB at 256 MiB/s: 1/128 s. */
    g_assert_cmpint(sa_pacer_wait(&p, chunk, t0, 256), ==, 7812);
    /* 127 more at once: 1 s in all. */
    gint64 w = 0;
    for (guint i = 0; i < 127; i++)
        w = sa_pacer_wait(&p, chunk, t0, 256);
    g_assert_cmpint(w, ==, G_USEC_PER_SEC);
    /* Half of it elapsed: half of it left. */
    g_assert_cmpint(sa_pacer_wait(&p, 0, t0 + G_USEC_PER_SEC / 2, 256), ==, G_USEC_PER_SEC / 2);
    g_assert_cmpint(sa_pacer_wait(&p, 0, t0 + G_USEC_PER_SEC, 256), ==, 0);
    /* Idle 10 s: no credit, the first chunk after waits its own time again, and 128 chunks
     * at once still take 1 s. */
    gint64 t1 = t0 + 11 * G_USEC_PER_SEC;
    g_assert_cmpint(sa_pacer_wait(&p, chunk, t1, 256), ==, 7812);
    for (guint i = 0; i < 127; i++)
        w = sa_pacer_wait(&p, chunk, t1, 256);
    g_assert_cmpint(w, ==, G_USEC_PER_SEC);
    /* Another rate: 1 MiB/s, 2 MiB: 2 s. */
    SaPacer q = {0};
    g_assert_cmpint(sa_pacer_wait(&q, chunk, t0, 1), ==, 2 * G_USEC_PER_SEC);
}

/* A first home: the pages elsewhere move in calls of at most 2 MiB, only those elsewhere, and
 * the reading after the move says all of it is home. */
static void test_mover_chunks(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 3000, 0);
    for (guint i = 0; i < 100; i++)
        fm->node[i] = 1; /* already home */
    SaMover *m = sa_mover_new(&fm_ops, fm, 65536, false);
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    SaMemoryStatus st = mover_status(m, "k");
    g_assert_true(st.moving);
    drain(m, 1);
    g_assert_cmpuint(fm_count(fm, 1), ==, 3000);
    g_assert_cmpuint(fm->max_pages, ==, SA_MOVER_CHUNK_BYTES / FM_PAGE);
    /* ceil(3000 / 512) chunks, each queried before its move and after it; the first chunk had
     * 412 pages elsewhere. */
    g_assert_cmpuint(fm->queries, ==, 12);
    g_assert_true(g_str_has_prefix(fm->calls->str, "move 412->1;move 512->1;"));
    st = mover_status(m, "k");
    g_assert_false(st.moving);
    g_assert_cmpuint(st.moves, ==, 1);
    g_assert_cmpuint(st.move_total_bytes, ==, 2900 * FM_PAGE);
    g_assert_cmpuint(st.moved_bytes_total, ==, 2900 * FM_PAGE);
    g_assert_cmpuint(st.resident_bytes, ==, 3000 * FM_PAGE);
    g_assert_cmpuint(st.home_bytes, ==, 3000 * FM_PAGE);
    g_assert_cmpuint(log_count("vm: memory move to node 1 done"), ==, 1);
    g_assert_cmpuint(log_count("vm: 100.0% of its"), ==, 1);
    /* The same home again: nothing new. */
    guint reads = fm->reads;
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    g_assert_cmpuint(drain(m, 2), ==, 0);
    g_assert_cmpuint(fm->reads, ==, reads);
    /* 30 s later, one reading, no move. */
    g_assert_cmpuint(drain(m, 1 + SA_MOVER_MEASURE_US), ==, 1);
    g_assert_cmpuint(fm->reads, ==, reads + 1);
    g_assert_cmpuint(fm->moves, ==, 6);
    sa_mover_free(m);
}

/* A move that leaves the status of the pages it moved unwritten (the kernel does, for a call
 * that could not move every page): the query after the move counts what arrived. */
static void test_mover_status_unwritten(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 1024, 0);
    fm->lazy_status = true;
    SaMover *m = sa_mover_new(&fm_ops, fm, 65536, false);
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    drain(m, 1);
    g_assert_cmpuint(fm_count(fm, 1), ==, 1024);
    SaMemoryStatus st = mover_status(m, "k");
    g_assert_cmpuint(st.moved_bytes_total, ==, 1024 * FM_PAGE);
    g_assert_false(st.node_full);
    g_assert_cmpuint(fm->migrations, ==, 0);
    sa_mover_free(m);
}

/* Pages numa_maps shows that move_pages cannot see (Linux 6.1, preallocated QEMU RAM):
 * migrate_pages moves them in one call, said once; the move counts them. */
static void test_mover_unseen(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 2048, 0);
    fm->blind = true;
    SaMover *m = sa_mover_new(&fm_ops, fm, 65536, false);
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    drain(m, 1);
    g_assert_cmpuint(fm->moves, ==, 0);
    g_assert_cmpuint(fm->migrations, ==, 1);
    g_assert_cmpuint(fm_count(fm, 1), ==, 2048);
    SaMemoryStatus st = mover_status(m, "k");
    g_assert_false(st.moving);
    g_assert_cmpuint(st.moved_bytes_total, ==, 2048 * FM_PAGE);
    g_assert_cmpuint(st.home_bytes, ==, 2048 * FM_PAGE);
    g_assert_cmpuint(log_count("vm: move_pages(2) could not see 8 MiB"), ==, 1);
    /* Back home to 0: again by migrate_pages, not said again. */
    sa_mover_set_home(m, "k", "vm", fm->pid, 0, true);
    drain(m, 2);
    g_assert_cmpuint(fm->migrations, ==, 2);
    g_assert_cmpuint(fm_count(fm, 0), ==, 2048);
    g_assert_cmpuint(log_count("vm: move_pages(2) could not see"), ==, 1);
    sa_mover_free(m);
}

/* Pages nothing can move: one try per move, then one per reading (30 s), never a busy loop. */
static void test_mover_stuck(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 2048, 0);
    fm->blind = fm->stuck = true;
    SaMover *m = sa_mover_new(&fm_ops, fm, 65536, false);
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    drain(m, 1);
    g_assert_cmpuint(fm->migrations, ==, 1);
    drain(m, 1 + SA_MOVER_MEASURE_US);
    g_assert_cmpuint(fm->migrations, ==, 2);
    g_assert_cmpuint(fm_count(fm, 0), ==, 2048);
    sa_mover_free(m);
}

/* Half of the pages unseen: the chunks move the others, migrate_pages the rest at the end. */
static void test_mover_half_unseen(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 2048, 0);
    fm->blind_below = 1024;
    SaMover *m = sa_mover_new(&fm_ops, fm, 65536, false);
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    drain(m, 1);
    g_assert_cmpuint(fm->moves, ==, 2);
    g_assert_cmpuint(fm->migrations, ==, 1);
    g_assert_cmpuint(fm_count(fm, 1), ==, 2048);
    SaMemoryStatus st = mover_status(m, "k");
    g_assert_cmpuint(st.moved_bytes_total, ==, 2048 * FM_PAGE);
    g_assert_cmpuint(log_count("vm: move_pages(2) could not see 4 MiB"), ==, 1);
    sa_mover_free(m);
}

/* Pages that strayed from home (first touched elsewhere during a burst): a reading while the VM
 * is at home moves them back; while it bursts, nothing moves. */
static void test_mover_rehome(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 4096, 1);
    SaMover *m = sa_mover_new(&fm_ops, fm, 65536, false);
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    drain(m, 1);
    g_assert_cmpuint(fm->moves, ==, 0);
    for (guint i = 0; i < 1200; i++)
        fm->node[i] = 0;
    sa_mover_set_away(m, "k", true);
    drain(m, 1 + SA_MOVER_MEASURE_US);
    g_assert_cmpuint(fm->moves, ==, 0);
    g_assert_cmpuint(fm_count(fm, 0), ==, 1200);
    sa_mover_set_away(m, "k", false);
    drain(m, 1 + 2 * SA_MOVER_MEASURE_US);
    g_assert_cmpuint(fm_count(fm, 1), ==, 4096);
    g_assert_cmpuint(log_count("vm: 5 MiB of its memory away from home node 1"), ==, 1);
    SaMemoryStatus st = mover_status(m, "k");
    g_assert_false(st.moving);
    g_assert_cmpuint(st.moved_bytes_total, ==, 1200 * FM_PAGE);
    /* A few strays (under a chunk, under 10%): left alone. */
    for (guint i = 0; i < 300; i++)
        fm->node[i] = 0;
    guint moves = fm->moves;
    drain(m, 1 + 4 * SA_MOVER_MEASURE_US);
    g_assert_cmpuint(fm->moves, ==, moves);
    sa_mover_free(m);
}

/* The rate: after a chunk, the next one waits what the pacing function says. */
static void test_mover_rate(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 2048, 0);
    SaMover *m = sa_mover_new(&fm_ops, fm, 256, false);
    gint64 wait;
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    g_assert_true(sa_mover_step(m, 1000, &wait)); /* the plan */
    g_assert_true(sa_mover_step(m, 1000, &wait)); /* 2 MiB */
    g_assert_cmpuint(fm->moves, ==, 1);
    g_assert_false(sa_mover_step(m, 1000, &wait));
    g_assert_cmpint(wait, ==, 7812);
    g_assert_false(sa_mover_step(m, 1000 + 7811, &wait));
    g_assert_cmpint(wait, ==, 1);
    g_assert_true(sa_mover_step(m, 1000 + 7812, &wait));
    g_assert_cmpuint(fm->moves, ==, 2);
    SaMemoryStatus st = mover_status(m, "k");
    g_assert_true(st.moving);
    g_assert_cmpuint(st.move_done_bytes, ==, 2 * SA_MOVER_CHUNK_BYTES);
    g_assert_cmpuint(st.move_total_bytes, ==, 2048 * FM_PAGE);
    sa_mover_free(m);
}

/* A new home cancels the move under way between two chunks; the next one goes to the new
 * home (and brings back what the first one moved). */
static void test_mover_cancel(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 3000, 0);
    SaMover *m = sa_mover_new(&fm_ops, fm, 65536, false);
    gint64 wait;
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    for (guint i = 0; i < 3; i++)
        g_assert_true(sa_mover_step(m, 1 + 1000 * i, &wait));
    g_assert_cmpuint(fm_count(fm, 1), ==, 1024);
    sa_mover_set_home(m, "k", "vm", fm->pid, 0, true);
    SaMemoryStatus st = mover_status(m, "k");
    g_assert_cmpuint(st.cancels, ==, 1);
    g_assert_cmpint(st.node, ==, 0);
    g_assert_true(st.moving);
    g_assert_cmpuint(st.move_done_bytes, ==, 0);
    g_assert_cmpuint(log_count("vm: memory move to node 1 stopped: a new home"), ==, 1);
    gsize mark = fm->calls->len;
    drain(m, 3000);
    g_assert_cmpuint(fm_count(fm, 0), ==, 3000);
    g_assert_null(strstr(fm->calls->str + mark, "->1;"));
    g_assert_cmpstr(fm->calls->str + mark, ==, "move 512->0;move 512->0;");
    st = mover_status(m, "k");
    g_assert_cmpuint(st.moves, ==, 1);
    g_assert_cmpuint(st.moved_bytes_total, ==, 2048 * FM_PAGE);
    /* Memory that no longer follows the home: the move stops, readings go on. */
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    g_assert_true(sa_mover_step(m, 100000, &wait));
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, false);
    st = mover_status(m, "k");
    g_assert_false(st.moving);
    g_assert_cmpuint(st.cancels, ==, 2);
    guint moves = fm->moves;
    drain(m, 200000);
    g_assert_cmpuint(fm->moves, ==, moves);
    st = mover_status(m, "k");
    g_assert_cmpuint(st.home_bytes, ==, 0);
    sa_mover_free(m);
}

/* A full home node: said once, the rest stays; no further move is tried. */
static void test_mover_node_full(void)
{
    g_autoptr(FakeMem) fm = fm_new(4242, 3000, 0);
    fm->cap1 = 700;
    SaMover *m = sa_mover_new(&fm_ops, fm, 65536, false);
    sa_mover_set_home(m, "k", "vm", fm->pid, 1, true);
    drain(m, 1);
    g_assert_cmpuint(fm_count(fm, 1), ==, 700);
    g_assert_cmpuint(fm->moves, ==, 2);
    SaMemoryStatus st = mover_status(m, "k");
    g_assert_false(st.moving);
    g_assert_true(st.node_full);
    g_assert_cmpuint(st.moves, ==, 1);
    g_assert_cmpuint(st.moved_bytes_total, ==, 700 * FM_PAGE);
    g_assert_cmpuint(st.home_bytes, ==, 700 * FM_PAGE);
    g_assert_cmpuint(log_count("vm: home node 1 has no free memory"), ==, 1);
    g_assert_cmpuint(log_count("stopped (node full)"), ==, 1);
    drain(m, 1 + SA_MOVER_MEASURE_US);
    g_assert_cmpuint(fm->moves, ==, 2);
    g_assert_cmpuint(log_count("vm: home node 1 has no free memory"), ==, 1);
    sa_mover_free(m);
}

/* The real host path on a child of this test: node 0 (its own node on this host) gets all of
 * it, and the reading says so. */
static void test_mover_real(void)
{
    int fds[2];
    g_assert_cmpint(pipe(fds), ==, 0);
    pid_t child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        gsize size = 16u << 20;
        char *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            _exit(1);
        memset(mem, 'x', size);
        if (write(fds[1], mem + size - 1, 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c;
    close(fds[1]);
    g_assert_cmpint(read(fds[0], &c, 1), ==, 1);
    close(fds[0]);
    g_unsetenv("SOFTAFF_PROC_ROOT");
    SaMover *m = sa_mover_new(&sa_mover_host_ops, NULL, 256, false);
    sa_mover_set_home(m, "real", "child", child, 0, true);
    drain(m, g_get_monotonic_time());
    SaMemoryStatus st = mover_status(m, "real");
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    g_assert_false(st.moving);
    g_assert_cmpuint(st.moves, ==, 1);
    g_assert_cmpuint(st.resident_bytes, >=, 16u << 20);
    g_assert_cmpuint(st.home_bytes, ==, st.resident_bytes);
    g_assert_cmpuint(st.measured_wall_us, >, 0);
    sa_mover_free(m);
}

/* The core's fake mover: the fixture's threaded one is replaced by a driven one. */
static FakeMem *core_fake_mover(Fx *fx, pid_t pid, guint n, int node)
{
    FakeMem *fm = fm_new(pid, n, node);
    sa_mover_free(fx->core->mover);
    fx->core->mover = sa_mover_new(&fm_ops, fm, 65536, false);
    return fm;
}

/* softaffctl set --preferred: a home change queues a move; a second change cancels it, and
 * the move goes to the newest home. */
static void test_core_memory_home_change(Fx *fx, gconstpointer data)
{
    g_autoptr(FakeMem) fm = core_fake_mover(fx, 1100, 3000, 0);
    BedVm *a = add_vm(fx, "a", 2, 1, 0.05);
    g_assert_cmpint(a->pid, ==, 1100);
    bed_step(fx, 2);
    SaMemoryStatus st = mover_status(fx->core->mover, a->key);
    g_assert_cmpint(st.node, ==, 1);
    g_assert_true(st.follow);
    g_assert_true(st.moving);
    gint64 wait;
    for (guint i = 0; i < 3; i++)
        g_assert_true(sa_mover_step(fx->core->mover, 1 + 1000 * i, &wait));
    g_assert_cmpuint(fm_count(fm, 1), ==, 1024);

    sa_core_report(fx->core, &rec_ops, a->rec, bed_facts(a, "a", 0));
    bed_step(fx, 2);
    st = mover_status(fx->core->mover, a->key);
    g_assert_cmpint(st.node, ==, 0);
    g_assert_cmpuint(st.cancels, ==, 1);
    g_assert_cmpuint(log_count("a: memory move to node 1 stopped: a new home"), ==, 1);
    gsize mark = fm->calls->len;
    drain(fx->core->mover, 3000);
    g_assert_null(strstr(fm->calls->str + mark, "->1;"));
    g_assert_cmpuint(fm_count(fm, 0), ==, 3000);
    g_autofree char *follows = status_member(fx, "a", "follows_home");
    g_assert_cmpstr(follows, ==, "true");
    g_autofree char *ratio = status_member(fx, "a", "home_ratio");
    g_assert_cmpstr(ratio, ==, "1.0");
    g_autofree char *metrics = sa_metrics_format(fx->core);
    g_assert_nonnull(
        strstr(metrics, "\nsoftaff_vm_memory_home_ratio{domain=\"a\",uuid=\"key-a\"} 1\n"));
    g_assert_nonnull(
        strstr(metrics, "\nsoftaff_vm_memory_move_bytes_total{domain=\"a\",uuid=\"key-a\"} "));
    /* Gone from the core: forgotten by the mover. */
    sa_core_forget(fx->core, a->key, "stopped");
    g_assert_false(sa_mover_status(fx->core->mover, a->key, &st));
}

/* A burst moves no memory: the home stays, so does the one move toward it. */
static void test_core_memory_burst(Fx *fx, gconstpointer data)
{
    g_autoptr(FakeMem) fm = core_fake_mover(fx, 1100, 1000, 1);
    BedVm *a = add_vm(fx, "a", 4, 0, 1.0);
    add_vm(fx, "b", 2, 1, 0.0);
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-1", 3), <=, 3);
    drain(fx->core->mover, 1);
    g_assert_cmpuint(fm_count(fm, 0), ==, 1000);
    guint reads = fm->reads, moves = fm->moves;
    g_assert_cmpuint(bed_step_until_pinned(fx, a, "0-3", 6), <=, 6);
    g_autofree char *state = status_member(fx, "a", "state");
    g_assert_cmpstr(state, ==, "\"burst\"");
    g_assert_cmpuint(drain(fx->core->mover, 2), ==, 0);
    g_assert_cmpuint(fm->reads, ==, reads);
    g_assert_cmpuint(fm->moves, ==, moves);
    SaMemoryStatus st = mover_status(fx->core->mover, a->key);
    g_assert_cmpint(st.node, ==, 0);
    g_assert_cmpuint(st.moves, ==, 1);
    g_assert_cmpuint(st.cancels, ==, 0);
}

/* A VM with its own <numatune>, and [memory] migrate=off: read, never moved. */
static void test_core_memory_fixed(Fx *fx, gconstpointer data)
{
    g_autoptr(FakeMem) fm = core_fake_mover(fx, 1100, 1000, 0);
    BedVm *a = bed_vm(fx, "a", 1100, 2, 0.0);
    g_autoptr(SaVmFacts) f = bed_facts(a, "a", 1);
    f->has_numatune = true;
    bed_report(fx, a, g_steal_pointer(&f));
    bed_step(fx, 2);
    drain(fx->core->mover, 1);
    SaMemoryStatus st = mover_status(fx->core->mover, a->key);
    g_assert_cmpint(st.node, ==, 1);
    g_assert_false(st.follow);
    g_assert_cmpuint(fm->moves, ==, 0);
    g_assert_cmpuint(fm->queries, ==, 0);
    g_assert_cmpuint(st.home_bytes, ==, 0);
    g_assert_cmpuint(st.resident_bytes, ==, 1000 * FM_PAGE);
    g_autofree char *reason = status_member(fx, "a", "fixed_reason");
    g_assert_cmpstr(reason, ==, "\"the VM has its own <numatune>\"");

    /* Without <numatune> but migrate=off: the same. */
    fx->core->cfg->memory_migrate = false;
    sa_core_report(fx->core, &rec_ops, a->rec, bed_facts(a, "a", 1));
    bed_step(fx, 2);
    drain(fx->core->mover, 2);
    g_assert_cmpuint(fm->moves, ==, 0);
    g_autofree char *reason2 = status_member(fx, "a", "fixed_reason");
    g_assert_cmpstr(reason2, ==, "\"[memory] migrate=off\"");
    /* migrate=auto again (a reload): the move starts. */
    fx->core->cfg->memory_migrate = true;
    bed_step(fx, 1);
    drain(fx->core->mover, 3);
    g_assert_cmpuint(fm_count(fm, 1), ==, 1000);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* The core warns on purpose here (stalls, failures): warnings are captured, not fatal. */
    log_capture_start();

    g_test_add_func("/core/judge-table", test_judge_table);
#define ADD(path, fn) g_test_add(path, Fx, NULL, fx_setup, fn, fx_teardown)
    ADD("/core/placement", test_placement);
    ADD("/core/burst-retreat", test_burst_and_retreat);
    ADD("/core/sense-watch-in-burst", test_sense_watch_in_burst);
    ADD("/core/restore-on-shutdown", test_restore_on_shutdown);
    ADD("/core/restore-narrowed-by-earlier", test_restore_narrowed_by_earlier);
    ADD("/core/reload-keeps-counters", test_reload_keeps_counters);
    ADD("/core/vanish-mid-tick", test_vanish_mid_tick);
    ADD("/core/apply-transient", test_apply_transient);
    ADD("/core/apply-gone-refused", test_apply_gone_and_refused);
    ADD("/core/stalled-backend", test_stalled_backend);
    ADD("/core/many-stalled", test_many_stalled);
    ADD("/core/stopped-process", test_stopped_process);
    ADD("/core/discover", test_discover);
    ADD("/core/per-thread-own", test_per_thread_own);
    ADD("/core/own-pin-live", test_own_pin_live);
    ADD("/core/own-pin-same-set", test_own_pin_same_set);
    ADD("/core/new-process", test_new_process);
    ADD("/core/rebalance", test_rebalance);
    ADD("/core/rebalance-off", test_rebalance_off);
    ADD("/core/rule", test_rule);
    ADD("/core/memory/home-change", test_core_memory_home_change);
    ADD("/core/memory/burst", test_core_memory_burst);
    ADD("/core/memory/fixed", test_core_memory_fixed);
#undef ADD
    g_test_add_func("/mover/pacer", test_mover_pacer);
    g_test_add_func("/mover/chunks", test_mover_chunks);
    g_test_add_func("/mover/rate", test_mover_rate);
    g_test_add_func("/mover/status-unwritten", test_mover_status_unwritten);
    g_test_add_func("/mover/unseen", test_mover_unseen);
    g_test_add_func("/mover/half-unseen", test_mover_half_unseen);
    g_test_add_func("/mover/stuck", test_mover_stuck);
    g_test_add_func("/mover/rehome", test_mover_rehome);
    g_test_add_func("/mover/cancel", test_mover_cancel);
    g_test_add_func("/mover/node-full", test_mover_node_full);
    g_test_add_func("/mover/real", test_mover_real);
    return g_test_run();
}
