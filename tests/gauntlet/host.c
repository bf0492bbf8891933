/* The host attack's program: each mode does something a job does (installs signal handlers,
 * closes descriptors and opens its own, forks, clones, execs) around CUDA allocations, and prints
 * what it sees on stdout. gauntlet.py runs every mode with and without the preload: the output,
 * the exit status and the files the program made must be the same (the library's own report
 * and live-state files aside, which it checks separately).
 *
 * usage: host MODE
 *   eintr      a SIGTERM handler with sa_flags 0; a blocking read on an empty pipe after the
 *              first allocation; the test sends SIGTERM: the read must end with EINTR
 *   resethand  a SIGINT handler with SA_RESETHAND; raise(SIGINT) twice: the second ends the
 *              process by SIGINT
 *   query      handlers with their own flags and masks, then an allocation, then what
 *              sigaction() and signal() say about them
 *   fds        an allocation, close_range(3, ~0U), then a log file and a pipe of its own that
 *              get the numbers the library had; more allocations (a status file update), a
 *              SIGTERM to its own handler, the library's ticks: the file and the pipe must hold
 *              exactly what the program wrote
 *   closeexit  an allocation, a tick, descriptors 3 to 15 closed, exit(0)
 *   fork       64 MiB, then a forked child allocates 1 MiB and ends with _exit(0)
 *   forkfirst  a child forked before any CUDA call allocates 1 MiB, waits a tick, _exit(0)
 *   clone      64 MiB, then a raw clone (SIGCHLD, no fork handlers) allocates 1 MiB and exits
 *   exec       64 MiB, a tick, then exec /bin/sleep 1
 *   vfork      64 MiB, then vfork + a failing exec + _exit(7): the parent's state untouched
 *   alloc      1 MiB, a tick, exit(0)
 *   hold       1 MiB, then sleep 60 s (to be killed)
 *   nofile     every descriptor taken (RLIMIT_NOFILE 16), then the first cudaMalloc
 * Exit status 0, or what the mode says. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MiB (1ull << 20)

static volatile sig_atomic_t caught;
static void on_signal(int sig)
{
    (void)sig;
    caught++;
}
static void on_signal2(int sig)
{
    (void)sig;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    /* write(2), unbuffered: a mode that ends by a signal has said everything by then */
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0 && write(STDOUT_FILENO, buf, (size_t)n) < 0)
        exit(90);
}

static void *alloc(size_t size)
{
    void *p = NULL;
    if (cudaMalloc(&p, size) != cudaSuccess) {
        say("cudaMalloc(%zu) failed\n", size);
        exit(91);
    }
    return p;
}

static void pause_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int mode_eintr(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = 0; /* no SA_RESTART: a blocking call ends with EINTR */
    sigaction(SIGTERM, &sa, NULL);
    alloc(MiB);
    int p[2];
    if (pipe(p) != 0)
        return 2;
    say("ready\n");
    char b;
    ssize_t n = read(p[0], &b, 1);
    say("read=%zd errno=%s caught=%d\n", n, n < 0 ? strerrorname_np(errno) : "-", (int)caught);
    return 0;
}

static int mode_resethand(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
    alloc(MiB);
    raise(SIGINT);
    say("caught=%d\n", (int)caught);
    raise(SIGINT); /* the disposition is the default again: this ends the process */
    say("still running, caught=%d\n", (int)caught);
    return 0;
}

static void show(int sig, const char *name)
{
    struct sigaction cur;
    sigaction(sig, NULL, &cur);
    const char *h = (cur.sa_flags & SA_SIGINFO)         ? "siginfo?"
                    : cur.sa_handler == SIG_DFL         ? "default"
                    : cur.sa_handler == SIG_IGN         ? "ignore"
                    : cur.sa_handler == on_signal       ? "on_signal"
                    : cur.sa_handler == on_signal2      ? "on_signal2"
                                                        : "other";
    /* SA_RESTORER is libc's own business, set on every handler it installs */
    say("%s: %s flags=%#x mask:USR1=%d USR2=%d\n", name, h,
        (unsigned)(cur.sa_flags & ~0x04000000), sigismember(&cur.sa_mask, SIGUSR1),
        sigismember(&cur.sa_mask, SIGUSR2));
}

static int mode_query(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_ONSTACK | SA_NODEFER;
    sigaddset(&sa.sa_mask, SIGUSR1);
    sigaction(SIGINT, &sa, NULL);
    alloc(MiB);
    show(SIGINT, "SIGINT");
    show(SIGTERM, "SIGTERM");
    /* signal() returns the handler it replaced */
    void (*old)(int) = signal(SIGINT, on_signal2);
    say("signal(SIGINT) replaced %s\n", old == on_signal ? "on_signal" : "something else");
    show(SIGINT, "SIGINT");
    struct sigaction prev;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigaddset(&sa.sa_mask, SIGUSR2);
    sigaction(SIGTERM, &sa, &prev);
    say("sigaction(SIGTERM) replaced %s\n", (prev.sa_flags & SA_SIGINFO) ? "a siginfo handler"
                                            : prev.sa_handler == SIG_DFL ? "default"
                                                                         : "something else");
    show(SIGTERM, "SIGTERM");
    /* back to the default, then the library's next needs must not change it */
    signal(SIGTERM, SIG_DFL);
    alloc(MiB);
    show(SIGTERM, "SIGTERM");
    raise(SIGTERM);
    say("still running\n");
    return 0;
}

