/* The accounting core: tables of live allocations and call sites, per-device counters.
 *
 * Memory: every table is an anonymous mapping made here (never malloc), so the core can run
 * inside any hook, including ones reached from a malloc replacement. The allocation tables
 * start small and double under their lock; the call-site arrays are reserved once with
 * MAP_NORESERVE and filled front to back, so only the pages in use cost memory.
 *
 * Locks, so that threads neither wait for each other nor share a written cache line on the way,
 * on different devices or on one (docs/performance.md, docs/design.md):
 * - each device slot (and pinned host memory) is lanes, a thread's own, each with one lock for
 *   its table of live allocations, its counts and its call sites' counters; a device's figures
 *   (its peak, timeline, pools) are changed by its only lane in use, or with every lane of the
 *   device held (struct slot says how the lanes keep the peak exact). A free names no device:
 *   the thread's last lane is tried first, then the device's other lanes, then other devices;
 * - `rare.lock` guards what is rare: failures, pressure events, markers, crossings;
 * - `sitetab.lock` guards adding a call site (finding one seen before takes no lock).
 * Order, whenever more than one is held: device slots and their lanes in ascending order,
 * then rare.lock, then sitetab.lock. None is held while unwinding, calling the driver or writing
 * files. The state each lock guards is grouped with it below. */
#include "core.h"
#include "platform.h"
#include "trace.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FIRST_KEPT 64 /* failures and events: the first ones stay, the rest is a ring */
#define TABLE_MIN 512u
#define FRAME_ARENA (8u << 20) /* frames in all interned stacks: 64 MiB of address space */
#define INDEX_CAP (2u * VW_MAX_CALLSITES)
#define HOST_SLOT (VW_MAX_DEVICES + 1) /* after the device slots and the unknown device's */
#define NSLOTS (VW_MAX_DEVICES + 2)
#define LANES 8 /* per device slot: threads allocating on one device spread over these */
_Static_assert(LANES == VW_TRACE_RINGS, "the trace has one ring per lane (trace.h)");
#define LINE 64

/* ---------- locks ---------- */

/* A three-state futex lock (0 free, 1 held, 2 held with waiters): taking and releasing a free
 * one is one atomic instruction each, where a pthread mutex also checks its kind and owner. A
 * waiter sleeps in the kernel at once: spinning first was measured (bench_threads, threads on
 * one device) to cost more than it saved, as the spinners pull the lock's line away from the
 * holder. */
typedef int vlock;

/* The core leaves errno alone: its calls are made inside the application's, whose errno must be
 * what the real function left (issue 24), and a futex wait that returns EAGAIN or an mmap that
 * fails would change it. Only these cold paths make system calls. */
