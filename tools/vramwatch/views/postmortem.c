/* postmortem.c: one report's post-mortem, the text a person reads in ten seconds: what failed
 * and where, each device's memory, the call sites holding the most, leaks, cache flushes. */
#include "postmortem.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "advice_print.h"
#include "colour.h"
#include "findings.h"
#include "memmodel.h"
#include "wrap.h"

#define TOP_CALLSITES 10
/* Application frames shown for the failure without --full. */
#define FAILURE_FRAMES 4

/* Times count from the process start; absolute when the report does not know it. */
static const char *when(const struct model_report *r, int64_t t, char buf[UTIL_TIME_LEN])
{
    model_int start = model_time_origin(r);
    return start.known ? util_fmt_reltime(t, start.v, buf) : util_fmt_abstime(t, buf);
}

static void add_device_name(struct strbuf *b, model_int ordinal)
{
    if (ordinal.known)
        sb_printf(b, "device %" PRId64, ordinal.v);
    else
        sb_add(b, "an unknown device");
}

/* The one line that names a call site, as the report's tables write it (model.h: the one rule). */
static void add_callsite(struct strbuf *b, const struct model_report *r, int64_t id)
{
    model_add_callsite(b, r, id, MODEL_NAME_SHORT);
}

static void add_frame(struct strbuf *b, const struct model_report *r, const struct model_frame *f,
                      bool full)
{
    model_add_frame(b, r, f, full ? MODEL_NAME_FULL : MODEL_NAME_SHORT);
}

/* Where the stack shown under "called from" starts: the application's innermost frame, which may
 * be native code of its own (an extension module) below the line that names the call site; the
 * application frame (model.h) when that comes first or no frame is the application's. */
static size_t first_own_frame(const struct model_callsite *cs)
{
    size_t app = model_app_frame(cs);
    for (size_t i = 0; i < app; i++)
        if (!model_frame_is_library(&cs->frames[i]))
            return i;
    return app;
}

static void put_line(FILE *out, const char *indent, struct strbuf *b)
{
    fprintf(out, "%s%s\n", indent, sb_str(b));
    sb_truncate(b, 0);
}

/* "  label          text": the label column of the device and failure blocks. */
static void put_row(FILE *out, const char *label, struct strbuf *b)
{
    fprintf(out, "  %-14s %s\n", label, sb_str(b));
    sb_truncate(b, 0);
}

static void print_full_stack(FILE *out, const struct model_report *r,
                             const struct model_callsite *cs, const char *indent)
{
    struct strbuf b = { 0 };
    for (size_t i = 0; i < cs->n_frames; i++) {
        sb_printf(&b, "#%zu ", i);
        add_frame(&b, r, &cs->frames[i], true);
        put_line(out, indent, &b);
    }
    sb_free(&b);
}

static const char *reason_text(const char *reason)
{
    if (strcmp(reason, "oom") == 0)
        return "an allocation ran out of memory";
    if (strcmp(reason, "exit") == 0)
        return "the program exited";
    if (strcmp(reason, "request") == 0)
        return "vramwatch_dump() was called";
    if (strcmp(reason, "pressure") == 0)
        return "an allocation failed and its retry succeeded (memory pressure)";
    return "the program received a fatal signal";
}

static void print_header(FILE *out, const struct model_report *r, const struct colour_style *st)
{
    const struct model_process *p = &r->process;
    struct strbuf b = { 0 };
    char t[UTIL_TIME_LEN];
    if (p->argc)
        util_add_argv(&b, p->argv, p->argc);
    else
        util_add_text(&b, p->exe ? p->exe : "(command line unknown)");
    fprintf(out, "%svramwatch report: %s%s\n", st->bold, sb_str(&b), st->reset);
    sb_truncate(&b, 0);
    sb_printf(&b, "pid %" PRId64 " on ", p->pid);
    util_add_text(&b, p->host);
    if (p->rank.known) {
        sb_printf(&b, ", rank %" PRId64, p->rank.v);
        if (p->world_size.known)
            sb_printf(&b, " of %" PRId64, p->world_size.v);
        if (p->local_rank.known)
            sb_printf(&b, " (local rank %" PRId64 ")", p->local_rank.v);
    }
    put_line(out, "  ", &b);
    sb_truncate(&b, 0);
    sb_printf(&b, "report written at %s (%s): %s", when(r, r->time_unix_ns, t),
              p->start_unix_ns.known ? "times count from the process start"
                                     : "the process start is unknown",
              reason_text(r->reason));
    wrap_put(out, "  ", "  ", sb_str(&b), wrap_width(out));
    sb_free(&b);
}

/* "  label          value  note": the value right-aligned so sizes line up. Empties the note. */
static void add_plural(struct strbuf *b, int64_t n, const char *one, const char *many)
{
    sb_printf(b, "%" PRId64 " %s", n, n == 1 ? one : many);
}

static void print_row(FILE *out, const char *label, const char *value, struct strbuf *note)
{
    fprintf(out, "  %-14s %12s%s%s\n", label, value, note->len ? "  " : "", sb_str(note));
    sb_truncate(note, 0);
}

