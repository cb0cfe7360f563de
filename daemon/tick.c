/* softaffd — one tick: sample the host and the managed VMs, run the policy, count, and queue
 * what changed. Nothing here waits: commands run on the actuator's workers. */
#define G_LOG_DOMAIN "softaffd"

#include <time.h>

#include "core-private.h"
#include "loop-watch.h"
#include "sa-metrics.h"

void sa_decision_free(gpointer p)
{
    SaDecision *dec = p;
    if (!dec)
        return;
    g_free(dec->vcpus);
    g_free(dec->reason);
    g_free(dec);
}

static void record_decision(SaVm *vm, const char *vcpus)
{
    SaDecision *dec = g_new0(SaDecision, 1);
    dec->wall_us = g_get_real_time();
    dec->state = vm->pvm.st.state;
    dec->home = vm->pvm.st.home;
    dec->vcpus = g_strdup(vcpus);
    dec->reason = g_strdup(vm->pvm.reason);
    g_queue_push_tail(vm->decisions, dec);
    while (g_queue_get_length(vm->decisions) > SA_VM_MAX_DECISIONS)
        sa_decision_free(g_queue_pop_head(vm->decisions));
}

/* The policy's inputs for one managed VM. While the scheduler places the vCPUs the policy sees
 * every VM as strict: it keeps choosing homes, and widens no set (no vCPU thread is pinned;
 * the scheduler bursts by the VM's own softness). */
static void policy_input(const SaCore *core, SaVm *vm, bool have_interval)
{
    SaPolicyVm *p = &vm->pvm;
    p->name = vm->name;
    p->mode = sa_core_sched_active(core) ? SA_MODE_STRICT : vm->settings.mode;
    p->preferred = vm->settings.preferred;
    p->assigned = vm->settings.assigned;
    p->softness = vm->settings.softness;
    p->allowed = vm->allowed;
    p->n_vcpus = vm->facts->n_vcpus;
    p->memory_bytes = vm->facts->memory_bytes;
    p->vcpu_samples = have_interval ? &g_array_index(vm->sampling.deltas, SaVcpuSample, 0) : NULL;
}

/* Samples every managed VM, in a stable order (homes chosen in one tick are deterministic), into
 * the tick's reused scratch arrays (no allocation per tick). */
static GPtrArray *sample_managed(SaCore *core)
{
    g_autoptr(GPtrArray) all = sa_core_sorted_vms(core);
    GPtrArray *managed = core->tick_vms;
    g_ptr_array_set_size(managed, 0);
    g_ptr_array_set_size(core->tick_pvms, 0);
    for (guint k = 0; k < all->len; k++) {
        SaVm *vm = g_ptr_array_index(all, k);
        if (vm->status != SA_VM_MANAGED)
            continue;
        policy_input(core, vm, sa_core_sample_vm(core, vm));
        g_ptr_array_add(managed, vm);
        g_ptr_array_add(core->tick_pvms, &vm->pvm);
    }
    return managed;
}

static void run_policy(SaCore *core, guint64 interval_ns, gint64 now_us)
{
    GPtrArray *pvms = core->tick_pvms;
    for (guint p = 0; p < core->topo->partitions->len; p++)
        core->unmanaged_avg[p] = core->load[p].seconds > 0 ? core->load[p].unmanaged : -1;
    SaPolicyHost host = {
        .topo = core->topo,
        .cpu_busy = core->cpu_busy,
        .n_cpu_busy = core->n_cpu_busy,
        .cpu_visitors = core->cpu_visitors,
        .interval_ns = interval_ns,
        .now_ms = now_us / 1000,
        .unmanaged_avg = core->unmanaged_avg,
    };
    sa_policy_tick(&core->cfg->policy, &host, (SaPolicyVm *const *)pvms->pdata, pvms->len,
                   core->usage);
}

