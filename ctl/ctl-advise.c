/* softaffctl advise — a home partition for a new VM, by the headroom model softaffd keeps
 * (policies/sa-headroom.h, docs/fleet.md): softaffd's histograms when it answers the
 * "headroom" request, else none (then the headroom is the capacity less the margin, and the
 * output says so). The same functions derive headroom and fit as softaffd's status and
 * metrics. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "sa-control-client.h"
#include "sa-error.h"
#include "sa-headroom.h"
#include "sa-policy.h"

/* softaffd gets this long to answer before advise goes on without history. */
#define HEADROOM_TIMEOUT_MS 3000

/* What advise knows of the host's recent load. */
typedef struct {
    bool history; /* softaffd's histograms */
    char *source; /* where they came from, or why there are none */
    SaHeadroom *model;
    gint64 now_ms;
    double quantile;
    guint window_s;
    GArray *inputs; /* SaHeadroomInput from softaffd */
} History;

static void history_clear(History *h)
{
    g_free(h->source);
    sa_headroom_free(h->model);
    if (h->inputs)
        g_array_unref(h->inputs);
}

static bool get_int(json_object *o, const char *key, gint64 *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
        return false;
    *out = json_object_get_int64(v);
    return true;
}

/* The reply to "headroom" into h; false with why. */
static bool read_reply(json_object *reply, History *h, GError **error)
{
    json_object *parts, *model, *q;
    gint64 now, window;
    if (!get_int(reply, "now_ms", &now) || !get_int(reply, "window_s", &window) ||
        !json_object_object_get_ex(reply, "quantile", &q) ||
        !json_object_object_get_ex(reply, "partitions", &parts) ||
        !json_object_is_type(parts, json_type_array) ||
        !json_object_object_get_ex(reply, "model", &model)) {
        g_set_error_literal(error, SA_ERROR, SA_ERROR_PARSE,
                            "its reply lacks now_ms, window_s, quantile, partitions or model");
        return false;
    }
    h->now_ms = now;
    h->window_s = (guint)window;
    h->quantile = json_object_get_double(q);
    h->inputs = g_array_new(FALSE, TRUE, sizeof(SaHeadroomInput));
    for (size_t i = 0; i < json_object_array_length(parts); i++) {
        json_object *p = json_object_array_get_idx(parts, i);
        gint64 id, cap, vcpus, mem;
        if (!get_int(p, "id", &id) || !get_int(p, "capacity", &cap) ||
            !get_int(p, "home_vcpus", &vcpus) || !get_int(p, "memory_available_bytes", &mem) ||
            id < 0 || cap < 0 || vcpus < 0 || mem < 0) {
            g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                        "partitions[%zu] of its reply is not {id, capacity, home_vcpus, "
                        "memory_available_bytes}",
                        i);
            return false;
        }
        SaHeadroomInput in = {(guint)id, (guint)cap, (guint)vcpus, (guint64)mem};
        g_array_append_val(h->inputs, in);
    }
    h->model = sa_headroom_from_json(model, h->window_s, now, error);
    return h->model != NULL;
}

/* softaffd's histograms, else none with the reason in h->source. */
static void fetch_history(const char *socket_path, const SaConfig *cfg, History *h)
{
    g_autoptr(GError) error = NULL;
    SaControlRequest req = {.command = SA_CONTROL_HEADROOM};
    gint64 deadline = g_get_monotonic_time() + HEADROOM_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;
    json_object *reply = sa_control_call(socket_path, &req, deadline, SA_CONTROL_MAX_REPLY, &error);

    h->quantile = cfg->fleet_quantile;
    h->window_s = cfg->fleet_window_s;
    h->now_ms = g_get_real_time() / 1000;
    if (reply && read_reply(reply, h, &error)) {
        h->history = true;
        h->source = g_strdup_printf("softaffd (%s)", socket_path);
    } else {
        h->history = false;
        h->source = g_strdup_printf("none: %s", error->message);
        g_clear_pointer(&h->model, sa_headroom_free);
        g_clear_pointer(&h->inputs, g_array_unref);
        h->quantile = cfg->fleet_quantile;
        h->window_s = cfg->fleet_window_s;
        h->now_ms = g_get_real_time() / 1000;
    }
    json_object_put(reply);
}

