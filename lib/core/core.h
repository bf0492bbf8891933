/* The accounting core: allocations, call sites, failures and pressure events per device.
 *
 * It knows nothing of CUDA or of how calls were intercepted: the shims turn each CUDA call
 * into one of the calls below, and the unit tests call them directly. All state lives in
 * memory mapped by the core itself (no malloc), behind one lock per lane of a device slot (a
 * thread's own table of live allocations, counts and call-site counters; the device's figures
 * exact across its lanes) and one for rare events (core.c says which), none of them held while
 * unwinding, calling the driver or writing files. */
#ifndef VW_CORE_H
#define VW_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timeline.h"

#define VW_MAX_DEVICES 64
#define VW_DEV_UNKNOWN (-1)
#define VW_MAX_FRAMES 128      /* hard cap on VRAMWATCH_STACK_DEPTH */
#define VW_MAX_CALLSITES 65536 /* distinct stacks; further ones share the overflow site 0 */
#define VW_MAX_ALLOC_SLOTS \
    (1u << 22)                 /* live allocations tracked one by one: ~2.9 million at 70% load */
#define VW_FAILURES_KEPT 256   /* the first 64 and the latest 192 */
#define VW_EVENTS_KEPT 256     /* pressure events, same rule */
#define VW_POOLS_PER_DEVICE 16 /* distinct stream-ordered pools remembered per device */
#define VW_RETRY_WINDOW_NS 10000000000ull /* a retry later than this is a new request */

/* What kind of memory an allocation is; it decides which table and counters it goes to. */
enum core_kind {
    CORE_DEVICE = 0, /* cudaMalloc, cuMemAlloc, pitched, 3D */
    CORE_POOL,       /* stream-ordered: cudaMallocAsync, cuMemAllocFromPoolAsync, ... */
    CORE_MANAGED,    /* cudaMallocManaged, cuMemAllocManaged: counted as device memory */
    CORE_VMM,        /* cuMemCreate handles: physical memory, keyed by handle */
    CORE_HOST,       /* pinned host memory: tracked, never counted as device memory */
    CORE_KINDS
};

struct core_alloc {
    uint64_t key; /* address, or VMM handle */
    uint64_t size;
    uint64_t time_ns;
    const char *api; /* static string: the function the application called */
    uint32_t callsite;
    int16_t device;
    uint8_t kind;
    uint8_t used; /* slot in use (keys may legitimately be 0 for VMM handles) */
};

struct core_device {
    uint64_t live_bytes, live_count, peak_live_bytes, peak_time_ns;
    uint64_t pool_live_bytes; /* part of live_bytes handed out by stream-ordered pools */
    uint64_t pool_hold_bytes; /* what the pools are taken to hold, for the timeline's reserved:
                                   their high-water mark since the last measurement */
    uint64_t alloc_calls, free_calls, failed_calls, cache_flushes;
    uint64_t va_reserved_bytes;
    uint64_t pools[VW_POOLS_PER_DEVICE];
    int npools;
    bool active;    /* any call was recorded for this device */
    bool pool_used; /* an async allocation happened: ask the pools at report time */
    /* Training steps the program said had ended (vramwatch_step): how many, when the last did,
     * the live memory then, and the most live from the start of its phase (the previous marker,
     * else the start) to its end, and to the end of the first step. */
    uint64_t steps, step_time_ns, step_live_bytes, step_peak_bytes, first_step_peak_bytes;
    uint64_t phase_steps; /* of them since the previous marker */
};

struct core_host {
    uint64_t live_bytes, peak_live_bytes, alloc_calls, free_calls, failed_calls;
};

struct core_failure {
    uint64_t time_ns, size;
    const char *api;
    const char *error_name;
    int error_code;
    int device;
    uint32_t callsite;
    int tid;
    bool oom;
    uint8_t retried; /* 0 no retry seen, 1 succeeded, 2 failed */
    uint64_t seq;    /* position among all failures, to find it again */
    /* what the program freed between the failure and its retry (a caching allocator's flush):
     * live_at less this is the level the retry failed at; 0 without a retry */
    uint64_t retry_freed;
    uint64_t live_at, reserved_at;
    int64_t free_at; /* -1: unknown */
};

struct core_event {
    uint64_t time_ns, size, freed_bytes, freed_count;
    const char *api;
    int device;
    uint32_t callsite;
};

/* Observe mode: the first allocation per device that went over the emulated limit. */
struct core_crossing {
    uint64_t time_ns, size, live_at;
    const char *api;
    int device;
    uint32_t callsite;
};

