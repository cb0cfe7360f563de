/* softaff — event sensing (sa-sense.h): loads host/bpf/sense.bpf.c through its bpftool
 * skeleton, owns its maps and ring buffer. Built without BPF, sa_sense_new() only says why. */
#define G_LOG_DOMAIN "softaff-sense"

#include "sa-sense.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sa-error.h"
#include "sa-paths.h"

#define MIN_THRESHOLD_US 1

static bool sense_disabled(GError **error)
{
    const char *v = g_getenv("SOFTAFF_SENSE_DISABLE");

    if (v && *v && strcmp(v, "0") != 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED, "disabled by SOFTAFF_SENSE_DISABLE");
        return true;
    }
    return false;
}

#ifndef SA_HAVE_BPF

struct SaSense {
    int unused;
};

SaSense *sa_sense_new(GError **error)
{
    if (!sense_disabled(error))
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "built without BPF (meson -Dbpf=disabled or missing clang/bpftool/libbpf)");
    return NULL;
}

void sa_sense_free(SaSense *s)
{
    g_free(s);
}

int sa_sense_fd(const SaSense *s)
{
    return -1;
}

bool sa_sense_watch(SaSense *s, const SaCpuSet *cpus, const int *cpu_place, guint n_places,
                    const SaSenseIgnore *ignore, guint n_ignore, GError **error)
{
    g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED, "built without BPF");
    return false;
}

void sa_sense_set_threshold(SaSense *s, guint threshold_us, guint window_us)
{
}

guint sa_sense_drain(SaSense *s, SaSenseEvent *out, guint max)
{
    return 0;
}

bool sa_sense_track(SaSense *s, pid_t tid)
{
    return false;
}

void sa_sense_untrack(SaSense *s, pid_t tid)
{
}

bool sa_sense_thread_times(SaSense *s, pid_t tid, guint64 *run_ns, guint64 *delay_ns, int *last_cpu)
{
    return false;
}

guint sa_sense_all_times(SaSense *s, SaSenseTimesFunc fn, gpointer data)
{
    return 0;
}

bool sa_sense_cpu_idle(SaSense *s, guint n, guint64 *idle_ns, bool *known, guint64 *now_ns,
                       guint64 *visitor_ns)
{
    return false;
}

#else /* SA_HAVE_BPF */

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/sense-shared.h"
#include "sense.skel.h"

struct SaSense {
    struct sense_bpf *skel;
    struct ring_buffer *rb;
    guint n_cpus;           /* entries of the cpus map */
    SaCpuSet *watched;      /* what the cpus map's watched flags say */
    guint32 *place;         /* per CPU, the place the cpus map holds for a watched one */
    GHashTable *ignored;    /* tid -> home place + 2 (0 is NULL), what the ignored map holds */
    SaSenseEvent *drain_to; /* sa_sense_drain's output while it consumes */
    guint drain_max, drained;
    SaSenseTimesFunc batch_fn; /* sa_sense_all_times' callback while it reads */
    gpointer batch_data;
    guint64 batch_now;
};

/* libbpf speaks on stderr by default; softaffd's log is the place, at debug level. */
G_GNUC_PRINTF(2, 0)
static int libbpf_to_debug(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);

    g_debug("%s", g_strchomp(msg));
    return 0;
}

static bool host_can(GError **error)
{
    g_autofree char *btf = sa_sysfs_path("kernel/btf/vmlinux");

    if (access(btf, R_OK) != 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "no kernel BTF at %s (the kernel needs CONFIG_DEBUG_INFO_BTF): %s", btf,
                    g_strerror(errno));
        return false;
    }
    return true;
}

static void set_load_error(GError **error, const char *what, int err)
{
    err = err < 0 ? -err : err;
    if (err == EPERM || err == EACCES)
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "%s the BPF program: %s (needs root: CAP_BPF, CAP_PERFMON)", what,
                    g_strerror(err));
    else
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "%s the BPF program: %s (G_MESSAGES_DEBUG=softaff-sense shows libbpf's log)",
                    what, g_strerror(err));
}

