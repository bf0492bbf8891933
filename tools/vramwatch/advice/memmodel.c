/* memmodel.c: a line need = static + per_sample x batch x (image/reference)^2, from reports. */
#include "memmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

const char *memmodel_basis_name(enum memmodel_basis b)
{
    switch (b) {
    case MEMMODEL_RUNS:
        return "runs";
    case MEMMODEL_TIMELINE:
        return "timeline";
    case MEMMODEL_BOUND:
        break;
    }
    return "bound";
}

static bool same_device(model_int a, const struct model_device *d)
{
    return !a.known || !d->ordinal.known || a.v == d->ordinal.v;
}

struct marker {
    int64_t time, live, phase_peak;
    const char *label;
};

/* The report's markers (the model checked them), oldest first; NULL (and 0) when it has none. */
static struct marker *read_markers(const struct model_report *r, size_t *n)
{
    *n = r->n_markers;
    if (!r->n_markers)
        return NULL;
    struct marker *out = util_xcalloc(r->n_markers, sizeof *out);
    for (size_t i = 0; i < r->n_markers; i++) {
        const struct model_marker *m = &r->markers[i];
        out[i] = (struct marker){ .time = m->time_unix_ns,
                                  .live = m->live_bytes,
                                  .phase_peak = m->phase_peak_bytes,
                                  .label = m->label };
    }
    return out;
}

/* ---- phases found by themselves, for runs without markers ----
 *
 * A real job adds no markers. What the library records of every call chain still tells where
 * its phases begin: the moment the chain first asked for memory, and the device's live memory
 * and peak just before (callsites[].first_alloc_unix_ns, live_bytes_before_first,
 * peak_live_bytes_before_first). Training steps and validation are called from different lines
 * of the script, so a phase begins where a call chain from a line not seen before starts after
 * memory has climbed since the current phase began. Where memory had also fallen back from the
 * peak by then, towards a base level (the rhythm of a training loop whose step frees its tensors,
 * or a caching allocator that flushed), that base is the memory that does not depend on the
 * batch; without a base there is no static level, and no phases are made: the need then rests on
 * the peak, as before. See docs/advice.md, "Phases found by themselves". */

#define AUTO_MIN_DROP (64ll << 20)
#define AUTO_MIN_QUIET_NS 5000000ll

