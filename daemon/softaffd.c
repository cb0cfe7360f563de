/* softaffd — the soft-affinity monitor daemon for libvirt VMs. */
#define G_LOG_DOMAIN "softaffd"

#include <errno.h>
#include <glib-unix.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <syslog.h>
#include <unistd.h>

#include "backend-libvirt.h"
#include "backend-qmp.h"
#include "control-server.h"
#include "core-private.h"
#include "loop-watch.h"
#include "sa-config-defs.h"
#include "sa-error.h"
#include "sa-sampler.h"

typedef struct {
    SaCore *core;
    SaLibvirt *lv; /* backend=libvirt|both */
    SaQmp *qmp;    /* backend=qmp|both */
    SaControl *control;
    GMainLoop *loop;
    char *config_path;
    guint tick_source;
    guint64 ticks;
    bool terminating;
    gint64 connect_until; /* terminating while reconnecting to libvirt: wait for it until then */
    int exit_code;
} App;

typedef struct {
    gboolean foreground, once, dry_run, version, check_config;
    char *config_path;
} Options;

/* --once waits this long for libvirt. */
#define ONCE_CONNECT_TIMEOUT_US (10 * G_USEC_PER_SEC)

static gboolean opt_verbose;
static gboolean opt_use_syslog;

static GLogWriterOutput log_writer(GLogLevelFlags level, const GLogField *fields, gsize n,
                                   gpointer user_data)
{
    if ((level & G_LOG_LEVEL_DEBUG) && !opt_verbose)
        return G_LOG_WRITER_HANDLED;
    if (g_log_writer_is_journald(fileno(stderr)))
        return g_log_writer_journald(level, fields, n, user_data);
    const char *message = "";
    for (gsize i = 0; i < n; i++)
        if (g_str_equal(fields[i].key, "MESSAGE"))
            message = fields[i].value;
    const char *tag = "info";
    int prio = LOG_INFO;
    if (level & G_LOG_LEVEL_ERROR) {
        tag = "error";
        prio = LOG_ERR;
    } else if (level & G_LOG_LEVEL_CRITICAL) {
        tag = "critical";
        prio = LOG_CRIT;
    } else if (level & G_LOG_LEVEL_WARNING) {
        tag = "warning";
        prio = LOG_WARNING;
    } else if (level & G_LOG_LEVEL_DEBUG) {
        tag = "debug";
        prio = LOG_DEBUG;
    }
    if (opt_use_syslog) {
        syslog(prio, "%s", message);
        return G_LOG_WRITER_HANDLED;
    }
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *ts = g_date_time_format(now, "%H:%M:%S.%f");
    ts[12] = '\0'; /* milliseconds */
    fprintf(stderr, "%s softaffd %s: %s\n", ts, tag, message);
    fflush(stderr);
    return G_LOG_WRITER_HANDLED;
}

static void quiet_libvirt_errors(void *data, virErrorPtr err)
{
    /* Errors are read with virGetLastError where they matter. */
}

static gboolean tick_cb(gpointer data)
{
    App *app = data;
    /* Without libvirt there is nothing to decide for libvirt VMs; QMP VMs need no libvirt. */
    if (app->lv && !app->qmp && !sa_libvirt_is_connected(app->lv))
        return G_SOURCE_CONTINUE;
    /* With --verbose, when each tick ran: a late one shows what held the main loop. */
    if (sa_core_regular_tick(app->core))
        g_debug("tick %" G_GUINT64_FORMAT, ++app->ticks);
    else
        g_debug("tick skipped: an event tick ran less than 20 ms ago");
    return G_SOURCE_CONTINUE;
}

static void stopped_cb(gpointer data)
{
    App *app = data;
    g_main_loop_quit(app->loop);
}

/* The headroom history survives a restart ([fleet] state_file); a dry run writes nothing. */
static void save_headroom(App *app)
{
    g_autoptr(GError) error = NULL;
    const char *path = sa_core_config(app->core)->fleet_state_file;
    if (!path || app->core->dry_run)
        return;
    if (sa_core_fleet_save(app->core, &error))
        g_info("fleet: headroom history saved to %s", path);
    else
        g_warning("fleet: saving the headroom: %s", error->message);
}

static void start_shutdown(App *app)
{
    g_info("terminating: restoring every VM softaff changed (at most %u ms)",
           sa_core_config(app->core)->stop_timeout_ms);
    sa_core_shutdown(app->core, stopped_cb, app);
}

/* Terminating without a libvirt connection (libvirtd restarted, softaffd's reconnect waiting
 * for its back-off): the VMs can only be given back through a new one. */
