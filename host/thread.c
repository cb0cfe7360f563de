/* softaff — per-thread counters from /proc/<pid>/task/<tid>/{schedstat,stat,status}.
 *
 * A SaThreadSampler keeps both files open: an open /proc file stays bound to its thread, so a
 * thread that exits reads as ESRCH (SA_ERROR_GONE) even if its tid is reused. */
#define G_LOG_DOMAIN "softaff-thread"

#include "sa-sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sa-cpuset.h"
#include "sa-error.h"
#include "sa-paths.h"
#include "sa-proctask.h"

#define STAT_PROCESSOR_FIELD 39 /* proc(5): "processor", CPU number last executed on */
#define READ_BUFFER 2048

static int error_code_for(int err)
{
    return (err == ENOENT || err == ESRCH) ? SA_ERROR_GONE : SA_ERROR_IO;
}

static char *shown_text(const char *buf)
{
    g_autofree char *copy = g_strndup(buf, 160);
    g_autofree char *stripped = g_strstrip(g_strdup(copy));

    return g_strescape(stripped, NULL);
}

bool sa_schedstat_parse(const char *buf, guint64 *run_ns, guint64 *delay_ns, GError **error)
{
    guint64 values[3] = {0};
    const char *p = buf;
    guint n = 0;

    g_return_val_if_fail(buf != NULL, false);
    for (;;) {
        char *end = NULL;

        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (*p == '\0')
            break;
        if (n == G_N_ELEMENTS(values) || !g_ascii_isdigit(*p)) {
            g_autofree char *shown = shown_text(buf);

            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "schedstat \"%s\": expected \"run_ns delay_ns slices\"", shown);
            return false;
        }
        errno = 0;
        values[n++] = g_ascii_strtoull(p, &end, 10);
        if (errno != 0 || (*end != '\0' && *end != ' ' && *end != '\t' && *end != '\n')) {
            g_autofree char *shown = shown_text(buf);

            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "schedstat \"%s\": a field is not an unsigned number", shown);
            return false;
        }
        p = end;
    }
    if (n < 2) {
        g_autofree char *shown = shown_text(buf);

        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "schedstat \"%s\": expected \"run_ns delay_ns slices\"", shown);
        return false;
    }
    *run_ns = values[0];
    *delay_ns = values[1];
    return true;
}

/* Finds comm in "<pid> (<comm>) ...": the first '(' after the pid and its only space, and the
 * last ')' (comm itself may hold spaces and ')'). */
static bool stat_comm_bounds(const char *buf, const char **open_paren, const char **close_paren,
                             GError **error)
{
    const char *p;

    *open_paren = strchr(buf, '(');
    *close_paren = strrchr(buf, ')');
    for (p = buf; p < *open_paren && g_ascii_isdigit(*p); p++)
        ;
    if (*open_paren == NULL || *close_paren == NULL || *close_paren < *open_paren || p == buf ||
        p + 1 != *open_paren || *p != ' ') {
        g_autofree char *shown = shown_text(buf);

        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "stat \"%s\": no \"pid (comm)\" at the start",
                    shown);
        return false;
    }
    return true;
}

/* The processor field (STAT_PROCESSOR_FIELD), counting the fields that follow comm (p: just
 * after its closing ')', which ends field 2). */
static bool stat_processor(const char *buf, const char *p, gint64 *cpu, GError **error)
{
    g_autofree char *shown = NULL;
    guint field = 2;

    while (*p != '\0' && field < STAT_PROCESSOR_FIELD) {
        g_autofree char *word = NULL;
        const char *start;

        while (*p == ' ')
            p++;
        if (*p == '\0' || *p == '\n')
            break;
        start = p;
        while (*p != '\0' && *p != ' ' && *p != '\n')
            p++;
        if (++field < STAT_PROCESSOR_FIELD)
            continue;
        word = g_strndup(start, (gsize)(p - start));
        if (g_ascii_string_to_signed(word, 10, 0, G_MAXINT, cpu, NULL))
            return true;
        shown = shown_text(buf);
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "stat \"%s\": field %d (processor) \"%s\" is not a CPU number", shown,
                    STAT_PROCESSOR_FIELD, word);
        return false;
    }
    shown = shown_text(buf);
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                "stat \"%s\": %u fields, the processor is field %d", shown, field,
                STAT_PROCESSOR_FIELD);
    return false;
}

bool sa_thread_stat_parse(const char *buf, char *comm, gsize comm_size, int *last_cpu,
                          GError **error)
{
    const char *open_paren, *close_paren;
    gint64 cpu = -1;

    g_return_val_if_fail(buf != NULL, false);
    if (!stat_comm_bounds(buf, &open_paren, &close_paren, error) ||
        !stat_processor(buf, close_paren + 1, &cpu, error))
        return false;
    if (comm != NULL && comm_size > 0) {
        gsize len = MIN((gsize)(close_paren - open_paren - 1), comm_size - 1);

        memcpy(comm, open_paren + 1, len);
        comm[len] = '\0';
    }
    if (last_cpu != NULL)
        *last_cpu = (int)cpu;
    return true;
}