static __attribute__((noinline, cold)) void vl_lock_slow(vlock *l)
{
    int e = errno;
    while (__atomic_exchange_n(l, 2, __ATOMIC_ACQUIRE) != 0)
        syscall(SYS_futex, l, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
    errno = e;
}

static inline void vl_lock(vlock *l)
{
    int c = 0;
    if (VW_UNLIKELY(
                !__atomic_compare_exchange_n(l, &c, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)))
        vl_lock_slow(l);
}

static __attribute__((noinline, cold)) void vl_wake(vlock *l)
{
    int e = errno;
    syscall(SYS_futex, l, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    errno = e;
}

static inline void vl_unlock(vlock *l)
{
    if (VW_UNLIKELY(__atomic_exchange_n(l, 0, __ATOMIC_RELEASE) == 2))
        vl_wake(l);
}

/* ---------- state ---------- */

struct table {
    struct core_alloc *slots;
    uint32_t cap; /* power of two, 0 before first use */
    uint32_t count;
    uint32_t grow_at; /* count at which an insert doubles it first: 70% of cap */
};

/* A call site's counters in one lane of a device slot, written on every allocation and free
 * (under the lane's lock), apart from the site's read-mostly record. `at_peak` is the site's live
 * bytes in the lane at the device's latest peak when `epoch` equals the device's epoch (the site
 * changed since that peak); otherwise the site has not changed since, and its live bytes are the
 * figure. So the figure at the peak is kept exactly, at the cost of one compare per allocation
 * and free. */
struct site_ctr {
    uint64_t live_bytes, alloc_bytes_total, alloc_calls, at_peak;
    uint32_t live_count, epoch;
};

/* A device slot is LANES lanes: a thread allocates in its own lane (lane_of_thread), with its
 * own lock, table of live allocations, call-site counters and counts, so threads on one device
 * share no lock and no written line on the way. Lane 0 (the slot's `home`) also holds what is
 * the device's own: its peak, phase peak, pools, timeline and rare counters.
 *
 * While only one lane of a device was ever used, that lane does everything in its locked
 * section, as one lock per device did before. Once a second lane is used (`multi`), a lane
 * works alone within a `limit` of its live bytes: the lanes' limits add up to at most the
 * device's phase peak (which is at most its peak), so the device's live bytes cannot pass either
 * while every lane stays within its limit. Whatever could change a device figure (going past
 * the limit, a stream-ordered pool's memory, a pending retry, a new timeline bucket, a growth
 * step large enough to keep, a call site's first allocation) takes every lane's lock of the
 * device (`sync`): there the device's live bytes are the exact sum, the peak and phase peak are
 * updated as with one lock, and the slack is shared out again (share_slack). The peaks, the call sites'
 * figures at the peak and every total stay exact; what the timeline misses between syncs is said
 * in docs/design.md. */
enum lane_mode {
    LANE_UNUSED = 0, /* no allocation was made in this lane yet */
    LANE_ALONE,      /* the device's only lane in use: it does everything */
    LANE_SHARED,     /* the device has several lanes in use: within its limit, this one alone */
};

struct slot {
    vlock lock;
    uint8_t mode;       /* enum lane_mode; written with every lane of the device held */
    struct slot *home;  /* lane 0 of its device slot */
    uint64_t limit;     /* multi: this lane's live bytes may grow to this without a sync */
    uint64_t tl_events; /* multi: events not yet counted in the device's timeline */
    /* The lane's alloc_calls, free_calls, live_bytes and live_count; the device's own figures
     * (peak, pools, failures, flushes, reservations, active) in the home lane's. */
    struct core_device c;
    struct table ptrs;    /* keyed by address: device, pool, managed or pinned host memory */
    struct table vmm;     /* keyed by cuMemCreate handle */
    struct site_ctr *ctr; /* [VW_MAX_CALLSITES], mapped at the lane's first allocation */
    /* The home lane's only, on a line of its own: every lane reads them. */
    uint32_t epoch __attribute__((aligned(LINE))); /* times the peak rose (wraps after 2^32: see
                                                      docs/report-format.md) */
    bool multi;           /* a second lane was used: lanes keep to their limits */
    uint8_t nlanes;       /* lanes used */
    uint64_t phase_peak;  /* the most live since the previous marker */
    struct timeline_device
            *tl; /* its timeline; NULL: none (host memory, timeline off or unmapped) */
    /* What the pools hold beyond what they handed out, as the timeline's reserved memory counts
     * it (live + this): kept up to date where the pools' figures change, not worked out at
     * every event. */
    uint64_t pool_extra;
} __attribute__((aligned(LINE)));

/* A call site's record: what identifies it, and where the run stood at its first device
 * allocation. Written once (the first fields when it is added, the others at that first
 * allocation), then only read. */
struct site {
    uint64_t hash;
    uint64_t first_time_ns; /* 0: no device allocation yet; published last (release) */
    uint64_t first_live_before, first_peak_before;
    uint32_t frames_off; /* index into the frame arena */
    uint16_t nframes;
    uint16_t pad;
};

/* A failure on this thread waiting to see whether the same request is retried. */
struct pending {
    bool active;
    int device;
    uint64_t size, time_ns, seq, freed_bytes, freed_count;
    const char *api;
    uint32_t callsite;
    bool reported; /* an out-of-memory report was written for it: rewrite it if rescued */
    bool counted;  /* it retried a failure and failed too: already counted as final */
};

/* Set-up: written by init_once (under `once`) and by core_reset (with every lock held), read
 * without a lock everywhere else: `ready` turns true once, before the core is used. */
static struct {
    pthread_once_t once;
    bool ready;
    /* frames in the call-site arena: FRAME_ARENA, or an eighth of it (8 MiB) in a process under
     * a finite RLIMIT_AS, where address space reserved is address space the application's own
     * mappings (CUDA's) may need */
    uint32_t frame_arena;
    /* The whole-run timeline, one per device slot: mapped once, so its memory never grows. */
    struct timeline_device *tl;
    bool tl_on; /* recording into it; atomic (core_timeline_enable) */
    /* the program said it calls vramwatch_step after every step; atomic (core_step_reporting) */
    bool steps_reported;
} state = { .once = PTHREAD_ONCE_INIT, .frame_arena = FRAME_ARENA, .tl_on = true };

/* The device slots, each lane with the lock in it (struct slot). */
static struct slot slots[NSLOTS][LANES];

/* Call sites. `lock` is taken to add one: it guards writing a new record, the frames and the
 * index. Finding a site seen before takes no lock: `nsites` is published with release after the
 * record and its frames are written, and the index's entries are written atomically. */
static struct {
    vlock lock;
    struct site *sites; /* [VW_MAX_CALLSITES], id 0 is the overflow site */
    uint32_t nsites;
    uint64_t *frames; /* [state.frame_arena] */
    uint32_t nframes;
    uint32_t *index; /* [INDEX_CAP] open addressing over ids, 0 = empty */
} sitetab;
uint32_t core_empty_site; /* the chain with no frames, once interned (0: not yet) */

/* What is rare, under `lock` (taken after the device lanes): failures, pressure events and
 * markers (the first FIRST_KEPT and a ring), crossings of the emulated limit, when the latest
 * out-of-memory report was written, and the call sites' live bytes at the latest failure. */
static struct {
    vlock lock;
    struct core_failure failures[VW_FAILURES_KEPT];
    uint64_t failures_total;
    struct core_event events[VW_EVENTS_KEPT];
    uint64_t events_total;
    struct core_marker markers[VW_EVENTS_KEPT];
    uint64_t markers_total;
    struct core_crossing crossings[VW_MAX_DEVICES + 1];
    int ncrossings;
    bool crossed[VW_MAX_DEVICES + 1];
    uint64_t last_oom_report_ns;
    bool any_oom_report;
    /* The call sites' live bytes on the device of the latest out-of-memory failure, at it:
     * copied then (bounded by the number of call sites; failures are rare). */
    uint64_t *fail_live; /* [VW_MAX_CALLSITES] */
    uint32_t fail_nsites;
    bool fail_any;
} rare;

/* Counters under no lock: each is read and written atomically. */
static struct {
    bool touched; /* any device allocation call at all */
    /* Device slots that ever recorded a call, for the lock-free sums (bit i of word i / 64). */
    uint64_t active_mask[2];
    uint64_t callsites_dropped, allocs_untracked;
    uint64_t peak_any; /* max over devices of peak_live_bytes */
    /* Failures known to be final (the retry failed too, or none came) and flushes rescued by a
     * retry, on all threads: read by the status file. */
    uint64_t ooms_final, flushes_total;
    int lanes_given; /* threads that chose a lane: the next one takes the next lane */
} totals;
/* A report on disk describes a failure that a retry has since rescued (atomic). */
bool core_report_stale;

/* Each thread's own. */
static VW_TLS struct pending pending;
/* The lane this thread last allocated in (a device's): its frees are looked for there first. */
static VW_TLS struct slot *last_lane;
static VW_TLS int my_lane;        /* this thread's lane + 1 (0: not chosen yet) */
static VW_TLS uint32_t last_site; /* the call site this thread last interned a chain for */

static void *map(size_t bytes)
{
    int e = errno; /* see vl_lock_slow */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    errno = e;
    return p == MAP_FAILED ? NULL : p;
}

/* Each device slot's timeline pointer, as `state.tl_on` says (the host slot has none). With every
 * lane's lock held, or before the core is in use. */
static void timeline_attach(void)
{
    bool on = __atomic_load_n(&state.tl_on, __ATOMIC_RELAXED);
    for (int i = 0; i <= VW_MAX_DEVICES; i++)
        __atomic_store_n(&slots[i][0].tl, on && state.tl ? &state.tl[i] : NULL, __ATOMIC_RELAXED);
}

static void init_once(void)
{
    for (int i = 0; i < NSLOTS; i++)
        for (int l = 0; l < LANES; l++)
            slots[i][l].home = &slots[i][0];
    sitetab.sites = map(sizeof(*sitetab.sites) * VW_MAX_CALLSITES);
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
        state.frame_arena = FRAME_ARENA / 8;
    sitetab.frames = map(sizeof(*sitetab.frames) * state.frame_arena);
    sitetab.index = map(sizeof(*sitetab.index) * INDEX_CAP);
    if (!sitetab.sites || !sitetab.frames || !sitetab.index)
        return;
    /* Without it the core still works; the reports then have no timeline. */
    state.tl = map(sizeof(*state.tl) * (VW_MAX_DEVICES + 1));
    timeline_attach();
    sitetab.nsites = 1; /* the overflow site: no frames */
    state.ready = true;
}

bool core_init(void)
{
    pthread_once(&state.once, init_once);
    return state.ready;
}

static void lock_slots(void)
{
    for (int i = 0; i < NSLOTS; i++)
        for (int l = 0; l < LANES; l++)
            vl_lock(&slots[i][l].lock);
}

static void unlock_slots(void)
{
    for (int i = NSLOTS - 1; i >= 0; i--)
        for (int l = LANES - 1; l >= 0; l--)
            vl_unlock(&slots[i][l].lock);
}

/* Every lane of one device slot (`home` is its lane 0), in order. */
static void lock_lanes(struct slot *home)
{
    for (int l = 0; l < LANES; l++)
        vl_lock(&home[l].lock);
}

static void unlock_lanes(struct slot *home)
{
    for (int l = LANES - 1; l >= 0; l--)
        vl_unlock(&home[l].lock);
}

/* The device's live bytes: its lanes' sum. With every lane of the device held. */
static uint64_t dev_live(const struct slot *home)
{
    uint64_t live = 0;
    for (int l = 0; l < LANES; l++)
        live += home[l].c.live_bytes;
    return live;
}

static inline int slot_index(const struct slot *home)
{
    return (int)((home - &slots[0][0]) / LANES);
}

/* The lane this thread allocates in: threads take lanes in turn, the first lane 0. */
static inline int lane_of_thread(void)
{
    int l = my_lane;
    if (VW_UNLIKELY(!l)) {
        l = __atomic_fetch_add(&totals.lanes_given, 1, __ATOMIC_RELAXED) % LANES + 1;
        my_lane = l;
    }
    return l - 1;
}

static void table_drop(struct table *t)
{
    if (t->slots)
        munmap(t->slots, sizeof(*t->slots) * t->cap);
    memset(t, 0, sizeof(*t));
}

static void lock_all(void)
{
    lock_slots();
    vl_lock(&rare.lock);
    vl_lock(&sitetab.lock);
}

static void unlock_all(void)
{
    vl_unlock(&sitetab.lock);
    vl_unlock(&rare.lock);
    unlock_slots();
}

/* With every lock held. */
static void reset_locked(void)
{
    uint32_t n = __atomic_load_n(&sitetab.nsites, __ATOMIC_RELAXED);
    for (int i = 0; i < NSLOTS; i++)
        for (int l = 0; l < LANES; l++) {
            struct slot *s = &slots[i][l];
            table_drop(&s->ptrs);
            table_drop(&s->vmm);
            if (s->ctr)
                munmap(s->ctr, sizeof(*s->ctr) * VW_MAX_CALLSITES);
            memset(&s->c, 0, sizeof(s->c));
            s->ctr = NULL;
            __atomic_store_n(&s->mode, LANE_UNUSED, __ATOMIC_RELAXED);
            s->limit = 0;
            s->tl_events = 0;
            s->epoch = 0;
            s->multi = false;
            s->nlanes = 0;
            s->phase_peak = 0;
            s->pool_extra = 0;
        }
    if (state.ready) {
        memset(sitetab.sites, 0, sizeof(*sitetab.sites) * n);
        memset(sitetab.index, 0, sizeof(*sitetab.index) * INDEX_CAP);
    }
    __atomic_store_n(&sitetab.nsites, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&core_empty_site, 0, __ATOMIC_RELAXED);
    sitetab.nframes = 0;
    __atomic_store_n(&totals.callsites_dropped, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&totals.allocs_untracked, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&totals.active_mask[0], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&totals.active_mask[1], 0, __ATOMIC_RELAXED);
    rare.failures_total = rare.events_total = rare.markers_total = 0;
    rare.ncrossings = 0;
    __atomic_store_n(&totals.peak_any, 0, __ATOMIC_RELAXED);
    memset(rare.crossed, 0, sizeof(rare.crossed));
    rare.last_oom_report_ns = 0;
    rare.any_oom_report = false;
    __atomic_store_n(&totals.ooms_final, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&totals.flushes_total, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&core_report_stale, false, __ATOMIC_RELAXED);
    __atomic_store_n(&totals.touched, false, __ATOMIC_RELAXED);
    if (rare.fail_live)
        munmap(rare.fail_live, sizeof(*rare.fail_live) * VW_MAX_CALLSITES);
    rare.fail_live = NULL;
    rare.fail_nsites = 0;
    rare.fail_any = false;
    memset(&pending, 0, sizeof(pending));
    trace_reset();
    if (state.tl)
        for (int i = 0; i <= VW_MAX_DEVICES; i++) {
            /* Cleared at its next first event: untouched pages stay so. */
            state.tl[i].started = false;
            state.tl[i].cur_end = 0;
        }
}

void core_reset(void)
{
    lock_all();
    reset_locked();
    unlock_all();
}

void core_lock_for_fork(void)
{
    lock_all();
}

void core_unlock_after_fork(bool child)
{
    /* The child has one thread; whatever other threads were doing is gone. It forgets the
     * parent's memory: it must never report the parent's allocations as its own, and writes
     * nothing unless it allocates itself. */
    if (child)
        reset_locked();
    unlock_all();
}

bool core_touched(void)
{
    /* An allocation makes its slot active (set_active) instead of setting `touched` too. */
    return __atomic_load_n(&totals.touched, __ATOMIC_RELAXED) ||
           __atomic_load_n(&totals.active_mask[0], __ATOMIC_RELAXED) ||
           __atomic_load_n(&totals.active_mask[1], __ATOMIC_RELAXED);
}

static void touch(void)
{
    if (!__atomic_load_n(&totals.touched, __ATOMIC_RELAXED))
        __atomic_store_n(&totals.touched, true, __ATOMIC_RELAXED);
}

/* ---------- hashing ---------- */

static inline uint64_t mix64(uint64_t x)
{
    /* splitmix64's finaliser: addresses differ in a few middle bits, this spreads them. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static uint64_t hash_frames(const uint64_t *f, int n)
{
    /* One multiply and rotate per frame, one full mix at the end: stacks are hashed on every
     * allocation, and a strong mix per frame costs more than the rest of the lookup. */
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h = (h ^ f[i]) * 0xbf58476d1ce4e5b9ull;
        h = (h << 27) | (h >> 37);
    }
    return mix64(h) | 1; /* never 0 */
}

/* ---------- allocation tables: linear probing, backward-shift deletion ---------- */

/* The slot hash of an address or handle: one multiply, and the high half folded into the low
 * (allocations are aligned, so their low bits alone would all be the same). */
static inline uint64_t key_hash(uint64_t key)
{
    uint64_t x = key * 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 32);
}

