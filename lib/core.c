/* The accounting core: tables of live allocations and call sites, per-device counters.
 *
 * Memory: every table is an anonymous mapping made here (never malloc), so the core can run
 * inside any hook, including ones reached from a malloc replacement. The allocation tables
 * start small and double under the lock; the call-site arrays are reserved once with
 * MAP_NORESERVE and filled front to back, so only the pages in use cost memory. */
#include "core.h"
#include "util.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FIRST_KEPT 64 /* failures and events: the first ones stay, the rest is a ring */
#define TABLE_MIN 4096u
#define FRAME_ARENA (8u << 20) /* frames in all interned stacks: 64 MiB of address space */
#define INDEX_CAP (2u * VW_MAX_CALLSITES)

struct table {
    struct core_alloc *slots;
    uint32_t cap; /* power of two, 0 before first use */
    uint32_t count;
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

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool ready;
static bool touched;

static struct table ptrs; /* keyed by address: device, pool, managed and pinned host memory */
static struct table vmm;  /* keyed by cuMemCreate handle */

static struct core_callsite *sites; /* [VW_MAX_CALLSITES], id 0 is the overflow site */
static uint32_t nsites;
static uint64_t *frames; /* [FRAME_ARENA] */
static uint32_t nframes;
static uint32_t *site_index; /* [INDEX_CAP] open addressing over ids, 0 = empty */
static uint64_t callsites_dropped, allocs_untracked;

static struct core_device devices[VW_MAX_DEVICES + 1];
static struct core_host host;
static struct core_failure failures[VW_FAILURES_KEPT];
static uint64_t failures_total;
static struct core_event events[VW_EVENTS_KEPT];
static uint64_t events_total;
static struct core_marker markers[VW_EVENTS_KEPT];
static uint64_t markers_total;
static uint64_t total_live, phase_peak; /* all devices: for the markers' phase figures */
static uint64_t peak_any;               /* max over devices of peak_live_bytes */
static struct core_crossing crossings[VW_MAX_DEVICES + 1];
static int ncrossings;
static bool crossed[VW_MAX_DEVICES + 1];
static uint64_t last_oom_report_ns;
static bool any_oom_report;
/* Failures known to be final (the retry failed too, or none came) and flushes rescued by a
 * retry, on all threads: read without the lock by the status file. */
static uint64_t ooms_final, flushes_total;
/* A report on disk describes a failure that a retry has since rescued. */
static bool report_stale;

static VW_TLS struct pending pending;

/* The whole-run timeline, one per device slot: mapped once, so its memory never grows. */
static struct tl_device *tl;
static bool tl_on = true;

static void *map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void init_once(void)
{
    sites = map(sizeof(*sites) * VW_MAX_CALLSITES);
    frames = map(sizeof(*frames) * FRAME_ARENA);
    site_index = map(sizeof(*site_index) * INDEX_CAP);
    if (!sites || !frames || !site_index)
        return;
    /* Without it the core still works; the reports then have no timeline. */
    tl = map(sizeof(*tl) * (VW_MAX_DEVICES + 1));
    nsites = 1; /* the overflow site: no frames */
    ready = true;
}

bool core_init(void)
{
    pthread_once(&once, init_once);
    return ready;
}

static void table_drop(struct table *t)
{
    if (t->slots)
        munmap(t->slots, sizeof(*t->slots) * t->cap);
    memset(t, 0, sizeof(*t));
}

void core_reset(void)
{
    pthread_mutex_lock(&lock);
    table_drop(&ptrs);
    table_drop(&vmm);
    if (ready) {
        memset(sites, 0, sizeof(*sites) * nsites);
        memset(site_index, 0, sizeof(*site_index) * INDEX_CAP);
    }
    nsites = 1;
    nframes = 0;
    callsites_dropped = allocs_untracked = 0;
    memset(devices, 0, sizeof(devices));
    memset(&host, 0, sizeof(host));
    failures_total = events_total = markers_total = 0;
    ncrossings = 0;
    total_live = phase_peak = 0;
    peak_any = 0;
    memset(crossed, 0, sizeof(crossed));
    last_oom_report_ns = 0;
    any_oom_report = false;
    ooms_final = flushes_total = 0;
    report_stale = false;
    touched = false;
    memset(&pending, 0, sizeof(pending));
    if (tl)
        for (int i = 0; i <= VW_MAX_DEVICES; i++)
            tl[i].started = false; /* cleared at its next first event: untouched pages stay so */
    pthread_mutex_unlock(&lock);
}

void core_lock_for_fork(void)
{
    pthread_mutex_lock(&lock);
}

void core_unlock_after_fork(bool child)
{
    pthread_mutex_unlock(&lock);
    /* The child has one thread; whatever other threads were doing is gone. It forgets the
     * parent's memory: it must never report the parent's allocations as its own, and writes
     * nothing unless it allocates itself. */
    if (child)
        core_reset();
}

bool core_touched(void)
{
    return __atomic_load_n(&touched, __ATOMIC_RELAXED);
}

static void touch(void)
{
    if (!__atomic_load_n(&touched, __ATOMIC_RELAXED))
        __atomic_store_n(&touched, true, __ATOMIC_RELAXED);
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
        uint32_t j = (uint32_t)mix64(t->slots[i].key) & (ncap - 1);
        while (ns[j].used)
            j = (j + 1) & (ncap - 1);
        ns[j] = t->slots[i];
    }
    if (t->slots)
        munmap(t->slots, sizeof(*t->slots) * t->cap);
    t->slots = ns;
    t->cap = ncap;
    return true;
}

