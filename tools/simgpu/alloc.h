/* alloc.h: address-range allocator behind the simulated GPU (device memory, pool chunks, VA). */
#ifndef SIMGPU_ALLOC_H
#define SIMGPU_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* One free range. */
struct ra_hole {
    uint64_t addr;
    uint64_t len;
};

/*
 * Hands out sub-ranges of [base, base + len). Free ranges are kept sorted by address and
 * merged with their neighbours on release, so fragmentation behaves like on a real card:
 * plenty of free bytes in total can still leave no single hole big enough.
 * Not thread-safe: the simulator serialises every call with its own lock.
 */
struct range_alloc {
    uint64_t base;
    uint64_t len;
    uint64_t used;         /* bytes handed out and not yet returned */
    struct ra_hole *holes; /* sorted by address, never touching each other */
    size_t nholes;
    size_t cap;
};

/* 0 on success, -1 when the bookkeeping array cannot be allocated. */
int ra_init(struct range_alloc *ra, uint64_t base, uint64_t len);
void ra_fini(struct range_alloc *ra);

/* Best fit with the start aligned to `align` (a power of two, 0 or 1 meaning none).
 * 0 and *addr set on success, -1 when no hole fits. */
int ra_alloc(struct range_alloc *ra, uint64_t len, uint64_t align, uint64_t *addr);

/* Takes exactly [addr, addr + len) if it is free: 0 on success, -1 otherwise. */
int ra_alloc_at(struct range_alloc *ra, uint64_t addr, uint64_t len);

/* Returns a range handed out earlier. -1 (and nothing changes) when the range is outside the
 * managed span or overlaps free space, which means the caller's records are wrong. */
int ra_free(struct range_alloc *ra, uint64_t addr, uint64_t len);

/* Length of the largest hole, 0 when full. */
uint64_t ra_largest_hole(const struct range_alloc *ra);

#endif
