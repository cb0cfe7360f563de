/* softaff — the headroom model: what more a host can take ([fleet], docs/fleet.md).
 *
 * Per partition, a compact histogram of the owners' demand (owners + unmanaged + their wait, in
 * CPUs, as the policy measures it each tick) over a rolling window; from it the demand at a
 * quantile (p95 by default) and the headroom: capacity − burst margin − that demand. With the
 * memory a new VM can get there, whether a VM shape fits and how many do. softaffd feeds it every
 * tick and shows it (status, metrics); `softaffctl advise` and bench/bench-headroom run the same
 * functions on the histograms softaffd gives them, or on none.
 *
 * Pure, like the policy: no I/O, no clock. Time comes in as now_ms, a wall-clock time in ms
 * (Unix epoch), so that a histogram saved to disk ages while softaffd is stopped.
 *
 * Bounded memory: a partition keeps SA_HEADROOM_SLOTS slots of window_s / SA_HEADROOM_SLOTS
 * each (60 s for the default hour), a ring indexed by the slot's number since the epoch; a slot
 * holds SA_HEADROOM_BINS bins of the time (ms) the demand spent in each bin. The bins cover
 * 0..2 × capacity in steps of capacity / 64; a demand beyond counts in the last one. A slot whose
 * number is older than the window counts for nothing and is reused. So the window slides by one
 * slot at a time (at most 1/60 of it too long), and a partition costs 60 × 128 × 4 bytes = 30 KiB
 * whatever the tick rate. Per class of VMs (the [rule NAME] that matched), the mean utilization
 * per vCPU, as sums that decay with a time constant of the window. */
#pragma once

#include <glib.h>
#include <json-c/json.h>
#include <stdbool.h>

G_BEGIN_DECLS

#define SA_HEADROOM_SLOTS 60u
#define SA_HEADROOM_BINS 128u
/* The bins cover 0..SA_HEADROOM_RANGE × capacity. */
#define SA_HEADROOM_RANGE 2.0
/* Partitions and classes kept at most (more are not tracked). */
#define SA_HEADROOM_MAX_PARTITIONS 1024u
#define SA_HEADROOM_MAX_CLASSES 256u
/* The demand a VM is expected to bring per vCPU when its class showed none on this host, and
 * the least a class's mean may count for (a class idle so far still takes some CPU). */
#define SA_HEADROOM_DEFAULT_PER_VCPU 1.0
#define SA_HEADROOM_MIN_PER_VCPU 0.05
/* [fleet] defaults and ranges (config/config.c checks them). */
#define SA_HEADROOM_DEFAULT_WINDOW_S 3600u
#define SA_HEADROOM_WINDOW_S_MIN 600u
#define SA_HEADROOM_WINDOW_S_MAX 86400u
#define SA_HEADROOM_DEFAULT_QUANTILE 0.95

/* A VM shape of [fleet] shapes: "NAME:VCPUS:MEMORY_MIB[:CLASS]". Its expected demand is
 * vcpus × the mean per vCPU of class (default: NAME) on this host, else vcpus × 1.0. */
typedef struct {
    char *name;
    guint vcpus;
    guint64 memory_mib;
    char *class_name; /* never NULL: NAME when not given */
} SaShape;

void sa_shape_free(SaShape *shape);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaShape, sa_shape_free)
/* Parses one shape; the error says what is wrong with text (the caller adds file, group, key). */
SaShape *sa_shape_parse(const char *text, GError **error);
/* "NAME:VCPUS:MEMORY_MIB" plus ":CLASS" when the class is not the name. Free with g_free. */
char *sa_shape_format(const SaShape *shape);

typedef struct _SaHeadroom SaHeadroom;

/* An empty model for this window (window_s within the [fleet] range). */
SaHeadroom *sa_headroom_new(guint window_s);
void sa_headroom_free(SaHeadroom *h);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaHeadroom, sa_headroom_free)
guint sa_headroom_window_s(const SaHeadroom *h);

/* One partition over one interval. */
typedef struct {
    guint id;
    guint capacity;      /* online CPUs */
    double owner_demand; /* CPUs the owners wanted: owners + unmanaged + their wait */
} SaHeadroomSample;

/* Counts interval_ms of each partition's owner_demand in the slot of now_ms. A partition seen
 * with another capacity than before starts over (its bins meant other CPUs); partitions absent
 * from samples are forgotten (a reload changed the layout). */
void sa_headroom_feed(SaHeadroom *h, gint64 now_ms, guint interval_ms,
                      const SaHeadroomSample *samples, guint n);

/* Adds one VM of class cls over interval_ms: it wanted used CPUs (run + wait) with vcpus vCPUs.
 * Classes beyond SA_HEADROOM_MAX_CLASSES are not tracked. */
void sa_headroom_feed_class(SaHeadroom *h, gint64 now_ms, guint interval_ms, const char *cls,
                            double used, guint vcpus);

