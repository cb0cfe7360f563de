/* softaffd — the control socket's replies: the status of every VM and partition, one VM. */
#define G_LOG_DOMAIN "softaffd"

#include <json-c/json.h>
#include <time.h>

#include "actuator.h"
#include "core-private.h"
#include "sa-config-defs.h"
#include "sa-error.h"
#include "sa-policy-rules.h"

static json_object *json_cpuset(const SaCpuSet *set)
{
    if (!set)
        return NULL;
    g_autofree char *text = sa_cpuset_format(set);
    return json_object_new_string(text);
}

static json_object *json_time(gint64 wall_us)
{
    g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(wall_us / G_USEC_PER_SEC);
    if (!t)
        return NULL;
    g_autofree char *s = g_date_time_format_iso8601(t);
    return json_object_new_string(s);
}

static char *to_line(json_object *o)
{
    char *line = g_strdup_printf(
        "%s\n",
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return line;
}

char *sa_core_error_json(const char *message)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "ok", json_object_new_boolean(0));
    json_object_object_add(o, "error", json_object_new_string(message));
    return to_line(o);
}

/* home, burst, stalled, unmanaged, invalid, managed (not placed yet) */
static const char *vm_state(const SaVm *vm)
{
    if (vm->status != SA_VM_MANAGED)
        return sa_vm_status_to_string(vm->status);
    if (sa_vm_is_stalled(vm))
        return "stalled";
    if (vm->pvm.st.placed)
        return sa_vm_state_to_string(vm->pvm.st.state);
    return "managed";
}

/* {"since", "command", "reason", "seconds"} for a stalled VM, else NULL. */
static json_object *stalled_json(const SaVm *vm)
{
    gint64 since = 0;
    const char *command = sa_lane_stalled_command(vm->lane, &since);
    g_autofree char *reason = NULL;
    if (command) {
        reason = g_strdup_printf("%s command unanswered", command);
    } else if (vm->sampling.stopped) {
        since = vm->sampling.stopped_since;
        reason = g_strdup_printf("QEMU process %d is stopped", (int)vm->facts->pid);
    }
    if (!reason || vm->status != SA_VM_MANAGED)
        return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "since", json_time(since));
    json_object_object_add(o, "command", command ? json_object_new_string(command) : NULL);
    json_object_object_add(o, "reason", json_object_new_string(reason));
    json_object_object_add(o, "seconds", json_object_new_double((g_get_real_time() - since) / 1e6));
    return o;
}

static void add_settings(json_object *o, const SaCore *core, const SaVm *vm)
{
    const SaMetadata *md = &vm->settings;
    json_object_object_add(o, "mode", json_object_new_string(sa_mode_to_string(md->mode)));
    json_object_object_add(o, "preferred",
                           md->preferred >= 0 ? json_object_new_int(md->preferred)
                                              : json_object_new_string("auto"));
    int softness = md->softness >= 0 ? md->softness : (int)core->cfg->policy.softness;
    json_object_object_add(o, "softness", json_object_new_int(softness));
}

static void add_placement(json_object *o, const SaVm *vm)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    bool managed = vm->status == SA_VM_MANAGED;
    json_object_object_add(o, "home",
                           managed && st->home >= 0 ? json_object_new_int(st->home) : NULL);
    json_object_object_add(o, "vcpu_count", json_object_new_int((int)vm->facts->n_vcpus));
    json_object_object_add(o, "allowed", json_cpuset(vm->allowed));
    json_object_object_add(o, "vcpus", managed ? json_cpuset(st->vcpus) : NULL);
    json_object_object_add(o, "emulator", managed ? json_cpuset(st->emulator) : NULL);
    json_object *visited = json_object_new_array();
    for (guint i = 0; managed && st->visited && i < st->visited->len; i++)
        json_object_array_add(visited,
                              json_object_new_int((int)g_array_index(st->visited, guint, i)));
    json_object_object_add(o, "visiting", visited);
}

