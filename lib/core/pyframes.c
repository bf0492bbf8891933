/* Python call sites without the GIL.
 *
 * The thread inside a hooked cudaMalloc usually does not hold the GIL (PyTorch releases it
 * around ops), and taking it there deadlocks: PyTorch's allocator mutex is held around the
 * real cudaMalloc while a GIL-holding thread may be waiting for that mutex to free a tensor.
 * So we read the calling thread's own frames, which only that thread pushes and pops, and it
 * is stuck inside our call. Everything is found at run time with dlsym (libpython is never a
 * link dependency) and read through per-version offsets (facts in docs/python-frames.md); anything unknown turns Python frames off with one info line.
 *
 * Strings and lines are resolved inside the hooked call: a code object can be freed and its
 * address reused once the call returns. They go into the library's own interned storage (an
 * mmap arena, no malloc), and a small per-thread cache keyed by code object, bytecode offset
 * and the name objects avoids decoding the same frame twice. */
#include "pyframes.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "options.h"
#include "platform.h"

/* Measured on x86-64 release builds (see docs/python-frames.md). */
static const struct py_layout layouts[] = {
    /* minor tstate cfr code back instr owner entry file name qual adapt kind ascii compact
     * cframe_prev */
    { 8, 24, -1, 32, 24, 104, -1, -1, 104, 112, -1, -1, 0, 48, 72, -1 },
    { 9, 24, -1, 32, 24, 104, -1, -1, 104, 112, -1, -1, 0, 48, 72, -1 },
    { 10, 24, -1, 32, 24, 96, -1, -1, 104, 112, -1, -1, 1, 48, 72, -1 },
    { 11, 56, 8, 32, 48, 56, 69, 68, 112, 120, 128, 184, 2, 48, 72, 16 },
    { 12, 56, 0, 0, 8, 56, 70, -1, 112, 120, 128, 192, 2, 40, 56, 8 },
    { 13, 72, -1, 0, 8, 56, 70, -1, 112, 120, 128, 200, 2, 40, 56, -1 },
};

#define OWNED_BY_CSTACK 3 /* 3.12+: a shim frame where C called into the interpreter */
#define WALK_LIMIT 4096   /* frames followed at most, whatever the depth asked for */
#define NAME_MAX_BYTES 1024
#define CACHE_SLOTS 512

const struct py_layout *pyframes_layout(int major, int minor)
{
    if (major != 3)
        return NULL;
    for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
        if (layouts[i].minor == minor)
            return &layouts[i];
    return NULL;
}

/* ---------- the process's Python ---------- */

/* Python frames are collected (read inline by pyframes_enabled on every hooked allocation). */
bool pyframes_on;

static struct {
    struct py_walk_env env;
    void *(*this_thread_state)(void);
    uintptr_t eval_lo, eval_hi;
    int (*walk)(const struct py_walk_env *, const void *, int, struct py_capture *);
} py;

static int warned_off;

/* ---------- interned strings ---------- */

struct str_rec {
    uint64_t hash;
    uint32_t off, len;
};

#define STR_ARENA (32u << 20)
#define STR_INDEX (2u * VW_PY_MAX_STRINGS)

static struct {
    char *arena;
    uint32_t used;
    struct str_rec *recs; /* [VW_PY_MAX_STRINGS], id 0 is "?" */
    uint32_t count;
    uint32_t *index; /* [STR_INDEX], 0 = empty */
    pthread_mutex_t lock;
} strs = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

static pthread_once_t strs_once = PTHREAD_ONCE_INIT;
static bool strs_ok;

