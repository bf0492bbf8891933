/* A report when the job is stopped: SIGTERM (Slurm at a time limit, torchrun stopping its ranks,
 * `kill`) and SIGINT (Ctrl-C) end a process without its exit handlers, so the run's report would
 * be lost, or stay the one written at an earlier failure.
 *
 * The rule: the application's signal behaviour stays exactly what it set. Our handler stands in
 * the kernel with the application's own flags (SA_RESTART only where it asked for it, its
 * SA_RESETHAND, SA_NODEFER, SA_ONSTACK) and mask, plus SA_SIGINFO, which changes nothing the
 * process can see; after the report it calls the application's handler, or ends the process by
 * the signal where the disposition was the default. sigaction() and signal() are wrapped so that
 * the application reads back what it set and what it sets is what runs: its handler, its flags,
 * our report in front. An ignored signal is left ignored: nothing stops the job, nothing to
 * report.
 *
 * Nothing that writes a report is async-signal-safe (it takes locks and allocates), so the
 * handler hands the signal to a thread of ours, started with the first allocation, and waits
 * until that thread has written the report with reason "signal", for at most STOP_WAIT_MS: the
 * thread may need a lock that the interrupted thread holds, which it gets once the handler has
 * returned. Handler and thread meet on two futex words, not a pipe: the library holds no
 * descriptor the application could close and reuse (a pipe's numbers, once the application had
 * closed them, were its own files, and our byte went into its log).
 *
 * A forked child inherits the handler but not the thread: the fork child handler puts the
 * application's dispositions back (signals_after_fork_child), and a child made without fork
 * handlers (a raw clone) that gets the signal in ours does the same and raises it again at once,
 * as if we were not there. A child that allocates installs ours again, as any new process. */
#include "interpose.h"
#include "live.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "demangle.h"
#include "lifecycle.h"

static const int stop_signals[] = { SIGTERM, SIGINT };
#define NSIG_STOP (sizeof(stop_signals) / sizeof(stop_signals[0]))
#define STOP_WAIT_MS 5000
#define DYING 0x100u
/* A sanitizer's runtime keeps its own per-thread state on a stack it is given, and refuses one
 * under about 900 KiB (ThreadSanitizer says so and the thread is not started). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define THREAD_STACK (4u << 20)
#else
#define THREAD_STACK (256u << 10)
#endif

/* What the application set, as it reads it back: two copies per signal, the one in use named by
 * `app_at`, so that a handler running on another thread while sigaction() changes it reads a
 * whole one. Writers take app_lock. */
static struct sigaction app[NSIG_STOP][2];
static int app_at[NSIG_STOP];
static bool ours[NSIG_STOP]; /* our handler is the one the kernel has */
static pthread_mutex_t app_lock = PTHREAD_MUTEX_INITIALIZER;
static bool watching;        /* the thread is running: a stop signal can be reported */

/* handler -> thread: the signal's number (0: none); thread -> handler: reports written */
static uint32_t stop_word, done_word;

/* Once the exit report is being written, a stop signal's report would come after it and say less
 * (the exit report is the later, fuller one): the watcher checks this under stop_lock. */
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static bool exiting;

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction_fn;

static inline __attribute__((always_inline)) int slot_of(int sig)
{
    for (size_t i = 0; i < NSIG_STOP; i++)
        if (stop_signals[i] == sig)
            return (int)i;
    return -1;
}

/* The sigaction after ours: libc's. A sanitizer's interceptor preloaded before us calls ours
 * with its own wrapper of the application's handler, which is then the handler ours chains
 * to, so its deferral still applies to the application's code; calling the interceptor from
 * here would call us again. */
VW_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old);
static VW_NO_SANITIZE int real_sigaction(int sig, const struct sigaction *act,
                                         struct sigaction *old)
{
    sigaction_fn f = __atomic_load_n(&real_sigaction_fn, __ATOMIC_ACQUIRE);
    if (!f) {
        int saved = errno;
        void *p = dlsym_real(RTLD_NEXT, "sigaction");
        errno = saved;
        if (!p) {
            errno = ENOSYS;
            return -1;
        }
        memcpy(&f, &p, sizeof(f));
        __atomic_store_n(&real_sigaction_fn, f, __ATOMIC_RELEASE);
    }
    return f(sig, act, old);
}

