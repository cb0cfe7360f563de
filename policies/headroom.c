/* softaff — the headroom model (sa-headroom.h): histograms of the owners' demand per partition
 * over a rolling window, the quantile, the headroom, and the fit of VM shapes. Pure: time comes
 * in as now_ms. The JSON form (saved state, the control socket) is at the end. */
#define G_LOG_DOMAIN "softaff-policy"

#include "sa-headroom.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "sa-error.h"
#include "sa-policy-rules.h"

#define EMPTY_SLOT G_MININT64
/* A fit count is never more than this (a tiny demand on a huge headroom). */
#define MAX_FIT 1000000u
/* A class counts as seen while its decayed vCPU time is at least this (1 vCPU for 1 s). */
#define CLASS_MIN_VCPU_MS 1000.0
/* Slack of the fit comparisons (demand sums of floating point). */
#define FIT_EPSILON 1e-9

typedef struct {
    guint id;
    guint capacity;
    gint64 slot_no[SA_HEADROOM_SLOTS]; /* the slot's number (now_ms / slot_ms), EMPTY_SLOT */
    guint32 ms[SA_HEADROOM_SLOTS][SA_HEADROOM_BINS];
} Part;

typedef struct {
    char *name;
    double used_ms; /* CPU·ms wanted, decayed to at_ms */
    double vcpu_ms; /* vCPU·ms present, decayed to at_ms */
    gint64 at_ms;
} Class;

struct _SaHeadroom {
    guint window_s;
    gint64 slot_ms;
    GPtrArray *parts;   /* Part*, in the order first seen */
    GPtrArray *classes; /* Class* */
};

/* ---- shapes ---- */

void sa_shape_free(SaShape *shape)
{
    if (!shape)
        return;
    g_free(shape->name);
    g_free(shape->class_name);
    g_free(shape);
}

static bool valid_name(const char *s)
{
    if (!s[0])
        return false;
    for (const char *p = s; *p; p++)
        if (!g_ascii_isalnum(*p) && !strchr("_-.", *p))
            return false;
    return true;
}

SaShape *sa_shape_parse(const char *text, GError **error)
{
    g_auto(GStrv) f = g_strsplit(text, ":", -1);
    guint n = g_strv_length(f);
    guint64 vcpus = 0, mib = 0;

    if (n < 3 || n > 4) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "shape '%s': expected NAME:VCPUS:MEMORY_MIB[:CLASS]", text);
        return NULL;
    }
    for (guint i = 0; i < n; i++)
        g_strstrip(f[i]);
    if (!valid_name(f[0]) || (n == 4 && !f[3][0])) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "shape '%s': a name or class is letters, digits, '_', '-' or '.'", text);
        return NULL;
    }
    if (!g_ascii_string_to_unsigned(f[1], 10, 1, 4096, &vcpus, NULL)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE, "shape '%s': vCPUs '%s' not a number 1-4096",
                    text, f[1]);
        return NULL;
    }
    if (!g_ascii_string_to_unsigned(f[2], 10, 1, G_GUINT64_CONSTANT(1) << 30, &mib, NULL)) {
        g_set_error(error, SA_ERROR, SA_ERROR_PARSE,
                    "shape '%s': memory '%s' not a size in MiB (1-1073741824)", text, f[2]);
        return NULL;
    }
    SaShape *s = g_new0(SaShape, 1);
    s->name = g_strdup(f[0]);
    s->vcpus = (guint)vcpus;
    s->memory_mib = mib;
    s->class_name = g_strdup(n == 4 ? f[3] : f[0]);
    return s;
}

char *sa_shape_format(const SaShape *s)
{
    if (g_strcmp0(s->name, s->class_name) == 0)
        return g_strdup_printf("%s:%u:%" G_GUINT64_FORMAT, s->name, s->vcpus, s->memory_mib);
    return g_strdup_printf("%s:%u:%" G_GUINT64_FORMAT ":%s", s->name, s->vcpus, s->memory_mib,
                           s->class_name);
}

/* ---- the model ---- */

static void class_free(gpointer p)
{
    Class *c = p;
    g_free(c->name);
    g_free(c);
}