static struct core_alloc *table_find(struct table *t, uint64_t key)
{
    if (!t->cap)
        return NULL;
    uint32_t m = t->cap - 1;
    for (uint32_t j = (uint32_t)mix64(key) & m;; j = (j + 1) & m) {
        if (!t->slots[j].used)
            return NULL;
        if (t->slots[j].key == key)
            return &t->slots[j];
    }
}

/* Inserts, or returns the existing record for the key (the caller decides what that means). */
static struct core_alloc *table_insert(struct table *t, uint64_t key, bool *existed)
{
    *existed = false;
    if ((uint64_t)(t->count + 1) * 10 > (uint64_t)t->cap * 7 && !table_grow(t))
        return NULL;
    uint32_t m = t->cap - 1;
    uint32_t j = (uint32_t)mix64(key) & m;
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

static void table_remove(struct table *t, struct core_alloc *slot)
{
    uint32_t m = t->cap - 1;
    uint32_t i = (uint32_t)(slot - t->slots);
    /* Shift later members of the probe run back so lookups never meet a hole too early. */
    for (uint32_t j = (i + 1) & m; t->slots[j].used; j = (j + 1) & m) {
        uint32_t home = (uint32_t)mix64(t->slots[j].key) & m;
        bool movable = (i <= j) ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            t->slots[i] = t->slots[j];
            i = j;
        }
    }
    memset(&t->slots[i], 0, sizeof(t->slots[i]));
    t->count--;
}

static struct table *table_for(enum core_kind kind)
{
    return kind == CORE_VMM ? &vmm : &ptrs;
}

/* ---------- call sites ---------- */

static bool same_site(uint32_t c, uint64_t h, const uint64_t *f, int n)
{
    const struct core_callsite *s = &sites[c];
    return s->hash == h && s->nframes == n &&
           memcmp(&frames[s->frames_off], f, sizeof(*f) * (size_t)n) == 0;
}

