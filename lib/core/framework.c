/* PyTorch's out-of-memory message turned into figures, the latest one kept, and written out.
 *
 * The message is the only place PyTorch's allocator tells what it held when it gave up: how much
 * was allocated to tensors and how much was reserved but unallocated (fragmentation inside its
 * segments, which no CUDA call shows us). The formats, by release (c10/cuda/CUDACachingAllocator.cpp
 * and CUDAMallocAsyncAllocator.cpp; one example of each, by version, in
 * tests/integration/data/pytorch/):
 *
 *   current (2.1+): CUDA out of memory. Tried to allocate X. GPU d has a total capacity of T of
 *     which F is free. [Process P has Q memory in use. ]...Including non-PyTorch memory, this
 *     process has P memory in use. [A allowed; ]Of the allocated memory Y is allocated by
 *     PyTorch, [with Z allocated in private pools (e.g., CUDA Graphs), ]and R is reserved by
 *     PyTorch but unallocated. ...   (2.1 spelled it "total capacty"; 2.3 wrote d as a raw byte,
 *     so for GPU 0 the C string ends at "GPU ")
 *   1.x (and 2.0): CUDA out of memory. Tried to allocate X (GPU d; T total capacity; Y already
 *     allocated; F free; [A allowed; ]S reserved in total by PyTorch) ...; before 1.4 the last
 *     clause was "R cached", already reserved minus allocated.
 *   cudaMallocAsync (2.0+, backend:cudaMallocAsync): Allocation on device d would exceed allowed
 *     memory. (out of memory)\nCurrently allocated     : Y\nRequested               : X
 *     \nDevice limit            : T\nFree (according to CUDA): F\nPyTorch limit (set by
 *     user-supplied memory fraction)\n                        : A   (2.3 to 2.9 wrote d as a
 *     raw byte)
 *
 * Sizes are PyTorch's format_size(): "512 bytes", else two decimals of KiB, MiB or GiB. A value
 * of 2^64 - 1 (NVML's "not available", an unset limit) prints as 17179869184.00 GiB: it, and
 * anything else too large for a byte count, reads as unknown. The parser walks the text with
 * explicit bounds and stops at the first thing it does not know, keeping what it read so far:
 * a truncated or reworded message yields fewer figures, never wrong ones. */
#include "framework.h"

#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "jsonw.h"
#include "platform.h"

/* Where the message body is searched: what() may carry a long C++ backtrace after it. */
#define SCAN_MAX (1u << 20)

/* ---------- parsing ---------- */

struct cursor {
    const char *p, *end;
};

/* Consume `lit` at the cursor; false (cursor unchanged) when it is not there. */
static bool eat(struct cursor *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return false;
    c->p += n;
    return true;
}

static void skip_spaces(struct cursor *c)
{
    while (c->p < c->end && *c->p == ' ')
        c->p++;
}

