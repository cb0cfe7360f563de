/* softaffd — the core's life: creation, reload, freeing; and event sensing: the BPF sensor
 * (host/sa-sense.h) watches the partitions whose door is open to visitors and, when their
 * owners wait or start running, runs a tick at once instead of at the next interval. */
#define G_LOG_DOMAIN "softaffd"

#include <glib-unix.h>

#include <unistd.h>

#include "core-private.h"
#include "sa-error.h"

#define SENSE_DRAIN_MAX 64

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
    core->load = g_new0(SaPartitionLoad, topo->partitions->len);
    core->unmanaged_avg = g_new0(double, topo->partitions->len);
    core->tick_vms = g_ptr_array_new();
    core->tick_pvms = g_ptr_array_new();
    core->started_us = g_get_real_time();
    sa_actuator_init(core);
    core->mover = sa_mover_new(&sa_mover_host_ops, NULL, cfg->memory_rate_mib_s, true);
    core->rebalance = sa_rebalance_state_new();
    sa_core_fleet_init(core);
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
    sa_core_stop_sensing(core);
    sa_core_stop_actuation(core);
    g_free(core->actuation_reason);
    g_free(core->sched_exit);
    if (core->sched_read)
        g_array_unref(core->sched_read);
    g_free(core->sensing_reason);
    g_free(core->utilization_fallback);
    sa_idle_check_free(core->idle_check);
    sa_sense_times_free(core->sense_times);
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);
    for (guint i = 0; i < vms->len; i++)
        sa_core_remove(core, g_ptr_array_index(vms, i));
    sa_actuator_clear(core);
    sa_mover_free(core->mover);
    sa_rebalance_state_free(core->rebalance);
    sa_core_fleet_clear(core);
    g_clear_pointer(&core->sorted, g_ptr_array_unref);
    g_ptr_array_unref(core->tick_vms);
    g_ptr_array_unref(core->tick_pvms);
    g_hash_table_unref(core->vms);
    sa_stat_sampler_free(core->stat);
    g_array_unref(core->loads);
    g_free(core->cpu_busy);
    g_free(core->idle_prev);
    g_free(core->visitor_prev);
    g_free(core->cpu_visitors);
    g_clear_pointer(&core->owner_tids, g_hash_table_unref);
    g_free(core->idle_known);
    g_free(core->usage);
    g_free(core->load);
    g_free(core->unmanaged_avg);
    sa_topology_free(core->topo);
    sa_config_free(core->cfg);
    g_free(core);
}

/* A reload that changes the mode loads or unloads the sensor; mode=bpf that cannot load keeps
 * the daemon running on /proc (a running daemon is not stopped by a reload). */
static void reload_sensing(SaCore *core, SaSensingMode old_mode)
{
    g_autoptr(GError) error = NULL;

    if (!core->sensing_started)
        return;
    if (core->cfg->sensing_mode != old_mode) {
        if (!sa_core_start_sensing(core, &error))
            g_warning("reload: %s; sensing on the tick alone", error->message);
    } else if (core->sense) {
        sa_sense_set_threshold(core->sense, core->cfg->sensing_threshold_us,
                               core->cfg->sensing_window_us);
    }
}

void sa_core_reload(SaCore *core, SaConfig *cfg, SaTopology *topo)
{
    SaSensingMode old_mode = core->cfg->sensing_mode;
    SaActuationMode old_actuation = core->cfg->actuation_mode;
    guint old_window_s = core->cfg->fleet_window_s;

    sa_config_free(core->cfg);
    sa_topology_free(core->topo);
    core->cfg = cfg;
    core->topo = topo;
    sa_mover_set_rate(core->mover, cfg->memory_rate_mib_s);
    g_free(core->usage);
    core->usage = g_new0(SaPartitionUsage, topo->partitions->len);
    g_free(core->load);
    core->load = g_new0(SaPartitionLoad, topo->partitions->len);
    g_free(core->unmanaged_avg);
    core->unmanaged_avg = g_new0(double, topo->partitions->len);
    /* What the rebalance watched was about the old partitions. */
    sa_rebalance_state_free(core->rebalance);
    core->rebalance = sa_rebalance_state_new();
    /* Partition ids may mean something else now: decide every home again. Counters go on. */
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);
    for (guint i = 0; i < vms->len; i++)
        sa_vm_reset_policy(g_ptr_array_index(vms, i));
    reload_sensing(core, old_mode);
    sa_core_reload_actuation(core, old_actuation);
    /* The headroom history is about the host's load, not the configuration: it stays. */
    sa_core_fleet_reload(core, old_window_s);
}

const char *sa_core_sensing_mode(const SaCore *core)
{
    return core->sense ? "bpf" : "proc";
}

