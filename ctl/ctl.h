/* softaffctl — shared between its command files. */
#pragma once

#include <glib.h>
#include <json-c/json.h>

#include "sa-config.h"
#include "sa-control.h"

G_BEGIN_DECLS

/* Exit codes a script can rely on. */
enum {
    SA_CTL_OK = 0,
    SA_CTL_FAILED = 1,    /* the command ran and failed */
    SA_CTL_USAGE = 2,     /* wrong command line */
    SA_CTL_NO_DAEMON = 3, /* softaffd is not reachable on its socket */
};

/* The options the commands share: --config, --json, and per command --socket (status, show,
 * top) or --layout/--custom (partitions, advise). */
typedef struct {
    char *config_path;
    char *socket_path;
    char *layout;
    char *custom;
    gboolean json;
} SaCtlOptions;

void sa_ctl_options_clear(SaCtlOptions *o);

int sa_ctl_usage_error(GOptionContext *ctx, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
void sa_ctl_print_json(json_object *o);

/* advise (ctl-advise.c), once its command line is checked. */
typedef struct {
    guint vcpus;
    guint64 memory_bytes;
    const SaCpuSet *allowed; /* NULL: any CPU */
    const char *class_name;  /* its class (a [rule NAME] or flavor), for the expected demand */
    double demand;           /* expected CPUs, < 0: from the class */
    const char *socket_path; /* softaffd's socket, NULL: the configuration's */
    const char *config_path; /* NULL: the default */
    bool json;
} SaCtlAdvise;

/* Asks softaffd for its headroom history (none when it does not answer), chooses the home and
 * prints it; an SA_CTL_* status. */
int sa_ctl_advise_run(const SaTopology *topo, const SaCtlAdvise *a);

int sa_ctl_status(int argc, char **argv);
int sa_ctl_show(int argc, char **argv);
int sa_ctl_top(int argc, char **argv);
int sa_ctl_set(int argc, char **argv);

G_END_DECLS
