/* The trace's rings of the latest allocation and free events (trace.h says how they are shared). */
#include "trace.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

uint32_t trace_cap;
uint64_t trace_mask;
struct trace_ring trace_rings[VW_TRACE_RINGS];
static struct trace_entry *mapping; /* all the rings, one after the other */
static size_t mapped;               /* bytes */

bool trace_setup(uint32_t events)
{
    __atomic_store_n(&trace_cap, 0, __ATOMIC_RELAXED);
    if (mapping)
        munmap(mapping, mapped);
    mapping = NULL;
    mapped = 0;
    memset(trace_rings, 0, sizeof trace_rings);
    if (events == 0)
        return true;
    if (events > VW_TRACE_MAX)
        events = VW_TRACE_MAX;
    uint64_t slots = 1;
    while (slots < events)
        slots <<= 1;
    size_t bytes = sizeof(struct trace_entry) * slots * VW_TRACE_RINGS;
    int e = errno; /* set-up runs inside the application's calls: leave errno as it was */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    errno = e;
    if (p == MAP_FAILED)
        return false;
    mapping = p;
    mapped = bytes;
    trace_mask = slots - 1;
    for (int i = 0; i < VW_TRACE_RINGS; i++)
        trace_rings[i].ring = mapping + slots * (size_t)i;
    __atomic_store_n(&trace_cap, events, __ATOMIC_RELEASE);
    return true;
}

void trace_reset(void)
{
    for (int i = 0; i < VW_TRACE_RINGS; i++) {
        struct trace_ring *r = &trace_rings[i];
        uint64_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
        /* Only the entries ever written: the rest of the mapping is still untouched zero pages. */
        if (r->ring)
            memset(r->ring, 0,
                   sizeof(struct trace_entry) * (head <= trace_mask ? head : trace_mask + 1));
        __atomic_store_n(&r->head, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&r->lost, 0, __ATOMIC_RELAXED);
    }
}

void trace_give_up(struct trace_ring *r)
{
    __atomic_fetch_add(&r->lost, 1, __ATOMIC_RELAXED);
}

/* Entry `i` of ring r copied into *out when it holds event i whole. */
static bool read_entry(const struct trace_ring *r, uint64_t i, struct trace_event *out)
{
    const struct trace_entry *e = &r->ring[i & trace_mask];
    if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) != i + 1)
        return false;
    /* Acquire loads, so that the sequence's second read below cannot move before them (no
     * fence: ThreadSanitizer does not model fences). */
    out->time_ns = __atomic_load_n(&e->time_ns, __ATOMIC_ACQUIRE);
    out->address = __atomic_load_n(&e->address, __ATOMIC_ACQUIRE);
    out->size = __atomic_load_n(&e->size, __ATOMIC_ACQUIRE);
    out->api = __atomic_load_n(&e->api, __ATOMIC_ACQUIRE);
    uint64_t so = __atomic_load_n(&e->site_op, __ATOMIC_ACQUIRE);
    out->callsite = (uint32_t)(so >> 32);
    out->device = (int16_t)(uint16_t)(so >> 1);
    out->is_free = so & 1;
    /* A writer that took the entry meanwhile changed its sequence: what was read may be torn. */
    return __atomic_load_n(&e->seq, __ATOMIC_RELAXED) == i + 1;
}

/* A ring read from its newest event back. */
struct cursor {
    uint64_t i, first; /* the next index to try is i - 1; none below first */
    bool has;
    struct trace_event ev; /* the ring's newest not yet taken, when has */
};

static void step_back(const struct trace_ring *r, struct cursor *c)
{
    c->has = false;
    while (c->i > c->first)
        if (read_entry(r, --c->i, &c->ev)) {
            c->has = true;
            return;
        }
}

/* Whether a comes after b in the merged order: later, or as late and an allocation (a free goes
 * first where times are equal: trace.h). */
static bool after(const struct trace_event *a, const struct trace_event *b)
{
    return a->time_ns != b->time_ns ? a->time_ns > b->time_ns : (!a->is_free && b->is_free);
}

uint32_t trace_copy(struct trace_event *out, uint32_t max, uint64_t *total, uint64_t *lost)
{
    uint32_t cap = __atomic_load_n(&trace_cap, __ATOMIC_ACQUIRE);
    struct cursor c[VW_TRACE_RINGS];
    *total = *lost = 0;
    for (int i = 0; i < VW_TRACE_RINGS; i++) {
        uint64_t head = __atomic_load_n(&trace_rings[i].head, __ATOMIC_ACQUIRE);
        *total += head;
        *lost += __atomic_load_n(&trace_rings[i].lost, __ATOMIC_RELAXED);
        c[i] = (struct cursor){ .i = head, .first = head > trace_mask ? head - trace_mask - 1 : 0 };
        if (cap)
            step_back(&trace_rings[i], &c[i]);
    }
    if (max > cap)
        max = cap;
    /* The newest first, from whichever ring holds the latest; then turned round. */
    uint32_t k = 0;
    while (k < max) {
        int best = -1;
        for (int i = 0; i < VW_TRACE_RINGS; i++)
            if (c[i].has && (best < 0 || after(&c[i].ev, &c[best].ev)))
                best = i;
        if (best < 0)
            break;
        out[k++] = c[best].ev;
        step_back(&trace_rings[best], &c[best]);
    }
    for (uint32_t a = 0, b = k; a + 1 < b; a++, b--) {
        struct trace_event t = out[a];
        out[a] = out[b - 1];
        out[b - 1] = t;
    }
    return k;
}

size_t trace_bytes(void)
{
    return mapped;
}
