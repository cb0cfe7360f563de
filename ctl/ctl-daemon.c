/* softaffctl — commands that ask softaffd: status, show, top. */
#define G_LOG_DOMAIN "softaffctl"

#include <glib-unix.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "sa-config-defs.h"
#include "sa-control-client.h"

#define REQUEST_TIMEOUT_MS 5000

static void add_daemon_entries(GOptionContext *ctx, SaCtlOptions *o, bool json)
{
    GOptionEntry entries[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &o->config_path,
         "Configuration file, for [daemon] socket (default $SOFTAFF_CONFIG or " SA_DEFAULT_CONFIG
         ")",
         "FILE"},
        {"socket", 's', 0, G_OPTION_ARG_FILENAME, &o->socket_path,
         "softaffd's control socket (default: from the configuration)", "PATH"},
        {"json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "Print JSON", NULL},
        G_OPTION_ENTRY_NULL,
    };
    if (!json)
        entries[2] = (GOptionEntry)G_OPTION_ENTRY_NULL;
    g_option_context_add_main_entries(ctx, entries, NULL);
}

/* The socket path: --socket, else the configuration's [daemon] socket. */
static char *socket_path(const SaCtlOptions *o, GError **error)
{
    if (o->socket_path)
        return g_strdup(o->socket_path);
    g_autoptr(SaConfig) cfg = sa_config_load(o->config_path, error);
    if (!cfg)
        return NULL;
    return g_strdup(cfg->socket);
}

/* Sends one request, returns the reply object ({"ok":true,...}). */
static json_object *request(const char *path, const SaControlRequest *req, GError **error)
{
    gint64 deadline = g_get_monotonic_time() + REQUEST_TIMEOUT_MS * G_TIME_SPAN_MILLISECOND;

    return sa_control_call(path, req, deadline, SA_CONTROL_MAX_REPLY, error);
}

/* Prints the error; the exit status tells "softaffd not reachable" (3) from other failures. */
static int failure(const GError *error)
{
    fprintf(stderr, "softaffctl: %s\n", error->message);
    if (g_error_matches(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_NO_DAEMON) ||
        g_error_matches(error, SA_CONTROL_CLIENT_ERROR, SA_CONTROL_CLIENT_ERROR_CONNECT))
        return SA_CTL_NO_DAEMON;
    return SA_CTL_FAILED;
}

static const char *str(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !v)
        return "-";
    return json_object_get_string(v);
}

static double num(json_object *o, const char *key, double fallback)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v) || !v)
        return fallback;
    return json_object_get_double(v);
}

static json_object *member(json_object *o, const char *key)
{
    json_object *v = NULL;
    json_object_object_get_ex(o, key, &v);
    return v;
}

/* A name cut to width keeps its end, where generated names differ: "~t8667-a". */
static const char *fit(const char *name, char *buf, gsize width)
{
    gsize len = strlen(name);
    if (len <= width)
        return name;
    buf[0] = '~';
    memcpy(buf + 1, name + len - (width - 1), width - 1);
    buf[width] = '\0';
    return buf;
}

static void print_vm_table(json_object *vms)
{
    printf("%-14s %-9s %-6s %4s %5s %-8s %5s %6s %8s %5s\n", "VM", "STATE", "MODE", "HOME", "VCPUS",
           "RUNS ON", "HOME%", "BURSTS", "RETREATS", "DELAY");
    for (size_t i = 0; vms && i < json_object_array_length(vms); i++) {
        json_object *vm = json_object_array_get_idx(vms, i);
        char share[16] = "-";
        double s = num(vm, "home_share", -1);
        if (s >= 0)
            snprintf(share, sizeof(share), "%.0f%%", 100 * s);
        char nb[16];
        printf("%-14s %-9s %-6s %4s %5s %-8.8s %5s %6s %8s %5.2f\n", fit(str(vm, "name"), nb, 14),
               str(vm, "state"), str(vm, "mode"), str(vm, "home"), str(vm, "vcpu_count"),
               str(vm, "vcpus"), share, str(vm, "bursts"), str(vm, "retreats"),
               num(vm, "run_delay_cpus", 0));
    }
}

