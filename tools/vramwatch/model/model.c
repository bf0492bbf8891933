/* model.c: loads a vramwatch.report/1 file into the model, checking every field the views read. */
#include "model.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "redact.h"

/* Contract fields are required; fields the library writes beyond the contract may be absent
 * (reports from other writers or older versions) and then read as unknown. The JSON Schema in
 * docs/ is stricter: it requires both, because it checks what our own library writes. */
enum {
    F_REQ = 0,       /* present and not null */
    F_NULL = 1 << 0, /* present, may be null */
    F_OPT = 1 << 1,  /* may be absent or null */
};

struct vctx {
    struct strbuf path; /* where we are: "devices[0].live_bytes" */
    struct strbuf *err;
    bool failed;
};

static size_t push_key(struct vctx *c, const char *key)
{
    size_t old = c->path.len;
    if (c->path.len)
        sb_addc(&c->path, '.');
    util_add_text(&c->path, key);
    return old;
}

static size_t push_index(struct vctx *c, size_t i)
{
    size_t old = c->path.len;
    sb_printf(&c->path, "[%zu]", i);
    return old;
}

static void pop(struct vctx *c, size_t old)
{
    sb_truncate(&c->path, old);
}

/* Records the first problem, prefixed with where it is. Always returns false. */
static bool fail_at(struct vctx *c, const char *key, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static bool fail_at(struct vctx *c, const char *key, const char *fmt, ...)
{
    if (c->failed)
        return false;
    c->failed = true;
    size_t old = key ? push_key(c, key) : c->path.len;
    if (c->path.len)
        sb_printf(c->err, "%s: ", sb_str(&c->path));
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(c->err, fmt, ap);
    va_end(ap);
    pop(c, old);
    return false;
}

static const char *describe(const cJSON *it)
{
    if (cJSON_IsString(it))
        return "a string";
    if (cJSON_IsNumber(it))
        return "a number";
    if (cJSON_IsBool(it))
        return "a boolean";
    if (cJSON_IsNull(it))
        return "null";
    if (cJSON_IsArray(it))
        return "an array";
    if (cJSON_IsObject(it))
        return "an object";
    return "something else";
}

/* The member, or NULL when it is absent or null and flags allow that (then *ok stays true). */
static const cJSON *member(struct vctx *c, const cJSON *obj, const char *key, int flags,
                           const char *expected, bool *ok)
{
    *ok = true;
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!it) {
        if (!(flags & F_OPT)) {
            fail_at(c, NULL, "\"%s\" is missing", key);
            *ok = false;
        }
        return NULL;
    }
    if (cJSON_IsNull(it)) {
        if (!(flags & (F_NULL | F_OPT))) {
            fail_at(c, key, "expected %s, found null", expected);
            *ok = false;
        }
        return NULL;
    }
    return it;
}

static bool get_int(struct vctx *c, const cJSON *obj, const char *key, int flags, int64_t min,
                    model_int *out)
{
    bool ok;
    *out = (model_int){ 0, false };
    const cJSON *it = member(c, obj, key, flags, "an integer", &ok);
    if (!it)
        return ok;
    int64_t v = 0;
    switch (json_int(it, &v)) {
    case JSON_INT_OK:
        break;
    case JSON_INT_NOT_NUMBER:
        return fail_at(c, key, "expected an integer, found %s", describe(it));
    case JSON_INT_FRACTION:
        return fail_at(c, key, "expected an integer, found a fraction");
    case JSON_INT_RANGE:
        return fail_at(c, key, "number out of range");
    }
    if (v < min)
        return fail_at(c, key, "%" PRId64 " is below %" PRId64, v, min);
    *out = (model_int){ v, true };
    return true;
}

/* A required, non-null integer straight into an int64_t. */
static bool req_int(struct vctx *c, const cJSON *obj, const char *key, int64_t min, int64_t *out)
{
    model_int m;
    bool ok = get_int(c, obj, key, F_REQ, min, &m);
    *out = m.v;
    return ok;
}

static bool get_str(struct vctx *c, const cJSON *obj, const char *key, int flags, const char **out)
{
    bool ok;
    *out = NULL;
    const cJSON *it = member(c, obj, key, flags, "a string", &ok);
    if (!it)
        return ok;
    if (!cJSON_IsString(it) || !it->valuestring)
        return fail_at(c, key, "expected a string, found %s", describe(it));
    *out = it->valuestring;
    return true;
}

static bool get_bool(struct vctx *c, const cJSON *obj, const char *key, int flags, int *out)
{
    bool ok;
    *out = -1;
    const cJSON *it = member(c, obj, key, flags, "true or false", &ok);
    if (!it)
        return ok;
    if (!cJSON_IsBool(it))
        return fail_at(c, key, "expected true or false, found %s", describe(it));
    *out = cJSON_IsTrue(it) ? 1 : 0;
    return true;
}

static bool get_array(struct vctx *c, const cJSON *obj, const char *key, int flags,
                      const cJSON **out, size_t *n)
{
    bool ok;
    *out = NULL;
    *n = 0;
    const cJSON *it = member(c, obj, key, flags, "an array", &ok);
    if (!it)
        return ok;
    if (!cJSON_IsArray(it))
        return fail_at(c, key, "expected an array, found %s", describe(it));
    *out = it;
    *n = (size_t)cJSON_GetArraySize(it);
    return true;
}

static bool get_object(struct vctx *c, const cJSON *obj, const char *key, int flags,
                       const cJSON **out)
{
    bool ok;
    *out = NULL;
    const cJSON *it = member(c, obj, key, flags, "an object", &ok);
    if (!it)
        return ok;
    if (!cJSON_IsObject(it))
        return fail_at(c, key, "expected an object, found %s", describe(it));
    *out = it;
    return true;
}

/* Fields read as they are, without a check: a value that does not read is unknown rather than a
 * damaged report. For what the library added late and only a heuristic uses (the phase finder, the
 * grouping of reports into jobs), which read them so before the model held them. */
static model_int peek_int(const cJSON *obj, const char *key, int64_t min)
{
    int64_t v;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (x && json_int(x, &v) == JSON_INT_OK && v >= min)
        return (model_int){ v, true };
    return (model_int){ 0, false };
}

/* A non-empty string, else NULL. */
static const char *peek_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) && v->valuestring && v->valuestring[0] ? v->valuestring : NULL;
}

/* Each element of an array must be an object; fn fills the i-th slot from it. */
typedef bool (*element_fn)(struct vctx *c, const cJSON *obj, void *slot);

static bool each_object(struct vctx *c, const char *key, const cJSON *arr, void *slots,
                        size_t slot_size, element_fn fn)
{
    size_t k = push_key(c, key);
    size_t i = 0;
    bool ok = true;
    for (const cJSON *e = arr ? arr->child : NULL; e && ok; e = e->next, i++) {
        size_t old = push_index(c, i);
        if (!cJSON_IsObject(e))
            ok = fail_at(c, NULL, "expected an object, found %s", describe(e));
        else
            ok = fn(c, e, (char *)slots + i * slot_size);
        pop(c, old);
    }
    pop(c, k);
    return ok;
}

static bool load_frame(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_frame *f = slot;
    const char *kind;
    if (!get_str(c, o, "kind", F_REQ, &kind))
        return false;
    if (strcmp(kind, "python") == 0) {
        model_int line;
        f->python = true;
        bool ok = get_str(c, o, "file", F_REQ, &f->file) &&
                  get_str(c, o, "function", F_REQ, &f->function) &&
                  get_int(c, o, "line", F_REQ, INT64_MIN, &line);
        f->line = line.v;
        return ok;
    }
    if (strcmp(kind, "native") == 0) {
        return get_str(c, o, "module", F_NULL, &f->module) &&
               get_str(c, o, "symbol", F_NULL, &f->symbol) &&
               req_int(c, o, "offset", 0, &f->offset) &&
               get_int(c, o, "symbol_offset", F_OPT, 0, &f->symbol_offset);
    }
    return fail_at(c, "kind", "expected \"native\" or \"python\", found a string");
}

