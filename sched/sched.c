/* softaff — the scheduler part's userspace half (sa-sched.h): loads sched/bpf/sched.bpf.c through
 * its bpftool skeleton, feeds its maps, switches threads in and out of SCHED_EXT, reads the
 * counters. Built without BPF, it only says why. */
#define G_LOG_DOMAIN "softaff-sched"

#include "sa-sched.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sa-error.h"
#include "sa-paths.h"

#define TIMEOUT_MS 30000 /* the watchdog timeout in sched.bpf.c's softaff_ops */

guint sa_sched_timeout_ms(void)
{
    return TIMEOUT_MS;
}

guint sa_sched_reach(guint softness, bool strict, guint n_parts)
{
    guint others = n_parts > 1 ? n_parts - 1 : 0;

    if (strict || softness == 0 || others == 0)
        return 0;
    if (softness >= 100)
        return others;
    return MAX(1u, (softness * others + 99) / 100);
}

G_GNUC_UNUSED static const char *exit_kind_word(int kind)
{
    switch (kind) {
    case 0:
        return "running";
    case 1:
        return "done";
    case 64:
        return "unregistered";
    case 65:
        return "unregistered by the BPF program";
    case 66:
        return "unregistered by the kernel";
    case 67:
        return "sysrq";
    case 1024:
        return "error";
    case 1025:
        return "BPF error";
    case 1026:
        return "stall";
    default:
        return "stopped";
    }
}

/* The kernel's sched_attr (include/uapi/linux/sched/types.h), first version. */
struct sa_sched_attr {
    guint32 size;
    guint32 sched_policy;
    guint64 sched_flags;
    gint32 sched_nice;
    guint32 sched_priority;
    guint64 sched_runtime, sched_deadline, sched_period;
};

/* Sets tid's policy, keeping its nice value; affinity is not touched. */
G_GNUC_UNUSED static bool set_policy(pid_t tid, guint policy, bool from_fair_only, GError **error)
{
    struct sa_sched_attr attr = {0};

    if (syscall(SYS_sched_getattr, tid, &attr, (unsigned)sizeof(attr), 0) != 0) {
        int e = errno;

        g_set_error(error, SA_ERROR, e == ESRCH ? SA_ERROR_GONE : SA_ERROR_IO,
                    "thread %d: reading its scheduling policy: %s", (int)tid, g_strerror(e));
        return false;
    }
    if (attr.sched_policy == policy)
        return true;
    /* SCHED_OTHER 0, SCHED_BATCH 3, SCHED_IDLE 5 and SCHED_EXT 7 are the fair-class policies. */
    if (from_fair_only && attr.sched_policy != 0 && attr.sched_policy != 3 &&
        attr.sched_policy != 5 && attr.sched_policy != SA_SCHED_EXT) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "thread %d has scheduling policy %u (real-time or deadline): left alone",
                    (int)tid, attr.sched_policy);
        return false;
    }
    attr.size = sizeof(attr);
    attr.sched_policy = policy;
    attr.sched_flags = 0;
    attr.sched_priority = 0;
    attr.sched_runtime = attr.sched_deadline = attr.sched_period = 0;
    if (syscall(SYS_sched_setattr, tid, &attr, 0) != 0) {
        int e = errno;

        g_set_error(error, SA_ERROR, e == ESRCH ? SA_ERROR_GONE : SA_ERROR_IO,
                    "thread %d: setting scheduling policy %u: %s", (int)tid, policy, g_strerror(e));
        return false;
    }
    return true;
}

bool sa_sched_release_thread(pid_t tid, bool *was_ext, GError **error)
{
    struct sa_sched_attr attr = {0};
    g_autoptr(GError) err = NULL;

    *was_ext = false;
    if (syscall(SYS_sched_getattr, tid, &attr, (unsigned)sizeof(attr), 0) != 0) {
        int e = errno;

        if (e == ESRCH)
            return true;
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "thread %d: reading its scheduling policy: %s",
                    (int)tid, g_strerror(e));
        return false;
    }
    if (attr.sched_policy != SA_SCHED_EXT)
        return true;
    *was_ext = true;
    if (!set_policy(tid, 0, false, &err)) {
        if (g_error_matches(err, SA_ERROR, SA_ERROR_GONE))
            return true;
        g_propagate_error(error, g_steal_pointer(&err));
        return false;
    }
    return true;
}

