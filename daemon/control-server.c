/* softaffd — the control socket: one JSON request per connection, one JSON reply. */
#define G_LOG_DOMAIN "softaffd"

#include "control-server.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <json-c/json.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sa-config-defs.h"
#include "sa-error.h"

#define CLIENT_TIMEOUT_MS 2000
#define MAX_CLIENTS 16

typedef struct {
    SaControl *control;
    int fd;
    uid_t uid;
    pid_t pid;
    GString *buf;
    guint watch;
    guint timeout;
} Client;

struct SaControl {
    SaDaemon *d;
    char *path;
    int fd;
    guint watch;
    GList *clients;
    SaControlActionFunc action;
    gpointer action_data;
};

static json_object *json_cpuset(const SaCpuSet *set)
{
    if (!set)
        return NULL;
    g_autofree char *text = sa_cpuset_format(set);
    return json_object_new_string(text);
}

static json_object *json_time(gint64 wall_us)
{
    g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(wall_us / G_USEC_PER_SEC);
    if (!t)
        return NULL;
    g_autofree char *s = g_date_time_format_iso8601(t);
    return json_object_new_string(s);
}

static json_object *vm_json(SaDaemon *d, SaVm *vm)
{
    const SaVmPolicyState *st = &vm->pvm.st;
    json_object *o = json_object_new_object();
    bool managed = vm->status == SA_VM_MANAGED;
    json_object_object_add(o, "name", json_object_new_string(vm->name));
    json_object_object_add(o, "uuid", json_object_new_string(vm->key));
    json_object_object_add(o, "backend", json_object_new_string(vm->ops->name));
    const char *state = sa_vm_status_to_string(vm->status);
    if (managed && st->placed)
        state = sa_vm_state_to_string(st->state);
    json_object_object_add(o, "state", json_object_new_string(state));
    json_object_object_add(o, "reason",
                           vm->status_reason ? json_object_new_string(vm->status_reason) : NULL);
    json_object_object_add(o, "mode", json_object_new_string(sa_mode_to_string(vm->metadata.mode)));
    json_object_object_add(o, "preferred",
                           vm->metadata.preferred >= 0 ? json_object_new_int(vm->metadata.preferred)
                                                       : json_object_new_string("auto"));
    int softness =
        vm->metadata.softness >= 0 ? vm->metadata.softness : (int)d->cfg->policy.softness;
    json_object_object_add(o, "softness", json_object_new_int(softness));
    json_object_object_add(o, "home",
                           managed && st->home >= 0 ? json_object_new_int(st->home) : NULL);
    json_object_object_add(o, "vcpu_count", json_object_new_int((int)vm->n_vcpus));
    json_object_object_add(o, "allowed", json_cpuset(vm->allowed));
    json_object_object_add(o, "vcpus", managed ? json_cpuset(st->vcpus) : NULL);
    json_object_object_add(o, "emulator", managed ? json_cpuset(st->emulator) : NULL);
    json_object *visited = json_object_new_array();
    for (guint i = 0; managed && st->visited && i < st->visited->len; i++)
        json_object_array_add(visited,
                              json_object_new_int((int)g_array_index(st->visited, guint, i)));
    json_object_object_add(o, "visiting", visited);
    json_object_object_add(o, "home_share",
                           vm->run_ns_total ? json_object_new_double((double)vm->run_ns_home /
                                                                     (double)vm->run_ns_total)
                                            : NULL);
    json_object_object_add(o, "bursts", json_object_new_uint64(st->bursts));
    json_object_object_add(o, "retreats", json_object_new_uint64(st->retreats));
    json_object_object_add(o, "changes", json_object_new_uint64(st->changes));
    json_object_object_add(o, "run_delay_cpus", json_object_new_double(vm->run_delay_now));
    json_object_object_add(o, "run_delay_seconds_total",
                           json_object_new_double(vm->delay_ns_total / 1e9));
    json_object_object_add(o, "run_seconds_total", json_object_new_double(vm->run_ns_total / 1e9));
    json_object_object_add(o, "seconds_home", json_object_new_double(vm->seconds_home));
    json_object_object_add(o, "seconds_burst", json_object_new_double(vm->seconds_burst));
    json_object_object_add(o, "pid", vm->pid > 0 ? json_object_new_int(vm->pid) : NULL);
    json_object *threads = json_object_new_array();
    for (guint i = 0; i < vm->vcpu_threads->len; i++) {
        SaThreadSampler *t = g_ptr_array_index(vm->vcpu_threads, i);
        json_object_array_add(threads, t ? json_object_new_int(sa_thread_sampler_tid(t)) : NULL);
    }
    json_object_object_add(o, "vcpu_tids", threads);
    return o;
}

