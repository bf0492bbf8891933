/* timeline_term.c: the timeline in the terminal, in Unicode blocks as wide as the terminal, with
 * the markers, failures, cache flushes and leaks named under the panels. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "timeline_view.h"
#include "wrap.h"

#define ROWS 12
#define LABEL_COLS 13 /* "  14.00 GiB ┤" before the plot */

struct term {
    FILE *out;
    int width;       /* the terminal's columns */
    bool notes_open; /* the blank line before the notes is written */
    const char *blue, *orange, *grey, *red, *bold, *reset;
};

/* Reserved plus untracked memory per column, as model_tl_columns resamples live and reserved:
 * the most of the buckets that start in a column, else the last values of the one before. */
static bool used_columns(const struct panel *p, size_t n, int64_t *used)
{
    const struct model_tl_device *d = p->d;
    bool any = false;
    int64_t last = 0;
    double span = (double)(p->t1 - p->t0);
    size_t k = 0;
    for (size_t c = 0; c < n; c++) {
        int64_t end = p->t0 + (int64_t)(span * (double)(c + 1) / (double)n);
        int64_t most = -1;
        for (; k < d->n_buckets && (d->buckets[k].t < end || c + 1 == n); k++) {
            const struct model_tl_bucket *b = &d->buckets[k];
            int64_t u = b->untracked_max.known && b->untracked_max.v > 0 ? b->untracked_max.v : 0;
            if (b->untracked_max.known)
                any = true;
            if (b->reserved_max + u > most)
                most = b->reserved_max + u;
            last = b->reserved + (b->untracked.known && b->untracked.v > 0 ? b->untracked.v : 0);
        }
        used[c] = most >= 0 ? most : last;
    }
    return any;
}

/* Which mark a column gets, the most telling when several fall in one: X out of memory, x a
 * failure a retry overcame, f a cache flush, | a marker. */
static void put_mark(char *marks, int cols, double frac, char m)
{
    static const char order[] = " |fxX";
    int c = util_clamp_int(frac * cols);
    if (c < 0 || c > cols || frac < 0)
        return;
    if (c == cols)
        c = cols - 1; /* at the very end: the last column */
    if (strchr(order, m) > strchr(order, marks[c]))
        marks[c] = m;
}

/* One entry of a panel's key, "█ live", after two spaces or on a new line when the terminal's
 * width is reached. */
static void key_item(struct term *t, int *col, const char *colour, const char *glyph,
                     const char *text)
{
    int len = 2 + (int)strlen(text); /* the glyph is one column */
    if (*col > LABEL_COLS && *col + 2 + len > t->width) {
        fprintf(t->out, "\n%*s", LABEL_COLS, "");
        *col = LABEL_COLS;
    } else if (*col > LABEL_COLS) {
        fputs("  ", t->out);
        *col += 2;
    }
    fprintf(t->out, "%s%s%s %s", colour, glyph, t->reset, text);
    *col += len;
}

static void panel_title(struct term *t, const struct panel *p)
{
    FILE *out = t->out;
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
    fprintf(out, "%s", t->bold);
    util_put_text(out, sb_str(&b));
    fprintf(out, "%s\n", t->reset);
    sb_free(&b);
}

/* The plot, row by row from the top; whether it drew untracked memory anywhere. */
static bool panel_plot(struct term *t, const struct panel *p, int cols)
{
    static const char *const eighths[] = { " ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                           "\u2585", "\u2586", "\u2587", "\u2588" };
    FILE *out = t->out;
    int64_t *live = util_xcalloc((size_t)cols, sizeof *live),
            *res = util_xcalloc((size_t)cols, sizeof *res),
            *used = util_xcalloc((size_t)cols, sizeof *used);
    model_tl_columns(p->d, p->t0, p->t1, (size_t)cols, live, res);
    bool untracked = used_columns(p, (size_t)cols, used);
    bool untracked_drawn = false; /* the key names it only where some is drawn */
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
            double l = (double)live[c], rv = (double)res[c], u = (double)used[c];
            if (l >= lo + cell) {
                fprintf(out, "%s\u2588%s", t->blue, t->reset);
            } else if (l > lo) {
                int e = (int)((l - lo) / cell * 8);
                fprintf(out, "%s%s%s", t->blue, eighths[e < 1 ? 1 : e], t->reset);
            } else if (rv > lo) {
                fprintf(out, "%s\u2592%s", t->orange, t->reset); /* reserved, not handed out */
            } else if (untracked && u > lo) {
                fprintf(out, "%s\u2591%s", t->grey, t->reset); /* untracked */
                untracked_drawn = true;
            } else if (row == cap_row) {
                fprintf(out, "%s\u2500%s", t->red, t->reset);
            } else {
                fputc(' ', out);
            }
        }
        fputc('\n', out);
    }
    free(live);
    free(res);
    free(used);
    return untracked_drawn;
}