static void strs_map(void)
{
    strs.arena = mmap(NULL, STR_ARENA, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    strs.recs = mmap(NULL, sizeof(*strs.recs) * VW_PY_MAX_STRINGS, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    strs.index = mmap(NULL, sizeof(*strs.index) * STR_INDEX, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (strs.arena == MAP_FAILED || strs.recs == MAP_FAILED || strs.index == MAP_FAILED)
        return;
    memcpy(strs.arena, "?", 2);
    strs.recs[0] = (struct str_rec){ .hash = 0, .off = 0, .len = 1 };
    strs.used = 2;
    strs.count = 1;
    strs_ok = true;
}

static bool strs_init(void)
{
    pthread_once(&strs_once, strs_map);
    return strs_ok;
}

static bool str_matches(uint32_t id, uint64_t h, const char *s, uint32_t n)
{
    const struct str_rec *r = &strs.recs[id];
    return r->hash == h && r->len == n && memcmp(strs.arena + r->off, s, n) == 0;
}

/* The id of a string, added if new; 0 ("?") when the storage is full. Lock-free for strings
 * seen before: records are written before their index slot is published. */
static uint32_t intern(const char *s, uint32_t n)
{
    if (VW_UNLIKELY(!strs_ok) && !strs_init())
        return 0;
    uint64_t h = hash_bytes(s, n);
    uint32_t m = STR_INDEX - 1;
    for (uint32_t j = (uint32_t)h & m;; j = (j + 1) & m) {
        uint32_t c = __atomic_load_n(&strs.index[j], __ATOMIC_ACQUIRE);
        if (!c)
            break;
        if (str_matches(c, h, s, n))
            return c;
    }
    uint32_t id = 0;
    pthread_mutex_lock(&strs.lock);
    uint32_t j = (uint32_t)h & m;
    for (;; j = (j + 1) & m) {
        uint32_t c = strs.index[j];
        if (!c)
            break;
        if (str_matches(c, h, s, n)) {
            id = c;
            goto out;
        }
    }
    if (strs.count >= VW_PY_MAX_STRINGS || strs.used + n + 1 > STR_ARENA)
        goto out;
    id = strs.count;
    memcpy(strs.arena + strs.used, s, n);
    strs.arena[strs.used + n] = 0;
    strs.recs[id] = (struct str_rec){ .hash = h, .off = strs.used, .len = n };
    strs.used += n + 1;
    __atomic_store_n(&strs.count, id + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&strs.index[j], id, __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&strs.lock);
    return id;
}

static const char *str_of(uint32_t id)
{
    return id < __atomic_load_n(&strs.count, __ATOMIC_ACQUIRE) ? strs.arena + strs.recs[id].off
                                                               : NULL;
}

/* ---------- reading CPython objects ---------- */

#define RD(type, base, off) (*(const type *)((const char *)(base) + (off)))

static int utf8_put(char *out, int room, uint32_t cp)
{
    if (cp < 0x80 && room >= 1) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800 && room >= 2) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000 && room >= 3) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    if (cp < 0x110000 && room >= 4) {
        out[0] = (char)(0xf0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char)(0x80 | (cp & 0x3f));
        return 4;
    }
    return 0;
}

/* A str object's text as UTF-8 into `out` (cut at a character boundary). Never calls into
 * Python: PyUnicode_AsUTF8 may allocate. Returns the length, or -1 for what is not a compact
 * str (the caller then uses "?"). */
static int read_str(const struct py_layout *lay, const void *str_type, const void *s, char *out,
                    int cap)
{
    if (!s || RD(const void *, s, 8) != str_type)
        return -1;
    int64_t length = RD(int64_t, s, 16);
    uint32_t state = RD(uint32_t, s, 32);
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || length < 0)
        return -1;
    int n = 0;
    if (ascii) {
        int64_t k = length < cap ? length : cap;
        memcpy(out, (const char *)s + lay->str_ascii_header, (size_t)k);
        return (int)k;
    }
    const unsigned char *d = (const unsigned char *)s + lay->str_compact_header;
    for (int64_t i = 0; i < length; i++) {
        uint32_t cp;
        if (kind == 1)
            cp = d[i];
        else if (kind == 2)
            cp = ((const uint16_t *)d)[i];
        else if (kind == 4)
            cp = ((const uint32_t *)d)[i];
        else
            return -1;
        int w = utf8_put(out + n, cap - n, cp);
        if (!w)
            break;
        n += w;
    }
    return n;
}

