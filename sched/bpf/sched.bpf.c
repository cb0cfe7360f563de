// SPDX-License-Identifier: GPL-2.0-or-later
/* softaff — the sched_ext scheduler for vCPU threads (partial switch: only the threads userspace
 * switches to SCHED_EXT run under it; everything else stays on the fair class).
 *
 * Each switched thread has a home partition. A CPU takes the threads homed on its partition
 * first (owners, in vtime order); a waking owner with no idle home CPU kicks a visitor off a home
 * CPU. A thread whose home has no idle CPU it may use runs on an idle CPU of another partition,
 * nearest first, within its own cpumask and only as far as its reach (0: never leaves home). At
 * its next wakeup or slice end it goes home if home has an idle CPU.
 *
 * The fair class ranks above sched_ext: a CPU it holds runs no thread of ours except through
 * the kernel's ext server (a deadline server, 7.x), and that only for threads on that CPU's
 * runqueue. So a thread waiting at home is always on the runqueue of a home CPU in its own set,
 * and the threads waiting on a CPU's local queue when the fair class takes it are placed again
 * (cpu_release) rather than left behind it.
 *
 * The kernel types are the few members used, declared here with preserve_access_index: libbpf
 * relocates them against the running kernel's BTF, and matches the members of sched_ext_ops by
 * name. Every kfunc and ops signature was checked against Linux 7.2's BTF. */
#include <stdbool.h>

#include <linux/bpf.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "sched-shared.h"

typedef __s32 s32;
typedef __u32 u32;
typedef __s64 s64;
typedef __u64 u64;

/* A full type, not a declaration: libbpf's check of kfunc prototypes wants a struct here. */
struct cpumask {
    unsigned long bits[1];
} __attribute__((preserve_access_index));

struct sched_ext_entity {
    u32 flags;
    u32 weight;
    u64 slice; /* the one member BPF may write (dispatch refills a prev that goes on) */
} __attribute__((preserve_access_index));

struct task_struct {
    unsigned int __state;
    int pid;
    unsigned short migration_disabled;
    const struct cpumask *cpus_ptr;
    struct sched_ext_entity scx;
} __attribute__((preserve_access_index));

/* An enum member must be an enum of the same name for libbpf's relocation. */
enum scx_exit_kind {
    SA_SCX_EXIT_NONE = 0,
};

struct scx_exit_info {
    enum scx_exit_kind kind;
    s32 exit_cpu;
    s64 exit_code;
    const char *reason;
    char *msg;
    char *dump;
} __attribute__((preserve_access_index));

struct scx_init_task_args;
struct scx_exit_task_args;
struct scx_cpu_acquire_args;
struct scx_cpu_release_args;

/* The members this program sets; libbpf finds each by name in the kernel's sched_ext_ops. */
struct sched_ext_ops {
    s32 (*select_cpu)(struct task_struct *p, s32 prev_cpu, u64 wake_flags);
    void (*enqueue)(struct task_struct *p, u64 enq_flags);
    void (*dispatch)(s32 cpu, struct task_struct *prev);
    void (*runnable)(struct task_struct *p, u64 enq_flags);
    void (*running)(struct task_struct *p);
    void (*stopping)(struct task_struct *p, bool runnable);
    void (*quiescent)(struct task_struct *p, u64 deq_flags);
    s32 (*init)(void);
    void (*exit)(struct scx_exit_info *info);
    u64 flags;
    u32 timeout_ms;
    char name[128];
    void (*cpu_acquire)(s32 cpu, struct scx_cpu_acquire_args *args);
    void (*cpu_release)(s32 cpu, struct scx_cpu_release_args *args);
} __attribute__((preserve_access_index));

/* Constants of the sched_ext ABI (stable since 6.12; values as in 7.2). */
#define SCX_DSQ_LOCAL ((1ULL << 63) | 2)
#define SCX_DSQ_LOCAL_ON ((1ULL << 63) | (1ULL << 62))
#define SCX_KICK_IDLE 1
#define SCX_KICK_PREEMPT 2
#define SCX_OPS_ENQ_LAST 2
#define SCX_OPS_SWITCH_PARTIAL 8
#define SCX_OPS_ENQ_MIGRATION_DISABLED 16
#define SCX_ENQ_WAKEUP 1ULL
#define SCX_ENQ_REENQ (1ULL << 40)
#define SCX_ENQ_LAST (1ULL << 41)
#define SCX_TASK_QUEUED 1

extern s32 scx_bpf_create_dsq(u64 dsq_id, s32 node) __ksym;
extern void scx_bpf_dsq_insert(struct task_struct *p, u64 dsq_id, u64 slice, u64 enq_flags) __ksym;
extern void scx_bpf_dsq_insert_vtime(struct task_struct *p, u64 dsq_id, u64 slice, u64 vtime,
                                     u64 enq_flags) __ksym;
