/* Unit tests of host/proctask.c: thread ownership, process start time, trusted directories. */
#define G_LOG_DOMAIN "test-proctask"

#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sa-error.h"
#include "sa-proctask.h"

static gpointer report_tid(gpointer data)
{
    *(pid_t *)data = gettid();
    return NULL;
}

/* A child that waits to be killed. */
static pid_t start_child(void)
{
    pid_t child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    return child;
}

static void stop_child(pid_t child)
{
    kill(child, SIGKILL);
    g_assert_cmpint(waitpid(child, NULL, 0), ==, child);
}

static void test_has_task(void)
{
    pid_t tid = 0;
    g_autoptr(GThread) t = g_thread_new("test-task", report_tid, &tid);
    /* The thread may have exited: its id is then no task of ours, which is what is checked. */
    g_thread_join(g_steal_pointer(&t));
    g_assert_true(sa_process_has_task(getpid(), getpid()));
    g_assert_false(sa_process_has_task(getpid(), tid));

    pid_t child = start_child();
    g_assert_true(sa_process_has_task(child, child));
    g_assert_false(sa_process_has_task(getpid(), child));
    g_assert_false(sa_process_has_task(child, getpid()));
    stop_child(child);
    g_assert_false(sa_process_has_task(child, child));
    g_assert_false(sa_process_has_task(0, getpid()));
}

static void test_start_time(void)
{
    guint64 own = sa_process_start_time(getpid());
    g_assert_cmpuint(own, >, 0);
    /* The name may hold ')' and spaces: fields are counted after the last ')'. */
    char saved[16] = {0};
    g_assert_cmpint(prctl(PR_GET_NAME, saved), ==, 0);
    g_assert_cmpint(prctl(PR_SET_NAME, "x) 1 2 3 4 5"), ==, 0);
    g_assert_cmpuint(sa_process_start_time(getpid()), ==, own);
    g_assert_cmpint(prctl(PR_SET_NAME, saved), ==, 0);

    pid_t child = start_child();
    guint64 theirs = sa_process_start_time(child);
    g_assert_cmpuint(theirs, >=, own);
    stop_child(child);
    g_assert_cmpuint(sa_process_start_time(child), ==, 0);
}

static char *make_dir(const char *parent, const char *name, int mode)
{
    char *dir = g_build_filename(parent, name, NULL);
    g_assert_cmpint(g_mkdir(dir, 0700), ==, 0);
    g_assert_cmpint(chmod(dir, (mode_t)mode), ==, 0);
    return dir;
}

/* The path is refused, naming want_dir and containing why. */
static void assert_refused(const char *path, uid_t owner, const char *want_dir, const char *why)
{
    g_autoptr(GError) error = NULL;
    g_assert_false(sa_path_dirs_trusted(path, owner, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
    g_autofree char *named = g_strdup_printf("directory %s ", want_dir);
    if (!strstr(error->message, named) || !strstr(error->message, why))
        g_error("refusal of %s: \"%s\", want \"%s...%s\"", path, error->message, named, why);
}

static void test_dirs(void)
{
    struct stat st;
    g_assert_cmpint(stat("/", &st), ==, 0);
    if (st.st_uid == 0 && !(st.st_mode & 022))
        g_assert_true(sa_path_dirs_trusted("/x.sock", getuid(), NULL));

    g_autofree char *tmp = g_dir_make_tmp("test-proctask-XXXXXX", NULL);
    g_assert_nonnull(tmp);
    g_autofree char *open_dir = make_dir(tmp, "open", 0777);
    g_autofree char *sticky = make_dir(tmp, "sticky", 01777);
    g_autofree char *group = make_dir(tmp, "group", 0770);
    g_autofree char *mine = make_dir(tmp, "mine", 0700);
    g_autofree char *in_open = g_build_filename(open_dir, "a.qmp", NULL);
    g_autofree char *in_sticky = g_build_filename(sticky, "a.qmp", NULL);
    g_autofree char *in_group = g_build_filename(group, "a.qmp", NULL);
    g_autofree char *in_mine = g_build_filename(mine, "a.qmp", NULL);
    assert_refused(in_open, getuid(), open_dir, "writable by every user (mode 0777)");
    assert_refused(in_sticky, getuid(), sticky, "writable by every user (mode 1777, sticky)");
    assert_refused(in_group, getuid(), group, "writable by group");
    /* A private directory is fine; the one it is in is checked next. */
    g_autoptr(GError) error = NULL;
    if (!sa_path_dirs_trusted(in_mine, getuid(), &error))
        g_assert_null(strstr(error->message, mine));

    /* A directory of another user: refused unless that user owns the socket. */
    if (geteuid() == 0 && chown(mine, 65534, 65534) == 0) {
        assert_refused(in_mine, 0, mine, "belongs to uid 65534");
        g_clear_error(&error);
        if (!sa_path_dirs_trusted(in_mine, 65534, &error))
            g_assert_null(strstr(error->message, mine));
    }
    g_autoptr(GError) relative = NULL;
    g_assert_false(sa_path_dirs_trusted("run/a.qmp", 0, &relative));
    g_assert_error(relative, SA_ERROR, SA_ERROR_UNSUPPORTED);
    for (const char *const *d = (const char *const[]){open_dir, sticky, group, mine, tmp, NULL}; *d;
         d++)
        g_assert_cmpint(g_rmdir(*d), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/proctask/has-task", test_has_task);
    g_test_add_func("/proctask/start-time", test_start_time);
    g_test_add_func("/proctask/dirs", test_dirs);
    return g_test_run();
}