struct auto_site {
    int64_t t, live, peak;
    char key[256]; /* the outermost frame in which call chains differ */
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* By key, then by time: the first of each key is where that call chain first allocated. */
static int cmp_key_time(const void *a, const void *b)
{
    const struct auto_site *x = *(const struct auto_site *const *)a,
                           *y = *(const struct auto_site *const *)b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x->t < y->t ? -1 : x->t > y->t;
}

static int cmp_auto_site(const void *a, const void *b)
{
    const struct auto_site *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* One frame as text, to compare call chains: file, function and line for Python, module and
 * offset for native code. */
static void frame_text(const struct model_frame *f, char *out, size_t cap)
{
    out[0] = 0;
    if (f->python)
        snprintf(out, cap, "%s:%s:%lld", f->file, f->function, (long long)f->line);
    else
        snprintf(out, cap, "%s+%lld", f->module ? f->module : "?", (long long)f->offset);
}

/* The frames of a call site that name the program's own code: the Python frames when there
 * are any, else all of them; outermost first, into out[] (at most cap). */
static size_t outer_frames(const struct model_callsite *cs, const struct model_frame **out,
                           size_t cap)
{
    size_t n = 0, py = 0;
    for (size_t i = 0; i < cs->n_frames; i++)
        py += cs->frames[i].python;
    for (size_t i = 0; i < cs->n_frames; i++) {
        const struct model_frame *f = &cs->frames[i];
        if ((py && !f->python) || n >= cap)
            continue;
        out[n++] = f;
    }
    for (size_t i = 0; i < n / 2; i++) { /* innermost first in the report */
        const struct model_frame *t = out[i];
        out[i] = out[n - 1 - i];
        out[n - 1 - i] = t;
    }
    return n;
}

#define AUTO_FRAMES 64

/* The lowest level live memory fell back to from the highest it had reached before (by at least
 * 64 MiB and 10%), from the device's timeline; -1 when it never fell back by that much. A bucket
 * is compared with the buckets before it, so a climb (each bucket starting where the last ended)
 * is not a fall. */
/* The device's timeline, or NULL. */
static const struct model_tl_device *timeline_of(const struct model_report *r,
                                                 const struct model_device *d)
{
    for (size_t i = 0; i < r->timeline.n_devices; i++) {
        const struct model_tl_device *t = &r->timeline.devices[i];
        if (!d->ordinal.known || !t->ordinal.known || t->ordinal.v == d->ordinal.v)
            return t;
    }
    return NULL;
}

static int64_t timeline_base(const struct model_report *r, const struct model_device *d)
{
    const struct model_tl_device *t = timeline_of(r, d);
    if (!t)
        return -1;
    int64_t high = 0, base = -1;
    for (size_t k = 0; k < t->n_buckets; k++) {
        const struct model_tl_bucket *b = &t->buckets[k];
        int64_t fall = high - b->live_min;
        if (fall >= AUTO_MIN_DROP && fall * 10 >= high && (base < 0 || b->live_min < base))
            base = b->live_min;
        if (b->live_max > high)
            high = b->live_max;
    }
    return base;
}

/* The call sites that say when they first allocated, each keyed by the outermost frame in which
 * its chain differs from the others', in time order; *m of them. */
static struct auto_site *keyed_sites(const struct model_report *r, size_t *m)
{
    size_t count = r->n_callsites;
    struct auto_site *as = util_xcalloc(count + 1, sizeof *as);
    const struct model_frame **chains = util_xcalloc(count * AUTO_FRAMES + 1, sizeof *chains);
    size_t *lens = util_xcalloc(count + 1, sizeof *lens);
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        const struct model_callsite *cs = &r->callsites[i];
        if (!cs->first_alloc_unix_ns.known || !cs->live_bytes_before_first.known ||
            !cs->peak_live_bytes_before_first.known)
            continue;
        as[k] = (struct auto_site){ .t = cs->first_alloc_unix_ns.v,
                                    .live = cs->live_bytes_before_first.v,
                                    .peak = cs->peak_live_bytes_before_first.v };
        lens[k] = outer_frames(cs, &chains[k * AUTO_FRAMES], AUTO_FRAMES);
        k++;
    }
    /* the frames all chains share, from the outermost in: the key is the first after them */
    size_t common = k ? lens[0] : 0;
    for (size_t i = 1; i < k; i++) {
        size_t j = 0;
        char x[256], y[256];
        while (j < common && j < lens[i]) {
            frame_text(chains[j], x, sizeof x);
            frame_text(chains[i * AUTO_FRAMES + j], y, sizeof y);
            if (strcmp(x, y) != 0)
                break;
            j++;
        }
        common = j;
    }
    for (size_t i = 0; i < k; i++) {
        size_t at = common < lens[i] ? common : (lens[i] ? lens[i] - 1 : 0);
        if (lens[i])
            frame_text(chains[i * AUTO_FRAMES + at], as[i].key, sizeof as[i].key);
    }
    free(chains);
    free(lens);
    qsort(as, k, sizeof *as, cmp_auto_site);
    *m = k;
    return as;
}

/* Which sites are fresh: no earlier one has its key. The first of its key in (key, time) order,
 * so that a report of 10 000 call sites costs a sort, not 50 million comparisons. */
static bool *fresh_sites(const struct auto_site *as, size_t m)
{
    bool *fresh = util_xcalloc(m + 1, sizeof *fresh);
    const struct auto_site **by_key = util_xcalloc(m + 1, sizeof *by_key);
    for (size_t i = 0; i < m; i++)
        by_key[i] = &as[i];
    qsort(by_key, m, sizeof *by_key, cmp_key_time);
    for (size_t i = 0; i < m; i++)
        if (i == 0 || strcmp(by_key[i - 1]->key, by_key[i]->key) != 0)
            fresh[by_key[i] - as] = true;
    free(by_key);
    return fresh;
}

/* Chains from new lines come in bursts: the first step of training calls many (forward,
 * backward, the optimizer), then none for a whole epoch, then validation's. A quiet spell well
 * beyond the usual gap between new chains separates phases: twice the lower median gap (one long
 * spell cannot raise it), and at least 5 ms: a job whose steps take no time (the simulated one)
 * shows no quiet spell that timing noise could not make up. */
static int64_t quiet_spell(const struct auto_site *as, const bool *fresh, size_t m)
{
    int64_t *gaps = util_xcalloc(m + 1, sizeof *gaps);
    size_t ng = 0;
    for (size_t i = 0, last = 0; i < m; i++) {
        if (fresh[i] && i > 0)
            gaps[ng++] = as[i].t - as[last].t;
        if (fresh[i])
            last = i;
    }
    qsort(gaps, ng, sizeof *gaps, cmp_i64);
    int64_t quiet = ng ? 2 * gaps[(ng - 1) / 2] : 0;
    if (quiet < AUTO_MIN_QUIET_NS)
        quiet = AUTO_MIN_QUIET_NS;
    free(gaps);
    return quiet;
}

/* Where phases begin: fresh chains after memory climbed since the current phase began, after a
 * quiet spell or a fall (a fall also shows the base level, returned in *base, -1 when none).
 * Indices into as, *ns of them. */
static size_t *phase_starts(const struct auto_site *as, size_t m, size_t *ns, int64_t *base)
{
    bool *fresh = fresh_sites(as, m);
    int64_t quiet = quiet_spell(as, fresh, m);
    size_t *starts = util_xcalloc(m + 1, sizeof *starts);
    int64_t phase_peak = m ? as[0].peak : 0;
    *ns = 0;
    *base = -1;
    for (size_t i = 1, prev = 0; i < m; i++) {
        if (!fresh[i])
            continue;
        int64_t gap = as[i].t - as[prev].t, drop = as[i].peak - as[i].live;
        prev = i;
        bool fell = drop >= AUTO_MIN_DROP && drop * 10 >= as[i].peak;
        if (as[i].peak < phase_peak + AUTO_MIN_DROP || (!fell && gap <= quiet))
            continue;
        starts[(*ns)++] = i;
        phase_peak = as[i].peak;
        /* only a fall shows the base level (a caching allocator keeps the last phase's cache) */
        if (fell && (*base < 0 || as[i].live < *base))
            *base = as[i].live;
    }
    free(fresh);
    return starts;
}

/* The markers: the start of training at the base level, then one per phase start. */
static struct marker *phase_markers(const struct auto_site *as, const size_t *starts, size_t ns,
                                    int64_t base)
{
    struct marker *mk = util_xcalloc(ns + 1, sizeof *mk);
    mk[0] = (struct marker){
        .time = as[0].t - 1, .live = base, .phase_peak = 0, .label = "epoch 0 train"
    };
    /* The phases after training are named as validation: no repeated phase can be seen (a chain
     * that allocates again is not new), so each label is its own phase; letters, not numbers,
     * keep them apart (same_phase ignores digits). */
    static const char *const later[] = { "epoch 0 val",   "epoch 0 val b", "epoch 0 val c",
                                         "epoch 0 val d", "epoch 0 val e", "epoch 0 val f",
                                         "epoch 0 val g", "epoch 0 val h" };
    size_t nl = sizeof later / sizeof later[0];
    for (size_t k = 0; k < ns; k++) {
        const struct auto_site *a = &as[starts[k]];
        mk[k + 1] = (struct marker){ .time = a->t,
                                     .live = a->live,
                                     .phase_peak = a->peak,
                                     .label = later[k < nl ? k : nl - 1] };
    }
    return mk;
}

/* Markers made from the call sites (and the timeline) of a report that has none; NULL when the
 * run shows no phase. */
static struct marker *auto_markers(const struct model_report *r, const struct model_device *d,
                                   size_t *n, bool *floor)
{
    *n = 0;
    *floor = false;
    if (r->n_callsites == 0)
        return NULL;
    size_t m, ns;
    int64_t base;
    struct auto_site *as = keyed_sites(r, &m);
    size_t *starts = phase_starts(as, m, &ns, &base);
    /* A run that did not fail may also show its base level in the timeline only (a caching
     * allocator's empty_cache between epochs: the chains that allocate again are not new). A
     * failure's flush would look the same, so an out-of-memory report needs a phase. */
    if (!model_real_oom(r)) {
        int64_t tb = timeline_base(r, d);
        if (tb >= 0 && (base < 0 || tb < base))
            base = tb;
    }
    /* No fall at all (a caching allocator that kept everything, with no failure): the level at
     * which the first new chain after the first began (the start of training, after the model
     * was set up) is at most the static part, since optimizer state may come later: a floor. */
    if (base < 0 && m > 1 && !model_real_oom(r)) {
        base = as[1].live;
        *floor = true;
    }
    struct marker *mk = NULL;
    if (m && base >= 0) {
        mk = phase_markers(as, starts, ns, base);
        *n = ns + 1;
    }
    free(starts);
    free(as);
    return mk;
}

/* The marker that opens training (the first whose label starts with "epoch"), or -1. Memory live
 * there is what the job holds before any batch: weights, optimizer state, EMA. */
static ptrdiff_t training_start(const struct marker *mk, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strncmp(mk[i].label, "epoch", 5) == 0)
            return (ptrdiff_t)i;
    return -1;
}

