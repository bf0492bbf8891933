/* The trace: bounded rings of the latest device allocations and frees, one by one (the report's
 * `trace`, and from it PyTorch's snapshot format, docs/timeline.md).
 *
 * The rest of the report keeps totals, a timeline and the largest steps; a tool that replays the
 * run (PyTorch's memory viewer) needs the events themselves, in order. Memory is mapped once at
 * set-up (trace_setup) and never grows. There is one ring per lane of the core (core.c: threads
 * take lanes in turn), so threads on lanes of their own share no cache line here either, as they
 * share none in the core (a single ring's index, bounced between two threads, took away all of
 * their scaling in tests/bench/bench_threads_e2e); each ring can hold all VRAMWATCH_TRACE events,
 * and the reader merges the rings by time and keeps the newest VRAMWATCH_TRACE.
 *
 * Writers take no lock: each claims its ring's next index with one atomic add (threads sharing a
 * lane share it), and marks its entry busy, then complete, through the entry's sequence word; the
 * reader copies an entry only when its sequence says it holds exactly the event it expects, whole
 * (a seqlock per entry). An entry another writer still holds when the ring laps it is given up
 * and counted as lost rather than waited for: the hook path never spins.
 *
 * Order across rings is by time. A free's time is the coarse clock's (the core's, for frees),
 * which can read earlier than the precise time of the allocation it frees: the free is recorded
 * at no earlier than that allocation's time + 1 ns, so an allocation always comes before its free,
 * and a free before the next allocation of its address (that one's time is read after the real
 * allocation returned, so after the real free, after the free was recorded). */
#ifndef VW_TRACE_H
#define VW_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VW_TRACE_DEFAULT 8192u  /* events kept unless VRAMWATCH_TRACE says otherwise */
#define VW_TRACE_MAX (1u << 16) /* 65536: 8 rings of 3 MiB of address space at most, touched as
                                   they fill; a report of that many events is about 11 MiB */
#define VW_TRACE_RINGS 8        /* one per lane of the core (core.c's LANES) */

struct trace_event {
    uint64_t time_ns, address, size;
    const char *api; /* static string: the function the application called */
    uint32_t callsite;
    int16_t device;
    bool is_free; /* a free: the callsite is that of the allocation it frees */
};

/* Map room for `events` events per ring (0: the trace is off). Call before any thread records,
 * or with none recording (set-up, the unit tests); a second call replaces the rings. False when
 * the memory could not be mapped: the trace is then off. */
bool trace_setup(uint32_t events);
/* Forget every event (the child side of fork, and the tests). With no thread recording. */
void trace_reset(void);

/* An entry as stored: every field read and written atomically, so that a reader racing a writer
 * sees torn values it then throws away, never undefined behaviour (and ThreadSanitizer agrees).
 * Here rather than in trace.c so that recording is inline in the core's allocation path. */
struct trace_entry {
    uint64_t seq; /* 0 never written; TRACE_BUSY being written; else the event's index + 1 */
    uint64_t time_ns, address, size;
    const char *api;
    uint64_t site_op; /* callsite << 32 | (uint16_t)device << 1 | is_free: one store */
};
#define TRACE_BUSY UINT64_MAX

/* One lane's ring; its head and counters alone on their cache line. */
struct trace_ring {
    uint64_t head; /* events ever claimed here: the next one's index */
    uint64_t lost; /* given up: the entry was held by a writer a lap away */
    struct trace_entry *ring; /* [trace_mask + 1] */
    char pad[64 - 24];
};

extern uint32_t trace_cap; /* events kept, 0: off; written by trace.c only */
extern uint64_t trace_mask; /* each ring's size - 1: trace_cap rounded up to a power of two, so
                               that an index finds its entry by a mask, not a division */
extern struct trace_ring trace_rings[VW_TRACE_RINGS];

static inline bool trace_on(void)
{
    return __builtin_expect(__atomic_load_n(&trace_cap, __ATOMIC_RELAXED) != 0, 1);
}

/* The last word of an entry: call site, device (VW_DEV_UNKNOWN kept as -1) and kind. */
static inline uint64_t trace_site_op(uint32_t callsite, int device, bool is_free)
{
    return (uint64_t)callsite << 32 | (uint32_t)(uint16_t)(int16_t)device << 1 | (is_free ? 1u : 0u);
}

__attribute__((cold)) void trace_give_up(struct trace_ring *r);

/* Record one event in ring `lane` (with the trace on: trace_on). No lock, no allocation, no
 * system call: one atomic add claims the index, a compare-and-swap the entry. */
static inline void trace_add(unsigned lane, uint64_t time_ns, uint64_t address, uint64_t size,
                             const char *api, uint64_t site_op)
{
    (void)__atomic_load_n(&trace_cap, __ATOMIC_ACQUIRE); /* pairs with trace_setup's release */
    struct trace_ring *r = &trace_rings[lane % VW_TRACE_RINGS];
    uint64_t n = __atomic_fetch_add(&r->head, 1, __ATOMIC_RELAXED);
    struct trace_entry *e = &r->ring[n & trace_mask];
    uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    /* Busy (a writer a lap away is still in it, which takes a thread preempted for a whole lap)
     * or already holding a later event: this one is the one to give up, never waited for. */
    if (__builtin_expect(s == TRACE_BUSY || s > n ||
                                 !__atomic_compare_exchange_n(&e->seq, &s, TRACE_BUSY, false,
                                                              __ATOMIC_ACQUIRE, __ATOMIC_RELAXED),
                         0)) {
        trace_give_up(r);
        return;
    }
    /* Release stores (plain moves on x86): a reader that sees one of them sees the entry busy
     * when it reads the sequence again (trace.c's read_entry), as a seqlock needs, without the
     * fences ThreadSanitizer does not model. */
    __atomic_store_n(&e->time_ns, time_ns, __ATOMIC_RELEASE);
    __atomic_store_n(&e->address, address, __ATOMIC_RELEASE);
    __atomic_store_n(&e->size, size, __ATOMIC_RELEASE);
    __atomic_store_n(&e->api, api, __ATOMIC_RELEASE);
    __atomic_store_n(&e->site_op, site_op, __ATOMIC_RELEASE);
    __atomic_store_n(&e->seq, n + 1, __ATOMIC_RELEASE);
}

/* The newest events kept (at most trace_cap), oldest first by time, into out[max]; returns how
 * many. Each ring's events keep their order; where times are equal a free goes first. *total gets
 * every event ever given to the rings (so total − copied were overwritten, lost to a lapping
 * writer, still being written, or beyond trace_cap), *lost those given up to a lapping writer.
 */
uint32_t trace_copy(struct trace_event *out, uint32_t max, uint64_t *total, uint64_t *lost);

/* Address space mapped for the rings. */
size_t trace_bytes(void);

#endif
