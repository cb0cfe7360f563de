/* softaffd — the headroom model in the daemon ([fleet], policies/sa-headroom.h, docs/fleet.md):
 * fed every tick with the owners' demand the policy measured and each VM's demand by class;
 * kept across SIGHUP; saved to [fleet] state_file (atomically, every save_interval_s and at
 * SIGTERM) and read back at start; shown in status, metrics and the control socket's
 * "headroom" reply that `softaffctl advise` derives from with the same functions. */
#define G_LOG_DOMAIN "softaffd"

#include <errno.h>
#include <glib/gstdio.h>

#include "core-private.h"
#include "sa-error.h"
#include "sa-numa.h"

/* A state file larger than this is not softaff's (60 slots × 128 bins × 1024 partitions is far
 * less in practice; the bins that are 0 are not written). */
#define FLEET_STATE_MAX_BYTES (64 * 1024 * 1024)

gint64 sa_core_fleet_now_ms(void)
{
    return g_get_real_time() / 1000;
}

void sa_core_fleet_init(SaCore *core)
{
    core->headroom = sa_headroom_new(core->cfg->fleet_window_s);
    core->headroom_saved_us = g_get_monotonic_time();
}

void sa_core_fleet_clear(SaCore *core)
{
    g_clear_pointer(&core->headroom, sa_headroom_free);
}

/* The class a VM's demand teaches: the [rule NAME] that applies to it, else its Nova flavor. */
static const char *vm_class(const SaVm *vm)
{
    if (vm->rule)
        return vm->rule;
    return vm->facts ? vm->facts->flavor : NULL;
}

void sa_core_fleet_feed(SaCore *core, guint64 interval_ns)
{
    const GPtrArray *parts = core->topo->partitions;
    guint interval_ms = (guint)MIN(interval_ns / 1000000, (guint64)G_MAXUINT);
    gint64 now_ms = sa_core_fleet_now_ms();
    g_autofree SaHeadroomSample *samples = g_new0(SaHeadroomSample, parts->len);

    if (interval_ms == 0)
        return;
    for (guint i = 0; i < parts->len; i++) {
        const SaPartition *p = g_ptr_array_index(parts, i);
        samples[i] = (SaHeadroomSample){
            .id = p->id,
            .capacity = p->cpus ? sa_cpuset_count(p->cpus) : 0,
            .owner_demand = core->usage[i].owner_demand,
        };
    }
    sa_headroom_feed(core->headroom, now_ms, interval_ms, samples, parts->len);

    for (guint i = 0; i < core->tick_vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(core->tick_vms, i);
        const SaPolicyVm *p = &vm->pvm;
        const char *cls = vm_class(vm);
        if (!cls || !p->vcpu_samples || p->n_vcpus == 0)
            continue;
        double used = 0;
        for (guint v = 0; v < p->n_vcpus; v++) {
            double r = (double)p->vcpu_samples[v].run_ns / (double)interval_ns;
            double w = (double)p->vcpu_samples[v].delay_ns / (double)interval_ns;
            used += CLAMP(r + w, 0.0, 1.0);
        }
        sa_headroom_feed_class(core->headroom, now_ms, interval_ms, cls, used, p->n_vcpus);
    }
}

/* Memory the VMs homed on node (an index of topo->nodes) were given but have not touched there:
 * guest memory less what the mover last read resident on the node (all of it before a
 * reading). */
static guint64 node_untouched(const SaCore *core, int node)
{
    g_autoptr(GPtrArray) vms = sa_core_sorted_vms(core);
    guint64 sum = 0;
    for (guint i = 0; i < vms->len; i++) {
        const SaVm *vm = g_ptr_array_index(vms, i);
        const SaVmPolicyState *st = &vm->pvm.st;
        if (vm->status != SA_VM_MANAGED || !st->placed || st->home < 0)
            continue;
        int idx = sa_topology_find_partition(core->topo, (guint)st->home);
        if (idx < 0 ||
            ((const SaPartition *)g_ptr_array_index(core->topo->partitions, idx))->node != node)
            continue;
        guint64 given = vm->facts->memory_bytes, there = 0;
        SaMemoryStatus ms;
        if (sa_mover_status(core->mover, vm->key, &ms) && ms.measured_wall_us > 0 &&
            ms.node == (int)((const SaNode *)g_ptr_array_index(core->topo->nodes, (guint)node))->id)
            there = ms.home_bytes;
        sum += given > there ? given - there : 0;
    }
    return sum;
}

