/* softaff tests — a bed for the real core: a fake host of 2 nodes of 2 CPUs (node 0: CPUs 0-1,
 * node 1: CPUs 2-3), the core on it (registry, sampling, policy, actuator) and VMs with
 * recording backends, run by a fake kernel between ticks. The unit tests of the core, the
 * actuator and the scheduler share it; each may place the vCPUs its own way.
 *
 * The fake kernel (bed_step): each running VM's vCPU i runs where the bed's place function
 * puts it (by default on the i-th CPU of the VM's last pin, every CPU before any: round robin);
 * a CPU with more demand than 1 is shared in proportion, the rest waits. */
#pragma once

#include <glib.h>

#include "core-private.h"
#include "fake-host.h"
#include "recorder.h"

G_BEGIN_DECLS

#define BED_MAX_VMS 12
#define BED_MAX_VCPUS 8
/* The wait of a step; the config's interval is 3 steps (the first back-off of a failed pin). */
#define BED_STEP_MS 15

typedef struct {
    char *key; /* "key-NAME" */
    pid_t pid; /* its vCPU i is thread pid + 1 + i (fake_host_add_process) */
    guint n_vcpus;
    RecVm *rec;
    gboolean gone;              /* its process was removed from the fake /proc: it runs no more */
    double load[BED_MAX_VCPUS]; /* each vCPU's demand: the share of a CPU it would use */
    double run[BED_MAX_VCPUS], delay[BED_MAX_VCPUS]; /* ns, cumulative */
} BedVm;

typedef struct CoreBed CoreBed;

/* Where the fake kernel runs v's vCPUs for this step: vCPU i on cpu[i]. */
typedef void (*BedPlaceFunc)(CoreBed *bed, const BedVm *v, int *cpu);

struct CoreBed {
    FakeHost *host;
    SaCore *core;
    BedVm vms[BED_MAX_VMS];
    guint n_vms;
    gint64 last_us;     /* the fake kernel's last step */
    BedPlaceFunc place; /* NULL: vCPU i on the i-th CPU of bed_pinned_set */
    gboolean stopped;   /* set by bed_stopped_cb */
};

/* The core on the fake host in place (SOFTAFF_SYSFS_ROOT), its topology by node; takes cfg.
 * Without mover_thread its memory mover has no thread reading the fake /proc behind the test's
 * back (a test drives one of its own). Aborts on an error (a test fixture). */
SaCore *bed_core_new(SaConfig *cfg, gboolean mover_thread);
/* The defaults, deciding at once: no dwell, no smoothing, a tick interval of 3 steps. */
SaConfig *bed_config(void);

/* A fresh bed (b zeroed), its core with cfg (taken) and no mover thread; clears the recorders'
 * log. */
void bed_init(CoreBed *b, SaConfig *cfg);
/* Unblocks every VM's commands, lets the core end its work, frees it, the VMs and the host. */
void bed_clear(CoreBed *b);

/* The next VM, not yet reported: key "key-NAME", its process (pid 0: 1000 + 100 times its
 * number, from 1) with n_vcpus vCPU threads in the fake /proc, each with that load. */
BedVm *bed_vm(CoreBed *b, const char *name, pid_t pid, guint n_vcpus, double load);
/* v's facts as a backend finds them (rec_facts), named name; settings: preferred < -1 means none
 * at all (the config's defaults), -1 auto, else that home. */
SaVmFacts *bed_facts(const BedVm *v, const char *name, int preferred);
/* Gives v its recording backend, which discovers f, and reports f to the core (takes f). */
void bed_report(CoreBed *b, BedVm *v, SaVmFacts *f);
void bed_vm_set_load(BedVm *v, double load);

/* The set of v's last pin, else every CPU of the host. */
SaCpuSet *bed_pinned_set(const CoreBed *b, const BedVm *v);
/* The n-th CPU of set, round robin. */
int bed_nth_cpu(const SaCpuSet *set, guint n);

/* n ticks: wait a step, play the fake kernel for the time since its last step (/proc/stat and
 * every running vCPU's counters), tick, let the commands answer. */
void bed_step(CoreBed *b, guint n);
/* Steps until v's last pinned set is want; returns the ticks it took, or G_MAXUINT. */
guint bed_step_until_pinned(CoreBed *b, BedVm *v, const char *want, guint max);

/* A callback for sa_core_shutdown: sets the bed's stopped. */
void bed_stopped_cb(gpointer bed);

G_END_DECLS