extern bool scx_bpf_dsq_move_to_local(u64 dsq_id) __ksym;
extern s32 scx_bpf_dsq_nr_queued(u64 dsq_id) __ksym;
extern void scx_bpf_kick_cpu(s32 cpu, u64 flags) __ksym;
extern bool scx_bpf_test_and_clear_cpu_idle(s32 cpu) __ksym;
extern s32 scx_bpf_select_cpu_dfl(struct task_struct *p, s32 prev_cpu, u64 wake_flags,
                                  bool *is_idle) __ksym;
extern s32 scx_bpf_task_cpu(const struct task_struct *p) __ksym;
extern bool bpf_cpumask_test_cpu(u32 cpu, const struct cpumask *cpumask) __ksym;
extern u32 scx_bpf_reenqueue_local(void) __ksym;
extern const struct cpumask *scx_bpf_get_idle_cpumask(void) __ksym;
extern void scx_bpf_put_idle_cpumask(const struct cpumask *idle_mask) __ksym;

/* The iterator over a dispatch queue (opaque to BPF; its size as in the kernel). */
struct bpf_iter_scx_dsq {
    u64 __opaque[6];
} __attribute__((aligned(8)));

extern int bpf_iter_scx_dsq_new(struct bpf_iter_scx_dsq *it, u64 dsq_id, u64 flags) __ksym;
extern struct task_struct *bpf_iter_scx_dsq_next(struct bpf_iter_scx_dsq *it) __ksym;
extern void bpf_iter_scx_dsq_destroy(struct bpf_iter_scx_dsq *it) __ksym;
extern bool scx_bpf_dsq_move(struct bpf_iter_scx_dsq *it__iter, struct task_struct *p, u64 dsq_id,
                             u64 enq_flags) __ksym;
extern void scx_bpf_dsq_move_set_slice(struct bpf_iter_scx_dsq *it__iter, u64 slice) __ksym;

char LICENSE[] SEC("license") = "GPL";

/* Keeps clang from dropping a mask it proves redundant: the verifier needs it to bound an index
 * (clang compares the 32-bit value, and the verifier does not carry that bound to the 64-bit
 * register the address is computed from). */
#define BOUND(i, n)                                                                                \
    ({                                                                                             \
        u32 __v = (i);                                                                             \
        asm volatile("" : "+r"(__v));                                                              \
        __v &((n)-1);                                                                              \
    })

/* Tunables and state in global data (mmapped by the loader). */
__u64 slice_owner_ns = 10000000; /* an owner's slice at home */
__u64 slice_visit_ns = 3000000;  /* a visitor's slice: short, so it rechecks home often */
__u64 starve_ns = 2000000000;    /* a wait this long is taken by any CPU of the thread's set */
__u32 stall;                     /* test-only fault: dispatch nothing, the watchdog ejects us */
__u32 n_parts;                   /* partitions set by userspace */
struct sa_sched_exit exit_info;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, SA_SCHED_MAX_THREADS);
    __type(key, u32);
    __type(value, struct sa_sched_thread);
} threads SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, SA_SCHED_MAX_THREADS);
    __type(key, u32);
    __type(value, struct sa_sched_stats);
} stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SCHED_MAX_CPUS);
    __type(key, u32);
    __type(value, u32);
} cpu_part SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SCHED_MAX_PARTS);
    __type(key, u32);
    __type(value, struct sa_sched_part);
} parts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SCHED_MAX_PARTS);
    __type(key, u32);
    __type(value, struct sa_sched_order);
} order SEC(".maps");

/* rank: home * SA_SCHED_MAX_PARTS + part -> part's place in home's order (0 nearest), or
 * SA_SCHED_NONE (home itself, or no such partition). */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SCHED_MAX_PARTS *SA_SCHED_MAX_PARTS);
    __type(key, u32);
    __type(value, u32);
} rank SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SCHED_MAX_PARTS);
    __type(key, u32);
    __type(value, u64);
} part_vtime SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SCHED_MAX_CPUS);
    __type(key, u32);
    __type(value, struct sa_sched_running);
} running SEC(".maps");

/* held: per CPU, 1 while a higher class (fair, RT, DL) holds it (cpu_release to cpu_acquire). */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, SA_SCHED_MAX_CPUS);
    __type(key, u32);
    __type(value, u32);
} held SEC(".maps");

static u32 part_of(s32 cpu)
{
    u32 key = cpu;
    u32 *part = bpf_map_lookup_elem(&cpu_part, &key);

    return part && *part < SA_SCHED_MAX_PARTS ? *part : SA_SCHED_NONE;
}

static struct sa_sched_stats *stats_of(struct task_struct *p, const struct sa_sched_thread *t)
{
    u32 tid = p->pid;
    struct sa_sched_stats *st = bpf_map_lookup_elem(&stats, &tid);

    if (!st) {
        struct sa_sched_stats zero = {.part = SA_SCHED_NONE, .vm = t->vm};

        bpf_map_update_elem(&stats, &tid, &zero, BPF_NOEXIST);
        st = bpf_map_lookup_elem(&stats, &tid);
    }
    return st;
}

/* Whether cpu is in the kernel's idle mask now; the mask is left as it was (nothing claimed). */
static bool cpu_is_idle(s32 cpu)
{
    const struct cpumask *idle = scx_bpf_get_idle_cpumask();
    bool is_idle = bpf_cpumask_test_cpu(cpu, idle);

    scx_bpf_put_idle_cpumask(idle);
    return is_idle;
}