static int on_record(void *ctx, void *data, size_t size)
{
    SaSense *s = ctx;
    const struct sa_sense_record *r = data;

    /* The rest are dropped: the daemon only needs to know that some owner waited or ran. */
    if (size < sizeof(*r) || s->drained >= s->drain_max)
        return 0;
    s->drain_to[s->drained++] = (SaSenseEvent){.cpu = (int)r->cpu,
                                               .tid = (pid_t)r->tid,
                                               .wait_ns = r->wait_ns,
                                               .when_ns = r->when_ns,
                                               .ran = r->kind == SA_SENSE_RUN};
    return 0;
}

static bool sense_load(SaSense *s, GError **error)
{
    int n = libbpf_num_possible_cpus();
    int err;

    s->skel = sense_bpf__open();
    if (!s->skel) {
        set_load_error(error, "opening", errno);
        return false;
    }
    s->n_cpus = n > 0 ? MIN((guint)n, SA_SENSE_MAX_CPUS) : SA_SENSE_MAX_CPUS;
    s->place = g_new0(guint32, s->n_cpus);
    bpf_map__set_max_entries(s->skel->maps.cpus, s->n_cpus);
    bpf_map__set_max_entries(s->skel->maps.idle, s->n_cpus);
    err = sense_bpf__load(s->skel);
    if (err) {
        set_load_error(error, "loading", err);
        return false;
    }
    err = sense_bpf__attach(s->skel);
    if (err) {
        set_load_error(error, "attaching", err);
        return false;
    }
    s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_record, s, NULL);
    if (!s->rb) {
        set_load_error(error, "opening the ring buffer of", errno);
        return false;
    }
    return true;
}

SaSense *sa_sense_new(GError **error)
{
    g_autoptr(SaSense) s = NULL;

    if (sense_disabled(error) || !host_can(error))
        return NULL;
    libbpf_set_print(libbpf_to_debug);
    s = g_new0(SaSense, 1);
    s->watched = sa_cpuset_new();
    s->ignored = g_hash_table_new(g_direct_hash, g_direct_equal);
    if (!sense_load(s, error))
        return NULL;
    return g_steal_pointer(&s);
}

void sa_sense_free(SaSense *s)
{
    if (!s)
        return;
    ring_buffer__free(s->rb);
    sense_bpf__destroy(s->skel);
    sa_cpuset_free(s->watched);
    g_free(s->place);
    if (s->ignored)
        g_hash_table_destroy(s->ignored);
    g_free(s);
}

int sa_sense_fd(const SaSense *s)
{
    return ring_buffer__epoll_fd(s->rb);
}

/* A CPU entering or leaving the set (or changing place) starts a fresh window, counted as
 * busy: its past is not known, so a start of running is only one after a window seen quiet. */
static bool watch_cpu(SaSense *s, guint cpu, bool on, guint32 place, GError **error)
{
    struct timespec ts;
    struct sa_sense_cpu c = {.watched = on, .busy = 1, .place = place};
    __u32 key = cpu;
    int err;

    /* bpf_ktime_get_ns() is CLOCK_MONOTONIC */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c.window_start = (__u64)ts.tv_sec * 1000000000u + (__u64)ts.tv_nsec;
    err = bpf_map__update_elem(s->skel->maps.cpus, &key, sizeof(key), &c, sizeof(c), BPF_ANY);
    if (err) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "watching CPU %u: %s", cpu, g_strerror(-err));
        return false;
    }
    if (on)
        sa_cpuset_add(s->watched, cpu);
    else
        sa_cpuset_remove(s->watched, cpu);
    s->place[cpu] = place;
    return true;
}

static guint32 place_of(const int *cpu_place, guint n_places, guint cpu)
{
    return cpu_place && cpu < n_places && cpu_place[cpu] >= 0 ? (guint32)cpu_place[cpu]
                                                              : SA_SENSE_NOWHERE;
}

