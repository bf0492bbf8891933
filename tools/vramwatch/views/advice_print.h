/* advice_print.h: the advice (advice.h) for people, and as vramwatch.advice/1 JSON. */
#ifndef VRAMWATCH_TOOL_ADVICE_PRINT_H
#define VRAMWATCH_TOOL_ADVICE_PRINT_H

#include <stdio.h>

#include "advice.h"

#define ADVICE_SCHEMA "vramwatch.advice/1"

/* The answer first (the command line advised on, what to change, the command to run next and
 * the `vramwatch fit` command, each command on a line of its own), then the details: the device
 * and its usable memory, what was observed, the model, the recommendations. Prose is wrapped to
 * the terminal's width (wrap.h); commands and code never are. */
void advice_print_text(FILE *out, const struct advice *a);
/* The answer alone, under the command line advised on (advise --brief). */
void advice_print_brief(FILE *out, const struct advice *a);
/* The answer alone, without that line (run prints it before the post-mortem). */
void advice_print_answer(FILE *out, const struct advice *a);
/* The details alone, what advice_print_text prints after the answer. */
void advice_print_details(FILE *out, const struct advice *a);
/* "peak 15.09 GiB (+ 300.00 MiB CUDA context and libraries)": every view's peak, and the memory
 * outside the job's allocations apart (none when untracked is 0). */
void advice_add_peak(struct strbuf *b, int64_t peak_reserved, int64_t untracked);
/* vramwatch.advice/1 (docs/advice.md, advice.schema.json). */
void advice_print_json(FILE *out, const struct advice *a);

#endif
