/* softaff — every host read goes through these: they honour SOFTAFF_SYSFS_ROOT and
 * SOFTAFF_PROC_ROOT, so tests can point the code at fixture trees. */
#pragma once

#include <glib.h>
#include <stdbool.h>

G_BEGIN_DECLS

/* "$ROOT_VAR/<rel>", default_root when the variable is unset or empty; rel is formatted from
 * fmt and has no leading slash. Free with g_free. */
char *sa_host_path(const char *root_var, const char *default_root, const char *fmt, ...)
    G_GNUC_PRINTF(3, 4);
/* "$SOFTAFF_SYSFS_ROOT/<rel>" (default root "/sys"), e.g.
 * sa_sysfs_path("devices/system/node/node%u/cpulist", 1). */
#define sa_sysfs_path(...) sa_host_path("SOFTAFF_SYSFS_ROOT", "/sys", __VA_ARGS__)
/* "$SOFTAFF_PROC_ROOT/<rel>" (default "/proc"). */
#define sa_proc_path(...) sa_host_path("SOFTAFF_PROC_ROOT", "/proc", __VA_ARGS__)

/* Reads a whole small file; on error the message names the path. */
char *sa_read_file(const char *path, gsize *len, GError **error);
/* Reads a file holding one cpulist (e.g. .../cpulist, .../online). */
struct SaCpuSet *sa_read_cpulist(const char *path, GError **error);
/* Reads a file holding one unsigned decimal number. */
bool sa_read_u64(const char *path, guint64 *out, GError **error);

G_END_DECLS
