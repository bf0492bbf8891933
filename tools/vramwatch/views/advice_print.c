/* advice_print.c: the advice (advice.h) as text for people and as vramwatch.advice/1 JSON. */
#include "advice_print.h"

#include <inttypes.h>
#include <string.h>

#include "json.h"
#include "wrap.h"

static const char *tri_text(enum advice_tri t)
{
    return t == ADVICE_TRI_TRUE    ? "fits"
           : t == ADVICE_TRI_FALSE ? "does not fit"
                                   : "may fit (not certain)";
}

/* A line of prose built in s, wrapped to the width (continuation lines indented by two), and
 * s emptied for the next. */
static void put_wrapped(FILE *out, struct strbuf *s, int width)
{
    wrap_put(out, "", "  ", sb_str(s), width);
    sb_truncate(s, 0);
}

/* The job's process that decides, and the card. */
static void print_setting(FILE *out, const struct advice *a, int width)
{
    const struct memmodel_obs *o = a->o;
    char b1[UTIL_SIZE_LEN], b2[UTIL_SIZE_LEN], b3[UTIL_SIZE_LEN];
    struct strbuf s = { 0 };
    if (a->job) {
        const struct model_report *d = a->job->procs[a->decides].r;
        sb_printf(&s, "Job: %zu processes", a->job->n);
        if (a->job->world_size.known)
            sb_printf(&s, " (world size %" PRId64 ")", a->job->world_size.v);
        sb_add(&s, "; the model is ");
        if (d->process.rank.known)
            sb_printf(&s, "rank %" PRId64 "'s", d->process.rank.v);
        else
            sb_printf(&s, "pid %" PRId64 "'s", d->process.pid);
        sb_printf(&s, ", %s", a->decides_why);
        put_wrapped(out, &s, width);
    }
    if (o->device->ordinal.known)
        sb_printf(&s, "Device %" PRId64 ": ", o->device->ordinal.v);
    else
        sb_add(&s, "Device: ");
    sb_printf(&s, "capacity %s (%s), %.0f%% headroom", util_fmt_size(a->capacity, b1),
              a->capacity_from, a->headroom);
    if (a->others > 0)
        sb_printf(&s, ", %s held by other processes", util_fmt_size(a->others, b3));
    sb_printf(&s, ": %s usable", util_fmt_size(a->usable > 0 ? a->usable : 0, b2));
    put_wrapped(out, &s, width);
    sb_free(&s);
}

/* "peak 15.09 GiB (+ 300.00 MiB CUDA context and libraries)": the peak as `vramwatch report`
 * shows it (what the job's allocations held at most), the memory outside them apart. The JSON's
 * observed.peak_bytes is the sum of the two (docs/advice.md). */
void advice_add_peak(struct strbuf *b, int64_t peak_reserved, int64_t untracked)
{
    char b1[UTIL_SIZE_LEN], b2[UTIL_SIZE_LEN];
    sb_printf(b, "peak %s", util_fmt_size(peak_reserved, b1));
    if (untracked > 0)
        sb_printf(b, " (+ %s CUDA context and libraries)", util_fmt_size(untracked, b2));
}

