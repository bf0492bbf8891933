/* findings.c: conclusions drawn from one report by itself; for now, memory that grows phase after
 * phase (see findings.h for the rules and why they are what they are). */
#include "findings.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MIN_GROWTH_PER_PHASE (1ll << 20) /* below a MiB per phase, growth is noise, not a leak */
#define MIN_ITERATIONS 4

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The lower median: with two values, the smaller, so one big first step (a cache filling up)
 * is not taken for a steady rate. */
static int64_t lower_median(int64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_i64);
    return v[(n - 1) / 2];
}

/* A marker's label with every run of digits replaced by '#': "epoch 12 train" -> "epoch # train". */
static void label_shape(const char *label, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = label; *p && n + 1 < cap; p++) {
        if (*p >= '0' && *p <= '9') {
            if (n == 0 || out[n - 1] != '#')
                out[n++] = '#';
            continue;
        }
        out[n++] = *p;
    }
    out[n] = 0;
}

static bool has_digit(const char *s)
{
    for (; *s; s++)
        if (*s >= '0' && *s <= '9')
            return true;
    return false;
}

static void project(const struct model_report *r, const struct model_device *d,
                    struct leak_finding *f)
{
    f->capacity_bytes = (model_int){ 0, false };
    f->time_to_capacity_ns = (model_int){ 0, false };
    if (!d)
        return;
    model_int cap = d->limit_bytes.known ? d->limit_bytes : d->total_bytes;
    if (!cap.known || cap.v <= 0)
        return;
    f->capacity_bytes = cap;
    int64_t room = cap.v - (d->peak_reserved_bytes > d->peak_live_bytes ? d->peak_reserved_bytes
                                                                        : d->peak_live_bytes);
    if (model_real_oom(r) || room <= 0) {
        f->time_to_capacity_ns = (model_int){ 0, true };
        return;
    }
    if (f->bytes_per_phase <= 0 || f->phase_ns <= 0)
        return;
    /* room / rate, in floating point: a slow leak over a long phase overflows int64 otherwise. */
    double ns = (double)room / (double)f->bytes_per_phase * (double)f->phase_ns;
    if (ns < 9.0e18)
        f->time_to_capacity_ns = (model_int){ (int64_t)ns, true };
}

/* The call site whose live allocations made between `from` and `to` fall into the most of the
 * intervals `bounds[0..n)` (each phase runs from one bound to the next, the last to `to`). */
static int64_t growing_site(const struct model_report *r, const int64_t *bounds, size_t n,
                            int64_t to, int64_t *phases_out)
{
    int64_t best = -1, best_phases = 0, best_bytes = 0;
    for (size_t i = 0; i < r->n_callsites; i++) {
        int64_t id = r->callsites[i].id, bytes = 0;
        bool *seen = util_xcalloc(n ? n : 1, 1);
        int64_t phases = 0;
        for (size_t k = 0; k < r->n_live; k++) {
            const struct model_live *l = &r->live[k];
            if (l->callsite != id || l->time_unix_ns < bounds[0] || l->time_unix_ns > to)
                continue;
            size_t j = 0;
            while (j + 1 < n && l->time_unix_ns >= bounds[j + 1])
                j++;
            if (!seen[j]) {
                seen[j] = true;
                phases++;
            }
            bytes = util_sat_add(bytes, l->size);
        }
        free(seen);
        if (phases >= 2 &&
            (phases > best_phases || (phases == best_phases && bytes > best_bytes))) {
            best = id;
            best_phases = phases;
            best_bytes = bytes;
        }
    }
    *phases_out = best_phases;
    return best;
}

