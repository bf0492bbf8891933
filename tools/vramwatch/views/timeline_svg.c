/* timeline_svg.c: the timeline as one self-contained SVG picture, or an HTML page holding it with a
 * tooltip that follows the pointer (see timeline.h for what a panel shows). Nothing is fetched
 * from anywhere: no fonts, no scripts. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "timeline_view.h"

/* A step of 1, 2 or 5 times a power of ten that cuts `span` into about `want` parts. */
static double nice_step(double span, int want)
{
    double raw = span / want, p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

/* Time steps people count in: ms, then seconds, minutes, hours, days. */
static int64_t time_step(int64_t span, int want)
{
    static const int64_t steps[] = {
        1000000LL,        2000000LL,        5000000LL,         10000000LL,       20000000LL,
        50000000LL,       100000000LL,      200000000LL,       500000000LL,      1000000000LL,
        2000000000LL,     5000000000LL,     10000000000LL,     15000000000LL,    30000000000LL,
        60000000000LL,    120000000000LL,   300000000000LL,    600000000000LL,   900000000000LL,
        1800000000000LL,  3600000000000LL,  7200000000000LL,   10800000000000LL, 21600000000000LL,
        43200000000000LL, 86400000000000LL, 172800000000000LL, 604800000000000LL
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        if (span / steps[i] <= want)
            return steps[i];
    return steps[sizeof steps / sizeof steps[0] - 1];
}

/* ---- SVG ---- */

#define W 1000.0 /* plot width */
#define H 280.0  /* plot height */
#define ML 78.0  /* margins */
#define MR 24.0
#define MT 70.0 /* room for three rows of marker labels under the panel title */
#define MB 84.0 /* the time axis, its caption, two lines of leak */
#define PANEL_H (MT + H + MB)

static double px(const struct panel *p, int64_t t)
{
    double x = ML + (double)(t - p->t0) / (double)(p->t1 - p->t0) * W;
    return x < ML ? ML : x > ML + W ? ML + W : x;
}

static double py(const struct panel *p, double bytes)
{
    double y = MT + H - bytes / p->ymax * H;
    return y < MT ? MT : y > MT + H ? MT + H : y;
}

/* Where a failure's cross is drawn: at the top of what was reserved plus the request. One rule
 * for the drawing and for the room the labels keep clear of it. */
static double failure_y(const struct panel *p, const struct model_failure *f)
{
    return py(p, (double)f->reserved_bytes_at_failure + (double)f->size);
}

/* ---- where labels go: none over another, over the capacity line or off the picture ----
 *
 * Every label is given a box from an estimate of its width in the fonts the style names
 * (DejaVu Sans, the widest of them: its own advance widths, a little over), and placed at the first of its candidate spots whose box is inside the picture
 * and meets no box placed before it. The capacity line and the symbols labels point at are
 * boxes too. tests/timeline checks the result with the browser's own text boxes (getBBox). */

/* Advance widths of DejaVu Sans (the first, and widest, of the fonts the style names), in
 * thousandths of an em, for the printable ASCII characters from ' ' on, regular and bold, as
 * Chromium lays them out; any other character is counted a whole em, wider than most. */
static const unsigned short advance_regular[95] = {
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361,  318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 709, 686, 698, 770, 632,
    575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695, 635,  595, 732, 684, 989, 685,
    611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550, 635, 615, 344,  635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 395, 521, 392, 634, 592, 818, 592, 592,  525, 636, 337, 636, 838,
};
static const unsigned short advance_bold[95] = {
    348,  456, 521, 838, 696, 1002, 872, 306,  457, 457, 523, 838, 380, 415,  380, 365,
    696,  696, 696, 696, 696, 696,  696, 696,  696, 696, 400, 400, 838, 838,  838, 580,
    1000, 774, 762, 734, 830, 683,  683, 821,  837, 372, 372, 775, 637, 995,  837, 850,
    733,  850, 770, 680, 703, 812,  774, 1103, 771, 724, 725, 457, 365, 457,  838, 500,
    500,  675, 716, 593, 716, 678,  405, 716,  712, 343, 343, 665, 343, 1042, 712, 687,
    716,  716, 493, 595, 478, 712,  652, 924,  645, 652, 582, 712, 365, 712,  838,
};

/* Width in px of text at this font size, 2% over the font's own advances. */
static double text_width(const char *s, double size, bool bold)
{
    double em = 0;
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c & 0xc0) == 0x80)
            continue; /* a UTF-8 continuation byte: counted with its first byte */
        if (*c >= 32 && *c < 127)
            em += (bold ? advance_bold[*c - 32] : advance_regular[*c - 32]) / 1000.0;
        else
            em += 1.0;
    }
    return em * size * 1.02 + 1;
}

/* How firmly labels keep off a box: never over another label or a symbol; over a line only where
 * nowhere else is free, a marker line (of which a crowded run has many) before a line of memory. */
enum { HARD, SOFT_MARKER, SOFT_OUTLINE };

struct box {
    double x0, y0, x1, y1;
    int soft; /* HARD, SOFT_MARKER or SOFT_OUTLINE */
};

struct layout {
    struct box *boxes;
    size_t n, cap;
    double width; /* the picture's: a box must lie within [0, width] */
};

/* The box of a text of this size drawn at (x, baseline y), anchored start, middle or end. */
static struct box text_box(double x, double y, double w, double size, char anchor)
{
    double x0 = anchor == 'e' ? x - w : anchor == 'm' ? x - w / 2 : x;
    return (struct box){ x0 - 2, y - 0.95 * size, x0 + w + 2, y + 0.25 * size, HARD };
}

static bool boxes_meet(const struct box *a, const struct box *b)
{
    return a->x0 < b->x1 && b->x0 < a->x1 && a->y0 < b->y1 && b->y0 < a->y1;
}

/* Whether a box is inside the picture, between top and bottom, and meets no box placed before
 * it, less the soft ones up to `cross` (HARD: none may be crossed; SOFT_MARKER: marker lines may;
 * SOFT_OUTLINE: the live and reserved lines too). */
static bool layout_free_of(const struct layout *l, const struct box *b, double top, double bottom,
                           int cross)
{
    if (b->x0 < 0 || b->x1 > l->width || b->y0 < top || b->y1 > bottom)
        return false;
    for (size_t i = 0; i < l->n; i++)
        if ((l->boxes[i].soft == HARD || l->boxes[i].soft > cross) && boxes_meet(&l->boxes[i], b))
            return false;
    return true;
}

static bool layout_free(const struct layout *l, const struct box *b, double top, double bottom)
{
    return layout_free_of(l, b, top, bottom, HARD);
}

static void layout_add(struct layout *l, struct box b)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 32;
        l->boxes = util_xrealloc(l->boxes, l->cap * sizeof *l->boxes);
    }
    l->boxes[l->n++] = b;
}

/* A label placed on the picture, where and which way its text runs. */
struct label {
    bool on;
    double x, y;
    char anchor;
    char *text; /* NULL: not drawn */
};

/* The point a label names, and the label's width and font size. */
struct near {
    double x, y, w, size;
};

/* One spot around the point a label names, in the order tried: ring k (0 nearest) of SPOTS
 * directions, the side towards the plot's middle first. Right and left of the point the text's
 * middle is level with it; above and below, its box clears the point's symbol (7 px), first
 * straight up or down, then also moved out sideways by the ring's distance (clear of a column of
 * symbols under the point). */
