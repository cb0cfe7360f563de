/* softaff — /etc/softaff/softaff.conf and its drop-ins: defaults, loading, merging and
 * validation; the merged result as a key file. */
#define G_LOG_DOMAIN "softaff-config"

#include "sa-config.h"

#include <string.h>
#include <sys/un.h>

#include "sa-config-defs.h"
#include "sa-cpuset.h"
#include "sa-error.h"

#define DEFAULT_INTERVAL_MS 500
#define DEFAULT_URI "qemu:///system"
#define MAX_CONFIG_BYTES (1024 * 1024)

/* Ranges; contrib/softaff.conf documents the same numbers. */
#define INTERVAL_MS_MIN 50
#define INTERVAL_MS_MAX 60000
#define DWELL_MS_MAX 600000
#define MAX_HOLDOFF_MS_MAX 3600000
#define METRICS_EVERY_MAX 1000000
#define DEFAULT_COMMAND_TIMEOUT_MS 2000
#define COMMAND_TIMEOUT_MS_MIN 100
#define COMMAND_TIMEOUT_MS_MAX 60000
#define DEFAULT_STOP_TIMEOUT_MS 5000
#define STOP_TIMEOUT_MS_MAX 60000
/* 256 MiB/s moves an 8 GiB guest in about 30 s while costing the host little memory bandwidth;
 * 64 GiB/s is beyond any memory bus: no limit in practice. */
#define DEFAULT_MEMORY_RATE_MIB_S 256
#define MEMORY_RATE_MIB_S_MAX 65536
/* [sensing]: a wait shorter than 100 µs is a normal wakeup latency, a window longer than a
 * second is slower than the tick it is meant to beat. */
#define DEFAULT_SENSING_THRESHOLD_US 2000
#define SENSING_THRESHOLD_US_MIN 100
#define SENSING_THRESHOLD_US_MAX 100000
#define DEFAULT_SENSING_WINDOW_US 10000
#define SENSING_WINDOW_US_MIN 1000
#define SENSING_WINDOW_US_MAX 1000000
/* [fleet]: the state is saved at least every day, at most every minute. */
#define DEFAULT_FLEET_STATE_FILE "/var/lib/softaff/headroom.json"
#define DEFAULT_FLEET_SAVE_INTERVAL_S 300
#define FLEET_SAVE_INTERVAL_S_MIN 60
#define FLEET_SAVE_INTERVAL_S_MAX 86400
#define FLEET_MAX_SHAPES 64

/* Every group and key the file may have. */
static const char *const daemon_keys[] = {
    "interval_ms", "uri", "socket", "backend", "command_timeout_ms", "stop_timeout_ms", NULL};
static const char *const partitions_keys[] = {"layout", "custom", NULL};
static const char *const policy_keys[] = {"softness",
                                          "manage",
                                          "dwell_ms",
                                          "smoothing",
                                          "max_holdoff_ms",
                                          "rebalance",
                                          "rebalance_window_ms",
                                          "rebalance_max_moves_per_hour",
                                          NULL};
static const char *const hook_keys[] = {"strict", NULL};
static const char *const qmp_keys[] = {"sockets", "trust_writable_dirs", NULL};
static const char *const metrics_keys[] = {"textfile", "every", NULL};
static const char *const memory_keys[] = {"migrate", "rate_mib_s", NULL};
static const char *const sensing_keys[] = {"mode", "wait_threshold_us", "window_us", NULL};
static const char *const sensing_mode_names[] = {"auto", "bpf", "proc", NULL};
static const char *const actuation_keys[] = {"mode", NULL};
static const char *const actuation_mode_names[] = {"auto", "sched_ext", "pin", NULL};
static const char *const fleet_keys[] = {"window_s",   "quantile",        "shapes",
                                         "state_file", "save_interval_s", NULL};
/* [vm NAME] groups: one per QEMU process found over QMP. */
#define VM_GROUP_PREFIX "vm "
static const char *const vm_keys[] = {"mode", "preferred", "softness", NULL};
/* [rule NAME] groups: settings for the VMs a rule matches. */
#define RULE_GROUP_PREFIX "rule "
static const char *const rule_keys[] = {
    "match_name", "match_flavor", "match_title", "match_description",
    "mode",       "preferred",    "softness",    NULL};
/* Drop-ins: the files *.conf of this directory beside the main file. */
#define DROPIN_DIR "softaff.conf.d"
#define DROPIN_SUFFIX ".conf"

static const struct {
    const char *name;
    const char *const *keys;
} known_groups[] = {
    {"daemon", daemon_keys},
    {"partitions", partitions_keys},
    {"policy", policy_keys},
    {"hook", hook_keys},
    {"qmp", qmp_keys},
    {"metrics", metrics_keys},
    {"memory", memory_keys},
    {"sensing", sensing_keys},
    {"actuation", actuation_keys},
    {"fleet", fleet_keys},
};

const char *sa_manage_to_string(SaManage manage)
{
    switch (manage) {
    case SA_MANAGE_ALL:
        return "all";
    case SA_MANAGE_EXPLICIT:
        return "explicit";
    }
    return "unknown";
}

const char *sa_sensing_mode_to_string(SaSensingMode mode)
{
    return (guint)mode < G_N_ELEMENTS(sensing_mode_names) - 1 ? sensing_mode_names[mode] : "?";
}

const char *sa_actuation_mode_to_string(SaActuationMode mode)
{
    return (guint)mode < G_N_ELEMENTS(actuation_mode_names) - 1 ? actuation_mode_names[mode] : "?";
}

const char *sa_backend_to_string(SaBackend backend)
{
    switch (backend) {
    case SA_BACKEND_LIBVIRT:
        return "libvirt";
    case SA_BACKEND_QMP:
        return "qmp";
    case SA_BACKEND_BOTH:
        return "both";
    }
    return "unknown";
}

static void rule_free(gpointer p)
{
    SaRule *r = p;
    if (r == NULL)
        return;
    g_free(r->name);
    g_free(r->file);
    g_free(r->match_name);
    g_free(r->match_flavor);
    g_free(r->match_title);
    g_free(r->match_description);
    g_free(r->preferred_file);
    g_free(r);
}

static void vm_config_free(gpointer p)
{
    SaVmConfig *vc = p;
    if (vc == NULL)
        return;
    g_free(vc->name);
    g_free(vc);
}

const SaVmConfig *sa_config_find_vm(const SaConfig *cfg, const char *name)
{
    for (guint i = 0; cfg->vms != NULL && i < cfg->vms->len; i++) {
        const SaVmConfig *vc = g_ptr_array_index(cfg->vms, i);
        if (g_strcmp0(vc->name, name) == 0)
            return vc;
    }
    return NULL;
}

