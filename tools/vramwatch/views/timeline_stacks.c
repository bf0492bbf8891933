/* timeline_stacks.c: what was live at the peak and at the out-of-memory failure, by call chain, in
 * the flame graphs' standard formats: collapsed stacks (flamegraph.pl, speedscope's import, most
 * flame graph tools) and speedscope's own JSON file format (docs/timeline.md).
 *
 * Collapsed stacks, one line per call chain, root first, the count last:
 *
 *     rank 1;main (train.py:210);step (train.py:178);cudaMalloc (libcudart.so.12) 1073741824
 *
 * The format has no quoting: ';' separates frames and the last space-separated field is the
 * count, so a ';' in a frame's name is written as ':' and control characters (a newline would end
 * the line) as \xNN; spaces may stay. The root frame naming the process or run is there only when
 * the view has several reports.
 *
 * speedscope (its src/lib/file-format-spec.ts; tests/timeline/speedscope.schema.json is what we
 * write of it): one object with "$schema", "shared": {"frames": [{name, file, line}]}, and
 * "profiles", each {"type": "sampled", "name", "unit": "bytes", "startValue": 0, "endValue":
 * total, "samples": [[frame index, ...] root first, one per call chain], "weights": [bytes, one
 * per sample]}; "name", "activeProfileIndex" (the first failure's profile) and "exporter". */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "timeline_stacks.h"

bool timeline_stacks_site_bytes(const struct model_report *r, enum stacks_moment m, int64_t *out)
{
    bool any = m == STACKS_AT_REPORT;
    for (size_t i = 0; i < r->n_callsites; i++) {
        const struct model_callsite *cs = &r->callsites[i];
        model_int v = m == STACKS_AT_PEAK ? cs->live_bytes_at_peak : cs->live_bytes_at_failure;
        if (m == STACKS_AT_REPORT)
            v = (model_int){ cs->live_bytes, true };
        out[i] = v.known ? v.v : 0;
        any = any || v.known;
    }
    return any;
}

size_t timeline_stacks_root(const struct model_callsite *cs, bool full)
{
    if (!cs || cs->n_frames == 0)
        return 0;
    return full ? cs->n_frames - 1 : model_first_user_frame(cs);
}

/* The eval loop's and the call machinery's frames between two Python lines say nothing of the
 * user's code and double a chain's length (libpython+0x250a3f between every pair of lines):
 * py-spy and PyTorch's own snapshots show Python frames without them too. */
bool timeline_stacks_shown(const struct model_callsite *cs, size_t k, bool full)
{
    /* the innermost frame stays, so no chain is ever empty */
    return full || k == 0 || k >= cs->n_frames || !model_frame_in_interpreter(&cs->frames[k]);
}

/* The figures of one moment: as recorded, or for the failure in a report written by it (reason
 * "oom", of a version before live_bytes_at_failure) the live bytes it was written with. */
static bool figures(const struct model_report *r, enum stacks_moment m, int64_t *out)
{
    if (timeline_stacks_site_bytes(r, m, out))
        return true;
    if (m == STACKS_AT_FAILURE && r->reason && strcmp(r->reason, "oom") == 0)
        return timeline_stacks_site_bytes(r, STACKS_AT_REPORT, out);
    return false;
}

static bool keeps(const struct model_report *r, enum stacks_moment m)
{
    int64_t *tmp = util_xcalloc(r->n_callsites ? r->n_callsites : 1, sizeof *tmp);
    bool ok = figures(r, m, tmp);
    free(tmp);
    return ok;
}

/* The moment asked for: the default is the failure where any report keeps one, else the peak. */
static enum stacks_moment resolve(const struct view *v, enum stacks_moment at)
{
    if (at != STACKS_AT_DEFAULT)
        return at;
    for (size_t i = 0; i < v->n_reports; i++)
        if (keeps(v->reports[i], STACKS_AT_FAILURE))
            return STACKS_AT_FAILURE;
    return STACKS_AT_PEAK;
}

