/* softaffd — the tick: sample the host and the managed VMs, run the policy, apply changes. */
#define G_LOG_DOMAIN "softaffd"

#include "core.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sa-error.h"
#include "sa-metrics.h"

/* A transient error is logged when it differs from the last one, else at most this often. */
#define ERROR_REPEAT_US (60 * G_USEC_PER_SEC)

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

SaVm *sa_vm_new(const char *key, const char *name, const SaBackendOps *ops)
{
    SaVm *vm = g_new0(SaVm, 1);
    vm->key = g_strdup(key);
    vm->name = g_strdup(name);
    vm->ops = ops;
    vm->status = SA_VM_UNMANAGED;
    vm->vcpu_threads = g_ptr_array_new_with_free_func((GDestroyNotify)sa_thread_sampler_free);
    vm->prev_samples = g_array_new(FALSE, TRUE, sizeof(SaThreadSample));
    vm->deltas = g_array_new(FALSE, TRUE, sizeof(SaVcpuSample));
    vm->written_assigned = -1;
    vm->decisions = g_queue_new();
    sa_metadata_init(&vm->metadata);
    sa_policy_vm_init(&vm->pvm);
    vm->pvm.name = vm->name;
    return vm;
}

void sa_vm_free(SaVm *vm)
{
    if (!vm)
        return;
    if (vm->backend_free && vm->backend_data)
        vm->backend_free(vm->backend_data);
    sa_policy_vm_clear(&vm->pvm);
    g_ptr_array_unref(vm->vcpu_threads);
    g_array_unref(vm->prev_samples);
    g_array_unref(vm->deltas);
    if (vm->vcpu_allowed)
        g_ptr_array_unref(vm->vcpu_allowed);
    sa_cpuset_free(vm->allowed);
    sa_cpuset_free(vm->emulator_allowed);
    g_queue_free_full(vm->decisions, sa_decision_free);
    g_free(vm->status_reason);
    g_free(vm->last_error);
    g_free(vm->key);
    g_free(vm->name);
    g_free(vm);
}

static void vm_restore(SaDaemon *d, SaVm *vm)
{
    if (!vm->touched || d->dry_run)
        return;
    g_autoptr(GError) error = NULL;
    if (!vm->ops->restore(d, vm, &error)) {
        if (g_error_matches(error, SA_ERROR, SA_ERROR_GONE))
            g_info("%s: gone before its pinning could be restored", vm->name);
        else
            g_warning("%s: could not restore its pinning: %s", vm->name, error->message);
        return;
    }
    g_autofree char *allowed = vm->allowed ? sa_cpuset_format(vm->allowed) : g_strdup("?");
    g_info("%s: restored: vCPUs back to their allowed set %s", vm->name, allowed);
    vm->touched = false;
}

void sa_vm_set_status(SaDaemon *d, SaVm *vm, SaVmStatus status, const char *reason)
{
    bool same = vm->status == status && g_strcmp0(vm->status_reason, reason) == 0;
    if (vm->status == SA_VM_MANAGED && status != SA_VM_MANAGED) {
        vm_restore(d, vm);
        /* Start from scratch when it is managed again. */
        sa_policy_vm_clear(&vm->pvm);
        sa_policy_vm_init(&vm->pvm);
        vm->pvm.name = vm->name;
        vm->apply_pending = false;
    }
    if (status == SA_VM_MANAGED && vm->status != SA_VM_MANAGED)
        vm->managed_since_us = g_get_real_time();
    vm->status = status;
    g_free(vm->status_reason);
    vm->status_reason = g_strdup(reason);
    if (same)
        return;
    if (status == SA_VM_INVALID)
        g_warning("%s: invalid softaff metadata, the VM runs unmanaged: %s", vm->name, reason);
    else if (status == SA_VM_UNMANAGED)
        g_info("%s: unmanaged: %s", vm->name, reason);
    else
        g_info("%s: managed%s%s", vm->name, reason ? ": " : "", reason ? reason : "");
}