static gboolean connect_for_shutdown(gpointer data)
{
    App *app = data;
    if (sa_libvirt_is_connected(app->lv)) {
        g_info("terminating: connected again");
        start_shutdown(app);
        return G_SOURCE_REMOVE;
    }
    if (g_get_monotonic_time() >= app->connect_until) {
        g_warning("terminating: still no connection to libvirt: the VMs keep softaff's pins");
        start_shutdown(app);
        return G_SOURCE_REMOVE;
    }
    sa_libvirt_connect(app->lv); /* now, not at the back-off's next attempt */
    return G_SOURCE_CONTINUE;
}

static gboolean on_sigterm(gpointer data)
{
    App *app = data;
    if (app->terminating)
        return G_SOURCE_CONTINUE;
    app->terminating = true;
    /* Stop deciding first: nothing is pinned once the restore has started. */
    if (app->tick_source)
        g_source_remove(app->tick_source);
    app->tick_source = 0;
    save_headroom(app);
    if (app->lv && !sa_libvirt_is_connected(app->lv)) {
        guint ms = sa_core_config(app->core)->stop_timeout_ms;
        g_info("terminating: not connected to libvirt; connecting to give the VMs back (at most "
               "%u ms more)",
               ms);
        app->connect_until = g_get_monotonic_time() + (gint64)ms * 1000;
        sa_libvirt_connect(app->lv);
        g_timeout_add(100, connect_for_shutdown, app);
        return G_SOURCE_CONTINUE;
    }
    start_shutdown(app);
    return G_SOURCE_CONTINUE;
}

/* The configuration (main file and drop-ins) and the host's partitions, checked against each
 * other: a [rule NAME] preferred must name one of them. */
static bool load_config(const char *path, SaConfig **cfg, SaTopology **topo, GError **error)
{
    g_autoptr(SaConfig) c = sa_config_load(path, error);
    g_autoptr(SaTopology) t = c ? sa_topology_load(c->layout, c->custom, error) : NULL;
    if (!t || !sa_config_check_host(c, t, error))
        return false;
    *cfg = g_steal_pointer(&c);
    *topo = g_steal_pointer(&t);
    return true;
}

/* The new configuration and topology, or false with the reason logged. */
static bool load_for_reload(App *app, SaConfig **cfg, SaTopology **topo)
{
    g_autoptr(GError) error = NULL;
    if (load_config(app->config_path, cfg, topo, &error))
        return true;
    g_warning("reload refused, keeping the running configuration: %s", error->message);
    return false;
}

static gboolean on_sighup(gpointer data)
{
    App *app = data;
    SaConfig *cfg = NULL;
    SaTopology *topo = NULL;
    if (app->terminating || !load_for_reload(app, &cfg, &topo))
        return G_SOURCE_CONTINUE;
    const SaConfig *old = sa_core_config(app->core);
    if (g_strcmp0(cfg->uri, old->uri) != 0)
        g_warning("reload: [daemon] uri changed to %s; restart softaffd to use it", cfg->uri);
    guint old_interval = old->interval_ms;
    sa_core_reload(app->core, cfg, topo);
    if (cfg->interval_ms != old_interval && app->tick_source) {
        g_source_remove(app->tick_source);
        app->tick_source = g_timeout_add(cfg->interval_ms, tick_cb, app);
    }
    if (app->lv)
        sa_libvirt_sync(app->lv);
    if (app->qmp)
        sa_qmp_sync(app->qmp);
    g_info("configuration reloaded (layout %s, %u partitions, interval %u ms)",
           sa_layout_to_string(topo->layout), topo->partitions->len, cfg->interval_ms);
    return G_SOURCE_CONTINUE;
}

/* Requests from the control socket that act: the hook's VM events, reload. */
static bool control_action(const SaControlRequest *req, gpointer data, GError **error)
{
    App *app = data;
    if (req->command == SA_CONTROL_RELOAD) {
        on_sighup(app);
        return true;
    }
    /* The hook runs while libvirtd holds the domain: never call libvirt from here. */
    const char *event = sa_vm_event_to_string(req->event);
    switch (req->event) {
    case SA_VM_EVENT_PREPARE:
        g_info("%s: starting (hook)", req->domain);
        break;
    case SA_VM_EVENT_STARTED:
        g_info("%s: started (hook)", req->domain);
        break;
    case SA_VM_EVENT_STOPPED:
    case SA_VM_EVENT_RELEASE:
        /* Not forgotten here: the event names the domain by UUID only, and may arrive after the
         * same domain started again (a new QEMU). libvirt's lifecycle event, or the resync
         * after a reconnect, forgets the process that stopped. */
        g_info("%s: %s (hook)", req->domain, event);
        break;
    }
    return true;
}

