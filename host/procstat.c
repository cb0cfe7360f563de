/* softaff — per-CPU utilization from /proc/stat.
 *
 * The sampler runs every tick on hosts with hundreds of CPUs, so it keeps /proc/stat open,
 * rereads it with pread() into a reusable buffer and parses without allocating. */
#define G_LOG_DOMAIN "softaff-procstat"

#include "sa-sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "sa-error.h"
#include "sa-paths.h"

#define N_FIELDS 10
#define MIN_FIELDS 4 /* user nice system idle: the oldest kernels stop there */
#define INITIAL_BUFFER (64 * 1024)

static void set_line_error(GError **error, const char *line, gsize len, const char *why)
{
    g_autofree char *copy = g_strndup(line, MIN(len, 120));
    g_autofree char *shown = g_strescape(copy, NULL);

    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "/proc/stat line \"%s%s\": %s", shown,
                len > 120 ? "..." : "", why);
}

/* Reads an unsigned decimal at *p (before end); false when there is none or it overflows. */
static bool read_u64(const char **p, const char *end, guint64 *out)
{
    const char *s = *p;
    guint64 v = 0;

    if (s >= end || !g_ascii_isdigit(*s))
        return false;
    while (s < end && g_ascii_isdigit(*s)) {
        guint digit = (guint)(*s - '0');

        if (v > (G_MAXUINT64 - digit) / 10)
            return false;
        v = v * 10 + digit;
        s++;
    }
    *p = s;
    *out = v;
    return true;
}

/* Parses one "cpuN ..." line (without its newline) into t. */
static bool parse_cpu_line(const char *line, const char *end, SaCpuTimes *t, GError **error)
{
    const char *p = line + 3;
    guint64 cpu, fields[N_FIELDS] = {0};
    guint n = 0;

    if (!read_u64(&p, end, &cpu) || cpu >= G_MAXINT) {
        set_line_error(error, line, (gsize)(end - line), "bad CPU number");
        return false;
    }
    while (p < end) {
        guint64 v;

        if (*p == ' ' || *p == '\t') {
            p++;
            continue;
        }
        if (!read_u64(&p, end, &v) || (p < end && *p != ' ' && *p != '\t')) {
            set_line_error(error, line, (gsize)(end - line), "a field is not an unsigned number");
            return false;
        }
        if (n < N_FIELDS)
            fields[n] = v;
        n++; /* columns that newer kernels may add are ignored */
    }
    if (n < MIN_FIELDS) {
        set_line_error(error, line, (gsize)(end - line), "fewer than 4 fields");
        return false;
    }
    t->cpu = (int)cpu;
    t->user = fields[0];
    t->nice = fields[1];
    t->system = fields[2];
    t->idle = fields[3];
    t->iowait = fields[4];
    t->irq = fields[5];
    t->softirq = fields[6];
    t->steal = fields[7];
    t->guest = fields[8];
    t->guest_nice = fields[9];
    return true;
}

/* Clears out and fills it with the cpuN lines of buf. */
static bool parse_into(GArray *out, const char *buf, gsize len, GError **error)
{
    const char *p = buf, *end = buf + len;

    g_array_set_size(out, 0);
    while (p < end) {
        const char *nl = memchr(p, '\n', (gsize)(end - p));
        const char *line_end = nl != NULL ? nl : end;
        gsize line_len = (gsize)(line_end - p);

        if (line_len >= 3 && memcmp(p, "cpu", 3) == 0) {
            if (line_len > 3 && g_ascii_isdigit(p[3])) {
                SaCpuTimes t;

                if (!parse_cpu_line(p, line_end, &t, error))
                    return false;
                g_array_append_val(out, t);
            } else if (line_len > 3 && p[3] != ' ' && p[3] != '\t') {
                set_line_error(error, p, line_len, "not a cpu line");
                return false;
            }
            /* "cpu  ..." is the aggregate of all CPUs: skipped. */
        }
        p = line_end + 1;
    }
    return true;
}

GArray *sa_procstat_parse(const char *buf, gsize len, GError **error)
{
    g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(SaCpuTimes));

    g_return_val_if_fail(buf != NULL || len == 0, NULL);
    if (!parse_into(out, buf, len, error))
        return NULL;
    return g_steal_pointer(&out);
}

/* Elapsed ticks of one counter; a counter that went backwards (a kernel quirk, e.g. iowait, or
 * a CPU that was hot-plugged) counts as no time. */
static inline guint64 delta(guint64 prev, guint64 cur)
{
    return cur > prev ? cur - prev : 0;
}

void sa_cpu_load_compute(const SaCpuTimes *prev, const SaCpuTimes *cur, SaCpuLoad *out)
{
    guint64 user, nice, system, idle, iowait, irq, softirq, steal;
    double busy, total;

    g_return_if_fail(prev != NULL && cur != NULL && out != NULL);
    user = delta(prev->user, cur->user);
    nice = delta(prev->nice, cur->nice);
    system = delta(prev->system, cur->system);
    idle = delta(prev->idle, cur->idle);
    iowait = delta(prev->iowait, cur->iowait);
    irq = delta(prev->irq, cur->irq);
    softirq = delta(prev->softirq, cur->softirq);
    steal = delta(prev->steal, cur->steal);
    /* guest and guest_nice are already inside user and nice: not added again. Summed as
     * doubles: garbage counters near 2^64 must not wrap the total below its parts. */
    busy = (double)user + (double)nice + (double)system + (double)irq + (double)softirq;
    total = busy + (double)idle + (double)iowait + (double)steal;

    out->cpu = cur->cpu;
    if (total <= 0) {
        /* No tick elapsed on this CPU: nothing ran. */
        out->busy = 0.0;
        out->idle = 1.0;
        out->iowait = 0.0;
        out->steal = 0.0;
        return;
    }
    out->busy = MIN(busy / total, 1.0);
    out->idle = MIN((double)idle / total, 1.0);
    out->iowait = MIN((double)iowait / total, 1.0);
    out->steal = MIN((double)steal / total, 1.0);
}

