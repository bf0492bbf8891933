/* The rare paths of the whole-run timeline: halving the resolution, and the growth steps. */
#include "timeline.h"

static struct timeline_bucket combine(const struct timeline_bucket *a,
                                      const struct timeline_bucket *b)
{
    if (!b->used)
        return *a;
    if (!a->used)
        return *b;
    struct timeline_bucket m = *b; /* the later bucket holds the last values */
    m.live_min = a->live_min < b->live_min ? a->live_min : b->live_min;
    /* Ties keep the earlier time: the peak is when it was first reached. */
    if (a->live_max >= b->live_max) {
        m.live_max = a->live_max;
        m.peak_time_ns = a->peak_time_ns;
    }
    m.reserved_max = a->reserved_max > b->reserved_max ? a->reserved_max : b->reserved_max;
    if (a->has_untracked && (!b->has_untracked || a->untracked_max > b->untracked_max))
        m.untracked_max = a->untracked_max;
    m.has_untracked = a->has_untracked | b->has_untracked;
    if (!b->has_untracked) {
        m.untracked_last = a->untracked_last;
        m.untracked_max = a->untracked_max;
    }
    m.events = a->events + b->events;
    return m;
}

void timeline_merge(struct timeline_device *d)
{
    for (uint32_t i = 0; i < VW_TL_BUCKETS / 2; i++)
        d->b[i] = combine(&d->b[2 * i], &d->b[2 * i + 1]);
    memset(&d->b[VW_TL_BUCKETS / 2], 0, sizeof(d->b[0]) * (VW_TL_BUCKETS / 2));
    d->cur /= 2;
    d->shift++;
    d->merges++;
    d->cur_end = timeline_bucket_end(d, d->cur);
}

struct timeline_bucket *timeline_bucket_slow(struct timeline_device *d, uint64_t now)
{
    if (!d->started) {
        memset(d, 0, sizeof(*d) - sizeof(d->steps));
        d->start_ns = now;
        d->shift = VW_TL_FIRST_SHIFT;
        d->started = true;
        d->b[0].used = 1;
        d->b[0].peak_time_ns = now;
        d->cur_end = timeline_bucket_end(d, 0);
        return &d->b[0];
    }
    uint64_t idx = (now > d->start_ns ? now - d->start_ns : 0) >> d->shift;
    if (idx <= d->cur)
        return &d->b[d->cur];
    while (idx >= VW_TL_BUCKETS && d->shift < VW_TL_MAX_SHIFT) {
        timeline_merge(d);
        idx >>= 1;
    }
    if (idx >= VW_TL_BUCKETS)
        idx = VW_TL_BUCKETS - 1;
    if (idx <= d->cur)
        return &d->b[d->cur];
    /* A new bucket starts where the previous one ended: what was live then is its first value. */
    const struct timeline_bucket *p = &d->b[d->cur];
    struct timeline_bucket *n = &d->b[idx];
    *n = (struct timeline_bucket){
        .live_min = p->live_last,
        .live_max = p->live_last,
        .live_last = p->live_last,
        .reserved_max = p->reserved_last,
        .reserved_last = p->reserved_last,
        .untracked_max = p->untracked_last,
        .untracked_last = p->untracked_last,
        .has_untracked = p->has_untracked,
        .used = 1,
        .peak_time_ns = d->start_ns + (idx << d->shift),
    };
    d->cur = (uint32_t)idx;
    d->cur_end = timeline_bucket_end(d, idx);
    return n;
}

static void sift_down(struct timeline_step *h, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].size < h[m].size)
            m = l;
        if (r < n && h[r].size < h[m].size)
            m = r;
        if (m == i)
            return;
        struct timeline_step t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

void timeline_step_slow(struct timeline_device *d, uint64_t now, uint64_t size, uint64_t live_after,
                        const char *api, uint32_t callsite)
{
    struct timeline_step s = {
        .time_ns = now, .size = size, .live_after = live_after, .api = api, .callsite = callsite
    };
    if (d->nsteps < VW_TL_STEPS) {
        /* Sift up into the min-heap. */
        uint32_t i = d->nsteps++;
        while (i > 0 && d->steps[(i - 1) / 2].size > s.size) {
            d->steps[i] = d->steps[(i - 1) / 2];
            i = (i - 1) / 2;
        }
        d->steps[i] = s;
        return;
    }
    d->steps[0] = s;
    sift_down(d->steps, d->nsteps, 0);
}

uint32_t timeline_steps_sorted(const struct timeline_device *d, struct timeline_step *out)
{
    uint32_t n = d->nsteps;
    memcpy(out, d->steps, sizeof(*out) * n);
    /* Heap-sort the min-heap: each pass moves the smallest to the end, so largest come first. */
    for (uint32_t end = n; end > 1; end--) {
        struct timeline_step t = out[0];
        out[0] = out[end - 1];
        out[end - 1] = t;
        sift_down(out, end - 1, 0);
    }
    return n;
}
