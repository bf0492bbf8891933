/* util.h: small helpers shared by the vramwatch commands: messages, sizes, times, safe text. */
#ifndef VRAMWATCH_TOOL_UTIL_H
#define VRAMWATCH_TOOL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Most users of these helpers build strings too: the string builder comes with them. */
#include "sb.h"

/* Exit statuses of the contract. */
enum { EXIT_DONE = 0, EXIT_PROBLEM = 1, EXIT_USAGE = 2 };

/* One line "vramwatch: ..." on stderr. Control characters coming from user data (file names,
 * report strings) are replaced so the message stays one line. */
void util_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Allocation that cannot fail silently: on exhaustion the tool says so and exits 2. */
void util_out_of_memory(void) __attribute__((noreturn));
void *util_xmalloc(size_t n);
void *util_xcalloc(size_t count, size_t size);
void *util_xrealloc(void *p, size_t n);
char *util_xstrdup(const char *s);

/* Sizes, percentages and limits are read with the library's own grammar (lib/base/sizes.h, built into
 * both), so that what the library takes from VRAMWATCH_LIMIT and what the commands take are one
 * thing: through util_args_size, util_args_percent and util_args_limit below, or sizes_parse*. */

/* The options of a command, with getopt_long: "--name VALUE" and "--name=VALUE" both work, a
 * long name may be shortened while it is unambiguous, and every mistake is one line naming the
 * command. The pattern:
 *
 *     static const struct option longopts[] = {
 *         { "json", no_argument, NULL, 'j' },
 *         { "target", required_argument, NULL, 't' },
 *         { "help", no_argument, NULL, 'h' },
 *         { NULL, 0, NULL, 0 },
 *     };
 *     struct util_args a;
 *     util_args_init(&a, "advise", argc, argv, "hj", longopts);
 *     for (int c; (c = util_args_next(&a)) != -1;) {
 *         switch (c) {
 *         case 'j': json = true; break;
 *         case 't': if (!util_args_size(&a, &target)) return EXIT_USAGE; break;
 *         case 'h': fputs(usage, stdout); return EXIT_DONE;
 *         default: return EXIT_USAGE; // '?': the line is already on stderr
 *         }
 *     }
 *     // the operands: argv[a.next] .. argv[argc - 1]
 *
 * Options and operands may come in any order ("report r.json --json"), unless shortopts begins
 * with '+' (getopt's own sign, "+h"): then the first operand ends the options, so that a wrapped
 * command keeps its own ("run --limit 8G python train.py --batch 4"). A "--" always ends them. */
struct option;
struct sizes_limit;
struct util_args {
    const char *cmd; /* "advise", for messages */
    int argc;
    char **argv;
    const struct option *longopts;
    char shortopts[64];
    const char *value; /* the value of the option just returned, or NULL */
    char name[48];     /* that option as messages name it: "--target", "-o" */
    int next;          /* at the end, the first operand */
};
void util_args_init(struct util_args *a, const char *cmd, int argc, char **argv,
                    const char *shortopts, const struct option *longopts);
/* The next option's getopt value (its short letter or the val of its struct option), -1 after
 * the last, or '?' once a one-line error is on stderr (unknown, ambiguous, missing or empty
 * value, a value given to an option that takes none). */
int util_args_next(struct util_args *a);
/* The current option's value read with the shared grammar, or one line "CMD: --NAME VALUE: why"
 * and false. A size is more than 0 bytes. A percentage is from 0 to below 100 (a headroom: 100%
 * would leave nothing), '%' optional. A number is a decimal from lo to hi. */
bool util_args_size(struct util_args *a, uint64_t *out);
bool util_args_percent(struct util_args *a, double *out);
bool util_args_limit(struct util_args *a, struct sizes_limit *out);
bool util_args_number(struct util_args *a, double lo, double hi, double *out);
/* The same line for a value the caller reads itself ("CMD: --NAME VALUE: why"); returns false. */
bool util_args_bad(const struct util_args *a, const char *why);
/* A one-line usage error "CMD: MESSAGE (see vramwatch CMD --help)" for checks of the caller's
 * own: a missing operand, options that do not go together. Returns EXIT_USAGE. */
