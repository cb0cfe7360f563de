/* softaff tests — a recording backend (see recorder.h). */
#include "recorder.h"

#include "sa-error.h"

struct RecVm {
    gint ref;
    char *key;
    SaVmFacts *facts;
    GMutex lock;
    GCond cond;
    RecMode mode;
    guint releases;
    gboolean blocked;
    guint pins, restores, writes, attempts;
    char *last_vcpus;
    char *last_threads;
    int last_assigned;
};

static GMutex log_lock;
static GPtrArray *the_log;

static void log_line(char *line)
{
    g_mutex_lock(&log_lock);
    if (!the_log)
        the_log = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(the_log, line);
    g_mutex_unlock(&log_lock);
}

GPtrArray *rec_log(void)
{
    g_mutex_lock(&log_lock);
    GPtrArray *copy = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; the_log && i < the_log->len; i++)
        g_ptr_array_add(copy, g_strdup(g_ptr_array_index(the_log, i)));
    g_mutex_unlock(&log_lock);
    return copy;
}

void rec_log_clear(void)
{
    g_mutex_lock(&log_lock);
    if (the_log)
        g_ptr_array_set_size(the_log, 0);
    g_mutex_unlock(&log_lock);
}

static SaVmFacts *facts_copy(const SaVmFacts *f)
{
    SaVmFacts *c = sa_vm_facts_new(f->key, f->name);
    c->pid = f->pid;
    c->n_vcpus = f->n_vcpus;
    c->memory_bytes = f->memory_bytes;
    c->vcpu_tids = f->vcpu_tids ? g_array_copy(f->vcpu_tids) : NULL;
    c->vcpu_cpuset = f->vcpu_cpuset ? sa_cpuset_copy(f->vcpu_cpuset) : NULL;
    if (f->vcpu_pins) {
        c->vcpu_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
        for (guint i = 0; i < f->vcpu_pins->len; i++) {
            const SaCpuSet *p = g_ptr_array_index(f->vcpu_pins, i);
            g_ptr_array_add(c->vcpu_pins, p ? sa_cpuset_copy(p) : NULL);
        }
    }
    c->emulator_pin = f->emulator_pin ? sa_cpuset_copy(f->emulator_pin) : NULL;
    if (f->iothread_ids) {
        c->iothread_ids = g_array_copy(f->iothread_ids);
        c->iothread_pins = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
        for (guint i = 0; i < f->iothread_pins->len; i++) {
            const SaCpuSet *p = g_ptr_array_index(f->iothread_pins, i);
            g_ptr_array_add(c->iothread_pins, p ? sa_cpuset_copy(p) : NULL);
        }
    }
    c->has_settings = f->has_settings;
    c->settings = f->settings;
    c->settings_error = g_strdup(f->settings_error);
    c->flavor = g_strdup(f->flavor);
    c->title = g_strdup(f->title);
    c->description = g_strdup(f->description);
    return c;
}

SaVmFacts *rec_facts(const char *key, const char *name, pid_t pid, guint n_vcpus)
{
    SaVmFacts *f = sa_vm_facts_new(key, name);
    f->pid = pid;
    f->n_vcpus = n_vcpus;
    f->memory_bytes = G_GUINT64_CONSTANT(1) << 30;
    return f;
}

RecVm *rec_vm_new(const char *key, const SaVmFacts *facts)
{
    RecVm *r = g_new0(RecVm, 1);
    r->ref = 1;
    r->key = g_strdup(key);
    r->facts = facts ? facts_copy(facts) : NULL;
    r->last_assigned = -1;
    r->last_vcpus = g_strdup("");
    g_mutex_init(&r->lock);
    g_cond_init(&r->cond);
    return r;
}

static gpointer rec_ref(gpointer p)
{
    RecVm *r = p;
    g_atomic_int_inc(&r->ref);
    return r;
}

void rec_vm_unref(RecVm *r)
{
    if (!r || !g_atomic_int_dec_and_test(&r->ref))
        return;
    sa_vm_facts_free(r->facts);
    g_free(r->key);
    g_free(r->last_vcpus);
    g_free(r->last_threads);
    g_mutex_clear(&r->lock);
    g_cond_clear(&r->cond);
    g_free(r);
}

static void rec_unref(gpointer p)
{
    rec_vm_unref(p);
}

void rec_vm_set_mode(RecVm *r, RecMode mode)
{
    g_mutex_lock(&r->lock);
    r->mode = mode;
    g_cond_broadcast(&r->cond);
    g_mutex_unlock(&r->lock);
}

void rec_vm_release(RecVm *r)
{
    g_mutex_lock(&r->lock);
    r->releases++;
    g_cond_broadcast(&r->cond);
    g_mutex_unlock(&r->lock);
}

#define GETTER(type, name, field)                                                                  \
    type name(RecVm *r)                                                                            \
    {                                                                                              \
        g_mutex_lock(&r->lock);                                                                    \
        type v = r->field;                                                                         \
        g_mutex_unlock(&r->lock);                                                                  \
        return v;                                                                                  \
    }