G_GNUC_UNUSED static bool kernel_has_sched_ext(GError **error)
{
    g_autofree char *ext = sa_sysfs_path("kernel/sched_ext");
    g_autofree char *btf = sa_sysfs_path("kernel/btf/vmlinux");

    if (access(ext, F_OK) != 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "the kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT): %s: %s", ext,
                    g_strerror(errno));
        return false;
    }
    if (access(btf, R_OK) != 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                    "no kernel BTF at %s (the kernel needs CONFIG_DEBUG_INFO_BTF): %s", btf,
                    g_strerror(errno));
        return false;
    }
    return true;
}

#ifndef SA_HAVE_BPF

struct SaSched {
    int unused;
};

bool sa_sched_available(GError **error)
{
    g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                "built without the sched_ext scheduler (meson -Dsched_ext=disabled, or no clang, "
                "bpftool or libbpf)");
    return false;
}

SaSched *sa_sched_load(GError **error)
{
    sa_sched_available(error);
    return NULL;
}

bool sa_sched_set_partitions(SaSched *s, const guint *cpu_part, guint n_cpus, guint n_parts,
                             const guint *distance, GError **error)
{
    return sa_sched_available(error);
}

bool sa_sched_attach(SaSched *s, GError **error)
{
    return sa_sched_available(error);
}

bool sa_sched_attached(const SaSched *s)
{
    return false;
}

bool sa_sched_add_thread(SaSched *s, pid_t tid, guint home, guint softness, bool strict, guint vm,
                         GError **error)
{
    return sa_sched_available(error);
}

bool sa_sched_remove_thread(SaSched *s, pid_t tid, GError **error)
{
    return sa_sched_available(error);
}

void sa_sched_forget_thread(SaSched *s, pid_t tid)
{
}

bool sa_sched_read(SaSched *s, GArray *out, GError **error)
{
    return sa_sched_available(error);
}

bool sa_sched_ejected(SaSched *s, SaSchedExit *out)
{
    return false;
}

void sa_sched_detach(SaSched *s)
{
}

void sa_sched_free(SaSched *s)
{
    g_free(s);
}

void sa_sched_fault_stall(SaSched *s, bool on)
{
}

#else /* SA_HAVE_BPF */

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "bpf/sched-shared.h"
#include "sched.skel.h"

/* Not in bookworm's UAPI headers (Linux 6.1); values as in every kernel with sched_ext. */
#define SA_BPF_F_LINK (1U << 13)
#define SA_BPF_STRUCT_OPS 44

struct SaSched {
    struct sched_bpf *skel;
    struct bpf_map *ops;         /* the one of the object's two ops maps this kernel takes */
    struct bpf_link *ops_update; /* libbpf's handle of the map update that fills the ops */
    int link_fd;                 /* the struct_ops link: the kernel's hold on the scheduler */
    guint n_parts;
    GHashTable *threads; /* tid -> home + 1, the threads switched in */
};

/* libbpf's messages during sa_sched_load, for the error (the verifier's log ends there). */
static GString *load_log;

G_GNUC_PRINTF(2, 0)
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);

    if (load_log && level <= LIBBPF_INFO)
        g_string_append(load_log, msg);
    g_debug("%s", g_strchomp(msg));
    return 0;
}

/* The last lines of libbpf's log: the verifier's verdict and what it tripped on. */
static char *log_tail(guint lines)
{
    const char *end, *p;
    guint n = 0;

    if (!load_log || !load_log->len)
        return g_strdup("");
    end = load_log->str + load_log->len;
    for (p = end - 1; p > load_log->str; p--)
        if (*p == '\n' && ++n > lines)
            break;
    return g_strstrip(g_strndup(p, end - p));
}