SaConfig *sa_config_new_default(void)
{
    SaConfig *cfg = g_new0(SaConfig, 1);

    cfg->path = NULL;
    cfg->dropins = g_new0(char *, 1);
    cfg->interval_ms = DEFAULT_INTERVAL_MS;
    cfg->command_timeout_ms = DEFAULT_COMMAND_TIMEOUT_MS;
    cfg->stop_timeout_ms = DEFAULT_STOP_TIMEOUT_MS;
    cfg->uri = g_strdup(DEFAULT_URI);
    cfg->socket = g_strdup(SA_DEFAULT_SOCKET);
    cfg->backend = SA_BACKEND_LIBVIRT;
    cfg->layout = SA_LAYOUT_NODE;
    cfg->custom = NULL;
    sa_policy_config_init(&cfg->policy);
    sa_rebalance_config_init(&cfg->rebalance);
    cfg->manage = SA_MANAGE_ALL;
    cfg->hook_strict = false;
    cfg->qmp_sockets = g_new0(char *, 1);
    cfg->qmp_trust_writable_dirs = false;
    cfg->vms = g_ptr_array_new_with_free_func(vm_config_free);
    cfg->rules = g_ptr_array_new_with_free_func(rule_free);
    cfg->metrics_textfile = NULL;
    cfg->metrics_every = 1;
    cfg->memory_migrate = true;
    cfg->memory_rate_mib_s = DEFAULT_MEMORY_RATE_MIB_S;
    cfg->sensing_mode = SA_SENSING_AUTO;
    cfg->sensing_threshold_us = DEFAULT_SENSING_THRESHOLD_US;
    cfg->sensing_window_us = DEFAULT_SENSING_WINDOW_US;
    cfg->actuation_mode = SA_ACTUATION_AUTO;
    cfg->fleet_window_s = SA_HEADROOM_DEFAULT_WINDOW_S;
    cfg->fleet_quantile = SA_HEADROOM_DEFAULT_QUANTILE;
    cfg->fleet_shapes = g_ptr_array_new_with_free_func((GDestroyNotify)sa_shape_free);
    cfg->fleet_state_file = g_strdup(DEFAULT_FLEET_STATE_FILE);
    cfg->fleet_save_interval_s = DEFAULT_FLEET_SAVE_INTERVAL_S;
    return cfg;
}

void sa_config_free(SaConfig *cfg)
{
    if (cfg == NULL)
        return;
    g_free(cfg->path);
    g_strfreev(cfg->dropins);
    g_free(cfg->uri);
    g_free(cfg->socket);
    g_free(cfg->custom);
    g_strfreev(cfg->qmp_sockets);
    if (cfg->vms != NULL)
        g_ptr_array_unref(cfg->vms);
    if (cfg->rules != NULL)
        g_ptr_array_unref(cfg->rules);
    g_free(cfg->metrics_textfile);
    if (cfg->fleet_shapes != NULL)
        g_ptr_array_unref(cfg->fleet_shapes);
    g_free(cfg->fleet_state_file);
    g_free(cfg);
}

/* The key file checks run on: one file, or the merge of the main file and its drop-ins. */
typedef struct {
    GKeyFile *kf;
    const char *path;          /* the file, for what has no origin below */
    GHashTable *key_origins;   /* "group\nkey" -> the file that gave its value, or NULL */
    GHashTable *group_origins; /* group -> the file that had it first, or NULL */
} Loader;

static const char *key_origin(const Loader *l, const char *group, const char *key)
{
    if (l->key_origins == NULL)
        return l->path;
    g_autofree char *id = g_strconcat(group, "\n", key, NULL);
    const char *file = g_hash_table_lookup(l->key_origins, id);
    return file != NULL ? file : l->path;
}

static const char *group_origin(const Loader *l, const char *group)
{
    const char *file = l->group_origins ? g_hash_table_lookup(l->group_origins, group) : NULL;
    return file != NULL ? file : l->path;
}

/* "<file>: [group] key=value: <what is wrong>", the file being the one that gave the value. */
static void G_GNUC_PRINTF(5, 6) set_bad_value(GError **error, const Loader *l, const char *group,
                                              const char *key, const char *fmt, ...)
{
    g_autofree char *value = g_key_file_get_value(l->kf, group, key, NULL);
    g_autofree char *shown = g_strescape(value != NULL ? value : "", "");
    g_autofree char *why = NULL;
    va_list ap;

    va_start(ap, fmt);
    why = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "%s: [%s] %s=%s: %s", key_origin(l, group, key),
                group, key, shown, why);
}

/* The raw value with surrounding whitespace removed, or NULL when the key is absent. */
static char *get_raw(const Loader *l, const char *group, const char *key)
{
    char *value = g_key_file_get_value(l->kf, group, key, NULL);
    return value != NULL ? g_strstrip(value) : NULL;
}

static bool is_plain_decimal(const char *s)
{
    if (s[0] == '\0')
        return false;
    for (const char *p = s; *p != '\0'; p++)
        if (!g_ascii_isdigit(*p))
            return false;
    return true;
}

/* An unsigned key in min..max; *out is left alone when the key is absent. */
static bool get_uint(const Loader *l, const char *group, const char *key, guint min, guint max,
                     guint *out, bool *present, GError **error)
{
    g_autofree char *raw = get_raw(l, group, key);
    guint64 v = 0;

    if (present != NULL)
        *present = raw != NULL;
    if (raw == NULL)
        return true;
    if (!is_plain_decimal(raw)) {
        set_bad_value(error, l, group, key, "not a whole number %u-%u", min, max);
        return false;
    }
    if (!g_ascii_string_to_unsigned(raw, 10, min, max, &v, NULL)) {
        set_bad_value(error, l, group, key, "out of range (allowed: %u-%u)", min, max);
        return false;
    }
    *out = (guint)v;
    return true;
}

/* One of names[] (NULL-terminated, exact match); *out gets its index. */
static bool get_choice(const Loader *l, const char *group, const char *key,
                       const char *const *names, int *out, GError **error)
{
    g_autofree char *raw = get_raw(l, group, key);

    if (raw == NULL)
        return true;
    for (int i = 0; names[i] != NULL; i++) {
        if (strcmp(raw, names[i]) == 0) {
            *out = i;
            return true;
        }
    }
    g_autofree char *allowed = g_strjoinv(", ", (char **)names);
    set_bad_value(error, l, group, key, "not one of %s", allowed);
    return false;
}

/* A string with GKeyFile escapes processed; NULL in *out when absent. */
static bool get_string(const Loader *l, const char *group, const char *key, char **out,
                       GError **error)
{
    g_autoptr(GError) local = NULL;

    *out = NULL;
    if (!g_key_file_has_key(l->kf, group, key, NULL))
        return true;
    *out = g_key_file_get_string(l->kf, group, key, &local);
    if (*out == NULL) {
        set_bad_value(error, l, group, key, "%s", local->message);
        return false;
    }
    g_strstrip(*out);
    return true;
}

