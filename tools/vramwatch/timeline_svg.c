/* timeline_svg.c: the timeline as one self-contained SVG picture, or an HTML page holding it with a
 * tooltip that follows the pointer (see timeline.h for what a panel shows). Nothing is fetched
 * from anywhere: no fonts, no scripts. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "timeline.h"

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
        timeline_add_reltime(o, t);
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
        timeline_add_reltime(o, b->t - p->t0);
        sb_add(o, ": live ");
        timeline_add_size(o, b->live);
        sb_add(o, " (");
        timeline_add_size(o, b->live_min);
        sb_add(o, " to ");
        timeline_add_size(o, b->live_max);
        sb_add(o, "), reserved ");
        timeline_add_size(o, b->reserved);
        sb_add(o, " (most ");
        timeline_add_size(o, b->reserved_max);
        sb_add(o, "), fragmentation ");
        timeline_add_size(o, b->reserved - b->live);
        if (b->untracked.known) {
            sb_add(o, ", untracked ");
            timeline_add_size(o, b->untracked.v);
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
        timeline_add_reltime(o, m->time_unix_ns - p->t0);
        sb_add(o, ": live ");
        timeline_add_size(o, m->live_bytes);
        sb_add(o, " on all devices, phase peak ");
        timeline_add_size(o, m->phase_peak_bytes);
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
            timeline_add_size(o, f->size);
            sb_add(o, " at ");
            add_site_xml(o, r, f->callsite);
            sb_add(o, "</text>");
        }
        sb_add(o, "<title>");
        add_xml(o, f->api);
        sb_add(o, " of ");
        timeline_add_size(o, f->size);
        sb_add(o, real ? " failed (out of memory) at "
                       : " failed, and a retry after a cache flush succeeded, at ");
        timeline_add_reltime(o, f->time_unix_ns - p->t0);
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
        timeline_add_reltime(o, e->time_unix_ns - p->t0);
        sb_add(o, ": ");
        timeline_add_size(o, e->freed_bytes);
        sb_printf(o, " freed in %" PRId64 " frees to fit ", e->freed_count);
        timeline_add_size(o, e->size);
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
        timeline_add_size(o, s->size);
        sb_add(o, " at ");
        timeline_add_reltime(o, s->time_unix_ns - p->t0);
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
        timeline_add_size(o, pk->live_max);
        sb_add(o, " at ");
        timeline_add_reltime(o, pk->peak_t - p->t0);
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
        timeline_add_size(&title, p->capacity.v);
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
        timeline_add_size(o, p->capacity.v);
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

void timeline_svg(struct strbuf *o, const struct view *v, bool html)
{
    if (html)
        sb_add(o, html_head);
    svg_document(o, v, html);
    if (html)
        sb_add(o, html_tail);
}
