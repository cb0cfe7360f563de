/* softaffd — Prometheus metrics: the text exposition format and its atomic textfile. */
#define G_LOG_DOMAIN "softaff-metrics"

#include "sa-metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actuator.h"
#include "sa-config-defs.h"
#include "sa-error.h"

typedef enum {
    GAUGE,
    COUNTER,
} MetricType;

/* A label of one sample: name="value". */
typedef struct {
    const char *name;
    const char *value;
} Label;

void sa_metrics_append_label_value(GString *out, const char *value)
{
    g_autofree char *valid = g_utf8_make_valid(value ? value : "", -1);
    for (const char *p = valid; *p; p++) {
        switch (*p) {
        case '\\':
            g_string_append(out, "\\\\");
            break;
        case '"':
            g_string_append(out, "\\\"");
            break;
        case '\n':
            g_string_append(out, "\\n");
            break;
        default:
            g_string_append_c(out, *p);
        }
    }
}

static void family(GString *out, const char *name, MetricType type, const char *help)
{
    /* help is a constant of this file: no backslash or newline to escape. */
    g_string_append_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
                           type == COUNTER ? "counter" : "gauge");
}

static void sample_start(GString *out, const char *name, const Label *labels, guint n_labels)
{
    g_string_append(out, name);
    if (n_labels == 0)
        return;
    g_string_append_c(out, '{');
    for (guint i = 0; i < n_labels; i++) {
        if (i > 0)
            g_string_append_c(out, ',');
        g_string_append_printf(out, "%s=\"", labels[i].name);
        sa_metrics_append_label_value(out, labels[i].value);
        g_string_append_c(out, '"');
    }
    g_string_append_c(out, '}');
}

static void sample_double(GString *out, const char *name, const Label *labels, guint n_labels,
                          double value)
{
    sample_start(out, name, labels, n_labels);
    g_string_append_c(out, ' ');
    if (isnan(value)) {
        g_string_append(out, "NaN");
    } else if (isinf(value)) {
        g_string_append(out, value > 0 ? "+Inf" : "-Inf");
    } else {
        /* The shortest of %.15g and %.17g that reads back as the same double. */
        char buf[G_ASCII_DTOSTR_BUF_SIZE];
        g_ascii_formatd(buf, sizeof buf, "%.15g", value);
        if (g_ascii_strtod(buf, NULL) != value)
            g_ascii_formatd(buf, sizeof buf, "%.17g", value);
        g_string_append(out, buf);
    }
    g_string_append_c(out, '\n');
}

static void sample_uint(GString *out, const char *name, const Label *labels, guint n_labels,
                        guint64 value)
{
    sample_start(out, name, labels, n_labels);
    g_string_append_printf(out, " %" G_GUINT64_FORMAT "\n", value);
}

static bool vm_has_home(const SaVm *vm)
{
    return vm->status == SA_VM_MANAGED && vm->pvm.st.placed && vm->pvm.st.home >= 0;
}

