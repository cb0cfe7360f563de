/* softaffd — the mover: a VM's guest memory follows its home node, off the main loop, in
 * bounded chunks, paced, cancelled by a new home. Never a memory binding (see core-private.h).
 *
 * Which pages: every mapping host/numa.c calls guest memory (writable anonymous, memfd and
 * hugetlbfs mappings but stacks), read from /proc/PID/numa_maps when a job starts; a chunk asks
 * where its pages are (move_pages with no nodes) and moves only those elsewhere. */
#define G_LOG_DOMAIN "softaffd"

#include <errno.h>

#include "core-private.h"
#include "sa-error.h"

#define MIB (1024.0 * 1024.0)

typedef struct {
    gint refs; /* under the mover's lock */
    char *key;
    char *name;
    pid_t pid;
    int node;
    bool follow;
    bool forgotten;
    guint64 generation; /* a new home: work begun for an older one is dropped */
    /* the job */
    bool job;
    SaProcMemory *plan; /* read at the job's first step */
    guint map;          /* the next chunk: mapping index ... */
    guint64 addr;       /* ... and address */
    gint64 job_started_us;
    bool unseen_said; /* the migrate_pages fallback was logged */
    bool away;        /* bursting: no move starts (sa_mover_set_away) */
    bool after_job;   /* the next reading is the one right after a move: it starts none */
    /* readings */
    gint64 next_measure_us; /* 0: now */
    bool report;            /* log the next reading (first one, after a move) */
    char *last_error;       /* logged once */
    SaMemoryStatus st;
} MoverVm;

struct SaMover {
    GMutex lock;
    GCond wake;
    GThread *thread;
    bool quit;
    bool kicked; /* something changed since the thread last looked */
    const SaMoverOps *ops;
    gpointer data;
    guint rate_mib_s;
    GPtrArray *vms;     /* MoverVm*, in the order they came (round robin from next) */
    GHashTable *by_key; /* key -> MoverVm* of vms */
    guint next;
    SaPacer pacer;
    gint64 not_before_us; /* no chunk before this (pacing) */
};

/* ---- pacing ---- */

gint64 sa_pacer_wait(SaPacer *p, guint64 bytes, gint64 now_us, guint rate_mib_s)
{
    double per_us = rate_mib_s * MIB / G_USEC_PER_SEC;
    gint64 due = p->start_us + (gint64)((double)p->bytes / per_us);
    if (p->start_us == 0 || due < now_us) {
        /* First use, or idle since the last chunk was due: count from now. */
        p->start_us = now_us;
        p->bytes = 0;
    }
    p->bytes += bytes;
    due = p->start_us + (gint64)((double)p->bytes / per_us);
    return MAX(due - now_us, 0);
}

/* ---- the host ---- */

static bool proc_redirected(void)
{
    const char *root = g_getenv("SOFTAFF_PROC_ROOT");
    return root != NULL && root[0] != '\0';
}

static SaProcMemory *host_read_memory(gpointer data, pid_t pid, GError **error)
{
    return sa_numa_proc_memory(pid, error);
}

/* A pid of a fake /proc may be any process of this host: never touch its pages. */
static bool refuse_fake_pid(pid_t pid, GError **error)
{
    if (!proc_redirected())
        return false;
    g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED,
                "SOFTAFF_PROC_ROOT is set: process %d is not a process of this host", (int)pid);
    return true;
}

static bool host_query(gpointer data, pid_t pid, gulong count, void **pages, int *status,
                       GError **error)
{
    return !refuse_fake_pid(pid, error) && sa_numa_query_pages(pid, count, pages, status, error);
}

static bool host_move(gpointer data, pid_t pid, gulong count, void **pages, int node, int *status,
                      GError **error)
{
    return !refuse_fake_pid(pid, error) &&
           sa_numa_move_pages(pid, count, pages, node, status, error);
}