/* Always true: unchecked (peek_int). */
static bool peek_first(const cJSON *o, struct model_callsite *cs)
{
    cs->first_alloc_unix_ns = peek_int(o, "first_alloc_unix_ns", INT64_MIN);
    cs->live_bytes_before_first = peek_int(o, "live_bytes_before_first", INT64_MIN);
    cs->peak_live_bytes_before_first = peek_int(o, "peak_live_bytes_before_first", INT64_MIN);
    return true;
}

static bool load_callsite(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_callsite *cs = slot;
    const cJSON *frames;
    size_t n;
    if (!req_int(c, o, "id", 0, &cs->id) || !get_array(c, o, "frames", F_REQ, &frames, &n))
        return false;
    cs->frames = util_xcalloc(n, sizeof *cs->frames);
    cs->n_frames = n;
    return each_object(c, "frames", frames, cs->frames, sizeof *cs->frames, load_frame) &&
           req_int(c, o, "live_bytes", 0, &cs->live_bytes) &&
           req_int(c, o, "live_count", 0, &cs->live_count) &&
           req_int(c, o, "alloc_calls", 0, &cs->alloc_calls) &&
           req_int(c, o, "alloc_bytes_total", 0, &cs->alloc_bytes_total) &&
           get_int(c, o, "live_bytes_at_peak", F_OPT, 0, &cs->live_bytes_at_peak) &&
           get_int(c, o, "live_bytes_at_failure", F_OPT, 0, &cs->live_bytes_at_failure) &&
           peek_first(o, cs);
}

static bool load_proc(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_proc *p = slot;
    return req_int(c, o, "pid", 1, &p->pid) && get_str(c, o, "name", F_NULL, &p->name) &&
           get_int(c, o, "used_bytes", F_NULL, 0, &p->used_bytes);
}

/* The device's steps: all five figures, or none (count 0). */
static bool load_steps(struct vctx *c, const cJSON *o, struct model_steps *s)
{
    const cJSON *st;
    if (!get_object(c, o, "steps", F_OPT, &st))
        return false;
    if (!st)
        return true;
    size_t k = push_key(c, "steps");
    bool ok = req_int(c, st, "count", 0, &s->count) &&
              req_int(c, st, "last_unix_ns", 0, &s->last_unix_ns) &&
              req_int(c, st, "live_bytes", 0, &s->live_bytes) &&
              req_int(c, st, "peak_bytes", 0, &s->peak_bytes) &&
              req_int(c, st, "first_peak_bytes", 0, &s->first_peak_bytes) &&
              get_int(c, st, "phase_count", F_OPT, 0, &s->phase_count);
    pop(c, k);
    return ok;
}

static bool load_device(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_device *d = slot;
    const cJSON *procs;
    if (!get_array(c, o, "other_processes", F_OPT, &procs, &d->n_procs) ||
        !load_steps(c, o, &d->steps))
        return false;
    d->procs_known = procs != NULL;
    d->procs = util_xcalloc(d->n_procs ? d->n_procs : 1, sizeof *d->procs);
    if (!each_object(c, "other_processes", procs, d->procs, sizeof *d->procs, load_proc))
        return false;
    return get_int(c, o, "ordinal", F_NULL, 0, &d->ordinal) &&
           get_str(c, o, "name", F_NULL, &d->name) &&
           get_int(c, o, "total_bytes", F_NULL, 0, &d->total_bytes) &&
           get_int(c, o, "free_bytes", F_NULL, 0, &d->free_bytes) &&
           get_int(c, o, "limit_bytes", F_NULL, 0, &d->limit_bytes) &&
           req_int(c, o, "live_bytes", 0, &d->live_bytes) &&
           req_int(c, o, "peak_live_bytes", 0, &d->peak_live_bytes) &&
           get_int(c, o, "peak_time_unix_ns", F_NULL, 0, &d->peak_time_unix_ns) &&
           req_int(c, o, "reserved_bytes", 0, &d->reserved_bytes) &&
           req_int(c, o, "peak_reserved_bytes", 0, &d->peak_reserved_bytes) &&
           req_int(c, o, "alloc_calls", 0, &d->alloc_calls) &&
           req_int(c, o, "free_calls", 0, &d->free_calls) &&
           req_int(c, o, "failed_calls", 0, &d->failed_calls) &&
           get_int(c, o, "used_bytes", F_OPT, 0, &d->used_bytes) &&
           get_int(c, o, "untracked_bytes", F_OPT, INT64_MIN, &d->untracked_bytes) &&
           get_int(c, o, "live_count", F_OPT, 0, &d->live_count) &&
           get_int(c, o, "cache_flushes", F_OPT, 0, &d->cache_flushes) &&
           get_int(c, o, "va_reserved_bytes", F_OPT, 0, &d->va_reserved_bytes) &&
           get_str(c, o, "uuid", F_OPT, &d->uuid) &&
           get_str(c, o, "pci_bus_id", F_OPT, &d->pci_bus_id);
}

static bool load_failure(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_failure *f = slot;
    int oom;
    const char *retried;
    bool ok = req_int(c, o, "time_unix_ns", 0, &f->time_unix_ns) &&
              get_str(c, o, "api", F_REQ, &f->api) &&
              get_int(c, o, "device", F_NULL, 0, &f->device) &&
              req_int(c, o, "size", 0, &f->size) &&
              req_int(c, o, "error_code", INT64_MIN, &f->error_code) &&
              get_str(c, o, "error_name", F_NULL, &f->error_name) &&
              get_bool(c, o, "oom", F_REQ, &oom) && req_int(c, o, "callsite", 0, &f->callsite) &&
              req_int(c, o, "live_bytes_at_failure", 0, &f->live_bytes_at_failure) &&
              req_int(c, o, "reserved_bytes_at_failure", 0, &f->reserved_bytes_at_failure) &&
              get_int(c, o, "free_bytes_at_failure", F_NULL, 0, &f->free_bytes_at_failure) &&
              get_str(c, o, "retried", F_OPT, &retried) &&
              get_int(c, o, "freed_before_retry_bytes", F_OPT, 0, &f->freed_before_retry) &&
              get_int(c, o, "thread", F_OPT, 0, &f->thread);
    if (!ok)
        return false;
    f->oom = oom == 1;
    if (!retried)
        f->retried = RETRIED_UNKNOWN;
    else if (strcmp(retried, "succeeded") == 0)
        f->retried = RETRIED_SUCCEEDED;
    else if (strcmp(retried, "failed") == 0)
        f->retried = RETRIED_FAILED;
    else
        return fail_at(c, "retried", "expected null, \"succeeded\" or \"failed\"");
    return true;
}

static bool hex_address(const char *s)
{
    if (s[0] != '0' || s[1] != 'x' || !s[2])
        return false;
    for (s += 2; *s; s++)
        if (!strchr("0123456789abcdefABCDEF", *s))
            return false;
    return true;
}

static bool load_live(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_live *l = slot;
    if (!get_str(c, o, "address", F_REQ, &l->address))
        return false;
    if (!hex_address(l->address))
        return fail_at(c, "address", "expected \"0x\" and hexadecimal digits");
    return req_int(c, o, "size", 0, &l->size) && get_int(c, o, "device", F_NULL, 0, &l->device) &&
           get_str(c, o, "api", F_REQ, &l->api) && req_int(c, o, "callsite", 0, &l->callsite) &&
           req_int(c, o, "time_unix_ns", 0, &l->time_unix_ns);
}

static bool load_crossing(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_crossing *x = slot;
    return req_int(c, o, "time_unix_ns", 0, &x->time_unix_ns) &&
           get_str(c, o, "api", F_REQ, &x->api) && req_int(c, o, "device", 0, &x->device) &&
           req_int(c, o, "size", 0, &x->size) && req_int(c, o, "callsite", 0, &x->callsite) &&
           req_int(c, o, "live_bytes_at_crossing", 0, &x->live_bytes_at_crossing);
}

