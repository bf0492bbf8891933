/* Opens the library's folders and files by paths that another user may have tampered with.
 *
 * The library often runs as root (in containers) with paths the job's user chose
 * (VRAMWATCH_DIR, VRAMWATCH_STATUS), in folders such as /tmp that others can write to. A path
 * is therefore never handed to the kernel whole: it is walked one component at a time with
 * openat(O_PATH | O_NOFOLLOW) from a descriptor of the folder before, each component checked
 * through its own descriptor (fstat), so nothing can be swapped in between a check and its use.
 * The walk starts at "/" (or at the working directory for a relative path), which is checked
 * like every other folder on the way. A component is accepted when it is:
 *
 *  - a symbolic link owned by us or by root. Its target is then walked by the same rules (at
 *    most 40 links in all, the kernel's own limit). A link of another user's is refused
 *    wherever it is: that user can point it anywhere at any time. (The kernel's
 *    fs.protected_symlinks asks the same, but only in sticky world-writable folders, and it is
 *    a setting that may be off.)
 *  - a folder owned by us or by root. Whoever owns a folder can rename, remove and replace what
 *    is in it whatever its mode says (they can change the mode), so a folder of another user's
 *    anywhere on the way lets that user redirect everything below it.
 *  - and, when anyone may write to it, one with the sticky bit. Then others can add names but
 *    cannot rename or remove the entries of ours or root's, and what they add is theirs, which
 *    the two rules above refuse when the walk comes to it: /tmp and /dev/shm keep working.
 *    Without the sticky bit anyone can swap what lies below.
 *
 * Write permission of the folder's group is accepted. The group is the choice of the folder's
 * owner (us or root): with user private groups (umask 002) every folder a user makes is
 * writable by a group of one, and a team folder is shared with its group on purpose. What a
 * member can do there is swap an entry for another entry, and whatever the member puts there is
 * the member's own, refused when the walk reaches it.
 *
 * Anything else on the way (a file, a device) ends the walk with ENOTDIR. No FILE streams and
 * no allocation: the status file is opened during set-up, which can run inside a hook. */
#include "safefile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_LINKS 40

static void say(char *why, size_t whylen, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void say(char *why, size_t whylen, const char *fmt, ...)
{
    if (!whylen)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* Appends a component to the path shown in messages (only messages: truncation is harmless). */
static void shown_add(char *shown, size_t cap, const char *name)
{
    size_t n = strlen(shown);
    if (n + 1 < cap && n > 0 && shown[n - 1] != '/')
        shown[n++] = '/';
    snprintf(shown + n, cap - n, "%s", name);
}

/* True when nothing but "." components (and slashes) is left: the folder reached is the last. */
static bool nothing_left(const char *p)
{
    for (;;) {
        while (*p == '/')
            p++;
        if (!*p)
            return true;
        if (p[0] != '.' || (p[1] != '/' && p[1] != 0))
            return false;
        p++;
    }
}

/* Fills `why` and returns false when this folder may not be used (rules at the top). */
static bool safe_dir(const struct stat *st, const char *who, char *why, size_t whylen)
{
    uid_t me = geteuid();
    if (st->st_uid != me && st->st_uid != 0) {
        say(why, whylen, "%s is owned by another user", who);
        return false;
    }
    if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX)) {
        say(why, whylen, "anyone may write to %s and it has no sticky bit", who);
        return false;
    }
    return true;
}

/* A walk in progress (walk_path): what is left of the path, the folder reached so far, and
 * where a refusal is explained. */
struct walk {
    char rest[PATH_MAX]; /* what is left to walk; a link's target is put in front of it */
    char target[PATH_MAX];
    char name[NAME_MAX + 1];
    char shown[1024]; /* the folder reached so far, for messages */
    char *p;          /* the next name in `rest` */
    int fd;           /* the folder reached */
    int next;         /* the name being looked at in it; -1: none open */
    int links;
    bool create;
    bool name_last; /* messages name the last folder instead of calling it "it" */
    char *why;
    size_t whylen;
};

/* Opens the start of the walk ("/" or the working directory) and checks it like any folder.
 * `last`: nothing is left to walk after it. */
static int open_start(struct walk *w, bool absolute, bool last)
{
    int fd = open(absolute ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    snprintf(w->shown, sizeof(w->shown), "%s", absolute ? "/" : ".");
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!safe_dir(&st, last && !w->name_last ? "it" : w->shown, w->why, w->whylen)) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* A folder just made: mode 0700 whatever the umask took away. Through the descriptor's
 * /proc/self/fd link, never the name (a member of a group-writable folder could have swapped
 * it for a link by now); fchmodat(AT_SYMLINK_NOFOLLOW) where /proc is missing. */
static int make_private(int fd, int parent, const char *name)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    if ((st.st_mode & 07777) == 0700)
        return 0;
    char proc[64];
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    if (chmod(proc, 0700) == 0)
        return 0;
    return fchmodat(parent, name, 0700, AT_SYMLINK_NOFOLLOW);
}

enum { STEP_ON, STEP_FAIL, STEP_REFUSED };

