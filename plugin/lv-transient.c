/* softaffd — the pins transient domains had when softaff first saw them.
 *
 * A transient domain has no definition apart from the live one, which holds softaff's own pins
 * once it placed the VM. Its pins when first seen are kept in transient-domains.ini beside the
 * control socket, so that a restarted daemon puts back the domain's own pins, not softaff's:
 * one group per UUID with name=, vcpupinN=, emulatorpin= and iothreadpinID=. Workers of
 * different VMs and the main thread use the file: every access holds shared->state_lock. */
#define G_LOG_DOMAIN "softaffd"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lv-private.h"

static GKeyFile *load_locked(LvShared *shared)
{
    GKeyFile *kf = g_key_file_new();
    g_key_file_load_from_file(kf, shared->state_path, G_KEY_FILE_NONE, NULL);
    return kf;
}

static void save_locked(LvShared *shared, GKeyFile *kf)
{
    g_autofree char *dir = g_path_get_dirname(shared->state_path);
    g_autoptr(GError) error = NULL;
    if (g_mkdir_with_parents(dir, 0755) < 0 ||
        !g_key_file_save_to_file(kf, shared->state_path, &error))
        g_debug("cannot record the pins of transient domains in %s: %s", shared->state_path,
                error ? error->message : g_strerror(errno));
}

/* One key of a group: vcpupinN, emulatorpin or iothreadpinID (takes set). */
static void pins_add_key(LvPins *p, const char *key, SaCpuSet *set, guint n_vcpus)
{
    guint n = 0;
    char tail = 0;

    if (g_str_equal(key, "emulatorpin")) {
        sa_cpuset_free(p->emulatorpin);
        p->emulatorpin = set;
    } else if (sscanf(key, "vcpupin%u%c", &n, &tail) == 1 && n < n_vcpus) {
        if (!p->vcpupin)
            p->vcpupin = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
        if (p->vcpupin->len <= n)
            g_ptr_array_set_size(p->vcpupin, (gint)n + 1);
        sa_cpuset_free(g_ptr_array_index(p->vcpupin, n));
        g_ptr_array_index(p->vcpupin, n) = set;
    } else if (sscanf(key, "iothreadpin%u%c", &n, &tail) == 1 && n > 0) {
        lv_pins_add_iothread(p, n, set);
    } else {
        sa_cpuset_free(set);
    }
}

static LvPins *pins_from_group(GKeyFile *kf, const char *uuid, guint n_vcpus)
{
    LvPins *p = lv_pins_new();
    g_auto(GStrv) keys = g_key_file_get_keys(kf, uuid, NULL, NULL);
    for (guint i = 0; keys && keys[i]; i++) {
        g_autofree char *value = g_key_file_get_string(kf, uuid, keys[i], NULL);
        SaCpuSet *set = value ? sa_cpuset_parse(value, NULL) : NULL;
        if (set && sa_cpuset_is_empty(set))
            g_clear_pointer(&set, sa_cpuset_free);
        if (set)
            pins_add_key(p, keys[i], set, n_vcpus);
    }
    return p;
}

static void set_cpuset(GKeyFile *kf, const char *uuid, const char *key, const SaCpuSet *set)
{
    g_autofree char *text = sa_cpuset_format(set);
    g_key_file_set_string(kf, uuid, key, text);
}

static void record_group(GKeyFile *kf, const char *uuid, const char *name, const LvPins *p)
{
    g_key_file_set_string(kf, uuid, "name", name ? name : "");
    for (guint i = 0; p->vcpupin && i < p->vcpupin->len; i++) {
        const SaCpuSet *set = g_ptr_array_index(p->vcpupin, i);
        g_autofree char *key = g_strdup_printf("vcpupin%u", i);
        if (set)
            set_cpuset(kf, uuid, key, set);
    }
    if (p->emulatorpin)
        set_cpuset(kf, uuid, "emulatorpin", p->emulatorpin);
    for (guint i = 0; p->iothread_ids && i < p->iothread_ids->len; i++) {
        g_autofree char *key =
            g_strdup_printf("iothreadpin%u", g_array_index(p->iothread_ids, guint, i));
        set_cpuset(kf, uuid, key, g_ptr_array_index(p->iothreadpin, i));
    }
}

LvPins *lv_transient_first_seen(LvShared *shared, const char *uuid, const char *name, guint n_vcpus,
                                LvPins *seen)
{
    LvPins *pins;

    g_mutex_lock(&shared->state_lock);
    g_autoptr(GKeyFile) kf = load_locked(shared);
    if (g_key_file_has_group(kf, uuid)) {
        pins = pins_from_group(kf, uuid, n_vcpus);
    } else {
        record_group(kf, uuid, name, seen);
        save_locked(shared, kf);
        pins = lv_pins_ref(seen);
    }
    g_mutex_unlock(&shared->state_lock);
    return pins;
}

void lv_transient_forget(LvShared *shared, const char *uuid)
{
    g_mutex_lock(&shared->state_lock);
    g_autoptr(GKeyFile) kf = load_locked(shared);
    if (g_key_file_remove_group(kf, uuid, NULL))
        save_locked(shared, kf);
    g_mutex_unlock(&shared->state_lock);
}

void lv_transient_prune(LvShared *shared, GHashTable *running)
{
    g_mutex_lock(&shared->state_lock);
    g_autoptr(GKeyFile) kf = load_locked(shared);
    g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
    bool changed = false;
    for (guint i = 0; groups && groups[i]; i++)
        if (!g_hash_table_contains(running, groups[i]))
            changed |= g_key_file_remove_group(kf, groups[i], NULL);
    if (changed)
        save_locked(shared, kf);
    g_mutex_unlock(&shared->state_lock);
}