static bool table_grow(struct table *t)
{
    uint32_t ncap = t->cap ? t->cap * 2 : TABLE_MIN;
    if (ncap > VW_MAX_ALLOC_SLOTS || ncap < t->cap)
        return false;
    struct core_alloc *ns = map(sizeof(*ns) * ncap);
    if (!ns)
        return false;
    for (uint32_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].used)
            continue;
        uint32_t j = (uint32_t)key_hash(t->slots[i].key) & (ncap - 1);
        while (ns[j].used)
            j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
    }
    if (t->slots)
        munmap(t->slots, sizeof(*t->slots) * t->cap);
    t->slots = ns;
    t->cap = ncap;
    t->grow_at = (uint32_t)((uint64_t)ncap * 7 / 10);
    return true;
}

/* The index of `key`'s record in `t` (the free's remove needs it), or UINT32_MAX. */
static inline uint32_t table_find(const struct table *t, uint64_t key, uint64_t h)
{
    if (!t->cap)
        return UINT32_MAX;
    uint32_t m = t->cap - 1;
    for (uint32_t j = (uint32_t)h & m;; j = (j + 1) & m) {
        if (!t->slots[j].used)
            return UINT32_MAX;
        if (t->slots[j].key == key)
            return j;
    }
}

/* Inserts, or returns the existing record for the key (the caller decides what that means). */
static inline __attribute__((always_inline)) struct core_alloc *table_insert(struct table *t,
                                                                             uint64_t key,
                                                                             uint64_t h,
                                                                             bool *existed)
{
    *existed = false;
    /* At most 70% full after the insert: (count + 1) * 10 <= cap * 7. */
    if (VW_UNLIKELY(t->count >= t->grow_at) && !table_grow(t))
        return NULL;
    uint32_t m = t->cap - 1;
    uint32_t j = (uint32_t)h & m;
    for (; t->slots[j].used; j = (j + 1) & m) {
        if (t->slots[j].key == key) {
            *existed = true;
            return &t->slots[j];
        }
    }
    t->slots[j].used = 1;
    t->slots[j].key = key;
    t->count++;
    return &t->slots[j];
}

static inline __attribute__((always_inline)) void table_remove(struct table *t, uint32_t i)
{
    uint32_t m = t->cap - 1;
    /* Shift later members of the probe run back so lookups never meet a hole too early. */
    for (uint32_t j = (i + 1) & m; t->slots[j].used; j = (j + 1) & m) {
        uint32_t home = (uint32_t)key_hash(t->slots[j].key) & m;
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    t->slots[i].used = 0; /* every other field is written again when the slot is next used */
    t->count--;
}

static struct table *table_for(struct slot *d, enum core_kind kind)
{
    return kind == CORE_VMM ? &d->vmm : &d->ptrs;
}

/* ---------- call sites ---------- */

static bool same_site(uint32_t c, uint64_t h, const uint64_t *f, int n)
{
    const struct site *s = &sitetab.sites[c];
    return s->hash == h && s->nframes == n &&
           memcmp(&sitetab.frames[s->frames_off], f, sizeof(*f) * (size_t)n) == 0;
}

static uint32_t intern(const uint64_t *f, int n)
{
    uint64_t h = hash_frames(f, n);
    uint32_t m = INDEX_CAP - 1;
    /* Lock-free first: a site's record and frames are written before its index slot is
     * published (release), and never change after, so a reader that sees the slot sees them.
     * Most allocations come from call sites seen before. */
    for (uint32_t j = (uint32_t)h & m;; j = (j + 1) & m) {
        uint32_t c = __atomic_load_n(&sitetab.index[j], __ATOMIC_ACQUIRE);
        if (!c)
            break;
        if (same_site(c, h, f, n))
            return c;
    }
    uint32_t id = 0;
    vl_lock(&sitetab.lock);
    uint32_t j = (uint32_t)h & m;
    for (;; j = (j + 1) & m) {
        uint32_t c = sitetab.index[j];
        if (!c)
            break;
        if (same_site(c, h, f, n)) {
            id = c;
            goto out;
        }
    }
    uint32_t ns = __atomic_load_n(&sitetab.nsites, __ATOMIC_RELAXED);
    if (ns >= VW_MAX_CALLSITES || sitetab.nframes + (uint32_t)n > state.frame_arena) {
        __atomic_fetch_add(&totals.callsites_dropped, 1, __ATOMIC_RELAXED);
        goto out; /* the overflow site */
    }
    id = ns;
    sitetab.sites[id].hash = h;
    sitetab.sites[id].nframes = (uint16_t)n;
    sitetab.sites[id].frames_off = sitetab.nframes;
    memcpy(&sitetab.frames[sitetab.nframes], f, sizeof(*f) * (size_t)n);
    sitetab.nframes += (uint32_t)n;
    __atomic_store_n(&sitetab.nsites, ns + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&sitetab.index[j], id, __ATOMIC_RELEASE);
out:
    vl_unlock(&sitetab.lock);
    return id;
}

uint32_t core_callsite_intern(const uint64_t *f, int n)
{
    if (!state.ready)
        return 0;
    if (n <= 0) {
        /* Stacks off: every allocation has this chain, found once and remembered. */
        uint32_t e = __atomic_load_n(&core_empty_site, __ATOMIC_RELAXED);
        if (VW_LIKELY(e))
            return e;
        e = intern(f, 0);
        if (e)
            __atomic_store_n(&core_empty_site, e, __ATOMIC_RELAXED);
        return e;
    }
    if (n > VW_MAX_FRAMES)
        n = VW_MAX_FRAMES;
    /* A thread allocating in a loop asks for the same chain again and again: compared with the
     * last one it got, it needs neither the hash nor the index. */
    uint32_t last = last_site;
    if (last && last < __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE) &&
        sitetab.sites[last].nframes == n &&
        memcmp(&sitetab.frames[sitetab.sites[last].frames_off], f, sizeof(*f) * (size_t)n) == 0)
        return last;
    last = intern(f, n);
    last_site = last;
    return last;
}

/* ---------- events ---------- */

static uint32_t ring_slot(uint64_t seq, uint32_t kept)
{
    return seq < FIRST_KEPT ? (uint32_t)seq
                            : FIRST_KEPT + (uint32_t)((seq - FIRST_KEPT) % (kept - FIRST_KEPT));
}

static struct core_failure *failure_by_seq(uint64_t seq)
{
    struct core_failure *f = &rare.failures[ring_slot(seq, VW_FAILURES_KEPT)];
    return (seq < rare.failures_total && f->seq == seq) ? f : NULL;
}

/* The home lane (lane 0) of a device's slot. */
static inline struct slot *slot_of_device(int device)
{
    return &slots[core_dev_slot(device)][0];
}

/* Called with `device`'s lanes and rare.lock held (`d` its home), for every allocation outcome on this
 * thread. Returns 1 when this request retried a pending failure and succeeded, 2 when it
 * retried and failed. A pending failure that this request does not retry was final: the
 * application got the error. */
static int match_retry(struct slot *d, int device, uint64_t size, bool ok, uint64_t now)
{
    if (!pending.active)
        return 0;
    pending.active = false;
    if (pending.size != size || pending.device != device ||
        now - pending.time_ns > VW_RETRY_WINDOW_NS) {
        if (pending.seq != UINT64_MAX && !pending.counted)
            __atomic_fetch_add(&totals.ooms_final, 1, __ATOMIC_RELAXED);
        return 0;
    }
    struct core_failure *f = failure_by_seq(pending.seq);
    if (f) {
        f->retried = ok ? 1 : 2;
        f->retry_freed = pending.freed_bytes;
    }
    if (!ok) {
        /* PyTorch gives up after one retry: final at once, so a watcher need not wait for the
         * exit. CuPy tries a third time; should that succeed, the count is taken back. */
        if (!pending.counted)
            __atomic_fetch_add(&totals.ooms_final, 1, __ATOMIC_RELAXED);
        return 2;
    }
    if (pending.counted)
        __atomic_fetch_sub(&totals.ooms_final, 1, __ATOMIC_RELAXED);
    if (pending.reported)
        __atomic_store_n(&core_report_stale, true, __ATOMIC_RELAXED);
    struct core_event *e = &rare.events[ring_slot(rare.events_total, VW_EVENTS_KEPT)];
    rare.events_total++;
    e->time_ns = pending.time_ns;
    e->size = size;
    e->freed_bytes = pending.freed_bytes;
    e->freed_count = pending.freed_count;
    e->api = pending.api;
    e->device = device;
    e->callsite = pending.callsite;
    d->c.cache_flushes++;
    __atomic_fetch_add(&totals.flushes_total, 1, __ATOMIC_RELAXED);
    return 1;
}

