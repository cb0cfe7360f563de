/* softaffd — sampling: the host's CPU utilization and each managed VM's vCPU threads. */
#define G_LOG_DOMAIN "softaffd"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "core-private.h"
#include "sa-error.h"

void sa_vm_sampling_init(SaVmSampling *s)
{
    *s = (SaVmSampling){0};
    s->threads = g_ptr_array_new_with_free_func((GDestroyNotify)sa_thread_sampler_free);
    s->prev = g_array_new(FALSE, TRUE, sizeof(SaThreadSample));
    s->deltas = g_array_new(FALSE, TRUE, sizeof(SaVcpuSample));
    s->stale = true;
}

void sa_vm_sampling_clear(SaVmSampling *s)
{
    g_clear_pointer(&s->threads, g_ptr_array_unref);
    g_clear_pointer(&s->prev, g_array_unref);
    g_clear_pointer(&s->deltas, g_array_unref);
}

struct SaIdleCheck {
    guint n;           /* CPUs of the sums */
    double *proc_ns;   /* per CPU: /proc/stat's idle time in the span ... */
    double *sense_ns;  /* ... and the sensor's */
    guint64 *known_ns; /* ... over this much of it (samples where the sensor knew the CPU) */
    guint64 span_ns;   /* the span so far */
    guint samples;
    guint spans; /* spans that passed */
    /* The last SA_IDLE_CHECK_LONG_SPANS spans that passed, per CPU (span k at k * n + cpu): a
     * small bias that every span passes is judged over them all. */
    double *ring_proc_ns, *ring_sense_ns;
    guint64 *ring_known_ns;
    guint64 ring_span_ns[SA_IDLE_CHECK_LONG_SPANS]; /* each span's length */
    guint ring_next, ring_len;
    double verdict_s; /* the length judged by the last failed verdict */
};

SaIdleCheck *sa_idle_check_new(void)
{
    return g_new0(SaIdleCheck, 1);
}

void sa_idle_check_free(SaIdleCheck *c)
{
    if (!c)
        return;
    g_free(c->proc_ns);
    g_free(c->sense_ns);
    g_free(c->known_ns);
    g_free(c->ring_proc_ns);
    g_free(c->ring_sense_ns);
    g_free(c->ring_known_ns);
    g_free(c);
}

static void span_reset(SaIdleCheck *c)
{
    if (c->n) {
        memset(c->known_ns, 0, sizeof(guint64) * c->n);
        memset(c->proc_ns, 0, sizeof(double) * c->n);
        memset(c->sense_ns, 0, sizeof(double) * c->n);
    }
    c->span_ns = 0;
    c->samples = 0;
}

void sa_idle_check_reset(SaIdleCheck *c)
{
    span_reset(c);
    c->ring_next = 0;
    c->ring_len = 0;
}

double sa_idle_check_verdict_seconds(const SaIdleCheck *c)
{
    return c->verdict_s;
}

guint sa_idle_check_spans(const SaIdleCheck *c)
{
    return c->spans;
}

/* The CPU whose idle fractions differ most over the sums (n CPUs), if judged on half of span_ns
 * at least (a CPU the sensor saw switch only now and then: both figures are then mostly
 * /proc/stat's rounding); false when that difference is beyond tolerance. */
static bool verdict(guint n, const double *proc_ns, const double *sense_ns, const guint64 *known_ns,
                    guint64 span_ns, double tolerance, guint *cpu, double *proc_frac,
                    double *sense_frac)
{
    double worst = -1;

    for (guint i = 0; i < n; i++) {
        if (known_ns[i] * 2 < span_ns)
            continue;
        double p = proc_ns[i] / (double)known_ns[i];
        double s = sense_ns[i] / (double)known_ns[i];
        if (fabs(p - s) > worst) {
            worst = fabs(p - s);
            *cpu = i;
            *proc_frac = p;
            *sense_frac = s;
        }
    }
    return worst <= tolerance;
}

/* A span that passed goes into the ring; once the ring is full, its sums are judged at the
 * tighter long tolerance. */