#define SPOTS 12
static struct label spot_around(struct near at, size_t k, size_t dir)
{
    bool toward_right = at.x < ML + W / 2;
    double step = 6.0 * (double)k, up = at.y - 10 - step, down = at.y + 9 + 0.95 * at.size + step,
           level = at.y + 0.35 * at.size;
    /* right: level, up, down, up and out, down and out; the same left; above; below */
    static const char anchors[] = "ssssseeeeemm";
    size_t d = dir < 10 && !toward_right ? (dir + 5) % 10 : dir;
    double r = at.x + 4, l = at.x - 4;
    double xs[] = { r + 6 + step, r, r, r + step, r + step, l - 6 - step, l, l, l - step, l - step,
                    at.x,         at.x };
    double ys[] = { level, up, down, up, down, level, up, down, up, down, up, down };
    return (struct label){ true, xs[d], ys[d], anchors[d], NULL };
}

/* How high a label of the plot may go: into the rows above it (the marker labels', placed after),
 * below the panel's title, so a point at the top of the plot keeps its label beside it. */
#define LABEL_TOP 24.0

/* A label of the plot, next to the point it names: the first spot around it (spot_around),
 * nearest first, whose box is inside the plot (or above it, up to LABEL_TOP) and meets no label,
 * symbol or drawn line (the live and reserved lines, the capacity line, the marker lines: all
 * boxes of the layout). The spot is set in lb (x, y, anchor); false when none is free (then, from
 * first_pass 1, the first spot that only crosses lines, marker lines before the others; with
 * last_pass 3, else the nearest). Deterministic: the same picture, the same spot. */
static bool place_near(struct layout *l, struct near at, int first_pass, int last_pass,
                       struct label *lb)
{
    /* Pass 0: clear of everything; 1: may cross marker lines; 2: the live and reserved lines too;
     * 3: the nearest spot. */
    for (int pass = first_pass; pass <= last_pass; pass++) {
        for (size_t k = 0; k < 8; k++)
            for (size_t dir = 0; dir < SPOTS; dir++) {
                struct label s = spot_around(at, k, dir);
                struct box bx = text_box(s.x, s.y, at.w, at.size, s.anchor);
                if (pass == 3) {
                    s = spot_around(at, 0, 1);
                    if (s.y < MT + at.size)
                        s.y = MT + at.size;
                    bx = text_box(s.x, s.y, at.w, at.size, s.anchor);
                } else if (!layout_free_of(l, &bx, LABEL_TOP, MT + H - 1, pass)) {
                    continue;
                }
                lb->x = s.x, lb->y = s.y, lb->anchor = s.anchor;
                layout_add(l, bx);
                return pass == 0;
            }
    }
    return false;
}

static const char *anchor_css(char a)
{
    return a == 'e' ? "end" : a == 'm' ? "middle" : "start";
}

/* The longest start of s (whole characters) that, with "…", is at most w px wide; NULL when
 * not even one character and the ellipsis fit. Freed by the caller. */
static char *cut_to_width(const char *s, double w, double size, bool bold)
{
    size_t n = strlen(s);
    char *t = util_xmalloc(n + 4);
    while (n > 0) {
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--; /* back to a character's first byte */
        memcpy(t, s, n);
        memcpy(t + n, "\u2026", 4);
        if (n > 0 && text_width(t, size, bold) <= w)
            return t;
        if (n > 0)
            n--;
    }
    free(t);
    return NULL;
}

static void add_xml(struct strbuf *b, const char *s)
{
    timeline_view_add_xml(b, s);
}

static void add_site_xml(struct strbuf *b, const struct model_report *r, int64_t id)
{
    struct strbuf s = { 0 };
    model_callsite_short(&s, r, id);
    add_xml(b, sb_str(&s));
    sb_free(&s);
}

/* The value drawn for a bucket: its most (last: false) or the value it ended with (last: true),
 * which holds over the gap to the next bucket (nothing changed then). which: 0 live, 1 reserved,
 * 2 used (reserved plus untracked). */
static double series(const struct model_tl_bucket *b, int which, bool last)
{
    double live = (double)(last ? b->live : b->live_max),
           res = (double)(last ? b->reserved : b->reserved_max);
    model_int u = last ? b->untracked : b->untracked_max;
    if (which == 0)
        return live;
    if (which == 1)
        return res;
    return res + (u.known && u.v > 0 ? (double)u.v : 0);
}

struct pt {
    double x, y;
};

/* The points of one series' outline, as drawn: each bucket at its most over its width, then its
 * last value until the next bucket starts. Up to 4 per bucket; freed by the caller. */
static size_t outline_points(const struct panel *p, int which, struct pt **out)
{
    const struct model_tl_device *d = p->d;
    struct pt *v = util_xcalloc(d->n_buckets * 4 + 1, sizeof *v);
    size_t n = 0;
    for (size_t i = 0; i < d->n_buckets; i++) {
        const struct model_tl_bucket *b = &d->buckets[i];
        double x0 = px(p, b->t), x1 = px(p, timeline_view_bucket_end(p, i)),
               y = py(p, series(b, which, false));
        double xn = i + 1 < d->n_buckets ? px(p, d->buckets[i + 1].t) : x1,
               yl = py(p, series(b, which, true));
        v[n++] = (struct pt){ x0, y };
        v[n++] = (struct pt){ x1, y };
        if (xn > x1 || yl != y) {
            v[n++] = (struct pt){ x1, yl };
            v[n++] = (struct pt){ xn, yl };
        }
    }
    *out = v;
    return n;
}

/* The outline as path commands, after a move to its first point (move_first) or to a point
 * already given. */
static void add_outline(struct strbuf *o, const struct panel *p, int which, bool move_first)
{
    struct pt *v;
    size_t n = outline_points(p, which, &v);
    for (size_t i = 0; i < n; i++)
        sb_printf(o, "%s%.1f %.1f", i == 0 && move_first ? "M" : " L", v[i].x, v[i].y);
    free(v);
}

/* The live and reserved lines as boxes labels keep off: each segment (all run across or up and
 * down), 2 px to either side. Soft: a label crosses one only where no spot is free. */
static void layout_add_outlines(struct layout *l, const struct panel *p)
{
    for (int which = 0; which < 2; which++) {
        struct pt *v;
        size_t n = outline_points(p, which, &v);
        for (size_t i = 0; i + 1 < n; i++)
            layout_add(l, (struct box){ fmin(v[i].x, v[i + 1].x) - 2, fmin(v[i].y, v[i + 1].y) - 2,
                                        fmax(v[i].x, v[i + 1].x) + 2, fmax(v[i].y, v[i + 1].y) + 2,
                                        SOFT_OUTLINE });
        free(v);
    }
}

static void svg_area(struct strbuf *o, const struct panel *p, int which, const char *cls)
{
    const struct model_tl_device *d = p->d;
    if (!d->n_buckets)
        return;
    sb_printf(o, "<path class=\"%s\" d=\"M%.1f %.1f", cls, px(p, d->buckets[0].t), MT + H);
    add_outline(o, p, which, false);
    sb_printf(o, " L%.1f %.1f Z\"/>\n", px(p, timeline_view_bucket_end(p, d->n_buckets - 1)), MT + H);
}

static void svg_line(struct strbuf *o, const struct panel *p, int which, const char *cls)
{
    const struct model_tl_device *d = p->d;
    if (!d->n_buckets)
        return;
    sb_printf(o, "<path class=\"%s\" d=\"", cls);
    add_outline(o, p, which, true);
    sb_add(o, "\"/>\n");
}