/* With the device's lanes held (or its one lane in use): a call was recorded for this device.
 * `d`: its home. */
static inline void set_active(struct slot *d)
{
    if (VW_LIKELY(d->c.active))
        return;
    d->c.active = true;
    unsigned i = (unsigned)slot_index(d);
    __atomic_fetch_or(&totals.active_mask[i / 64], 1ull << (i % 64), __ATOMIC_RELAXED);
}

void core_observe_refusal(int device, uint64_t size, const char *api, uint32_t callsite,
                          uint64_t now_ns)
{
    if (!state.ready)
        return;
    touch();
    struct slot *d = slot_of_device(device);
    lock_lanes(d);
    vl_lock(&rare.lock);
    match_retry(d, device, size, false, now_ns);
    set_active(d);
    /* No failure record and no report: the emulated card's answer, which the retry decides.
     * seq UINT64_MAX finds no failure, and an unmatched refusal is not a final failure. */
    pending = (struct pending){
        .active = true,
        .device = device,
        .size = size,
        .time_ns = now_ns,
        .seq = UINT64_MAX,
        .api = api,
        .callsite = callsite < __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE) ? callsite : 0
    };
    vl_unlock(&rare.lock);
    unlock_lanes(d);
}

bool core_observe_is_retry(int device, uint64_t size, uint64_t now_ns)
{
    /* Only this thread's pending refusal can be retried by this thread: no lock needed. */
    return state.ready && pending.active && pending.seq == UINT64_MAX && pending.device == device &&
           pending.size == size && now_ns - pending.time_ns <= VW_RETRY_WINDOW_NS;
}

void core_pressure(uint64_t *final_ooms, uint64_t *flushes)
{
    *final_ooms = __atomic_load_n(&totals.ooms_final, __ATOMIC_RELAXED);
    *flushes = __atomic_load_n(&totals.flushes_total, __ATOMIC_RELAXED);
}

void core_end_pending(void)
{
    /* At exit: a failure still waiting for its retry never got one. Only this thread's. */
    if (!state.ready)
        return;
    if (pending.active && pending.seq != UINT64_MAX && !pending.counted)
        __atomic_fetch_add(&totals.ooms_final, 1, __ATOMIC_RELAXED);
    pending.active = false;
}

/* ---------- allocations ---------- */

/* With the device's lanes held, after its pools' figures changed (`d`: its home, which holds
 * them): reserved memory as the timeline sees it between measurements is the live memory plus
 * this. The pools are taken to keep the most they handed out (PyTorch sets its pool's release
 * threshold so that they do), until the driver is next asked (core_measure). */
static inline void pool_extra_update(struct slot *d)
{
    const struct core_device *c = &d->c;
    d->pool_extra =
            c->pool_hold_bytes > c->pool_live_bytes ? c->pool_hold_bytes - c->pool_live_bytes : 0;
}

/* The lane's counters for call site `id`, NULL for the overflow site or when they cannot be
 * mapped. With the lane's lock held. */
static inline struct site_ctr *ctr_of(struct slot *d, uint32_t id)
{
    if (VW_UNLIKELY(!d->ctr)) {
        d->ctr = map(sizeof(*d->ctr) * VW_MAX_CALLSITES);
        if (!d->ctr)
            return NULL;
    }
    return &d->ctr[id];
}

/* Before a site's live bytes in a lane change: keep what they were at the device's latest peak
 * (`home` holds its epoch). */
static inline void ctr_touch(const struct slot *home, struct site_ctr *c)
{
    uint32_t e = home->epoch;
    if (c->epoch != e) {
        c->at_peak = c->live_bytes;
        c->epoch = e;
    }
}

/* The site's first device allocation: where the run stood just before it (the start of its
 * phase, for runs without markers: a training step, validation). Once per site; asked only
 * when the site has no allocation counted in this lane (its first here), which every site's
 * first device allocation is. `live`: the device's live bytes before it. */
static __attribute__((noinline)) void first_alloc(struct slot *home, uint32_t id, uint64_t time_ns,
                                                  uint64_t live)
{
    if (__atomic_load_n(&sitetab.sites[id].first_time_ns, __ATOMIC_ACQUIRE))
        return;
    vl_lock(&sitetab.lock);
    struct site *s = &sitetab.sites[id];
    if (!s->first_time_ns) {
        s->first_live_before = live;
        s->first_peak_before = home->c.peak_live_bytes;
        __atomic_store_n(&s->first_time_ns, time_ns ? time_ns : 1, __ATOMIC_RELEASE);
    }
    vl_unlock(&sitetab.lock);
}