static bool ring_verdict(SaIdleCheck *c, guint *cpu, double *proc_frac, double *sense_frac)
{
    guint n = c->n, k = c->ring_next;
    memcpy(c->ring_proc_ns + k * n, c->proc_ns, sizeof(double) * n);
    memcpy(c->ring_sense_ns + k * n, c->sense_ns, sizeof(double) * n);
    memcpy(c->ring_known_ns + k * n, c->known_ns, sizeof(guint64) * n);
    c->ring_span_ns[k] = c->span_ns;
    c->ring_next = (k + 1) % SA_IDLE_CHECK_LONG_SPANS;
    c->ring_len = MIN(c->ring_len + 1, SA_IDLE_CHECK_LONG_SPANS);
    if (c->ring_len < SA_IDLE_CHECK_LONG_SPANS)
        return true;
    g_autofree double *proc = g_new0(double, n);
    g_autofree double *sense = g_new0(double, n);
    g_autofree guint64 *known = g_new0(guint64, n);
    guint64 span = 0;
    for (guint j = 0; j < SA_IDLE_CHECK_LONG_SPANS; j++) {
        span += c->ring_span_ns[j];
        for (guint i = 0; i < n; i++) {
            proc[i] += c->ring_proc_ns[j * n + i];
            sense[i] += c->ring_sense_ns[j * n + i];
            known[i] += c->ring_known_ns[j * n + i];
        }
    }
    if (verdict(n, proc, sense, known, span, SA_IDLE_CHECK_LONG_TOLERANCE, cpu, proc_frac,
                sense_frac))
        return true;
    c->verdict_s = span / 1e9;
    return false;
}

bool sa_idle_check_add(SaIdleCheck *c, guint n, const double *proc_idle, const guint64 *sense_ns,
                       const bool *known, guint64 interval_ns, guint *cpu, double *proc_frac,
                       double *sense_frac)
{
    if (n != c->n) {
        g_free(c->proc_ns);
        g_free(c->sense_ns);
        g_free(c->known_ns);
        g_free(c->ring_proc_ns);
        g_free(c->ring_sense_ns);
        g_free(c->ring_known_ns);
        c->n = n;
        c->proc_ns = g_new0(double, MAX(n, 1));
        c->sense_ns = g_new0(double, MAX(n, 1));
        c->known_ns = g_new0(guint64, MAX(n, 1));
        c->ring_proc_ns = g_new0(double, MAX(n, 1) * SA_IDLE_CHECK_LONG_SPANS);
        c->ring_sense_ns = g_new0(double, MAX(n, 1) * SA_IDLE_CHECK_LONG_SPANS);
        c->ring_known_ns = g_new0(guint64, MAX(n, 1) * SA_IDLE_CHECK_LONG_SPANS);
        sa_idle_check_reset(c);
    }
    if (interval_ns == 0)
        return true;
    for (guint i = 0; i < n; i++) {
        if (!known[i])
            continue;
        c->proc_ns[i] += CLAMP(proc_idle[i], 0.0, 1.0) * (double)interval_ns;
        c->sense_ns[i] += (double)MIN(sense_ns[i], interval_ns);
        c->known_ns[i] += interval_ns;
    }
    c->span_ns += interval_ns;
    c->samples++;
    if (c->span_ns < SA_IDLE_CHECK_SPAN_NS || c->samples < SA_IDLE_CHECK_MIN_SAMPLES)
        return true;
    bool ok = verdict(n, c->proc_ns, c->sense_ns, c->known_ns, c->span_ns, SA_IDLE_CHECK_TOLERANCE,
                      cpu, proc_frac, sense_frac);
    if (ok) {
        c->spans++;
        ok = ring_verdict(c, cpu, proc_frac, sense_frac);
    } else {
        c->verdict_s = c->span_ns / 1e9;
    }
    span_reset(c);
    return ok;
}

/* /proc/stat's idle fraction per CPU of the last sample (idle + iowait: the sensor counts both
 * as the idle task's time). */
static void proc_idle_fractions(const SaCore *core, double *out, guint n)
{
    for (guint i = 0; i < core->loads->len; i++) {
        const SaCpuLoad *l = &g_array_index(core->loads, SaCpuLoad, i);
        if (l->cpu >= 0 && (guint)l->cpu < n)
            out[l->cpu] = l->idle + l->iowait;
    }
}

/* Feeds the check; on a failed span, says so once and leaves utilization to /proc/stat. */
static void check_idle(SaCore *core, const guint64 *delta, const bool *known, guint n,
                       guint64 interval_ns)
{
    g_autofree double *proc = g_new0(double, MAX(n, 1));
    guint cpu = 0;
    double p = 0, s = 0;

    if (!core->idle_check)
        core->idle_check = sa_idle_check_new();
    proc_idle_fractions(core, proc, n);
    if (sa_idle_check_add(core->idle_check, n, proc, delta, known, interval_ns, &cpu, &p, &s))
        return;
    core->utilization_fallback = g_strdup_printf(
        "the BPF program's idle time disagrees with /proc/stat: CPU %u %.0f%% idle against "
        "%.0f%% over %.1f s",
        cpu, 100 * s, 100 * p, sa_idle_check_verdict_seconds(core->idle_check));
    g_warning("sensing: %s; utilization from /proc/stat from now on (events still from the "
              "BPF program)",
              core->utilization_fallback);
}

