/* softaffd's control server (daemon/control-server.c), unit tests: the real server and core on a
 * fake host, clients on a socket in a temporary directory, the main loop turned by the test.
 * A client that reads its reply slowly, or not at all, must never hold the loop; it is dropped
 * at its deadline. Peers that are not root cannot take every slot (needs root: a child process
 * becomes nobody to open them). Timing checks are one-sided or generous: the machine is shared. */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <json-c/json.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control-server.h"
#include "core-bed.h"
#include "core-private.h"
#include "log-capture.h"

/* The status reply must not fit in a socket's buffers (a few hundred KiB), so that the server
 * has to wait for the reader: this many VMs with keys (uuids, not logged) this long. */
#define N_VMS 64
#define KEY_LEN 32768
/* The longest a turn of the main loop may take: serving a client must not wait for it. */
#define MAX_TURN_US (500 * 1000)
#define NOBODY 65534

typedef struct {
    FakeHost *host;
    SaCore *core;
    SaControl *control;
    RecVm *vms[N_VMS];
    char *dir, *path;
} Fx;

static void add_vms(Fx *fx)
{
    g_autofree char *tail = g_strnfill(KEY_LEN, 'x');
    for (guint i = 0; i < N_VMS; i++) {
        g_autofree char *key = g_strdup_printf("key-%u-%s", i, tail);
        g_autofree char *name = g_strdup_printf("vm%u", i);
        pid_t pid = 1000 + 10 * (pid_t)i;
        fake_host_add_process(fx->host, pid, 1);
        g_autoptr(SaVmFacts) f = rec_facts(key, name, pid, 1);
        fx->vms[i] = rec_vm_new(key, f);
        sa_core_report(fx->core, &rec_ops, fx->vms[i], g_steal_pointer(&f));
    }
    sa_core_settle(fx->core, 2000);
}

static void fx_setup(Fx *fx, gconstpointer data)
{
    g_autoptr(GError) error = NULL;
    log_capture_clear();
    fx->host = fake_host_new(NULL, 1, 2);
    fx->core = bed_core_new(sa_config_new_default(), TRUE);
    if (data)
        add_vms(fx);
    fx->dir = g_dir_make_tmp("softaff-ctl-XXXXXX", &error);
    g_assert_no_error(error);
    fx->path = g_build_filename(fx->dir, "softaffd.sock", NULL);
    fx->control = sa_control_new(fx->core, fx->path, NULL, NULL, &error);
    g_assert_no_error(error);
}

static void fx_teardown(Fx *fx, gconstpointer data)
{
    sa_control_free(fx->control);
    sa_core_settle(fx->core, 2000);
    sa_core_free(fx->core);
    for (guint i = 0; i < N_VMS; i++)
        if (fx->vms[i])
            rec_vm_unref(fx->vms[i]);
    fake_host_free(fx->host, FALSE);
    g_rmdir(fx->dir);
    g_free(fx->dir);
    g_free(fx->path);
}

/* ---- clients ---- */

