/* timeline_stacks.h: live memory by call chain at one moment, as the flame graphs draw it
 * (timeline_flame.c, in the HTML) and as the standard formats write it (timeline_stacks.c:
 * collapsed stacks and speedscope's JSON). */
#ifndef VRAMWATCH_TOOL_TIMELINE_STACKS_H
#define VRAMWATCH_TOOL_TIMELINE_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "sb.h"
#include "timeline_view.h"

/* The moments a report keeps its call sites' live bytes for (docs/report-format.md:
 * callsites[].live_bytes, live_bytes_at_peak, live_bytes_at_failure). STACKS_AT_DEFAULT: the
 * failure where a report keeps it, else the peak. */
enum stacks_moment { STACKS_AT_REPORT, STACKS_AT_PEAK, STACKS_AT_FAILURE, STACKS_AT_DEFAULT };

/* The call sites' live bytes at one moment as the report records them, into out (one per call
 * site); false when no call site gives them (the peak's and the failure's are optional). */
bool timeline_stacks_site_bytes(const struct model_report *r, enum stacks_moment m, int64_t *out);

/* The outermost frame of a call site drawn (an index into its frames, innermost first): the
 * first of the application's own (model_first_user_frame), or with full the outermost there is. */
size_t timeline_stacks_root(const struct model_callsite *cs, bool full);

/* Whether frame k of a call site is drawn: the interpreter's own native frames between the
 * Python lines (model_frame_in_interpreter) are left out unless full. */
bool timeline_stacks_shown(const struct model_callsite *cs, size_t k, bool full);

/* Collapsed stacks ("frame;frame;frame bytes", root first, one line per call chain) of what was
 * live at one moment, every report of the view (a job's or runs' named in a root frame of its
 * own). False, with a one-line reason in err, when no report keeps that moment. */
bool timeline_stacks_collapsed(struct strbuf *o, const struct view *v, enum stacks_moment at,
                               bool full, struct strbuf *err);

/* speedscope's file format: a sampled profile in bytes of what was live at the peak and one of
 * what was live at the failure, per report, as far as each keeps them (at: only that moment;
 * STACKS_AT_DEFAULT: both). False, with a one-line reason in err, when there is none to write. */
bool timeline_stacks_speedscope(struct strbuf *o, const struct view *v, enum stacks_moment at,
                                bool full, struct strbuf *err);

#endif
