/* advice_print.c: the advice (advice.h) as text for people and as vramwatch.advice/1 JSON. */
#include "advice_print.h"

#include <inttypes.h>
#include <string.h>

#include "json.h"

static const char *tri_text(enum advice_tri t)
{
    return t == ADVICE_TRI_TRUE    ? "fits"
           : t == ADVICE_TRI_FALSE ? "does not fit"
                                   : "may fit (not certain)";
}

/* The command line, the job's process that decides, and the card. */
static void print_setting(FILE *out, const struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    char b1[UTIL_SIZE_LEN], b2[UTIL_SIZE_LEN], b3[UTIL_SIZE_LEN];
    struct strbuf s = { 0 };
    util_add_argv(&s, a->r->process.argv, a->r->process.argc);
    fprintf(out, "vramwatch advise: %s\n\n", sb_str(&s));
    sb_free(&s);
    if (a->job) {
        const struct model_report *d = a->job->procs[a->decides].r;
        fprintf(out, "Job: %zu processes", a->job->n);
        if (a->job->world_size.known)
            fprintf(out, " (world size %" PRId64 ")", a->job->world_size.v);
        fputs("; the model is ", out);
        if (d->process.rank.known)
            fprintf(out, "rank %" PRId64 "'s", d->process.rank.v);
        else
            fprintf(out, "pid %" PRId64 "'s", d->process.pid);
        fprintf(out, ", %s\n", a->decides_why);
    }
    if (o->device->ordinal.known)
        fprintf(out, "Device %" PRId64 ": ", o->device->ordinal.v);
    else
        fputs("Device: ", out);
    fprintf(out, "capacity %s (%s), %.0f%% headroom", util_fmt_size(a->capacity, b1),
            a->capacity_from, a->headroom);
    if (a->others > 0)
        fprintf(out, ", %s held by other processes", util_fmt_size(a->others, b3));
    fprintf(out, ": %s usable\n", util_fmt_size(a->usable > 0 ? a->usable : 0, b2));
}

/* What the run showed: its batch and image, its peak, how it ended, its phases. */
static void print_observed(FILE *out, const struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    char b1[UTIL_SIZE_LEN], b2[UTIL_SIZE_LEN];
    fputs("Observed: ", out);
    if (o->batch.found)
        fprintf(out, "batch %" PRId64 " (%s), ", o->batch.value, o->batch.name);
    else if (o->batch.autobatch)
        fprintf(out, "AutoBatch (%s), ", o->batch.name);
    else
        fputs("no batch flag found, ", out);
    if (o->image.found)
        fprintf(out, "image %" PRId64 " (%s), ", o->image.value, o->image.name);
    fprintf(out, "peak %s", util_fmt_size(o->peak, b1));
    if (o->oom)
        fprintf(out, "; ran out of memory: needs at least %s", util_fmt_size(o->need, b2));
    else if (o->observe && o->exact)
        fprintf(out, "; observe mode: went over the limit, and ran to its end");
    else if (o->observe)
        fprintf(out,
                "; observe mode: crossed the limit at %s (its peak holds the allocator's cache, which it would have released on a full card)",
                util_fmt_size(o->need, b2));
    fputc('\n', out);
    if (o->phases && o->phase)
        fprintf(out,
                "Phases (%s): needs %s%s, in \"%s\" (what each phase added to the level it started from, "
                "the allocator's cache of earlier phases left out)\n",
                o->auto_phases ? "found from the call sites, no markers" : "markers",
                o->exact ? "" : "at least ", util_fmt_size(o->need, b1), o->phase);
}

/* The line the predictions follow, and the static part the batch never gets. */
static void print_model(FILE *out, const struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    const struct memmodel *m = &a->m;
    char b1[UTIL_SIZE_LEN], b2[UTIL_SIZE_LEN], b3[UTIL_SIZE_LEN];
    fprintf(out, "Model (%s): need = %s + %s per sample", memmodel_basis_name(m->basis),
            util_fmt_size(advice_clamp_bytes(m->static_bytes), b1),
            util_fmt_size(advice_clamp_bytes(m->per_sample_bytes), b2));
    if (m->image_ref > 0)
        fprintf(out, " at image %" PRId64 " (scaling with the image side squared)", m->image_ref);
    fprintf(out, ", +/- %s", util_fmt_size(advice_clamp_bytes(m->spread), b3));
    if (m->lower_bound)
        fputs(", a lower bound", out);
    fprintf(out,
            "\n  from %zu measured run%s and %zu lower bound%s (out-of-memory failures, observe-mode crossings)\n",
            m->n_points, m->n_points == 1 ? "" : "s", m->n_bounds, m->n_bounds == 1 ? "" : "s");
    /* why offload or sharding is (or is not) proposed: how much of the card the batch never gets */
    fprintf(out,
            "Static part (weights, gradients, optimizer state, CUDA context): %s, %.0f%% of the %s usable%s\n",
            util_fmt_size(advice_clamp_bytes(m->static_bytes), b1),
            a->usable > 0 ? 100.0 * m->static_bytes / (double)a->usable : 100.0,
            util_fmt_size(a->usable > 0 ? a->usable : 0, b2),
            o->static_level >= 0
                    ? ""
                    : " (not measured: no phase was found, so only the untracked memory)");
    fputc('\n', out);
}

static void print_recommendations(FILE *out, const struct advice *a)
{
    char b1[UTIL_SIZE_LEN];
    if (a->n_recs == 0) {
        fputs("No change to recommend from these reports.\n", out);
        return;
    }
    fputs("Recommendations, best first:\n", out);
    for (size_t i = 0; i < a->n_recs; i++) {
        const struct advice_rec *x = &a->recs[i];
        fprintf(out, "  %zu. %s", i + 1, x->kind);
        if (x->has_value && x->flag)
            fprintf(out, " %s%s%" PRId64, x->flag, x->flag[strlen(x->flag) - 1] == '=' ? "" : " ",
                    x->value);
        else if (x->has_value)
            fprintf(out, " %" PRId64, x->value);
        if (x->has_predicted)
            fprintf(out, ": predicted peak %s, %s",
                    util_fmt_size(advice_clamp_bytes(x->predicted), b1), tri_text(x->fits));
        else if (x->fits != ADVICE_TRI_NULL || x->command)
            fprintf(out, ": %s", tri_text(x->fits));
        fputc('\n', out);
        if (x->command) {
            struct strbuf c = { 0 };
            util_add_argv(&c, (const char *const *)x->command, x->command_n);
            fprintf(out, "     %s\n", sb_str(&c));
            sb_free(&c);
        }
        fputs("     ", out);
        util_put_text(out, sb_str(&x->note));
        fputc('\n', out);
    }
}

void advice_print_text(FILE *out, const struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    print_setting(out, a);
    print_observed(out, a);
    if (!o->batch.found && o->batch.autobatch)
        fputs("Model: none (AutoBatch chose the batch inside the job; the report cannot say which)\n\n",
              out);
    else
        print_model(out, a);
    print_recommendations(out, a);
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
        cJSON_AddStringToObject(r, "note", sb_str(&x->note));
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