/* A ';'-separated GKeyFile list; entries are stripped. NULL in *out when absent. */
static bool get_list(const Loader *l, const char *group, const char *key, char ***out,
                     GError **error)
{
    g_autoptr(GError) local = NULL;
    gsize n = 0;

    *out = NULL;
    if (!g_key_file_has_key(l->kf, group, key, NULL))
        return true;
    *out = g_key_file_get_string_list(l->kf, group, key, &n, &local);
    if (*out == NULL) {
        set_bad_value(error, l, group, key, "%s",
                      local != NULL ? local->message : "not a ';'-separated list");
        return false;
    }
    for (gsize i = 0; i < n; i++)
        g_strstrip((*out)[i]);
    return true;
}

static bool check_absolute_path(const Loader *l, const char *group, const char *key,
                                const char *path, GError **error)
{
    if (path[0] != '/') {
        set_bad_value(error, l, group, key, "not an absolute path");
        return false;
    }
    return true;
}

static bool check_groups_and_keys(const Loader *l, GError **error)
{
    g_auto(GStrv) groups = g_key_file_get_groups(l->kf, NULL);

    for (char **g = groups; *g != NULL; g++) {
        const char *const *keys = NULL;

        for (gsize i = 0; i < G_N_ELEMENTS(known_groups); i++)
            if (strcmp(*g, known_groups[i].name) == 0)
                keys = known_groups[i].keys;
        if (g_str_has_prefix(*g, VM_GROUP_PREFIX))
            keys = vm_keys;
        if (g_str_has_prefix(*g, RULE_GROUP_PREFIX))
            keys = rule_keys;
        if (keys == NULL) {
            g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                        "%s: [%s]: unknown group (known: daemon, partitions, policy, hook, qmp, "
                        "metrics, memory, sensing, actuation, fleet, vm NAME, rule NAME)",
                        l->path, *g);
            return false;
        }

        g_auto(GStrv) present = g_key_file_get_keys(l->kf, *g, NULL, NULL);
        for (char **k = present; k != NULL && *k != NULL; k++) {
            if (!g_strv_contains(keys, *k)) {
                g_autofree char *known = g_strjoinv(", ", (char **)keys);
                set_bad_value(error, l, *g, *k, "unknown key (known in [%s]: %s)", *g, known);
                return false;
            }
            /* GKeyFile keeps the last of repeated keys silently; a repeat is a mistake. */
            for (char **before = present; before < k; before++) {
                if (strcmp(*before, *k) == 0) {
                    set_bad_value(error, l, *g, *k, "key given more than once in [%s]", *g);
                    return false;
                }
            }
        }
    }
    return true;
}

/* How long a command to one VM's hypervisor may take before the VM is shown stalled, and how
 * long the restore at shutdown may take in all. */
static bool load_daemon_timeouts(const Loader *l, SaConfig *cfg, GError **error)
{
    return get_uint(l, "daemon", "command_timeout_ms", COMMAND_TIMEOUT_MS_MIN,
                    COMMAND_TIMEOUT_MS_MAX, &cfg->command_timeout_ms, NULL, error) &&
           get_uint(l, "daemon", "stop_timeout_ms", 0, STOP_TIMEOUT_MS_MAX, &cfg->stop_timeout_ms,
                    NULL, error);
}