/* Why no report of the view keeps the moment, in one line (STACKS_AT_DEFAULT: neither). */
static void why_missing(struct strbuf *err, const struct view *v, enum stacks_moment m)
{
    const struct model_report *r = v->reports[0];
    const char *what = m == STACKS_AT_PEAK      ? "the peak"
                       : m == STACKS_AT_FAILURE ? "the failure"
                                                : "the peak or at the failure";
    if (v->n_reports > 1)
        sb_printf(err, "none of these reports keeps what was live at %s by call site (%s)", what,
                  m == STACKS_AT_FAILURE
                          ? "none ran out of memory, or an earlier version wrote them"
                          : "an earlier version of vramwatch wrote them");
    else if (m == STACKS_AT_FAILURE && !model_real_oom(r))
        sb_printf(err,
                  "%s has no out-of-memory failure (--at=peak shows what was live at the peak)",
                  r->path);
    else
        sb_printf(err,
                  "%s does not keep what was live at %s by call site (an earlier version of "
                  "vramwatch wrote it)",
                  r->path, what);
}

/* A frame's name as the collapsed format can hold it. */
static void add_collapsed_name(struct strbuf *o, const char *name)
{
    for (const char *c = name; *c; c++)
        sb_addc(o, *c == ';' ? ':' : *c);
}

/* The name of a call site's frame k, or of a chain without frames, in the STACK form. */
static void add_frame_name(struct strbuf *b, const struct model_report *r,
                           const struct model_callsite *cs, size_t k)
{
    if (cs->n_frames == 0)
        sb_add(b, cs->id == 0 ? "(call sites beyond the table's size)" : "(no stack recorded)");
    else
        model_add_frame(b, r, &cs->frames[k], MODEL_NAME_STACK);
}

struct line {
    char *stack;
    int64_t bytes;
};

static int by_stack(const void *a, const void *b)
{
    return strcmp(((const struct line *)a)->stack, ((const struct line *)b)->stack);
}

/* One report's chains appended to lines, root first; who (or NULL) as the root frame. */
static size_t report_lines(struct line *lines, const struct model_report *r, const char *who,
                           const int64_t *bytes, bool full)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_callsites; i++) {
        const struct model_callsite *cs = &r->callsites[i];
        if (bytes[i] <= 0)
            continue;
        struct strbuf s = { 0 }, name = { 0 };
        if (who) {
            util_add_text(&name, who);
            add_collapsed_name(&s, sb_str(&name));
            sb_addc(&s, ';');
        }
        bool root = true;
        for (size_t k = timeline_stacks_root(cs, full) + 1; k-- > 0;) {
            if (!timeline_stacks_shown(cs, k, full))
                continue;
            sb_truncate(&name, 0);
            add_frame_name(&name, r, cs, k);
            if (!root)
                sb_addc(&s, ';');
            add_collapsed_name(&s, sb_str(&name));
            root = false;
        }
        sb_free(&name);
        lines[n++] = (struct line){ util_xstrdup(sb_str(&s)), bytes[i] };
        sb_free(&s);
    }
    return n;
}

bool timeline_stacks_collapsed(struct strbuf *o, const struct view *v, enum stacks_moment at,
                               bool full, struct strbuf *err)
{
    enum stacks_moment m = resolve(v, at);
    size_t total = 0, n = 0, kept = 0;
    for (size_t i = 0; i < v->n_reports; i++)
        total += v->reports[i]->n_callsites;
    struct line *lines = util_xcalloc(total ? total : 1, sizeof *lines);
    for (size_t i = 0; i < v->n_reports; i++) {
        const struct model_report *r = v->reports[i];
        int64_t *bytes = util_xcalloc(r->n_callsites ? r->n_callsites : 1, sizeof *bytes);
        /* a job's ranks that did not fail have no failure: the others are what is shown */
        if (figures(r, m, bytes)) {
            n += report_lines(lines + n, r, v->n_reports > 1 ? v->who[i] : NULL, bytes, full);
            kept++;
        }
        free(bytes);
    }
    if (kept == 0)
        why_missing(err, v, m);
    /* chains that read the same once hidden frames are gone are one line, as the format wants */
    qsort(lines, n, sizeof *lines, by_stack);
    for (size_t i = 0; i < n; i++) {
        int64_t sum = lines[i].bytes;
        while (i + 1 < n && strcmp(lines[i].stack, lines[i + 1].stack) == 0) {
            sum = util_sat_add(sum, lines[i + 1].bytes);
            free(lines[i++].stack);
        }
        sb_printf(o, "%s %" PRId64 "\n", lines[i].stack, sum);
        free(lines[i].stack);
    }
    free(lines);
    return kept > 0;
}