/* Whether two labels name the same phase of different epochs: equal once digits are ignored. */
static bool same_phase(const char *a, const char *b)
{
    for (;;) {
        while (*a >= '0' && *a <= '9')
            a++;
        while (*b >= '0' && *b <= '9')
            b++;
        if (*a != *b)
            return false;
        if (!*a)
            return true;
        a++;
        b++;
    }
}

/* Memory a repeated phase started with beyond what its first occurrence started with: cache of
 * other phases the allocator carried into it. Unseen on a big card, it is what fragments a small
 * one: the carried segments get split by the phase's own requests and can then no longer be
 * released when the card is full. */
static int64_t carried_cache(const struct marker *mk, size_t n, ptrdiff_t start,
                             const char **phase_out)
{
    int64_t worst = 0;
    *phase_out = NULL;
    for (size_t i = (size_t)start + 1; i < n; i++)
        for (size_t j = (size_t)start; j < i; j++)
            if (same_phase(mk[i].label, mk[j].label)) {
                if (mk[i].live - mk[j].live > worst) {
                    worst = mk[i].live - mk[j].live;
                    *phase_out = mk[i].label;
                }
                break;
            }
    return worst;
}

/* Whether a phase label names validation or evaluation ("epoch 0 val", "eval", "test"). */
bool memmodel_is_validation(const char *label)
{
    return label && (strstr(label, "val") || strstr(label, "eval") || strstr(label, "test"));
}

/* The working set of the phases: the largest need above the static level, the phase that decided
 * it (NULL if unknown), whether a phase after the start of training ran to its end, and the
 * largest of the training (not validation) phases; best and training_best -1 when unknown. */
struct working_set {
    int64_t best, training_best;
    const char *phase;
    bool completed;
};

/* What the phases between markers say of the need above the static level, from the start of
 * training on. A caching allocator keeps what a phase freed, so the next phase's peak holds the
 * previous one's cache, which a full card would have made it release: each phase is measured by
 * what it added to the level it started from, and the first training phase, which starts from
 * the static level itself, is measured whole. The largest is the working set; a failure adds the
 * bound of its phase (the level at the failure plus what it asked for). */
/* Cache a caching allocator released on this device in [from, to): the flushes its retry
 * rescued (pressure events). */
static int64_t flushed_between(const struct model_report *r, const struct model_device *d,
                               int64_t from, int64_t to)
{
    int64_t sum = 0;
    for (size_t i = 0; i < r->n_pressure; i++) {
        const struct model_pressure *p = &r->pressure[i];
        if (p->time_unix_ns >= from && p->time_unix_ns < to && same_device(p->device, d) &&
            p->freed_bytes > 0)
            sum = util_sat_add(sum, p->freed_bytes);
    }
    return sum;
}

