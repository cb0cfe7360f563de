/* softaff tests — a fake host: a sysfs tree (nodes, CPUs, distances, memory) and a /proc
 * (stat, and QEMU-like processes with "CPU n/KVM" threads) in a temporary directory, which
 * SOFTAFF_SYSFS_ROOT and SOFTAFF_PROC_ROOT point at. The real core reads it as it reads a host. */
#pragma once

#include <glib.h>
#include <sys/types.h>

G_BEGIN_DECLS

typedef struct FakeHost FakeHost;

/* n_nodes nodes of cpus_per_node CPUs each, under parent (NULL: /dev/shm, else the temp dir).
 * Sets SOFTAFF_SYSFS_ROOT and SOFTAFF_PROC_ROOT. Aborts on I/O errors (a test fixture). */
FakeHost *fake_host_new(const char *parent, guint n_nodes, guint cpus_per_node);
/* Removes the tree unless keep. */
void fake_host_free(FakeHost *h, gboolean keep);
const char *fake_host_root(const FakeHost *h);
guint fake_host_n_cpus(const FakeHost *h);

/* /proc/stat: adds dt_ns of time to a CPU, busy for the given fraction; then write it. */
void fake_host_account_cpu(FakeHost *h, guint cpu, double busy, double dt_ns);
void fake_host_write_stat(FakeHost *h);

/* A process with a main thread (tid pid) and n_vcpus threads named "CPU v/KVM" (tid pid+1+v). */
void fake_host_add_process(FakeHost *h, pid_t pid, guint n_vcpus);
/* The same with the vCPU threads' tids given (e.g. real threads of this process, which the BPF
 * sensor sees run and wait); their files are under /proc/PID/task/TID as for the others. */
void fake_host_add_process_tids(FakeHost *h, pid_t pid, guint n_vcpus, const pid_t *tids);
/* Rewrites one vCPU thread's counters: cumulative run and delay (ns), the CPU it last ran on. */
void fake_host_set_vcpu(FakeHost *h, pid_t pid, guint vcpu, double run_ns, double delay_ns,
                        int cpu);
/* The state letter of the process in /proc/PID/stat ('S', 'T', ...). */
void fake_host_set_state(FakeHost *h, pid_t pid, char state);
void fake_host_remove_process(FakeHost *h, pid_t pid);

G_END_DECLS