static void format_daemon(GString *out, const SaCore *d, const GPtrArray *vms)
{
    const Label version[] = {{"version", SA_VERSION}};
    family(out, "softaff_build_info", GAUGE, "softaffd version, always 1.");
    sample_uint(out, "softaff_build_info", version, G_N_ELEMENTS(version), 1);

    family(out, "softaff_start_time_seconds", GAUGE, "When softaffd started, in Unix time.");
    sample_double(out, "softaff_start_time_seconds", NULL, 0,
                  (double)d->started_us / G_USEC_PER_SEC);

    family(out, "softaff_ticks_total", COUNTER, "Ticks (sample, decide, apply) run.");
    sample_uint(out, "softaff_ticks_total", NULL, 0, d->ticks);

    family(out, "softaff_event_ticks_total", COUNTER,
           "Extra ticks run at once because owners waited on a watched CPU (BPF sensing).");
    sample_uint(out, "softaff_event_ticks_total", NULL, 0, d->event_ticks);

    SaFastStats fast;
    sa_actuator_fast_stats(d, &fast);
    family(out, "softaff_fast_narrowings_total", COUNTER,
           "vCPU threads narrowed at once (sched_setaffinity) ahead of their backend pin.");
    sample_uint(out, "softaff_fast_narrowings_total", NULL, 0, fast.narrowed);
    family(out, "softaff_fast_narrowing_failures_total", COUNTER,
           "Narrowings at once that failed (the backend pin still applied the set).");
    sample_uint(out, "softaff_fast_narrowing_failures_total", NULL, 0, fast.failed);

    family(out, "softaff_sensing_bpf", GAUGE,
           "1 when waits are sensed by the BPF program, 0 when by /proc on the tick alone.");
    sample_uint(out, "softaff_sensing_bpf", NULL, 0, d->sense != NULL);
    family(out, "softaff_utilization_bpf", GAUGE,
           "1 when CPU utilization comes from the BPF program's idle time, 0 when from "
           "/proc/stat (no program, or its idle time disagreed with /proc/stat).");
    sample_uint(out, "softaff_utilization_bpf", NULL, 0,
                strcmp(sa_core_utilization_source(d), "bpf") == 0);

    family(out, "softaff_actuation_sched_ext", GAUGE,
           "1 when the sched_ext scheduler places the managed vCPUs ([actuation]), 0 when "
           "softaffd re-pins.");
    sample_uint(out, "softaff_actuation_sched_ext", NULL, 0, sa_core_sched_active(d));
    family(out, "softaff_sched_ext_threads", GAUGE,
           "vCPU threads the sched_ext scheduler places now.");
    sample_uint(out, "softaff_sched_ext_threads", NULL, 0, d->sched ? d->sched_threads : 0);
    family(out, "softaff_sched_ext_ejections_total", COUNTER,
           "Times the kernel ejected the sched_ext scheduler (softaffd re-pins since).");
    sample_uint(out, "softaff_sched_ext_ejections_total", NULL, 0, d->sched_ejections);

    family(out, "softaff_tick_cpu_seconds", GAUGE, "CPU time the last tick took.");
    sample_double(out, "softaff_tick_cpu_seconds", NULL, 0, d->last_tick_cpu_ms / 1000.0);

    static const SaVmStatus statuses[] = {SA_VM_MANAGED, SA_VM_UNMANAGED, SA_VM_INVALID};
    family(out, "softaff_vms", GAUGE,
           "VMs softaffd knows, by status (invalid: bad softaff metadata, runs unmanaged).");
    for (guint s = 0; s < G_N_ELEMENTS(statuses); s++) {
        guint64 n = 0;
        for (guint i = 0; i < vms->len; i++) {
            const SaVm *vm = g_ptr_array_index(vms, i);
            n += vm->status == statuses[s];
        }
        const Label status[] = {{"status", sa_vm_status_to_string(statuses[s])}};
        sample_uint(out, "softaff_vms", status, G_N_ELEMENTS(status), n);
    }
}