/* Time at home and away, run time and how much of it ran on the home partition. */
static void account_vm(SaCore *core, SaVm *vm, guint64 interval_ns)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    SaVmStats *s = &vm->stats;
    double seconds = interval_ns / 1e9;
    if (sa_core_sched_active(core) ? vm->sched.away : st->state == SA_STATE_BURST)
        s->seconds_burst += seconds;
    else
        s->seconds_home += seconds;
    s->bursts += vm->pvm.bursts;
    s->retreats += vm->pvm.retreats;
    s->changes += vm->pvm.changed;
    s->run_delay_now = 0;
    if (!vm->pvm.vcpu_samples)
        return;
    int home = st->home >= 0 ? sa_topology_find_partition(core->topo, (guint)st->home) : -1;
    guint64 delay = 0;
    for (guint i = 0; i < vm->pvm.n_vcpus; i++) {
        const SaVcpuSample *v = &vm->pvm.vcpu_samples[i];
        s->run_ns_total += v->run_ns;
        delay += v->delay_ns;
        if (home >= 0 && sa_policy_run_partition(core->topo, v->last_cpu, home) == home)
            s->run_ns_home += v->run_ns;
    }
    s->delay_ns_total += delay;
    s->run_delay_now = interval_ns ? (double)delay / (double)interval_ns : 0;
}

/* Logs and keeps a new decision; queues the commands it needs unless the VM is stalled. */
static void act_on_decision(SaCore *core, SaVm *vm)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    SaVmActuation *a = &vm->act;
    bool sched = sa_core_sched_active(core);
    if (vm->pvm.changed) {
        g_autofree char *vcpus = sa_cpuset_format(st->vcpus);
        if (sched)
            g_info("%s: %s -> home %d (the scheduler places the vCPUs; emulator and I/O threads "
                   "at home)",
                   vm->name, vm->pvm.reason, st->home);
        else
            g_info("%s: %s%s -> vCPUs %s (home %d, %s)", vm->name,
                   core->dry_run ? "[dry-run] " : "", vm->pvm.reason, vcpus, st->home,
                   sa_vm_state_to_string(st->state));
        record_decision(vm, vcpus);
        a->decided++;
    }
    if (core->dry_run) {
        a->applied = a->decided;
        return;
    }
    if (sched)
        sa_core_sched_apply(core, vm);
    else
        sa_core_sched_release(core, vm);
    if (sa_vm_is_stalled(vm))
        return;
    /* With the scheduler this pin narrows only the emulator and I/O threads (home). */
    if (a->applied < a->decided && a->outstanding < a->decided &&
        g_get_monotonic_time() >= a->retry_at_us)
        sa_actuator_pin(core, vm);
    /* The home chosen for preferred="auto" is kept in the live settings. */
    if (vm->pvm.preferred < 0 && st->home >= 0 && st->home != a->written_assigned &&
        !a->assigned_pending)
        sa_actuator_write_assigned(core, vm, st->home);
}

/* The node of the VM's home partition, -1 when it has none (not placed, a CPU-less
 * partition). */
static int home_node(const SaCore *core, const SaVm *vm)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    int idx =
        st->placed && st->home >= 0 ? sa_topology_find_partition(core->topo, (guint)st->home) : -1;
    if (idx < 0)
        return -1;
    const SaPartition *p = g_ptr_array_index(core->topo->partitions, idx);
    if (p->node < 0)
        return -1;
    return (int)((const SaNode *)g_ptr_array_index(core->topo->nodes, (guint)p->node))->id;
}

/* Memory follows the home, not a burst: the mover hears of a VM's first home and of each new
 * one. It never moves a VM with its own <numatune>, with [memory] migrate=off, in dry-run, or
 * on a host of one node (it still reads where the memory is). */
static void follow_home(SaCore *core, SaVm *vm)
{
    int node = home_node(core, vm);
    if (node < 0 || vm->facts->pid <= 0)
        return;
    bool follow = core->cfg->memory_migrate && !vm->facts->has_numatune && !core->dry_run &&
                  core->topo->nodes->len > 1;
    bool away = sa_core_sched_active(core) ? vm->sched.away : vm->pvm.st.state == SA_STATE_BURST;
    if (away != vm->memory_away && vm->memory_node >= 0)
        sa_mover_set_away(core->mover, vm->key, away);
    vm->memory_away = away;
    if (node == vm->memory_node && follow == vm->memory_follow)
        return;
    vm->memory_node = node;
    vm->memory_follow = follow;
    sa_mover_set_home(core->mover, vm->key, vm->name, vm->facts->pid, node, follow);
}