SaHeadroom *sa_headroom_new(guint window_s)
{
    SaHeadroom *h = g_new0(SaHeadroom, 1);
    h->window_s = CLAMP(window_s, SA_HEADROOM_WINDOW_S_MIN, SA_HEADROOM_WINDOW_S_MAX);
    h->slot_ms = (gint64)h->window_s * 1000 / SA_HEADROOM_SLOTS;
    h->parts = g_ptr_array_new_with_free_func(g_free);
    h->classes = g_ptr_array_new_with_free_func(class_free);
    return h;
}

void sa_headroom_free(SaHeadroom *h)
{
    if (!h)
        return;
    g_ptr_array_unref(h->parts);
    g_ptr_array_unref(h->classes);
    g_free(h);
}

guint sa_headroom_window_s(const SaHeadroom *h)
{
    return h->window_s;
}

/* The number of the slot holding now_ms (floor division: times before 1970 too). */
static gint64 slot_of(const SaHeadroom *h, gint64 now_ms)
{
    gint64 q = now_ms / h->slot_ms;
    return (now_ms % h->slot_ms < 0) ? q - 1 : q;
}

/* Whether slot number no is within the window that ends in slot cur. */
static bool slot_live(gint64 no, gint64 cur)
{
    return no != EMPTY_SLOT && no <= cur && no > cur - (gint64)SA_HEADROOM_SLOTS;
}

static Part *find_part(const SaHeadroom *h, guint id)
{
    for (guint i = 0; i < h->parts->len; i++) {
        Part *p = g_ptr_array_index(h->parts, i);
        if (p->id == id)
            return p;
    }
    return NULL;
}

static void part_reset(Part *p, guint capacity)
{
    p->capacity = capacity;
    for (guint s = 0; s < SA_HEADROOM_SLOTS; s++)
        p->slot_no[s] = EMPTY_SLOT;
    memset(p->ms, 0, sizeof(p->ms));
}

static Part *part_add(SaHeadroom *h, guint id, guint capacity)
{
    if (h->parts->len >= SA_HEADROOM_MAX_PARTITIONS)
        return NULL;
    Part *p = g_new(Part, 1);
    p->id = id;
    part_reset(p, capacity);
    g_ptr_array_add(h->parts, p);
    return p;
}

/* The bin of a demand on a partition of capacity CPUs. */
static guint bin_of(double demand, guint capacity)
{
    double width = SA_HEADROOM_RANGE * capacity / SA_HEADROOM_BINS;
    if (!(demand > 0) || width <= 0)
        return 0;
    double b = floor(demand / width);
    return b >= SA_HEADROOM_BINS ? SA_HEADROOM_BINS - 1 : (guint)b;
}

/* The ring slot for number no, cleared when it held an older (or newer) number. */
static guint32 *slot_bins(const SaHeadroom *h, Part *p, gint64 no)
{
    (void)h;
    guint k = (guint)(((no % SA_HEADROOM_SLOTS) + SA_HEADROOM_SLOTS) % SA_HEADROOM_SLOTS);
    if (p->slot_no[k] != no) {
        p->slot_no[k] = no;
        memset(p->ms[k], 0, sizeof(p->ms[k]));
    }
    return p->ms[k];
}

static void add_ms(guint32 *bin, guint64 ms)
{
    guint64 v = (guint64)*bin + ms;
    *bin = v > G_MAXUINT32 ? G_MAXUINT32 : (guint32)v;
}

void sa_headroom_feed(SaHeadroom *h, gint64 now_ms, guint interval_ms,
                      const SaHeadroomSample *samples, guint n)
{
    /* Forget the partitions the host no longer has. */
    for (guint i = h->parts->len; i-- > 0;) {
        const Part *p = g_ptr_array_index(h->parts, i);
        bool seen = false;
        for (guint k = 0; k < n && !seen; k++)
            seen = samples[k].id == p->id;
        if (!seen)
            g_ptr_array_remove_index(h->parts, i);
    }
    gint64 no = slot_of(h, now_ms);
    for (guint k = 0; k < n; k++) {
        const SaHeadroomSample *s = &samples[k];
        Part *p = find_part(h, s->id);
        if (p && p->capacity != s->capacity)
            part_reset(p, s->capacity);
        if (!p)
            p = part_add(h, s->id, s->capacity);
        if (!p || s->capacity == 0 || interval_ms == 0)
            continue;
        add_ms(&slot_bins(h, p, no)[bin_of(s->owner_demand, s->capacity)], interval_ms);
    }
}

