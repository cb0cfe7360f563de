/* Unit tests of host/paths.c: SOFTAFF_SYSFS_ROOT / SOFTAFF_PROC_ROOT and the read helpers. */
#define G_LOG_DOMAIN "test-paths"

#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "sa-cpuset.h"
#include "sa-error.h"
#include "sa-paths.h"

static void test_roots(void)
{
    g_autofree char *a = NULL;
    g_autofree char *b = NULL;
    g_autofree char *c = NULL;
    g_autofree char *d = NULL;
    g_autofree char *e = NULL;
    g_autofree char *f = NULL;

    g_unsetenv("SOFTAFF_SYSFS_ROOT");
    g_unsetenv("SOFTAFF_PROC_ROOT");
    a = sa_sysfs_path("devices/system/node/node%u/cpulist", 3u);
    g_assert_cmpstr(a, ==, "/sys/devices/system/node/node3/cpulist");
    b = sa_proc_path("%d/task/%d/stat", 10, 11);
    g_assert_cmpstr(b, ==, "/proc/10/task/11/stat");

    g_setenv("SOFTAFF_SYSFS_ROOT", "/tmp/fixture/sys/", TRUE);
    g_setenv("SOFTAFF_PROC_ROOT", "/tmp/fixture/proc", TRUE);
    c = sa_sysfs_path("/devices/system/cpu/online");
    g_assert_cmpstr(c, ==, "/tmp/fixture/sys/devices/system/cpu/online");
    d = sa_proc_path("stat");
    g_assert_cmpstr(d, ==, "/tmp/fixture/proc/stat");

    /* A trailing slash is dropped; an empty variable means the default. */
    g_setenv("SOFTAFF_SYSFS_ROOT", "/sys/", TRUE);
    e = sa_sysfs_path("devices/system/node/online");
    g_assert_cmpstr(e, ==, "/sys/devices/system/node/online");
    g_setenv("SOFTAFF_SYSFS_ROOT", "", TRUE);
    f = sa_sysfs_path("devices/system/node/online");
    g_assert_cmpstr(f, ==, "/sys/devices/system/node/online");
    g_unsetenv("SOFTAFF_SYSFS_ROOT");
    g_unsetenv("SOFTAFF_PROC_ROOT");
}

static void put(const char *dir, const char *name, const char *text)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) error = NULL;

    g_file_set_contents(path, text, -1, &error);
    g_assert_no_error(error);
}

static void test_readers(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *dir = g_dir_make_tmp("softaff-paths-XXXXXX", &error);
    g_autofree char *num = g_build_filename(dir, "num", NULL);
    g_autofree char *bad = g_build_filename(dir, "bad", NULL);
    g_autofree char *list = g_build_filename(dir, "list", NULL);
    g_autofree char *missing = g_build_filename(dir, "missing", NULL);
    g_autofree char *text = NULL;
    g_autofree char *formatted = NULL;
    g_autoptr(SaCpuSet) set = NULL;
    guint64 v = 0;
    gsize len = 0;

    g_assert_no_error(error);
    put(dir, "num", "18446744073709551615\n");
    put(dir, "bad", "12 kB\n");
    put(dir, "list", "0-3,7\n");

    g_assert_true(sa_read_u64(num, &v, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(v, ==, G_MAXUINT64);

    g_assert_false(sa_read_u64(bad, &v, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, bad));
    g_assert_nonnull(strstr(error->message, "\"12 kB\""));
    g_clear_error(&error);

    set = sa_read_cpulist(list, &error);
    g_assert_no_error(error);
    formatted = sa_cpuset_format(set);
    g_assert_cmpstr(formatted, ==, "0-3,7");
    g_clear_pointer(&set, sa_cpuset_free);

    set = sa_read_cpulist(bad, &error);
    g_assert_null(set);
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_nonnull(strstr(error->message, bad));
    g_assert_nonnull(strstr(error->message, "12 kB"));
    g_clear_error(&error);

    text = sa_read_file(list, &len, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(len, ==, 6);

    g_assert_null(sa_read_file(missing, NULL, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    g_assert_nonnull(strstr(error->message, missing));
    g_clear_error(&error);
    g_assert_false(sa_read_u64(missing, &v, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_NOT_FOUND);
    g_clear_error(&error);

    /* A directory is not a file. */
    g_assert_null(sa_read_file(dir, NULL, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_IO);
    g_assert_nonnull(strstr(error->message, dir));
    g_clear_error(&error);

    g_remove(num);
    g_remove(bad);
    g_remove(list);
    g_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/paths/roots", test_roots);
    g_test_add_func("/paths/readers", test_readers);
    return g_test_run();
}