/* The peak row: what the job's allocations held at most (the reserved peak, the pools' cache
 * included: the figure advise and run call peak), with the memory outside them apart on the
 * device the advice reads (o, NULL when it cannot read the report). */
static void print_peak_row(FILE *out, const struct model_report *r, const struct model_device *d,
                           const struct memmodel_obs *o)
{
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], t[UTIL_TIME_LEN];
    struct strbuf b = { 0 };
    int64_t peak = d->peak_reserved_bytes > d->peak_live_bytes ? d->peak_reserved_bytes
                                                                : d->peak_live_bytes;
    if (o && o->device == d && o->untracked > 0)
        sb_printf(&b, "(+ %s CUDA context and libraries) ", util_fmt_size(o->untracked, s2));
    if (d->peak_time_unix_ns.known)
        sb_printf(&b, "at %s", when(r, d->peak_time_unix_ns.v, t));
    if (peak > d->peak_live_bytes)
        sb_printf(&b, "%slive at most %s", d->peak_time_unix_ns.known ? ", " : "",
                  util_fmt_size(d->peak_live_bytes, s2));
    print_row(out, "peak", util_fmt_size(peak, s1), &b);
    sb_free(&b);
}

static void print_device(FILE *out, const struct model_report *r, const struct model_device *d,
                         const struct memmodel_obs *o, const struct colour_style *st)
{
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN];
    struct strbuf b = { 0 };
    if (d->ordinal.known)
        fprintf(out, "%sDevice %" PRId64 ": ", st->bold, d->ordinal.v);
    else
        fprintf(out, "%sDevice of unknown ordinal: ", st->bold);
    util_put_text(out, d->name ? d->name : "name unknown");
    if (d->limit_bytes.known)
        fprintf(out, ", %s emulated by VRAMWATCH_LIMIT", util_fmt_size(d->limit_bytes.v, s1));
    else if (d->total_bytes.known)
        fprintf(out, ", %s", util_fmt_size(d->total_bytes.v, s1));
    else
        fputs(", capacity unknown", out);
    fprintf(out, "%s\n", st->reset);
    /* The ordinal is the process's own view; these name the card whatever CUDA_VISIBLE_DEVICES did. */
    if (d->pci_bus_id || d->uuid) {
        fputs("  physical GPU   ", out);
        util_put_text(out, d->pci_bus_id ? d->pci_bus_id : d->uuid);
        if (d->pci_bus_id && d->uuid) {
            fputs("  ", out);
            util_put_text(out, d->uuid);
        }
        fputc('\n', out);
    }

    if (d->live_count.known)
        sb_printf(&b, "in %" PRId64 " allocation%s", d->live_count.v,
                  d->live_count.v == 1 ? "" : "s");
    print_row(out, "live", util_fmt_size(d->live_bytes, s1), &b);
    print_peak_row(out, r, d, o);
    print_row(out, "reserved", util_fmt_size(d->reserved_bytes, s1), &b);
    sb_add(&b, "reserved - live: held by pools, not handed out");
    print_row(out, "fragmentation", util_fmt_size(d->reserved_bytes - d->live_bytes, s1), &b);
    if (d->untracked_bytes.known) {
        sb_add(&b, "driver used - reserved: CUDA context, libraries, other processes");
        print_row(out, "untracked", util_fmt_size(d->untracked_bytes.v, s1), &b);
    } else {
        sb_add(&b, "the driver's used memory was not known");
        print_row(out, "untracked", "unknown", &b);
    }
    print_row(out, "driver free",
              d->free_bytes.known ? util_fmt_size(d->free_bytes.v, s1) : "unknown", &b);
    if (d->n_procs) {
        /* whose the untracked memory partly is (NVML, when the card ran out) */
        int64_t sum = 0;
        for (size_t i = 0; i < d->n_procs; i++) {
            const struct model_proc *p = &d->procs[i];
            sb_printf(&b, "%spid %" PRId64, i ? ", " : "", p->pid);
            if (p->name)
                sb_printf(&b, " (%s)", p->name);
            if (p->used_bytes.known) {
                sb_printf(&b, " %s", util_fmt_size(p->used_bytes.v, s2));
                sum = util_sat_add(sum, p->used_bytes.v);
            }
        }
        print_row(out, "other procs", util_fmt_size(sum, s1), &b);
    }
    if (d->va_reserved_bytes.known && d->va_reserved_bytes.v > 0) {
        sb_add(&b, "reserved with cuMemAddressReserve: not memory");
        print_row(out, "address space", util_fmt_size(d->va_reserved_bytes.v, s1), &b);
    }
    add_plural(&b, d->alloc_calls, "allocation", "allocations");
    sb_add(&b, ", ");
    add_plural(&b, d->free_calls, "free", "frees");
    sb_printf(&b, ", %" PRId64 " failed", d->failed_calls);
    put_row(out, "calls", &b);
    sb_free(&b);
}

