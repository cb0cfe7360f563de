/* softaff tests — the log captured: every message's text, one a line, for a test to look for
 * what the code under test said. Warnings are captured, not fatal (the code warns on purpose);
 * criticals still go to GLib's writer and stay fatal. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Once, in main: the writer of this process's log from now on. */
void log_capture_start(void);
/* Forgets what was captured (at a test's start). */
void log_capture_clear(void);
/* What was captured since the last clear. */
const char *log_captured(void);
/* How many times needle stands in what was captured. */
guint log_count(const char *needle);

G_END_DECLS