static bool load_daemon(const Loader *l, SaConfig *cfg, GError **error)
{
    static const char *const backends[] = {"libvirt", "qmp", "both", NULL};
    static const SaBackend backend_values[] = {SA_BACKEND_LIBVIRT, SA_BACKEND_QMP, SA_BACKEND_BOTH};
    g_autofree char *uri = NULL;
    g_autofree char *socket = NULL;
    int backend = -1;

    if (!get_uint(l, "daemon", "interval_ms", INTERVAL_MS_MIN, INTERVAL_MS_MAX, &cfg->interval_ms,
                  NULL, error))
        return false;

    if (!get_string(l, "daemon", "uri", &uri, error))
        return false;
    if (uri != NULL) {
        if (uri[0] == '\0') {
            set_bad_value(error, l, "daemon", "uri", "empty (e.g. " DEFAULT_URI ")");
            return false;
        }
        g_free(cfg->uri);
        cfg->uri = g_steal_pointer(&uri);
    }

    if (!get_string(l, "daemon", "socket", &socket, error))
        return false;
    if (socket != NULL) {
        if (!check_absolute_path(l, "daemon", "socket", socket, error))
            return false;
        if (strlen(socket) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
            set_bad_value(error, l, "daemon", "socket", "longer than %zu bytes (Unix socket limit)",
                          sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
            return false;
        }
        g_free(cfg->socket);
        cfg->socket = g_steal_pointer(&socket);
    }

    if (!get_choice(l, "daemon", "backend", backends, &backend, error))
        return false;
    if (backend >= 0)
        cfg->backend = backend_values[backend];
    return load_daemon_timeouts(l, cfg, error);
}

/* custom: ';'-separated cpulists, none empty, none overlapping. Stored canonically. */
static bool parse_custom(const Loader *l, char **entries, char **canonical, GError **error)
{
    g_autoptr(GPtrArray) sets = g_ptr_array_new_with_free_func((GDestroyNotify)sa_cpuset_free);
    g_autoptr(GString) out = g_string_new(NULL);

    if (entries[0] == NULL) {
        set_bad_value(error, l, "partitions", "custom",
                      "no partitions (e.g. custom=0-15;16-31: one cpulist per partition)");
        return false;
    }
    for (guint i = 0; entries[i] != NULL; i++) {
        g_autoptr(GError) local = NULL;
        SaCpuSet *set = NULL;

        if (entries[i][0] == '\0') {
            set_bad_value(error, l, "partitions", "custom", "partition %u is empty", i);
            return false;
        }
        set = sa_cpuset_parse(entries[i], &local);
        if (set == NULL) {
            set_bad_value(error, l, "partitions", "custom", "partition %u: %s", i, local->message);
            return false;
        }
        g_ptr_array_add(sets, set);
        if (sa_cpuset_is_empty(set)) {
            set_bad_value(error, l, "partitions", "custom", "partition %u names no CPU", i);
            return false;
        }
        for (guint j = 0; j < i; j++) {
            const SaCpuSet *other = g_ptr_array_index(sets, j);
            if (sa_cpuset_intersects(set, other)) {
                g_autoptr(SaCpuSet) common = sa_cpuset_copy(set);
                sa_cpuset_intersect(common, other);
                g_autofree char *cpus = sa_cpuset_format(common);
                set_bad_value(error, l, "partitions", "custom",
                              "partitions %u and %u overlap on CPUs %s", j, i, cpus);
                return false;
            }
        }
        g_autofree char *text = sa_cpuset_format(set);
        g_string_append_printf(out, "%s%s", i > 0 ? ";" : "", text);
    }
    *canonical = g_string_free(g_steal_pointer(&out), FALSE);
    return true;
}

static bool load_partitions(const Loader *l, SaConfig *cfg, GError **error)
{
    static const SaLayout layouts[] = {SA_LAYOUT_NODE, SA_LAYOUT_LLC, SA_LAYOUT_CUSTOM};
    const char *names[G_N_ELEMENTS(layouts) + 1] = {NULL};
    g_auto(GStrv) custom = NULL;
    int layout = -1;

    for (gsize i = 0; i < G_N_ELEMENTS(layouts); i++)
        names[i] = sa_layout_to_string(layouts[i]);
    if (!get_choice(l, "partitions", "layout", names, &layout, error))
        return false;
    if (layout >= 0)
        cfg->layout = layouts[layout];

    if (!get_list(l, "partitions", "custom", &custom, error))
        return false;
    if (cfg->layout == SA_LAYOUT_CUSTOM) {
        if (custom == NULL) {
            set_bad_value(error, l, "partitions", "layout",
                          "needs custom= in [partitions] (e.g. custom=0-15;16-31)");
            return false;
        }
        return parse_custom(l, custom, &cfg->custom, error);
    }
    if (custom != NULL) {
        set_bad_value(error, l, "partitions", "custom", "only used with layout=%s (layout is %s)",
                      sa_layout_to_string(SA_LAYOUT_CUSTOM), sa_layout_to_string(cfg->layout));
        return false;
    }
    return true;
}

/* 0 < value <= 1, written as a plain decimal ("0.5", ".25", "1"); *out is left alone when the
 * key is absent. */
static bool get_fraction(const Loader *l, const char *group, const char *key, double *out,
                         GError **error)
{
    g_autofree char *raw = get_raw(l, group, key);
    bool digits = false;
    bool dot = false;
    double v;

    if (raw == NULL)
        return true;
    for (const char *p = raw; *p != '\0'; p++) {
        if (g_ascii_isdigit(*p)) {
            digits = true;
        } else if (*p == '.' && !dot) {
            dot = true;
        } else {
            digits = false;
            break;
        }
    }
    if (!digits) {
        set_bad_value(error, l, group, key,
                      "not a decimal number (allowed: more than 0, at most 1)");
        return false;
    }
    v = g_ascii_strtod(raw, NULL);
    if (!(v > 0.0 && v <= 1.0)) {
        set_bad_value(error, l, group, key, "out of range (allowed: more than 0, at most 1)");
        return false;
    }
    *out = v;
    return true;
}

static bool get_smoothing(const Loader *l, double *out, GError **error)
{
    return get_fraction(l, "policy", "smoothing", out, error);
}

/* Window at least a minute (the rebalance needs a long view), at most a day. */
#define REBALANCE_WINDOW_MS_MIN 60000
#define REBALANCE_WINDOW_MS_MAX 86400000

static bool load_rebalance(const Loader *l, SaConfig *cfg, GError **error)
{
    static const char *const switches[] = {"auto", "off", NULL};
    int on = -1;

    if (!get_choice(l, "policy", "rebalance", switches, &on, error))
        return false;
    if (on >= 0)
        cfg->rebalance.enabled = on == 0;
    return get_uint(l, "policy", "rebalance_window_ms", REBALANCE_WINDOW_MS_MIN,
                    REBALANCE_WINDOW_MS_MAX, &cfg->rebalance.window_ms, NULL, error) &&
           get_uint(l, "policy", "rebalance_max_moves_per_hour", 0, SA_REBALANCE_MAX_MOVES,
                    &cfg->rebalance.max_moves_per_hour, NULL, error);
}

static bool load_policy(const Loader *l, SaConfig *cfg, GError **error)
{
    static const char *const manages[] = {"all", "explicit", NULL};
    static const SaManage manage_values[] = {SA_MANAGE_ALL, SA_MANAGE_EXPLICIT};
    int manage = -1;
    bool holdoff_given = false;

    if (!get_uint(l, "policy", "softness", 0, 100, &cfg->policy.softness, NULL, error))
        return false;
    if (!get_choice(l, "policy", "manage", manages, &manage, error))
        return false;
    if (manage >= 0)
        cfg->manage = manage_values[manage];
    if (!get_uint(l, "policy", "dwell_ms", 0, DWELL_MS_MAX, &cfg->policy.dwell_ms, NULL, error))
        return false;
    if (!get_smoothing(l, &cfg->policy.smoothing, error) || !load_rebalance(l, cfg, error))
        return false;
    if (!get_uint(l, "policy", "max_holdoff_ms", 0, MAX_HOLDOFF_MS_MAX, &cfg->policy.max_holdoff_ms,
                  &holdoff_given, error))
        return false;

    if (cfg->policy.max_holdoff_ms < cfg->policy.dwell_ms) {
        if (holdoff_given) {
            set_bad_value(error, l, "policy", "max_holdoff_ms",
                          "less than dwell_ms (%u); the back-off cannot be shorter than the dwell "
                          "time",
                          cfg->policy.dwell_ms);
            return false;
        }
        /* Not set: the default follows a dwell time raised above it. */
        cfg->policy.max_holdoff_ms = cfg->policy.dwell_ms;
    }
    return true;
}

/* true or false; *out is left alone when the key is absent. */
static bool get_bool(const Loader *l, const char *group, const char *key, bool *out, GError **error)
{
    g_autofree char *raw = get_raw(l, group, key);

    if (raw == NULL)
        return true;
    if (strcmp(raw, "true") == 0) {
        *out = true;
    } else if (strcmp(raw, "false") == 0) {
        *out = false;
    } else {
        set_bad_value(error, l, group, key, "not true or false");
        return false;
    }
    return true;
}

static bool load_hook(const Loader *l, SaConfig *cfg, GError **error)
{
    return get_bool(l, "hook", "strict", &cfg->hook_strict, error);
}

static bool load_qmp(const Loader *l, SaConfig *cfg, GError **error)
{
    char **sockets = NULL;

    if (!get_bool(l, "qmp", "trust_writable_dirs", &cfg->qmp_trust_writable_dirs, error))
        return false;
    if (!get_list(l, "qmp", "sockets", &sockets, error))
        return false;
    if (sockets == NULL)
        return true;
    for (guint i = 0; sockets[i] != NULL; i++) {
        if (sockets[i][0] != '/') {
            set_bad_value(error, l, "qmp", "sockets", "entry %u \"%s\" is not an absolute path", i,
                          sockets[i]);
            g_strfreev(sockets);
            return false;
        }
    }
    g_strfreev(cfg->qmp_sockets);
    cfg->qmp_sockets = sockets;
    return true;
}

/* preferred: "auto" or a partition id (checked against the host's layout when the VM is found). */
static bool get_preferred(const Loader *l, const char *group, int *out, GError **error)
{
    g_autofree char *raw = get_raw(l, group, "preferred");
    guint64 v = 0;

    if (raw == NULL)
        return true;
    if (strcmp(raw, "auto") == 0) {
        *out = -1;
        return true;
    }
    if (!is_plain_decimal(raw) || (raw[0] == '0' && raw[1] != '\0')) {
        set_bad_value(error, l, group, "preferred",
                      "not auto or a partition id (a plain decimal number)");
        return false;
    }
    if (!g_ascii_string_to_unsigned(raw, 10, 0, G_MAXINT, &v, NULL)) {
        set_bad_value(error, l, group, "preferred", "out of range (allowed: auto or 0-%d)",
                      G_MAXINT);
        return false;
    }
    *out = (int)v;
    return true;
}

/* mode: soft, strict or off; *given tells whether the key is there. */
static bool get_mode(const Loader *l, const char *group, SaMode *out, bool *given, GError **error)
{
    static const SaMode modes[] = {SA_MODE_SOFT, SA_MODE_STRICT, SA_MODE_OFF};
    const char *mode_names[G_N_ELEMENTS(modes) + 1] = {NULL};
    int mode = -1;

    for (gsize i = 0; i < G_N_ELEMENTS(modes); i++)
        mode_names[i] = sa_mode_to_string(modes[i]);
    if (!get_choice(l, group, "mode", mode_names, &mode, error))
        return false;
    *given = mode >= 0;
    if (mode >= 0)
        *out = modes[mode];
    return true;
}

static bool load_vm(const Loader *l, const char *group, SaConfig *cfg, GError **error)
{
    g_autofree char *name = g_strstrip(g_strdup(group + strlen(VM_GROUP_PREFIX)));
    bool mode_given = false;
    guint softness = 0;
    bool softness_given = false;

    if (name[0] == '\0') {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "%s: [%s]: no VM name (e.g. [vm web1], the name given to QEMU with -name)",
                    group_origin(l, group), group);
        return false;
    }
    if (sa_config_find_vm(cfg, name) != NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "%s: [%s]: VM \"%s\" configured twice",
                    group_origin(l, group), group, name);
        return false;
    }
    SaVmConfig *vc = g_new0(SaVmConfig, 1);
    vc->name = g_steal_pointer(&name);
    vc->mode = SA_MODE_SOFT;
    vc->preferred = -1;
    vc->softness = -1;
    g_ptr_array_add(cfg->vms, vc);

    if (!get_mode(l, group, &vc->mode, &mode_given, error))
        return false;
    if (!get_preferred(l, group, &vc->preferred, error))
        return false;
    if (!get_uint(l, group, "softness", 0, 100, &softness, &softness_given, error))
        return false;
    if (softness_given)
        vc->softness = (int)softness;
    return true;
}