/* What the run showed: its batch and image, its peak, how it ended, its phases. */
static void print_observed(FILE *out, const struct advice *a, int width)
{
    const struct memmodel_obs *o = a->o;
    char b1[UTIL_SIZE_LEN];
    struct strbuf s = { 0 };
    sb_add(&s, "Observed: ");
    if (o->batch.found)
        sb_printf(&s, "batch %" PRId64 " (%s), ", o->batch.value, o->batch.name);
    else if (o->batch.autobatch)
        sb_printf(&s, "AutoBatch (%s), ", o->batch.name);
    else
        sb_add(&s, "no batch flag found, ");
    if (o->image.found)
        sb_printf(&s, "image %" PRId64 " (%s), ", o->image.value, o->image.name);
    advice_add_peak(&s, o->peak - o->untracked, o->untracked);
    if (o->oom)
        sb_printf(&s, "; ran out of memory: needs at least %s", util_fmt_size(o->need, b1));
    else if (o->observe && o->exact)
        sb_add(&s, "; observe mode: went over the limit, and ran to its end");
    else if (o->observe)
        sb_printf(&s,
                  "; observe mode: crossed the limit at %s (its peak holds the allocator's cache, "
                  "which it would have released on a full card)",
                  util_fmt_size(o->need, b1));
    put_wrapped(out, &s, width);
    if (o->phases && o->phase) {
        sb_printf(&s,
                  "Phases (%s): needs %s%s, in \"%s\" (what each phase added to the level it started "
                  "from, the allocator's cache of earlier phases left out)",
                  o->auto_phases ? "found from the call sites, no markers" : "markers",
                  o->exact ? "" : "at least ", util_fmt_size(o->need, b1), o->phase);
        put_wrapped(out, &s, width);
    }
    sb_free(&s);
}

/* The line the predictions follow, and the static part the batch never gets. */
static void print_model(FILE *out, const struct advice *a, int width)
{
    const struct memmodel_obs *o = a->o;
    const struct memmodel *m = &a->m;
    char b1[UTIL_SIZE_LEN], b2[UTIL_SIZE_LEN], b3[UTIL_SIZE_LEN];
    struct strbuf s = { 0 };
    sb_printf(&s, "Model (%s): need = %s + %s per sample", memmodel_basis_name(m->basis),
              util_fmt_size(advice_clamp_bytes(m->static_bytes), b1),
              util_fmt_size(advice_clamp_bytes(m->per_sample_bytes), b2));
    if (m->image_ref > 0)
        sb_printf(&s, " at image %" PRId64 " (scaling with the image side squared)", m->image_ref);
    sb_printf(&s, ", +/- %s", util_fmt_size(advice_clamp_bytes(m->spread), b3));
    if (m->lower_bound)
        sb_add(&s, ", a lower bound");
    sb_printf(&s,
              ", from %zu measured run%s and %zu lower bound%s (out-of-memory failures, "
              "observe-mode crossings)",
              m->n_points, m->n_points == 1 ? "" : "s", m->n_bounds, m->n_bounds == 1 ? "" : "s");
    put_wrapped(out, &s, width);
    /* why offload or sharding is (or is not) proposed: how much of the card the batch never gets */
    sb_printf(&s,
              "Static part (weights, gradients, optimizer state, CUDA context): %s, %.0f%% of the "
              "%s usable%s",
              util_fmt_size(advice_clamp_bytes(m->static_bytes), b1),
              a->usable > 0 ? 100.0 * m->static_bytes / (double)a->usable : 100.0,
              util_fmt_size(a->usable > 0 ? a->usable : 0, b2),
              o->static_level >= 0
                      ? ""
                      : " (not measured: no phase was found, so only the untracked memory)");
    put_wrapped(out, &s, width);
    sb_free(&s);
    fputc('\n', out);
}

/* A command on a line of its own, never wrapped, made safe for the terminal. */
static void put_command(FILE *out, const char *indent, const char *cmd)
{
    fputs(indent, out);
    util_put_text(out, cmd);
    fputc('\n', out);
}

/* Lines of code, each as written (its own indentation kept), never wrapped. */
static void put_code(FILE *out, const char *indent, const char *code)
{
    for (const char *p = code;;) {
        size_t n = strcspn(p, "\n");
        struct strbuf line = { 0 };
        sb_addn(&line, p, n);
        put_command(out, indent, sb_str(&line));
        sb_free(&line);
        if (!p[n])
            break;
        p += n + 1;
    }
}

/* "batch --batch 32", "amp", "validation 22": the kind and the value it proposes. */
static void add_rec_title(struct strbuf *b, const struct advice_rec *x)
{
    sb_add(b, x->kind);
    if (x->has_value && x->flag)
        sb_printf(b, " %s%s%" PRId64, x->flag, advice_flag_gap(x->flag),
                  x->value);
    else if (x->has_value)
        sb_printf(b, " %" PRId64, x->value);
}