/* ---- classes ---- */

static Class *find_class(const SaHeadroom *h, const char *cls)
{
    for (guint i = 0; cls && i < h->classes->len; i++) {
        Class *c = g_ptr_array_index(h->classes, i);
        if (g_str_equal(c->name, cls))
            return c;
    }
    return NULL;
}

/* The factor sums made at at_ms keep at now_ms: exp(−Δt / window). */
static double decay(const SaHeadroom *h, gint64 at_ms, gint64 now_ms)
{
    if (now_ms <= at_ms)
        return 1.0;
    return exp(-(double)(now_ms - at_ms) / ((double)h->window_s * 1000.0));
}

void sa_headroom_feed_class(SaHeadroom *h, gint64 now_ms, guint interval_ms, const char *cls,
                            double used, guint vcpus)
{
    if (!cls || vcpus == 0 || interval_ms == 0)
        return;
    Class *c = find_class(h, cls);
    if (!c) {
        if (h->classes->len >= SA_HEADROOM_MAX_CLASSES)
            return;
        c = g_new0(Class, 1);
        c->name = g_strdup(cls);
        c->at_ms = now_ms;
        g_ptr_array_add(h->classes, c);
    }
    double f = decay(h, c->at_ms, now_ms);
    c->used_ms = c->used_ms * f + CLAMP(used, 0.0, (double)vcpus) * interval_ms;
    c->vcpu_ms = c->vcpu_ms * f + (double)vcpus * interval_ms;
    c->at_ms = MAX(c->at_ms, now_ms);
}

bool sa_headroom_class_per_vcpu(const SaHeadroom *h, gint64 now_ms, const char *cls,
                                double *per_vcpu)
{
    const Class *c = find_class(h, cls);
    if (!c || c->vcpu_ms * decay(h, c->at_ms, now_ms) < CLASS_MIN_VCPU_MS)
        return false;
    *per_vcpu = c->used_ms / c->vcpu_ms;
    return true;
}

static int compare_names(gconstpointer a, gconstpointer b)
{
    return g_strcmp0(*(char *const *)a, *(char *const *)b);
}

char **sa_headroom_classes(const SaHeadroom *h)
{
    GPtrArray *names = g_ptr_array_new();
    for (guint i = 0; i < h->classes->len; i++)
        g_ptr_array_add(names, g_strdup(((Class *)g_ptr_array_index(h->classes, i))->name));
    g_ptr_array_sort(names, compare_names);
    g_ptr_array_add(names, NULL);
    return (char **)g_ptr_array_free(names, FALSE);
}

double sa_headroom_expected_demand(const SaHeadroom *h, gint64 now_ms, const char *cls, guint vcpus,
                                   bool *learned)
{
    double per = SA_HEADROOM_DEFAULT_PER_VCPU;
    bool seen = h && sa_headroom_class_per_vcpu(h, now_ms, cls, &per);
    if (learned)
        *learned = seen;
    return vcpus * (seen ? MAX(per, SA_HEADROOM_MIN_PER_VCPU) : SA_HEADROOM_DEFAULT_PER_VCPU);
}

/* ---- quantile, headroom, fit ---- */

double sa_headroom_quantile(const SaHeadroom *h, gint64 now_ms, guint id, guint capacity, double q,
                            double *coverage)
{
    const Part *p = h ? find_part(h, id) : NULL;
    double total = 0, bins[SA_HEADROOM_BINS] = {0};

    *coverage = 0;
    if (!p || p->capacity != capacity || capacity == 0)
        return 0;
    gint64 cur = slot_of(h, now_ms);
    for (guint s = 0; s < SA_HEADROOM_SLOTS; s++) {
        if (!slot_live(p->slot_no[s], cur))
            continue;
        for (guint b = 0; b < SA_HEADROOM_BINS; b++) {
            bins[b] += p->ms[s][b];
            total += p->ms[s][b];
        }
    }
    if (total <= 0)
        return 0;
    *coverage = MIN(1.0, total / ((double)h->window_s * 1000.0));
    double target = CLAMP(q, 1e-9, 1.0) * total, cum = 0;
    guint b = 0;
    for (; b < SA_HEADROOM_BINS; b++) {
        cum += bins[b];
        if (cum >= target * (1 - 1e-12))
            break;
    }
    b = MIN(b, SA_HEADROOM_BINS - 1);
    return (b + 1) * SA_HEADROOM_RANGE * capacity / SA_HEADROOM_BINS;
}

