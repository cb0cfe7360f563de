/* bench-headroom — softaff's own headroom model (policies/sa-headroom.h) for one simulated host,
 * driven line by line: the consolidation benchmark of issue 21 runs one per host and places VMs
 * by what it prints. It calls the same functions softaffd and `softaffctl advise` call.
 *
 * Protocol: one JSON object per line on stdin, one per line on stdout (flushed after each).
 *
 * The first line describes the host:
 *   {"partitions": [{"id": 0, "cpus": 8, "node": 0}, ...],     node defaults to the id
 *    "nodes": [{"id": 0, "memory_mib": 65536, "reserved_mib": 2048}, ...],
 *    "window_s": 3600, "quantile": 0.95,                          optional ([fleet] defaults)
 *    "shapes": [{"name": "small", "vcpus": 2, "memory_mib": 4096, "class": "small"}, ...]}
 *                                                                 class defaults to the name
 * and is answered by {"ok": true, "window_s": W, "quantile": Q}.
 *
 * Every further line is one step of the simulation:
 *   {"t": 0, "step_s": 300,                                       t: seconds since the start;
 *                                                                 step_s defaults to 300
 *    "vms": [{"partition": 0, "vcpus": 2, "memory_mib": 4096, "demand": 1.3, "class": "small"}],
 *    "unmanaged": [{"partition": 0, "cpus": 0.5}]}                optional
 * vms: every VM homed on the host during [t, t + step_s), with the CPUs it wanted then (run +
 * wait; more than its vCPUs counts as its vCPUs); class optional. The model is fed that step's
 * owners' demand per partition (Σ demand of the VMs homed there + unmanaged) over step_s, and
 * each VM's demand into its class; then it answers for the end of the step (what a scheduler
 * placing the next VMs would see):
 *   {"t": 0,
 *    "partitions": [{"id": 0, "capacity": 8, "home_vcpus": 6, "owners_demand": 5.1,
 *                    "over_capacity": false, "demand": 5.25, "headroom": 1.95,
 *                    "coverage": 0.083, "memory_available_mib": 51200}, ...],
 *    "over_capacity_minutes": 0,            step_s / 60 when any partition's owners wanted more
 *                                           CPUs than it has this step, else 0
 *    "over_capacity_partition_minutes": 0,  the same summed over partitions
 *    "fit": [{"shape": "small", "vcpus": 2, "memory_mib": 4096, "demand": 2.0, "learned": false,
 *             "count": 3, "partition": 1, "fits": true, "left": 0.4}, ...]}
 * owners_demand: this step's; demand: the owners' demand at the quantile over the window (this
 * step included); headroom = capacity − margin − demand; memory_available_mib: the node's memory
 * less reserved_mib and the memory of the VMs homed on it, shared among its partitions by CPUs.
 * fit: per shape, the expected demand (the class's mean per vCPU seen so far, else 1.0 per
 * vCPU), how many fit on the host (docs/fleet.md's rule) and the partition advise would home
 * one on (-1: none has CPUs), whether it fits there and the headroom it would leave.
 * A line that is not what this says: a message on stderr naming the line, exit status 1.
 *
 * The policy simulator (tests/policy/sim.c) is not run here: at 5-minute steps of per-VM
 * demand it would only sum the same demand per partition (bursts and retreats act within
 * seconds), which is what this does. */
#include <glib.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sa-headroom.h"

typedef struct {
    guint id;
    guint cpus;
    guint node;
} Part;

typedef struct {
    guint id;
    guint64 memory_mib;
    guint64 reserved_mib;
} Node;

typedef struct {
    GArray *parts;     /* Part */
    GArray *nodes;     /* Node */
    GPtrArray *shapes; /* SaShape* */
    double quantile;
    SaHeadroom *model;
} Host;

static int fail(guint line, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static int fail(guint line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "bench-headroom: line %u: %s\n", line, msg);
    return 1;
}