static void format_partitions(GString *out, const SaCore *d)
{
    if (!d->topo || !d->topo->partitions || d->topo->partitions->len == 0)
        return;
    const GPtrArray *parts = d->topo->partitions;
    g_auto(GStrv) ids = g_new0(char *, parts->len + 1);
    for (guint i = 0; i < parts->len; i++) {
        const SaPartition *p = g_ptr_array_index(parts, i);
        ids[i] = g_strdup_printf("%u", p->id);
    }

    family(out, "softaff_partition_cpus", GAUGE, "Online CPUs of the partition.");
    for (guint i = 0; i < parts->len; i++) {
        const SaPartition *p = g_ptr_array_index(parts, i);
        const Label l[] = {{"partition", ids[i]}};
        sample_uint(out, "softaff_partition_cpus", l, G_N_ELEMENTS(l),
                    p->cpus ? sa_cpuset_count(p->cpus) : 0);
    }

    if (d->usage && d->load) {
        static const char *const kinds[] = {"owners", "visitors", "unmanaged"};
        family(out, "softaff_partition_busy_cpus", GAUGE,
               "Busy CPUs of the partition averaged over about the last 2 s (each tick weighed by "
               "its length), by load: owners (vCPUs of VMs homed there), visitors (vCPUs of VMs "
               "homed elsewhere), unmanaged (the rest).");
        for (guint i = 0; i < parts->len; i++) {
            const SaPartitionLoad *u = &d->load[i];
            const double avg[] = {u->owners, u->visitors, u->unmanaged};
            for (guint k = 0; k < G_N_ELEMENTS(kinds); k++) {
                const Label l[] = {{"partition", ids[i]}, {"load", kinds[k]}};
                sample_double(out, "softaff_partition_busy_cpus", l, G_N_ELEMENTS(l), avg[k]);
            }
        }
        family(out, "softaff_partition_busy_seconds_total", COUNTER,
               "CPU time the partition was busy since softaffd started (or its partitions "
               "changed), by load as softaff_partition_busy_cpus.");
        for (guint i = 0; i < parts->len; i++) {
            const SaPartitionLoad *u = &d->load[i];
            const double total[] = {u->owners_s, u->visitors_s, u->unmanaged_s};
            for (guint k = 0; k < G_N_ELEMENTS(kinds); k++) {
                const Label l[] = {{"partition", ids[i]}, {"load", kinds[k]}};
                sample_double(out, "softaff_partition_busy_seconds_total", l, G_N_ELEMENTS(l),
                              total[k]);
            }
        }

        family(out, "softaff_partition_home_vcpus", GAUGE,
               "vCPUs of the VMs whose home is the partition.");
        for (guint i = 0; i < parts->len; i++) {
            const Label l[] = {{"partition", ids[i]}};
            sample_uint(out, "softaff_partition_home_vcpus", l, G_N_ELEMENTS(l),
                        d->usage[i].owner_vcpus);
        }
    }
}

/* The headroom model ([fleet], docs/fleet.md; names agreed with the Nova weigher). */
static void format_fleet(GString *out, const SaCore *d)
{
    if (!d->topo || !d->headroom || !d->cfg || !d->usage || d->topo->partitions->len == 0)
        return;
    const SaConfig *cfg = d->cfg;
    guint np = d->topo->partitions->len;
    gint64 now_ms = sa_core_fleet_now_ms();
    g_autofree SaHeadroomPartition *parts = sa_core_fleet_partitions(d, now_ms);
    double coverage = 1.0;

    family(out, "softaff_headroom_cpus", GAUGE,
           "CPUs of the partition, less the burst margin, less its owners' demand at the quantile "
           "over the window (may be negative).");
    for (guint i = 0; i < np; i++) {
        g_autofree char *id = g_strdup_printf("%u", parts[i].id);
        const Label l[] = {{"partition", id}};
        sample_double(out, "softaff_headroom_cpus", l, G_N_ELEMENTS(l), parts[i].headroom);
        coverage = MIN(coverage, parts[i].coverage);
    }
    family(out, "softaff_headroom_quantile", GAUGE,
           "Quantile of the owners' demand the headroom is computed at ([fleet] quantile).");
    sample_double(out, "softaff_headroom_quantile", NULL, 0, cfg->fleet_quantile);
    family(out, "softaff_headroom_window_seconds", GAUGE,
           "Window of the owners' demand the headroom looks back on ([fleet] window_s).");
    sample_uint(out, "softaff_headroom_window_seconds", NULL, 0, cfg->fleet_window_s);
    family(out, "softaff_headroom_window_coverage", GAUGE,
           "Share 0-1 of the window with samples (the least over the partitions).");
    sample_double(out, "softaff_headroom_window_coverage", NULL, 0, coverage);
    family(out, "softaff_partition_memory_available_bytes", GAUGE,
           "Memory a new VM homed on the partition can get: the node's free memory less what the "
           "VMs homed there have not touched yet, shared among the node's partitions by CPUs.");
    for (guint i = 0; i < np; i++) {
        g_autofree char *id = g_strdup_printf("%u", parts[i].id);
        const Label l[] = {{"partition", id}};
        sample_uint(out, "softaff_partition_memory_available_bytes", l, G_N_ELEMENTS(l),
                    parts[i].memory_available);
    }
    if (cfg->fleet_shapes && cfg->fleet_shapes->len > 0) {
        family(out, "softaff_fit_vms", GAUGE,
               "How many more VMs of a [fleet] shapes entry fit on the host.");
        for (guint s = 0; s < cfg->fleet_shapes->len; s++) {
            const SaShape *shape = g_ptr_array_index(cfg->fleet_shapes, s);
            double demand = sa_headroom_expected_demand(d->headroom, now_ms, shape->class_name,
                                                        shape->vcpus, NULL);
            g_autofree char *vcpus = g_strdup_printf("%u", shape->vcpus);
            g_autofree char *mib = g_strdup_printf("%" G_GUINT64_FORMAT, shape->memory_mib);
            const Label l[] = {{"shape", shape->name}, {"vcpus", vcpus}, {"memory_mib", mib}};
            sample_uint(out, "softaff_fit_vms", l, G_N_ELEMENTS(l),
                        sa_headroom_fit_count(parts, np, demand, shape->memory_mib << 20));
        }
    }
    g_auto(GStrv) classes = sa_headroom_classes(d->headroom);
    bool header = false;
    for (char **c = classes; *c; c++) {
        double per;
        if (!sa_headroom_class_per_vcpu(d->headroom, now_ms, *c, &per))
            continue;
        if (!header)
            family(out, "softaff_headroom_demand_per_vcpu", GAUGE,
                   "Mean CPUs per vCPU the VMs of a class (their [rule] or flavor) wanted over "
                   "about the window.");
        header = true;
        const Label l[] = {{"class", *c}};
        sample_double(out, "softaff_headroom_demand_per_vcpu", l, G_N_ELEMENTS(l), per);
    }
}

