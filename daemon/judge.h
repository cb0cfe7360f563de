/* softaffd — whether the core manages a VM, from the facts a backend reported. Pure: no I/O, no
 * clock; one rule for every backend. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "core-private.h"

G_BEGIN_DECLS

typedef struct {
    SaVmStatus status;
    char *reason;                /* why unmanaged / invalid, or how it is managed */
    char *rule;                  /* the [rule NAME] that applies (no own settings), else NULL */
    SaMetadata settings;         /* the VM's own settings, else its rule's, else the defaults */
    SaCpuSet *allowed;           /* what its vCPUs may use together: the union of their own sets */
    GPtrArray *vcpu_allowed;     /* SaCpuSet* per vCPU: its own set, pointing into own_sets */
    GPtrArray *own_sets;         /* the distinct sets of vcpu_allowed, owned (a set is 1 KiB) */
    SaCpuSet *emulator_allowed;  /* the emulator's own set */
    GPtrArray *iothread_allowed; /* SaCpuSet* per I/O thread of the facts; NULL: none */
} SaJudgement;

/* Judges facts against the configuration and the online CPUs. settings_name says what the
 * settings are called in messages ("softaff metadata"). */
void sa_judge_vm(const SaVmFacts *facts, const SaConfig *cfg, const SaCpuSet *online,
                 const char *settings_name, SaJudgement *out);
void sa_judgement_clear(SaJudgement *j);

/* The predicates, each usable alone (tests call them from tables). */
/* The user pinned at least one vCPU. */
bool sa_facts_user_pinned(const SaVmFacts *facts);
/* vCPU i's own set: its pin, else <vcpu cpuset> ∩ online, else every online CPU. */
SaCpuSet *sa_facts_vcpu_own(const SaVmFacts *facts, guint i, const SaCpuSet *online);
/* The emulator's own set, and an unpinned I/O thread's (libvirt's default for both): <vcpu
 * cpuset> ∩ online, else every online CPU. */
SaCpuSet *sa_facts_default_own(const SaVmFacts *facts, const SaCpuSet *online);
/* What one thread gets: the policy's set within the thread's own set; the own set alone when
 * they share no CPU (softaff only ever narrows what the VM allows). */
SaCpuSet *sa_narrow(const SaCpuSet *policy, const SaCpuSet *own);
/* The [rule NAME] that applies: the first that matches a VM without settings of its own (nor
 * invalid ones), else NULL. */
const SaRule *sa_facts_rule(const SaVmFacts *facts, const SaConfig *cfg);
/* The settings a rule gives: what it sets, over the defaults. */
void sa_rule_settings(const SaRule *rule, SaMetadata *md);
/* Why the VM is left alone, or NULL when it may be managed (settings valid). rule: the one that
 * applies (sa_facts_rule), or NULL. */
char *sa_facts_unmanaged_reason(const SaVmFacts *facts, const SaConfig *cfg, const SaRule *rule,
                                const SaCpuSet *allowed, const char *settings_name);

G_END_DECLS
