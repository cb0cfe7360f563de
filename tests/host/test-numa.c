/* Unit tests of host/numa.c's page functions: the guest-memory mappings of a process (maps +
 * numa_maps, from texts and from a fixture /proc), and move_pages(2) on a real child process
 * (this host's node 0, its own node: every page ends there). */
#define G_LOG_DOMAIN "test-numa"

#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sa-error.h"
#include "sa-numa.h"

#define MIB (G_GUINT64_CONSTANT(1) << 20)

/* A QEMU-like process: guest RAM anonymous (2 nodes) and memfd, a hugetlbfs area, the heap,
 * a stack, a library's data, a read-only anonymous guard. */
static const char maps_text[] =
    "55d000000000-55d000001000 r-xp 00000000 08:01 123 /usr/bin/qemu-system-x86_64\n"
    "55d000100000-55d000200000 rw-p 00000000 00:00 0 [heap]\n"
    "7f0000000000-7f0040000000 rw-p 00000000 00:00 0 \n"
    "7f0040000000-7f0040200000 rw-s 00000000 00:01 77 /memfd:pc.ram (deleted)\n"
    "7f0080000000-7f00c0000000 rw-s 00000000 00:2f 88 /dev/hugepages/qemu_back_mem\n"
    "7f00c0000000-7f00c0001000 ---p 00000000 00:00 0 \n"
    "7f00d0000000-7f00d0010000 rw-p 00010000 08:01 99 /usr/lib/libc.so.6\n"
    "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]\n";
static const char numa_text[] =
    "55d000000000 default file=/usr/bin/qemu-system-x86_64 mapped=1 N0=1 kernelpagesize_kB=4\n"
    "55d000100000 default heap anon=16 dirty=16 N0=16 kernelpagesize_kB=4\n"
    "7f0000000000 default anon=1000 dirty=1000 N0=768 N1=256 kernelpagesize_kB=4\n"
    "7f0040000000 default file=/memfd:pc.ram\\040(deleted) dirty=512 N1=512 "
    "kernelpagesize_kB=4\n"
    "7f0080000000 default file=/dev/hugepages/qemu_back_mem huge dirty=3 N0=1 N1=2 "
    "kernelpagesize_kB=2048\n"
    "7f00c0000000 default\n"
    "7f00d0000000 default file=/usr/lib/libc.so.6 anon=4 dirty=4 N0=4 kernelpagesize_kB=4\n"
    "7ffc00000000 default stack anon=3 dirty=3 N0=3 kernelpagesize_kB=4\n";

static void test_parse(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaProcMemory) m = sa_proc_memory_parse(maps_text, numa_text, "process 7", &error);

    g_assert_no_error(error);
    /* heap, anonymous RAM, memfd RAM, hugetlbfs; not the binary, the guard, libc, the stack. */
    g_assert_cmpuint(m->mappings->len, ==, 4);
    const SaMemMapping *ram = &g_array_index(m->mappings, SaMemMapping, 1);
    g_assert_cmpuint(ram->start, ==, 0x7f0000000000);
    g_assert_cmpuint(ram->end, ==, 0x7f0040000000);
    g_assert_cmpuint(ram->page_size, ==, 4096);
    g_assert_cmpuint(sa_mem_mapping_bytes(ram, 1), ==, 256 * 4096);
    g_assert_cmpuint(sa_mem_mapping_bytes(ram, -1), ==, 1024 * 4096);
    const SaMemMapping *huge = &g_array_index(m->mappings, SaMemMapping, 3);
    g_assert_cmpuint(huge->page_size, ==, 2 * MIB);
    g_assert_cmpuint(sa_mem_mapping_bytes(huge, 1), ==, 4 * MIB);
    g_assert_cmpuint(sa_proc_memory_bytes(m, 0), ==, (16 + 768) * 4096 + 2 * MIB);
    g_assert_cmpuint(sa_proc_memory_bytes(m, 1), ==, (256 + 512) * 4096 + 4 * MIB);
    g_assert_cmpuint(sa_proc_memory_bytes(m, 2), ==, 0);
}

static void test_parse_errors(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaProcMemory) a = sa_proc_memory_parse("nonsense\n", "", "process 7", &error);

    g_assert_null(a);
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_cmpstr(error->message, ==, "process 7 maps: bad line \"nonsense\"");
    g_clear_error(&error);
    g_autoptr(SaProcMemory) b = sa_proc_memory_parse(
        maps_text, "7f0000000000 default anon=1 N0=x kernelpagesize_kB=4\n", "process 7", &error);
    g_assert_null(b);
    g_assert_error(error, SA_ERROR, SA_ERROR_PARSE);
    g_assert_true(g_str_has_prefix(error->message, "process 7 numa_maps: bad line"));
}

