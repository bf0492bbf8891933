/* advice_print.h: the advice (advice.h) for people, and as vramwatch.advice/1 JSON. */
#ifndef VRAMWATCH_TOOL_ADVICE_PRINT_H
#define VRAMWATCH_TOOL_ADVICE_PRINT_H

#include <stdio.h>

#include "advice.h"

#define ADVICE_SCHEMA "vramwatch.advice/1"

/* The device and its usable memory, what was observed, the model, then the recommendations. */
void advice_print_text(FILE *out, const struct advice *a);
/* vramwatch.advice/1 (docs/advice.md, advice.schema.json). */
void advice_print_json(FILE *out, const struct advice *a);

#endif
