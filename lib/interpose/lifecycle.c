/* One process's CUDA life: which process the recorded state belongs to, and the report at each
 * way that life ends.
 *
 * Every process that allocated leaves its report and no live-state file, however it ends:
 * - exit(): the atexit handler (registered at the first allocation);
 * - _exit() / _Exit(), which run no exit handlers (multiprocessing's fork children end with
 *   os._exit, a C child after fork with _exit): wrapped, the same handler first;
 * - exec: the new image is another program, which may never touch CUDA: the handler runs before
 *   the exec, and when the exec fails the process goes on as before (its live-state file comes
 *   back at the next tick);
 * - SIGTERM, SIGINT: signals.c.
 *
 * A new process is told by its pid, not by fork handlers alone: a raw clone runs none. `ready`
 * (interpose.h's lifecycle_ready) lives in a page marked MADV_WIPEONFORK, which the kernel hands to any
 * child process zeroed, so the child's first hooked call goes through set-up's slow path and
 * finds set-up done but not ready: the child forgets the parent's state there and starts as a
 * process of its own (lifecycle_new_process). The hook path pays nothing for it: it reads
 * `ready` anyway. Where the kernel lacks MADV_WIPEONFORK (before Linux 4.14) only the fork
 * handlers tell a child. Every path that writes or removes files also checks the pid
 * (lifecycle_is_owner): a vfork child shares our memory, and a clone that never called us still has
 * the parent's. */
#include "lifecycle.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "framework.h"
#include "interpose.h"
#include "live.h"
#include "pyframes.h"
#include "report.h"
#include "reporting.h"
#include "status.h"

static bool not_ready;
bool *lifecycle_ready = &not_ready;
static bool *ready_page;
static pid_t owner_pid;
static bool exit_registered, started;
/* A child of a process that had set up (fork, clone): no thread of ours is started in it. A
 * thread started in the child of a multi-threaded process is what some runtimes refuse
 * (ThreadSanitizer kills the child), and the child's life is the parent's business: its
 * report at exit, _exit and exec is written without one; only its stop-signal report and
 * live-state file are not. */
static bool in_child;

bool lifecycle_is_owner(void)
{
    return __atomic_load_n(&owner_pid, __ATOMIC_RELAXED) == getpid();
}

static void set_ready(void)
{
    __atomic_store_n(ready_page ? ready_page : &not_ready, true, __ATOMIC_RELEASE);
    if (!ready_page)
        return;
    __atomic_store_n(&lifecycle_ready, ready_page, __ATOMIC_RELEASE);
}

/* Across fork() the core's lock is held (it is never held while calling into CUDA, so no
 * driver lock can be ordered against it); the child unlocks its copy and forgets the parent's
 * allocations. The report locks are not taken here: a report holds them while it calls the
 * driver, whose own fork handlers may hold the driver's locks. A child forked while another
 * thread was writing a report gets them re-initialised instead (the writer is not in the child). */
static void fork_prepare(void)
{
    int saved = errno; /* fork()'s errno is the application's, in both processes */
    core_lock_for_fork();
    errno = saved;
}

static void fork_parent(void)
{
    int saved = errno;
    core_unlock_after_fork(false);
    errno = saved;
}

/* The child's state: none of the parent's. Its first allocation starts its own life (the exit
 * handler is inherited; the watcher thread is not, and is not started again: in_child). */
static void forget_parent(void)
{
    stack_after_fork_child();
    report_after_fork_child();
    framework_reset();
    reporting_after_fork_child();
    driver_after_fork_child();
    status_after_fork_child();
    live_after_fork_child();
    signals_after_fork_child();
    setup_depth = 0;
    started = false;
    in_child = true;
    __atomic_store_n(&record_rare_due, true, __ATOMIC_RELAXED); /* its first allocation starts it */
    __atomic_store_n(&owner_pid, getpid(), __ATOMIC_RELAXED);
    set_ready();
}

static void fork_child(void)
{
    int saved = errno;
    core_unlock_after_fork(true);
    forget_parent();
    errno = saved;
}

void lifecycle_new_process(void)
{
    /* A raw clone: one thread, and locks other threads of the parent may have held at the
     * clone, released as the fork child's are. */
    core_unlock_after_fork(true);
    forget_parent();
}

void lifecycle_start(void)
{
    owner_pid = getpid();
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
#ifdef MADV_WIPEONFORK
        if (madvise(p, page, MADV_WIPEONFORK) == 0)
            ready_page = p;
        else
#endif
            munmap(p, page);
    }
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    set_ready();
}

/* The end of this process's CUDA life: the status file's last figures, the report, the
 * live-state file gone. Only in the process the state belongs to. */