/* The mean CPUs per vCPU VMs of cls wanted over about the window; false when none was seen
 * (or cls is NULL). */
bool sa_headroom_class_per_vcpu(const SaHeadroom *h, gint64 now_ms, const char *cls,
                                double *per_vcpu);
/* The classes seen, sorted (for metrics and status); free with g_strfreev. */
char **sa_headroom_classes(const SaHeadroom *h);

/* The expected demand of a VM of vcpus vCPUs and class cls: vcpus × max(the class's mean per
 * vCPU, SA_HEADROOM_MIN_PER_VCPU) when the class was seen, else vcpus × 1.0. *learned (may be
 * NULL) says which. */
double sa_headroom_expected_demand(const SaHeadroom *h, gint64 now_ms, const char *cls, guint vcpus,
                                   bool *learned);

/* ---- what a partition can take ---- */

/* What the caller knows of a partition now, besides the histogram. */
typedef struct {
    guint id;
    guint capacity;           /* online CPUs */
    guint home_vcpus;         /* vCPUs homed there */
    guint64 memory_available; /* bytes a VM homed there can get (sa_headroom_memory_share) */
} SaHeadroomInput;

typedef struct {
    guint id;
    guint capacity;
    guint home_vcpus;
    guint64 memory_available;
    double margin;   /* the policy's burst margin: max(0.25, 10% of capacity) */
    double demand;   /* the owners' demand at the quantile over the window (0 without samples) */
    double headroom; /* capacity − margin − demand; may be < 0 */
    double coverage; /* share 0..1 of the window with samples */
} SaHeadroomPartition;

/* The quantile q (0 < q <= 1) of a partition's owners' demand over the window ending at now_ms:
 * the upper edge of the bin where the time-weighted cumulative share reaches q (a demand is
 * never under-stated by more than nothing, over-stated by at most capacity / 64). *coverage:
 * the share of the window with samples. 0 demand and 0 coverage for an unknown partition or
 * one without samples in the window, or one seen with another capacity. */
double sa_headroom_quantile(const SaHeadroom *h, gint64 now_ms, guint id, guint capacity, double q,
                            double *coverage);

/* The partition's headroom at quantile q. */
void sa_headroom_partition(const SaHeadroom *h, gint64 now_ms, double q, const SaHeadroomInput *in,
                           SaHeadroomPartition *out);

/* Memory a new VM homed on a partition can get: what the node has free, less what the VMs homed
 * on the node were given but have not touched yet (node_untouched), shared among the node's
 * partitions by CPUs (part_cpus of node_cpus); all of it when node_cpus is 0. */
guint64 sa_headroom_memory_share(guint64 node_free, guint64 node_untouched, guint part_cpus,
                                 guint node_cpus);

/* The fit rule (docs/fleet.md, shared with the Nova weigher): a VM of expected demand demand
 * CPUs and memory_bytes fits p when demand <= p->headroom and memory_bytes <= its memory. */
bool sa_headroom_fits(const SaHeadroomPartition *p, double demand, guint64 memory_bytes);
/* How many such VMs fit on p: floor(min(headroom / demand, memory / memory_bytes)), 0 when
 * either is <= 0. */
guint sa_headroom_fit_count_partition(const SaHeadroomPartition *p, double demand,
                                      guint64 memory_bytes);
/* The sum over partitions. */
guint sa_headroom_fit_count(const SaHeadroomPartition *parts, guint n, double demand,
                            guint64 memory_bytes);

/* The partition advise recommends among those with eligible[i] (NULL: all): where the VM fits,
 * the one it leaves the most headroom on; where it fits nowhere, the one with the most headroom
 * all the same (fits false), among those with the memory first; ties by the lower commitment (home
 * vCPUs per CPU with the VM), then the lower id. -1 when none is eligible (or has CPUs). *left:
 * headroom − demand there. */
int sa_headroom_choose(const SaHeadroomPartition *parts, guint n, const bool *eligible, guint vcpus,
                       double demand, guint64 memory_bytes, bool *fits, double *left);

/* ---- saving and reading back (the state file, the control socket's "headroom") ---- */

/* {"version":1,"window_s":W,"slot_ms":S,"partitions":[{"id","capacity","slots":[{"slot":N,
 *  "bins":[[BIN,MS],...]}]}],"classes":[{"name","used","vcpus","at_ms"}]}: the bins that are
 * not 0, of the slots within the window at now_ms. */
json_object *sa_headroom_to_json(const SaHeadroom *h, gint64 now_ms);
/* The model saved by sa_headroom_to_json into a model of window_s: slots older than the window
 * at now_ms are dropped. NULL with an error naming what is wrong (version, a member, a bin out
 * of range); another window_s than the one saved is an error too (the slots differ). */
SaHeadroom *sa_headroom_from_json(json_object *obj, guint window_s, gint64 now_ms, GError **error);

G_END_DECLS