static void add_stats(json_object *o, const SaVm *vm)
{
    const SaVmStats *s = &vm->stats;
    json_object_object_add(
        o, "home_share",
        s->run_ns_total ? json_object_new_double((double)s->run_ns_home / (double)s->run_ns_total)
                        : NULL);
    json_object_object_add(o, "bursts", json_object_new_uint64(s->bursts));
    json_object_object_add(o, "retreats", json_object_new_uint64(s->retreats));
    json_object_object_add(o, "changes", json_object_new_uint64(s->changes));
    json_object_object_add(o, "run_delay_cpus", json_object_new_double(s->run_delay_now));
    json_object_object_add(o, "run_delay_seconds_total",
                           json_object_new_double(s->delay_ns_total / 1e9));
    json_object_object_add(o, "run_seconds_total", json_object_new_double(s->run_ns_total / 1e9));
    json_object_object_add(o, "seconds_home", json_object_new_double(s->seconds_home));
    json_object_object_add(o, "seconds_burst", json_object_new_double(s->seconds_burst));
}

/* The VM in the sched_ext scheduler: its threads' counters since they were added; null while
 * the scheduler does not place it (re-pinning). */
static json_object *scheduler_json(const SaCore *core, const SaVm *vm)
{
    const SaVmSched *s = &vm->sched;
    guint n = s->tids ? g_hash_table_size(s->tids) : 0;
    json_object *o;

    if (!sa_core_sched_active(core) || n == 0 || s->home < 0)
        return NULL;
    o = json_object_new_object();
    json_object_object_add(o, "threads", json_object_new_int((int)n));
    json_object_object_add(o, "home",
                           json_object_new_int((int)((const SaPartition *)g_ptr_array_index(
                                                         core->topo->partitions, (guint)s->home))
                                                   ->id));
    json_object_object_add(o, "softness", json_object_new_int((int)s->softness));
    json_object_object_add(o, "strict", json_object_new_boolean(s->strict));
    json_object_object_add(o, "away", json_object_new_boolean(s->away));
    json_object_object_add(o, "run_home_seconds", json_object_new_double(s->run_ns_home / 1e9));
    json_object_object_add(o, "run_away_seconds", json_object_new_double(s->run_ns_away / 1e9));
    json_object_object_add(o, "wait_seconds", json_object_new_double(s->wait_ns / 1e9));
    json_object_object_add(o, "visits", json_object_new_uint64(s->visits));
    json_object_object_add(o, "preempts", json_object_new_uint64(s->preempts));
    json_object_object_add(o, "preempted", json_object_new_uint64(s->preempted));
    return o;
}

static void add_threads(json_object *o, const SaVm *vm)
{
    json_object_object_add(o, "pid",
                           vm->facts->pid > 0 ? json_object_new_int(vm->facts->pid) : NULL);
    json_object *threads = json_object_new_array();
    const GPtrArray *samplers = vm->sampling.threads;
    for (guint i = 0; i < samplers->len; i++) {
        SaThreadSampler *t = g_ptr_array_index(samplers, i);
        json_object_array_add(threads, t ? json_object_new_int(sa_thread_sampler_tid(t)) : NULL);
    }
    json_object_object_add(o, "vcpu_tids", threads);
}

/* The VM's own settings per thread, as softaff gives them back ("own"). */
static json_object *own_json(const SaVm *vm)
{
    json_object *own = json_object_new_object();
    json_object *vcpus = json_object_new_array();
    for (guint i = 0; vm->vcpu_allowed && i < vm->vcpu_allowed->len; i++)
        json_object_array_add(vcpus, json_cpuset(g_ptr_array_index(vm->vcpu_allowed, i)));
    json_object_object_add(own, "vcpus", vcpus);
    json_object_object_add(own, "emulator", json_cpuset(vm->emulator_allowed));
    json_object *io = json_object_new_object();
    for (guint i = 0; vm->iothread_allowed && i < vm->iothread_allowed->len; i++) {
        char id[16];
        g_snprintf(id, sizeof id, "%u", g_array_index(vm->facts->iothread_ids, guint, i));
        json_object_object_add(io, id, json_cpuset(g_ptr_array_index(vm->iothread_allowed, i)));
    }
    json_object_object_add(own, "iothreads", io);
    return own;
}

