/* softaffd — original affinities of QMP-managed threads, in a state file (see qmp-state.h). */
#define G_LOG_DOMAIN "softaffd"

#include "qmp-state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sa-cpuset.h"
#include "sa-proctask.h"

#define STATE_FILE "qmp-originals.ini"

struct QmpState {
    gint ref; /* atomic */
    GMutex lock;
    char *file;  /* guarded by lock */
    bool warned; /* guarded by lock: a failed write was logged */
};

QmpState *qmp_state_new(void)
{
    QmpState *state = g_new0(QmpState, 1);
    state->ref = 1;
    g_mutex_init(&state->lock);
    return state;
}

QmpState *qmp_state_ref(QmpState *state)
{
    g_atomic_int_inc(&state->ref);
    return state;
}

void qmp_state_unref(QmpState *state)
{
    if (!state || !g_atomic_int_dec_and_test(&state->ref))
        return;
    g_mutex_clear(&state->lock);
    g_free(state->file);
    g_free(state);
}

void qmp_state_set_socket(QmpState *state, const char *control_socket)
{
    g_autofree char *dir = control_socket ? g_path_get_dirname(control_socket) : NULL;
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&state->lock);
    g_free(state->file);
    state->file = dir ? g_build_filename(dir, STATE_FILE, NULL) : NULL;
}

char *qmp_state_file(QmpState *state)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&state->lock);
    return g_strdup(state->file);
}

static char *group_name(const char *socket, pid_t pid, guint64 start)
{
    g_autofree char *escaped = g_uri_escape_string(socket, "/", FALSE);
    return g_strdup_printf("%s %d %" G_GUINT64_FORMAT, escaped, (int)pid, start);
}

static GKeyFile *load_locked(QmpState *state)
{
    GKeyFile *kf = g_key_file_new();
    if (state->file)
        g_key_file_load_from_file(kf, state->file, G_KEY_FILE_NONE, NULL);
    return kf;
}

static void save_locked(QmpState *state, GKeyFile *kf)
{
    if (!state->file)
        return;
    g_autofree char *dir = g_path_get_dirname(state->file);
    g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);
    g_autoptr(GError) error = NULL;
    if (g_mkdir_with_parents(dir, 0755) < 0)
        g_set_error(&error, G_FILE_ERROR, g_file_error_from_errno(errno), "%s: %s", dir,
                    g_strerror(errno));
    else
        g_file_set_contents(state->file, text, -1, &error);
    if (error && !state->warned)
        g_warning("cannot record the original affinities of QMP-managed threads in %s: %s; a "
                  "restarted softaffd would take softaff's own pins for them",
                  state->file, error->message);
    state->warned = state->warned || error;
}

GHashTable *qmp_state_load(QmpState *state, const char *socket, pid_t pid, guint64 start)
{
    GHashTable *out = g_hash_table_new_full(NULL, NULL, NULL, (GDestroyNotify)sa_cpuset_free);
    g_autofree char *group = group_name(socket, pid, start);
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&state->lock);
    g_autoptr(GKeyFile) kf = load_locked(state);
    g_auto(GStrv) keys = g_key_file_get_keys(kf, group, NULL, NULL);
    for (guint i = 0; keys && keys[i]; i++) {
        guint64 tid = 0;
        g_autofree char *value = g_key_file_get_string(kf, group, keys[i], NULL);
        SaCpuSet *set = value ? sa_cpuset_parse(value, NULL) : NULL;
        if (set && !sa_cpuset_is_empty(set) &&
            g_ascii_string_to_unsigned(keys[i], 10, 1, G_MAXINT, &tid, NULL))
            g_hash_table_insert(out, GINT_TO_POINTER((int)tid), g_steal_pointer(&set));
        sa_cpuset_free(set);
    }
    return out;
}

static int compare_tids(gconstpointer a, gconstpointer b)
{
    int x = GPOINTER_TO_INT(*(gconstpointer const *)a);
    int y = GPOINTER_TO_INT(*(gconstpointer const *)b);
    return (x > y) - (x < y);
}

void qmp_state_save(QmpState *state, const char *socket, pid_t pid, guint64 start,
                    GHashTable *originals)
{
    g_autofree char *group = group_name(socket, pid, start);
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&state->lock);
    g_autoptr(GKeyFile) kf = load_locked(state);
    bool had = g_key_file_remove_group(kf, group, NULL);
    if (!had && (!originals || g_hash_table_size(originals) == 0))
        return;
    g_autoptr(GPtrArray) tids = g_ptr_array_new();
    if (originals) {
        GHashTableIter it;
        gpointer tid;
        g_hash_table_iter_init(&it, originals);
        while (g_hash_table_iter_next(&it, &tid, NULL))
            g_ptr_array_add(tids, tid);
    }
    g_ptr_array_sort(tids, compare_tids);
    for (guint i = 0; i < tids->len; i++) {
        gpointer tid = g_ptr_array_index(tids, i);
        g_autofree char *key = g_strdup_printf("%d", GPOINTER_TO_INT(tid));
        g_autofree char *cpus = sa_cpuset_format(g_hash_table_lookup(originals, tid));
        g_key_file_set_string(kf, group, key, cpus);
    }
    save_locked(state, kf);
}

/* Whether the process a group names still runs: same pid, same start time. */
static bool group_alive(const char *group)
{
    const char *last = strrchr(group, ' ');
    g_autofree char *head = last ? g_strndup(group, (gsize)(last - group)) : NULL;
    const char *middle = head ? strrchr(head, ' ') : NULL;
    guint64 pid = 0, start = 0;
    if (!middle || !g_ascii_string_to_unsigned(middle + 1, 10, 1, G_MAXINT, &pid, NULL) ||
        !g_ascii_string_to_unsigned(last + 1, 10, 1, G_MAXUINT64, &start, NULL))
        return false;
    return sa_process_start_time((pid_t)pid) == start;
}

void qmp_state_prune(QmpState *state)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&state->lock);
    g_autoptr(GKeyFile) kf = load_locked(state);
    g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
    bool changed = false;
    for (guint i = 0; groups && groups[i]; i++) {
        if (!group_alive(groups[i])) {
            g_key_file_remove_group(kf, groups[i], NULL);
            changed = true;
        }
    }
    if (changed)
        save_locked(state, kf);
}
