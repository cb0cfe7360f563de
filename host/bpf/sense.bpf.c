// SPDX-License-Identifier: GPL-2.0-or-later
/* softaff — the scheduler-tracepoint program behind host/sense.c: per tracked thread run and
 * wait (runqueue delay) totals, and per watched CPU the wait of every thread not ignored and the
 * run of the tracked ones (vCPUs) not ignored, summed over a window. A window whose wait passes
 * the threshold (the owners wait), or whose run passes it after a window whose run did not (the
 * owners started running: a lone runner on an idle CPU never waits), sends one ring buffer
 * record.
 *
 * The kernel types are the few fields used, declared here with preserve_access_index: libbpf
 * relocates them against the running kernel's BTF at load, so the build needs no vmlinux.h
 * (a package builder's kernel says nothing about the host's). */
#include <stdbool.h>

#include <linux/bpf.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "sense-shared.h"

struct thread_info {
    unsigned int cpu;
} __attribute__((preserve_access_index));

/* The runqueue CPU is thread_info.cpu on most kernels, task_struct.cpu on some. */
struct task_struct {
    struct thread_info thread_info;
    unsigned int __state;
    int pid;
    int tgid;
    unsigned int cpu;
} __attribute__((preserve_access_index));

/* Before 5.14 the state was a long named state. */
struct task_struct___old {
    long state;
} __attribute__((preserve_access_index));

char LICENSE[] SEC("license") = "GPL";

/* Set by the daemon (sa_sense_set_threshold) through the mmapped data section. */
__u64 threshold_ns = 2000000;
__u64 window_ns = 10000000;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, SA_SENSE_MAX_TRACKED);
    __type(key, __u32);
    __type(value, struct sa_sense_thread);
} tracked SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, SA_SENSE_MAX_IGNORED);
    __type(key, __u32);
    __type(value, __u32); /* the place where it counts after all, or SA_SENSE_NOWHERE */
} ignored SEC(".maps");

/* When each runnable thread of interest was queued; LRU so lost wakeups cannot fill it. */
struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, SA_SENSE_MAX_QUEUED);
    __type(key, __u32);
    __type(value, __u64);
} queued SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SENSE_MAX_CPUS);
    __type(key, __u32);
    __type(value, struct sa_sense_cpu);
} cpus SEC(".maps");

/* Per CPU idle time, for the host's utilization over intervals far shorter than /proc/stat's
 * 10 ms resolution allows (an extra tick may come 20 ms after the last). */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SENSE_MAX_CPUS);
    __type(key, __u32);
    __type(value, struct sa_sense_idle);
} idle SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 64 * 1024);
} events SEC(".maps");

static bool cpu_watched(__u32 cpu)
{
    struct sa_sense_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);

    return c && c->watched;
}

/* Times the queueing of a thread that will run on cpu, when anyone cares about it. */
static void enqueue(__u32 tid, __u32 cpu, __u64 now)
{
    if (!tid)
        return;
    if (cpu_watched(cpu) || bpf_map_lookup_elem(&tracked, &tid))
        bpf_map_update_elem(&queued, &tid, &now, BPF_ANY);
}

/* The CPU whose runqueue p is on (not always the one running the program). */
static __u32 task_cpu(struct task_struct *p)
{
    if (bpf_core_field_exists(p->thread_info.cpu))
        return BPF_CORE_READ(p, thread_info.cpu);
    if (bpf_core_field_exists(p->cpu))
        return BPF_CORE_READ(p, cpu);
    return bpf_get_smp_processor_id();
}

static int on_wakeup(struct task_struct *p)
{
    enqueue(BPF_CORE_READ(p, pid), task_cpu(p), bpf_ktime_get_ns());
    return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sa_wakeup, struct task_struct *p)
{
    return on_wakeup(p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sa_wakeup_new, struct task_struct *p)
{
    return on_wakeup(p);
}

static bool still_runnable(struct task_struct *p)
{
    if (bpf_core_field_exists(p->__state))
        return BPF_CORE_READ(p, __state) == 0;
    return BPF_CORE_READ((struct task_struct___old *)p, state) == 0;
}

/* Whether the thread is ignored on a CPU of place: by its own id or its process's (a visitor's
 * QEMU: its emulator and I/O threads may run where its vCPUs do), except at its home, where a
 * visitor is one of the owners. */
static bool ignored_at(__u32 tid, __u32 tgid, __u32 place)
{
    __u32 *home = bpf_map_lookup_elem(&ignored, &tid);

    if (!home)
        home = bpf_map_lookup_elem(&ignored, &tgid);
    return home && (*home == SA_SENSE_NOWHERE || *home != place);
}

static void roll(struct sa_sense_cpu *c, __u64 now);

/* The watched CPU's window (a new one once window_ns has passed), or NULL: cpu not watched, or
 * the thread ignored there. */
static struct sa_sense_cpu *window(__u32 cpu, __u32 tid, __u32 tgid, __u64 now)
{
    struct sa_sense_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);

    if (!c || !c->watched || ignored_at(tid, tgid, c->place))
        return NULL;
    roll(c, now);
    return c;
}

/* A new window once window_ns has passed. */
static void roll(struct sa_sense_cpu *c, __u64 now)
{
    if (now - c->window_start >= window_ns) {
        /* still busy only if that window ended just now: an idle CPU's windows are not kept */
        if (now - c->window_start >= 2 * window_ns || c->run_ns <= threshold_ns)
            c->busy = 0;
        c->window_start = now;
        c->wait_ns = 0;
        c->run_ns = 0;
        c->visitor_ns = 0;
        c->fired = 0;
    }
}