/* ---- speedscope ---- */

/* The shared frames, each name once: an open-addressed table of indices into names. */
struct frames {
    char **names;
    const struct model_frame **first; /* the frame a name was first seen for, NULL for none */
    size_t n, cap;
    size_t *slot, slots; /* index + 1, 0: empty */
};

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static void frames_grow(struct frames *f)
{
    free(f->slot);
    f->slots = f->slots ? 2 * f->slots : 1024;
    f->slot = util_xcalloc(f->slots, sizeof *f->slot);
    for (size_t i = 0; i < f->n; i++) {
        size_t s = hash(f->names[i]) & (f->slots - 1);
        while (f->slot[s])
            s = (s + 1) & (f->slots - 1);
        f->slot[s] = i + 1;
    }
}

static size_t frame_index(struct frames *f, const char *name, const struct model_frame *fr)
{
    if (2 * (f->n + 1) > f->slots)
        frames_grow(f);
    size_t s = hash(name) & (f->slots - 1);
    for (; f->slot[s]; s = (s + 1) & (f->slots - 1))
        if (strcmp(f->names[f->slot[s] - 1], name) == 0)
            return f->slot[s] - 1;
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 256;
        f->names = util_xrealloc(f->names, f->cap * sizeof *f->names);
        f->first = util_xrealloc(f->first, f->cap * sizeof *f->first);
    }
    f->names[f->n] = util_xstrdup(name);
    f->first[f->n] = fr;
    f->slot[s] = f->n + 1;
    return f->n++;
}

/* One profile: its samples (a call chain each, frame indices root first) and weights. */
static void add_profile(struct strbuf *o, struct frames *f, const struct model_report *r,
                        const int64_t *bytes, bool full)
{
    int64_t total = 0;
    struct strbuf w = { 0 }, name = { 0 };
    sb_add(o, "\"samples\":[");
    bool first = true;
    for (size_t i = 0; i < r->n_callsites; i++) {
        const struct model_callsite *cs = &r->callsites[i];
        if (bytes[i] <= 0)
            continue;
        sb_add(o, first ? "[" : ",\n[");
        bool root = true;
        for (size_t k = timeline_stacks_root(cs, full) + 1; k-- > 0;) {
            if (!timeline_stacks_shown(cs, k, full))
                continue;
            sb_truncate(&name, 0);
            add_frame_name(&name, r, cs, k);
            size_t at = frame_index(f, sb_str(&name), cs->n_frames ? &cs->frames[k] : NULL);
            sb_printf(o, "%s%zu", root ? "" : ",", at);
            root = false;
        }
        sb_addc(o, ']');
        sb_printf(&w, "%s%" PRId64, first ? "" : ",", bytes[i]);
        total = util_sat_add(total, bytes[i]);
        first = false;
    }
    sb_printf(o, "],\n\"weights\":[%s],\"startValue\":0,\"endValue\":%" PRId64 "}", sb_str(&w),
              total);
    sb_free(&w);
    sb_free(&name);
}