/* softaffd's input for partition id of capacity cpus, or NULL. */
static const SaHeadroomInput *daemon_input(const History *h, guint id, guint cpus)
{
    for (guint i = 0; h->inputs && i < h->inputs->len; i++) {
        const SaHeadroomInput *in = &g_array_index(h->inputs, SaHeadroomInput, i);
        if (in->id == id && in->capacity == cpus)
            return in;
    }
    return NULL;
}

/* The inputs per partition of topo: softaffd's when it has the same partitions, else the
 * topology's own (no VM homed, the node's free memory shared by CPUs). */
static SaHeadroomInput *inputs_for(const SaTopology *topo, History *h)
{
    guint np = topo->partitions->len;
    SaHeadroomInput *in = g_new0(SaHeadroomInput, MAX(np, 1));
    bool same = h->history && h->inputs->len == np;
    for (guint i = 0; same && i < np; i++) {
        const SaPartition *p = g_ptr_array_index(topo->partitions, i);
        const SaHeadroomInput *d = daemon_input(h, p->id, sa_cpuset_count(p->cpus));
        if (d)
            in[i] = *d;
        same = d != NULL;
    }
    if (same)
        return in;
    if (h->history) {
        h->history = false;
        g_free(h->source);
        h->source = g_strdup("none: softaffd's partitions differ from these (another layout)");
    }
    g_autofree guint *node_cpus = g_new0(guint, MAX(topo->nodes->len, 1));
    for (guint i = 0; i < np; i++) {
        const SaPartition *p = g_ptr_array_index(topo->partitions, i);
        in[i] = (SaHeadroomInput){.id = p->id, .capacity = sa_cpuset_count(p->cpus)};
        if (p->node >= 0)
            node_cpus[p->node] += in[i].capacity;
    }
    for (guint i = 0; i < np; i++) {
        const SaPartition *p = g_ptr_array_index(topo->partitions, i);
        if (p->node < 0)
            continue;
        const SaNode *n = g_ptr_array_index(topo->nodes, p->node);
        in[i].memory_available =
            sa_headroom_memory_share(n->mem_free, 0, in[i].capacity, node_cpus[p->node]);
    }
    return in;
}

static json_object *view_json(const SaHeadroomPartition *p)
{
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
    return jp;
}

