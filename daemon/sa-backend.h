/* softaffd — the contract between the daemon core and its backends (libvirt: plugin/, QMP: qmp/).
 *
 * Both ways, and narrow:
 *   - a backend reports facts about the VMs it finds (identity, threads, the VM's own settings,
 *     its softaff settings) and that a VM stopped;
 *   - the core sends it commands (pin these threads, restore them, record assigned=).
 * The core alone decides whether a VM is managed, samples it, runs the policy and keeps the
 * counters. A backend never sees a core structure.
 *
 * Threads. The sa_core_*() functions below are called on the main thread (the GLib main loop,
 * which also runs the backends' event callbacks). Every SaBackendOps callback except handle_ref
 * and handle_unref runs on a worker thread: at most one at a time for a given VM, in the order
 * the core queued them, each with a deadline ([daemon] command_timeout_ms). A callback that
 * misses its deadline is never cancelled: the VM is shown `stalled` and gets no new command
 * until that one returns. A callback may block (a libvirt job, a stopped QEMU); it must not
 * touch the backend's main-thread state without a lock.
 *
 * Errors of callbacks (SA_ERROR domain): SA_ERROR_GONE, the VM no longer runs (the core forgets
 * it; only "no such domain / process" may say so); SA_ERROR_UNSUPPORTED, a permanent refusal (the
 * VM runs unmanaged, with the message as the reason, until its facts are reported again);
 * anything else is transient (tried again with back-off, shown in the status, each distinct
 * message logged once).
 *
 * The VM's own settings. The facts carry them per thread; the core gives each thread the
 * policy's set within the thread's own set (its own set alone when the two share no CPU) and,
 * at restore, exactly its own set. A backend must never report softaff's pins as the VM's own. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sa-config.h"
#include "sa-cpuset.h"
#include "sa-metadata.h"
#include "sa-topology.h"

G_BEGIN_DECLS

typedef struct SaCore SaCore;

/* What a backend knows about one running VM. */
typedef struct {
    char *key;  /* stable id: the libvirt UUID; "qmp:" + socket path */
    char *name; /* for people: domain name, QEMU -name */
    pid_t pid;  /* the QEMU process, <= 0 when not found */
    guint n_vcpus;
    guint64 memory_bytes;
    /* pid_t per vCPU index (0 = unknown); NULL: the core finds the threads of pid named
     * "CPU N/KVM" or "CPU N/TCG" itself. */
    GArray *vcpu_tids;

    /* The VM's own settings, which softaff only narrows and puts back. */
    SaCpuSet *vcpu_cpuset;    /* <vcpu cpuset> (QMP: the process's own affinity); NULL = none */
    GPtrArray *vcpu_pins;     /* SaCpuSet* per vCPU pinned by the user (NULL entries: not pinned);
                                 NULL when no vCPU is pinned */
    SaCpuSet *emulator_pin;   /* <emulatorpin>; NULL = none */
    GArray *iothread_ids;     /* guint: the VM's I/O threads (libvirt's ids); NULL = none */
    GPtrArray *iothread_pins; /* SaCpuSet* per entry of iothread_ids (<iothreadpin>; NULL
                                 entries: not pinned); NULL exactly when iothread_ids is */

    /* What a [rule NAME] can match besides the name (libvirt; NULL: none): the OpenStack Nova
     * flavor name (<nova:instance><nova:flavor name>), the domain <title> and <description>. */
    char *flavor;
    char *title;
    char *description;

    /* The VM places its own memory (libvirt: <numatune>): softaff never moves it. */
    bool has_numatune;

    /* softaff's pins may be in place, from an earlier softaffd (libvirt: its record is in the
     * live metadata): the VM is given back at shutdown even if this daemon never pinned it. */
    bool narrowed;

    /* How many live pins of the user the backend has heard of for this process (libvirt's
     * tunable events; 0 where none can be heard). A change says a thread's affinity is the
     * user's write now, not softaff's last, even when its own set stays the same (a vCPU given
     * every CPU, its own set before): the core pins the VM again within its new own sets. */
    guint user_pins;

    /* softaff settings: the metadata element (libvirt) or a [vm NAME] group (QMP). */
    bool has_settings;
    SaMetadata settings;  /* meaningful when has_settings and settings_error is NULL */
    char *settings_error; /* the settings are invalid: why (shown; the VM runs unmanaged) */
} SaVmFacts;

