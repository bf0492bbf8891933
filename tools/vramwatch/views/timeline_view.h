/* timeline_view.h: the pieces of `vramwatch timeline` (cmd_timeline.c): what is drawn (timeline_view.c)
 * and the drawings of it: SVG and HTML (timeline_svg.c), the terminal (timeline_term.c). */
#ifndef VRAMWATCH_TOOL_TIMELINE_H
#define VRAMWATCH_TOOL_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "util.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)

/* One device of one report, as drawn. */
struct panel {
    const struct model_tl_device *d;
    const struct model_device *dev; /* the report's device entry, NULL if none matches */
    int64_t t0, t1;                 /* time span shown */
    double ymax;                    /* bytes at the top of the plot */
    model_int capacity;             /* the line drawn: limit when emulated, else capacity */
    bool emulated;
    const char *who; /* "rank 3 (node-a, pid 8104)" in a job's picture, "--batch 64" for a run at
                        other settings, else NULL */
    int64_t origin;  /* what its times count from: its report's origin in the view */
};

/* What is drawn: one panel per device of each report; a job's panels share one time axis, so
 * the ranks line up (their clocks are the hosts': on several machines, as good as their sync).
 * Runs of one script at other settings (job_together: JOB_RUNS) are each drawn on a time axis of
 * their own, from the run's start, their panels one under the other, run by run. */
struct view {
    const struct model_report **reports; /* run by run, each in rank order */
    size_t n_reports;
    struct panel *panels;
    const struct model_report **owner; /* the report of each panel */
    char **who;                        /* per report: NULL for a single report */
    int64_t *origin; /* per report: what its times count from (timeline_view_origin_text) */
    bool from_start; /* the origins are process starts (else, unknown, the first allocations) */
    size_t *run_of;                    /* per report: its run, from 0 */
    char **run_label;                  /* per run: what tells it apart; NULL for one run */
    size_t n_runs;                     /* 1: one job (or one report) */
    size_t n_panels;
    bool full_frames; /* the flame graphs' call chains whole (--full), not from the application's */
};

/* The view of reports ordered run by run: run_of[i] is the run of reports[i] (NULL, or n_runs
 * below 2: one job). Each run is named by the settings that differ between the runs ("--batch 64",
 * "--img 320 --batch 16"; "run 2" when none does), and "(out of memory)" when it ran out. */
void timeline_view_build(struct view *v, const struct model_report **reports, size_t n,
                         const size_t *run_of, size_t n_runs);
void timeline_view_free(struct view *v);

/* The end of bucket i of a panel: the next bucket's start or its own width, whichever is first;
 * the last bucket's values hold until the report. */
int64_t timeline_view_bucket_end(const struct panel *p, size_t i);

/* "+0.64s", "+1m30.0s", "+2h03m04s": a time since the origin, as `vramwatch report` writes it
 * (util_fmt_reltime), so every view names an event by the same time. */
void timeline_view_add_reltime(struct strbuf *b, int64_t ns);
/* The same for an axis' tick, with as many decimals as ticks `step` ns apart need to differ:
 * "+0.832s" where the ticks are a millisecond apart. */
void timeline_view_add_tick(struct strbuf *b, int64_t ns, int64_t step);
/* What the times of the view count from, in words for a legend or an axis: "time since the
 * process started", "time since the job's first process started", "time since each run's
 * process started". */
const char *timeline_view_origin_text(const struct view *v);
/* "1.50 GiB", as every view prints sizes. */
void timeline_view_add_size(struct strbuf *b, int64_t bytes);

/* A JSON string: UTF-8 kept, control characters escaped, a byte that is not UTF-8 as U+FFFD;
 * in_html: < > & escaped too, so it can stand inside an HTML <script> element. */
void timeline_view_add_json(struct strbuf *b, const char *s, bool in_html);

/* Text from the report, made safe for XML (and for one line). */
void timeline_view_add_xml(struct strbuf *b, const char *s);

/* The whole picture: an SVG document, or (html) a page holding it with a tooltip. */
void timeline_svg_write(struct strbuf *o, const struct view *v, bool html);

/* The HTML's flame graphs of live memory by call chain (timeline_flame.c). */
void timeline_flame_html(struct strbuf *o, const struct view *v);

/* The timeline as a Chrome trace event file (timeline_trace.c), for Perfetto and chrome://tracing. */
void timeline_trace_write(struct strbuf *o, const struct view *v);

/* The terminal view, in ANSI colour when color. */
void timeline_term_print(FILE *out, const struct view *v, bool color);

#endif
