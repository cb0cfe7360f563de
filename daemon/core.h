/* softaffd — the backend-independent core: managed VMs, the tick, and the log of decisions. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sa-config.h"
#include "sa-cpuset.h"
#include "sa-metadata.h"
#include "sa-policy.h"
#include "sa-sampler.h"
#include "sa-topology.h"

G_BEGIN_DECLS

typedef struct SaDaemon SaDaemon;
typedef struct SaVm SaVm;

/* One decision the policy made for a VM, kept for `softaffctl show`. */
typedef struct {
    gint64 wall_us; /* g_get_real_time() */
    SaVmState state;
    int home;
    char *vcpus; /* cpulist given to the vCPUs */
    char *reason;
} SaDecision;

#define SA_VM_MAX_DECISIONS 32

/* What a backend does for the core. */
typedef struct {
    const char *name;
    /* The core finds the vCPU threads by their names ("CPU N/KVM"); otherwise the backend
     * fills vm->vcpu_threads itself and clears threads_stale (QMP: query-cpus-fast). */
    bool threads_by_name;
    /* Give the vCPU threads vcpus and the emulator/I/O threads emulator; read before write.
     * SA_ERROR_GONE: the VM went away; SA_ERROR_TRANSIENT: try again next tick. */
    bool (*apply)(SaDaemon *d, SaVm *vm, const SaCpuSet *vcpus, const SaCpuSet *emulator,
                  GError **error);
    /* Put back what softaff changed: every vCPU to its own allowed set, emulator to its own. */
    bool (*restore)(SaDaemon *d, SaVm *vm, GError **error);
    /* Record the home chosen for preferred="auto" (libvirt: live metadata assigned=). */
    bool (*write_assigned)(SaDaemon *d, SaVm *vm, int home, GError **error);
} SaBackendOps;

typedef enum {
    SA_VM_MANAGED,
    SA_VM_UNMANAGED, /* mode off, manage=explicit without metadata, pinned by the user */
    SA_VM_INVALID,   /* the metadata is invalid: the VM runs unmanaged, the problem is shown */
} SaVmStatus;

struct SaVm {
    char *key; /* backend's stable id (libvirt: UUID) */
    char *name;
    const SaBackendOps *ops;
    gpointer backend_data;
    GDestroyNotify backend_free;

    SaVmStatus status;
    char *status_reason; /* why unmanaged / invalid */
    bool has_metadata;
    SaMetadata metadata;

    pid_t pid;
    guint n_vcpus;
    GPtrArray *vcpu_threads; /* SaThreadSampler* by vCPU index (NULL where unknown) */
    GArray *prev_samples;    /* SaThreadSample by vCPU index */
    GArray *deltas;          /* SaVcpuSample by vCPU index */
    bool have_prev;
    bool threads_stale; /* rescan thread ids before the next sample */
    guint64 memory_bytes;
    SaCpuSet *allowed;          /* the VM's own allowed set for its vCPUs */
    GPtrArray *vcpu_allowed;    /* SaCpuSet* per vCPU to restore (user pins), NULL = allowed */
    SaCpuSet *emulator_allowed; /* the emulator's own allowed set, to restore */

    SaPolicyVm pvm;
    bool touched;         /* softaff changed this VM's pinning */
    bool apply_pending;   /* the last decision is not applied yet */
    int written_assigned; /* assigned= we wrote, -1 none */
    char *last_error;     /* last transient error, to log each distinct one once */
    gint64 last_error_logged_us;

    /* Measured while managed, for status and metrics. */
    gint64 managed_since_us; /* g_get_real_time() when it became managed */
    double seconds_home;     /* wall time in state home / burst */
    double seconds_burst;
    guint64 run_ns_total;   /* vCPU run time seen ... */
    guint64 run_ns_home;    /* ... and the part on CPUs of its home partition */
    guint64 delay_ns_total; /* vCPU run delay seen */
    double run_delay_now;   /* run delay in the last interval, in CPUs (delay / interval) */
    GQueue *decisions;      /* SaDecision*, newest last, at most SA_VM_MAX_DECISIONS */
};

struct SaDaemon {
    SaConfig *cfg;
    SaTopology *topo;
    bool dry_run;
    SaStatSampler *stat;
    GArray *loads;    /* SaCpuLoad */
    double *cpu_busy; /* by CPU number */
    guint n_cpu_busy;
    gint64 last_sample_us;
    GHashTable *vms;         /* key -> SaVm* */
    SaPartitionUsage *usage; /* per partition index, from the last tick */
    guint64 ticks;
    gint64 started_us;       /* g_get_real_time() at start */
    double last_tick_cpu_ms; /* CPU time the last tick took */
    bool metrics_failing;    /* the last metrics write failed (logged once) */
};

SaDaemon *sa_daemon_new(SaConfig *cfg, SaTopology *topo, bool dry_run, GError **error);
void sa_daemon_free(SaDaemon *d);
/* Swaps in a new configuration and topology (SIGHUP); VMs keep their state. */
void sa_daemon_reload(SaDaemon *d, SaConfig *cfg, SaTopology *topo);

SaVm *sa_daemon_lookup(SaDaemon *d, const char *key);
/* Every VM, ordered by name then key (a stable order for the policy, status and metrics). */
GPtrArray *sa_daemon_sorted_vms(const SaDaemon *d);
/* Adds a VM (takes ownership) or returns the existing one with this key. */
SaVm *sa_daemon_add(SaDaemon *d, SaVm *vm);
/* Forgets a VM; restore: put its pinning back first (when it still runs). */
void sa_daemon_remove(SaDaemon *d, const char *key, bool restore);

void sa_decision_free(gpointer decision);
SaVm *sa_vm_new(const char *key, const char *name, const SaBackendOps *ops);
void sa_vm_free(SaVm *vm);
/* Sets status with a reason; logs when it changes. Leaving MANAGED restores the VM. */
void sa_vm_set_status(SaDaemon *d, SaVm *vm, SaVmStatus status, const char *reason);
/* (Re)discovers the vCPU threads of vm->pid: threads named "CPU N/KVM" or "CPU N/TCG". */
bool sa_vm_scan_threads(SaVm *vm, GError **error);
const char *sa_vm_status_to_string(SaVmStatus status);

/* One tick: sample host and VMs, run the policy, apply the changes. */
void sa_daemon_tick(SaDaemon *d);
/* Restores every VM softaff touched (SIGTERM). */
void sa_daemon_restore_all(SaDaemon *d);

G_END_DECLS