static uint32_t intern_str(const struct py_walk_env *env, const void *s)
{
    char buf[NAME_MAX_BYTES];
    int n = read_str(env->lay, env->str_type, s, buf, (int)sizeof(buf));
    return n < 0 ? 0 : intern(buf, (uint32_t)n);
}

/* ---------- per-thread decoding cache ---------- */

struct cache_slot {
    const void *code, *file, *name;
    int offset;
    uint64_t token;
};

/* What one thread remembers between captures: the frames of its last walk, position by
 * position (a loop allocating from the same place finds its whole chain unchanged and decodes
 * nothing), and a cache of decoded frames for the rest. Mapped on the thread's first walk, so
 * threads and processes that never allocate from Python pay nothing; unmapped at thread exit. */
struct py_chain {
    /* Side by side, so the tokens of a walk are one array the merge copies from. */
    const void *frame[VW_PY_MERGE_MAX];
    const void *code[VW_PY_MERGE_MAX];
    intptr_t instr[VW_PY_MERGE_MAX];
    uint64_t token[VW_PY_MERGE_MAX];
    bool entry[VW_PY_MERGE_MAX]; /* the first frame its run of the loop executed (3.11: is_entry) */
};

/* The native frames below the outermost run of the evaluation loop, from the thread's last full
 * walk. While that run lasts they cannot change (they are its callers), so a capture walks only
 * down to that run's frame and takes the rest from here. The run is known by where its record
 * lies on the C stack (3.11 and 3.12: its _PyCFrame; 3.13+: its entry frame) and by how many
 * runs the thread has. A run that ended and another that began at the same depth of the C stack
 * from other callers would look the same: every VW_PY_TAIL_CHECK-th reuse is a full walk that
 * checks the kept frames, and a mismatch turns the reuse off for the thread. */
struct py_tail {
    const void *tstate;
    uintptr_t outer; /* 0: nothing kept */
    int runs;
    int at;        /* where the outermost run's frame was in that walk */
    int n;         /* frames kept below it */
    bool complete; /* that walk reached the end of the stack */
    bool off;      /* a check found them changed: this thread always walks in full */
    uint32_t uses; /* reuses since the last full walk */
    uint64_t frames[VW_MAX_FRAMES];
};

struct py_thread {
    struct py_chain chain;
    struct cache_slot slots[CACHE_SLOTS];
    struct py_tail tail;
};

static VW_TLS struct py_thread *self;
static pthread_key_t thread_key;
static bool key_ready;

static void thread_gone(void *p)
{
    /* A destructor that runs after this one and allocates maps a new one (PyGILState gives no
     * thread state by then, so it is not even read). */
    if (self == p)
        self = NULL;
    munmap(p, sizeof(struct py_thread));
}