/* A profile's name: the process (in a job or runs), the moment, and the device it is of. */
static void profile_name(struct strbuf *b, const struct view *v, size_t i, enum stacks_moment m)
{
    const struct model_report *r = v->reports[i];
    if (v->who[i])
        sb_printf(b, "%s: ", v->who[i]);
    if (m == STACKS_AT_PEAK) {
        sb_add(b, "live at the peak");
        if (r->n_devices > 1)
            sb_printf(b, " (%zu devices, each at its own peak)", r->n_devices);
        return;
    }
    sb_add(b, "live at the out-of-memory failure");
    /* the figures are of the device of the latest out-of-memory failure */
    for (size_t k = r->n_failures; k-- > 0;)
        if (r->failures[k].oom) {
            if (r->failures[k].device.known)
                sb_printf(b, " (GPU %" PRId64 ")", r->failures[k].device.v);
            break;
        }
}

static void write_frames(struct strbuf *o, const struct frames *f)
{
    sb_add(o, "\"shared\":{\"frames\":[");
    for (size_t i = 0; i < f->n; i++) {
        const struct model_frame *fr = f->first[i];
        sb_add(o, i ? ",\n{\"name\":" : "\n{\"name\":");
        timeline_view_add_json(o, f->names[i], false);
        if (fr && fr->python) {
            sb_add(o, ",\"file\":");
            timeline_view_add_json(o, fr->file, false);
            sb_printf(o, ",\"line\":%" PRId64, fr->line);
        } else if (fr && fr->module) {
            sb_add(o, ",\"file\":");
            timeline_view_add_json(o, fr->module, false);
        }
        sb_addc(o, '}');
    }
    sb_add(o, "]}");
}

/* Every report's profiles of the moments asked for, into p; how many, and in *active the first
 * failure's (the one to open with: what the card was full of). */
static size_t write_profiles(struct strbuf *p, struct frames *f, const struct view *v,
                             enum stacks_moment at, bool full, size_t *active)
{
    size_t count = 0;
    bool found = false;
    for (size_t i = 0; i < v->n_reports; i++) {
        const struct model_report *r = v->reports[i];
        int64_t *bytes = util_xcalloc(r->n_callsites ? r->n_callsites : 1, sizeof *bytes);
        for (enum stacks_moment m = STACKS_AT_PEAK; m <= STACKS_AT_FAILURE; m++) {
            if ((at != STACKS_AT_DEFAULT && at != m) || !figures(r, m, bytes))
                continue;
            struct strbuf name = { 0 };
            profile_name(&name, v, i, m);
            sb_add(p, count ? ",\n{\"type\":\"sampled\",\"name\":"
                            : "\n{\"type\":\"sampled\",\"name\":");
            timeline_view_add_json(p, sb_str(&name), false);
            sb_add(p, ",\"unit\":\"bytes\",\n");
            sb_free(&name);
            add_profile(p, f, r, bytes, full);
            if (m == STACKS_AT_FAILURE && !found) {
                *active = count;
                found = true;
            }
            count++;
        }
        free(bytes);
    }
    return count;
}

bool timeline_stacks_speedscope(struct strbuf *o, const struct view *v, enum stacks_moment at,
                                bool full, struct strbuf *err)
{
    struct frames f = { 0 };
    struct strbuf p = { 0 };
    size_t active = 0, count = write_profiles(&p, &f, v, at, full, &active);
    if (count == 0) {
        why_missing(err, v, at);
    } else {
        const struct model_report *r0 = v->reports[0];
        struct strbuf cmd = { 0 };
        util_add_argv(&cmd, r0->process.argv, r0->process.argc);
        sb_add(o, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n"
                  "\"exporter\":\"vramwatch@" VW_VERSION "\",\"name\":");
        timeline_view_add_json(o, sb_str(&cmd), false);
        sb_free(&cmd);
        sb_printf(o, ",\"activeProfileIndex\":%zu,\n", active);
        write_frames(o, &f);
        sb_add(o, ",\n\"profiles\":[");
        sb_add(o, sb_str(&p));
        sb_add(o, "\n]}\n");
    }
    sb_free(&p);
    for (size_t i = 0; i < f.n; i++)
        free(f.names[i]);
    free(f.names);
    free(f.first);
    free(f.slot);
    return count > 0;
}