/* Marker groups: every distinct label shape with a number in it and at least three markers. */
static size_t leaks_from_markers(const struct model_report *r, struct leak_finding *out, size_t max,
                                 size_t found)
{
    size_t n = r->n_markers;
    if (n < 3)
        return found;
    char(*shapes)[96] = util_xcalloc(n, sizeof *shapes);
    for (size_t i = 0; i < n; i++)
        label_shape(r->markers[i].label, shapes[i], sizeof shapes[i]);
    int64_t *vals = util_xcalloc(n, sizeof *vals), *incr = util_xcalloc(n, sizeof *incr);
    int64_t *times = util_xcalloc(n, sizeof *times), *gaps = util_xcalloc(n, sizeof *gaps);
    struct leak_finding best = { 0 };
    bool have = false;
    for (size_t i = 0; i < n; i++) {
        if (!has_digit(r->markers[i].label))
            continue;
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(shapes[j], shapes[i]) != 0;
        if (!first)
            continue;
        size_t m = 0;
        for (size_t j = i; j < n; j++) {
            if (strcmp(shapes[j], shapes[i]) != 0)
                continue;
            vals[m] = r->markers[j].live_bytes;
            times[m] = r->markers[j].time_unix_ns;
            m++;
        }
        if (m < 3)
            continue;
        size_t rising = 0;
        for (size_t k = 0; k + 1 < m; k++) {
            incr[k] = vals[k + 1] - vals[k];
            gaps[k] = times[k + 1] - times[k];
            rising += incr[k] > 0;
        }
        if (rising * 4 < (m - 1) * 3)
            continue;
        int64_t per = lower_median(incr, m - 1);
        if (per < MIN_GROWTH_PER_PHASE)
            continue;
        /* The most phases wins (the finest view of the same growth), then the fastest. */
        if (have && ((int64_t)m < best.phases ||
                     ((int64_t)m == best.phases && per <= best.bytes_per_phase)))
            continue;
        best = (struct leak_finding){ .basis = LEAK_MARKERS,
                                      .phases = (int64_t)m,
                                      .bytes_per_phase = per,
                                      .growth_bytes = vals[m - 1] - vals[0],
                                      .first_unix_ns = times[0],
                                      .last_unix_ns = times[m - 1],
                                      .device = { 0, false } };
        snprintf(best.phase, sizeof best.phase, "%s", shapes[i]);
        int64_t phases;
        best.callsite = growing_site(r, times, m, r->time_unix_ns, &phases);
        best.phase_ns = lower_median(gaps, m - 1);
        have = true;
    }
    if (have) {
        const struct model_device *d = model_main_device(r);
        if (r->n_devices == 1)
            best.device = d->ordinal;
        project(r, d, &best);
        if (found < max)
            out[found] = best;
        found++;
    }
    free(shapes);
    free(vals);
    free(incr);
    free(times);
    free(gaps);
    return found;
}

static int cmp_live_time(const void *a, const void *b)
{
    const struct model_live *x = *(const struct model_live *const *)a,
                            *y = *(const struct model_live *const *)b;
    return x->time_unix_ns < y->time_unix_ns ? -1 : x->time_unix_ns > y->time_unix_ns;
}

/* The start of the run as the report knows it: the earliest timeline, else the process start,
 * else the earliest live allocation. */
static int64_t run_start(const struct model_report *r)
{
    int64_t s = INT64_MAX;
    for (size_t i = 0; i < r->timeline.n_devices; i++)
        if (r->timeline.devices[i].start_unix_ns < s)
            s = r->timeline.devices[i].start_unix_ns;
    if (s == INT64_MAX && r->process.start_unix_ns.known)
        s = r->process.start_unix_ns.v;
    for (size_t i = 0; s == INT64_MAX && i < r->n_live; i++)
        if (r->live[i].time_unix_ns < s)
            s = r->live[i].time_unix_ns;
    return s;
}

/* The most training steps a device of the report said had ended (vramwatch_step), 0 when the
 * program said none. */
static int64_t steps_said(const struct model_report *r)
{
    int64_t most = 0;
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].steps.count > most)
            most = r->devices[i].steps.count;
    return most;
}

/* Without repeating markers: call sites whose live allocations were made steadily across the run.
 * A run that said it completed steps, fewer than three (none, where it promised to say so), has
 * repeated nothing yet: its growth is
 * its steps' own (a larger side of multi-scale training, a cache filling up), and when the
 * allocations fall in three quarters of the run is a matter of timing (a loaded machine moved
 * them: a "leak" was advised first for train_sim --multi-scale in one of three runs of the suite
 * on 2 cores). */