/* The level a phase or step that began at `level` at `from` built on until `to`: that level less
 * the cache the allocator flushed since (that cache was then no longer there to reuse, so what is
 * held above the lower level is its own), never below the static level. */
static int64_t after_flushes(const struct memmodel_obs *o, int64_t level, int64_t from, int64_t to,
                             int64_t static_live)
{
    int64_t base = level - flushed_between(o->report, o->device, from, to);
    return base > static_live ? base : static_live;
}

/* What the process held when the request failed for good: at the failure, less what a caching
 * allocator flushed before its retry (which failed as well). */
static int64_t failure_held(const struct model_failure *f)
{
    int64_t held = f->reserved_bytes_at_failure;
    if (f->freed_before_retry.known && f->freed_before_retry.v > 0 && f->freed_before_retry.v < held)
        held -= f->freed_before_retry.v;
    return held;
}

/* The request once more when the failure came before what it failed in (a phase, or the step
 * after completed ones) had added as much as the request above `base`, the level that began at:
 * such a request is the first large tensor there, seldom all it holds (a layer's output is
 * written while its input is still live). 0 otherwise. */
static int64_t first_request_again(const struct model_failure *f, int64_t base)
{
    int64_t size = f->size > 0 ? f->size : 0;
    return failure_held(f) - base < size ? size : 0;
}

/* The failure's bound on the need above the static level: what was held when its retry failed
 * (the caching allocator's flush taken off) plus the request, the request twice when it was the
 * first of its phase (without markers the same is told from the last climb: observe_steps). */
static int64_t failure_bound(const struct memmodel_obs *o, const struct marker *mk, size_t n,
                             ptrdiff_t start, const struct model_failure *f)
{
    int64_t static_live = mk[start].live, size = f->size > 0 ? f->size : 0;
    size_t k = (size_t)start;
    while (k + 1 < n && mk[k + 1].time <= f->time_unix_ns)
        k++;
    int64_t base = after_flushes(o, mk[k].live, mk[k].time, f->time_unix_ns + 1, static_live);
    return util_sat_add(util_sat_add(failure_held(f), size), first_request_again(f, base)) -
           static_live;
}

static void phase_working_set(const struct memmodel_obs *o, const struct marker *mk, size_t n,
                              ptrdiff_t start, const struct model_failure *f,
                              struct working_set *ws)
{
    const struct model_report *r = o->report;
    int64_t static_live = mk[start].live;
    *ws = (struct working_set){ .best = -1, .training_best = -1 };
    for (size_t i = (size_t)start + 1; i < n; i++) {
        int64_t added = mk[i].phase_peak -
                        after_flushes(o, mk[i - 1].live, mk[i - 1].time, mk[i].time, static_live);
        ws->completed = true;
        if (!memmodel_is_validation(mk[i - 1].label) && added > ws->training_best)
            ws->training_best = added;
        if (added > ws->best) {
            ws->best = added;
            ws->phase = mk[i - 1].label;
        }
    }
    /* the phase after the last marker: its peak is known when the device peaked in it */
    const struct marker *last = &mk[n - 1];
    int64_t tail_peak = -1;
    for (size_t k = 0; k < r->n_devices; k++) {
        const struct model_device *dev = &r->devices[k];
        if (dev->peak_time_unix_ns.known && dev->peak_time_unix_ns.v >= last->time &&
            dev->peak_live_bytes > tail_peak)
            tail_peak = dev->peak_live_bytes;
    }
    int64_t tail_added =
            tail_peak - after_flushes(o, last->live, last->time, INT64_MAX, static_live);
    if (tail_peak >= 0 && f == NULL && (ptrdiff_t)n - 1 >= start && tail_added > ws->best) {
        ws->completed = true;
        ws->best = tail_added;
        ws->phase = last->label;
    }
    if (f && f->time_unix_ns >= mk[start].time) {
        int64_t bound = failure_bound(o, mk, n, start, f);
        if (bound > ws->best) {
            ws->best = bound;
            ws->phase = NULL;
            for (size_t i = (size_t)start; i < n && mk[i].time <= f->time_unix_ns; i++)
                ws->phase = mk[i].label;
        }
    }
}

static double scale_of(int64_t image, int64_t ref)
{
    if (ref <= 0 || image <= 0)
        return 1.0;
    double s = (double)image / (double)ref;
    return s * s;
}

/* The device's memory: what the driver saw beyond the tracked allocations, less other processes'
 * memory, which is in the driver's used memory but is not the job's need (the advice counts it
 * against the card instead); and the peak with it. */
static void observe_device(struct memmodel_obs *o, const struct model_device *d)
{
    o->untracked = d->untracked_bytes.known && d->untracked_bytes.v > 0 ? d->untracked_bytes.v : 0;
    for (size_t k = 0; k < d->n_procs; k++)
        if (d->procs[k].used_bytes.known)
            o->others = util_sat_add(o->others, d->procs[k].used_bytes.v);
    o->untracked = o->untracked > o->others ? o->untracked - o->others : 0;
    o->peak = util_sat_add(d->peak_reserved_bytes, o->untracked);
    o->need = o->peak;
    o->upper = o->peak;
    o->exact = true;
}

/* A real out-of-memory on the device bounds the need from below; a crossing of the emulated
 * limit (observe mode) measures it. */