/* MemFree of the node now (sysfs, below SOFTAFF_SYSFS_ROOT), else what the topology read. */
static guint64 node_free(const SaNode *n)
{
    guint64 total = 0, free_bytes = 0;
    g_autoptr(GError) error = NULL;
    if (sa_numa_node_memory(n->id, &total, &free_bytes, &error))
        return free_bytes;
    return n->mem_free;
}

SaHeadroomInput *sa_core_fleet_inputs(const SaCore *core)
{
    const SaTopology *topo = core->topo;
    guint np = topo->partitions->len, nn = topo->nodes->len;
    SaHeadroomInput *in = g_new0(SaHeadroomInput, MAX(np, 1));
    g_autofree guint *node_cpus = g_new0(guint, MAX(nn, 1));
    g_autofree guint64 *avail = g_new0(guint64, MAX(nn, 1));

    for (guint i = 0; i < np; i++) {
        const SaPartition *p = g_ptr_array_index(topo->partitions, i);
        in[i].id = p->id;
        in[i].capacity = p->cpus ? sa_cpuset_count(p->cpus) : 0;
        in[i].home_vcpus = core->usage[i].owner_vcpus;
        if (p->node >= 0)
            node_cpus[p->node] += in[i].capacity;
    }
    for (guint k = 0; k < nn; k++) {
        guint64 f = node_free(g_ptr_array_index(topo->nodes, k));
        guint64 u = node_untouched(core, (int)k);
        avail[k] = f > u ? f - u : 0;
    }
    for (guint i = 0; i < np; i++) {
        const SaPartition *p = g_ptr_array_index(topo->partitions, i);
        if (p->node >= 0)
            in[i].memory_available =
                sa_headroom_memory_share(avail[p->node], 0, in[i].capacity, node_cpus[p->node]);
    }
    return in;
}

SaHeadroomPartition *sa_core_fleet_partitions(const SaCore *core, gint64 now_ms)
{
    guint np = core->topo->partitions->len;
    g_autofree SaHeadroomInput *in = sa_core_fleet_inputs(core);
    SaHeadroomPartition *out = g_new0(SaHeadroomPartition, MAX(np, 1));
    for (guint i = 0; i < np; i++)
        sa_headroom_partition(core->headroom, now_ms, core->cfg->fleet_quantile, &in[i], &out[i]);
    return out;
}

