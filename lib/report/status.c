/* The status file (VRAMWATCH_STATUS), kept up to date with the peak while the job runs.
 *
 * One line, rewritten in place and padded with spaces to the longest it has been, so a watcher
 * (vramwatch fit) can tell while a trial runs whether its memory still grows:
 *   vramwatch-status peak_live_bytes=... live_bytes=... time_unix_ns=... oom=0|1 pressure=N sites=N
 * pressure: the cache flushes a retry rescued (not failures); sites: the distinct call chains so
 * far (a new one after a quiet spell is a new phase of the run, such as validation).
 * Written when the peak grew (at most every 100 ms for a small step), when the flushes, the final
 * failures or the call sites changed, at every out-of-memory failure and at exit: a pwrite from
 * the hook, no stdio and no allocation.
 * The path is the user's, and the library often runs as root: its folder is walked like the
 * report folder, and only a regular file of ours (or a new one, 0600) is ever opened, written or
 * chmod'ed, never a FIFO (that would hang the job), a device (/dev/null made 0600 for everyone)
 * or another user's file (safefile.c). Anything else costs the status file, with one warning;
 * the job runs on. A path used before is truncated at set-up: a longer line of an earlier run
 * must not show its tail after ours.
 * No descriptor stays open between writes: the application may close every descriptor it has
 * (close_range) and open its own files at the same numbers, and a line meant for the status
 * file would go into them. Each write opens the file by its path again (a few system calls, at
 * most ten times a second and at failures). */
#include "status.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "log.h"
#include "options.h"
#include "safefile.h"

bool status_on;
static uint64_t status_last_ns, status_written_peak, status_written_flushes, status_written_finals;
static uint64_t status_written_sites;
static pthread_mutex_t status_lock = PTHREAD_MUTEX_INITIALIZER;

/* Plain decimal: a shell reads a zero-padded number as octal. */
static char *put_field(char *p, const char *key, uint64_t v)
{
    size_t k = strlen(key);
    memcpy(p, key, k);
    p += k;
    char digits[20];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = digits[--n];
    return p;
}

void status_open(void)
{
    if (!options_current.status[0])
        return;
    char why[256];
    int fd = safefile_open_private(options_current.status, why, sizeof(why));
    if (fd < 0) {
        log_msg(VW_LOG_WARN, "not writing the status file %s: %s", options_current.status, why);
        return;
    }
    if (ftruncate(fd, 0) != 0) {
        log_msg(VW_LOG_WARN, "not writing the status file %s: %s", options_current.status,
                strerror(errno));
        close(fd);
        return;
    }
    close(fd);
    status_on = true;
}

/* The file again, by its path, with the same checks; one warning and no more writes when it
 * has become something we must not write. */
static int status_reopen(void)
{
    char why[256];
    int fd = safefile_open_private(options_current.status, why, sizeof(why));
    if (fd < 0) {
        __atomic_store_n(&status_on, false, __ATOMIC_RELAXED);
        log_msg(VW_LOG_WARN, "no longer writing the status file %s: %s", options_current.status,
                why);
    }
    return fd;
}

/* Growth that is written at once, whatever the rate limit: a caching allocator asks for all its
 * segments in the first step and then never again, so a skipped update would never come. */
static uint64_t step_of(uint64_t written)
{
    uint64_t pct = written / 100;
    return pct > (64ull << 20) ? pct : (64ull << 20);
}

/* oom=1 once a failure is final (its retry failed, or none came); pressure counts the cache
 * flushes a retry rescued, which are not failures. The line is padded with spaces to the length
 * it had, since numbers no longer have a fixed width, and the file is only ever rewritten in
 * place (a reader may be reading it). */
void status_update(uint64_t now, bool event, bool force)
{
    uint64_t peak = core_peak_any(), finals, flushes;
    core_pressure(&finals, &flushes);
    uint64_t sites = core_callsites_count();
    if (!event && !force && flushes == __atomic_load_n(&status_written_flushes, __ATOMIC_RELAXED) &&
        finals == __atomic_load_n(&status_written_finals, __ATOMIC_RELAXED) &&
        ((peak <= status_written_peak &&
          sites == __atomic_load_n(&status_written_sites, __ATOMIC_RELAXED)) ||
         (now - status_last_ns < 100000000ull &&
          peak < status_written_peak + step_of(status_written_peak))))
        return;
    if (pthread_mutex_trylock(&status_lock) != 0)
        return; /* another thread is writing it: its figures are as good */
    static size_t longest;
    char line[200], *p = line;
    memcpy(p, "vramwatch-status", 16);
    p += 16;
    p = put_field(p, " peak_live_bytes=", peak);
    p = put_field(p, " live_bytes=", core_live_total());
    p = put_field(p, " time_unix_ns=", now);
    p = put_field(p, " oom=", finals ? 1 : 0);
    p = put_field(p, " pressure=", flushes);
    p = put_field(p, " sites=", sites);
    while ((size_t)(p - line) + 1 < longest && p < line + sizeof(line) - 1)
        *p++ = ' ';
    *p++ = '\n';
    if ((size_t)(p - line) > longest)
        longest = (size_t)(p - line);
    struct safefile_quiet q;
    safefile_quiet_begin(&q);
    int fd = status_reopen();
    if (fd >= 0) {
        ssize_t w = pwrite(fd, line, (size_t)(p - line), 0);
        (void)w;
        close(fd);
    }
    safefile_quiet_end(&q);
    status_written_peak = peak;
    __atomic_store_n(&status_written_flushes, flushes, __ATOMIC_RELAXED);
    __atomic_store_n(&status_written_finals, finals, __ATOMIC_RELAXED);
    __atomic_store_n(&status_written_sites, sites, __ATOMIC_RELAXED);
    status_last_ns = now;
    pthread_mutex_unlock(&status_lock);
}

void status_after_fork_child(void)
{
    pthread_mutex_init(&status_lock, NULL);
    status_written_peak = 0;
    status_written_flushes = status_written_finals = status_written_sites = 0;
    status_on = false; /* the file describes the parent, which keeps writing it */
}