/* Through SOFTAFF_PROC_ROOT: a fixture process; a missing one is gone. */
static void test_fixture_proc(void)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *root = g_dir_make_tmp("softaff-numa-XXXXXX", &error);
    g_autofree char *dir = g_build_filename(root, "4242", NULL);
    g_autofree char *maps = g_build_filename(dir, "maps", NULL);
    g_autofree char *numa = g_build_filename(dir, "numa_maps", NULL);

    g_assert_no_error(error);
    g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
    g_assert_true(g_file_set_contents(maps, maps_text, -1, NULL));
    g_assert_true(g_file_set_contents(numa, numa_text, -1, NULL));
    g_setenv("SOFTAFF_PROC_ROOT", root, TRUE);
    g_autoptr(SaProcMemory) m = sa_numa_proc_memory(4242, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(m->mappings->len, ==, 4);
    g_autoptr(SaProcMemory) gone = sa_numa_proc_memory(4243, &error);
    g_assert_null(gone);
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);
    g_unsetenv("SOFTAFF_PROC_ROOT");
    g_unlink(maps);
    g_unlink(numa);
    g_rmdir(dir);
    g_rmdir(root);
}

#define CHILD_BYTES (8 * MIB)

/* A child with CHILD_BYTES of touched anonymous memory at *addr, waiting to be killed. */
static pid_t start_child(guint64 *addr)
{
    int fds[2];
    g_assert_cmpint(pipe(fds), ==, 0);
    pid_t child = fork();
    g_assert_cmpint(child, >=, 0);
    if (child == 0) {
        char *mem =
            mmap(NULL, CHILD_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED)
            _exit(1);
        memset(mem, 1, CHILD_BYTES);
        guint64 a = (guint64)(guintptr)mem;
        if (write(fds[1], &a, sizeof a) != sizeof a)
            _exit(1);
        pause();
        _exit(0);
    }
    close(fds[1]);
    g_assert_cmpint(read(fds[0], addr, sizeof *addr), ==, sizeof *addr);
    close(fds[0]);
    return child;
}

/* move_pages to node 0 on this host: every page of the child's area is (and stays) there. */
static void test_real_move(void)
{
    guint64 addr;
    pid_t child = start_child(&addr);
    const gulong n = CHILD_BYTES / 4096;
    g_autofree void **pages = g_new(void *, n);
    g_autofree int *status = g_new(int, n);
    g_autoptr(GError) error = NULL;

    g_unsetenv("SOFTAFF_PROC_ROOT");
    for (gulong i = 0; i < n; i++)
        pages[i] = (void *)(guintptr)(addr + i * 4096);
    g_assert_true(sa_numa_move_pages(child, n, pages, 0, status, &error));
    g_assert_no_error(error);
    for (gulong i = 0; i < n; i++)
        g_assert_cmpint(status[i], ==, 0);
    memset(status, 0x7f, n * sizeof *status);
    g_assert_true(sa_numa_query_pages(child, n, pages, status, &error));
    for (gulong i = 0; i < n; i++)
        g_assert_cmpint(status[i], ==, 0);

    /* Its numa_maps lists the area, all of it on node 0. */
    g_autoptr(SaProcMemory) m = sa_numa_proc_memory(child, &error);
    g_assert_no_error(error);
    gboolean found = FALSE;
    for (guint i = 0; i < m->mappings->len; i++) {
        const SaMemMapping *map = &g_array_index(m->mappings, SaMemMapping, i);
        if (map->start <= addr && addr < map->end) {
            g_assert_cmpuint(sa_mem_mapping_bytes(map, 0), >=, CHILD_BYTES);
            found = TRUE;
        }
    }
    g_assert_true(found);
    g_assert_cmpuint(sa_proc_memory_bytes(m, 0), ==, sa_proc_memory_bytes(m, -1));

    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    /* Gone now. */
    g_assert_false(sa_numa_query_pages(child, n, pages, status, &error));
    g_assert_error(error, SA_ERROR, SA_ERROR_GONE);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/numa/proc-memory/parse", test_parse);
    g_test_add_func("/numa/proc-memory/parse-errors", test_parse_errors);
    g_test_add_func("/numa/proc-memory/fixture", test_fixture_proc);
    g_test_add_func("/numa/move-pages/real", test_real_move);
    return g_test_run();
}
