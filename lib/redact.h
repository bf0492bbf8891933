/* redact.h: command-line values that look like secrets, replaced in the report's argv. */
#ifndef VRAMWATCH_REDACT_H
#define VRAMWATCH_REDACT_H

#include <stdbool.h>
#include <stddef.h>

/* What stands where a secret was. Documented in docs/report-format.md. */
#define REDACT_MARK "***"

/* Whether arg is a flag whose value is the next argument and is a secret: "--token",
 * "--api-key", "--password", ... (spelled with '-' or '_', any case, one or two dashes). */
bool redact_is_secret_flag(const char *arg);

/* Writes arg into out (cap bytes, NUL-terminated) with its secrets replaced by REDACT_MARK:
 * the value of "--token=X" and the like, the value of NAME=V when NAME ends in _KEY, _TOKEN,
 * _SECRET or PASSWORD, and the password of a URL with credentials (user:***@host; a
 * URL with a user name alone loses it (***@host), as tokens travel there too).
 * after_secret_flag: the previous argument was a secret flag, so all of arg is the secret.
 * Returns true when something was replaced. Needs cap >= 2 * strlen(arg) + 8 to never cut.
 * No allocation: the report writer calls it with static buffers. */
bool redact_arg(const char *arg, bool after_secret_flag, char *out, size_t cap);

#endif