bool sa_sched_available(GError **error)
{
    return kernel_has_sched_ext(error);
}

/* Whether the kernel's BTF (at btf_path) has the enumerator name in enum scx_ops_flags. */
static bool kernel_has_ops_flag(const char *btf_path, const char *name)
{
    struct btf *btf = btf__parse(btf_path, NULL);
    bool found = false;
    int id;

    if (!btf)
        return false;
    id = btf__find_by_name_kind(btf, "scx_ops_flags", BTF_KIND_ENUM);
    if (id <= 0)
        id = btf__find_by_name_kind(btf, "scx_ops_flags", BTF_KIND_ENUM64);
    if (id > 0) {
        const struct btf_type *t = btf__type_by_id(btf, id);
        guint n = btf_vlen(t);

        for (guint i = 0; i < n && !found; i++) {
            __u32 off = btf_is_enum(t) ? btf_enum(t)[i].name_off : btf_enum64(t)[i].name_off;

            found = g_strcmp0(btf__name_by_offset(btf, off), name) == 0;
        }
    }
    btf__free(btf);
    return found;
}

SaSched *sa_sched_load(GError **error)
{
    g_autoptr(SaSched) s = NULL;
    libbpf_print_fn_t old;
    int err;

    if (!kernel_has_sched_ext(error))
        return NULL;
    s = g_new0(SaSched, 1);
    s->link_fd = -1;
    s->threads = g_hash_table_new(NULL, NULL);
    load_log = g_string_new(NULL);
    old = libbpf_set_print(libbpf_print);
    s->skel = sched_bpf__open();
    err = s->skel ? 0 : -errno;
    if (!err) {
        g_autofree char *btf = sa_sysfs_path("kernel/btf/vmlinux");
        /* The ops that let enqueue place a thread preempted where it may not migrate, where
         * the kernel has that flag (7.2 does); else the same ops without it, and the kernel
         * queues such a thread on its CPU's own queue itself (docs/policy.md section 11). */
        bool md = kernel_has_ops_flag(btf, "SCX_OPS_ENQ_MIGRATION_DISABLED");

        s->ops = md ? s->skel->maps.softaff_ops : s->skel->maps.softaff_ops_plain;
        bpf_map__set_autocreate(md ? s->skel->maps.softaff_ops_plain : s->skel->maps.softaff_ops,
                                false);
        g_debug("sched_ext: ops %s", bpf_map__name(s->ops));
        /* A link-held scheduler: the kernel unloads it when this process goes. */
        bpf_map__set_map_flags(s->ops, bpf_map__map_flags(s->ops) | SA_BPF_F_LINK);
        /* ops.init creates the dispatch queues, which may sleep. */
        bpf_program__set_flags(s->skel->progs.sa_init,
                               bpf_program__flags(s->skel->progs.sa_init) | BPF_F_SLEEPABLE);
        err = sched_bpf__load(s->skel);
    }
    libbpf_set_print(old);
    if (err) {
        g_autofree char *tail = log_tail(8);

        err = err < 0 ? -err : err;
        g_set_error(error, SA_ERROR, err == EPERM ? SA_ERROR_UNSUPPORTED : SA_ERROR_IO,
                    "loading the sched_ext program: %s%s%s%s", g_strerror(err),
                    err == EPERM ? " (needs root: CAP_BPF, CAP_SYS_ADMIN)" : "",
                    *tail ? "; libbpf says: " : "", tail);
        g_string_free(load_log, TRUE);
        load_log = NULL;
        return NULL;
    }
    g_string_free(load_log, TRUE);
    load_log = NULL;
    return g_steal_pointer(&s);
}