/* The failures other than the one shown, by kind, on one line. */
static void print_other_failures(FILE *out, const struct model_report *r,
                                 const struct model_failure *shown)
{
    int64_t flushed = 0, oom = 0, other = 0;
    for (size_t i = 0; i < r->n_failures; i++) {
        const struct model_failure *f = &r->failures[i];
        if (f == shown)
            continue;
        if (model_report_failure_is_real_oom(r, f))
            oom++;
        else if (f->oom)
            flushed++;
        else
            other++;
    }
    struct strbuf b = { 0 };
    const char *sep = "";
    if (flushed) {
        add_plural(&b, flushed, "out-of-memory that succeeded on retry (a cache flush)",
                   "out-of-memory failures that succeeded on retry (cache flushes)");
        sep = ", ";
    }
    if (oom) {
        sb_add(&b, sep);
        add_plural(&b, oom, "other out-of-memory", "other out-of-memory failures");
        sep = ", ";
    }
    if (other) {
        sb_add(&b, sep);
        add_plural(&b, other, "failure of another kind", "failures of another kind");
    }
    if (b.len)
        fprintf(out, "  %s: %s\n", shown ? "also" : "failures", sb_str(&b));
    if (r->failures_total.known && (uint64_t)r->failures_total.v > r->n_failures)
        fprintf(out, "  %" PRId64 " failures in all; the report lists the first %zu\n",
                r->failures_total.v, r->n_failures);
    sb_free(&b);
}

/* PyTorch's figures are worth a hint when the reserved-but-unallocated share is large. */
#define FRAGMENTATION_HINT_BYTES (1LL << 30)
#define FRAGMENTATION_HINT_SHARE 10 /* percent of the card */

/* Whether PyTorch's allocator already runs with expandable segments (then the hint is moot). */
static bool expandable_segments_on(const struct model_report *r)
{
    static const char *const names[] = { "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = model_env(r, names[i]);
        if (v && (strstr(v, "expandable_segments:True") || strstr(v, "expandable_segments:true")))
            return true;
    }
    return false;
}

/* "    label            value  note": one figure of PyTorch's verdict. Empties the note. */
static void print_verdict_row(FILE *out, const char *label, model_int v, struct strbuf *note)
{
    char s[UTIL_SIZE_LEN];
    fprintf(out, "    %-14s %12s%s%s\n", label, v.known ? util_fmt_size(v.v, s) : "unknown",
            note->len ? "  " : "", sb_str(note));
    sb_truncate(note, 0);
}

/* PyTorch's own verdict (the c10::OutOfMemoryError it threw), figure by figure, with ours beside
 * it where we have one. PyTorch sees inside its cache segments, which no CUDA call shows: its
 * "reserved but unallocated" is the fragmentation our reserved - live cannot see. `f` is the
 * failure shown above, NULL when no CUDA allocation failed for good. */
static void print_framework(FILE *out, const struct model_report *r, const struct model_failure *f,
                            const struct colour_style *st)
{
    const struct model_framework *fw = &r->framework;
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], t[UTIL_TIME_LEN];
    struct strbuf b = { 0 };
    util_add_text(&b, fw->exception ? fw->exception : "an out-of-memory error");
    if (fw->time_unix_ns.known)
        sb_printf(&b, " at %s", when(r, fw->time_unix_ns.v, t));
    if (fw->count.known && fw->count.v > 1)
        sb_printf(&b, " (the latest of %" PRId64 " raised)", fw->count.v);
    if (fw->format) {
        if (fw->device.known)
            sb_printf(&b, " on GPU %" PRId64, fw->device.v);
        sb_printf(&b, ": %s total, %s free",
                  fw->capacity_bytes.known ? util_fmt_size(fw->capacity_bytes.v, s1) : "unknown",
                  fw->free_bytes.known ? util_fmt_size(fw->free_bytes.v, s2) : "unknown");
    }
    put_row(out, "PyTorch said", &b);
    if (!fw->format) {
        /* A message in no format we read: its first line, as PyTorch wrote it. */
        const char *m = fw->message ? fw->message : "(no message)";
        size_t n = strcspn(m, "\n");
        char *line = util_xmalloc(n + 1);
        memcpy(line, m, n);
        line[n] = '\0';
        util_add_text(&b, line);
        free(line);
        put_line(out, "    ", &b);
        sb_free(&b);
        return;
    }
    if (f) {
        sb_add(&b, "vramwatch: ");
        util_add_text(&b, f->api);
        sb_printf(&b, " of %s", util_fmt_size(f->size, s1));
    }
    print_verdict_row(out, "requested", fw->requested_bytes, &b);
    sb_add(&b, "by this process, CUDA context included");
    if (f)
        sb_printf(&b, "; vramwatch: %s reserved", util_fmt_size(f->reserved_bytes_at_failure, s1));
    print_verdict_row(out, "in use", fw->process_in_use_bytes, &b);
    if (fw->allowed_bytes.known) {
        sb_add(&b, "PyTorch's own limit for this process (set_per_process_memory_fraction)");
        print_verdict_row(out, "allowed", fw->allowed_bytes, &b);
    }
    sb_add(&b, "by PyTorch, to tensors");
    if (fw->private_pools_bytes.known)
        sb_printf(&b, "; %s of it in private pools (CUDA graphs)",
                  util_fmt_size(fw->private_pools_bytes.v, s1));
    print_verdict_row(out, "allocated", fw->allocated_bytes, &b);
    sb_add(&b, "reserved by PyTorch but unallocated");
    if (f)
        sb_printf(&b, "; vramwatch (reserved - live): %s",
                  util_fmt_size(f->reserved_bytes_at_failure - f->live_bytes_at_failure, s1));
    print_verdict_row(out, "fragmentation", fw->reserved_unallocated_bytes, &b);

    /* Large fragmentation is what expandable segments are for: segments grow in place, so freed
     * space inside them can serve requests of any size. */
    int64_t capacity = fw->capacity_bytes.known ? fw->capacity_bytes.v : -1;
    const struct model_device *d = fw->device.known ? model_device(r, fw->device.v) : NULL;
    if (capacity < 0 && d && d->total_bytes.known)
        capacity = d->total_bytes.v;
    int64_t frag = fw->reserved_unallocated_bytes.v;
    if (fw->reserved_unallocated_bytes.known && !expandable_segments_on(r) &&
        (frag >= FRAGMENTATION_HINT_BYTES ||
         (capacity > 0 && frag >= capacity / 100 * FRAGMENTATION_HINT_SHARE)))
        fprintf(out,
                "  %sHint:%s %s reserved but unallocated is fragmentation: try "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True%s\n",
                st->bold, st->reset, util_fmt_size(frag, s1),
                /* The old message comes from PyTorch 2.0 and before, which lack the option. */
                strcmp(fw->format, "1.x") == 0 ? " (PyTorch 2.1 or later)" : "");
    sb_free(&b);
}