/* ---- sampler ---- */

struct SaThreadSampler {
    pid_t pid, tid;
    int schedstat_fd, stat_fd;
    char *schedstat_path, *stat_path;
};

/* One read buffer for every sampler: a tick reads thousands of threads one after the other, and a
 * buffer per sampler would cost 2 KiB each (8 MiB at 4000 vCPUs). Per thread of the caller. */
static __thread char read_buf[READ_BUFFER];

static int open_proc(const char *path, GError **error)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        int saved = errno;

        g_set_error(error, SA_ERROR, error_code_for(saved), "cannot open %s: %s", path,
                    g_strerror(saved));
    }
    return fd;
}

SaThreadSampler *sa_thread_sampler_new(pid_t pid, pid_t tid, GError **error)
{
    g_autoptr(SaThreadSampler) t = g_new0(SaThreadSampler, 1);

    t->pid = pid;
    t->tid = tid;
    t->schedstat_fd = -1;
    t->stat_fd = -1;
    t->schedstat_path = sa_proc_path("%d/task/%d/schedstat", (int)pid, (int)tid);
    t->stat_path = sa_proc_path("%d/task/%d/stat", (int)pid, (int)tid);
    t->schedstat_fd = open_proc(t->schedstat_path, error);
    if (t->schedstat_fd < 0)
        return NULL;
    t->stat_fd = open_proc(t->stat_path, error);
    if (t->stat_fd < 0)
        return NULL;
    return g_steal_pointer(&t);
}

void sa_thread_sampler_free(SaThreadSampler *t)
{
    if (t == NULL)
        return;
    if (t->schedstat_fd >= 0)
        close(t->schedstat_fd);
    if (t->stat_fd >= 0)
        close(t->stat_fd);
    g_free(t->schedstat_path);
    g_free(t->stat_path);
    g_free(t);
}

/* Rereads a small /proc file from offset 0 into read_buf, NUL-terminated. */
static bool reread(SaThreadSampler *t, int fd, const char *path, GError **error)
{
    ssize_t n;

    do
        n = pread(fd, read_buf, sizeof(read_buf) - 1, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        int saved = errno;

        g_set_error(error, SA_ERROR, error_code_for(saved), "cannot read %s: %s", path,
                    g_strerror(saved));
        return false;
    }
    if (n == 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_GONE, "%s is empty: the thread has exited", path);
        return false;
    }
    read_buf[n] = '\0';
    return true;
}

bool sa_thread_sampler_read_times(SaThreadSampler *t, guint64 *run_ns, guint64 *delay_ns,
                                  GError **error)
{
    g_return_val_if_fail(t != NULL, false);
    if (!reread(t, t->schedstat_fd, t->schedstat_path, error))
        return false;
    if (!sa_schedstat_parse(read_buf, run_ns, delay_ns, error)) {
        g_prefix_error(error, "%s: ", t->schedstat_path);
        return false;
    }
    return true;
}

bool sa_thread_sampler_read(SaThreadSampler *t, SaThreadSample *out, GError **error)
{
    g_return_val_if_fail(t != NULL && out != NULL, false);
    if (!reread(t, t->schedstat_fd, t->schedstat_path, error))
        return false;
    if (!sa_schedstat_parse(read_buf, &out->run_ns, &out->delay_ns, error)) {
        g_prefix_error(error, "%s: ", t->schedstat_path);
        return false;
    }
    if (!reread(t, t->stat_fd, t->stat_path, error))
        return false;
    if (!sa_thread_stat_parse(read_buf, out->comm, sizeof(out->comm), &out->last_cpu, error)) {
        g_prefix_error(error, "%s: ", t->stat_path);
        return false;
    }
    return true;
}

bool sa_schedstat_check(pid_t pid, pid_t tid, GError **error)
{
    g_autofree char *schedstat = sa_proc_path("%d/task/%d/schedstat", (int)pid, (int)tid);
    g_autofree char *stat = sa_proc_path("%d/task/%d/stat", (int)pid, (int)tid);

    if (access(schedstat, R_OK) == 0)
        return true;
    int saved = errno;
    /* A thread that is there without a schedstat: the kernel does not keep the counters. */
    if (saved == ENOENT && access(stat, R_OK) == 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "%s does not exist: this kernel was built without CONFIG_SCHED_INFO "
                    "(selected by CONFIG_SCHEDSTATS or CONFIG_TASK_DELAY_ACCT), and softaff "
                    "measures vCPU threads by their run time and run delay in that file",
                    schedstat);
        return false;
    }
    if (saved == ENOENT)
        g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND,
                    "neither %s nor %s exists: is /proc mounted?", schedstat, stat);
    else
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot read %s: %s", schedstat,
                    g_strerror(saved));
    return false;
}

