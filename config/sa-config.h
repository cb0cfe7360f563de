/* softaff — /etc/softaff/softaff.conf (GKeyFile) and its drop-ins, softaff.conf.d/NAME.conf.
 * Unknown groups and keys, and bad values, are errors naming the file, group, key and value. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "sa-headroom.h"
#include "sa-policy.h"
#include "sa-topology.h"

G_BEGIN_DECLS

typedef enum {
    SA_MANAGE_ALL,      /* VMs without the metadata element get the defaults */
    SA_MANAGE_EXPLICIT, /* only VMs with the metadata element are managed */
} SaManage;

/* [sensing] mode: how softaffd learns that threads wait (host/sa-sense.h). */
typedef enum {
    SA_SENSING_AUTO, /* BPF when it loads, else /proc on the tick alone */
    SA_SENSING_BPF,  /* BPF or refuse to start */
    SA_SENSING_PROC, /* never load BPF */
} SaSensingMode;

/* [actuation] mode: how softaffd gives the vCPUs their CPUs (sched/sa-sched.h). */
typedef enum {
    SA_ACTUATION_AUTO,      /* the sched_ext scheduler where the kernel offers it, else pin */
    SA_ACTUATION_SCHED_EXT, /* the scheduler or refuse to start */
    SA_ACTUATION_PIN,       /* re-pinning (affinity) only, never load the scheduler */
} SaActuationMode;

typedef enum {
    SA_BACKEND_LIBVIRT,
    SA_BACKEND_QMP,
    SA_BACKEND_BOTH,
} SaBackend;

/* [vm NAME]: settings of a QEMU process found over QMP (it has no libvirt metadata). NAME is
 * the name QEMU reports (query-name, from -name), else the QMP socket path. */
typedef struct {
    char *name;
    SaMode mode;   /* soft */
    int preferred; /* partition id, -1 = auto */
    int softness;  /* 0..100, -1 = the [policy] default */
} SaVmConfig;

/* [rule NAME]: settings for a class of VMs (an OpenStack flavor, a name pattern), for VMs that
 * have no softaff metadata of their own. Precedence: the VM's own metadata, then the first rule
 * that matches (in file order: the main file, then the drop-ins in lexical order), then
 * [policy]. A rule matches when every match_* key it has matches (shell globs, fnmatch without
 * flags); it has at least one. */
typedef struct {
    char *name;
    char *file;              /* the file that defined the group first (for messages) */
    char *match_name;        /* the domain name (QMP: the VM's name) */
    char *match_flavor;      /* the OpenStack Nova flavor: <nova:flavor name="..."> */
    char *match_title;       /* the libvirt domain <title> */
    char *match_description; /* the libvirt domain <description> */
    bool has_mode;
    SaMode mode;
    int preferred;        /* partition id, -1 = auto, -2 = not set */
    char *preferred_file; /* the file that gave preferred (a drop-in may override it), for the
                             host check; NULL when not set */
    int softness;         /* 0..100, -1 = not set */
} SaRule;

/* Keys of a group may come from several files: the main file, then each drop-in, later ones
 * overriding per key (a [vm NAME] or [rule NAME] group too: it keeps its first position). Every
 * check runs on the merged result; an error names the file that gave the value. */

/* What a rule can match a VM on (NULL: the VM has none). */
typedef struct {
    const char *name;
    const char *flavor;
    const char *title;
    const char *description;
} SaRuleSubject;