static bool parse_vcpu_comm(const char *comm, guint *vcpu)
{
    /* "CPU 3/KVM", "CPU 3/TCG" */
    if (!g_str_has_prefix(comm, "CPU "))
        return false;
    const char *p = comm + 4;
    char *end = NULL;
    errno = 0;
    guint64 v = g_ascii_strtoull(p, &end, 10);
    if (errno || end == p || *end != '/' || v > SA_CPUSET_MAX)
        return false;
    *vcpu = (guint)v;
    return true;
}

bool sa_vm_scan_threads(SaVm *vm, GError **error)
{
    g_autoptr(GArray) tids = sa_process_list_threads(vm->pid, error);
    if (!tids)
        return false;
    g_ptr_array_set_size(vm->vcpu_threads, 0);
    g_ptr_array_set_size(vm->vcpu_threads, vm->n_vcpus);
    guint found = 0;
    for (guint i = 0; i < tids->len; i++) {
        pid_t tid = g_array_index(tids, pid_t, i);
        g_autoptr(GError) local = NULL;
        g_autoptr(SaThreadSampler) t = sa_thread_sampler_new(vm->pid, tid, &local);
        if (!t)
            continue; /* the thread exited meanwhile */
        SaThreadSample s;
        if (!sa_thread_sampler_read(t, &s, &local))
            continue;
        guint vcpu;
        if (!parse_vcpu_comm(s.comm, &vcpu) || vcpu >= vm->n_vcpus)
            continue;
        if (g_ptr_array_index(vm->vcpu_threads, vcpu) == NULL) {
            g_ptr_array_index(vm->vcpu_threads, vcpu) = g_steal_pointer(&t);
            found++;
        }
    }
    g_array_set_size(vm->prev_samples, vm->n_vcpus);
    g_array_set_size(vm->deltas, vm->n_vcpus);
    vm->have_prev = false;
    vm->threads_stale = false;
    if (found == 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT,
                    "no vCPU threads (named 'CPU N/KVM' or 'CPU N/TCG') in process %d", vm->pid);
        return false;
    }
    return true;
}

SaDaemon *sa_daemon_new(SaConfig *cfg, SaTopology *topo, bool dry_run, GError **error)
{
    g_autoptr(SaStatSampler) stat = sa_stat_sampler_new(error);
    if (!stat)
        return NULL;
    SaDaemon *d = g_new0(SaDaemon, 1);
    d->cfg = cfg;
    d->topo = topo;
    d->dry_run = dry_run;
    d->stat = g_steal_pointer(&stat);
    d->loads = g_array_new(FALSE, TRUE, sizeof(SaCpuLoad));
    d->vms = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)sa_vm_free);
    d->usage = g_new0(SaPartitionUsage, topo->partitions->len);
    d->started_us = g_get_real_time();
    /* Prime the CPU sampler so the first tick has an interval. */
    sa_stat_sampler_sample(d->stat, d->loads, NULL);
    d->last_sample_us = g_get_monotonic_time();
    return d;
}

void sa_daemon_free(SaDaemon *d)
{
    if (!d)
        return;
    g_hash_table_unref(d->vms);
    sa_stat_sampler_free(d->stat);
    g_array_unref(d->loads);
    g_free(d->cpu_busy);
    g_free(d->usage);
    sa_topology_free(d->topo);
    sa_config_free(d->cfg);
    g_free(d);
}

void sa_daemon_reload(SaDaemon *d, SaConfig *cfg, SaTopology *topo)
{
    sa_config_free(d->cfg);
    sa_topology_free(d->topo);
    d->cfg = cfg;
    d->topo = topo;
    g_free(d->usage);
    d->usage = g_new0(SaPartitionUsage, topo->partitions->len);
    /* Partition ids may mean something else now: decide every home again. */
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, d->vms);
    while (g_hash_table_iter_next(&it, NULL, &value)) {
        SaVm *vm = value;
        sa_policy_vm_clear(&vm->pvm);
        sa_policy_vm_init(&vm->pvm);
        vm->pvm.name = vm->name;
    }
}