/* One per-VM family with the labels domain and uuid. */
typedef enum {
    VM_VCPUS,
    VM_HOME,
    VM_BURSTING,
    VM_STALLED,
    VM_BURSTS,
    VM_RETREATS,
    VM_CHANGES,
    VM_RUN,
    VM_RUN_HOME,
    VM_DELAY,
} VmMetric;

static const struct {
    const char *name;
    MetricType type;
    const char *help;
} vm_metrics[] = {
    [VM_VCPUS] = {"softaff_vm_vcpus", GAUGE, "vCPUs of the VM."},
    [VM_HOME] = {"softaff_vm_home_partition", GAUGE, "Id of the VM's home partition."},
    [VM_BURSTING] = {"softaff_vm_bursting", GAUGE,
                     "1 while the VM may run outside its home partition, else 0."},
    [VM_STALLED] = {"softaff_vm_stalled", GAUGE,
                    "1 while a command to the managed VM's hypervisor is past its deadline or its "
                    "QEMU process is stopped (softaffd skips it), else 0."},
    [VM_BURSTS] = {"softaff_vm_bursts_total", COUNTER,
                   "Partitions the VM burst onto (bursts and widenings)."},
    [VM_RETREATS] = {"softaff_vm_retreats_total", COUNTER,
                     "Retreats forced by the owners of visited partitions."},
    [VM_CHANGES] = {"softaff_vm_affinity_changes_total", COUNTER,
                    "Changes of the VM's vCPU affinity."},
    [VM_RUN] = {"softaff_vm_vcpu_run_seconds_total", COUNTER,
                "Time the VM's vCPUs ran while managed."},
    [VM_RUN_HOME] = {"softaff_vm_vcpu_run_home_seconds_total", COUNTER,
                     "Time the VM's vCPUs ran on CPUs of their home partition."},
    [VM_DELAY] = {"softaff_vm_vcpu_run_delay_seconds_total", COUNTER,
                  "Time the VM's vCPUs were runnable but waited for a CPU."},
};