void sa_headroom_partition(const SaHeadroom *h, gint64 now_ms, double q, const SaHeadroomInput *in,
                           SaHeadroomPartition *out)
{
    double coverage;
    double demand = sa_headroom_quantile(h, now_ms, in->id, in->capacity, q, &coverage);
    *out = (SaHeadroomPartition){
        .id = in->id,
        .capacity = in->capacity,
        .home_vcpus = in->home_vcpus,
        .memory_available = in->memory_available,
        .margin = sa_policy_margin(in->capacity),
        .demand = demand,
        .coverage = coverage,
    };
    out->headroom = in->capacity - out->margin - demand;
}

guint64 sa_headroom_memory_share(guint64 node_free, guint64 node_untouched, guint part_cpus,
                                 guint node_cpus)
{
    guint64 avail = node_free > node_untouched ? node_free - node_untouched : 0;
    if (node_cpus == 0 || part_cpus >= node_cpus)
        return avail;
    return (guint64)((double)avail * part_cpus / node_cpus);
}

bool sa_headroom_fits(const SaHeadroomPartition *p, double demand, guint64 memory_bytes)
{
    return p->capacity > 0 && demand <= p->headroom + FIT_EPSILON &&
           memory_bytes <= p->memory_available;
}

guint sa_headroom_fit_count_partition(const SaHeadroomPartition *p, double demand,
                                      guint64 memory_bytes)
{
    if (p->capacity == 0 || p->headroom <= 0 || p->memory_available == 0)
        return 0;
    double by_cpu = demand > 0 ? (p->headroom + FIT_EPSILON) / demand : MAX_FIT;
    double by_mem = memory_bytes > 0 ? (double)p->memory_available / memory_bytes : MAX_FIT;
    double n = floor(MIN(by_cpu, by_mem));
    return n <= 0 ? 0 : n >= MAX_FIT ? MAX_FIT : (guint)n;
}

guint sa_headroom_fit_count(const SaHeadroomPartition *parts, guint n, double demand,
                            guint64 memory_bytes)
{
    guint64 sum = 0;
    for (guint i = 0; i < n; i++)
        sum += sa_headroom_fit_count_partition(&parts[i], demand, memory_bytes);
    return (guint)MIN(sum, (guint64)MAX_FIT);
}

/* Whether a ranks before b for a VM of vcpus vCPUs and memory_bytes. */
static bool better(const SaHeadroomPartition *a, bool a_fits, const SaHeadroomPartition *b,
                   bool b_fits, guint vcpus, guint64 memory_bytes)
{
    if (a_fits != b_fits)
        return a_fits;
    bool a_mem = memory_bytes <= a->memory_available, b_mem = memory_bytes <= b->memory_available;
    if (a_mem != b_mem)
        return a_mem;
    if (fabs(a->headroom - b->headroom) > FIT_EPSILON)
        return a->headroom > b->headroom;
    double ca = (double)(a->home_vcpus + vcpus) / a->capacity;
    double cb = (double)(b->home_vcpus + vcpus) / b->capacity;
    if (fabs(ca - cb) > FIT_EPSILON)
        return ca < cb;
    return a->id < b->id;
}

int sa_headroom_choose(const SaHeadroomPartition *parts, guint n, const bool *eligible, guint vcpus,
                       double demand, guint64 memory_bytes, bool *fits, double *left)
{
    int best = -1;
    bool best_fits = false;
    for (guint i = 0; i < n; i++) {
        if ((eligible && !eligible[i]) || parts[i].capacity == 0)
            continue;
        bool f = sa_headroom_fits(&parts[i], demand, memory_bytes);
        if (best < 0 || better(&parts[i], f, &parts[best], best_fits, vcpus, memory_bytes)) {
            best = (int)i;
            best_fits = f;
        }
    }
    if (fits)
        *fits = best_fits;
    if (left)
        *left = best >= 0 ? parts[best].headroom - demand : 0;
    return best;
}

/* ---- JSON ---- */

#define STATE_VERSION 1