int util_usage_error(const struct util_args *a, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Human-readable sizes: "14.50 GiB", "256.00 MiB", "512 B". Negative values are shown as 0. */
#define UTIL_SIZE_LEN 32
const char *util_fmt_size(int64_t bytes, char buf[UTIL_SIZE_LEN]);
/* A time relative to a start, "+12m34.6s", "+3.25s", "+2h03m04s". */
#define UTIL_TIME_LEN 48
const char *util_fmt_reltime(int64_t t_ns, int64_t start_ns, char buf[UTIL_TIME_LEN]);

/* An absolute time, "2024-11-30 02:25:13.123 UTC", for when no start time is known. */
const char *util_fmt_abstime(int64_t t_ns, char buf[UTIL_TIME_LEN]);

/* A double converted to an integer type, saturating (NaN gives 0): a cast of a value out of
 * range is undefined behaviour, and figures computed from untrusted reports can be anything. */
int64_t util_clamp_i64(double v);
int util_clamp_int(double v);

/* int64 sum that saturates instead of overflowing (report values are untrusted). */
int64_t util_sat_add(int64_t a, int64_t b);

/* Length of the valid UTF-8 sequence at p (at most n bytes), or 0 if it is not one. */
size_t util_utf8_len(const unsigned char *p, size_t n);

/* Writes report text for a terminal: control characters as \xNN, invalid UTF-8 as '?'. */
void util_put_text(FILE *f, const char *s);
/* Same, into a string. */
void util_add_text(struct strbuf *b, const char *s);
/* A command line the way a shell would take it back: arguments quoted only where needed. */
void util_add_argv(struct strbuf *b, const char *const *argv, size_t argc);
/* A size as the command line's options take it back (--limit, --sim): 16GiB, 512MiB, else bytes. */
void util_add_size_arg(struct strbuf *b, uint64_t bytes);

/* Writes an output file named on the command line whole or not at all: fill() writes into a
 * new file beside it (created with O_EXCL, permissions mode less the umask), which is then
 * renamed over path. A path that exists and is not a regular file (a symbolic link, a folder, a
 * device, a FIFO, a socket) is refused, not replaced or written through. Returns false with a
 * short reason in why; nothing is left behind then. The new file is PATH.tmp-HOST-PID-SEQ, locked
 * (flock) until its rename; the temporaries of PATH that killed writers left are removed first,
 * by the library's rule for its own (util.c, docs/reliability.md). */
bool util_replace_file(const char *path, unsigned mode, void (*fill)(FILE *f, const void *ctx),
                       const void *ctx, struct strbuf *why);

/* What a file of this st_mode is, for messages: "a folder", "a FIFO", "a device", "a socket",
 * "a symbolic link", "a regular file", "a special file". */
const char *util_file_kind(unsigned mode);

/* Every file the command reads and did not create (a report, a script named in a report, a
 * status or log file a job wrote, a live-state file, a shebang line) is opened here: looked at
 * first (fstatat) and opened only when it is a regular file, with O_RDONLY | O_NONBLOCK |
 * O_NOCTTY | O_CLOEXEC and `flags` (O_NOFOLLOW), then checked again with fstat to be the same
 * regular file, whose stat is left in *st. Returns the descriptor, or -1 with errno set (a system
 * error: the file is missing, ...) or with errno 0 and *kind saying what it is instead ("a
 * FIFO", "a device", ...). A device is never opened, a FIFO never waited on. dirfd: AT_FDCWD or
 * a folder's descriptor, for a relative path. */
struct stat;
int util_open_regular(int dirfd, const char *path, int flags, struct stat *st, const char **kind);

/* This host's name as file names spell it (as the library does): characters other than
 * letters, digits, '.', '-' and '_' as '_'. */
void util_host_name(char *out, size_t n);

/* The last path component ("libcuda.so.1" of "/usr/lib/x86_64-linux-gnu/libcuda.so.1"). */
const char *util_basename(const char *path);
/* Whether s ends with suffix ("conv.py" with ".py"). */
bool util_has_suffix(const char *s, const char *suffix);

#endif