static int parse_options(int *argc, char ***argv, Options *o)
{
    GOptionEntry entries[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &o->config_path,
         "Configuration file (default $SOFTAFF_CONFIG or " SA_DEFAULT_CONFIG ")", "FILE"},
        {"foreground", 'f', 0, G_OPTION_ARG_NONE, &o->foreground,
         "Stay in the foreground and log to stderr (default: detach and log to syslog, "
         "unless stderr is the journal)",
         NULL},
        {"once", 0, 0, G_OPTION_ARG_NONE, &o->once,
         "Place every VM once (one tick), then exit without restoring", NULL},
        {"dry-run", 'n', 0, G_OPTION_ARG_NONE, &o->dry_run, "Decide and log, change nothing", NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &opt_verbose, "Log debug messages too", NULL},
        {"version", 'V', 0, G_OPTION_ARG_NONE, &o->version, "Print the version and exit", NULL},
        {"check-config", 0, 0, G_OPTION_ARG_NONE, &o->check_config,
         "Check the configuration (with its drop-ins, against this host's partitions), print it "
         "merged and exit: 0 when valid, 1 with the error",
         NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- soft CPU affinity for libvirt VMs");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, argc, argv, &error)) {
        fprintf(stderr, "softaffd: %s\n", error->message);
        return 2;
    }
    if (*argc > 1) {
        fprintf(stderr, "softaffd: unexpected argument '%s'\n", (*argv)[1]);
        return 2;
    }
    return 0;
}

/* Detaches unless asked not to (or the journal takes stderr); raises the descriptor limit. */
static bool prepare_process(const Options *o)
{
    if (!o->foreground && !o->once && !g_log_writer_is_journald(fileno(stderr))) {
        if (daemon(0, 0) < 0) {
            fprintf(stderr, "softaffd: cannot detach: %s\n", g_strerror(errno));
            return false;
        }
        openlog("softaffd", LOG_PID, LOG_DAEMON);
        opt_use_syslog = TRUE;
    }
    /* Two /proc files stay open per vCPU thread: take every descriptor the hard limit allows. */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    virSetErrorFunc(NULL, quiet_libvirt_errors);
    if (virEventRegisterDefaultImpl() < 0) {
        g_critical("cannot register libvirt's event loop");
        return false;
    }
    return true;
}

static bool create_core(App *app, const Options *o)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = NULL;
    g_autoptr(SaTopology) topo = NULL;
    if (!load_config(o->config_path, &cfg, &topo, &error)) {
        fprintf(stderr, "softaffd: %s\n", error->message);
        return false;
    }
    /* Without schedstat every vCPU thread would read as gone: refuse to start instead. */
    if (!sa_schedstat_check(getpid(), gettid(), &error)) {
        fprintf(stderr, "softaffd: cannot measure vCPU threads: %s\n", error->message);
        return false;
    }
    if (!prepare_process(o))
        return false;
    g_info("softaffd %s starting: layout %s, %u partitions, interval %u ms%s", SA_VERSION,
           sa_layout_to_string(topo->layout), topo->partitions->len, cfg->interval_ms,
           o->dry_run ? ", dry run" : "");
    app->core = sa_core_new(g_steal_pointer(&cfg), g_steal_pointer(&topo), o->dry_run, &error);
    if (!app->core) {
        g_critical("%s", error->message);
        return false;
    }
    sa_core_fleet_start(app->core);
    /* --once pins and exits: a scheduler would leave with the process. Actuation first: while
     * the scheduler runs, mode=auto senses without the BPF sensor (core.c). */
    if (!o->once && !sa_core_start_actuation(app->core, &error)) {
        g_critical("%s", error->message);
        return false;
    }
    /* --once decides once: no main loop to hear events. */
    if (!o->once && !sa_core_start_sensing(app->core, &error)) {
        g_critical("%s", error->message);
        return false;
    }
    const SaConfig *c = sa_core_config(app->core);
    if (c->backend != SA_BACKEND_QMP)
        app->lv = sa_libvirt_new(app->core, c->uri);
    if (c->backend != SA_BACKEND_LIBVIRT)
        app->qmp = sa_qmp_new(app->core);
    return true;
}

/* --check-config: what a start would load and check, printed merged; nothing starts (no
 * socket, no libvirt, no root needed), for CI pipelines that ship the files. */
