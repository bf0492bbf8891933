/* cmd_timeline.c: `vramwatch timeline`: the report's whole-run timeline as one self-contained SVG
 * or HTML picture, or in the terminal with Unicode blocks.
 *
 * The picture, per device panel: live memory (blue area), reserved memory above it (the orange
 * band between them is memory held but not handed out: fragmentation), untracked memory above
 * that when the driver was asked (grey), the card's capacity or emulated limit (red dashes),
 * markers (vertical lines with their labels), failures (red crosses) and cache flushes (orange
 * triangles) with their call sites, the largest growth steps (small dots), the peak, and leaks
 * (findings.h). Every bucket carries a <title> so hovering shows its figures; the HTML adds a
 * tooltip that follows the pointer. Nothing is fetched from anywhere: no fonts, no scripts. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "findings.h"
#include "job.h"

static const char usage[] =
        "usage: vramwatch timeline [-o FILE.svg|FILE.html] REPORT...\n"
        "\n"
        "The report's memory over the whole run, per device: live and reserved memory (the band\n"
        "between them is fragmentation), untracked memory, the card's capacity or emulated limit,\n"
        "markers, failures and cache flushes with their call sites, and leaks found in the run.\n"
        "Several reports of one job's ranks, or a file written by vramwatch merge, are drawn on one\n"
        "time axis, a panel per rank and device, in rank order.\n"
        "\n"
        "  -o, --output FILE  write one self-contained picture: FILE.svg, or FILE.html with hover\n"
        "                     details; without it, the timeline is drawn in the terminal (colour\n"
        "                     unless NO_COLOR is set or the output is not a terminal)\n"
        "  --help             this text\n"
        "\n"
        "Exit status: 0 done; 2 bad usage, an unreadable report, or a report without a timeline\n"
        "(written by an earlier version).\n";

/* ---- shared: scales and labels ---- */

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)

struct panel {
    const struct model_tl_device *d;
    const struct model_device *dev; /* the report's device entry, NULL if none matches */
    int64_t t0, t1;                 /* time span shown */
    double ymax;                    /* bytes at the top of the plot */
    model_int capacity;             /* the line drawn: limit when emulated, else capacity */
    bool emulated;
    const char *who; /* "rank 3 (node-a, pid 8104)" in a job's picture, else NULL */
};

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

/* "+1m30s", "+2h", "+250ms", "+1d06h": an axis label relative to the panel's start. */
static void add_reltime(struct strbuf *b, int64_t ns)
{
    int64_t ms = ns / 1000000, s = ns / 1000000000;
    if (ns < 1000000000LL)
        sb_printf(b, "+%" PRId64 "ms", ms);
    else if (s < 60)
        sb_printf(b, ns % 1000000000LL ? "+%.1fs" : "+%.0fs", (double)ns / 1e9);
    else if (s < 3600)
        sb_printf(b, s % 60 ? "+%" PRId64 "m%02" PRId64 "s" : "+%" PRId64 "m", s / 60, s % 60);
    else if (s < 86400)
        sb_printf(b, s % 3600 ? "+%" PRId64 "h%02" PRId64 "m" : "+%" PRId64 "h", s / 3600,
                  s % 3600 / 60);
    else
        sb_printf(b, "+%" PRId64 "d%02" PRId64 "h", s / 86400, s % 86400 / 3600);
}

static void add_size(struct strbuf *b, int64_t bytes)
{
    char buf[UTIL_SIZE_LEN];
    sb_add(b, util_fmt_size(bytes, buf));
}