static long host_migrate_all(gpointer data, pid_t pid, int node, GError **error)
{
    if (refuse_fake_pid(pid, error))
        return -1;
    g_autoptr(SaCpuSet) from = sa_numa_nodes(error);
    if (!from)
        return -1;
    sa_cpuset_remove(from, (guint)node);
    g_autoptr(SaCpuSet) to = sa_cpuset_new();
    sa_cpuset_add(to, (guint)node);
    return sa_numa_migrate_pages(pid, from, to, error);
}

const SaMoverOps sa_mover_host_ops = {
    .read_memory = host_read_memory,
    .query_pages = host_query,
    .move_pages = host_move,
    .migrate_all = host_migrate_all,
};

/* ---- VMs ---- */

static void vm_unref(MoverVm *v)
{
    if (--v->refs > 0)
        return;
    sa_proc_memory_free(v->plan);
    g_free(v->last_error);
    g_free(v->key);
    g_free(v->name);
    g_free(v);
}

static MoverVm *find_vm(SaMover *m, const char *key)
{
    return g_hash_table_lookup(m->by_key, key);
}

static void end_job(MoverVm *v)
{
    v->job = false;
    v->st.moving = false;
    g_clear_pointer(&v->plan, sa_proc_memory_free);
}

/* Logs each distinct failure of a VM once. */
static void vm_error(MoverVm *v, const GError *error)
{
    if (g_strcmp0(v->last_error, error->message) == 0)
        return;
    g_free(v->last_error);
    v->last_error = g_strdup(error->message);
    g_message("%s: memory placement: %s", v->name, error->message);
}

static void kick(SaMover *m)
{
    m->kicked = true;
    g_cond_signal(&m->wake);
}

void sa_mover_set_home(SaMover *m, const char *key, const char *name, pid_t pid, int node,
                       bool follow)
{
    g_mutex_lock(&m->lock);
    MoverVm *v = find_vm(m, key);
    if (!v) {
        v = g_new0(MoverVm, 1);
        v->refs = 1;
        v->key = g_strdup(key);
        v->name = g_strdup(name);
        v->node = -1;
        v->st.node = -1;
        v->report = true;
        g_ptr_array_add(m->vms, v);
        g_hash_table_insert(m->by_key, v->key, v);
    }
    v->pid = pid;
    if (g_strcmp0(v->name, name) != 0) {
        g_free(v->name);
        v->name = g_strdup(name);
    }
    follow = follow && node >= 0;
    if (v->node != node || v->follow != follow) {
        if (v->job) {
            g_info("%s: memory move to node %d stopped: %s", v->name, v->node,
                   node >= 0 && follow ? "a new home" : "memory no longer follows the home");
            v->st.cancels++;
            end_job(v);
        }
        v->generation++;
        v->node = v->st.node = node;
        v->follow = v->st.follow = follow;
        v->job = v->st.moving = follow;
        v->st.move_done_bytes = v->st.move_total_bytes = 0;
        v->st.move_rate = 0;
        v->st.node_full = false;
        v->next_measure_us = 0; /* the share on the new node */
        kick(m);
    }
    g_mutex_unlock(&m->lock);
}

void sa_mover_set_away(SaMover *m, const char *key, bool away)
{
    g_mutex_lock(&m->lock);
    MoverVm *v = find_vm(m, key);
    if (v)
        v->away = away;
    g_mutex_unlock(&m->lock);
}

void sa_mover_forget(SaMover *m, const char *key)
{
    g_mutex_lock(&m->lock);
    MoverVm *v = find_vm(m, key);
    if (v) {
        v->forgotten = true;
        v->generation++;
        end_job(v);
        g_hash_table_remove(m->by_key, key);
        g_ptr_array_remove(m->vms, v);
        vm_unref(v);
    }
    g_mutex_unlock(&m->lock);
}

bool sa_mover_status(SaMover *m, const char *key, SaMemoryStatus *out)
{
    g_mutex_lock(&m->lock);
    MoverVm *v = find_vm(m, key);
    if (v)
        *out = v->st;
    g_mutex_unlock(&m->lock);
    return v != NULL;
}