/* The first line after the header: where the program ran out of memory, as the line of the
 * user's own Python code when there is one, else the call site's application frame (model.h):
 * the name every view gives it. Nothing when no location is known. */
/* '  in phase "epoch 0 val": validation (from the markers)', under the headline: the phase the
 * advice finds the failure in (memmodel_observe: the job's markers or the companion's
 * model.train()/eval() phases, else phases found from the call sites), or nothing. */
static void print_failure_phase(FILE *out, const struct memmodel_obs *o)
{
    if (!o || !o->oom || !o->phase)
        return;
    struct strbuf b = { 0 };
    sb_printf(&b, "in phase \"%s\": %s (%s)", o->phase,
              memmodel_is_validation(o->phase) ? "validation" : "training",
              o->auto_phases ? "found from the call sites, no markers" : "from the markers");
    wrap_put(out, "  ", "  ", sb_str(&b), wrap_width(out));
    sb_free(&b);
}

static void print_lead(FILE *out, const struct model_report *r, const struct memmodel_obs *o,
                       const struct colour_style *st)
{
    const struct model_failure *f = model_real_oom(r);
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN];
    if (f) {
        const struct model_callsite *cs = model_callsite(r, f->callsite);
        if (cs && cs->n_frames)
            add_callsite(&b, r, f->callsite);
        if (b.len) {
            /* the location whole on its line: every view names it so (run_one_rule.py) */
            fprintf(out, "\n%sOut of memory at%s %s\n", st->red, st->reset, sb_str(&b));
            print_failure_phase(out, o);
            sb_truncate(&b, 0);
            if (model_add_site_rule(&b, r, cs))
                wrap_put(out, "  named by ", "  ", sb_str(&b), wrap_width(out));
        }
    } else if (r->framework.known) {
        const struct model_framework *fw = &r->framework;
        if (fw->requested_bytes.known)
            sb_printf(&b, ": tried to allocate %s", util_fmt_size(fw->requested_bytes.v, s1));
        if (fw->device.known)
            sb_printf(&b, " on GPU %" PRId64, fw->device.v);
        fprintf(out, "\n%sOut of memory in PyTorch%s%s\n", st->red, st->reset, sb_str(&b));
        print_failure_phase(out, o);
    } else if (model_under_pressure(r)) {
        /* A caching allocator that flushed and retried with success got its memory: the run
         * fitted, however tight, and saying "out of memory" would send people to shrink a job
         * that works. */
        int64_t flushes = model_flushes(r), largest = model_flush_largest(r);
        if (flushes == 1)
            sb_add(&b, "1 cache flush, rescued by its retry");
        else
            sb_printf(&b, "%" PRId64 " cache flushes, each rescued by its retry", flushes);
        if (largest >= 0)
            sb_printf(&b, " (the most one released: %s)", util_fmt_size(largest, s1));
        fprintf(out,
                "\n%sUnder memory pressure:%s %s;\n  no allocation ran out of memory for good\n",
                st->bold, st->reset, sb_str(&b));
    }
    sb_free(&b);
}