bool sa_sched_set_partitions(SaSched *s, const guint *cpu_part, guint n_cpus, guint n_parts,
                             const guint *distance, GError **error)
{
    struct sa_sched_part *pc;
    int fd_cpu = bpf_map__fd(s->skel->maps.cpu_part);
    int fd_parts = bpf_map__fd(s->skel->maps.parts);
    int fd_order = bpf_map__fd(s->skel->maps.order);
    int fd_rank = bpf_map__fd(s->skel->maps.rank);

    if (n_parts == 0 || n_parts > SA_SCHED_MAX_PARTS) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE, "%u partitions (the scheduler takes 1-%u)",
                    n_parts, SA_SCHED_MAX_PARTS);
        return false;
    }
    if (n_cpus > SA_SCHED_MAX_CPUS) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE, "%u CPUs (the scheduler takes up to %u)",
                    n_cpus, SA_SCHED_MAX_CPUS);
        return false;
    }
    pc = g_new0(struct sa_sched_part, n_parts);
    for (guint cpu = 0; cpu < n_cpus; cpu++) {
        guint p = cpu_part[cpu];

        if (p == G_MAXUINT)
            continue;
        if (p >= n_parts) {
            g_set_error(error, SA_ERROR, SA_ERROR_RANGE, "CPU %u: partition %u of %u", cpu, p,
                        n_parts);
            g_free(pc);
            return false;
        }
        if (pc[p].n >= SA_SCHED_MAX_PART_CPUS) {
            g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                        "partition %u has more than %u CPUs (the scheduler's limit)", p,
                        SA_SCHED_MAX_PART_CPUS);
            g_free(pc);
            return false;
        }
        pc[p].cpus[pc[p].n++] = cpu;
    }
    /* Every entry: the map starts all zeros, which would say partition 0. */
    for (guint cpu = 0; cpu < SA_SCHED_MAX_CPUS; cpu++) {
        __u32 key = cpu;
        __u32 val = cpu < n_cpus && cpu_part[cpu] != G_MAXUINT ? cpu_part[cpu] : SA_SCHED_NONE;

        if (bpf_map_update_elem(fd_cpu, &key, &val, BPF_ANY) != 0) {
            g_set_error(error, SA_ERROR, SA_ERROR_IO, "updating the scheduler's CPUs: %s",
                        g_strerror(errno));
            g_free(pc);
            return false;
        }
    }
    for (guint a = 0; a < SA_SCHED_MAX_PARTS; a++) {
        struct sa_sched_order o = {0};
        struct sa_sched_part empty = {0};
        __u32 key = a;

        if (a < n_parts) {
            for (guint b = 0; b < n_parts; b++)
                if (b != a)
                    o.parts[o.n++] = b;
            /* Nearest first, ties by id (insertion sort: at most 15). */
            for (guint i = 1; i < o.n; i++)
                for (guint j = i; j > 0 && distance[a * n_parts + o.parts[j]] <
                                               distance[a * n_parts + o.parts[j - 1]];
                     j--) {
                    __u32 t = o.parts[j];

                    o.parts[j] = o.parts[j - 1];
                    o.parts[j - 1] = t;
                }
        }
        for (guint b = 0; b < SA_SCHED_MAX_PARTS; b++) {
            __u32 rkey = a * SA_SCHED_MAX_PARTS + b, r = SA_SCHED_NONE;

            for (guint i = 0; i < o.n; i++)
                if (o.parts[i] == b)
                    r = i;
            if (bpf_map_update_elem(fd_rank, &rkey, &r, BPF_ANY) != 0) {
                g_set_error(error, SA_ERROR, SA_ERROR_IO, "updating the scheduler's distances: %s",
                            g_strerror(errno));
                g_free(pc);
                return false;
            }
        }
        if (bpf_map_update_elem(fd_parts, &key, a < n_parts ? &pc[a] : &empty, BPF_ANY) != 0 ||
            bpf_map_update_elem(fd_order, &key, &o, BPF_ANY) != 0) {
            g_set_error(error, SA_ERROR, SA_ERROR_IO, "updating the scheduler's partitions: %s",
                        g_strerror(errno));
            g_free(pc);
            return false;
        }
    }
    g_free(pc);
    s->n_parts = n_parts;
    s->skel->bss->n_parts = n_parts;
    return true;
}

