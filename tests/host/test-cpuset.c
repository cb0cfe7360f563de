/* Unit tests of host/cpuset.c: cpulist parsing and formatting, set operations, cpumaps. */
#define G_LOG_DOMAIN "test-cpuset"

#include <glib.h>
#include <string.h>

#include "sa-cpuset.h"
#include "sa-error.h"

static SaCpuSet *parse_ok(const char *text)
{
    g_autoptr(GError) error = NULL;
    SaCpuSet *set = sa_cpuset_parse(text, &error);

    g_assert_no_error(error);
    g_assert_nonnull(set);
    return set;
}

static void test_round_trips(void)
{
    static const struct {
        const char *in, *out;
        guint count;
    } cases[] = {
        {"", "", 0},
        {"\n", "", 0},
        {"0", "0", 1},
        {"0-3", "0-3", 4},
        {"0-3\n", "0-3", 4},
        {"  5 ", "5", 1},
        {"3,1,2", "1-3", 3},
        {"0-3,8,10-11", "0-3,8,10-11", 7},
        {"0,2,4,6", "0,2,4,6", 4},
        {"63-64", "63-64", 2},
        {"0-127", "0-127", 128},
        {"1-1", "1", 1},
        {"0-21,44-65", "0-21,44-65", 44},
        {"4-7,0-5", "0-7", 8},
        {"0-7,^3", "0-2,4-7", 7},
        {"0-7,^2-5,4", "0-1,4,6-7", 5},
        {"8191", "8191", 1},
        {"0-8191", "0-8191", 8192},
        {"007", "7", 1},
    };

    for (gsize i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_autoptr(SaCpuSet) set = parse_ok(cases[i].in);
        g_autofree char *text = sa_cpuset_format(set);
        g_autoptr(SaCpuSet) again = NULL;

        g_test_message("case \"%s\"", cases[i].in);
        g_assert_cmpstr(text, ==, cases[i].out);
        g_assert_cmpuint(sa_cpuset_count(set), ==, cases[i].count);
        g_assert_cmpint(sa_cpuset_is_empty(set), ==, cases[i].count == 0);
        again = parse_ok(text);
        g_assert_true(sa_cpuset_equal(set, again));
    }
}

static void test_parse_errors(void)
{
    static const char *const bad[] = {
        "abc",    "3-1",   "1,,2", "-1",  "8192", "1-",
        "1-8192", ",1",    "1,",   "1 2", "1;2",  "99999999999999999999999",
        "0x3",    "1-2-3", "^",    "1,^", "2.5",  "\t,",
    };

    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_autoptr(SaCpuSet) set = sa_cpuset_parse(bad[i], &error);
        g_autofree char *shown = g_strescape(bad[i], NULL);

        g_test_message("case \"%s\"", bad[i]);
        g_assert_null(set);
        g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
        /* The message names the text. */
        g_assert_nonnull(strstr(error->message, shown));
    }
}

static void test_ops(void)
{
    g_autoptr(SaCpuSet) a = parse_ok("0-3,100");
    g_autoptr(SaCpuSet) b = parse_ok("2-5");
    g_autoptr(SaCpuSet) c = NULL;
    g_autoptr(SaCpuSet) empty = sa_cpuset_new();
    g_autofree char *text = NULL;

    g_assert_true(sa_cpuset_intersects(a, b));
    g_assert_false(sa_cpuset_is_subset(a, b));
    g_assert_true(sa_cpuset_is_subset(empty, a));
    g_assert_true(sa_cpuset_is_subset(empty, empty));
    g_assert_false(sa_cpuset_intersects(a, empty));
    g_assert_cmpint(sa_cpuset_last(a), ==, 100);
    g_assert_cmpint(sa_cpuset_last(empty), ==, -1);
    g_assert_cmpint(sa_cpuset_next(empty, -1), ==, -1);

    c = sa_cpuset_copy(a);
    sa_cpuset_union(c, b);
    text = sa_cpuset_format(c);
    g_assert_cmpstr(text, ==, "0-5,100");
    g_clear_pointer(&text, g_free);

    sa_cpuset_assign(c, a);
    sa_cpuset_intersect(c, b);
    text = sa_cpuset_format(c);
    g_assert_cmpstr(text, ==, "2-3");
    g_clear_pointer(&text, g_free);

    sa_cpuset_assign(c, a);
    sa_cpuset_subtract(c, b);
    text = sa_cpuset_format(c);
    g_assert_cmpstr(text, ==, "0-1,100");
    g_clear_pointer(&text, g_free);

    /* Assigning a small set to a large one clears the high words. */
    sa_cpuset_assign(c, b);
    g_assert_true(sa_cpuset_equal(c, b));
    g_assert_false(sa_cpuset_has(c, 100));
    g_assert_true(sa_cpuset_is_subset(c, b));
    g_assert_true(sa_cpuset_is_subset(b, c));

    /* Sets of different capacity with the same members are equal. */
    sa_cpuset_add(c, 4000);
    sa_cpuset_remove(c, 4000);
    g_assert_true(sa_cpuset_equal(c, b));
    g_assert_true(sa_cpuset_equal(b, c));

    sa_cpuset_add(c, 8191);
    g_assert_true(sa_cpuset_has(c, 8191));
    g_assert_false(sa_cpuset_has(c, 8190));
    g_assert_false(sa_cpuset_has(c, 9000));
    g_assert_cmpint(sa_cpuset_last(c), ==, 8191);
    g_assert_cmpint(sa_cpuset_next(c, 5), ==, 8191);
    g_assert_cmpint(sa_cpuset_next(c, 8191), ==, -1);
    sa_cpuset_remove(c, 8191);
    sa_cpuset_remove(c, 12345); /* beyond the capacity: nothing to do */

    sa_cpuset_clear(c);
    g_assert_true(sa_cpuset_is_empty(c));
    g_assert_cmpuint(sa_cpuset_count(c), ==, 0);
    text = sa_cpuset_format(c);
    g_assert_cmpstr(text, ==, "");
    g_clear_pointer(&text, g_free);

    /* Ranges across word boundaries. */
    sa_cpuset_add_range(c, 60, 130);
    g_assert_cmpuint(sa_cpuset_count(c), ==, 71);
    g_assert_false(sa_cpuset_has(c, 59));
    g_assert_true(sa_cpuset_has(c, 63));
    g_assert_true(sa_cpuset_has(c, 64));
    g_assert_true(sa_cpuset_has(c, 127));
    g_assert_true(sa_cpuset_has(c, 130));
    g_assert_false(sa_cpuset_has(c, 131));
    sa_cpuset_clear(c);
    sa_cpuset_add_range(c, 64, 127);
    g_assert_cmpuint(sa_cpuset_count(c), ==, 64);
    g_assert_cmpint(sa_cpuset_next(c, -1), ==, 64);
    g_assert_cmpint(sa_cpuset_last(c), ==, 127);
}

