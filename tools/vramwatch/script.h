/* script.h: which options the job's training script defines, read from its source. */
#ifndef VRAMWATCH_TOOL_SCRIPT_H
#define VRAMWATCH_TOOL_SCRIPT_H

#include <stddef.h>

#include "model.h"

/* The first of names (spelled as the script would, "--checkpoint") that the report's training
 * script defines, or NULL when it defines none of them or cannot be read. */
const char *script_option(const struct model_report *r, const char *const *names, size_t n);

#endif