static bool load_pressure(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_pressure *p = slot;
    return get_str(c, o, "kind", F_REQ, &p->kind) &&
           req_int(c, o, "time_unix_ns", 0, &p->time_unix_ns) &&
           get_str(c, o, "api", F_REQ, &p->api) && get_int(c, o, "device", F_NULL, 0, &p->device) &&
           req_int(c, o, "size", 0, &p->size) && req_int(c, o, "freed_bytes", 0, &p->freed_bytes) &&
           req_int(c, o, "freed_count", 0, &p->freed_count) &&
           req_int(c, o, "callsite", 0, &p->callsite);
}

/* A list of the report: its key, whether it may be absent, and how one element is loaded. */
struct list_spec {
    const char *key;
    int flags;
    size_t elem;
    element_fn fn;
};
static void *load_list(struct vctx *c, const cJSON *root, struct list_spec spec, size_t *count);

static bool load_marker(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_marker *m = slot;
    return req_int(c, o, "time_unix_ns", 0, &m->time_unix_ns) &&
           get_str(c, o, "label", F_REQ, &m->label) &&
           req_int(c, o, "live_bytes", 0, &m->live_bytes) &&
           req_int(c, o, "phase_peak_bytes", 0, &m->phase_peak_bytes);
}

static bool load_tl_bucket(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_tl_bucket *b = slot;
    return req_int(c, o, "t", 0, &b->t) && req_int(c, o, "live_min", 0, &b->live_min) &&
           req_int(c, o, "live_max", 0, &b->live_max) && req_int(c, o, "live", 0, &b->live) &&
           req_int(c, o, "peak_t", 0, &b->peak_t) &&
           req_int(c, o, "reserved_max", 0, &b->reserved_max) &&
           req_int(c, o, "reserved", 0, &b->reserved) &&
           get_int(c, o, "untracked_max", F_NULL, INT64_MIN, &b->untracked_max) &&
           get_int(c, o, "untracked", F_NULL, INT64_MIN, &b->untracked) &&
           req_int(c, o, "events", 0, &b->events);
}

static bool load_tl_step(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_tl_step *st = slot;
    return req_int(c, o, "time_unix_ns", 0, &st->time_unix_ns) &&
           req_int(c, o, "size", 0, &st->size) &&
           req_int(c, o, "live_bytes_after", 0, &st->live_bytes_after) &&
           get_str(c, o, "api", F_REQ, &st->api) && req_int(c, o, "callsite", 0, &st->callsite);
}

static bool load_tl_device(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_tl_device *d = slot;
    if (!get_int(c, o, "ordinal", F_NULL, 0, &d->ordinal) ||
        !req_int(c, o, "start_unix_ns", 0, &d->start_unix_ns) ||
        !req_int(c, o, "bucket_ns", 1, &d->bucket_ns) || !req_int(c, o, "merges", 0, &d->merges) ||
        !req_int(c, o, "events", 0, &d->events) ||
        !get_int(c, o, "capacity_bytes", F_NULL, 0, &d->capacity_bytes) ||
        !get_int(c, o, "limit_bytes", F_NULL, 0, &d->limit_bytes))
        return false;
    d->buckets = load_list(c, o, (struct list_spec){ "buckets", F_REQ, sizeof *d->buckets,
                                                     load_tl_bucket },
                           &d->n_buckets);
    d->steps = load_list(c, o, (struct list_spec){ "steps", F_REQ, sizeof *d->steps, load_tl_step },
                         &d->n_steps);
    if (c->failed)
        return false;
    /* The views walk buckets in order: a report whose times go backwards is damaged. */
    for (size_t i = 1; i < d->n_buckets; i++) {
        if (d->buckets[i].t <= d->buckets[i - 1].t) {
            size_t k = push_key(c, "buckets"), old = push_index(c, i);
            fail_at(c, "t", "not after the previous bucket's");
            pop(c, old);
            pop(c, k);
            return false;
        }
    }
    return true;
}

static bool load_timeline(struct vctx *c, const cJSON *o, struct model_timeline *t)
{
    model_int max;
    if (!get_int(c, o, "buckets_max", F_REQ, 1, &max))
        return false;
    t->buckets_max = max.v;
    t->devices = load_list(c, o, (struct list_spec){ "devices", F_REQ, sizeof *t->devices,
                                                     load_tl_device },
                           &t->n_devices);
    t->known = !c->failed;
    return !c->failed;
}

static bool load_trace_event(struct vctx *c, const cJSON *o, void *slot)
{
    struct model_trace_event *e = slot;
    const char *action;
    if (!req_int(c, o, "time_unix_ns", 0, &e->time_unix_ns) ||
        !get_str(c, o, "action", F_REQ, &action))
        return false;
    if (strcmp(action, "alloc") && strcmp(action, "free"))
        return fail_at(c, "action", "expected \"alloc\" or \"free\"");
    e->is_free = action[0] == 'f';
    if (!get_str(c, o, "address", F_REQ, &e->address))
        return false;
    if (!hex_address(e->address) || strlen(e->address) > 18)
        return fail_at(c, "address", "expected \"0x\" and at most 16 hexadecimal digits");
    e->addr = strtoull(e->address + 2, NULL, 16);
    return req_int(c, o, "size", 0, &e->size) && get_int(c, o, "device", F_NULL, 0, &e->device) &&
           get_str(c, o, "api", F_REQ, &e->api) && req_int(c, o, "callsite", 0, &e->callsite);
}

static bool load_trace(struct vctx *c, const cJSON *o, struct model_trace *t)
{
    if (!req_int(c, o, "capacity", 0, &t->capacity) || !req_int(c, o, "total", 0, &t->total) ||
        !req_int(c, o, "kept", 0, &t->kept) || !req_int(c, o, "lost", 0, &t->lost))
        return false;
    t->events = load_list(c, o, (struct list_spec){ "events", F_REQ, sizeof *t->events,
                                                    load_trace_event },
                          &t->n_events);
    t->known = !c->failed;
    return !c->failed;
}

/* 64 KiB as the library cuts it, with room for what redaction adds: more is no report of ours. */
#define MODEL_ARGV_MAX (1 << 20)

/* The environment, every value a string, as name and value pairs. */
static bool load_env(struct vctx *c, const cJSON *env, struct model_process *p)
{
    p->env = util_xcalloc((size_t)cJSON_GetArraySize(env) + 1, sizeof *p->env);
    for (const cJSON *e = env->child; e; e = e->next) {
        if (!cJSON_IsString(e)) {
            size_t k = push_key(c, "env");
            fail_at(c, e->string ? e->string : "", "expected a string, found %s", describe(e));
            pop(c, k);
            return false;
        }
        p->env[p->n_env++] = (struct model_env_var){ e->string ? e->string : "", e->valuestring };
    }
    return true;
}

static void peek_launcher(const cJSON *l, struct model_launcher *m)
{
    *m = (struct model_launcher){ .known = cJSON_IsObject(l) };
    if (!m->known)
        return;
    m->torchrun_run_id = peek_str(l, "torchrun_run_id");
    m->slurm_job_id = peek_str(l, "slurm_job_id");
    m->slurm_step_id = peek_str(l, "slurm_step_id");
    m->mpi_job_id = peek_str(l, "mpi_job_id");
    m->parent_name = peek_str(l, "parent_name");
    m->parent_pid = peek_int(l, "parent_pid", 0);
    m->parent_start_unix_ns = peek_int(l, "parent_start_unix_ns", 0);
}