static void test_iterate_8191(void)
{
    g_autoptr(SaCpuSet) set = parse_ok("0,63,64,1000,4095-4096,8191");
    static const int want[] = {0, 63, 64, 1000, 4095, 4096, 8191};
    gsize n = 0;

    for (int c = sa_cpuset_next(set, -1); c >= 0; c = sa_cpuset_next(set, c)) {
        g_assert_cmpuint(n, <, G_N_ELEMENTS(want));
        g_assert_cmpint(c, ==, want[n]);
        n++;
    }
    g_assert_cmpuint(n, ==, G_N_ELEMENTS(want));
}

static void test_cpumap(void)
{
    g_autoptr(SaCpuSet) set = parse_ok("0,3,8-9,15,63,64,70");
    unsigned char map[10];
    unsigned char small[2];
    g_autoptr(SaCpuSet) back = NULL;
    g_autoptr(SaCpuSet) cut = NULL;
    g_autofree char *text = NULL;

    memset(map, 0xaa, sizeof(map));
    sa_cpuset_to_cpumap(set, map, sizeof(map));
    g_assert_cmphex(map[0], ==, 0x09);
    g_assert_cmphex(map[1], ==, 0x83);
    g_assert_cmphex(map[2], ==, 0x00);
    g_assert_cmphex(map[7], ==, 0x80);
    g_assert_cmphex(map[8], ==, 0x41);
    g_assert_cmphex(map[9], ==, 0x00);

    back = sa_cpuset_from_cpumap(map, sizeof(map));
    g_assert_true(sa_cpuset_equal(set, back));

    /* A short map drops CPUs beyond it. */
    sa_cpuset_to_cpumap(set, small, sizeof(small));
    cut = sa_cpuset_from_cpumap(small, sizeof(small));
    text = sa_cpuset_format(cut);
    g_assert_cmpstr(text, ==, "0,3,8-9,15");
}

static void test_big_round_trip(void)
{
    g_autoptr(SaCpuSet) set = sa_cpuset_new();
    g_autoptr(SaCpuSet) again = NULL;
    g_autofree char *text = NULL;

    /* Every third CPU up to the maximum. */
    for (guint c = 0; c < SA_CPUSET_MAX; c += 3)
        sa_cpuset_add(set, c);
    text = sa_cpuset_format(set);
    again = parse_ok(text);
    g_assert_true(sa_cpuset_equal(set, again));
    g_assert_cmpuint(sa_cpuset_count(again), ==, (SA_CPUSET_MAX + 2) / 3);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cpuset/round-trips", test_round_trips);
    g_test_add_func("/cpuset/parse-errors", test_parse_errors);
    g_test_add_func("/cpuset/ops", test_ops);
    g_test_add_func("/cpuset/iterate-8191", test_iterate_8191);
    g_test_add_func("/cpuset/cpumap", test_cpumap);
    g_test_add_func("/cpuset/big-round-trip", test_big_round_trip);
    return g_test_run();
}