uint32_t core_callsite(const uint64_t *f, int n)
{
    if (!ready)
        return 0;
    if (n < 0)
        n = 0;
    if (n > VW_MAX_FRAMES)
        n = VW_MAX_FRAMES;
    uint64_t h = hash_frames(f, n);
    uint32_t m = INDEX_CAP - 1;
    /* Lock-free first: a site's record and frames are written before its index slot is
     * published (release), and never change after, so a reader that sees the slot sees them.
     * Most allocations come from call sites seen before. */
    for (uint32_t j = (uint32_t)h & m;; j = (j + 1) & m) {
        uint32_t c = __atomic_load_n(&site_index[j], __ATOMIC_ACQUIRE);
        if (!c)
            break;
        if (same_site(c, h, f, n))
            return c;
    }
    uint32_t id = 0;
    pthread_mutex_lock(&lock);
    uint32_t j = (uint32_t)h & m;
    for (;; j = (j + 1) & m) {
        uint32_t c = site_index[j];
        if (!c)
            break;
        if (same_site(c, h, f, n)) {
            id = c;
            goto out;
        }
    }
    if (nsites >= VW_MAX_CALLSITES || nframes + (uint32_t)n > FRAME_ARENA) {
        callsites_dropped++;
        goto out; /* the overflow site */
    }
    id = nsites;
    sites[id].hash = h;
    sites[id].nframes = (uint16_t)n;
    sites[id].frames_off = nframes;
    memcpy(&frames[nframes], f, sizeof(*f) * (size_t)n);
    nframes += (uint32_t)n;
    __atomic_store_n(&nsites, nsites + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&site_index[j], id, __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&lock);
    return id;
}

/* ---------- events ---------- */

static uint32_t ring_slot(uint64_t seq, uint32_t kept)
{
    return seq < FIRST_KEPT ? (uint32_t)seq
                            : FIRST_KEPT + (uint32_t)((seq - FIRST_KEPT) % (kept - FIRST_KEPT));
}

static struct core_failure *failure_by_seq(uint64_t seq)
{
    struct core_failure *f = &failures[ring_slot(seq, VW_FAILURES_KEPT)];
    return (seq < failures_total && f->seq == seq) ? f : NULL;
}

/* Called with the lock held, for every allocation outcome on this thread. Returns 1 when this
 * request retried a pending failure and succeeded, 2 when it retried and failed. A pending
 * failure that this request does not retry was final: the application got the error. */
static int match_retry(int device, uint64_t size, bool ok, uint64_t now)
{
    if (!pending.active)
        return 0;
    pending.active = false;
    if (pending.size != size || pending.device != device ||
        now - pending.time_ns > VW_RETRY_WINDOW_NS) {
        if (pending.seq != UINT64_MAX && !pending.counted)
            __atomic_store_n(&ooms_final, ooms_final + 1, __ATOMIC_RELAXED);
        return 0;
    }
    struct core_failure *f = failure_by_seq(pending.seq);
    if (f)
        f->retried = ok ? 1 : 2;
    if (!ok) {
        /* PyTorch gives up after one retry: final at once, so a watcher need not wait for the
         * exit. CuPy tries a third time; should that succeed, the count is taken back. */
        if (!pending.counted)
            __atomic_store_n(&ooms_final, ooms_final + 1, __ATOMIC_RELAXED);
        return 2;
    }
    if (pending.counted)
        __atomic_store_n(&ooms_final, ooms_final - 1, __ATOMIC_RELAXED);
    if (pending.reported)
        report_stale = true;
    struct core_event *e = &events[ring_slot(events_total, VW_EVENTS_KEPT)];
    events_total++;
    e->time_ns = pending.time_ns;
    e->size = size;
    e->freed_bytes = pending.freed_bytes;
    e->freed_count = pending.freed_count;
    e->api = pending.api;
    e->device = device;
    e->callsite = pending.callsite;
    devices[core_dev_slot(device)].cache_flushes++;
    __atomic_store_n(&flushes_total, flushes_total + 1, __ATOMIC_RELAXED);
    return 1;
}

void core_observe_refusal(int device, uint64_t size, const char *api, uint32_t callsite,
                          uint64_t now_ns)
{
    if (!ready)
        return;
    touch();
    pthread_mutex_lock(&lock);
    match_retry(device, size, false, now_ns);
    devices[core_dev_slot(device)].active = true;
    /* No failure record and no report: the emulated card's answer, which the retry decides.
     * seq UINT64_MAX finds no failure, and an unmatched refusal is not a final failure. */
    pending = (struct pending){ .active = true,
                                .device = device,
                                .size = size,
                                .time_ns = now_ns,
                                .seq = UINT64_MAX,
                                .api = api,
                                .callsite = callsite < nsites ? callsite : 0 };
    pthread_mutex_unlock(&lock);
}

