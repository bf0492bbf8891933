/* jobview.h: the job view, what `vramwatch report` prints for several reports of one job. */
#ifndef VRAMWATCH_TOOL_JOBVIEW_H
#define VRAMWATCH_TOOL_JOBVIEW_H

#include <stddef.h>
#include <stdio.h>

#include "commands.h"
#include "model.h"

/* The job's header, processes, GPUs and findings, then each process's post-mortem. */
void jobview_print(FILE *out, struct model_report *reports, size_t n, const struct report_opts *o);

/* The vramwatch.job/1 document of these reports. */
void jobview_print_json(FILE *out, struct model_report *reports, size_t n);

#endif