static void panel_setup(const struct model_report *r, const struct model_tl_device *d,
                        struct panel *p)
{
    *p = (struct panel){ .d = d };
    p->dev = d->ordinal.known ? model_device(r, d->ordinal.v) : NULL;
    for (size_t i = 0; !p->dev && !d->ordinal.known && i < r->n_devices; i++)
        if (!r->devices[i].ordinal.known)
            p->dev = &r->devices[i];
    p->t0 = d->start_unix_ns;
    p->t1 = r->time_unix_ns;
    if (d->n_buckets) {
        int64_t last = d->buckets[d->n_buckets - 1].t;
        if (last > p->t1)
            p->t1 = last + 1;
    }
    if (p->t1 <= p->t0)
        p->t1 = p->t0 + 1000000;
    p->emulated = d->limit_bytes.known;
    p->capacity = d->limit_bytes.known ? d->limit_bytes : d->capacity_bytes;
    double top = p->capacity.known ? (double)p->capacity.v : 0;
    for (size_t i = 0; i < d->n_buckets; i++) {
        const struct model_tl_bucket *b = &d->buckets[i];
        double used =
                (double)b->reserved_max +
                (b->untracked_max.known && b->untracked_max.v > 0 ? (double)b->untracked_max.v : 0);
        top = fmax(top, fmax((double)b->live_max, used));
    }
    for (size_t i = 0; i < r->n_failures; i++)
        top = fmax(top,
                   (double)r->failures[i].reserved_bytes_at_failure + (double)r->failures[i].size);
    p->ymax = top > 0 ? top * 1.08 : GiB;
}

/* ---- SVG ---- */

#define W 1000.0 /* plot width */
#define H 280.0  /* plot height */
#define ML 78.0  /* margins */
#define MR 24.0
#define MT 54.0
#define MB 64.0
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

/* Text from the report, made safe for XML (and for one line). */
static void add_xml(struct strbuf *b, const char *s)
{
    struct strbuf t = { 0 };
    util_add_text(&t, s ? s : "");
    for (const char *c = sb_str(&t); *c; c++) {
        switch (*c) {
        case '<':
            sb_add(b, "&lt;");
            break;
        case '>':
            sb_add(b, "&gt;");
            break;
        case '&':
            sb_add(b, "&amp;");
            break;
        case '"':
            sb_add(b, "&quot;");
            break;
        default:
            sb_addc(b, *c);
        }
    }
    sb_free(&t);
}

static void add_site_xml(struct strbuf *b, const struct model_report *r, int64_t id)
{
    struct strbuf s = { 0 };
    model_callsite_short(&s, r, id);
    add_xml(b, sb_str(&s));
    sb_free(&s);
}

