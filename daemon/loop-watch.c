/* softaffd — a watch on the main loop (see loop-watch.h). */
#define G_LOG_DOMAIN "softaffd"

#include "loop-watch.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Beats are few: every wakeup preempts a vCPU somewhere, and under TCG one costs about half a
 * millisecond of CPU (docs/benchmarks.md section 14). The watch wakes when the beat would be
 * late, and every beat while the loop is stuck. */
#define BEAT_MS 250
#define LATE_US (500 * G_USEC_PER_SEC / 1000)

static const char *current_step; /* atomic */

struct SaLoopWatch {
    gint64 beat_us; /* g_get_monotonic_time() of the last beat (atomic) */
    guint source;
    GThread *thread;
    GMutex lock;
    GCond cond;
    bool stop; /* under lock */
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

    g_mutex_lock(&w->lock);
    while (!w->stop) {
        gint64 last = __atomic_load_n(&w->beat_us, __ATOMIC_RELAXED);
        gint64 wake = stuck_since ? g_get_monotonic_time() + BEAT_MS * 1000 : last + LATE_US;
        if (g_cond_wait_until(&w->cond, &w->lock, wake) || w->stop)
            continue; /* signalled: stopping (or a spurious wakeup: look again) */
        gint64 now = g_get_monotonic_time();
        last = __atomic_load_n(&w->beat_us, __ATOMIC_RELAXED);
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
    g_mutex_unlock(&w->lock);
    return NULL;
}

SaLoopWatch *sa_loop_watch_start(void)
{
    SaLoopWatch *w = g_new0(SaLoopWatch, 1);
    w->main_tid = gettid();
    g_mutex_init(&w->lock);
    g_cond_init(&w->cond);
    beat(w);
    w->source = g_timeout_add(BEAT_MS, beat, w);
    w->thread = g_thread_new("loop-watch", watch_thread, w);
    return w;
}

void sa_loop_watch_stop(SaLoopWatch *w)
{
    if (!w)
        return;
    g_mutex_lock(&w->lock);
    w->stop = true;
    g_cond_signal(&w->cond);
    g_mutex_unlock(&w->lock);
    g_thread_join(w->thread);
    g_source_remove(w->source);
    g_mutex_clear(&w->lock);
    g_cond_clear(&w->cond);
    g_free(w);
}