/* With the sensor loaded, each CPU's busy fraction since the last sample from its idle time:
 * overrides /proc/stat's where the sensor saw that CPU switch both times, unless the check
 * against /proc/stat failed. */
static void sample_host_idle(SaCore *core)
{
    guint n = core->n_cpu_busy;
    g_clear_pointer(&core->cpu_visitors, g_free);
    if (!core->sense || n == 0) {
        core->idle_gen = 0;
        return;
    }
    g_autofree guint64 *idle = g_new0(guint64, n);
    g_autofree bool *known = g_new0(bool, n);
    g_autofree guint64 *delta = g_new0(guint64, n);
    g_autofree bool *both = g_new0(bool, n);
    g_autofree guint64 *visitor = g_new0(guint64, n);
    guint64 now = 0;
    if (!sa_sense_cpu_idle(core->sense, n, idle, known, &now, visitor)) {
        core->idle_gen = 0;
        return;
    }
    if (core->idle_gen != core->sense_gen && core->idle_check)
        sa_idle_check_reset(core->idle_check);
    bool usable =
        core->idle_gen == core->sense_gen && core->n_idle == n && now > core->idle_prev_ns;
    for (guint cpu = 0; usable && cpu < n; cpu++) {
        if (!known[cpu] || !core->idle_known[cpu] || idle[cpu] < core->idle_prev[cpu])
            continue;
        both[cpu] = true;
        delta[cpu] = idle[cpu] - core->idle_prev[cpu];
    }
    if (usable && !core->utilization_fallback)
        check_idle(core, delta, both, n, now - core->idle_prev_ns);
    /* The visitors' run by CPU: with either source of utilization (it is theirs either way). */
    if (usable) {
        core->cpu_visitors = g_new0(double, n);
        for (guint cpu = 0; cpu < n; cpu++)
            if (visitor[cpu] >= core->visitor_prev[cpu])
                core->cpu_visitors[cpu] = CLAMP((double)(visitor[cpu] - core->visitor_prev[cpu]) /
                                                    (double)(now - core->idle_prev_ns),
                                                0.0, 1.0);
    }
    for (guint cpu = 0; usable && !core->utilization_fallback && cpu < n; cpu++) {
        if (!both[cpu])
            continue;
        double f = (double)delta[cpu] / (double)(now - core->idle_prev_ns);
        core->cpu_busy[cpu] = CLAMP(1.0 - f, 0.0, 1.0);
    }
    g_free(core->idle_prev);
    g_free(core->idle_known);
    g_free(core->visitor_prev);
    core->visitor_prev = g_steal_pointer(&visitor);
    core->idle_prev = g_steal_pointer(&idle);
    core->idle_known = g_steal_pointer(&known);
    core->n_idle = n;
    core->idle_prev_ns = now;
    core->idle_gen = core->sense_gen;
}

void sa_core_sample_host(SaCore *core)
{
    g_autoptr(GError) error = NULL;
    if (!sa_stat_sampler_sample(core->stat, core->loads, &error)) {
        g_warning("cannot sample CPU utilization: %s", error->message);
        g_array_set_size(core->loads, 0);
    }
    int max_cpu = -1;
    for (guint i = 0; i < core->loads->len; i++)
        max_cpu = MAX(max_cpu, g_array_index(core->loads, SaCpuLoad, i).cpu);
    if ((guint)(max_cpu + 1) != core->n_cpu_busy) {
        g_free(core->cpu_busy);
        core->n_cpu_busy = (guint)(max_cpu + 1);
        core->cpu_busy = g_new0(double, MAX(core->n_cpu_busy, 1));
    }
    memset(core->cpu_busy, 0, sizeof(double) * core->n_cpu_busy);
    for (guint i = 0; i < core->loads->len; i++) {
        const SaCpuLoad *l = &g_array_index(core->loads, SaCpuLoad, i);
        core->cpu_busy[l->cpu] = l->busy;
    }
    sample_host_idle(core);
}

