/* softaffd — each partition's load for status and metrics (daemon/partition-load.c): the tick's
 * split (owners, visitors, unmanaged; policies/sa-policy.h) averaged over about the last
 * 2 seconds (SA_POLICY_LOAD_WINDOW_S), and its running totals in CPU-seconds.
 *
 * Ticks differ in length: a regular one lasts interval_ms, an event tick right after another
 * may last 20 ms. The last tick alone says little of a partition: over 20 ms, a shell that ran
 * for 15 of them reads as 0.75 CPU. So the average weighs each tick by its length (an
 * exponential average with time constant 2 s), and the totals (busy CPU-seconds
 * by kind, and the seconds the ticks covered) give any window's exact average as the difference
 * of two readings, as /proc/stat's do. The policy decides on each tick's own figures; only a
 * forced retreat counts the host's (unmanaged) load at most at this average.
 * No I/O here: the load knows only what it was fed. */
#pragma once

#include "sa-policy.h"

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
    double owners, visitors, unmanaged;       /* CPUs, averaged over about the window */
    double owners_s, visitors_s, unmanaged_s; /* CPU-seconds since the start */
    double seconds;                           /* the ticks' time since the start */
} SaPartitionLoad;

/* One tick of `seconds` with that split. The first tick with time sets the average; a tick of
 * no time (or negative) changes nothing. */
void sa_partition_load_add(SaPartitionLoad *l, const SaPartitionUsage *u, double seconds);

/* The averaged busy share of the partition's ncpu CPUs, 0-1 (0 without CPUs). */
double sa_partition_load_utilization(const SaPartitionLoad *l, guint ncpu);

G_END_DECLS