static void svg_axes(struct strbuf *o, const struct panel *p, const char *caption)
{
    /* Sizes: GiB when the scale reaches one, MiB below. */
    bool gib = p->ymax >= GiB;
    double unit = gib ? GiB : MiB, step = nice_step(p->ymax / unit, 6) * unit;
    sb_add(o, "<g class=\"axis\">\n");
    for (double v = 0; v <= p->ymax + 1; v += step) {
        double y = py(p, v);
        sb_printf(o, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", ML,
                  y, ML + W, y);
        sb_printf(o, "<text class=\"ylabel\" x=\"%.1f\" y=\"%.1f\">%g %s</text>\n", ML - 8, y + 4,
                  v / unit, gib ? "GiB" : "MiB");
    }
    /* ticks at round times since the origin (the process start), within the span drawn */
    int64_t span = p->t1 - p->t0, ts = time_step(span, 8), from = p->t0 - p->origin;
    int64_t first = from > 0 ? (from + ts - 1) / ts * ts : 0;
    for (int64_t t = first; t <= from + span; t += ts) {
        double x = px(p, p->origin + t);
        sb_printf(o, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x,
                  MT + H, x, MT + H + 6);
        sb_printf(o, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\">", x, MT + H + 20);
        timeline_view_add_tick(o, t, ts);
        sb_add(o, "</text>\n");
    }
    sb_printf(o, "<line class=\"frame\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", ML, MT,
              ML, MT + H);
    sb_printf(o, "<line class=\"frame\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", ML,
              MT + H, ML + W, MT + H);
    sb_printf(o, "<text class=\"xlabel caption\" x=\"%.1f\" y=\"%.1f\">%s</text>\n", ML + W / 2,
              MT + H + 38, caption);
    sb_add(o, "</g>\n");
}

static void svg_buckets_hover(struct strbuf *o, const struct panel *p)
{
    const struct model_tl_device *d = p->d;
    sb_add(o, "<g class=\"hover\">\n");
    for (size_t i = 0; i < d->n_buckets; i++) {
        const struct model_tl_bucket *b = &d->buckets[i];
        double x0 = px(p, b->t), x1 = px(p, timeline_view_bucket_end(p, i));
        sb_printf(
                o,
                "<rect class=\"bucket\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>",
                x0, MT, x1 - x0 > 0.5 ? x1 - x0 : 0.5, H);
        timeline_view_add_tick(o, b->t - p->origin, d->bucket_ns);
        sb_add(o, ": live ");
        timeline_view_add_size(o, b->live);
        sb_add(o, " (");
        timeline_view_add_size(o, b->live_min);
        sb_add(o, " to ");
        timeline_view_add_size(o, b->live_max);
        sb_add(o, "), reserved ");
        timeline_view_add_size(o, b->reserved);
        sb_add(o, " (most ");
        timeline_view_add_size(o, b->reserved_max);
        sb_add(o, "), fragmentation ");
        timeline_view_add_size(o, b->reserved - b->live);
        if (b->untracked.known) {
            sb_add(o, ", untracked ");
            timeline_view_add_size(o, b->untracked.v);
        }
        sb_printf(o, ", %" PRId64 " events</title></rect>\n", b->events);
    }
    sb_add(o, "</g>\n");
}

/* ---- labels planned before anything is drawn ---- */

/* PyTorch's own count of the memory it reserved but had not handed out, where the timeline
 * cannot show it: to CUDA, the default caching allocator's segments are live memory, so the band
 * between live and reserved is empty although PyTorch's out-of-memory message says its segments
 * held this much unused. Drawn at the verdict, on its device, as the top of the live memory. */
struct fw_band {
    bool on;
    double x0, x1, y0, y1;
    int64_t bytes;
};

static struct fw_band pytorch_band(const struct model_report *r, const struct panel *p)
{
    struct fw_band f = { 0 };
    const struct model_framework *fw = &r->framework;
    if (!fw->known || !fw->reserved_unallocated_bytes.known ||
        fw->reserved_unallocated_bytes.v <= 0 || !fw->time_unix_ns.known)
        return f;
    if (fw->device.known ? !p->d->ordinal.known || fw->device.v != p->d->ordinal.v
                         : p->d != &r->timeline.devices[0])
        return f;
    const struct model_tl_device *d = p->d;
    const struct model_tl_bucket *b = NULL;
    for (size_t i = 0; i < d->n_buckets; i++)
        if (d->buckets[i].t <= fw->time_unix_ns.v)
            b = &d->buckets[i];
    if (!b || b->reserved_max - b->live_max >= fw->reserved_unallocated_bytes.v)
        return f; /* nothing live yet, or the timeline shows as much already */
    int64_t bytes = fw->reserved_unallocated_bytes.v;
    f.on = true;
    f.bytes = bytes;
    f.x1 = px(p, fw->time_unix_ns.v);
    f.x0 = px(p, b->t);
    if (f.x1 - f.x0 < 8)
        f.x0 = f.x1 - 8;
    if (f.x0 < ML) {
        f.x0 = ML;
        f.x1 = fmax(f.x1, ML + 8);
    }
    f.y0 = py(p, (double)b->live_max);
    f.y1 = py(p, (double)(b->live_max > bytes ? b->live_max - bytes : 0));
    return f;
}

struct plan {
    struct layout l;
    struct label cap, oom, peak, fw;
    const struct model_failure *oom_f;
    const struct model_tl_bucket *pk;
    struct fw_band band;
    struct label *markers; /* one per report marker */
    char *leak[2];         /* the leak's lines; NULL when none */
    char *leak_full;
};

static char *dup_sb(struct strbuf *b)
{
    char *s = util_xstrdup(sb_str(b));
    sb_free(b);
    return s;
}

/* A marker's label: in one of three rows above the plot, right of its line or left of it (gap px
 * from it); false when neither side is free. */
static bool marker_at(struct layout *l, const char *label, double x, double y, double gap,
                      struct label *out)
{
    double w = text_width(label, 11, false);
    for (int side = 0; side < 2; side++) {
        char a = side == 0 ? 's' : 'e';
        double tx = side == 0 ? x + gap : x - gap;
        struct box b = text_box(tx, y, w, 11, a);
        if (layout_free(l, &b, 23, MT + H - 1)) {
            *out = (struct label){ true, tx, y, a, util_xstrdup(label) };
            layout_add(l, b);
            return true;
        }
    }
    return false;
}

/* A marker's label above the plot (marker_at); else at the top of the plot beside its line; else
 * as much of it as fits beside the line above the plot, cut with "…"; else none (the line, its
 * hover and the list under the panel stay). */
static void place_marker(struct layout *l, const char *label, double x, struct label *out)
{
    static const double rows[] = { MT - 5, MT - 19, MT - 33 };
    const double size = 11;
    for (size_t r = 0; r < 3; r++)
        if (marker_at(l, label, x, rows[r], 2, out))
            return;
    /* Where the rows above are taken, the top of the plot beside its line, where nothing is
     * drawn there (no line, label or symbol): the whole label rather than a cut one, moved out
     * past the lines of markers close to its own where they stand in the way. */
    for (double y = MT + 13; y < MT + H / 2; y += 14)
        for (double gap = 4; gap <= 40; gap += 6)
            if (marker_at(l, label, x, y, gap, out))
                return;
    double best = 0, bx = 0, by = 0;
    char ba = 's';
    for (size_t r = 0; r < 3; r++) {
        double y0 = rows[r] - 0.95 * size, y1 = rows[r] + 0.25 * size;
        for (int side = 0; side < 2; side++) {
            double from = side == 0 ? x + 2 : x - 2, lim = side == 0 ? l->width - 1 : 1;
            for (size_t i = 0; i < l->n; i++) {
                const struct box *b = &l->boxes[i];
                if (b->y0 >= y1 || b->y1 <= y0)
                    continue;
                if (side == 0 && b->x1 > from && b->x0 < lim)
                    lim = b->x0 <= from ? from : b->x0;
                if (side == 1 && b->x0 < from && b->x1 > lim)
                    lim = b->x1 >= from ? from : b->x1;
            }
            double avail = side == 0 ? lim - from : from - lim;
            if (avail > best) {
                best = avail;
                bx = from, by = rows[r], ba = side == 0 ? 's' : 'e';
            }
        }
    }
    char *cut = best > 4 ? cut_to_width(label, best - 2, size, false) : NULL;
    if (cut && strlen(cut) < 6 + 3) { /* "the …" names nothing: the list under the panel does */
        free(cut);
        cut = NULL;
    }
    if (!cut) {
        *out = (struct label){ 0 };
        return;
    }
    *out = (struct label){ true, bx, by, ba, cut };
    layout_add(l, text_box(bx, by, text_width(cut, size, false), size, ba));
}