static void format_vm_metric(GString *out, const GPtrArray *vms, VmMetric m)
{
    const char *name = vm_metrics[m].name;
    bool header = false;
    for (guint i = 0; i < vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(vms, i);
        const SaVmPolicyState *st = &vm->pvm.st;
        if ((m == VM_HOME || m == VM_BURSTING) && !vm_has_home(vm))
            continue;
        if (m == VM_STALLED && vm->status != SA_VM_MANAGED)
            continue;
        if (!header) {
            family(out, name, vm_metrics[m].type, vm_metrics[m].help);
            header = true;
        }
        const Label l[] = {{"domain", vm->name}, {"uuid", vm->key}};
        const guint n = G_N_ELEMENTS(l);
        switch (m) {
        case VM_VCPUS:
            sample_uint(out, name, l, n, vm->facts->n_vcpus);
            break;
        case VM_HOME:
            sample_uint(out, name, l, n, (guint64)st->home);
            break;
        case VM_BURSTING:
            sample_uint(out, name, l, n, st->state == SA_STATE_BURST);
            break;
        case VM_STALLED:
            sample_uint(out, name, l, n, sa_vm_is_stalled(vm));
            break;
        case VM_BURSTS:
            sample_uint(out, name, l, n, vm->stats.bursts);
            break;
        case VM_RETREATS:
            sample_uint(out, name, l, n, vm->stats.retreats);
            break;
        case VM_CHANGES:
            sample_uint(out, name, l, n, vm->stats.changes);
            break;
        case VM_RUN:
            sample_double(out, name, l, n, (double)vm->stats.run_ns_total / 1e9);
            break;
        case VM_RUN_HOME:
            sample_double(out, name, l, n, (double)vm->stats.run_ns_home / 1e9);
            break;
        case VM_DELAY:
            sample_double(out, name, l, n, (double)vm->stats.delay_ns_total / 1e9);
            break;
        }
    }
}

/* The guest memory families, from the mover's copies. */
typedef enum {
    MEM_RATIO,
    MEM_RESIDENT,
    MEM_MOVED,
    MEM_PENDING,
} MemMetric;

static const struct {
    const char *name;
    MetricType type;
    const char *help;
} mem_metrics[] = {
    [MEM_RATIO] = {"softaff_vm_memory_home_ratio", GAUGE,
                   "Share of the VM's resident guest memory on its home partition's NUMA node, at "
                   "the last reading (every 30 s and after a move)."},
    [MEM_RESIDENT] = {"softaff_vm_memory_resident_bytes", GAUGE,
                      "Resident guest memory of the VM at the last reading."},
    [MEM_MOVED] = {"softaff_vm_memory_move_bytes_total", COUNTER,
                   "Guest memory softaffd moved to the VM's home node."},
    [MEM_PENDING] = {"softaff_vm_memory_move_pending_bytes", GAUGE,
                     "Guest memory the move under way has still to move (0: no move)."},
};

static void format_memory_metric(GString *out, const SaCore *d, const GPtrArray *vms, MemMetric k)
{
    const char *name = mem_metrics[k].name;
    bool header = false;
    for (guint i = 0; i < vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(vms, i);
        SaMemoryStatus m;
        if (vm->status != SA_VM_MANAGED || !sa_mover_status(d->mover, vm->key, &m) || m.node < 0 ||
            ((k == MEM_RATIO || k == MEM_RESIDENT) && m.measured_wall_us == 0))
            continue;
        if (!header) {
            family(out, name, mem_metrics[k].type, mem_metrics[k].help);
            header = true;
        }
        const Label l[] = {{"domain", vm->name}, {"uuid", vm->key}};
        if (k == MEM_RATIO)
            sample_double(out, name, l, G_N_ELEMENTS(l),
                          m.resident_bytes ? (double)m.home_bytes / m.resident_bytes : 1.0);
        else if (k == MEM_RESIDENT)
            sample_uint(out, name, l, G_N_ELEMENTS(l), m.resident_bytes);
        else if (k == MEM_MOVED)
            sample_uint(out, name, l, G_N_ELEMENTS(l), m.moved_bytes_total);
        else
            sample_uint(out, name, l, G_N_ELEMENTS(l),
                        m.moving ? m.move_total_bytes - MIN(m.move_done_bytes, m.move_total_bytes)
                                 : 0);
    }
}

