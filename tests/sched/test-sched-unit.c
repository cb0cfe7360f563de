/* softaff — unit tests of sched/: the softness rule (sa_sched_reach) and the clear "unsupported"
 * answers of a kernel without sched_ext or BTF (fixture sysfs roots), and of this machine's
 * kernel when it has no sched_ext. The scheduler itself: tests/sched/test-sched.c. */
#include <glib.h>
#include <glib/gstdio.h>
#include <unistd.h>

#include "sa-error.h"
#include "sa-sched.h"

static void test_reach(void)
{
    /* strict and softness 0 never leave home */
    g_assert_cmpuint(sa_sched_reach(0, false, 4), ==, 0);
    g_assert_cmpuint(sa_sched_reach(100, true, 4), ==, 0);
    /* one partition: nowhere to go */
    g_assert_cmpuint(sa_sched_reach(100, false, 1), ==, 0);
    /* 2 partitions: any softness above 0 reaches the other */
    g_assert_cmpuint(sa_sched_reach(1, false, 2), ==, 1);
    g_assert_cmpuint(sa_sched_reach(50, false, 2), ==, 1);
    /* 5 partitions, 4 others: ceil(s * 4 / 100), at least 1 */
    g_assert_cmpuint(sa_sched_reach(1, false, 5), ==, 1);
    g_assert_cmpuint(sa_sched_reach(25, false, 5), ==, 1);
    g_assert_cmpuint(sa_sched_reach(26, false, 5), ==, 2);
    g_assert_cmpuint(sa_sched_reach(50, false, 5), ==, 2);
    g_assert_cmpuint(sa_sched_reach(99, false, 5), ==, 4);
    g_assert_cmpuint(sa_sched_reach(100, false, 5), ==, 4);
}

static char *fixture_root(bool with_sched_ext, bool with_btf)
{
    g_autoptr(GError) error = NULL;
    char *root = g_dir_make_tmp("softaff-sched-XXXXXX", &error);
    g_autofree char *ext = g_build_filename(root, "kernel", "sched_ext", NULL);
    g_autofree char *btfdir = g_build_filename(root, "kernel", "btf", NULL);
    g_autofree char *btf = g_build_filename(btfdir, "vmlinux", NULL);

    g_assert_no_error(error);
    g_assert_cmpint(g_mkdir_with_parents(btfdir, 0755), ==, 0);
    if (with_sched_ext)
        g_assert_cmpint(g_mkdir_with_parents(ext, 0755), ==, 0);
    if (with_btf)
        g_assert_true(g_file_set_contents(btf, "", 0, NULL));
    return root;
}

static void remove_root(const char *root)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", root);

    g_assert_cmpint(system(cmd), ==, 0);
}

static void test_no_sched_ext(void)
{
    g_autofree char *root = fixture_root(false, true);
    g_autoptr(GError) error = NULL;
    g_autoptr(SaSched) s = NULL;

    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
    g_assert_false(sa_sched_available(&error));
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
#ifdef SA_HAVE_BPF
    g_assert_nonnull(strstr(error->message, "CONFIG_SCHED_CLASS_EXT"));
#endif
    g_clear_error(&error);
    s = sa_sched_load(&error);
    g_assert_null(s);
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
    g_unsetenv("SOFTAFF_SYSFS_ROOT");
    remove_root(root);
}

static void test_no_btf(void)
{
    g_autofree char *root = fixture_root(true, false);
    g_autoptr(GError) error = NULL;

    g_setenv("SOFTAFF_SYSFS_ROOT", root, TRUE);
    g_assert_false(sa_sched_available(&error));
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
#ifdef SA_HAVE_BPF
    g_assert_nonnull(strstr(error->message, "CONFIG_DEBUG_INFO_BTF"));
#endif
    g_unsetenv("SOFTAFF_SYSFS_ROOT");
    remove_root(root);
}

/* This machine's own kernel: without sched_ext, load says so (and nothing else happens). */
static void test_this_kernel(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaSched) s = NULL;

    if (access("/sys/kernel/sched_ext", F_OK) == 0) {
        g_test_skip("this kernel has sched_ext: tests/sched/test-sched covers it");
        return;
    }
    s = sa_sched_load(&error);
    g_assert_null(s);
    g_assert_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED);
    g_test_message("%s", error->message);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/sched/reach", test_reach);
    g_test_add_func("/sched/unsupported/no-sched-ext", test_no_sched_ext);
    g_test_add_func("/sched/unsupported/no-btf", test_no_btf);
    g_test_add_func("/sched/unsupported/this-kernel", test_this_kernel);
    return g_test_run();
}