/* Under the axis: the marks of markers, flushes and failures, and the times at both ends. Which
 * marks are drawn goes in has[] (| f x X). */
static void time_ends(struct term *t, const struct panel *p, int cols, const char *caption);

/* Whether the failure a flush rescued is listed: its x then stands for both (the flush is
 * recorded when the retry succeeded, a moment later, which can fall in the next column). */
static bool rescued_failure_listed(const struct model_report *r, const struct model_pressure *e)
{
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        if (f->retried == RETRIED_SUCCEEDED && f->size == e->size &&
            f->device.known == e->device.known && (!f->device.known || f->device.v == e->device.v) &&
            f->time_unix_ns <= e->time_unix_ns && e->time_unix_ns - f->time_unix_ns < 1000000000)
            return true;
    }
    return false;
}

static void panel_marks(struct term *t, const struct model_report *r, const struct panel *p,
                        int cols, bool has[4], const char *caption)
{
    FILE *out = t->out;
    char *marks = util_xcalloc((size_t)cols + 1, 1);
    memset(marks, ' ', (size_t)cols);
    double span = (double)(p->t1 - p->t0);
    for (size_t i = 0; i < r->n_markers; i++) {
        put_mark(marks, cols, (double)(r->markers[i].time_unix_ns - p->t0) / span, '|');
    }
    int64_t ord = p->d->ordinal.known ? p->d->ordinal.v : -1;
    for (size_t i = 0; i < r->n_pressure; i++) {
        const struct model_pressure *e = &r->pressure[i];
        if ((e->device.known ? e->device.v : -1) != ord || rescued_failure_listed(r, e))
            continue;
        put_mark(marks, cols, (double)(e->time_unix_ns - p->t0) / span, 'f');
    }
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        /* a retry that failed again is the same failure as the application saw it: one mark */
        if ((f->device.known ? f->device.v : -1) != ord || model_failure_is_retry(r, f))
            continue;
        bool real = model_failure_is_real_oom(f);
        put_mark(marks, cols, (double)(f->time_unix_ns - p->t0) / span, real ? 'X' : 'x');
    }
    /* the key names the marks that are drawn: one hidden under a stronger one is not */
    has[0] = strchr(marks, '|') != NULL;
    has[1] = strchr(marks, 'f') != NULL;
    has[2] = strchr(marks, 'x') != NULL;
    has[3] = strchr(marks, 'X') != NULL;
    fprintf(out, "%11s \u2514", "");
    for (int c = 0; c < cols; c++)
        fputs("\u2500", out);
    fprintf(out, "\n%11s  %s%s%s\n", "", t->red, marks, t->reset);
    free(marks);
    time_ends(t, p, cols, caption);
}

/* The times at both ends of the axis, since the view's origin, and what they count from between
 * them where it fits. */
static void time_ends(struct term *t, const struct panel *p, int cols, const char *caption)
{
    struct strbuf s = { 0 }, e = { 0 };
    int64_t step = (p->t1 - p->t0) / 10;
    timeline_view_add_tick(&s, p->t0 - p->origin, step);
    timeline_view_add_tick(&e, p->t1 - p->origin, step);
    int room = cols - (int)s.len - (int)e.len, len = (int)strlen(caption);
    if (room >= len + 2) {
        int before = (room - len) / 2;
        fprintf(t->out, "%11s  %s%*s%s%*s%s\n", "", sb_str(&s), before, "", caption,
                room - len - before, "", sb_str(&e));
    } else {
        fprintf(t->out, "%11s  %-*s%s\n", "", cols - (int)e.len, sb_str(&s), sb_str(&e));
    }
    sb_free(&s);
    sb_free(&e);
}