static void format_vms(GString *out, const GPtrArray *vms)
{
    if (vms->len == 0)
        return;
    family(out, "softaff_vm_info", GAUGE,
           "A VM softaffd knows, always 1; status managed|unmanaged|invalid, mode from its "
           "metadata or rule (soft|strict|off), rule the [rule NAME] that applies (no label "
           "when none).");
    for (guint i = 0; i < vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(vms, i);
        /* rule last, left out when there is none (an empty label is no label to Prometheus). */
        const Label l[] = {{"domain", vm->name},
                           {"uuid", vm->key},
                           {"status", sa_vm_status_to_string(vm->status)},
                           {"mode", sa_mode_to_string(vm->settings.mode)},
                           {"rule", vm->rule}};
        sample_uint(out, "softaff_vm_info", l, G_N_ELEMENTS(l) - (vm->rule ? 0 : 1), 1);
    }

    format_vm_metric(out, vms, VM_VCPUS);
    format_vm_metric(out, vms, VM_HOME);
    format_vm_metric(out, vms, VM_BURSTING);
    format_vm_metric(out, vms, VM_STALLED);

    family(out, "softaff_vm_state_seconds_total", COUNTER,
           "Wall time the managed VM spent at home and bursting.");
    for (guint i = 0; i < vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(vms, i);
        const Label home[] = {{"domain", vm->name}, {"uuid", vm->key}, {"state", "home"}};
        const Label burst[] = {{"domain", vm->name}, {"uuid", vm->key}, {"state", "burst"}};
        sample_double(out, "softaff_vm_state_seconds_total", home, G_N_ELEMENTS(home),
                      vm->stats.seconds_home);
        sample_double(out, "softaff_vm_state_seconds_total", burst, G_N_ELEMENTS(burst),
                      vm->stats.seconds_burst);
    }

    for (VmMetric m = VM_BURSTS; m <= VM_DELAY; m++)
        format_vm_metric(out, vms, m);
}

/* The scheduler's counters of the VMs it ran (sched_ext mode), lifetime sums kept by
 * scheduler.c; a VM shows once the scheduler had its threads. */
typedef enum {
    SCHED_WAIT,
    SCHED_VISITS,
    SCHED_PREEMPTS,
    SCHED_PREEMPTED,
} SchedMetric;

static const struct {
    const char *name;
    const char *help;
} sched_metrics[] = {
    [SCHED_WAIT] = {"softaff_vm_sched_ext_wait_seconds_total",
                    "Time the VM's vCPUs were runnable in the sched_ext scheduler but waited for a "
                    "CPU."},
    [SCHED_VISITS] = {"softaff_vm_sched_ext_visits_total",
                      "Arrivals of the VM's vCPUs on a partition other than their home, in the "
                      "sched_ext scheduler."},
    [SCHED_PREEMPTS] = {"softaff_vm_sched_ext_preempts_total",
                        "Visitors the VM's vCPUs kicked off CPUs of their home partition, in the "
                        "sched_ext scheduler."},
    [SCHED_PREEMPTED] = {"softaff_vm_sched_ext_preempted_total",
                         "Times the VM's vCPUs were kicked off a visited partition by its owners, "
                         "in the sched_ext scheduler."},
};

