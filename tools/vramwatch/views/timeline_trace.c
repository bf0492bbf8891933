/* timeline_trace.c: the timeline as a Chrome trace event file (the JSON object form that
 * chrome://tracing, Perfetto and PyTorch's profiler use), so the run's memory can be opened beside
 * a profiler trace.
 *
 * The file, one event per line:
 *
 *   {"displayTimeUnit":"ms","baseTimeNanoseconds":B,"otherData":{...},"traceEvents":[
 *   {"name":"process_name","ph":"M","pid":P,"tid":P,"args":{"name":"..."}},
 *   {"name":"GPU 0 live","cat":"vramwatch.memory","ph":"C","ts":T,"pid":P,"tid":P,"args":{"bytes":N}},
 *   {"name":"...","cat":"vramwatch.failure","ph":"i","s":"t","ts":T,"pid":P,"tid":TID,"args":{...}},
 *   ...]}
 *
 * "ts" is in microseconds (with nanoseconds as three decimals) since baseTimeNanoseconds, a Unix
 * time in ns: the process start (a job's first), which the report's own times count from too, as
 * otherData.time_origin says in words. The same convention as PyTorch's (Kineto's) traces, so the two line up by the
 * difference of their bases. pid is the report's process id, so the counters sit beside that
 * process's own tracks; tid is the kernel thread id of a failure's caller where the report has it.
 * Counters per device: "live", "reserved" and "untracked" (each its own track, so no viewer
 * stacks one on the other), each bucket at its most from its start and at the value it ended with
 * from its end, as the picture draws it. Instant events: markers and the peak (process-wide),
 * failures (on the caller's thread), cache flushes, growth steps and PyTorch's own out-of-memory
 * verdict, each with its figures and, where it has one, its whole call chain in args.
 *
 * Runs of one script at other settings are each on a time axis of their own: a process track per
 * run's process, named "--batch 64 (out of memory): python3 train.py ...", whose "ts" are from its
 * run's start, and otherData.runs lists them: [{"pid":P,"label":"--batch 64","base_time_ns":B}],
 * B the Unix time in ns that process's "ts" count from (baseTimeNanoseconds is the first run's). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "timeline_view.h"

static void add_str(struct strbuf *b, const char *s)
{
    timeline_view_add_json(b, s, false);
}

/* Microseconds since the base, exact to the nanosecond. */
static void add_ts(struct strbuf *b, int64_t t_ns, int64_t base_ns)
{
    int64_t d = t_ns - base_ns;
    uint64_t a = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
    sb_printf(b, "%s%" PRIu64 ".%03u", d < 0 ? "-" : "", a / 1000, (unsigned)(a % 1000));
}

struct trace {
    struct strbuf *o;
    int64_t base;
    bool first; /* no event written yet: no comma before the next */
};

/* One event's head: cat, scope and ts are left out when NULL. */
struct event {
    const char *name, *cat, *ph, *scope;
    const int64_t *ts;
    int64_t pid, tid;
};

/* Starts one event: {"name":NAME,"cat":CAT,"ph":PH[,"s":S][,"ts":T],"pid":P,"tid":TID,"args":{
 * The caller adds the args and closes both braces with end_event. */
static void begin_event(struct trace *t, const struct event *e)
{
    const char *name = e->name, *cat = e->cat, *ph = e->ph, *scope = e->scope;
    const int64_t *ts = e->ts;
    int64_t pid = e->pid, tid = e->tid;
    sb_add(t->o, t->first ? "\n" : ",\n");
    t->first = false;
    sb_add(t->o, "{\"name\":");
    add_str(t->o, name);
    if (cat) {
        sb_add(t->o, ",\"cat\":");
        add_str(t->o, cat);
    }
    sb_printf(t->o, ",\"ph\":\"%s\"", ph);
    if (scope)
        sb_printf(t->o, ",\"s\":\"%s\"", scope);
    if (ts) {
        sb_add(t->o, ",\"ts\":");
        add_ts(t->o, *ts, t->base);
    }
    sb_printf(t->o, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"args\":{", pid, tid);
}

