/* softaffd — the libvirt backend's internals, shared by its files and its unit test (not by
 * the core, which sees only sa-backend.h).
 *
 * Threads. backend-libvirt.c runs on the main thread: the connection, the event callbacks,
 * listing domains. lv-discover.c and lv-pin.c are the SaBackendOps callbacks: they run on the
 * core's worker threads and make every libvirt call that can wait on a domain job or the QEMU
 * monitor. What both sides touch lives in an LvDomain (one per running domain, the core's
 * handle) under its lock, or in the LvShared every handle points to. No libvirt call is made
 * with a lock held: a worker blocked in libvirt never blocks the main thread. */
#pragma once

#include <glib.h>
#include <libvirt/libvirt.h>
#include <stdbool.h>

#include "sa-backend.h"
#include "sa-cpuset.h"
#include "sa-metadata.h"

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC(virDomain, virDomainFree)

/* What the workers need of the backend, apart from their domain. Refcounted: a handle keeps it
 * alive after the SaLibvirt is gone (a stalled callback may return after the daemon stopped
 * listening to libvirt). */
typedef struct {
    gint refs;         /* atomic */
    SaCore *core;      /* immutable; used on the main thread only (the core calls back there) */
    gint host_cpus;    /* atomic: CPUs in libvirt's cpumaps (virNodeGetCPUMap at connect) */
    char *uri;         /* immutable */
    GMutex state_lock; /* guards state_path and the file it names */
    char *state_path;  /* transient-domains.ini beside the control socket */
} LvShared;

LvShared *lv_shared_new(SaCore *core, const char *uri, const char *socket_path);
LvShared *lv_shared_ref(LvShared *shared);
void lv_shared_unref(LvShared *shared);
/* Bytes of a cpumap for one thread. */
gsize lv_shared_maplen(LvShared *shared);
void lv_shared_set_host_cpus(LvShared *shared, int host_cpus);
/* The state file goes beside the control socket. */
void lv_shared_set_socket(LvShared *shared, const char *socket_path);

/* A VM's own pinning, which softaff narrows and puts back: the persistent definition's, or a
 * transient domain's when softaff first saw it. Immutable once built (shared by reference). */
typedef struct {
    GPtrArray *vcpupin;     /* SaCpuSet* per vCPU (NULL entries: not pinned); NULL: none */
    SaCpuSet *emulatorpin;  /* NULL: none */
    GArray *iothread_ids;   /* guint, the I/O threads that have a pin; NULL: none */
    GPtrArray *iothreadpin; /* SaCpuSet* per entry of iothread_ids */
} LvPins;

LvPins *lv_pins_new(void);
/* Takes the pins out of x (they are NULL in x afterwards). */
LvPins *lv_pins_take(SaDomainXml *x);
LvPins *lv_pins_ref(LvPins *pins);
void lv_pins_unref(LvPins *pins);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(LvPins, lv_pins_unref)
void lv_pins_add_iothread(LvPins *pins, guint id, SaCpuSet *set);
/* The pin of I/O thread id, or NULL. */
const SaCpuSet *lv_pins_iothread(const LvPins *pins, guint id);

/* How many writes per vCPU are remembered to recognise the tunable events they cause (an
 * event may arrive after the next write). */
#define LV_APPLIED_KEEP 4

/* One running domain: the handle the core holds. */
typedef struct {
    gint refs;        /* atomic */
    char *uuid;       /* immutable */
    char *name;       /* immutable: for the log */
    LvShared *shared; /* immutable */

    GMutex lock;              /* guards everything below */
    virDomainPtr dom;         /* referenced; of the current connection once it reconnected */
    GPtrArray *applied;       /* per vCPU: GPtrArray of the SaCpuSet* softaff wrote, newest
                                 last, at most LV_APPLIED_KEEP; NULL entries: none yet */
    GPtrArray *user_pins;     /* SaCpuSet* per vCPU the user pinned live (tunable events) */
    GArray *iothread_ids;     /* guint: the I/O threads, as the last discover found them */
    GPtrArray *iothread_pins; /* SaCpuSet* per entry of iothread_ids: its pinning as known
                                 (live XML, then softaff's writes), NULL: unknown */
    LvPins *own;              /* the VM's own pinning, NULL until discovered */
    bool own_first_seen;      /* own is a transient domain's pinning when first seen: kept */
} LvDomain;

/* The callbacks the core calls (lv-pin.c). */
extern const SaBackendOps lv_backend_ops;

LvDomain *lv_domain_new(LvShared *shared, const char *uuid, const char *name, virDomainPtr dom);
gpointer lv_domain_ref(gpointer handle);
void lv_domain_unref(gpointer handle);
/* Main thread: gives the handle dom when h's domain object belongs to another connection. */
void lv_domain_set_dom(LvDomain *h, virDomainPtr dom);
/* A new reference to the domain object (free with virDomainFree). */
virDomainPtr lv_domain_get_dom(LvDomain *h);
/* Worker: softaff is about to give vCPU vcpu the set. */
void lv_domain_note_applied(LvDomain *h, guint vcpu, const SaCpuSet *set);
/* Main thread: a tunable event. Records the user's own live vCPU pins (a pin that is none of
 * softaff's recent writes) and the I/O thread pins it names; true when the facts should be
 * read again (a user pin, an I/O thread softaff did not know). */
bool lv_domain_tunables(LvDomain *h, const virTypedParameter *params, int n_params);
/* A copy of the user's live pins (SaCpuSet* per vCPU, NULL entries), or NULL when none. */
GPtrArray *lv_domain_user_pins(LvDomain *h);
/* Worker: the I/O threads of the live XML and their pins become the known ones. */
void lv_domain_learn_iothreads(LvDomain *h, const SaDomainXml *live);
/* Copies of the known I/O threads and pins; false when there is none. */
bool lv_domain_iothreads(LvDomain *h, GArray **ids, GPtrArray **pins);
/* Worker: I/O thread id now has set. */
void lv_domain_set_iothread_pin(LvDomain *h, guint id, const SaCpuSet *set);
/* Worker: I/O thread id no longer exists. */
void lv_domain_drop_iothread(LvDomain *h, guint id);
/* A reference to the VM's own pins (NULL when not discovered yet); *first_seen tells whether
 * they are a transient domain's first-seen pins. */
LvPins *lv_domain_own(LvDomain *h, bool *first_seen);
void lv_domain_set_own(LvDomain *h, LvPins *own, bool first_seen);

/* Sets error from libvirt's last error of this thread: the domain is gone (VIR_ERR_NO_DOMAIN,
 * VIR_ERR_OPERATION_INVALID) or the failure is transient. */
void lv_set_error(GError **error, const char *what);

/* The transient-domain state file (lv-transient.c), any thread. */
/* The pins recorded for this domain, else records seen and returns it (a new reference). */
LvPins *lv_transient_first_seen(LvShared *shared, const char *uuid, const char *name, guint n_vcpus,
                                LvPins *seen);
void lv_transient_forget(LvShared *shared, const char *uuid);
/* Drops the records of domains not in running (uuid set). */
void lv_transient_prune(LvShared *shared, GHashTable *running);

/* Worker callbacks (lv-discover.c, lv-pin.c). */
SaVmFacts *lv_discover(gpointer handle, GError **error);

G_END_DECLS