static void format_sched_vms(GString *out, const SaCore *d, const GPtrArray *vms)
{
    const char *run = "softaff_vm_sched_ext_run_seconds_total";
    guint n_parts = d->topo ? MIN(d->topo->partitions->len, SA_SCHED_PARTS) : 0; /* none yet */
    bool header = false;

    for (guint i = 0; i < vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(vms, i);
        if (!vm->sched.id)
            continue;
        if (!header) {
            family(out, run, COUNTER,
                   "Time the VM's vCPUs ran in the sched_ext scheduler, per partition.");
            header = true;
        }
        for (guint p = 0; p < n_parts; p++) {
            const SaPartition *part = g_ptr_array_index(d->topo->partitions, p);
            g_autofree char *id = g_strdup_printf("%u", part->id);
            const Label l[] = {{"domain", vm->name}, {"uuid", vm->key}, {"partition", id}};
            sample_double(out, run, l, G_N_ELEMENTS(l), (double)vm->sched.total_run_ns[p] / 1e9);
        }
    }
    for (SchedMetric m = SCHED_WAIT; header && m <= SCHED_PREEMPTED; m++) {
        family(out, sched_metrics[m].name, COUNTER, sched_metrics[m].help);
        for (guint i = 0; i < vms->len; i++) {
            const SaVm *vm = g_ptr_array_index(vms, i);
            const SaVmSched *s = &vm->sched;
            const Label l[] = {{"domain", vm->name}, {"uuid", vm->key}};
            if (!s->id)
                continue;
            if (m == SCHED_WAIT)
                sample_double(out, sched_metrics[m].name, l, G_N_ELEMENTS(l),
                              (double)s->total_wait_ns / 1e9);
            else
                sample_uint(out, sched_metrics[m].name, l, G_N_ELEMENTS(l),
                            m == SCHED_VISITS     ? s->total_visits
                            : m == SCHED_PREEMPTS ? s->total_preempts
                                                  : s->total_preempted);
        }
    }
}

char *sa_metrics_format(const SaCore *d)
{
    g_return_val_if_fail(d != NULL, NULL);
    GString *out = g_string_sized_new(4096);
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(d);
    format_daemon(out, d, vms);
    format_partitions(out, d);
    format_fleet(out, d);
    format_vms(out, vms);
    for (MemMetric k = MEM_RATIO; k <= MEM_PENDING; k++)
        format_memory_metric(out, d, vms, k);
    format_sched_vms(out, d, vms);
    return g_string_free(out, FALSE);
}

static bool write_all(int fd, const char *buf, gsize len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        buf += n;
        len -= (gsize)n;
    }
    return true;
}

static void set_io_error(GError **error, const char *path, const char *what, int errsv)
{
    g_set_error(error, SA_ERROR, SA_ERROR_IO, "metrics textfile %s: %s: %s", path, what,
                g_strerror(errsv));
}

bool sa_metrics_write(const SaCore *d, const char *path, GError **error)
{
    g_return_val_if_fail(path != NULL && *path != '\0', false);
    g_autofree char *text = sa_metrics_format(d);
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    g_autofree char *hidden = g_strdup_printf(".%s.XXXXXX", base);
    g_autofree char *tmp = g_build_filename(dir, hidden, NULL);

    int fd = g_mkstemp_full(tmp, O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
        int errsv = errno;
        g_autofree char *what = g_strdup_printf("cannot create a temporary file in %s", dir);
        set_io_error(error, path, what, errsv);
        return false;
    }
    const char *failed = NULL;
    int errsv = 0;
    /* The umask may have narrowed the mode: readers (node_exporter) need 0644. */
    if (fchmod(fd, 0644) < 0)
        failed = "cannot set the mode of the temporary file";
    else if (!write_all(fd, text, strlen(text)))
        failed = "cannot write the temporary file";
    else if (fsync(fd) < 0)
        failed = "cannot sync the temporary file";
    if (failed)
        errsv = errno;
    if (close(fd) < 0 && !failed) {
        errsv = errno;
        failed = "cannot close the temporary file";
    }
    if (!failed && rename(tmp, path) < 0) {
        errsv = errno;
        failed = "cannot rename the temporary file over it";
    }
    if (failed) {
        unlink(tmp);
        set_io_error(error, path, failed, errsv);
        return false;
    }
    /* Make the rename itself durable; the new file is in place either way. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        if (fsync(dfd) < 0)
            g_debug("metrics textfile %s: cannot sync %s: %s", path, dir, g_strerror(errno));
        close(dfd);
    }
    return true;
}