/* The end of bucket i: the next bucket's start or its own width, whichever is first. */
static int64_t bucket_end(const struct panel *p, size_t i)
{
    const struct model_tl_device *d = p->d;
    int64_t end = d->buckets[i].t + d->bucket_ns;
    if (i + 1 < d->n_buckets && d->buckets[i + 1].t < end)
        end = d->buckets[i + 1].t;
    if (i + 1 == d->n_buckets && end < p->t1)
        end = p->t1; /* the last values held until the report */
    return end;
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

/* The outline of one series: each bucket at its most over its width, then its last value until
 * the next bucket starts. */
static void add_outline(struct strbuf *o, const struct panel *p, int which, bool move_first)
{
    const struct model_tl_device *d = p->d;
    for (size_t i = 0; i < d->n_buckets; i++) {
        const struct model_tl_bucket *b = &d->buckets[i];
        double x0 = px(p, b->t), x1 = px(p, bucket_end(p, i)), y = py(p, series(b, which, false));
        double xn = i + 1 < d->n_buckets ? px(p, d->buckets[i + 1].t) : x1,
               yl = py(p, series(b, which, true));
        sb_printf(o, "%s%.1f %.1f L%.1f %.1f", i == 0 && move_first ? "M" : " L", x0, y, x1, y);
        if (xn > x1 || yl != y)
            sb_printf(o, " L%.1f %.1f L%.1f %.1f", x1, yl, xn, yl);
    }
}

static void svg_area(struct strbuf *o, const struct panel *p, int which, const char *cls)
{
    const struct model_tl_device *d = p->d;
    if (!d->n_buckets)
        return;
    sb_printf(o, "<path class=\"%s\" d=\"M%.1f %.1f", cls, px(p, d->buckets[0].t), MT + H);
    add_outline(o, p, which, false);
    sb_printf(o, " L%.1f %.1f Z\"/>\n", px(p, bucket_end(p, d->n_buckets - 1)), MT + H);
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

static void svg_axes(struct strbuf *o, const struct panel *p)
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
    int64_t span = p->t1 - p->t0, ts = time_step(span, 8);
    for (int64_t t = 0; t <= span; t += ts) {
        double x = px(p, p->t0 + t);
        sb_printf(o, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", x,
                  MT + H, x, MT + H + 6);
        sb_printf(o, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\">", x, MT + H + 20);
        add_reltime(o, t);
        sb_add(o, "</text>\n");
    }
    sb_printf(o, "<line class=\"frame\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", ML, MT,
              ML, MT + H);
    sb_printf(o, "<line class=\"frame\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", ML,
              MT + H, ML + W, MT + H);
    sb_printf(
            o,
            "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\">time since the device's first allocation</text>\n",
            ML + W / 2, MT + H + 38);
    sb_add(o, "</g>\n");
}

static void svg_buckets_hover(struct strbuf *o, const struct panel *p)
{
    const struct model_tl_device *d = p->d;
    sb_add(o, "<g class=\"hover\">\n");
    for (size_t i = 0; i < d->n_buckets; i++) {
        const struct model_tl_bucket *b = &d->buckets[i];
        double x0 = px(p, b->t), x1 = px(p, bucket_end(p, i));
        sb_printf(
                o,
                "<rect class=\"bucket\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>",
                x0, MT, x1 - x0 > 0.5 ? x1 - x0 : 0.5, H);
        add_reltime(o, b->t - p->t0);
        sb_add(o, ": live ");
        add_size(o, b->live);
        sb_add(o, " (");
        add_size(o, b->live_min);
        sb_add(o, " to ");
        add_size(o, b->live_max);
        sb_add(o, "), reserved ");
        add_size(o, b->reserved);
        sb_add(o, " (most ");
        add_size(o, b->reserved_max);
        sb_add(o, "), fragmentation ");
        add_size(o, b->reserved - b->live);
        if (b->untracked.known) {
            sb_add(o, ", untracked ");
            add_size(o, b->untracked.v);
        }
        sb_printf(o, ", %" PRId64 " events</title></rect>\n", b->events);
    }
    sb_add(o, "</g>\n");
}

static void svg_events(struct strbuf *o, const struct model_report *r, const struct panel *p)
{
    /* Markers: all devices share them (they are process-wide). Labels alternate heights so
     * neighbours do not overwrite each other. */
    for (size_t i = 0; i < r->n_markers; i++) {
        const struct model_marker *m = &r->markers[i];
        if (m->time_unix_ns < p->t0 || m->time_unix_ns > p->t1)
            continue;
        double x = px(p, m->time_unix_ns);
        sb_printf(o, "<g class=\"marker\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
                  x, MT - 4, x, MT + H);
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\">", x + 2, MT - 6 - (double)(i % 2) * 11);
        add_xml(o, m->label);
        sb_add(o, "</text><title>marker \"");
        add_xml(o, m->label);
        sb_add(o, "\" at ");
        add_reltime(o, m->time_unix_ns - p->t0);
        sb_add(o, ": live ");
        add_size(o, m->live_bytes);
        sb_add(o, " on all devices, phase peak ");
        add_size(o, m->phase_peak_bytes);
        sb_add(o, "</title></g>\n");
    }
    int64_t ord = p->d->ordinal.known ? p->d->ordinal.v : -1;
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        if ((f->device.known ? f->device.v : -1) != ord)
            continue;
        double x = px(p, f->time_unix_ns),
               y = py(p, (double)f->reserved_bytes_at_failure + (double)f->size);
        bool real = model_failure_is_real_oom(f);
        sb_printf(o, "<g class=\"%s\"><path d=\"M%.1f %.1f l10 10 m0 -10 l-10 10\"/>",
                  real ? "failure" : "failure retried", x - 5, y - 5);
        if (f == model_real_oom(r)) { /* one label: the OOM the application saw first */
            bool left = x > ML + W / 2;
            sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\" style=\"text-anchor:%s\">out of memory: ",
                      left ? x - 8 : x + 8, y - 10 < MT ? MT + 14 : y - 10, left ? "end" : "start");
            add_size(o, f->size);
            sb_add(o, " at ");
            add_site_xml(o, r, f->callsite);
            sb_add(o, "</text>");
        }
        sb_add(o, "<title>");
        add_xml(o, f->api);
        sb_add(o, " of ");
        add_size(o, f->size);
        sb_add(o, real ? " failed (out of memory) at "
                       : " failed, and a retry after a cache flush succeeded, at ");
        add_reltime(o, f->time_unix_ns - p->t0);
        sb_add(o, " from ");
        add_site_xml(o, r, f->callsite);
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
        add_reltime(o, e->time_unix_ns - p->t0);
        sb_add(o, ": ");
        add_size(o, e->freed_bytes);
        sb_printf(o, " freed in %" PRId64 " frees to fit ", e->freed_count);
        add_size(o, e->size);
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
        add_size(o, s->size);
        sb_add(o, " at ");
        add_reltime(o, s->time_unix_ns - p->t0);
        sb_add(o, " from ");
        add_site_xml(o, r, s->callsite);
        sb_add(o, "</title></g>\n");
    }
    /* The peak, at its exact time. */
    const struct model_tl_bucket *pk = NULL;
    for (size_t i = 0; i < p->d->n_buckets; i++)
        if (!pk || p->d->buckets[i].live_max > pk->live_max)
            pk = &p->d->buckets[i];
    if (pk && pk->live_max > 0) {
        double x = px(p, pk->peak_t), y = py(p, (double)pk->live_max);
        sb_printf(
                o,
                "<g class=\"peak\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\"/><text x=\"%.1f\" y=\"%.1f\">peak ",
                x, y, x > ML + W - 160 ? x - 150 : x + 6, y - 6);
        add_size(o, pk->live_max);
        sb_add(o, " at ");
        add_reltime(o, pk->peak_t - p->t0);
        sb_add(o, "</text></g>\n");
    }
}

