"""softaff for OpenStack Nova: a scheduler weigher and filter fed by softaffd's headroom metrics.

softaffd on each compute host writes, per partition, the CPUs its owners leave free at the
configured quantile over a window (softaff_headroom_cpus) and the memory a new VM homed there can
get; node_exporter's textfile collector serves them and Prometheus scrapes them. This package
reads them back from Prometheus's HTTP API, one query for all hosts per scheduling request:

- softaff_nova.weigher.SoftaffWeigher ranks hosts by how well the flavor fits a partition
  (pack: the fullest partition where it fits first; spread: the emptiest);
- softaff_nova.filter.SoftaffFitFilter refuses a host none of whose partitions fits the flavor.

Configuration: the [softaff] group of nova.conf (softaff_nova.conf). docs/operators.md says how
to deploy it.
"""
