/* jobview.h: the job view, what `vramwatch report` prints for several reports: each separate
 * run apart, and for a run of several processes (a job) its view. */
#ifndef VRAMWATCH_TOOL_JOBVIEW_H
#define VRAMWATCH_TOOL_JOBVIEW_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"
#include "postmortem.h"

/* Several reports: told apart into runs (job_split), a line each, then each run's view: a job's
 * header, processes, GPUs and findings, then the post-mortem of the first to fail (else of the
 * highest peak), every process's with o->full. One run is shown without the runs' list. */
void jobview_print(FILE *out, struct model_report *reports, size_t n, const struct report_opts *o);

/* The vramwatch.job/1 document of these reports. */
void jobview_print_json(FILE *out, struct model_report *reports, size_t n);

#endif