/* The last transient failure of a command, while it is not resolved. */
static json_object *error_json(const SaVm *vm)
{
    if (!vm->act.last_error)
        return NULL;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "message", json_object_new_string(vm->act.last_error));
    json_object_object_add(
        o, "at", vm->act.last_error_wall_us ? json_time(vm->act.last_error_wall_us) : NULL);
    json_object_object_add(
        o, "retry_in_ms",
        json_object_new_int64(MAX(0, (vm->act.retry_at_us - g_get_monotonic_time()) / 1000)));
    return o;
}

/* Why the VM's memory does not follow its home, or NULL when it does. */
static const char *memory_fixed_reason(const SaCore *core, const SaVm *vm)
{
    if (vm->facts->has_numatune)
        return "the VM has its own <numatune>";
    if (!core->cfg->memory_migrate)
        return "[memory] migrate=off";
    if (core->dry_run)
        return "dry-run";
    if (core->topo->nodes->len < 2)
        return "the host has one NUMA node";
    return NULL;
}

/* A move under way: {"to_node", "moved_bytes", "total_bytes", "rate_bytes_per_second"}. */
static json_object *move_json(const SaMemoryStatus *m)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "to_node", json_object_new_int(m->node));
    json_object_object_add(o, "moved_bytes", json_object_new_uint64(m->move_done_bytes));
    json_object_object_add(o, "total_bytes", json_object_new_uint64(m->move_total_bytes));
    json_object_object_add(o, "rate_bytes_per_second", json_object_new_double(m->move_rate));
    return o;
}

/* Where the guest memory is (the mover's last reading) and any move; NULL before a home. */
static json_object *memory_json(const SaCore *core, const SaVm *vm)
{
    SaMemoryStatus m;
    if (vm->status != SA_VM_MANAGED || !sa_mover_status(core->mover, vm->key, &m) || m.node < 0)
        return NULL;
    const char *fixed = memory_fixed_reason(core, vm);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "home_node", json_object_new_int(m.node));
    json_object_object_add(o, "follows_home", json_object_new_boolean(m.follow));
    json_object_object_add(o, "fixed_reason", fixed ? json_object_new_string(fixed) : NULL);
    bool read = m.measured_wall_us != 0;
    json_object_object_add(o, "measured", read ? json_time(m.measured_wall_us) : NULL);
    json_object_object_add(o, "resident_bytes",
                           read ? json_object_new_uint64(m.resident_bytes) : NULL);
    json_object_object_add(o, "home_bytes", read ? json_object_new_uint64(m.home_bytes) : NULL);
    json_object_object_add(
        o, "home_ratio",
        read ? json_object_new_double(m.resident_bytes ? (double)m.home_bytes / m.resident_bytes
                                                       : 1.0)
             : NULL);
    json_object_object_add(o, "moving", m.moving ? move_json(&m) : NULL);
    json_object_object_add(o, "node_full", json_object_new_boolean(m.node_full));
    json_object_object_add(o, "moved_bytes_total", json_object_new_uint64(m.moved_bytes_total));
    json_object_object_add(o, "moves", json_object_new_uint64(m.moves));
    json_object_object_add(o, "moves_cancelled", json_object_new_uint64(m.cancels));
    return o;
}

static json_object *vm_json(const SaCore *core, const SaVm *vm)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(vm->name));
    json_object_object_add(o, "uuid", json_object_new_string(vm->key));
    json_object_object_add(o, "backend", json_object_new_string(vm->ops->name));
    json_object_object_add(o, "state", json_object_new_string(vm_state(vm)));
    json_object_object_add(o, "reason",
                           vm->status_reason ? json_object_new_string(vm->status_reason) : NULL);
    json_object_object_add(o, "rule", vm->rule ? json_object_new_string(vm->rule) : NULL);
    json_object_object_add(o, "stalled", stalled_json(vm));
    json_object_object_add(o, "error", error_json(vm));
    json_object_object_add(o, "own", own_json(vm));
    add_settings(o, core, vm);
    add_placement(o, vm);
    add_stats(o, vm);
    add_threads(o, vm);
    json_object_object_add(o, "scheduler", scheduler_json(core, vm));
    json_object_object_add(o, "memory", memory_json(core, vm));
    return o;
}

