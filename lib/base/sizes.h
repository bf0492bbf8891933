/* sizes.h: the one grammar of sizes, percentages and per-device limits, for the library
 * (VRAMWATCH_LIMIT, read once at load) and the command line (--limit, --target, --headroom).
 *
 * Built into both, so the two cannot drift. Safe where the library runs: no allocation, no stdio,
 * no getenv, no locale (a host program's LC_NUMERIC must not move the decimal point). Every
 * refusal comes with a short static reason, for one-line messages.
 *
 * Sizes:      "17179869184", "512B", "16GiB", "16G", "16g", "1.5GiB", "14.4GiB", "16000MB",
 *             " 8 MiB " (blanks around the number and between number and unit are allowed).
 *             K M G T and KiB MiB GiB TiB are powers of 1024, KB MB GB TB powers of 1000, letters
 *             in either case; a fraction needs a unit and is rounded down to whole bytes; at most
 *             INT64_MAX bytes (reports hold sizes in signed 64-bit fields).
 * Percentages: "90", "90%", "12.5 %": digits, an optional fraction, an optional '%'; 0 to 100.
 * Limits:     one size or share for every device ("16GiB", "90%"), or a list of DEVICE:VALUE
 *             ("0:16GiB,1:90%"); a device is 0 to SIZES_MAX_DEVICES - 1 and named at most once;
 *             a size is at least SIZES_MIN_LIMIT (1 MiB: "16" is 16 bytes, most likely 16GiB
 *             with its unit left out, and no card is that small), a share more than 0% and at
 *             most 100% (a share needs its '%': it is what tells it from a size in bytes).
 */
#ifndef VW_SIZES_H
#define VW_SIZES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Devices a limit can name: the library's table size (options.c checks that they agree). */
#define SIZES_MAX_DEVICES 64

/* A size in bytes. On failure *why (when why is not NULL) says what is wrong. */
bool sizes_parse(const char *s, uint64_t *out, const char **why);
/* The same on exactly n characters at s (s need not be NUL-terminated there). */
bool sizes_parse_n(const char *s, size_t n, uint64_t *out, const char **why);

/* A percentage from 0 to 100, '%' optional: "5", "5%", "12.5 %". *out is in percent (12.5). */
bool sizes_parse_percent(const char *s, double *out, const char **why);

/* What a limit says for each device: bytes, or a share of the card (a fraction, 0.9 for 90%),
 * or neither (0 and 0: no limit on that device). */
struct sizes_limit {
    bool every; /* one value for every device, not a list */
    uint64_t bytes[SIZES_MAX_DEVICES];
    double share[SIZES_MAX_DEVICES];
};

/* The smallest limit in bytes: below it, "16 bytes is below 1 MiB: did you mean 16GiB?". */
#define SIZES_MIN_LIMIT ((uint64_t)1 << 20)

/* A limit as VRAMWATCH_LIMIT and --limit spell it. *out is written only on success. The reason
 * for a limit below SIZES_MIN_LIMIT is in a buffer of the calling thread, good until its next
 * call; every other reason is static. */
bool sizes_parse_limit(const char *s, struct sizes_limit *out, const char **why);

#endif