/* Move past the next occurrence of `lit`; false (cursor unchanged) when there is none. */
static bool skip_past(struct cursor *c, const char *lit)
{
    size_t n = strlen(lit);
    const char *at = memmem(c->p, (size_t)(c->end - c->p), lit, n);
    if (!at)
        return false;
    c->p = at + n;
    return true;
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* A decimal integer no larger than `max`. */
static bool eat_uint(struct cursor *c, int64_t max, int64_t *out)
{
    const char *p = c->p;
    int64_t v = 0;
    if (p >= c->end || !is_digit(*p))
        return false;
    for (; p < c->end && is_digit(*p); p++) {
        if (v > (max - (*p - '0')) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    c->p = p;
    *out = v;
    return true;
}

/* "512 bytes", "124.56 MiB", "14.23 GiB": bytes, rounded to the nearest integer. Integer
 * arithmetic, so "0.10 GiB" gives the same bytes everywhere. Fraction digits beyond six are
 * below a millionth of the unit and are skipped. A well-formed size that does not fit in int64
 * is consumed and gives -1: PyTorch prints 2^64 - 1 (NVML's "not available", the
 * cudaMallocAsync backend's "no limit") and sizes that wrapped around as 17179869184.00 GiB or
 * near it, and such a figure means "unknown", not a failure to read the sentence. */
static bool eat_size(struct cursor *c, int64_t *out)
{
    static const struct {
        const char *name;
        int64_t unit;
    } units[] = {
        { " bytes", 1 },       { " KiB", 1ll << 10 }, { " MiB", 1ll << 20 },
        { " GiB", 1ll << 30 }, { " TiB", 1ll << 40 },
    };
    struct cursor t = *c;
    int64_t whole = 0, frac = 0, scale = 1;
    bool huge = false;
    if (t.p >= t.end || !is_digit(*t.p))
        return false;
    for (; t.p < t.end && is_digit(*t.p); t.p++) {
        if (!huge && whole > (INT64_MAX - (*t.p - '0')) / 10)
            huge = true;
        if (!huge)
            whole = whole * 10 + (*t.p - '0');
    }
    if (t.p < t.end && *t.p == '.') {
        t.p++;
        if (t.p >= t.end || !is_digit(*t.p))
            return false;
        for (int digits = 0; t.p < t.end && is_digit(*t.p); t.p++, digits++) {
            if (digits < 6) {
                frac = frac * 10 + (*t.p - '0');
                scale *= 10;
            }
        }
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (!eat(&t, units[i].name))
            continue;
        int64_t bytes;
        /* frac < scale <= 10^6 and unit <= 2^40: the product stays below 2^60. */
        int64_t part = (frac * units[i].unit + scale / 2) / scale;
        if (huge || __builtin_mul_overflow(whole, units[i].unit, &bytes) ||
            __builtin_add_overflow(bytes, part, &bytes))
            bytes = -1;
        *out = bytes;
        *c = t;
        return true;
    }
    return false;
}

/* A device index and the text `next` after it. The index is decimal digits (kept even when
 * `next` does not follow: a message cut short), or the single raw byte PyTorch 2.3 (and its
 * cudaMallocAsync backend up to 2.9) wrote by streaming an int8_t, which gives no index: *out
 * is left alone. That byte is only passed over when `next` follows it, so nothing else is
 * taken for one. Indices 48 to 57 would have printed as a digit; no process has that many
 * devices. */
static bool eat_device(struct cursor *c, const char *next, int *out)
{
    int64_t x;
    struct cursor t = *c;
    if (eat_uint(&t, 1 << 20, &x)) {
        *out = (int)x;
        if (!eat(&t, next))
            return false;
    } else {
        if (t.p >= t.end || is_digit(*t.p))
            return false;
        t.p++;
        if (!eat(&t, next))
            return false;
    }
    *c = t;
    return true;
}

/* The sentences of the current format after "... of which F is free.". */
static void parse_current_tail(struct cursor *c, struct framework_verdict *v)
{
    for (int guard = 0; guard < 64; guard++) {
        struct cursor t;
        int64_t x;
        skip_spaces(c);
        if (eat(c, "Process ")) {
            /* Another process on the card (from NVML): not ours to count. */
            if (!skip_past(c, " memory in use."))
                return;
            continue;
        }
        if (eat(c, "Including non-PyTorch memory, this process has ")) {
            if (!eat_size(c, &x) || !eat(c, " memory in use."))
                return;
            v->process_in_use = x;
            continue;
        }
        t = *c;
        if (eat_size(&t, &x) && eat(&t, " allowed;")) {
            v->allowed = x;
            *c = t;
            continue;
        }
        if (!eat(c, "Of the allocated memory ") || !eat_size(c, &x) ||
            !eat(c, " is allocated by PyTorch,"))
            return;
        v->allocated = x;
        skip_spaces(c);
        if (eat(c, "with ")) {
            if (!eat_size(c, &x) || !eat(c, " allocated in private pools"))
                return;
            v->private_pools = x;
            /* "(e.g., CUDA Graphs), and ...": the comma inside the parentheses is not the end. */
            if (!skip_past(c, ", and "))
                return;
        } else if (!eat(c, "and ")) {
            return;
        }
        if (eat_size(c, &x) && eat(c, " is reserved by PyTorch but unallocated"))
            v->reserved_unallocated = x;
        return;
    }
}

/* The clauses of the 1.x format between "(GPU d; " and ")". */
static void parse_1x_tail(struct cursor *c, struct framework_verdict *v)
{
    int64_t reserved = -1;
    for (int guard = 0; guard < 16; guard++) {
        int64_t x;
        if (!eat_size(c, &x))
            break;
        if (eat(c, " total capacity"))
            v->capacity = x;
        else if (eat(c, " already allocated"))
            v->allocated = x;
        else if (eat(c, " free"))
            v->free = x;
        else if (eat(c, " allowed"))
            v->allowed = x;
        else if (eat(c, " reserved in total by PyTorch"))
            reserved = x;
        else if (eat(c, " cached"))
            /* PyTorch 1.0 to 1.3 printed cached - allocated here: it is below "already
             * allocated" in every such message. */
            v->reserved_unallocated = x;
        else
            break;
        if (!eat(c, "; "))
            break;
    }
    if (reserved >= 0 && v->allocated >= 0 && reserved >= v->allocated)
        v->reserved_unallocated = reserved - v->allocated;
}

/* The cudaMallocAsync backend's lines after "... (out of memory)", in the order it writes them;
 * a label is padded with spaces (the last one also with a line break) before its ": ". */
static void parse_async_tail(struct cursor *c, struct framework_verdict *v)
{
    const struct {
        const char *label;
        int64_t *field;
    } lines[] = {
        { "\nCurrently allocated", &v->allocated },
        { "\nRequested", &v->requested },
        { "\nDevice limit", &v->capacity },
        { "\nFree (according to CUDA)", &v->free },
        { "\nPyTorch limit (set by user-supplied memory fraction)", &v->allowed },
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        int64_t x;
        if (!eat(c, lines[i].label))
            return;
        while (c->p < c->end && (*c->p == ' ' || *c->p == '\n'))
            c->p++;
        if (!eat(c, ": ") || !eat_size(c, &x))
            return;
        *lines[i].field = x;
    }
}

/* The message, cut to the buffer at the start of the character that does not fit. */
static void copy_message(char *dst, const char *msg)
{
    size_t n = msg ? strnlen(msg, VW_FRAMEWORK_MESSAGE_MAX - 1) : 0;
    if (n == VW_FRAMEWORK_MESSAGE_MAX - 1 && msg[n]) {
        /* msg[n] is the first byte left out: if it continues a character, that character
         * started earlier and is left out whole. */
        while (n > 0 && ((unsigned char)msg[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, msg ? msg : "", n);
    dst[n] = 0;
}

bool framework_parse_pytorch(const char *msg, struct framework_verdict *out)
{
    out->requested = out->capacity = out->free = out->process_in_use = -1;
    out->allowed = out->allocated = out->reserved_unallocated = out->private_pools = -1;
    out->device = -1;
    out->format = NULL;
    out->exception = NULL;
    copy_message(out->message, msg);
    if (!msg)
        return false;

    const struct cursor all = { msg, msg + strnlen(msg, SCAN_MAX) };
    struct cursor c = all;
    int64_t x;
    if (skip_past(&c, "CUDA out of memory. Tried to allocate ")) {
        if (!eat_size(&c, &x))
            return false;
        out->requested = x;
        if (eat(&c, ". GPU ")) {
            out->format = "current";
            /* PyTorch 2.1 spelled it "capacty". */
            if (!(eat_device(&c, " has a total capacity of ", &out->device) ||
                  eat_device(&c, " has a total capacty of ", &out->device)) ||
                !eat_size(&c, &x))
                return true;
            out->capacity = x;
            if (!eat(&c, " of which ") || !eat_size(&c, &x) || !eat(&c, " is free."))
                return true;
            out->free = x;
            parse_current_tail(&c, out);
            return true;
        }
        if (eat(&c, " (GPU ")) {
            out->format = "1.x";
            if (!eat_uint(&c, 1 << 20, &x))
                return true;
            out->device = (int)x;
            if (eat(&c, "; "))
                parse_1x_tail(&c, out);
            return true;
        }
        out->requested = -1; /* a sentence we do not know: no figure is trusted */
        return false;
    }
    c = all;
    if (skip_past(&c, "Allocation on device ")) {
        /* For device 0, PyTorch 2.3 to 2.9 ended the C string here (the raw byte was a NUL):
         * the backend is known, no figure is. */
        if (c.p == c.end) {
            out->format = "cudaMallocAsync";
            return true;
        }
        if (!eat_device(&c, " would exceed allowed memory. (out of memory)", &out->device)) {
            out->device = -1; /* not the backend's sentence: no figure is trusted */
            return false;
        }
        out->format = "cudaMallocAsync";
        parse_async_tail(&c, out);
        return true;
    }
    return false;
}

static const char *const exception_names[] = {
    [FRAMEWORK_EXC_OOM] = "c10::OutOfMemoryError",
    [FRAMEWORK_EXC_CUDA_OOM] = "c10::CUDAOutOfMemoryError",
    [FRAMEWORK_EXC_ERROR] = "c10::Error",
};

enum framework_exception framework_exception_kind(const char *mangled)
{
    /* Every C++ throw of the process passes here: reject other namespaces on five bytes. */
    if (!mangled || strncmp(mangled, "N3c10", 5) != 0)
        return FRAMEWORK_EXC_NONE;
    const char *name = mangled + 5;
    if (strcmp(name, "16OutOfMemoryErrorE") == 0)
        return FRAMEWORK_EXC_OOM;
    if (strcmp(name, "20CUDAOutOfMemoryErrorE") == 0)
        return FRAMEWORK_EXC_CUDA_OOM;
    if (strcmp(name, "5ErrorE") == 0)
        return FRAMEWORK_EXC_ERROR;
    return FRAMEWORK_EXC_NONE;
}

const char *framework_exception_name(enum framework_exception kind)
{
    if (kind <= FRAMEWORK_EXC_NONE || kind > FRAMEWORK_EXC_ERROR)
        return NULL;
    return exception_names[kind];
}

bool framework_plain_error_is_oom(const char *msg)
{
    static const char head[] = "CUDA out of memory. Tried to allocate ";
    return msg && strncmp(msg, head, sizeof(head) - 1) == 0;
}

bool framework_names_oom_type(const char *names, size_t n)
{
    /* The mangled names as they appear inside the symbols for the type (_ZTIN3c10..., its
     * vtable, its destructors). */
    static const char *const types[] = { "3c1016OutOfMemoryError", "3c1020CUDAOutOfMemoryError" };
    for (size_t i = 0; names && i < sizeof(types) / sizeof(types[0]); i++)
        if (memmem(names, n, types[i], strlen(types[i])))
            return true;
    return false;
}

/* ---------- the latest verdict ---------- */

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
/* Static storage: written under kept_lock, copied out under it. */
static struct {
    struct framework_verdict v;
    uint64_t time_ns;
    int64_t tid;
    uint64_t count;
} kept;

void framework_store(const struct framework_verdict *v)
{
    uint64_t now = platform_now_ns();
    int64_t tid = (int64_t)syscall(SYS_gettid);
    pthread_mutex_lock(&kept_lock);
    kept.v = *v;
    kept.time_ns = now;
    kept.tid = tid;
    kept.count++;
    pthread_mutex_unlock(&kept_lock);
}

void framework_reset(void)
{
    pthread_mutex_init(&kept_lock, NULL);
    memset(&kept, 0, sizeof(kept));
}

uint64_t framework_count(void)
{
    pthread_mutex_lock(&kept_lock);
    uint64_t n = kept.count;
    pthread_mutex_unlock(&kept_lock);
    return n;
}

static void opt_i64(struct jsonw *w, const char *key, int64_t v)
{
    if (v < 0)
        jsonw_null(w, key);
    else
        jsonw_i64(w, key, v);
}

void framework_write(struct jsonw *w)
{
    /* Copied out so the lock is not held across the writer's write(2) calls. */
    struct framework_verdict v;
    uint64_t time_ns, count;
    int64_t tid;
    pthread_mutex_lock(&kept_lock);
    v = kept.v;
    time_ns = kept.time_ns;
    tid = kept.tid;
    count = kept.count;
    pthread_mutex_unlock(&kept_lock);
    if (count == 0) {
        jsonw_null(w, "framework");
        return;
    }
    jsonw_obj_begin(w, "framework");
    jsonw_str(w, "name", "pytorch");
    jsonw_str(w, "exception", v.exception ? v.exception : exception_names[FRAMEWORK_EXC_OOM]);
    jsonw_str(w, "message", v.message);
    jsonw_str(w, "format", v.format);
    jsonw_u64(w, "time_unix_ns", time_ns);
    jsonw_i64(w, "thread", tid);
    jsonw_u64(w, "count", count);
    opt_i64(w, "device", v.device);
    opt_i64(w, "requested_bytes", v.requested);
    opt_i64(w, "capacity_bytes", v.capacity);
    opt_i64(w, "free_bytes", v.free);
    opt_i64(w, "process_in_use_bytes", v.process_in_use);
    opt_i64(w, "allowed_bytes", v.allowed);
    opt_i64(w, "allocated_bytes", v.allocated);
    opt_i64(w, "reserved_unallocated_bytes", v.reserved_unallocated);
    opt_i64(w, "private_pools_bytes", v.private_pools);
    jsonw_obj_end(w);
}