bool sa_sched_attach(SaSched *s, GError **error)
{
    LIBBPF_OPTS(bpf_link_create_opts, opts);
    int fd, e;

    if (s->link_fd >= 0)
        return true;
    if (!s->n_parts) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "no partitions set before attaching the scheduler");
        return false;
    }
    /* Fills the kernel's copy of the ops (the link-flagged map only holds them)... */
    if (!s->ops_update) {
        s->ops_update = bpf_map__attach_struct_ops(s->ops);
        if (!s->ops_update) {
            e = errno;
            g_set_error(error, SA_ERROR, SA_ERROR_IO, "preparing the sched_ext ops: %s",
                        g_strerror(e));
            return false;
        }
    }
    /* ...and the link makes it the scheduler. */
    fd = bpf_link_create(bpf_map__fd(s->ops), 0, SA_BPF_STRUCT_OPS, &opts);
    if (fd < 0) {
        g_autofree char *ops = sa_sysfs_path("kernel/sched_ext/root/ops");
        g_autofree char *other = NULL;

        e = -fd;
        if (e == EBUSY || e == EEXIST) {
            g_file_get_contents(ops, &other, NULL, NULL);
            g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT,
                        "another sched_ext scheduler is loaded (%s)",
                        other ? g_strstrip(other) : "unknown");
        } else {
            g_set_error(error, SA_ERROR, SA_ERROR_IO, "enabling the sched_ext scheduler: %s",
                        g_strerror(e));
        }
        return false;
    }
    s->link_fd = fd;
    return true;
}

bool sa_sched_attached(const SaSched *s)
{
    return s && s->link_fd >= 0;
}

bool sa_sched_add_thread(SaSched *s, pid_t tid, guint home, guint softness, bool strict, guint vm,
                         GError **error)
{
    struct sa_sched_thread t = {0};
    __u32 key = (__u32)tid;
    int fd = bpf_map__fd(s->skel->maps.threads);

    if (home >= s->n_parts) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE, "thread %d: home partition %u of %u", (int)tid,
                    home, s->n_parts);
        return false;
    }
    if (softness > 100) {
        g_set_error(error, SA_ERROR, SA_ERROR_RANGE,
                    "thread %d: softness %u is out of range (allowed: 0-100)", (int)tid, softness);
        return false;
    }
    t.home = home;
    t.reach = sa_sched_reach(softness, strict, s->n_parts);
    t.vm = vm;
    /* The map first: the scheduler must know the thread by the time it sees it. */
    if (bpf_map_update_elem(fd, &key, &t, BPF_ANY) != 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "thread %d: updating the threads map: %s",
                    (int)tid, g_strerror(errno));
        return false;
    }
    if (!set_policy(tid, SA_SCHED_EXT, true, error)) {
        bpf_map_delete_elem(fd, &key);
        return false;
    }
    g_hash_table_insert(s->threads, GINT_TO_POINTER(tid), GUINT_TO_POINTER(home + 1));
    return true;
}

bool sa_sched_remove_thread(SaSched *s, pid_t tid, GError **error)
{
    __u32 key = (__u32)tid;
    g_autoptr(GError) err = NULL;
    bool ok = set_policy(tid, 0, false, &err);

    if (!ok && g_error_matches(err, SA_ERROR, SA_ERROR_GONE))
        ok = true;
    else if (!ok)
        g_propagate_error(error, g_steal_pointer(&err));
    g_hash_table_remove(s->threads, GINT_TO_POINTER(tid));
    bpf_map_delete_elem(bpf_map__fd(s->skel->maps.threads), &key);
    bpf_map_delete_elem(bpf_map__fd(s->skel->maps.stats), &key);
    return ok;
}

