/* script.h: which options the job's training script defines, read from its source. */
#ifndef VRAMWATCH_TOOL_SCRIPT_H
#define VRAMWATCH_TOOL_SCRIPT_H

#include <stddef.h>

#include "model.h"

#include <stdbool.h>

/* The training script's source, read once for every question about it. Zero it to start. */
struct script {
    bool read;
    char *text; /* NULL: none, or it could not be read */
    size_t len;
};

/* The first of names (spelled as the script would, "--checkpoint") that the report's training
 * script defines, or NULL when it defines none of them or cannot be read. */
const char *script_option(struct script *s, const struct model_report *r, const char *const *names,
                          size_t n);
void script_free(struct script *s);
/* The training script as the report's command line names it ("examples/train_sim.py", or the
 * module of "python -m pkg.train"), or NULL when the command line names none. */
const char *script_name(const struct model_report *r);

#endif