static inline void atomic_max(uint64_t *p, uint64_t v)
{
    uint64_t cur = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v > cur &&
           !__atomic_compare_exchange_n(p, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The lane's own part of an allocation: its call site's counters and its counts. With the
 * lane's lock held. */
static inline __attribute__((always_inline)) void lane_add(const struct slot *home,
                                                           struct slot *lane,
                                                           const struct core_alloc *a,
                                                           struct site_ctr *c)
{
    if (VW_LIKELY(c)) {
        ctr_touch(home, c);
        c->live_bytes += a->size;
        c->live_count++;
        c->alloc_calls++;
        c->alloc_bytes_total += a->size;
    }
    lane->c.alloc_calls++;
    lane->c.live_count++;
    __atomic_store_n(&lane->c.live_bytes, lane->c.live_bytes + a->size, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) void lane_sub(const struct slot *home,
                                                           struct slot *lane,
                                                           const struct core_alloc *a)
{
    if (a->callsite) {
        struct site_ctr *c = ctr_of(lane, a->callsite);
        if (VW_LIKELY(c)) {
            ctr_touch(home, c);
            c->live_bytes -= a->size;
            c->live_count--;
        }
    }
    lane->c.live_count--;
    __atomic_store_n(&lane->c.live_bytes, lane->c.live_bytes - a->size, __ATOMIC_RELAXED);
}

/* An allocation in `lane`, with the device's figures (`home`) as well: with the device's lanes
 * held, or with the lane's lock while it is the device's only lane. `live`: the device's live
 * bytes before it. `kind` is the allocation's (a constant where the caller knows it, so the
 * common path carries no test for the kinds it never has). `fresh`: a new allocation (not one
 * put back after a failed free), a candidate growth step. The timeline gets it at its own time
 * (a record put back keeps the time it was made). */
static inline __attribute__((always_inline)) void account_add(struct slot *home, struct slot *lane,
                                                              const struct core_alloc *a,
                                                              enum core_kind kind, bool fresh,
                                                              uint64_t live)
{
    uint64_t now = a->time_ns;
    struct site_ctr *c = NULL;
    if (a->callsite) {
        c = ctr_of(lane, a->callsite);
        if (kind != CORE_HOST && VW_UNLIKELY(!c || c->alloc_calls == 0))
            first_alloc(home, a->callsite, a->time_ns, live);
    }
    lane_add(home, lane, a, c);
    struct core_device *dc = &home->c;
    set_active(home);
    live += a->size;
    if (live > home->phase_peak)
        home->phase_peak = live;
    if (kind == CORE_POOL) {
        dc->pool_live_bytes += a->size;
        dc->pool_used = true;
        if (dc->pool_live_bytes > dc->pool_hold_bytes)
            dc->pool_hold_bytes = dc->pool_live_bytes;
        pool_extra_update(home);
    }
    if (live > dc->peak_live_bytes) {
        dc->peak_live_bytes = live;
        dc->peak_time_ns = a->time_ns;
        home->epoch++; /* this state is the peak now: every site's live bytes are its figure */
        if (kind != CORE_HOST)
            atomic_max(&totals.peak_any, live);
    }
    struct timeline_device *t = __atomic_load_n(&home->tl, __ATOMIC_RELAXED);
    if (kind != CORE_HOST && VW_LIKELY(t)) {
        timeline_record(t, now, live, live + home->pool_extra);
        if (fresh)
            timeline_step(t, now, a->size, live, a->api, a->callsite);
    }
}

static inline __attribute__((always_inline)) void account_sub(struct slot *home, struct slot *lane,
                                                              const struct core_alloc *a,
                                                              enum core_kind kind, uint64_t now,
                                                              uint64_t live)
{
    lane_sub(home, lane, a);
    live -= a->size;
    if (kind == CORE_POOL) {
        home->c.pool_live_bytes -= a->size;
        pool_extra_update(home);
    }
    struct timeline_device *t = __atomic_load_n(&home->tl, __ATOMIC_RELAXED);
    if (kind != CORE_HOST && VW_LIKELY(t))
        timeline_record(t, now, live, live + home->pool_extra);
}

/* account_add and account_sub for a record's own kind, read at run time (the rare paths). */
static void account_add_any(struct slot *home, struct slot *lane, const struct core_alloc *a,
                            bool fresh, uint64_t live)
{
    switch ((enum core_kind)a->kind) {
    case CORE_DEVICE:
        account_add(home, lane, a, CORE_DEVICE, fresh, live);
        break;
    case CORE_POOL:
        account_add(home, lane, a, CORE_POOL, fresh, live);
        break;
    case CORE_HOST:
        account_add(home, lane, a, CORE_HOST, fresh, live);
        break;
    default: /* managed and VMM memory count as device memory does */
        account_add(home, lane, a, CORE_MANAGED, fresh, live);
        break;
    }
}

static void account_sub_any(struct slot *home, struct slot *lane, const struct core_alloc *a,
                            uint64_t now, uint64_t live)
{
    switch ((enum core_kind)a->kind) {
    case CORE_DEVICE:
        account_sub(home, lane, a, CORE_DEVICE, now, live);
        break;
    case CORE_POOL:
        account_sub(home, lane, a, CORE_POOL, now, live);
        break;
    case CORE_HOST:
        account_sub(home, lane, a, CORE_HOST, now, live);
        break;
    default:
        account_sub(home, lane, a, CORE_MANAGED, now, live);
        break;
    }
}

/* ---------- syncs: every lane of a device at once ---------- */

/* With every lane of the device held: the events the lanes made alone, into its timeline's
 * newest bucket (a lane makes none alone past that bucket's end). */
static void flush_lane_events(struct slot *home)
{
    uint64_t n = 0;
    for (int l = 0; l < LANES; l++) {
        n += home[l].tl_events;
        home[l].tl_events = 0;
    }
    struct timeline_device *t = __atomic_load_n(&home->tl, __ATOMIC_RELAXED);
    if (n && t && t->started) {
        t->events += n;
        t->b[t->cur].events += (uint32_t)n;
    }
}

/* With every lane of the device held, after its figures changed: the slack under its phase peak
 * (its live bytes can reach that without anything to record) shared out again, so the lanes'
 * limits add up to at most the phase peak. The lane that asked (`req`, or none) gets what the
 * others do not keep; each other lane keeps half the room it had, so a lane that no longer
 * allocates (its thread gone) gives its room up within a few syncs, and two busy lanes each keep
 * a good part of it. */
static void share_slack(struct slot *home, struct slot *req)
{
    if (!home->multi)
        return;
    uint64_t live = dev_live(home);
    uint64_t slack = home->phase_peak > live ? home->phase_peak - live : 0, kept = 0;
    for (int l = 0; l < LANES; l++) {
        struct slot *o = &home[l];
        if (o == req || o->mode == LANE_UNUSED)
            continue;
        uint64_t room = o->limit > o->c.live_bytes ? (o->limit - o->c.live_bytes) / 2 : 0;
        if (room > slack - kept)
            room = slack - kept;
        o->limit = o->c.live_bytes + room;
        kept += room;
    }
    if (req)
        req->limit = req->c.live_bytes + (slack - kept);
}

/* With every lane of the device held: `lane` is used from now on. The device's second lane
 * turns the lanes' limits on. */
static void lane_use(struct slot *home, struct slot *lane)
{
    if (VW_LIKELY(lane->mode != LANE_UNUSED))
        return;
    home->nlanes++;
    if (home->nlanes >= 2)
        home->multi = true;
    for (int l = 0; l < LANES; l++)
        if (&home[l] == lane || home[l].mode != LANE_UNUSED)
            __atomic_store_n(&home[l].mode, home->multi ? LANE_SHARED : LANE_ALONE,
                             __ATOMIC_RELAXED);
}

/* A live allocation's record, as every allocation path writes it: the request's, with its
 * call site as checked (`callsite`) and its kind as the caller knows it (a constant there). */
static inline void fill_record(struct core_alloc *a, const struct core_request *r,
                               uint32_t callsite, enum core_kind kind)
{
    a->size = r->size;
    a->time_ns = r->now_ns;
    a->api = r->api;
    a->callsite = callsite;
    int device = r->device;
    a->device = (int16_t)(device >= 0 && device < VW_MAX_DEVICES ? device : VW_DEV_UNKNOWN);
    a->kind = (uint8_t)kind;
}

/* core_alloc with every lane of the device held (`lane`: the thread's): the first allocation in
 * a lane, and whatever a lane may not do alone. `h`: the key's hash; `callsite`: the request's,
 * as checked. */
static __attribute__((noinline)) bool alloc_sync(struct slot *home, struct slot *lane,
                                                 enum core_kind kind, uint64_t h,
                                                 const struct core_request *r, uint32_t callsite)
{
    bool tracked = false, existed;
    lock_lanes(home);
    lane_use(home, lane);
    flush_lane_events(home);
    if (kind != CORE_HOST && VW_UNLIKELY(pending.active)) {
        vl_lock(&rare.lock);
        match_retry(home, r->device, r->size, true, r->now_ns);
        vl_unlock(&rare.lock);
    }
    uint64_t live = dev_live(home);
    struct core_alloc *a = table_insert(table_for(lane, kind), r->key, h, &existed);
    if (VW_LIKELY(a)) {
        if (VW_UNLIKELY(existed)) {
            account_sub_any(home, lane, a, r->now_ns, live);
            live -= a->size;
        }
        fill_record(a, r, callsite, kind);
        account_add_any(home, lane, a, true, live);
        tracked = true;
    } else {
        __atomic_fetch_add(&totals.allocs_untracked, 1, __ATOMIC_RELAXED);
        set_active(home);
        lane->c.alloc_calls++;
    }
    share_slack(home, lane);
    unlock_lanes(home);
    return tracked;
}

/* Whether a lane of a device with several may record an allocation of `size` alone: within its
 * limit, no retry pending, nothing the timeline must see, not its call site's first allocation.
 * With the lane's lock held. */
static inline bool lane_alone(const struct slot *home, struct slot *lane, uint64_t size,
                              uint32_t callsite, uint64_t now, struct site_ctr **c)
{
    if (lane->c.live_bytes + size > lane->limit || pending.active)
        return false;
    const struct timeline_device *t = __atomic_load_n(&home->tl, __ATOMIC_RELAXED);
    if (t && (now >= t->cur_end || t->nsteps != VW_TL_STEPS || size > t->steps[0].size))
        return false;
    *c = NULL;
    if (callsite) {
        *c = ctr_of(lane, callsite);
        if ((!*c || (*c)->alloc_calls == 0) &&
            !__atomic_load_n(&sitetab.sites[callsite].first_time_ns, __ATOMIC_ACQUIRE))
            return false;
    }
    return true;
}

/* alloc_kind for a lane of a device with several in use, with the lane's lock held (released
 * here): this lane alone, within its limit, or all of them. Apart, so that the common path of a
 * device's only lane keeps its registers. */
static __attribute__((noinline)) bool alloc_shared(struct slot *home, struct slot *lane,
                                                   enum core_kind kind, uint64_t h,
                                                   const struct core_request *r, uint32_t callsite)
{
    bool existed;
    struct site_ctr *c;
    if (kind == CORE_POOL || !lane_alone(home, lane, r->size, callsite, r->now_ns, &c))
        goto sync;
    struct core_alloc *a = table_insert(table_for(lane, kind), r->key, h, &existed);
    if (VW_UNLIKELY(!a || (existed && a->kind == CORE_POOL)))
        goto sync; /* the table is full, or an untracked pool free: the rare way */
    if (VW_UNLIKELY(existed))
        lane_sub(home, lane, a);
    fill_record(a, r, callsite, kind);
    lane_add(home, lane, a, c);
    lane->tl_events++;
    vl_unlock(&lane->lock);
    return true;
sync:
    vl_unlock(&lane->lock);
    return alloc_sync(home, lane, kind, h, r, callsite);
}

/* A tracked device allocation into the trace (trace.h), once the lane's lock is let go: it takes
 * none of its own. `callsite` as checked for its record; the device as fill_record keeps it.
 * Pinned host memory is not device memory. */
static inline __attribute__((always_inline)) void trace_alloc(enum core_kind kind,
                                                              const struct core_request *r,
                                                              uint32_t callsite)
{
    if (kind == CORE_HOST || !trace_on())
        return;
    int device = r->device >= 0 && r->device < VW_MAX_DEVICES ? r->device : VW_DEV_UNKNOWN;
    trace_add((unsigned)lane_of_thread(), r->now_ns, r->key, r->size, r->api,
              trace_site_op(callsite, device, false));
}

/* core_alloc for one kind, a constant in each caller below. */
static inline __attribute__((always_inline)) bool alloc_kind(enum core_kind kind,
                                                             const struct core_request *r)
{
    bool tracked = false, existed;
    uint64_t h = key_hash(r->key);
    uint32_t callsite = r->callsite;
    if (VW_UNLIKELY(callsite >= __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE)))
        callsite = 0;
    int i = kind == CORE_HOST ? HOST_SLOT : core_dev_slot(r->device);
    struct slot *home = &slots[i][0];
    /* Pinned host memory keeps to one lane: it is not what threads race for. */
    struct slot *lane = kind == CORE_HOST ? home : &home[lane_of_thread()];
    /* Both kept in registers, as in take_from: the compiler would otherwise work the home out
     * again from the slot's number at each use. */
    __asm__("" : "+r"(lane), "+r"(home));
    if (kind != CORE_HOST)
        last_lane = lane; /* pinned host memory has its own free calls */
    vl_lock(&lane->lock);
    uint8_t mode = lane->mode;
    if (VW_UNLIKELY(mode != LANE_ALONE)) {
        if (mode == LANE_UNUSED)
            goto sync;
        tracked = alloc_shared(home, lane, kind, h, r, callsite);
        goto traced;
    }
    /* The device's only lane in use: everything here, as one lock per device. */
    if (kind != CORE_HOST && VW_UNLIKELY(pending.active)) {
        vl_lock(&rare.lock);
        match_retry(home, r->device, r->size, true, r->now_ns);
        vl_unlock(&rare.lock);
    }
    struct core_alloc *a = table_insert(table_for(lane, kind), r->key, h, &existed);
    if (VW_LIKELY(a)) {
        uint64_t live = lane->c.live_bytes;
        if (VW_UNLIKELY(existed)) {
            /* The same address again: its free went past us (an untracked path, or a free
             * racing with this allocation). The old one cannot still be live. Only this
             * device's table is asked: a device's addresses are its own (unified addressing
             * gives each device its own range), so a stale record on another is not looked
             * for on every allocation. */
            account_sub_any(home, lane, a, r->now_ns, live);
            live -= a->size;
        }
        fill_record(a, r, callsite, kind);
        account_add(home, lane, a, kind, true, live);
        tracked = true;
    } else {
        __atomic_fetch_add(&totals.allocs_untracked, 1, __ATOMIC_RELAXED);
        set_active(home);
        lane->c.alloc_calls++;
    }
    vl_unlock(&lane->lock);
    if (tracked)
        trace_alloc(kind, r, callsite);
    return tracked;
sync:
    vl_unlock(&lane->lock);
    tracked = alloc_sync(home, lane, kind, h, r, callsite);
traced:
    if (tracked)
        trace_alloc(kind, r, callsite);
    return tracked;
}

static __attribute__((noinline)) bool alloc_other(const struct core_request *r)
{
    switch (r->kind) {
    case CORE_POOL:
        return alloc_kind(CORE_POOL, r);
    case CORE_MANAGED:
        return alloc_kind(CORE_MANAGED, r);
    case CORE_VMM:
        return alloc_kind(CORE_VMM, r);
    case CORE_HOST:
        return alloc_kind(CORE_HOST, r);
    default:
        return alloc_kind(CORE_DEVICE, r);
    }
}

bool core_alloc(const struct core_request *r)
{
    if (!state.ready)
        return false;
    /* cudaMalloc and cuMemAlloc: the path every kind of memory it never has leaves out. */
    if (VW_LIKELY(r->kind == CORE_DEVICE))
        return alloc_kind(CORE_DEVICE, r);
    return alloc_other(r);
}

static inline bool kind_matches(enum core_kind want, enum core_kind have)
{
    if (want == CORE_HOST || want == CORE_VMM)
        return have == want;
    /* Device frees (cudaFree, cuMemFree, the async frees) release any device-side kind. */
    return have == CORE_DEVICE || have == CORE_POOL || have == CORE_MANAGED;
}

/* take_from with every lane of the device held: what a lane may not do alone. */
static __attribute__((noinline)) bool take_sync(struct slot *home, struct slot *lane,
                                                enum core_kind kind, uint64_t key,
                                                struct core_alloc *out, uint64_t now_ns)
{
    bool found = false;
    lock_lanes(home);
    flush_lane_events(home);
    struct table *t = table_for(lane, kind);
    uint32_t j = table_find(t, key, key_hash(key));
    const struct core_alloc *a = j != UINT32_MAX ? &t->slots[j] : NULL;
    if (a && kind_matches(kind, (enum core_kind)a->kind)) {
        *out = *a;
        account_sub_any(home, lane, a, now_ns, dev_live(home));
        lane->c.free_calls++;
        table_remove(t, j);
        found = true;
    }
    unlock_lanes(home);
    return found;
}

/* take_from for a lane of a device with several in use, the allocation found at `j` of its
 * table for `kind`, with the lane's lock held (released here). A free only lowers this lane's
 * live bytes, which keeps it within its limit; pool memory and a new timeline bucket are the
 * device's business. */
static __attribute__((noinline)) bool take_shared(struct slot *home, struct slot *lane,
                                                  enum core_kind kind, uint32_t j,
                                                  struct core_alloc *out, uint64_t now_ns)
{
    struct table *t = table_for(lane, kind);
    const struct core_alloc *a = &t->slots[j];
    const struct timeline_device *tline = __atomic_load_n(&home->tl, __ATOMIC_RELAXED);
    if (a->kind == CORE_POOL || (tline && now_ns >= tline->cur_end)) {
        uint64_t key = a->key; /* read before the lock is let go */
        vl_unlock(&lane->lock);
        return take_sync(home, lane, kind, key, out, now_ns);
    }
    *out = *a;
    lane_sub(home, lane, a);
    lane->tl_events++;
    lane->c.free_calls++;
    table_remove(t, j);
    vl_unlock(&lane->lock);
    return true;
}

/* Take `key` out of lane `lane` of the device whose home is `home`, if it is there. `kind` is
 * the free's (a constant in each caller); the record's own kind decides its counters. */
static inline __attribute__((always_inline)) bool take_from(struct slot *home, struct slot *lane,
                                                            enum core_kind kind, uint64_t key,
                                                            struct core_alloc *out, uint64_t now_ns)
{
    /* The lane's address stays in a register: the compiler would otherwise work it out again
     * from the index at each use (a multiply by the slot's size each time). */
    __asm__("" : "+r"(lane));
    bool found = false;
    vl_lock(&lane->lock);
    struct table *t = table_for(lane, kind);
    uint32_t j = table_find(t, key, key_hash(key));
    const struct core_alloc *a = j != UINT32_MAX ? &t->slots[j] : NULL;
    if (a && kind_matches(kind, (enum core_kind)a->kind)) {
        if (VW_UNLIKELY(lane->mode == LANE_SHARED))
            return take_shared(home, lane, kind, j, out, now_ns);
        /* The device's only lane in use: everything here. */
        *out = *a;
        uint64_t live = lane->c.live_bytes;
        if (kind == CORE_HOST || kind == CORE_VMM)
            account_sub(home, lane, a, kind, now_ns, live);
        else if (VW_LIKELY(a->kind == CORE_DEVICE))
            account_sub(home, lane, a, CORE_DEVICE, now_ns, live);
        else
            account_sub_any(home, lane, a, now_ns, live);
        /* Counted as freed now, in the same locked section; core_untake takes it back. */
        lane->c.free_calls++;
        table_remove(t, j);
        found = true;
    }
    vl_unlock(&lane->lock);
    return found;
}

/* The lanes in use other than `skip`, of the devices in use (`first`'s first). */
static __attribute__((noinline)) bool take_elsewhere(int first, const struct slot *skip,
                                                     enum core_kind kind, uint64_t key,
                                                     struct core_alloc *out, uint64_t now_ns)
{
    struct slot *home = &slots[first][0];
    for (int l = 0; l < LANES; l++)
        if (&home[l] != skip && __atomic_load_n(&home[l].mode, __ATOMIC_RELAXED) &&
            take_from(home, &home[l], kind, key, out, now_ns))
            return true;
    for (int w = 0; w < 2; w++) {
        uint64_t m = __atomic_load_n(&totals.active_mask[w], __ATOMIC_RELAXED);
        while (m) {
            int i = w * 64 + __builtin_ctzll(m);
            m &= m - 1;
            if (i == first || i == HOST_SLOT)
                continue;
            home = &slots[i][0];
            for (int l = 0; l < LANES; l++)
                if (__atomic_load_n(&home[l].mode, __ATOMIC_RELAXED) &&
                    take_from(home, &home[l], kind, key, out, now_ns))
                    return true;
        }
    }
    return false;
}

/* core_take for one kind of free, a constant in each caller below. Before core_init every
 * table is empty, so nothing is found: no test of `ready` is needed. */
static inline __attribute__((always_inline)) bool take_kind(enum core_kind kind, uint64_t key,
                                                            struct core_alloc *out, uint64_t now_ns)
{
    bool found;
    if (kind == CORE_HOST) {
        struct slot *home = &slots[HOST_SLOT][0];
        found = take_from(home, home, kind, key, out, now_ns);
    } else {
        /* This thread's lane of its device first (almost always the one), then the device's
         * other lanes, then the other devices in use. */
        struct slot *lane = last_lane;
        if (VW_UNLIKELY(!lane)) {
            if (!state.ready)
                return false; /* nothing tracked yet, and no lane knows its home */
            lane = &slots[0][lane_of_thread()];
        }
        struct slot *home = lane->home;
        found = take_from(home, lane, kind, key, out, now_ns);
        if (VW_UNLIKELY(!found))
            found = take_elsewhere(slot_index(home), lane, kind, key, out, now_ns);
    }
    if (kind != CORE_HOST && VW_UNLIKELY(pending.active) && found) {
        pending.freed_bytes += out->size;
        pending.freed_count++;
    }
    /* Recorded before the real free runs, as the take is: an allocation that gets the address
     * next comes after this free in the trace too. The coarse clock may read before the
     * allocation's precise time: never before it (trace.h). */
    if (kind != CORE_HOST && found && trace_on())
        trace_add((unsigned)lane_of_thread(), now_ns > out->time_ns ? now_ns : out->time_ns + 1,
                  out->key, out->size, out->api, trace_site_op(out->callsite, out->device, true));
    return found;
}

static __attribute__((noinline)) bool take_other(enum core_kind kind, uint64_t key,
                                                 struct core_alloc *out, uint64_t now_ns)
{
    switch (kind) {
    case CORE_HOST:
        return take_kind(CORE_HOST, key, out, now_ns);
    case CORE_VMM:
        return take_kind(CORE_VMM, key, out, now_ns);
    default: /* every device-side free releases the same kinds */
        return take_kind(CORE_POOL, key, out, now_ns);
    }
}

bool core_take(enum core_kind kind, uint64_t key, struct core_alloc *out, uint64_t now_ns)
{
    if (VW_LIKELY(kind == CORE_DEVICE))
        return take_kind(CORE_DEVICE, key, out, now_ns);
    return take_other(kind, key, out, now_ns);
}

void core_untake(const struct core_alloc *a)
{
    bool existed, back = false;
    struct slot *home = a->kind == CORE_HOST ? &slots[HOST_SLOT][0]
                                             : &slots[core_dev_slot(a->device)][0];
    /* Back into this thread's lane, with every lane held: the counts are sums over the lanes,
     * so it need not be the lane it was taken from, and the device's figures are exact. */
    struct slot *lane = a->kind == CORE_HOST ? home : &home[lane_of_thread()];
    lock_lanes(home);
    lane_use(home, lane);
    uint64_t live = dev_live(home);
    struct core_alloc *slot =
            table_insert(table_for(lane, (enum core_kind)a->kind), a->key, key_hash(a->key), &existed);
    if (slot && !existed) {
        *slot = *a;
        slot->used = 1;
        /* Put the counts back without counting a second allocation call. */
        account_add_any(home, lane, slot, false, live);
        if (slot->callsite && lane->ctr) {
            lane->ctr[slot->callsite].alloc_calls--;
            lane->ctr[slot->callsite].alloc_bytes_total -= slot->size;
        }
        lane->c.alloc_calls--;
        lane->c.free_calls--;
        back = true;
    }
    share_slack(home, lane);
    unlock_lanes(home);
    if (back && a->kind != CORE_HOST && pending.active) {
        pending.freed_bytes -= a->size;
        pending.freed_count--;
    }
}

/* With the failing device's lanes and rare.lock held: its call sites' live bytes now. */
static void keep_failure_sites(struct slot *d)
{
    if (!rare.fail_live)
        rare.fail_live = map(sizeof(*rare.fail_live) * VW_MAX_CALLSITES);
    if (!rare.fail_live)
        return;
    uint32_t n = __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v = 0;
        for (int l = 0; l < LANES; l++)
            v += d[l].ctr ? d[l].ctr[i].live_bytes : 0;
        rare.fail_live[i] = v;
    }
    for (uint32_t i = n; i < rare.fail_nsites; i++)
        rare.fail_live[i] = 0;
    rare.fail_nsites = n;
    rare.fail_any = true;
}

enum core_failure_verdict core_failure(const struct core_request *r, int error_code,
                                       const char *error_name, bool oom, int64_t free_bytes,
                                       uint64_t pool_extra)
{
    if (!state.ready)
        return CORE_FAIL_QUIET;
    int device = r->device;
    uint64_t size = r->size, now_ns = r->now_ns;
    const char *api = r->api;
    uint32_t callsite = r->callsite;
    touch();
    enum core_failure_verdict v = CORE_FAIL_QUIET;
    if (r->kind == CORE_HOST) {
        struct slot *hs = &slots[HOST_SLOT][0];
        vl_lock(&hs->lock);
        hs->c.failed_calls++;
        vl_unlock(&hs->lock);
        return CORE_FAIL_QUIET; /* pinned host memory is not what this tool reports on */
    }
    struct slot *d = slot_of_device(device);
    lock_lanes(d);
    vl_lock(&rare.lock);
    int retry = match_retry(d, device, size, false, now_ns);
    set_active(d);
    d->c.failed_calls++;
    struct core_failure *f = &rare.failures[ring_slot(rare.failures_total, VW_FAILURES_KEPT)];
    f->seq = rare.failures_total++;
    f->time_ns = now_ns;
    f->size = size;
    f->api = api;
    f->error_name = error_name;
    f->error_code = error_code;
    f->device = device;
    f->callsite = callsite < __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE) ? callsite : 0;
    f->tid = (int)syscall(SYS_gettid);
    f->oom = oom;
    f->retried = 0;
    f->retry_freed = 0;
    f->live_at = dev_live(d);
    f->reserved_at = f->live_at + pool_extra;
    f->free_at = free_bytes;
    if (oom) {
        keep_failure_sites(d);
        pending = (struct pending){ .active = true,
                                    .device = device,
                                    .size = size,
                                    .time_ns = now_ns,
                                    .seq = f->seq,
                                    .api = api,
                                    .callsite = f->callsite };
        pending.counted = retry == 2;
        /* A failed retry is the out-of-memory the application will see: always on disk. A
         * first failure may still be rescued by a cache flush, so after the first report
         * such failures are written at most every two seconds. */
        if (retry == 2 || !rare.any_oom_report ||
            now_ns - rare.last_oom_report_ns >= 2000000000ull) {
            v = CORE_FAIL_REPORT;
            pending.reported = true;
            rare.any_oom_report = true;
            rare.last_oom_report_ns = now_ns;
        }
    }
    vl_unlock(&rare.lock);
    unlock_lanes(d);
    return v;
}