static int check_config(const Options *o)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = NULL;
    g_autoptr(SaTopology) topo = NULL;
    if (!load_config(o->config_path, &cfg, &topo, &error)) {
        fprintf(stderr, "softaffd: %s\n", error->message);
        return 1;
    }
    g_autofree char *text = sa_config_to_keyfile(cfg);
    fputs(text, stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* Runs the main context for ms milliseconds (QMP sessions and discoveries answer meanwhile). */
static void run_for(App *app, guint ms)
{
    gint64 until = g_get_monotonic_time() + (gint64)ms * 1000;
    while (g_get_monotonic_time() < until)
        if (!g_main_context_iteration(NULL, FALSE))
            g_usleep(5000);
}

/* --once: discover, one interval for samples, one decision, its commands; no restore. */
static int run_once(App *app)
{
    const SaConfig *c = sa_core_config(app->core);
    if (app->lv) {
        /* The connection opens on a thread: wait for it, then for the discoveries. */
        sa_libvirt_connect(app->lv);
        gint64 until = g_get_monotonic_time() + ONCE_CONNECT_TIMEOUT_US;
        while (!sa_libvirt_is_connected(app->lv) && g_get_monotonic_time() < until)
            run_for(app, 20);
        if (!sa_libvirt_is_connected(app->lv)) {
            fprintf(stderr, "softaffd: --once: cannot connect to %s\n", c->uri);
            return 1;
        }
    }
    if (app->qmp) {
        sa_qmp_start(app->qmp);
        run_for(app, 1000); /* QMP sessions are asynchronous: let them introduce the VMs */
    }
    sa_core_settle(app->core, c->command_timeout_ms);
    sa_core_tick(app->core);
    run_for(app, c->interval_ms);
    sa_core_tick(app->core);
    if (!sa_core_settle(app->core, c->command_timeout_ms))
        g_warning("--once: some VMs did not answer within %u ms", c->command_timeout_ms);
    return 0;
}

static int run_daemon(App *app)
{
    g_autoptr(GError) error = NULL;
    const SaConfig *c = sa_core_config(app->core);
    app->control = sa_control_new(app->core, c->socket, control_action, app, &error);
    if (!app->control) {
        g_critical("control socket: %s", error->message);
        return 1;
    }
    if (app->lv)
        sa_libvirt_connect(app->lv);
    if (app->qmp)
        sa_qmp_start(app->qmp);
    app->tick_source = g_timeout_add(c->interval_ms, tick_cb, app);
    SaLoopWatch *watch = sa_loop_watch_start();
    g_main_loop_run(app->loop);
    sa_loop_watch_stop(watch);
    g_info("stopped");
    return 0;
}

/* False when commands still run on workers: then nothing is freed, and the process must end
 * with _exit(): exit() would run the libraries' destructors (libxml2's, libvirt's) under
 * workers still parsing a domain XML or inside libvirt, which crashed softaffd at SIGTERM. */
static bool app_free(App *app)
{
    sa_control_free(app->control);
    guint running = app->core ? sa_core_commands_running(app->core) : 0;
    if (running > 0) {
        g_info("%u command(s) still running; exiting without waiting for them", running);
        return false;
    }
    sa_qmp_free(app->qmp);
    sa_libvirt_free(app->lv);
    sa_core_free(app->core);
    g_main_loop_unref(app->loop);
    return true;
}

int main(int argc, char **argv)
{
    Options o = {0};
    int rc = parse_options(&argc, &argv, &o);
    if (rc != 0)
        return rc;
    if (o.version) {
        printf("softaffd %s\n", SA_VERSION);
        return 0;
    }
    if (o.check_config) {
        rc = check_config(&o);
        g_free(o.config_path);
        return rc;
    }
    g_log_set_writer_func(log_writer, NULL, NULL);
    /* A peer that closes its socket early (control clients, QMP, libvirt) must not kill the
     * daemon: writes report EPIPE instead. */
    signal(SIGPIPE, SIG_IGN);

    /* A SIGHUP or SIGTERM during start-up must not kill the daemon: blocked until the
     * handlers are in place, then dispatched from the main loop. The handlers come after
     * the detach: g_unix_signal_add starts GLib's worker thread, which dispatches them, and
     * daemon()'s child would not have it (SIGTERM was then caught and never handled). */
    sigset_t startup_signals;
    sigemptyset(&startup_signals);
    sigaddset(&startup_signals, SIGTERM);
    sigaddset(&startup_signals, SIGINT);
    sigaddset(&startup_signals, SIGHUP);
    sigprocmask(SIG_BLOCK, &startup_signals, NULL);
    App app = {.config_path = o.config_path};
    app.loop = g_main_loop_new(NULL, FALSE);
    if (!create_core(&app, &o)) {
        rc = 1;
    } else {
        g_unix_signal_add(SIGTERM, on_sigterm, &app);
        g_unix_signal_add(SIGINT, on_sigterm, &app);
        g_unix_signal_add(SIGHUP, on_sighup, &app);
        sigprocmask(SIG_UNBLOCK, &startup_signals, NULL);
        rc = o.once ? run_once(&app) : run_daemon(&app);
    }
    g_free(o.config_path);
    if (!app_free(&app)) {
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}