static void svg_panel(struct strbuf *o, const struct model_report *r, const struct panel *p,
                      double top, const struct leak_finding *leaks, size_t nleaks)
{
    sb_printf(o, "<g class=\"panel\" transform=\"translate(0 %.1f)\">\n", top);
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
        add_size(&title, p->capacity.v);
    }
    sb_printf(o, "<text class=\"title\" x=\"%.1f\" y=\"18\">", ML);
    add_xml(o, sb_str(&title));
    sb_add(o, "</text>\n");
    sb_free(&title);
    svg_axes(o, p);
    svg_area(o, p, 2, "untracked");
    svg_area(o, p, 1, "reserved");
    svg_area(o, p, 0, "live");
    svg_line(o, p, 1, "reserved-line");
    svg_line(o, p, 0, "live-line");
    if (p->capacity.known) {
        double y = py(p, (double)p->capacity.v);
        sb_printf(o,
                  "<g class=\"capacity\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
                  ML, y, ML + W, y);
        sb_printf(o, "<text x=\"%.1f\" y=\"%.1f\">%s ", ML + W - 4, y - 5,
                  p->emulated ? "emulated limit" : "capacity");
        add_size(o, p->capacity.v);
        sb_add(o, "</text></g>\n");
    }
    svg_buckets_hover(o, p);
    svg_events(o, r, p);
    for (size_t i = 0; i < nleaks; i++) {
        /* A leak tied to a device goes on its panel; one seen across devices (markers count all
         * of them) on every panel. */
        if (leaks[i].device.known && (!p->d->ordinal.known || leaks[i].device.v != p->d->ordinal.v))
            continue;
        struct strbuf b = { 0 };
        findings_describe_leak(&b, r, &leaks[i]);
        sb_printf(o, "<text class=\"leak\" x=\"%.1f\" y=\"%.1f\">Leak: ", ML, MT + H + 58);
        add_xml(o, sb_str(&b));
        sb_add(o, "</text>\n");
        sb_free(&b);
        break; /* one line fits above the plot */
    }
    sb_add(o, "</g>\n");
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
        ".untracked{fill:#dadada}\n"
        ".capacity line{stroke:#d01010;stroke-width:2;stroke-dasharray:8 5}.capacity text{fill:#d01010;text-anchor:end}\n"
        ".marker line{stroke:#2a8a2a;stroke-width:1;stroke-dasharray:3 3}.marker text{fill:#2a7a2a;font-size:11px}\n"
        ".failure path{stroke:#e00000;stroke-width:3}.failure text{fill:#c00000;font-weight:bold}\n"
        ".failure.retried path{stroke:#f08080;stroke-width:2}\n"
        ".flush path{fill:#ff8c00}.step circle{fill:#1f4fa0;stroke:#fff;stroke-width:1}\n"
        ".peak circle{fill:#000}.peak text{font-weight:bold}.leak{fill:#c00000;font-weight:bold}\n"
        ".bucket{fill:transparent;stroke:none}.bucket:hover{fill:#000;fill-opacity:0.06}\n"
        ".legend rect{stroke:#555;stroke-width:0.5}\n"
        "</style>\n";