/* Whether a higher class holds cpu: it took the CPU from a thread of ours (cpu_release, until
 * cpu_acquire), or the CPU is busy and runs no thread of ours. The kernel calls cpu_release
 * only when the higher class preempts sched_ext; a fair thread that wakes on an idle CPU takes
 * it without one. A thread sent to the own queue of such a CPU stayed there behind that fair
 * work while another CPU went idle: in the 2-node host, 120 ms of a 150-ms wait behind a shell
 * on A's home CPU, with the CPU the thread had come from idle. A CPU just claimed for a thread
 * and not yet running it reads as held too; a waiter then waits in home's queue. */
static bool cpu_held(s32 cpu)
{
    u32 key = cpu;
    u32 *h = bpf_map_lookup_elem(&held, &key);
    struct sa_sched_running *r;

    if (h && *h)
        return true;
    r = bpf_map_lookup_elem(&running, &key);
    if (!r || r->tid)
        return false;
    return !cpu_is_idle(cpu);
}

/* One pass over a partition's CPUs p may use (bpf_loop callback), by mode. */
enum scan_mode {
    SCAN_CLAIM_IDLE, /* claim an idle one */
    SCAN_VISITOR,    /* find one a visitor runs on */
    SCAN_KICK_IDLE,  /* wake every idle one (to dispatch from the partition's queue) */
    SCAN_WAIT_ON,    /* the one to wait on: a visitor's, else one no higher class holds */
    SCAN_PEEK_IDLE,  /* find an idle one, leaving it idle (not claimed) */
};

struct scan {
    struct task_struct *p;
    u32 part;
    u32 kick;
    s32 found;
    s32 any; /* SCAN_WAIT_ON: the first one p may use */
};

static long scan_cpu(u32 i, void *data)
{
    struct scan *s = data;
    struct sa_sched_part *pc;
    struct sa_sched_running *r;
    u32 key = s->part, cpu;

    pc = bpf_map_lookup_elem(&parts, &key);
    if (!pc || i >= pc->n || i >= SA_SCHED_MAX_PART_CPUS)
        return 1;
    cpu = pc->cpus[BOUND(i, SA_SCHED_MAX_PART_CPUS)]; /* the mask keeps the verifier sure */
    if (cpu >= SA_SCHED_MAX_CPUS || !bpf_cpumask_test_cpu(cpu, s->p->cpus_ptr))
        return 0;
    if (s->kick == SCAN_CLAIM_IDLE) {
        if (scx_bpf_test_and_clear_cpu_idle(cpu)) {
            s->found = cpu;
            return 1;
        }
        return 0;
    }
    if (s->kick == SCAN_KICK_IDLE) {
        scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
        return 0;
    }
    if (s->kick == SCAN_PEEK_IDLE) {
        if (!cpu_is_idle(cpu))
            return 0;
        s->found = cpu;
        return 1;
    }
    r = bpf_map_lookup_elem(&running, &cpu);
    if (r && r->visitor) {
        s->found = cpu;
        return 1;
    }
    if (s->kick == SCAN_WAIT_ON) {
        if (s->any < 0)
            s->any = cpu;
        if (s->found < 0 && !cpu_held(cpu))
            s->found = cpu; /* go on looking for a visitor's */
    }
    return 0;
}

static s32 scan_part(struct task_struct *p, u32 part, u32 kick)
{
    struct scan s = {.p = p, .part = part, .kick = kick, .found = -1, .any = -1};
    struct sa_sched_part *pc = bpf_map_lookup_elem(&parts, &part);

    if (!pc || !pc->n)
        return -1;
    bpf_loop(SA_SCHED_MAX_PART_CPUS, scan_cpu, &s, 0);
    return s.found >= 0 ? s.found : s.any;
}

/* The home CPU a thread that must wait waits on (its runqueue): here if that is one in its own
 * set, else one a visitor runs on, else one no higher class holds, else any in its set; -1 if
 * its set has none of home's CPUs. Waiting on a home CPU's runqueue is what lets that CPU's ext
 * server run it while the fair class holds the CPU. */
static s32 home_cpu(struct task_struct *p, const struct sa_sched_thread *t, s32 here)
{
    if (here >= 0 && part_of(here) == t->home && bpf_cpumask_test_cpu(here, p->cpus_ptr))
        return here;
    return scan_part(p, t->home, SCAN_WAIT_ON);
}

/* An idle home CPU p may use, prev first. */
static s32 idle_at_home(struct task_struct *p, const struct sa_sched_thread *t, s32 prev)
{
    if (prev >= 0 && part_of(prev) == t->home && bpf_cpumask_test_cpu(prev, p->cpus_ptr) &&
        scx_bpf_test_and_clear_cpu_idle(prev))
        return prev;
    return scan_part(p, t->home, SCAN_CLAIM_IDLE);
}

struct away {
    struct task_struct *p;
    u32 home;
    u32 reach;
    s32 found;
};