static void join_names(json_object *arr, char *buf, gsize size)
{
    buf[0] = '\0';
    for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
        if (i)
            g_strlcat(buf, ",", size);
        g_strlcat(buf, json_object_get_string(json_object_array_get_idx(arr, i)), size);
    }
    if (!buf[0])
        g_strlcpy(buf, "-", size);
}

static void print_partition_table(json_object *parts)
{
    printf("%-9s %-11s %5s %6s %8s %9s  %s\n", "PARTITION", "CPUS", "UTIL", "OWNERS", "VISITORS",
           "UNMANAGED", "HOME VMS / VISITORS");
    for (size_t i = 0; parts && i < json_object_array_length(parts); i++) {
        json_object *p = json_object_array_get_idx(parts, i);
        char homes[256], visitors[256];
        join_names(member(p, "home_vms"), homes, sizeof(homes));
        join_names(member(p, "visitor_vms"), visitors, sizeof(visitors));
        /* 80 columns: the names get what the numbers leave, cut with a '+'. */
        char hb[16], vb[16];
        g_autofree char *who =
            g_strdup_printf("%s / %s", fit(homes, hb, 12), fit(visitors, vb, 12));
        if (strlen(who) > 25)
            strcpy(who + 24, "+");
        printf("%-9s %-11.11s %4.0f%% %6.2f %8.2f %9.2f  %s\n", str(p, "id"), str(p, "cpus"),
               100 * num(p, "utilization", 0), num(p, "owners", 0), num(p, "visitors", 0),
               num(p, "unmanaged", 0), who);
    }
}

/* The "stalled" member of a VM (a command to its hypervisor missed its deadline), or NULL. */
static json_object *stalled_of(json_object *vm)
{
    json_object *stalled = member(vm, "stalled");
    return json_object_is_type(stalled, json_type_object) ? stalled : NULL;
}

/* "stalled: pin command unanswered for 3.2 s", then " (since 2025-06-01T10:00:03Z)"; the
 * daemon's "reason" when it gives one ("QEMU process 123 is stopped"). */
static char *stalled_text(json_object *stalled, bool with_since)
{
    g_autofree char *since =
        with_since ? g_strdup_printf(" (since %s)", str(stalled, "since")) : NULL;
    json_object *reason = member(stalled, "reason");
    g_autofree char *what = json_object_is_type(reason, json_type_string)
                                ? g_strdup(json_object_get_string(reason))
                                : g_strdup_printf("%s command unanswered", str(stalled, "command"));

    return g_strdup_printf("stalled: %s for %.1f s%s", what, num(stalled, "seconds", 0),
                           since ? since : "");
}

/* One line for each VM that needs a word after the table: what it is stalled on, why it is
 * unmanaged or invalid (with_reasons). A blank line before the first. */
static void print_vm_notes(json_object *vms, bool with_reasons)
{
    bool first = true;

    for (size_t i = 0; vms && i < json_object_array_length(vms); i++) {
        json_object *vm = json_object_array_get_idx(vms, i);
        const char *state = str(vm, "state");
        json_object *stalled = stalled_of(vm);
        g_autofree char *note = NULL;
        json_object *error = member(vm, "error");
        if (stalled)
            note = stalled_text(stalled, false);
        else if (json_object_is_type(error, json_type_object))
            note = g_strdup_printf("failing: %s", str(error, "message"));
        else if (with_reasons && (g_str_equal(state, "unmanaged") || g_str_equal(state, "invalid")))
            note = g_strdup(str(vm, "reason"));
        if (!note)
            continue;
        printf("%s %s: %s\n", first ? "\n" : "", str(vm, "name"), note);
        first = false;
    }
}

static void print_status(json_object *reply)
{
    json_object *d = member(reply, "daemon");
    printf("softaffd %s: layout %s, tick %s ms, %s ticks%s\n\n", str(d, "version"),
           str(d, "layout"), str(d, "interval_ms"), str(d, "ticks"),
           json_object_get_boolean(member(d, "dry_run")) ? ", dry run" : "");
    print_vm_table(member(reply, "vms"));
    printf("\n");
    print_partition_table(member(reply, "partitions"));
    print_vm_notes(member(reply, "vms"), true);
}

