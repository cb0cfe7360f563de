/* softaffd — the VMs the backends reported: the table, their facts and their status. */
#define G_LOG_DOMAIN "softaffd"

#include "judge.h"

#include <string.h>

const char *sa_vm_status_to_string(SaVmStatus status)
{
    switch (status) {
    case SA_VM_MANAGED:
        return "managed";
    case SA_VM_UNMANAGED:
        return "unmanaged";
    case SA_VM_INVALID:
        return "invalid";
    }
    return "unknown";
}

void sa_vm_reset_policy(SaVm *vm)
{
    sa_policy_vm_clear(&vm->pvm);
    sa_policy_vm_init(&vm->pvm);
    vm->pvm.name = vm->name;
}

static SaVm *vm_new(SaCore *core, const SaVmFacts *facts, const SaBackendOps *ops)
{
    SaVm *vm = g_new0(SaVm, 1);
    vm->key = g_strdup(facts->key);
    vm->name = g_strdup(facts->name);
    vm->ops = ops;
    vm->status = SA_VM_UNMANAGED;
    vm->act.written_assigned = -1;
    vm->memory_node = -1;
    vm->decisions = g_queue_new();
    sa_metadata_init(&vm->settings);
    sa_vm_sampling_init(&vm->sampling);
    sa_vm_sched_init(&vm->sched);
    sa_policy_vm_init(&vm->pvm);
    vm->pvm.name = vm->name;
    vm->lane = sa_actuator_lane(core, vm->key, vm->name);
    return vm;
}

static void vm_free(SaVm *vm)
{
    sa_policy_vm_clear(&vm->pvm);
    sa_vm_sampling_clear(&vm->sampling);
    sa_vm_sched_clear(&vm->sched);
    sa_vm_facts_free(vm->facts);
    if (vm->vcpu_allowed)
        g_ptr_array_unref(vm->vcpu_allowed);
    if (vm->own_sets)
        g_ptr_array_unref(vm->own_sets);
    sa_cpuset_free(vm->allowed);
    sa_cpuset_free(vm->emulator_allowed);
    if (vm->iothread_allowed)
        g_ptr_array_unref(vm->iothread_allowed);
    g_queue_free_full(vm->decisions, sa_decision_free);
    g_free(vm->status_reason);
    g_free(vm->rule);
    g_free(vm->act.last_error);
    g_free(vm->key);
    g_free(vm->name);
    g_free(vm);
}

SaVm *sa_core_lookup(const SaCore *core, const char *key)
{
    return g_hash_table_lookup(core->vms, key);
}

static gint compare_vm_names(gconstpointer a, gconstpointer b)
{
    const SaVm *va = *(SaVm *const *)a;
    const SaVm *vb = *(SaVm *const *)b;
    int c = g_strcmp0(va->name, vb->name);
    return c ? c : g_strcmp0(va->key, vb->key);
}

GPtrArray *sa_core_sorted_vms(const SaCore *core)
{
    /* Kept until a VM is added, removed or renamed: the tick, status and metrics all use it. */
    SaCore *c = (SaCore *)core;
    if (!c->sorted) {
        c->sorted = g_ptr_array_sized_new(core->vms ? g_hash_table_size(core->vms) : 0);
        GHashTableIter it;
        gpointer value;
        if (core->vms) {
            g_hash_table_iter_init(&it, core->vms);
            while (g_hash_table_iter_next(&it, NULL, &value))
                g_ptr_array_add(c->sorted, value);
        }
        g_ptr_array_sort(c->sorted, compare_vm_names);
    }
    return g_ptr_array_ref(c->sorted);
}

/* The VMs changed (added, removed, renamed): sort them again when next asked. */
static void order_changed(SaCore *core)
{
    g_clear_pointer(&core->sorted, g_ptr_array_unref);
}

SaVm *sa_core_find(const SaCore *core, const char *key_or_name)
{
    SaVm *vm = sa_core_lookup(core, key_or_name);
    if (vm)
        return vm;
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, core->vms);
    while (g_hash_table_iter_next(&it, NULL, &value))
        if (g_strcmp0(((SaVm *)value)->name, key_or_name) == 0)
            return value;
    return NULL;
}