/* ": predicted peak 10.52 GiB, may fit (not certain)", or ": fits", or nothing. */
static void add_rec_verdict(struct strbuf *b, const struct advice_rec *x)
{
    char b1[UTIL_SIZE_LEN];
    if (x->has_predicted)
        sb_printf(b, ": predicted peak %s, %s", util_fmt_size(advice_clamp_bytes(x->predicted), b1),
                  tri_text(x->fits));
    else if (x->fits != ADVICE_TRI_NULL || x->command)
        sb_printf(b, ": %s", tri_text(x->fits));
}

static void print_blocks(FILE *out, const struct advice *a, const struct advice_rec *x, int width)
{
    for (size_t k = 0; k < x->n_blocks; k++) {
        const struct advice_block *blk = &x->blocks[k];
        struct strbuf s = { 0 };
        if (strcmp(sb_str(&blk->body), sb_str(&a->fit_command)) == 0) {
            sb_printf(&s, "%s with the fit command above", blk->intro);
            wrap_put(out, "     ", "     ", sb_str(&s), width);
        } else {
            sb_printf(&s, "%s:", blk->intro);
            wrap_put(out, "     ", "     ", sb_str(&s), width);
            if (blk->code)
                put_code(out, "         ", sb_str(&blk->body));
            else
                put_command(out, "       ", sb_str(&blk->body));
        }
        sb_free(&s);
    }
}

static void print_recommendations(FILE *out, const struct advice *a, int width)
{
    if (a->n_recs == 0) {
        fputs("No change to recommend from these reports.\n", out);
        return;
    }
    fputs("Recommendations, best first:\n", out);
    for (size_t i = 0; i < a->n_recs; i++) {
        const struct advice_rec *x = &a->recs[i];
        struct strbuf s = { 0 };
        sb_printf(&s, "%zu. ", i + 1);
        add_rec_title(&s, x);
        add_rec_verdict(&s, x);
        wrap_put(out, "  ", "     ", sb_str(&s), width);
        sb_free(&s);
        if (x->command) {
            struct strbuf c = { 0 };
            util_add_argv(&c, (const char *const *)x->command, x->command_n);
            put_command(out, "     ", sb_str(&c));
            sb_free(&c);
        }
        if (sb_str(&x->note)[0])
            wrap_put(out, "     ", "     ", sb_str(&x->note), width);
        print_blocks(out, a, x, width);
    }
}

/* "Answer: change --batch from 64 to 32 (may fit, not certain)", "Answer: amp (predicted peak
 * 10.52 GiB, may fit, not certain)": the first recommendation in a sentence. */
static void add_answer_change(struct strbuf *b, const struct advice *a, const struct advice_rec *x)
{
    char b1[UTIL_SIZE_LEN];
    const struct cmdline_flag *now = strcmp(x->kind, "batch") == 0        ? &a->o->batch
                                     : strcmp(x->kind, "image_size") == 0 ? &a->o->image
                                                                          : NULL;
    bool eq = x->flag && x->flag[0] && x->flag[strlen(x->flag) - 1] == '=';
    if (now && now->found && x->flag && x->has_value && strcmp(now->name, x->flag) == 0 && eq)
        sb_printf(b, "Answer: change %s%" PRId64 " to %s%" PRId64, x->flag, now->value, x->flag,
                  x->value);
    else if (now && now->found && x->flag && x->has_value && strcmp(now->name, x->flag) == 0)
        sb_printf(b, "Answer: change %s from %" PRId64 " to %" PRId64, x->flag, now->value,
                  x->value);
    else if (x->flag && x->has_value)
        sb_printf(b, "Answer: set %s%s%" PRId64, x->flag, eq ? "" : " ", x->value);
    else if (x->flag && !eq &&
             (strcmp(x->kind, "amp") == 0 || strcmp(x->kind, "checkpointing") == 0))
        sb_printf(b, "Answer: %s, add %s", x->kind, x->flag);
    else {
        sb_add(b, "Answer: ");
        for (const char *k = x->kind; *k; k++)
            sb_addc(b, *k == '_' ? ' ' : *k); /* "smaller model", "other processes" */
    }
    if (!x->has_predicted && x->fits == ADVICE_TRI_NULL && !x->command)
        return;
    sb_add(b, " (");
    if (x->has_predicted)
        sb_printf(b, "predicted peak %s, ", util_fmt_size(advice_clamp_bytes(x->predicted), b1));
    sb_add(b, x->fits == ADVICE_TRI_TRUE    ? "fits)"
              : x->fits == ADVICE_TRI_FALSE ? "does not fit)"
                                            : "may fit, not certain)");
}

