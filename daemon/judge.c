/* softaffd — whether the core manages a VM (see judge.h). */
#define G_LOG_DOMAIN "softaffd"

#include "judge.h"

bool sa_facts_user_pinned(const SaVmFacts *facts)
{
    for (guint i = 0; facts->vcpu_pins && i < facts->vcpu_pins->len; i++)
        if (g_ptr_array_index(facts->vcpu_pins, i))
            return true;
    return false;
}

SaCpuSet *sa_facts_allowed(const SaVmFacts *facts, const SaCpuSet *online)
{
    SaCpuSet *allowed = sa_cpuset_copy(online);
    if (facts->vcpu_cpuset)
        sa_cpuset_intersect(allowed, facts->vcpu_cpuset);
    if (sa_facts_user_pinned(facts)) {
        g_autoptr(SaCpuSet) pins = sa_cpuset_new();
        for (guint i = 0; i < facts->vcpu_pins->len; i++)
            if (g_ptr_array_index(facts->vcpu_pins, i))
                sa_cpuset_union(pins, g_ptr_array_index(facts->vcpu_pins, i));
        sa_cpuset_intersect(allowed, pins);
    }
    return allowed;
}

char *sa_facts_unmanaged_reason(const SaVmFacts *facts, const SaConfig *cfg,
                                const SaCpuSet *allowed, const char *settings_name)
{
    if (facts->has_settings && facts->settings.mode == SA_MODE_OFF)
        return g_strdup_printf("its %s says mode=\"off\"", settings_name);
    if (!facts->has_settings && cfg->manage == SA_MANAGE_EXPLICIT)
        return g_strdup_printf("no %s and manage=explicit", settings_name);
    if (!facts->has_settings && sa_facts_user_pinned(facts))
        return g_strdup_printf("its vCPUs are pinned by the user (<vcpupin>); add %s to manage it",
                               settings_name);
    if (sa_cpuset_is_empty(allowed))
        return g_strdup("its allowed set has no online CPU");
    if (facts->pid <= 0)
        return g_strdup("its QEMU process was not found");
    return NULL;
}

static GPtrArray *copy_pins(const SaVmFacts *facts)
{
    if (!sa_facts_user_pinned(facts))
        return NULL;
    GPtrArray *pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    g_ptr_array_set_size(pins, facts->n_vcpus);
    for (guint i = 0; i < facts->n_vcpus && i < facts->vcpu_pins->len; i++) {
        const SaCpuSet *p = g_ptr_array_index(facts->vcpu_pins, i);
        g_ptr_array_index(pins, i) = p ? sa_cpuset_copy(p) : NULL;
    }
    return pins;
}

void sa_judge_vm(const SaVmFacts *facts, const SaConfig *cfg, const SaCpuSet *online,
                 const char *settings_name, SaJudgement *out)
{
    *out = (SaJudgement){0};
    sa_metadata_init(&out->settings);
    if (facts->has_settings && !facts->settings_error)
        out->settings = facts->settings;
    out->allowed = sa_facts_allowed(facts, online);
    out->vcpu_allowed = copy_pins(facts);
    /* The emulator keeps its own pin, else the vCPUs' set before the per-vCPU pins. */
    if (facts->emulator_pin) {
        out->emulator_allowed = sa_cpuset_copy(facts->emulator_pin);
    } else {
        out->emulator_allowed = sa_cpuset_copy(online);
        if (facts->vcpu_cpuset)
            sa_cpuset_intersect(out->emulator_allowed, facts->vcpu_cpuset);
    }
    if (facts->settings_error) {
        out->status = SA_VM_INVALID;
        out->reason = g_strdup(facts->settings_error);
        return;
    }
    out->reason = sa_facts_unmanaged_reason(facts, cfg, out->allowed, settings_name);
    if (out->reason) {
        out->status = SA_VM_UNMANAGED;
        return;
    }
    g_autofree char *allowed = sa_cpuset_format(out->allowed);
    out->status = SA_VM_MANAGED;
    out->reason =
        g_strdup_printf("mode %s, allowed CPUs %s%s", sa_mode_to_string(out->settings.mode),
                        allowed, facts->has_settings ? "" : " (config defaults)");
}

void sa_judgement_clear(SaJudgement *j)
{
    g_clear_pointer(&j->reason, g_free);
    g_clear_pointer(&j->allowed, sa_cpuset_free);
    g_clear_pointer(&j->vcpu_allowed, g_ptr_array_unref);
    g_clear_pointer(&j->emulator_allowed, sa_cpuset_free);
}
