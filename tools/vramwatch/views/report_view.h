/* report_view.h: one report or several, as `vramwatch report` and `vramwatch run` print them. */
#ifndef VRAMWATCH_TOOL_REPORT_VIEW_H
#define VRAMWATCH_TOOL_REPORT_VIEW_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"
#include "postmortem.h"

/* One report's post-mortem, or for several a job header then each one's; with json, the report
 * back, or the vramwatch.job/1 document of several. */
void report_view_show(FILE *out, struct model_report *reports, size_t n,
                      const struct report_opts *o);

#endif
