/* softaff test guest payload: a CPU load generator controlled over a serial port.
 *
 * Runs as the guest's init payload (exec'd by /init). Protocol on the control tty
 * (default /dev/ttyS1, argv[1] overrides), one line each way:
 *   host -> guest  "N\n"      run N spinning threads (0..64) from now on (ends a pattern);
 *                             reply "ok N"
 *                  "p N ON OFF\n"  a spiky pattern from now on: N threads spin for ON ms, then
 *                             all sleep for OFF ms, repeating (N 0..64, ON 1..600000,
 *                             OFF 0..600000); reply "ok p N ON OFF"
 *                  "?\n"      reply with a report line right away (it starts the next
 *                             report's interval, so commands "N\n?\n" align reports to a step)
 *   guest -> host  "ready"                    once, when the payload has started
 *                  "work <units/s> threads <N>" every second: fixed units of integer arithmetic
 *                                             done by all threads in the last second
 *                  "spike on" / "spike off"   a pattern's phase changes (not for its first ON,
 *                                             which "ok p" marks)
 *                  "error <text>"             a malformed command
 * A unit is a fixed number of xorshift rounds, so throughput is comparable across runs.
 *
 * Build: gcc -static -O2 -pthread -o load load.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define ROUNDS_PER_UNIT 4096

struct worker {
    pthread_t thread;
    int index;
    /* Written only by the worker, read by the reporter: one cache line each. */
    _Alignas(64) volatile uint64_t units;
    char pad[64 - sizeof(uint64_t)];
};

static struct worker workers[MAX_THREADS];
static int nworkers_created;
static volatile int target; /* threads with index < target spin */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static int tty_fd = -1;
static volatile uint64_t sink;

/* The spiky pattern, run by the main loop (its poll timeout is the next phase change). */
struct pattern {
    int active, on_phase, threads;
    long on_ms, off_ms;
    double next; /* monotonic time of the next phase change */
};

static void say(const char *fmt, ...)
{
    char buf[160];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (n > (int)sizeof buf - 2)
        n = sizeof buf - 2;
    buf[n++] = '\n';
    for (int off = 0; off < n;) {
        ssize_t w = write(tty_fd, buf + off, n - off);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return;
        }
        off += w;
    }
}