int sa_ctl_advise_run(const SaTopology *topo, const SaCtlAdvise *a)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(a->config_path, &error);
    if (!cfg) {
        fprintf(stderr, "softaffctl: %s\n", error->message);
        return SA_CTL_FAILED;
    }
    History h = {0};
    fetch_history(a->socket_path ? a->socket_path : cfg->socket, cfg, &h);
    guint np = topo->partitions->len;
    g_autofree SaHeadroomInput *in = inputs_for(topo, &h);
    g_autofree SaHeadroomPartition *views = g_new0(SaHeadroomPartition, MAX(np, 1));
    g_autofree bool *eligible = g_new0(bool, MAX(np, 1));
    for (guint i = 0; i < np; i++) {
        const SaPartition *p = g_ptr_array_index(topo->partitions, i);
        sa_headroom_partition(h.history ? h.model : NULL, h.now_ms, h.quantile, &in[i], &views[i]);
        eligible[i] =
            a->allowed ? sa_cpuset_intersects(p->cpus, a->allowed) : !sa_cpuset_is_empty(p->cpus);
    }
    bool learned = false, fits = false;
    double left = 0;
    double demand = a->demand >= 0
                        ? a->demand
                        : sa_headroom_expected_demand(h.history ? h.model : NULL, h.now_ms,
                                                      a->class_name, a->vcpus, &learned);
    int best =
        sa_headroom_choose(views, np, eligible, a->vcpus, demand, a->memory_bytes, &fits, &left);
    if (best < 0) {
        g_autofree char *text = a->allowed ? sa_cpuset_format(a->allowed) : NULL;
        if (text)
            fprintf(stderr, "softaffctl: no partition has an online CPU in the allowed set '%s'\n",
                    text);
        else
            fprintf(stderr, "softaffctl: no partition has an online CPU\n");
        history_clear(&h);
        return SA_CTL_FAILED;
    }
    const SaHeadroomPartition *v = &views[best];
    const SaPartition *part = g_ptr_array_index(topo->partitions, (guint)best);
    double commitment = v->capacity ? (double)(v->home_vcpus + a->vcpus) / v->capacity : 0;
    g_autofree char *why_demand =
        a->demand >= 0 ? g_strdup("given")
        : learned      ? g_strdup_printf("the mean of class %s on this host", a->class_name)
                       : g_strdup_printf("1.0 per vCPU: %s",
                                    a->class_name ? "no VM of the class seen" : "no --class");
    g_autofree char *coverage =
        h.history ? g_strdup_printf("history %.0f%% of the window", v->coverage * 100)
                  : g_strdup("no history: capacity less the margin");
    g_autofree char *reason = g_strdup_printf(
        "%s: demand %.2f CPUs (%s) %s, memory %s; leaves %.2f CPUs of headroom at q%.2f over "
        "%u s (%s)",
        fits ? "fits" : "fits nowhere, the most headroom", demand, why_demand,
        demand <= v->headroom + 1e-9 ? "within the headroom" : "beyond the headroom",
        a->memory_bytes <= v->memory_available ? "available" : "short", left, h.quantile,
        h.window_s, coverage);
    g_autofree char *cpus = sa_cpuset_format(part->cpus);
    const char *layout = sa_layout_to_string(topo->layout);
    const SaNode *node = part->node >= 0 ? g_ptr_array_index(topo->nodes, part->node) : NULL;

    if (a->json) {
        json_object *root = json_object_new_object();
        json_object *jparts = json_object_new_array();
        for (guint i = 0; i < np; i++)
            json_object_array_add(jparts, view_json(&views[i]));
        json_object_object_add(root, "layout", json_object_new_string(layout));
        json_object_object_add(root, "partition", json_object_new_int((int)part->id));
        json_object_object_add(root, "cpus", json_object_new_string(cpus));
        json_object_object_add(root, "node", node ? json_object_new_int((int)node->id) : NULL);
        json_object_object_add(root, "commitment", json_object_new_double(commitment));
        json_object_object_add(root, "fits", json_object_new_boolean(fits));
        json_object_object_add(root, "demand", json_object_new_double(demand));
        json_object_object_add(root, "demand_learned", json_object_new_boolean(learned));
        json_object_object_add(root, "headroom_left", json_object_new_double(left));
        json_object_object_add(root, "history", json_object_new_boolean(h.history));
        json_object_object_add(root, "history_source", json_object_new_string(h.source));
        json_object_object_add(root, "quantile", json_object_new_double(h.quantile));
        json_object_object_add(root, "window_s", json_object_new_int64(h.window_s));
        json_object_object_add(root, "partitions", jparts);
        json_object_object_add(root, "reason", json_object_new_string(reason));
        sa_ctl_print_json(root);
        json_object_put(root);
    } else {
        char nb[16] = "-";
        if (node)
            snprintf(nb, sizeof nb, "%u", node->id);
        printf("partition %u (layout %s, node %s): CPUs %s\n", part->id, layout, nb, cpus);
        printf("metadata: <softaff:affinity xmlns:softaff=\"urn:softaff:domain:1\" "
               "preferred=\"%u\"/>\n",
               part->id);
        printf("reason: %s\n", reason);
        printf("history: %s\n", h.source);
    }
    history_clear(&h);
    return SA_CTL_OK;
}