static struct py_thread *thread_state(void)
{
    if (VW_LIKELY(self != NULL))
        return self;
    void *p = mmap(NULL, sizeof(struct py_thread), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (key_ready)
        pthread_setspecific(thread_key, p);
    self = p;
    return self;
}

static inline __attribute__((always_inline)) uint64_t resolve(const struct py_layout *lay,
                                                              const struct py_walk_env *env,
                                                              const void *code, int offset)
{
    const void *file = RD(const void *, code, lay->code_filename);
    const void *name =
            RD(const void *, code, lay->code_qualname >= 0 ? lay->code_qualname : lay->code_name);
    uint32_t h = (uint32_t)(((uintptr_t)code >> 4) ^ ((uintptr_t)code >> 13) ^
                            (uint32_t)offset * 2654435761u);
    struct cache_slot *c = &self->slots[h & (CACHE_SLOTS - 1)];
    /* A code object freed and another allocated at the same address would also need the same
     * file and name objects at the same addresses, and the same offset, to be mistaken. */
    if (c->code == code && c->offset == offset && c->file == file && c->name == name && c->token)
        return c->token;
    uint64_t fid = intern_str(env, file);
    uint64_t nid = intern_str(env, name);
    int line = env->addr2line ? env->addr2line(code, offset) : 0;
    if (line < 0)
        line = 0;
    uint64_t tok = VW_PY_TAG | (fid << (VW_PY_STR_BITS + VW_PY_LINE_BITS)) |
                   (nid << VW_PY_LINE_BITS) | ((uint64_t)line & ((1ull << VW_PY_LINE_BITS) - 1));
    *c = (struct cache_slot){
        .code = code, .file = file, .name = name, .offset = offset, .token = tok
    };
    return tok;
}

/* ---------- the walk ---------- */

/* The frame at `last` ends a run of the evaluation loop, unless it was already said to. */
static inline void end_run(struct py_capture *pc, int *nends, int last)
{
    if (*nends == 0 || pc->ends[*nends - 1] != last)
        pc->ends[(*nends)++] = (int16_t)last;
}

/* The walk, written once over a layout; instantiated below for each known version with a
 * constant layout so the compiler turns every offset into an immediate (the walk runs for
 * every frame of every allocation). Fills `pc`: the tokens (the thread's chain), where each run
 * of the evaluation loop ends, and the runs on the thread. */
static inline __attribute__((always_inline)) int walk(const struct py_layout *lay,
                                                      const struct py_walk_env *env,
                                                      const void *tstate, int max,
                                                      struct py_capture *pc)
{
    pc->runs = -1;
    pc->outer = 0;
    pc->nends = 0;
    pc->tokens = NULL;
    if (!tstate || max <= 0 || !thread_state())
        return 0;
    if (max > VW_PY_MERGE_MAX)
        max = VW_PY_MERGE_MAX;
    struct py_chain *ch = &self->chain;
    pc->tokens = ch->token;
    const void *f = RD(const void *, tstate, lay->tstate_frame);
    if (lay->cframe_prev >= 0) {
        /* 3.11, 3.12: each run of the evaluation loop links a record on its C stack into the
         * thread's chain, which ends at the thread state's own root record (no previous). */
        int r = 0;
        for (const void *c = f; c && r <= WALK_LIMIT; r++) {
            const void *prev = RD(const void *, c, lay->cframe_prev);
            if (!prev)
                break;
            pc->outer = (uintptr_t)c;
            c = prev;
        }
        pc->runs = r <= WALK_LIMIT ? r : -1;
    } else if (lay->minor >= 13) {
        pc->runs = 0;
    }
    if (f && lay->cframe_frame >= 0)
        f = RD(const void *, f, lay->cframe_frame);
    int n = 0, nends = 0;
    const void *tortoise = f;
    /* Frames kept are at most `max`; the others (3.12+ entry frames, 3.13 frames without code,
     * 3.13 frames past `max`, followed to count the runs and find the outermost) are bounded by
     * WALK_LIMIT and by Brent's cycle check. */
    for (unsigned steps = 1; f;) {
        int owner = lay->frame_owner >= 0 ? RD(uint8_t, f, lay->frame_owner) : 0;
        bool shim = lay->minor >= 12 && owner >= OWNED_BY_CSTACK;
        if (n < max && !shim) {
            const void *code = RD(const void *, f, lay->frame_code);
            intptr_t instr = lay->instr_kind == 2 ? (intptr_t)RD(const char *, f, lay->frame_instr)
                                                  : (intptr_t)RD(int, f, lay->frame_instr);
            /* The same frame, running the same code, at the same instruction as last time at
             * this depth: the same file, function and line (and the code object, which the live
             * frame holds, was checked when it was decoded). */
            bool same = ch->frame[n] == f && ch->code[n] == code && ch->instr[n] == instr;
            if (VW_UNLIKELY(!same)) {
                if (!code || RD(const void *, code, 8) != env->code_type) {
                    if (lay->minor < 13)
                        return -1; /* a frame without a code object: our reading is wrong */
                    goto skipped;  /* 3.13: f_executable may legitimately be something else */
                }
                int off = lay->instr_kind == 0   ? (int)instr
                          : lay->instr_kind == 1 ? (int)instr * 2
                                                 : (int)(instr - (intptr_t)((const char *)code +
                                                                            lay->code_adaptive));
                ch->frame[n] = f;
                ch->code[n] = code;
                ch->instr[n] = instr;
                ch->token[n] = resolve(lay, env, code, off < 0 ? 0 : off);
                ch->entry[n] = lay->minor <= 10 ||
                               (lay->frame_is_entry >= 0 && RD(uint8_t, f, lay->frame_is_entry));
            }
            if (ch->entry[n])
                pc->ends[nends++] = (int16_t)n;
            n++;
            f = RD(const void *, f, lay->frame_back);
            continue;
        }
        if (n >= max && lay->minor < 13)
            break;
        if (shim) {
            /* C called into the interpreter here: the frames above were one run of the
             * evaluation loop. */
            if (n > 0 && n <= max)
                end_run(pc, &nends, n - 1);
            if (lay->minor >= 13) {
                pc->runs++;
                pc->outer = (uintptr_t)f;
            }
        }
    skipped:
        f = RD(const void *, f, lay->frame_back);
        /* Brent's cycle check: a loop in the chain means the memory is not what we think. */
        if (f && f == tortoise)
            return -1;
        if ((steps & (steps - 1)) == 0)
            tortoise = f;
        if (++steps > WALK_LIMIT)
            break;
    }
    if (n > 0)
        end_run(pc, &nends, n - 1);
    pc->nends = nends;
    return n;
}

#define WALK_FOR(i)                                                             \
    static int walk_##i(const struct py_walk_env *env, const void *ts, int max, \
                        struct py_capture *pc)                                  \
    {                                                                           \
        return walk(&layouts[i], env, ts, max, pc);                             \
    }