GPtrArray *sa_core_list_keys(SaCore *core, const SaBackendOps *ops)
{
    GPtrArray *keys = g_ptr_array_new_with_free_func(g_free);
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, core->vms);
    while (g_hash_table_iter_next(&it, NULL, &value))
        if (((SaVm *)value)->ops == ops)
            g_ptr_array_add(keys, g_strdup(((SaVm *)value)->key));
    return keys;
}

static void log_status(const SaVm *vm)
{
    const char *reason = vm->status_reason;
    if (vm->status == SA_VM_INVALID)
        g_warning("%s: invalid softaff settings, the VM runs unmanaged: %s", vm->name, reason);
    else if (vm->status == SA_VM_UNMANAGED)
        g_info("%s: unmanaged: %s", vm->name, reason);
    else
        g_info("%s: managed%s%s", vm->name, reason ? ": " : "", reason ? reason : "");
}

void sa_vm_set_status(SaCore *core, SaVm *vm, SaVmStatus status, const char *reason)
{
    bool same = vm->status == status && g_strcmp0(vm->status_reason, reason) == 0;
    if (vm->status == SA_VM_MANAGED && status != SA_VM_MANAGED) {
        sa_core_sched_forget(core, vm);
        sa_actuator_restore(core, vm);
        sa_vm_reset_policy(vm);
        /* Its memory stays where it is; a move under way stops. */
        sa_mover_forget(core->mover, vm->key);
        vm->memory_node = -1;
    }
    if (status == SA_VM_MANAGED && vm->status != SA_VM_MANAGED)
        vm->managed_since_us = g_get_real_time();
    vm->status = status;
    g_free(vm->status_reason);
    vm->status_reason = g_strdup(reason);
    if (!same)
        log_status(vm);
}

void sa_core_remove(SaCore *core, SaVm *vm)
{
    sa_core_sched_forget(core, vm);
    sa_actuator_detach(core, vm);
    sa_mover_forget(core->mover, vm->key);
    g_hash_table_remove(core->vms, vm->key);
    order_changed(core);
    vm_free(vm);
}

bool sa_vm_is_stalled(const SaVm *vm)
{
    return vm->sampling.stopped || sa_lane_is_stalled(vm->lane);
}

/* Another QEMU process than the one known (both known). */
static bool new_process(const SaVm *vm, const SaVmFacts *facts)
{
    return vm->facts && vm->facts->pid > 0 && facts->pid > 0 && vm->facts->pid != facts->pid;
}

/* New threads behind the same process (vCPU hotplug, threads found): sample them again. */
static bool process_changed(const SaVm *vm, const SaVmFacts *facts)
{
    const SaVmFacts *old = vm->facts;
    if (!old || old->pid != facts->pid || old->n_vcpus != facts->n_vcpus)
        return true;
    if (!old->vcpu_tids != !facts->vcpu_tids)
        return true;
    return old->vcpu_tids && (old->vcpu_tids->len != facts->vcpu_tids->len ||
                              memcmp(old->vcpu_tids->data, facts->vcpu_tids->data,
                                     sizeof(pid_t) * facts->vcpu_tids->len) != 0);
}

static bool set_same(const SaCpuSet *a, const SaCpuSet *b)
{
    return (!a && !b) || (a && b && sa_cpuset_equal(a, b));
}

/* Whether two arrays of own sets (per vCPU, per I/O thread; NULL = none) are the same. */
static bool sets_same(const GPtrArray *a, const GPtrArray *b)
{
    guint na = a ? a->len : 0, nb = b ? b->len : 0;
    if (na != nb)
        return false;
    for (guint i = 0; i < na; i++)
        if (!set_same(g_ptr_array_index(a, i), g_ptr_array_index(b, i)))
            return false;
    return true;
}

