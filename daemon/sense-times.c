/* softaffd — the sensor's per-thread totals of a tick (see sense-times.h). */
#define G_LOG_DOMAIN "softaffd"

#include "sense-times.h"

/* One thread's totals in a reading of the sensor's map. */
typedef struct {
    guint64 run_ns;
    guint64 delay_ns;
    int last_cpu;
    guint64 reading; /* the reading that found it */
} SenseSlot;

struct SaSenseTimes {
    GHashTable *slots; /* tid -> index + 1 in times */
    GArray *times;     /* SenseSlot */
    guint64 tick;      /* the tick of the last reading ... */
    guint64 gen;       /* ... by the sensor of this generation */
    guint64 reading;   /* readings so far (0: none yet) */
    guint found;       /* threads the last reading found */
};

SaSenseTimes *sa_sense_times_new(void)
{
    SaSenseTimes *t = g_new0(SaSenseTimes, 1);
    t->slots = g_hash_table_new(g_direct_hash, g_direct_equal);
    t->times = g_array_new(FALSE, FALSE, sizeof(SenseSlot));
    return t;
}

void sa_sense_times_free(SaSenseTimes *t)
{
    if (t) {
        g_hash_table_unref(t->slots);
        g_array_unref(t->times);
        g_free(t);
    }
}

bool sa_sense_times_is_of(const SaSenseTimes *t, guint64 tick, guint64 gen)
{
    return t->reading && t->tick == tick && t->gen == gen;
}

void sa_sense_times_begin(SaSenseTimes *t, guint64 tick, guint64 gen)
{
    t->tick = tick;
    t->gen = gen;
    t->reading++;
    t->found = 0;
}

void sa_sense_times_keep(pid_t tid, guint64 run_ns, guint64 delay_ns, int last_cpu, gpointer data)
{
    SaSenseTimes *t = data;
    guint i = GPOINTER_TO_UINT(g_hash_table_lookup(t->slots, GINT_TO_POINTER(tid)));

    if (i == 0) {
        g_array_set_size(t->times, t->times->len + 1);
        i = t->times->len;
        g_hash_table_insert(t->slots, GINT_TO_POINTER(tid), GUINT_TO_POINTER(i));
    }
    g_array_index(t->times, SenseSlot, i - 1) = (SenseSlot){
        .run_ns = run_ns, .delay_ns = delay_ns, .last_cpu = last_cpu, .reading = t->reading};
    t->found++;
}

/* Drops the slots of threads the last reading did not find (exited, untracked), once they
 * outnumber the live ones: the live slots move to a new array, in the hash's order, and the hash
 * points at their new places. */
static void forget_gone(SaSenseTimes *t)
{
    g_autoptr(GArray) live = NULL;

    if (t->times->len <= 2 * t->found + 64)
        return;
    live = g_array_sized_new(FALSE, FALSE, sizeof(SenseSlot), t->found);
    GHashTableIter it;
    gpointer key, value;
    g_hash_table_iter_init(&it, t->slots);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        const SenseSlot *slot = &g_array_index(t->times, SenseSlot, GPOINTER_TO_UINT(value) - 1);

        if (slot->reading != t->reading) {
            g_hash_table_iter_remove(&it);
            continue;
        }
        g_array_append_val(live, *slot);
        g_hash_table_iter_replace(&it, GUINT_TO_POINTER(live->len));
    }
    g_array_unref(t->times);
    t->times = g_steal_pointer(&live);
}

void sa_sense_times_end(SaSenseTimes *t)
{
    forget_gone(t);
}

bool sa_sense_times_get(const SaSenseTimes *t, pid_t tid, guint64 *run_ns, guint64 *delay_ns,
                        int *last_cpu)
{
    guint i = GPOINTER_TO_UINT(g_hash_table_lookup(t->slots, GINT_TO_POINTER(tid)));
    /* (an index past the array would be a hash not re-indexed after a compaction) */
    const SenseSlot *slot =
        i && i <= t->times->len ? &g_array_index(t->times, SenseSlot, i - 1) : NULL;

    if (!slot || slot->reading != t->reading)
        return false;
    *run_ns = slot->run_ns;
    *delay_ns = slot->delay_ns;
    *last_cpu = slot->last_cpu;
    return true;
}

guint sa_sense_times_slots(const SaSenseTimes *t)
{
    return t->times->len;
}