static bool watch_cpus(SaSense *s, const SaCpuSet *cpus, const int *cpu_place, guint n_places,
                       GError **error)
{
    for (guint cpu = 0; cpu < s->n_cpus; cpu++) {
        bool on = cpus && sa_cpuset_has(cpus, cpu);
        guint32 place = place_of(cpu_place, n_places, cpu);

        if ((on != sa_cpuset_has(s->watched, cpu) || (on && place != s->place[cpu])) &&
            !watch_cpu(s, cpu, on, place, error))
            return false;
    }
    return true;
}

static bool ignore_tids(SaSense *s, const SaSenseIgnore *ignore, guint n_ignore, GError **error)
{
    struct bpf_map *map = s->skel->maps.ignored;
    g_autoptr(GHashTable) want = g_hash_table_new(g_direct_hash, g_direct_equal);
    GHashTableIter it;
    gpointer key, value;

    for (guint i = 0; i < n_ignore; i++)
        g_hash_table_insert(want, GINT_TO_POINTER(ignore[i].id),
                            GINT_TO_POINTER(MAX(ignore[i].home, -1) + 2));
    g_hash_table_iter_init(&it, s->ignored);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        __u32 tid = (__u32)GPOINTER_TO_INT(key);

        if (!g_hash_table_contains(want, key)) {
            bpf_map__delete_elem(map, &tid, sizeof(tid), 0);
            g_hash_table_iter_remove(&it);
        }
    }
    g_hash_table_iter_init(&it, want);
    while (g_hash_table_iter_next(&it, &key, &value)) {
        __u32 tid = (__u32)GPOINTER_TO_INT(key);
        int home = GPOINTER_TO_INT(value) - 2;
        __u32 place = home >= 0 ? (__u32)home : SA_SENSE_NOWHERE;
        int err;

        if (g_hash_table_lookup(s->ignored, key) == value)
            continue;
        err = bpf_map__update_elem(map, &tid, sizeof(tid), &place, sizeof(place), BPF_ANY);
        if (err) {
            g_set_error(error, SA_ERROR, SA_ERROR_IO, "ignoring thread %u: %s", tid,
                        g_strerror(-err));
            return false;
        }
        g_hash_table_insert(s->ignored, key, value);
    }
    return true;
}

bool sa_sense_watch(SaSense *s, const SaCpuSet *cpus, const int *cpu_place, guint n_places,
                    const SaSenseIgnore *ignore, guint n_ignore, GError **error)
{
    /* Ignored threads first, so a newly watched CPU never counts a visitor's wait. */
    return ignore_tids(s, ignore, n_ignore, error) &&
           watch_cpus(s, cpus, cpu_place, n_places, error);
}

void sa_sense_set_threshold(SaSense *s, guint threshold_us, guint window_us)
{
    threshold_us = MAX(threshold_us, MIN_THRESHOLD_US);
    window_us = MAX(window_us, threshold_us);
    s->skel->data->threshold_ns = (guint64)threshold_us * 1000;
    s->skel->data->window_ns = (guint64)window_us * 1000;
}

guint sa_sense_drain(SaSense *s, SaSenseEvent *out, guint max)
{
    s->drain_to = out;
    s->drain_max = max;
    s->drained = 0;
    ring_buffer__consume(s->rb);
    s->drain_to = NULL;
    return s->drained;
}

bool sa_sense_track(SaSense *s, pid_t tid)
{
    struct sa_sense_thread t = {.last_cpu = (__u32)-1}; /* -1 until it runs */
    __u32 key = (__u32)tid;

    /* BPF_NOEXIST: tracking a tracked thread keeps its totals. */
    if (bpf_map__update_elem(s->skel->maps.tracked, &key, sizeof(key), &t, sizeof(t),
                             BPF_NOEXIST) == 0)
        return true;
    return bpf_map__lookup_elem(s->skel->maps.tracked, &key, sizeof(key), &t, sizeof(t), 0) == 0;
}

