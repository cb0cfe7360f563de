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
    gint refs;      /* atomic */
    SaCore *core;   /* immutable; used on the main thread only (the core calls back there) */
    gint host_cpus; /* atomic: CPUs in libvirt's cpumaps (virNodeGetCPUMap at connect) */
    char *uri;      /* immutable */
} LvShared;

LvShared *lv_shared_new(SaCore *core, const char *uri);
LvShared *lv_shared_ref(LvShared *shared);
void lv_shared_unref(LvShared *shared);
/* Bytes of a cpumap for one thread. */
gsize lv_shared_maplen(LvShared *shared);
void lv_shared_set_host_cpus(LvShared *shared, int host_cpus);

/* softaff's pin writes are told from the user's by what softaff sent and when, never by value
 * alone: each write leaves a record (the tunable field, the set sent, when it was sent and when
 * the call returned) that the first tunable event of that field with that set consumes. A
 * record whose event has not come LV_WRITE_WINDOW_US after the call returned is dropped (the
 * event was lost with a connection, or the call failed and sent none): a user's pin equal to
 * softaff's, arriving after softaff's event was matched or after that window, is the user's. */
#define LV_WRITE_WINDOW_US (10 * G_USEC_PER_SEC)

typedef struct {
    guint64 id;
    char *field;    /* "cputune.vcpupin3" ... */
    SaCpuSet *set;  /* what softaff sent */
    gint64 sent_at; /* monotonic, µs */
    gint64 done_at; /* monotonic, µs; 0 while the call has not returned */
} LvWrite;

/* One running domain: the handle the core holds.
 *
 * The VM's own settings (own) are what softaff narrows and gives back. They come from softaffd's
 * record in the live metadata (docs/metadata.md) when there is one, else from the live XML the
 * first time the daemon sees this QEMU process; a user's live pin (a tunable event that is none
 * of softaff's writes) changes them. They are recorded in the live metadata before softaff pins
 * the VM first, so a restarted daemon, a save image or a migration stream carry them; the record
 * is dropped again when softaff gives the threads back. */