json_object *sa_core_fleet_json(const SaCore *core)
{
    const SaConfig *cfg = core->cfg;
    guint np = core->topo->partitions->len;
    gint64 now_ms = sa_core_fleet_now_ms();
    g_autofree SaHeadroomPartition *parts = sa_core_fleet_partitions(core, now_ms);
    json_object *root = json_object_new_object();
    json_object *jparts = json_object_new_array();
    json_object *jshapes = json_object_new_array();
    json_object *jclasses = json_object_new_object();

    json_object_object_add(root, "quantile", json_object_new_double(cfg->fleet_quantile));
    json_object_object_add(root, "window_s", json_object_new_int64(cfg->fleet_window_s));
    for (guint i = 0; i < np; i++) {
        const SaHeadroomPartition *p = &parts[i];
        json_object *jp = json_object_new_object();
        json_object_object_add(jp, "id", json_object_new_int64(p->id));
        json_object_object_add(jp, "capacity", json_object_new_int64(p->capacity));
        json_object_object_add(jp, "margin", json_object_new_double(p->margin));
        json_object_object_add(jp, "demand", json_object_new_double(p->demand));
        json_object_object_add(jp, "headroom", json_object_new_double(p->headroom));
        json_object_object_add(jp, "coverage", json_object_new_double(p->coverage));
        json_object_object_add(jp, "home_vcpus", json_object_new_int64(p->home_vcpus));
        json_object_object_add(jp, "memory_available_bytes",
                               json_object_new_int64((gint64)p->memory_available));
        json_object_array_add(jparts, jp);
    }
    for (guint s = 0; s < cfg->fleet_shapes->len; s++) {
        const SaShape *shape = g_ptr_array_index(cfg->fleet_shapes, s);
        bool learned;
        double d = sa_headroom_expected_demand(core->headroom, now_ms, shape->class_name,
                                               shape->vcpus, &learned);
        guint64 mem = shape->memory_mib << 20;
        json_object *js = json_object_new_object();
        json_object_object_add(js, "shape", json_object_new_string(shape->name));
        json_object_object_add(js, "vcpus", json_object_new_int64(shape->vcpus));
        json_object_object_add(js, "memory_mib", json_object_new_int64((gint64)shape->memory_mib));
        json_object_object_add(js, "class", json_object_new_string(shape->class_name));
        json_object_object_add(js, "demand", json_object_new_double(d));
        json_object_object_add(js, "demand_learned", json_object_new_boolean(learned));
        json_object_object_add(js, "fit",
                               json_object_new_int64(sa_headroom_fit_count(parts, np, d, mem)));
        json_object_array_add(jshapes, js);
    }
    g_auto(GStrv) classes = sa_headroom_classes(core->headroom);
    for (char **c = classes; *c; c++) {
        double per;
        if (sa_headroom_class_per_vcpu(core->headroom, now_ms, *c, &per))
            json_object_object_add(jclasses, *c, json_object_new_double(per));
    }
    json_object_object_add(root, "partitions", jparts);
    json_object_object_add(root, "shapes", jshapes);
    json_object_object_add(root, "demand_per_vcpu", jclasses);
    return root;
}

char *sa_core_headroom_reply(const SaCore *core)
{
    guint np = core->topo->partitions->len;
    gint64 now_ms = sa_core_fleet_now_ms();
    g_autofree SaHeadroomInput *in = sa_core_fleet_inputs(core);
    json_object *root = json_object_new_object();
    json_object *jparts = json_object_new_array();

    json_object_object_add(root, "ok", json_object_new_boolean(1));
    json_object_object_add(root, "now_ms", json_object_new_int64(now_ms));
    json_object_object_add(root, "quantile", json_object_new_double(core->cfg->fleet_quantile));
    json_object_object_add(root, "window_s", json_object_new_int64(core->cfg->fleet_window_s));
    for (guint i = 0; i < np; i++) {
        json_object *jp = json_object_new_object();
        json_object_object_add(jp, "id", json_object_new_int64(in[i].id));
        json_object_object_add(jp, "capacity", json_object_new_int64(in[i].capacity));
        json_object_object_add(jp, "home_vcpus", json_object_new_int64(in[i].home_vcpus));
        json_object_object_add(jp, "memory_available_bytes",
                               json_object_new_int64((gint64)in[i].memory_available));
        json_object_array_add(jparts, jp);
    }
    json_object_object_add(root, "partitions", jparts);
    json_object_object_add(root, "model", sa_headroom_to_json(core->headroom, now_ms));
    char *line =
        g_strdup_printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
    json_object_put(root);
    return line;
}

/* ---- the state file ---- */

