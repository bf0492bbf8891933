/* A report when the job is stopped: SIGTERM (Slurm at a time limit, torchrun stopping its ranks,
 * `kill`) and SIGINT (Ctrl-C) end a process without its exit handlers, so the run's report would
 * be lost, or stay the one written at an earlier failure.
 *
 * Nothing that writes a report is async-signal-safe (it takes locks and allocates), so the
 * handler only writes the signal's number into a pipe and waits, with poll (async-signal-safe),
 * until a thread of ours, started with the first allocation and blocked on that pipe until then,
 * has written the report with reason "signal", for at most STOP_WAIT_MS: the thread may need a
 * lock that the interrupted thread holds, which it gets once the handler has returned. Then:
 * - the program had a handler of its own (Python's for SIGINT, a framework's): it is called, and
 *   the program goes on as it would have; if it exits normally, its exit report comes last;
 * - the disposition was the default: the default is put back and the signal raised again, so the
 *   process ends by it, with the status its parent expects (128 + N in a shell);
 * - it was ignored: nothing is installed.
 * A program that installs its own handler later replaces ours, as it would any other. A forked
 * child inherits the handler but not the thread: the fork child handler puts the old
 * dispositions back (vw_signals_after_fork_child), and a child made without fork handlers
 * (a raw clone) that gets the signal in ours does the same and raises it again at once, as if
 * we were not there. */
#include "interpose.h"
#include "live.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static const int stop_signals[] = { SIGTERM, SIGINT };
#define NSIG_STOP (sizeof(stop_signals) / sizeof(stop_signals[0]))

static struct sigaction previous[NSIG_STOP];
static bool installed[NSIG_STOP];
static int pipe_fd[2] = { -1, -1 }; /* handler -> thread: the signal */
static int done_fd[2] = { -1, -1 }; /* thread -> handler: the report is written */
#define STOP_WAIT_MS 5000
static pid_t owner;
/* Once the exit report is being written, a stop signal's report would come after it and say less
 * (the exit report is the later, fuller one): the watcher checks this under stop_lock. */
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static bool exiting;

static int slot_of(int sig)
{
    for (size_t i = 0; i < NSIG_STOP; i++)
        if (stop_signals[i] == sig)
            return (int)i;
    return -1;
}

static bool is_default(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

static void on_stop(int sig, siginfo_t *info, void *uctx)
{
    int saved = errno;
    int i = slot_of(sig);
    if (i < 0) {
        errno = saved;
        return;
    }
    if (getpid() != owner) {
        /* a forked child: our thread is not here; behave as without us */
        sigaction(sig, &previous[i], NULL);
        raise(sig);
        errno = saved;
        return;
    }
    unsigned char b = (unsigned char)sig;
    if (write(pipe_fd[1], &b, 1) == 1) {
        struct pollfd pf = { .fd = done_fd[0], .events = POLLIN };
        if (poll(&pf, 1, STOP_WAIT_MS) == 1 && (pf.revents & POLLIN)) {
            ssize_t r = read(done_fd[0], &b, 1);
            (void)r;
        }
    }
    const struct sigaction *p = &previous[i];
    if (is_default(p)) {
        /* the job was to end by this signal: now it does, once the handler returns */
        sigaction(sig, p, NULL);
        raise(sig);
    } else if (p->sa_flags & SA_SIGINFO) {
        if (p->sa_sigaction)
            p->sa_sigaction(sig, info, uctx);
    } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
        p->sa_handler(sig);
    }
    errno = saved;
}

/* Also keeps the live-state file up to date (live.c): at once, then every VW_LIVE_INTERVAL_MS
 * while no signal comes. */
static void *watcher(void *arg)
{
    (void)arg;
    vw_live_tick();
    for (;;) {
        struct pollfd pf = { .fd = pipe_fd[0], .events = POLLIN };
        int ready = poll(&pf, 1, VW_LIVE_INTERVAL_MS);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready == 0) {
            vw_live_tick();
            continue;
        }
        unsigned char b;
        ssize_t n = ready < 0 ? -1 : read(pipe_fd[0], &b, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1)
            return NULL;
        int sig = b, i = slot_of(sig);
        if (i < 0)
            continue;
        pthread_mutex_lock(&stop_lock);
        if (!exiting && core_touched())
            vw_write_report("signal");
        pthread_mutex_unlock(&stop_lock);
        ssize_t w = write(done_fd[1], &b, 1);
        (void)w;
    }
}

/* The fork child handler: the child has no watcher thread, so where our handler is still the one
 * installed, the disposition it replaced is put back before the child runs any code of its own.
 * Doing it here rather than in the handler matters: a signal that reaches a forked worker (a
 * DataLoader or multiprocessing pool being terminated) must act as it would without us, even
 * where a sanitizer's runtime defers handlers and a restarted wait would never see the
 * re-raised signal (seen under ThreadSanitizer: pool workers left blocked in sem_wait, their
 * SIGTERM lost). A handler the application installed after ours is left alone. */
void vw_signals_after_fork_child(void)
{
    for (size_t i = 0; i < NSIG_STOP; i++) {
        if (!installed[i])
            continue;
        struct sigaction cur;
        if (sigaction(stop_signals[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
            cur.sa_sigaction == on_stop)
            sigaction(stop_signals[i], &previous[i], NULL);
        installed[i] = false;
    }
}

void vw_signals_exiting(void)
{
    pthread_mutex_lock(&stop_lock);
    exiting = true;
    pthread_mutex_unlock(&stop_lock);
}

void vw_signals_install(void)
{
    owner = getpid();
    if (pipe2(pipe_fd, O_CLOEXEC) != 0)
        return;
    if (pipe2(done_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        return;
    }
    fcntl(pipe_fd[1], F_SETFL,
          O_NONBLOCK); /* a full pipe drops the byte, never blocks the handler */
    sigset_t all, old;
    sigfillset(&all);
    /* the thread takes no signal of the application's */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t t;
    int rc = pthread_create(&t, &attr, watcher, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(pipe_fd[0]);
        close(pipe_fd[1]);
        close(done_fd[0]);
        close(done_fd[1]);
        pipe_fd[0] = pipe_fd[1] = done_fd[0] = done_fd[1] = -1;
        return;
    }
    for (size_t i = 0; i < NSIG_STOP; i++) {
        if (sigaction(stop_signals[i], NULL, &previous[i]) != 0)
            continue;
        if (!(previous[i].sa_flags & SA_SIGINFO) && previous[i].sa_handler == SIG_IGN)
            continue; /* ignored: the job is not stopped by it, nothing to report */
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_stop;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | (previous[i].sa_flags & SA_ONSTACK);
        sa.sa_mask = previous[i].sa_mask;
        installed[i] = sigaction(stop_signals[i], &sa, NULL) == 0;
    }
}