/* How softaffd senses waits, why, and what the events did. */
static json_object *sensing_json(const SaCore *core)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "mode", json_object_new_string(sa_core_sensing_mode(core)));
    json_object_object_add(o, "reason",
                           json_object_new_string(core->sensing_reason
                                                      ? core->sensing_reason
                                                      : "not started (tick alone)"));
    json_object_object_add(o, "utilization",
                           json_object_new_string(sa_core_utilization_source(core)));
    if (core->utilization_fallback)
        json_object_object_add(o, "utilization_reason",
                               json_object_new_string(core->utilization_fallback));
    json_object_object_add(o, "events", json_object_new_uint64(core->sense_events));
    json_object_object_add(o, "event_ticks", json_object_new_uint64(core->event_ticks));
    SaFastStats fast;
    sa_actuator_fast_stats(core, &fast);
    json_object_object_add(o, "fast_narrowings", json_object_new_uint64(fast.narrowed));
    json_object_object_add(o, "fast_narrowing_failures", json_object_new_uint64(fast.failed));
    return o;
}

/* How the vCPUs get their CPUs ([actuation]), why, and the kernel's ejections. */
static json_object *actuation_json(const SaCore *core)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "mode", json_object_new_string(sa_core_actuation_mode(core)));
    json_object_object_add(
        o, "configured",
        json_object_new_string(sa_actuation_mode_to_string(core->cfg->actuation_mode)));
    json_object_object_add(o, "reason", json_object_new_string(sa_core_actuation_reason(core)));
    json_object_object_add(o, "threads", json_object_new_int((int)core->sched_threads));
    json_object_object_add(o, "ejections", json_object_new_uint64(core->sched_ejections));
    json_object *last = NULL;
    if (core->sched_exit) {
        last = json_object_new_object();
        json_object_object_add(last, "time", json_time(core->sched_exit_wall_us));
        json_object_object_add(last, "reason", json_object_new_string(core->sched_exit));
    }
    json_object_object_add(o, "last_ejection", last);
    return o;
}

static json_object *daemon_json(const SaCore *core)
{
    json_object *daemon = json_object_new_object();
    json_object_object_add(daemon, "version", json_object_new_string(SA_VERSION));
    json_object_object_add(daemon, "started", json_time(core->started_us));
    /* The host's boot clock (as /proc/uptime) when this status was made: successive statuses
     * are timed by it, not by when a client happened to read them. */
    struct timespec boot;
    clock_gettime(CLOCK_BOOTTIME, &boot);
    json_object_object_add(daemon, "uptime_s",
                           json_object_new_double(boot.tv_sec + boot.tv_nsec / 1e9));
    json_object_object_add(daemon, "ticks", json_object_new_uint64(core->ticks));
    json_object_object_add(daemon, "interval_ms", json_object_new_int((int)core->cfg->interval_ms));
    json_object_object_add(daemon, "layout",
                           json_object_new_string(sa_layout_to_string(core->topo->layout)));
    json_object_object_add(daemon, "dry_run", json_object_new_boolean(core->dry_run));
    json_object_object_add(daemon, "stopping", json_object_new_boolean(core->stopping));
    json_object_object_add(daemon, "tick_cpu_ms", json_object_new_double(core->last_tick_cpu_ms));
    json_object_object_add(daemon, "commands_running", json_object_new_int((int)core->running));
    json_object_object_add(daemon, "sensing", sensing_json(core));
    json_object_object_add(daemon, "actuation", actuation_json(core));
    return daemon;
}

/* The names of the managed VMs whose home is, or who visit, partition id. */
static void partition_vms(const GPtrArray *vms, guint id, json_object *homes, json_object *visitors)
{
    for (guint i = 0; i < vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(vms, i);
        const SaVmPolicyState *st = &vm->pvm.st;
        if (vm->status != SA_VM_MANAGED || !st->placed)
            continue;
        if (st->home == (int)id)
            json_object_array_add(homes, json_object_new_string(vm->name));
        for (guint k = 0; st->visited && k < st->visited->len; k++)
            if (g_array_index(st->visited, guint, k) == id)
                json_object_array_add(visitors, json_object_new_string(vm->name));
    }
}

