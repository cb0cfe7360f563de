/* softaff — what sense.bpf.c and host/sense.c share: the map values and the ring buffer's
 * record, in fixed-width types both sides agree on. */
#pragma once

#include <linux/types.h>

/* One tracked thread's totals since it was tracked (ns) and its current run's start. */
struct sa_sense_thread {
    __u64 run_ns;
    __u64 delay_ns;
    __u64 oncpu_ts; /* 0: not on a CPU since tracked (its first run is not counted) */
    __u32 last_cpu;
    __u32 pad;
};

/* One CPU's window; written only by that CPU's scheduler events (and the watched flag by the
 * daemon). */
struct sa_sense_cpu {
    __u32 watched;
    __u32 fired; /* this window already made its wait event */
    __u64 window_start;
    __u64 wait_ns;
    __u64 run_ns;     /* the run of tracked threads not ignored, in this window */
    __u32 busy;       /* their run passed the threshold in this window or in every one since it
                         did (the run event is made when this is set) */
    __u32 place;      /* the partition the CPU is in (SA_SENSE_NOWHERE: none given) */
    __u64 visitor_ns; /* the run of tracked threads ignored here (visitors) in this window */
};

/* One CPU's idle time: the total of its finished idle stretches and when the current one began
 * (0: not idle now); written only by that CPU's switches. seen: a switch happened since load. */
struct sa_sense_idle {
    __u64 idle_ns;
    __u64 idle_since;
    __u32 seen;
    __u32 visitor_now; /* the running thread is a visitor's here (ignored at this CPU's place) */
    __u64 visitor_ns;  /* run of visitors' threads (vCPUs and the rest of their QEMU) here */
    __u64 since;       /* when the running thread was switched in */
};

#define SA_SENSE_WAIT 0 /* threads not ignored waited past the threshold in a window */
#define SA_SENSE_RUN 1  /* they ran past it, after a window in which they did not */

struct sa_sense_record {
    __u32 cpu;
    __u32 tid;
    __u64 wait_ns; /* SA_SENSE_WAIT: the window's wait; SA_SENSE_RUN: its run */
    __u64 when_ns;
    __u32 kind;
    __u32 pad;
};

/* An ignored thread's value in the ignored map is the place where it is not ignored (its
 * home: there a visitor is an owner), or this for everywhere. */
#define SA_SENSE_NOWHERE 0xffffffffu

/* The maps' sizes: tracked threads (vCPUs), ignored threads, and runnable threads whose wait
 * is being timed. */
#define SA_SENSE_MAX_TRACKED 16384
#define SA_SENSE_MAX_IGNORED 16384
#define SA_SENSE_MAX_QUEUED 32768
#define SA_SENSE_MAX_CPUS 4096