bool core_observe_is_retry(int device, uint64_t size, uint64_t now_ns)
{
    /* Only this thread's pending refusal can be retried by this thread: no lock needed. */
    return ready && pending.active && pending.seq == UINT64_MAX && pending.device == device &&
           pending.size == size && now_ns - pending.time_ns <= VW_RETRY_WINDOW_NS;
}

void core_pressure(uint64_t *final_ooms, uint64_t *flushes)
{
    *final_ooms = __atomic_load_n(&ooms_final, __ATOMIC_RELAXED);
    *flushes = __atomic_load_n(&flushes_total, __ATOMIC_RELAXED);
}

bool core_take_report_stale(void)
{
    if (!ready || !__atomic_load_n(&report_stale, __ATOMIC_RELAXED))
        return false;
    pthread_mutex_lock(&lock);
    bool was = report_stale;
    report_stale = false;
    pthread_mutex_unlock(&lock);
    return was;
}

void core_end_pending(void)
{
    /* At exit: a failure still waiting for its retry never got one. */
    if (!ready)
        return;
    pthread_mutex_lock(&lock);
    if (pending.active && pending.seq != UINT64_MAX && !pending.counted)
        __atomic_store_n(&ooms_final, ooms_final + 1, __ATOMIC_RELAXED);
    pending.active = false;
    pthread_mutex_unlock(&lock);
}

/* ---------- allocations ---------- */

/* Reserved memory as the timeline sees it between measurements: the pools are taken to keep
 * the most they handed out (PyTorch sets its pool's release threshold so that they do), until
 * the driver is next asked (core_measure). */
static inline uint64_t reserved_estimate(const struct core_device *d)
{
    return d->live_bytes +
           (d->pool_hold_bytes > d->pool_live_bytes ? d->pool_hold_bytes - d->pool_live_bytes : 0);
}

/* `fresh`: a new allocation (not one put back after a failed free), a candidate growth step. */
static void account_add(const struct core_alloc *a, uint64_t now, bool fresh)
{
    if (a->callsite < nsites) {
        struct core_callsite *s = &sites[a->callsite];
        if (!s->first_time_ns && a->kind != CORE_HOST) {
            /* Where the run stood when this call chain first asked for memory: the start of
             * its phase, for runs without markers (a training step, validation). */
            const struct core_device *d = &devices[core_dev_slot(a->device)];
            s->first_time_ns = a->time_ns ? a->time_ns : 1;
            s->first_live_before = d->live_bytes;
            s->first_peak_before = d->peak_live_bytes;
        }
        s->live_bytes += a->size;
        s->live_count++;
        s->alloc_calls++;
        s->alloc_bytes_total += a->size;
    }
    if (a->kind == CORE_HOST) {
        host.alloc_calls++;
        host.live_bytes += a->size;
        if (host.live_bytes > host.peak_live_bytes)
            host.peak_live_bytes = host.live_bytes;
        return;
    }
    struct core_device *d = &devices[core_dev_slot(a->device)];
    d->active = true;
    d->alloc_calls++;
    d->live_bytes += a->size;
    d->live_count++;
    __atomic_store_n(&total_live, total_live + a->size, __ATOMIC_RELAXED);
    if (total_live > phase_peak)
        phase_peak = total_live;
    if (a->kind == CORE_POOL) {
        d->pool_live_bytes += a->size;
        d->pool_used = true;
        if (d->pool_live_bytes > d->pool_hold_bytes)
            d->pool_hold_bytes = d->pool_live_bytes;
    }
    if (d->live_bytes > d->peak_live_bytes) {
        d->peak_live_bytes = d->live_bytes;
        d->peak_time_ns = a->time_ns;
        if (d->peak_live_bytes > peak_any)
            __atomic_store_n(&peak_any, d->peak_live_bytes, __ATOMIC_RELAXED);
    }
    if (VW_LIKELY(tl && tl_on)) {
        struct tl_device *t = &tl[core_dev_slot(a->device)];
        tl_record(t, now, d->live_bytes, reserved_estimate(d));
        if (fresh)
            tl_step(t, now, a->size, d->live_bytes, a->api, a->callsite);
    }
}

