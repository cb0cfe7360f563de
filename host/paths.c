/* softaff — host paths: every sysfs and procfs read goes through here, so tests can redirect
 * them to fixture trees with SOFTAFF_SYSFS_ROOT and SOFTAFF_PROC_ROOT. */
#define G_LOG_DOMAIN "softaff-paths"

#include "sa-paths.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "sa-cpuset.h"
#include "sa-error.h"

static const char *root_from_env(const char *var, const char *fallback)
{
    const char *root = g_getenv(var);

    return (root != NULL && root[0] != '\0') ? root : fallback;
}

static char *build_path(const char *root, const char *fmt, va_list ap) G_GNUC_PRINTF(2, 0);

static char *build_path(const char *root, const char *fmt, va_list ap)
{
    g_autofree char *rel = g_strdup_vprintf(fmt, ap);
    gsize root_len = strlen(root);

    while (root_len > 1 && root[root_len - 1] == '/')
        root_len--;
    while (rel[0] == '/')
        memmove(rel, rel + 1, strlen(rel));
    return g_strdup_printf("%.*s/%s", (int)root_len, root, rel);
}

char *sa_host_path(const char *root_var, const char *default_root, const char *fmt, ...)
{
    va_list ap;
    char *path;

    va_start(ap, fmt);
    path = build_path(root_from_env(root_var, default_root), fmt, ap);
    va_end(ap);
    return path;
}

char *sa_read_file(const char *path, gsize *len, GError **error)
{
    g_autoptr(GError) local = NULL;
    char *contents = NULL;
    gsize length = 0;

    g_return_val_if_fail(path != NULL, NULL);
    if (!g_file_get_contents(path, &contents, &length, &local)) {
        int code = local->code == G_FILE_ERROR_NOENT ? SA_ERROR_NOT_FOUND : SA_ERROR_IO;

        /* GLib's message already names the file; keep it and make sure the path is there. */
        if (strstr(local->message, path) != NULL)
            g_set_error_literal(error, SA_ERROR, code, local->message);
        else
            g_set_error(error, SA_ERROR, code, "cannot read %s: %s", path, local->message);
        return NULL;
    }
    if (len != NULL)
        *len = length;
    return contents;
}

SaCpuSet *sa_read_cpulist(const char *path, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *text = sa_read_file(path, NULL, error);
    SaCpuSet *set;

    if (text == NULL)
        return NULL;
    set = sa_cpuset_parse(text, &local);
    if (set == NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: %s", path, local->message);
        return NULL;
    }
    return set;
}

bool sa_read_u64(const char *path, guint64 *out, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autofree char *text = sa_read_file(path, NULL, error);
    guint64 value;

    if (text == NULL)
        return false;
    g_strstrip(text);
    if (!g_ascii_string_to_unsigned(text, 10, 0, G_MAXUINT64, &value, &local)) {
        g_autofree char *shown = g_strescape(text, NULL);

        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: \"%s\" is not an unsigned number", path,
                    shown);
        return false;
    }
    *out = value;
    return true;
}
