/* softaff tests — hand-built topologies and the scheduler simulator (see sim.h). */
#define G_LOG_DOMAIN "softaff-test-sim"

#include "sim.h"

#include <string.h>

#define GIB (G_GUINT64_CONSTANT(1) << 30)
/* A thread whose demand was below this last interval was asleep: it wakes where it is best. */
#define ASLEEP 0.05

/* The decision log (sim_log_decisions), the test case it is in and the Sims created in it. */
static FILE *decision_log;
static char *log_case;
static guint log_sims;

static void node_free(gpointer p)
{
    SaNode *node = p;
    sa_cpuset_free(node->cpus);
    g_free(node);
}

static void partition_free(gpointer p)
{
    SaPartition *part = p;
    sa_cpuset_free(part->cpus);
    g_free(part);
}

SaTopology *sim_topology_new(guint n, const char *const *cpulists, const guint *distance)
{
    SaTopology *topo = g_new0(SaTopology, 1);
    topo->layout = SA_LAYOUT_NODE;
    topo->online = sa_cpuset_new();
    topo->unplaced = sa_cpuset_new();
    topo->nodes = g_ptr_array_new_with_free_func(node_free);
    topo->partitions = g_ptr_array_new_with_free_func(partition_free);
    topo->node_distance = g_new0(guint, (gsize)n * n);
    topo->partition_distance = g_new0(guint, (gsize)n * n);
    for (guint i = 0; i < n; i++) {
        g_autoptr(GError) error = NULL;
        SaCpuSet *cpus = sa_cpuset_parse(cpulists[i], &error);
        g_assert_no_error(error);
        SaNode *node = g_new0(SaNode, 1);
        node->id = i;
        node->cpus = sa_cpuset_copy(cpus);
        node->mem_total = 32 * GIB;
        node->mem_free = 16 * GIB;
        g_ptr_array_add(topo->nodes, node);
        SaPartition *part = g_new0(SaPartition, 1);
        part->id = i;
        part->cpus = cpus;
        part->node = (int)i;
        g_ptr_array_add(topo->partitions, part);
        sa_cpuset_union(topo->online, cpus);
        for (guint j = 0; j < n; j++) {
            guint d = distance ? distance[i * n + j] : (i == j ? 10 : 20);
            topo->node_distance[i * n + j] = d;
            topo->partition_distance[i * n + j] = i == j ? 0 : d;
        }
    }
    return topo;
}

SaTopology *sim_topology_uniform(guint n, guint cpus_per_partition, const guint *distance)
{
    g_autoptr(GPtrArray) lists = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < n; i++)
        g_ptr_array_add(lists, g_strdup_printf("%u-%u", i * cpus_per_partition,
                                               (i + 1) * cpus_per_partition - 1));
    return sim_topology_new(n, (const char *const *)lists->pdata, distance);
}

static void sim_vm_free(gpointer p)
{
    SimVm *vm = p;
    sa_policy_vm_clear(&vm->vm);
    sa_cpuset_free(vm->allowed);
    g_free(vm->load);
    g_free(vm->prev_load);
    g_free(vm->cpu);
    g_free(vm->samples);
    g_free(vm->logged_reason);
    g_free((char *)vm->vm.name);
    g_free(vm);
}

Sim *sim_new(SaTopology *topo, guint interval_ms)
{
    Sim *sim = g_new0(Sim, 1);
    sim->topo = topo;
    sa_policy_config_init(&sim->cfg);
    sim->n_cpus = (guint)(sa_cpuset_last(topo->online) + 1);
    sim->unmanaged = g_new0(double, sim->n_cpus);
    sim->busy = g_new0(double, sim->n_cpus);
    sim->vms = g_ptr_array_new_with_free_func(sim_vm_free);
    sim->usage = g_new0(SaPartitionUsage, topo->partitions->len);
    sim->interval_ms = interval_ms;
    sim->now_ms = 1000000;
    const char *test_case = g_test_get_path();
    if (g_strcmp0(test_case, log_case) != 0) {
        g_free(log_case);
        log_case = g_strdup(test_case);
        log_sims = 0;
        if (decision_log)
            fprintf(decision_log, "== %s\n", log_case);
    }
    sim->log_id = log_sims++;
    return sim;
}

void sim_free(Sim *sim)
{
    if (sim == NULL)
        return;
    g_ptr_array_unref(sim->vms);
    sa_topology_free(sim->topo);
    g_free(sim->unmanaged);
    g_free(sim->busy);
    g_free(sim->usage);
    g_free(sim);
}