SaVm *sa_daemon_lookup(SaDaemon *d, const char *key)
{
    return g_hash_table_lookup(d->vms, key);
}

SaVm *sa_daemon_add(SaDaemon *d, SaVm *vm)
{
    SaVm *old = g_hash_table_lookup(d->vms, vm->key);
    if (old) {
        sa_vm_free(vm);
        return old;
    }
    g_hash_table_insert(d->vms, vm->key, vm);
    return vm;
}

void sa_daemon_remove(SaDaemon *d, const char *key, bool restore)
{
    SaVm *vm = g_hash_table_lookup(d->vms, key);
    if (!vm)
        return;
    if (restore && vm->status == SA_VM_MANAGED)
        vm_restore(d, vm);
    g_hash_table_remove(d->vms, key);
}

static void sample_host(SaDaemon *d)
{
    g_autoptr(GError) error = NULL;
    if (!sa_stat_sampler_sample(d->stat, d->loads, &error)) {
        g_warning("cannot sample CPU utilization: %s", error->message);
        g_array_set_size(d->loads, 0);
    }
    int max_cpu = -1;
    for (guint i = 0; i < d->loads->len; i++)
        max_cpu = MAX(max_cpu, g_array_index(d->loads, SaCpuLoad, i).cpu);
    if ((guint)(max_cpu + 1) != d->n_cpu_busy) {
        g_free(d->cpu_busy);
        d->n_cpu_busy = (guint)(max_cpu + 1);
        d->cpu_busy = g_new0(double, MAX(d->n_cpu_busy, 1));
    }
    memset(d->cpu_busy, 0, sizeof(double) * d->n_cpu_busy);
    for (guint i = 0; i < d->loads->len; i++) {
        const SaCpuLoad *l = &g_array_index(d->loads, SaCpuLoad, i);
        d->cpu_busy[l->cpu] = l->busy;
    }
}

/* Reads every vCPU thread of vm; fills vm->deltas. Returns false when there is no interval yet. */
/* A VM whose vCPUs may run only at home needs no last CPU per vCPU: the policy counts a vCPU of
 * unknown CPU at home, which is where it ran. Skipping /proc/.../stat halves the reads. */
static bool needs_last_cpu(const SaDaemon *d, const SaVm *vm)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    if (d->dry_run || !st->placed || !st->vcpus || st->home < 0 || !vm->touched ||
        vm->apply_pending)
        return true;
    int idx = sa_topology_find_partition(d->topo, (guint)st->home);
    if (idx < 0)
        return true;
    const SaPartition *home = g_ptr_array_index(d->topo->partitions, idx);
    return !sa_cpuset_is_subset(st->vcpus, home->cpus);
}

static bool sample_vm(const SaDaemon *d, SaVm *vm)
{
    if (vm->threads_stale || vm->vcpu_threads->len != vm->n_vcpus) {
        if (!vm->ops->threads_by_name)
            return false; /* the backend refreshes them */
        g_autoptr(GError) error = NULL;
        if (!sa_vm_scan_threads(vm, &error)) {
            g_debug("%s: %s", vm->name, error->message);
            vm->threads_stale = true;
            return false;
        }
    }
    bool have_prev = vm->have_prev;
    bool full = needs_last_cpu(d, vm);
    for (guint i = 0; i < vm->n_vcpus; i++) {
        SaThreadSampler *t = g_ptr_array_index(vm->vcpu_threads, i);
        SaThreadSample *prev = &g_array_index(vm->prev_samples, SaThreadSample, i);
        SaVcpuSample *delta = &g_array_index(vm->deltas, SaVcpuSample, i);
        SaThreadSample cur = {.last_cpu = -1};
        g_autoptr(GError) error = NULL;
        bool ok = t && (full ? sa_thread_sampler_read(t, &cur, &error)
                             : sa_thread_sampler_read_times(t, &cur.run_ns, &cur.delay_ns, &error));
        if (!ok) {
            /* A vCPU thread went away (unplug, VM stopping): rescan next tick. */
            vm->threads_stale = true;
            delta->run_ns = delta->delay_ns = 0;
            delta->last_cpu = -1;
            continue;
        }
        delta->run_ns = cur.run_ns >= prev->run_ns ? cur.run_ns - prev->run_ns : 0;
        delta->delay_ns = cur.delay_ns >= prev->delay_ns ? cur.delay_ns - prev->delay_ns : 0;
        delta->last_cpu = cur.last_cpu;
        *prev = cur;
    }
    vm->have_prev = true;
    return have_prev;
}