struct SaStatSampler {
    int fd;
    char *path;
    char *buf;
    gsize buf_size;
    GArray *prev; /* SaCpuTimes of the previous sample */
    GArray *cur;
    bool primed;
    int *index;      /* cpu number -> position in prev, -1 if absent */
    gsize index_len; /* entries in index */
};

SaStatSampler *sa_stat_sampler_new(GError **error)
{
    g_autoptr(SaStatSampler) s = g_new0(SaStatSampler, 1);

    s->fd = -1;
    s->path = sa_proc_path("stat");
    s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
    if (s->fd < 0) {
        int saved = errno;

        g_set_error(error, SA_ERROR, saved == ENOENT ? SA_ERROR_NOT_FOUND : SA_ERROR_IO,
                    "cannot open %s: %s", s->path, g_strerror(saved));
        return NULL;
    }
    s->buf_size = INITIAL_BUFFER;
    s->buf = g_malloc(s->buf_size);
    s->prev = g_array_sized_new(FALSE, FALSE, sizeof(SaCpuTimes), 256);
    s->cur = g_array_sized_new(FALSE, FALSE, sizeof(SaCpuTimes), 256);
    return g_steal_pointer(&s);
}

void sa_stat_sampler_free(SaStatSampler *s)
{
    if (s == NULL)
        return;
    if (s->fd >= 0)
        close(s->fd);
    g_free(s->path);
    g_free(s->buf);
    if (s->prev != NULL)
        g_array_unref(s->prev);
    if (s->cur != NULL)
        g_array_unref(s->cur);
    g_free(s->index);
    g_free(s);
}

/* Reads the whole file from offset 0, growing the buffer until it fits. */
static bool read_whole(SaStatSampler *s, gsize *len, GError **error)
{
    for (;;) {
        gsize got = 0;

        while (got < s->buf_size) {
            ssize_t n = pread(s->fd, s->buf + got, s->buf_size - got, (off_t)got);

            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                int saved = errno;

                g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot read %s: %s", s->path,
                            g_strerror(saved));
                return false;
            }
            if (n == 0)
                break;
            got += (gsize)n;
        }
        if (got < s->buf_size) {
            *len = got;
            return true;
        }
        /* Full: the file may be longer (many CPUs, a long intr line). */
        s->buf_size *= 2;
        s->buf = g_realloc(s->buf, s->buf_size);
    }
}

static void index_prev(SaStatSampler *s)
{
    gsize need = 0;

    for (guint i = 0; i < s->prev->len; i++)
        need = MAX(need, (gsize)g_array_index(s->prev, SaCpuTimes, i).cpu + 1);
    if (need > s->index_len) {
        s->index = g_renew(int, s->index, need);
        s->index_len = need;
    }
    for (gsize c = 0; c < s->index_len; c++)
        s->index[c] = -1;
    for (guint i = 0; i < s->prev->len; i++)
        s->index[g_array_index(s->prev, SaCpuTimes, i).cpu] = (int)i;
}

bool sa_stat_sampler_sample(SaStatSampler *s, GArray *loads, GError **error)
{
    gsize len = 0;
    GArray *swap;

    g_return_val_if_fail(s != NULL && loads != NULL, false);
    g_array_set_size(loads, 0);
    if (!read_whole(s, &len, error))
        return false;
    if (!parse_into(s->cur, s->buf, len, error)) {
        g_prefix_error(error, "%s: ", s->path);
        return false;
    }
    if (s->cur->len == 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: no cpuN line", s->path);
        return false;
    }

    if (s->primed) {
        bool same_order = s->prev->len == s->cur->len;

        for (guint i = 0; same_order && i < s->cur->len; i++)
            same_order = g_array_index(s->prev, SaCpuTimes, i).cpu ==
                         g_array_index(s->cur, SaCpuTimes, i).cpu;
        if (!same_order)
            index_prev(s); /* CPUs came or went: match by number */
        for (guint i = 0; i < s->cur->len; i++) {
            const SaCpuTimes *cur = &g_array_index(s->cur, SaCpuTimes, i);
            const SaCpuTimes *prev = NULL;
            SaCpuLoad load;

            if (same_order) {
                prev = &g_array_index(s->prev, SaCpuTimes, i);
            } else if ((gsize)cur->cpu < s->index_len && s->index[cur->cpu] >= 0) {
                prev = &g_array_index(s->prev, SaCpuTimes, s->index[cur->cpu]);
            }
            if (prev == NULL)
                continue; /* a CPU that just came online: no interval yet */
            sa_cpu_load_compute(prev, cur, &load);
            g_array_append_val(loads, load);
        }
    }
    swap = s->prev;
    s->prev = s->cur;
    s->cur = swap;
    s->primed = true;
    return true;
}
