/* util.c: messages, options (getopt_long and the shared size grammar), formatting, safe text output for the vramwatch tool. */
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "safefile.h"
#include "sb.h"
#include "sizes.h"

void util_err(const char *fmt, ...)
{
    struct strbuf b = { 0 };
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    /* A file name, a report string or a variable may hold a newline or an ESC; the contract
     * promises one line, and a terminal must not take commands from it. The library's rule
     * (lib/base/log.c): control bytes, DEL and bytes that are not UTF-8 as \n, \e, \xNN. */
    size_t cap = 4 * b.len + 1;
    char *line = util_xmalloc(cap);
    log_escape(sb_str(&b), b.len, line, cap);
    fprintf(stderr, "vramwatch: %s\n", line);
    free(line);
    sb_free(&b);
}

void util_out_of_memory(void)
{
    fputs("vramwatch: out of memory\n", stderr);
    exit(EXIT_USAGE);
}

void *util_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        util_out_of_memory();
    return p;
}

void *util_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        util_out_of_memory();
    return p;
}

void *util_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        util_out_of_memory();
    return q;
}

char *util_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(util_xmalloc(n), s, n);
}

void util_args_init(struct util_args *a, const char *cmd, int argc, char **argv,
                    const char *shortopts, const struct option *longopts)
{
    memset(a, 0, sizeof *a);
    a->cmd = cmd;
    a->argc = argc;
    a->argv = argv;
    a->longopts = longopts;
    /* '+' (the caller's, kept first): stop at the first operand; ':': a missing value is told
     * apart from an unknown option. A command's letters are few; a longer list is a mistake in
     * the command, cut here. */
    bool stop_at_operand = shortopts[0] == '+';
    snprintf(a->shortopts, sizeof a->shortopts, "%s:%s", stop_at_operand ? "+" : "",
             shortopts + stop_at_operand);
    /* 0, not 1: glibc starts over completely, as a command may be run twice in one process (the
     * tests, the fuzzer). */
    optind = 0;
    opterr = 0;
}

/* The long options that `given` (after its "--", up to any '=') begins, and their count. */
static size_t matching_longopts(const struct option *opts, const char *given, struct strbuf *names)
{
    size_t len = strcspn(given, "="), n = 0;
    for (; opts && opts->name; opts++) {
        if (strncmp(opts->name, given, len) != 0)
            continue;
        sb_printf(names, "%s--%s", n ? ", " : "", opts->name);
        n++;
    }
    return n;
}

static void set_name(struct util_args *a, int c, int longindex)
{
    if (longindex >= 0)
        snprintf(a->name, sizeof a->name, "--%s", a->longopts[longindex].name);
    else
        snprintf(a->name, sizeof a->name, "-%c", c);
}

/* One line for a command's mistake: "CMD: MESSAGE", and with `see`, where its help is. The top
 * level (cmd "") has no prefix. */