/* "CPU 3/KVM", "CPU 3/TCG" */
static bool parse_vcpu_comm(const char *comm, guint *vcpu)
{
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

/* The sampler of a thread, if it is vCPU n_vcpus > *vcpu of the process. */
static SaThreadSampler *vcpu_sampler(pid_t pid, pid_t tid, guint n_vcpus, guint *vcpu)
{
    g_autoptr(SaThreadSampler) t = sa_thread_sampler_new(pid, tid, NULL);
    SaThreadSample s;
    if (!t || !sa_thread_sampler_read(t, &s, NULL))
        return NULL; /* the thread exited meanwhile */
    if (!parse_vcpu_comm(s.comm, vcpu) || *vcpu >= n_vcpus)
        return NULL;
    return g_steal_pointer(&t);
}

/* Finds the threads named "CPU N/..." in the process. */
static guint scan_by_name(SaVmSampling *s, pid_t pid, guint n_vcpus, GError **error)
{
    g_autoptr(GArray) tids = sa_process_list_threads(pid, error);
    if (!tids)
        return 0;
    guint found = 0;
    for (guint i = 0; i < tids->len; i++) {
        guint vcpu;
        SaThreadSampler *t = vcpu_sampler(pid, g_array_index(tids, pid_t, i), n_vcpus, &vcpu);
        if (t && g_ptr_array_index(s->threads, vcpu) == NULL) {
            g_ptr_array_index(s->threads, vcpu) = t;
            found++;
        } else {
            sa_thread_sampler_free(t);
        }
    }
    if (found == 0)
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT,
                    "no vCPU threads (named 'CPU N/KVM' or 'CPU N/TCG') in process %d", pid);
    return found;
}

/* Opens the thread ids the backend reported. */
static guint open_reported(SaVmSampling *s, pid_t pid, const GArray *tids, GError **error)
{
    guint found = 0;
    for (guint i = 0; i < tids->len && i < s->threads->len; i++) {
        pid_t tid = g_array_index(tids, pid_t, i);
        SaThreadSampler *t = tid > 0 ? sa_thread_sampler_new(pid, tid, NULL) : NULL;
        g_ptr_array_index(s->threads, i) = t;
        found += t != NULL;
    }
    if (found == 0)
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT,
                    "none of the vCPU threads QEMU reported exists in process %d", pid);
    return found;
}

static bool find_threads(SaVm *vm, GError **error)
{
    SaVmSampling *s = &vm->sampling;
    const SaVmFacts *f = vm->facts;
    g_ptr_array_set_size(s->threads, 0);
    g_ptr_array_set_size(s->threads, f->n_vcpus);
    g_array_set_size(s->prev, f->n_vcpus);
    g_array_set_size(s->deltas, f->n_vcpus);
    s->have_prev = false;
    s->lost_reported = false;
    s->sense_gen = 0; /* new threads: track them */
    guint found = f->vcpu_tids ? open_reported(s, f->pid, f->vcpu_tids, error)
                               : scan_by_name(s, f->pid, f->n_vcpus, error);
    s->stale = found == 0;
    return found > 0;
}

/* The vCPU threads of a reported list went away: the backend must tell the new ones. */
static void threads_lost(SaVm *vm)
{
    SaVmSampling *s = &vm->sampling;
    if (!vm->facts->vcpu_tids) {
        s->stale = true;
        return;
    }
    if (!s->lost_reported && vm->ops->threads_lost) {
        s->lost_reported = true;
        vm->ops->threads_lost(sa_lane_handle(vm->lane));
    }
}

/* A VM whose vCPUs may run only at home needs no last CPU per vCPU: the policy counts a vCPU of
 * unknown CPU at home, which is where it ran. Skipping /proc/.../stat halves the reads. */
static bool needs_last_cpu(const SaCore *core, const SaVm *vm)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    if (core->dry_run || !st->placed || !st->vcpus || st->home < 0 || !vm->act.touched ||
        vm->act.applied != vm->act.decided)
        return true;
    int idx = sa_topology_find_partition(core->topo, (guint)st->home);
    if (idx < 0)
        return true;
    const SaPartition *home = g_ptr_array_index(core->topo->partitions, idx);
    return !sa_cpuset_is_subset(st->vcpus, home->cpus);
}

static bool read_vcpu(SaThreadSampler *t, bool full, SaThreadSample *cur)
{
    *cur = (SaThreadSample){.last_cpu = -1};
    if (!t)
        return false;
    return full ? sa_thread_sampler_read(t, cur, NULL)
                : sa_thread_sampler_read_times(t, &cur->run_ns, &cur->delay_ns, NULL);
}

/* A VM whose vCPUs neither ran nor waited may be stopped (SIGSTOP): then its hypervisor will
 * not answer either. Checked only for such VMs, so it costs nothing in the common case. */