WALK_FOR(0)
WALK_FOR(1)
WALK_FOR(2)
WALK_FOR(3)
WALK_FOR(4)
WALK_FOR(5)

typedef int (*walk_fn)(const struct py_walk_env *, const void *, int, struct py_capture *);
static const walk_fn walkers[] = { walk_0, walk_1, walk_2, walk_3, walk_4, walk_5 };

static int walk_any(const struct py_walk_env *env, const void *tstate, int max,
                    struct py_capture *pc)
{
    size_t i = (size_t)(env->lay - layouts);
    if (i < sizeof(walkers) / sizeof(walkers[0]))
        return walkers[i](env, tstate, max, pc);
    return walk(env->lay, env, tstate, max, pc);
}

/* The tokens and run ends of a walk as two arrays (the unit tests' form). */
static int unpack(const struct py_capture *pc, int n, uint64_t *tokens, bool *group_end)
{
    if (n <= 0)
        return n;
    memcpy(tokens, pc->tokens, sizeof(*tokens) * (size_t)n);
    memset(group_end, 0, sizeof(*group_end) * (size_t)n);
    for (int i = 0; i < pc->nends; i++)
        group_end[pc->ends[i]] = true;
    return n;
}

int pyframes_walk(const struct py_walk_env *env, const void *tstate, uint64_t *tokens,
                  bool *group_end, int max)
{
    struct py_capture pc;
    return unpack(&pc, walk_any(env, tstate, max, &pc), tokens, group_end);
}

/* The thread's frames, with its runs of the evaluation loop; no frames and no runs known when
 * Python frames are off or the memory does not look as expected (then they go off). */
