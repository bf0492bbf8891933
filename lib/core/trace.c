/* The trace's ring of the latest allocation and free events (trace.h says how it is shared). */
#include "trace.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

/* One event as stored: every field read and written atomically, so that a reader racing a writer
 * sees torn values it then throws away, never undefined behaviour (and ThreadSanitizer agrees). */
struct entry {
    uint64_t seq; /* 0 never written; BUSY being written; else the event's index + 1 */
    uint64_t time_ns, address, size;
    const char *api;
    uint32_t callsite;
    uint32_t device_op; /* device (16 bits, two's complement) << 1 | is_free */
};

#define BUSY UINT64_MAX

uint32_t trace_cap;
static struct {
    struct entry *ring; /* [trace_cap] */
    size_t mapped;      /* bytes */
    uint64_t head;      /* events ever claimed: the next one's index */
    uint64_t lost;      /* given up: the entry was held by a writer a lap ahead or behind */
} tr;

bool trace_setup(uint32_t events)
{
    __atomic_store_n(&trace_cap, 0, __ATOMIC_RELAXED);
    if (tr.ring)
        munmap(tr.ring, tr.mapped);
    tr.ring = NULL;
    tr.mapped = 0;
    tr.head = tr.lost = 0;
    if (events == 0)
        return true;
    if (events > VW_TRACE_MAX)
        events = VW_TRACE_MAX;
    size_t bytes = sizeof(struct entry) * events;
    int e = errno; /* set-up runs inside the application's calls: leave errno as it was */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    errno = e;
    if (p == MAP_FAILED)
        return false;
    tr.ring = p;
    tr.mapped = bytes;
    __atomic_store_n(&trace_cap, events, __ATOMIC_RELEASE);
    return true;
}

void trace_reset(void)
{
    uint32_t cap = __atomic_load_n(&trace_cap, __ATOMIC_RELAXED);
    uint64_t head = __atomic_load_n(&tr.head, __ATOMIC_RELAXED);
    /* Only the entries ever written: the rest of the mapping is still untouched zero pages. */
    if (tr.ring)
        memset(tr.ring, 0, sizeof(struct entry) * (head < cap ? head : cap));
    __atomic_store_n(&tr.head, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&tr.lost, 0, __ATOMIC_RELAXED);
}

void trace_add_slow(const struct trace_event *ev)
{
    uint32_t cap = __atomic_load_n(&trace_cap, __ATOMIC_ACQUIRE);
    uint64_t n = __atomic_fetch_add(&tr.head, 1, __ATOMIC_RELAXED);
    struct entry *e = &tr.ring[n % cap];
    uint64_t s = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    /* Busy (a writer a lap away is still in it, which takes a thread preempted for a whole lap)
     * or already holding a later event: this one is the one to give up. */
    if (s == BUSY || s > n ||
        !__atomic_compare_exchange_n(&e->seq, &s, BUSY, false, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&tr.lost, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_store_n(&e->time_ns, ev->time_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&e->address, ev->address, __ATOMIC_RELAXED);
    __atomic_store_n(&e->size, ev->size, __ATOMIC_RELAXED);
    __atomic_store_n(&e->api, ev->api, __ATOMIC_RELAXED);
    __atomic_store_n(&e->callsite, ev->callsite, __ATOMIC_RELAXED);
    uint32_t dop = ((uint32_t)(uint16_t)ev->device << 1) | (ev->is_free ? 1u : 0u);
    __atomic_store_n(&e->device_op, dop, __ATOMIC_RELAXED);
    __atomic_store_n(&e->seq, n + 1, __ATOMIC_RELEASE);
}

/* Entry `i` copied into *out when it holds event i whole. */
static bool read_entry(uint64_t i, uint32_t cap, struct trace_event *out)
{
    const struct entry *e = &tr.ring[i % cap];
    if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != i + 1)
        return false;
    out->time_ns = __atomic_load_n(&e->time_ns, __ATOMIC_RELAXED);
    out->address = __atomic_load_n(&e->address, __ATOMIC_RELAXED);
    out->size = __atomic_load_n(&e->size, __ATOMIC_RELAXED);
    out->api = __atomic_load_n(&e->api, __ATOMIC_RELAXED);
    out->callsite = __atomic_load_n(&e->callsite, __ATOMIC_RELAXED);
    uint32_t dop = __atomic_load_n(&e->device_op, __ATOMIC_RELAXED);
    out->device = (int16_t)(uint16_t)(dop >> 1);
    out->is_free = dop & 1;
    /* A writer that took the entry meanwhile changed its sequence: what was read may be torn. */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == i + 1;
}

uint32_t trace_copy(struct trace_event *out, uint32_t max, uint64_t *total, uint64_t *lost)
{
    uint32_t cap = __atomic_load_n(&trace_cap, __ATOMIC_ACQUIRE);
    uint64_t head = __atomic_load_n(&tr.head, __ATOMIC_ACQUIRE);
    *total = head;
    *lost = __atomic_load_n(&tr.lost, __ATOMIC_RELAXED);
    if (cap == 0)
        return 0;
    uint64_t first = head > cap ? head - cap : 0;
    if (head - first > max)
        first = head - max;
    uint32_t k = 0;
    for (uint64_t i = first; i < head; i++)
        if (read_entry(i, cap, &out[k]))
            k++;
    return k;
}

size_t trace_bytes(void)
{
    return tr.mapped;
}
