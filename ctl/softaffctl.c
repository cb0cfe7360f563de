/* softaffctl — the operator's command line: partitions and advise (no daemon needed). */
#define G_LOG_DOMAIN "softaffctl"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sa-config-defs.h"
#include "sa-config.h"
#include "sa-error.h"
#include "sa-policy.h"
#include "sa-sampler.h"
#include "sa-topology.h"

#include "ctl.h"

#define EXIT_OK SA_CTL_OK
#define EXIT_FAILED SA_CTL_FAILED
#define EXIT_USAGE SA_CTL_USAGE

void sa_ctl_options_clear(SaCtlOptions *o)
{
    g_free(o->config_path);
    g_free(o->socket_path);
    g_free(o->layout);
    g_free(o->custom);
}

static GOptionEntry *common_entries(SaCtlOptions *o)
{
    static GOptionEntry entries[5];
    GOptionEntry e[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &o->config_path,
         "Configuration file (default $SOFTAFF_CONFIG or " SA_DEFAULT_CONFIG ")", "FILE"},
        {"layout", 'l', 0, G_OPTION_ARG_STRING, &o->layout,
         "Partition layout: node, llc or custom (default: from the configuration)", "LAYOUT"},
        {"custom", 0, 0, G_OPTION_ARG_STRING, &o->custom,
         "Custom partitions for --layout custom, e.g. '0-15;16-31'", "CPULISTS"},
        {"json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "Print JSON", NULL},
        G_OPTION_ENTRY_NULL,
    };
    memcpy(entries, e, sizeof(e));
    return entries;
}

#define usage_error sa_ctl_usage_error

void sa_ctl_print_json(json_object *o)
{
    printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
}

int sa_ctl_usage_error(GOptionContext *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "softaffctl: %s\n", msg);
    if (ctx) {
        g_autofree char *help = g_option_context_get_help(ctx, TRUE, NULL);
        fprintf(stderr, "%s", help);
    }
    return EXIT_USAGE;
}

/* Loads the configuration and the topology, command-line layout overriding the file. */
static SaTopology *load_topology(const SaCtlOptions *o, GOptionContext *ctx, int *exit_code)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(o->config_path, &error);
    if (!cfg) {
        fprintf(stderr, "softaffctl: %s\n", error->message);
        *exit_code = EXIT_FAILED;
        return NULL;
    }
    SaLayout layout = cfg->layout;
    const char *custom = cfg->custom;
    if (o->layout && !sa_layout_from_string(o->layout, &layout, &error)) {
        *exit_code = usage_error(ctx, "--layout: %s", error->message);
        return NULL;
    }
    if (o->custom) {
        if (layout != SA_LAYOUT_CUSTOM) {
            *exit_code = usage_error(ctx, "--custom '%s' needs --layout custom", o->custom);
            return NULL;
        }
        custom = o->custom;
    }
    if (layout == SA_LAYOUT_CUSTOM && !custom) {
        *exit_code = usage_error(ctx, "--layout custom needs --custom CPULISTS (or [partitions] "
                                      "custom= in the configuration)");
        return NULL;
    }
    SaTopology *topo = sa_topology_load(layout, layout == SA_LAYOUT_CUSTOM ? custom : NULL, &error);
    if (!topo) {
        fprintf(stderr, "softaffctl: %s\n", error->message);
        *exit_code = EXIT_FAILED;
        return NULL;
    }
    return topo;
}

/* Busy fraction per partition, sampled over interval_ms. */
static double *sample_partition_busy(const SaTopology *topo, guint interval_ms, GError **error)
{
    g_autoptr(SaStatSampler) sampler = sa_stat_sampler_new(error);
    if (!sampler)
        return NULL;
    g_autoptr(GArray) loads = g_array_new(FALSE, TRUE, sizeof(SaCpuLoad));
    if (!sa_stat_sampler_sample(sampler, loads, error))
        return NULL;
    g_usleep((gulong)interval_ms * 1000);
    if (!sa_stat_sampler_sample(sampler, loads, error))
        return NULL;
    double *busy = g_new0(double, topo->partitions->len);
    for (guint i = 0; i < loads->len; i++) {
        const SaCpuLoad *l = &g_array_index(loads, SaCpuLoad, i);
        int p = sa_topology_partition_of_cpu(topo, (guint)l->cpu);
        if (p >= 0)
            busy[p] += l->busy;
    }
    return busy;
}

static const char *node_label(const SaTopology *topo, const SaPartition *p, char *buf, size_t n)
{
    if (p->node < 0)
        return "-";
    const SaNode *node = g_ptr_array_index(topo->nodes, p->node);
    snprintf(buf, n, "%u", node->id);
    return buf;
}