/* obj[key] as a number (int or double), def when absent; false when present but not one. */
static bool num(json_object *obj, const char *key, double def, double *out)
{
    json_object *v;
    if (!json_object_object_get_ex(obj, key, &v)) {
        *out = def;
        return true;
    }
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return false;
    *out = json_object_get_double(v);
    return true;
}

static bool whole(json_object *obj, const char *key, double def, double max, guint64 *out)
{
    double v;
    if (!num(obj, key, def, &v) || v < 0 || v > max || v != (double)(guint64)v)
        return false;
    *out = (guint64)v;
    return true;
}

static int part_index(const Host *h, guint id)
{
    for (guint i = 0; i < h->parts->len; i++)
        if (g_array_index(h->parts, Part, i).id == id)
            return (int)i;
    return -1;
}

static int read_host(Host *h, json_object *o, guint line)
{
    json_object *parts, *nodes, *shapes;
    double window, q;
    if (!json_object_object_get_ex(o, "partitions", &parts) ||
        !json_object_is_type(parts, json_type_array) || json_object_array_length(parts) == 0)
        return fail(line, "\"partitions\": expected a non-empty array");
    if (!json_object_object_get_ex(o, "nodes", &nodes) ||
        !json_object_is_type(nodes, json_type_array))
        return fail(line, "\"nodes\": expected an array");
    if (!num(o, "window_s", SA_HEADROOM_DEFAULT_WINDOW_S, &window) ||
        window < SA_HEADROOM_WINDOW_S_MIN || window > SA_HEADROOM_WINDOW_S_MAX)
        return fail(line, "\"window_s\": expected %u-%u", SA_HEADROOM_WINDOW_S_MIN,
                    SA_HEADROOM_WINDOW_S_MAX);
    if (!num(o, "quantile", SA_HEADROOM_DEFAULT_QUANTILE, &q) || !(q > 0 && q <= 1))
        return fail(line, "\"quantile\": expected more than 0, at most 1");
    h->quantile = q;
    h->model = sa_headroom_new((guint)window);
    for (size_t i = 0; i < json_object_array_length(parts); i++) {
        json_object *p = json_object_array_get_idx(parts, i);
        guint64 id, cpus, node;
        if (!json_object_is_type(p, json_type_object) || !whole(p, "id", -1, G_MAXUINT32, &id) ||
            !whole(p, "cpus", -1, 65536, &cpus) || cpus == 0 ||
            !whole(p, "node", (double)id, G_MAXUINT32, &node))
            return fail(
                line, "partitions[%zu]: expected {\"id\": N, \"cpus\": N >= 1[, \"node\": N]}", i);
        if (part_index(h, (guint)id) >= 0)
            return fail(line, "partitions[%zu]: id %" G_GUINT64_FORMAT " given twice", i, id);
        Part part = {(guint)id, (guint)cpus, (guint)node};
        g_array_append_val(h->parts, part);
    }
    for (size_t i = 0; i < json_object_array_length(nodes); i++) {
        json_object *n = json_object_array_get_idx(nodes, i);
        Node node;
        guint64 id;
        if (!json_object_is_type(n, json_type_object) || !whole(n, "id", -1, G_MAXUINT32, &id) ||
            !whole(n, "memory_mib", -1, 1e12, &node.memory_mib) ||
            !whole(n, "reserved_mib", 0, 1e12, &node.reserved_mib))
            return fail(
                line, "nodes[%zu]: expected {\"id\": N, \"memory_mib\": N[, \"reserved_mib\": N]}",
                i);
        node.id = (guint)id;
        g_array_append_val(h->nodes, node);
    }
    if (json_object_object_get_ex(o, "shapes", &shapes)) {
        if (!json_object_is_type(shapes, json_type_array))
            return fail(line, "\"shapes\": expected an array");
        for (size_t i = 0; i < json_object_array_length(shapes); i++) {
            json_object *s = json_object_array_get_idx(shapes, i), *name, *cls;
            guint64 vcpus, mib;
            if (!json_object_is_type(s, json_type_object) ||
                !json_object_object_get_ex(s, "name", &name) ||
                !json_object_is_type(name, json_type_string) ||
                !whole(s, "vcpus", -1, 4096, &vcpus) || vcpus == 0 ||
                !whole(s, "memory_mib", -1, 1e12, &mib) || mib == 0)
                return fail(line,
                            "shapes[%zu]: expected {\"name\": S, \"vcpus\": N, \"memory_mib\": N"
                            "[, \"class\": S]}",
                            i);
            SaShape *shape = g_new0(SaShape, 1);
            shape->name = g_strdup(json_object_get_string(name));
            shape->vcpus = (guint)vcpus;
            shape->memory_mib = mib;
            shape->class_name = g_strdup(json_object_object_get_ex(s, "class", &cls) &&
                                                 json_object_is_type(cls, json_type_string)
                                             ? json_object_get_string(cls)
                                             : shape->name);
            g_ptr_array_add(h->shapes, shape);
        }
    }
    json_object *ok = json_object_new_object();
    json_object_object_add(ok, "ok", json_object_new_boolean(true));
    json_object_object_add(ok, "window_s", json_object_new_int64((gint64)window));
    json_object_object_add(ok, "quantile", json_object_new_double(q));
    puts(json_object_to_json_string_ext(ok, JSON_C_TO_STRING_PLAIN));
    json_object_put(ok);
    return 0;
}