static char *to_line(json_object *o)
{
    char *line = g_strdup_printf(
        "%s\n",
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return line;
}

char *sa_control_status_json(SaDaemon *d)
{
    json_object *root = json_object_new_object();
    json_object_object_add(root, "ok", json_object_new_boolean(1));
    json_object *daemon = json_object_new_object();
    json_object_object_add(daemon, "version", json_object_new_string(SA_VERSION));
    json_object_object_add(daemon, "started", json_time(d->started_us));
    json_object_object_add(daemon, "ticks", json_object_new_uint64(d->ticks));
    json_object_object_add(daemon, "interval_ms", json_object_new_int((int)d->cfg->interval_ms));
    json_object_object_add(daemon, "layout",
                           json_object_new_string(sa_layout_to_string(d->topo->layout)));
    json_object_object_add(daemon, "dry_run", json_object_new_boolean(d->dry_run));
    json_object_object_add(daemon, "tick_cpu_ms", json_object_new_double(d->last_tick_cpu_ms));
    json_object_object_add(root, "daemon", daemon);

    g_autoptr(GPtrArray) vms = sa_daemon_sorted_vms(d);
    json_object *jvms = json_object_new_array();
    for (guint i = 0; i < vms->len; i++)
        json_object_array_add(jvms, vm_json(d, g_ptr_array_index(vms, i)));
    json_object_object_add(root, "vms", jvms);

    json_object *parts = json_object_new_array();
    for (guint p = 0; p < d->topo->partitions->len; p++) {
        const SaPartition *part = g_ptr_array_index(d->topo->partitions, p);
        const SaPartitionUsage *u = &d->usage[p];
        guint ncpu = sa_cpuset_count(part->cpus);
        json_object *jp = json_object_new_object();
        json_object_object_add(jp, "id", json_object_new_int((int)part->id));
        json_object_object_add(jp, "cpus", json_cpuset(part->cpus));
        json_object_object_add(jp, "cpu_count", json_object_new_int((int)ncpu));
        json_object_object_add(jp, "owners", json_object_new_double(u->owners));
        json_object_object_add(jp, "visitors", json_object_new_double(u->visitors));
        json_object_object_add(jp, "unmanaged", json_object_new_double(u->unmanaged));
        json_object_object_add(
            jp, "utilization",
            json_object_new_double(ncpu ? (u->owners + u->visitors + u->unmanaged) / ncpu : 0));
        json_object_object_add(jp, "owner_vcpus", json_object_new_int((int)u->owner_vcpus));
        json_object *homes = json_object_new_array();
        json_object *visitors = json_object_new_array();
        for (guint i = 0; i < vms->len; i++) {
            SaVm *vm = g_ptr_array_index(vms, i);
            const SaVmPolicyState *st = &vm->pvm.st;
            if (vm->status != SA_VM_MANAGED || !st->placed)
                continue;
            if (st->home == (int)part->id)
                json_object_array_add(homes, json_object_new_string(vm->name));
            for (guint k = 0; st->visited && k < st->visited->len; k++)
                if (g_array_index(st->visited, guint, k) == part->id)
                    json_object_array_add(visitors, json_object_new_string(vm->name));
        }
        json_object_object_add(jp, "home_vms", homes);
        json_object_object_add(jp, "visitor_vms", visitors);
        json_object_array_add(parts, jp);
    }
    json_object_object_add(root, "partitions", parts);
    return to_line(root);
}

static SaVm *find_vm(SaDaemon *d, const char *domain)
{
    SaVm *vm = sa_daemon_lookup(d, domain);
    if (vm)
        return vm;
    GHashTableIter it;
    gpointer value;
    g_hash_table_iter_init(&it, d->vms);
    while (g_hash_table_iter_next(&it, NULL, &value))
        if (g_strcmp0(((SaVm *)value)->name, domain) == 0)
            return value;
    return NULL;
}

char *sa_control_show_json(SaDaemon *d, const char *domain, GError **error)
{
    SaVm *vm = find_vm(d, domain);
    if (!vm) {
        g_set_error(error, SA_ERROR, SA_ERROR_NOT_FOUND,
                    "no running VM named \"%s\" is known to softaffd", domain);
        return NULL;
    }
    json_object *root = json_object_new_object();
    json_object_object_add(root, "ok", json_object_new_boolean(1));
    json_object *o = vm_json(d, vm);
    json_object *decisions = json_object_new_array();
    for (GList *l = vm->decisions->head; l; l = l->next) {
        const SaDecision *dec = l->data;
        json_object *jd = json_object_new_object();
        json_object_object_add(jd, "time", json_time(dec->wall_us));
        json_object_object_add(jd, "state",
                               json_object_new_string(sa_vm_state_to_string(dec->state)));
        json_object_object_add(jd, "home", json_object_new_int(dec->home));
        json_object_object_add(jd, "vcpus", json_object_new_string(dec->vcpus));
        json_object_object_add(jd, "reason", json_object_new_string(dec->reason));
        json_object_array_add(decisions, jd);
    }
    json_object_object_add(o, "decisions", decisions);
    json_object_object_add(root, "vm", o);
    return to_line(root);
}

static char *error_reply(const char *message)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "ok", json_object_new_boolean(0));
    json_object_object_add(o, "error", json_object_new_string(message));
    return to_line(o);
}