/* The answer: the first recommendation, the command to run next, and the measured search. */
static void print_answer(FILE *out, const struct advice *a, int width)
{
    struct strbuf s = { 0 };
    if (a->n_recs == 0) {
        fputs("Answer: no change to recommend from these reports.\n", out);
    } else {
        const struct advice_rec *x = &a->recs[0];
        if (strcmp(x->kind, "leak") == 0)
            sb_add(&s, "Answer: a leak fills the card; recommendation 1 below says where.");
        else {
            add_answer_change(&s, a, x);
            sb_add(&s, x->command ? "." : ": recommendation 1 below says how.");
        }
        wrap_put(out, "", "  ", sb_str(&s), width);
        if (x->command) {
            fputs("Run next:\n", out);
            struct strbuf c = { 0 };
            util_add_argv(&c, (const char *const *)x->command, x->command_n);
            put_command(out, "  ", sb_str(&c));
            sb_free(&c);
        }
    }
    if (sb_str(&a->fit_command)[0]) {
        wrap_put(out, "", "  ",
                 a->n_recs ? "Or find the largest batch that fits by measuring:"
                           : "Find the largest batch that fits by measuring:",
                 width);
        put_command(out, "  ", sb_str(&a->fit_command));
    }
    sb_free(&s);
}

void advice_print_answer(FILE *out, const struct advice *a)
{
    print_answer(out, a, wrap_width(out));
}

void advice_print_brief(FILE *out, const struct advice *a)
{
    struct strbuf s = { 0 };
    util_add_argv(&s, a->r->process.argv, a->r->process.argc);
    fprintf(out, "vramwatch advise: %s\n\n", sb_str(&s));
    sb_free(&s);
    advice_print_answer(out, a);
}

void advice_print_details(FILE *out, const struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    int width = wrap_width(out);
    print_setting(out, a, width);
    print_observed(out, a, width);
    if (!o->batch.found && o->batch.autobatch) {
        wrap_put(out, "", "  ",
                 "Model: none (AutoBatch chose the batch inside the job; the report cannot say "
                 "which)",
                 width);
        fputc('\n', out);
    } else {
        print_model(out, a, width);
    }
    print_recommendations(out, a, width);
}

void advice_print_text(FILE *out, const struct advice *a)
{
    advice_print_brief(out, a);
    fputc('\n', out);
    advice_print_details(out, a);
}

/* The note as the JSON has it: the prose, then each block inline ("; INTRO: BODY"). */
static void add_note_inline(struct strbuf *b, const struct advice_rec *x)
{
    sb_add(b, sb_str(&x->note));
    for (size_t k = 0; k < x->n_blocks; k++)
        sb_printf(b, "%s%s: %s", b->len ? "; " : "", x->blocks[k].intro,
                  sb_str(&x->blocks[k].body));
}

static cJSON *int_or_null(bool known, double v)
{
    if (!known)
        return cJSON_CreateNull();
    return json_new_int(advice_clamp_bytes(v));
}

static cJSON *exact_or_null(bool known, int64_t v)
{
    return known ? json_new_int(v) : cJSON_CreateNull();
}

static cJSON *argv_json(const char *const *argv, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(argv[i] ? argv[i] : ""));
    return arr;
}