static void log_transient(SaVm *vm, const char *what, const GError *error)
{
    gint64 now = g_get_monotonic_time();
    if (g_strcmp0(vm->last_error, error->message) != 0 ||
        now - vm->last_error_logged_us > ERROR_REPEAT_US) {
        g_warning("%s: %s failed, retrying next tick: %s", vm->name, what, error->message);
        g_free(vm->last_error);
        vm->last_error = g_strdup(error->message);
        vm->last_error_logged_us = now;
    }
}

/* Applies the policy's decision for vm. Returns false when the VM is gone. */
static bool apply_vm(SaDaemon *d, SaVm *vm)
{
    SaVmPolicyState *st = &vm->pvm.st;
    if (vm->pvm.changed) {
        g_autofree char *vcpus = sa_cpuset_format(st->vcpus);
        g_info("%s: %s%s -> vCPUs %s (home %d, %s)", vm->name, d->dry_run ? "[dry-run] " : "",
               vm->pvm.reason, vcpus, st->home, sa_vm_state_to_string(st->state));
        record_decision(vm, vcpus);
        vm->apply_pending = true;
    }
    if (d->dry_run) {
        vm->apply_pending = false;
        return true;
    }
    if (vm->apply_pending) {
        g_autoptr(GError) error = NULL;
        if (!vm->ops->apply(d, vm, st->vcpus, st->emulator, &error)) {
            if (g_error_matches(error, SA_ERROR, SA_ERROR_GONE)) {
                g_info("%s: gone (%s); forgetting it", vm->name, error->message);
                return false;
            }
            log_transient(vm, "pinning", error);
            return true;
        }
        vm->touched = true;
        vm->apply_pending = false;
        g_clear_pointer(&vm->last_error, g_free);
    }
    /* The home chosen for preferred="auto" is kept in the live metadata. */
    if (vm->pvm.preferred < 0 && st->home >= 0 && st->home != vm->written_assigned) {
        g_autoptr(GError) error = NULL;
        if (vm->ops->write_assigned(d, vm, st->home, &error)) {
            vm->written_assigned = st->home;
            vm->metadata.assigned = st->home;
        } else if (g_error_matches(error, SA_ERROR, SA_ERROR_GONE)) {
            return false;
        } else {
            log_transient(vm, "writing assigned= metadata", error);
        }
    }
    return true;
}

/* Time at home and away, and how much of the vCPUs' run time was on the home partition. */
static void account_vm(SaDaemon *d, SaVm *vm, guint64 interval_ns)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    double seconds = interval_ns / 1e9;
    if (st->state == SA_STATE_BURST)
        vm->seconds_burst += seconds;
    else
        vm->seconds_home += seconds;
    vm->run_delay_now = 0;
    if (!vm->pvm.vcpu_samples)
        return;
    int home = st->home >= 0 ? sa_topology_find_partition(d->topo, (guint)st->home) : -1;
    guint64 delay = 0;
    for (guint i = 0; i < vm->n_vcpus; i++) {
        const SaVcpuSample *s = &vm->pvm.vcpu_samples[i];
        vm->run_ns_total += s->run_ns;
        delay += s->delay_ns;
        /* No last CPU: it was not read because the vCPU may only run at home. */
        if (home >= 0 &&
            (s->last_cpu < 0 || sa_topology_partition_of_cpu(d->topo, (guint)s->last_cpu) == home))
            vm->run_ns_home += s->run_ns;
    }
    vm->delay_ns_total += delay;
    vm->run_delay_now = interval_ns ? (double)delay / (double)interval_ns : 0;
}