/* The partition's NUMA node id, or JSON null. */
static json_object *json_node(const SaTopology *topo, const SaPartition *p)
{
    if (p->node < 0)
        return NULL;
    const SaNode *node = g_ptr_array_index(topo->nodes, p->node);
    return json_object_new_int((int)node->id);
}

static void print_json(json_object *root)
{
    printf("%s\n", json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(root);
}

/* Adds the common options and extra to ctx, parses the command line of command (which takes no
 * argument); SA_CTL_OK or the usage error's status. */
static int parse_host_command(GOptionContext *ctx, int *argc, char ***argv, SaCtlOptions *o,
                              const GOptionEntry *extra, const char *command)
{
    g_autoptr(GError) error = NULL;

    g_option_context_add_main_entries(ctx, common_entries(o), NULL);
    g_option_context_add_main_entries(ctx, extra, NULL);
    if (!g_option_context_parse(ctx, argc, argv, &error))
        return usage_error(ctx, "%s", error->message);
    if (*argc > 1)
        return usage_error(ctx, "%s: unexpected argument '%s'", command, (*argv)[1]);
    return EXIT_OK;
}

/* Parses the command line of partitions; SA_CTL_OK or the usage error's status. */
static int parse_partitions_command(GOptionContext *ctx, int *argc, char ***argv, SaCtlOptions *o,
                                    gint *interval_ms)
{
    GOptionEntry extra[] = {
        {"interval-ms", 'i', 0, G_OPTION_ARG_INT, interval_ms,
         "Utilization sampling interval (default 250)", "MS"},
        G_OPTION_ENTRY_NULL,
    };
    int rc = parse_host_command(ctx, argc, argv, o, extra, "partitions");

    if (rc == EXIT_OK && (*interval_ms < 10 || *interval_ms > 60000))
        rc = usage_error(ctx, "--interval-ms %d: allowed 10-60000", *interval_ms);
    return rc;
}

static json_object *partition_json(const SaTopology *topo, guint i, double busy)
{
    const SaPartition *p = g_ptr_array_index(topo->partitions, i);
    json_object *jp = json_object_new_object();
    g_autofree char *cpus = sa_cpuset_format(p->cpus);
    guint ncpu = sa_cpuset_count(p->cpus);

    json_object_object_add(jp, "id", json_object_new_int((int)p->id));
    json_object_object_add(jp, "cpus", json_object_new_string(cpus));
    json_object_object_add(jp, "cpu_count", json_object_new_int((int)ncpu));
    json_object_object_add(jp, "node", json_node(topo, p));
    if (p->node >= 0) {
        const SaNode *node = g_ptr_array_index(topo->nodes, p->node);
        json_object_object_add(jp, "memory_total_bytes", json_object_new_uint64(node->mem_total));
        json_object_object_add(jp, "memory_free_bytes", json_object_new_uint64(node->mem_free));
    }
    json_object_object_add(jp, "utilization", json_object_new_double(ncpu ? busy / ncpu : 0.0));
    json_object *dist = json_object_new_array();
    for (guint j = 0; j < topo->partitions->len; j++)
        json_object_array_add(dist,
                              json_object_new_int((int)sa_topology_partition_distance(topo, i, j)));
    json_object_object_add(jp, "distances", dist);
    return jp;
}

static void print_partitions_json(const SaTopology *topo, const double *busy)
{
    json_object *root = json_object_new_object();
    g_autofree char *online = sa_cpuset_format(topo->online);
    g_autofree char *unplaced = sa_cpuset_format(topo->unplaced);

    json_object_object_add(root, "layout",
                           json_object_new_string(sa_layout_to_string(topo->layout)));
    json_object_object_add(root, "online", json_object_new_string(online));
    json_object_object_add(root, "unplaced", json_object_new_string(unplaced));
    json_object *parts = json_object_new_array();
    for (guint i = 0; i < topo->partitions->len; i++)
        json_object_array_add(parts, partition_json(topo, i, busy[i]));
    json_object_object_add(root, "partitions", parts);
    print_json(root);
}

static void print_partition_row(const SaTopology *topo, const SaPartition *p, double busy)
{
    g_autofree char *cpus = sa_cpuset_format(p->cpus);
    guint ncpu = sa_cpuset_count(p->cpus);
    char nb[16], util[16], mem[32];

    snprintf(util, sizeof(util), "%.0f%%", ncpu ? 100.0 * busy / ncpu : 0.0);
    if (p->node >= 0) {
        const SaNode *node = g_ptr_array_index(topo->nodes, p->node);
        snprintf(mem, sizeof(mem), "%" G_GUINT64_FORMAT " MiB", node->mem_free >> 20);
    } else {
        snprintf(mem, sizeof(mem), "-");
    }
    printf("%-9u %-5s %-6u %-10s %-12s %s\n", p->id, node_label(topo, p, nb, sizeof(nb)), ncpu,
           util, mem, *cpus ? cpus : "(none online)");
}

static guint partition_id(const SaTopology *topo, guint i)
{
    return ((const SaPartition *)g_ptr_array_index(topo->partitions, i))->id;
}

/* The distance matrix, when there is more than one partition. */
static void print_distances(const SaTopology *topo)
{
    guint np = topo->partitions->len;

    if (np <= 1)
        return;
    printf("\ndistances\n%-9s", "");
    for (guint j = 0; j < np; j++)
        printf(" %5u", partition_id(topo, j));
    printf("\n");
    for (guint i = 0; i < np; i++) {
        printf("%-9u", partition_id(topo, i));
        for (guint j = 0; j < np; j++)
            printf(" %5u", sa_topology_partition_distance(topo, i, j));
        printf("\n");
    }
}

static void print_partitions_text(const SaTopology *topo, const double *busy)
{
    g_autofree char *online = sa_cpuset_format(topo->online);

    printf("layout %s, %u partitions, online CPUs %s\n", sa_layout_to_string(topo->layout),
           topo->partitions->len, online);
    if (!sa_cpuset_is_empty(topo->unplaced)) {
        g_autofree char *unplaced = sa_cpuset_format(topo->unplaced);
        printf("CPUs in no partition: %s\n", unplaced);
    }
    printf("%-9s %-5s %-6s %-10s %-12s %s\n", "PARTITION", "NODE", "CPUS", "UTIL", "MEM FREE",
           "CPU LIST");
    for (guint i = 0; i < topo->partitions->len; i++)
        print_partition_row(topo, g_ptr_array_index(topo->partitions, i), busy[i]);
    print_distances(topo);
}

static int cmd_partitions(int argc, char **argv)
{
    SaCtlOptions o = {0};
    gint interval_ms = 250;
    g_autoptr(GOptionContext) ctx = g_option_context_new("- show the CPU partitions of this host");
    g_autoptr(SaTopology) topo = NULL;
    g_autoptr(GError) error = NULL;
    g_autofree double *busy = NULL;

    int rc = parse_partitions_command(ctx, &argc, &argv, &o, &interval_ms);
    if (rc == EXIT_OK)
        topo = load_topology(&o, ctx, &rc);
    if (topo)
        busy = sample_partition_busy(topo, (guint)interval_ms, &error);
    if (topo && !busy) {
        fprintf(stderr, "softaffctl: %s\n", error->message);
        rc = EXIT_FAILED;
    } else if (busy && o.json) {
        print_partitions_json(topo, busy);
    } else if (busy) {
        print_partitions_text(topo, busy);
    }
    sa_ctl_options_clear(&o);
    return rc;
}

typedef struct {
    gint vcpus;
    gint64 memory_mib;
    char *allowed_text;
    SaCpuSet *allowed;
    char *class_name;
    gdouble demand;
    char *socket_path;
} AdviseOptions;

static void advise_options_clear(AdviseOptions *a)
{
    g_free(a->allowed_text);
    sa_cpuset_free(a->allowed);
    g_free(a->class_name);
    g_free(a->socket_path);
}

/* Parses the command line of advise; SA_CTL_OK or the usage error's status. */
static int parse_advise_command(GOptionContext *ctx, int *argc, char ***argv, SaCtlOptions *o,
                                AdviseOptions *a)
{
    GOptionEntry extra[] = {
        {"vcpus", 'n', 0, G_OPTION_ARG_INT, &a->vcpus, "vCPUs of the VM (required)", "N"},
        {"memory", 'm', 0, G_OPTION_ARG_INT64, &a->memory_mib, "Guest memory in MiB", "MIB"},
        {"allowed", 'a', 0, G_OPTION_ARG_STRING, &a->allowed_text,
         "CPUs the VM may use (its <vcpu cpuset>), default all", "CPULIST"},
        {"class", 0, 0, G_OPTION_ARG_STRING, &a->class_name,
         "Its class (the [rule NAME] or flavor that will match it): the expected demand is the "
         "mean per vCPU softaffd saw for it, else 1.0 per vCPU",
         "NAME"},
        {"demand", 0, 0, G_OPTION_ARG_DOUBLE, &a->demand,
         "Expected demand in CPUs (instead of the class's)", "CPUS"},
        {"socket", 's', 0, G_OPTION_ARG_FILENAME, &a->socket_path,
         "softaffd's control socket, for its headroom history (default: from the configuration)",
         "PATH"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GError) error = NULL;
    a->demand = -1;
    int rc = parse_host_command(ctx, argc, argv, o, extra, "advise");

    if (rc != EXIT_OK)
        return rc;
    if (a->vcpus <= 0 || a->vcpus > SA_CPUSET_MAX)
        return usage_error(ctx, "--vcpus %d: a VM needs 1-%d vCPUs", a->vcpus, SA_CPUSET_MAX);
    if (a->memory_mib < 0 || a->memory_mib > (G_GINT64_CONSTANT(1) << 40))
        return usage_error(ctx, "--memory %" G_GINT64_FORMAT ": not a size in MiB", a->memory_mib);
    if (a->demand != -1 && !(a->demand >= 0 && a->demand <= a->vcpus))
        return usage_error(ctx, "--demand %g: CPUs from 0 to the VM's vCPUs (%d)", a->demand,
                           a->vcpus);
    if (a->allowed_text && !(a->allowed = sa_cpuset_parse(a->allowed_text, &error)))
        return usage_error(ctx, "--allowed: %s", error->message);
    return EXIT_OK;
}

static int cmd_advise(int argc, char **argv)
{
    SaCtlOptions o = {0};
    AdviseOptions a = {0};
    g_autoptr(GOptionContext) ctx =
        g_option_context_new("- recommend a home partition for a new VM, by softaffd's headroom");
    g_autoptr(SaTopology) topo = NULL;

    int rc = parse_advise_command(ctx, &argc, &argv, &o, &a);
    if (rc == EXIT_OK)
        topo = load_topology(&o, ctx, &rc);
    if (topo) {
        SaCtlAdvise req = {
            .vcpus = (guint)a.vcpus,
            .memory_bytes = (guint64)a.memory_mib << 20,
            .allowed = a.allowed,
            .class_name = a.class_name,
            .demand = a.demand,
            .socket_path = a.socket_path,
            .config_path = o.config_path,
            .json = o.json,
        };
        rc = sa_ctl_advise_run(topo, &req);
    }
    advise_options_clear(&a);
    sa_ctl_options_clear(&o);
    return rc;
}

static void print_usage(FILE *out)
{
    fprintf(out, "Usage: softaffctl COMMAND [OPTIONS]\n\n"
                 "Commands:\n"
                 "  partitions [--json] [--layout node|llc|custom] [--custom CPULISTS]\n"
                 "                         the host's partitions, distances and utilization\n"
                 "  advise --vcpus N [--memory MIB] [--allowed CPULIST] [--class NAME]\n"
                 "      [--demand CPUS] [--socket PATH] [--json]\n"
                 "                         recommend a home partition for a new VM (softaffd's\n"
                 "                         headroom history when it runs)\n"
                 "  status [--json]        every VM and partition, from softaffd\n"
                 "  show DOMAIN [--json]   one VM and its recent decisions, from softaffd\n"
                 "  set DOMAIN [--mode soft|strict|off] [--preferred ID|auto] [--softness N]\n"
                 "      [--live] [--config]  write the VM's softaff metadata through libvirt\n"
                 "  top [--interval-ms MS] a live view of partitions and VMs\n"
                 "  version                print the version\n\n"
                 "Run 'softaffctl COMMAND --help' for a command's options.\n"
                 "Exit status: 0 success, 1 failure, 2 wrong usage, 3 softaffd not reachable.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (g_str_equal(cmd, "partitions"))
        return cmd_partitions(argc - 1, argv + 1);
    if (g_str_equal(cmd, "advise"))
        return cmd_advise(argc - 1, argv + 1);
    if (g_str_equal(cmd, "status"))
        return sa_ctl_status(argc - 1, argv + 1);
    if (g_str_equal(cmd, "show"))
        return sa_ctl_show(argc - 1, argv + 1);
    if (g_str_equal(cmd, "top"))
        return sa_ctl_top(argc - 1, argv + 1);
    if (g_str_equal(cmd, "set"))
        return sa_ctl_set(argc - 1, argv + 1);
    if (g_str_equal(cmd, "version") || g_str_equal(cmd, "--version")) {
        printf("softaffctl %s\n", SA_VERSION);
        return EXIT_OK;
    }
    if (g_str_equal(cmd, "help") || g_str_equal(cmd, "--help") || g_str_equal(cmd, "-h")) {
        print_usage(stdout);
        return EXIT_OK;
    }
    fprintf(stderr, "softaffctl: unknown command '%s'\n", cmd);
    print_usage(stderr);
    return EXIT_USAGE;
}