json_object *sa_headroom_to_json(const SaHeadroom *h, gint64 now_ms)
{
    json_object *root = json_object_new_object();
    json_object *parts = json_object_new_array();
    json_object *classes = json_object_new_array();
    gint64 cur = slot_of(h, now_ms);

    json_object_object_add(root, "version", json_object_new_int(STATE_VERSION));
    json_object_object_add(root, "window_s", json_object_new_int64(h->window_s));
    json_object_object_add(root, "slot_ms", json_object_new_int64(h->slot_ms));
    for (guint i = 0; i < h->parts->len; i++) {
        const Part *p = g_ptr_array_index(h->parts, i);
        json_object *jp = json_object_new_object();
        json_object *slots = json_object_new_array();
        json_object_object_add(jp, "id", json_object_new_int64(p->id));
        json_object_object_add(jp, "capacity", json_object_new_int64(p->capacity));
        for (guint s = 0; s < SA_HEADROOM_SLOTS; s++) {
            if (!slot_live(p->slot_no[s], cur))
                continue;
            json_object *js = json_object_new_object();
            json_object *bins = json_object_new_array();
            for (guint b = 0; b < SA_HEADROOM_BINS; b++) {
                if (!p->ms[s][b])
                    continue;
                json_object *pair = json_object_new_array();
                json_object_array_add(pair, json_object_new_int64(b));
                json_object_array_add(pair, json_object_new_int64(p->ms[s][b]));
                json_object_array_add(bins, pair);
            }
            json_object_object_add(js, "slot", json_object_new_int64(p->slot_no[s]));
            json_object_object_add(js, "bins", bins);
            json_object_array_add(slots, js);
        }
        json_object_object_add(jp, "slots", slots);
        json_object_array_add(parts, jp);
    }
    for (guint i = 0; i < h->classes->len; i++) {
        const Class *c = g_ptr_array_index(h->classes, i);
        json_object *jc = json_object_new_object();
        json_object_object_add(jc, "name", json_object_new_string(c->name));
        json_object_object_add(jc, "used_ms", json_object_new_double(c->used_ms));
        json_object_object_add(jc, "vcpu_ms", json_object_new_double(c->vcpu_ms));
        json_object_object_add(jc, "at_ms", json_object_new_int64(c->at_ms));
        json_object_array_add(classes, jc);
    }
    json_object_object_add(root, "partitions", parts);
    json_object_object_add(root, "classes", classes);
    return root;
}

static bool bad(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static bool bad(GError **error, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_set_error_literal(error, SA_ERROR, SA_ERROR_PARSE, msg);
    return false;
}

/* obj[key] of type t, else an error naming where. */
static json_object *member(json_object *obj, const char *key, json_type t, const char *where,
                           GError **error)
{
    json_object *v = NULL;
    if (!json_object_is_type(obj, json_type_object) || !json_object_object_get_ex(obj, key, &v) ||
        !(json_object_is_type(v, t) ||
          (t == json_type_double && json_object_is_type(v, json_type_int)))) {
        bad(error, "%s: member \"%s\" missing or not a %s", where, key, json_type_to_name(t));
        return NULL;
    }
    return v;
}

static bool int_member(json_object *obj, const char *key, gint64 min, gint64 max, const char *where,
                       gint64 *out, GError **error)
{
    json_object *v = member(obj, key, json_type_int, where, error);
    if (!v)
        return false;
    *out = json_object_get_int64(v);
    if (*out < min || *out > max)
        return bad(error, "%s: \"%s\" %" G_GINT64_FORMAT " out of range", where, key, *out);
    return true;
}

static bool load_slot(SaHeadroom *h, Part *p, json_object *js, gint64 cur, GError **error)
{
    gint64 no;
    json_object *bins;
    if (!int_member(js, "slot", G_MININT64 + 1, G_MAXINT64, "slot", &no, error) ||
        !(bins = member(js, "bins", json_type_array, "slot", error)))
        return false;
    bool live = slot_live(no, cur);
    guint32 *dest = live ? slot_bins(h, p, no) : NULL;
    for (size_t k = 0; k < json_object_array_length(bins); k++) {
        json_object *pair = json_object_array_get_idx(bins, k);
        if (!json_object_is_type(pair, json_type_array) || json_object_array_length(pair) != 2)
            return bad(error, "slot %" G_GINT64_FORMAT ": a bin is not [BIN, MS]", no);
        json_object *jb = json_object_array_get_idx(pair, 0);
        json_object *jm = json_object_array_get_idx(pair, 1);
        if (!json_object_is_type(jb, json_type_int) || !json_object_is_type(jm, json_type_int))
            return bad(error, "slot %" G_GINT64_FORMAT ": a bin is not [BIN, MS]", no);
        gint64 b = json_object_get_int64(jb), ms = json_object_get_int64(jm);
        if (b < 0 || b >= SA_HEADROOM_BINS || ms < 0 || ms > G_MAXUINT32)
            return bad(error,
                       "slot %" G_GINT64_FORMAT ": bin [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                       "] out of range",
                       no, b, ms);
        if (dest)
            add_ms(&dest[b], (guint64)ms);
    }
    return true;
}

