/* softaff — thread ownership and trusted directories (see sa-proctask.h). */
#define G_LOG_DOMAIN "softaff-proctask"

#include "sa-proctask.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sa-error.h"
#include "sa-paths.h"

bool sa_process_has_task(pid_t pid, pid_t tid)
{
    if (pid <= 0 || tid <= 0)
        return false;
    g_autofree char *path = sa_proc_path("%d/task/%d", (int)pid, (int)tid);
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int sa_thread_get_affinity(pid_t tid, SaCpuSet **out)
{
    size_t size = CPU_ALLOC_SIZE(SA_CPUSET_MAX);
    cpu_set_t *bits = CPU_ALLOC(SA_CPUSET_MAX);
    int err = sched_getaffinity(tid, size, bits) == 0 ? 0 : errno;
    if (err == 0) {
        int left = CPU_COUNT_S(size, bits);
        *out = sa_cpuset_new();
        for (guint c = 0; left > 0 && c < SA_CPUSET_MAX; c++) {
            if (CPU_ISSET_S(c, size, bits)) {
                sa_cpuset_add(*out, c);
                left--;
            }
        }
    }
    CPU_FREE(bits);
    return err;
}

int sa_thread_set_affinity(pid_t tid, const SaCpuSet *set)
{
    size_t size = CPU_ALLOC_SIZE(SA_CPUSET_MAX);
    cpu_set_t *bits = CPU_ALLOC(SA_CPUSET_MAX);
    CPU_ZERO_S(size, bits);
    for (int c = sa_cpuset_next(set, -1); c >= 0 && c < SA_CPUSET_MAX; c = sa_cpuset_next(set, c))
        CPU_SET_S((size_t)c, size, bits);
    int err = sched_setaffinity(tid, size, bits) == 0 ? 0 : errno;
    CPU_FREE(bits);
    return err;
}

/* One directory: owned by root or owner, writable by nobody else. */
static bool check_dir(const char *dir, uid_t owner, GError **error)
{
    struct stat st;
    if (stat(dir, &st) < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot check directory %s: %s", dir,
                    g_strerror(errno));
        return false;
    }
    unsigned mode = st.st_mode & 07777;
    if (st.st_uid != 0 && st.st_uid != owner)
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "directory %s belongs to uid %u, neither root nor the owner (uid %u)", dir,
                    (unsigned)st.st_uid, (unsigned)owner);
    else if (mode & S_IWOTH)
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "directory %s is writable by every user (mode %04o%s)", dir, mode,
                    (mode & S_ISVTX) ? ", sticky" : "");
    else if (mode & S_IWGRP)
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "directory %s is writable by group %u (mode %04o)", dir, (unsigned)st.st_gid,
                    mode);
    else
        return true;
    return false;
}

/* dir and each of its parents up to /. */
static bool check_chain(const char *dir, uid_t owner, GError **error)
{
    g_autofree char *d = g_strdup(dir);
    for (;;) {
        if (!check_dir(d, owner, error))
            return false;
        if (g_str_equal(d, "/") || g_str_equal(d, "."))
            return true;
        char *parent = g_path_get_dirname(d);
        g_free(d);
        d = parent;
    }
}

bool sa_path_dirs_trusted(const char *path, uid_t owner, GError **error)
{
    if (!g_path_is_absolute(path)) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED, "%s is not an absolute path", path);
        return false;
    }
    g_autofree char *dir = g_path_get_dirname(path);
    if (!check_chain(dir, owner, error))
        return false;
    /* A symbolic link on the way leads elsewhere: the directories it leads to count too. */
    g_autofree char *real = realpath(dir, NULL);
    if (!real) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot resolve directory %s: %s", dir,
                    g_strerror(errno));
        return false;
    }
    return g_str_equal(real, dir) || check_chain(real, owner, error);
}
