/* softaff tests — the decision log of every simulator scenario equals the golden one.
 *
 * Runs the scenario runner (test-policy-scenarios, its path is the first argument) with
 * SOFTAFF_DECISION_LOG set, and compares the log it writes (every VM of every tick of every
 * scenario: state, home, sets, bursts, retreats, reason; and the partitions' usage) byte for byte
 * with tests/data/policy/decisions.golden. The golden log was written by the policy before its
 * decision function was split into phases and predicates (commit 0f74390): a refactoring of
 * policies/ must leave it unchanged. After an intended change of behaviour, regenerate it with
 * SOFTAFF_REGENERATE_GOLDEN=1 and review the diff line by line. */
#define G_LOG_DOMAIN "softaff-test-decisions"

#include <glib.h>
#include <glib/gstdio.h>
#include <stdbool.h>
#include <string.h>

static const char *runner;

/* NULL when the logs are equal; otherwise where they first differ: the line number, the test
 * case it belongs to (the last "== " line before it) and both lines. */
static char *first_difference(const char *expected, const char *got)
{
    g_auto(GStrv) want = g_strsplit(expected, "\n", -1);
    g_auto(GStrv) have = g_strsplit(got, "\n", -1);
    const char *test_case = "(before the first test case)";
    for (guint n = 0;; n++) {
        if (want[n] == NULL && have[n] == NULL)
            return NULL;
        if (want[n] != NULL && g_str_has_prefix(want[n], "== "))
            test_case = want[n] + 3;
        if (want[n] != NULL && have[n] != NULL && strcmp(want[n], have[n]) == 0)
            continue;
        return g_strdup_printf("line %u (in %s):\n  expected: %s\n  got:      %s", n + 1, test_case,
                               want[n] ? want[n] : "(end of log)",
                               have[n] ? have[n] : "(end of log)");
    }
}

static void test_first_difference(void)
{
    static const struct {
        const char *expected, *got;
        const char *message; /* NULL: equal */
    } rows[] = {
        {"", "", NULL},
        {"== /a\nx 1\n", "== /a\nx 1\n", NULL},
        {"== /a\nx 1\n", "== /a\nx 2\n", "line 2 (in /a):\n  expected: x 1\n  got:      x 2"},
        {"== /a\nx\n== /b\ny 1\nz\n", "== /a\nx\n== /b\ny 1\nZ\n",
         "line 5 (in /b):\n  expected: z\n  got:      Z"},
        {"== /a\nx\ny", "== /a\nx", "line 3 (in /a):\n  expected: y\n  got:      (end of log)"},
        {"== /a\nx", "== /a\nx\ny", "line 3 (in /a):\n  expected: (end of log)\n  got:      y"},
        {"x\n", "y\n", "line 1 (in (before the first test case)):\n  expected: x\n  got:      y"},
        {"x\n", "x",
         "line 2 (in (before the first test case)):\n  expected: \n  got:      (end of "
         "log)"},
    };
    for (guint r = 0; r < G_N_ELEMENTS(rows); r++) {
        g_autofree char *message = first_difference(rows[r].expected, rows[r].got);
        g_assert_cmpstr(message, ==, rows[r].message);
    }
}

/* Runs the scenarios with the decision log going to a file; returns what they logged (all of
 * it, also when a scenario failed) and *ok whether every scenario passed. */
static char *run_scenarios(bool *ok)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("softaff-decisions-XXXXXX", &error);
    g_assert_no_error(error);
    g_autofree char *log_path = g_build_filename(dir, "decisions.log", NULL);
    g_auto(GStrv) env = g_environ_setenv(g_get_environ(), "SOFTAFF_DECISION_LOG", log_path, TRUE);
    const char *argv[] = {runner, NULL};
    g_autofree char *out = NULL, *err = NULL;
    int status = 0;
    g_spawn_sync(NULL, (char **)argv, env, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status,
                 &error);
    g_assert_no_error(error);
    *ok = g_spawn_check_wait_status(status, &error);
    if (!*ok)
        g_test_message("%s failed (%s); its output:\n%s%s", runner, error->message, out, err);

    char *log = NULL;
    if (!g_file_get_contents(log_path, &log, NULL, NULL))
        log = g_strdup("");
    g_unlink(log_path);
    g_rmdir(dir);
    return log;
}

static void test_golden(void)
{
    const char *data = g_getenv("SOFTAFF_TEST_DATA");
    if (runner == NULL || data == NULL) {
        g_test_fail_printf("usage: SOFTAFF_TEST_DATA=tests/data %s PATH-OF-test-policy-scenarios",
                           g_get_prgname());
        return;
    }
    g_autofree char *golden_path = g_build_filename(data, "policy", "decisions.golden", NULL);
    bool scenarios_ok = false;
    g_autofree char *log = run_scenarios(&scenarios_ok);
    g_autoptr(GError) error = NULL;
    if (scenarios_ok && g_getenv("SOFTAFF_REGENERATE_GOLDEN")) {
        g_file_set_contents(golden_path, log, -1, &error);
        g_assert_no_error(error);
        g_test_message("rewrote %s", golden_path);
        return;
    }
    g_autofree char *golden = NULL;
    g_file_get_contents(golden_path, &golden, NULL, &error);
    g_assert_no_error(error);
    g_autofree char *difference = first_difference(golden, log);
    if (difference != NULL)
        g_test_message("the decision log differs from %s at %s", golden_path, difference);
    g_assert_true(scenarios_ok);
    g_assert_null(difference);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (argc > 1)
        runner = argv[1];
    g_test_add_func("/policy/decisions/first-difference", test_first_difference);
    g_test_add_func("/policy/decisions/golden", test_golden);
    return g_test_run();
}
