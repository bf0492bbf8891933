/* alloc.c: sorted free-list range allocator with coalescing (see alloc.h). */
#include "alloc.h"

#include <stdlib.h>
#include <string.h>

static int grow(struct range_alloc *ra)
{
    size_t ncap = ra->cap ? ra->cap * 2 : 16;
    struct ra_hole *n = realloc(ra->holes, ncap * sizeof *n);
    if (!n)
        return -1;
    ra->holes = n;
    ra->cap = ncap;
    return 0;
}

int ra_init(struct range_alloc *ra, uint64_t base, uint64_t len)
{
    memset(ra, 0, sizeof *ra);
    ra->base = base;
    ra->len = len;
    if (grow(ra) != 0)
        return -1;
    if (len > 0) {
        ra->holes[0].addr = base;
        ra->holes[0].len = len;
        ra->nholes = 1;
    }
    return 0;
}

void ra_fini(struct range_alloc *ra)
{
    free(ra->holes);
    memset(ra, 0, sizeof *ra);
}

/* Index of the first hole whose address is greater than addr. */
static size_t first_after(const struct range_alloc *ra, uint64_t addr)
{
    size_t lo = 0, hi = ra->nholes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ra->holes[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Cuts [start, start + len) out of hole i; the range must lie inside it. */
static int carve(struct range_alloc *ra, size_t i, uint64_t start, uint64_t len)
{
    struct ra_hole h = ra->holes[i];
    uint64_t prefix = start - h.addr;
    uint64_t suffix = h.addr + h.len - (start + len);

    if (prefix > 0 && suffix > 0) {
        /* Splitting one hole into two needs a slot: get it before touching anything. */
        if (ra->nholes == ra->cap && grow(ra) != 0)
            return -1;
        memmove(&ra->holes[i + 2], &ra->holes[i + 1], (ra->nholes - i - 1) * sizeof h);
        ra->holes[i].len = prefix;
        ra->holes[i + 1].addr = start + len;
        ra->holes[i + 1].len = suffix;
        ra->nholes++;
    } else if (prefix > 0) {
        ra->holes[i].len = prefix;
    } else if (suffix > 0) {
        ra->holes[i].addr = start + len;
        ra->holes[i].len = suffix;
    } else {
        memmove(&ra->holes[i], &ra->holes[i + 1], (ra->nholes - i - 1) * sizeof h);
        ra->nholes--;
    }
    ra->used += len;
    return 0;
}

int ra_alloc(struct range_alloc *ra, uint64_t len, uint64_t align, uint64_t *addr)
{
    size_t best = (size_t)-1;
    uint64_t best_len = 0, best_start = 0;

    if (len == 0)
        return -1;
    if (align == 0)
        align = 1;
    for (size_t i = 0; i < ra->nholes; i++) {
        const struct ra_hole *h = &ra->holes[i];
        uint64_t start = (h->addr + align - 1) & ~(align - 1);
        if (start < h->addr)
            continue; /* wrapped around */
        uint64_t pad = start - h->addr;
        if (pad > h->len || h->len - pad < len)
            continue;
        /* Best fit: the smallest hole that holds the request keeps big holes for big requests. */
        if (best == (size_t)-1 || h->len < best_len) {
            best = i;
            best_len = h->len;
            best_start = start;
            if (h->len == len)
                break; /* cannot do better than an exact fit */
        }
    }
    if (best == (size_t)-1)
        return -1;
    if (carve(ra, best, best_start, len) != 0)
        return -1;
    *addr = best_start;
    return 0;
}

int ra_alloc_at(struct range_alloc *ra, uint64_t addr, uint64_t len)
{
    size_t i = first_after(ra, addr);
    if (len == 0 || i == 0)
        return -1;
    const struct ra_hole *h = &ra->holes[i - 1];
    if (addr + len < addr || addr + len > h->addr + h->len)
        return -1;
    return carve(ra, i - 1, addr, len);
}

int ra_free(struct range_alloc *ra, uint64_t addr, uint64_t len)
{
    if (len == 0 || addr < ra->base || addr + len < addr || addr + len > ra->base + ra->len)
        return -1;

    size_t i = first_after(ra, addr);
    struct ra_hole *prev = i > 0 ? &ra->holes[i - 1] : NULL;
    struct ra_hole *next = i < ra->nholes ? &ra->holes[i] : NULL;

    /* A range that overlaps free space was never handed out (or is freed twice). */
    if (prev && prev->addr + prev->len > addr)
        return -1;
    if (next && addr + len > next->addr)
        return -1;

    int join_prev = prev && prev->addr + prev->len == addr;
    int join_next = next && addr + len == next->addr;

    if (join_prev && join_next) {
        prev->len += len + next->len;
        memmove(&ra->holes[i], &ra->holes[i + 1], (ra->nholes - i - 1) * sizeof *next);
        ra->nholes--;
    } else if (join_prev) {
        prev->len += len;
    } else if (join_next) {
        next->addr = addr;
        next->len += len;
    } else {
        if (ra->nholes == ra->cap && grow(ra) != 0)
            return -1;
        memmove(&ra->holes[i + 1], &ra->holes[i], (ra->nholes - i) * sizeof *ra->holes);
        ra->holes[i].addr = addr;
        ra->holes[i].len = len;
        ra->nholes++;
    }
    ra->used -= len;
    return 0;
}

uint64_t ra_largest_hole(const struct range_alloc *ra)
{
    uint64_t best = 0;
    for (size_t i = 0; i < ra->nholes; i++)
        if (ra->holes[i].len > best)
            best = ra->holes[i].len;
    return best;
}
