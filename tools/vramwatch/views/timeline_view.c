/* timeline_view.c: what `vramwatch timeline` draws, whatever it draws with: a panel per device of
 * each report (its time span, scale and capacity line), a job's panels on one time axis, and the
 * labels every drawing shares. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "timeline_view.h"

void timeline_view_add_reltime(struct strbuf *b, int64_t ns)
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

void timeline_view_add_size(struct strbuf *b, int64_t bytes)
{
    char buf[UTIL_SIZE_LEN];
    sb_add(b, util_fmt_size(bytes, buf));
}

/* The end of bucket i: the next bucket's start or its own width, whichever is first. */
int64_t timeline_view_bucket_end(const struct panel *p, size_t i)
{
    const struct model_tl_device *d = p->d;
    int64_t end = d->buckets[i].t + d->bucket_ns;
    if (i + 1 < d->n_buckets && d->buckets[i + 1].t < end)
        end = d->buckets[i + 1].t;
    if (i + 1 == d->n_buckets && end < p->t1)
        end = p->t1; /* the last values held until the report */
    return end;
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

void timeline_view_build(struct view *v, const struct model_report **reports, size_t n)
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

void timeline_view_free(struct view *v)
{
    for (size_t i = 0; i < v->n_reports; i++)
        free(v->who[i]);
    free(v->who);
    free(v->panels);
    free(v->owner);
}

/* A JSON string: UTF-8 kept, control characters escaped, a byte that is not UTF-8 as U+FFFD. */
void timeline_view_add_json(struct strbuf *b, const char *s, bool in_html)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)p);
    sb_addc(b, '"');
    while (n > 0) {
        if (*p == '"' || *p == '\\') {
            sb_addc(b, '\\');
            sb_addc(b, (char)*p);
        } else if (*p < 0x20 || (in_html && (*p == '<' || *p == '>' || *p == '&'))) {
            sb_printf(b, "\\u%04x", *p);
        } else if (*p < 0x80) {
            sb_addc(b, (char)*p);
        } else {
            size_t l = util_utf8_len(p, n);
            if (l == 0) {
                sb_add(b, "\\ufffd");
                l = 1;
            } else {
                sb_addn(b, (const char *)p, l);
            }
            p += l;
            n -= l;
            continue;
        }
        p++;
        n--;
    }
    sb_addc(b, '"');
}

/* Text from the report, made safe for XML (and for one line). */
void timeline_view_add_xml(struct strbuf *b, const char *s)
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
