/* softaff — tests of the main loop's watch (daemon/loop-watch.c): a callback that blocks the
 * loop for 1.2 s in a marked step is reported once while it blocks, naming the step and the
 * system call the main thread is in (nanosleep here: 35 on x86-64, 230 clock_nanosleep), then
 * once as stuck for about that long; a loop that turns every 50 ms is never reported. */
#define G_LOG_DOMAIN "test-loop-watch"

#include "loop-watch.h"
#include "log-capture.h"

#include <string.h>

static gboolean block_cb(gpointer data)
{
    sa_loop_watch_step("a test's blocking step");
    g_usleep(1200 * 1000);
    sa_loop_watch_step(NULL);
    return G_SOURCE_REMOVE;
}

static gboolean quit_cb(gpointer loop)
{
    g_main_loop_quit(loop);
    return G_SOURCE_REMOVE;
}

static void run_for(guint ms)
{
    GMainLoop *loop = g_main_loop_new(NULL, FALSE);
    g_timeout_add(ms, quit_cb, loop);
    g_main_loop_run(loop);
    g_main_loop_unref(loop);
}

static void test_blocked(void)
{
    log_capture_clear();
    SaLoopWatch *w = sa_loop_watch_start();
    g_timeout_add(100, block_cb, NULL);
    run_for(1800);
    sa_loop_watch_stop(w);
    const char *log = log_captured();
    g_test_message("%s", log);
    g_assert_cmpuint(log_count("main loop: no turn for"), ==, 1);
    g_assert_cmpuint(log_count("it is in: a test's blocking step"), ==, 1);
    g_assert_nonnull(strstr(log, "system call "));
    g_assert_cmpuint(log_count("main loop: stuck for 1."), ==, 1);
}

static gboolean tick_cb(gpointer data)
{
    return G_SOURCE_CONTINUE;
}

static void test_turning(void)
{
    log_capture_clear();
    SaLoopWatch *w = sa_loop_watch_start();
    guint id = g_timeout_add(50, tick_cb, NULL);
    run_for(1200);
    g_source_remove(id);
    sa_loop_watch_stop(w);
    g_assert_cmpuint(log_count("main loop:"), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    log_capture_start();
    g_test_add_func("/loop-watch/blocked", test_blocked);
    g_test_add_func("/loop-watch/turning", test_turning);
    return g_test_run();
}