typedef struct {
    char *path;     /* the file read, NULL when only defaults */
    char **dropins; /* the drop-ins read after it (softaff.conf.d/NAME.conf), in order;
                       NULL-terminated, may be empty */
    /* [daemon] */
    guint interval_ms;        /* 500; 50..60000 */
    char *uri;                /* qemu:///system */
    char *socket;             /* /run/softaff/softaffd.sock */
    SaBackend backend;        /* libvirt */
    guint command_timeout_ms; /* 2000; 100..60000: a VM whose command takes longer is stalled */
    guint stop_timeout_ms;    /* 5000; 0..60000: the restore at shutdown waits this long at most */
    /* [partitions] */
    SaLayout layout; /* node */
    char *custom;    /* "0-15;16-31" (layout=custom), NULL otherwise */
    /* [policy] softness, manage, dwell_ms, smoothing, max_holdoff_ms */
    SaPolicyConfig policy;
    SaManage manage;             /* all */
    SaRebalanceConfig rebalance; /* rebalance=auto, rebalance_window_ms=600000,
                                    rebalance_max_moves_per_hour=2 (policies/rebalance.c) */
    /* [hook] */
    bool hook_strict; /* false */
    /* [qmp] */
    char **qmp_sockets;           /* globs, NULL-terminated, may be empty */
    bool qmp_trust_writable_dirs; /* false: refuse a socket that users other than root and its
                                     owner could replace (a directory on its way they may write) */
    /* [vm NAME] */
    GPtrArray *vms; /* SaVmConfig*, in file order */
    /* [rule NAME] */
    GPtrArray *rules; /* SaRule*, in file order */
    /* [metrics] */
    char *metrics_textfile; /* NULL = off */
    guint metrics_every;    /* ticks between writes, 1 */
    /* [memory] */
    bool memory_migrate;     /* migrate=auto (true, the default) | off: guest memory follows
                                the VM's home node */
    guint memory_rate_mib_s; /* 256; 1..65536: how fast the mover moves one VM's memory */
    /* [sensing] */
    SaSensingMode sensing_mode; /* auto */
    guint sensing_threshold_us; /* wait_threshold_us, 2000; 100..100000 */
    guint sensing_window_us;    /* window_us, 10000; 1000..1000000, >= the threshold */
    /* [actuation] */
    SaActuationMode actuation_mode; /* auto */
    /* [fleet]: the headroom model (policies/sa-headroom.h, docs/fleet.md) */
    guint fleet_window_s;        /* window_s, 3600; 600..86400 */
    double fleet_quantile;       /* quantile, 0.95; 0 < q <= 1 */
    GPtrArray *fleet_shapes;     /* shapes: SaShape*, in file order (none by default) */
    char *fleet_state_file;      /* state_file, /var/lib/softaff/headroom.json; NULL (empty) =
                                    not saved */
    guint fleet_save_interval_s; /* save_interval_s, 300; 60..86400 */
} SaConfig;

SaConfig *sa_config_new_default(void);
/* path NULL: $SOFTAFF_CONFIG, else /etc/softaff/softaff.conf; a missing default file gives the
 * defaults, a missing file that was named explicitly is an error. Then the drop-ins: the files
 * *.conf (not dotfiles) of softaff.conf.d/ beside it, in byte order of their names; a missing
 * directory is none. */
SaConfig *sa_config_load(const char *path, GError **error);
/* What only the host can tell: every [rule NAME] preferred names a partition of topo. The error
 * names the file, group, key and value, and the partitions there are. */
bool sa_config_check_host(const SaConfig *cfg, const SaTopology *topo, GError **error);
/* The effective configuration as a key file that loads back to the same settings: every key
 * with its value (of a [rule NAME] the keys it sets, of a [vm NAME] softness when set), and a
 * "# read: FILE" line per file read. Free with g_free. */
char *sa_config_to_keyfile(const SaConfig *cfg);
void sa_config_free(SaConfig *cfg);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SaConfig, sa_config_free)

/* The first [rule NAME] that matches, or NULL. */
const SaRule *sa_config_match_rule(const SaConfig *cfg, const SaRuleSubject *subject);

/* The [vm NAME] group for name, or NULL. */
const SaVmConfig *sa_config_find_vm(const SaConfig *cfg, const char *name);

const char *sa_manage_to_string(SaManage manage);
const char *sa_backend_to_string(SaBackend backend);
const char *sa_sensing_mode_to_string(SaSensingMode mode);
const char *sa_actuation_mode_to_string(SaActuationMode mode);

G_END_DECLS
