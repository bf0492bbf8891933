/* timeline_torch.c: a report as PyTorch's memory snapshot, the pickle that
 * torch.cuda.memory._snapshot() returns and torch.cuda._memory_viz and pytorch.org/memory_viz
 * read, written here byte by byte (no Python at run time).
 *
 * What is written, as PyTorch documents it (torch/cuda/memory.py, _snapshot):
 *
 *   { "segments": [ { "device", "address", "total_size", "stream": 0, "segment_type",
 *                     "allocated_size", "active_size", "requested_size", "is_expandable": False,
 *                     "blocks": [ { "address", "size", "requested_size",
 *                                   "state": "active_allocated", "frames": [frame] } ] } ],
 *     "device_traces": [ [ { "action", "addr", "size", "stream": 0, "time_us", "frames" } ] ] }
 *   frame: { "filename", "line", "name" }, innermost first
 *
 * A caching allocator's segments are the cudaMalloc calls vramwatch sees, so each device
 * allocation live at the end is a segment, and since the blocks a segment is cut into never
 * reach the driver, each segment is one block of its full size, active. The trace (the report's
 * `trace`) gives each allocation as segment_alloc then alloc, and each free as free_requested,
 * free_completed then segment_free: what PyTorch itself records for a segment made for one block
 * and released whole, so that both of its viewers show it: the Active Memory Timeline plays the
 * alloc and free_completed entries forward, the Allocator State History plays segment and block
 * entries back from the segments. An out-of-memory failure is an "oom" entry (size and
 * device_free) at its time. docs/timeline.md says what cannot be known from outside.
 *
 * The pickle uses protocol 4's opcodes (PROTO, EMPTY_DICT/EMPTY_LIST with MARK and
 * SETITEMS/APPENDS, BININT1/BININT2/BININT/LONG1, SHORT_BINUNICODE/BINUNICODE, NEWTRUE/NEWFALSE,
 * MEMOIZE and BINGET/LONG_BINGET, STOP), from the format's description in CPython's
 * Lib/pickletools.py: plain dicts, lists, strings, integers and booleans only, so it loads with
 * no code of ours and nothing to trust. A call site's frames are written once and referred to
 * through the memo after that. */
#include "timeline_torch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define MiB_ (1024 * 1024)

#define PK_NAMES 48 /* the format's keys and actions: each written once, then from the memo */

/* The pickle being written, how many objects its memo holds, and the names already in it (by
 * their static strings' addresses). */
struct pk {
    struct strbuf *o;
    uint32_t memo;
    const char *names[PK_NAMES];
    uint32_t name_memo[PK_NAMES];
    int n_names;
};

static void pk_byte(struct pk *p, unsigned char c)
{
    sb_addc(p->o, (char)c);
}

static void pk_le(struct pk *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        pk_byte(p, (unsigned char)(v >> (8 * i)));
}

/* An integer in the fewest bytes: BININT1, BININT2, BININT, else LONG1 (little-endian two's
 * complement, a 0 byte more when the top bit would read as a sign). */
static void pk_int(struct pk *p, int64_t v, bool is_unsigned)
{
    uint64_t u = (uint64_t)v;
    if (!is_unsigned && v >= 0 && v < 256) {
        pk_byte(p, 'K');
        pk_le(p, u, 1);
    } else if (!is_unsigned && v >= 0 && v < 65536) {
        pk_byte(p, 'M');
        pk_le(p, u, 2);
    } else if (!is_unsigned && v >= INT32_MIN && v <= INT32_MAX) {
        pk_byte(p, 'J');
        pk_le(p, u, 4);
    } else {
        int n = 8;
        if (is_unsigned)
            while (n > 1 && (u >> (8 * (n - 1))) == 0)
                n--;
        bool top = (u >> (8 * n - 1)) & 1;
        pk_byte(p, 0x8a);
        pk_byte(p, (unsigned char)(n + (is_unsigned && top)));
        pk_le(p, u, n);
        if (is_unsigned && top)
            pk_byte(p, 0);
    }
}

static void pk_i(struct pk *p, int64_t v)
{
    pk_int(p, v, false);
}

static void pk_u(struct pk *p, uint64_t v)
{
    if (v <= INT32_MAX)
        pk_int(p, (int64_t)v, false);
    else
        pk_int(p, (int64_t)v, true);
}