static void client_free(Client *c)
{
    if (c->watch)
        g_source_remove(c->watch);
    if (c->timeout)
        g_source_remove(c->timeout);
    if (c->fd >= 0)
        close(c->fd);
    g_string_free(c->buf, TRUE);
    c->control->clients = g_list_remove(c->control->clients, c);
    g_free(c);
}

static void send_reply(Client *c, const char *reply)
{
    /* The reply is written in one go; a peer that does not read gets cut off by the timeout. */
    int flags = fcntl(c->fd, F_GETFL);
    fcntl(c->fd, F_SETFL, flags & ~O_NONBLOCK);
    struct timeval tv = {.tv_sec = 2};
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    gsize len = strlen(reply), off = 0;
    while (off < len) {
        ssize_t n = send(c->fd, reply + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        off += (gsize)n;
    }
}

static char *handle(SaControl *ctl, Client *c)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(SaControlRequest) req = sa_control_request_parse(c->buf->str, c->buf->len, &error);
    if (!req)
        return error_reply(error->message);
    if (sa_control_command_needs_root(req->command) && c->uid != 0) {
        g_autofree char *msg =
            g_strdup_printf("command \"%s\" needs root (peer uid %u)",
                            sa_control_command_to_string(req->command), (unsigned)c->uid);
        return error_reply(msg);
    }
    switch (req->command) {
    case SA_CONTROL_STATUS:
        return sa_control_status_json(ctl->d);
    case SA_CONTROL_SHOW: {
        char *reply = sa_control_show_json(ctl->d, req->domain, &error);
        return reply ? reply : error_reply(error->message);
    }
    case SA_CONTROL_VM_EVENT:
    case SA_CONTROL_RELOAD:
        if (!ctl->action || !ctl->action(req, ctl->action_data, &error))
            return error_reply(error ? error->message : "not supported by this daemon");
        return g_strdup("{\"ok\":true}\n");
    }
    return error_reply("unknown command");
}