void sa_mover_set_rate(SaMover *m, guint rate_mib_s)
{
    g_mutex_lock(&m->lock);
    m->rate_mib_s = MAX(rate_mib_s, 1);
    m->pacer = (SaPacer){0};
    kick(m);
    g_mutex_unlock(&m->lock);
}

/* ---- readings ---- */

static void log_reading(const MoverVm *v)
{
    const SaMemoryStatus *s = &v->st;
    double share = s->resident_bytes ? 100.0 * s->home_bytes / s->resident_bytes : 100.0;
    g_info("%s: %.1f%% of its %.0f MiB resident memory on home node %d", v->name, share,
           s->resident_bytes / MIB, v->node);
}

/* A reading at home that finds memory strayed from it (first touched on a visited node while
 * bursting, put elsewhere by the kernel): a move of the rest starts, said in the log. Not
 * while bursting, during a move, after one stopped at a full node, nor in the reading right
 * after a move (what it could not move waits for the next reading, 30 s on: no busy loop). */
static void rehome(MoverVm *v)
{
    const SaMemoryStatus *s = &v->st;
    guint64 off = s->resident_bytes - MIN(s->home_bytes, s->resident_bytes);
    bool after_job = v->after_job;
    v->after_job = false;
    if (after_job || !v->follow || v->away || v->job || s->node_full ||
        off < SA_MOVER_CHUNK_BYTES ||
        (double)s->home_bytes >= SA_MOVER_REHOME_RATIO * (double)s->resident_bytes)
        return;
    g_info("%s: %.0f MiB of its memory away from home node %d: moving it home", v->name, off / MIB,
           v->node);
    v->generation++;
    v->job = v->st.moving = true;
    v->st.move_done_bytes = v->st.move_total_bytes = 0;
    v->st.move_rate = 0;
}

static void take_reading(MoverVm *v, const SaProcMemory *mem, gint64 now_us)
{
    v->st.resident_bytes = sa_proc_memory_bytes(mem, -1);
    v->st.home_bytes = sa_proc_memory_bytes(mem, v->node);
    v->st.measured_wall_us = g_get_real_time();
    v->next_measure_us = now_us + SA_MOVER_MEASURE_US;
    if (v->report)
        log_reading(v);
    v->report = false;
    rehome(v);
}

/* A failed read: GONE stops the readings (the core forgets the VM soon). */
static void reading_failed(MoverVm *v, const GError *error, gint64 now_us)
{
    v->next_measure_us =
        g_error_matches(error, SA_ERROR, SA_ERROR_GONE) ? G_MAXINT64 : now_us + SA_MOVER_MEASURE_US;
    if (!g_error_matches(error, SA_ERROR, SA_ERROR_GONE))
        vm_error(v, error);
}

static void measure(SaMover *m, MoverVm *v, gint64 now_us)
{
    g_autoptr(GError) error = NULL;
    pid_t pid = v->pid;
    g_mutex_unlock(&m->lock);
    g_autoptr(SaProcMemory) mem = m->ops->read_memory(m->data, pid, &error);
    g_mutex_lock(&m->lock);
    if (v->forgotten)
        return;
    if (mem)
        take_reading(v, mem, now_us);
    else
        reading_failed(v, error, now_us);
}

/* ---- jobs ---- */

static void finish_job(MoverVm *v, gint64 now_us)
{
    const SaMemoryStatus *s = &v->st;
    double seconds = (now_us - v->job_started_us) / 1e6;
    if (s->move_total_bytes > 0)
        g_info("%s: memory move to node %d %s: %.0f of %.0f MiB moved in %.1f s", v->name, v->node,
               s->node_full ? "stopped (node full)" : "done", s->move_done_bytes / MIB,
               s->move_total_bytes / MIB, seconds);
    v->st.moves++;
    end_job(v);
    v->next_measure_us = 0;
    v->report = true;
    v->after_job = true;
}