static void observe_failure(struct memmodel_obs *o, const struct model_report *r,
                            const struct model_failure *f)
{
    const struct model_device *d = o->device;
    const struct model_crossing *c = NULL;
    for (size_t k = 0; k < r->n_crossings && !c; k++)
        if (!d->ordinal.known || r->crossings[k].device == d->ordinal.v)
            c = &r->crossings[k];
    if (f && same_device(f->device, d)) {
        /* it needed at least what it held plus what it asked for */
        o->oom = true;
        o->exact = false;
        o->need = util_sat_add(util_sat_add(failure_held(f), f->size > 0 ? f->size : 0),
                               o->untracked);
        if (o->need < o->peak)
            o->need = o->peak;
    } else if (c) {
        /* Observe mode: the allocation that crossed the limit was refused once when the
         * process's allocator flushes and retries, so it released its cache as on the small
         * card, and only its retry went past; a program that does not retry was refused nothing
         * and would have failed at the limit with all it held. Either way the run's peak is what
         * it needs on a card just large enough: a measurement. */
        o->observe = true;
        o->exact = true;
    }
}

/* The need from the phases: the report's markers, else those found from its call sites. */
static void observe_phases(struct memmodel_obs *o, const struct model_report *r,
                           const struct model_failure *f)
{
    const struct model_device *d = o->device;
    size_t nmk = 0;
    struct marker *mk = read_markers(r, &nmk);
    o->auto_phases = false;
    if (!nmk) {
        free(mk);
        bool floor = false;
        mk = auto_markers(r, d, &nmk, &floor);
        o->auto_phases = nmk > 0;
        o->static_floor = o->auto_phases && floor;
    }
    ptrdiff_t start = training_start(mk, nmk);
    o->static_level = start >= 0 ? util_sat_add(mk[start].live, o->untracked) : -1;
    if (start < 0) {
        free(mk);
        return;
    }
    struct working_set ws;
    phase_working_set(o, mk, nmk, start, o->oom ? f : NULL, &ws);
    o->phase = ws.phase;
    o->training_need =
            ws.training_best > 0 ? util_sat_add(o->static_level, ws.training_best) : -1;
    o->carried = carried_cache(mk, nmk, start, &o->carried_phase);
    if (o->auto_phases && nmk >= 2 && !o->oom && d->live_bytes > mk[1].live) {
        /* A later epoch repeats no call chain first seen, so its start is not seen: what the
         * phases after training still held when the run ended is the cache the next epoch's
         * training would start with, and split, on a full card. */
        o->carried = d->live_bytes - mk[1].live;
        o->carried_phase = "epoch 1 train";
    }
    if (ws.best > 0) {
        o->phases = true;
        o->phase_complete = ws.completed;
        o->need = util_sat_add(o->static_level, ws.best);
        if (o->observe) {
            /* Observe mode measured the small card itself: cache was released within phases as
             * it would have been there, so a phase's rise above the level it began at says less
             * than the run's peak, which is the need. */
            o->exact = true;
            if (o->need < o->peak)
                o->need = o->peak;
        }
    }
    free(mk);
}

/* ---- steps completed before a failure ----
 *
 * A run that fails in its first phase of training, after steps of it completed (a multi-scale
 * job whose step at a larger side ran out, a step that met a fragmented cache), has measured
 * what those steps need. The program may say where its steps end (vramwatch_step, which the
 * PyTorch companion calls after each optimizer step): the phase's peak at the last one is it.
 * Else the timeline tells: memory climbs in a step, then rests (a caching allocator keeps the
 * step's blocks, an allocator without a cache gives them back) until the next step asks for
 * more, and the pause before the failing climb stands out from every other. A multi-scale run
 * that fit is measured by its first step (a later step's peak holds the cache of steps at other
 * sides, which it could not reuse and a full card would have flushed). Where neither tells, the
 * failure stays a bound. */

/* The highest live memory reached in [since, until) before its quiet spell, and when the
 * climb after it began (*climb); -1 when there is none. The quiet spell is the longest stretch
 * without any call, of at least `quiet` and at least twice every other one: a step on a slow
 * card, or whose first convolutions are tuned, pauses within itself too, and such a pause must
 * not read as the end of a step; where pauses of like length alternate, none is told apart. */
static int64_t level_before_last_climb(const struct model_tl_device *t, int64_t since,
                                       int64_t until, int64_t quiet, int64_t *climb)
{
    size_t first = t->n_buckets, last = 0;
    for (size_t k = 0; k < t->n_buckets; k++) {
        const struct model_tl_bucket *b = &t->buckets[k];
        if (b->t + t->bucket_ns <= since || b->t > until)
            continue;
        if (first == t->n_buckets)
            first = k;
        last = k;
    }
    if (first >= last)
        return -1;
    /* the longest pause, and the longest of the others */
    size_t at = 0;
    int64_t longest = -1, second = 0;
    for (size_t k = first + 1; k <= last; k++) {
        int64_t gap = t->buckets[k].t - (t->buckets[k - 1].t + t->bucket_ns);
        if (gap >= longest) {
            second = longest > second ? longest : second;
            longest = gap;
            at = k;
        } else if (gap > second) {
            second = gap;
        }
    }
    if (longest < quiet || longest < 2 * second)
        return -1;
    int64_t high = -1;
    for (size_t j = first; j < at; j++)
        if (t->buckets[j].live_max > high)
            high = t->buckets[j].live_max;
    *climb = t->buckets[at].t;
    return high;
}

/* Whether call chains other than the failures' own first allocated in [from, until]: a step
 * repeats the lines of the steps before it (forward, backward, optimizer), so a climb after a
 * pause that runs through chains not seen before is the first step still under way, paused by
 * a long layer or by a loaded machine, not a step after completed ones. */