/* A partition over-committed for long while another is under-used: the cheapest auto VM gets
 * a new home (policies/rebalance.c). It is its assigned home from the next tick on, written to
 * its settings like any automatic home, and its memory follows. */
static void rebalance(SaCore *core, gint64 now_us)
{
    GPtrArray *pvms = core->tick_pvms;
    SaRebalanceMove move;
    if (!core->cfg->rebalance.enabled || core->dry_run ||
        !sa_rebalance_step(&core->cfg->rebalance, core->rebalance, core->topo, core->usage,
                           (SaPolicyVm *const *)pvms->pdata, pvms->len, now_us / 1000, &move))
        return;
    SaVm *vm = g_ptr_array_index(core->tick_vms, move.vm);
    g_info("%s: %s", vm->name, move.reason);
    vm->settings.assigned = (int)move.to;
}

static void write_metrics(SaCore *core)
{
    const SaConfig *cfg = core->cfg;
    if (!cfg->metrics_textfile || core->dry_run || core->ticks % cfg->metrics_every != 0)
        return;
    g_autoptr(GError) error = NULL;
    bool ok = sa_metrics_write(core, cfg->metrics_textfile, &error);
    if (!ok && !core->metrics_failing)
        g_warning("metrics: %s", error->message);
    core->metrics_failing = !ok;
}

static double process_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void sa_core_tick(SaCore *core)
{
    if (core->stopping)
        return;
    /* This tick answers an event waiting for its turn too. */
    if (core->event_tick_timer) {
        g_source_remove(core->event_tick_timer);
        core->event_tick_timer = 0;
    }
    double cpu0 = process_cpu_ms();
    gint64 now = g_get_monotonic_time();
    guint64 interval_ns = (guint64)MAX(now - core->last_sample_us, 1) * 1000;
    core->last_sample_us = now;
    core->ticks++;
    /* An ejection by the kernel is noticed before the policy runs: it re-pins at once. */
    sa_loop_watch_step("tick: the scheduler's state");
    sa_core_sched_tick(core);
    sa_loop_watch_step("tick: sampling the host");
    sa_core_sample_host(core);

    sa_loop_watch_step("tick: sampling the VMs");
    GPtrArray *managed = sample_managed(core);
    sa_loop_watch_step("tick: the policy");
    run_policy(core, interval_ns, now);
    for (guint p = 0; p < core->topo->partitions->len; p++)
        sa_partition_load_add(&core->load[p], &core->usage[p], interval_ns / 1e9);
    sa_core_fleet_feed(core, interval_ns);
    rebalance(core, now);
    for (guint i = 0; i < managed->len; i++)
        account_vm(core, g_ptr_array_index(managed, i), interval_ns);
    sa_loop_watch_step("tick: acting on decisions (fast narrowing, queueing pins)");
    for (guint i = 0; i < managed->len; i++) {
        act_on_decision(core, g_ptr_array_index(managed, i));
        follow_home(core, g_ptr_array_index(managed, i));
    }
    sa_loop_watch_step("tick: the BPF sensor's thread map");
    sa_core_sense_update(core);
    sa_loop_watch_step("tick: the metrics textfile");
    write_metrics(core);
    sa_loop_watch_step("tick: saving the headroom history");
    sa_core_fleet_maybe_save(core);
    sa_loop_watch_step(NULL);
    core->last_tick_cpu_ms = process_cpu_ms() - cpu0;
}

bool sa_core_regular_tick(SaCore *core)
{
    if (g_get_monotonic_time() - core->last_sample_us < SA_EVENT_TICK_MIN_US)
        return false;
    sa_core_tick(core);
    return true;
}