static const Node *find_node(const Host *h, guint id)
{
    for (guint i = 0; i < h->nodes->len; i++)
        if (g_array_index(h->nodes, Node, i).id == id)
            return &g_array_index(h->nodes, Node, i);
    return NULL;
}

/* One step: what the VMs and unmanaged load wanted per partition, the VMs' memory per node. */
static int read_step(const Host *h, json_object *o, guint line, double *owners, guint *vcpus,
                     double *node_used_mib)
{
    json_object *vms = NULL, *unmanaged = NULL;
    double t;
    if (!num(o, "t", -1, &t) || t < 0)
        return fail(line, "\"t\": expected seconds >= 0");
    if (json_object_object_get_ex(o, "vms", &vms) && !json_object_is_type(vms, json_type_array))
        return fail(line, "\"vms\": expected an array");
    for (size_t i = 0; vms && i < json_object_array_length(vms); i++) {
        json_object *v = json_object_array_get_idx(vms, i), *cls = NULL;
        guint64 pid, n, mib;
        double demand;
        int p;
        if (!json_object_is_type(v, json_type_object) ||
            !whole(v, "partition", -1, G_MAXUINT32, &pid) || !whole(v, "vcpus", -1, 4096, &n) ||
            n == 0 || !whole(v, "memory_mib", 0, 1e12, &mib) || !num(v, "demand", -1, &demand) ||
            demand < 0)
            return fail(line,
                        "vms[%zu]: expected {\"partition\": ID, \"vcpus\": N, \"memory_mib\": N, "
                        "\"demand\": CPUs[, \"class\": S]}",
                        i);
        if ((p = part_index(h, (guint)pid)) < 0)
            return fail(line, "vms[%zu]: partition %" G_GUINT64_FORMAT " is not on the host", i,
                        pid);
        if (json_object_object_get_ex(v, "class", &cls) &&
            !json_object_is_type(cls, json_type_string))
            return fail(line, "vms[%zu]: \"class\": expected a string", i);
        const Part *part = &g_array_index(h->parts, Part, p);
        owners[p] += MIN(demand, (double)n);
        vcpus[p] += (guint)n;
        for (guint k = 0; k < h->nodes->len; k++)
            if (g_array_index(h->nodes, Node, k).id == part->node)
                node_used_mib[k] += (double)mib;
    }
    if (json_object_object_get_ex(o, "unmanaged", &unmanaged) &&
        !json_object_is_type(unmanaged, json_type_array))
        return fail(line, "\"unmanaged\": expected an array");
    for (size_t i = 0; unmanaged && i < json_object_array_length(unmanaged); i++) {
        json_object *u = json_object_array_get_idx(unmanaged, i);
        guint64 pid;
        double cpus;
        int p;
        if (!json_object_is_type(u, json_type_object) ||
            !whole(u, "partition", -1, G_MAXUINT32, &pid) || !num(u, "cpus", -1, &cpus) ||
            cpus < 0 || (p = part_index(h, (guint)pid)) < 0)
            return fail(line, "unmanaged[%zu]: expected {\"partition\": ID, \"cpus\": CPUs}", i);
        owners[p] += cpus;
    }
    return 0;
}