static void account_sub(const struct core_alloc *a, uint64_t now)
{
    if (a->callsite < nsites) {
        struct core_callsite *s = &sites[a->callsite];
        s->live_bytes -= a->size;
        s->live_count--;
    }
    if (a->kind == CORE_HOST) {
        host.live_bytes -= a->size;
        return;
    }
    struct core_device *d = &devices[core_dev_slot(a->device)];
    d->live_bytes -= a->size;
    d->live_count--;
    __atomic_store_n(&total_live, total_live - a->size, __ATOMIC_RELAXED);
    if (a->kind == CORE_POOL)
        d->pool_live_bytes -= a->size;
    if (VW_LIKELY(tl && tl_on))
        tl_record(&tl[core_dev_slot(a->device)], now, d->live_bytes, reserved_estimate(d));
}

bool core_alloc(enum core_kind kind, uint64_t key, uint64_t size, int device, const char *api,
                uint32_t callsite, uint64_t now_ns)
{
    if (!ready)
        return false;
    touch();
    bool tracked = false, existed;
    pthread_mutex_lock(&lock);
    if (kind != CORE_HOST)
        match_retry(device, size, true, now_ns);
    struct table *t = table_for(kind);
    struct core_alloc *a = table_insert(t, key, &existed);
    if (a) {
        if (existed) {
            /* The same address again: its free went past us (an untracked path, or a free
             * racing with this allocation). The old one cannot still be live. */
            account_sub(a, now_ns);
        }
        a->size = size;
        a->time_ns = now_ns;
        a->api = api;
        a->callsite = callsite < nsites ? callsite : 0;
        a->device = (int16_t)(device >= 0 && device < VW_MAX_DEVICES ? device : VW_DEV_UNKNOWN);
        a->kind = (uint8_t)kind;
        account_add(a, now_ns, true);
        tracked = true;
    } else {
        allocs_untracked++;
        if (kind == CORE_HOST)
            host.alloc_calls++;
        else
            devices[core_dev_slot(device)].alloc_calls++;
    }
    pthread_mutex_unlock(&lock);
    return tracked;
}

static bool kind_matches(enum core_kind want, enum core_kind have)
{
    if (want == CORE_HOST || want == CORE_VMM)
        return have == want;
    /* Device frees (cudaFree, cuMemFree, the async frees) release any device-side kind. */
    return have == CORE_DEVICE || have == CORE_POOL || have == CORE_MANAGED;
}

