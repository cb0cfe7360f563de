/* softaffd — the sensor's per-thread totals of a tick (daemon/sense-times.c), a store of its own.
 *
 * sample.c reads the BPF sensor's map of tracked threads once a tick (sa_sense_all_times) and
 * feeds every thread it finds to sa_sense_times_keep. Each thread has a slot (tid -> index in an
 * array) that stays from reading to reading, so a reading allocates nothing once the slots
 * exist. A slot the last reading did not fill belongs to a thread the map no longer had
 * (exited, untracked): it reads as not found, and the end of a reading drops such slots once the
 * store holds more than twice the threads it found plus 64. No I/O here: the store knows only
 * what it was fed. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef struct SaSenseTimes SaSenseTimes;

SaSenseTimes *sa_sense_times_new(void);
void sa_sense_times_free(SaSenseTimes *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaSenseTimes, sa_sense_times_free)

/* Whether the last reading is the one of this tick (core->ticks) by this sensor
 * (core->sense_gen); false before any reading. */
bool sa_sense_times_is_of(const SaSenseTimes *t, guint64 tick, guint64 gen);
/* Starts a reading for that tick and sensor: the threads kept until sa_sense_times_end are the
 * ones it found. */
void sa_sense_times_begin(SaSenseTimes *t, guint64 tick, guint64 gen);
/* One thread the reading found, into its slot (a new one for a thread the store does not hold).
 * The signature of SaSenseTimesFunc (host/sa-sense.h); data is the store. */
void sa_sense_times_keep(pid_t tid, guint64 run_ns, guint64 delay_ns, int last_cpu, gpointer data);
/* Ends the reading: drops the slots of the threads it did not find once they outnumber the live
 * ones as said above. */
void sa_sense_times_end(SaSenseTimes *t);
/* The thread's totals in the last reading; false when that reading did not find it (never kept,
 * kept by an earlier reading only, or dropped). */
bool sa_sense_times_get(const SaSenseTimes *t, pid_t tid, guint64 *run_ns, guint64 *delay_ns,
                        int *last_cpu);
/* The slots the store holds: the last reading's threads and the earlier ones not dropped yet. */
guint sa_sense_times_slots(const SaSenseTimes *t);

G_END_DECLS
