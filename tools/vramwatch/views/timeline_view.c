/* timeline_view.c: what `vramwatch timeline` draws, whatever it draws with: a panel per device of
 * each report (its time span, scale and capacity line), a job's panels on one time axis, runs of
 * one script at other settings each on its own, and the labels every drawing shares. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "timeline_view.h"

void timeline_view_add_reltime(struct strbuf *b, int64_t ns)
{
    char buf[UTIL_TIME_LEN];
    sb_add(b, util_fmt_reltime(ns, 0, buf));
}

void timeline_view_add_tick(struct strbuf *b, int64_t ns, int64_t step)
{
    /* under a minute, seconds with the decimals the step needs; beyond, the report's form, whose
     * steps (ten seconds and more there) it tells apart */
    int decimals = step >= 1000000000LL ? 0 : step >= 100000000LL ? 1 : step >= 10000000LL ? 2 : 3;
    if (ns >= 0 && ns < 60000000000LL && decimals != 2)
        sb_printf(b, "+%.*fs", decimals, (double)ns / 1e9);
    else
        timeline_view_add_reltime(b, ns);
}

const char *timeline_view_origin_text(const struct view *v)
{
    if (!v->from_start)
        return v->n_runs > 1 ? "time since each run's first allocation"
                             : "time since the first allocation";
    if (v->n_runs > 1)
        return "time since each run's process started";
    return v->n_reports > 1 ? "time since the job's first process started"
                            : "time since the process started";
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
    /* A marker the program set before its first allocation on the device (PyTorch's `setup`
     * while it imports) is drawn too: the span starts at it, unless that would more than double
     * the span (a marker minutes before, which the list under the panel still gives). */
    if (r->n_markers && r->markers[0].time_unix_ns < p->t0 &&
        p->t0 - r->markers[0].time_unix_ns <= p->t1 - p->t0)
        p->t0 = r->markers[0].time_unix_ns;
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

/* "rank 3 (node-a, pid 8104)", or "node-a, pid 8104" without a rank. */
static void add_process(struct strbuf *w, const struct model_report *r)
{
    if (r->process.rank.known)
        sb_printf(w, "rank %" PRId64 " (", r->process.rank.v);
    sb_printf(w, "%s, pid %" PRId64, r->process.host ? r->process.host : "?", r->process.pid);
    if (r->process.rank.known)
        sb_add(w, ")");
}

/* "--batch 64", "batch=64": a flag as the command line spells it. */
static void add_flag(struct strbuf *b, const struct cmdline_flag *f)
{
    sb_printf(b, "%s%s%s%" PRId64, b->len ? " " : "", f->name,
              f->form == CMDLINE_SEPARATE ? " " : "", f->value);
}

/* Whether two runs' batch and image-size flags (two each) agree in those that differ somewhere. */
static bool same_settings(const struct cmdline_flag *a, const struct cmdline_flag *b,
                          const bool differs[2])
{
    for (size_t k = 0; k < 2; k++)
        if (differs[k] && (a[k].found != b[k].found || a[k].value != b[k].value))
            return false;
    return true;
}

/* Each run's name: the batch and image-size flags whose values differ between the runs, as the
 * first report of the run spells them ("run N" when none does, ", run N" added when another run
 * has the same values), and whether it ran out of memory.
 * first[g] is the first report of run g. */
static void name_runs(struct view *v, const size_t *first)
{
    static const enum cmdline_kind kinds[] = { CMDLINE_BATCH, CMDLINE_IMAGE };
    struct cmdline_flag *flags = util_xcalloc(v->n_runs * 2, sizeof *flags);
    bool differs[2] = { false, false };
    for (size_t g = 0; g < v->n_runs; g++) {
        const struct model_process *p = &v->reports[first[g]]->process;
        for (size_t k = 0; k < 2; k++) {
            struct cmdline_flag *f = &flags[g * 2 + k];
            cmdline_find((const char *const *)p->argv, p->argc, kinds[k], f);
            const struct cmdline_flag *f0 = &flags[k];
            if (f->found != f0->found || (f->found && f->value != f0->value))
                differs[k] = true;
        }
    }
    v->run_label = util_xcalloc(v->n_runs, sizeof *v->run_label);
    for (size_t g = 0; g < v->n_runs; g++) {
        struct strbuf b = { 0 };
        for (size_t k = 0; k < 2; k++)
            if (differs[k] && flags[g * 2 + k].found)
                add_flag(&b, &flags[g * 2 + k]);
        /* runs at the same settings as another are told apart by their number */
        bool twin = false;
        for (size_t h = 0; h < v->n_runs && !twin; h++)
            twin = h != g && same_settings(&flags[g * 2], &flags[h * 2], differs);
        if (!b.len)
            sb_printf(&b, "run %zu", g + 1);
        else if (twin)
            sb_printf(&b, ", run %zu", g + 1);
        bool oom = false;
        for (size_t i = first[g]; i < v->n_reports && v->run_of[i] == g; i++)
            oom |= model_real_oom(v->reports[i]) != NULL;
        if (oom)
            sb_add(&b, " (out of memory)");
        v->run_label[g] = util_xstrdup(sb_str(&b));
        sb_free(&b);
    }
    free(flags);
}

/* Who each report is, in the panels' titles: its rank or process in a job of several; its run's
 * name among runs, with the process where the run has several. */
static void name_reports(struct view *v, const size_t *first)
{
    for (size_t i = 0; i < v->n_reports; i++) {
        size_t g = v->run_of[i];
        bool alone = (i == first[g]) && (i + 1 == v->n_reports || v->run_of[i + 1] != g);
        if (v->n_reports == 1 || (v->n_runs > 1 && alone)) {
            v->who[i] = v->n_runs > 1 ? util_xstrdup(v->run_label[g]) : NULL;
            continue;
        }
        struct strbuf w = { 0 };
        if (v->n_runs > 1)
            sb_printf(&w, "%s, ", v->run_label[g]);
        add_process(&w, v->reports[i]);
        v->who[i] = util_xstrdup(sb_str(&w));
        sb_free(&w);
    }
}

/* What each report's times count from (model_time_origin: the process start, as the report's
 * own times): in a job, the first process's start, so the ranks share one axis; in runs at other
 * settings, each run's own. Where a report does not know its start, every origin is its run's
 * first allocation instead (first_alloc[g]), so the view never mixes the two. */
static void set_origins(struct view *v, const int64_t *first_alloc)
{
    v->from_start = v->n_reports > 0;
    for (size_t i = 0; i < v->n_reports; i++)
        v->from_start &= model_time_origin(v->reports[i]).known;
    for (size_t i = 0; i < v->n_reports; i++) {
        size_t g = v->run_of[i];
        int64_t o = INT64_MAX;
        for (size_t k = 0; v->from_start && k < v->n_reports; k++)
            if (v->run_of[k] == g && model_time_origin(v->reports[k]).v < o)
                o = model_time_origin(v->reports[k]).v;
        if (o == INT64_MAX)
            o = first_alloc[g] != INT64_MAX ? first_alloc[g] : 0;
        v->origin[i] = o;
    }
}

void timeline_view_build(struct view *v, const struct model_report **reports, size_t n,
                         const size_t *run_of, size_t n_runs)
{
    *v = (struct view){ .reports = reports, .n_reports = n, .n_runs = n_runs > 1 ? n_runs : 1 };
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += reports[i]->timeline.n_devices;
    v->panels = util_xcalloc(total ? total : 1, sizeof *v->panels);
    v->owner = util_xcalloc(total ? total : 1, sizeof *v->owner);
    v->who = util_xcalloc(n ? n : 1, sizeof *v->who);
    v->origin = util_xcalloc(n ? n : 1, sizeof *v->origin);
    v->run_of = util_xcalloc(n ? n : 1, sizeof *v->run_of);
    size_t *first = util_xcalloc(v->n_runs, sizeof *first);
    for (size_t i = n; i-- > 0;) {
        v->run_of[i] = v->n_runs > 1 ? run_of[i] : 0;
        first[v->run_of[i]] = i;
    }
    if (v->n_runs > 1)
        name_runs(v, first);
    name_reports(v, first);
    /* Per run, the span of its panels: one time axis for a job's processes, so the ranks line up,
     * and one of its own for each run at other settings. */
    int64_t *t0 = util_xcalloc(v->n_runs, sizeof *t0), *t1 = util_xcalloc(v->n_runs, sizeof *t1);
    for (size_t g = 0; g < v->n_runs; g++) {
        t0[g] = INT64_MAX;
        t1[g] = INT64_MIN;
    }
    for (size_t i = 0; i < n; i++) {
        const struct model_report *r = reports[i];
        size_t g = v->run_of[i];
        for (size_t k = 0; k < r->timeline.n_devices; k++) {
            struct panel *p = &v->panels[v->n_panels];
            panel_setup(r, &r->timeline.devices[k], p);
            p->who = v->who[i];
            v->owner[v->n_panels++] = r;
            if (p->t0 < t0[g])
                t0[g] = p->t0;
            if (p->t1 > t1[g])
                t1[g] = p->t1;
        }
    }
    set_origins(v, t0);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const struct model_report *r = reports[i];
        size_t g = v->run_of[i];
        bool shared = n > 1; /* a single report's devices keep their own spans, as ever */
        for (size_t k = 0; k < r->timeline.n_devices; k++, at++) {
            v->panels[at].origin = v->origin[i];
            if (shared) {
                v->panels[at].t0 = t0[g];
                v->panels[at].t1 = t1[g];
            }
        }
    }
    free(t0);
    free(t1);
    free(first);
}

void timeline_view_free(struct view *v)
{
    for (size_t i = 0; i < v->n_reports; i++)
        free(v->who[i]);
    for (size_t g = 0; v->run_label && g < v->n_runs; g++)
        free(v->run_label[g]);
    free(v->run_label);
    free(v->who);
    free(v->origin);
    free(v->run_of);
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