/* The job's first step: where the pages are, and what is elsewhere. */
static void plan_job(SaMover *m, MoverVm *v, guint64 generation, gint64 now_us)
{
    g_autoptr(GError) error = NULL;
    pid_t pid = v->pid;
    g_mutex_unlock(&m->lock);
    SaProcMemory *plan = m->ops->read_memory(m->data, pid, &error);
    g_mutex_lock(&m->lock);
    if (v->generation != generation) {
        sa_proc_memory_free(plan);
        return;
    }
    if (!plan) {
        reading_failed(v, error, now_us);
        end_job(v);
        return;
    }
    v->plan = plan;
    v->map = 0;
    v->addr = plan->mappings->len ? g_array_index(plan->mappings, SaMemMapping, 0).start : 0;
    v->job_started_us = now_us;
    take_reading(v, plan, now_us);
    v->st.move_total_bytes = v->st.resident_bytes - v->st.home_bytes;
    if (v->st.move_total_bytes == 0) {
        finish_job(v, now_us);
        /* Nothing to move: the reading just taken holds, and the next one is a periodic one. */
        v->report = false;
        v->after_job = false;
        v->next_measure_us = now_us + SA_MOVER_MEASURE_US;
        return;
    }
    g_info("%s: moving %.0f MiB of memory to its home node %d (at most %u MiB/s)", v->name,
           v->st.move_total_bytes / MIB, v->node, m->rate_mib_s);
}

/* The next mapping from v->map on with resident pages off the home node; NULL: none left. */
static const SaMemMapping *next_mapping(MoverVm *v)
{
    for (; v->map < v->plan->mappings->len; v->map++) {
        const SaMemMapping *map = &g_array_index(v->plan->mappings, SaMemMapping, v->map);
        if (v->addr < map->start)
            v->addr = map->start;
        if (v->addr < map->end &&
            sa_mem_mapping_bytes(map, -1) > sa_mem_mapping_bytes(map, v->node))
            return map;
    }
    return NULL;
}

typedef struct {
    guint64 seen;  /* pages move_pages found mapped */
    guint64 moved; /* pages now on the node that were elsewhere */
    guint64 full;  /* pages the node had no room for */
} ChunkResult;

/* One query, one move of the pages elsewhere, one query of those (lock not held). The second
 * query counts what arrived: a move that leaves pages behind returns their number and may
 * leave their status unwritten, and the status of a transparent huge page's other 4 KiB
 * pages says "busy" though the whole page moved with the first. */
static bool move_chunk(SaMover *m, pid_t pid, int node, void **pages, gulong n, ChunkResult *r,
                       GError **error)
{
    g_autofree int *status = g_new(int, n);
    gulong k = 0;
    if (!m->ops->query_pages(m->data, pid, n, pages, status, error))
        return false;
    for (gulong i = 0; i < n; i++) {
        r->seen += status[i] >= 0;
        if (status[i] >= 0 && status[i] != node)
            pages[k++] = pages[i];
    }
    if (k == 0)
        return true;
    for (gulong i = 0; i < k; i++)
        status[i] = G_MININT;
    if (!m->ops->move_pages(m->data, pid, k, pages, node, status, error))
        return false;
    for (gulong i = 0; i < k; i++)
        r->full += status[i] == -ENOMEM;
    if (!m->ops->query_pages(m->data, pid, k, pages, status, error))
        return false;
    for (gulong i = 0; i < k; i++)
        r->moved += status[i] == node;
    return true;
}

static void chunk_done(SaMover *m, MoverVm *v, const ChunkResult *r, guint64 page_size,
                       gint64 now_us)
{
    guint64 bytes = r->moved * page_size;
    v->st.moved_bytes_total += bytes;
    v->st.move_done_bytes += bytes;
    if (now_us > v->job_started_us)
        v->st.move_rate = v->st.move_done_bytes * 1e6 / (double)(now_us - v->job_started_us);
    m->not_before_us = now_us + sa_pacer_wait(&m->pacer, bytes, now_us, m->rate_mib_s);
    if (r->full == 0)
        return;
    /* No binding: what does not fit stays where it is. */
    g_message("%s: home node %d has no free memory: %.0f MiB of the VM's memory stay on other "
              "nodes",
              v->name, v->node,
              (v->st.move_total_bytes - MIN(v->st.move_done_bytes, v->st.move_total_bytes)) / MIB);
    v->st.node_full = true;
    finish_job(v, now_us);
}