static bool fresh_chains_after(const struct model_report *r, int64_t from, int64_t until)
{
    for (size_t i = 0; i < r->n_callsites; i++) {
        const struct model_callsite *cs = &r->callsites[i];
        if (!cs->first_alloc_unix_ns.known || cs->first_alloc_unix_ns.v < from ||
            cs->first_alloc_unix_ns.v > until)
            continue;
        bool failed_here = false;
        for (size_t k = 0; k < r->n_failures && !failed_here; k++)
            failed_here = r->failures[k].callsite == cs->id;
        if (!failed_here)
            return true;
    }
    return false;
}

/* Where the failing phase began and the level before it: the last marker before the failure
 * (without a failure: the first of training, "epoch ..."), else (no markers) the first call
 * chain after the model's own, where training began: its level is at most the static part
 * (optimizer state may come later), a floor. */
static bool failing_phase_start(const struct model_report *r, int64_t until, int64_t *since,
                                int64_t *level)
{
    *since = -1;
    for (size_t i = 0; i < r->n_markers; i++)
        if (r->markers[i].time_unix_ns <= until &&
            (until < INT64_MAX || strncmp(r->markers[i].label, "epoch", 5) == 0)) {
            *since = r->markers[i].time_unix_ns;
            *level = r->markers[i].live_bytes;
            if (until == INT64_MAX)
                break;
        }
    if (*since >= 0)
        return true;
    size_t m;
    struct auto_site *as = keyed_sites(r, &m);
    if (m > 1) {
        *since = as[1].t;
        *level = as[1].live;
    }
    free(as);
    return *since >= 0;
}

/* The highest live memory reached from `since` up to the first quiet spell: the first step;
 * -1 when there is none. */
static int64_t level_before_first_quiet(const struct model_tl_device *t, int64_t since,
                                        int64_t quiet)
{
    int64_t high = -1, prev_end = 0;
    for (size_t k = 0; k < t->n_buckets; k++) {
        const struct model_tl_bucket *b = &t->buckets[k];
        if (b->t + t->bucket_ns <= since)
            continue;
        if (high >= 0 && b->t - prev_end >= quiet)
            return high;
        if (b->live_max > high)
            high = b->live_max;
        prev_end = b->t + t->bucket_ns;
    }
    return -1;
}

/* The most memory one step added: the largest rise from the level a burst of calls began at to
 * the highest it reached before the next quiet spell, from `since` on. */
static int64_t largest_climb(const struct model_tl_device *t, int64_t since, int64_t quiet)
{
    int64_t best = 0, start = -1, high = -1, last = -1, prev_end = 0;
    for (size_t k = 0; k < t->n_buckets; k++) {
        const struct model_tl_bucket *b = &t->buckets[k];
        if (b->t + t->bucket_ns <= since)
            continue;
        if (start < 0 || b->t - prev_end >= quiet) {
            start = last >= 0 ? last : b->live_min;
            high = -1;
        }
        if (b->live_max > high)
            high = b->live_max;
        if (high - start > best)
            best = high - start;
        last = b->live;
        prev_end = b->t + t->bucket_ns;
    }
    return best;
}

/* What the completed steps needed (level: the most live they reached) and where the step after
 * them began (base: the level then, from: when): from the steps the program said had ended
 * (vramwatch_step) when the last of them falls in the phase, else from the timeline's quiet
 * spells. False when neither tells. */
struct steps_seen {
    int64_t level, base, from, climb;
};

static bool steps_seen(const struct memmodel_obs *o, const struct model_failure *f, int64_t since,
                       struct steps_seen *s)
{
    const struct model_steps *st = &o->device->steps;
    int64_t until = f ? f->time_unix_ns : INT64_MAX;
    const struct model_tl_device *t = timeline_of(o->report, o->device);
    int64_t quiet = 0;
    if (t && t->bucket_ns > 0)
        quiet = 4 * t->bucket_ns > AUTO_MIN_QUIET_NS ? 4 * t->bucket_ns : AUTO_MIN_QUIET_NS;
    *s = (struct steps_seen){ .level = -1 };
    /* Before a failure, two steps of the phase at least: the optimizer makes its state in the
     * first step's optimizer.step(), after that step's peak, so the second is the first to
     * hold all a step holds. */
    int64_t in_phase = st->phase_count.known ? st->phase_count.v : st->count;
    if (model_tells_steps(o->report, o->device)) {
        /* a program that says when its steps end: they alone tell; one that promised to say so
         * and said nothing completed none (the first step of PyTorch on a slow card or under
         * load pauses within itself, which the timeline would read as a step that ended) */
        if (st->count < 1 || st->last_unix_ns < since || st->last_unix_ns > until ||
            (f && in_phase < 2))
            return false;
        /* the phase peak resets at markers: the last step's is the most the phase's completed
         * steps reached; the first step's, that step's own */
        s->level = f ? st->peak_bytes : st->first_peak_bytes;
        s->base = st->live_bytes;
        s->from = st->last_unix_ns;
    } else if (quiet) {
        s->level = f ? level_before_last_climb(t, since, until, quiet, &s->from)
                     : level_before_first_quiet(t, since, quiet);
        if (f && s->level >= 0 && fresh_chains_after(o->report, s->from, until))
            s->level = -1;
        s->base = s->level;
    }
    if (!f && quiet)
        s->climb = largest_climb(t, since, quiet);
    return s->level >= 0;
}

