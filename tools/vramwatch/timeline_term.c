/* timeline_term.c: the timeline in the terminal, in Unicode blocks, with the markers, the failure
 * and leaks named under each panel. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "timeline.h"

#define ROWS 12

static void terminal_panel(FILE *out, const struct model_report *r, const struct panel *p, int cols,
                           bool color)
{
    static const char *const eighths[] = { " ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                           "\u2585", "\u2586", "\u2587", "\u2588" };
    const char *blue = color ? "\033[34m" : "", *orange = color ? "\033[33m" : "",
               *red = color ? "\033[31m" : "", *bold = color ? "\033[1m" : "",
               *reset = color ? "\033[0m" : "";
    int64_t *live = util_xcalloc((size_t)cols, sizeof *live),
            *res = util_xcalloc((size_t)cols, sizeof *res);
    model_tl_columns(p->d, p->t0, p->t1, (size_t)cols, live, res);
    struct strbuf b = { 0 };
    if (p->who)
        sb_printf(&b, "%s, ", p->who);
    if (p->d->ordinal.known)
        sb_printf(&b, "Device %" PRId64, p->d->ordinal.v);
    else
        sb_add(&b, "Unknown device");
    if (p->dev && p->dev->name) {
        sb_add(&b, ": ");
        sb_add(&b, p->dev->name);
    }
    fprintf(out, "%s", bold);
    util_put_text(out, sb_str(&b));
    fprintf(out, "%s\n", reset);
    sb_free(&b);
    double cell = p->ymax / ROWS;
    int cap_row = p->capacity.known ? util_clamp_int((double)p->capacity.v / cell) : -1;
    for (int row = ROWS - 1; row >= 0; row--) {
        double lo = row * cell;
        char lbl[UTIL_SIZE_LEN];
        if (row % 3 == 2 || row == ROWS - 1)
            fprintf(out, "%11s \u2524", util_fmt_size((int64_t)(lo + cell), lbl));
        else
            fprintf(out, "%11s \u2502", "");
        for (int c = 0; c < cols; c++) {
            double l = (double)live[c], rv = (double)res[c];
            if (l >= lo + cell) {
                fprintf(out, "%s\u2588%s", blue, reset);
            } else if (l > lo) {
                int e = (int)((l - lo) / cell * 8);
                fprintf(out, "%s%s%s", blue, eighths[e < 1 ? 1 : e], reset);
            } else if (rv > lo) {
                fprintf(out, "%s\u2592%s", orange, reset); /* reserved, not handed out */
            } else if (row == cap_row) {
                fprintf(out, "%s\u2500%s", red, reset);
            } else {
                fputc(' ', out);
            }
        }
        fputc('\n', out);
    }
    /* Under the axis: markers (|) and out-of-memory failures (X) at their columns. */
    char *marks = util_xcalloc((size_t)cols + 1, 1);
    memset(marks, ' ', (size_t)cols);
    double span = (double)(p->t1 - p->t0);
    for (size_t i = 0; i < r->n_markers; i++) {
        int c = util_clamp_int((double)(r->markers[i].time_unix_ns - p->t0) / span * cols);
        if (c >= 0 && c < cols)
            marks[c] = '|';
    }
    int64_t ord = p->d->ordinal.known ? p->d->ordinal.v : -1;
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        int c = util_clamp_int((double)(f->time_unix_ns - p->t0) / span * cols);
        if ((f->device.known ? f->device.v : -1) == ord && model_failure_is_real_oom(f) && c >= 0 &&
            c < cols)
            marks[c < cols ? c : cols - 1] = 'X';
    }
    fprintf(out, "%11s \u2514", "");
    for (int c = 0; c < cols; c++)
        fputs("\u2500", out);
    fprintf(out, "\n%11s  %s%s%s\n", "", red, marks, reset);
    free(marks);
    struct strbuf t = { 0 };
    timeline_add_reltime(&t, 0);
    struct strbuf e = { 0 };
    timeline_add_reltime(&e, p->t1 - p->t0);
    fprintf(out, "%11s  %-*s%s\n", "", cols - (int)e.len, sb_str(&t), sb_str(&e));
    sb_free(&t);
    sb_free(&e);
    fprintf(out, "%11s  %s\u2588%s live  %s\u2592%s reserved, not handed out (fragmentation)", "",
            blue, reset, orange, reset);
    if (p->capacity.known) {
        char cs[UTIL_SIZE_LEN];
        fprintf(out, "  %s\u2500%s %s %s", red, reset, p->emulated ? "emulated limit" : "capacity",
                util_fmt_size(p->capacity.v, cs));
    }
    fputc('\n', out);
    free(live);
    free(res);
}

/* Markers, the failure and leaks of one report by name, so the | and X above can be read. */
static void terminal_notes(FILE *out, const struct model_report *r, int64_t t0, const char *who)
{
    if (r->n_markers && who)
        fprintf(out, "\n%s: markers (|):", who);
    else if (r->n_markers)
        fputs("\nMarkers (|):", out);
    for (size_t i = 0; i < r->n_markers && i < 24; i++) {
        struct strbuf b = { 0 };
        timeline_add_reltime(&b, r->markers[i].time_unix_ns - t0);
        fprintf(out, "%s %s ", i ? "," : "", sb_str(&b));
        util_put_text(out, r->markers[i].label);
        sb_free(&b);
    }
    if (r->n_markers > 24)
        fprintf(out, ", and %zu more", r->n_markers - 24);
    if (r->n_markers)
        fputc('\n', out);
    const struct model_failure *f = model_real_oom(r);
    if (f) {
        struct strbuf b = { 0 };
        char s1[UTIL_SIZE_LEN];
        timeline_add_reltime(&b, f->time_unix_ns - t0);
        sb_printf(&b, ": %s of %s failed, out of memory, from ", f->api,
                  util_fmt_size(f->size, s1));
        model_callsite_short(&b, r, f->callsite);
        if (who)
            fprintf(out, "%s%s: out of memory (X) at ", r->n_markers ? "" : "\n", who);
        else
            fputs("Out of memory (X) at ", out);
        util_put_text(out, sb_str(&b));
        fputc('\n', out);
        sb_free(&b);
    }
    struct leak_finding leaks[4];
    size_t n = findings_leaks(r, leaks, 4);
    for (size_t i = 0; i < n && i < 4; i++) {
        struct strbuf b = { 0 };
        findings_describe_leak(&b, r, &leaks[i]);
        if (who)
            fprintf(out, "%s: ", who);
        fputs("Leak: ", out);
        util_put_text(out, sb_str(&b));
        fputc('\n', out);
        sb_free(&b);
    }
}

void timeline_terminal(FILE *out, const struct view *v, bool color)
{
    int cols = 72;
    const char *env = getenv("COLUMNS");
    if (env && atoi(env) >= 40)
        cols = atoi(env) - 14;
    if (cols > 200)
        cols = 200;
    for (size_t i = 0; i < v->n_panels; i++) {
        if (i)
            fputc('\n', out);
        terminal_panel(out, v->owner[i], &v->panels[i], cols, color);
    }
    for (size_t i = 0; i < v->n_reports; i++) {
        const struct model_report *r = v->reports[i];
        int64_t t0 = v->n_reports > 1 && v->n_panels ? v->panels[0].t0
                     : r->timeline.n_devices         ? r->timeline.devices[0].start_unix_ns
                                                     : 0;
        terminal_notes(out, r, t0, v->who[i]);
    }
}