static void end_event(struct trace *t)
{
    sb_add(t->o, "}}");
}

static void arg_int(struct trace *t, bool *first, const char *key, int64_t v)
{
    sb_printf(t->o, "%s\"%s\":%" PRId64, *first ? "" : ",", key, v);
    *first = false;
}

static void arg_str(struct trace *t, bool *first, const char *key, const char *v)
{
    sb_printf(t->o, "%s\"%s\":", *first ? "" : ",", key);
    add_str(t->o, v);
    *first = false;
}

static void arg_size(struct trace *t, bool *first, const char *key, int64_t bytes)
{
    char buf[UTIL_SIZE_LEN];
    arg_str(t, first, key, util_fmt_size(bytes, buf));
}

/* "call_site": the frame views name it by; "call_chain": every frame, innermost first. */
static void arg_callsite(struct trace *t, bool *first, const struct model_report *r, int64_t id)
{
    struct strbuf s = { 0 };
    model_callsite_short(&s, r, id);
    arg_str(t, first, "call_site", sb_str(&s));
    sb_free(&s);
    const struct model_callsite *cs = model_callsite(r, id);
    sb_add(t->o, ",\"call_chain\":[");
    for (size_t i = 0; cs && i < cs->n_frames; i++) {
        struct strbuf f = { 0 };
        model_add_frame(&f, r, &cs->frames[i], MODEL_NAME_SHORT);
        if (i)
            sb_addc(t->o, ',');
        add_str(t->o, sb_str(&f));
        sb_free(&f);
    }
    sb_addc(t->o, ']');
}

static void device_name(struct strbuf *b, const struct panel *p, const char *what)
{
    if (p->d->ordinal.known)
        sb_printf(b, "GPU %" PRId64 " %s", p->d->ordinal.v, what);
    else
        sb_printf(b, "GPU ? %s", what);
}

static void counter(struct trace *t, const struct panel *p, int64_t pid, const char *what,
                    int64_t ts, int64_t bytes)
{
    struct strbuf name = { 0 };
    device_name(&name, p, what);
    begin_event(t, &(struct event){ sb_str(&name), "vramwatch.memory", "C", NULL, &ts, pid, pid });
    bool first = true;
    arg_int(t, &first, "bytes", bytes < 0 ? 0 : bytes);
    end_event(t);
    sb_free(&name);
}

static int64_t untracked_of(model_int u)
{
    return u.known && u.v > 0 ? u.v : 0;
}

static void panel_counters(struct trace *t, const struct panel *p, int64_t pid)
{
    const struct model_tl_device *d = p->d;
    for (size_t i = 0; i < d->n_buckets; i++) {
        const struct model_tl_bucket *b = &d->buckets[i];
        counter(t, p, pid, "live", b->t, b->live_max);
        counter(t, p, pid, "reserved", b->t, b->reserved_max);
        if (b->untracked_max.known) /* nothing before the first measurement */
            counter(t, p, pid, "untracked", b->t, untracked_of(b->untracked_max));
        /* the value it ended with, from its end (for the last bucket: at the report) */
        int64_t end = timeline_view_bucket_end(p, i);
        bool last = i + 1 == d->n_buckets;
        if (last || b->live != b->live_max)
            counter(t, p, pid, "live", end, b->live);
        if (last || b->reserved != b->reserved_max)
            counter(t, p, pid, "reserved", end, b->reserved);
        if (b->untracked.known && (last || !b->untracked_max.known ||
                                   untracked_of(b->untracked) != untracked_of(b->untracked_max)))
            counter(t, p, pid, "untracked", end, untracked_of(b->untracked));
    }
}