static gint compare_vm_names(gconstpointer a, gconstpointer b)
{
    const SaVm *va = *(SaVm *const *)a;
    const SaVm *vb = *(SaVm *const *)b;
    int c = g_strcmp0(va->name, vb->name);
    return c ? c : g_strcmp0(va->key, vb->key);
}

GPtrArray *sa_daemon_sorted_vms(const SaDaemon *d)
{
    GPtrArray *vms = g_ptr_array_new();
    GHashTableIter it;
    gpointer value;
    if (d->vms) {
        g_hash_table_iter_init(&it, d->vms);
        while (g_hash_table_iter_next(&it, NULL, &value))
            g_ptr_array_add(vms, value);
    }
    g_ptr_array_sort(vms, compare_vm_names);
    return vms;
}

void sa_daemon_tick(SaDaemon *d)
{
    struct timespec ts0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts0);
    gint64 now = g_get_monotonic_time();
    guint64 interval_ns = (guint64)MAX(now - d->last_sample_us, 1) * 1000;
    d->last_sample_us = now;
    d->ticks++;
    sample_host(d);

    /* A stable order keeps the policy deterministic (homes chosen in one tick). */
    g_autoptr(GPtrArray) all = sa_daemon_sorted_vms(d);
    g_autoptr(GPtrArray) managed = g_ptr_array_new();
    g_autoptr(GPtrArray) pvms = g_ptr_array_new();
    for (guint k = 0; k < all->len; k++) {
        SaVm *vm = g_ptr_array_index(all, k);
        if (vm->status != SA_VM_MANAGED)
            continue;
        bool have_interval = sample_vm(d, vm);
        vm->pvm.name = vm->name;
        vm->pvm.mode = vm->metadata.mode;
        vm->pvm.preferred = vm->metadata.preferred;
        vm->pvm.assigned = vm->metadata.assigned;
        vm->pvm.softness = vm->metadata.softness;
        vm->pvm.allowed = vm->allowed;
        vm->pvm.n_vcpus = vm->n_vcpus;
        vm->pvm.memory_bytes = vm->memory_bytes;
        vm->pvm.vcpu_samples = have_interval ? &g_array_index(vm->deltas, SaVcpuSample, 0) : NULL;
        g_ptr_array_add(managed, vm);
    }
    for (guint i = 0; i < managed->len; i++)
        g_ptr_array_add(pvms, &((SaVm *)g_ptr_array_index(managed, i))->pvm);

    SaPolicyHost host = {
        .topo = d->topo,
        .cpu_busy = d->cpu_busy,
        .n_cpu_busy = d->n_cpu_busy,
        .interval_ns = interval_ns,
        .now_ms = now / 1000,
    };
    sa_policy_tick(&d->cfg->policy, &host, (SaPolicyVm *const *)pvms->pdata, pvms->len, d->usage);

    for (guint i = 0; i < managed->len; i++)
        account_vm(d, g_ptr_array_index(managed, i), interval_ns);
    for (guint i = 0; i < managed->len; i++) {
        SaVm *vm = g_ptr_array_index(managed, i);
        if (!apply_vm(d, vm))
            g_hash_table_remove(d->vms, vm->key);
    }
    if (d->cfg->metrics_textfile && !d->dry_run && d->ticks % d->cfg->metrics_every == 0) {
        g_autoptr(GError) error = NULL;
        if (!sa_metrics_write(d, d->cfg->metrics_textfile, &error)) {
            if (!d->metrics_failing)
                g_warning("metrics: %s", error->message);
            d->metrics_failing = true;
        } else {
            d->metrics_failing = false;
        }
    }
    struct timespec ts1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts1);
    d->last_tick_cpu_ms = (ts1.tv_sec - ts0.tv_sec) * 1e3 + (ts1.tv_nsec - ts0.tv_nsec) / 1e6;
}

void sa_daemon_restore_all(SaDaemon *d)
{
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, d->vms);
    while (g_hash_table_iter_next(&it, NULL, &value))
        vm_restore(d, value);
}