static bool load_vms(const Loader *l, SaConfig *cfg, GError **error)
{
    g_auto(GStrv) groups = g_key_file_get_groups(l->kf, NULL);

    for (char **g = groups; *g != NULL; g++)
        if (g_str_has_prefix(*g, VM_GROUP_PREFIX) && !load_vm(l, *g, cfg, error))
            return false;
    return true;
}

static const SaRule *find_rule(const SaConfig *cfg, const char *name)
{
    for (guint i = 0; i < cfg->rules->len; i++) {
        const SaRule *r = g_ptr_array_index(cfg->rules, i);
        if (strcmp(r->name, name) == 0)
            return r;
    }
    return NULL;
}

/* The match_* keys: globs, none empty, at least one. */
static bool load_rule_matches(const Loader *l, const char *group, SaRule *r, GError **error)
{
    char **fields[] = {&r->match_name, &r->match_flavor, &r->match_title, &r->match_description};
    bool any = false;

    for (gsize i = 0; i < G_N_ELEMENTS(fields); i++) {
        const char *key = rule_keys[i];
        if (!get_string(l, group, key, fields[i], error))
            return false;
        if (*fields[i] != NULL && (*fields[i])[0] == '\0') {
            set_bad_value(error, l, group, key, "empty pattern (a shell glob, e.g. m1.*)");
            return false;
        }
        any = any || *fields[i] != NULL;
    }
    if (!any) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "%s: [%s]: has no match_* key (allowed: match_name, match_flavor, "
                    "match_title, match_description)",
                    group_origin(l, group), group);
        return false;
    }
    return true;
}

static bool load_rule(const Loader *l, const char *group, SaConfig *cfg, GError **error)
{
    g_autofree char *name = g_strstrip(g_strdup(group + strlen(RULE_GROUP_PREFIX)));
    guint softness = 0;
    bool softness_given = false;
    const char *file = group_origin(l, group);

    if (name[0] == '\0') {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "%s: [%s]: no rule name (e.g. [rule large-flavors])", file, group);
        return false;
    }
    if (find_rule(cfg, name) != NULL) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "%s: [%s]: rule \"%s\" configured twice",
                    file, group, name);
        return false;
    }
    SaRule *r = g_new0(SaRule, 1);
    r->name = g_steal_pointer(&name);
    r->file = g_strdup(file);
    r->mode = SA_MODE_SOFT;
    r->preferred = -2;
    r->softness = -1;
    g_ptr_array_add(cfg->rules, r);

    if (!load_rule_matches(l, group, r, error) ||
        !get_mode(l, group, &r->mode, &r->has_mode, error) ||
        !get_preferred(l, group, &r->preferred, error) ||
        !get_uint(l, group, "softness", 0, 100, &softness, &softness_given, error))
        return false;
    if (softness_given)
        r->softness = (int)softness;
    if (r->preferred != -2)
        r->preferred_file = g_strdup(key_origin(l, group, "preferred"));
    if (!r->has_mode && r->preferred == -2 && r->softness < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "%s: [%s]: sets nothing (needs at least one of mode, preferred, softness)",
                    file, group);
        return false;
    }
    return true;
}

static bool load_rules(const Loader *l, SaConfig *cfg, GError **error)
{
    g_auto(GStrv) groups = g_key_file_get_groups(l->kf, NULL);

    for (char **g = groups; *g != NULL; g++)
        if (g_str_has_prefix(*g, RULE_GROUP_PREFIX) && !load_rule(l, *g, cfg, error))
            return false;
    return true;
}

static bool load_metrics(const Loader *l, SaConfig *cfg, GError **error)
{
    g_autofree char *textfile = NULL;

    if (!get_string(l, "metrics", "textfile", &textfile, error))
        return false;
    if (textfile != NULL && textfile[0] != '\0') {
        if (!check_absolute_path(l, "metrics", "textfile", textfile, error))
            return false;
        g_free(cfg->metrics_textfile);
        cfg->metrics_textfile = g_steal_pointer(&textfile);
    }
    return get_uint(l, "metrics", "every", 1, METRICS_EVERY_MAX, &cfg->metrics_every, NULL, error);
}