static void print_failure(FILE *out, const struct model_report *r, const struct report_opts *o,
                          const struct colour_style *st)
{
    const struct model_failure *f = model_real_oom(r);
    const char *title = "What failed:";
    if (!f) {
        if (r->framework.known) {
            /* PyTorch's own limit (a memory fraction), or a failure the report did not keep. */
            fprintf(out,
                    "%sWhat failed:%s PyTorch ran out of memory; no CUDA allocation failed for good\n",
                    st->red, st->reset);
            print_framework(out, r, NULL, st);
            print_other_failures(out, r, NULL);
            return;
        }
        if (r->n_failures == 0) {
            fprintf(out, "%sWhat failed:%s nothing; no allocation failed\n", st->bold, st->reset);
            return;
        }
        /* No real out-of-memory: show the first error of another kind, if any. */
        for (size_t i = 0; i < r->n_failures && !f; i++)
            if (!r->failures[i].oom)
                f = &r->failures[i];
        if (!f) {
            fprintf(out, "%sWhat failed:%s no allocation ran out of memory for good\n", st->bold,
                    st->reset);
            print_other_failures(out, r, NULL);
            return;
        }
        title = "What failed (not out of memory):";
    }
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], s3[UTIL_SIZE_LEN], t[UTIL_TIME_LEN];
    struct strbuf b = { 0 };
    fprintf(out, "%s%s%s ", f->oom ? st->red : st->bold, title, st->reset);
    util_put_text(out, f->api);
    fprintf(out, " of %s", util_fmt_size(f->size, s1));
    add_device_name(&b, f->device);
    fprintf(out, " on %s at %s\n", sb_str(&b), when(r, f->time_unix_ns, t));
    sb_truncate(&b, 0);

    util_add_text(&b, f->error_name ? f->error_name : "unknown error");
    sb_printf(&b, " (%" PRId64 ")", f->error_code);
    if (f->retried == RETRIED_FAILED)
        sb_add(&b, "; retried, and failed again");
    else if (f->retried == RETRIED_SUCCEEDED)
        sb_add(&b, "; retried, and succeeded");
    put_row(out, "error", &b);
    sb_printf(&b, "live %s, reserved %s, driver free %s",
              util_fmt_size(f->live_bytes_at_failure, s1),
              util_fmt_size(f->reserved_bytes_at_failure, s2),
              f->free_bytes_at_failure.known ? util_fmt_size(f->free_bytes_at_failure.v, s3)
                                             : "unknown");
    put_row(out, "at that moment", &b);
    if (r->framework.known)
        print_framework(out, r, f, st);

    const struct model_callsite *cs = model_callsite(r, f->callsite);
    if (!cs || cs->n_frames == 0) {
        add_callsite(&b, r, f->callsite);
        put_row(out, "called from", &b);
    } else if (o->full) {
        fputs("  called from\n", out);
        print_full_stack(out, r, cs, "    ");
    } else {
        /* The first application frame and its callers, without the machinery between (PyTorch,
         * the interpreter; an installed package's lines stay: they are the job's code). */
        fputs("  called from\n", out);
        size_t app = first_own_frame(cs), shown = 0;
        for (size_t i = app; i < cs->n_frames && shown < FAILURE_FRAMES; i++) {
            if (i > app && model_frame_is_machinery(&cs->frames[i]))
                continue;
            add_frame(&b, r, &cs->frames[i], false);
            put_line(out, "    ", &b);
            shown++;
        }
        size_t hidden = cs->n_frames - shown;
        if (hidden)
            fprintf(out,
                    "    (%zu more frame%s: libraries and outer callers; --full shows the whole stack)\n",
                    hidden, hidden == 1 ? "" : "s");
    }
    print_other_failures(out, r, f);
    sb_free(&b);
}

/* Call sites that end in the same line of the user's Python code are one row: PyTorch reaches
 * CUDA from one line through several native paths (a convolution, its batch norm, autograd's
 * buffers), and the line is what a person changes. Call sites without such a line stay rows of
 * their own, named as before. */
struct site_group {
    const struct model_frame *line;        /* NULL: one call site without a user Python line */
    const struct model_callsite **members; /* largest first */
    size_t n_members;
    int64_t live_bytes, live_count; /* saturating sums: report figures are untrusted */
    int64_t first_id;               /* the smallest member id: a stable order among equals */
};

struct keyed_site {
    const struct model_frame *line;
    const struct model_callsite *cs;
    int64_t bytes; /* live now, or at the peak (site_bytes) */
};

/* What the table counts of a call site: its live bytes when the report was written, or for a
 * run that fitted, when the report says, those at the devices' peaks (the allocations that made
 * the peak, not those still held at exit). */
static int64_t site_bytes(const struct model_callsite *cs, bool at_peak)
{
    return at_peak ? cs->live_bytes_at_peak.v : cs->live_bytes;
}

static int compare_lines(const struct model_frame *a, const struct model_frame *b)
{
    int c = strcmp(a->file, b->file);
    if (c)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    return strcmp(a->function, b->function);
}