/* The label's whole text where a spot is clear of labels and lines; else its first `brief`
 * bytes (the words that matter: a size) where one is; else the whole text where it meets the
 * least. */
struct plot_text {
    struct strbuf *text; /* emptied */
    size_t brief;
    bool bold;
};

static void place_in_plot(struct plan *pl, const struct panel *p, struct label *lb, double x,
                          double y, struct plot_text t)
{
    bool bold = t.bold;
    size_t brief = t.brief;
    lb->text = dup_sb(t.text);
    lb->on = true;
    double w = text_width(lb->text, 12, bold);
    if (place_near(&pl->l, (struct near){ x, y, w, 12 }, 0, 0, lb))
        return;
    if (brief > 0 && brief < strlen(lb->text)) {
        char *full = lb->text;
        lb->text = util_xmalloc(brief + 1);
        memcpy(lb->text, full, brief);
        lb->text[brief] = '\0';
        if (place_near(&pl->l, (struct near){ x, y, text_width(lb->text, 12, bold), 12 }, 0, 0,
                       lb)) {
            free(full);
            return;
        }
        free(lb->text);
        lb->text = full;
    }
    place_near(&pl->l, (struct near){ x, y, w, 12 }, 1, 3, lb);
}

/* Splits a leak's sentence into at most two lines of the width given, the second cut with "…"
 * when it is still too long. */
static void wrap_leak(struct plan *pl, const char *text, double w)
{
    pl->leak_full = util_xstrdup(text);
    if (text_width(text, 12, true) <= w) {
        pl->leak[0] = util_xstrdup(text);
        return;
    }
    size_t n = strlen(text), cut = 0;
    char *head = util_xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        if (text[i] != ' ')
            continue;
        memcpy(head, text, i);
        head[i] = '\0';
        if (text_width(head, 12, true) > w)
            break;
        cut = i;
    }
    if (cut == 0) {
        free(head);
        pl->leak[0] = cut_to_width(text, w, 12, true);
        return;
    }
    memcpy(head, text, cut);
    head[cut] = '\0';
    pl->leak[0] = head;
    const char *rest = text + cut + 1;
    pl->leak[1] =
            text_width(rest, 12, true) <= w ? util_xstrdup(rest) : cut_to_width(rest, w, 12, true);
}

/* The leaks found in a report, as many as the picture says (findings.h). */
struct leaks {
    struct leak_finding f[4];
    size_t n;
};

/* What labels must not cover: the title, the capacity line and the symbols named. Finds the
 * real out-of-memory and the peak the labels name. */
static void plan_obstacles(struct plan *pl, const struct model_report *r, const struct panel *p)
{
    struct layout *l = &pl->l;
    layout_add(l, (struct box){ ML, 0, ML + W, 22, HARD }); /* the panel title's row */
    if (p->capacity.known) {
        double y = py(p, (double)p->capacity.v);
        layout_add(l, (struct box){ ML, y - 2, ML + W, y + 2, HARD });
    }
    int64_t ord = p->d->ordinal.known ? p->d->ordinal.v : -1;
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        if ((f->device.known ? f->device.v : -1) != ord || model_failure_is_retry(r, f))
            continue;
        double x = px(p, f->time_unix_ns), y = failure_y(p, f);
        layout_add(l, (struct box){ x - 7, y - 7, x + 7, y + 7, HARD });
        if (f == model_real_oom(r))
            pl->oom_f = f;
    }
    for (size_t i = 0; i < p->d->n_buckets; i++)
        if (!pl->pk || p->d->buckets[i].live_max > pl->pk->live_max)
            pl->pk = &p->d->buckets[i];
    if (pl->pk && pl->pk->live_max <= 0)
        pl->pk = NULL;
    if (pl->pk) {
        double pkx = px(p, pl->pk->peak_t), pky = py(p, (double)pl->pk->live_max);
        layout_add(l, (struct box){ pkx - 5, pky - 5, pkx + 5, pky + 5, HARD });
    }
    for (size_t i = 0; i < r->n_markers; i++) {
        int64_t mt = r->markers[i].time_unix_ns;
        if (mt >= p->t0 && mt <= p->t1)
            layout_add(l, (struct box){ px(p, mt) - 1.5, MT, px(p, mt) + 1.5, MT + H, SOFT_MARKER });
    }
    layout_add_outlines(l, p);
    for (size_t i = 0; i < p->d->n_steps; i++) {
        const struct model_tl_step *s = &p->d->steps[i];
        double x = px(p, s->time_unix_ns), y = py(p, (double)s->live_bytes_after);
        layout_add(l, (struct box){ x - 4, y - 4, x + 4, y + 4, HARD });
    }
    pl->band = pytorch_band(r, p);
    if (pl->band.on)
        layout_add(l, (struct box){ pl->band.x0, pl->band.y0, pl->band.x1, pl->band.y1, HARD });
}

/* The capacity's label: at the right end above its line, below it, then at the left end. */
static void plan_capacity(struct plan *pl, const struct panel *p)
{
    struct layout *l = &pl->l;
    struct strbuf t = { 0 };
    double y = py(p, (double)p->capacity.v);
    sb_printf(&t, "%s ", p->emulated ? "emulated limit" : "capacity");
    timeline_view_add_size(&t, p->capacity.v);
    pl->cap.text = dup_sb(&t);
    pl->cap.on = true;
    double w = text_width(pl->cap.text, 12, false);
    /* Sliding left along the line, above it then below; clear of marker lines first. */
    bool found = false;
    for (int pass = 0; pass < 3 && !found; pass++)
        for (double x = ML + W - 4; x >= ML + w && !found; x -= 40)
            for (int below = 0; below < 2 && !found; below++) {
                double ty = y + (below ? 14 : -5);
                struct box b = text_box(x, ty, w, 12, 'e');
                if (!layout_free_of(l, &b, MT - 2, MT + H + 12, pass))
                    continue;
                found = true;
                pl->cap.x = x, pl->cap.y = ty, pl->cap.anchor = 'e';
            }
    if (!found)
        pl->cap.x = ML + W - 4, pl->cap.y = y - 5, pl->cap.anchor = 'e';
    layout_add(l, text_box(pl->cap.x, pl->cap.y, w, 12, pl->cap.anchor));
}

/* The labels inside the plot: the out-of-memory, the peak, PyTorch's fragmentation. */
static void plan_plot_labels(struct plan *pl, const struct model_report *r, const struct panel *p)
{
    struct strbuf t = { 0 };
    if (pl->oom_f) {
        const struct model_failure *f = pl->oom_f;
        sb_add(&t, "out of memory: ");
        timeline_view_add_size(&t, f->size);
        size_t brief = t.len;
        sb_add(&t, " at ");
        model_callsite_short(&t, r, f->callsite);
        place_in_plot(pl, p, &pl->oom, px(p, f->time_unix_ns), failure_y(p, f),
                      (struct plot_text){ &t, brief, true });
    }
    if (pl->pk) {
        double pkx = px(p, pl->pk->peak_t), pky = py(p, (double)pl->pk->live_max);
        sb_add(&t, "peak ");
        timeline_view_add_size(&t, pl->pk->live_max);
        size_t brief = t.len;
        sb_add(&t, " at ");
        timeline_view_add_reltime(&t, pl->pk->peak_t - p->origin);
        place_in_plot(pl, p, &pl->peak, pkx, pky, (struct plot_text){ &t, brief, true });
    }
    if (pl->band.on) {
        sb_add(&t, "PyTorch: ");
        timeline_view_add_size(&t, pl->band.bytes);
        size_t brief = t.len;
        sb_add(&t, " reserved but unallocated");
        place_in_plot(pl, p, &pl->fw, pl->band.x1, (pl->band.y0 + pl->band.y1) / 2,
                      (struct plot_text){ &t, brief, false });
    }
}