static bool load_part(SaHeadroom *h, json_object *jp, gint64 cur, GError **error)
{
    gint64 id, cap;
    json_object *slots;
    if (!int_member(jp, "id", 0, G_MAXUINT32, "partition", &id, error) ||
        !int_member(jp, "capacity", 1, G_MAXUINT32, "partition", &cap, error) ||
        !(slots = member(jp, "slots", json_type_array, "partition", error)))
        return false;
    if (find_part(h, (guint)id))
        return bad(error, "partition %" G_GINT64_FORMAT " given twice", id);
    Part *p = part_add(h, (guint)id, (guint)cap);
    for (size_t k = 0; p && k < json_object_array_length(slots); k++)
        if (!load_slot(h, p, json_object_array_get_idx(slots, k), cur, error)) {
            g_prefix_error(error, "partition %" G_GINT64_FORMAT ": ", id);
            return false;
        }
    return true;
}

static bool load_class(SaHeadroom *h, json_object *jc, GError **error)
{
    json_object *name, *used, *vcpu;
    gint64 at;
    if (!(name = member(jc, "name", json_type_string, "class", error)) ||
        !(used = member(jc, "used_ms", json_type_double, "class", error)) ||
        !(vcpu = member(jc, "vcpu_ms", json_type_double, "class", error)) ||
        !int_member(jc, "at_ms", G_MININT64 + 1, G_MAXINT64, "class", &at, error))
        return false;
    double u = json_object_get_double(used), v = json_object_get_double(vcpu);
    const char *n = json_object_get_string(name);
    if (!(u >= 0) || !(v >= 0) || u > v * 4096 || !n[0])
        return bad(error, "class \"%s\": used_ms %g, vcpu_ms %g out of range", n, u, v);
    if (find_class(h, n))
        return bad(error, "class \"%s\" given twice", n);
    if (h->classes->len >= SA_HEADROOM_MAX_CLASSES)
        return true;
    Class *c = g_new0(Class, 1);
    c->name = g_strdup(n);
    c->used_ms = u;
    c->vcpu_ms = v;
    c->at_ms = at;
    g_ptr_array_add(h->classes, c);
    return true;
}

SaHeadroom *sa_headroom_from_json(json_object *obj, guint window_s, gint64 now_ms, GError **error)
{
    gint64 version, saved_window;
    json_object *parts, *classes;
    if (!int_member(obj, "version", 0, G_MAXINT32, "headroom", &version, error))
        return NULL;
    if (version != STATE_VERSION) {
        bad(error, "headroom: version %" G_GINT64_FORMAT " (this softaff reads %d)", version,
            STATE_VERSION);
        return NULL;
    }
    if (!int_member(obj, "window_s", 0, G_MAXUINT32, "headroom", &saved_window, error) ||
        !(parts = member(obj, "partitions", json_type_array, "headroom", error)) ||
        !(classes = member(obj, "classes", json_type_array, "headroom", error)))
        return NULL;
    if (saved_window != window_s) {
        bad(error, "headroom: saved with window_s=%" G_GINT64_FORMAT ", now %u", saved_window,
            window_s);
        return NULL;
    }
    g_autoptr(SaHeadroom) h = sa_headroom_new(window_s);
    gint64 cur = slot_of(h, now_ms);
    for (size_t k = 0; k < json_object_array_length(parts); k++)
        if (!load_part(h, json_object_array_get_idx(parts, k), cur, error))
            return NULL;
    for (size_t k = 0; k < json_object_array_length(classes); k++)
        if (!load_class(h, json_object_array_get_idx(classes, k), error))
            return NULL;
    return g_steal_pointer(&h);
}
