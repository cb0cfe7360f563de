/* softaff bench — shared helpers (see bench-util.h). */
#include "bench-util.h"

#include <stdlib.h>

double bench_load_class(GRand *rand)
{
    double r = g_rand_double(rand);
    if (r < 0.02)
        return 1.0; /* busy */
    if (r < 0.10)
        return 0.2 + 0.2 * g_rand_double(rand); /* medium */
    return 0.01 + 0.02 * g_rand_double(rand);   /* idle */
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_percentile(const double *v, guint n, double p)
{
    g_autofree double *s = g_memdup2(v, sizeof(double) * n);
    qsort(s, n, sizeof *s, compare_double);
    guint k = (guint)(p * (n - 1) + 0.5);
    return s[MIN(k, n - 1)];
}
