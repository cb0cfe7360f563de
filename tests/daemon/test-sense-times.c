/* softaff — tests of the store of the sensor's per-thread totals (daemon/sense-times.c), fed as
 * sample.c feeds it from a reading of the sensor's map, without BPF: a thread the last reading
 * did not find reads as not found (the caller then looks it up alone); the slots of such
 * threads are dropped only past 2 x found + 64 slots, and every live thread keeps its totals at
 * its tid afterwards; a thread that comes back after being dropped gets a slot of its own; the
 * slots stay bounded however many readings there are.
 *
 * The threshold is written out here (84 slots for 10 threads found, 98 for 17), not taken from
 * the store, so that a store whose rule changes fails. */
#define G_LOG_DOMAIN "test-sense-times"

#include "sense-times.h"

/* A thread's totals in a reading: different for every thread and every reading, so a slot read
 * at the wrong tid or of the wrong reading shows. */
static guint64 run_of(pid_t tid, guint64 reading)
{
    return (guint64)tid * 1000003 + reading;
}

static guint64 delay_of(pid_t tid, guint64 reading)
{
    return (guint64)tid * 7919 + 2 * reading;
}

static int cpu_of(pid_t tid, guint64 reading)
{
    return (int)((guint64)tid * 31 + reading) % 256;
}

/* Reading number `reading` (its tick; the sensor of generation 1) finds the n threads. */
static void read_threads(SaSenseTimes *t, guint64 reading, const pid_t *tids, guint n)
{
    sa_sense_times_begin(t, reading, 1);
    for (guint i = 0; i < n; i++)
        sa_sense_times_keep(tids[i], run_of(tids[i], reading), delay_of(tids[i], reading),
                            cpu_of(tids[i], reading), t);
    sa_sense_times_end(t);
}

/* Each of the n threads reads as found by reading `reading`, with its own totals. */
static void assert_found(const SaSenseTimes *t, guint64 reading, const pid_t *tids, guint n)
{
    for (guint i = 0; i < n; i++) {
        guint64 run = 0, delay = 0;
        int cpu = -2;

        g_assert_true(sa_sense_times_get(t, tids[i], &run, &delay, &cpu));
        g_assert_cmpuint(run, ==, run_of(tids[i], reading));
        g_assert_cmpuint(delay, ==, delay_of(tids[i], reading));
        g_assert_cmpint(cpu, ==, cpu_of(tids[i], reading));
    }
}

static void assert_not_found(const SaSenseTimes *t, const pid_t *tids, guint n)
{
    for (guint i = 0; i < n; i++) {
        guint64 run = 0, delay = 0;
        int cpu = -2;

        g_assert_false(sa_sense_times_get(t, tids[i], &run, &delay, &cpu));
    }
}

/* n thread ids from first, step apart. */
static GArray *tid_range(pid_t first, pid_t step, guint n)
{
    GArray *a = g_array_sized_new(FALSE, FALSE, sizeof(pid_t), n);

    for (guint i = 0; i < n; i++) {
        pid_t tid = first + (pid_t)i * step;
        g_array_append_val(a, tid);
    }
    return a;
}

/* A thread found by reading N and not by N+1 reads as not found in N+1 (its slot is still
 * held: far below the threshold), while the others read N+1's totals. A reading belongs to its
 * tick and sensor. */
static void test_stale_slot(void)
{
    g_autoptr(SaSenseTimes) t = sa_sense_times_new();
    const pid_t all[] = {4100, 4101, 4102};
    const pid_t kept[] = {4100, 4102};
    const pid_t gone[] = {4101};

    g_assert_false(sa_sense_times_is_of(t, 0, 0)); /* no reading yet */
    read_threads(t, 1, all, G_N_ELEMENTS(all));
    assert_found(t, 1, all, G_N_ELEMENTS(all));
    g_assert_true(sa_sense_times_is_of(t, 1, 1));
    g_assert_false(sa_sense_times_is_of(t, 2, 1)); /* the next tick */
    g_assert_false(sa_sense_times_is_of(t, 1, 2)); /* another sensor */

    read_threads(t, 2, kept, G_N_ELEMENTS(kept));
    assert_found(t, 2, kept, G_N_ELEMENTS(kept));
    assert_not_found(t, gone, G_N_ELEMENTS(gone));
    g_assert_cmpuint(sa_sense_times_slots(t), ==, 3);

    /* A reading that finds nothing: every thread falls back. */
    read_threads(t, 3, NULL, 0);
    assert_not_found(t, all, G_N_ELEMENTS(all));
}

/* n slots from a first reading, then a reading that finds every eighth of them (10 threads):
 * the store keeps `expect` slots, the 10 read the second reading's totals, the others read as
 * not found. */