bool core_take(enum core_kind kind, uint64_t key, struct core_alloc *out, uint64_t now_ns)
{
    if (!ready)
        return false;
    bool found = false;
    pthread_mutex_lock(&lock);
    struct table *t = table_for(kind);
    struct core_alloc *a = table_find(t, key);
    if (a && kind_matches(kind, (enum core_kind)a->kind)) {
        *out = *a;
        account_sub(a, now_ns);
        table_remove(t, a);
        found = true;
        /* Counted as freed now, in the same locked section; core_untake takes it back. */
        if (out->kind == CORE_HOST) {
            host.free_calls++;
        } else {
            devices[core_dev_slot(out->device)].free_calls++;
            if (pending.active) {
                pending.freed_bytes += out->size;
                pending.freed_count++;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void core_untake(const struct core_alloc *a)
{
    bool existed;
    pthread_mutex_lock(&lock);
    struct table *t = table_for((enum core_kind)a->kind);
    struct core_alloc *slot = table_insert(t, a->key, &existed);
    if (slot && !existed) {
        *slot = *a;
        slot->used = 1;
        /* Put the counts back without counting a second allocation call. */
        account_add(slot, slot->time_ns, false);
        if (slot->callsite < nsites) {
            sites[slot->callsite].alloc_calls--;
            sites[slot->callsite].alloc_bytes_total -= slot->size;
        }
        if (slot->kind == CORE_HOST) {
            host.alloc_calls--;
            host.free_calls--;
        } else {
            devices[core_dev_slot(slot->device)].alloc_calls--;
            devices[core_dev_slot(slot->device)].free_calls--;
            if (pending.active) {
                pending.freed_bytes -= slot->size;
                pending.freed_count--;
            }
        }
    }
    pthread_mutex_unlock(&lock);
}

enum core_failure_verdict core_failure(enum core_kind kind, int device, uint64_t size,
                                       const char *api, int error_code, const char *error_name,
                                       bool oom, uint32_t callsite, int64_t free_bytes,
                                       uint64_t pool_extra, uint64_t now_ns)
{
    if (!ready)
        return CORE_FAIL_QUIET;
    touch();
    enum core_failure_verdict v = CORE_FAIL_QUIET;
    pthread_mutex_lock(&lock);
    if (kind == CORE_HOST) {
        host.failed_calls++;
        pthread_mutex_unlock(&lock);
        return CORE_FAIL_QUIET; /* pinned host memory is not what this tool reports on */
    }
    int retry = match_retry(device, size, false, now_ns);
    struct core_device *d = &devices[core_dev_slot(device)];
    d->active = true;
    d->failed_calls++;
    struct core_failure *f = &failures[ring_slot(failures_total, VW_FAILURES_KEPT)];
    f->seq = failures_total++;
    f->time_ns = now_ns;
    f->size = size;
    f->api = api;
    f->error_name = error_name;
    f->error_code = error_code;
    f->device = device;
    f->callsite = callsite < nsites ? callsite : 0;
    f->tid = (int)syscall(SYS_gettid);
    f->oom = oom;
    f->retried = 0;
    f->live_at = d->live_bytes;
    f->reserved_at = d->live_bytes + pool_extra;
    f->free_at = free_bytes;
    if (oom) {
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
        if (retry == 2 || !any_oom_report || now_ns - last_oom_report_ns >= 2000000000ull) {
            v = CORE_FAIL_REPORT;
            pending.reported = true;
            any_oom_report = true;
            last_oom_report_ns = now_ns;
        }
    }
    pthread_mutex_unlock(&lock);
    return v;
}

void core_note_pool(int device, uint64_t pool)
{
    if (!ready)
        return;
    pthread_mutex_lock(&lock);
    struct core_device *d = &devices[core_dev_slot(device)];
    d->pool_used = true;
    bool known = false;
    for (int i = 0; i < d->npools; i++)
        known |= d->pools[i] == pool;
    if (!known && d->npools < VW_POOLS_PER_DEVICE)
        d->pools[d->npools++] = pool;
    pthread_mutex_unlock(&lock);
}

void core_limit_crossing(int device, const char *api, uint64_t size, uint32_t callsite,
                         uint64_t now_ns)
{
    if (!ready)
        return;
    int slot = core_dev_slot(device);
    pthread_mutex_lock(&lock);
    if (!crossed[slot]) {
        crossed[slot] = true;
        crossings[ncrossings++] =
                (struct core_crossing){ .time_ns = now_ns,
                                        .size = size,
                                        .live_at = devices[slot].live_bytes,
                                        .api = api,
                                        .device = device,
                                        .callsite = callsite < nsites ? callsite : 0 };
    }
    pthread_mutex_unlock(&lock);
}

void core_mark(const char *label, uint64_t now_ns)
{
    if (!ready)
        return;
    size_t n = strlen(label);
    if (n >= sizeof(markers[0].label)) {
        n = sizeof(markers[0].label) - 1;
        /* Do not cut a UTF-8 sequence in half. */
        while (n > 0 && ((unsigned char)label[n] & 0xc0) == 0x80)
            n--;
    }
    pthread_mutex_lock(&lock);
    struct core_marker *m = &markers[ring_slot(markers_total, VW_EVENTS_KEPT)];
    markers_total++;
    m->time_ns = now_ns;
    m->live_bytes = total_live;
    m->phase_peak_bytes = phase_peak;
    phase_peak = total_live;
    memcpy(m->label, label, n);
    m->label[n] = 0;
    pthread_mutex_unlock(&lock);
}

void core_measure(int device, int64_t used, int64_t pool_extra, uint64_t now_ns)
{
    if (!ready || device < 0)
        return;
    pthread_mutex_lock(&lock);
    struct core_device *d = &devices[core_dev_slot(device)];
    if (pool_extra >= 0)
        d->pool_hold_bytes = d->pool_live_bytes + (uint64_t)pool_extra;
    if (tl && tl_on && d->active) {
        struct tl_device *t = &tl[core_dev_slot(device)];
        uint64_t reserved = reserved_estimate(d);
        if (pool_extra >= 0)
            tl_record(t, now_ns, d->live_bytes, reserved);
        if (used >= 0)
            tl_untracked(t, now_ns, used - (int64_t)reserved);
    }
    pthread_mutex_unlock(&lock);
}

void core_va_reserve(int device, int64_t delta)
{
    if (!ready)
        return;
    pthread_mutex_lock(&lock);
    struct core_device *d = &devices[core_dev_slot(device)];
    d->va_reserved_bytes += (uint64_t)delta;
    pthread_mutex_unlock(&lock);
}

/* ---------- snapshots ---------- */

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
    if (!ready)
        return;
    pthread_mutex_lock(&lock);
    memcpy(s->devices, devices, sizeof(devices));
    s->host = host;
    s->nfailures =
            copy_ring(s->failures, failures, sizeof(*failures), failures_total, VW_FAILURES_KEPT);
    s->failures_total = failures_total;
    s->nevents = copy_ring(s->events, events, sizeof(*events), events_total, VW_EVENTS_KEPT);
    s->events_total = events_total;
    s->nmarkers = copy_ring(s->markers, markers, sizeof(*markers), markers_total, VW_EVENTS_KEPT);
    s->markers_total = markers_total;
    memcpy(s->crossings, crossings, sizeof(crossings));
    s->ncrossings = ncrossings;
    s->ncallsites = nsites;
    s->callsites_dropped = callsites_dropped;
    s->allocs_untracked = allocs_untracked;
    pthread_mutex_unlock(&lock);
}

uint32_t core_copy_callsites(struct core_callsite *out, uint32_t n, uint64_t *fout, uint32_t fcap)
{
    uint32_t used = 0;
    if (!ready)
        return 0;
    pthread_mutex_lock(&lock);
    if (n > nsites)
        n = nsites;
    for (uint32_t i = 0; i < n; i++) {
        out[i] = sites[i];
        uint32_t k = sites[i].nframes;
        if (used + k > fcap)
            k = fcap - used;
        memcpy(&fout[used], &frames[sites[i].frames_off], sizeof(*fout) * k);
        out[i].frames_off = used;
        out[i].nframes = (uint16_t)k;
        used += k;
    }
    pthread_mutex_unlock(&lock);
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
    if (!ready || max <= 0) {
        *total = 0;
        return 0;
    }
    pthread_mutex_lock(&lock);
    struct table *ts[2] = { &ptrs, &vmm };
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
    pthread_mutex_unlock(&lock);
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
    return __atomic_load_n(&peak_any, __ATOMIC_RELAXED);
}

uint32_t core_callsites_count(void)
{
    return ready ? __atomic_load_n(&nsites, __ATOMIC_ACQUIRE) - 1 : 0;
}

uint64_t core_live_total(void)
{
    return __atomic_load_n(&total_live, __ATOMIC_RELAXED);
}

bool core_copy_timeline(int slot, struct tl_device *out)
{
    bool have = false;
    if (!ready || !tl || slot < 0 || slot > VW_MAX_DEVICES)
        return false;
    pthread_mutex_lock(&lock);
    if (tl[slot].started) {
        *out = tl[slot];
        have = true;
    }
    pthread_mutex_unlock(&lock);
    return have;
}

void core_timeline_enable(bool on)
{
    pthread_mutex_lock(&lock);
    tl_on = on;
    pthread_mutex_unlock(&lock);
}

size_t core_timeline_bytes(void)
{
    return sizeof(struct tl_device) * (VW_MAX_DEVICES + 1);
}

size_t core_mapped_bytes(void)
{
    size_t b = 0;
    pthread_mutex_lock(&lock);
    b += sizeof(*ptrs.slots) * ptrs.cap + sizeof(*vmm.slots) * vmm.cap;
    b += sizeof(*sites) * nsites + sizeof(*frames) * nframes + sizeof(*site_index) * INDEX_CAP;
    pthread_mutex_unlock(&lock);
    return b;
}