static void apply_judgement(SaCore *core, SaVm *vm, SaJudgement *j, bool user_pinned)
{
    /* A thread's own set changed (the user pinned it live) while softaff holds the VM's
     * threads: they are pinned again to the current decision within the new own sets. The
     * policy decides again only when the allowed set changes; a new emulator or I/O thread pin
     * alone (or a vCPU's within the same allowed set) would otherwise wait for the next change
     * of decision, and a pin sent with the old own sets just before the user's event (a
     * retreat in the same tick) left the emulator outside its new own set. A user's pin that
     * leaves the own sets as they were (a vCPU given every CPU, which its own set was) still
     * moved the thread off softaff's set: pinned again too (soak seed 1775393844, where an idle
     * VM stayed on both CPUs instead of its home). */
    bool own_changed = user_pinned || !set_same(vm->emulator_allowed, j->emulator_allowed) ||
                       !sets_same(vm->iothread_allowed, j->iothread_allowed) ||
                       !sets_same(vm->vcpu_allowed, j->vcpu_allowed);
    vm->settings = j->settings;
    g_free(vm->rule);
    vm->rule = g_steal_pointer(&j->rule);
    vm->act.written_assigned = vm->settings.assigned;
    sa_cpuset_free(vm->allowed);
    vm->allowed = g_steal_pointer(&j->allowed);
    if (vm->vcpu_allowed)
        g_ptr_array_unref(vm->vcpu_allowed);
    vm->vcpu_allowed = g_steal_pointer(&j->vcpu_allowed);
    if (vm->own_sets)
        g_ptr_array_unref(vm->own_sets);
    vm->own_sets = g_steal_pointer(&j->own_sets);
    sa_cpuset_free(vm->emulator_allowed);
    vm->emulator_allowed = g_steal_pointer(&j->emulator_allowed);
    if (vm->iothread_allowed)
        g_ptr_array_unref(vm->iothread_allowed);
    vm->iothread_allowed = g_steal_pointer(&j->iothread_allowed);
    sa_vm_set_status(core, vm, j->status, j->reason);
    if (own_changed && vm->status == SA_VM_MANAGED && vm->act.touched && vm->pvm.st.vcpus)
        vm->act.decided++; /* the next tick pins again (act_on_decision) */
}

void sa_core_report(SaCore *core, const SaBackendOps *ops, gpointer handle, SaVmFacts *facts)
{
    g_autoptr(SaVmFacts) owned = facts;
    SaVm *vm = sa_core_lookup(core, facts->key);
    if (vm && new_process(vm, facts)) {
        /* A restarted VM is another VM: nothing of the old process's state applies. */
        g_info("%s: a new QEMU process (%d, was %d): starting over", facts->name, (int)facts->pid,
               (int)vm->facts->pid);
        sa_core_remove(core, vm);
        vm = NULL;
    }
    if (!vm) {
        vm = vm_new(core, facts, ops);
        g_hash_table_insert(core->vms, vm->key, vm);
        order_changed(core);
        g_info("%s: found (%s, %u vCPUs)", facts->name, ops->name, facts->n_vcpus);
    }
    sa_lane_set_handle(vm->lane, ops, handle);
    if (g_strcmp0(vm->name, facts->name) != 0) {
        g_free(vm->name);
        vm->name = g_strdup(facts->name);
        vm->pvm.name = vm->name;
        order_changed(core);
    }
    if (process_changed(vm, facts))
        vm->sampling.stale = true;
    bool user_pinned = vm->facts && vm->facts->user_pins != facts->user_pins;
    sa_vm_facts_free(vm->facts);
    vm->facts = g_steal_pointer(&owned);
    /* An earlier daemon's pins (SIGKILLed, then restarted): given back like this one's. */
    if (vm->facts->narrowed)
        vm->act.touched = true;

    SaJudgement j;
    sa_judge_vm(vm->facts, core->cfg, core->topo->online,
                ops->settings_name ? ops->settings_name : "softaff settings", &j);
    apply_judgement(core, vm, &j, user_pinned);
    sa_judgement_clear(&j);
}

void sa_core_discover(SaCore *core, const SaBackendOps *ops, gpointer handle, const char *key,
                      const char *name)
{
    sa_actuator_discover(core, ops, handle, key, name);
}

void sa_core_forget(SaCore *core, const char *key, const char *why)
{
    SaVm *vm = sa_core_lookup(core, key);
    if (!vm) {
        sa_actuator_forget_key(core, key);
        return;
    }
    g_info("%s: %s; forgotten", vm->name, why);
    sa_core_remove(core, vm);
}

const SaConfig *sa_core_config(const SaCore *core)
{
    return core->cfg;
}

const SaTopology *sa_core_topology(const SaCore *core)
{
    return core->topo;
}

bool sa_core_is_stopping(const SaCore *core)
{
    return core->stopping;
}
