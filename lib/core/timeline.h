/* The whole-run memory timeline of one device, in fixed memory (the report's `timeline`).
 *
 * A run of a minute and a run of three days must fit in the same few KiB, so time is cut into
 * VW_TL_BUCKETS buckets of 2^shift ns from the device's first event; when an event falls past
 * the last bucket, neighbours are merged in pairs and the width doubles. Each bucket keeps the
 * least, the most and the last live memory, the most and the last reserved memory, the last and
 * most untracked memory when it was measured, and the time of its live maximum, so the peak is
 * never averaged away and stays at its exact time. Beside the buckets, the largest single
 * allocations (growth steps) are kept with their call sites.
 *
 * These functions do no locking and no allocation: the core calls them under its lock, on the
 * hook path, so they must stay a handful of compares and stores in the common case. */
#ifndef VW_TIMELINE_H
#define VW_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define VW_TL_BUCKETS 512    /* power of two: merging halves the count exactly */
#define VW_TL_STEPS 16       /* largest growth steps kept per device */
#define VW_TL_FIRST_SHIFT 20 /* first bucket width: 2^20 ns, about 1 ms */
#define VW_TL_MAX_SHIFT 62

struct timeline_bucket {
    uint64_t live_min, live_max, live_last;
    uint64_t reserved_max, reserved_last;
    int64_t untracked_max, untracked_last; /* meaningful when has_untracked */
    uint64_t peak_time_ns;                 /* when live_max was first reached */
    uint32_t events;                       /* allocations and frees that landed here */
    uint8_t has_untracked;
    uint8_t used; /* the bucket has been started */
    uint16_t pad;
};

struct timeline_step {
    uint64_t time_ns, size, live_after;
    const char *api; /* static string */
    uint32_t callsite;
    uint32_t pad;
};

struct timeline_device {
    uint64_t start_ns; /* time of the first event: bucket 0 starts here */
    uint64_t events;   /* every event recorded, all buckets together */
    uint64_t cur_end;  /* where the newest bucket ends (UINT64_MAX: past any time); 0 before the
                          first event, so that it goes the slow way */
    uint32_t shift;    /* bucket width is 2^shift ns */
    uint32_t cur;      /* the newest bucket in use */
    uint32_t merges;   /* how many times the buckets were halved */
    uint32_t nsteps;   /* steps[] is a min-heap by size */
    bool started;
    struct timeline_bucket b[VW_TL_BUCKETS];
    struct timeline_step steps[VW_TL_STEPS];
};

/* Halve the resolution: bucket i becomes buckets 2i and 2i+1 together. Rare (about 20 times in
 * a three-day run), so it may be slow. */
void timeline_merge(struct timeline_device *d);

/* Where bucket `i` ends: UINT64_MAX when that is past what 64 bits of time can say. */
static inline uint64_t timeline_bucket_end(const struct timeline_device *d, uint64_t i)
{
    uint64_t n = i + 1;
    if (n > (UINT64_MAX - d->start_ns) >> d->shift)
        return UINT64_MAX;
    return d->start_ns + (n << d->shift);
}

/* The first event, a later bucket, or a merge (timeline.c). */
__attribute__((cold)) struct timeline_bucket *timeline_bucket_slow(struct timeline_device *d,
                                                                   uint64_t now);

/* The bucket `now` falls in, started from the previous bucket's last values when it is new.
 * Events that arrive out of order (another thread's older clock reading) go to the newest
 * bucket: the timeline only moves forward. The common case, a time before the newest bucket's
 * end, is one compare. */
static inline struct timeline_bucket *timeline_bucket_at(struct timeline_device *d, uint64_t now)
{
    if (__builtin_expect(now < d->cur_end, 1))
        return &d->b[d->cur];
    return timeline_bucket_slow(d, now);
}

/* One allocation or free: live and reserved memory on the device after it. */
static inline void timeline_record(struct timeline_device *d, uint64_t now, uint64_t live,
                                   uint64_t reserved)
{
    struct timeline_bucket *b = timeline_bucket_at(d, now);
    d->events++;
    b->events++;
    if (live > b->live_max) {
        b->live_max = live;
        b->peak_time_ns = now;
    }
    if (live < b->live_min)
        b->live_min = live;
    b->live_last = live;
    if (reserved > b->reserved_max)
        b->reserved_max = reserved;
    b->reserved_last = reserved;
}

/* A measurement of the driver's view: untracked = used − reserved at `now`. */
static inline void timeline_untracked(struct timeline_device *d, uint64_t now, int64_t untracked)
{
    struct timeline_bucket *b = timeline_bucket_at(d, now);
    if (!b->has_untracked || untracked > b->untracked_max)
        b->untracked_max = untracked;
    b->untracked_last = untracked;
    b->has_untracked = 1;
}

/* An allocation of `size`: kept if it is among the largest seen on this device. */
void timeline_step_slow(struct timeline_device *d, uint64_t now, uint64_t size, uint64_t live_after,
                        const char *api, uint32_t callsite);
static inline void timeline_step(struct timeline_device *d, uint64_t now, uint64_t size,
                                 uint64_t live_after, const char *api, uint32_t callsite)
{
    if (d->nsteps == VW_TL_STEPS && size <= d->steps[0].size)
        return;
    timeline_step_slow(d, now, size, live_after, api, callsite);
}

/* The steps, largest first, into out[VW_TL_STEPS]; returns how many. */
uint32_t timeline_steps_sorted(const struct timeline_device *d, struct timeline_step *out);

#endif