static json_object *partition_json(const SaCore *core, guint p, const GPtrArray *vms)
{
    const SaPartition *part = g_ptr_array_index(core->topo->partitions, p);
    const SaPartitionUsage *u = &core->usage[p];
    const SaPartitionLoad *l = &core->load[p];
    guint ncpu = sa_cpuset_count(part->cpus);
    json_object *jp = json_object_new_object();
    json_object_object_add(jp, "id", json_object_new_int((int)part->id));
    json_object_object_add(jp, "cpus", json_cpuset(part->cpus));
    json_object_object_add(jp, "cpu_count", json_object_new_int((int)ncpu));
    /* Averaged over about the last 2 seconds, not the last tick (an event tick
     * of 20 ms reads whatever ran in it as most of a CPU): partition-load.h. */
    json_object_object_add(jp, "owners", json_object_new_double(l->owners));
    json_object_object_add(jp, "visitors", json_object_new_double(l->visitors));
    json_object_object_add(jp, "unmanaged", json_object_new_double(l->unmanaged));
    json_object_object_add(jp, "utilization",
                           json_object_new_double(sa_partition_load_utilization(l, ncpu)));
    json_object_object_add(jp, "window_s", json_object_new_double(SA_POLICY_LOAD_WINDOW_S));
    /* The running totals: any window's average is the difference of two readings. */
    json_object *tot = json_object_new_object();
    json_object_object_add(tot, "owners", json_object_new_double(l->owners_s));
    json_object_object_add(tot, "visitors", json_object_new_double(l->visitors_s));
    json_object_object_add(tot, "unmanaged", json_object_new_double(l->unmanaged_s));
    json_object_object_add(tot, "seconds", json_object_new_double(l->seconds));
    json_object_object_add(jp, "cpu_seconds", tot);
    json_object_object_add(jp, "owner_vcpus", json_object_new_int((int)u->owner_vcpus));
    json_object *homes = json_object_new_array();
    json_object *visitors = json_object_new_array();
    partition_vms(vms, part->id, homes, visitors);
    json_object_object_add(jp, "home_vms", homes);
    json_object_object_add(jp, "visitor_vms", visitors);
    return jp;
}

char *sa_core_status_json(SaCore *core)
{
    json_object *root = json_object_new_object();
    json_object_object_add(root, "ok", json_object_new_boolean(1));
    json_object_object_add(root, "daemon", daemon_json(core));
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);
    json_object *jvms = json_object_new_array();
    for (guint i = 0; i < vms->len; i++)
        json_object_array_add(jvms, vm_json(core, g_ptr_array_index(vms, i)));
    json_object_object_add(root, "vms", jvms);
    json_object *parts = json_object_new_array();
    for (guint p = 0; p < core->topo->partitions->len; p++)
        json_object_array_add(parts, partition_json(core, p, vms));
    json_object_object_add(root, "partitions", parts);
    json_object_object_add(root, "headroom", sa_core_fleet_json(core));
    return to_line(root);
}

static json_object *decisions_json(const SaVm *vm)
{
    json_object *decisions = json_object_new_array();
    for (GList *l = vm->decisions->head; l; l = l->next) {
        const SaDecision *dec = l->data;
        json_object *jd = json_object_new_object();
        json_object_object_add(jd, "time", json_time(dec->wall_us));
        json_object_object_add(jd, "state",
                               json_object_new_string(sa_vm_state_to_string(dec->state)));
        json_object_object_add(jd, "home", json_object_new_int(dec->home));
        json_object_object_add(jd, "vcpus", json_object_new_string(dec->vcpus));
        json_object_object_add(jd, "reason", json_object_new_string(dec->reason));
        json_object_array_add(decisions, jd);
    }
    return decisions;
}

char *sa_core_show_json(SaCore *core, const char *domain, GError **error)
{
    SaVm *vm = sa_core_find(core, domain);
    if (!vm) {
        g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND,
                    "no running VM named \"%s\" is known to softaffd", domain);
        return NULL;
    }
    json_object *root = json_object_new_object();
    json_object_object_add(root, "ok", json_object_new_boolean(1));
    json_object *o = vm_json(core, vm);
    json_object_object_add(o, "decisions", decisions_json(vm));
    json_object_object_add(root, "vm", o);
    return to_line(root);
}