SaVmFacts *sa_vm_facts_new(const char *key, const char *name);
void sa_vm_facts_free(SaVmFacts *facts);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaVmFacts, sa_vm_facts_free)

/* One command for the threads of one VM. Everything in it is a copy the core owns until the
 * callback returns. */
typedef struct {
    const char *key;
    const char *name;
    pid_t pid;
    guint n_vcpus;
    const GArray *vcpu_tids; /* pid_t per vCPU as reported or found (0 unknown); may be NULL */
    SaCpuSet *const *vcpus;  /* n_vcpus sets: what each vCPU thread gets */
    const SaCpuSet *others;  /* what the emulator gets (QMP: every thread but the vCPUs) */
    guint n_iothreads;
    const guint *iothread_ids;  /* n_iothreads ids, as reported in the facts */
    SaCpuSet *const *iothreads; /* n_iothreads sets: what each I/O thread gets */
    const SaMetadata *settings; /* write_assigned: the element to write (assigned set) */
} SaCommand;

typedef struct {
    const char *name; /* "libvirt", "qmp" */
    /* What people call the VM's softaff settings, for messages: "softaff metadata",
     * "[vm NAME] group". */
    const char *settings_name;
    /* Gives each vCPU thread its set and the other threads theirs. Reads the current affinity
     * first and writes only what differs. Once a pin of the process succeeded (and until a
     * restore), the core may already have narrowed vCPU threads to cmd->vcpus itself
     * (sched_setaffinity, never wider than they were): the backend's own record (libvirt's
     * cgroups and pinning) must still be brought to cmd's sets. */
    bool (*pin)(gpointer handle, const SaCommand *cmd, GError **error);
    /* Puts every thread back to the VM's own settings; cmd->vcpus, cmd->others and
     * cmd->iothreads hold them as the core knows them (a backend that remembered better may use
     * what it remembered). */
    bool (*restore)(gpointer handle, const SaCommand *cmd, GError **error);
    /* Records cmd->settings for the VM (libvirt: live metadata, so a restarted daemon keeps the
     * homes it chose). */
    bool (*write_assigned)(gpointer handle, const SaCommand *cmd, GError **error);
    /* Optional. Reads the VM's facts (libvirt: the domain XML). NULL with SA_ERROR_GONE when it
     * no longer runs. */
    SaVmFacts *(*discover)(gpointer handle, GError **error);
    /* Optional, main thread. A vCPU thread of vcpu_tids went away (unplug, reset): report the
     * facts again once the backend knows the new threads. */
    void (*threads_lost)(gpointer handle);
    /* Main thread or worker: the core holds a reference for the VM and one per queued
     * command. */
    gpointer (*handle_ref)(gpointer handle);
    void (*handle_unref)(gpointer handle);
} SaBackendOps;

/* Reports the facts of a running VM (takes facts; references handle). A known VM is updated
 * (a different handle replaces its old one), a new one is added. The core decides managed,
 * unmanaged or invalid and logs it. */
void sa_core_report(SaCore *core, const SaBackendOps *ops, gpointer handle, SaVmFacts *facts);
/* Queues ops->discover for the VM with this key on its worker (references handle): its result
 * is reported as above, SA_ERROR_GONE forgets the VM, another error is logged. Use it for any
 * read that can wait on the hypervisor. name is for the log. */
void sa_core_discover(SaCore *core, const SaBackendOps *ops, gpointer handle, const char *key,
                      const char *name);
/* The VM stopped: forget it without restoring (there is nothing left to restore). why is
 * logged ("stopped", "QEMU process 123 exited"). Unknown keys are ignored. */
void sa_core_forget(SaCore *core, const char *key, const char *why);
/* Keys of the VMs this backend reported (for a resync that finds which ones went away). */
GPtrArray *sa_core_list_keys(SaCore *core, const SaBackendOps *ops);

/* The running configuration and topology; valid on the main thread until the next reload. */
const SaConfig *sa_core_config(const SaCore *core);
const SaTopology *sa_core_topology(const SaCore *core);
/* True once the shutdown began: report and discover are still accepted, nothing is pinned. */
bool sa_core_is_stopping(const SaCore *core);

G_END_DECLS
