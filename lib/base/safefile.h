/* Opening the library's folders and files by a path that another user may have tampered with. */
#ifndef VW_SAFEFILE_H
#define VW_SAFEFILE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* Opens the folder `path` by walking it one component at a time (rules in safefile.c).
 * Returns an O_PATH descriptor of the folder, good for the *at() calls, or -1: then `why` says
 * why in a few words (a refusal such as "/data/link is a symbolic link owned by another user",
 * or the system error's text) and errno is set (EPERM for a refusal). With `create`, missing
 * folders are made, mode 0700 whatever the umask. No FILE streams and no allocation. */
int safefile_open_dir(const char *path, bool create, char *why, size_t whylen);

/* Opens the file `path` for writing when it is a regular file of ours with no other name, or
 * creates it (mode 0600, exclusively) when it is missing; its folder is walked as above and
 * must exist. Never opens a FIFO, a device or a link, never changes the mode of what is not
 * ours. Returns the descriptor (O_CLOEXEC, mode 0600) or -1, `why` and errno as above. */
int safefile_open_private(const char *path, char *why, size_t whylen);

/* The one rule for removing what a killed writer left (a temporary file, a live-state file),
 * for the library and the command line alike (docs/reliability.md, "Leftovers of killed
 * writers"). The caller has already read the writer's pid from `name` and found no such process
 * (`pid` is that pid, or our own for an earlier image of this process); `name` in the folder
 * `dirfd` is then removed only when it is a regular file of ours with one name, not written to
 * since `older_than` (a time in seconds), nobody holds a lock on it (writers hold flock from
 * their create to their rename), and it is still the same file at that name when it goes.
 * Returns whether it was removed. No allocation. */
bool safefile_remove_stale(int dirfd, const char *name, long long pid, long long older_than);

/* `fd` moved to a number near the top of the process's range (closing `fd`), where the
 * application's next files do not land if it closes ours; `fd` itself when that cannot be. */
int safefile_high(int fd);

/* Around the library's own writes to files: SIGXFSZ (a file past RLIMIT_FSIZE) and SIGPIPE
 * blocked on this thread, and the ones those writes raised taken back at the end, so that a
 * write of ours that fails says so by its errno (EFBIG, EPIPE) and never ends the program by a
 * signal it would not have had without us. Signals already pending before are left alone. */
struct safefile_quiet {
    sigset_t old, pending_before;
    int masked;
};
void safefile_quiet_begin(struct safefile_quiet *q);
void safefile_quiet_end(struct safefile_quiet *q);

#endif
