/* The trace: a bounded ring of the latest device allocations and frees, one by one (the report's
 * `trace`, and from it PyTorch's snapshot format, docs/timeline.md).
 *
 * The rest of the report keeps totals, a timeline and the largest steps; a tool that replays the
 * run (PyTorch's memory viewer) needs the events themselves, in order. Memory is mapped once at
 * set-up (trace_setup) and never grows: the newest VRAMWATCH_TRACE events are kept, older ones are
 * overwritten. Writers take no lock: each claims the next index with one atomic add, and marks its
 * entry busy, then complete, through the entry's sequence word; the reader copies an entry only
 * when its sequence says it holds exactly the event it expects, whole (a seqlock per entry). An
 * entry another writer still holds when the ring laps it is given up and counted as lost rather
 * than waited for: the hook path never spins. */
#ifndef VW_TRACE_H
#define VW_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VW_TRACE_DEFAULT 8192u  /* events kept unless VRAMWATCH_TRACE says otherwise */
#define VW_TRACE_MAX (1u << 18) /* 12 MiB of address space at most, touched as it fills; a report
                                   of that many events (about 45 MiB, 2 million JSON values) is
                                   still within what the command line reads */

struct trace_event {
    uint64_t time_ns, address, size;
    const char *api; /* static string: the function the application called */
    uint32_t callsite;
    int16_t device;
    bool is_free; /* a free: the callsite is that of the allocation it frees */
};

/* Map room for `events` events (0: the trace is off). Call before any thread records, or with
 * none recording (set-up, the unit tests); a second call replaces the ring. False when the memory
 * could not be mapped: the trace is then off. */
bool trace_setup(uint32_t events);
/* Forget every event (the child side of fork, and the tests). With no thread recording. */
void trace_reset(void);

/* The ring as stored: every field read and written atomically, so that a reader racing a writer
 * sees torn values it then throws away, never undefined behaviour (and ThreadSanitizer agrees).
 * Here rather than in trace.c so that recording is inline in the core's allocation path. */
struct trace_entry {
    uint64_t seq; /* 0 never written; TRACE_BUSY being written; else the event's index + 1 */
    uint64_t time_ns, address, size;
    const char *api;
    uint64_t site_op; /* callsite << 32 | (uint16_t)device << 1 | is_free: one store */
};
#define TRACE_BUSY UINT64_MAX

extern uint32_t trace_cap; /* events the ring holds, 0: off; written by trace.c only */
extern struct trace_ring {
    struct trace_entry *ring; /* [mask + 1]: trace_cap rounded up to a power of two, so that an
                                 index finds its entry by a mask, not a division */
    uint64_t mask;
    size_t mapped;            /* bytes */
    uint64_t head;            /* events ever claimed: the next one's index */
    uint64_t lost;            /* given up: the entry was held by a writer a lap away */
} trace_ring;

static inline bool trace_on(void)
{
    return __builtin_expect(__atomic_load_n(&trace_cap, __ATOMIC_RELAXED) != 0, 1);
}

/* The last word of an entry: call site, device (VW_DEV_UNKNOWN kept as -1) and kind. */
static inline uint64_t trace_site_op(uint32_t callsite, int device, bool is_free)
{
    return (uint64_t)callsite << 32 | (uint32_t)(uint16_t)(int16_t)device << 1 | (is_free ? 1u : 0u);
}

__attribute__((cold)) void trace_give_up(void);

/* Record one event (with the trace on: trace_on). No lock, no allocation, no system call: one
 * atomic add claims the index, a compare-and-swap the entry. */
static inline void trace_add(uint64_t time_ns, uint64_t address, uint64_t size, const char *api,
                             uint64_t site_op)
{
    (void)__atomic_load_n(&trace_cap, __ATOMIC_ACQUIRE); /* pairs with trace_setup's release */
    uint64_t n = __atomic_fetch_add(&trace_ring.head, 1, __ATOMIC_RELAXED);
    struct trace_entry *e = &trace_ring.ring[n & trace_ring.mask];
    uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    /* Busy (a writer a lap away is still in it, which takes a thread preempted for a whole lap)
     * or already holding a later event: this one is the one to give up, never waited for. */
    if (__builtin_expect(s == TRACE_BUSY || s > n ||
                                 !__atomic_compare_exchange_n(&e->seq, &s, TRACE_BUSY, false,
                                                              __ATOMIC_ACQUIRE, __ATOMIC_RELAXED),
                         0)) {
        trace_give_up();
        return;
    }
    __atomic_store_n(&e->time_ns, time_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&e->address, address, __ATOMIC_RELAXED);
    __atomic_store_n(&e->size, size, __ATOMIC_RELAXED);
    __atomic_store_n(&e->api, api, __ATOMIC_RELAXED);
    __atomic_store_n(&e->site_op, site_op, __ATOMIC_RELAXED);
    __atomic_store_n(&e->seq, n + 1, __ATOMIC_RELEASE);
}

/* The events kept, oldest first (in the order they claimed their place), into out[max]; returns
 * how many. *total gets every event ever given to the ring (so total − copied were overwritten,
 * lost to a lapping writer, or still being written), *lost those given up to a lapping writer. */
uint32_t trace_copy(struct trace_event *out, uint32_t max, uint64_t *total, uint64_t *lost);

/* Address space mapped for the ring. */
size_t trace_bytes(void);

#endif