const char *sa_core_utilization_source(const SaCore *core)
{
    return core->sense && !core->utilization_fallback ? "bpf" : "proc";
}

static gboolean event_tick_cb(gpointer data);

/* An extra tick. One that acts resets the gap, one that changes nothing doubles it; except the
 * tick answering the owners' first sign, when most of its interval is from before that sign:
 * it saw little of their load, so one more tick follows at the shortest gap. */
static void event_tick(SaCore *core)
{
    gint64 before = core->last_sample_us, sign = core->owners_event_us;
    bool acted = false, followup = core->event_followup;

    core->event_followup = false;
    core->event_ticks++;
    sa_core_tick(core);
    for (guint i = 0; i < core->tick_pvms->len; i++)
        acted |= ((const SaPolicyVm *)g_ptr_array_index(core->tick_pvms, i))->changed;
    if (!acted && followup && (core->last_sample_us - sign) * 2 < core->last_sample_us - before) {
        core->event_gap_us = SA_EVENT_TICK_MIN_US;
        core->event_tick_timer = g_timeout_add(SA_EVENT_TICK_MIN_US / 1000, event_tick_cb, core);
        return;
    }
    core->event_gap_us =
        acted ? SA_EVENT_TICK_MIN_US
              : MIN(MAX(core->event_gap_us, SA_EVENT_TICK_MIN_US) * 2, SA_EVENT_TICK_MAX_GAP_US);
}

static gboolean event_tick_cb(gpointer data)
{
    SaCore *core = data;

    core->event_tick_timer = 0;
    event_tick(core);
    return G_SOURCE_REMOVE;
}

/* An event: tick now, or once the event gap (SA_EVENT_TICK_MIN_US, more after event ticks
 * that changed nothing) has passed since the last tick (the regular timer keeps its schedule;
 * a tick in between answers the event). */
static void schedule_event_tick(SaCore *core)
{
    gint64 since = g_get_monotonic_time() - core->last_sample_us;
    gint64 gap = MAX(core->event_gap_us, SA_EVENT_TICK_MIN_US);

    if (core->event_tick_timer || core->stopping)
        return;
    if (since >= gap) {
        event_tick(core);
        return;
    }
    core->event_tick_timer =
        g_timeout_add((guint)((gap - since + 999) / 1000), event_tick_cb, core);
}

/* The owners' sign: a vCPU of a VM homed on a watched CPU waited there, or started running
 * (the sensor only reports that of vCPUs at home); host threads that only wait do not count. */
static bool owners_sign(const SaCore *core, const SaSenseEvent *ev)
{
    return ev->ran || (core->owner_tids &&
                       g_hash_table_contains(core->owner_tids, GINT_TO_POINTER((int)ev->tid)));
}

static gboolean on_sense_events(gint fd, GIOCondition condition, gpointer data)
{
    SaCore *core = data;
    SaSenseEvent ev[SENSE_DRAIN_MAX];
    guint n = sa_sense_drain(core->sense, ev, G_N_ELEMENTS(ev));
    gint64 now = g_get_monotonic_time();
    bool sign = false;

    if (n == 0)
        return G_SOURCE_CONTINUE;
    core->sense_events += n;
    for (guint i = 0; i < n; i++)
        sign |= owners_sign(core, &ev[i]);
    core->owners_reads += sign;
    /* The first sign in a tick interval ticks at the shortest gap (and once more after it);
     * signs that come on like a clock within one interval double the gap like any event. */
    if (sign && now - core->owners_event_us >= (gint64)core->cfg->interval_ms * 1000) {
        core->owners_event_us = now;
        core->event_gap_us = SA_EVENT_TICK_MIN_US;
        core->event_followup = true;
    }
    g_debug("sensing: CPU %d: thread %d %s %.2f ms in the window%s", ev[0].cpu, (int)ev[0].tid,
            ev[0].ran ? "ran" : "waited", ev[0].wait_ns / 1e6, n > 1 ? " (and more)" : "");
    schedule_event_tick(core);
    return G_SOURCE_CONTINUE;
}

void sa_core_stop_sensing(SaCore *core)
{
    if (core->sense_source)
        g_source_remove(core->sense_source);
    if (core->event_tick_timer)
        g_source_remove(core->event_tick_timer);
    core->sense_source = core->event_tick_timer = 0;
    g_clear_pointer(&core->sense, sa_sense_free);
}

/* The sensor per the mode, or NULL with why in *reason. While the sched_ext scheduler runs,
 * mode=auto leaves it out: the scheduler places every vCPU at each wakeup, so an event would
 * only wake softaffd to find nothing to re-pin, and the sensor's programs run at every switch
 * of the host (the owner's throughput under the scheduler, docs/benchmarks.md section 14).
 * mode=bpf keeps it, as asked. */