static long away_part(u32 i, void *data)
{
    struct away *a = data;
    struct sa_sched_order *o;
    u32 key = a->home, part;

    o = bpf_map_lookup_elem(&order, &key);
    if (!o || i >= o->n || i >= a->reach || i >= SA_SCHED_MAX_PARTS)
        return 1;
    part = o->parts[BOUND(i, SA_SCHED_MAX_PARTS)];
    a->found = scan_part(a->p, part, SCAN_CLAIM_IDLE);
    return a->found >= 0;
}

/* An idle CPU p may use in another partition, nearest first, within its reach. */
static s32 idle_away(struct task_struct *p, const struct sa_sched_thread *t)
{
    struct away a = {.p = p, .home = t->home, .reach = t->reach, .found = -1};

    if (!t->reach)
        return -1;
    bpf_loop(SA_SCHED_MAX_PARTS, away_part, &a, 0);
    return a.found;
}

/* Whether a thread homed by t may run on partition part: home, or within its reach. */
static bool may_run_on(const struct sa_sched_thread *t, u32 part)
{
    u32 key, *r;

    if (part == t->home)
        return true;
    if (t->home >= SA_SCHED_MAX_PARTS || part >= SA_SCHED_MAX_PARTS)
        return false;
    key = t->home * SA_SCHED_MAX_PARTS + part;
    r = bpf_map_lookup_elem(&rank, &key);
    return r && *r < t->reach;
}

/* Pulling a visitor onto an idle CPU (dispatch): the first thread queued at a partition, in
 * vtime order, that may come here. */
struct pull {
    s32 cpu;
    u32 part; /* the CPU's */
    bool done;
};

static long pull_from(u32 i, void *data)
{
    struct pull *pl = data;
    struct sa_sched_order *o;
    struct bpf_iter_scx_dsq it;
    struct task_struct *p;
    u32 key = pl->part, from, n = 0;

    o = bpf_map_lookup_elem(&order, &key);
    if (!o || i >= o->n || i >= SA_SCHED_MAX_PARTS)
        return 1;
    from = o->parts[BOUND(i, SA_SCHED_MAX_PARTS)];
    if (scx_bpf_dsq_nr_queued(from) <= 0)
        return 0;
    bpf_iter_scx_dsq_new(&it, from, 0);
    while ((p = bpf_iter_scx_dsq_next(&it))) {
        u32 tid = p->pid;
        struct sa_sched_thread *t = bpf_map_lookup_elem(&threads, &tid);

        if (++n > 32)
            break;
        if (!t || !may_run_on(t, pl->part) || !bpf_cpumask_test_cpu(pl->cpu, p->cpus_ptr))
            continue;
        scx_bpf_dsq_move_set_slice(&it, slice_visit_ns);
        if (scx_bpf_dsq_move(&it, p, SCX_DSQ_LOCAL, 0)) {
            pl->done = true;
            break;
        }
    }
    bpf_iter_scx_dsq_destroy(&it);
    return pl->done;
}

/* Owners first: if a visitor runs on cpu, it is kicked off (p, an owner there, waits for it). */
static void kick_visitor(struct task_struct *p, struct sa_sched_stats *st, s32 cpu)
{
    struct sa_sched_running *r = bpf_map_lookup_elem(&running, &cpu);
    struct sa_sched_stats *vs;
    u32 vtid;

    if (!r || !r->visitor)
        return;
    vtid = r->tid;
    vs = bpf_map_lookup_elem(&stats, &vtid);
    r->visitor = 0;
    if (vs) {
        vs->kicked = 1;
        __sync_fetch_and_add(&vs->preempted, 1);
    }
    if (st)
        __sync_fetch_and_add(&st->preempts, 1);
    scx_bpf_kick_cpu(cpu, SCX_KICK_PREEMPT);
}

/* Starving (dispatch): the first thread queued at another partition that has waited at least
 * starve_ns and may run on this CPU by its own set, whatever its reach (if it has any) and that
 * partition's owners. The kernel's watchdog ejects the scheduler at timeout_ms; the fair class
 * holding every CPU of a home, and owners first elsewhere, must not take a thread that far. A
 * thread of reach 0 (strict, softness 0) is never taken: it never leaves home, and its home
 * CPUs' ext server (7.x) runs it while the fair class holds them. */
struct starve {
    s32 cpu;
    u32 part; /* the CPU's own (its queue comes next anyway) */
    u64 now;
    bool done;
};

static long starve_from(u32 i, void *data)
{
    struct starve *sv = data;
    struct bpf_iter_scx_dsq it;
    struct task_struct *p;
    u32 n = 0;

    if (i >= n_parts || i >= SA_SCHED_MAX_PARTS)
        return 1;
    if (i == sv->part || scx_bpf_dsq_nr_queued(i) <= 0)
        return 0;
    bpf_iter_scx_dsq_new(&it, i, 0);
    while ((p = bpf_iter_scx_dsq_next(&it))) {
        u32 tid = p->pid;
        struct sa_sched_stats *st = bpf_map_lookup_elem(&stats, &tid);
        struct sa_sched_thread *t = bpf_map_lookup_elem(&threads, &tid);

        if (++n > 4)
            break;
        if (!st || !t || !t->reach || !st->queued_at || sv->now < st->queued_at + starve_ns ||
            !bpf_cpumask_test_cpu(sv->cpu, p->cpus_ptr))
            continue;
        scx_bpf_dsq_move_set_slice(&it, slice_visit_ns);
        if (scx_bpf_dsq_move(&it, p, SCX_DSQ_LOCAL, 0)) {
            sv->done = true;
            break;
        }
    }
    bpf_iter_scx_dsq_destroy(&it);
    return sv->done;
}