/* The first leak that belongs on this panel, under the plot. */
static void plan_leak(struct plan *pl, const struct model_report *r, const struct panel *p,
                      const struct leaks *lk)
{
    for (size_t i = 0; i < lk->n; i++) {
        /* A leak tied to a device goes on its panel; one seen across devices (markers count all
         * of them) on every panel. One leak: two lines fit under the plot. */
        const struct leak_finding *f = &lk->f[i];
        if (f->device.known && (!p->d->ordinal.known || f->device.v != p->d->ordinal.v))
            continue;
        struct strbuf b = { 0 }, u = { 0 };
        sb_add(&b, "Leak: ");
        findings_describe_leak(&b, r, f);
        util_add_text(&u, sb_str(&b));
        wrap_leak(pl, sb_str(&u), ML + W + MR - 2 - ML);
        sb_free(&b);
        sb_free(&u);
        break;
    }
}

static void plan_panel(struct plan *pl, const struct model_report *r, const struct panel *p,
                       const struct leaks *lk)
{
    *pl = (struct plan){ .l = { .width = ML + W + MR } };
    plan_obstacles(pl, r, p);
    if (p->capacity.known)
        plan_capacity(pl, p);
    plan_plot_labels(pl, r, p);
    pl->markers = util_xcalloc(r->n_markers ? r->n_markers : 1, sizeof *pl->markers);
    for (size_t i = 0; i < r->n_markers; i++) {
        const struct model_marker *m = &r->markers[i];
        if (m->time_unix_ns < p->t0 || m->time_unix_ns > p->t1)
            continue;
        struct strbuf lb = { 0 };
        util_add_text(&lb, m->label);
        place_marker(&pl->l, sb_str(&lb), px(p, m->time_unix_ns), &pl->markers[i]);
        sb_free(&lb);
    }
    plan_leak(pl, r, p, lk);
}

static void plan_free(struct plan *pl, size_t n_markers)
{
    free(pl->l.boxes);
    free(pl->cap.text);
    free(pl->oom.text);
    free(pl->peak.text);
    free(pl->fw.text);
    for (size_t i = 0; i < n_markers; i++)
        free(pl->markers[i].text);
    free(pl->markers);
    free(pl->leak[0]);
    free(pl->leak[1]);
    free(pl->leak_full);
}

/* <text x y style="text-anchor:..." [class]>TEXT</text> at a planned spot. */
static void put_label(struct strbuf *o, const struct label *lb, const char *cls)
{
    if (!lb->on || !lb->text)
        return;
    sb_printf(o, "<text%s%s%s x=\"%.1f\" y=\"%.1f\" style=\"text-anchor:%s\">",
              cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "", lb->x, lb->y,
              anchor_css(lb->anchor));
    add_xml(o, lb->text);
    sb_add(o, "</text>");
}

static void svg_events(struct strbuf *o, const struct model_report *r, const struct panel *p,
                       const struct plan *pl)
{
    /* Markers: all devices share them (they are process-wide). */
    for (size_t i = 0; i < r->n_markers; i++) {
        const struct model_marker *m = &r->markers[i];
        if (m->time_unix_ns < p->t0 || m->time_unix_ns > p->t1)
            continue;
        double x = px(p, m->time_unix_ns);
        sb_printf(o, "<g class=\"marker\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
                  x, MT, x, MT + H);
        put_label(o, &pl->markers[i], NULL);
        sb_add(o, "<title>marker \"");
        add_xml(o, m->label);
        sb_add(o, "\" at ");
        timeline_view_add_reltime(o, m->time_unix_ns - p->origin);
        sb_add(o, ": live ");
        timeline_view_add_size(o, m->live_bytes);
        sb_add(o, " on all devices, phase peak ");
        timeline_view_add_size(o, m->phase_peak_bytes);
        sb_add(o, "</title></g>\n");
    }
    int64_t ord = p->d->ordinal.known ? p->d->ordinal.v : -1;
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        if ((f->device.known ? f->device.v : -1) != ord || model_failure_is_retry(r, f))
            continue;
        double x = px(p, f->time_unix_ns), y = failure_y(p, f);
        bool real = model_failure_is_real_oom(f);
        sb_printf(o, "<g class=\"%s\"><path d=\"M%.1f %.1f l10 10 m0 -10 l-10 10\"/>",
                  real ? "failure" : "failure retried", x - 5, y - 5);
        if (f == pl->oom_f) /* one label: the OOM the application saw first */
            put_label(o, &pl->oom, NULL);
        sb_add(o, "<title>");
        add_xml(o, f->api);
        sb_add(o, " of ");
        timeline_view_add_size(o, f->size);
        sb_add(o, real ? " failed (out of memory) at "
                       : " failed, and a retry after a cache flush succeeded, at ");
        timeline_view_add_reltime(o, f->time_unix_ns - p->origin);
        sb_add(o, " from ");
        add_site_xml(o, r, f->callsite);
        if (f->retried == RETRIED_FAILED) /* its retry is not drawn apart: the same failure */
            sb_add(o, "; retried, and failed again");
        sb_add(o, "</title></g>\n");
    }
    for (size_t i = 0; i < r->n_pressure; i++) {
        const struct model_pressure *e = &r->pressure[i];
        if ((e->device.known ? e->device.v : -1) != ord)
            continue;
        double x = px(p, e->time_unix_ns);
        sb_printf(
                o,
                "<g class=\"flush\"><path d=\"M%.1f %.1f l6 10 l-12 0 Z\"/><title>cache flush at ",
                x, MT + H - 12);
        timeline_view_add_reltime(o, e->time_unix_ns - p->origin);
        sb_add(o, ": ");
        timeline_view_add_size(o, e->freed_bytes);
        sb_printf(o, " freed in %" PRId64 " frees to fit ", e->freed_count);
        timeline_view_add_size(o, e->size);
        sb_add(o, " from ");
        add_site_xml(o, r, e->callsite);
        sb_add(o, "</title></g>\n");
    }
    for (size_t i = 0; i < p->d->n_steps; i++) {
        const struct model_tl_step *s = &p->d->steps[i];
        sb_printf(o,
                  "<g class=\"step\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/><title>growth step: ",
                  px(p, s->time_unix_ns), py(p, (double)s->live_bytes_after));
        add_xml(o, s->api);
        sb_add(o, " of ");
        timeline_view_add_size(o, s->size);
        sb_add(o, " at ");
        timeline_view_add_reltime(o, s->time_unix_ns - p->origin);
        sb_add(o, " from ");
        add_site_xml(o, r, s->callsite);
        sb_add(o, "</title></g>\n");
    }
    /* The peak, at its exact time. */
    if (pl->pk) {
        sb_printf(o, "<g class=\"peak\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/>",
                  px(p, pl->pk->peak_t), py(p, (double)pl->pk->live_max));
        put_label(o, &pl->peak, NULL);
        sb_add(o, "</g>\n");
    }
}

/* The panel's markers listed under its axis: every marker of its report (those outside the plotted
 * span too), its time since the origin and its whole label, which the labels above the plot may
 * have to cut where markers crowd; in rows as wide as the picture, starting at y. An entry wider
 * than a row is cut, whole on hover. Returns the rows; draws them only when o is not NULL. */
