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

SaCpuSet *sa_facts_default_own(const SaVmFacts *facts, const SaCpuSet *online)
{
    SaCpuSet *own = sa_cpuset_copy(online);
    if (facts->vcpu_cpuset) {
        sa_cpuset_intersect(own, facts->vcpu_cpuset);
        if (sa_cpuset_is_empty(own))
            sa_cpuset_assign(own, facts->vcpu_cpuset);
    }
    return own;
}

SaCpuSet *sa_facts_vcpu_own(const SaVmFacts *facts, guint i, const SaCpuSet *online)
{
    const SaCpuSet *pin = facts->vcpu_pins && i < facts->vcpu_pins->len
                              ? g_ptr_array_index(facts->vcpu_pins, i)
                              : NULL;
    return pin ? sa_cpuset_copy(pin) : sa_facts_default_own(facts, online);
}

SaCpuSet *sa_narrow(const SaCpuSet *policy, const SaCpuSet *own)
{
    SaCpuSet *set = sa_cpuset_copy(own);
    if (policy && sa_cpuset_intersects(policy, own))
        sa_cpuset_intersect(set, policy);
    return set;
}

const SaRule *sa_facts_rule(const SaVmFacts *facts, const SaConfig *cfg)
{
    if (facts->has_settings || facts->settings_error)
        return NULL;
    const SaRuleSubject subject = {
        .name = facts->name,
        .flavor = facts->flavor,
        .title = facts->title,
        .description = facts->description,
    };
    return sa_config_match_rule(cfg, &subject);
}

void sa_rule_settings(const SaRule *rule, SaMetadata *md)
{
    sa_metadata_init(md);
    if (rule->has_mode)
        md->mode = rule->mode;
    if (rule->preferred >= -1)
        md->preferred = rule->preferred;
    if (rule->softness >= 0)
        md->softness = rule->softness;
}

char *sa_facts_unmanaged_reason(const SaVmFacts *facts, const SaConfig *cfg, const SaRule *rule,
                                const SaCpuSet *allowed, const char *settings_name)
{
    if (facts->has_settings && facts->settings.mode == SA_MODE_OFF)
        return g_strdup_printf("its %s says mode=\"off\"", settings_name);
    if (rule && rule->has_mode && rule->mode == SA_MODE_OFF)
        return g_strdup_printf("rule %s says mode=off", rule->name);
    /* An operator's rule is an explicit choice too. */
    if (!facts->has_settings && !rule && cfg->manage == SA_MANAGE_EXPLICIT)
        return g_strdup_printf("no %s and manage=explicit", settings_name);
    /* A rule is about a class of VMs: one the user pinned vCPU by vCPU (Nova's dedicated CPUs)
     * stays theirs unless its own settings say otherwise. */
    if (!facts->has_settings && sa_facts_user_pinned(facts))
        return g_strdup_printf("its vCPUs are pinned by the user (<vcpupin>); add %s to manage it",
                               settings_name);
    if (sa_cpuset_is_empty(allowed))
        return g_strdup("its allowed set has no online CPU");
    if (facts->pid <= 0)
        return g_strdup("its QEMU process was not found");
    return NULL;
}

/* Each vCPU's own set; the vCPUs that share a set share one copy (most VMs: all of them). */
static void vcpu_own_sets(const SaVmFacts *facts, const SaCpuSet *online, SaJudgement *out)
{
    out->vcpu_allowed = g_ptr_array_sized_new(facts->n_vcpus);
    out->own_sets = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    for (guint i = 0; i < facts->n_vcpus; i++) {
        SaCpuSet *own = sa_facts_vcpu_own(facts, i, online);
        SaCpuSet *kept = NULL;
        for (guint k = 0; !kept && k < out->own_sets->len; k++)
            if (sa_cpuset_equal(g_ptr_array_index(out->own_sets, k), own))
                kept = g_ptr_array_index(out->own_sets, k);
        if (kept) {
            sa_cpuset_free(own);
        } else {
            g_ptr_array_add(out->own_sets, own);
            kept = own;
        }
        g_ptr_array_add(out->vcpu_allowed, kept);
    }
}