struct core_marker {
    uint64_t time_ns;
    uint64_t live_bytes;       /* device memory live on all devices at the marker */
    uint64_t phase_peak_bytes; /* the most live on all devices since the previous marker */
    char label[80];            /* truncated at a character boundary */
};

struct core_callsite {
    uint64_t hash;
    uint64_t live_bytes, live_count, alloc_calls, alloc_bytes_total;
    /* Its first device allocation: when, and the device's live memory and peak just before.
     * 0 time: none yet. */
    uint64_t first_time_ns, first_live_before, first_peak_before;
    uint32_t frames_off; /* index into the frame arena */
    uint16_t nframes;
    uint16_t pad;
    /* Filled by core_copy_callsites: its live bytes when each device last reached its peak,
     * summed over the devices (pinned host memory left out); and on the device of the latest
     * out-of-memory failure, at that failure (has_failure false: there was none). */
    uint64_t live_bytes_at_peak;
    uint64_t live_bytes_at_failure;
    bool has_failure;
};

/* Result of recording a failure: what the caller should do about the report. */
enum core_failure_verdict {
    CORE_FAIL_QUIET = 0, /* not out of memory, or rate-limited */
    CORE_FAIL_REPORT,    /* write an OOM report now */
};

/* One-time set-up; idempotent and cheap after the first call. Returns false when the core's
 * memory could not be mapped (the library then stays a pass-through). */
bool core_init(void);
/* Forget everything (the child side of fork, and the unit tests). */
void core_reset(void);
/* Lock helpers for fork: the parent holds every lock across fork() so the child's copy is sane. */
void core_lock_for_fork(void);
void core_unlock_after_fork(bool child);

/* Intern a stack (innermost first); returns its call-site id (0: the overflow site). With
 * stacks off every allocation has the empty chain: its id, once interned, is read inline. */
extern uint32_t core_empty_site; /* written by core.c only; 0: not interned yet */
uint32_t core_callsite_intern(const uint64_t *frames, int n);
static inline uint32_t core_callsite(const uint64_t *frames, int n)
{
    uint32_t e;
    if (n <= 0 && (e = __atomic_load_n(&core_empty_site, __ATOMIC_RELAXED)) != 0)
        return e;
    return core_callsite_intern(frames, n);
}

/* One allocation call as the core records it, whether it went through or failed. */
struct core_request {
    enum core_kind kind;
    int device;   /* the ordinal; VW_DEV_UNKNOWN, or one out of range, shares the last slot */
    uint64_t key; /* address, or VMM handle (a failure has none) */
    uint64_t size;
    const char *api; /* static string: the function the application called */
    uint32_t callsite;
    uint64_t now_ns;
};

/* Record a successful allocation. Returns false if it could not be tracked (table full).
 * core_alloc and core_failure also recognise a retry: the same thread asking again for the
 * same size on the same device within VW_RETRY_WINDOW_NS of a failure. A retry that succeeds
 * is a pressure event (a cache flush), one that fails makes the failure the real OOM. */
bool core_alloc(const struct core_request *r);
/* Take a tracked allocation out before the real free is called, so that a racing allocation
 * that gets the same address cannot be lost; the free is counted (and feeds a pending retry on
 * this thread) in the same locked section. Returns false if `key` is not tracked. */
bool core_take(enum core_kind kind, uint64_t key, struct core_alloc *out, uint64_t now_ns);
/* The real free failed: put the allocation back and the counts as they were. */
void core_untake(const struct core_alloc *a);

/* Record a failed allocation call (the request's key is not used). `free_bytes` is the
 * driver's free memory at that moment, or -1; `pool_extra` what the device's pools hold beyond
 * what they handed out. The verdict says whether an OOM report must be written before
 * returning. */
enum core_failure_verdict core_failure(const struct core_request *r, int error_code,
                                       const char *error_name, bool oom, int64_t free_bytes,
                                       uint64_t pool_extra);

void core_note_pool(int device, uint64_t pool);

/* Observe mode, for an allocator that releases its cache and retries a failed request: the
 * request that crosses the emulated limit is refused once, as the small card would refuse it.
 * core_observe_refusal remembers it (as a pending failure whose successful retry is a cache
 * flush, with no failure record and no report); core_observe_is_retry tells the retry, which
 * then goes through. */
void core_observe_refusal(int device, uint64_t size, const char *api, uint32_t callsite,
                          uint64_t now_ns);