static void check_threshold(guint n, guint expect)
{
    g_autoptr(SaSenseTimes) t = sa_sense_times_new();
    g_autoptr(GArray) first = tid_range(7001, 3, n);
    g_autoptr(GArray) live = g_array_new(FALSE, FALSE, sizeof(pid_t));
    g_autoptr(GArray) gone = g_array_new(FALSE, FALSE, sizeof(pid_t));

    for (guint i = 0; i < n; i++)
        g_array_append_val(i % 8 == 0 && live->len < 10 ? live : gone,
                           g_array_index(first, pid_t, i));
    g_assert_cmpuint(live->len, ==, 10);

    read_threads(t, 1, (pid_t *)first->data, first->len);
    g_assert_cmpuint(sa_sense_times_slots(t), ==, n);
    read_threads(t, 2, (pid_t *)live->data, live->len);
    g_assert_cmpuint(sa_sense_times_slots(t), ==, expect);
    assert_found(t, 2, (pid_t *)live->data, live->len);
    assert_not_found(t, (pid_t *)gone->data, gone->len);

    /* The same threads again: their slots (moved or not) take the new totals, no slot more. */
    read_threads(t, 3, (pid_t *)live->data, live->len);
    g_assert_cmpuint(sa_sense_times_slots(t), ==, expect);
    assert_found(t, 3, (pid_t *)live->data, live->len);
    assert_not_found(t, (pid_t *)gone->data, gone->len);
}

/* 10 threads found: 84 slots (2 x 10 + 64) stay. */
static void test_threshold_at(void)
{
    check_threshold(84, 84);
}

/* 10 threads found: 85 slots are compacted to the 10 live ones, each with its own totals at its
 * tid. */
static void test_threshold_past(void)
{
    check_threshold(85, 10);
}

/* A thread dropped by a compaction reads as not found; when a reading finds it again it gets a
 * slot of its own, and no other thread's totals change. */
static void test_comeback(void)
{
    g_autoptr(SaSenseTimes) t = sa_sense_times_new();
    g_autoptr(GArray) first = tid_range(9000, 1, 100);
    /* the first thread (the first slot) goes, 17 stay: 100 slots > 2 x 17 + 64 */
    const pid_t *live = &g_array_index(first, pid_t, 1);
    const pid_t back = g_array_index(first, pid_t, 0);
    g_autoptr(GArray) again = tid_range(9001, 1, 17);

    read_threads(t, 1, (pid_t *)first->data, first->len);
    read_threads(t, 2, live, 17);
    g_assert_cmpuint(sa_sense_times_slots(t), ==, 17);
    assert_found(t, 2, live, 17);
    assert_not_found(t, &back, 1);

    g_array_append_val(again, back);
    read_threads(t, 3, (pid_t *)again->data, again->len);
    g_assert_cmpuint(sa_sense_times_slots(t), ==, 18);
    assert_found(t, 3, (pid_t *)again->data, again->len);
}

/* Many readings of the same threads: one slot each, never more. Threads that come and go (100
 * found each reading, 5 new and 5 gone each time): the slots never pass 2 x 100 + 64, the
 * compaction runs again and again, and the live threads read their own totals throughout. */
static void test_bounded(void)
{
    g_autoptr(SaSenseTimes) t = sa_sense_times_new();
    g_autoptr(GArray) same = tid_range(20000, 7, 300);

    for (guint64 r = 1; r <= 1000; r++) {
        read_threads(t, r, (pid_t *)same->data, same->len);
        g_assert_cmpuint(sa_sense_times_slots(t), ==, 300);
    }
    assert_found(t, 1000, (pid_t *)same->data, same->len);

    g_autoptr(SaSenseTimes) c = sa_sense_times_new();
    guint most = 0, compactions = 0, before = 0;
    for (guint64 r = 1; r <= 1000; r++) {
        g_autoptr(GArray) found = tid_range(30000 + (pid_t)(5 * r), 1, 100);

        read_threads(c, r, (pid_t *)found->data, found->len);
        guint slots = sa_sense_times_slots(c);
        g_assert_cmpuint(slots, <=, 2 * 100 + 64);
        assert_found(c, r, (pid_t *)found->data, found->len);
        most = MAX(most, slots);
        compactions += slots < before;
        before = slots;
    }
    g_assert_cmpuint(most, >, 2 * 100); /* gone threads' slots were held up to the threshold */
    g_assert_cmpuint(compactions, >=, 10);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/daemon/sense-times/stale-slot", test_stale_slot);
    g_test_add_func("/daemon/sense-times/threshold-at", test_threshold_at);
    g_test_add_func("/daemon/sense-times/threshold-past", test_threshold_past);
    g_test_add_func("/daemon/sense-times/comeback", test_comeback);
    g_test_add_func("/daemon/sense-times/bounded", test_bounded);
    return g_test_run();
}