/* "own settings: vCPU 0 on 1, vCPU 1 on 0-1; emulator on 0-1; I/O thread 1 on 0": what softaff
 * narrows and gives back. Runs of vCPUs with the same set are named once ("vCPUs 0-3 on 0-7"). */
static void print_own(json_object *own)
{
    json_object *vcpus = member(own, "vcpus");
    GString *s = g_string_new("  own settings: ");
    size_t n = vcpus ? json_object_array_length(vcpus) : 0;
    for (size_t i = 0; i < n;) {
        const char *set = json_object_get_string(json_object_array_get_idx(vcpus, i));
        size_t j = i + 1;
        while (j < n &&
               g_strcmp0(json_object_get_string(json_object_array_get_idx(vcpus, j)), set) == 0)
            j++;
        if (j - i == 1)
            g_string_append_printf(s, "%svCPU %zu on %s", i ? ", " : "", i, set);
        else
            g_string_append_printf(s, "%svCPUs %zu-%zu on %s", i ? ", " : "", i, j - 1, set);
        i = j;
    }
    g_string_append_printf(s, "; emulator on %s", str(own, "emulator"));
    json_object *io = member(own, "iothreads");
    if (json_object_is_type(io, json_type_object)) {
        json_object_object_foreach(io, id, set)
            g_string_append_printf(s, "; I/O thread %s on %s", id, json_object_get_string(set));
    }
    printf("%s\n", s->str);
    g_string_free(s, TRUE);
}

#define MIB (1024.0 * 1024.0)

/* "  memory 97% of 4096 MiB on home node 1 (read ...); moving to node 1: 512 of 2048 MiB at
 * 256 MiB/s" */
static void print_memory(json_object *mem)
{
    json_object *moving = member(mem, "moving");
    json_object *fixed = member(mem, "fixed_reason");

    printf("  memory");
    if (json_object_is_type(member(mem, "home_ratio"), json_type_null))
        printf(" on home node %s: not read yet", str(mem, "home_node"));
    else
        printf(" %.0f%% of %.0f MiB on home node %s (read %s)", 100 * num(mem, "home_ratio", 0),
               num(mem, "resident_bytes", 0) / MIB, str(mem, "home_node"), str(mem, "measured"));
    if (json_object_is_type(moving, json_type_object))
        printf("; moving to node %s: %.0f of %.0f MiB at %.0f MiB/s", str(moving, "to_node"),
               num(moving, "moved_bytes", 0) / MIB, num(moving, "total_bytes", 0) / MIB,
               num(moving, "rate_bytes_per_second", 0) / MIB);
    if (json_object_is_type(fixed, json_type_string))
        printf("; not moved: %s", json_object_get_string(fixed));
    if (json_object_get_boolean(member(mem, "node_full")))
        printf("; the home node was full");
    printf("; %.0f MiB moved in all\n", num(mem, "moved_bytes_total", 0) / MIB);
}

static void print_show(json_object *reply)
{
    json_object *vm = member(reply, "vm");
    json_object *stalled = stalled_of(vm);
    json_object *decisions = member(vm, "decisions");

    printf("%s (%s, backend %s)\n", str(vm, "name"), str(vm, "uuid"), str(vm, "backend"));
    printf("  state %s, mode %s, preferred %s, home %s, softness %s", str(vm, "state"),
           str(vm, "mode"), str(vm, "preferred"), str(vm, "home"), str(vm, "softness"));
    /* Where the settings come from when an operator's [rule NAME] gave them. */
    json_object *rule = member(vm, "rule");
    if (json_object_is_type(rule, json_type_string))
        printf(", rule %s", json_object_get_string(rule));
    printf("\n");
    printf("  allowed CPUs %s; vCPUs may run on %s; emulator on %s\n", str(vm, "allowed"),
           str(vm, "vcpus"), str(vm, "emulator"));
    printf("  home share %.0f%%, bursts %s, retreats %s, run delay %.2f CPUs now\n",
           100 * num(vm, "home_share", 0), str(vm, "bursts"), str(vm, "retreats"),
           num(vm, "run_delay_cpus", 0));
    if (json_object_is_type(member(vm, "own"), json_type_object))
        print_own(member(vm, "own"));
    if (json_object_is_type(member(vm, "memory"), json_type_object))
        print_memory(member(vm, "memory"));
    if (stalled) {
        g_autofree char *text = stalled_text(stalled, true);
        printf("  %s\n", text);
    }
    json_object *error = member(vm, "error");
    if (json_object_is_type(error, json_type_object))
        printf("  failing: %s (at %s; next try in %s ms)\n", str(error, "message"),
               str(error, "at"), str(error, "retry_in_ms"));
    if (g_strcmp0(str(vm, "reason"), "-") != 0)
        printf("  %s\n", str(vm, "reason"));
    printf("\nrecent decisions:\n");
    for (size_t i = 0; decisions && i < json_object_array_length(decisions); i++) {
        json_object *dec = json_object_array_get_idx(decisions, i);
        printf("  %s  %-5s vCPUs %-9s %s\n", str(dec, "time"), str(dec, "state"), str(dec, "vcpus"),
               str(dec, "reason"));
    }
}

