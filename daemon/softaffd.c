/* softaffd — the soft-affinity monitor daemon for libvirt VMs. */
#define G_LOG_DOMAIN "softaffd"

#include <errno.h>
#include <glib-unix.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <syslog.h>
#include <unistd.h>

#include "backend-libvirt.h"
#include "backend-qmp.h"
#include "control-server.h"
#include "core.h"
#include "sa-config-defs.h"
#include "sa-error.h"

typedef struct {
    SaDaemon *d;
    SaLibvirt *lv;
    SaQmp *qmp; /* backend=qmp|both */
    SaControl *control;
    GMainLoop *loop;
    char *config_path;
    guint tick_source;
    int exit_code;
} App;

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
    sa_daemon_tick(app->d);
    return G_SOURCE_CONTINUE;
}

static gboolean on_sigterm(gpointer data)
{
    App *app = data;
    g_info("terminating: restoring every VM softaff changed");
    sa_daemon_restore_all(app->d);
    g_main_loop_quit(app->loop);
    return G_SOURCE_REMOVE;
}

static gboolean on_sighup(gpointer data)
{
    App *app = data;
    g_autoptr(GError) error = NULL;
    g_autoptr(SaConfig) cfg = sa_config_load(app->config_path, &error);
    if (!cfg) {
        g_warning("reload refused, keeping the running configuration: %s", error->message);
        return G_SOURCE_CONTINUE;
    }
    g_autoptr(SaTopology) topo = sa_topology_load(cfg->layout, cfg->custom, &error);
    if (!topo) {
        g_warning("reload refused, keeping the running configuration: %s", error->message);
        return G_SOURCE_CONTINUE;
    }
    if (g_strcmp0(cfg->uri, app->d->cfg->uri) != 0)
        g_warning("reload: [daemon] uri changed to %s; restart softaffd to use it", cfg->uri);
    guint old_interval = app->d->cfg->interval_ms;
    sa_daemon_reload(app->d, g_steal_pointer(&cfg), g_steal_pointer(&topo));
    if (app->d->cfg->interval_ms != old_interval) {
        g_source_remove(app->tick_source);
        app->tick_source = g_timeout_add(app->d->cfg->interval_ms, tick_cb, app);
    }
    if (app->lv)
        sa_libvirt_sync(app->lv);
    if (app->qmp)
        sa_qmp_sync(app->qmp);
    g_info("configuration reloaded (layout %s, %u partitions, interval %u ms)",
           sa_layout_to_string(app->d->topo->layout), app->d->topo->partitions->len,
           app->d->cfg->interval_ms);
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
    SaVm *vm = req->uuid ? sa_daemon_lookup(app->d, req->uuid) : NULL;
    switch (req->event) {
    case SA_VM_EVENT_PREPARE:
        g_info("%s: starting (hook)", req->domain);
        break;
    case SA_VM_EVENT_STARTED:
        g_info("%s: started (hook)%s", req->domain, vm ? ", already known" : "");
        break;
    case SA_VM_EVENT_STOPPED:
    case SA_VM_EVENT_RELEASE:
        if (vm) {
            g_info("%s: %s (hook); forgotten", req->domain, sa_vm_event_to_string(req->event));
            sa_daemon_remove(app->d, req->uuid, false);
        }
        break;
    }
    return true;
}

