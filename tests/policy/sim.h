/* softaff tests — hand-built topologies and a tiny scheduler simulator that feeds the policy.
 *
 * The simulator plays the kernel for one interval: every vCPU thread has a demand (0..1 CPU);
 * it runs on a CPU of the set the policy gave its VM, sticking to its CPU like the kernel
 * does, waking on the least loaded allowed CPU, and moving only when that strictly evens out
 * the load. A CPU whose demand (threads + unmanaged load) exceeds 1 shares its time in
 * proportion to demand; what a thread does not get is its run delay. */
#pragma once

#include <glib.h>
#include <stdio.h>

#include "sa-policy.h"

G_BEGIN_DECLS

/* n partitions (ids 0..n-1, one NUMA node each, 16 GiB free each); cpulists[i] are the online
 * CPUs of partition i ("" = none online). distance: n × n node distances, NULL = 10 local and
 * 20 remote. */
SaTopology *sim_topology_new(guint n, const char *const *cpulists, const guint *distance);
/* n partitions of cpus_per_partition consecutive CPUs each. */
SaTopology *sim_topology_uniform(guint n, guint cpus_per_partition, const guint *distance);
/* Free with sa_topology_free() (g_autoptr(SaTopology)). */

typedef struct {
    SaPolicyVm vm;
    SaCpuSet *allowed; /* NULL: every CPU */
    guint n_vcpus;
    double *load; /* demand of each vCPU for the next interval, set by the test */
    double *prev_load;
    int *cpu; /* simulated CPU of each vCPU thread, -1 never ran */
    SaVcpuSample *samples;
    guint changes;       /* ticks with vm.changed */
    int last_change;     /* tick of the last change, -1 none */
    guint bursts;        /* Σ vm.bursts over the ticks run: partitions added */
    guint retreats;      /* Σ vm.retreats over the ticks run: owner-forced retreats */
    char *logged_reason; /* reason in the decision log's last line of this VM */
} SimVm;

typedef struct {
    SaTopology *topo; /* owned */
    SaPolicyConfig cfg;
    guint n_cpus;
    double *unmanaged; /* per CPU: load softaff does not manage, set by the test */
    double *busy;      /* per CPU: busy fraction over the last interval */
    GPtrArray *vms;    /* SimVm*, in policy order */
    SaPartitionUsage *usage;
    guint interval_ms;
    gint64 now_ms;
    int tick;     /* ticks run so far; the first tick has no interval */
    guint log_id; /* number of this Sim within its test case, for the decision log */
} Sim;

Sim *sim_new(SaTopology *topo, guint interval_ms);
void sim_free(Sim *sim);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(Sim, sim_free)

/* allowed: cpulist or NULL for every CPU. preferred: partition id or -1 (auto). */
SimVm *sim_add_vm(Sim *sim, const char *name, guint n_vcpus, int preferred, const char *allowed);
void sim_vm_set_load(SimVm *vm, double per_vcpu);
/* Simulates one interval (from the second tick on), then runs one policy tick. */
void sim_step(Sim *sim);
void sim_run(Sim *sim, guint ticks);

/* The decision log: from now on every sim_step writes, per VM, one line with the Sim's number
 * within its test case, the tick, the VM, whether it changed, its state, home, sets, this
 * tick's bursts and retreats and its reason ("=" when the same as in its previous line), and
 * one line with the partitions' usage. Each test case starts with a line "== <its path>".
 * NULL stops logging. */
void sim_log_decisions(FILE *out);

/* Formatted sets, for assertions (static buffers rotate; valid until 8 more calls). */
const char *sim_vcpus(const SimVm *vm);
const char *sim_emulator(const SimVm *vm);
/* Σ over vCPUs of last interval's run and delay, in CPUs. */
double sim_vm_run(const Sim *sim, const SimVm *vm);
double sim_vm_wait(const Sim *sim, const SimVm *vm);
/* Run of this VM's vCPUs on CPUs of cpulist over the last interval, in CPUs. */
double sim_vm_run_on(const Sim *sim, const SimVm *vm, const char *cpulist);

G_END_DECLS