static int parse_daemon_command(int *argc, char ***argv, const char *summary, SaCtlOptions *o,
                                GOptionContext **ctx_out, bool json)
{
    GOptionContext *ctx = g_option_context_new(summary);
    add_daemon_entries(ctx, o, json);
    g_autoptr(GError) error = NULL;
    *ctx_out = ctx;
    if (!g_option_context_parse(ctx, argc, argv, &error))
        return sa_ctl_usage_error(ctx, "%s", error->message);
    return SA_CTL_OK;
}

/* Asks softaffd and prints its reply: as JSON with --json, else with print_text. */
static int ask(const SaCtlOptions *o, const SaControlRequest *req,
               void (*print_text)(json_object *reply))
{
    g_autoptr(GError) error = NULL;
    g_autofree char *path = socket_path(o, &error);
    json_object *reply = path ? request(path, req, &error) : NULL;

    if (!reply)
        return failure(error);
    if (o->json)
        sa_ctl_print_json(reply);
    else
        print_text(reply);
    json_object_put(reply);
    return SA_CTL_OK;
}

int sa_ctl_status(int argc, char **argv)
{
    SaCtlOptions o = {0};
    GOptionContext *ctx = NULL;
    const SaControlRequest req = {.command = SA_CONTROL_STATUS};
    int rc = parse_daemon_command(&argc, &argv, "- every VM and partition, from softaffd", &o, &ctx,
                                  true);
    if (rc == SA_CTL_OK && argc > 1)
        rc = sa_ctl_usage_error(ctx, "status: unexpected argument '%s'", argv[1]);
    if (rc == SA_CTL_OK)
        rc = ask(&o, &req, print_status);
    g_option_context_free(ctx);
    sa_ctl_options_clear(&o);
    return rc;
}

int sa_ctl_show(int argc, char **argv)
{
    SaCtlOptions o = {0};
    GOptionContext *ctx = NULL;
    int rc = parse_daemon_command(&argc, &argv, "DOMAIN - one VM and its recent decisions", &o,
                                  &ctx, true);
    if (rc == SA_CTL_OK && argc != 2)
        rc = sa_ctl_usage_error(ctx,
                                argc < 2 ? "show: which DOMAIN?" : "show: unexpected argument '%s'",
                                argc < 2 ? "" : argv[2]);
    if (rc == SA_CTL_OK) {
        const SaControlRequest req = {.command = SA_CONTROL_SHOW, .domain = argv[1]};
        rc = ask(&o, &req, print_show);
    }
    g_option_context_free(ctx);
    sa_ctl_options_clear(&o);
    return rc;
}

static volatile sig_atomic_t top_stop;

static void on_top_signal(int sig)
{
    top_stop = 1;
}

/* A partition in two lines: its CPUs and a utilization bar, then its owners and visitors. */
static void draw_top_partition(json_object *p)
{
    double util = num(p, "utilization", 0);
    char bar[21];
    int fill = (int)(util * 20 + 0.5);
    for (int k = 0; k < 20; k++)
        bar[k] = k < fill ? '#' : '.';
    bar[20] = '\0';
    char homes[256], visitors[256];
    join_names(member(p, "home_vms"), homes, sizeof(homes));
    join_names(member(p, "visitor_vms"), visitors, sizeof(visitors));
    printf("P%-3s CPUs %-12.12s [%s] %3.0f%%\n", str(p, "id"), str(p, "cpus"), bar, 100 * util);
    printf("     owners %-24.24s visitors %-.30s\n", homes, visitors);
}