int main(int argc, char **argv)
{
    gboolean foreground = FALSE, once = FALSE, dry_run = FALSE, version = FALSE;
    char *config_path = NULL;
    GOptionEntry entries[] = {
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &config_path,
         "Configuration file (default $SOFTAFF_CONFIG or " SA_DEFAULT_CONFIG ")", "FILE"},
        {"foreground", 'f', 0, G_OPTION_ARG_NONE, &foreground,
         "Stay in the foreground and log to stderr (default: detach and log to syslog, "
         "unless stderr is the journal)",
         NULL},
        {"once", 0, 0, G_OPTION_ARG_NONE, &once,
         "Place every VM once (one tick), then exit without restoring", NULL},
        {"dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run, "Decide and log, change nothing", NULL},
        {"verbose", 'v', 0, G_OPTION_ARG_NONE, &opt_verbose, "Log debug messages too", NULL},
        {"version", 'V', 0, G_OPTION_ARG_NONE, &version, "Print the version and exit", NULL},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("- soft CPU affinity for libvirt VMs");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "softaffd: %s\n", error->message);
        return 2;
    }
    if (argc > 1) {
        fprintf(stderr, "softaffd: unexpected argument '%s'\n", argv[1]);
        return 2;
    }
    if (version) {
        printf("softaffd %s\n", SA_VERSION);
        return 0;
    }
    g_log_set_writer_func(log_writer, NULL, NULL);

    g_autoptr(SaConfig) cfg = sa_config_load(config_path, &error);
    if (!cfg) {
        fprintf(stderr, "softaffd: %s\n", error->message);
        return 1;
    }
    g_autoptr(SaTopology) topo = sa_topology_load(cfg->layout, cfg->custom, &error);
    if (!topo) {
        fprintf(stderr, "softaffd: %s\n", error->message);
        return 1;
    }
    if (!foreground && !once && !g_log_writer_is_journald(fileno(stderr))) {
        if (daemon(0, 0) < 0) {
            fprintf(stderr, "softaffd: cannot detach: %s\n", g_strerror(errno));
            return 1;
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
        return 1;
    }

    /* Handlers first: a SIGHUP or SIGTERM during start-up must not kill the daemon; they
     * are dispatched from the main loop, once everything below is in place. */
    App app = {0};
    app.config_path = config_path;
    g_unix_signal_add(SIGTERM, on_sigterm, &app);
    g_unix_signal_add(SIGINT, on_sigterm, &app);
    g_unix_signal_add(SIGHUP, on_sighup, &app);
    g_autofree char *uri = g_strdup(cfg->uri);
    g_info("softaffd %s starting: layout %s, %u partitions, interval %u ms%s", SA_VERSION,
           sa_layout_to_string(topo->layout), topo->partitions->len, cfg->interval_ms,
           dry_run ? ", dry run" : "");
    app.d = sa_daemon_new(g_steal_pointer(&cfg), g_steal_pointer(&topo), dry_run, &error);
    if (!app.d) {
        g_critical("%s", error->message);
        return 1;
    }
    if (app.d->cfg->backend != SA_BACKEND_QMP)
        app.lv = sa_libvirt_new(app.d, uri);
    if (app.d->cfg->backend != SA_BACKEND_LIBVIRT)
        app.qmp = sa_qmp_new(app.d);
    app.loop = g_main_loop_new(NULL, FALSE);

    if (once) {
        if (app.lv && !sa_libvirt_connect(app.lv)) {
            fprintf(stderr, "softaffd: --once: cannot connect to %s\n", uri);
            app.exit_code = 1;
        } else {
            if (app.qmp) {
                /* QMP sessions are asynchronous: give them a moment to introduce the VMs. */
                sa_qmp_start(app.qmp);
                gint64 until = g_get_monotonic_time() + G_USEC_PER_SEC;
                while (g_get_monotonic_time() < until)
                    if (!g_main_context_iteration(NULL, FALSE))
                        g_usleep(10000);
            }
            /* One interval so the VMs have samples, then one decision. */
            sa_daemon_tick(app.d);
            g_usleep((gulong)app.d->cfg->interval_ms * 1000);
            while (g_main_context_iteration(NULL, FALSE))
                ;
            sa_daemon_tick(app.d);
        }
    } else {
        app.control = sa_control_new(app.d, app.d->cfg->socket, control_action, &app, &error);
        if (!app.control) {
            g_critical("control socket: %s", error->message);
            sa_qmp_free(app.qmp);
            sa_libvirt_free(app.lv);
            sa_daemon_free(app.d);
            return 1;
        }
        if (app.lv)
            sa_libvirt_connect(app.lv);
        if (app.qmp)
            sa_qmp_start(app.qmp);
        app.tick_source = g_timeout_add(app.d->cfg->interval_ms, tick_cb, &app);
        g_main_loop_run(app.loop);
        g_info("stopped");
    }
    sa_control_free(app.control);
    sa_qmp_free(app.qmp);
    sa_libvirt_free(app.lv);
    sa_daemon_free(app.d);
    g_main_loop_unref(app.loop);
    g_free(config_path);
    return app.exit_code;
}