static void panel_events(struct trace *t, const struct model_report *r, const struct panel *p,
                         int64_t pid)
{
    int64_t ord = p->d->ordinal.known ? p->d->ordinal.v : -1;
    char s1[UTIL_SIZE_LEN];
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        if ((f->device.known ? f->device.v : -1) != ord)
            continue;
        bool real = model_failure_is_real_oom(f);
        struct strbuf name = { 0 };
        sb_printf(&name, "%s: %s of %s",
                  real ? "out of memory" : "failed, retried after a cache flush", f->api,
                  util_fmt_size(f->size, s1));
        begin_event(t, &(struct event){ sb_str(&name), "vramwatch.failure", "i", "t",
                                        &f->time_unix_ns, pid,
                                        f->thread.known ? f->thread.v : pid });
        sb_free(&name);
        bool first = true;
        arg_str(t, &first, "api", f->api);
        arg_int(t, &first, "size_bytes", f->size);
        arg_size(t, &first, "size", f->size);
        if (f->device.known)
            arg_int(t, &first, "device", f->device.v);
        arg_str(t, &first, "error", f->error_name ? f->error_name : "");
        arg_int(t, &first, "error_code", f->error_code);
        arg_str(t, &first, "retried",
                f->retried == RETRIED_SUCCEEDED ? "succeeded"
                : f->retried == RETRIED_FAILED  ? "failed"
                                                : "unknown");
        arg_int(t, &first, "live_bytes", f->live_bytes_at_failure);
        arg_int(t, &first, "reserved_bytes", f->reserved_bytes_at_failure);
        if (f->free_bytes_at_failure.known)
            arg_int(t, &first, "free_bytes", f->free_bytes_at_failure.v);
        arg_callsite(t, &first, r, f->callsite);
        end_event(t);
    }
    for (size_t i = 0; i < r->n_pressure; i++) {
        const struct model_pressure *e = &r->pressure[i];
        if ((e->device.known ? e->device.v : -1) != ord)
            continue;
        struct strbuf name = { 0 };
        sb_printf(&name, "cache flush: %s freed", util_fmt_size(e->freed_bytes, s1));
        begin_event(t, &(struct event){ sb_str(&name), "vramwatch.flush", "i", "p",
                                        &e->time_unix_ns, pid, pid });
        sb_free(&name);
        bool first = true;
        arg_str(t, &first, "api", e->api);
        arg_int(t, &first, "freed_bytes", e->freed_bytes);
        arg_size(t, &first, "freed", e->freed_bytes);
        arg_int(t, &first, "freed_count", e->freed_count);
        arg_int(t, &first, "size_bytes", e->size);
        arg_size(t, &first, "size", e->size);
        arg_callsite(t, &first, r, e->callsite);
        end_event(t);
    }
    for (size_t i = 0; i < p->d->n_steps; i++) {
        const struct model_tl_step *s = &p->d->steps[i];
        struct strbuf name = { 0 };
        sb_printf(&name, "growth step: %s of %s", s->api, util_fmt_size(s->size, s1));
        begin_event(t, &(struct event){ sb_str(&name), "vramwatch.step", "i", "p",
                                        &s->time_unix_ns, pid, pid });
        sb_free(&name);
        bool first = true;
        arg_int(t, &first, "size_bytes", s->size);
        arg_size(t, &first, "size", s->size);
        arg_int(t, &first, "live_bytes_after", s->live_bytes_after);
        arg_callsite(t, &first, r, s->callsite);
        end_event(t);
    }
    const struct model_tl_bucket *pk = NULL;
    for (size_t i = 0; i < p->d->n_buckets; i++)
        if (!pk || p->d->buckets[i].live_max > pk->live_max)
            pk = &p->d->buckets[i];
    if (pk && pk->live_max > 0) {
        struct strbuf name = { 0 };
        device_name(&name, p, "peak ");
        sb_add(&name, util_fmt_size(pk->live_max, s1));
        begin_event(t, &(struct event){ sb_str(&name), "vramwatch.peak", "i", "p", &pk->peak_t,
                                        pid, pid });
        sb_free(&name);
        bool first = true;
        arg_int(t, &first, "live_bytes", pk->live_max);
        arg_size(t, &first, "live", pk->live_max);
        end_event(t);
    }
}