/* `w->next` is a symbolic link (`st`, called `who` in messages): its target goes in front of
 * what is left to walk, to be walked from the link's folder (`shown_len`: that folder's length
 * in `shown`), or from "/" when it is absolute. */
static int follow_link(struct walk *w, const struct stat *st, const char *who, size_t shown_len)
{
    if (st->st_uid != geteuid() && st->st_uid != 0) {
        say(w->why, w->whylen, "%s is a symbolic link owned by another user", who);
        return STEP_REFUSED;
    }
    if (++w->links > MAX_LINKS) {
        errno = ELOOP;
        return STEP_FAIL;
    }
    /* The target of this very link, not of whatever is at its name by now. */
    ssize_t tl = readlinkat(w->next, "", w->target, sizeof(w->target));
    if (tl < 0)
        return STEP_FAIL;
    close(w->next);
    w->next = -1;
    size_t left = strlen(w->p);
    if (tl == 0 || (size_t)tl + 1 + left + 1 > sizeof(w->rest)) {
        errno = tl == 0 ? ENOENT : ENAMETOOLONG;
        return STEP_FAIL;
    }
    memmove(w->rest + tl + 1, w->p, left + 1);
    memcpy(w->rest, w->target, (size_t)tl);
    w->rest[tl] = '/';
    w->p = w->rest;
    w->shown[shown_len] = 0; /* a relative target starts in the link's folder */
    if (w->target[0] == '/') {
        close(w->fd);
        w->fd = open_start(w, true, nothing_left(w->rest));
        if (w->fd < 0)
            return STEP_FAIL;
    }
    return STEP_ON;
}

/* The walk. `name_last`: messages name the last folder instead of calling it "it" (for the
 * status file's folder, where "it" would read as the file). */
static int walk_path(const char *path, bool create, bool name_last, char *why, size_t whylen)
{
    struct walk w;
    w.create = create;
    w.name_last = name_last;
    w.why = why;
    w.whylen = whylen;
    w.links = 0;
    w.next = -1;
    if (whylen)
        why[0] = 0;
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof(w.rest)) {
        errno = len ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(w.rest, path, len + 1);
    w.p = w.rest;
    int e;
    w.fd = open_start(&w, path[0] == '/', nothing_left(path));
    if (w.fd < 0)
        return -1;
    for (;;) {
        while (*w.p == '/')
            w.p++;
        if (!*w.p)
            return w.fd;
        size_t n = strcspn(w.p, "/");
        if (n > NAME_MAX) {
            errno = ENAMETOOLONG;
            goto fail;
        }
        memcpy(w.name, w.p, n);
        w.name[n] = 0;
        w.p += n;
        if (!strcmp(w.name, "."))
            continue;
        size_t shown_len = strlen(w.shown);
        shown_add(w.shown, sizeof(w.shown), w.name);
        const char *who = nothing_left(w.p) && !name_last ? "it" : w.shown;

        bool made = false;
        w.next = openat(w.fd, w.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (w.next < 0 && errno == ENOENT && w.create) {
            if (mkdirat(w.fd, w.name, 0700) == 0)
                made = true;
            else if (errno != EEXIST) /* EEXIST: another process made it just now */
                goto fail;
            w.next = openat(w.fd, w.name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        }
        if (w.next < 0)
            goto fail;
        struct stat st;
        if (fstat(w.next, &st) != 0)
            goto fail;
        if (S_ISLNK(st.st_mode)) {
            int step = follow_link(&w, &st, who, shown_len);
            if (step == STEP_REFUSED)
                goto refused;
            if (step == STEP_FAIL)
                goto fail;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            goto fail;
        }
        if (!safe_dir(&st, who, why, whylen))
            goto refused;
        if (made && make_private(w.next, w.fd, w.name) != 0)
            goto fail;
        close(w.fd);
        w.fd = w.next;
        w.next = -1;
    }
refused:
    errno = EPERM;
fail:
    e = errno;
    if (w.next >= 0)
        close(w.next);
    if (w.fd >= 0) /* -1: the start of an absolute link's target could not be opened */
        close(w.fd);
    errno = e;
    return -1;
}

/* On failure, `why` says why in every case: the refusal, or the system error. */
static int explained(int fd, char *why, size_t whylen)
{
    if (fd < 0 && whylen && !why[0]) {
        int e = errno;
        say(why, whylen, "%s", strerror(e));
        errno = e;
    }
    return fd;
}

static int walk(const char *path, bool create, bool name_last, char *why, size_t whylen)
{
    return explained(walk_path(path, create, name_last, why, whylen), why, whylen);
}

/* The application may close every descriptor at any time (close_range(3, ~0U) before it
 * starts a child or runs on) and opens its own at the lowest free numbers: a descriptor of
 * ours that it closed while we held it would have its next file's number, and our write would
 * go there. Ours are moved to the top of its range (at most 4096: a higher number grows the
 * process's descriptor table), where its next files do not land. */
int safefile_high(int fd)
{
    struct rlimit rl;
    if (fd < 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 256)
        return fd;
    rlim_t top = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 4096 ? 4096 : rl.rlim_cur;
    int e = errno;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, (int)(top - 64));
    errno = e;
    if (hi < 0)
        return fd; /* the top is full: the number we have */
    close(fd);
    return hi;
}

int safefile_open_dir(const char *path, bool create, char *why, size_t whylen)
{
    return safefile_high(walk(path, create, false, why, whylen));
}

/* Why this file may not be written, or NULL: only a regular file of ours with one name. A
 * second name (a hard link, where fs.protected_hardlinks is off) could be a file of ours
 * elsewhere that another user linked here to have it overwritten. */
static const char *unsafe_file(const struct stat *st)
{
    if (S_ISLNK(st->st_mode))
        return "it is a symbolic link";
    if (!S_ISREG(st->st_mode))
        return "it is not a regular file";
    if (st->st_uid != geteuid())
        return "it is owned by another user";
    if (st->st_nlink != 1)
        return "it has another name (a hard link)";
    return NULL;
}

static int open_private(const char *path, char *why, size_t whylen)
{
    char folder[PATH_MAX];
    if (whylen)
        why[0] = 0;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t flen = slash ? (size_t)(slash - path) : 0;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        errno = EISDIR;
        return -1;
    }
    if (flen >= sizeof(folder)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!slash)
        strcpy(folder, ".");
    else if (flen == 0)
        strcpy(folder, "/");
    else {
        memcpy(folder, path, flen);
        folder[flen] = 0;
    }
    int dirfd = walk(folder, false, true, why, whylen);
    if (dirfd < 0)
        return -1;
    /* O_NONBLOCK and O_NOCTTY only matter if something else than a regular file slipped
     * through: a FIFO must not hang the job, a terminal must not become its own. */
    const int flags = O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    int fd = openat(dirfd, base, flags | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
        close(dirfd);
        fchmod(fd, 0600); /* new, so ours: private whatever the umask */
        return fd;
    }
    int e = errno;
    if (e != EEXIST)
        goto fail;
    /* It exists: judged by what it is before it is opened at all, since opening a device can
     * have effects of its own (a tape rewinds, a watchdog arms), then checked again through the
     * descriptor, in case the name was swapped between the two. */
    struct stat st, fst;
    const char *bad;
    if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        e = errno;
        goto fail;
    }
    if ((bad = unsafe_file(&st)) != NULL) {
        say(why, whylen, "%s", bad);
        e = EPERM;
        goto fail;
    }
    fd = openat(dirfd, base, flags);
    if (fd < 0) {
        e = errno;
        goto fail;
    }
    if (fstat(fd, &fst) != 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino ||
        unsafe_file(&fst)) {
        say(why, whylen, "%s", "it was replaced while it was opened");
        close(fd);
        e = EPERM;
        goto fail;
    }
    close(dirfd);
    fchmod(fd, 0600); /* ours, checked above: private whatever it was */
    return fd;
