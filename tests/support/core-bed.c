/* softaff tests — a bed for the real core (see core-bed.h). */
#include "core-bed.h"

SaCore *bed_core_new(SaConfig *cfg, gboolean mover_thread)
{
    g_autoptr(GError) error = NULL;
    SaTopology *topo = sa_topology_load(SA_LAYOUT_NODE, NULL, &error);
    SaCore *core;

    g_assert_no_error(error);
    core = sa_core_new(cfg, topo, FALSE, &error);
    g_assert_no_error(error);
    if (!mover_thread) {
        sa_mover_free(core->mover);
        core->mover = sa_mover_new(&sa_mover_host_ops, NULL, 256, false);
    }
    return core;
}

SaConfig *bed_config(void)
{
    SaConfig *cfg = sa_config_new_default();

    cfg->policy.dwell_ms = 0;
    cfg->policy.smoothing = 1.0;
    cfg->interval_ms = 3 * BED_STEP_MS;
    return cfg;
}

void bed_init(CoreBed *b, SaConfig *cfg)
{
    rec_log_clear();
    b->host = fake_host_new(NULL, 2, 2);
    b->core = bed_core_new(cfg, FALSE);
    g_assert_cmpuint(b->core->topo->partitions->len, ==, 2);
    b->last_us = g_get_monotonic_time();
}

void bed_clear(CoreBed *b)
{
    for (guint i = 0; i < b->n_vms; i++) {
        rec_vm_set_mode(b->vms[i].rec, REC_OK); /* unblock whatever still waits */
        rec_vm_release(b->vms[i].rec);
    }
    sa_core_settle(b->core, 2000);
    sa_core_free(b->core);
    for (guint i = 0; i < b->n_vms; i++) {
        rec_vm_unref(b->vms[i].rec);
        g_free(b->vms[i].key);
    }
    fake_host_free(b->host, FALSE);
}

BedVm *bed_vm(CoreBed *b, const char *name, pid_t pid, guint n_vcpus, double load)
{
    BedVm *v;

    g_assert_cmpuint(b->n_vms, <, BED_MAX_VMS);
    g_assert_cmpuint(n_vcpus, <=, BED_MAX_VCPUS);
    v = &b->vms[b->n_vms++];
    v->key = g_strdup_printf("key-%s", name);
    v->pid = pid ? pid : 1000 + 100 * (pid_t)b->n_vms;
    v->n_vcpus = n_vcpus;
    bed_vm_set_load(v, load);
    fake_host_add_process(b->host, v->pid, n_vcpus);
    return v;
}

SaVmFacts *bed_facts(const BedVm *v, const char *name, int preferred)
{
    SaVmFacts *f = rec_facts(v->key, name, v->pid, v->n_vcpus);

    if (preferred >= -1) {
        f->has_settings = true;
        f->settings.preferred = preferred;
    }
    return f;
}

void bed_report(CoreBed *b, BedVm *v, SaVmFacts *f)
{
    v->rec = rec_vm_new(v->key, f);
    sa_core_report(b->core, &rec_ops, v->rec, f);
}

void bed_vm_set_load(BedVm *v, double load)
{
    for (guint i = 0; i < v->n_vcpus; i++)
        v->load[i] = load;
}

SaCpuSet *bed_pinned_set(const CoreBed *b, const BedVm *v)
{
    g_autofree char *text = rec_vm_last_vcpus(v->rec);
    SaCpuSet *all;

    if (text[0] != '\0')
        return sa_cpuset_parse(text, NULL);
    all = sa_cpuset_new();
    sa_cpuset_add_range(all, 0, (int)fake_host_n_cpus(b->host) - 1);
    return all;
}

int bed_nth_cpu(const SaCpuSet *set, guint n)
{
    guint k = n % MAX(sa_cpuset_count(set), 1);
    int c = sa_cpuset_next(set, -1);

    for (guint i = 0; i < k && c >= 0; i++)
        c = sa_cpuset_next(set, c);
    return c;
}

/* The default place: vCPU i on the i-th CPU of bed_pinned_set. */
static void place_pinned(CoreBed *b, const BedVm *v, int *cpu)
{
    g_autoptr(SaCpuSet) set = bed_pinned_set(b, v);

    for (guint i = 0; i < v->n_vcpus; i++)
        cpu[i] = bed_nth_cpu(set, i);
}

/* The fake kernel for the time since its last step. */
static void simulate(CoreBed *b)
{
    gint64 now = g_get_monotonic_time();
    double dt = (double)(now - b->last_us) * 1e3;
    guint n_cpus = fake_host_n_cpus(b->host);
    g_autofree double *demand = g_new0(double, n_cpus);
    int cpu[BED_MAX_VMS][BED_MAX_VCPUS];
    BedPlaceFunc place = b->place ? b->place : place_pinned;

    b->last_us = now;
    for (guint i = 0; i < b->n_vms; i++) {
        const BedVm *v = &b->vms[i];

        if (v->gone)
            continue;
        place(b, v, cpu[i]);
        for (guint c = 0; c < v->n_vcpus; c++) {
            g_assert_cmpint(cpu[i][c], >=, 0);
            g_assert_cmpint(cpu[i][c], <, (int)n_cpus);
            demand[cpu[i][c]] += v->load[c];
        }
    }
    for (guint c = 0; c < n_cpus; c++)
        fake_host_account_cpu(b->host, c, demand[c], dt);
    fake_host_write_stat(b->host);
    for (guint i = 0; i < b->n_vms; i++) {
        BedVm *v = &b->vms[i];

        for (guint c = 0; !v->gone && c < v->n_vcpus; c++) {
            double l = demand[cpu[i][c]], run = l > 1 ? v->load[c] / l : v->load[c];

            v->run[c] += run * dt;
            v->delay[c] += (v->load[c] - run) * dt;
            fake_host_set_vcpu(b->host, v->pid, c, v->run[c], v->delay[c], cpu[i][c]);
        }
    }
}

void bed_step(CoreBed *b, guint n)
{
    for (guint i = 0; i < n; i++) {
        g_usleep(BED_STEP_MS * 1000);
        simulate(b);
        sa_core_tick(b->core);
        sa_core_settle(b->core, 50);
    }
}

guint bed_step_until_pinned(CoreBed *b, BedVm *v, const char *want, guint max)
{
    for (guint i = 1; i <= max; i++) {
        bed_step(b, 1);
        g_autofree char *got = rec_vm_last_vcpus(v->rec);
        if (g_str_equal(got, want))
            return i;
    }
    return G_MAXUINT;
}

void bed_stopped_cb(gpointer bed)
{
    ((CoreBed *)bed)->stopped = TRUE;
}