static void end_of_life(void)
{
    if (!lifecycle_is_owner() || !interpose_ready_now())
        return;
    signals_exiting();
    core_end_pending();
    if (status_on)
        status_update(platform_now_ns(), false,
                      true); /* the last figures, whatever the rate limit */
    if (!options_current.disable && core_touched())
        reporting_write("exit");
    live_remove(); /* the process is gone for vramwatch top */
}

static void on_exit_report(void)
{
    int saved = errno;
    end_of_life();
    errno = saved;
}

void lifecycle_first_alloc(void)
{
    if (VW_LIKELY(__atomic_load_n(&started, __ATOMIC_ACQUIRE)))
        return;
    if (__atomic_exchange_n(&started, true, __ATOMIC_ACQ_REL))
        return;
    /* atexit once per image: a forked child inherits the parent's registration */
    if (!__atomic_exchange_n(&exit_registered, true, __ATOMIC_ACQ_REL))
        atexit(on_exit_report);
    if (in_child)
        return;
    live_resume();
    signals_install(); /* the report of a job stopped by SIGTERM or SIGINT (signals.c) */
}

/* ---- exits that run no exit handlers ---- */

typedef void (*exit_fn)(int) __attribute__((noreturn));

static exit_fn next_exit(const char *name)
{
    void *p = dlsym_real(RTLD_NEXT, name);
    exit_fn f;
    memcpy(&f, &p, sizeof(f));
    return f;
}

VW_EXPORT void _exit(int status)
{
    on_exit_report();
    exit_fn f = next_exit("_exit");
    if (f)
        f(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

VW_EXPORT void _Exit(int status)
{
    on_exit_report();
    exit_fn f = next_exit("_Exit");
    if (f)
        f(status);
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

/* ---- exec: the report of this image before it is replaced ---- */

/* The exec failed: this image goes on, and so does its life. */
static void after_failed_exec(void)
{
    int saved = errno;
    if (lifecycle_is_owner() && interpose_ready_now())
        live_resume();
    errno = saved;
}

#define NEXT(type, name)                        \
    type next_ = NULL;                          \
    {                                           \
        void *p_ = dlsym_real(RTLD_NEXT, name); \
        memcpy(&next_, &p_, sizeof(next_));     \
    }                                           \
    if (!next_) {                               \
        errno = ENOSYS;                         \
        return -1;                              \
    }

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);

VW_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    NEXT(execve_fn, "execve");
    on_exit_report(); /* this image's life ends here */
    int rc = next_(path, argv, envp);
    after_failed_exec();
    return rc;
}

VW_EXPORT int execv(const char *path, char *const argv[])
{
    NEXT(execv_fn, "execv");
    on_exit_report(); /* this image's life ends here */
    int rc = next_(path, argv);
    after_failed_exec();
    return rc;
}

VW_EXPORT int execvp(const char *file, char *const argv[])
{
    NEXT(execv_fn, "execvp");
    on_exit_report(); /* this image's life ends here */
    int rc = next_(file, argv);
    after_failed_exec();
    return rc;
}

VW_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    NEXT(execve_fn, "execvpe");
    on_exit_report(); /* this image's life ends here */
    int rc = next_(file, argv, envp);
    after_failed_exec();
    return rc;
}

VW_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    NEXT(fexecve_fn, "fexecve");
    on_exit_report(); /* this image's life ends here */
    int rc = next_(fd, argv, envp);
    after_failed_exec();
    return rc;
}

VW_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                       int flags)
{
    NEXT(execveat_fn, "execveat");
    on_exit_report(); /* this image's life ends here */
    int rc = next_(dirfd, path, argv, envp, flags);
    after_failed_exec();
    return rc;
}

/* The execl family takes its arguments as a list: gathered into an array (on the stack, as
 * glibc does; the list ends at a null pointer) and handed to the vector form above. */
#define GATHER(first, ap, out, n)                     \
    size_t n = 1;                                     \
    {                                                 \
        va_list c_;                                   \
        va_copy(c_, ap);                              \
        while (va_arg(c_, const char *))              \
            n++;                                      \
        va_end(c_);                                   \
    }                                                 \
    const char *out[n + 1];                           \
    out[0] = first;                                   \
    for (size_t i_ = 1; i_ <= n; i_++) /* n: the null */ \
        out[i_] = va_arg(ap, const char *);

VW_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    GATHER(arg, ap, argv, n);
    va_end(ap);
    return execv(path, (char *const *)argv);
}

VW_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    GATHER(arg, ap, argv, n);
    va_end(ap);
    return execvp(file, (char *const *)argv);
}

VW_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    GATHER(arg, ap, argv, n);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, (char *const *)argv, envp);
}