/* ---- listing and allowed CPUs ---- */

static int compare_pids(gconstpointer a, gconstpointer b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

    return x < y ? -1 : x > y;
}

/* The fields of /proc/PID/stat after comm (field 3 on), split on blanks; NULL when it cannot be
 * read. comm may hold spaces and ')': the fields start after the last ')'. */
static GStrv process_stat_fields(pid_t pid)
{
    g_autofree char *path = sa_proc_path("%d/stat", (int)pid);
    g_autofree char *text = NULL;

    if (pid <= 0 || !g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    const char *end = strrchr(text, ')');
    if (!end || end[1] != ' ')
        return NULL;
    g_autoptr(GStrvBuilder) b = g_strv_builder_new();
    g_auto(GStrv) words = g_strsplit_set(end + 1, " \n", -1);
    for (char **w = words; *w; w++)
        if (**w != '\0')
            g_strv_builder_add(b, *w);
    return g_strv_builder_end(b);
}

char sa_process_state(pid_t pid)
{
    g_auto(GStrv) fields = process_stat_fields(pid);
    return fields && fields[0] ? fields[0][0] : 0;
}

/* Field 22 "starttime" is the 20th after comm. */
#define STAT_STARTTIME_AFTER_COMM (22 - 3)

guint64 sa_process_start_time(pid_t pid)
{
    g_auto(GStrv) fields = process_stat_fields(pid);
    guint64 v = 0;
    if (!fields || g_strv_length(fields) <= STAT_STARTTIME_AFTER_COMM)
        return 0;
    return g_ascii_string_to_unsigned(fields[STAT_STARTTIME_AFTER_COMM], 10, 0, G_MAXUINT64, &v,
                                      NULL)
               ? v
               : 0;
}

GArray *sa_process_list_threads(pid_t pid, GError **error)
{
    g_autofree char *path = sa_proc_path("%d/task", (int)pid);
    g_autoptr(GArray) tids = g_array_new(FALSE, FALSE, sizeof(pid_t));
    g_autoptr(GError) local = NULL;
    g_autoptr(GDir) dir = g_dir_open(path, 0, &local);
    const char *name;

    if (dir == NULL) {
        int code =
            g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? SA_ERROR_GONE : SA_ERROR_IO;

        g_set_error(error, SA_ERROR, code, "cannot list the threads of process %d (%s): %s",
                    (int)pid, path, local->message);
        return NULL;
    }
    while ((name = g_dir_read_name(dir)) != NULL) {
        guint64 tid;
        pid_t value;

        if (!g_ascii_string_to_unsigned(name, 10, 1, G_MAXINT, &tid, NULL))
            continue;
        value = (pid_t)tid;
        g_array_append_val(tids, value);
    }
    g_array_sort(tids, compare_pids);
    return g_steal_pointer(&tids);
}

/* Reads a whole /proc file; a thread or process that is gone gives SA_ERROR_GONE. */
static char *read_proc_text(const char *path, GError **error)
{
    g_autoptr(GString) text = g_string_sized_new(READ_BUFFER);
    char chunk[READ_BUFFER];
    int fd = open_proc(path, error);

    if (fd < 0)
        return NULL;
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;

            g_set_error(error, SA_ERROR, error_code_for(saved), "cannot read %s: %s", path,
                        g_strerror(saved));
            close(fd);
            return NULL;
        }
        if (n == 0)
            break;
        g_string_append_len(text, chunk, n);
    }
    close(fd);
    return g_string_free(g_steal_pointer(&text), FALSE);
}

SaCpuSet *sa_thread_read_allowed(pid_t pid, pid_t tid, GError **error)
{
    static const char key[] = "Cpus_allowed_list:";
    g_autofree char *path = sa_proc_path("%d/task/%d/status", (int)pid, (int)tid);
    g_autofree char *text = read_proc_text(path, error);
    g_autoptr(GError) local = NULL;
    const char *line;

    if (text == NULL)
        return NULL;
    for (line = text; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');

        if (g_str_has_prefix(line, key)) {
            const char *value = line + strlen(key);
            g_autofree char *copy =
                g_strndup(value, nl != NULL ? (gsize)(nl - value) : strlen(value));
            SaCpuSet *set = sa_cpuset_parse(copy, &local);

            if (set == NULL) {
                g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: %s", path, local->message);
                return NULL;
            }
            return set;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: no Cpus_allowed_list line", path);
    return NULL;
}

pid_t sa_thread_sampler_tid(const SaThreadSampler *t)
{
    return t->tid;
}
