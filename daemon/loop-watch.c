/* softaffd — a watch on the main loop (see loop-watch.h). */
#define G_LOG_DOMAIN "softaffd"

#include "loop-watch.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define BEAT_MS 100
#define LATE_US (500 * G_USEC_PER_SEC / 1000)

static const char *current_step; /* atomic */

struct SaLoopWatch {
    gint64 beat_us; /* g_get_monotonic_time() of the last beat (atomic) */
    guint source;
    GThread *thread;
    gint stop;
    pid_t main_tid;
};

void sa_loop_watch_step(const char *step)
{
    __atomic_store_n(&current_step, step, __ATOMIC_RELAXED);
}

static gboolean beat(gpointer data)
{
    SaLoopWatch *w = data;
    __atomic_store_n(&w->beat_us, g_get_monotonic_time(), __ATOMIC_RELAXED);
    return G_SOURCE_CONTINUE;
}

/* The first line of /proc/self/task/TID/name, without its newline ("?" when unreadable). */
static void read_task_file(pid_t tid, const char *name, char *buf, gsize size)
{
    char path[64];
    g_snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, name);
    g_strlcpy(buf, "?", size);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (fgets(buf, (int)size, f))
        buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
}

static gpointer watch_thread(gpointer data)
{
    SaLoopWatch *w = data;
    gint64 stuck_since = 0;
    while (!g_atomic_int_get(&w->stop)) {
        g_usleep(BEAT_MS * 1000);
        gint64 now = g_get_monotonic_time();
        gint64 last = __atomic_load_n(&w->beat_us, __ATOMIC_RELAXED);
        if (now - last < LATE_US) {
            if (stuck_since)
                g_warning("main loop: stuck for %.2f s, running again", (now - stuck_since) / 1e6);
            stuck_since = 0;
            continue;
        }
        if (stuck_since)
            continue;
        stuck_since = last;
        char wchan[64], syscall[128];
        read_task_file(w->main_tid, "wchan", wchan, sizeof wchan);
        read_task_file(w->main_tid, "syscall", syscall, sizeof syscall);
        /* syscall: the number and its arguments; the number and the first argument say enough */
        char *sp = strchr(syscall, ' ');
        if (sp && (sp = strchr(sp + 1, ' ')))
            *sp = '\0';
        const char *step = __atomic_load_n(&current_step, __ATOMIC_RELAXED);
        g_warning("main loop: no turn for %.2f s (status waits meanwhile); it is in: %s; kernel "
                  "wait channel %s, system call %s",
                  (now - last) / 1e6, step ? step : "(no marked step)", wchan, syscall);
    }
    return NULL;
}

SaLoopWatch *sa_loop_watch_start(void)
{
    SaLoopWatch *w = g_new0(SaLoopWatch, 1);
    w->main_tid = gettid();
    beat(w);
    w->source = g_timeout_add(BEAT_MS, beat, w);
    w->thread = g_thread_new("loop-watch", watch_thread, w);
    return w;
}

void sa_loop_watch_stop(SaLoopWatch *w)
{
    if (!w)
        return;
    g_atomic_int_set(&w->stop, 1);
    g_thread_join(w->thread);
    g_source_remove(w->source);
    g_free(w);
}
