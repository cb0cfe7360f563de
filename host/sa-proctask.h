/* softaff — who owns a thread, and whether a path may be trusted: checks before softaffd acts on
 * a thread id or a socket that another program named. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sa-cpuset.h"

G_BEGIN_DECLS

/* Whether tid is a thread of process pid right now (/proc/<pid>/task/<tid> exists). */
bool sa_process_has_task(pid_t pid, pid_t tid);
/* Field 22 of /proc/<pid>/stat: when the process started, in clock ticks since boot; with the
 * pid it names one process, since pids are reused. 0 when it cannot be read. */
guint64 sa_process_start_time(pid_t pid);
/* A thread's CPU affinity (sched_getaffinity): 0 and a new set in *out, or an errno. */
int sa_thread_get_affinity(pid_t tid, SaCpuSet **out);
/* Sets it (sched_setaffinity): 0 or an errno (EINVAL: none of set is online or in the thread's
 * cpuset cgroup; ESRCH: no such thread). */
int sa_thread_set_affinity(pid_t tid, const SaCpuSet *set);
/* Whether nobody but root and owner can replace path: its directory and every parent up to /,
 * as written and as resolved, must be owned by root or owner and writable by neither group nor
 * others (a sticky directory like /tmp counts as writable by others). SA_ERROR_UNSUPPORTED
 * names the first directory that fails and why; SA_ERROR_IO when one cannot be checked. */
bool sa_path_dirs_trusted(const char *path, uid_t owner, GError **error);

G_END_DECLS