void sa_sense_untrack(SaSense *s, pid_t tid)
{
    __u32 key = (__u32)tid;

    bpf_map__delete_elem(s->skel->maps.tracked, &key, sizeof(key), 0);
}

/* The run so far of a thread on a CPU now counts too (bpf_ktime_get_ns is CLOCK_MONOTONIC). */
static guint64 run_until_now(const struct sa_sense_thread *t, guint64 now)
{
    return t->run_ns + (t->oncpu_ts && now > t->oncpu_ts ? now - t->oncpu_ts : 0);
}

#define BATCH 1024

/* One batch of the tracked map after *in (from the start when first) into fn; false at the
 * end, or when the kernel refused. */
static bool batch_times(SaSense *s, __u32 *in, __u32 *out, guint *count, bool first)
{
    DECLARE_LIBBPF_OPTS(bpf_map_batch_opts, opts);
    __u32 keys[BATCH];
    struct sa_sense_thread vals[BATCH];
    __u32 n = BATCH;
    int err = bpf_map_lookup_batch(bpf_map__fd(s->skel->maps.tracked), first ? NULL : in, out, keys,
                                   vals, &n, &opts);

    if (err && errno != ENOENT) {
        g_debug("reading the tracked threads in a batch: %s", g_strerror(errno));
        return false;
    }
    for (__u32 i = 0; i < n; i++)
        s->batch_fn((pid_t)keys[i], run_until_now(&vals[i], s->batch_now), vals[i].delay_ns,
                    (int)vals[i].last_cpu, s->batch_data);
    *count += n;
    return !err;
}

guint sa_sense_all_times(SaSense *s, SaSenseTimesFunc fn, gpointer data)
{
    __u32 in = 0, out = 0;
    guint count = 0;
    bool more;

    s->batch_fn = fn;
    s->batch_data = data;
    s->batch_now = (guint64)g_get_monotonic_time() * 1000;
    more = batch_times(s, &in, &out, &count, true);
    while (more) {
        in = out;
        more = batch_times(s, &in, &out, &count, false);
    }
    return count;
}

bool sa_sense_thread_times(SaSense *s, pid_t tid, guint64 *run_ns, guint64 *delay_ns, int *last_cpu)
{
    struct sa_sense_thread t;
    __u32 key = (__u32)tid;

    if (bpf_map__lookup_elem(s->skel->maps.tracked, &key, sizeof(key), &t, sizeof(t), 0) != 0)
        return false;
    if (run_ns)
        *run_ns = run_until_now(&t, (guint64)g_get_monotonic_time() * 1000);
    if (delay_ns)
        *delay_ns = t.delay_ns;
    if (last_cpu)
        *last_cpu = (int)t.last_cpu;
    return true;
}

bool sa_sense_cpu_idle(SaSense *s, guint n, guint64 *idle_ns, bool *known, guint64 *now_ns,
                       guint64 *visitor_ns)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    guint64 now = (guint64)ts.tv_sec * G_GUINT64_CONSTANT(1000000000) + (guint64)ts.tv_nsec;
    for (guint cpu = 0; cpu < n; cpu++) {
        struct sa_sense_idle i = {0};
        __u32 key = cpu;

        idle_ns[cpu] = 0;
        known[cpu] = false;
        if (visitor_ns)
            visitor_ns[cpu] = 0;
        if (cpu >= s->n_cpus)
            continue;
        if (bpf_map__lookup_elem(s->skel->maps.idle, &key, sizeof(key), &i, sizeof(i), 0) != 0)
            return false;
        known[cpu] = i.seen != 0;
        /* A stretch under way counts up to now (its start may be a hair later than now). */
        idle_ns[cpu] = i.idle_ns + (i.idle_since && now > i.idle_since ? now - i.idle_since : 0);
        if (visitor_ns)
            visitor_ns[cpu] =
                i.visitor_ns + (i.visitor_now && i.since && now > i.since ? now - i.since : 0);
    }
    *now_ns = now;
    return true;
}

#endif /* SA_HAVE_BPF */