static bool load_memory(const Loader *l, SaConfig *cfg, GError **error)
{
    static const char *const migrate_names[] = {"auto", "off", NULL};
    int migrate = cfg->memory_migrate ? 0 : 1;

    if (!get_choice(l, "memory", "migrate", migrate_names, &migrate, error))
        return false;
    cfg->memory_migrate = migrate == 0;
    return get_uint(l, "memory", "rate_mib_s", 1, MEMORY_RATE_MIB_S_MAX, &cfg->memory_rate_mib_s,
                    NULL, error);
}

static bool load_sensing(const Loader *l, SaConfig *cfg, GError **error)
{
    int mode = (int)cfg->sensing_mode;

    if (!get_choice(l, "sensing", "mode", sensing_mode_names, &mode, error) ||
        !get_uint(l, "sensing", "wait_threshold_us", SENSING_THRESHOLD_US_MIN,
                  SENSING_THRESHOLD_US_MAX, &cfg->sensing_threshold_us, NULL, error) ||
        !get_uint(l, "sensing", "window_us", SENSING_WINDOW_US_MIN, SENSING_WINDOW_US_MAX,
                  &cfg->sensing_window_us, NULL, error))
        return false;
    cfg->sensing_mode = (SaSensingMode)mode;
    if (cfg->sensing_window_us < cfg->sensing_threshold_us) {
        set_bad_value(error, l, "sensing", "window_us",
                      "shorter than wait_threshold_us=%u (the window must hold the threshold)",
                      cfg->sensing_threshold_us);
        return false;
    }
    return true;
}

/* [actuation]: the sched_ext scheduler or re-pinning (daemon/scheduler.c). */
static bool load_actuation(const Loader *l, SaConfig *cfg, GError **error)
{
    int mode = (int)cfg->actuation_mode;

    if (!get_choice(l, "actuation", "mode", actuation_mode_names, &mode, error))
        return false;
    cfg->actuation_mode = (SaActuationMode)mode;
    return true;
}

/* [fleet]: the headroom model (policies/sa-headroom.h). */
static bool load_fleet(const Loader *l, SaConfig *cfg, GError **error)
{
    g_autofree char *state = NULL;
    g_auto(GStrv) shapes = NULL;

    if (!get_uint(l, "fleet", "window_s", SA_HEADROOM_WINDOW_S_MIN, SA_HEADROOM_WINDOW_S_MAX,
                  &cfg->fleet_window_s, NULL, error) ||
        !get_fraction(l, "fleet", "quantile", &cfg->fleet_quantile, error) ||
        !get_uint(l, "fleet", "save_interval_s", FLEET_SAVE_INTERVAL_S_MIN,
                  FLEET_SAVE_INTERVAL_S_MAX, &cfg->fleet_save_interval_s, NULL, error) ||
        !get_string(l, "fleet", "state_file", &state, error) ||
        !get_list(l, "fleet", "shapes", &shapes, error))
        return false;
    if (state != NULL) {
        if (state[0] != '\0' && !check_absolute_path(l, "fleet", "state_file", state, error))
            return false;
        g_free(cfg->fleet_state_file);
        cfg->fleet_state_file = state[0] != '\0' ? g_steal_pointer(&state) : NULL;
    }
    for (char **sh = shapes; sh != NULL && *sh != NULL; sh++) {
        g_autoptr(GError) local = NULL;
        if ((*sh)[0] == '\0')
            continue;
        SaShape *shape = sa_shape_parse(*sh, &local);
        if (shape == NULL) {
            set_bad_value(error, l, "fleet", "shapes", "%s", local->message);
            return false;
        }
        for (guint i = 0; i < cfg->fleet_shapes->len; i++) {
            const SaShape *other = g_ptr_array_index(cfg->fleet_shapes, i);
            if (g_str_equal(other->name, shape->name)) {
                set_bad_value(error, l, "fleet", "shapes", "shape '%s' given twice", shape->name);
                sa_shape_free(shape);
                return false;
            }
        }
        if (cfg->fleet_shapes->len >= FLEET_MAX_SHAPES) {
            set_bad_value(error, l, "fleet", "shapes", "more than %d shapes", FLEET_MAX_SHAPES);
            sa_shape_free(shape);
            return false;
        }
        g_ptr_array_add(cfg->fleet_shapes, shape);
    }
    return true;
}

static bool read_file(const char *path, bool explicit_path, const char *named_by, char **contents,
                      gsize *len, bool *missing, GError **error)
{
    g_autoptr(GError) local = NULL;

    *missing = false;
    if (!g_file_get_contents(path, contents, len, &local)) {
        if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT)) {
            *missing = true;
            if (!explicit_path)
                return true;
            if (named_by != NULL)
                g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND,
                            "%s: no such config file (named by %s)", path, named_by);
            else
                g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND, "%s: no such config file", path);
            return false;
        }
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "%s", local->message);
        return false;
    }
    if (*len > MAX_CONFIG_BYTES) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "%s: %" G_GSIZE_FORMAT " bytes is too large for a config file (at most %d)",
                    path, *len, MAX_CONFIG_BYTES);
        g_clear_pointer(contents, g_free);
        return false;
    }
    const char *bad = NULL;
    if (!g_utf8_validate_len(*contents, *len, &bad)) {
        guint line = 1;
        for (const char *p = *contents; p < bad; p++)
            line += *p == '\n';
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "%s: line %u: not valid UTF-8", path, line);
        g_clear_pointer(contents, g_free);
        return false;
    }
    return true;
}

/* One file read and parsed, its groups and keys checked (a key given twice shows only here).
 * NULL with *missing set and no error: a missing file that may be missing. */
static GKeyFile *parse_file(const char *path, bool explicit_path, const char *named_by,
                            bool *missing, GError **error)
{
    g_autofree char *contents = NULL;
    gsize len = 0;

    if (!read_file(path, explicit_path, named_by, &contents, &len, missing, error)) {
        *missing = false; /* an error, even for a missing file that must be there */
        return NULL;
    }
    if (*missing)
        return NULL;
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) local = NULL;
    if (!g_key_file_load_from_data(kf, contents, len, G_KEY_FILE_NONE, &local)) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "%s: %s", path, local->message);
        return NULL;
    }
    Loader l = {.kf = kf, .path = path};
    if (!check_groups_and_keys(&l, error))
        return NULL;
    return g_steal_pointer(&kf);
}

/* The files read so far, merged per key: the later file's value wins, a group keeps the
 * position it had in the first file that has it. */
typedef struct {
    GKeyFile *kf;
    GHashTable *key_origins;   /* "group\nkey" (owned) -> a path of files */
    GHashTable *group_origins; /* group (owned) -> a path of files */
    GPtrArray *files;          /* char*, the paths merged */
} Merge;

static void merge_clear(Merge *m)
{
    g_clear_pointer(&m->kf, g_key_file_unref);
    g_clear_pointer(&m->key_origins, g_hash_table_unref);
    g_clear_pointer(&m->group_origins, g_hash_table_unref);
    g_clear_pointer(&m->files, g_ptr_array_unref);
}