void core_note_pool(int device, uint64_t pool)
{
    if (!state.ready)
        return;
    struct slot *d = slot_of_device(device);
    lock_lanes(d);
    d->c.pool_used = true;
    bool known = false;
    for (int i = 0; i < d->c.npools; i++)
        known |= d->c.pools[i] == pool;
    if (!known && d->c.npools < VW_POOLS_PER_DEVICE)
        d->c.pools[d->c.npools++] = pool;
    unlock_lanes(d);
}

void core_limit_crossing(int device, const char *api, uint64_t size, uint32_t callsite,
                         uint64_t now_ns)
{
    if (!state.ready)
        return;
    int slot = core_dev_slot(device);
    struct slot *d = &slots[slot][0];
    lock_lanes(d);
    vl_lock(&rare.lock);
    if (!rare.crossed[slot]) {
        rare.crossed[slot] = true;
        rare.crossings[rare.ncrossings++] = (struct core_crossing){
            .time_ns = now_ns,
            .size = size,
            .live_at = dev_live(d),
            .api = api,
            .device = device,
            .callsite = callsite < __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE) ? callsite : 0
        };
    }
    vl_unlock(&rare.lock);
    unlock_lanes(d);
}

void core_mark(const char *label, uint64_t now_ns)
{
    if (!state.ready)
        return;
    size_t n = strlen(label);
    if (n >= sizeof(rare.markers[0].label)) {
        n = sizeof(rare.markers[0].label) - 1;
        /* Do not cut a UTF-8 sequence in half. */
        while (n > 0 && ((unsigned char)label[n] & 0xc0) == 0x80)
            n--;
    }
    /* Every device at one moment: all their locks (markers are rare). The phase's peak is the
     * sum of each device's most since the previous marker: exact with one device, and with
     * several an upper bound (their peaks need not have come at the same moment). */
    lock_slots();
    vl_lock(&rare.lock);
    uint64_t live = 0, peak = 0;
    for (int i = 0; i <= VW_MAX_DEVICES; i++) {
        struct slot *d = &slots[i][0];
        uint64_t l = dev_live(d);
        live += l;
        peak += d->phase_peak;
        d->phase_peak = l;
        d->c.phase_steps = 0;
        share_slack(d, NULL); /* no slack under the new phase's peak yet */
    }
    struct core_marker *m = &rare.markers[ring_slot(rare.markers_total, VW_EVENTS_KEPT)];
    rare.markers_total++;
    m->time_ns = now_ns;
    m->live_bytes = live;
    m->phase_peak_bytes = peak;
    memcpy(m->label, label, n);
    m->label[n] = 0;
    vl_unlock(&rare.lock);
    unlock_slots();
}