static bool load_process(struct vctx *c, const cJSON *o, struct model_process *p)
{
    const cJSON *argv, *env;
    size_t argc;
    if (!req_int(c, o, "pid", 0, &p->pid) || !get_int(c, o, "ppid", F_REQ, 0, &p->ppid) ||
        !get_str(c, o, "host", F_REQ, &p->host) || !get_array(c, o, "argv", F_REQ, &argv, &argc))
        return false;
    p->argv = util_xcalloc(argc, sizeof *p->argv);
    p->argc = argc;
    size_t i = 0, total = 0;
    for (const cJSON *a = argv->child; a; a = a->next, i++) {
        if (!cJSON_IsString(a) || !a->valuestring) {
            size_t k = push_key(c, "argv"), old = push_index(c, i);
            fail_at(c, NULL, "expected a string, found %s", describe(a));
            pop(c, old);
            pop(c, k);
            return false;
        }
        total += strlen(a->valuestring) + 1;
    }
    /* What a report's command line shows, every view, the JSON printed back (report --json) and
     * merged (merge -o) included, follows the library's rule for secrets as it is now: a report
     * written by an older library, or edited by hand, may hold what that rule replaces. The
     * string is replaced in the tree itself, so nothing reads the secret after this. */
    i = 0;
    bool secret_next = false;
    for (const cJSON *a = argv->child; a && total <= MODEL_ARGV_MAX; a = a->next, i++) {
        size_t cap = 2 * strlen(a->valuestring) + 8;
        char *red = util_xmalloc(cap);
        bool flag = redact_is_secret_flag(a->valuestring);
        if (redact_arg(a->valuestring, secret_next, red, cap))
            cJSON_SetValuestring((cJSON *)a, red);
        free(red);
        secret_next = flag;
        p->argv[i] = a->valuestring;
    }
    /* The library writes at most 64 KiB of the command line; advice copies it into every
     * command it proposes, so a huge one would multiply memory (docs/reliability.md). */
    if (total > MODEL_ARGV_MAX) {
        size_t k = push_key(c, "argv");
        fail_at(c, NULL, "%zu bytes in all, more than the %d a report can hold", total,
                MODEL_ARGV_MAX);
        pop(c, k);
        return false;
    }
    if (!get_str(c, o, "cwd", F_NULL, &p->cwd) ||
        !get_int(c, o, "start_unix_ns", F_NULL, 0, &p->start_unix_ns) ||
        !get_int(c, o, "rank", F_NULL, 0, &p->rank) ||
        !get_int(c, o, "local_rank", F_NULL, 0, &p->local_rank) ||
        !get_int(c, o, "world_size", F_NULL, 0, &p->world_size) ||
        !get_object(c, o, "env", F_REQ, &env) || !get_str(c, o, "exe", F_OPT, &p->exe) ||
        !get_bool(c, o, "steps_reported", F_OPT, &p->steps_reported))
        return false;
    if (!load_env(c, env, p))
        return false;
    p->loaded_unix_ns = peek_int(o, "loaded_unix_ns", 0);
    peek_launcher(cJSON_GetObjectItemCaseSensitive(o, "launcher"), &p->launcher);
    return true;
}

/* Allocates the model's array for a JSON array and fills it element by element. Does nothing once
 * a problem was found, so calls can follow one another and be checked once. */
static void *load_list(struct vctx *c, const cJSON *root, struct list_spec spec, size_t *count)
{
    const cJSON *arr;
    size_t n;
    *count = 0;
    if (c->failed || !get_array(c, root, spec.key, spec.flags, &arr, &n))
        return NULL;
    void *list = util_xcalloc(n, spec.elem);
    *count = n; /* set before filling so model_free() sees every slot */
    each_object(c, spec.key, arr, list, spec.elem, spec.fn);
    return list;
}

/* The schema and the reason the report was written. */
static bool load_head(struct vctx *c, const cJSON *root, struct model_report *r)
{
    const char *schema;
    if (!cJSON_IsObject(root))
        return fail_at(c, NULL, "expected a JSON object, found %s", describe(root));
    if (!get_str(c, root, "schema", F_REQ, &schema))
        return false;
    if (strcmp(schema, MODEL_SCHEMA) != 0) {
        struct strbuf s = { 0 };
        util_add_text(&s, schema);
        fail_at(c, NULL, "schema is \"%s\", expected \"%s\"", sb_str(&s), MODEL_SCHEMA);
        sb_free(&s);
        return false;
    }
    if (!get_str(c, root, "reason", F_REQ, &r->reason))
        return false;
    if (strcmp(r->reason, "oom") && strcmp(r->reason, "exit") && strcmp(r->reason, "request") &&
        strcmp(r->reason, "signal") && strcmp(r->reason, "pressure"))
        return fail_at(c, "reason",
                       "expected \"oom\", \"exit\", \"request\", \"signal\" or \"pressure\"");
    return true;
}

/* The report's lists, in the order the contract gives them. */
static bool load_lists(struct vctx *c, const cJSON *root, struct model_report *r)
{
    r->devices = load_list(c, root,
                           (struct list_spec){ "devices", F_REQ, sizeof *r->devices, load_device },
                           &r->n_devices);
    r->failures = load_list(
            c, root, (struct list_spec){ "failures", F_REQ, sizeof *r->failures, load_failure },
            &r->n_failures);
    r->callsites = load_list(
            c, root, (struct list_spec){ "callsites", F_REQ, sizeof *r->callsites, load_callsite },
            &r->n_callsites);
    r->live = load_list(c, root, (struct list_spec){ "live", F_REQ, sizeof *r->live, load_live },
                        &r->n_live);
    r->crossings = load_list(c, root,
                             (struct list_spec){ "limit_crossings", F_REQ, sizeof *r->crossings,
                                                 load_crossing },
                             &r->n_crossings);
    r->pressure = load_list(c, root,
                            (struct list_spec){ "pressure_events", F_OPT, sizeof *r->pressure,
                                                load_pressure },
                            &r->n_pressure);
    r->markers = load_list(
            c, root, (struct list_spec){ "markers", F_OPT, sizeof *r->markers, load_marker },
            &r->n_markers);
    return !c->failed;
}

/* The library's own "vramwatch" object: its version, stack depth, Python frames. */
static bool load_writer(struct vctx *c, const cJSON *vw, struct model_report *r)
{
    size_t k = push_key(c, "vramwatch");
    bool ok = get_str(c, vw, "version", F_OPT, &r->version) &&
              get_int(c, vw, "stack_depth", F_OPT, 0, &r->stack_depth) &&
              get_bool(c, vw, "python", F_OPT, &r->python);
    pop(c, k);
    return ok;
}

static bool load_framework(struct vctx *c, const cJSON *fw, struct model_framework *m)
{
    size_t k = push_key(c, "framework");
    bool ok = get_str(c, fw, "name", F_OPT, &m->name) &&
              get_str(c, fw, "exception", F_OPT, &m->exception) &&
              get_str(c, fw, "message", F_OPT, &m->message) &&
              get_str(c, fw, "format", F_OPT, &m->format) &&
              get_int(c, fw, "time_unix_ns", F_OPT, 0, &m->time_unix_ns) &&
              get_int(c, fw, "thread", F_OPT, 0, &m->thread) &&
              get_int(c, fw, "count", F_OPT, 0, &m->count) &&
              get_int(c, fw, "device", F_OPT, 0, &m->device) &&
              get_int(c, fw, "requested_bytes", F_OPT, 0, &m->requested_bytes) &&
              get_int(c, fw, "capacity_bytes", F_OPT, 0, &m->capacity_bytes) &&
              get_int(c, fw, "free_bytes", F_OPT, 0, &m->free_bytes) &&
              get_int(c, fw, "process_in_use_bytes", F_OPT, 0, &m->process_in_use_bytes) &&
              get_int(c, fw, "allowed_bytes", F_OPT, 0, &m->allowed_bytes) &&
              get_int(c, fw, "allocated_bytes", F_OPT, 0, &m->allocated_bytes) &&
              get_int(c, fw, "reserved_unallocated_bytes", F_OPT, 0,
                      &m->reserved_unallocated_bytes) &&
              get_int(c, fw, "private_pools_bytes", F_OPT, 0, &m->private_pools_bytes);
    pop(c, k);
    m->known = ok;
    return ok;
}

