/* softaff — Prometheus metrics of softaffd, in the text exposition format (0.0.4), for
 * node_exporter's textfile collector ([metrics] textfile=).
 *
 * Families (base units, counters end in _total):
 *   softaff_build_info{version}                          1
 *   softaff_start_time_seconds                           gauge, Unix time the daemon started
 *   softaff_ticks_total                                  counter
 *   softaff_tick_cpu_seconds                             gauge, CPU time of the last tick
 *   softaff_vms{status}                                  gauge, VMs known per status
 *   softaff_partition_cpus{partition}                    gauge, online CPUs
 *   softaff_partition_busy_cpus{partition,load}          gauge, load = owners|visitors|unmanaged,
 *                                                        averaged over about 2 s
 *   softaff_partition_busy_seconds_total{partition,load} counter, CPU-seconds by load
 *   softaff_partition_home_vcpus{partition}              gauge, vCPUs homed there
 *   softaff_headroom_cpus{partition}                     gauge, CPUs − margin − owners' demand
 *                                                        at the quantile over the window
 *   softaff_headroom_quantile                            gauge, [fleet] quantile
 *   softaff_headroom_window_seconds                      gauge, [fleet] window_s
 *   softaff_headroom_window_coverage                     gauge 0-1, least over the partitions
 *   softaff_partition_memory_available_bytes{partition}  gauge, memory a new VM there can get
 *   softaff_fit_vms{shape,vcpus,memory_mib}              gauge, VMs of a [fleet] shape that fit
 *   softaff_headroom_demand_per_vcpu{class}              gauge, mean per vCPU of a class seen
 *   softaff_vm_info{domain,uuid,status,mode[,rule]}      1 (rule: the [rule] that applied)
 *   softaff_vm_vcpus{domain,uuid}                        gauge
 *   softaff_vm_home_partition{domain,uuid}               gauge (managed VMs with a home only)
 *   softaff_vm_bursting{domain,uuid}                     gauge 0/1 (managed VMs with a home only)
 *   softaff_vm_stalled{domain,uuid}                      gauge 0/1 (managed VMs only)
 *   softaff_vm_state_seconds_total{domain,uuid,state}    counter, state = home|burst
 *   softaff_vm_bursts_total{domain,uuid}                 counter
 *   softaff_vm_retreats_total{domain,uuid}               counter
 *   softaff_vm_affinity_changes_total{domain,uuid}       counter
 *   softaff_vm_vcpu_run_seconds_total{domain,uuid}       counter
 *   softaff_vm_vcpu_run_home_seconds_total{domain,uuid}  counter
 *   softaff_vm_vcpu_run_delay_seconds_total{domain,uuid} counter
 *   softaff_vm_memory_home_ratio{domain,uuid}            gauge 0-1, resident memory on the
 *                                                        home node (managed VMs with a home,
 *                                                        once read)
 *   softaff_vm_memory_resident_bytes{domain,uuid}        gauge (the same VMs)
 *   softaff_vm_memory_move_bytes_total{domain,uuid}      counter, moved to the home node
 *   softaff_vm_memory_move_pending_bytes{domain,uuid}    gauge, left to move (0: no move)
 *   softaff_vm_sched_ext_run_seconds_total{domain,uuid,partition} counter, run time in the
 *                                                        sched_ext scheduler (VMs it had)
 *   softaff_vm_sched_ext_wait_seconds_total{domain,uuid} counter (the same VMs)
 *   softaff_vm_sched_ext_visits_total{domain,uuid}       counter, arrivals away from home
 *   softaff_vm_sched_ext_preempts_total{domain,uuid}     counter, visitors kicked off home
 *   softaff_vm_sched_ext_preempted_total{domain,uuid}    counter, kicked off as a visitor
 * The counters never go back while softaffd runs (a reload keeps them). */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "core-private.h"

G_BEGIN_DECLS

/* The whole exposition, newline-terminated; VMs sorted by name, then uuid. */
char *sa_metrics_format(const SaCore *d);

/* Writes sa_metrics_format(d) to path atomically: a hidden temporary file in the same
 * directory (".NAME.XXXXXX", which the textfile collector ignores), fsync, mode 0644, rename
 * over path, fsync of the directory. Readers see the old file or the new one, never a part.
 * Errors name path. */
bool sa_metrics_write(const SaCore *d, const char *path, GError **error);

/* Appends value to out escaped as a Prometheus label value (\\, \", \n); invalid UTF-8 is
 * replaced. Exposed for the tests. */
void sa_metrics_append_label_value(GString *out, const char *value);

G_END_DECLS