/* The key: the areas, then the marks this panel has, wrapped at the terminal's width. */
static void panel_key(struct term *t, const struct panel *p, bool untracked_drawn,
                      const bool has[4])
{
    FILE *out = t->out;
    int col = LABEL_COLS;
    fprintf(out, "%*s", LABEL_COLS, "");
    key_item(t, &col, t->blue, "\u2588", "live");
    key_item(t, &col, t->orange, "\u2592", "reserved, not handed out (fragmentation)");
    if (untracked_drawn)
        key_item(t, &col, t->grey, "\u2591", "untracked");
    if (p->capacity.known) {
        char cs[UTIL_SIZE_LEN];
        struct strbuf c = { 0 };
        sb_printf(&c, "%s %s", p->emulated ? "emulated limit" : "capacity",
                  util_fmt_size(p->capacity.v, cs));
        key_item(t, &col, t->red, "\u2500", sb_str(&c));
        sb_free(&c);
    }
    static const char *const keys[] = { "marker", "cache flush", "failure a retry overcame",
                                        "out of memory" };
    static const char *const glyphs[] = { "|", "f", "x", "X" };
    for (int k = 0; k < 4; k++)
        if (has[k])
            key_item(t, &col, t->red, glyphs[k], keys[k]);
    fputc('\n', out);
}

static void terminal_panel(struct term *t, const struct model_report *r, const struct panel *p,
                           int cols, const char *caption)
{
    bool has[4];
    panel_title(t, p);
    bool untracked_drawn = panel_plot(t, p, cols);
    panel_marks(t, r, p, cols, has, caption);
    panel_key(t, p, untracked_drawn, has);
}

/* Items "a, b, c" after a heading, wrapped at the terminal's width, continued lines indented. */
struct wrap {
    struct term *t;
    int col;
    bool any;
};

static void wrap_item(struct wrap *w, const char *item)
{
    struct strbuf b = { 0 };
    util_add_text(&b, item);
    int len = (int)b.len; /* bytes: a few more than columns for text beyond ASCII */
    if (w->any && w->col + 2 + len + 1 > w->t->width) { /* + 1: the comma that may follow */
        fputs(",\n   ", w->t->out);
        w->col = 3;
    } else if (w->any) {
        fputs(", ", w->t->out);
        w->col += 2;
    } else {
        fputc(' ', w->t->out);
        w->col++;
    }
    fputs(sb_str(&b), w->t->out);
    w->col += len;
    w->any = true;
    sb_free(&b);
}

/* Starts a note: the blank line before the first, then "rank 1 (...): what" in a job. */
static void prefix(struct term *t, const char *who, const char *what)
{
    if (!t->notes_open)
        fputc('\n', t->out);
    t->notes_open = true;
    if (who && what[0])
        fprintf(t->out, "%s: %c%s", who, what[0] >= 'A' && what[0] <= 'Z' ? what[0] + 32 : what[0],
                what + 1);
    else if (who)
        fprintf(t->out, "%s: ", who);
    else
        fputs(what, t->out);
}

/* The markers (|) by time and label. */
static void notes_markers(struct term *t, const struct model_report *r, int64_t t0, const char *who)
{
    FILE *out = t->out;
    if (!r->n_markers)
        return;
    prefix(t, who, "Markers (|):");
    struct wrap w = { t, (who ? (int)strlen(who) + 2 : 0) + 12, false };
    for (size_t i = 0; i < r->n_markers && i < 48; i++) {
        struct strbuf b = { 0 };
        timeline_view_add_reltime(&b, r->markers[i].time_unix_ns - t0);
        sb_addc(&b, ' ');
        sb_add(&b, r->markers[i].label);
        wrap_item(&w, sb_str(&b));
        sb_free(&b);
    }
    if (r->n_markers > 48) {
        struct strbuf b = { 0 };
        sb_printf(&b, "and %zu more", r->n_markers - 48);
        wrap_item(&w, sb_str(&b));
        sb_free(&b);
    }
    fputc('\n', out);
}

/* The out-of-memory (X), and the failures a retry overcame (x). */
static void notes_failures(struct term *t, const struct model_report *r, int64_t t0,
                           const char *who)
{
    FILE *out = t->out;
    char s1[UTIL_SIZE_LEN];
    const struct model_failure *f = model_real_oom(r);
    if (f) {
        struct strbuf b = { 0 };
        timeline_view_add_reltime(&b, f->time_unix_ns - t0);
        sb_printf(&b, ": %s of %s failed, out of memory, from ", f->api,
                  util_fmt_size(f->size, s1));
        model_callsite_short(&b, r, f->callsite);
        prefix(t, who, "Out of memory (X) at ");
        util_put_text(out, sb_str(&b));
        fputc('\n', out);
        sb_free(&b);
    }
    size_t shown = 0, retried = 0;
    for (size_t i = 0; i < r->n_failures; i++)
        if (!model_failure_is_real_oom(&r->failures[i]))
            retried++;
    if (retried) {
        prefix(t, who, "");
        fprintf(out, "%zu failure%s a retry overcame (x)", retried, retried == 1 ? "" : "s");
        for (size_t i = 0; i < r->n_failures && shown < 4; i++) {
            const struct model_failure *e = &r->failures[i];
            if (model_failure_is_real_oom(e))
                continue;
            struct strbuf b = { 0 };
            timeline_view_add_reltime(&b, e->time_unix_ns - t0);
            sb_printf(&b, ": %s of %s, from ", e->api, util_fmt_size(e->size, s1));
            model_callsite_short(&b, r, e->callsite);
            fputs(shown ? "\n  " : ":\n  ", out);
            util_put_text(out, sb_str(&b));
            sb_free(&b);
            shown++;
        }
        if (retried > shown)
            fprintf(out, "\n  and %zu more", retried - shown);
        fputc('\n', out);
    }
}