static bool load_host_pinned(struct vctx *c, const cJSON *pinned, struct model_host_pinned *h)
{
    model_int v[5];
    size_t k = push_key(c, "host_pinned");
    bool ok = get_int(c, pinned, "live_bytes", F_OPT, 0, &v[0]) &&
              get_int(c, pinned, "peak_live_bytes", F_OPT, 0, &v[1]) &&
              get_int(c, pinned, "alloc_calls", F_OPT, 0, &v[2]) &&
              get_int(c, pinned, "free_calls", F_OPT, 0, &v[3]) &&
              get_int(c, pinned, "failed_calls", F_OPT, 0, &v[4]);
    pop(c, k);
    if (ok)
        *h = (struct model_host_pinned){ true, v[0].v, v[1].v, v[2].v, v[3].v, v[4].v };
    return ok;
}

static bool load_root(struct vctx *c, const cJSON *root, struct model_report *r)
{
    const cJSON *proc, *vw, *pinned, *fw, *tl, *tr;
    if (!load_head(c, root, r) || !req_int(c, root, "time_unix_ns", 0, &r->time_unix_ns) ||
        !get_object(c, root, "process", F_REQ, &proc))
        return false;
    size_t k = push_key(c, "process");
    bool ok = load_process(c, proc, &r->process);
    pop(c, k);
    if (!ok || !load_lists(c, root, r) ||
        !req_int(c, root, "live_truncated", 0, &r->live_truncated) ||
        !get_int(c, root, "failures_total", F_OPT, 0, &r->failures_total) ||
        !get_int(c, root, "callsites_dropped", F_OPT, 0, &r->callsites_dropped) ||
        !get_int(c, root, "pressure_events_total", F_OPT, 0, &r->pressure_events_total) ||
        !get_object(c, root, "vramwatch", F_OPT, &vw) ||
        !get_object(c, root, "host_pinned", F_OPT, &pinned) ||
        !get_object(c, root, "framework", F_OPT, &fw) ||
        !get_object(c, root, "timeline", F_OPT, &tl) || !get_object(c, root, "trace", F_OPT, &tr))
        return false;
    if (tl) {
        k = push_key(c, "timeline");
        ok = load_timeline(c, tl, &r->timeline);
        pop(c, k);
        if (!ok)
            return false;
    }
    if (tr) {
        k = push_key(c, "trace");
        ok = load_trace(c, tr, &r->trace);
        pop(c, k);
        if (!ok)
            return false;
    }
    r->python = -1;
    return (!vw || load_writer(c, vw, r)) && (!fw || load_framework(c, fw, &r->framework)) &&
           (!pinned || load_host_pinned(c, pinned, &r->host_pinned));
}

bool model_load(const char *path, struct model_report *r, struct strbuf *err)
{
    cJSON *root = json_load_file(path, err);
    if (!root) {
        *r = (struct model_report){ .path = path, .python = -1 };
        return false;
    }
    return model_load_tree(path, root, r, err);
}

bool model_load_tree(const char *path, cJSON *root, struct model_report *r, struct strbuf *err)
{
    *r = (struct model_report){ .path = path, .python = -1 };
    r->root = root;
    struct vctx c = { .err = err };
    bool ok = load_root(&c, r->root, r);
    sb_free(&c.path);
    if (!ok)
        model_free(r);
    else
        model_find_allocators(r);
    return ok;
}

void model_free(struct model_report *r)
{
    for (size_t i = 0; i < r->n_callsites; i++)
        free(r->callsites[i].frames);
    free(r->callsites);
    for (size_t i = 0; i < r->n_devices; i++)
        free(r->devices[i].procs);
    free(r->devices);
    free(r->failures);
    free(r->live);
    free(r->crossings);
    free(r->pressure);
    free(r->markers);
    for (size_t i = 0; i < r->timeline.n_devices; i++) {
        free(r->timeline.devices[i].buckets);
        free(r->timeline.devices[i].steps);
    }
    free(r->timeline.devices);
    free(r->trace.events);
    free(r->process.argv);
    free(r->process.env);
    cJSON_Delete(r->root);
    free(r->path_owned);
    *r = (struct model_report){ 0 };
}

const char *model_env(const struct model_report *r, const char *name)
{
    for (size_t i = 0; i < r->process.n_env; i++)
        if (strcmp(r->process.env[i].name, name) == 0)
            return r->process.env[i].value;
    return NULL;
}

const struct model_callsite *model_callsite(const struct model_report *r, int64_t id)
{
    for (size_t i = 0; i < r->n_callsites; i++)
        if (r->callsites[i].id == id)
            return &r->callsites[i];
    return NULL;
}

const struct model_device *model_device(const struct model_report *r, int64_t ordinal)
{
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].ordinal.known && r->devices[i].ordinal.v == ordinal)
            return &r->devices[i];
    return NULL;
}

bool model_failure_is_real_oom(const struct model_failure *f)
{
    return f->oom && f->retried != RETRIED_SUCCEEDED;
}

bool model_report_failure_is_real_oom(const struct model_report *r, const struct model_failure *f)
{
    if (strcmp(r->reason, "pressure") == 0)
        return f->oom && f->retried == RETRIED_FAILED;
    return model_failure_is_real_oom(f);
}

model_int model_time_origin(const struct model_report *r)
{
    return r->process.start_unix_ns;
}

static bool same_thread(const struct model_failure *a, const struct model_failure *b)
{
    return a->thread.known == b->thread.known && (!a->thread.known || a->thread.v == b->thread.v);
}

bool model_failure_is_retry(const struct model_report *r, const struct model_failure *f)
{
    /* the failure of the same thread just before this one, if any */
    const struct model_failure *before = NULL;
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *g = &r->failures[i];
        if (g != f && same_thread(g, f) && g->time_unix_ns <= f->time_unix_ns &&
            (!before || g->time_unix_ns >= before->time_unix_ns))
            before = g;
    }
    return before && before->retried == RETRIED_FAILED && before->size == f->size &&
           before->device.known == f->device.known &&
           (!f->device.known || before->device.v == f->device.v);
}

bool model_tells_steps(const struct model_report *r, const struct model_device *d)
{
    if (r->process.steps_reported == 1)
        return true;
    for (size_t i = 0; i < r->n_devices; i++)
        if ((!d || d == &r->devices[i]) && r->devices[i].steps.count > 0)
            return true;
    return false;
}

const struct model_failure *model_real_oom(const struct model_report *r)
{
    const struct model_failure *best = NULL;
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        if (model_report_failure_is_real_oom(r, f) &&
            (!best || f->time_unix_ns < best->time_unix_ns))
            best = f;
    }
    return best;
}

bool model_under_pressure(const struct model_report *r)
{
    if (model_real_oom(r) || r->framework.known)
        return false;
    if (strcmp(r->reason, "pressure") == 0)
        return true;
    /* Any other report: every failure it lists was an out-of-memory a retry overcame. A failure
     * of another kind is not pressure, and a report without failures had none. */
    for (size_t i = 0; i < r->n_failures; i++)
        if (!r->failures[i].oom || r->failures[i].retried != RETRIED_SUCCEEDED)
            return false;
    return r->n_failures > 0;
}

bool model_has_peak_sites(const struct model_report *r)
{
    for (size_t i = 0; i < r->n_callsites; i++)
        if (r->callsites[i].live_bytes_at_peak.known)
            return true;
    return false;
}

bool model_did_not_fit(const struct model_report *r)
{
    return model_real_oom(r) || r->framework.known || r->n_crossings > 0;
}

int64_t model_flushes(const struct model_report *r)
{
    int64_t n = (int64_t)r->n_pressure, devices = 0, rescued = 0;
    if (r->pressure_events_total.known && r->pressure_events_total.v > n)
        n = r->pressure_events_total.v;
    for (size_t i = 0; i < r->n_devices; i++)
        if (r->devices[i].cache_flushes.known)
            devices = util_sat_add(devices, r->devices[i].cache_flushes.v);
    for (size_t i = 0; i < r->n_failures; i++)
        rescued += r->failures[i].oom && r->failures[i].retried == RETRIED_SUCCEEDED;
    if (devices > n)
        n = devices;
    return rescued > n ? rescued : n;
}