void core_step_reporting(bool on)
{
    __atomic_store_n(&state.steps_reported, on, __ATOMIC_RELAXED);
}

bool core_steps_reported(void)
{
    return __atomic_load_n(&state.steps_reported, __ATOMIC_RELAXED);
}

void core_step(uint64_t now_ns)
{
    if (!state.ready)
        return;
    /* Every device at one moment, as a marker takes them; nothing is kept per step beyond the
     * last one, and the first step's peak, so a job of a million steps costs nothing more. */
    lock_slots();
    for (int i = 0; i < VW_MAX_DEVICES; i++) {
        struct slot *d = &slots[i][0];
        struct core_device *c = &d->c;
        if (!c->active)
            continue;
        uint64_t live = dev_live(d);
        c->steps++;
        c->phase_steps++;
        c->step_time_ns = now_ns;
        c->step_live_bytes = live;
        c->step_peak_bytes = d->phase_peak > live ? d->phase_peak : live;
        if (c->steps == 1)
            c->first_step_peak_bytes = c->step_peak_bytes;
    }
    unlock_slots();
}

void core_measure(int device, int64_t used, int64_t pool_extra, uint64_t now_ns)
{
    if (!state.ready || device < 0)
        return;
    struct slot *s = slot_of_device(device);
    lock_lanes(s);
    struct core_device *d = &s->c;
    if (pool_extra >= 0) {
        d->pool_hold_bytes = d->pool_live_bytes + (uint64_t)pool_extra;
        pool_extra_update(s);
    }
    struct timeline_device *t = __atomic_load_n(&s->tl, __ATOMIC_RELAXED);
    if (t && d->active) {
        flush_lane_events(s);
        uint64_t live = dev_live(s), reserved = live + s->pool_extra;
        if (pool_extra >= 0)
            timeline_record(t, now_ns, live, reserved);
        if (used >= 0)
            timeline_untracked(t, now_ns, used - (int64_t)reserved);
    }
    unlock_lanes(s);
}

void core_va_reserve(int device, int64_t delta)
{
    if (!state.ready)
        return;
    struct slot *d = slot_of_device(device);
    lock_lanes(d);
    d->c.va_reserved_bytes += (uint64_t)delta;
    unlock_lanes(d);
}

