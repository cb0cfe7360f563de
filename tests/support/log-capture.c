/* softaff tests — the log captured (see log-capture.h). */
#include "log-capture.h"

#include <string.h>

static GString *captured;

static GLogWriterOutput capture_writer(GLogLevelFlags level, const GLogField *fields, gsize n,
                                       gpointer user_data)
{
    for (gsize i = 0; i < n; i++)
        if (g_str_equal(fields[i].key, "MESSAGE")) {
            g_string_append_printf(captured, "%s\n", (const char *)fields[i].value);
            if (g_test_verbose())
                g_printerr("# log: %s\n", (const char *)fields[i].value);
        }
    if (level & G_LOG_LEVEL_CRITICAL)
        return g_log_writer_default(level, fields, n, user_data);
    return G_LOG_WRITER_HANDLED;
}

void log_capture_start(void)
{
    g_log_set_always_fatal(G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
    captured = g_string_new(NULL);
    g_log_set_writer_func(capture_writer, NULL, NULL);
}

void log_capture_clear(void)
{
    g_string_truncate(captured, 0);
}

const char *log_captured(void)
{
    return captured->str;
}

guint log_count(const char *needle)
{
    guint n = 0;

    for (const char *p = strstr(captured->str, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}