/* Sites with a line first, one line's sites together, each line's largest first. */
static int by_line_then_live(const void *a, const void *b)
{
    const struct keyed_site *x = a, *y = b;
    if (!x->line != !y->line)
        return x->line ? -1 : 1;
    if (x->line) {
        int c = compare_lines(x->line, y->line);
        if (c)
            return c;
    }
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return (x->cs->id > y->cs->id) - (x->cs->id < y->cs->id);
}

static int group_by_live_desc(const void *a, const void *b)
{
    const struct site_group *x = a, *y = b;
    if (x->live_bytes != y->live_bytes)
        return x->live_bytes > y->live_bytes ? -1 : 1;
    return (x->first_id > y->first_id) - (x->first_id < y->first_id);
}

/* The call sites holding live memory, grouped; returns the number of groups. */
static size_t group_callsites(const struct model_report *r, bool at_peak,
                              struct site_group **groups_out,
                              const struct model_callsite ***members_out)
{
    struct keyed_site *ks = util_xcalloc(r->n_callsites, sizeof *ks);
    size_t n = 0;
    for (size_t i = 0; i < r->n_callsites; i++) {
        const struct model_callsite *cs = &r->callsites[i];
        if (site_bytes(cs, at_peak) > 0)
            ks[n++] = (struct keyed_site){ model_user_line(cs), cs, site_bytes(cs, at_peak) };
    }
    qsort(ks, n, sizeof *ks, by_line_then_live);
    const struct model_callsite **members = util_xcalloc(n, sizeof *members);
    struct site_group *groups = util_xcalloc(n, sizeof *groups);
    size_t g = 0;
    for (size_t i = 0; i < n; i++) {
        members[i] = ks[i].cs;
        bool joins = i > 0 && ks[i].line && ks[i - 1].line &&
                     compare_lines(ks[i].line, ks[i - 1].line) == 0;
        if (!joins)
            groups[g++] = (struct site_group){ ks[i].line, &members[i], 0, 0, 0, ks[i].cs->id };
        struct site_group *grp = &groups[g - 1];
        grp->n_members++;
        grp->live_bytes = util_sat_add(grp->live_bytes, ks[i].bytes);
        grp->live_count = util_sat_add(grp->live_count, ks[i].cs->live_count);
        if (ks[i].cs->id < grp->first_id)
            grp->first_id = ks[i].cs->id;
    }
    qsort(groups, g, sizeof *groups, group_by_live_desc);
    free(ks);
    *groups_out = groups;
    *members_out = members;
    return g;
}

static int64_t group_live_now(const struct site_group *g)
{
    int64_t sum = 0;
    for (size_t k = 0; k < g->n_members; k++)
        sum = util_sat_add(sum, g->members[k]->live_bytes);
    return sum;
}

static void print_callsites(FILE *out, const struct model_report *r, const struct report_opts *o,
                            const struct colour_style *st)
{
    /* A run that fitted is asked about its peak: what was live then, not at exit. */
    bool at_peak = !model_did_not_fit(r) && model_has_peak_sites(r);
    int64_t total = model_total_live(r), at_exit = total;
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN];
    if (at_peak) {
        total = 0; /* the sites' figures add up to the devices' peaks (docs/report-format.md) */
        for (size_t i = 0; i < r->n_devices; i++)
            total = util_sat_add(total, r->devices[i].peak_live_bytes);
    }
    struct site_group *groups;
    const struct model_callsite **members;
    size_t n = group_callsites(r, at_peak, &groups, &members);
    if (n == 0) {
        fprintf(out, "%sTop call sites by live bytes%s:%s nothing was live\n", st->bold,
                at_peak ? " at the peak" : "", st->reset);
    } else if (at_peak) {
        fprintf(out,
                "%sTop call sites by live bytes at the peak%s (of %s live at the peak, %s when written)\n",
                st->bold, st->reset, util_fmt_size(total, s1), util_fmt_size(at_exit, s2));
        fprintf(out, "  %12s  %6s  %12s  %s\n", "at the peak", "share", "live now", "where");
    } else {
        fprintf(out, "%sTop call sites by live bytes%s (of %s live)\n", st->bold, st->reset,
                util_fmt_size(total, s1));
        fprintf(out, "  %12s  %6s  %7s  %s\n", "live", "share", "count", "where");
    }
    struct strbuf b = { 0 };
    int64_t rest_bytes = 0;
    size_t rest_sites = 0;
    for (size_t i = 0; i < n; i++) {
        const struct site_group *g = &groups[i];
        if (i >= TOP_CALLSITES) {
            rest_bytes = util_sat_add(rest_bytes, g->live_bytes);
            rest_sites += g->n_members;
            continue;
        }
        double share = total > 0 ? 100.0 * (double)g->live_bytes / (double)total : 0.0;
        if (g->line)
            add_frame(&b, r, g->line, false);
        else
            add_callsite(&b, r, g->members[0]->id);
        if (g->n_members > 1)
            sb_printf(&b, " (%zu call sites)", g->n_members);
        if (at_peak) /* the count at the peak is not known; what the row's sites hold now is */
            fprintf(out, "  %12s  %5.1f%%  %12s  %s\n", util_fmt_size(g->live_bytes, s1), share,
                    util_fmt_size(group_live_now(g), s2), sb_str(&b));
        else
            fprintf(out, "  %12s  %5.1f%%  %7" PRId64 "  %s\n", util_fmt_size(g->live_bytes, s1),
                    share, g->live_count, sb_str(&b));
        sb_truncate(&b, 0);
        if (!o->full)
            continue;
        if (g->n_members == 1) {
            if (g->members[0]->n_frames)
                print_full_stack(out, r, g->members[0], "        ");
            continue;
        }
        for (size_t k = 0; k < g->n_members; k++) {
            const struct model_callsite *cs = g->members[k];
            fprintf(out, "        call site %" PRId64 ": %s live%s", cs->id,
                    util_fmt_size(site_bytes(cs, at_peak), s1),
                    at_peak ? " at the peak; now " : " in ");
            if (at_peak)
                sb_printf(&b, "%s in ", util_fmt_size(cs->live_bytes, s2));
            add_plural(&b, cs->live_count, "allocation", "allocations");
            put_line(out, "", &b);
            print_full_stack(out, r, cs, "          ");
        }
    }
    if (n > TOP_CALLSITES)
        fprintf(out, "  ... and %zu more call site%s holding %s\n", rest_sites,
                rest_sites == 1 ? "" : "s", util_fmt_size(rest_bytes, s1));
    if (r->callsites_dropped.known && r->callsites_dropped.v > 0)
        fprintf(out,
                "  %" PRId64
                " allocation%s got no call site of its own: the call-site table was full\n",
                r->callsites_dropped.v, r->callsites_dropped.v == 1 ? "" : "s");
    sb_free(&b);
    free(groups);
    free(members);
}