#define KEY_ROW 16.0
static int marker_key(struct strbuf *o, const struct model_report *r, const struct panel *p,
                      double y)
{
    if (!r->n_markers)
        return 0;
    double x = ML, right = ML + W + MR - 4;
    int row = 0;
    struct strbuf t = { 0 };
    if (o)
        sb_printf(o, "<g class=\"marker-key\"><text class=\"heading\" x=\"%.1f\" y=\"%.1f\">"
                     "Markers:</text>\n", x, y);
    x += text_width("Markers:", 12, true) + 10;
    for (size_t i = 0; i < r->n_markers; i++) {
        const struct model_marker *m = &r->markers[i];
        sb_truncate(&t, 0);
        timeline_view_add_reltime(&t, m->time_unix_ns - p->origin);
        sb_addc(&t, ' ');
        util_add_text(&t, m->label);
        double w = text_width(sb_str(&t), 12, false);
        char *cut = w > right - ML ? cut_to_width(sb_str(&t), right - ML, 12, false) : NULL;
        if (cut)
            w = text_width(cut, 12, false);
        if (x > ML && x + w > right) {
            row++;
            x = ML;
        }
        if (o) {
            sb_printf(o, "%s<text x=\"%.1f\" y=\"%.1f\">", cut ? "<g>" : "", x, y + row * KEY_ROW);
            add_xml(o, cut ? cut : sb_str(&t));
            sb_add(o, "</text>");
            if (cut) {
                sb_add(o, "<title>");
                add_xml(o, sb_str(&t));
                sb_add(o, "</title></g>");
            }
            sb_addc(o, '\n');
        }
        free(cut);
        x += w + 14;
    }
    if (o)
        sb_add(o, "</g>\n");
    sb_free(&t);
    return row + 1;
}

/* A panel's height: the plot and its axis, and the rows of its markers' list. */
static double panel_height(const struct view *v, size_t i)
{
    int rows = marker_key(NULL, v->owner[i], &v->panels[i], 0);
    return PANEL_H + (rows ? rows * KEY_ROW + 8 : 0);
}

static void svg_panel(struct strbuf *o, const struct view *v, size_t index, double top,
                      const struct leaks *lk)
{
    const struct model_report *r = v->owner[index];
    const struct panel *p = &v->panels[index];
    struct plan pl;
    plan_panel(&pl, r, p, lk);
    sb_printf(o, "<g class=\"panel\" data-panel=\"%zu\" transform=\"translate(0 %.1f)\">\n", index,
              top);
    struct strbuf title = { 0 };
    if (p->who)
        sb_printf(&title, "%s, ", p->who);
    if (p->d->ordinal.known)
        sb_printf(&title, "Device %" PRId64, p->d->ordinal.v);
    else
        sb_add(&title, "Unknown device");
    if (p->dev && p->dev->name) {
        sb_add(&title, ": ");
        sb_add(&title, p->dev->name);
    }
    if (p->capacity.known) {
        sb_add(&title, p->emulated ? ", emulated as " : ", ");
        timeline_view_add_size(&title, p->capacity.v);
    }
    sb_printf(o, "<text class=\"title\" x=\"%.1f\" y=\"18\">", ML);
    add_xml(o, sb_str(&title));
    sb_add(o, "</text>\n");
    sb_free(&title);
    /* the plot's ground: under the pointer anywhere on the plot, so hovering finds the panel */
    sb_printf(o, "<rect class=\"plot\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
              ML, MT, W, H);
    svg_axes(o, p, timeline_view_origin_text(v));
    svg_area(o, p, 2, "untracked");
    svg_area(o, p, 1, "reserved");
    svg_area(o, p, 0, "live");
    svg_line(o, p, 1, "reserved-line");
    svg_line(o, p, 0, "live-line");
    if (pl.band.on) {
        sb_printf(o,
                  "<g class=\"fragmentation-pytorch\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                  "height=\"%.1f\"/>",
                  pl.band.x0, pl.band.y0, pl.band.x1 - pl.band.x0, pl.band.y1 - pl.band.y0);
        put_label(o, &pl.fw, NULL);
        sb_add(o, "<title>PyTorch's out-of-memory message: ");
        timeline_view_add_size(o, pl.band.bytes);
        sb_add(o, " of the memory it held was reserved but unallocated (fragmentation inside its "
                  "segments, which CUDA counts as live)</title></g>\n");
    }
    if (p->capacity.known) {
        double y = py(p, (double)p->capacity.v);
        sb_printf(o,
                  "<g class=\"capacity\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
                  ML, y, ML + W, y);
        put_label(o, &pl.cap, NULL);
        sb_add(o, "</g>\n");
    }
    svg_buckets_hover(o, p);
    svg_events(o, r, p, &pl);
    if (pl.leak[0]) {
        sb_add(o, "<g class=\"leak-note\">");
        for (int k = 0; k < 2 && pl.leak[k]; k++) {
            sb_printf(o, "<text class=\"leak\" x=\"%.1f\" y=\"%.1f\">", ML, MT + H + 58 + k * 15);
            add_xml(o, pl.leak[k]);
            sb_add(o, "</text>");
        }
        if (pl.leak[1] || strcmp(pl.leak[0], pl.leak_full) != 0) {
            sb_add(o, "<title>");
            add_xml(o, pl.leak_full);
            sb_add(o, "</title>");
        }
        sb_add(o, "</g>\n");
    }
    marker_key(o, r, p, PANEL_H + 8);
    sb_add(o, "</g>\n");
    plan_free(&pl, r->n_markers);
}

static const char svg_style[] =
        "<style>\n"
        "text{font-family:DejaVu Sans,Liberation Sans,Arial,sans-serif;font-size:12px;fill:#222}\n"
        ".title{font-size:15px;font-weight:bold}\n"
        ".ylabel{text-anchor:end}.xlabel{text-anchor:middle}\n"
        ".grid{stroke:#d8d8d8;stroke-width:1}.tick,.frame{stroke:#333;stroke-width:1.2}\n"
        /* Opaque fills, each drawn over the one below: untracked shows only above reserved, reserved
         * only above live, so each band is exactly its own memory. */
        ".live{fill:#92b2e8}.live-line{fill:none;stroke:#1f4fa0;stroke-width:2}\n"
        ".reserved{fill:#f6c987}.reserved-line{fill:none;stroke:#d07000;stroke-width:1.5}\n"
        ".untracked{fill:#dadada}.plot{fill:#fff}\n"
        ".fragmentation-pytorch rect,rect.fragmentation-pytorch{fill:#f6a03c;fill-opacity:0.75;"
        "stroke:#d07000;stroke-width:1;stroke-dasharray:2 2}.fragmentation-pytorch text{fill:#a05000}\n"
        ".capacity line{stroke:#d01010;stroke-width:2;stroke-dasharray:8 5}.capacity text{fill:#d01010}\n"
        ".marker line{stroke:#2a8a2a;stroke-width:1;stroke-dasharray:3 3}.marker text{fill:#2a7a2a;font-size:11px}\n"
        ".failure path{stroke:#e00000;stroke-width:3}.failure text{fill:#c00000;font-weight:bold}\n"
        ".failure.retried path{stroke:#f08080;stroke-width:2}\n"
        ".flush path{fill:#ff8c00}.step circle{fill:#1f4fa0;stroke:#fff;stroke-width:1}\n"
        ".peak circle{fill:#000}.peak text{font-weight:bold}.leak{fill:#c00000;font-weight:bold}\n"
        ".bucket{fill:transparent;stroke:none}.bucket:hover{fill:#000;fill-opacity:0.06}\n"
        ".legend rect{stroke:#555;stroke-width:0.5}\n"
        ".marker-key text{fill:#2a7a2a}.marker-key .heading{font-weight:bold}\n"
        "</style>\n";