/* The length of a valid UTF-8 sequence at s (at most n bytes), 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : s[0] >= 0xe0 && s[0] < 0xf0 ? 3
                                                               : s[0] >= 0xf0 && s[0] < 0xf5 ? 4
                                                                                             : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    /* overlong three- and four-byte forms, surrogates and past U+10FFFF: Python refuses them */
    if ((len == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (len == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
        (len == 4 && s[0] == 0xf0 && s[1] < 0x90) || (len == 4 && s[0] == 0xf4 && s[1] >= 0x90))
        return 0;
    return len;
}

/* A string, as Python's unpickler must decode it: bytes that are not UTF-8 become U+FFFD. */
static void pk_str(struct pk *p, const char *s)
{
    struct strbuf t = { 0 };
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)u);
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(u + i, n - i);
        if (l) {
            sb_addn(&t, (const char *)u + i, l);
            i += l;
        } else {
            sb_add(&t, "\xef\xbf\xbd");
            i++;
        }
    }
    if (t.len < 256) {
        pk_byte(p, 0x8c);
        pk_le(p, t.len, 1);
    } else {
        pk_byte(p, 'X');
        pk_le(p, t.len, 4);
    }
    sb_addn(p->o, sb_str(&t), t.len);
    sb_free(&t);
}

/* A reference to memo entry i (BINGET, LONG_BINGET). */
static void pk_get(struct pk *p, uint32_t i)
{
    if (i < 256) {
        pk_byte(p, 'h');
        pk_le(p, i, 1);
    } else {
        pk_byte(p, 'j');
        pk_le(p, i, 4);
    }
}

/* One of the format's own names (a static string): the second time on, from the memo, as
 * Python's pickler does it, so that a trace of many entries does not repeat its keys. */
static void pk_name(struct pk *p, const char *name)
{
    for (int i = 0; i < p->n_names; i++)
        if (p->names[i] == name) {
            pk_get(p, p->name_memo[i]);
            return;
        }
    pk_str(p, name);
    if (p->n_names == PK_NAMES)
        return;
    pk_byte(p, 0x94); /* MEMOIZE */
    p->names[p->n_names] = name;
    p->name_memo[p->n_names++] = p->memo++;
}

static void pk_open(struct pk *p, char empty)
{
    pk_byte(p, (unsigned char)empty); /* '}' or ']' */
    pk_byte(p, '(');
}

static void pk_close(struct pk *p, char op)
{
    pk_byte(p, (unsigned char)op); /* 'u' SETITEMS or 'e' APPENDS */
}

static void kv_i(struct pk *p, const char *k, int64_t v)
{
    pk_name(p, k);
    pk_i(p, v);
}

static void kv_u(struct pk *p, const char *k, uint64_t v)
{
    pk_name(p, k);
    pk_u(p, v);
}

static void kv_s(struct pk *p, const char *k, const char *v)
{
    pk_name(p, k);
    pk_str(p, v);
}

/* A key whose value is one of the format's own names too ("action": "alloc"). */
static void kv_n(struct pk *p, const char *k, const char *v)
{
    pk_name(p, k);
    pk_name(p, v);
}

/* ---- call sites' frames, each list written once ---- */

struct site_ix {
    int64_t id;
    const struct model_callsite *cs;
    int64_t memo; /* -1: not written yet */
};

static int by_id(const void *a, const void *b)
{
    int64_t x = ((const struct site_ix *)a)->id, y = ((const struct site_ix *)b)->id;
    return x < y ? -1 : x > y;
}

struct snap {
    struct pk p;
    const struct model_report *r;
    struct site_ix *sites;
    size_t n_sites;
};

static void frame_out(struct pk *p, const struct model_frame *f)
{
    pk_open(p, '}');
    if (f->python) {
        kv_s(p, "filename", f->file);
        kv_i(p, "line", f->line);
        kv_s(p, "name", f->function);
    } else {
        /* PyTorch's own native frames carry a source file and line when its symbolizer finds
         * them; a report has the module and the offset in it, which stand in their places. */
        struct strbuf name = { 0 };
        if (f->symbol)
            sb_add(&name, f->symbol);
        else
            sb_printf(&name, "%s+0x%llx", f->module ? f->module : "??",
                      (unsigned long long)f->offset);
        kv_s(p, "filename", f->module ? f->module : "??");
        kv_i(p, "line", 0);
        kv_s(p, "name", sb_str(&name));
        sb_free(&name);
    }
    pk_close(p, 'u');
}