/* Queues p in partition queue's dispatch queue in vtime order: a thread asleep long gets at
 * most one slice of credit against the partition's owners. */
static void queue_vtime(struct task_struct *p, struct sa_sched_stats *st, u32 queue, u64 enq_flags)
{
    u64 vt = st ? st->vtime : 0, *pv = bpf_map_lookup_elem(&part_vtime, &queue);

    if (pv && vt + slice_owner_ns < *pv)
        vt = *pv - slice_owner_ns;
    if (st)
        st->vtime = vt;
    scx_bpf_dsq_insert_vtime(p, queue, slice_owner_ns, vt, enq_flags);
}

/* A thread the kernel may not move now (preempted inside a migrate-disabled section, such as
 * a seccomp filter on a syscall): it runs next where it is. Enqueue sees it only with
 * SCX_OPS_ENQ_MIGRATION_DISABLED (the loader's choice of ops). The thread running this
 * callback (the one preempted, at its own enqueue) has one more: the BPF program's entry
 * disables migration for its run (on kernels with preemptible RCU, Debian's among them; on
 * others this reads such a thread as movable, and the kernel keeps it where it is). */
static bool migration_off(struct task_struct *p)
{
    u32 n;

    if (!bpf_core_field_exists(p->migration_disabled))
        return false;
    n = p->migration_disabled;
    if ((u64)p == bpf_get_current_task() && n > 0)
        n--;
    return n > 0;
}

SEC("struct_ops/sa_select_cpu")
s32 BPF_PROG(sa_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
    u32 tid = p->pid;
    struct sa_sched_thread *t;
    s32 cpu;

    if (stall)
        return prev_cpu;
    t = bpf_map_lookup_elem(&threads, &tid);
    if (!t) {
        bool idle = false;

        cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &idle);
        if (idle)
            scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_owner_ns, 0);
        return cpu;
    }
    cpu = idle_at_home(p, t, prev_cpu);
    if (cpu >= 0) {
        scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_owner_ns, 0);
        return cpu;
    }
    cpu = idle_away(p, t);
    if (cpu >= 0) {
        scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_visit_ns, 0);
        return cpu;
    }
    /* It waits at home (enqueue queues it there): on a home CPU's runqueue. */
    cpu = home_cpu(p, t, prev_cpu);
    return cpu >= 0 ? cpu : prev_cpu;
}

/* Onto cpu's own queue (a CPU claimed idle), and wake it. */
static void place_on(struct task_struct *p, s32 cpu, u64 slice, u64 enq_flags)
{
    scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | cpu, slice, enq_flags);
    scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
}

/* Whether p, a thread homed by t, may stay on cpu of partition part as a visitor: part is not
 * its home, it is within its reach and its own set has cpu, and no owner kicked it off
 * (st->kicked). The rule of enqueue's "visitor stays" and of dispatch's keep_visitor. */
static bool may_stay(const struct sa_sched_thread *t, const struct sa_sched_stats *st,
                     struct task_struct *p, s32 cpu, u32 part)
{
    if (cpu < 0 || part == t->home || part == SA_SCHED_NONE || (st && st->kicked))
        return false;
    return may_run_on(t, part) && bpf_cpumask_test_cpu(cpu, p->cpus_ptr);
}

/* Enqueue, a thread the kernel may not move now (migration_off): it may only run where it is
 * until it leaves that section. At home: in home's queue by vtime like any owner (that CPU
 * takes it at its turn; the others pass it by), or now if that CPU is idle. Left to the
 * kernel, it would go straight back onto that CPU's own queue with a fresh slice, ahead of the
 * owners waiting in home's queue, as often as it is preempted there: an owner beside it
 * starved 31 s on one home CPU and the watchdog ejected the scheduler (test-sched-home.py,
 * strict). Away: on that CPU's own queue. */
static void enqueue_unmovable(struct task_struct *p, const struct sa_sched_thread *t,
                              struct sa_sched_stats *st, s32 here, u64 enq_flags)
{
    if (here >= 0 && part_of(here) == t->home) {
        if (scx_bpf_test_and_clear_cpu_idle(here)) {
            place_on(p, here, slice_owner_ns, enq_flags);
            return;
        }
        queue_vtime(p, st, t->home, enq_flags);
        kick_visitor(p, st, here);
        return;
    }
    scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_visit_ns, enq_flags);
}