static uint64_t one_unit(uint64_t x)
{
    for (int i = 0; i < ROUNDS_PER_UNIT; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t x = 0x9e3779b97f4a7c15ull + (uint64_t)w->index;
    for (;;) {
        if (w->index >= target) {
            pthread_mutex_lock(&lock);
            while (w->index >= target)
                pthread_cond_wait(&wake, &lock);
            pthread_mutex_unlock(&lock);
        }
        /* Check the target between small batches so "0" takes effect quickly. */
        for (int b = 0; b < 16 && w->index < target; b++) {
            x = one_unit(x);
            w->units = w->units + 1;
        }
        sink = x;
    }
    return NULL;
}

static int set_threads(int n)
{
    pthread_mutex_lock(&lock);
    while (nworkers_created < n) {
        struct worker *w = &workers[nworkers_created];
        w->index = nworkers_created;
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            pthread_mutex_unlock(&lock);
            return -1;
        }
        nworkers_created++;
    }
    target = n;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t total_units(void)
{
    uint64_t sum = 0;
    for (int i = 0; i < MAX_THREADS; i++)
        sum += workers[i].units;
    return sum;
}

/* "p N ON OFF": starts the pattern with its ON phase. */
static void start_pattern(struct pattern *pat, const char *args)
{
    int n;
    long on, off;
    char extra;
    if (sscanf(args, "%d %ld %ld %c", &n, &on, &off, &extra) != 3 || n < 0 || n > MAX_THREADS ||
        on < 1 || on > 600000 || off < 0 || off > 600000) {
        say("error bad pattern '%.40s' (want p N ON OFF: N 0..%d, ON 1..600000 ms, OFF "
            "0..600000 ms)",
            args, MAX_THREADS);
        return;
    }
    if (set_threads(n) < 0) {
        say("error cannot create threads");
        return;
    }
    *pat = (struct pattern){.active = 1, .on_phase = 1, .threads = n, .on_ms = on, .off_ms = off};
    pat->next = now() + on / 1000.0;
    say("ok p %d %ld %ld", n, on, off);
}

/* Switches the pattern's phase when due; keeps the schedule absolute so phases do not drift. */
static void step_pattern(struct pattern *pat)
{
    double t = now();
    if (!pat->active || t < pat->next)
        return;
    int to_on = !pat->on_phase || pat->off_ms == 0;
    pat->on_phase = to_on;
    pat->next += (to_on ? pat->on_ms : pat->off_ms) / 1000.0;
    if (pat->next < t) /* fell a whole phase behind (guest starved): restart from now */
        pat->next = t + (to_on ? pat->on_ms : pat->off_ms) / 1000.0;
    if (pat->off_ms == 0)
        return;
    set_threads(to_on ? pat->threads : 0);
    say("spike %s", to_on ? "on" : "off");
}

/* Returns 1 when the host asked for a report right away. */
static int handle_line(char *line, struct pattern *pat)
{
    size_t len = strlen(line);
    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
        line[--len] = '\0';
    while (*line == ' ')
        line++;
    if (*line == '\0')
        return 0;
    if (strcmp(line, "?") == 0)
        return 1;
    if (line[0] == 'p' && line[1] == ' ') {
        start_pattern(pat, line + 2);
        return 0;
    }
    char *end;
    errno = 0;
    long n = strtol(line, &end, 10);
    if (errno || *end != '\0' || n < 0 || n > MAX_THREADS) {
        say("error bad command '%.40s' (want 0..%d)", line, MAX_THREADS);
        return 0;
    }
    if (set_threads((int)n) < 0) {
        say("error cannot create threads");
        return 0;
    }
    pat->active = 0;
    say("ok %ld", n);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dev = argc > 1 ? argv[1] : "/dev/ttyS1";

    for (int tries = 0; (tty_fd = open(dev, O_RDWR | O_NOCTTY)) < 0; tries++) {
        if (tries == 50) {
            fprintf(stderr, "load: cannot open %s: %s\n", dev, strerror(errno));
            return 1;
        }
        usleep(100000);
    }
    struct termios t;
    if (tcgetattr(tty_fd, &t) == 0) {
        cfmakeraw(&t);
        cfsetispeed(&t, B115200);
        cfsetospeed(&t, B115200);
        t.c_cflag |= CLOCAL | CREAD;
        tcsetattr(tty_fd, TCSANOW, &t);
    }
    tcflush(tty_fd, TCIFLUSH);

    int initial = 0;
    const char *env = getenv("LOAD_THREADS");
    if (env)
        initial = atoi(env);
    if (initial < 0 || initial > MAX_THREADS)
        initial = 0;
    set_threads(initial);

    fprintf(stderr, "load: control on %s, %ld online CPUs\n", dev, sysconf(_SC_NPROCESSORS_ONLN));
    say("ready");

    char buf[256];
    size_t used = 0;
    double last = now();
    uint64_t last_units = total_units();
    double next = last + 1.0;
    struct pattern pat = {0};
    for (;;) {
        double t0 = now();
        double wake_at = pat.active && pat.next < next ? pat.next : next;
        int timeout_ms = wake_at > t0 ? (int)((wake_at - t0) * 1000) + 1 : 0;
        struct pollfd p = {.fd = tty_fd, .events = POLLIN};
        int r = poll(&p, 1, timeout_ms);
        int report_now = 0;
        if (r > 0 && (p.revents & POLLIN)) {
            ssize_t got = read(tty_fd, buf + used, sizeof buf - 1 - used);
            if (got > 0) {
                used += got;
                buf[used] = '\0';
                char *nl;
                while ((nl = memchr(buf, '\n', used)) != NULL) {
                    *nl = '\0';
                    if (handle_line(buf, &pat))
                        report_now = 1;
                    used -= nl + 1 - buf;
                    memmove(buf, nl + 1, used);
                }
                if (used == sizeof buf - 1)
                    used = 0; /* overlong garbage: drop it */
            }
        } else if (r > 0 && (p.revents & (POLLERR | POLLHUP))) {
            usleep(100000);
        }
        step_pattern(&pat);
        double t1 = now();
        if (t1 >= next || report_now) {
            uint64_t u = total_units();
            double dt = t1 - last;
            double rate = dt > 0 ? (double)(u - last_units) / dt : 0;
            say("work %.0f threads %d", rate, target);
            last = t1;
            last_units = u;
            next = t1 + 1.0;
        }
    }
}