/* The cache flushes (f) and what each freed. */
static void notes_flushes(struct term *t, const struct model_report *r, int64_t t0, const char *who)
{
    FILE *out = t->out;
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN];
    int64_t flushes = model_flushes(r);
    if (flushes < (int64_t)r->n_pressure)
        flushes = (int64_t)r->n_pressure;
    if (flushes > 0) {
        prefix(t, who, "");
        fprintf(out, "%" PRId64 " cache flush%s (f, or the x of the failure it rescued)", flushes,
                flushes == 1 ? "" : "es");
        for (size_t i = 0; i < r->n_pressure && i < 4; i++) {
            const struct model_pressure *e = &r->pressure[i];
            struct strbuf b = { 0 };
            timeline_view_add_reltime(&b, e->time_unix_ns - t0);
            sb_printf(&b, ": %s freed in %" PRId64 " frees to fit %s, from ",
                      util_fmt_size(e->freed_bytes, s1), e->freed_count,
                      util_fmt_size(e->size, s2));
            model_callsite_short(&b, r, e->callsite);
            fputs(i ? "\n  " : ":\n  ", out);
            util_put_text(out, sb_str(&b));
            sb_free(&b);
        }
        if (r->n_pressure > 4)
            fprintf(out, "\n  and %zu more listed", r->n_pressure - 4);
        fputc('\n', out);
    }
}

/* PyTorch's verdict on fragmentation, and the leaks. */
static void notes_findings(struct term *t, const struct model_report *r, int64_t t0,
                           const char *who)
{
    FILE *out = t->out;
    char s1[UTIL_SIZE_LEN];
    const struct model_framework *fw = &r->framework;
    if (fw->known && fw->reserved_unallocated_bytes.known && fw->reserved_unallocated_bytes.v > 0) {
        prefix(t, who, "PyTorch's out-of-memory message: ");
        fprintf(out, "%s reserved but unallocated (fragmentation inside its segments, ",
                util_fmt_size(fw->reserved_unallocated_bytes.v, s1));
        fputs("which CUDA counts as live)\n", out);
    }
    struct leak_finding leaks[4];
    size_t n = findings_leaks(r, leaks, 4);
    for (size_t i = 0; i < n && i < 4; i++) {
        struct strbuf b = { 0 };
        findings_describe_leak(&b, r, &leaks[i]);
        prefix(t, who, "Leak: ");
        util_put_text(out, sb_str(&b));
        fputc('\n', out);
        sb_free(&b);
    }
}

/* Markers, failures, cache flushes, PyTorch's verdict and leaks of one report by name, so the
 * marks above can be read. */
static void terminal_notes(struct term *t, const struct model_report *r, int64_t t0,
                           const char *who)
{
    notes_markers(t, r, t0, who);
    notes_failures(t, r, t0, who);
    notes_flushes(t, r, t0, who);
    notes_findings(t, r, t0, who);
}

void timeline_term_print(FILE *out, const struct view *v, bool color)
{
    struct term t = { .out = out, .width = wrap_width(out) };
    t.blue = color ? "\033[34m" : "";
    t.orange = color ? "\033[33m" : "";
    t.grey = color ? "\033[90m" : "";
    t.red = color ? "\033[31m" : "";
    t.bold = color ? "\033[1m" : "";
    t.reset = color ? "\033[0m" : "";
    /* the plot takes what the axis labels leave, less a column at the right */
    int cols = t.width - LABEL_COLS - 1;
    if (cols < 20)
        cols = 20;
    if (cols > 2000)
        cols = 2000;
    for (size_t i = 0; i < v->n_panels; i++) {
        if (i)
            fputc('\n', out);
        terminal_panel(&t, v->owner[i], &v->panels[i], cols, timeline_view_origin_text(v));
    }
    for (size_t i = 0; i < v->n_reports; i++) {
        t.notes_open = false;
        terminal_notes(&t, v->reports[i], v->origin[i], v->who[i]);
    }
}