static gboolean client_timeout(gpointer data)
{
    Client *c = data;
    c->timeout = 0;
    g_autofree char *reply = error_reply("request not complete within 2 s");
    send_reply(c, reply);
    client_free(c);
    return G_SOURCE_REMOVE;
}

static gboolean client_readable(int fd, GIOCondition cond, gpointer data)
{
    Client *c = data;
    char chunk[4096];
    ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return G_SOURCE_CONTINUE;
    bool eof = n <= 0;
    if (n > 0)
        g_string_append_len(c->buf, chunk, n);
    const char *nl = memchr(c->buf->str, '\n', c->buf->len);
    if (!nl && c->buf->len > SA_CONTROL_MAX_REQUEST) {
        c->watch = 0;
        g_autofree char *reply = error_reply("request larger than 65536 bytes");
        send_reply(c, reply);
        client_free(c);
        return G_SOURCE_REMOVE;
    }
    if (!nl && !eof)
        return G_SOURCE_CONTINUE;
    if (nl)
        g_string_truncate(c->buf, (gsize)(nl - c->buf->str));
    c->watch = 0;
    if (c->buf->len > 0) {
        g_autofree char *reply = handle(c->control, c);
        send_reply(c, reply);
    }
    client_free(c);
    return G_SOURCE_REMOVE;
}

static gboolean accept_cb(int fd, GIOCondition cond, gpointer data)
{
    SaControl *ctl = data;
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (cfd < 0)
        return G_SOURCE_CONTINUE;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    if (g_list_length(ctl->clients) >= MAX_CLIENTS) {
        g_autofree char *reply = error_reply("too many clients, try again");
        send(cfd, reply, strlen(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
        close(cfd);
        return G_SOURCE_CONTINUE;
    }
    Client *c = g_new0(Client, 1);
    c->control = ctl;
    c->fd = cfd;
    c->uid = cred.uid;
    c->pid = cred.pid;
    c->buf = g_string_new(NULL);
    c->watch = g_unix_fd_add(cfd, G_IO_IN | G_IO_HUP | G_IO_ERR, client_readable, c);
    c->timeout = g_timeout_add(CLIENT_TIMEOUT_MS, client_timeout, c);
    ctl->clients = g_list_prepend(ctl->clients, c);
    return G_SOURCE_CONTINUE;
}

SaControl *sa_control_new(SaDaemon *d, const char *path, SaControlActionFunc action,
                          gpointer user_data, GError **error)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(addr.sun_path)) {
        g_set_error(error, SA_ERROR, SA_ERROR_CONFIG, "control socket path %s is too long", path);
        return NULL;
    }
    g_autofree char *dir = g_path_get_dirname(path);
    if (g_mkdir_with_parents(dir, 0755) < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot create %s: %s", dir, g_strerror(errno));
        return NULL;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "socket: %s", g_strerror(errno));
        return NULL;
    }
    /* A socket file nobody answers on is stale; one that answers belongs to a running daemon. */
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
        close(probe);
        close(fd);
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "another softaffd is already listening on %s",
                    path);
        return NULL;
    }
    if (probe >= 0)
        close(probe);
    unlink(path);
    mode_t old = umask(0);
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
    umask(old);
    if (rc < 0 || listen(fd, 16) < 0) {
        g_set_error(error, SA_ERROR, SA_ERROR_IO, "cannot listen on %s: %s", path,
                    g_strerror(errno));
        close(fd);
        return NULL;
    }
    chmod(path, 0666);
    SaControl *ctl = g_new0(SaControl, 1);
    ctl->d = d;
    ctl->path = g_strdup(path);
    ctl->fd = fd;
    ctl->action = action;
    ctl->action_data = user_data;
    ctl->watch = g_unix_fd_add(fd, G_IO_IN, accept_cb, ctl);
    return ctl;
}

void sa_control_free(SaControl *ctl)
{
    if (!ctl)
        return;
    while (ctl->clients)
        client_free(ctl->clients->data);
    if (ctl->watch)
        g_source_remove(ctl->watch);
    close(ctl->fd);
    unlink(ctl->path);
    g_free(ctl->path);
    g_free(ctl);
}