static void merge_file(Merge *m, GKeyFile *kf, const char *path)
{
    char *file = g_strdup(path);
    g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);

    g_ptr_array_add(m->files, file);
    for (char **g = groups; *g != NULL; g++) {
        if (!g_hash_table_contains(m->group_origins, *g)) {
            g_hash_table_insert(m->group_origins, g_strdup(*g), file);
            /* A group without keys ([vm web]: the defaults) must exist in the merge too. */
            g_key_file_set_value(m->kf, *g, "-", "");
            g_key_file_remove_key(m->kf, *g, "-", NULL);
        }
        g_auto(GStrv) keys = g_key_file_get_keys(kf, *g, NULL, NULL);
        for (char **k = keys; k != NULL && *k != NULL; k++) {
            g_autofree char *value = g_key_file_get_value(kf, *g, *k, NULL);
            g_key_file_set_value(m->kf, *g, *k, value);
            g_hash_table_replace(m->key_origins, g_strconcat(*g, "\n", *k, NULL), file);
        }
    }
}

static int compare_paths(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The drop-ins beside main_path, sorted: like sysctl.d, only NAME.conf, and no dotfiles (an
 * editor's .NAME.conf.swp, a hidden copy). A missing directory has none. */
static bool list_dropins(const char *main_path, GPtrArray *out, GError **error)
{
    g_autofree char *base = g_path_get_dirname(main_path);
    g_autofree char *dir_path = g_build_filename(base, DROPIN_DIR, NULL);
    g_autoptr(GError) local = NULL;
    g_autoptr(GDir) dir = g_dir_open(dir_path, 0, &local);
    const char *name;

    if (dir == NULL) {
        if (g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
            return true;
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "%s: cannot read the drop-in directory: %s",
                    dir_path, local->message);
        return false;
    }
    while ((name = g_dir_read_name(dir)) != NULL)
        if (name[0] != '.' && g_str_has_suffix(name, DROPIN_SUFFIX))
            g_ptr_array_add(out, g_build_filename(dir_path, name, NULL));
    g_ptr_array_sort(out, compare_paths);
    return true;
}

/* The main file (unless it may be missing and is), then its drop-ins, into m. */
static bool read_all(Merge *m, SaConfig *cfg, const char *path, bool explicit_path,
                     const char *named_by, GError **error)
{
    g_autoptr(GPtrArray) dropins = g_ptr_array_new_with_free_func(g_free);
    bool missing = false;
    g_autoptr(GKeyFile) kf = parse_file(path, explicit_path, named_by, &missing, error);

    if (kf == NULL && !missing)
        return false;
    if (kf != NULL) {
        merge_file(m, kf, path);
        cfg->path = g_strdup(path);
    } else {
        g_debug("%s does not exist: the defaults, and the drop-ins if any", path);
    }
    if (!list_dropins(path, dropins, error))
        return false;
    for (guint i = 0; i < dropins->len; i++) {
        const char *dropin = g_ptr_array_index(dropins, i);
        g_autoptr(GKeyFile) dkf = parse_file(dropin, true, NULL, &missing, error);
        if (dkf == NULL)
            return false;
        merge_file(m, dkf, dropin);
    }
    g_ptr_array_add(dropins, NULL);
    g_strfreev(cfg->dropins);
    cfg->dropins = (char **)g_ptr_array_free(g_steal_pointer(&dropins), FALSE);
    return true;
}

SaConfig *sa_config_load(const char *path, GError **error)
{
    const char *env = g_getenv("SOFTAFF_CONFIG");
    const char *named_by = NULL;
    bool explicit_path = true;

    g_return_val_if_fail(error == NULL || *error == NULL, NULL);

    if (path == NULL && env != NULL && env[0] != '\0') {
        path = env;
        named_by = "SOFTAFF_CONFIG";
    } else if (path == NULL) {
        path = SA_DEFAULT_CONFIG;
        explicit_path = false;
    }

    g_autoptr(SaConfig) cfg = sa_config_new_default();
    Merge m = {
        .kf = g_key_file_new(),
        .key_origins = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
        .group_origins = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
        .files = g_ptr_array_new_with_free_func(g_free),
    };
    Loader l = {
        .kf = m.kf, .path = path, .key_origins = m.key_origins, .group_origins = m.group_origins};
    bool ok = read_all(&m, cfg, path, explicit_path, named_by, error) &&
              load_daemon(&l, cfg, error) && load_partitions(&l, cfg, error) &&
              load_policy(&l, cfg, error) && load_hook(&l, cfg, error) &&
              load_qmp(&l, cfg, error) && load_metrics(&l, cfg, error) &&
              load_memory(&l, cfg, error) && load_sensing(&l, cfg, error) &&
              load_actuation(&l, cfg, error) && load_fleet(&l, cfg, error) &&
              load_vms(&l, cfg, error) && load_rules(&l, cfg, error);
    merge_clear(&m);
    return ok ? g_steal_pointer(&cfg) : NULL;
}

bool sa_config_check_host(const SaConfig *cfg, const SaTopology *topo, GError **error)
{
    /* rules NULL: a configuration built by hand (tests), like vms in sa_config_find_vm. */
    for (guint i = 0; cfg->rules != NULL && i < cfg->rules->len; i++) {
        const SaRule *r = g_ptr_array_index(cfg->rules, i);
        if (r->preferred < 0 || sa_topology_find_partition(topo, (guint)r->preferred) >= 0)
            continue;
        g_autofree char *ids = sa_topology_format_ids(topo);
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG,
                    "%s: [" RULE_GROUP_PREFIX "%s] preferred=%d: names no partition of this host "
                    "(partitions of layout %s: %s)",
                    r->preferred_file != NULL ? r->preferred_file : r->file, r->name, r->preferred,
                    sa_layout_to_string(topo->layout), ids);
        return false;
    }
    return true;
}

/* The shortest plain decimal ("0.25", no exponent) that reads back as v; get_smoothing takes
 * nothing else. */
static char *format_plain_decimal(double v)
{
    char buf[G_ASCII_DTOSTR_BUF_SIZE + 400];

    for (int digits = 1; digits < 400; digits++) {
        g_autofree char *fmt = g_strdup_printf("%%.%df", digits);
        g_ascii_formatd(buf, sizeof(buf), fmt, v);
        if (g_ascii_strtod(buf, NULL) == v)
            break;
    }
    /* Trailing zeros say nothing: "0.50" is "0.5". */
    char *end = buf + strlen(buf);
    while (end > buf + 1 && end[-1] == '0' && strchr(buf, '.') != NULL)
        *--end = '\0';
    if (end[-1] == '.')
        end[-1] = '\0';
    return g_strdup(buf);
}

static void set_preferred(GKeyFile *kf, const char *group, int preferred)
{
    g_autofree char *id = g_strdup_printf("%d", preferred);
    g_key_file_set_value(kf, group, "preferred", preferred >= 0 ? id : "auto");
}

static void put_daemon_partitions(GKeyFile *kf, const SaConfig *cfg)
{
    g_key_file_set_uint64(kf, "daemon", "interval_ms", cfg->interval_ms);
    g_key_file_set_string(kf, "daemon", "uri", cfg->uri);
    g_key_file_set_string(kf, "daemon", "socket", cfg->socket);
    g_key_file_set_value(kf, "daemon", "backend", sa_backend_to_string(cfg->backend));
    g_key_file_set_uint64(kf, "daemon", "command_timeout_ms", cfg->command_timeout_ms);
    g_key_file_set_uint64(kf, "daemon", "stop_timeout_ms", cfg->stop_timeout_ms);
    g_key_file_set_value(kf, "partitions", "layout", sa_layout_to_string(cfg->layout));
    /* custom= is an error with any other layout. */
    if (cfg->layout == SA_LAYOUT_CUSTOM)
        g_key_file_set_value(kf, "partitions", "custom", cfg->custom);
}

static void put_policy_to_qmp(GKeyFile *kf, const SaConfig *cfg)
{
    g_autofree char *smoothing = format_plain_decimal(cfg->policy.smoothing);

    g_key_file_set_uint64(kf, "policy", "softness", cfg->policy.softness);
    g_key_file_set_value(kf, "policy", "manage", sa_manage_to_string(cfg->manage));
    g_key_file_set_uint64(kf, "policy", "dwell_ms", cfg->policy.dwell_ms);
    g_key_file_set_value(kf, "policy", "smoothing", smoothing);
    g_key_file_set_uint64(kf, "policy", "max_holdoff_ms", cfg->policy.max_holdoff_ms);
    g_key_file_set_value(kf, "policy", "rebalance", cfg->rebalance.enabled ? "auto" : "off");
    g_key_file_set_uint64(kf, "policy", "rebalance_window_ms", cfg->rebalance.window_ms);
    g_key_file_set_uint64(kf, "policy", "rebalance_max_moves_per_hour",
                          cfg->rebalance.max_moves_per_hour);
    g_key_file_set_boolean(kf, "hook", "strict", cfg->hook_strict);
    g_key_file_set_string_list(kf, "qmp", "sockets", (const char *const *)cfg->qmp_sockets,
                               g_strv_length(cfg->qmp_sockets));
    g_key_file_set_boolean(kf, "qmp", "trust_writable_dirs", cfg->qmp_trust_writable_dirs);
}

static void put_vms(GKeyFile *kf, const SaConfig *cfg)
{
    for (guint i = 0; cfg->vms != NULL && i < cfg->vms->len; i++) {
        const SaVmConfig *vc = g_ptr_array_index(cfg->vms, i);
        g_autofree char *group = g_strconcat(VM_GROUP_PREFIX, vc->name, NULL);
        g_key_file_set_value(kf, group, "mode", sa_mode_to_string(vc->mode));
        set_preferred(kf, group, vc->preferred);
        if (vc->softness >= 0)
            g_key_file_set_integer(kf, group, "softness", vc->softness);
    }
}

static void put_rules(GKeyFile *kf, const SaConfig *cfg)
{
    for (guint i = 0; cfg->rules != NULL && i < cfg->rules->len; i++) {
        const SaRule *r = g_ptr_array_index(cfg->rules, i);
        const char *matches[] = {r->match_name, r->match_flavor, r->match_title,
                                 r->match_description};
        g_autofree char *group = g_strconcat(RULE_GROUP_PREFIX, r->name, NULL);
        g_autofree char *from = g_strdup_printf(" from: %s", r->file);

        for (gsize k = 0; k < G_N_ELEMENTS(matches); k++)
            if (matches[k] != NULL)
                g_key_file_set_string(kf, group, rule_keys[k], matches[k]);
        if (r->has_mode)
            g_key_file_set_value(kf, group, "mode", sa_mode_to_string(r->mode));
        if (r->preferred != -2)
            set_preferred(kf, group, r->preferred);
        if (r->softness >= 0)
            g_key_file_set_integer(kf, group, "softness", r->softness);
        g_key_file_set_comment(kf, group, NULL, from, NULL);
    }
}

static void put_fleet(GKeyFile *kf, const SaConfig *cfg)
{
    g_autofree char *quantile = format_plain_decimal(cfg->fleet_quantile);
    g_autoptr(GPtrArray) shapes = g_ptr_array_new_with_free_func(g_free);

    g_key_file_set_uint64(kf, "fleet", "window_s", cfg->fleet_window_s);
    g_key_file_set_value(kf, "fleet", "quantile", quantile);
    for (guint i = 0; cfg->fleet_shapes != NULL && i < cfg->fleet_shapes->len; i++)
        g_ptr_array_add(shapes, sa_shape_format(g_ptr_array_index(cfg->fleet_shapes, i)));
    g_key_file_set_string_list(kf, "fleet", "shapes", (const char *const *)shapes->pdata,
                               shapes->len);
    g_key_file_set_string(kf, "fleet", "state_file",
                          cfg->fleet_state_file != NULL ? cfg->fleet_state_file : "");
    g_key_file_set_uint64(kf, "fleet", "save_interval_s", cfg->fleet_save_interval_s);
}

char *sa_config_to_keyfile(const SaConfig *cfg)
{
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GString) read = g_string_new(NULL);

    put_daemon_partitions(kf, cfg);
    put_policy_to_qmp(kf, cfg);
    put_vms(kf, cfg);
    put_rules(kf, cfg);
    g_key_file_set_string(kf, "metrics", "textfile",
                          cfg->metrics_textfile != NULL ? cfg->metrics_textfile : "");
    g_key_file_set_uint64(kf, "metrics", "every", cfg->metrics_every);
    g_key_file_set_value(kf, "memory", "migrate", cfg->memory_migrate ? "auto" : "off");
    g_key_file_set_uint64(kf, "memory", "rate_mib_s", cfg->memory_rate_mib_s);
    g_key_file_set_value(kf, "sensing", "mode", sa_sensing_mode_to_string(cfg->sensing_mode));
    g_key_file_set_uint64(kf, "sensing", "wait_threshold_us", cfg->sensing_threshold_us);
    g_key_file_set_uint64(kf, "sensing", "window_us", cfg->sensing_window_us);
    g_key_file_set_value(kf, "actuation", "mode", sa_actuation_mode_to_string(cfg->actuation_mode));
    put_fleet(kf, cfg);

    if (cfg->path != NULL)
        g_string_append_printf(read, " read: %s\n", cfg->path);
    for (char **d = cfg->dropins; d != NULL && *d != NULL; d++)
        g_string_append_printf(read, " read: %s\n", *d);
    if (read->len == 0)
        g_string_append(read, " read: nothing (the defaults)\n");
    g_string_truncate(read, read->len - 1);
    g_key_file_set_comment(kf, NULL, NULL, read->str, NULL);
    return g_key_file_to_data(kf, NULL, NULL);
}
