/* softaff — the maps shared by sched/bpf/sched.bpf.c and sched/sched.c: their value layouts and
 * limits. Plain fixed-width types only: both the BPF target and the host compiler read this. */
#pragma once

#define SA_SCHED_MAX_CPUS 1024
#define SA_SCHED_MAX_PARTS 16
#define SA_SCHED_MAX_PART_CPUS 256
#define SA_SCHED_MAX_THREADS 8192
#define SA_SCHED_NONE 0xffffffffu

/* Dispatch queues: one per partition (ids 0 .. SA_SCHED_MAX_PARTS - 1, vtime ordered), one for
 * tasks switched to SCHED_EXT without an entry in the threads map, one the stall fault uses. */
#define SA_SCHED_DSQ_OTHERS 64
#define SA_SCHED_DSQ_STALL 65

/* threads: tid -> where it lives and how far it may go. Written by userspace only. */
struct sa_sched_thread {
    __u32 home;  /* partition */
    __u32 reach; /* how many partitions of home's distance order it may visit: 0 = home only */
    __u32 vm;    /* opaque to the scheduler; reported with the counters */
    __u32 flags; /* reserved, 0 */
};

/* parts: partition -> its CPUs. order: partition -> the other partitions, nearest first. */
struct sa_sched_part {
    __u32 n;
    __u32 cpus[SA_SCHED_MAX_PART_CPUS];
};

struct sa_sched_order {
    __u32 n;
    __u32 parts[SA_SCHED_MAX_PARTS];
};

/* stats: tid -> counters and the scheduler's own state for that thread. Written by BPF only. */
struct sa_sched_stats {
    __u64 run_ns[SA_SCHED_MAX_PARTS]; /* run time per partition of the CPU it ran on */
    __u64 wait_ns;                    /* runnable but not running (queued) */
    __u64 runs;                       /* times it started running */
    __u64 visits;                     /* arrivals on a partition other than home */
    __u64 preempts;                   /* visitors it kicked off a home CPU */
    __u64 preempted;                  /* times it was kicked off as a visitor */
    __u64 vtime;                      /* its virtual time among the owners of its home */
    __u64 queued_at;                  /* when it became runnable, 0 while running or asleep */
    __u64 started_at;                 /* when it started running */
    __u32 cpu;                        /* CPU of the last run */
    __u32 part;                       /* partition of the last run (SA_SCHED_NONE: none yet) */
    __u32 vm;
    __u32 kicked; /* kicked off as a visitor: its next enqueue does not stay there */
};

/* running: per CPU, who runs there now (an ext task) and whether it is a visitor. */
struct sa_sched_running {
    __u32 tid;
    __u32 visitor;
};

/* Why the scheduler stopped: copied from the kernel's scx_exit_info in ops.exit. */
#define SA_SCHED_REASON_LEN 128
#define SA_SCHED_MSG_LEN 256
/* The start of the kernel's dump of its state at an error exit (each CPU's runqueue, each
 * runnable ext task: where it is queued, since when): what a stall is diagnosed from. */
#define SA_SCHED_DUMP_LEN 16384
struct sa_sched_exit {
    __s32 kind; /* enum scx_exit_kind, 0 while running */
    __s32 exit_cpu;
    __s64 exit_code;
    char reason[SA_SCHED_REASON_LEN];
    char msg[SA_SCHED_MSG_LEN];
    char dump[SA_SCHED_DUMP_LEN];
};