/* Enqueue, the last step: no idle CPU takes p, so it waits at home, on the runqueue of a home
 * CPU (home_cpu). Already on one: in home's queue, in vtime order (a thread asleep long gets
 * at most one slice of credit). On a CPU elsewhere (a visitor sent home, a thread switched in
 * away): onto a home CPU's own queue, which moves it to that CPU's runqueue; it runs there
 * next. But if it may come back here (reach, own set) and either a higher class holds every
 * home CPU it may use, or a higher class just took this CPU from it (a visitor, REENQ: often
 * an emulator thread's blip): in home's queue, from where a home CPU takes it at its next
 * turn, or this CPU as soon as the higher class lets go (a pull when no owner waits here, or
 * starving). A held CPU's own queue would keep it from every other CPU, and a home CPU's own
 * queue would keep a visitor preempted for microseconds waiting a whole owner's slice. A set
 * without a home CPU: it waits in the queue of the partition it is on. Owners first: a visitor
 * on a home CPU it may use leaves now. */
static void wait_at_home(struct task_struct *p, const struct sa_sched_thread *t,
                         struct sa_sched_stats *st, s32 here, bool reenq, u64 enq_flags)
{
    u32 home = t->home, queue;
    s32 wait_cpu = home_cpu(p, t, here), cpu;

    if (wait_cpu >= 0 && wait_cpu != here &&
        !((cpu_held(wait_cpu) || reenq) && here >= 0 && may_run_on(t, part_of(here)) &&
          bpf_cpumask_test_cpu(here, p->cpus_ptr))) {
        scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL_ON | wait_cpu, slice_owner_ns, enq_flags);
        kick_visitor(p, st, wait_cpu);
        return;
    }
    queue = wait_cpu >= 0 ? home : part_of(here);
    if (queue >= SA_SCHED_MAX_PARTS)
        queue = home;
    queue_vtime(p, st, queue, enq_flags);

    cpu = scan_part(p, home, SCAN_VISITOR);
    if (cpu < 0)
        /* None: make sure an idle home CPU (one that went idle since the scan) dispatches. */
        scan_part(p, home, SCAN_KICK_IDLE);
    else
        kick_visitor(p, st, cpu);
}

/* A thread becomes runnable, or its slice ended, or a higher class took its CPU (REENQ). In
 * order: a thread the kernel may not move; an idle CPU at home; at home with nothing else to
 * run there, it goes on; a visitor at its slice end stays while it may; an idle CPU away,
 * nearest first, within its reach; else it waits at home. */
SEC("struct_ops/sa_enqueue")
void BPF_PROG(sa_enqueue, struct task_struct *p, u64 enq_flags)
{
    u32 tid = p->pid;
    struct sa_sched_thread *t;
    struct sa_sched_stats *st;
    s32 cpu, here;
    bool reenq, stays;

    if (stall) {
        scx_bpf_dsq_insert(p, SA_SCHED_DSQ_STALL, slice_owner_ns, enq_flags);
        return;
    }
    t = bpf_map_lookup_elem(&threads, &tid);
    if (!t) {
        scx_bpf_dsq_insert(p, SA_SCHED_DSQ_OTHERS, slice_owner_ns, enq_flags);
        return;
    }
    st = stats_of(p, t);
    if (st && !st->queued_at)
        st->queued_at = bpf_ktime_get_ns();
    here = scx_bpf_task_cpu(p);

    if (migration_off(p)) {
        enqueue_unmovable(p, t, st, here, enq_flags);
        return;
    }
    /* Home first, if a CPU there is idle. */
    cpu = idle_at_home(p, t, here);
    if (cpu >= 0) {
        place_on(p, cpu, slice_owner_ns, enq_flags);
        return;
    }
    /* Placed again because a higher class took its CPU (cpu_release): it does not stay there. */
    reenq = enq_flags & SCX_ENQ_REENQ;
    /* At home with nothing else to run here: go on. */
    if ((enq_flags & SCX_ENQ_LAST) && !reenq && here >= 0 && part_of(here) == t->home &&
        bpf_cpumask_test_cpu(here, p->cpus_ptr)) {
        scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_owner_ns, enq_flags);
        return;
    }
    /* A visitor stays while no owner there waits: none queued for the partition or already
     * moved to this CPU. An owner's kick counts once. */
    stays = !(enq_flags & SCX_ENQ_WAKEUP) && !reenq && here >= 0 &&
            may_stay(t, st, p, here, part_of(here));
    if (st)
        st->kicked = 0;
    if (stays && scx_bpf_dsq_nr_queued(part_of(here)) == 0 &&
        scx_bpf_dsq_nr_queued(SCX_DSQ_LOCAL) == 0) {
        scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, slice_visit_ns, enq_flags);
        return;
    }
    cpu = idle_away(p, t);
    if (cpu >= 0) {
        place_on(p, cpu, slice_visit_ns, enq_flags);
        return;
    }
    wait_at_home(p, t, st, here, reenq, enq_flags);
}