static int connect_to(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(fd, >=, 0);
    strcpy(addr.sun_path, path);
    g_assert_cmpint(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
    return fd;
}

static int send_request(const char *path, const char *line)
{
    int fd = connect_to(path);
    g_assert_cmpint(send(fd, line, strlen(line), MSG_NOSIGNAL), ==, (ssize_t)strlen(line));
    return fd;
}

/* Turns the main loop once without waiting; returns how long the turn took. */
static gint64 turn(void)
{
    gint64 start = g_get_monotonic_time();
    g_main_context_iteration(NULL, FALSE);
    return g_get_monotonic_time() - start;
}

/* Reads what is there now (at most max bytes); false at end of stream. */
static bool read_some(int fd, GString *into, gsize max)
{
    char chunk[65536];
    ssize_t n = recv(fd, chunk, MIN(max, sizeof(chunk)), MSG_DONTWAIT);
    if (n > 0)
        g_string_append_len(into, chunk, n);
    return n != 0 && !(n < 0 && errno != EAGAIN && errno != EINTR);
}

/* Turns the loop (each turn short) and reads fd until end of stream or timeout_us. */
static GString *read_all(int fd, gint64 timeout_us)
{
    GString *reply = g_string_new(NULL);
    gint64 until = g_get_monotonic_time() + timeout_us;
    while (g_get_monotonic_time() < until) {
        g_assert_cmpint(turn(), <, MAX_TURN_US);
        if (!read_some(fd, reply, G_MAXSIZE))
            break;
        g_usleep(1000);
    }
    return reply;
}

static void assert_status_reply(const GString *reply)
{
    g_assert_cmpuint(reply->len, >, 0);
    g_assert_cmpint(reply->str[reply->len - 1], ==, '\n');
    json_object *o = json_tokener_parse(reply->str);
    g_assert_nonnull(o);
    json_object *ok = NULL;
    g_assert_true(json_object_object_get_ex(o, "ok", &ok));
    g_assert_true(json_object_get_boolean(ok));
    json_object_put(o);
}

/* ---- replies that do not fit in the socket ---- */

/* A client taking a few bytes now and then: the loop keeps turning, another client is answered
 * meanwhile, and the slow one still gets its whole reply once it reads. */
static void test_slow_reader(Fx *fx, gconstpointer data)
{
    g_autofree char *expected = sa_core_status_json(fx->core);
    g_assert_cmpuint(strlen(expected), >, N_VMS * KEY_LEN);
    int slow = send_request(fx->path, "{\"command\":\"status\"}\n");
    g_autoptr(GString) got = g_string_new(NULL);
    gint64 until = g_get_monotonic_time() + G_USEC_PER_SEC;
    while (g_get_monotonic_time() < until) {
        g_assert_cmpint(turn(), <, MAX_TURN_US);
        g_assert_true(read_some(slow, got, 16));
        g_usleep(10000);
    }
    g_assert_cmpuint(got->len, >, 0);
    g_assert_cmpuint(got->len, <, strlen(expected));

    int quick = send_request(fx->path, "{\"command\":\"status\"}\n");
    g_autoptr(GString) reply = read_all(quick, 3 * G_USEC_PER_SEC);
    assert_status_reply(reply);
    close(quick);

    g_autoptr(GString) rest = read_all(slow, 3 * G_USEC_PER_SEC);
    g_string_append_len(got, rest->str, rest->len);
    assert_status_reply(got);
    close(slow);
    g_assert_cmpuint(log_count("dropped"), ==, 0);
}

/* A client that never reads its reply is dropped at the reply's deadline, with one line. */
static void test_stalled_reader(Fx *fx, gconstpointer data)
{
    int fd = send_request(fx->path, "{\"command\":\"status\"}\n");
    gint64 start = g_get_monotonic_time();
    while (log_count("dropped") == 0 && g_get_monotonic_time() - start < 15 * G_USEC_PER_SEC) {
        g_assert_cmpint(turn(), <, MAX_TURN_US);
        g_usleep(2000);
    }
    gint64 waited = g_get_monotonic_time() - start;
    g_assert_cmpint(waited, >=, 4 * G_USEC_PER_SEC);
    g_assert_cmpint(waited, <, 12 * G_USEC_PER_SEC);
    g_assert_cmpuint(log_count("dropped the client of uid"), ==, 1);
    g_assert_nonnull(strstr(log_captured(), "-byte reply in 5000 ms"));
    /* What was sent is there, then the end: no whole reply. */
    g_autoptr(GString) got = read_all(fd, 3 * G_USEC_PER_SEC);
    g_assert_cmpuint(got->len, >, 0);
    g_assert_cmpint(got->str[got->len - 1], !=, '\n');
    close(fd);
}

/* Half a request: an error line at the request's deadline, then the end. */
static void test_slow_request(Fx *fx, gconstpointer data)
{
    int fd = send_request(fx->path, "{\"command\":");
    gint64 start = g_get_monotonic_time();
    g_autoptr(GString) got = read_all(fd, 10 * G_USEC_PER_SEC);
    g_assert_cmpint(g_get_monotonic_time() - start, >=, 1900 * 1000);
    g_assert_nonnull(strstr(got->str, "\"ok\":false"));
    g_assert_nonnull(strstr(got->str, "request not complete within 2000 ms"));
    g_assert_cmpuint(log_count("dropped the client of uid"), ==, 1);
    close(fd);
}

/* ---- slots ---- */

/* The server's OPEN_SLOTS: what peers other than root may hold at once. */
#define OPEN_SLOTS 15
#define NOBODY_CONNECTIONS 20

/* Turns the loop until fd is readable (false after timeout_us). */
static bool turn_until_readable(int fd, gint64 timeout_us)
{
    gint64 until = g_get_monotonic_time() + timeout_us;
    while (g_get_monotonic_time() < until) {
        turn();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 1) > 0)
            return true;
    }
    return false;
}

/* The child: becomes nobody, opens its connections and sends nothing; when told, counts those
 * that were refused. Plain system calls only (the parent has threads). */