/* One screen: partitions as rows of CPUs with their owners and visitors, then the VMs. */
static void draw_top(json_object *reply, bool clear)
{
    if (clear)
        printf("\033[H\033[2J");
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *ts = g_date_time_format(now, "%H:%M:%S");
    json_object *d = member(reply, "daemon");
    printf("softaff top  %s  layout %s  tick %s ms  (q Enter or Ctrl-C quits)\n\n", ts,
           str(d, "layout"), str(d, "interval_ms"));
    json_object *parts = member(reply, "partitions");
    for (size_t i = 0; parts && i < json_object_array_length(parts); i++)
        draw_top_partition(json_object_array_get_idx(parts, i));
    printf("\n");
    print_vm_table(member(reply, "vms"));
    print_vm_notes(member(reply, "vms"), false);
    fflush(stdout);
}

/* Parses the command line of top; SA_CTL_OK or the usage error's status. */
static int parse_top_command(GOptionContext *ctx, int *argc, char ***argv, SaCtlOptions *o,
                             gint *interval_ms, gint *iterations)
{
    GOptionEntry extra[] = {
        {"interval-ms", 'i', 0, G_OPTION_ARG_INT, interval_ms,
         "Refresh interval (default: the daemon's tick)", "MS"},
        {"iterations", 'n', 0, G_OPTION_ARG_INT, iterations,
         "Stop after N screens (default: until interrupted)", "N"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GError) error = NULL;

    add_daemon_entries(ctx, o, false);
    g_option_context_add_main_entries(ctx, extra, NULL);
    if (!g_option_context_parse(ctx, argc, argv, &error))
        return sa_ctl_usage_error(ctx, "%s", error->message);
    if (*argc > 1 || *interval_ms < 0 || *interval_ms > 60000 || *iterations < 0)
        return sa_ctl_usage_error(ctx,
                                  *argc > 1 ? "top: unexpected argument '%s'"
                                            : "top: --interval-ms 0-60000, --iterations >= 0%s",
                                  *argc > 1 ? (*argv)[1] : "");
    return SA_CTL_OK;
}

/* Waits wait_ms before the next screen; false when the user typed q (then Enter). */
static bool wait_next_screen(int wait_ms, bool tty)
{
    char c;

    if (!tty)
        printf("\n");
    if (!isatty(STDIN_FILENO)) {
        g_usleep((gulong)wait_ms * 1000);
        return true;
    }
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    return !(poll(&p, 1, wait_ms) > 0 && read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'));
}

/* Screens until interrupted, q, or iterations (0: no end). */
static int run_top(const char *path, gint interval_ms, gint iterations)
{
    const SaControlRequest req = {.command = SA_CONTROL_STATUS};
    bool tty = isatty(STDOUT_FILENO);

    signal(SIGINT, on_top_signal);
    signal(SIGTERM, on_top_signal);
    for (int n = 0; !top_stop && (iterations == 0 || n < iterations); n++) {
        g_autoptr(GError) error = NULL;
        json_object *reply = request(path, &req, &error);
        if (!reply)
            return failure(error);
        draw_top(reply, tty);
        int wait =
            interval_ms ? interval_ms : (int)num(member(reply, "daemon"), "interval_ms", 500);
        json_object_put(reply);
        if ((iterations && n + 1 >= iterations) || !wait_next_screen(wait, tty))
            break;
    }
    return SA_CTL_OK;
}

int sa_ctl_top(int argc, char **argv)
{
    SaCtlOptions o = {0};
    gint interval_ms = 0, iterations = 0;
    g_autoptr(GOptionContext) ctx = g_option_context_new("- a live view of partitions and VMs");
    g_autoptr(GError) error = NULL;
    g_autofree char *path = NULL;

    int rc = parse_top_command(ctx, &argc, &argv, &o, &interval_ms, &iterations);
    if (rc == SA_CTL_OK)
        path = socket_path(&o, &error);
    if (rc == SA_CTL_OK && !path)
        rc = failure(error);
    if (path)
        rc = run_top(path, interval_ms, iterations);
    sa_ctl_options_clear(&o);
    return rc;
}