static size_t leaks_from_iterations(const struct model_report *r, struct leak_finding *out,
                                    size_t max, size_t found)
{
    int64_t start = run_start(r), end = r->time_unix_ns;
    if (start == INT64_MAX || end <= start || r->n_live < MIN_ITERATIONS ||
        (model_tells_steps(r, NULL) && steps_said(r) < 3))
        return found;
    const struct model_live **mine = util_xcalloc(r->n_live, sizeof *mine);
    int64_t *gaps = util_xcalloc(r->n_live, sizeof *gaps);
    struct leak_finding best = { 0 };
    bool have = false;
    for (size_t i = 0; i < r->n_callsites; i++) {
        int64_t id = r->callsites[i].id;
        size_t m = 0;
        int64_t bytes = 0;
        bool quarter[4] = { false, false, false, false };
        model_int dev = { 0, false };
        bool one_device = true;
        for (size_t k = 0; k < r->n_live; k++) {
            const struct model_live *l = &r->live[k];
            if (l->callsite != id || l->time_unix_ns < start)
                continue;
            mine[m++] = l;
            bytes = util_sat_add(bytes, l->size);
            int64_t q =
                    util_clamp_i64((double)(l->time_unix_ns - start) / (double)(end - start) * 4.0);
            quarter[q < 0 ? 0 : q > 3 ? 3 : q] = true;
            if (m == 1)
                dev = l->device;
            else if (l->device.known != dev.known || l->device.v != dev.v)
                one_device = false;
        }
        if (m < MIN_ITERATIONS || quarter[0] + quarter[1] + quarter[2] + quarter[3] < 3)
            continue;
        qsort(mine, m, sizeof *mine, cmp_live_time);
        int64_t span = mine[m - 1]->time_unix_ns - mine[0]->time_unix_ns;
        size_t bursts = 1;
        for (size_t k = 0; k + 1 < m; k++) {
            gaps[k] = mine[k + 1]->time_unix_ns - mine[k]->time_unix_ns;
            /* a pause longer than a quarter of the mean gap starts another burst */
            bursts += (double)gaps[k] * 4.0 * (double)(m - 1) > (double)span;
        }
        /* A leak allocates again and again; a few bursts are steps that needed more (a larger
         * side of multi-scale training), whichever quarters of the run they fell in. */
        if (bursts < MIN_ITERATIONS)
            continue;
        int64_t gap = lower_median(gaps, m - 1);
        int64_t per = bytes / (int64_t)m;
        if (gap <= 0 || per < MIN_GROWTH_PER_PHASE)
            continue;
        if (have && bytes <= best.growth_bytes)
            continue;
        best = (struct leak_finding){ .basis = LEAK_ITERATIONS,
                                      .callsite = id,
                                      .phases = (int64_t)m,
                                      .bytes_per_phase = per,
                                      .phase_ns = gap,
                                      .growth_bytes = bytes,
                                      .first_unix_ns = mine[0]->time_unix_ns,
                                      .last_unix_ns = mine[m - 1]->time_unix_ns,
                                      .device = one_device ? dev : (model_int){ 0, false } };
        snprintf(best.phase, sizeof best.phase, "iteration");
        have = true;
    }
    if (have) {
        const struct model_device *d = best.device.known ? model_device(r, best.device.v) : NULL;
        project(r, d ? d : model_main_device(r), &best);
        if (found < max)
            out[found] = best;
        found++;
    }
    free(mine);
    free(gaps);
    return found;
}

size_t findings_leaks(const struct model_report *r, struct leak_finding *out, size_t max)
{
    size_t found = leaks_from_markers(r, out, max, 0);
    /* Markers that repeat are the better view; iterations only stand in when they found nothing. */
    if (found == 0)
        found = leaks_from_iterations(r, out, max, 0);
    return found;
}

static void add_duration(struct strbuf *b, int64_t ns)
{
    int64_t s = ns / 1000000000;
    if (s >= 2 * 86400)
        sb_printf(b, "%" PRId64 " days %" PRId64 "h", s / 86400, s % 86400 / 3600);
    else if (s >= 3600)
        sb_printf(b, "%" PRId64 "h%02" PRId64 "m", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        sb_printf(b, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else if (s >= 1)
        sb_printf(b, "%.1fs", (double)ns / 1e9);
    else
        sb_printf(b, "%.1fms", (double)ns / 1e6);
}

void findings_describe_leak(struct strbuf *b, const struct model_report *r,
                            const struct leak_finding *f)
{
    char sz[UTIL_SIZE_LEN];
    sb_printf(b, "live memory grows %s per ", util_fmt_size(f->bytes_per_phase, sz));
    if (f->basis == LEAK_MARKERS) {
        sb_addc(b, '"');
        util_add_text(b, f->phase);
        sb_printf(b, "\" (%" PRId64 " phases, ", f->phases);
    } else {
        sb_printf(b, "iteration (%" PRId64 " iterations found, ", f->phases);
    }
    add_duration(b, f->phase_ns);
    sb_add(b, " apart)");
    if (f->callsite >= 0) {
        sb_add(b, ", from ");
        model_callsite_short(b, r, f->callsite);
    }
    if (f->time_to_capacity_ns.known && f->time_to_capacity_ns.v == 0) {
        sb_add(b, "; the card is already full");
    } else if (f->time_to_capacity_ns.known) {
        sb_printf(b, "; at this rate the %s card is full in ",
                  util_fmt_size(f->capacity_bytes.v, sz));
        add_duration(b, f->time_to_capacity_ns.v);
    }
}