int64_t model_flush_largest(const struct model_report *r)
{
    int64_t most = -1;
    for (size_t i = 0; i < r->n_pressure; i++)
        if (r->pressure[i].freed_bytes > most)
            most = r->pressure[i].freed_bytes;
    return most;
}

/* ---- which frame names a call site, and how it is written: one rule for every view ---- */

/* Frames of CUDA and of the frameworks around it: a user cannot act on them. */
static const char *const native_libraries[] = {
    "libcuda", "libcudart",    "libc10", "libtorch", "libcublas", "libcudnn",
    "libnccl", "libvramwatch", "libffi", "_ctypes", /* Python's ctypes calling into C */
};
/* The Python interpreter: its frames say nothing of the application's code. */
static const char *const interpreter_modules[] = { "python", "libpython" };
/* Python code of installed packages, and of the standard library. */
static const char *const python_packages[] = { "/site-packages/", "/dist-packages/" };

/* The path inside the installed packages' folder ("ultralytics/nn/modules/conv.py" of
 * ".../site-packages/ultralytics/nn/modules/conv.py"), or NULL for a file outside one. */
static const char *inside_packages(const char *file)
{
    for (size_t i = 0; i < sizeof python_packages / sizeof python_packages[0]; i++) {
        const char *m = strstr(file, python_packages[i]);
        if (m)
            return m + strlen(python_packages[i]);
    }
    return NULL;
}
/* The C runtime under everything: never the interesting frame. */
static const char *const system_libraries[] = { "libc.so",    "libc-",    "libstdc++",
                                                "libpthread", "libgcc_s", "ld-linux" };

static bool module_matches(const struct model_frame *f, const char *const *prefixes, size_t n)
{
    if (f->python || !f->module)
        return false;
    const char *base = util_basename(f->module);
    for (size_t i = 0; i < n; i++)
        if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

#define MODULE_IN(f, list) module_matches(f, list, sizeof list / sizeof list[0])

static bool frame_in_system(const struct model_frame *f)
{
    return MODULE_IN(f, system_libraries);
}

static bool frame_in_interpreter(const struct model_frame *f)
{
    return MODULE_IN(f, interpreter_modules);
}

bool model_frame_in_interpreter(const struct model_frame *f)
{
    return !f->python && frame_in_interpreter(f);
}

/* "DIGITS.DIGITS/" at s: the version folder of a standard library (/usr/lib/python3.11/). */
static bool python_version_folder(const char *s)
{
    if (*s < '0' || *s > '9')
        return false;
    while (*s >= '0' && *s <= '9')
        s++;
    if (*s++ != '.' || *s < '0' || *s > '9')
        return false;
    while (*s >= '0' && *s <= '9')
        s++;
    return *s == '/';
}

/* Whether a file is PyTorch's own: under an installed torch/ (site-packages/torch/), or a source
 * checkout's torch/ folder. A folder named torch that is here without an __init__.py is the
 * user's (tests/torch), not PyTorch; one that is not here (a report read on another machine) is
 * taken to be PyTorch's, as its name says. The last folder asked about is remembered: a report
 * asks about the same few thousand times. */
static bool is_pytorch_file(const char *file)
{
    static char last[PATH_MAX];
    static bool last_is;
    const char *pkg = inside_packages(file);
    if (pkg && strncmp(pkg, "torch/", 6) == 0)
        return true;
    if (strncmp(file, "torch/", 6) == 0) /* run from a checkout's root */
        return true;
    const char *t = strstr(file, "/torch/");
    if (!t)
        return false;
    size_t dir = (size_t)(t - file) + 7; /* through "torch/" */
    if (dir + sizeof "__init__.py" > sizeof last)
        return false;
    if (strncmp(last, file, dir) == 0 && last[dir] == '\0')
        return last_is;
    char init[PATH_MAX];
    memcpy(init, file, dir);
    init[dir] = '\0';
    bool here = access(init, F_OK) == 0;
    memcpy(init + dir, "__init__.py", sizeof "__init__.py");
    last_is = !here || access(init, F_OK) == 0;
    memcpy(last, file, dir);
    last[dir] = '\0';
    return last_is;
}

/* The Python of the machinery between a model's code and the card: PyTorch (also a source
 * checkout, where torch/ is not under site-packages), the standard library, code without a file,
 * an installed command's launcher (bin/yolo, bin/torchrun: pip writes them without ".py") and
 * vramwatch's own companion, which wraps the training loop. No one edits these to fit a card. */
static bool python_file_is_plumbing(const char *file)
{
    if (file[0] == '<') /* <frozen importlib._bootstrap>, <string> */
        return true;
    if (is_pytorch_file(file))
        return true;
    const char *base = util_basename(file);
    if (strcmp(base, "vramwatch_companion.py") == 0)
        return true;
    if (!util_has_suffix(base, ".py") && strstr(file, "/bin/"))
        return true;
    if (inside_packages(file))
        return false;
    for (const char *p = strstr(file, "/lib/python"); p; p = strstr(p + 1, "/lib/python"))
        if (python_version_folder(p + strlen("/lib/python")))
            return true;
    return false;
}

/* The installed package a Python file belongs to ("ultralytics" of .../site-packages/ultralytics/
 * nn/modules/conv.py), written into b; false for a file of no installed package. */
static bool python_package_of(const char *file, struct strbuf *b)
{
    const char *m = inside_packages(file);
    if (!m)
        return false;
    if (b) {
        size_t len = strcspn(m, "/");
        char *name = util_xmalloc(len + 1);
        memcpy(name, m, len);
        name[len] = '\0';
        /* a module file of its own (six.py) is named without ".py" */
        if (len > 3 && util_has_suffix(name, ".py"))
            name[len - 3] = '\0';
        util_add_text(b, name);
        free(name);
    }
    return true;
}

/* Python code the user did not write: the machinery above and installed packages. */
static bool python_file_is_library(const char *file)
{
    return python_file_is_plumbing(file) || python_package_of(file, NULL);
}

bool model_frame_is_library(const struct model_frame *f)
{
    if (f->python)
        return python_file_is_library(f->file);
    return MODULE_IN(f, native_libraries) || frame_in_system(f) || frame_in_interpreter(f);
}

bool model_frame_is_machinery(const struct model_frame *f)
{
    if (f->python)
        return python_file_is_plumbing(f->file);
    return model_frame_is_library(f);
}

/* The innermost Python frame outside the machinery: where the model's code made the tensor,
 * whether the user wrote it or a package did (Ultralytics' layers, transformers' models).
 * cs->n_frames when there is none. */
static size_t innermost_model_line(const struct model_callsite *cs)
{
    for (size_t i = 0; i < cs->n_frames; i++)
        if (cs->frames[i].python && !python_file_is_plumbing(cs->frames[i].file))
            return i;
    return cs->n_frames;
}

/* ---- functions that only allocate on behalf of their callers ----
 *
 * A caching allocator written in Python (examples/train_sim.py's CachingAllocator) is the
 * innermost line of every allocation it makes: weights and activations would be one row, named
 * by its cudaMalloc line. Such a function is told from the report alone, once when it is loaded:
 *   - it reaches the card directly: in every call site it is on, the frames inside the model's
 *     line are the foreign-function layer, the interpreter, the C runtime and CUDA only (never
 *     PyTorch or another framework: a function that calls a framework's operation computes,
 *     like a model's layer, and is the line to change), and
 *   - the report shows it called from two or more distinct lines, or only ever from functions
 *     that are allocators by this rule (the allocator's inner helpers, reached from one line).
 * A call site whose model line is in such functions is named by the first Python frame outside
 * them and the machinery. A function reached from one line only is not told from any other, and
 * keeps its name. Deterministic: the outcome does not depend on the order of equal links. */

/* A native frame between a Python line and the CUDA call it made itself: ctypes or cffi, the
 * interpreter, the C runtime, CUDA. */
static const char *const direct_libraries[] = {
    "libffi", "_ctypes", "_cffi_backend", "libcuda", "libvramwatch",
};

/* One non-machinery Python frame of a call site, outward from its model line. */
struct chain_link {
    const struct model_frame *f, *caller; /* caller: the next such frame outward, or NULL */
    size_t cs, frame, caller_frame;
    bool direct; /* the call site's model line called CUDA itself */
};

/* Whether the call site's model line called CUDA itself (the frames inside it: see above). */
static bool reaches_card_directly(const struct model_callsite *cs, size_t line)
{
    for (size_t i = 0; i < line; i++) {
        const struct model_frame *f = &cs->frames[i];
        if (f->python ? is_pytorch_file(f->file)
                      : !MODULE_IN(f, direct_libraries) && !frame_in_system(f) &&
                                !frame_in_interpreter(f))
            return false;
    }
    return true;
}

static int cmp_python_frame(const struct model_frame *a, const struct model_frame *b)
{
    if (!a || !b)
        return (a != NULL) - (b != NULL);
    int c = strcmp(a->file, b->file);
    if (c == 0)
        c = strcmp(a->function, b->function);
    return c != 0 ? c : (a->line > b->line) - (a->line < b->line);
}

/* By function (file and name, not line), then by caller line. */
static int cmp_links(const void *pa, const void *pb)
{
    const struct chain_link *a = pa, *b = pb;
    int c = strcmp(a->f->file, b->f->file);
    if (c == 0)
        c = strcmp(a->f->function, b->f->function);
    return c != 0 ? c : cmp_python_frame(a->caller, b->caller);
}

/* The links of every call site with a model line, and each call site's first frame's slot in a
 * table of all frames (offs). */
static struct chain_link *chain_links(const struct model_report *r, size_t *offs, size_t *n)
{
    size_t cap = 0;
    for (size_t c = 0; c < r->n_callsites; c++) {
        offs[c] = cap;
        cap += r->callsites[c].n_frames;
    }
    offs[r->n_callsites] = cap;
    struct chain_link *links = util_xcalloc(cap ? cap : 1, sizeof *links);
    *n = 0;
    for (size_t c = 0; c < r->n_callsites; c++) {
        const struct model_callsite *cs = &r->callsites[c];
        struct chain_link *prev = NULL;
        size_t line = innermost_model_line(cs);
        bool direct = line < cs->n_frames && reaches_card_directly(cs, line);
        for (size_t i = line; i < cs->n_frames; i++) {
            const struct model_frame *f = &cs->frames[i];
            if (!f->python || python_file_is_plumbing(f->file))
                continue;
            if (prev) {
                prev->caller = f;
                prev->caller_frame = i;
            }
            prev = &links[(*n)++];
            *prev = (struct chain_link){ f, NULL, c, i, SIZE_MAX, direct };
        }
    }
    return links;
}

/* What the rule knows of one function: the links [first, end) in the sorted table. */
struct alloc_fn {
    size_t first, end;
    bool direct_only, allocator;
};

/* Groups the sorted links by function, numbering each link's frame in fn_of, and marks the
 * functions that reach the card directly and are called from two or more lines. */
static struct alloc_fn *group_functions(const struct chain_link *l, size_t n, const size_t *offs,
                                        size_t *fn_of, size_t *nfn)
{
    struct alloc_fn *fns = util_xcalloc(n ? n : 1, sizeof *fns);
    *nfn = 0;
    for (size_t i = 0; i < n;) {
        struct alloc_fn *fn = &fns[(*nfn)++];
        *fn = (struct alloc_fn){ .first = i, .direct_only = true };
        size_t callers = 0;
        for (; i < n && strcmp(l[i].f->file, l[fn->first].f->file) == 0 &&
               strcmp(l[i].f->function, l[fn->first].f->function) == 0;
             i++) {
            fn_of[offs[l[i].cs] + l[i].frame] = *nfn - 1;
            fn->direct_only &= l[i].direct;
            if (l[i].caller && (i == fn->first || cmp_python_frame(l[i - 1].caller, l[i].caller)))
                callers++;
        }
        fn->end = i;
        fn->allocator = fn->direct_only && callers >= 2;
    }
    return fns;
}

/* Adds the functions reached directly and called only from allocators, until none is left. */
static void close_allocators(struct alloc_fn *fns, size_t nfn, const struct chain_link *l,
                             const size_t *offs, const size_t *fn_of)
{
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t k = 0; k < nfn; k++) {
            if (fns[k].allocator || !fns[k].direct_only)
                continue;
            bool all = true, any = false;
            for (size_t i = fns[k].first; i < fns[k].end && all; i++) {
                any |= l[i].caller != NULL;
                all = l[i].caller && fns[fn_of[offs[l[i].cs] + l[i].caller_frame]].allocator;
            }
            if (all && any) {
                fns[k].allocator = true;
                grew = true;
            }
        }
    }
}