static SaSense *load_sensor(const SaCore *core, char **reason)
{
    g_autoptr(GError) error = NULL;
    const SaConfig *cfg = core->cfg;
    SaSense *s = NULL;

    if (cfg->sensing_mode == SA_SENSING_PROC) {
        *reason = g_strdup("[sensing] mode=proc");
        return NULL;
    }
    if (cfg->sensing_mode == SA_SENSING_AUTO && core->sched) {
        *reason = g_strdup("the sched_ext scheduler places the vCPUs at each wakeup: no BPF "
                           "events while it runs ([sensing] mode=auto)");
        return NULL;
    }
    s = sa_sense_new(&error);
    if (!s) {
        *reason = g_strdup(error->message);
        return NULL;
    }
    *reason = g_strdup_printf("BPF program loaded ([sensing] mode=%s)",
                              sa_sensing_mode_to_string(cfg->sensing_mode));
    sa_sense_set_threshold(s, cfg->sensing_threshold_us, cfg->sensing_window_us);
    return s;
}

bool sa_core_start_sensing(SaCore *core, GError **error)
{
    const SaConfig *cfg = core->cfg;

    sa_core_stop_sensing(core);
    g_clear_pointer(&core->sensing_reason, g_free);
    /* A new sensor is checked against /proc/stat afresh (sample.c). */
    g_clear_pointer(&core->utilization_fallback, g_free);
    if (core->idle_check)
        sa_idle_check_reset(core->idle_check);
    core->sensing_started = true;
    core->sense = load_sensor(core, &core->sensing_reason);
    core->sense_yielded = !core->sense && cfg->sensing_mode == SA_SENSING_AUTO && core->sched;
    core->sense_gen++;
    if (!core->sense && cfg->sensing_mode == SA_SENSING_BPF) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED, "[sensing] mode=bpf: %s",
                    core->sensing_reason);
        return false;
    }
    if (core->sense) {
        core->sense_source =
            g_unix_fd_add(sa_sense_fd(core->sense), G_IO_IN, on_sense_events, core);
        g_info("sensing: BPF events (a wait, or a start of running, over %u us in %u us wakes a "
               "tick): %s",
               cfg->sensing_threshold_us, cfg->sensing_window_us, core->sensing_reason);
    } else {
        g_info("sensing: /proc on the tick alone: %s", core->sensing_reason);
    }
    return true;
}

void sa_core_refit_sensing(SaCore *core)
{
    if (!core->sensing_started || core->cfg->sensing_mode != SA_SENSING_AUTO)
        return;
    /* Only where the scheduler's state no longer matches: a sensor that could not load while
     * re-pinning is not tried again at every change. */
    if ((core->sched && core->sense) || (!core->sched && core->sense_yielded))
        sa_core_start_sensing(core, NULL);
}

/* Adds to watch the partitions other than its home that vm is allowed onto; false: none. */
static bool visits(const SaCore *core, const SaVm *vm, SaCpuSet *watch)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    int home = st->home >= 0 ? sa_topology_find_partition(core->topo, (guint)st->home) : -1;
    bool any = false;

    if (!st->vcpus || home < 0)
        return false;
    for (guint i = 0; i < core->topo->partitions->len; i++) {
        const SaPartition *p = g_ptr_array_index(core->topo->partitions, i);

        if ((int)i == home || !sa_cpuset_intersects(st->vcpus, p->cpus))
            continue;
        sa_cpuset_union(watch, p->cpus);
        any = true;
    }
    return any;
}

/* The vCPU threads of the managed VMs whose home has CPUs in watch (owners of a partition open
 * to visitors) into tids. */
static void owners_of(const SaCore *core, const SaCpuSet *watch, GHashTable *tids)
{
    for (guint i = 0; i < core->tick_vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(core->tick_vms, i);
        const SaVmPolicyState *st = &vm->pvm.st;
        int home = st->home >= 0 ? sa_topology_find_partition(core->topo, (guint)st->home) : -1;
        GPtrArray *threads = vm->sampling.threads;
        const SaPartition *p =
            home >= 0 ? g_ptr_array_index(core->topo->partitions, (guint)home) : NULL;

        if (!p || !sa_cpuset_intersects(p->cpus, watch))
            continue;
        for (guint t = 0; threads && t < threads->len; t++) {
            const SaThreadSampler *ts = g_ptr_array_index(threads, t);
            pid_t tid = ts ? sa_thread_sampler_tid(ts) : 0;

            if (tid > 0)
                g_hash_table_add(tids, GINT_TO_POINTER((int)tid));
        }
    }
}

/* Adds to watch the home CPUs of a soft VM that could burst now: a partition it is allowed onto
 * besides home has idle owners (its door clock runs). Its own vCPUs waiting at home are then
 * events, and a spike bursts (or finds its door) within ms of starting, not at the next tick. */