static GPtrArray *iothread_own_sets(const SaVmFacts *facts, const SaCpuSet *online)
{
    if (!facts->iothread_ids || facts->iothread_ids->len == 0)
        return NULL;
    GPtrArray *sets =
        g_ptr_array_new_full(facts->iothread_ids->len, (GDestroyNotify)sa_cpuset_free);
    for (guint i = 0; i < facts->iothread_ids->len; i++) {
        const SaCpuSet *pin = facts->iothread_pins && i < facts->iothread_pins->len
                                  ? g_ptr_array_index(facts->iothread_pins, i)
                                  : NULL;
        g_ptr_array_add(sets, pin ? sa_cpuset_copy(pin) : sa_facts_default_own(facts, online));
    }
    return sets;
}

/* The VM's allowed set: online ∩ the union of its vCPUs' own sets (own_sets: the distinct
 * ones). */
static SaCpuSet *allowed_of(const SaVmFacts *facts, const GPtrArray *own_sets,
                            const SaCpuSet *online)
{
    SaCpuSet *allowed = sa_cpuset_new();
    for (guint k = 0; k < own_sets->len; k++)
        sa_cpuset_union(allowed, g_ptr_array_index(own_sets, k));
    if (facts->n_vcpus == 0) {
        g_autoptr(SaCpuSet) own = sa_facts_default_own(facts, online);
        sa_cpuset_union(allowed, own);
    }
    sa_cpuset_intersect(allowed, online);
    return allowed;
}

void sa_judge_vm(const SaVmFacts *facts, const SaConfig *cfg, const SaCpuSet *online,
                 const char *settings_name, SaJudgement *out)
{
    *out = (SaJudgement){0};
    sa_metadata_init(&out->settings);
    const SaRule *rule = sa_facts_rule(facts, cfg);
    if (facts->has_settings && !facts->settings_error)
        out->settings = facts->settings;
    else if (rule)
        sa_rule_settings(rule, &out->settings);
    out->rule = rule ? g_strdup(rule->name) : NULL;
    vcpu_own_sets(facts, online, out);
    out->allowed = allowed_of(facts, out->own_sets, online);
    out->emulator_allowed = facts->emulator_pin ? sa_cpuset_copy(facts->emulator_pin)
                                                : sa_facts_default_own(facts, online);
    out->iothread_allowed = iothread_own_sets(facts, online);
    if (facts->settings_error) {
        out->status = SA_VM_INVALID;
        out->reason = g_strdup(facts->settings_error);
        return;
    }
    out->reason = sa_facts_unmanaged_reason(facts, cfg, rule, out->allowed, settings_name);
    if (out->reason) {
        out->status = SA_VM_UNMANAGED;
        return;
    }
    g_autofree char *allowed = sa_cpuset_format(out->allowed);
    g_autofree char *source = facts->has_settings ? g_strdup("")
                              : rule              ? g_strdup_printf(" (rule %s)", rule->name)
                                                  : g_strdup(" (config defaults)");
    out->status = SA_VM_MANAGED;
    out->reason = g_strdup_printf("mode %s, allowed CPUs %s%s",
                                  sa_mode_to_string(out->settings.mode), allowed, source);
}

void sa_judgement_clear(SaJudgement *j)
{
    g_clear_pointer(&j->reason, g_free);
    g_clear_pointer(&j->rule, g_free);
    g_clear_pointer(&j->allowed, sa_cpuset_free);
    g_clear_pointer(&j->vcpu_allowed, g_ptr_array_unref);
    g_clear_pointer(&j->own_sets, g_ptr_array_unref);
    g_clear_pointer(&j->emulator_allowed, sa_cpuset_free);
    g_clear_pointer(&j->iothread_allowed, g_ptr_array_unref);
}