static void svg_legend(struct strbuf *o, double y)
{
    static const struct {
        const char *cls, *text;
    } items[] = { { "live", "live (allocations handed out)" },
                  { "reserved", "reserved − live: fragmentation, held by pools" },
                  { "untracked", "untracked: context, libraries, other processes" } };
    double x = ML;
    sb_printf(o, "<g class=\"legend\" transform=\"translate(0 %.1f)\">\n", y);
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        sb_printf(
                o,
                "<rect class=\"%s\" x=\"%.1f\" y=\"0\" width=\"14\" height=\"10\"/><text x=\"%.1f\" y=\"10\">%s</text>\n",
                items[i].cls, x, x + 18, items[i].text);
        x += 300;
    }
    sb_add(o, "</g>\n");
}

/* The whole SVG document (or, inline in HTML, the same element without the XML prologue). */
/* What is drawn: one panel per device of each report; a job's panels share one time axis, so
 * the ranks line up (their clocks are the hosts': on several machines, as good as their sync). */
struct view {
    const struct model_report **reports; /* in rank order */
    size_t n_reports;
    struct panel *panels;
    const struct model_report **owner; /* the report of each panel */
    char **who;                        /* per report: NULL for a single report */
    size_t n_panels;
};

static void view_build(struct view *v, const struct model_report **reports, size_t n)
{
    *v = (struct view){ .reports = reports, .n_reports = n };
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += reports[i]->timeline.n_devices;
    v->panels = util_xcalloc(total ? total : 1, sizeof *v->panels);
    v->owner = util_xcalloc(total ? total : 1, sizeof *v->owner);
    v->who = util_xcalloc(n, sizeof *v->who);
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    for (size_t i = 0; i < n; i++) {
        const struct model_report *r = reports[i];
        if (n > 1) {
            struct strbuf w = { 0 };
            if (r->process.rank.known)
                sb_printf(&w, "rank %" PRId64 " (", r->process.rank.v);
            sb_printf(&w, "%s, pid %" PRId64, r->process.host ? r->process.host : "?",
                      r->process.pid);
            if (r->process.rank.known)
                sb_add(&w, ")");
            v->who[i] = util_xstrdup(sb_str(&w));
            sb_free(&w);
        }
        for (size_t k = 0; k < r->timeline.n_devices; k++) {
            struct panel *p = &v->panels[v->n_panels];
            panel_setup(r, &r->timeline.devices[k], p);
            p->who = v->who[i];
            v->owner[v->n_panels++] = r;
            if (p->t0 < t0)
                t0 = p->t0;
            if (p->t1 > t1)
                t1 = p->t1;
        }
    }
    if (n > 1)
        for (size_t i = 0; i < v->n_panels; i++) {
            v->panels[i].t0 = t0;
            v->panels[i].t1 = t1;
        }
}

static void view_free(struct view *v)
{
    for (size_t i = 0; i < v->n_reports; i++)
        free(v->who[i]);
    free(v->who);
    free(v->panels);
    free(v->owner);
}

