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
#define VW_TRACE_MAX (1u << 20) /* 48 MiB of address space at most, touched as it fills */

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

/* Read inline on every allocation and free: 0 when the trace is off. */
extern uint32_t trace_cap; /* written by trace.c only */
void trace_add_slow(const struct trace_event *e);
static inline void trace_add(const struct trace_event *e)
{
    if (__builtin_expect(__atomic_load_n(&trace_cap, __ATOMIC_RELAXED) != 0, 1))
        trace_add_slow(e);
}

/* The events kept, oldest first (in the order they claimed their place), into out[max]; returns
 * how many. *total gets every event ever given to the ring (so total − copied were overwritten,
 * lost to a lapping writer, or still being written), *lost those given up to a lapping writer. */
uint32_t trace_copy(struct trace_event *out, uint32_t max, uint64_t *total, uint64_t *lost);

/* Address space mapped for the ring. */
size_t trace_bytes(void);

#endif