bool sa_core_fleet_save(SaCore *core, GError **error)
{
    const char *path = core->cfg->fleet_state_file;
    if (!path)
        return true;
    json_object *obj = sa_headroom_to_json(core->headroom, sa_core_fleet_now_ms());
    g_autofree char *text =
        g_strdup_printf("%s\n", json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN));
    json_object_put(obj);
    g_autofree char *dir = g_path_get_dirname(path);
    if (g_mkdir_with_parents(dir, 0755) < 0) {
        int errsv = errno;
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "%s: cannot create the directory: %s", dir,
                    g_strerror(errsv));
        return false;
    }
    g_autoptr(GError) local = NULL;
    /* A temporary file beside it, fsync, rename over it: readers see the old state or the new. */
    if (!g_file_set_contents_full(path, text, -1,
                                  G_FILE_SET_CONTENTS_CONSISTENT | G_FILE_SET_CONTENTS_DURABLE,
                                  0644, &local)) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "%s", local->message);
        return false;
    }
    core->headroom_saved_us = g_get_monotonic_time();
    return true;
}

void sa_core_fleet_maybe_save(SaCore *core)
{
    gint64 every = (gint64)core->cfg->fleet_save_interval_s * G_USEC_PER_SEC;
    if (!core->cfg->fleet_state_file || core->dry_run ||
        g_get_monotonic_time() - core->headroom_saved_us < every)
        return;
    g_autoptr(GError) error = NULL;
    bool ok = sa_core_fleet_save(core, &error);
    if (!ok && !core->headroom_save_failing)
        g_warning("fleet: saving the headroom: %s", error->message);
    core->headroom_save_failing = !ok;
}

/* The model saved in path, for window_s at now_ms; NULL with an error naming path. */
static SaHeadroom *read_state(const char *path, guint window_s, gint64 now_ms, GError **error)
{
    g_autofree char *text = NULL;
    gsize len = 0;
    g_autoptr(GError) local = NULL;
    if (!g_file_get_contents(path, &text, &len, &local)) {
        g_set_error(error, SA_ERROR,
                    g_error_matches(local, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? SA_ERROR_NOT_FOUND
                                                                             : SA_ERROR_IO,
                    "%s", local->message);
        return NULL;
    }
    if (len > FLEET_STATE_MAX_BYTES) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: larger than %d bytes", path,
                    FLEET_STATE_MAX_BYTES);
        return NULL;
    }
    json_tokener *tok = json_tokener_new();
    json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    if (!obj || jerr != json_tokener_success) {
        json_object_put(obj);
        const char *why = len == 0                        ? "empty"
                          : jerr == json_tokener_continue ? "cut short"
                          : jerr != json_tokener_success  ? json_tokener_error_desc(jerr)
                                                          : "null";
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: not JSON: %s", path, why);
        return NULL;
    }
    SaHeadroom *h = sa_headroom_from_json(obj, window_s, now_ms, &local);
    json_object_put(obj);
    if (!h)
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "%s: %s", path, local->message);
    return h;
}

bool sa_core_fleet_load(SaCore *core, GError **error)
{
    const char *path = core->cfg->fleet_state_file;
    if (!path)
        return true;
    SaHeadroom *h = read_state(path, core->cfg->fleet_window_s, sa_core_fleet_now_ms(), error);
    if (!h)
        return false;
    sa_headroom_free(core->headroom);
    core->headroom = h;
    return true;
}

void sa_core_fleet_start(SaCore *core)
{
    g_autoptr(GError) error = NULL;
    if (sa_core_fleet_load(core, &error)) {
        if (core->cfg->fleet_state_file)
            g_info("fleet: headroom history read from %s", core->cfg->fleet_state_file);
    } else if (g_error_matches(error, SA_ERROR, SA_ERROR_NOT_FOUND)) {
        g_info("fleet: no headroom history yet (%s)", error->message);
    } else {
        g_warning("fleet: ignoring the saved headroom history: %s", error->message);
    }
}

void sa_core_fleet_reload(SaCore *core, guint old_window_s)
{
    if (core->cfg->fleet_window_s == old_window_s)
        return;
    /* Slots of another length cannot be carried over. */
    g_info("fleet: [fleet] window_s changed from %u to %u s: the headroom history starts over",
           old_window_s, core->cfg->fleet_window_s);
    sa_headroom_free(core->headroom);
    core->headroom = sa_headroom_new(core->cfg->fleet_window_s);
}
