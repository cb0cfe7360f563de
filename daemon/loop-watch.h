/* softaffd — a watch on the main loop (daemon/loop-watch.c).
 *
 * Every control request, tick and libvirt event of softaffd runs on its one main loop: while a
 * callback blocks, `status` waits (the soak's invariant: an answer within 1 s). A timeout source
 * on the loop beats every 250 ms; a thread of its own wakes when the beat would be 500 ms late
 * and, when the loop has not beaten for 500 ms, logs once where the main thread is: the step the
 * loop marked last (sa_loop_watch_step: a tick's phase, a libvirt event, a control request), the
 * kernel's wait channel and the system call the thread is in (/proc/self/task/TID/wchan and
 * syscall). When the loop beats again it logs how long it was stuck. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct SaLoopWatch SaLoopWatch;

/* Starts watching the default main context (call from the main thread). */
SaLoopWatch *sa_loop_watch_start(void);
void sa_loop_watch_stop(SaLoopWatch *w);

/* What the main loop does now: a static string, NULL when back in the loop. Cheap (one atomic
 * store): for the steps that may block. */
void sa_loop_watch_step(const char *step);

G_END_DECLS