bool core_observe_is_retry(int device, uint64_t size, uint64_t now_ns);
/* Out-of-memory failures known to be final (their retry failed, or none came) and cache flushes
 * rescued by a retry, over the whole process; read without the lock. */
void core_pressure(uint64_t *final_ooms, uint64_t *flushes);
/* True once after a retry rescued a failure for which an out-of-memory report was written: that
 * report no longer tells the truth and must be rewritten. Read inline on every allocation. */
extern bool core_report_stale; /* written by core.c only */
static inline bool core_take_report_stale(void)
{
    if (__builtin_expect(!__atomic_load_n(&core_report_stale, __ATOMIC_RELAXED), 1))
        return false;
    return __atomic_exchange_n(&core_report_stale, false, __ATOMIC_RELAXED);
}
/* At exit: a failure still waiting for its retry is final. */
void core_end_pending(void);
/* Observe mode: record the first crossing of the emulated limit on a device (later ones on the
 * same device are ignored). Call after the allocation was recorded. */
void core_limit_crossing(int device, const char *api, uint64_t size, uint32_t callsite,
                         uint64_t now_ns);
/* A named marker on the timeline (vramwatch_mark). */
void core_mark(const char *label, uint64_t now_ns);
void core_va_reserve(int device, int64_t delta);
/* What the driver said about a device at `now_ns`: its used memory (total − free, the real card's,
 * -1 unknown) and what its pools hold beyond what they handed out (-1 unknown). Corrects the
 * timeline's reserved memory and gives it untracked memory (used − reserved). */
void core_measure(int device, int64_t used, int64_t pool_extra, uint64_t now_ns);
/* Any device allocation call at all (successful or not): the process now owes a report. */
bool core_touched(void);

/* ---- snapshots, for the report writer ---- */
struct core_snapshot {
    struct core_device devices[VW_MAX_DEVICES + 1]; /* last slot: unknown device */
    struct core_host host;
    struct core_failure failures[VW_FAILURES_KEPT];
    int nfailures;
    uint64_t failures_total;
    struct core_event events[VW_EVENTS_KEPT];
    int nevents;
    uint64_t events_total;
    struct core_marker markers[VW_EVENTS_KEPT];
    int nmarkers;
    uint64_t markers_total;
    struct core_crossing crossings[VW_MAX_DEVICES + 1];
    int ncrossings;
    uint32_t ncallsites;
    uint64_t callsites_dropped, allocs_untracked;
};
/* Copy the counters (not the tables) under the lock. */
void core_snapshot(struct core_snapshot *s);
/* A training step ended (vramwatch_step): every active device's level and phase peak now. */
void core_step(uint64_t now_ns);
/* The program says it calls vramwatch_step after every training step (or takes it back): a
 * report without steps then means that no step ended, not that none was said to. */
void core_step_reporting(bool on);
bool core_steps_reported(void);
/* Copy call-site records [0, n) into `out` (n <= ncallsites); frames are copied into `frames`
 * (capacity `fcap` entries), `out[i].frames_off` rebased onto it. Returns frames copied. */
uint32_t core_copy_callsites(struct core_callsite *out, uint32_t n, uint64_t *frames,
                             uint32_t fcap);
/* The `max` largest live device allocations (CORE_HOST excluded), largest first. Returns the
 * number written; *total gets the number of live device allocations. */
int core_largest_live(struct core_alloc *out, int max, uint64_t *total);

/* The highest live device memory any one device has reached, and the device memory live now on
 * all devices: read without the lock (for the status file that vramwatch fit watches). */
uint64_t core_peak_any(void);
uint64_t core_live_total(void);
/* Distinct call chains seen so far (a new one after a quiet spell is a new phase of the run, such
 * as validation: vramwatch fit waits for it); read without the lock. */
uint32_t core_callsites_count(void);

/* Copy one device slot's timeline (under the lock). Returns false when it has none yet. */
bool core_copy_timeline(int slot, struct timeline_device *out);
/* Recording into the timeline on or off (on by default): for the benchmark that measures what
 * it costs, and for tests. */
void core_timeline_enable(bool on);
/* The timeline's fixed memory: address space mapped once at start, whatever the run's length. */
size_t core_timeline_bytes(void);

/* Memory the core has mapped, for the documented bound and the benchmarks. */
size_t core_mapped_bytes(void);

/* The slot used for a device ordinal (unknown and out-of-range ordinals share the last). */
static inline int core_dev_slot(int device)
{
    return (device >= 0 && device < VW_MAX_DEVICES) ? device : VW_MAX_DEVICES;
}

#endif