static bool is_default(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

static bool is_ignored(const struct sigaction *sa)
{
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_IGN;
}

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *rel)
{
    return syscall(SYS_futex, word, op, val, rel, NULL, 0);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_on(uint32_t *word, uint32_t val, uint64_t ms)
{
    struct timespec rel = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    futex(word, FUTEX_WAIT_PRIVATE, val, &rel);
}

static void on_stop(int sig, siginfo_t *info, void *uctx);

/* Our handler in the kernel with the application's flags and mask. */
static bool install_ours(int i, const struct sigaction *as)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_stop;
    sa.sa_flags = SA_SIGINFO | (as->sa_flags & (SA_RESTART | SA_RESETHAND | SA_NODEFER | SA_ONSTACK));
    sa.sa_mask = as->sa_mask;
    return real_sigaction(stop_signals[i], &sa, NULL) == 0;
}

static void on_stop(int sig, siginfo_t *info, void *uctx)
{
    int saved = errno;
    int i = slot_of(sig);
    if (i < 0) {
        errno = saved;
        return;
    }
    struct sigaction p = app[i][__atomic_load_n(&app_at[i], __ATOMIC_ACQUIRE)];
    if (!lifecycle_is_owner()) {
        /* a child made without fork handlers: no thread of ours here; as without us */
        real_sigaction(sig, &p, NULL);
        raise(sig);
        errno = saved;
        return;
    }
    if (p.sa_flags & SA_RESETHAND) {
        /* the kernel has put the default back, as the application asked: so does its view */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        int at = !__atomic_load_n(&app_at[i], __ATOMIC_RELAXED);
        app[i][at] = dfl;
        __atomic_store_n(&app_at[i], at, __ATOMIC_RELEASE);
        __atomic_store_n(&ours[i], false, __ATOMIC_RELAXED);
    }
    if (__atomic_load_n(&watching, __ATOMIC_ACQUIRE)) {
        uint32_t done = __atomic_load_n(&done_word, __ATOMIC_ACQUIRE);
        /* DYING: the signal ends the process once we return, so its live-state file goes too */
        __atomic_store_n(&stop_word, (uint32_t)sig | (is_default(&p) ? DYING : 0), __ATOMIC_RELEASE);
        futex(&stop_word, FUTEX_WAKE_PRIVATE, 1, NULL);
        uint64_t until = mono_ms() + STOP_WAIT_MS;
        for (uint64_t now = mono_ms();
             __atomic_load_n(&done_word, __ATOMIC_ACQUIRE) == done && now < until; now = mono_ms())
            sleep_on(&done_word, done, until - now);
    }
    if (is_default(&p)) {
        /* the job was to end by this signal: now it does, once the handler returns */
        real_sigaction(sig, &p, NULL);
        raise(sig);
    } else if (p.sa_flags & SA_SIGINFO) {
        if (p.sa_sigaction)
            p.sa_sigaction(sig, info, uctx);
    } else if (p.sa_handler != SIG_IGN) {
        p.sa_handler(sig);
    }
    errno = saved;
}

/* Also keeps the live-state file up to date (live.c): at once, then every VW_LIVE_INTERVAL_MS
 * while no signal comes. */
static void *watcher(void *arg)
{
    demangle_thread_stack(arg);
    live_tick();
    uint64_t next = mono_ms() + VW_LIVE_INTERVAL_MS;
    for (;;) {
        uint32_t sig = __atomic_exchange_n(&stop_word, 0, __ATOMIC_ACQ_REL);
        if (sig) {
            pthread_mutex_lock(&stop_lock);
            if (!exiting && core_touched())
                reporting_write("signal");
            pthread_mutex_unlock(&stop_lock);
            if (sig & DYING)
                live_remove();
            __atomic_add_fetch(&done_word, 1, __ATOMIC_RELEASE);
            futex(&done_word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
            continue;
        }
        uint64_t now = mono_ms();
        if (now >= next) {
            live_tick();
            next = mono_ms() + VW_LIVE_INTERVAL_MS;
            continue;
        }
        sleep_on(&stop_word, 0, next - now);
    }
    return NULL;
}

/* The fork child handler: the child has no watcher thread, so where our handler is still the one
 * installed, the disposition the application set is put back before the child runs any code of
 * its own. Doing it here rather than in the handler matters: a signal that reaches a forked
 * worker (a DataLoader or multiprocessing pool being terminated) must act as it would without
 * us, even where a sanitizer's runtime defers handlers and a restarted wait would never see the
 * re-raised signal (seen under ThreadSanitizer: pool workers left blocked in sem_wait, their
 * SIGTERM lost). Also for a child told apart by its pid (lifecycle.c). */
void signals_after_fork_child(void)
{
    pthread_mutex_init(&app_lock, NULL);
    pthread_mutex_init(&stop_lock, NULL);
    for (size_t i = 0; i < NSIG_STOP; i++) {
        if (__atomic_load_n(&ours[i], __ATOMIC_RELAXED))
            real_sigaction(stop_signals[i], &app[i][app_at[i]], NULL);
        ours[i] = false;
    }
    watching = false;
    exiting = false;
    stop_word = done_word = 0;
}

void signals_exiting(void)
{
    pthread_mutex_lock(&stop_lock);
    exiting = true;
    pthread_mutex_unlock(&stop_lock);
}

bool signals_install(void)
{
    sigset_t all, old;
    sigfillset(&all);
    /* the thread takes no signal of the application's */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    /* Small, and ours: the thread's deepest work is a report's, whose demangling checks the
     * room it has (demangle.c); 256 KiB of address space and a guard page below, touched only
     * as deep as it goes. */
    size_t page = (size_t)sysconf(_SC_PAGESIZE), size = THREAD_STACK;
    char *stack = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) {
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return false;
    }
    mprotect(stack, page, PROT_NONE);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstack(&attr, stack + page, size);
    pthread_t t;
    int rc = pthread_create(&t, &attr, watcher, stack + page);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        munmap(stack, size + page);
        return false;
    }
    __atomic_store_n(&watching, true, __ATOMIC_RELEASE);
    pthread_mutex_lock(&app_lock);
    for (size_t i = 0; i < NSIG_STOP; i++) {
        struct sigaction cur;
        if (real_sigaction(stop_signals[i], NULL, &cur) != 0)
            continue;
        app[i][0] = cur;
        __atomic_store_n(&app_at[i], 0, __ATOMIC_RELEASE);
        if (is_ignored(&cur))
            continue; /* ignored: the job is not stopped by it, nothing to report */
        __atomic_store_n(&ours[i], install_ours((int)i, &cur), __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&app_lock);
    return true;
}

