/* softaff — every host read goes through these: they honour SOFTAFF_SYSFS_ROOT and
 * SOFTAFF_PROC_ROOT, so tests can point the code at fixture trees. */
#pragma once

#include <glib.h>
#include <stdbool.h>

G_BEGIN_DECLS

/* "$SOFTAFF_SYSFS_ROOT/<rel>" (default root "/sys"). rel has no leading slash, e.g.
 * "devices/system/node/node1/cpulist". Free with g_free. */
char *sa_sysfs_path(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
/* "$SOFTAFF_PROC_ROOT/<rel>" (default "/proc"). */
char *sa_proc_path(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

/* Reads a whole small file; on error the message names the path. */
char *sa_read_file(const char *path, gsize *len, GError **error);
/* Reads a file holding one cpulist (e.g. .../cpulist, .../online). */
struct SaCpuSet *sa_read_cpulist(const char *path, GError **error);
/* Reads a file holding one unsigned decimal number. */
bool sa_read_u64(const char *path, guint64 *out, GError **error);

G_END_DECLS