/* Pages numa_maps shows off the home node that move_pages cannot see: seen on Linux 6.1 with a
 * QEMU whose guest RAM libvirt preallocates (<allocation mode='immediate'/>): numa_maps and
 * migrate_pages(2) see those pages, smaps and move_pages do not (until migrate_pages has moved
 * them once). When the chunks are done and a fresh reading still shows a chunk or more off the
 * home node, migrate_pages moves the rest in one call, which the rate cannot pace: said once
 * per VM, with what it moved and the time it took. */
static void migrate_rest(SaMover *m, MoverVm *v, guint64 generation, gint64 now_us)
{
    if (!m->ops->migrate_all || v->st.node_full)
        return;
    pid_t pid = v->pid;
    int node = v->node;
    g_autoptr(GError) error = NULL;
    g_mutex_unlock(&m->lock);
    g_autoptr(SaProcMemory) before = m->ops->read_memory(m->data, pid, NULL);
    guint64 home0 = before ? sa_proc_memory_bytes(before, node) : 0;
    guint64 off = before ? sa_proc_memory_bytes(before, -1) - home0 : 0;
    long left = 0;
    gint64 t0 = g_get_monotonic_time();
    if (off >= SA_MOVER_CHUNK_BYTES)
        left = m->ops->migrate_all(m->data, pid, node, &error);
    gint64 took = g_get_monotonic_time() - t0;
    g_autoptr(SaProcMemory) after =
        off >= SA_MOVER_CHUNK_BYTES && left >= 0 ? m->ops->read_memory(m->data, pid, NULL) : NULL;
    g_mutex_lock(&m->lock);
    if (v->generation != generation || off < SA_MOVER_CHUNK_BYTES)
        return;
    if (left < 0) {
        vm_error(v, error);
        return;
    }
    guint64 home = after ? sa_proc_memory_bytes(after, node) : home0;
    guint64 moved = home > home0 ? home - home0 : 0;
    v->st.moved_bytes_total += moved;
    v->st.move_done_bytes += moved;
    if (took > 0)
        v->st.move_rate = moved * 1e6 / (double)took;
    m->not_before_us = now_us + took + sa_pacer_wait(&m->pacer, moved, now_us, m->rate_mib_s);
    if (!v->unseen_said)
        g_message("%s: move_pages(2) could not see %.0f MiB that numa_maps shows off node %d; "
                  "migrate_pages(2) moved %.0f MiB in one call of %.1f s, not paced to [memory] "
                  "rate_mib_s",
                  v->name, off / MIB, node, moved / MIB, took / 1e6);
    v->unseen_said = true;
}

static void run_chunk(SaMover *m, MoverVm *v, guint64 generation, gint64 now_us)
{
    const SaMemMapping *map = next_mapping(v);
    if (!map) {
        migrate_rest(m, v, generation, now_us);
        finish_job(v, now_us);
        return;
    }
    guint64 page_size = map->page_size;
    gulong n =
        (gulong)MIN((map->end - v->addr) / page_size, MAX(SA_MOVER_CHUNK_BYTES / page_size, 1));
    g_autofree void **pages = g_new(void *, MAX(n, 1));
    for (gulong i = 0; i < n; i++)
        pages[i] = (void *)(guintptr)(v->addr + i * page_size);
    v->addr += n * page_size;
    pid_t pid = v->pid;
    int node = v->node;
    ChunkResult r = {0};
    g_autoptr(GError) error = NULL;

    g_mutex_unlock(&m->lock);
    bool ok = move_chunk(m, pid, node, pages, n, &r, &error);
    g_mutex_lock(&m->lock);
    if (v->generation != generation) {
        v->st.moved_bytes_total += r.moved * page_size; /* moved all the same */
        return;
    }
    if (ok) {
        chunk_done(m, v, &r, page_size, now_us);
        return;
    }
    if (!g_error_matches(error, SA_ERROR, SA_ERROR_GONE))
        vm_error(v, error);
    end_job(v);
}