static void svg_document(struct strbuf *o, const struct view *v, bool inline_html)
{
    const struct model_report *r = v->reports[0];
    double height = 40 + (double)v->n_panels * PANEL_H + 24;
    if (!inline_html)
        sb_add(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    sb_printf(
            o,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"vramwatch-timeline\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\">\n",
            ML + W + MR, height, ML + W + MR, height);
    sb_add(o, "<title>vramwatch timeline: ");
    struct strbuf cmd = { 0 };
    if (v->n_reports > 1)
        sb_printf(&cmd, "a job of %zu processes: ", v->n_reports);
    util_add_argv(&cmd, r->process.argv, r->process.argc);
    add_xml(o, sb_str(&cmd));
    sb_add(o, "</title>\n");
    sb_add(o, svg_style);
    sb_printf(o, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#ffffff\"/>\n",
              ML + W + MR, height);
    sb_printf(o, "<text class=\"title\" x=\"%.1f\" y=\"22\">", ML);
    if (cmd.len > 120) { /* the whole command stays in the <title> above */
        size_t cut = 117;
        while (cut > 0 && ((unsigned char)cmd.s[cut] & 0xc0) == 0x80)
            cut--;
        sb_truncate(&cmd, cut);
        sb_add(&cmd, "...");
    }
    add_xml(o, sb_str(&cmd));
    sb_printf(o, "</text>\n");
    sb_free(&cmd);
    svg_legend(o, 30);
    const struct model_report *leaks_of = NULL;
    struct leak_finding leaks[4];
    size_t nleaks = 0;
    for (size_t i = 0; i < v->n_panels; i++) {
        if (v->owner[i] != leaks_of) {
            leaks_of = v->owner[i];
            nleaks = findings_leaks(leaks_of, leaks, 4);
            if (nleaks > 4)
                nleaks = 4;
        }
        svg_panel(o, v->owner[i], &v->panels[i], 40 + (double)i * PANEL_H, leaks, nleaks);
    }
    sb_add(o, "</svg>\n");
}

static const char html_head[] =
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width\">\n"
        "<title>vramwatch timeline</title>\n"
        "<style>body{margin:16px;background:#fff;font-family:DejaVu Sans,Arial,sans-serif}"
        "#tip{position:fixed;display:none;pointer-events:none;background:#ffffe8;border:1px solid #888;"
        "padding:4px 6px;font-size:12px;max-width:520px}</style>\n</head>\n<body>\n";

/* The tooltip: the <title> of whatever is under the pointer, shown at once and next to it. */
static const char html_tail[] =
        "<div id=\"tip\"></div>\n"
        "<script>\n"
        "(function(){var tip=document.getElementById('tip');\n"
        "document.querySelectorAll('svg title').forEach(function(t){var g=t.parentNode;\n"
        " if(g.tagName==='svg')return; g.setAttribute('data-tip',t.textContent); t.remove();});\n"
        "document.addEventListener('mousemove',function(e){var g=e.target.closest('[data-tip]');\n"
        " if(!g){tip.style.display='none';return;} tip.textContent=g.getAttribute('data-tip');\n"
        " tip.style.display='block'; tip.style.left=(e.clientX+14)+'px'; tip.style.top=(e.clientY+14)+'px';});\n"
        "})();\n"
        "</script>\n</body>\n</html>\n";

/* ---- terminal ---- */

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
    add_reltime(&t, 0);
    struct strbuf e = { 0 };
    add_reltime(&e, p->t1 - p->t0);
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
        add_reltime(&b, r->markers[i].time_unix_ns - t0);
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
        add_reltime(&b, f->time_unix_ns - t0);
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

static void terminal_view(FILE *out, const struct view *v, bool color)
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

/* ---- the command ---- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static void write_doc(FILE *f, const void *doc)
{
    const struct strbuf *b = doc;
    fwrite(b->s, 1, b->len, f);
}

int cmd_timeline(int argc, char **argv)
{
    const char *output = NULL;
    const struct util_valued_option opts[] = { { "-o", &output },
                                               { "--output", &output },
                                               { NULL, NULL } };
    bool only_files = false;
    char **paths = util_xcalloc((size_t)argc, sizeof *paths);
    size_t n_paths = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_files || a[0] != '-' || !a[1]) {
            paths[n_paths++] = argv[i];
            continue;
        }
        if (strcmp(a, "--") == 0) {
            only_files = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            free(paths);
            fputs(usage, stdout);
            return EXIT_DONE;
        }
        int t = util_take_value("timeline", argc, argv, &i, opts);
        if (t <= 0) {
            if (t == 0)
                util_err("timeline: unknown option %s (see vramwatch timeline --help)", a);
            free(paths);
            return EXIT_USAGE;
        }
    }
    if (!n_paths) {
        free(paths);
        util_err(
                "timeline: no report file given (usage: vramwatch timeline [-o FILE.svg|FILE.html] REPORT...)");
        return EXIT_USAGE;
    }
    bool html = false;
    if (output) {
        if (ends_with(output, ".html") || ends_with(output, ".htm"))
            html = true;
        else if (!ends_with(output, ".svg")) {
            free(paths);
            util_err("timeline: %s: the output must end in .svg or .html", output);
            return EXIT_USAGE;
        }
    }
    /* Reports, or merged job files whose processes' reports are taken out of them. */
    struct model_report *reports = NULL;
    size_t n = 0;
    int status = job_load_files(NULL, paths, n_paths, &reports, &n) ? EXIT_DONE : EXIT_USAGE;
    for (size_t i = 0; i < n && status == EXIT_DONE; i++) {
        const char *path = reports[i].path ? reports[i].path : paths[0];
        if (!reports[i].timeline.known) {
            util_err(
                    "timeline: %s has no timeline: it was written by an earlier version of vramwatch; "
                    "vramwatch report shows what it holds",
                    path);
            status = EXIT_USAGE;
        } else if (reports[i].timeline.n_devices == 0 && n == 1) {
            util_err(
                    "timeline: %s has no device memory over time to show (no allocation was recorded)",
                    path);
            status = EXIT_USAGE;
        }
    }
    if (status == EXIT_DONE && n > 1) {
        /* one picture is of one job: the rule merge applies */
        struct strbuf why = { 0 };
        if (job_mixed(reports, n, &why)) {
            util_err("timeline: %s", sb_str(&why));
            status = EXIT_USAGE;
        }
        sb_free(&why);
    }
    struct job j = { 0 };
    const struct model_report **order = NULL;
    if (status == EXIT_DONE) {
        /* a job's processes in rank order, as report shows them */
        job_build(&j, reports, n);
        order = util_xcalloc(n, sizeof *order);
        for (size_t i = 0; i < n; i++)
            order[i] = j.procs[i].r;
        struct view v;
        view_build(&v, order, n);
        if (v.n_panels == 0) {
            util_err(
                    "timeline: no device memory over time to show in these reports (no allocation was recorded)");
            status = EXIT_USAGE;
        } else if (output) {
            struct strbuf doc = { 0 };
            if (html)
                sb_add(&doc, html_head);
            svg_document(&doc, &v, html);
            if (html)
                sb_add(&doc, html_tail);
            /* Whole or not at all, never through a link; 0666 less the umask, as fopen gave. */
            struct strbuf why = { 0 };
            if (!util_replace_file(output, 0666, write_doc, &doc, &why)) {
                struct strbuf where = { 0 };
                util_add_text(&where, output);
                util_err("timeline: cannot write %s: %s", sb_str(&where), sb_str(&why));
                sb_free(&where);
                status = EXIT_USAGE;
            }
            sb_free(&why);
            sb_free(&doc);
        } else {
            terminal_view(stdout, &v, report_want_color());
            if (fflush(stdout) != 0) {
                util_err("timeline: cannot write the output");
                status = EXIT_USAGE;
            }
        }
        view_free(&v);
        job_free(&j);
    }
    job_free_reports(reports, n);
    free(order);
    free(paths);
    return status;
}