static void args_err(const struct util_args *a, bool see, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void args_err(const struct util_args *a, bool see, const char *fmt, ...)
{
    struct strbuf b = { 0 };
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    const char *sep = *a->cmd ? " " : "";
    if (see)
        util_err("%s%s%s (see vramwatch%s%s --help)", a->cmd, *a->cmd ? ": " : "", sb_str(&b), sep,
                 a->cmd);
    else
        util_err("%s%s%s", a->cmd, *a->cmd ? ": " : "", sb_str(&b));
    sb_free(&b);
}

int util_args_next(struct util_args *a)
{
    int longindex = -1;
    a->value = NULL;
    a->name[0] = '\0';
    int c = getopt_long(a->argc, a->argv, a->shortopts, a->longopts, &longindex);
    if (c == -1) {
        a->next = optind;
        return -1;
    }
    if (c != '?' && c != ':') {
        set_name(a, c, longindex);
        a->value = optarg;
        if (optarg && !*optarg) {
            args_err(a, false, "%s needs a value", a->name);
            return '?';
        }
        return c;
    }
    /* glibc leaves the offending argument just before optind, or the letter in optopt. */
    const char *tok = optind - 1 >= 1 && optind - 1 < a->argc ? a->argv[optind - 1] : "";
    int namelen = (int)strcspn(tok, "=");
    bool is_long = strncmp(tok, "--", 2) == 0;
    if (c == ':') {
        if (is_long)
            args_err(a, false, "%.*s needs a value", namelen, tok);
        else
            args_err(a, false, "-%c needs a value", optopt);
    } else if (is_long) {
        struct strbuf names = { 0 };
        size_t n = matching_longopts(a->longopts, tok + 2, &names);
        if (n == 1 && strchr(tok, '='))
            args_err(a, false, "%.*s takes no value", namelen, tok);
        else if (n > 1)
            args_err(a, false, "%.*s is ambiguous: %s", namelen, tok, sb_str(&names));
        else
            args_err(a, true, "unknown option %.*s", namelen, tok);
        sb_free(&names);
    } else if (optopt) {
        args_err(a, true, "unknown option -%c", optopt);
    } else {
        args_err(a, true, "unknown option %s", tok);
    }
    return '?';
}

static bool bad_value(const struct util_args *a, const char *why)
{
    args_err(a, false, "%s %s: %s", a->name, a->value ? a->value : "", why);
    return false;
}

bool util_args_bad(const struct util_args *a, const char *why)
{
    return bad_value(a, why);
}

bool util_args_size(struct util_args *a, uint64_t *out)
{
    const char *why = NULL;
    uint64_t v;
    if (!sizes_parse(a->value, &v, &why))
        return bad_value(a, why);
    if (v == 0)
        return bad_value(a, "expected a size above 0 bytes");
    *out = v;
    return true;
}

bool util_args_percent(struct util_args *a, double *out)
{
    const char *why = NULL;
    double v;
    if (!sizes_parse_percent(a->value, &v, &why))
        return bad_value(a, why);
    if (!(v < 100))
        return bad_value(a, "expected a percentage from 0 to below 100, e.g. 10 or 12.5%");
    *out = v;
    return true;
}

bool util_args_limit(struct util_args *a, struct sizes_limit *out)
{
    const char *why = NULL;
    if (!sizes_parse_limit(a->value, out, &why))
        return bad_value(a, why);
    return true;
}

bool util_args_number(struct util_args *a, double lo, double hi, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = a->value ? strtod(a->value, &end) : 0;
    if (!a->value || errno || end == a->value || *end || !isfinite(v) || v < lo || v > hi) {
        struct strbuf why = { 0 };
        sb_printf(&why, "expected a number from %g to %g", lo, hi);
        bad_value(a, sb_str(&why));
        sb_free(&why);
        return false;
    }
    *out = v;
    return true;
}

int util_usage_error(const struct util_args *a, const char *fmt, ...)
{
    struct strbuf b = { 0 };
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&b, fmt, ap);
    va_end(ap);
    args_err(a, true, "%s", sb_str(&b));
    sb_free(&b);
    return EXIT_USAGE;
}

const char *util_fmt_size(int64_t bytes, char buf[UTIL_SIZE_LEN])
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    if (bytes < 1024) {
        snprintf(buf, UTIL_SIZE_LEN, "%" PRId64 " B", bytes > 0 ? bytes : 0);
        return buf;
    }
    double v = (double)bytes / 1024.0;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, UTIL_SIZE_LEN, "%.2f %s", v, units[u]);
    return buf;
}

const char *util_fmt_reltime(int64_t t_ns, int64_t start_ns, char buf[UTIL_TIME_LEN])
{
    /* Both are validated as >= 0, so the difference cannot overflow. */
    int64_t d = t_ns - start_ns;
    char sign = d < 0 ? '-' : '+';
    uint64_t a = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
    uint64_t hundredths = (a + 5000000) / 10000000;
    if (hundredths < 6000) {
        snprintf(buf, UTIL_TIME_LEN, "%c%" PRIu64 ".%02" PRIu64 "s", sign, hundredths / 100,
                 hundredths % 100);
        return buf;
    }
    uint64_t tenths = (a + 50000000) / 100000000;
    if (tenths < 36000) {
        snprintf(buf, UTIL_TIME_LEN, "%c%" PRIu64 "m%02" PRIu64 ".%" PRIu64 "s", sign, tenths / 600,
                 (tenths % 600) / 10, tenths % 10);
        return buf;
    }
    uint64_t secs = (a + 500000000) / 1000000000;
    snprintf(buf, UTIL_TIME_LEN, "%c%" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s", sign, secs / 3600,
             (secs % 3600) / 60, secs % 60);
    return buf;
}

const char *util_fmt_abstime(int64_t t_ns, char buf[UTIL_TIME_LEN])
{
    time_t secs = (time_t)(t_ns / 1000000000);
    struct tm tm;
    if (t_ns < 0 || !gmtime_r(&secs, &tm)) {
        snprintf(buf, UTIL_TIME_LEN, "%" PRId64 " ns", t_ns);
        return buf;
    }
    char day[32];
    strftime(day, sizeof day, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf, UTIL_TIME_LEN, "%s.%03d UTC", day, (int)(t_ns / 1000000 % 1000));
    return buf;
}