/* A visitor at the end of its slice on cpu (of partition part), with nothing else for cpu to
 * run: it goes on with a new slice while it may stay (may_stay), unless a CPU of its home it
 * may use is idle (then enqueue sends it home). Left to SCX_ENQ_LAST, the kernel would first
 * switch cpu to idle and enqueue would put the visitor straight back: two context switches per
 * visitor slice, which a trace in the TCG test host showed costing 0.2 ms of every 3-4 ms, and
 * a CPU that looks idle meanwhile draws other threads onto it. */
static bool keep_visitor(struct task_struct *prev, s32 cpu, u32 part)
{
    u32 tid = prev->pid;
    struct sa_sched_thread *t = bpf_map_lookup_elem(&threads, &tid);

    if (!t || !may_stay(t, bpf_map_lookup_elem(&stats, &tid), prev, cpu, part))
        return false;
    if (scan_part(prev, t->home, SCAN_PEEK_IDLE) >= 0)
        return false;
    prev->scx.slice = slice_visit_ns;
    return true;
}

SEC("struct_ops/sa_dispatch")
void BPF_PROG(sa_dispatch, s32 cpu, struct task_struct *prev)
{
    u32 part;

    if (stall)
        return;
    part = part_of(cpu);
    {
        struct starve sv = {.cpu = cpu, .part = part, .now = bpf_ktime_get_ns()};

        bpf_loop(SA_SCHED_MAX_PARTS, starve_from, &sv, 0);
        if (sv.done)
            return;
    }
    if (part != SA_SCHED_NONE && scx_bpf_dsq_move_to_local(part))
        return;
    if (scx_bpf_dsq_move_to_local(SA_SCHED_DSQ_OTHERS))
        return;
    /* No owner waits. The one that ran (prev), if an owner still runnable, goes on with a new
     * slice: the kernel keeps a prev with slice left. (Left to SCX_ENQ_LAST instead, it would
     * end the turn the kernel's ext server gives this CPU while the fair class holds it.) Else a
     * visitor from the nearest partition where one may come here; else the visitor that ran
     * goes on (keep_visitor). */
    if (prev && ((prev->scx.flags & SCX_TASK_QUEUED) || prev->__state == 0 /* running */)) {
        u32 tid = prev->pid;
        struct sa_sched_thread *t = bpf_map_lookup_elem(&threads, &tid);

        if (t && t->home == part) {
            if (prev->scx.flags & SCX_TASK_QUEUED)
                prev->scx.slice = slice_owner_ns;
            return;
        }
    }
    if (part != SA_SCHED_NONE) {
        struct pull pl = {.cpu = cpu, .part = part};

        bpf_loop(SA_SCHED_MAX_PARTS, pull_from, &pl, 0);
        if (!pl.done && prev && (prev->scx.flags & SCX_TASK_QUEUED))
            keep_visitor(prev, cpu, part);
    }
}

SEC("struct_ops/sa_runnable")
void BPF_PROG(sa_runnable, struct task_struct *p, u64 enq_flags)
{
    u32 tid = p->pid;
    struct sa_sched_thread *t = bpf_map_lookup_elem(&threads, &tid);
    struct sa_sched_stats *st;

    if (!t)
        return;
    st = stats_of(p, t);
    if (st)
        st->queued_at = bpf_ktime_get_ns();
}

SEC("struct_ops/sa_running")
void BPF_PROG(sa_running, struct task_struct *p)
{
    u32 tid = p->pid, part;
    s32 cpu = scx_bpf_task_cpu(p);
    struct sa_sched_thread *t = bpf_map_lookup_elem(&threads, &tid);
    struct sa_sched_running *r;
    struct sa_sched_stats *st;
    u64 now = bpf_ktime_get_ns(), *pv;
    bool visitor;

    if (!t)
        return;
    st = stats_of(p, t);
    if (!st)
        return;
    part = part_of(cpu);
    visitor = part != t->home;
    if (st->queued_at && now > st->queued_at)
        st->wait_ns += now - st->queued_at;
    st->queued_at = 0;
    st->started_at = now;
    st->runs++;
    if (visitor && st->part != part)
        st->visits++;
    st->cpu = cpu;
    st->part = part;
    st->vm = t->vm;
    r = bpf_map_lookup_elem(&running, &cpu);
    if (r) {
        r->tid = tid;
        r->visitor = visitor;
    }
    if (!visitor) {
        u32 home = t->home;

        pv = bpf_map_lookup_elem(&part_vtime, &home);
        if (pv && *pv < st->vtime)
            *pv = st->vtime;
    }
}

SEC("struct_ops/sa_stopping")
void BPF_PROG(sa_stopping, struct task_struct *p, bool runnable)
{
    u32 tid = p->pid;
    struct sa_sched_stats *st = bpf_map_lookup_elem(&stats, &tid);
    struct sa_sched_running *r;
    u64 now = bpf_ktime_get_ns(), used;
    u32 cpu, weight;

    if (!st || !st->started_at)
        return;
    used = now > st->started_at ? now - st->started_at : 0;
    st->started_at = 0;
    if (st->part < SA_SCHED_MAX_PARTS)
        st->run_ns[BOUND(st->part, SA_SCHED_MAX_PARTS)] += used;
    weight = p->scx.weight ? p->scx.weight : 100;
    st->vtime += used * 100 / weight;
    cpu = st->cpu;
    r = bpf_map_lookup_elem(&running, &cpu);
    if (r && r->tid == tid) {
        r->tid = 0;
        r->visitor = 0;
    }
    if (runnable && !st->queued_at)
        st->queued_at = now;
}