static void could_burst(const SaCore *core, const SaVm *vm, SaCpuSet *watch)
{
    const SaPolicyVm *pvm = &vm->pvm;
    int softness = pvm->softness >= 0 ? pvm->softness : (int)core->cfg->policy.softness;
    int home = pvm->st.home >= 0 ? sa_topology_find_partition(core->topo, (guint)pvm->st.home) : -1;

    if (pvm->mode != SA_MODE_SOFT || softness <= 0 || home < 0 || !pvm->st.idle || !pvm->allowed)
        return;
    for (guint i = 0; i < pvm->st.idle->len; i++) {
        const SaPartitionIdle *e = &g_array_index(pvm->st.idle, SaPartitionIdle, i);
        int p = sa_topology_find_partition(core->topo, e->id);
        const SaPartition *part;

        if (p < 0 || p == home || e->since == G_MININT64)
            continue;
        part = g_ptr_array_index(core->topo->partitions, (guint)p);
        /* Already there: its vCPUs that still wait at home are no news (in a 2-node test host
         * they were ~85 events a second, each interval's first an owners' sign resetting the
         * event gap: ~6 event ticks a second of softaffd's own CPU beside the burst). */
        if (!sa_cpuset_intersects(part->cpus, pvm->allowed) ||
            (pvm->st.vcpus && sa_cpuset_intersects(part->cpus, pvm->st.vcpus)))
            continue;
        part = g_ptr_array_index(core->topo->partitions, (guint)home);
        sa_cpuset_union(watch, part->cpus);
        return;
    }
}

/* Each CPU's partition index (-1 none), sized to the highest CPU + 1 in *n. */
static int *cpu_places(const SaCore *core, guint *n)
{
    guint max = 0;
    int *place;

    for (guint i = 0; i < core->topo->partitions->len; i++) {
        const SaPartition *p = g_ptr_array_index(core->topo->partitions, i);
        int last = sa_cpuset_last(p->cpus);

        if (last >= 0)
            max = MAX(max, (guint)last + 1);
    }
    place = g_new(int, MAX(max, 1));
    for (guint c = 0; c < max; c++)
        place[c] = -1;
    for (guint i = 0; i < core->topo->partitions->len; i++) {
        const SaPartition *p = g_ptr_array_index(core->topo->partitions, i);

        for (int c = sa_cpuset_next(p->cpus, -1); c >= 0; c = sa_cpuset_next(p->cpus, c))
            place[c] = (int)i;
    }
    *n = max;
    return place;
}

void sa_core_sense_plan(const SaCore *core, SaCpuSet *watch, GArray *ignore)
{
    /* softaffd's own waits: the extra ticks they cause are its own load, no owner's. */
    SaSenseIgnore self = {.id = getpid(), .home = -1};
    g_array_append_val(ignore, self);
    for (guint i = 0; i < core->tick_vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(core->tick_vms, i);
        GPtrArray *threads = vm->sampling.threads;
        int home = vm->pvm.st.home >= 0
                       ? sa_topology_find_partition(core->topo, (guint)vm->pvm.st.home)
                       : -1;

        could_burst(core, vm, watch);
        if (!visits(core, vm, watch))
            continue;
        /* The process: its emulator and I/O threads; the vCPU threads in case the id is stale.
         * At home they are owners (another visitor's door may be open onto it). */
        SaSenseIgnore proc = {.id = vm->facts ? vm->facts->pid : 0, .home = home};
        if (proc.id > 0)
            g_array_append_val(ignore, proc);
        for (guint t = 0; threads && t < threads->len; t++) {
            const SaThreadSampler *ts = g_ptr_array_index(threads, t);
            SaSenseIgnore vcpu = {.id = ts ? sa_thread_sampler_tid(ts) : 0, .home = home};

            if (vcpu.id > 0)
                g_array_append_val(ignore, vcpu);
        }
    }
}

void sa_core_sense_update(SaCore *core)
{
    g_autoptr(SaCpuSet) watch = NULL;
    g_autoptr(GArray) ignore = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree int *place = NULL;
    guint n_places = 0;

    if (!core->sense)
        return;
    watch = sa_cpuset_new();
    ignore = g_array_new(FALSE, FALSE, sizeof(SaSenseIgnore));
    sa_core_sense_plan(core, watch, ignore);
    if (!core->owner_tids)
        core->owner_tids = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_hash_table_remove_all(core->owner_tids);
    owners_of(core, watch, core->owner_tids);
    place = cpu_places(core, &n_places);
    if (!sa_sense_watch(core->sense, watch, place, n_places,
                        (const SaSenseIgnore *)(void *)ignore->data, ignore->len, &error))
        g_warning_once("sensing: %s (said once)", error->message);
}