static void nobody_child(const char *path, int up, int down)
{
    int fds[NOBODY_CONNECTIONS];
    char b = 'c';
    guint refused = 0;
    /* Gone when the parent is (end of file on down), or at the latest in 30 s. */
    alarm(30);
    if (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
        _exit(2);
    for (guint i = 0; i < NOBODY_CONNECTIONS; i++) {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        strcpy(addr.sun_path, path);
        fds[i] = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&addr, sizeof(addr)) != 0)
            _exit(3);
    }
    if (write(up, &b, 1) != 1 || read(down, &b, 1) != 1)
        _exit(4);
    for (guint i = 0; i < NOBODY_CONNECTIONS; i++) {
        char buf[512];
        ssize_t n = recv(fds[i], buf, sizeof(buf) - 1, MSG_DONTWAIT);
        buf[MAX(n, 0)] = '\0';
        refused += strstr(buf, "too many clients") != NULL;
    }
    _exit(write(up, &refused, sizeof(refused)) == sizeof(refused) ? 0 : 5);
}

/* Peers that are not root fill their slots; root still gets in and is answered. */
static void test_root_slot(Fx *fx, gconstpointer data)
{
    if (geteuid() != 0) {
        g_test_skip("needs root (a child becomes nobody)");
        return;
    }
    int up[2], down[2];
    g_assert_cmpint(pipe(up), ==, 0);
    g_assert_cmpint(pipe(down), ==, 0);
    g_assert_cmpint(g_chmod(fx->dir, 0755), ==, 0);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        close(up[0]);
        close(down[1]);
        nobody_child(fx->path, up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    char b = 0;
    g_assert_true(turn_until_readable(up[0], 10 * G_USEC_PER_SEC));
    g_assert_cmpint(read(up[0], &b, 1), ==, 1);
    for (int i = 0; i < 50; i++, g_usleep(1000))
        turn();

    int fd = send_request(fx->path, "{\"command\":\"status\"}\n");
    g_autoptr(GString) reply = read_all(fd, 3 * G_USEC_PER_SEC);
    assert_status_reply(reply);
    close(fd);

    guint refused = 0;
    g_assert_cmpint(write(down[1], "g", 1), ==, 1);
    g_assert_true(turn_until_readable(up[0], 10 * G_USEC_PER_SEC));
    g_assert_cmpint(read(up[0], &refused, sizeof(refused)), ==, sizeof(refused));
    int status = 0;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_cmpuint(refused, ==, NOBODY_CONNECTIONS - OPEN_SLOTS);
    close(up[0]);
    close(down[1]);
}

/* ---- out of descriptors ---- */

/* accept fails with EMFILE: the listening socket is left alone for a while (the loop does not
 * spin on it), one warning; the waiting client is served once descriptors are free. */
static void test_emfile(Fx *fx, gconstpointer data)
{
    struct rlimit saved, low;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(getrlimit(RLIMIT_NOFILE, &saved), ==, 0);
    low = saved;
    low.rlim_cur = MIN(saved.rlim_cur, 256);
    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &low), ==, 0);
    g_autoptr(GArray) fillers = g_array_new(FALSE, FALSE, sizeof(int));
    for (int f; (f = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;)
        g_array_append_val(fillers, f);
    g_assert_cmpint(errno, ==, EMFILE);

    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, fx->path);
    g_assert_cmpint(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
    guint dispatched = 0;
    gint64 until = g_get_monotonic_time() + G_USEC_PER_SEC;
    while (g_get_monotonic_time() < until) {
        dispatched += g_main_context_iteration(NULL, FALSE);
        g_usleep(1000);
    }
    /* A spinning accept is dispatched on every turn (hundreds); backing off, a few times. */
    g_assert_cmpuint(dispatched, <, 50);
    g_assert_cmpuint(log_count("cannot accept a connection"), ==, 1);

    for (guint i = 0; i < fillers->len; i++)
        close(g_array_index(fillers, int, i));
    g_assert_cmpint(setrlimit(RLIMIT_NOFILE, &saved), ==, 0);
    const char *line = "{\"command\":\"status\"}\n";
    g_assert_cmpint(send(fd, line, strlen(line), MSG_NOSIGNAL), ==, (ssize_t)strlen(line));
    g_autoptr(GString) reply = read_all(fd, 3 * G_USEC_PER_SEC);
    assert_status_reply(reply);
    g_assert_cmpuint(log_count("accepting connections again"), ==, 1);
    close(fd);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    /* The server warns on purpose (out of descriptors): warnings are captured, not fatal. */
    log_capture_start();
    static const int with_vms = 1;
#define ADD(name, vms, fn) g_test_add("/server/" name, Fx, vms, fx_setup, fn, fx_teardown)
    ADD("slow-reader", &with_vms, test_slow_reader);
    ADD("stalled-reader", &with_vms, test_stalled_reader);
    ADD("slow-request", NULL, test_slow_request);
    ADD("root-slot", NULL, test_root_slot);
    ADD("emfile", NULL, test_emfile);
#undef ADD
    return g_test_run();
}