void advice_print_json(FILE *out, const struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", ADVICE_SCHEMA);
    cJSON *dev = cJSON_AddObjectToObject(root, "device");
    cJSON_AddItemToObject(dev, "ordinal",
                          exact_or_null(o->device->ordinal.known, o->device->ordinal.v));
    cJSON_AddItemToObject(dev, "capacity_bytes", json_new_int(a->capacity));
    /* beyond the contract: what the job may use (capacity less headroom and other processes) */
    cJSON_AddItemToObject(dev, "usable_bytes", json_new_int(a->usable > 0 ? a->usable : 0));
    cJSON *obs = cJSON_AddObjectToObject(root, "observed");
    cJSON_AddItemToObject(obs, "argv", argv_json(a->r->process.argv, a->r->process.argc));
    cJSON_AddItemToObject(obs, "batch", exact_or_null(o->batch.found, o->batch.value));
    cJSON_AddItemToObject(obs, "image_size", exact_or_null(o->image.found, o->image.value));
    cJSON_AddItemToObject(obs, "peak_bytes", json_new_int(o->peak));
    cJSON_AddItemToObject(obs, "need_lower_bound_bytes", exact_or_null(!o->exact, o->need));
    cJSON *mod = cJSON_AddObjectToObject(root, "model");
    cJSON_AddItemToObject(mod, "static_bytes", int_or_null(true, a->m.static_bytes));
    cJSON_AddItemToObject(mod, "per_sample_bytes", int_or_null(true, a->m.per_sample_bytes));
    cJSON_AddItemToObject(mod, "image_size", exact_or_null(a->m.image_ref > 0, a->m.image_ref));
    cJSON_AddStringToObject(mod, "basis", memmodel_basis_name(a->m.basis));
    /* beyond the contract: the text's "+/-", and whether predictions are lower bounds */
    cJSON_AddItemToObject(mod, "uncertainty_bytes", int_or_null(true, a->m.spread));
    cJSON_AddBoolToObject(mod, "lower_bound", a->m.lower_bound);
    cJSON_AddBoolToObject(mod, "static_measured", a->o->static_level >= 0);
    cJSON *recs = cJSON_AddArrayToObject(root, "recommendations");
    for (size_t i = 0; i < a->n_recs; i++) {
        const struct advice_rec *x = &a->recs[i];
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "kind", x->kind);
        if (x->flag)
            cJSON_AddStringToObject(r, "flag", x->flag);
        else
            cJSON_AddNullToObject(r, "flag");
        cJSON_AddItemToObject(r, "value", exact_or_null(x->has_value, x->value));
        if (x->command)
            cJSON_AddItemToObject(r, "command",
                                  argv_json((const char *const *)x->command, x->command_n));
        else
            cJSON_AddNullToObject(r, "command");
        cJSON_AddItemToObject(r, "predicted_peak_bytes",
                              int_or_null(x->has_predicted, x->predicted));
        if (x->fits == ADVICE_TRI_NULL)
            cJSON_AddNullToObject(r, "fits");
        else
            cJSON_AddBoolToObject(r, "fits", x->fits == ADVICE_TRI_TRUE);
        struct strbuf note = { 0 };
        add_note_inline(&note, x);
        cJSON_AddStringToObject(r, "note", sb_str(&note));
        sb_free(&note);
        cJSON_AddItemToArray(recs, r);
    }
    if (a->job) {
        /* beyond the contract: which process of the job the advice is built on */
        const struct model_report *d = a->job->procs[a->decides].r;
        cJSON *job = cJSON_AddObjectToObject(root, "job");
        cJSON_AddItemToObject(job, "processes", json_new_int((int64_t)a->job->n));
        cJSON_AddItemToObject(job, "world_size",
                              exact_or_null(a->job->world_size.known, a->job->world_size.v));
        cJSON_AddItemToObject(job, "rank", exact_or_null(d->process.rank.known, d->process.rank.v));
        cJSON_AddItemToObject(job, "pid", json_new_int(d->process.pid));
        cJSON_AddStringToObject(job, "why", a->decides_why);
    }
    json_print(out, root);
    cJSON_Delete(root);
}
