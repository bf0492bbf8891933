/* The trace's ring of the latest allocation and free events (trace.h says how it is shared). */
#include "trace.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

uint32_t trace_cap;
struct trace_ring trace_ring;

bool trace_setup(uint32_t events)
{
    __atomic_store_n(&trace_cap, 0, __ATOMIC_RELAXED);
    if (trace_ring.ring)
        munmap(trace_ring.ring, trace_ring.mapped);
    trace_ring.ring = NULL;
    trace_ring.mapped = 0;
    trace_ring.head = trace_ring.lost = 0;
    if (events == 0)
        return true;
    if (events > VW_TRACE_MAX)
        events = VW_TRACE_MAX;
    uint64_t slots = 1;
    while (slots < events)
        slots <<= 1;
    size_t bytes = sizeof(struct trace_entry) * slots;
    int e = errno; /* set-up runs inside the application's calls: leave errno as it was */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    errno = e;
    if (p == MAP_FAILED)
        return false;
    trace_ring.ring = p;
    trace_ring.mapped = bytes;
    trace_ring.mask = slots - 1;
    __atomic_store_n(&trace_cap, events, __ATOMIC_RELEASE);
    return true;
}

void trace_reset(void)
{
    uint64_t head = __atomic_load_n(&trace_ring.head, __ATOMIC_RELAXED);
    /* Only the entries ever written: the rest of the mapping is still untouched zero pages. */
    if (trace_ring.ring)
        memset(trace_ring.ring, 0,
               sizeof(struct trace_entry) * (head <= trace_ring.mask ? head : trace_ring.mask + 1));
    __atomic_store_n(&trace_ring.head, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&trace_ring.lost, 0, __ATOMIC_RELAXED);
}

void trace_give_up(void)
{
    __atomic_fetch_add(&trace_ring.lost, 1, __ATOMIC_RELAXED);
}

/* Entry `i` copied into *out when it holds event i whole. */
static bool read_entry(uint64_t i, struct trace_event *out)
{
    const struct trace_entry *e = &trace_ring.ring[i & trace_ring.mask];
    if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != i + 1)
        return false;
    out->time_ns = __atomic_load_n(&e->time_ns, __ATOMIC_RELAXED);
    out->address = __atomic_load_n(&e->address, __ATOMIC_RELAXED);
    out->size = __atomic_load_n(&e->size, __ATOMIC_RELAXED);
    out->api = __atomic_load_n(&e->api, __ATOMIC_RELAXED);
    uint64_t so = __atomic_load_n(&e->site_op, __ATOMIC_RELAXED);
    out->callsite = (uint32_t)(so >> 32);
    out->device = (int16_t)(uint16_t)(so >> 1);
    out->is_free = so & 1;
    /* A writer that took the entry meanwhile changed its sequence: what was read may be torn. */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == i + 1;
}

uint32_t trace_copy(struct trace_event *out, uint32_t max, uint64_t *total, uint64_t *lost)
{
    uint32_t cap = __atomic_load_n(&trace_cap, __ATOMIC_ACQUIRE);
    uint64_t head = __atomic_load_n(&trace_ring.head, __ATOMIC_ACQUIRE);
    *total = head;
    *lost = __atomic_load_n(&trace_ring.lost, __ATOMIC_RELAXED);
    if (cap == 0)
        return 0;
    uint64_t first = head > cap ? head - cap : 0;
    if (head - first > max)
        first = head - max;
    uint32_t k = 0;
    for (uint64_t i = first; i < head; i++)
        if (read_entry(i, &out[k]))
            k++;
    return k;
}

size_t trace_bytes(void)
{
    return trace_ring.mapped;
}