SimVm *sim_add_vm(Sim *sim, const char *name, guint n_vcpus, int preferred, const char *allowed)
{
    SimVm *vm = g_new0(SimVm, 1);
    sa_policy_vm_init(&vm->vm);
    vm->vm.name = g_strdup(name);
    vm->vm.preferred = preferred;
    vm->vm.n_vcpus = n_vcpus;
    vm->vm.memory_bytes = GIB;
    if (allowed) {
        g_autoptr(GError) error = NULL;
        vm->allowed = sa_cpuset_parse(allowed, &error);
        g_assert_no_error(error);
    } else {
        vm->allowed = sa_cpuset_copy(sim->topo->online);
    }
    vm->vm.allowed = vm->allowed;
    vm->n_vcpus = n_vcpus;
    vm->load = g_new0(double, n_vcpus);
    vm->prev_load = g_new0(double, n_vcpus);
    vm->cpu = g_new(int, n_vcpus);
    for (guint v = 0; v < n_vcpus; v++)
        vm->cpu[v] = -1;
    vm->samples = g_new0(SaVcpuSample, n_vcpus);
    vm->last_change = -1;
    g_ptr_array_add(sim->vms, vm);
    return vm;
}

void sim_vm_set_load(SimVm *vm, double per_vcpu)
{
    for (guint v = 0; v < vm->n_vcpus; v++)
        vm->load[v] = per_vcpu;
}

static const SaCpuSet *affinity(const Sim *sim, const SimVm *vm)
{
    return vm->vm.st.vcpus ? vm->vm.st.vcpus : vm->allowed;
}

static int least_loaded(const Sim *sim, const double *load, const SaCpuSet *set)
{
    int best = -1;
    for (int c = sa_cpuset_next(set, -1); c >= 0 && (guint)c < sim->n_cpus;
         c = sa_cpuset_next(set, c))
        if (best < 0 || load[c] < load[best] - 1e-12)
            best = c;
    return best;
}

/* One interval of "kernel": placement, balancing, sharing; fills samples and busy. */
static void simulate(Sim *sim)
{
    g_autofree double *load = g_new0(double, sim->n_cpus);
    for (guint c = 0; c < sim->n_cpus; c++)
        load[c] = sim->unmanaged[c];

    /* Threads that keep their CPU first, then those that wake or must move. */
    for (guint i = 0; i < sim->vms->len; i++) {
        SimVm *vm = g_ptr_array_index(sim->vms, i);
        const SaCpuSet *aff = affinity(sim, vm);
        for (guint v = 0; v < vm->n_vcpus; v++) {
            bool woke = vm->prev_load[v] < ASLEEP && vm->load[v] >= ASLEEP;
            if (vm->cpu[v] >= 0 && sa_cpuset_has(aff, (guint)vm->cpu[v]) && !woke)
                load[vm->cpu[v]] += vm->load[v];
            else
                vm->cpu[v] = -2; /* to place */
        }
    }
    for (guint i = 0; i < sim->vms->len; i++) {
        SimVm *vm = g_ptr_array_index(sim->vms, i);
        const SaCpuSet *aff = affinity(sim, vm);
        for (guint v = 0; v < vm->n_vcpus; v++) {
            if (vm->cpu[v] != -2)
                continue;
            vm->cpu[v] = least_loaded(sim, load, aff);
            g_assert_cmpint(vm->cpu[v], >=, 0);
            load[vm->cpu[v]] += vm->load[v];
        }
    }

    /* Balance: move a thread when that strictly lowers the busier of the two CPUs. */
    for (int pass = 0; pass < 100; pass++) {
        bool moved = false;
        for (guint i = 0; i < sim->vms->len; i++) {
            SimVm *vm = g_ptr_array_index(sim->vms, i);
            const SaCpuSet *aff = affinity(sim, vm);
            for (guint v = 0; v < vm->n_vcpus; v++) {
                double d = vm->load[v];
                int from = vm->cpu[v];
                if (d < ASLEEP)
                    continue;
                int to = least_loaded(sim, load, aff);
                if (to >= 0 && to != from && load[to] + d < load[from] - 1e-9) {
                    load[from] -= d;
                    load[to] += d;
                    vm->cpu[v] = to;
                    moved = true;
                }
            }
        }
        if (!moved)
            break;
    }

    guint64 interval_ns = (guint64)sim->interval_ms * 1000000;
    for (guint c = 0; c < sim->n_cpus; c++)
        sim->busy[c] = MIN(1.0, load[c]);
    for (guint i = 0; i < sim->vms->len; i++) {
        SimVm *vm = g_ptr_array_index(sim->vms, i);
        for (guint v = 0; v < vm->n_vcpus; v++) {
            double d = vm->load[v];
            int c = vm->cpu[v];
            double run = load[c] > 1.0 ? d / load[c] : d;
            vm->samples[v].run_ns = (guint64)(run * interval_ns);
            vm->samples[v].delay_ns = (guint64)((d - run) * interval_ns);
            vm->samples[v].last_cpu = c;
            vm->prev_load[v] = d;
        }
    }
}

void sim_log_decisions(FILE *out)
{
    decision_log = out;
}

/* This tick's events of one VM, added to its totals. */
static void count_events(SimVm *vm, guint *bursts, guint *retreats)
{
    *bursts = vm->vm.bursts;
    *retreats = vm->vm.retreats;
    vm->bursts += *bursts;
    vm->retreats += *retreats;
}

