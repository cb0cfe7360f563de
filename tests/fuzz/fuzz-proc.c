/* softaff — libFuzzer target: the /proc parsers (host/): /proc/stat, a thread's schedstat and
 * stat. The first byte picks the parser, so one corpus holds all three formats; the
 * NUL-terminated parsers get a terminated copy of the rest. */
#define G_LOG_DOMAIN "fuzz-proc"

#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sa-sampler.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *body = (const char *)data + 1;
    gsize len = size - 1;
    g_autoptr(GError) error = NULL;

    switch (data[0] % 3) {
    case 0: {
        g_autoptr(GArray) cpus = sa_procstat_parse(body, len, &error);
        g_assert_true((cpus != NULL) == (error == NULL));
        /* Consecutive CPUs as two samples: the fractions stay within 0..1. */
        for (guint i = 1; cpus && i < cpus->len; i++) {
            SaCpuLoad load;
            sa_cpu_load_compute(&g_array_index(cpus, SaCpuTimes, i - 1),
                                &g_array_index(cpus, SaCpuTimes, i), &load);
            g_assert_true(load.busy >= 0.0 && load.busy <= 1.0);
            g_assert_true(load.idle >= 0.0 && load.idle <= 1.0);
        }
        break;
    }
    case 1: {
        g_autofree char *text = g_strndup(body, len);
        guint64 run_ns = 0, delay_ns = 0;
        bool ok = sa_schedstat_parse(text, &run_ns, &delay_ns, &error);
        g_assert_true(ok == (error == NULL));
        break;
    }
    default: {
        g_autofree char *text = g_strndup(body, len);
        char comm[16];
        int last_cpu = -2;
        memset(comm, 'x', sizeof comm);
        bool ok = sa_thread_stat_parse(text, comm, sizeof comm, &last_cpu, &error);
        g_assert_true(ok == (error == NULL));
        if (ok) {
            g_assert_true(memchr(comm, '\0', sizeof comm) != NULL);
            g_assert_cmpint(last_cpu, >=, -1);
        }
        break;
    }
    }
    return 0;
}