/* ---- the loop ---- */

/* The next VM with work due at now_us (readings first, then jobs in turn); *wait_us: until the
 * next one otherwise. */
static MoverVm *next_due(SaMover *m, gint64 now_us, gint64 *wait_us)
{
    gint64 wait = -1;
    for (guint i = 0; i < m->vms->len; i++) {
        MoverVm *v = g_ptr_array_index(m->vms, i);
        if (v->node < 0 || v->next_measure_us == G_MAXINT64 || (v->job && !v->plan))
            continue;
        if (v->next_measure_us <= now_us)
            return v;
        wait = wait < 0 ? v->next_measure_us - now_us : MIN(wait, v->next_measure_us - now_us);
    }
    for (guint k = 0; k < m->vms->len; k++) {
        MoverVm *v = g_ptr_array_index(m->vms, (m->next + k) % m->vms->len);
        if (!v->job)
            continue;
        if (v->plan && m->not_before_us > now_us) {
            wait = wait < 0 ? m->not_before_us - now_us : MIN(wait, m->not_before_us - now_us);
            continue;
        }
        m->next = (m->next + k + 1) % m->vms->len;
        return v;
    }
    *wait_us = wait;
    return NULL;
}

bool sa_mover_step(SaMover *m, gint64 now_us, gint64 *wait_us)
{
    g_mutex_lock(&m->lock);
    *wait_us = 0;
    MoverVm *v = next_due(m, now_us, wait_us);
    if (!v) {
        g_mutex_unlock(&m->lock);
        return false;
    }
    v->refs++;
    if (v->job && !v->plan)
        plan_job(m, v, v->generation, now_us);
    else if (v->job && v->next_measure_us > now_us)
        run_chunk(m, v, v->generation, now_us);
    else
        measure(m, v, now_us);
    vm_unref(v);
    g_mutex_unlock(&m->lock);
    return true;
}

static gpointer mover_thread(gpointer data)
{
    SaMover *m = data;
    for (;;) {
        gint64 wait = -1;
        bool did = sa_mover_step(m, g_get_monotonic_time(), &wait);
        g_mutex_lock(&m->lock);
        if (m->quit) {
            g_mutex_unlock(&m->lock);
            return NULL;
        }
        if (!did && !m->kicked) {
            if (wait < 0)
                g_cond_wait(&m->wake, &m->lock);
            else
                g_cond_wait_until(&m->wake, &m->lock, g_get_monotonic_time() + wait);
        }
        m->kicked = false;
        g_mutex_unlock(&m->lock);
    }
}

SaMover *sa_mover_new(const SaMoverOps *ops, gpointer data, guint rate_mib_s, bool threaded)
{
    SaMover *m = g_new0(SaMover, 1);
    g_mutex_init(&m->lock);
    g_cond_init(&m->wake);
    m->ops = ops;
    m->data = data;
    m->rate_mib_s = MAX(rate_mib_s, 1);
    m->vms = g_ptr_array_new();
    m->by_key = g_hash_table_new(g_str_hash, g_str_equal);
    if (threaded)
        m->thread = g_thread_new("softaff-mover", mover_thread, m);
    return m;
}

void sa_mover_free(SaMover *m)
{
    if (!m)
        return;
    if (m->thread) {
        g_mutex_lock(&m->lock);
        m->quit = true;
        kick(m);
        g_mutex_unlock(&m->lock);
        g_thread_join(m->thread);
    }
    for (guint i = 0; i < m->vms->len; i++)
        vm_unref(g_ptr_array_index(m->vms, i));
    g_ptr_array_unref(m->vms);
    g_hash_table_unref(m->by_key);
    g_cond_clear(&m->wake);
    g_mutex_clear(&m->lock);
    g_free(m);
}