static void check_stopped(SaVm *vm, guint64 run_and_wait)
{
    SaVmSampling *s = &vm->sampling;
    char state = run_and_wait == 0 ? sa_process_state(vm->facts->pid) : 'R';
    bool stopped = state == 'T' || state == 't';
    if (stopped == s->stopped)
        return;
    s->stopped = stopped;
    if (stopped) {
        s->stopped_since = g_get_real_time();
        g_warning("%s: QEMU process %d is stopped: stalled, no command is sent to it until it "
                  "runs again; every other VM goes on",
                  vm->name, vm->facts->pid);
    } else {
        g_info("%s: QEMU process %d runs again", vm->name, vm->facts->pid);
    }
}

/* With the BPF sensor, the VM's vCPU threads are tracked once (after they are found) and read
 * from its map, all of them at once a tick, instead of one or two /proc reads each; false:
 * sample /proc (no sensor, or its map is full). */
static bool sense_tracks(SaCore *core, SaVm *vm)
{
    SaVmSampling *s = &vm->sampling;

    if (!core->sense)
        return false;
    if (s->sense_gen == core->sense_gen)
        return true;
    for (guint i = 0; i < s->threads->len; i++) {
        const SaThreadSampler *t = g_ptr_array_index(s->threads, i);

        if (t && !sa_sense_track(core->sense, sa_thread_sampler_tid(t)))
            return false;
    }
    s->sense_gen = core->sense_gen;
    return true;
}

/* This tick's reading of the sensor's map, in batches the first time a tick needs it: a few
 * system calls for thousands of vCPUs, where a lookup each is one system call per vCPU. */
static const SaSenseTimes *sense_times_of_tick(SaCore *core)
{
    if (!core->sense_times)
        core->sense_times = sa_sense_times_new();
    SaSenseTimes *t = core->sense_times;

    if (sa_sense_times_is_of(t, core->ticks, core->sense_gen))
        return t;
    sa_sense_times_begin(t, core->ticks, core->sense_gen);
    sa_sense_all_times(core->sense, sa_sense_times_keep, t);
    sa_sense_times_end(t);
    return t;
}

/* A tracked thread's totals from this tick's reading of the map. One the reading did not find
 * (tracked after it: a VM whose threads were found this tick; or the kernel refused the batch)
 * is looked up alone. The sensor forgets a thread that exits, so a thread found neither way is
 * gone, as one whose /proc read fails. */
static bool read_vcpu_sense(SaCore *core, const SaThreadSampler *t, SaThreadSample *cur)
{
    *cur = (SaThreadSample){.last_cpu = -1};
    if (!t)
        return false;
    pid_t tid = sa_thread_sampler_tid(t);

    if (sa_sense_times_get(sense_times_of_tick(core), tid, &cur->run_ns, &cur->delay_ns,
                           &cur->last_cpu))
        return true;
    return sa_sense_thread_times(core->sense, tid, &cur->run_ns, &cur->delay_ns, &cur->last_cpu);
}

bool sa_core_sample_vm(SaCore *core, SaVm *vm)
{
    SaVmSampling *s = &vm->sampling;
    if (s->stale) {
        g_autoptr(GError) error = NULL;
        if (!find_threads(vm, &error)) {
            g_debug("%s: %s", vm->name, error->message);
            return false;
        }
    }
    bool via_sense = sense_tracks(core, vm);
    if (via_sense != s->via_sense) {
        /* Totals since tracking and /proc's since the thread started: no delta across them. */
        s->via_sense = via_sense;
        s->have_prev = false;
    }
    /* The sensor's map has each thread's last CPU anyway. */
    bool have_prev = s->have_prev, full = !via_sense && needs_last_cpu(core, vm);
    guint64 run_and_wait = 0;
    for (guint i = 0; i < s->threads->len; i++) {
        SaThreadSample *prev = &g_array_index(s->prev, SaThreadSample, i);
        SaVcpuSample *delta = &g_array_index(s->deltas, SaVcpuSample, i);
        SaThreadSample cur;
        SaThreadSampler *t = g_ptr_array_index(s->threads, i);
        if (!(via_sense ? read_vcpu_sense(core, t, &cur) : read_vcpu(t, full, &cur))) {
            /* A vCPU thread went away (unplug, VM stopping): find them again. */
            threads_lost(vm);
            *delta = (SaVcpuSample){.last_cpu = -1};
            continue;
        }
        delta->run_ns = cur.run_ns >= prev->run_ns ? cur.run_ns - prev->run_ns : 0;
        delta->delay_ns = cur.delay_ns >= prev->delay_ns ? cur.delay_ns - prev->delay_ns : 0;
        delta->last_cpu = cur.last_cpu;
        run_and_wait += delta->run_ns + delta->delay_ns;
        *prev = cur;
    }
    s->have_prev = true;
    if (have_prev)
        check_stopped(vm, run_and_wait);
    return have_prev;
}