void model_find_allocators(struct model_report *r)
{
    size_t *offs = util_xcalloc(r->n_callsites + 1, sizeof *offs), n, nfn;
    struct chain_link *links = chain_links(r, offs, &n);
    qsort(links, n, sizeof *links, cmp_links);
    size_t *fn_of = util_xcalloc(offs[r->n_callsites] + 1, sizeof *fn_of);
    struct alloc_fn *fns = group_functions(links, n, offs, fn_of, &nfn);
    close_allocators(fns, nfn, links, offs, fn_of);
    /* Each call site: outward from its model line past the allocator's frames. */
    for (size_t c = 0; c < r->n_callsites; c++) {
        struct model_callsite *cs = &r->callsites[c];
        size_t line = innermost_model_line(cs), past = line;
        cs->past_allocator = 0;
        for (size_t i = line; i < cs->n_frames; i++) {
            const struct model_frame *f = &cs->frames[i];
            if (!f->python || python_file_is_plumbing(f->file))
                continue;
            past = i;
            if (!fns[fn_of[offs[c] + i]].allocator)
                break;
        }
        if (past > line && !fns[fn_of[offs[c] + past]].allocator)
            cs->past_allocator = past;
    }
    free(fns);
    free(fn_of);
    free(links);
    free(offs);
}

size_t model_app_frame(const struct model_callsite *cs)
{
    if (!cs)
        return 0;
    /* The line of Python that made the tensor, even below native code of the user's own (an
     * extension module): Python is where the job is written. A package's line rather than the
     * user's own when the user's file only calls into the package (YOLO(...).train()): the
     * user's line is then the same for every allocation and says nothing. Below a function
     * that only allocates for its callers (model_find_allocators), the line that called it. */
    size_t i = innermost_model_line(cs);
    if (i < cs->n_frames)
        return cs->past_allocator > i ? cs->past_allocator : i;
    for (i = 0; i < cs->n_frames; i++)
        if (!model_frame_is_library(&cs->frames[i]))
            return i;
    /* Nothing of the application: the outermost framework frame below the interpreter and the C
     * runtime says most, the entry of a thread the framework started
     * (torch::autograd::Engine::thread_main: the backward pass), or the binding of the operation
     * Python called when Python frames are off (THPVariable_conv2d). */
    for (i = cs->n_frames; i-- > 0;)
        if (!frame_in_system(&cs->frames[i]) && !frame_in_interpreter(&cs->frames[i]))
            return i;
    return 0;
}

size_t model_first_user_frame(const struct model_callsite *cs)
{
    if (!cs || cs->n_frames == 0)
        return 0;
    /* The application frame's rule decides what is the application's: the Python lines outside
     * the machinery (the user's and a package's such as Ultralytics', which the job runs) or,
     * without one, native code outside the known libraries. Python frames are one block of the
     * chain, so the interpreter's entry and the process's above them are never the user's; a
     * native chain ends at the first library frame (the C runtime that called main), since the
     * executable's own _start above that is no code of the user's either. */
    size_t app = model_app_frame(cs), first = app;
    if (cs->frames[app].python) {
        for (size_t i = app + 1; i < cs->n_frames; i++)
            if (cs->frames[i].python && !python_file_is_plumbing(cs->frames[i].file))
                first = i;
        return first;
    }
    while (first + 1 < cs->n_frames && !model_frame_is_library(&cs->frames[first + 1]))
        first++;
    return first;
}