static int mode_fds(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    alloc(MiB);
    pause_ms(300);
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0)
        return 2;
    /* the lowest numbers again: whatever the library held there is now the program's */
    int files[6], pipes[4][2];
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof(name), "app-%d.log", i);
        files[i] = open(name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (files[i] < 0 || write(files[i], "APP\n", 4) != 4)
            return 3;
    }
    for (int i = 0; i < 4; i++)
        if (pipe2(pipes[i], O_NONBLOCK) != 0 || write(pipes[i][1], "PIPE", 4) != 4)
            return 4;
    alloc(96 * MiB); /* the peak grows: a status file would be written now */
    raise(SIGTERM);
    alloc(MiB);
    pause_ms(1500); /* the library's thread ticks */
    for (int i = 0; i < 6; i++) {
        char buf[64] = { 0 };
        ssize_t n = pread(files[i], buf, sizeof(buf) - 1, 0);
        say("file %d: %zd bytes \"%s\"\n", i, n, n == 4 && !memcmp(buf, "APP\n", 4) ? "APP" : "?");
    }
    for (int i = 0; i < 4; i++) {
        char buf[64] = { 0 };
        ssize_t n = read(pipes[i][0], buf, sizeof(buf) - 1);
        say("pipe %d: %zd bytes \"%s\"\n", i, n, n >= 0 ? buf : "");
    }
    say("caught=%d\n", (int)caught);
    return 0;
}

static int mode_closeexit(void)
{
    alloc(MiB);
    pause_ms(1300);
    for (int fd = 3; fd <= 15; fd++)
        close(fd);
    exit(0);
}

static int wait_child(pid_t pid, const char *what)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid)
        return 5;
    say("%s: %s %d\n", what, WIFEXITED(st) ? "exit" : "signal",
        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return 0;
}

static int mode_fork(void)
{
    alloc(64 * MiB);
    errno = 4242; /* fork() leaves errno alone on success, in both processes */
    pid_t pid = fork();
    int err = errno;
    if (pid == 0) {
        say("child: errno after fork %d\n", err);
        alloc(MiB);
        _exit(0);
    }
    int rc = wait_child(pid, "child");
    say("parent: errno after fork %d\n", err);
    return rc;
}

static int mode_forkfirst(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        alloc(MiB);
        pause_ms(1300);
        _exit(0);
    }
    return wait_child(pid, "child");
}

static int mode_clone(void)
{
    alloc(64 * MiB);
    pause_ms(1300);
    fflush(NULL);
    /* a raw clone: no fork handlers of anyone's run in the child */
    long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid == 0) {
        alloc(MiB);
        exit(0);
    }
    if (pid < 0)
        return 6;
    return wait_child((pid_t)pid, "child");
}

static int mode_exec(void)
{
    alloc(64 * MiB);
    pause_ms(1300);
    execl("/bin/sleep", "sleep", "1", (char *)NULL);
    return 7;
}

static int mode_vfork(void)
{
    alloc(64 * MiB);
    pause_ms(1300);
    pid_t pid = vfork();
    if (pid == 0) {
        execl("/nonexistent/program", "program", (char *)NULL);
        _exit(7);
    }
    int rc = wait_child(pid, "child");
    alloc(MiB);
    return rc;
}

static int mode_alloc(void)
{
    alloc(MiB);
    pause_ms(1300);
    return 0;
}

static int mode_hold(void)
{
    alloc(MiB);
    say("holding\n");
    pause_ms(60000);
    return 0;
}

static int mode_nofile(void)
{
    struct rlimit rl = { 16, 16 };
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 2;
    while (dup(STDIN_FILENO) >= 0)
        ;
    void *p = NULL;
    cudaError_t rc = cudaMalloc(&p, MiB);
    say("cudaMalloc with no descriptor left: %d\n", (int)rc);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 64;
    static const struct {
        const char *name;
        int (*run)(void);
    } modes[] = {
        { "eintr", mode_eintr },         { "resethand", mode_resethand }, { "query", mode_query },
        { "fds", mode_fds },             { "closeexit", mode_closeexit }, { "fork", mode_fork },
        { "forkfirst", mode_forkfirst }, { "clone", mode_clone },         { "exec", mode_exec },
        { "vfork", mode_vfork },         { "alloc", mode_alloc },         { "hold", mode_hold },
        { "nofile", mode_nofile },
    };
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            return modes[i].run();
    fprintf(stderr, "host: no mode %s\n", argv[1]);
    return 64;
}