static void report_events(struct trace *t, const struct model_report *r, int64_t pid)
{
    char s1[UTIL_SIZE_LEN];
    for (size_t i = 0; i < r->n_markers; i++) {
        const struct model_marker *m = &r->markers[i];
        begin_event(t, &(struct event){ m->label, "vramwatch.marker", "i", "p", &m->time_unix_ns,
                                        pid, pid });
        bool first = true;
        arg_int(t, &first, "live_bytes", m->live_bytes);
        arg_size(t, &first, "live", m->live_bytes);
        arg_int(t, &first, "phase_peak_bytes", m->phase_peak_bytes);
        arg_size(t, &first, "phase_peak", m->phase_peak_bytes);
        end_event(t);
    }
    const struct model_framework *fw = &r->framework;
    if (fw->known && fw->time_unix_ns.known) {
        struct strbuf name = { 0 };
        sb_add(&name, "PyTorch out of memory");
        if (fw->requested_bytes.known)
            sb_printf(&name, ": tried to allocate %s", util_fmt_size(fw->requested_bytes.v, s1));
        begin_event(t, &(struct event){ sb_str(&name), "vramwatch.framework", "i", "t",
                                        &fw->time_unix_ns.v, pid,
                                        fw->thread.known ? fw->thread.v : pid });
        sb_free(&name);
        bool first = true;
        arg_str(t, &first, "exception", fw->exception);
        if (fw->reserved_unallocated_bytes.known)
            arg_int(t, &first, "reserved_unallocated_bytes", fw->reserved_unallocated_bytes.v);
        if (fw->allocated_bytes.known)
            arg_int(t, &first, "allocated_bytes", fw->allocated_bytes.v);
        arg_str(t, &first, "message", fw->message);
        end_event(t);
    }
}

/* A process's track title: "rank 1 (node-a, pid 8104): python train.py". */
static void process_title(struct strbuf *b, const struct model_report *r, const char *who)
{
    if (who)
        sb_printf(b, "%s: ", who);
    else
        sb_printf(b, "%s, pid %" PRId64 ": ", r->process.host ? r->process.host : "?",
                  r->process.pid);
    struct strbuf cmd = { 0 };
    util_add_argv(&cmd, r->process.argv, r->process.argc);
    if (cmd.len > 200) {
        size_t cut = 197;
        while (cut > 0 && ((unsigned char)cmd.s[cut] & 0xc0) == 0x80)
            cut--;
        sb_truncate(&cmd, cut);
        sb_add(&cmd, "...");
    }
    sb_add(b, sb_str(&cmd));
    sb_free(&cmd);
}

/* Each process's track: its name, its place in the list, and its threads that failed. */
static void process_tracks(struct trace *t, const struct view *v, const int64_t *pids)
{
    for (size_t i = 0; i < v->n_reports; i++) {
        const struct model_report *r = v->reports[i];
        struct strbuf title = { 0 };
        process_title(&title, r, v->who[i]);
        begin_event(t, &(struct event){ "process_name", NULL, "M", NULL, NULL, pids[i], pids[i] });
        bool first = true;
        arg_str(t, &first, "name", sb_str(&title));
        end_event(t);
        sb_free(&title);
        begin_event(t, &(struct event){ "process_sort_index", NULL, "M", NULL, NULL, pids[i],
                                        pids[i] });
        first = true;
        arg_int(t, &first, "sort_index",
                r->process.rank.known && v->n_runs < 2 ? r->process.rank.v : (int64_t)i);
        end_event(t);
        /* the threads that failed, named so their instants read in the viewer's thread list */
        for (size_t k = 0; k < r->n_failures; k++) {
            model_int th = r->failures[k].thread;
            bool seen = !th.known || th.v == pids[i];
            for (size_t j = 0; j < k && !seen; j++)
                seen = r->failures[j].thread.known && r->failures[j].thread.v == th.v;
            if (seen)
                continue;
            struct strbuf tn = { 0 };
            sb_printf(&tn, "thread %" PRId64, th.v);
            begin_event(t, &(struct event){ "thread_name", NULL, "M", NULL, NULL, pids[i], th.v });
            first = true;
            arg_str(t, &first, "name", sb_str(&tn));
            end_event(t);
            sb_free(&tn);
        }
        begin_event(t, &(struct event){ "thread_name", NULL, "M", NULL, NULL, pids[i], pids[i] });
        first = true;
        arg_str(t, &first, "name", "main thread");
        end_event(t);
    }
}