static void capture(struct py_capture *pc, int max)
{
    pc->np = 0;
    pc->nends = 0;
    pc->runs = -1;
    pc->outer = 0;
    pc->tstate = NULL;
    if (!__atomic_load_n(&pyframes_on, __ATOMIC_ACQUIRE))
        return;
    /* PyGILState_GetThisThreadState: this thread's state, or NULL for a thread Python never
     * saw. No lock, no GIL, and unlike the "current thread state" getters it is right while
     * the GIL is released. */
    const void *ts = py.this_thread_state();
    int n = py.walk(&py.env, ts, max, pc);
    if (n < 0) {
        __atomic_store_n(&pyframes_on, false, __ATOMIC_RELEASE);
        log_warn_once(warned_off, "the Python frames of this process do not look as expected; "
                                  "Python frames are off from here on");
        pc->nends = 0;
        pc->runs = -1;
        pc->outer = 0;
        return;
    }
    pc->np = n;
    pc->tstate = ts;
}

void pyframes_describe(uint64_t token, const char **file, const char **function, int *line)
{
    uint32_t m = (1u << VW_PY_STR_BITS) - 1;
    *file = str_of((uint32_t)(token >> (VW_PY_STR_BITS + VW_PY_LINE_BITS)) & m);
    *function = str_of((uint32_t)(token >> VW_PY_LINE_BITS) & m);
    *line = (int)(token & ((1ull << VW_PY_LINE_BITS) - 1));
}

/* A return address inside the evaluation loop, [lo, lo + span): the call is one byte back. */
static inline bool in_eval(uint64_t ip, uintptr_t lo, uintptr_t span)
{
    return ip - 1 - lo < span;
}

static inline bool is_eval(uint64_t ip)
{
    return in_eval(ip, py.eval_lo, py.eval_hi - py.eval_lo);
}

/* Native frames for merge: `n` return addresses from `ip`, innermost first. Passed by value,
 * in two registers. */
struct native_run {
    const uint64_t *restrict ip;
    int n;
};

/* One chain from native frames (`natv`, then `tailv`) and the capture's Python frames
 * (pyframes.h), at most `cap` entries; `evals` receives how many of `natv` were evaluation-loop
 * frames. The tail lies below the outermost run: no evaluation-loop frame of it has Python
 * frames left to take. */
static int merge(const struct py_capture *restrict pc, struct native_run natv,
                 struct native_run tailv, uint64_t *restrict out, int cap, int *evals)
{
    const uint64_t *restrict nat = natv.ip, *restrict tail = tailv.ip;
    int nn = natv.n, nt = tailv.n;
    const uintptr_t lo = py.eval_lo, span = py.eval_hi - py.eval_lo;
    const uint64_t *restrict tok = pc->tokens;
    const int np = pc->np, nends = pc->nends;
    int k = 0, pi = 0, ei = 0, ne = 0;
    /* Everything fits (the usual case): no room to test on the way. */
    const bool fits = nn + nt + np <= cap;
    for (int i = 0; i < nn && (fits || k < cap); i++) {
        uint64_t ip = nat[i];
        if (in_eval(ip, lo, span)) {
            ne++;
            if (pi < np) {
                /* This run of the evaluation loop was executing these Python frames: up to and
                 * including its end, copied at once (a deep Python stack is one long run, and
                 * this runs on every allocation). */
                int end = ei < nends ? pc->ends[ei++] + 1 : np;
                int run = fits || end - pi < cap - k ? end - pi : cap - k;
                memcpy(&out[k], &tok[pi], sizeof(*out) * (size_t)run);
                k += run;
                pi = end;
                continue;
            }
        }
        out[k++] = ip;
    }
    *evals = ne;
    if (nt > cap - k)
        nt = cap - k;
    if (nt > 0) {
        memcpy(&out[k], tail, sizeof(*out) * (size_t)nt);
        k += nt;
    }
    /* Native stacks off, or cut short by their depth: the rest of the Python chain follows. */
    if (pi < np && k < cap) {
        int run = np - pi < cap - k ? np - pi : cap - k;
        memcpy(&out[k], &tok[pi], sizeof(*out) * (size_t)run);
        k += run;
    }
    return k;
}