/* The frames of call site `id` (an empty list when the report does not list it). */
static void frames_out(struct snap *s, int64_t id)
{
    struct site_ix key = { .id = id };
    struct site_ix *e = bsearch(&key, s->sites, s->n_sites, sizeof *s->sites, by_id);
    if (e && e->memo >= 0) {
        pk_get(&s->p, (uint32_t)e->memo);
        return;
    }
    pk_open(&s->p, ']');
    for (size_t i = 0; e && i < e->cs->n_frames; i++)
        frame_out(&s->p, &e->cs->frames[i]);
    pk_close(&s->p, 'e');
    if (e) {
        pk_byte(&s->p, 0x94); /* MEMOIZE: the list just built gets the next index */
        e->memo = s->p.memo++;
    }
}

/* ---- segments: the allocations live at the end ---- */

struct seg {
    uint64_t addr;
    int64_t size, device, callsite;
};

static int seg_by_addr(const void *a, const void *b)
{
    uint64_t x = ((const struct seg *)a)->addr, y = ((const struct seg *)b)->addr;
    return x < y ? -1 : x > y;
}

static int64_t device_of(model_int d)
{
    return d.known ? d.v : 0; /* an allocation whose device could not be told: device 0's */
}

struct at {
    uint64_t addr;
    size_t i; /* position in the trace */
};

static int at_order(const void *a, const void *b)
{
    const struct at *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* The trace's allocations not freed later in it (a live[] list cut at 1000 leaves some out):
 * sorted by address, then position, an allocation survives unless the next event of its address
 * is a free. */
static size_t trace_survivors(const struct model_trace *t, struct seg *out)
{
    size_t n = t->n_events, k = 0;
    struct at *ord = util_xcalloc(n ? n : 1, sizeof *ord);
    for (size_t i = 0; i < n; i++)
        ord[i] = (struct at){ t->events[i].addr, i };
    qsort(ord, n, sizeof *ord, at_order);
    for (size_t i = 0; i < n; i++) {
        const struct model_trace_event *e = &t->events[ord[i].i];
        bool freed = i + 1 < n && ord[i + 1].addr == e->addr && t->events[ord[i + 1].i].is_free;
        if (!e->is_free && !freed)
            out[k++] = (struct seg){ e->addr, e->size, device_of(e->device), e->callsite };
    }
    free(ord);
    return k;
}

/* live[] and the trace's survivors, one segment per address, by address. */
static struct seg *segments_of(const struct model_report *r, size_t *count)
{
    struct seg *s = util_xcalloc(r->n_live + r->trace.n_events + 1, sizeof *s);
    size_t n = 0;
    for (size_t i = 0; i < r->n_live; i++) {
        const struct model_live *l = &r->live[i];
        s[n++] = (struct seg){ strtoull(l->address + 2, NULL, 16), l->size, device_of(l->device),
                               l->callsite };
    }
    n += trace_survivors(&r->trace, s + n);
    qsort(s, n, sizeof *s, seg_by_addr);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || s[k - 1].addr != s[i].addr)
            s[k++] = s[i];
    *count = k;
    return s;
}

static void segment_out(struct snap *s, const struct seg *g)
{
    struct pk *p = &s->p;
    pk_open(p, '}');
    kv_i(p, "device", g->device);
    kv_u(p, "address", g->addr);
    kv_i(p, "total_size", g->size);
    kv_i(p, "stream", 0);
    /* PyTorch's rule: requests of 1 MiB or less come from its small pool */
    kv_n(p, "segment_type", g->size <= MiB_ ? "small" : "large");
    kv_i(p, "allocated_size", g->size);
    kv_i(p, "active_size", g->size);
    kv_i(p, "requested_size", g->size);
    pk_name(p, "is_expandable");
    pk_byte(p, 0x89);
    pk_name(p, "blocks");
    pk_open(p, ']');
    pk_open(p, '}');
    kv_u(p, "address", g->addr);
    kv_i(p, "size", g->size);
    kv_i(p, "requested_size", g->size);
    kv_n(p, "state", "active_allocated");
    pk_name(p, "frames");
    frames_out(s, g->callsite);
    pk_close(p, 'u');
    pk_close(p, 'e');
    pk_close(p, 'u');
}

/* ---- device traces ---- */

/* One trace entry: has_addr false for an oom entry, device_free < 0 for none. */
struct entry {
    const char *action;
    bool has_addr;
    uint64_t addr;
    int64_t size, time_ns, callsite, device_free;
};

