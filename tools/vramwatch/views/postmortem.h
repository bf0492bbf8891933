/* postmortem.h: one report's post-mortem, what `vramwatch report` prints for a report, and the
 * job view (jobview.c) for each of its processes. */
#ifndef VRAMWATCH_TOOL_POSTMORTEM_H
#define VRAMWATCH_TOOL_POSTMORTEM_H

#include <stdbool.h>
#include <stdio.h>

#include "model.h"

struct report_opts {
    bool json;  /* the report JSON back, or the job JSON for several */
    bool full;  /* whole stacks */
    bool color; /* ANSI colour, as colour_wanted (colour.h) decided */
};

/* The header, the leading line, each device, the timeline's sparklines, leaks, what failed, the
 * top call sites, limit crossings, cache flushes, host pinned memory and hints. */
void postmortem_print(FILE *out, const struct model_report *r, const struct report_opts *o);

#endif