int64_t util_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t util_clamp_i64(double v)
{
    if (v != v)
        return 0;
    if (v >= 9223372036854775807.0)
        return INT64_MAX;
    if (v <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)v;
}

int util_clamp_int(double v)
{
    if (v != v)
        return 0;
    if (v >= (double)INT_MAX)
        return INT_MAX;
    if (v <= (double)INT_MIN)
        return INT_MIN;
    return (int)v;
}

size_t util_utf8_len(const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    /* Overlong forms, surrogates and code points past U+10FFFF are not UTF-8. */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void util_add_text(struct strbuf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    while (n > 0) {
        if (*p < 0x20 || *p == 0x7f) {
            sb_printf(b, "\\x%02x", *p);
            p++;
            n--;
            continue;
        }
        size_t l = util_utf8_len(p, n);
        if (l == 0) {
            sb_addc(b, '?');
            l = 1;
        } else {
            sb_addn(b, (const char *)p, l);
        }
        p += l;
        n -= l;
    }
}

void util_put_text(FILE *f, const char *s)
{
    struct strbuf b = { 0 };
    util_add_text(&b, s);
    fputs(sb_str(&b), f);
    sb_free(&b);
}

static bool shell_safe(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-", *s))
            return false;
    return true;
}

void util_add_size_arg(struct strbuf *b, uint64_t bytes)
{
    if (bytes % (UINT64_C(1) << 30) == 0)
        sb_printf(b, "%" PRIu64 "GiB", bytes >> 30);
    else if (bytes % (UINT64_C(1) << 20) == 0)
        sb_printf(b, "%" PRIu64 "MiB", bytes >> 20);
    else
        sb_printf(b, "%" PRIu64, bytes);
}

void util_add_argv(struct strbuf *b, const char *const *argv, size_t argc)
{
    for (size_t i = 0; i < argc; i++) {
        if (i)
            sb_addc(b, ' ');
        if (shell_safe(argv[i])) {
            sb_add(b, argv[i]);
            continue;
        }
        sb_addc(b, '\'');
        for (const char *q = argv[i]; *q; q++) {
            const char *quote = strchr(q, '\'');
            size_t n = quote ? (size_t)(quote - q) : strlen(q);
            char *part = util_xmalloc(n + 1);
            memcpy(part, q, n);
            part[n] = '\0';
            util_add_text(b, part);
            free(part);
            if (!quote)
                break;
            sb_add(b, "'\\''");
            q = quote;
        }
        sb_addc(b, '\'');
    }
}

const char *util_file_kind(unsigned mode)
{
    mode_t m = (mode_t)mode;
    if (S_ISREG(m))
        return "a regular file";
    if (S_ISLNK(m))
        return "a symbolic link";
    if (S_ISDIR(m))
        return "a folder";
    if (S_ISCHR(m) || S_ISBLK(m))
        return "a device";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    return "a special file";
}

static const char *not_regular(mode_t m)
{
    return util_file_kind(m);
}

int util_open_regular(int dirfd, const char *path, int flags, struct stat *st, const char **kind)
{
    *kind = NULL;
    /* Looked at before it is opened: opening is itself an action on a device (/dev/ptmx makes a
     * terminal, a tape rewinds) and waits on a FIFO without a writer. */
    struct stat pre;
    if (fstatat(dirfd, path, &pre, (flags & O_NOFOLLOW) ? AT_SYMLINK_NOFOLLOW : 0) != 0)
        return -1;
    if (!S_ISREG(pre.st_mode)) {
        *kind = util_file_kind(pre.st_mode);
        errno = 0;
        return -1;
    }
    /* O_NONBLOCK and O_NOCTTY for the moment between the look and the open, in case what stands
     * at the name changed; fstat then says whether it is still the same regular file. */
    int fd = openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | flags);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st->st_mode) || st->st_dev != pre.st_dev || st->st_ino != pre.st_ino) {
        *kind = S_ISREG(st->st_mode) ? "a file replaced while it was opened"
                                     : util_file_kind(st->st_mode);
        close(fd);
        errno = 0;
        return -1;
    }
    return fd;
}

/* Whether path may be replaced: missing, or a regular file. lstat, so a link is seen as one:
 * `-o /dev/null` or a link planted at the name must not be replaced or written through. */
static bool replaceable(const char *path, struct strbuf *why)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return true;
        sb_printf(why, "%s", strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        sb_printf(why, "it is %s, not a regular file: not replaced", not_regular(st.st_mode));
        return false;
    }
    return true;
}