void pyframes_begin(struct py_capture *pc, int native_max)
{
    pc->native_max = native_max;
    pc->want = native_max;
    pc->partial = false;
    pc->check = false;
    capture(pc, pyframes_depth(native_max));
    const void *ts = pc->tstate;
    if (native_max <= 0 || pc->runs <= 0 || !self)
        return;
    struct py_tail *t = &self->tail;
    if (t->off || t->outer != pc->outer || t->runs != pc->runs || t->tstate != ts ||
        t->at + 1 >= native_max)
        return;
    if (++t->uses >= VW_PY_TAIL_CHECK) {
        t->uses = 0;
        pc->check = true; /* a full walk, and its frames below the run compared with these */
        return;
    }
    pc->want = t->at + 1;
    pc->partial = true;
}

/* Where the outermost run's frame is among native frames: the `runs`-th evaluation-loop frame
 * from the innermost; -1 when the frames end before it. */
static int outer_at(const uint64_t *nat, int nn, int runs)
{
    for (int i = 0; i < nn; i++)
        if (is_eval(nat[i]) && --runs == 0)
            return i;
    return -1;
}

int pyframes_finish(struct py_capture *pc, const uint64_t *nat, int nn, uint64_t *out, int cap)
{
    int evals;
    if (pc->runs <= 0 || !self)
        return merge(pc, (struct native_run){ nat, nn }, (struct native_run){ NULL, 0 }, out, cap,
                     &evals);
    struct py_tail *t = &self->tail;
    if (pc->partial) {
        /* Walked down to the outermost run's frame, where it was last time: the rest is the kept
         * tail, as long as it covers what a full walk would keep and the frames walked hold
         * exactly the thread's runs (checked while merging). */
        int rest = pc->native_max - nn;
        if (nn == t->at + 1 && (t->complete || t->n >= rest)) {
            int k = merge(pc, (struct native_run){ nat, nn },
                          (struct native_run){ t->frames, t->n < rest ? t->n : rest }, out, cap,
                          &evals);
            if (evals == pc->runs && is_eval(nat[nn - 1]))
                return k;
        }
        /* Elsewhere: where is it now? */
        int at = outer_at(nat, nn, pc->runs);
        rest = pc->native_max - (at + 1);
        if (at < 0 || (!t->complete && t->n < rest)) {
            pc->partial = false;
            pc->want = pc->native_max;
            return -1;
        }
        t->at = at;
        return merge(pc, (struct native_run){ nat, at + 1 },
                     (struct native_run){ t->frames, t->n < rest ? t->n : rest }, out, cap, &evals);
    }
    int at = outer_at(nat, nn, pc->runs);
    if (at >= 0) {
        int below = nn - at - 1;
        if (pc->check && t->outer == pc->outer && t->runs == pc->runs) {
            int same = below < t->n ? below : t->n;
            if (memcmp(&nat[at + 1], t->frames, sizeof(*nat) * (size_t)same) != 0 ||
                (t->complete && below > t->n) || (nn < pc->want && below < t->n))
                t->off = true;
        }
        t->tstate = pc->tstate;
        t->outer = pc->outer;
        t->runs = pc->runs;
        t->at = at;
        t->n = below;
        t->complete = nn < pc->want;
        memcpy(t->frames, &nat[at + 1], sizeof(*nat) * (size_t)below);
    }
    return merge(pc, (struct native_run){ nat, nn }, (struct native_run){ NULL, 0 }, out, cap,
                 &evals);
}