static void log_decision(const Sim *sim, SimVm *vm, guint bursts, guint retreats)
{
    const SaVmPolicyState *st = &vm->vm.st;
    bool same_reason = g_strcmp0(vm->logged_reason, vm->vm.reason) == 0;
    fprintf(decision_log,
            "#%u tick %d %s: %s, state %s, home %d, vcpus %s, emulator %s, bursts %u, "
            "retreats %u: %s\n",
            sim->log_id, sim->tick, vm->vm.name, vm->vm.changed ? "changed" : "same",
            sa_vm_state_to_string(st->state), st->home, sim_vcpus(vm), sim_emulator(vm), bursts,
            retreats, same_reason ? "=" : vm->vm.reason);
    if (!same_reason) {
        g_free(vm->logged_reason);
        vm->logged_reason = g_strdup(vm->vm.reason);
    }
}

/* Per partition: owners, visitors, unmanaged (CPUs), owner VMs, homed vCPUs. */
static void log_usage(const Sim *sim)
{
    fprintf(decision_log, "#%u tick %d usage:", sim->log_id, sim->tick);
    for (guint p = 0; p < sim->topo->partitions->len; p++) {
        const SaPartitionUsage *u = &sim->usage[p];
        fprintf(decision_log, " [%u] %.3f %.3f %.3f %u %u", p, u->owners, u->visitors, u->unmanaged,
                u->n_owner_vms, u->owner_vcpus);
    }
    fputc('\n', decision_log);
}

void sim_step(Sim *sim)
{
    bool have_interval = sim->tick > 0;
    if (have_interval) {
        simulate(sim);
        sim->now_ms += sim->interval_ms;
    }
    g_autoptr(GPtrArray) pvms = g_ptr_array_new();
    for (guint i = 0; i < sim->vms->len; i++) {
        SimVm *vm = g_ptr_array_index(sim->vms, i);
        vm->vm.vcpu_samples = have_interval ? vm->samples : NULL;
        g_ptr_array_add(pvms, &vm->vm);
    }
    SaPolicyHost host = {
        .topo = sim->topo,
        .cpu_busy = sim->busy,
        .n_cpu_busy = sim->n_cpus,
        .interval_ns = have_interval ? (guint64)sim->interval_ms * 1000000 : 0,
        .now_ms = sim->now_ms,
    };
    sa_policy_tick(&sim->cfg, &host, (SaPolicyVm *const *)pvms->pdata, pvms->len, sim->usage);
    for (guint i = 0; i < sim->vms->len; i++) {
        SimVm *vm = g_ptr_array_index(sim->vms, i);
        /* Never outside the allowed set. */
        if (vm->vm.st.vcpus) {
            g_assert_true(sa_cpuset_is_subset(vm->vm.st.vcpus, vm->allowed));
            g_assert_true(sa_cpuset_is_subset(vm->vm.st.emulator, vm->allowed));
        }
        if (vm->vm.changed) {
            vm->changes++;
            vm->last_change = sim->tick;
            g_test_message("tick %d %s: %s -> vCPUs %s", sim->tick, vm->vm.name, vm->vm.reason,
                           sim_vcpus(vm));
        }
        guint bursts, retreats;
        count_events(vm, &bursts, &retreats);
        if (decision_log)
            log_decision(sim, vm, bursts, retreats);
    }
    if (decision_log)
        log_usage(sim);
    sim->tick++;
}

void sim_run(Sim *sim, guint ticks)
{
    for (guint k = 0; k < ticks; k++)
        sim_step(sim);
}

static const char *rotate(char *text)
{
    static char *ring[8];
    static guint next;
    g_free(ring[next]);
    ring[next] = text;
    const char *out = ring[next];
    next = (next + 1) % G_N_ELEMENTS(ring);
    return out;
}

const char *sim_vcpus(const SimVm *vm)
{
    return rotate(vm->vm.st.vcpus ? sa_cpuset_format(vm->vm.st.vcpus) : g_strdup("(none)"));
}

const char *sim_emulator(const SimVm *vm)
{
    return rotate(vm->vm.st.emulator ? sa_cpuset_format(vm->vm.st.emulator) : g_strdup("(none)"));
}

double sim_vm_run(const Sim *sim, const SimVm *vm)
{
    double total = 0;
    for (guint v = 0; v < vm->n_vcpus; v++)
        total += vm->samples[v].run_ns / (sim->interval_ms * 1e6);
    return total;
}

double sim_vm_wait(const Sim *sim, const SimVm *vm)
{
    double total = 0;
    for (guint v = 0; v < vm->n_vcpus; v++)
        total += vm->samples[v].delay_ns / (sim->interval_ms * 1e6);
    return total;
}

double sim_vm_run_on(const Sim *sim, const SimVm *vm, const char *cpulist)
{
    g_autoptr(SaCpuSet) set = sa_cpuset_parse(cpulist, NULL);
    g_assert_nonnull(set);
    double total = 0;
    for (guint v = 0; v < vm->n_vcpus; v++)
        if (vm->samples[v].last_cpu >= 0 && sa_cpuset_has(set, (guint)vm->samples[v].last_cpu))
            total += vm->samples[v].run_ns / (sim->interval_ms * 1e6);
    return total;
}