static void print_crossings(FILE *out, const struct model_report *r, const struct colour_style *st)
{
    if (r->n_crossings == 0)
        return;
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], s3[UTIL_SIZE_LEN], t[UTIL_TIME_LEN];
    struct strbuf b = { 0 };
    fprintf(out,
            "\n%sOver the emulated limit%s (observe mode: the allocation succeeded and the run went on)\n",
            st->bold, st->reset);
    for (size_t i = 0; i < r->n_crossings; i++) {
        const struct model_crossing *x = &r->crossings[i];
        const struct model_device *d = model_device(r, x->device);
        fprintf(out, "  device %" PRId64 ": ", x->device);
        util_put_text(out, x->api);
        fprintf(out, " of %s at %s", util_fmt_size(x->size, s1), when(r, x->time_unix_ns, t));
        if (d && d->limit_bytes.known)
            fprintf(out, " went past %s", util_fmt_size(d->limit_bytes.v, s2));
        fprintf(out, " with %s live\n", util_fmt_size(x->live_bytes_at_crossing, s3));
        add_callsite(&b, r, x->callsite);
        put_line(out, "    from ", &b);
        if (d)
            fprintf(out, "    peak live on this device: %s\n",
                    util_fmt_size(d->peak_live_bytes, s1));
    }
    sb_free(&b);
}

static void print_pressure(FILE *out, const struct model_report *r, const struct colour_style *st)
{
    if (r->n_pressure == 0)
        return;
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN];
    int64_t freed = 0, blocks = 0, largest = 0;
    for (size_t i = 0; i < r->n_pressure; i++) {
        freed = util_sat_add(freed, r->pressure[i].freed_bytes);
        blocks = util_sat_add(blocks, r->pressure[i].freed_count);
        if (r->pressure[i].freed_bytes > largest)
            largest = r->pressure[i].freed_bytes;
    }
    fprintf(out,
            "\n%sPressure:%s %zu cache flush%s freed %s in all (%" PRId64
            " block%s), the largest %s\n",
            st->bold, st->reset, r->n_pressure, r->n_pressure == 1 ? "" : "es",
            util_fmt_size(freed, s1), blocks, blocks == 1 ? "" : "s", util_fmt_size(largest, s2));
    fputs("  an allocation failed, the allocator released cached blocks and the retry succeeded:\n"
          "  memory was tight, but these were not the out-of-memory\n",
          out);
}

static void print_host_pinned(FILE *out, const struct model_report *r)
{
    const struct model_host_pinned *h = &r->host_pinned;
    if (!h->known || (h->alloc_calls == 0 && h->failed_calls == 0))
        return;
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN];
    fprintf(out,
            "\nHost pinned memory (host RAM, not on the card): %s live, peak %s, %" PRId64
            " allocations, %" PRId64 " failed\n",
            util_fmt_size(h->live_bytes, s1), util_fmt_size(h->peak_live_bytes, s2), h->alloc_calls,
            h->failed_calls);
}