int pyframes_merge(const uint64_t *nat, int nn, uint64_t *out, int cap, int py_max)
{
    struct py_capture pc;
    int evals;
    capture(&pc, py_max);
    return merge(&pc, (struct native_run){ nat, nn }, (struct native_run){ NULL, 0 }, out, cap,
                 &evals);
}

/* ---------- detection ---------- */

/* Plain dlsym: inside the library it is our own entry, which passes RTLD_DEFAULT lookups
 * of non-CUDA names straight to glibc. */
static void *sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

static bool python_version(int *major, int *minor)
{
    const unsigned long *hex = sym("Py_Version"); /* 3.11+ */
    if (hex) {
        *major = (int)((*hex >> 24) & 0xff);
        *minor = (int)((*hex >> 16) & 0xff);
        return true;
    }
    const char *(*get)(void) = (const char *(*)(void))sym("Py_GetVersion");
    return get && sscanf(get(), "%d.%d", major, minor) == 2;
}

static void off(const char *why, int major, int minor)
{
    log_msg(VW_LOG_INFO, "Python %d.%d: %s; Python frames are off", major, minor, why);
}

bool pyframes_init(void)
{
    void *tsfn = sym("PyGILState_GetThisThreadState");
    if (!tsfn || !options_current.python)
        return false; /* not Python, or asked not to: nothing to say */
    int major = 0, minor = 0;
    if (!python_version(&major, &minor)) {
        off("the version cannot be read", major, minor);
        return false;
    }
    const struct py_layout *lay = pyframes_layout(major, minor);
    if (!lay) {
        off("an unknown version", major, minor);
        return false;
    }
    if (sym("_Py_RefTotal") || sym("_Py_GetRefTotal") || sym("_Py_NegativeRefcount")) {
        off("a debug build", major, minor);
        return false;
    }
    if (sym("_Py_PrintReferences") || sym("_Py_ForgetReference")) {
        off("a --with-trace-refs build", major, minor);
        return false;
    }
    if (minor >= 13) {
        /* From 3.13 _PyRuntime starts with the debug offsets: check the cookie, the version
         * and that this is not a free-threaded build. */
        const char *rt = sym("_PyRuntime");
        if (!rt || memcmp(rt, "xdebugpy", 8) != 0 ||
            ((RD(uint64_t, rt, 8) >> 16) & 0xffff) != (uint64_t)((major << 8) | minor)) {
            off("the runtime's debug offsets are missing or of another version", major, minor);
            return false;
        }
        if (RD(uint64_t, rt, 16) != 0) {
            off("a free-threaded build", major, minor);
            return false;
        }
    }
    void *code_type = sym("PyCode_Type");
    void *str_type = sym("PyUnicode_Type");
    void *addr2line = sym("PyCode_Addr2Line");
    void *eval = sym("_PyEval_EvalFrameDefault");
    if (!code_type || !str_type || !addr2line) {
        off("interpreter symbols are missing", major, minor);
        return false;
    }
    if (!strs_init()) {
        off("no memory for names", major, minor);
        return false;
    }
    Dl_info di;
    const ElfW(Sym) *es = NULL;
    if (eval && dladdr1(eval, &di, (void **)&es, RTLD_DL_SYMENT) && es && es->st_size) {
        py.eval_lo = (uintptr_t)eval;
        py.eval_hi = (uintptr_t)eval + es->st_size;
    }
    py.env.lay = lay;
    py.walk = walkers[lay - layouts]; /* the walk built for this version's layout */
    py.env.code_type = code_type;
    memcpy(&py.env.addr2line, &addr2line, sizeof(addr2line));
    py.env.str_type = str_type;
    memcpy(&py.this_thread_state, &tsfn, sizeof(tsfn));
    key_ready = pthread_key_create(&thread_key, thread_gone) == 0;
    __atomic_store_n(&pyframes_on, true, __ATOMIC_RELEASE);
    log_msg(VW_LOG_INFO, "Python %d.%d: Python frames on", major, minor);
    return true;
}