static void observe_steps(struct memmodel_obs *o, const struct model_report *r,
                          const struct model_failure *f)
{
    o->steps_need = -1;
    if ((o->oom && (!f || (o->phases && o->phase_complete))) ||
        (!o->oom && (o->side_max <= 1 || !o->exact)))
        return;
    int64_t since, start_level;
    struct steps_seen s;
    if (!failing_phase_start(r, f ? f->time_unix_ns : INT64_MAX, &since, &start_level) ||
        !steps_seen(o, f, since, &s))
        return;
    int64_t static_live = o->static_level >= 0 ? o->static_level - o->untracked : start_level;
    if (s.level < static_live + AUTO_MIN_DROP)
        return;
    o->steps_need = util_sat_add(s.level, o->untracked);
    o->steps_climb = s.climb;
    /* the request twice when the failing climb had not added as much, as failure_bound */
    if (f && !o->phases)
        o->need = util_sat_add(o->need, first_request_again(f, after_flushes(o, s.base, s.from,
                                                                             f->time_unix_ns + 1,
                                                                             static_live)));
    if (o->static_level < 0) {
        o->static_level = util_sat_add(start_level, o->untracked);
        o->static_floor = true;
    }
}

/* One report's observation; false, with the reason in err, when it cannot be used. */
static bool observe_one(const struct model_report *reports, size_t i, struct memmodel_obs *o,
                        struct strbuf *err)
{
    const struct model_report *r = &reports[i];
    memset(o, 0, sizeof *o);
    o->training_need = -1;
    o->report = r;
    o->device = model_main_device(r); /* the one every view speaks of */
    if (!o->device) {
        sb_printf(err, "%s: the report holds no device", r->path);
        return false;
    }
    const char *const *argv = r->process.argv;
    size_t argc = r->process.argc;
    cmdline_find(argv, argc, CMDLINE_BATCH, &o->batch);
    cmdline_find(argv, argc, CMDLINE_IMAGE, &o->image);
    /* YOLOv5/v7/v9 and Ultralytics draw each step's side from [0.5, 1.5] x imgsz */
    o->side_max = cmdline_switch_on(argv, argc, "--multi-scale") ? 1.5 : 1.0;
    observe_device(o, o->device);
    const struct model_failure *f = model_real_oom(r);
    observe_failure(o, r, f);
    observe_phases(o, r, f);
    observe_steps(o, r, f);
    return true;
}

bool memmodel_observe(const struct model_report *reports, size_t n, struct memmodel_obs *obs,
                      struct strbuf *err)
{
    if (!job_same_script(reports, n, err))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!observe_one(reports, i, &obs[i], err))
            return false;
    int64_t ref = obs[0].image.found ? obs[0].image.value : 0;
    for (size_t i = 0; i < n; i++) {
        double b = obs[i].batch.found ? (double)obs[i].batch.value : 1.0;
        /* the need was met at the largest side the job trains at; completed steps are taken at
         * the flag's own side (the first steps' largest side is not known: taking the flag's
         * errs towards a smaller batch when they were larger) */
        obs[i].x_steps = b * scale_of(obs[i].image.found ? obs[i].image.value : 0, ref);
        obs[i].x = obs[i].x_steps * obs[i].side_max * obs[i].side_max;
    }
    return true;
}

double memmodel_x(const struct memmodel *m, int64_t batch, int64_t image)
{
    return (double)batch * scale_of(image, m->image_ref) * m->side_max * m->side_max;
}

double memmodel_predict(const struct memmodel *m, int64_t batch, int64_t image)
{
    return m->static_bytes + m->per_sample_bytes * memmodel_x(m, batch, image);
}

bool memmodel_range(const struct memmodel *m, int64_t batch, int64_t image, double *lo, double *hi)
{
    double x = memmodel_x(m, batch, image);
    if (!m->static_unknown || x >= m->known_x)
        return false;
    *lo = memmodel_predict(m, batch, image);
    *hi = m->known_need;
    return true;
}

double memmodel_predict_upper(const struct memmodel *m, int64_t batch, int64_t image)
{
    if (!m->has_upper)
        return memmodel_predict(m, batch, image);
    double x = memmodel_x(m, batch, image);
    return m->static_bytes + m->upper_per_sample_bytes * x;
}

/* A failure after completed steps: the line through the static level and what the steps
 * measured, raised to the failure; false when the report has no such steps. */
static bool build_on_steps(const struct memmodel_obs *o, struct memmodel *m)
{
    if (o->steps_need < 0 || o->static_level < 0 || o->steps_need <= o->static_level ||
        !(o->x_steps > 0) || !(o->x > 0))
        return false;
    m->basis = MEMMODEL_TIMELINE;
    m->lower_bound = true;
    m->static_bytes = (double)o->static_level;
    m->per_sample_bytes = (double)(o->steps_need - o->static_level) / o->x_steps;
    /* A failure bounds the need from below; a run that fit bounds it from above (its peak) and
     * from below (the largest step held all it added at once, on top of the static part): the
     * first step's side is not known, and was smaller than the largest when it was drawn small. */
    double at_x = m->static_bytes + m->per_sample_bytes * o->x;
    double floor_x = o->oom ? (double)o->need : m->static_bytes + (double)o->steps_climb;
    if (at_x < floor_x)
        m->per_sample_bytes = (floor_x - m->static_bytes) / o->x;
    else if (!o->oom && at_x > (double)o->need)
        m->per_sample_bytes = ((double)o->need - m->static_bytes) / o->x;
    m->n_points = 1;
    m->n_bounds = 1;
    m->spread = 0.05 * (double)o->need;
    return true;
}