static void entry_out(struct snap *s, const struct entry *e)
{
    struct pk *p = &s->p;
    pk_open(p, '}');
    kv_n(p, "action", e->action);
    if (e->has_addr)
        kv_u(p, "addr", e->addr);
    kv_i(p, "size", e->size);
    kv_i(p, "stream", 0);
    kv_i(p, "time_us", e->time_ns / 1000);
    if (e->device_free >= 0)
        kv_i(p, "device_free", e->device_free);
    pk_name(p, "frames");
    frames_out(s, e->callsite);
    pk_close(p, 'u');
}

static void event_out(struct snap *s, const struct model_trace_event *t)
{
    static const char *const alloc[] = { "segment_alloc", "alloc" };
    static const char *const freed[] = { "free_requested", "free_completed", "segment_free" };
    struct entry e = { NULL, true, t->addr, t->size, t->time_unix_ns, t->callsite, -1 };
    size_t n = t->is_free ? 3 : 2;
    for (size_t i = 0; i < n; i++) {
        e.action = t->is_free ? freed[i] : alloc[i];
        entry_out(s, &e);
    }
}

static void oom_out(struct snap *s, const struct model_failure *f)
{
    struct entry e = { "oom", false, 0, f->size, f->time_unix_ns, f->callsite,
                       f->free_bytes_at_failure.known ? f->free_bytes_at_failure.v : 0 };
    entry_out(s, &e);
}

/* Device d's entries: its trace events in order, its out-of-memory failures at their times. */
static void device_trace_out(struct snap *s, int64_t d)
{
    const struct model_report *r = s->r;
    size_t fi = 0;
    pk_open(&s->p, ']');
    for (size_t i = 0; i < r->trace.n_events; i++) {
        const struct model_trace_event *t = &r->trace.events[i];
        if (device_of(t->device) != d)
            continue;
        for (; fi < r->n_failures && r->failures[fi].time_unix_ns <= t->time_unix_ns; fi++)
            if (r->failures[fi].oom && device_of(r->failures[fi].device) == d)
                oom_out(s, &r->failures[fi]);
        event_out(s, t);
    }
    for (; fi < r->n_failures; fi++)
        if (r->failures[fi].oom && device_of(r->failures[fi].device) == d)
            oom_out(s, &r->failures[fi]);
    pk_close(&s->p, 'e');
}

/* One list per device from 0 to the highest seen, as PyTorch lists them by ordinal. */
static int64_t devices_needed(const struct model_report *r, const struct seg *g, size_t ng)
{
    int64_t top = 0;
    for (size_t i = 0; i < ng; i++)
        top = g[i].device > top ? g[i].device : top;
    for (size_t i = 0; i < r->trace.n_events; i++)
        top = device_of(r->trace.events[i].device) > top ? device_of(r->trace.events[i].device)
                                                          : top;
    for (size_t i = 0; i < r->n_failures; i++)
        top = device_of(r->failures[i].device) > top ? device_of(r->failures[i].device) : top;
    /* ordinals are below 64 in a report of ours; one made up may say otherwise */
    return (top < 64 ? top : 63) + 1;
}

bool timeline_torch_write(struct strbuf *o, const struct model_report *r)
{
    struct snap s = { .p = { .o = o }, .r = r, .n_sites = r->n_callsites };
    s.sites = util_xcalloc(s.n_sites + 1, sizeof *s.sites);
    for (size_t i = 0; i < s.n_sites; i++)
        s.sites[i] = (struct site_ix){ r->callsites[i].id, &r->callsites[i], -1 };
    qsort(s.sites, s.n_sites, sizeof *s.sites, by_id);
    size_t ng;
    struct seg *g = segments_of(r, &ng);
    pk_byte(&s.p, 0x80); /* PROTO 4 */
    pk_byte(&s.p, 4);
    pk_open(&s.p, '}');
    pk_str(&s.p, "segments");
    pk_open(&s.p, ']');
    for (size_t i = 0; i < ng; i++)
        segment_out(&s, &g[i]);
    pk_close(&s.p, 'e');
    pk_str(&s.p, "device_traces");
    pk_open(&s.p, ']');
    int64_t nd = devices_needed(r, g, ng);
    for (int64_t d = 0; d < nd; d++)
        device_trace_out(&s, d);
    pk_close(&s.p, 'e');
    pk_close(&s.p, 'u');
    pk_byte(&s.p, '.');
    free(g);
    free(s.sites);
    return r->trace.known;
}