/* The classes' demand of this step (after read_step checked the line). */
static void feed_classes(Host *h, json_object *o, gint64 now_ms, guint step_ms)
{
    json_object *vms, *cls;
    if (!json_object_object_get_ex(o, "vms", &vms))
        return;
    for (size_t i = 0; i < json_object_array_length(vms); i++) {
        json_object *v = json_object_array_get_idx(vms, i);
        double demand, n;
        if (!json_object_object_get_ex(v, "class", &cls))
            continue;
        num(v, "demand", 0, &demand);
        num(v, "vcpus", 0, &n);
        sa_headroom_feed_class(h->model, now_ms, step_ms, json_object_get_string(cls),
                               MIN(demand, n), (guint)n);
    }
}

static int step(Host *h, json_object *o, guint line)
{
    guint np = h->parts->len;
    g_autofree double *owners = g_new0(double, np);
    g_autofree guint *vcpus = g_new0(guint, np);
    g_autofree double *node_used = g_new0(double, h->nodes->len);
    g_autofree SaHeadroomSample *samples = g_new0(SaHeadroomSample, np);
    g_autofree SaHeadroomPartition *views = g_new0(SaHeadroomPartition, np);
    double t, step_s;
    if (read_step(h, o, line, owners, vcpus, node_used))
        return 1;
    num(o, "t", 0, &t);
    if (!num(o, "step_s", 300, &step_s) || step_s <= 0 || step_s > 86400)
        return fail(line, "\"step_s\": expected seconds, more than 0, at most 86400");
    gint64 now_ms = (gint64)(t * 1000);
    guint step_ms = (guint)(step_s * 1000);

    for (guint i = 0; i < np; i++) {
        const Part *p = &g_array_index(h->parts, Part, i);
        samples[i] =
            (SaHeadroomSample){.id = p->id, .capacity = p->cpus, .owner_demand = owners[i]};
    }
    sa_headroom_feed(h->model, now_ms, step_ms, samples, np);
    feed_classes(h, o, now_ms, step_ms);

    /* The answer is for the end of the step. */
    gint64 end_ms = now_ms + step_ms - 1;
    json_object *out = json_object_new_object(), *jparts = json_object_new_array();
    json_object *jfit = json_object_new_array();
    guint over = 0;
    for (guint i = 0; i < np; i++) {
        const Part *p = &g_array_index(h->parts, Part, i);
        const Node *n = find_node(h, p->node);
        guint node_cpus = 0, k;
        for (k = 0; k < np; k++)
            if (g_array_index(h->parts, Part, k).node == p->node)
                node_cpus += g_array_index(h->parts, Part, k).cpus;
        double used = 0;
        for (k = 0; n && k < h->nodes->len; k++)
            if (&g_array_index(h->nodes, Node, k) == n)
                used = node_used[k];
        guint64 free_b = 0;
        if (n && (double)n->memory_mib > (double)n->reserved_mib + used)
            free_b =
                (guint64)(((double)n->memory_mib - (double)n->reserved_mib - used) * 1048576.0);
        SaHeadroomInput in = {
            .id = p->id,
            .capacity = p->cpus,
            .home_vcpus = vcpus[i],
            .memory_available = sa_headroom_memory_share(free_b, 0, p->cpus, node_cpus),
        };
        sa_headroom_partition(h->model, end_ms, h->quantile, &in, &views[i]);
        bool is_over = owners[i] > p->cpus + 1e-9;
        over += is_over;
        json_object *jp = json_object_new_object();
        json_object_object_add(jp, "id", json_object_new_int64(p->id));
        json_object_object_add(jp, "capacity", json_object_new_int64(p->cpus));
        json_object_object_add(jp, "home_vcpus", json_object_new_int64(vcpus[i]));
        json_object_object_add(jp, "owners_demand", json_object_new_double(owners[i]));
        json_object_object_add(jp, "over_capacity", json_object_new_boolean(is_over));
        json_object_object_add(jp, "demand", json_object_new_double(views[i].demand));
        json_object_object_add(jp, "headroom", json_object_new_double(views[i].headroom));
        json_object_object_add(jp, "coverage", json_object_new_double(views[i].coverage));
        json_object_object_add(jp, "memory_available_mib",
                               json_object_new_int64((gint64)(views[i].memory_available >> 20)));
        json_object_array_add(jparts, jp);
    }
    for (guint s = 0; s < h->shapes->len; s++) {
        const SaShape *shape = g_ptr_array_index(h->shapes, s);
        bool learned, fits;
        double left;
        double d = sa_headroom_expected_demand(h->model, end_ms, shape->class_name, shape->vcpus,
                                               &learned);
        guint64 mem = shape->memory_mib << 20;
        int best = sa_headroom_choose(views, np, NULL, shape->vcpus, d, mem, &fits, &left);
        json_object *jf = json_object_new_object();
        json_object_object_add(jf, "shape", json_object_new_string(shape->name));
        json_object_object_add(jf, "vcpus", json_object_new_int64(shape->vcpus));
        json_object_object_add(jf, "memory_mib", json_object_new_int64((gint64)shape->memory_mib));
        json_object_object_add(jf, "demand", json_object_new_double(d));
        json_object_object_add(jf, "learned", json_object_new_boolean(learned));
        json_object_object_add(jf, "count",
                               json_object_new_int64(sa_headroom_fit_count(views, np, d, mem)));
        json_object_object_add(jf, "partition",
                               json_object_new_int64(best >= 0 ? (gint64)views[best].id : -1));
        json_object_object_add(jf, "fits", json_object_new_boolean(fits));
        json_object_object_add(jf, "left", json_object_new_double(left));
        json_object_array_add(jfit, jf);
    }
    json_object_object_add(out, "t", json_object_new_double(t));
    json_object_object_add(out, "partitions", jparts);
    json_object_object_add(out, "over_capacity_minutes",
                           json_object_new_double(over ? step_s / 60.0 : 0));
    json_object_object_add(out, "over_capacity_partition_minutes",
                           json_object_new_double(over * step_s / 60.0));
    json_object_object_add(out, "fit", jfit);
    puts(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN));
    json_object_put(out);
    return 0;
}