void util_host_name(char *out, size_t n)
{
    if (gethostname(out, n) != 0)
        snprintf(out, n, "unknown");
    out[n - 1] = 0;
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            *p = '_';
}

/* The output's temporary files: NAME.tmp-HOST-PID-SEQ beside it, NAME its last component. A
 * writer killed between its create and its rename (timeline -o, merge -o under SIGKILL) leaves
 * one for good; the next writer of the same output removes those whose writer is certainly gone,
 * by the library's one rule (safefile_remove_stale, lib/base/safefile.h; docs/reliability.md
 * "Leftovers of killed writers"), anything in doubt staying: the name is exactly
 * NAME.tmp-HOST-PID-SEQ with our own host name (a pid means nothing on another host sharing the
 * folder), and the file has not been written to for UTIL_STALE_AGE_S (the moment between a
 * create and its lock, and writers of earlier versions, which took none).
 * Temporaries of earlier versions (NAME.tmp-PID-SEQ, no host) are never removed: whose they are
 * cannot be known. */
#define UTIL_STALE_AGE_S 60

/* The writer's pid in a temporary name of ours (prefix NAME.tmp-HOST-), or -1. */
static long long temp_pid(const char *name, const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0)
        return -1;
    const char *p = name + pl;
    long long pid = 0;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (pid > INT_MAX)
            return -1;
        pid = pid * 10 + (*p - '0');
    }
    if (*p++ != '-' || *p < '0' || *p > '9')
        return -1;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '\0' && pid >= 1 && pid <= INT_MAX ? pid : -1;
}

static void remove_stale_temps(const char *path, const char *host)
{
    const char *base = util_basename(path);
    size_t dirlen = (size_t)(base - path);
    char *dir = util_xmalloc(dirlen + 2);
    if (dirlen == 0) {
        strcpy(dir, ".");
    } else {
        memcpy(dir, path, dirlen);
        dir[dirlen] = '\0';
    }
    struct strbuf prefix = { 0 };
    sb_printf(&prefix, "%s.tmp-%s-", base, host);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(dir);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        sb_free(&prefix);
        return;
    }
    time_t now = time(NULL);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        long long pid = temp_pid(de->d_name, sb_str(&prefix));
        if (pid >= 0)
            safefile_remove_stale(dfd, de->d_name, pid, (long long)now - UTIL_STALE_AGE_S);
    }
    closedir(d);
    sb_free(&prefix);
}

bool util_replace_file(const char *path, unsigned mode, void (*fill)(FILE *f, const void *ctx),
                       const void *ctx, struct strbuf *why)
{
    if (!replaceable(path, why))
        return false;
    char host[256];
    util_host_name(host, sizeof(host));
    remove_stale_temps(path, host);
    /* The temporary name is beside the target, so the rename stays in one file system and is
     * atomic: a reader sees the old file or the new one, never half of one. O_EXCL and
     * O_NOFOLLOW: a name someone else made (a link, a file) is never opened, only skipped. */
    size_t cap = strlen(path) + strlen(host) + 64;
    char *tmp = util_xmalloc(cap);
    int fd = -1;
    for (unsigned attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, cap, "%s.tmp-%s-%ld-%u", path, host, (long)getpid(), attempt);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        sb_printf(why, "cannot create a file beside it: %s", strerror(errno));
        free(tmp);
        return false;
    }
    /* Locked from now to the rename (through a second descriptor, as fclose closes the first):
     * a later writer never takes a live one for a killed writer's leftover. */
    (void)flock(fd, LOCK_EX | LOCK_NB);
    int lockfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        sb_printf(why, "%s", strerror(errno));
        close(fd);
        unlink(tmp);
        if (lockfd >= 0)
            close(lockfd);
        free(tmp);
        return false;
    }
    fill(f, ctx);
    errno = 0;
    bool ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = false;
        saved = errno;
    }
    if (!ok) {
        sb_printf(why, "%s", strerror(saved ? saved : EIO));
    } else if (!replaceable(path, why)) {
        /* Checked again at the last moment: what stood there may have changed while we wrote. */
        ok = false;
    } else if (rename(tmp, path) != 0) {
        sb_printf(why, "%s", strerror(errno));
        ok = false;
    }
    if (!ok)
        unlink(tmp);
    if (lockfd >= 0)
        close(lockfd);
    free(tmp);
    return ok;
}

const char *util_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash && slash[1] ? slash + 1 : path;
}

bool util_has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}