SEC("struct_ops/sa_quiescent")
void BPF_PROG(sa_quiescent, struct task_struct *p, u64 deq_flags)
{
    u32 tid = p->pid;
    struct sa_sched_stats *st = bpf_map_lookup_elem(&stats, &tid);

    if (st)
        st->queued_at = 0;
}

/* A higher class takes cpu: the threads waiting on its local queue (the one it preempted first)
 * are placed again by enqueue (SCX_ENQ_REENQ): an idle CPU at home or within reach, else home's
 * queue (a visitor that may come back here: taken by a home CPU or by this one, whichever is
 * first). Left there, they would wait for the fair class to let go. */
SEC("struct_ops/sa_cpu_release")
void BPF_PROG(sa_cpu_release, s32 cpu, struct scx_cpu_release_args *args)
{
    u32 key = cpu, *h = bpf_map_lookup_elem(&held, &key);

    if (h)
        *h = 1;
    scx_bpf_reenqueue_local();
}

SEC("struct_ops/sa_cpu_acquire")
void BPF_PROG(sa_cpu_acquire, s32 cpu, struct scx_cpu_acquire_args *args)
{
    u32 key = cpu, *h = bpf_map_lookup_elem(&held, &key);

    if (h)
        *h = 0;
}

SEC("struct_ops/sa_init")
s32 BPF_PROG(sa_init)
{
    s32 err;

    /* Also makes clang emit struct cpumask whole (see its declaration). */
    if (!bpf_core_type_exists(struct cpumask))
        return -22;
    for (u32 i = 0; i < SA_SCHED_MAX_PARTS; i++) {
        err = scx_bpf_create_dsq(i, -1);
        if (err)
            return err;
    }
    err = scx_bpf_create_dsq(SA_SCHED_DSQ_OTHERS, -1);
    if (err)
        return err;
    return scx_bpf_create_dsq(SA_SCHED_DSQ_STALL, -1);
}

SEC("struct_ops/sa_exit")
void BPF_PROG(sa_exit, struct scx_exit_info *ei)
{
    exit_info.exit_cpu = ei->exit_cpu;
    exit_info.exit_code = ei->exit_code;
    bpf_probe_read_kernel_str(exit_info.reason, sizeof(exit_info.reason), ei->reason);
    bpf_probe_read_kernel_str(exit_info.msg, sizeof(exit_info.msg), ei->msg);
    if (bpf_core_field_exists(ei->dump) && ei->dump)
        bpf_probe_read_kernel_str(exit_info.dump, sizeof(exit_info.dump), ei->dump);
    /* Last: userspace reads the strings once it sees a kind. */
    exit_info.kind = ei->kind ? ei->kind : 1;
}

/* The ops, with extra flags. ENQ_LAST: a thread at the end of its slice with nothing else to
 * run is enqueued, not kept running by the kernel wherever it is (a thread away from home would
 * stay there). timeout_ms: the kernel's longest. In partial mode the fair class holds a CPU for
 * as long as it has a runnable task, and a thread preempted while it could not migrate waits
 * for that CPU (without ENQ_MIGRATION_DISABLED, on its own queue, where nothing here can move
 * it: the kernel's dump of the stall in the 2-node host showed "CPU 1/TCG" on CPU 0's local
 * queue behind a fair taskset, 6.2 s, and 580 such enqueues in 10 s). 5000 ejected the
 * scheduler for that. */
#define SOFTAFF_OPS(extra_flags)                                                                   \
    {                                                                                              \
        .select_cpu = (void *)sa_select_cpu, .enqueue = (void *)sa_enqueue,                        \
        .dispatch = (void *)sa_dispatch, .runnable = (void *)sa_runnable,                          \
        .running = (void *)sa_running, .stopping = (void *)sa_stopping,                            \
        .quiescent = (void *)sa_quiescent, .init = (void *)sa_init, .exit = (void *)sa_exit,       \
        .cpu_acquire = (void *)sa_cpu_acquire, .cpu_release = (void *)sa_cpu_release,              \
        .flags = SCX_OPS_SWITCH_PARTIAL | SCX_OPS_ENQ_LAST | (extra_flags), .timeout_ms = 30000,   \
        .name = "softaff",                                                                         \
    }

/* ENQ_MIGRATION_DISABLED: enqueue also places a thread preempted where it may not migrate (see
 * migration_off), which the kernel would otherwise put back on its CPU's own queue. */
SEC(".struct_ops")
struct sched_ext_ops softaff_ops = SOFTAFF_OPS(SCX_OPS_ENQ_MIGRATION_DISABLED);

/* The same ops for kernels without SCX_OPS_ENQ_MIGRATION_DISABLED (older ones): the loader
 * creates only the one the running kernel takes. */
SEC(".struct_ops")
struct sched_ext_ops softaff_ops_plain = SOFTAFF_OPS(0);
