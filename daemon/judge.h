/* softaffd — whether the core manages a VM, from the facts a backend reported. Pure: no I/O, no
 * clock; one rule for every backend. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "core-private.h"

G_BEGIN_DECLS

typedef struct {
    SaVmStatus status;
    char *reason;               /* why unmanaged / invalid, or how it is managed */
    SaMetadata settings;        /* the VM's own settings, else the defaults */
    SaCpuSet *allowed;          /* what its vCPUs may use together */
    GPtrArray *vcpu_allowed;    /* SaCpuSet* per vCPU (user pins), NULL when none is pinned */
    SaCpuSet *emulator_allowed; /* what its emulator and I/O threads may use */
} SaJudgement;

/* Judges facts against the configuration and the online CPUs. settings_name says what the
 * settings are called in messages ("softaff metadata"). */
void sa_judge_vm(const SaVmFacts *facts, const SaConfig *cfg, const SaCpuSet *online,
                 const char *settings_name, SaJudgement *out);
void sa_judgement_clear(SaJudgement *j);

/* The predicates, each usable alone (tests call them from tables). */
/* The user pinned at least one vCPU. */
bool sa_facts_user_pinned(const SaVmFacts *facts);
/* The VM's allowed set: online ∩ <vcpu cpuset> ∩ (union of the vCPU pins, when any). */
SaCpuSet *sa_facts_allowed(const SaVmFacts *facts, const SaCpuSet *online);
/* Why the VM is left alone, or NULL when it may be managed (settings valid). */
char *sa_facts_unmanaged_reason(const SaVmFacts *facts, const SaConfig *cfg,
                                const SaCpuSet *allowed, const char *settings_name);

G_END_DECLS