/* Memory used on the card that no tracked allocation explains: worth a line when it is large. */
static void print_hints(FILE *out, const struct model_report *r, const struct colour_style *st)
{
    char s1[UTIL_SIZE_LEN];
    struct strbuf b = { 0 };
    for (size_t i = 0; i < r->n_devices; i++) {
        const struct model_device *d = &r->devices[i];
        if (!d->untracked_bytes.known || !d->total_bytes.known)
            continue;
        int64_t u = d->untracked_bytes.v;
        if (u < (1LL << 30) || u < d->total_bytes.v / 10)
            continue;
        add_device_name(&b, d->ordinal);
        fprintf(out,
                "\n%sHint:%s %s of %s is used outside the allocations vramwatch saw: the CUDA context,\n"
                "  libraries (cuDNN, cuBLAS workspaces) or other processes on the card (nvidia-smi lists them)\n",
                st->bold, st->reset, util_fmt_size(u, s1), sb_str(&b));
        sb_truncate(&b, 0);
    }
    sb_free(&b);
}

#define SPARK_COLS 48

/* The whole run in one line per device, from the report's timeline: the most live memory in
 * each slice of time, as eighths of a block from the run's lowest (non-zero) level to its peak,
 * so growth of a few percent still shows. */
static void print_sparklines(FILE *out, const struct model_report *r)
{
    static const char *const blocks[] = { " ",      "\u2581", "\u2582", "\u2583", "\u2584",
                                          "\u2585", "\u2586", "\u2587", "\u2588" };
    int64_t live[SPARK_COLS], res[SPARK_COLS];
    char s0[UTIL_SIZE_LEN], s1[UTIL_SIZE_LEN], t1[UTIL_TIME_LEN];
    struct strbuf b = { 0 };
    for (size_t i = 0; i < r->timeline.n_devices; i++) {
        const struct model_tl_device *d = &r->timeline.devices[i];
        if (d->n_buckets == 0)
            continue;
        int64_t end = r->time_unix_ns > d->start_unix_ns ? r->time_unix_ns : d->start_unix_ns + 1;
        model_tl_columns(d, d->start_unix_ns, end, SPARK_COLS, live, res);
        int64_t peak = 0, low = INT64_MAX;
        for (size_t c = 0; c < SPARK_COLS; c++) {
            peak = live[c] > peak ? live[c] : peak;
            low = live[c] > 0 && live[c] < low ? live[c] : low;
        }
        sb_truncate(&b, 0);
        add_device_name(&b, d->ordinal);
        if (low > peak)
            low = peak;
        fprintf(out, "Live memory over the run, %s (%s to %s in %s):\n  ", sb_str(&b),
                util_fmt_size(low, s0), util_fmt_size(peak, s1),
                util_fmt_reltime(end, d->start_unix_ns, t1) + 1);
        for (size_t c = 0; c < SPARK_COLS; c++) {
            int64_t level = 0;
            if (live[c] > 0)
                level = peak > low ? 1 + util_clamp_i64((double)(live[c] - low) * 7.0 /
                                                                (double)(peak - low) +
                                                        0.5)
                                   : 8;
            fputs(blocks[level < 0 ? 0 : level > 8 ? 8 : level], out);
        }
        fputc('\n', out);
    }
    sb_free(&b);
}

/* Memory that grows phase after phase (findings.h): the slow leak that ends in an OOM hours in. */
static void print_leaks(FILE *out, const struct model_report *r, const struct colour_style *st)
{
    struct leak_finding f[4];
    size_t n = findings_leaks(r, f, 4);
    struct strbuf b = { 0 };
    for (size_t i = 0; i < n && i < 4; i++) {
        sb_truncate(&b, 0);
        findings_describe_leak(&b, r, &f[i]);
        fprintf(out, "%sLeak:%s ", st->red, st->reset);
        util_put_text(out, sb_str(&b));
        fputc('\n', out);
    }
    sb_free(&b);
}

void postmortem_print(FILE *out, const struct model_report *r, const struct report_opts *o)
{
    const struct colour_style *st = colour_style(o->color);
    /* what the advice reads of the report: the phase of a failure, the memory outside the job's
     * allocations; NULL when it cannot read it */
    struct memmodel_obs obs;
    struct strbuf err = { 0 };
    const struct memmodel_obs *ob = memmodel_observe(r, 1, &obs, &err) ? &obs : NULL;
    sb_free(&err);
    print_header(out, r, st);
    print_lead(out, r, ob, st);
    for (size_t i = 0; i < r->n_devices; i++) {
        fputc('\n', out);
        print_device(out, r, &r->devices[i], ob, st);
    }
    if (r->n_devices == 0)
        fputs("\nNo device was used.\n", out);
    if (r->timeline.n_devices > 0) {
        fputc('\n', out);
        print_sparklines(out, r);
    }
    print_leaks(out, r, st);
    fputc('\n', out);
    print_failure(out, r, o, st);
    fputc('\n', out);
    print_callsites(out, r, o, st);
    print_crossings(out, r, st);
    print_pressure(out, r, st);
    print_host_pinned(out, r);
    print_hints(out, r, st);
}