fail:
    close(dirfd);
    errno = e;
    return -1;
}

int safefile_open_private(const char *path, char *why, size_t whylen)
{
    return safefile_high(explained(open_private(path, why, whylen), why, whylen));
}

static void quiet_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGXFSZ);
    sigaddset(set, SIGPIPE);
}

void safefile_quiet_begin(struct safefile_quiet *q)
{
    int e = errno;
    sigset_t set;
    quiet_set(&set);
    q->masked = pthread_sigmask(SIG_BLOCK, &set, &q->old) == 0;
    if (!q->masked || sigpending(&q->pending_before) != 0)
        sigemptyset(&q->pending_before);
    errno = e;
}

void safefile_quiet_end(struct safefile_quiet *q)
{
    if (!q->masked)
        return;
    int e = errno;
    sigset_t set, pending;
    quiet_set(&set);
    if (sigpending(&pending) == 0)
        for (int sig = 1; sig < NSIG; sig++) {
            if (!sigismember(&set, sig) || !sigismember(&pending, sig) ||
                sigismember(&q->pending_before, sig))
                continue;
            sigset_t one;
            sigemptyset(&one);
            sigaddset(&one, sig);
            struct timespec none = { 0, 0 };
            while (sigtimedwait(&one, NULL, &none) < 0 && errno == EINTR)
                ;
        }
    pthread_sigmask(SIG_SETMASK, &q->old, NULL);
    errno = e;
}

bool safefile_remove_stale(int dirfd, const char *name, long long pid, long long older_than)
{
    /* A live process by that pid (or one we may not signal): its writer may still be at work. */
    if (pid != getpid() && (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
        return false;
    struct stat st, fst, again;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid() || st.st_nlink != 1 || st.st_mtime > older_than)
        return false;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return false;
    /* Still the file judged above, unlocked, and still at its name when it is removed. */
    bool gone = fstat(fd, &fst) == 0 && fst.st_dev == st.st_dev && fst.st_ino == st.st_ino &&
                flock(fd, LOCK_EX | LOCK_NB) == 0 &&
                fstatat(dirfd, name, &again, AT_SYMLINK_NOFOLLOW) == 0 &&
                again.st_dev == st.st_dev && again.st_ino == st.st_ino &&
                unlinkat(dirfd, name, 0) == 0;
    close(fd);
    return gone;
}