/* The application's sigaction: for a stop signal while ours stands, it reads and sets the
 * disposition it sees, and ours goes on standing in front of what it set (an ignored signal
 * is installed as such: ignoring is the kernel's business). A sanitizer's runtime calls it
 * while it starts, before its instrumentation works: the way through is not instrumented. */
static int app_sigaction(int i, const struct sigaction *act, struct sigaction *old);
VW_EXPORT VW_NO_SANITIZE int sigaction(int sig, const struct sigaction *act,
                                       struct sigaction *old)
{
    int i = slot_of(sig);
    if (i < 0 || !__atomic_load_n(&ours[i], __ATOMIC_ACQUIRE))
        return real_sigaction(sig, act, old);
    return app_sigaction(i, act, old);
}

static int app_sigaction(int i, const struct sigaction *act, struct sigaction *old)
{
    int sig = stop_signals[i];
    if (!lifecycle_is_owner())
        return real_sigaction(sig, act, old);
    int saved = errno;
    sigset_t block, prev;
    sigemptyset(&block);
    sigaddset(&block, sig);
    /* not while our handler on this thread reads the copy being replaced */
    pthread_sigmask(SIG_BLOCK, &block, &prev);
    pthread_mutex_lock(&app_lock);
    int rc = 0;
    if (__atomic_load_n(&ours[i], __ATOMIC_ACQUIRE)) {
        struct sigaction was = app[i][app_at[i]];
        if (act) {
            if (is_ignored(act)) {
                rc = real_sigaction(sig, act, NULL);
                if (rc == 0)
                    __atomic_store_n(&ours[i], false, __ATOMIC_RELEASE);
            } else if (!install_ours(i, act)) {
                rc = -1;
            }
            if (rc == 0) {
                int at = !app_at[i];
                app[i][at] = *act;
                __atomic_store_n(&app_at[i], at, __ATOMIC_RELEASE);
            }
        }
        if (rc == 0 && old)
            *old = was;
    } else {
        rc = real_sigaction(sig, act, old); /* ours went (SA_RESETHAND) meanwhile */
    }
    int err = errno;
    pthread_mutex_unlock(&app_lock);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    errno = rc == 0 ? saved : err;
    return rc;
}

/* signal() as glibc's (BSD semantics: SA_RESTART, the signal blocked in its handler), through
 * the sigaction above: glibc's own calls its internal sigaction, which we would not see. */
VW_EXPORT VW_NO_SANITIZE sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction sa, old;
    if (slot_of(sig) < 0) {
        /* not ours: libc's own, which also knows what siginterrupt() asked for */
        int saved = errno;
        void *p = dlsym_real(RTLD_NEXT, "signal");
        errno = saved;
        sighandler_t (*next)(int, sighandler_t);
        memcpy(&next, &p, sizeof(next));
        if (next)
            return next(sig, handler);
    }
    if (handler == SIG_ERR || sig < 1 || sig >= NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, sig);
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, &old) < 0)
        return SIG_ERR;
    return old.sa_handler;
}

VW_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler);
VW_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler)
{
    return signal(sig, handler);
}
