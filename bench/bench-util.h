/* softaff bench — what the benchmarks share: the load classes of the synthetic VMs and
 * percentiles. */
#pragma once

#include <glib.h>

/* A VM's load: 2% busy (1 CPU per vCPU), 8% medium (0.2-0.4), the rest idle (0.01-0.03). */
double bench_load_class(GRand *rand);
/* The p-quantile (0..1, nearest rank) of n values; v is not changed. */
double bench_percentile(const double *v, guint n, double p);