void sa_sched_forget_thread(SaSched *s, pid_t tid)
{
    __u32 key = (__u32)tid;

    g_hash_table_remove(s->threads, GINT_TO_POINTER(tid));
    bpf_map_delete_elem(bpf_map__fd(s->skel->maps.threads), &key);
    bpf_map_delete_elem(bpf_map__fd(s->skel->maps.stats), &key);
}

bool sa_sched_read(SaSched *s, GArray *out, GError **error)
{
    int fd = bpf_map__fd(s->skel->maps.stats);
    guint max = SA_SCHED_MAX_THREADS;
    g_autofree __u32 *keys = g_new(__u32, max);
    g_autofree struct sa_sched_stats *vals = g_new(struct sa_sched_stats, max);
    __u32 batch = 0, count;
    bool first = true;
    guint total = 0;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);

    for (;;) {
        int r;

        count = max - total;
        if (!count)
            break;
        r = bpf_map_lookup_batch(fd, first ? NULL : &batch, &batch, keys + total, vals + total,
                                 &count, &opts);
        first = false;
        total += count;
        if (r != 0) {
            if (errno == ENOENT)
                break;
            g_set_error(error, SA_ERROR, SA_ERROR_IO, "reading the scheduler's counters: %s",
                        g_strerror(errno));
            return false;
        }
    }
    for (guint i = 0; i < total; i++) {
        gpointer home = g_hash_table_lookup(s->threads, GINT_TO_POINTER((pid_t)keys[i]));
        SaSchedCounters c = {0};

        if (!home)
            continue; /* removed, or stats of a thread added before */
        c.tid = (pid_t)keys[i];
        c.vm = vals[i].vm;
        c.home = GPOINTER_TO_UINT(home) - 1;
        c.last_part = vals[i].part == SA_SCHED_NONE ? G_MAXUINT : vals[i].part;
        for (guint p = 0; p < SA_SCHED_PARTS; p++)
            c.run_ns[p] = vals[i].run_ns[p];
        c.wait_ns = vals[i].wait_ns;
        c.runs = vals[i].runs;
        c.visits = vals[i].visits;
        c.preempts = vals[i].preempts;
        c.preempted = vals[i].preempted;
        g_array_append_val(out, c);
    }
    return true;
}

bool sa_sched_ejected(SaSched *s, SaSchedExit *out)
{
    volatile struct sa_sched_exit *x = &s->skel->bss->exit_info;
    int kind = x->kind;

    if (!kind)
        return false;
    if (out) {
        out->kind = kind;
        out->what = exit_kind_word(kind);
        out->exit_code = x->exit_code;
        g_strlcpy(out->reason, (const char *)x->reason, sizeof(out->reason));
        g_strlcpy(out->msg, (const char *)x->msg, sizeof(out->msg));
        out->dump = x->dump[0] ? g_strndup((const char *)x->dump, sizeof(x->dump)) : NULL;
    }
    return true;
}

void sa_sched_detach(SaSched *s)
{
    GHashTableIter it;
    gpointer key;

    if (!s)
        return;
    g_hash_table_iter_init(&it, s->threads);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        g_autoptr(GError) err = NULL;

        if (!set_policy(GPOINTER_TO_INT(key), 0, false, &err) &&
            !g_error_matches(err, SA_ERROR, SA_ERROR_GONE))
            g_warning("%s", err->message);
        g_hash_table_iter_remove(&it);
    }
    if (s->link_fd >= 0) {
        close(s->link_fd);
        s->link_fd = -1;
    }
    if (s->ops_update) {
        /* Its detach would delete the map's element, which a link-flagged map refuses. */
        bpf_link__disconnect(s->ops_update);
        bpf_link__destroy(s->ops_update);
        s->ops_update = NULL;
    }
}

void sa_sched_free(SaSched *s)
{
    if (!s)
        return;
    sa_sched_detach(s);
    sched_bpf__destroy(s->skel);
    g_hash_table_destroy(s->threads);
    g_free(s);
}

void sa_sched_fault_stall(SaSched *s, bool on)
{
    s->skel->bss->stall = on;
}

#endif /* SA_HAVE_BPF */