/* The legend: every colour and symbol the panels use, in rows as wide as the picture. */
static int svg_legend(struct strbuf *o, double y, bool pytorch_band, bool draw)
{
    enum { AREA, LINE, CROSS, TRIANGLE, DOT };
    static const struct {
        int kind;
        const char *cls, *text;
    } items[] = {
        { AREA, "live", "live (allocations handed out)" },
        { AREA, "reserved", "reserved − live: fragmentation, held by pools" },
        { AREA, "untracked", "untracked: context, libraries, other processes" },
        { AREA, "fragmentation-pytorch", "reserved but unallocated, by PyTorch's own count" },
        { LINE, "capacity", "capacity or emulated limit" },
        { LINE, "marker", "marker (vramwatch_mark)" },
        { CROSS, "failure", "out of memory" },
        { CROSS, "failure retried", "failure a retry overcame" },
        { TRIANGLE, "flush", "cache flush" },
        { DOT, "step", "growth step (largest allocations)" },
        { DOT, "peak", "peak live memory" },
    };
    double x = ML, right = ML + W + MR - 4;
    int row = 0;
    if (draw)
        sb_printf(o, "<g class=\"legend\" transform=\"translate(0 %.1f)\">\n", y);
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        if (items[i].kind == AREA && strcmp(items[i].cls, "fragmentation-pytorch") == 0 &&
            !pytorch_band)
            continue;
        double w = 18 + text_width(items[i].text, 12, false);
        if (x > ML && x + w > right) {
            row++;
            x = ML;
        }
        double ry = row * 16.0;
        if (draw) {
            switch (items[i].kind) {
            case AREA:
                sb_printf(o,
                          "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\"/>",
                          items[i].cls, x, ry);
                break;
            case LINE:
                sb_printf(
                        o,
                        "<g class=\"%s\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>",
                        items[i].cls, x, ry + 5, x + 14, ry + 5);
                break;
            case CROSS:
                sb_printf(o, "<g class=\"%s\"><path d=\"M%.1f %.1f l8 8 m0 -8 l-8 8\"/></g>",
                          items[i].cls, x + 3, ry + 1);
                break;
            case TRIANGLE:
                sb_printf(o, "<g class=\"%s\"><path d=\"M%.1f %.1f l6 10 l-12 0 Z\"/></g>",
                          items[i].cls, x + 7, ry);
                break;
            default:
                sb_printf(o, "<g class=\"%s\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\"/></g>",
                          items[i].cls, x + 7, ry + 5, strcmp(items[i].cls, "peak") == 0 ? 4 : 3);
            }
            sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 18, ry + 10, items[i].text);
        }
        x += w + 16;
    }
    if (draw)
        sb_add(o, "</g>\n");
    return row + 1;
}