int main(int argc, char **argv)
{
    Host h = {
        .parts = g_array_new(FALSE, TRUE, sizeof(Part)),
        .nodes = g_array_new(FALSE, TRUE, sizeof(Node)),
        .shapes = g_ptr_array_new_with_free_func((GDestroyNotify)sa_shape_free),
    };
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    guint line = 0;
    int rc = 0;
    if (argc > 1) {
        fprintf(stderr,
                "usage: bench-headroom < STEPS (protocol: the top of bench/bench-headroom.c)\n");
        return 2;
    }
    while (rc == 0 && (len = getline(&buf, &cap, stdin)) >= 0) {
        line++;
        if (len <= 1 && (len == 0 || buf[0] == '\n'))
            continue;
        enum json_tokener_error jerr;
        json_object *o = json_tokener_parse_verbose(buf, &jerr);
        if (!o || !json_object_is_type(o, json_type_object))
            rc = fail(line, "not a JSON object%s%s", o ? "" : ": ",
                      o ? "" : json_tokener_error_desc(jerr));
        else if (!h.model)
            rc = read_host(&h, o, line);
        else
            rc = step(&h, o, line);
        json_object_put(o);
        fflush(stdout);
    }
    free(buf);
    sa_headroom_free(h.model);
    g_array_unref(h.parts);
    g_array_unref(h.nodes);
    g_ptr_array_unref(h.shapes);
    return rc;
}
