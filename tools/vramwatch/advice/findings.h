/* findings.h: conclusions drawn from a loaded report by itself, shared by the views that show them
 * (report, and advise's `leak` recommendation).
 *
 * Leaks: device memory that stays live and grows phase after phase, the OOM that arrives after
 * hours. Two ways to see the phases:
 *
 *   markers     vramwatch_mark() labels that repeat with a changing number ("epoch 3 train") form
 *               a group; the live memory at each of its markers is compared. A leak is growth at
 *               three quarters or more of the steps, at least 1 MiB per phase (the lower median).
 *   iterations  without such markers, a call site whose still-live allocations (the report's
 *               `live`) were made at regular moments across the run, in at least three of its
 *               four quarters, at least four of them: each allocation is taken as one iteration.
 *
 * The growing call site is the one whose live allocations were made in the most phases. */
#ifndef VRAMWATCH_TOOL_FINDINGS_H
#define VRAMWATCH_TOOL_FINDINGS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

enum leak_basis { LEAK_MARKERS, LEAK_ITERATIONS };

struct leak_finding {
    enum leak_basis basis;
    char phase[96];   /* the repeated phase: "epoch # train" (digits as #), or "iteration" */
    int64_t callsite; /* id of the growing call site in r->callsites, -1 when none stands out */
    model_int device; /* the device it grows on; unknown for marker groups over several devices */
    int64_t phases;   /* phases compared (markers in the group, or allocations seen) */
    int64_t bytes_per_phase;             /* growth of live memory per phase */
    int64_t phase_ns;                    /* typical length of one phase (median) */
    int64_t growth_bytes;                /* from the first phase compared to the last */
    int64_t first_unix_ns, last_unix_ns; /* the span the phases cover */
    model_int capacity_bytes;            /* of the device (the emulated one under a limit) */
    /* Projected time until live memory reaches the capacity at this rate, from the end of the
     * span: 0 when the run already ran out of memory or is above it; unknown without a capacity. */
    model_int time_to_capacity_ns;
};

/* Finds leaks in `r`, most growth first. Writes at most `max` into `out` and returns how many
 * were found (which may exceed max). Never fails: a report without markers, live allocations or
 * timeline simply has fewer ways to show one. */
size_t findings_leaks(const struct model_report *r, struct leak_finding *out, size_t max);

/* One line a person reads: "live memory grows 64.00 MiB per \"epoch # train\" (6 phases), from
 * train.py:212 in step; at this rate the card is full in 3h12m". */
void findings_describe_leak(struct strbuf *b, const struct model_report *r,
                            const struct leak_finding *f);

#endif