/* One report: the level before training (markers) as the fixed part, else only the untracked. */
static void build_single(const struct memmodel_obs *o, struct memmodel *m)
{
    if (((o->oom && !(o->phases && o->phase_complete)) || (!o->oom && o->side_max > 1)) &&
        build_on_steps(o, m))
        return;
    double need = (double)o->need;
    bool timeline = o->static_level >= 0 && (double)o->static_level < need;
    double fixed = timeline ? (double)o->static_level : (double)o->untracked;
    if (fixed >= need)
        fixed = 0;
    m->static_bytes = fixed;
    m->per_sample_bytes = o->x > 0 ? (need - fixed) / o->x : 0;
    m->n_points = o->exact ? 1 : 0;
    m->n_bounds = o->exact ? 0 : 1;
    if (o->observe && !o->exact && o->x > 0) {
        m->has_upper = true;
        m->upper_per_sample_bytes = ((double)o->upper - fixed) / o->x;
    }
    if (o->oom && !(o->phases && o->phase_complete)) {
        /* a failure before any phase of training ended: only a bound */
        m->basis = MEMMODEL_BOUND;
        m->lower_bound = true;
    } else if (timeline) {
        m->basis = MEMMODEL_TIMELINE;
        m->lower_bound = !o->exact;
        if (o->static_floor && o->exact) {
            /* the static part is only known from below: a smaller batch than the run's
             * may need more than the line says, up to the run's own need */
            m->static_unknown = true;
            m->known_x = o->x;
            m->known_need = need;
        }
    } else if (o->exact || o->observe) {
        /* A single run without phases: its static part is anywhere between the untracked
         * memory and its whole need. Taking it all as growing with the batch is the end that
         * makes a larger batch fit (it predicts the most there); below the run's batch the other
         * end decides, where nothing can be promised: the range is kept (memmodel_range). */
        m->basis = MEMMODEL_RUNS;
        m->lower_bound = false;
        m->static_unknown = true;
        m->known_x = o->x;
        m->known_need = need;
    } else {
        m->basis = MEMMODEL_BOUND;
        m->lower_bound = true;
    }
    m->spread = 0.05 * need;
}

/* Failures bound the line from below: where it passes under one, its slope is raised to meet it. */
static void raise_to_bounds(const struct memmodel_obs *obs, size_t n, struct memmodel *m)
{
    for (size_t i = 0; i < n; i++) {
        if (obs[i].exact || obs[i].x <= 0)
            continue;
        m->n_bounds++;
        if (m->static_bytes + m->per_sample_bytes * obs[i].x < (double)obs[i].need)
            m->per_sample_bytes = ((double)obs[i].need - m->static_bytes) / obs[i].x;
    }
}

void memmodel_build(const struct memmodel_obs *obs, size_t n, struct memmodel *m)
{
    memset(m, 0, sizeof *m);
    m->image_ref = n && obs[0].image.found ? obs[0].image.value : 0;
    m->side_max = n ? obs[0].side_max : 1.0;
    /* least squares over the measured points */
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!obs[i].exact)
            continue;
        double x = obs[i].x, y = (double)obs[i].need;
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        k++;
    }
    double var = k ? sxx - sx * sx / (double)k : 0;
    double slope = var > 1e-9 ? (sxy - sx * sy / (double)k) / var : 0;
    if (k >= 2 && var > 1e-9 && slope > 0) {
        m->basis = MEMMODEL_RUNS;
        m->per_sample_bytes = slope;
        m->static_bytes = (sy - slope * sx) / (double)k;
        if (m->static_bytes < 0)
            m->static_bytes = 0;
        m->n_points = k;
        double rss = 0, mean = sy / (double)k;
        for (size_t i = 0; i < n; i++) {
            if (!obs[i].exact)
                continue;
            double e = (double)obs[i].need - (m->static_bytes + slope * obs[i].x);
            rss += e * e;
        }
        m->spread = k > 2 ? sqrt(rss / (double)(k - 2)) : 0;
        if (m->spread < 0.05 * mean)
            m->spread = 0.05 * mean;
        raise_to_bounds(obs, n, m);
        return;
    }
    /* One measured run and the static level from the markers of any report: the line through
     * both, raised to the failures. */
    int64_t fixed = -1;
    for (size_t i = 0; i < n; i++)
        if (obs[i].static_level >= 0 && (fixed < 0 || obs[i].static_level < fixed))
            fixed = obs[i].static_level;
    if (n >= 2 && k == 1 && fixed >= 0 && sx > 0 && sy > (double)fixed) {
        m->basis = MEMMODEL_RUNS;
        m->static_bytes = (double)fixed;
        m->per_sample_bytes = (sy - (double)fixed) / sx;
        m->n_points = 1;
        m->spread = 0.05 * sy;
        raise_to_bounds(obs, n, m);
        return;
    }
    /* one usable report: prefer a measured one with markers, then any with markers, then a
     * measured one, then the first */
    size_t pick = 0;
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        int score = (obs[i].static_level >= 0 ? 2 : 0) + (obs[i].exact || obs[i].observe ? 1 : 0);
        if (score > best) {
            best = score;
            pick = i;
        }
    }
    if (!n)
        return;
    build_single(&obs[pick], m);
    if (n > 1) {
        m->n_bounds = 0;
        raise_to_bounds(obs, n, m);
    }
}