const struct model_frame *model_user_line(const struct model_callsite *cs)
{
    if (!cs || cs->n_frames == 0)
        return NULL;
    const struct model_frame *f = &cs->frames[model_app_frame(cs)];
    return f->python && !python_file_is_library(f->file) ? f : NULL;
}

bool model_add_site_rule(struct strbuf *b, const struct model_report *r,
                         const struct model_callsite *cs)
{
    if (!cs || cs->n_frames == 0)
        return false;
    size_t app = model_app_frame(cs);
    const struct model_frame *f = &cs->frames[app];
    if (cs->past_allocator && app == cs->past_allocator) {
        /* the allocator's outermost frame: the last line of the model's code inside the name */
        const struct model_frame *outer = NULL;
        for (size_t i = 0; i < app; i++)
            if (cs->frames[i].python && !python_file_is_plumbing(cs->frames[i].file))
                outer = &cs->frames[i];
        sb_add(b, "the line that calls ");
        model_add_frame(b, r, outer, MODEL_NAME_SHORT);
        sb_add(b, ", which only allocates for the lines that call it");
        return true;
    }
    if (!f->python || !python_package_of(f->file, NULL))
        return false;
    sb_add(b, "the innermost line outside PyTorch, in ");
    python_package_of(f->file, b);
    for (size_t i = app + 1; i < cs->n_frames; i++) {
        const struct model_frame *g = &cs->frames[i];
        if (g->python && !python_file_is_library(g->file)) {
            sb_add(b, ": your ");
            model_add_frame(b, r, g, MODEL_NAME_SHORT);
            sb_add(b, " only calls into it");
            return true;
        }
    }
    sb_add(b, ": no line of your own code is on the stack");
    return true;
}

/* A Python file as short as the form asks and it stays clear: MODEL_NAME_SHORT relative to the
 * process's folder, or from inside site-packages; MODEL_NAME_BRIEF its base name; else as
 * recorded. */
static void add_python_file(struct strbuf *b, const char *file, const char *cwd,
                            enum model_name_form form)
{
    size_t n = cwd ? strlen(cwd) : 0;
    if (form == MODEL_NAME_BRIEF) {
        util_add_text(b, util_basename(file));
        return;
    }
    if (form == MODEL_NAME_SHORT) {
        if (n > 1 && strncmp(file, cwd, n) == 0 && file[n] == '/') {
            util_add_text(b, file + n + 1);
            return;
        }
        const char *m = inside_packages(file);
        if (m) {
            util_add_text(b, m);
            return;
        }
    }
    util_add_text(b, file);
}

/* A demangled C++ name without its parameter list: "ns::Class::method" of
 * "ns::Class::method(std::shared_ptr<X> const&) const". */
static void add_short_symbol(struct strbuf *b, const char *sym)
{
    size_t len = strlen(sym), end = len, keep = len;
    if (end > 6 && strcmp(sym + end - 6, " const") == 0)
        end -= 6;
    if (end > 0 && sym[end - 1] == ')') {
        /* Back to the '(' that opens the parameter list; a name must stand before it. */
        size_t depth = 0;
        for (size_t i = end; i-- > 0;) {
            if (sym[i] == ')') {
                depth++;
            } else if (sym[i] == '(' && --depth == 0) {
                if (i > 0)
                    keep = i;
                break;
            }
        }
    }
    char *cut = util_xmalloc(keep + 1);
    memcpy(cut, sym, keep);
    cut[keep] = '\0';
    util_add_text(b, cut);
    free(cut);
}

/* The STACK form: what a frame is called in a flame graph, the function first. */
static void add_stack_frame(struct strbuf *b, const struct model_report *r,
                            const struct model_frame *f)
{
    if (f->python) {
        util_add_text(b, f->function);
        sb_add(b, " (");
        add_python_file(b, f->file, r->process.cwd, MODEL_NAME_SHORT);
        sb_printf(b, ":%" PRId64 ")", f->line);
        return;
    }
    const char *module = f->module && *f->module ? util_basename(f->module) : "?";
    if (!f->symbol) {
        /* without a symbol, the address is all that tells two functions of a module apart */
        util_add_text(b, module);
        sb_printf(b, "+0x%" PRIx64, (uint64_t)f->offset);
        return;
    }
    add_short_symbol(b, f->symbol);
    sb_add(b, " (");
    util_add_text(b, module);
    sb_addc(b, ')');
}

void model_add_frame(struct strbuf *b, const struct model_report *r, const struct model_frame *f,
                     enum model_name_form form)
{
    bool full = form == MODEL_NAME_FULL;
    if (form == MODEL_NAME_STACK) {
        add_stack_frame(b, r, f);
        return;
    }
    if (f->python) {
        add_python_file(b, f->file, r->process.cwd, form);
        sb_printf(b, ":%" PRId64 " in ", f->line);
        util_add_text(b, f->function);
        return;
    }
    if (f->symbol) {
        if (full)
            util_add_text(b, f->symbol);
        else
            add_short_symbol(b, f->symbol);
        if (full && f->symbol_offset.known)
            sb_printf(b, "+0x%" PRIx64, (uint64_t)f->symbol_offset.v);
        sb_add(b, " (");
    }
    const char *module = !f->module ? "" : full ? f->module : util_basename(f->module);
    util_add_text(b, *module ? module : "?");
    sb_printf(b, "+0x%" PRIx64, (uint64_t)f->offset);
    if (f->symbol)
        sb_addc(b, ')');
}

void model_add_callsite(struct strbuf *b, const struct model_report *r, int64_t id,
                        enum model_name_form form)
{
    const struct model_callsite *cs = model_callsite(r, id);
    if (!cs)
        sb_printf(b, "call site %" PRId64 " (not listed in the report)", id);
    else if (cs->n_frames == 0 && cs->id == 0)
        sb_add(b, "(no call site of its own: the call-site table was full)");
    else if (cs->n_frames == 0)
        sb_add(b, "(no stack recorded)");
    else
        model_add_frame(b, r, &cs->frames[model_app_frame(cs)], form);
}

void model_callsite_short(struct strbuf *b, const struct model_report *r, int64_t id)
{
    model_add_callsite(b, r, id, MODEL_NAME_BRIEF);
}

const struct model_device *model_main_device(const struct model_report *r)
{
    const struct model_failure *f = model_real_oom(r);
    const struct model_device *best = f && f->device.known ? model_device(r, f->device.v) : NULL;
    if (best)
        return best;
    for (size_t i = 0; i < r->n_devices; i++) {
        const struct model_device *d = &r->devices[i];
        if (!best || d->peak_reserved_bytes > best->peak_reserved_bytes ||
            (d->peak_reserved_bytes == best->peak_reserved_bytes &&
             d->peak_live_bytes > best->peak_live_bytes))
            best = d;
    }
    return best;
}

void model_tl_columns(const struct model_tl_device *d, int64_t from, int64_t to, size_t n,
                      int64_t *live, int64_t *reserved)
{
    double span = to > from ? (double)(to - from) : 1.0;
    int64_t last_live = 0, last_res = 0;
    size_t k = 0;
    for (size_t c = 0; c < n; c++) {
        int64_t end = from + (int64_t)(span * (double)(c + 1) / (double)n);
        bool any = false;
        int64_t lm = last_live, rm = last_res;
        for (; k < d->n_buckets && (d->buckets[k].t < end || c + 1 == n); k++) {
            const struct model_tl_bucket *b = &d->buckets[k];
            if (!any) {
                lm = b->live_max;
                rm = b->reserved_max;
                any = true;
            }
            lm = b->live_max > lm ? b->live_max : lm;
            rm = b->reserved_max > rm ? b->reserved_max : rm;
            last_live = b->live;
            last_res = b->reserved;
        }
        live[c] = lm;
        reserved[c] = rm;
    }
}

int64_t model_total_live(const struct model_report *r)
{
    int64_t sum = 0;
    for (size_t i = 0; i < r->n_devices; i++)
        sum = util_sat_add(sum, r->devices[i].live_bytes);
    return sum;
}