/* otherData.runs, for runs of one script at other settings: per process, its run's name and the
 * Unix time its events are relative to. */
static void runs_data(struct strbuf *o, const struct view *v, const int64_t *pids)
{
    if (v->n_runs < 2)
        return;
    sb_add(o, ",\"runs\":[");
    for (size_t i = 0; i < v->n_reports; i++) {
        sb_printf(o, "%s{\"pid\":%" PRId64 ",\"label\":", i ? "," : "", pids[i]);
        add_str(o, v->run_label[v->run_of[i]]);
        sb_printf(o, ",\"base_time_ns\":%" PRId64 "}", v->origin[i]);
    }
    sb_addc(o, ']');
}

void timeline_trace_write(struct strbuf *o, const struct view *v)
{
    /* ts 0 is the view's origin, the process start (a job's first), as the report's own times;
     * runs at other settings each count from their own: the first run's is the base */
    struct trace t = { .o = o, .base = v->n_reports ? v->origin[0] : 0, .first = true };
    /* The trace's pids: each process's own, unless two reports (of two hosts) share one. */
    int64_t *pids = util_xcalloc(v->n_reports ? v->n_reports : 1, sizeof *pids);
    for (size_t i = 0; i < v->n_reports; i++) {
        pids[i] = v->reports[i]->process.pid;
        for (size_t k = 0; k < i; k++)
            if (pids[k] == pids[i])
                pids[i] = 1000000000 + (int64_t)i;
    }
    const struct model_report *r0 = v->reports[0];
    sb_printf(o, "{\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":%" PRId64 ",\"otherData\":{",
              t.base);
    sb_add(o, "\"producer\":\"vramwatch timeline\",\"report_writer\":");
    add_str(o, r0->version ? r0->version : "");
    struct strbuf cmd = { 0 };
    util_add_argv(&cmd, r0->process.argv, r0->process.argc);
    sb_add(o, ",\"command\":");
    add_str(o, sb_str(&cmd));
    sb_free(&cmd);
    sb_printf(o, ",\"processes\":%zu", v->n_reports);
    sb_add(o, ",\"time_origin\":");
    add_str(o, timeline_view_origin_text(v));
    runs_data(o, v, pids);
    sb_add(o, ",\"leaks\":[");
    bool any = false;
    for (size_t i = 0; i < v->n_reports; i++) {
        struct leak_finding leaks[4];
        size_t n = findings_leaks(v->reports[i], leaks, 4);
        for (size_t k = 0; k < n && k < 4; k++) {
            struct strbuf b = { 0 };
            if (v->who[i])
                sb_printf(&b, "%s: ", v->who[i]);
            findings_describe_leak(&b, v->reports[i], &leaks[k]);
            sb_add(o, any ? "," : "");
            add_str(o, sb_str(&b));
            any = true;
            sb_free(&b);
        }
    }
    sb_add(o, "]},\"traceEvents\":[");
    process_tracks(&t, v, pids);
    int64_t base = t.base;
    for (size_t i = 0; i < v->n_panels; i++) {
        size_t k = 0;
        while (k + 1 < v->n_reports && v->reports[k] != v->owner[i])
            k++;
        t.base = v->n_runs > 1 ? v->origin[k] : base;
        panel_counters(&t, &v->panels[i], pids[k]);
        panel_events(&t, v->owner[i], &v->panels[i], pids[k]);
    }
    for (size_t i = 0; i < v->n_reports; i++) {
        t.base = v->n_runs > 1 ? v->origin[i] : base;
        report_events(&t, v->reports[i], pids[i]);
    }
    sb_add(o, "\n]}\n");
    free(pids);
}
