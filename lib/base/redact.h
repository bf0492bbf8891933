/* redact.h: command-line values that look like secrets, replaced in the report's argv. */
#ifndef VRAMWATCH_REDACT_H
#define VRAMWATCH_REDACT_H

#include <stdbool.h>
#include <stddef.h>

/* What stands where a secret was. Documented in docs/report-format.md. */
#define REDACT_MARK "***"

/* Whether arg is a flag whose value is the next argument and is a secret: "--token",
 * "--api-key", "--private-key", "--pat", "-token", ... (any flag whose name has a secret word
 * as one of its parts; spelled with '-' or '_', any case, one or two dashes). Not a switch
 * such as "--use_auth_token" or "--no-token". */
bool redact_is_secret_flag(const char *arg);

/* Writes arg into out (cap bytes, NUL-terminated) with its secrets replaced by REDACT_MARK:
 * all of V in NAME=V when NAME is a secret's ("--token=X", "HF_TOKEN=X", "hub.token=X"); inside
 * the text, "?token=X&..." and "a=1 key=X", "Authorization: Bearer X" (the scheme kept),
 * "X-Api-Key: X", "\"token\": \"X\"", "--token X" (a shell command in one argument); the
 * password of a URL with credentials (user:***@host; a URL with a user name alone loses it,
 * ***@host, as tokens travel there too).
 * after_secret_flag: the previous argument was a secret flag, so all of arg is the secret,
 * even when it starts with dashes; only "--" is not.
 * Returns true when something was replaced. Needs cap >= 2 * strlen(arg) + 8 to never cut.
 * No allocation. */
bool redact_arg(const char *arg, bool after_secret_flag, char *out, size_t cap);

/* A command line of which only the arguments joined by spaces are known (vramwatch top shows
 * the live-state file's argv so; a file written by an older library holds it unredacted). A
 * joined line cannot be split back exactly ("--password=a b" and "--password=a" "b" read the
 * same), so it is redacted twice, over-replacing rather than missing: all of it as one text
 * (redact_arg), then each space-separated word as an argument, with the previous word's state
 * (after a secret flag, the word is the secret; after a secret header's name "Authorization:",
 * an authentication scheme is kept and the word after it replaced). work: work_size bytes of the
 * caller's. Needs work_size >= 2 * strlen(line) + 8 and cap >= 2 * work_size to never cut.
 * Returns true when something was replaced. No allocation. */
bool redact_line(const char *line, char *work, size_t work_size, char *out, size_t cap);

/* The report's argv: most bytes of argument text written (each argument counting one more). */
#define REDACT_ARGV_MAX 65536
/* A work area for redact_cmdline that sees any argument of REDACT_ARGV_MAX bytes whole. */
#define REDACT_WORK_SIZE (3 * REDACT_ARGV_MAX + 8)

/* Reads a command line in the form of /proc/PID/cmdline (arguments each ended by a NUL) from
 * fd, and calls emit once per argument, redacted as redact_arg() does, the argument after a
 * secret flag included, until max_bytes of output. Each argument is redacted whole before
 * anything is cut, so the cut can only take text away: a URL cut before its '@' cannot show
 * its password. An argument longer than a third of work (a program may rewrite its argv) is
 * redacted as far as it is seen, as text that goes on: a URL authority running to its end is
 * replaced. work: work_size bytes of the caller's (no allocation here; REDACT_WORK_SIZE sees
 * any argument of REDACT_ARGV_MAX bytes). Returns the number of arguments emitted. */
size_t redact_cmdline(int fd, char *work, size_t work_size, size_t max_bytes,
                      void (*emit)(void *ctx, const char *arg), void *ctx);

#endif