/* ---------- snapshots ---------- */

/* A device's counts: its lanes' sums. With every lane held. */
static void lane_sums(const struct slot *home, struct core_device *out)
{
    out->alloc_calls = out->free_calls = out->live_bytes = out->live_count = 0;
    for (int l = 0; l < LANES; l++) {
        out->alloc_calls += home[l].c.alloc_calls;
        out->free_calls += home[l].c.free_calls;
        out->live_bytes += home[l].c.live_bytes;
        out->live_count += home[l].c.live_count;
    }
}

static int copy_ring(void *dst, const void *src, size_t elem, uint64_t total, uint32_t kept)
{
    /* Oldest first: the fixed head, then the ring from its oldest entry. */
    char *d = dst;
    const char *s = src;
    uint32_t n = 0;
    uint64_t first = total <= kept ? 0 : total - (kept - FIRST_KEPT);
    for (uint64_t seq = 0; seq < total && seq < FIRST_KEPT; seq++)
        memcpy(d + elem * n++, s + elem * ring_slot(seq, kept), elem);
    for (uint64_t seq = first > FIRST_KEPT ? first : FIRST_KEPT; seq < total; seq++)
        memcpy(d + elem * n++, s + elem * ring_slot(seq, kept), elem);
    return (int)n;
}

void core_snapshot(struct core_snapshot *s)
{
    memset(s, 0, sizeof(*s));
    if (!state.ready)
        return;
    /* Every device slot, then the rare state: one moment for all the counters. */
    lock_slots();
    vl_lock(&rare.lock);
    for (int i = 0; i <= VW_MAX_DEVICES; i++) {
        s->devices[i] = slots[i][0].c;
        lane_sums(&slots[i][0], &s->devices[i]);
    }
    struct core_device h = slots[HOST_SLOT][0].c;
    lane_sums(&slots[HOST_SLOT][0], &h);
    s->host = (struct core_host){ .live_bytes = h.live_bytes,
                                  .peak_live_bytes = h.peak_live_bytes,
                                  .alloc_calls = h.alloc_calls,
                                  .free_calls = h.free_calls,
                                  .failed_calls = h.failed_calls };
    s->nfailures = copy_ring(s->failures, rare.failures, sizeof(*rare.failures),
                             rare.failures_total, VW_FAILURES_KEPT);
    s->failures_total = rare.failures_total;
    s->nevents = copy_ring(s->events, rare.events, sizeof(*rare.events), rare.events_total,
                           VW_EVENTS_KEPT);
    s->events_total = rare.events_total;
    s->nmarkers = copy_ring(s->markers, rare.markers, sizeof(*rare.markers), rare.markers_total,
                            VW_EVENTS_KEPT);
    s->markers_total = rare.markers_total;
    memcpy(s->crossings, rare.crossings, sizeof(rare.crossings));
    s->ncrossings = rare.ncrossings;
    s->ncallsites = __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE);
    s->callsites_dropped = __atomic_load_n(&totals.callsites_dropped, __ATOMIC_RELAXED);
    s->allocs_untracked = __atomic_load_n(&totals.allocs_untracked, __ATOMIC_RELAXED);
    vl_unlock(&rare.lock);
    unlock_slots();
}

uint32_t core_copy_callsites(struct core_callsite *out, uint32_t n, uint64_t *fout, uint32_t fcap)
{
    uint32_t used = 0;
    if (!state.ready)
        return 0;
    lock_slots();
    vl_lock(&rare.lock);
    uint32_t ns = __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE);
    if (n > ns)
        n = ns;
    for (uint32_t i = 0; i < n; i++) {
        const struct site *r = &sitetab.sites[i];
        struct core_callsite *o = &out[i];
        memset(o, 0, sizeof(*o));
        o->hash = r->hash;
        o->first_time_ns = __atomic_load_n(&r->first_time_ns, __ATOMIC_ACQUIRE);
        if (o->first_time_ns) {
            o->first_live_before = r->first_live_before;
            o->first_peak_before = r->first_peak_before;
        }
        for (int k = 0; k < NSLOTS; k++)
            for (int l = 0; l < LANES; l++) {
                const struct slot *home = &slots[k][0], *d = &home[l];
                if (!d->ctr)
                    continue;
                const struct site_ctr *c = &d->ctr[i];
                o->live_bytes += c->live_bytes;
                o->live_count += c->live_count;
                o->alloc_calls += c->alloc_calls;
                o->alloc_bytes_total += c->alloc_bytes_total;
                if (k != HOST_SLOT)
                    o->live_bytes_at_peak +=
                            c->epoch == home->epoch ? c->at_peak : c->live_bytes;
            }
        o->has_failure = rare.fail_any;
        o->live_bytes_at_failure = rare.fail_any && i < rare.fail_nsites ? rare.fail_live[i] : 0;
        uint32_t k = r->nframes;
        if (used + k > fcap)
            k = fcap - used;
        memcpy(&fout[used], &sitetab.frames[r->frames_off], sizeof(*fout) * k);
        o->frames_off = used;
        o->nframes = (uint16_t)k;
        used += k;
    }
    vl_unlock(&rare.lock);
    unlock_slots();
    return used;
}

/* A min-heap of the largest allocations seen so far, by size. */
static void heap_sift_down(struct core_alloc *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].size < h[m].size)
            m = l;
        if (r < n && h[r].size < h[m].size)
            m = r;
        if (m == i)
            return;
        struct core_alloc t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

int core_largest_live(struct core_alloc *out, int max, uint64_t *total)
{
    int n = 0;
    uint64_t count = 0;
    if (!state.ready || max <= 0) {
        *total = 0;
        return 0;
    }
    /* Every slot at once, so the list is one moment's. */
    lock_slots();
    for (int s = 0; s < NSLOTS * LANES; s++) {
        struct slot *d = &slots[s / LANES][s % LANES];
        struct table *ts[2] = { &d->ptrs, &d->vmm };
        for (int t = 0; t < 2; t++) {
            for (uint32_t i = 0; i < ts[t]->cap; i++) {
                const struct core_alloc *a = &ts[t]->slots[i];
                if (!a->used || a->kind == CORE_HOST)
                    continue;
                count++;
                if (n < max) {
                    out[n++] = *a;
                    if (n == max)
                        for (int k = n / 2 - 1; k >= 0; k--)
                            heap_sift_down(out, n, k);
                } else if (a->size > out[0].size) {
                    out[0] = *a;
                    heap_sift_down(out, n, 0);
                }
            }
        }
    }
    unlock_slots();
    /* Largest first: heap-sort the min-heap in place (it is already a heap when n == max). */
    if (n < max)
        for (int k = n / 2 - 1; k >= 0; k--)
            heap_sift_down(out, n, k);
    for (int end = n - 1; end > 0; end--) {
        struct core_alloc t = out[0];
        out[0] = out[end];
        out[end] = t;
        heap_sift_down(out, end, 0);
    }
    *total = count;
    return n;
}

uint64_t core_peak_any(void)
{
    return __atomic_load_n(&totals.peak_any, __ATOMIC_RELAXED);
}

uint32_t core_callsites_count(void)
{
    return state.ready ? __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE) - 1 : 0;
}

uint64_t core_live_total(void)
{
    /* The devices that ever allocated, each read on its own (no lock): a figure for the status
     * file, which a concurrent allocation may leave one event behind. */
    uint64_t sum = 0;
    for (int w = 0; w < 2; w++) {
        uint64_t m = __atomic_load_n(&totals.active_mask[w], __ATOMIC_RELAXED);
        while (m) {
            int i = w * 64 + __builtin_ctzll(m);
            m &= m - 1;
            if (i <= VW_MAX_DEVICES)
                for (int l = 0; l < LANES; l++)
                    sum += __atomic_load_n(&slots[i][l].c.live_bytes, __ATOMIC_RELAXED);
        }
    }
    return sum;
}

bool core_copy_timeline(int slot, struct timeline_device *out)
{
    bool have = false;
    if (!state.ready || !state.tl || slot < 0 || slot > VW_MAX_DEVICES)
        return false;
    lock_lanes(&slots[slot][0]);
    if (state.tl[slot].started) {
        flush_lane_events(&slots[slot][0]);
        *out = state.tl[slot];
        have = true;
    }
    unlock_lanes(&slots[slot][0]);
    return have;
}

void core_timeline_enable(bool on)
{
    lock_slots();
    __atomic_store_n(&state.tl_on, on, __ATOMIC_RELAXED);
    timeline_attach();
    unlock_slots();
}

size_t core_timeline_bytes(void)
{
    return sizeof(struct timeline_device) * (VW_MAX_DEVICES + 1);
}

size_t core_mapped_bytes(void)
{
    size_t b = 0;
    uint32_t n = __atomic_load_n(&sitetab.nsites, __ATOMIC_ACQUIRE);
    for (int i = 0; i < NSLOTS * LANES; i++) {
        struct slot *d = &slots[i / LANES][i % LANES];
        vl_lock(&d->lock);
        b += sizeof(struct core_alloc) * (d->ptrs.cap + d->vmm.cap);
        if (d->ctr)
            b += sizeof(struct site_ctr) * n; /* the pages in use: filled front to back */
        vl_unlock(&d->lock);
    }
    vl_lock(&sitetab.lock);
    b += sizeof(*sitetab.sites) * n + sizeof(*sitetab.frames) * sitetab.nframes +
         sizeof(*sitetab.index) * INDEX_CAP;
    vl_unlock(&sitetab.lock);
    return b;
}