static void fire(__u32 cpu, __u32 tid, __u32 kind, __u64 ns, __u64 now)
{
    struct sa_sense_record *r;

    r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
    if (!r)
        return;
    r->cpu = cpu;
    r->tid = tid;
    r->wait_ns = ns;
    r->when_ns = now;
    r->kind = kind;
    r->pad = 0;
    bpf_ringbuf_submit(r, 0);
}

/* Adds a wait to cpu's window; the window's first crossing of the threshold is an event. */
static void account(__u32 cpu, __u32 tid, __u32 tgid, __u64 wait, __u64 now)
{
    struct sa_sense_cpu *c = window(cpu, tid, tgid, now);

    if (!c)
        return;
    c->wait_ns += wait;
    if (!c->fired && c->wait_ns > threshold_ns) {
        c->fired = 1;
        fire(cpu, tid, SA_SENSE_WAIT, c->wait_ns, now);
    }
}

static void switch_out(struct task_struct *prev, __u32 cpu, __u64 now)
{
    __u32 tid = BPF_CORE_READ(prev, pid);
    struct sa_sense_thread *t = bpf_map_lookup_elem(&tracked, &tid);

    if (t) {
        if (t->oncpu_ts)
            t->run_ns += now - t->oncpu_ts;
        t->oncpu_ts = 0;
        t->last_cpu = cpu;
    }
    if (still_runnable(prev))
        enqueue(tid, cpu, now);
}

static void switch_in(struct task_struct *next, __u32 cpu, __u64 now)
{
    __u32 tid = BPF_CORE_READ(next, pid);
    struct sa_sense_thread *t;
    __u64 *since, wait = 0;

    if (!tid)
        return;
    since = bpf_map_lookup_elem(&queued, &tid);
    if (since) {
        wait = now > *since ? now - *since : 0;
        bpf_map_delete_elem(&queued, &tid);
    }
    t = bpf_map_lookup_elem(&tracked, &tid);
    if (t) {
        t->delay_ns += wait;
        t->oncpu_ts = now;
        t->last_cpu = cpu;
    }
    if (wait)
        account(cpu, tid, BPF_CORE_READ(next, tgid), wait, now);
}

/* A thread that exits is no longer tracked: its lookups then fail, which reads as gone (and a
 * reused tid starts from nothing). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sa_exit, struct task_struct *p)
{
    __u32 tid = BPF_CORE_READ(p, pid);

    bpf_map_delete_elem(&tracked, &tid);
    return 0;
}

/* The scheduler's accounting of the running thread's time: on every tick (HZ) and switch, so
 * a thread running alone is seen too. Only tracked threads count (the managed VMs' vCPUs; not
 * ignored here: at home), so a kernel thread's or a daemon's few ms do not look like a tenant
 * starting. Adds the run to its CPU's window; a window past the threshold after one that was
 * not is an event (once: a CPU that stays busy says nothing more; its waits are events of their
 * own). The kernel's third argument before 6.8 (vruntime) is not read. */
SEC("tp_btf/sched_stat_runtime")
int BPF_PROG(sa_runtime, struct task_struct *p, __u64 runtime)
{
    __u32 tid = BPF_CORE_READ(p, pid), cpu;
    __u64 now;
    struct sa_sense_cpu *c;

    if (!tid || !bpf_map_lookup_elem(&tracked, &tid))
        return 0;
    cpu = task_cpu(p);
    c = bpf_map_lookup_elem(&cpus, &cpu);
    if (!c || !c->watched)
        return 0;
    now = bpf_ktime_get_ns();
    roll(c, now);
    if (ignored_at(tid, BPF_CORE_READ(p, tgid), c->place)) {
        c->visitor_ns += runtime;
        return 0;
    }
    c->run_ns += runtime;
    /* Where a visitor runs, owners that start wait behind it: that is their event. Their run
     * beside it would only be an idle owner's blip read over a window. */
    if (!c->busy && c->run_ns > threshold_ns && c->visitor_ns <= threshold_ns) {
        c->busy = 1;
        fire(cpu, tid, SA_SENSE_RUN, c->run_ns, now);
    }
    return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sa_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
    __u32 cpu = bpf_get_smp_processor_id();
    __u64 now = bpf_ktime_get_ns();

    struct sa_sense_idle *i = bpf_map_lookup_elem(&idle, &cpu);

    if (i) {
        struct sa_sense_cpu *c = bpf_map_lookup_elem(&cpus, &cpu);
        __u32 next_pid = BPF_CORE_READ(next, pid);

        if (BPF_CORE_READ(prev, pid) == 0 && i->idle_since && now > i->idle_since)
            i->idle_ns += now - i->idle_since;
        i->idle_since = next_pid == 0 ? now : 0;
        /* A visitor's time here, whatever the daemon's attribution of its vCPUs by their last
         * CPU says: the threads that just moved in and its QEMU's other threads are no owners. */
        if (i->visitor_now && i->since && now > i->since)
            i->visitor_ns += now - i->since;
        i->visitor_now = next_pid && c && c->watched &&
                         ignored_at(next_pid, BPF_CORE_READ(next, tgid), c->place);
        i->since = now;
        i->seen = 1;
    }
    switch_out(prev, cpu, now);
    switch_in(next, cpu, now);
    return 0;
}
