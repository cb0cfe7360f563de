/* softaffd — the core's life: creation, reload, freeing. */
#define G_LOG_DOMAIN "softaffd"

#include "core-private.h"

SaCore *sa_core_new(SaConfig *cfg, SaTopology *topo, bool dry_run, GError **error)
{
    g_autoptr(SaStatSampler) stat = sa_stat_sampler_new(error);
    if (!stat)
        return NULL;
    SaCore *core = g_new0(SaCore, 1);
    core->cfg = cfg;
    core->topo = topo;
    core->dry_run = dry_run;
    core->stat = g_steal_pointer(&stat);
    core->loads = g_array_new(FALSE, TRUE, sizeof(SaCpuLoad));
    core->vms = g_hash_table_new(g_str_hash, g_str_equal);
    core->usage = g_new0(SaPartitionUsage, topo->partitions->len);
    core->tick_vms = g_ptr_array_new();
    core->tick_pvms = g_ptr_array_new();
    core->started_us = g_get_real_time();
    sa_actuator_init(core);
    core->mover = sa_mover_new(&sa_mover_host_ops, NULL, cfg->memory_rate_mib_s, true);
    core->rebalance = sa_rebalance_state_new();
    /* Prime the CPU sampler so the first tick has an interval. */
    sa_stat_sampler_sample(core->stat, core->loads, NULL);
    core->last_sample_us = g_get_monotonic_time();
    return core;
}

void sa_core_free(SaCore *core)
{
    if (!core)
        return;
    core->stopped = NULL;
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);
    for (guint i = 0; i < vms->len; i++)
        sa_core_remove(core, g_ptr_array_index(vms, i));
    sa_actuator_clear(core);
    sa_mover_free(core->mover);
    sa_rebalance_state_free(core->rebalance);
    g_clear_pointer(&core->sorted, g_ptr_array_unref);
    g_ptr_array_unref(core->tick_vms);
    g_ptr_array_unref(core->tick_pvms);
    g_hash_table_unref(core->vms);
    sa_stat_sampler_free(core->stat);
    g_array_unref(core->loads);
    g_free(core->cpu_busy);
    g_free(core->usage);
    sa_topology_free(core->topo);
    sa_config_free(core->cfg);
    g_free(core);
}

void sa_core_reload(SaCore *core, SaConfig *cfg, SaTopology *topo)
{
    sa_config_free(core->cfg);
    sa_topology_free(core->topo);
    core->cfg = cfg;
    core->topo = topo;
    sa_mover_set_rate(core->mover, cfg->memory_rate_mib_s);
    g_free(core->usage);
    core->usage = g_new0(SaPartitionUsage, topo->partitions->len);
    /* What the rebalance watched was about the old partitions. */
    sa_rebalance_state_free(core->rebalance);
    core->rebalance = sa_rebalance_state_new();
    /* Partition ids may mean something else now: decide every home again. Counters go on. */
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);
    for (guint i = 0; i < vms->len; i++)
        sa_vm_reset_policy(g_ptr_array_index(vms, i));
}