typedef struct {
    gint refs;        /* atomic */
    char *uuid;       /* immutable */
    char *name;       /* immutable: for the log */
    LvShared *shared; /* immutable */

    GMutex lock;              /* guards everything below */
    virDomainPtr dom;         /* referenced; of the current connection once it reconnected */
    pid_t pid;                /* the QEMU process the state below is about (0: not yet read) */
    GPtrArray *writes;        /* LvWrite*: softaff's writes whose events have not come, oldest
                                 first */
    guint64 next_write;       /* the id of the next LvWrite */
    GHashTable *last_sent;    /* field -> SaCpuSet*: the last set softaff sent it (this
                                 process) */
    GPtrArray *early_pins;    /* LvWrite* (field, set): the user's pins seen before own was
                                 known, for the discover that makes it */
    GArray *iothread_ids;     /* guint: the I/O threads, as the last discover found them */
    GPtrArray *iothread_pins; /* SaCpuSet* per entry of iothread_ids: its pinning as known
                                 (live XML, then softaff's writes), NULL: unknown */
    SaOwnPins *own;           /* the VM's own settings, NULL until discovered */
    guint own_generation;     /* bumped whenever own changes */
    guint user_pins;          /* the user's live pins heard (SaVmFacts.user_pins) */
    bool recorded;            /* own is in the live metadata as it is now */
    bool has_record;          /* the live metadata holds a record (softaff narrows the VM) */
    bool unheard;             /* events may have been missed (a new connection): the next
                                 discover looks for the user's live pins in the live XML */
    /* The live softaff element as last read, to write it back with softaffd's child changed. */
    bool element_ok;  /* there is none, or it is valid (an invalid one is never rewritten) */
    bool has_element; /* there is one */
    guint user_attrs; /* SaMetadataUserAttrs of the element */
    SaMetadata user;  /* its user attributes */
    bool created;     /* softaffd created it */
    int assigned;     /* the home recorded, -1 none */
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

/* The tunable field of a thread: "cputune.vcpupin3", "cputune.emulatorpin",
 * "cputune.iothreadpin1" (what libvirt names in its tunable events). */
char *lv_field_vcpu(guint vcpu);
#define LV_FIELD_EMULATOR VIR_DOMAIN_TUNABLE_CPU_EMULATORPIN
char *lv_field_iothread(guint id);
/* Worker: softaff is about to give the thread of field the set (call it before the libvirt
 * call: its event may come before the call returns). Returns the write's id. */
guint64 lv_domain_write_sent(LvDomain *h, const char *field, const SaCpuSet *set);
/* Worker: the call of write id returned (ok or not: a failed call may still have pinned). */
void lv_domain_write_done(LvDomain *h, guint64 id);
/* Main thread: a tunable event. A pin that matches none of softaff's writes (lv_domain_write_sent)
 * is the user's: it becomes the thread's own setting. True when the facts should be read again
 * (a user pin, an I/O thread softaff did not know). */
bool lv_domain_tunables(LvDomain *h, const virTypedParameter *params, int n_params);
/* lv_domain_tunables at monotonic time now (µs): for tests. */
bool lv_domain_tunables_at(LvDomain *h, const virTypedParameter *params, int n_params, gint64 now);
/* softaff's writes still waiting for their event (for tests). */
guint lv_domain_pending_writes(LvDomain *h);

/* Under h->lock, own known: the user pinned the thread of field to set; it becomes the thread's
 * own setting (to be recorded again). False when field is no thread's pin. */
bool lv_domain_user_pin_locked(LvDomain *h, const char *field, const SaCpuSet *set);
/* Main thread: the backend connected anew: the events of softaff's writes that returned are
 * lost, and the user may have pinned threads meanwhile, which the next discover finds in the
 * live XML. */
void lv_domain_mark_unheard(LvDomain *h);
/* Worker: takes in the live XML of QEMU process pid (another process than before starts the
 * state over): the I/O threads and their pins, the softaff element, and the VM's own settings
 * (kept when known, else the record, else the live XML's; with the user's pins seen before it
 * was known on top). Returns a copy of own. */
SaOwnPins *lv_domain_adopt(LvDomain *h, pid_t pid, const SaDomainXml *live);
/* A copy of the VM's own settings, NULL when not discovered yet. */
SaOwnPins *lv_domain_own(LvDomain *h);
/* The softaff element to write (for virDomainSetMetadata): the user's attributes as read, and
 * softaffd's child with assigned and, when with_own, the record. *remove: write nothing but
 * remove the element (softaffd created it and nothing is left in it). NULL (and false) before
 * the first discover, and when the live element is invalid: it is the user's to fix, never
 * rewritten. *generation: own's. */
char *lv_domain_element(LvDomain *h, bool with_own, bool *remove, guint *generation);
/* Worker: the element of lv_domain_element(with_own, removed, generation) was written. */
void lv_domain_element_written(LvDomain *h, bool with_own, bool removed, guint generation);
/* softaffd's record is in the live metadata: softaff's pins may be in place. */
bool lv_domain_has_record(LvDomain *h);
guint lv_domain_user_pins(LvDomain *h);
/* A record is in the live metadata that no longer says what the daemon knows of own (a user's
 * live pin since): it must be written again at once, not at softaff's next pin. */
bool lv_domain_record_stale(LvDomain *h);
/* Worker (lv-pin.c): writes the softaff element with the record of own (live). */
bool lv_domain_write_record(LvDomain *h, GError **error);
/* Worker: the home softaff chose, for the next element written. */
void lv_domain_set_assigned(LvDomain *h, int assigned);
/* Under h->lock (lv-own.c): the I/O threads of the live XML and their pins become the known
 * ones. */
void lv_domain_learn_iothreads_locked(LvDomain *h, const SaDomainXml *live);
/* Copies of the known I/O threads and pins; false when there is none. */
bool lv_domain_iothreads(LvDomain *h, GArray **ids, GPtrArray **pins);
/* Worker: I/O thread id now has set. */
void lv_domain_set_iothread_pin(LvDomain *h, guint id, const SaCpuSet *set);
/* Worker: I/O thread id no longer exists. */
void lv_domain_drop_iothread(LvDomain *h, guint id);

/* Sets error from libvirt's last error of this thread: the domain is gone (VIR_ERR_NO_DOMAIN
 * only: libvirt reports cgroup write failures and more as VIR_ERR_OPERATION_INVALID) or the
 * failure is transient. */
void lv_set_error(GError **error, const char *what);

/* Worker: the domain XML (flags of virDomainGetXMLDesc), parsed. */
SaDomainXml *lv_read_xml(virDomainPtr dom, unsigned int flags, GError **error);
/* Worker: whether the backend connected anew since the last discover (lv_domain_mark_unheard). */
bool lv_domain_is_unheard(LvDomain *h);
/* Worker: the user's pins made while no event was heard, from the live XML, into own (what the
 * next discover would do): before a restore that may come first. */
void lv_domain_catch_up(LvDomain *h, const SaDomainXml *live);

/* Worker callbacks (lv-discover.c, lv-pin.c). */
SaVmFacts *lv_discover(gpointer handle, GError **error);

G_END_DECLS