/* The whole SVG document (or, inline in HTML, the same element without the XML prologue). */
static void svg_document(struct strbuf *o, const struct view *v, bool inline_html)
{
    const struct model_report *r = v->reports[0];
    bool band = false;
    for (size_t i = 0; i < v->n_panels && !band; i++)
        band = pytorch_band(v->owner[i], &v->panels[i]).on;
    double legend_y = 30, first = legend_y + svg_legend(o, 0, band, false) * 16.0 + 4;
    double width = ML + W + MR, height = first + 8;
    for (size_t i = 0; i < v->n_panels; i++)
        height += panel_height(v, i);
    if (!inline_html)
        sb_add(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb_printf(
            o,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"vramwatch-timeline\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n",
            width, height, width, height);
    sb_add(o, "<title>vramwatch timeline: ");
    struct strbuf cmd = { 0 };
    if (v->n_runs > 1)
        sb_printf(&cmd, "%zu runs at other settings, each from its own start: ", v->n_runs);
    else if (v->n_reports > 1)
        sb_printf(&cmd, "a job of %zu processes: ", v->n_reports);
    util_add_argv(&cmd, r->process.argv, r->process.argc);
    add_xml(o, sb_str(&cmd));
    sb_add(o, "</title>\n");
    sb_add(o, svg_style);
    sb_printf(o, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n", width,
              height);
    sb_printf(o, "<text class=\"title\" x=\"%.1f\" y=\"22\">", ML);
    /* the whole command stays in the <title> above */
    char *cut = text_width(sb_str(&cmd), 15, true) <= width - MR - ML
                        ? util_xstrdup(sb_str(&cmd))
                        : cut_to_width(sb_str(&cmd), width - MR - ML, 15, true);
    add_xml(o, cut ? cut : "");
    free(cut);
    sb_printf(o, "</text>\n");
    sb_free(&cmd);
    svg_legend(o, legend_y, band, true);
    const struct model_report *leaks_of = NULL;
    struct leaks lk = { .n = 0 };
    double top = first;
    for (size_t i = 0; i < v->n_panels; i++) {
        if (v->owner[i] != leaks_of) {
            leaks_of = v->owner[i];
            lk.n = findings_leaks(leaks_of, lk.f, 4);
            if (lk.n > 4)
                lk.n = 4;
        }
        svg_panel(o, v, i, top, &lk);
        top += panel_height(v, i);
    }
    sb_add(o, "</svg>\n");
}

/* ---- HTML: the picture, what hovering shows, and a few lines of script ---- */

/* The figures behind the hover, per panel, as JSON in the page: the plot's place, each bucket's
 * figures in words, and every event with its call chain (times in ns from the panel's start;
 * "o": that start, in ns since the origin the times are shown from). */
static void add_chain(struct strbuf *o, const struct model_report *r, int64_t callsite)
{
    const struct model_callsite *cs = model_callsite(r, callsite);
    sb_addc(o, '[');
    for (size_t i = 0; cs && i < cs->n_frames; i++) {
        struct strbuf f = { 0 };
        model_add_frame(&f, r, &cs->frames[i], MODEL_NAME_SHORT);
        if (i)
            sb_addc(o, ',');
        timeline_view_add_json(o, sb_str(&f), true);
        sb_free(&f);
    }
    sb_addc(o, ']');
}

static void add_event(struct strbuf *o, bool *first, int64_t t, struct strbuf *text,
                      const struct model_report *r, int64_t callsite)
{
    sb_printf(o, "%s[%" PRId64 ",", *first ? "" : ",", t);
    *first = false;
    timeline_view_add_json(o, sb_str(text), true);
    sb_addc(o, ',');
    if (callsite >= 0)
        add_chain(o, r, callsite);
    else
        sb_add(o, "[]");
    sb_addc(o, ']');
    sb_truncate(text, 0);
}

static void hover_data(struct strbuf *o, const struct view *v)
{
    sb_add(o, "<script type=\"application/json\" id=\"vw-data\">{\"panels\":[");
    for (size_t i = 0; i < v->n_panels; i++) {
        const struct panel *p = &v->panels[i];
        const struct model_report *r = v->owner[i];
        const struct model_tl_device *d = p->d;
        sb_printf(o,
                  "%s\n{\"x0\":%.1f,\"x1\":%.1f,\"y0\":%.1f,\"y1\":%.1f,\"span\":%" PRId64
                  ",\"o\":%" PRId64 ",\"b\":[",
                  i ? "," : "", ML, ML + W, MT, MT + H, p->t1 - p->t0, p->t0 - p->origin);
        struct strbuf t = { 0 };
        for (size_t k = 0; k < d->n_buckets; k++) {
            const struct model_tl_bucket *b = &d->buckets[k];
            sb_add(&t, "live ");
            timeline_view_add_size(&t, b->live);
            sb_add(&t, " (");
            timeline_view_add_size(&t, b->live_min);
            sb_add(&t, " to ");
            timeline_view_add_size(&t, b->live_max);
            sb_add(&t, ")\nreserved ");
            timeline_view_add_size(&t, b->reserved);
            sb_add(&t, " (most ");
            timeline_view_add_size(&t, b->reserved_max);
            sb_add(&t, ")\nuntracked ");
            if (b->untracked.known)
                timeline_view_add_size(&t, b->untracked.v > 0 ? b->untracked.v : 0);
            else
                sb_add(&t, "not measured yet");
            sb_printf(&t, "\n%" PRId64 " events in ", b->events);
            timeline_view_add_tick(&t, timeline_view_bucket_end(p, k) - b->t,
                                   timeline_view_bucket_end(p, k) - b->t);
            sb_printf(o, "%s[%" PRId64 ",", k ? "," : "", b->t - p->t0);
            timeline_view_add_json(o, sb_str(&t), true);
            sb_addc(o, ']');
            sb_truncate(&t, 0);
        }
        sb_add(o, "],\"e\":[");
        bool first = true;
        for (size_t k = 0; k < r->n_markers; k++) {
            const struct model_marker *m = &r->markers[k];
            sb_add(&t, "marker \"");
            util_add_text(&t, m->label);
            sb_add(&t, "\", live ");
            timeline_view_add_size(&t, m->live_bytes);
            add_event(o, &first, m->time_unix_ns - p->t0, &t, r, -1);
        }
        int64_t ord = d->ordinal.known ? d->ordinal.v : -1;
        char s1[UTIL_SIZE_LEN];
        for (size_t k = 0; k < r->n_failures; k++) {
            const struct model_failure *f = &r->failures[k];
            if ((f->device.known ? f->device.v : -1) != ord)
                continue;
            /* a retry that failed again has no cross of its own, but when it came is told */
            sb_printf(&t, "%s: %s of %s",
                      model_failure_is_retry(r, f) ? "the out-of-memory's retry, failed again"
                      : model_failure_is_real_oom(f) ? "out of memory"
                                                     : "failure a retry overcame",
                      f->api, util_fmt_size(f->size, s1));
            add_event(o, &first, f->time_unix_ns - p->t0, &t, r, f->callsite);
        }
        for (size_t k = 0; k < r->n_pressure; k++) {
            const struct model_pressure *e = &r->pressure[k];
            if ((e->device.known ? e->device.v : -1) != ord)
                continue;
            sb_printf(&t, "cache flush: %s freed to fit ", util_fmt_size(e->freed_bytes, s1));
            timeline_view_add_size(&t, e->size);
            add_event(o, &first, e->time_unix_ns - p->t0, &t, r, e->callsite);
        }
        for (size_t k = 0; k < d->n_steps; k++) {
            const struct model_tl_step *s = &d->steps[k];
            sb_printf(&t, "growth step: %s of %s", s->api, util_fmt_size(s->size, s1));
            add_event(o, &first, s->time_unix_ns - p->t0, &t, r, s->callsite);
        }
        const struct model_framework *fw = &r->framework;
        if (pytorch_band(r, p).on) {
            sb_printf(&t, "PyTorch's out-of-memory error: %s reserved but unallocated",
                      util_fmt_size(fw->reserved_unallocated_bytes.v, s1));
            add_event(o, &first, fw->time_unix_ns.v - p->t0, &t, r, -1);
        }
        sb_add(o, "]}");
        sb_free(&t);
    }
    sb_add(o, "\n]}</script>\n");
}

static const char html_head[] =
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width\">\n"
        "<title>vramwatch timeline</title>\n"
        "<style>body{margin:16px;background:#fff;font-family:DejaVu Sans,Arial,sans-serif}"
        "svg.vramwatch-timeline{max-width:100%;height:auto}"
        "#tip{position:fixed;display:none;pointer-events:none;background:#ffffe8;border:1px solid #888;"
        "padding:4px 6px;font-size:12px;max-width:640px;white-space:pre-line}"
        ".flame{max-width:1102px;margin-top:18px}.flame h2{font-size:15px;margin:6px 0}"
        ".flame .graph{position:relative;border-top:1px solid #888}"
        ".flame .frame{position:absolute;height:17px;box-sizing:border-box;border:1px solid #fff;"
        "font-size:11px;line-height:15px;padding:0 3px;overflow:hidden;white-space:nowrap;"
        "text-overflow:ellipsis;color:#111}</style>\n</head>\n<body>\n";

/* The tooltip: over a symbol, its <title>; anywhere on a plot (over a symbol too), the time under
 * the pointer, the bucket's live, reserved and untracked memory, and the nearest event with its
 * call chain. */
static const char html_tail[] =
        "<div id=\"tip\"></div>\n"
        "<script>\n"
        "(function(){var tip=document.getElementById('tip');\n"
        "var data=JSON.parse(document.getElementById('vw-data').textContent).panels;\n"
        "document.querySelectorAll('svg title').forEach(function(t){var g=t.parentNode;\n"
        " if(g.tagName==='svg')return; g.setAttribute('data-tip',t.textContent); t.remove();});\n"
        "function p2(n){return (n<10?'0':'')+n;}\n"
        /* the report's form (util_fmt_reltime) of a time since the origin, P.o from the panel's start */
        "function rel(ns){var a=Math.abs(ns),g=ns<0?'-':'+',c=Math.round(a/1e7),d=Math.round(a/1e8),s=Math.round(a/1e9);\n"
        " if(c<6000)return g+Math.floor(c/100)+'.'+p2(c%100)+'s';\n"
        " if(d<36000)return g+Math.floor(d/600)+'m'+p2(Math.floor(d%600/10))+'.'+(d%10)+'s';\n"
        " return g+Math.floor(s/3600)+'h'+p2(Math.floor(s%3600/60))+'m'+p2(s%60)+'s';}\n"
        "function at(P,q){var t=(q.x-P.x0)/(P.x1-P.x0)*P.span,b=P.b,lo=0,hi=b.length-1,k=-1;\n"
        " while(lo<=hi){var m=(lo+hi)>>1;if(b[m][0]<=t){k=m;lo=m+1;}else hi=m-1;}\n"
        " var s=rel(t+P.o)+'\\n'+(k<0?'before the first allocation: nothing live':b[k][1]);\n"
        " var n=null;P.e.forEach(function(e){if(!n||Math.abs(e[0]-t)<Math.abs(n[0]-t))n=e;});\n"
        " if(n){s+='\\nnearest event, at '+rel(n[0]+P.o)+': '+n[1];\n"
        "  n[2].forEach(function(f){s+='\\n    '+f;});}\n"
        " return s;}\n"
        "function show(x,y){var el=document.elementFromPoint(x,y),txt=null;\n"
        " var g=el&&el.closest?el.closest('[data-tip]'):null;\n"
        " if(g&&!g.classList.contains('bucket'))txt=g.getAttribute('data-tip');\n"
        " var pg=el&&el.closest?el.closest('g.panel'):null;\n"
        " if(pg){var P=data[+pg.getAttribute('data-panel')],pt=pg.ownerSVGElement.createSVGPoint();\n"
        "  pt.x=x;pt.y=y;var q=pt.matrixTransform(pg.getScreenCTM().inverse());\n"
        "  if(q.x>=P.x0&&q.x<=P.x1&&q.y>=P.y0&&q.y<=P.y1)txt=(txt?txt+'\\n\\n':'')+at(P,q);}\n"
        " if(!txt){tip.style.display='none';return null;} tip.textContent=txt;\n"
        " tip.style.display='block'; tip.style.left=(x+14)+'px'; tip.style.top=(y+14)+'px'; return txt;}\n"
        "window.vramwatchHover=show;\n"
        "document.addEventListener('mousemove',function(e){show(e.clientX,e.clientY);});\n"
        "})();\n"
        "</script>\n</body>\n</html>\n";

void timeline_svg_write(struct strbuf *o, const struct view *v, bool html)
{
    if (html)
        sb_add(o, html_head);
    svg_document(o, v, html);
    if (html) {
        timeline_flame_html(o, v);
        hover_data(o, v);
        sb_add(o, html_tail);
    }
}