GETTER(guint, rec_vm_pins, pins)
GETTER(guint, rec_vm_attempts, attempts)
GETTER(guint, rec_vm_restores, restores)
GETTER(guint, rec_vm_writes, writes)
GETTER(int, rec_vm_last_assigned, last_assigned)
GETTER(gboolean, rec_vm_blocked, blocked)

char *rec_vm_last_threads(RecVm *r)
{
    g_mutex_lock(&r->lock);
    char *t = g_strdup(r->last_threads ? r->last_threads : "");
    g_mutex_unlock(&r->lock);
    return t;
}

char *rec_vm_last_vcpus(RecVm *r)
{
    g_mutex_lock(&r->lock);
    char *v = g_strdup(r->last_vcpus);
    g_mutex_unlock(&r->lock);
    return v;
}

/* Applies the mode: blocks, fails, or lets the command succeed. Called with the lock held. */
static gboolean rec_outcome(RecVm *r, const char *what, GError **error)
{
    guint releases = r->releases;
    while (r->mode == REC_BLOCK && r->releases == releases) {
        r->blocked = TRUE;
        g_cond_wait(&r->cond, &r->lock);
    }
    r->blocked = FALSE;
    switch (r->mode) {
    case REC_TRANSIENT:
        g_set_error(error, SA_ERROR, SA_ERROR_TRANSIENT, "%s: injected transient error", what);
        return FALSE;
    case REC_GONE:
        g_set_error(error, SA_ERROR, SA_ERROR_GONE, "%s: the VM is gone (injected)", what);
        return FALSE;
    case REC_REFUSED:
        g_set_error(error, SA_ERROR, SA_ERROR_UNSUPPORTED, "%s: refused (injected)", what);
        return FALSE;
    default:
        return TRUE;
    }
}

/* Every thread's set: "vcpus=1;0-3 emulator=0-1 io1=2". */
static char *describe_threads(const SaCommand *cmd)
{
    GString *s = g_string_new("vcpus=");
    for (guint i = 0; i < cmd->n_vcpus; i++) {
        g_autofree char *v = sa_cpuset_format(cmd->vcpus[i]);
        g_string_append_printf(s, "%s%s", i ? ";" : "", v);
    }
    g_autofree char *e = sa_cpuset_format(cmd->others);
    g_string_append_printf(s, " emulator=%s", e);
    for (guint i = 0; i < cmd->n_iothreads; i++) {
        g_autofree char *io = sa_cpuset_format(cmd->iothreads[i]);
        g_string_append_printf(s, " io%u=%s", cmd->iothread_ids[i], io);
    }
    return g_string_free(s, FALSE);
}

static gboolean rec_threads(RecVm *r, const char *what, const SaCommand *cmd, GError **error)
{
    g_mutex_lock(&r->lock);
    r->attempts++;
    gboolean ok = rec_outcome(r, what, error);
    if (ok) {
        g_free(r->last_threads);
        r->last_threads = describe_threads(cmd);
        g_autofree char *vcpus = cmd->n_vcpus ? sa_cpuset_format(cmd->vcpus[0]) : g_strdup("");
        g_autofree char *others = sa_cpuset_format(cmd->others);
        g_free(r->last_vcpus);
        r->last_vcpus = g_strdup(vcpus);
        log_line(g_strdup_printf("%s %s %s | %s", what, r->key, vcpus, others));
        if (g_str_equal(what, "pin"))
            r->pins++;
        else
            r->restores++;
    }
    g_mutex_unlock(&r->lock);
    return ok;
}

static bool rec_pin(gpointer handle, const SaCommand *cmd, GError **error)
{
    return rec_threads(handle, "pin", cmd, error);
}

static bool rec_restore(gpointer handle, const SaCommand *cmd, GError **error)
{
    return rec_threads(handle, "restore", cmd, error);
}

static bool rec_write(gpointer handle, const SaCommand *cmd, GError **error)
{
    RecVm *r = handle;
    g_mutex_lock(&r->lock);
    gboolean ok = rec_outcome(r, "write", error);
    if (ok) {
        r->writes++;
        r->last_assigned = cmd->settings->assigned;
        log_line(g_strdup_printf("write %s assigned=%d", r->key, cmd->settings->assigned));
    }
    g_mutex_unlock(&r->lock);
    return ok;
}

static SaVmFacts *rec_discover(gpointer handle, GError **error)
{
    RecVm *r = handle;
    g_mutex_lock(&r->lock);
    gboolean ok = rec_outcome(r, "discover", error);
    SaVmFacts *f = ok && r->facts ? facts_copy(r->facts) : NULL;
    if (ok && !f)
        g_set_error(error, SA_ERROR, SA_ERROR_GONE, "no facts for %s", r->key);
    if (ok)
        log_line(g_strdup_printf("discover %s", r->key));
    g_mutex_unlock(&r->lock);
    return f;
}

const SaBackendOps rec_ops = {
    .name = "recorder",
    .settings_name = "test settings",
    .pin = rec_pin,
    .restore = rec_restore,
    .write_assigned = rec_write,
    .discover = rec_discover,
    .handle_ref = rec_ref,
    .handle_unref = rec_unref,
};
