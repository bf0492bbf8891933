/* advice.c: the advice engine (advice.h): what to change so the next run fits, from the memory
 * model of the job's reports (memmodel.c), the training script's own options (script.c) and the
 * leaks found in the report (findings.c). */
#include "advice.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"

#define GiB ((int64_t)1 << 30)
#define MAX_BATCH 1048576

static bool static_too_large(const struct advice *a);
static double weights_part(const struct advice *a);
static bool choose_capacity(struct advice *a, int64_t target);

static struct advice_rec *add_rec(struct advice *a, const char *kind)
{
    struct advice_rec *x = &a->recs[a->n_recs++];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->fits = ADVICE_TRI_NULL;
    return x;
}

static struct advice_rec *find_rec(struct advice *a, const char *kind)
{
    for (size_t i = 0; i < a->n_recs; i++)
        if (strcmp(a->recs[i].kind, kind) == 0)
            return &a->recs[i];
    return NULL;
}

/* Whether a run at this batch and image fits the card's usable part: certain only when the
 * prediction is not a lower bound, or when even the upper bound fits. */
static enum advice_tri fits_of(const struct advice *a, int64_t batch, int64_t image)
{
    double predicted = memmodel_predict(&a->m, batch, image);
    /* "fits" and "may fit" only within what is usable: the headroom is part of the answer */
    if (predicted > (double)a->usable)
        return ADVICE_TRI_FALSE;
    double lo, hi;
    if (memmodel_range(&a->m, batch, image, &lo, &hi) && hi > (double)a->usable)
        return ADVICE_TRI_NULL; /* the end of the range that would make it fit is not known to hold */
    if (!a->m.lower_bound)
        return ADVICE_TRI_TRUE;
    if (a->m.has_upper && memmodel_predict_upper(&a->m, batch, image) <= (double)a->usable)
        return ADVICE_TRI_TRUE;
    return ADVICE_TRI_NULL;
}

/* The recommendation is flag `f` set to `v`: the value, and the job's command line with it. */
static void set_value(struct advice_rec *x, const struct advice *a, const struct cmdline_flag *f,
                      int64_t v)
{
    x->flag = f->name;
    x->value = v;
    x->has_value = true;
    x->command = cmdline_with_value(a->r->process.argv, a->r->process.argc, f, v);
    x->command_n = a->r->process.argc;
}

/* The model's prediction at (batch, image) and whether that fits. */
static void set_predicted(struct advice_rec *x, const struct advice *a, int64_t batch,
                          int64_t image)
{
    x->predicted = memmodel_predict(&a->m, batch, image);
    x->has_predicted = true;
    x->fits = fits_of(a, batch, image);
}

const char *advice_flag_gap(const char *name)
{
    size_t n = strlen(name);
    return n && name[n - 1] == '=' ? "" : " ";
}

static void add_argv_note(struct strbuf *b, char **argv, size_t n)
{
    util_add_argv(b, (const char *const *)argv, n);
}

int64_t advice_clamp_bytes(double v)
{
    if (!(v > 0))
        return 0;
    if (v >= 9.2e18)
        return INT64_MAX;
    return (int64_t)llround(v);
}

static void add_size(struct strbuf *b, double bytes)
{
    char buf[UTIL_SIZE_LEN];
    sb_add(b, util_fmt_size(advice_clamp_bytes(bytes), buf));
}

/* The largest batch whose predicted need fits the usable memory, at this image size; 0 if none. */
static int64_t largest_batch(const struct advice *a, int64_t image)
{
    const struct memmodel *m = &a->m;
    double per = m->per_sample_bytes * memmodel_x(m, 1, image);
    double room = (double)a->usable - m->static_bytes;
    if (!(per > 0) || room < per)
        return 0;
    double b = floor(room / per);
    return b > MAX_BATCH ? MAX_BATCH : (int64_t)b;
}

/* The largest multiple of 32 that fits at this batch, at most the current size; 0 if none. */
static int64_t largest_image(const struct advice *a, int64_t batch, int64_t current)
{
    const struct memmodel *m = &a->m;
    double room = (double)a->usable - m->static_bytes;
    if (!(m->per_sample_bytes > 0) || m->image_ref <= 0 || batch < 1 || room <= 0)
        return 0;
    /* the flag's value: a multi-scale job's largest side is side_max times it */
    double side = (double)m->image_ref *
                  sqrt(room / (m->per_sample_bytes * memmodel_x(m, batch, m->image_ref)));
    double img = floor(side / 32.0) * 32.0;
    if (img > (double)current)
        img = (double)current;
    return img >= 32 ? (int64_t)img : 0;
}

/* The simulated card the report's run was on (`run --sim CARD` sets VRAMWATCH_SIM, which the
 * report keeps), or NULL: the commands that measure then run on the same card. */
static const char *sim_card(const struct advice *a)
{
    const char *v = model_env(a->r, "VRAMWATCH_SIM");
    return v && *v && strcspn(v, " \t\n'\"\\$`;&|<>") == strlen(v) ? v : NULL;
}

/* A command or code the note points to, printed apart from its prose (advice.h). */
static struct strbuf *add_block(struct advice_rec *x, const char *intro, bool code)
{
    if (x->n_blocks == ADVICE_MAX_BLOCKS)
        util_out_of_memory(); /* a programming error, as fatal: more blocks than a note has */
    struct advice_block *k = &x->blocks[x->n_blocks++];
    k->intro = intro;
    k->code = code;
    return &k->body;
}

static void add_measure_note(struct advice *a, struct advice_rec *x, char **cmd, size_t n)
{
    struct strbuf *b = add_block(x, "measure it exactly with", false);
    sb_add(b, "vramwatch run");
    /* Observe mode needs a card with room beyond the limit: on the simulator, twice the card. */
    if (sim_card(a)) {
        sb_add(b, " --sim ");
        util_add_size_arg(b, (uint64_t)(2 * a->capacity));
    }
    sb_add(b, " --limit ");
    util_add_size_arg(b, (uint64_t)a->capacity);
    sb_add(b, " --observe -- ");
    add_argv_note(b, cmd, n);
}

/* `vramwatch fit`: the measured search, started from cmd (the command as it ran, or the one
 * proposed when that one cannot be started from: AutoBatch's). */
static void add_fit_command(const struct advice *a, struct strbuf *b, const char *const *cmd,
                            size_t n)
{
    sb_add(b, "vramwatch fit");
    if (sim_card(a) && a->capacity > a->run_capacity) {
        /* a larger card than the run's: the simulated one of that size, not a limit above it */
        sb_add(b, " --sim ");
        util_add_size_arg(b, (uint64_t)a->capacity);
    } else if (sim_card(a)) {
        sb_printf(b, " --sim %s", sim_card(a));
    }
    if (a->capacity_from && strcmp(a->capacity_from, "the card's total") != 0 &&
        a->capacity <= a->run_capacity) {
        sb_add(b, " --limit ");
        util_add_size_arg(b, (uint64_t)a->capacity);
    }
    if (a->headroom != 10)
        sb_printf(b, " --headroom %g", a->headroom);
    sb_printf(b, " --flag %s -- ", a->o->batch.name);
    util_add_argv(b, cmd, n);
}

static void add_fit_note_from(struct advice *a, struct advice_rec *x, const char *const *cmd,
                              size_t n)
{
    add_fit_command(a, add_block(x, "find the largest batch that fits by measuring", false), cmd, n);
}

/* The fit command the answer names: the one a recommendation gives, else the search from the
 * command as it ran, where the batch flag is known. */
static void find_fit_command(struct advice *a)
{
    for (size_t i = 0; i < a->n_recs; i++)
        for (size_t k = 0; k < a->recs[i].n_blocks; k++)
            if (strncmp(sb_str(&a->recs[i].blocks[k].body), "vramwatch fit ", 14) == 0) {
                sb_add(&a->fit_command, sb_str(&a->recs[i].blocks[k].body));
                return;
            }
    /* no search where no batch fits: the static part alone fills the card, or a leak will */
    if (a->o->batch.found && !a->job && !a->static_large && !a->no_batch_fits && !a->leak_fills)
        add_fit_command(a, &a->fit_command, a->r->process.argv, a->r->process.argc);
}

static void add_fit_note(struct advice *a, struct advice_rec *x)
{
    add_fit_note_from(a, x, a->r->process.argv, a->r->process.argc);
}

/* YOLOv5/v7/v9 accumulate over accumulate = max(round(64 / batch), 1) steps (train_dual.py,
 * train()): the effective batch is batch x accumulate, near 64 below 43 and the batch itself from
 * 43 on (51 stays 51). Said with the figures of the batch recommended, not as a promise. */
static int64_t yolo_accumulate(int64_t batch)
{
    int64_t acc = (int64_t)floor(64.0 / (double)batch + 0.5);
    return acc < 1 ? 1 : acc;
}

static void yolo_note(const struct advice *a, struct advice_rec *x)
{
    if (!cmdline_is_yolo_accumulating(a->r->process.argv, a->r->process.argc) || !x->has_value ||
        x->value < 1)
        return;
    int64_t b = x->value, acc = yolo_accumulate(b);
    int64_t now_b = a->o->batch.found ? a->o->batch.value : 0;
    int64_t now_acc = now_b > 0 ? yolo_accumulate(now_b) : 0;
    sb_printf(
            &x->note,
            "; this script accumulates gradients by itself over max(round(64 / batch), 1) steps: at "
            "batch %" PRId64 " that is %" PRId64 " step%s, an effective batch of %" PRId64,
            b, acc, acc == 1 ? "" : "s", b * acc);
    if (now_b > 0)
        sb_printf(&x->note, " (now %" PRId64 ")", now_b * now_acc);
    if (acc > 1 || now_b * now_acc == b * acc)
        sb_add(&x->note, ": no accumulation flag is needed");
    else
        sb_add(&x->note,
               ": from batch 43 on it does not accumulate, so the optimiser sees a smaller batch than 64");
}

/* The report of an AutoBatch run (YOLO's --batch -1, Ultralytics' batch=-1 or batch=0.7): the
 * batch was chosen inside the job and the report cannot say which, so nothing is scaled from it.
 * AutoBatch profiles training only, at 80% (YOLOv9) or 60% (Ultralytics) of the free memory, with
 * no room for validation at twice the batch: a fixed batch, measured, makes the next run one that
 * is known to fit. 16 is both projects' fallback when AutoBatch fails. */
static bool advise_autobatch(struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    for (size_t i = 0; i < a->n_obs; i++)
        if (a->obs[i].batch.found || !a->obs[i].batch.autobatch)
            return false;
    struct advice_rec *x = add_rec(a, "batch");
    set_value(x, a, &o->batch, 16);
    x->fits = ADVICE_TRI_NULL;
    sb_add(&x->note,
           "AutoBatch chose the batch inside the job (it profiles training alone, aims at ");
    sb_add(&x->note, cmdline_family(a->r->process.argv, a->r->process.argc) == CMDLINE_ULTRALYTICS
                             ? (o->batch.fraction > 0 ? "the given share" : "60%")
                             : "80%");
    sb_add(&x->note,
           " of the free memory and leaves no room for validation, which YOLO runs at twice the batch); "
           "the report cannot say which batch it was, so nothing is predicted from it. Use a fixed batch "
           "instead, starting at 16, AutoBatch's own fallback");
    add_fit_note_from(a, x, (const char *const *)x->command, x->command_n);
    return true;
}

/* A job whose batch flag is its total, split over the ranks (YOLO's --batch, Ultralytics' batch=):
 * the batch must be a multiple of the world size (YOLOv9 asserts batch % WORLD_SIZE == 0 under
 * DDP). The batch b rounded down to one; b itself for everything else. */
static int64_t job_batch(const struct advice *a, int64_t b)
{
    const struct job *j = a->job;
    if (!j || b < 1)
        return b;
    int64_t world = job_world_size(j);
    return world > 1 ? cmdline_batch_for_world(a->r->process.argv, a->r->process.argc, b, world)
                     : b;
}

static void note_job_rounding(const struct advice *a, struct advice_rec *x, int64_t before)
{
    if (x->value == before || !a->job)
        return;
    int64_t world = job_world_size(a->job);
    sb_printf(&x->note,
              "%s%" PRId64 " rounded down to a multiple of the job's %" PRId64
              " ranks, which the script "
              "requires",
              x->note.len ? "; " : "", before, world);
}

/* Ultralytics halves the batch by itself when its first epoch runs out of memory on one GPU, at
 * most three times, and trains on (engine/trainer.py, 8.4): a run that exited after k
 * out-of-memory errors that PyTorch raised went on at batch / 2^k, and every batch above that
 * failed. 0 when that is not this report. */
static int ultralytics_halvings(const struct advice *a)
{
    const struct model_report *r = a->r;
    if (cmdline_family(r->process.argv, r->process.argc) != CMDLINE_ULTRALYTICS || !r->reason ||
        strcmp(r->reason, "exit") != 0 || !r->framework.known || !r->framework.count.known ||
        (a->job && job_world_size(a->job) > 1))
        return 0;
    int64_t k = r->framework.count.v;
    return k >= 1 && k <= 3 ? (int)k : 0;
}

/* The need is only known from below (a failure): half the batch, or less, as the next run. */
static void advise_batch_on_bound(struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    const struct memmodel *m = &a->m;
    int64_t cur_b = o->batch.found ? o->batch.value : 0;
    int64_t cur_img = o->image.found ? o->image.value : 0;
    /* a static part measured before the failure that alone fills the card: halving the
     * batch cannot help, and saying "may fit" would send the user on a useless run */
    if (a->static_large || !o->batch.found || cur_b < 2)
        return;
    /* Half the batch, or less when even the lower bound says half cannot fit; below every
     * batch the job itself tried and lost (Ultralytics' own halving). */
    int halvings = ultralytics_halvings(a);
    int64_t next = halvings ? cur_b >> halvings : cur_b / 2;
    /* --target a larger card than the one the run failed on: the batch that failed may fit it,
     * as far as the need's lower bound tells */
    bool larger = a->run_capacity > 0 && a->capacity > a->run_capacity;
    if (larger)
        next = cur_b;
    if (next < 1)
        next = 1;
    int64_t by_bound = largest_batch(a, cur_img);
    if (by_bound >= 1 && by_bound < next)
        next = by_bound;
    if (by_bound < 1 && o->static_level >= 0)
        a->no_batch_fits = true;
    struct advice_rec *x = add_rec(a, "batch");
    set_value(x, a, &o->batch, job_batch(a, next));
    double lower = memmodel_predict(m, x->value, cur_img);
    x->fits = lower > (double)a->usable ? ADVICE_TRI_FALSE : ADVICE_TRI_NULL;
    if (halvings)
        sb_printf(&x->note,
                  "Ultralytics halved the batch itself after each out-of-memory (PyTorch raised "
                  "%d), so this run trained on at batch=%" PRId64
                  ", not at batch=%" PRId64 " (its log says \"Reducing to batch=\"); ",
                  halvings, cur_b >> halvings, cur_b);
    if (larger) {
        sb_add(&x->note, "the run failed on a card of ");
        add_size(&x->note, (double)a->run_capacity);
        sb_add(&x->note, "; on this one of ");
        add_size(&x->note, (double)a->capacity);
        sb_printf(&x->note, " the need's lower bound at batch %" PRId64 " is ", x->value);
        add_size(&x->note, lower);
        sb_add(&x->note, next == cur_b ? ", within what is usable; " : ", too much at the batch that failed; ");
    }
    sb_add(&x->note,
           "the need is only known from below (the run failed before a step ended, with nothing else "
           "to go on): this is the next run to try, not a promise");
    note_job_rounding(a, x, next);
    add_fit_note(a, x);
    add_measure_note(a, x, x->command, x->command_n);
    yolo_note(a, x);
}

/* The largest batch that fits, with what is known of its need; returns it (below 1: none). */
static int64_t advise_largest_batch(struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    const struct memmodel *m = &a->m;
    int64_t cur_img = o->image.found ? o->image.value : 0;
    int64_t largest = o->batch.found ? largest_batch(a, cur_img) : 0;
    int64_t best_b = job_batch(a, largest);
    if (best_b < 1)
        return best_b;
    struct advice_rec *x = add_rec(a, "batch");
    set_value(x, a, &o->batch, best_b);
    set_predicted(x, a, best_b, cur_img);
    sb_printf(&x->note, "the largest batch whose predicted need stays within %.0f%% headroom",
              a->headroom);
    note_job_rounding(a, x, largest);
    if (m->has_upper) {
        sb_add(&x->note,
               "; the need lies between this prediction (from the level at which the run crossed the "
               "limit) and ");
        add_size(&x->note, memmodel_predict_upper(m, best_b, cur_img));
        sb_add(&x->note, " (from its peak, the allocator's cache included)");
        struct strbuf *b = add_block(x, "confirm with", false);
        sb_add(b, "vramwatch run --limit ");
        util_add_size_arg(b, (uint64_t)a->capacity);
        sb_add(b, " -- ");
        add_argv_note(b, x->command, x->command_n);
    } else if (m->lower_bound) {
        sb_add(&x->note, " (the model rests on a failure, so the prediction is a lower bound)");
    }
    double lo, hi;
    if (memmodel_range(m, best_b, cur_img, &lo, &hi)) {
        sb_add(&x->note,
               "; the run showed no phase, so the part of its memory that does not grow with the "
               "batch is unknown: at this batch the need lies between ");
        add_size(&x->note, advice_clamp_bytes(lo));
        sb_add(&x->note, " (all of it growing with the batch) and ");
        add_size(&x->note, advice_clamp_bytes(hi));
        sb_add(&x->note, " (none of it): measure it");
        add_fit_note(a, x);
    }
    yolo_note(a, x);
    return best_b;
}

/* A smaller image at the run's batch, when the job has an image size flag. */
static void advise_image(struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    int64_t cur_b = o->batch.found ? o->batch.value : 0;
    int64_t cur_img = o->image.found ? o->image.value : 0;
    if (!o->image.found || a->m.image_ref <= 0)
        return;
    int64_t at_b = cur_b > 0 ? cur_b : 1;
    int64_t img = largest_image(a, at_b, cur_img);
    if (img >= 32 && img < cur_img) {
        struct advice_rec *x = add_rec(a, "image_size");
        set_value(x, a, &o->image, img);
        set_predicted(x, a, at_b, img);
        sb_printf(&x->note,
                  "the largest multiple of 32 that fits at batch %" PRId64
                  "; a smaller image changes what the model sees, and can cost accuracy",
                  at_b);
    }
}

static void advise_batch_and_image(struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    const struct memmodel *m = &a->m;
    int64_t cur_img = o->image.found ? o->image.value : 0;
    a->static_large = static_too_large(a);
    a->no_batch_fits = a->static_large;
    if (m->basis == MEMMODEL_BOUND) {
        advise_batch_on_bound(a);
        return;
    }
    int64_t best_b = advise_largest_batch(a);
    advise_image(a);
    if (o->batch.found && best_b < 1) {
        a->no_batch_fits = true;
        if (a->static_large)
            return; /* offload and sharding say it, with the static part (advise_static) */
        struct advice_rec *x = add_rec(a, "multi_gpu");
        x->predicted = memmodel_predict(m, 1, cur_img);
        x->has_predicted = true;
        x->fits = fits_of(a, 1, cur_img);
        sb_add(&x->note,
               "not even batch 1 fits this card with the headroom: spread the job over several GPUs "
               "(torchrun --nproc_per_node=N, or DeepSpeed ZeRO to shard the optimizer state); plain DDP "
               "alone does not lower what one GPU holds (the whole model and at least one sample each): "
               "sharding (ZeRO stage 3, FSDP) does, for the static part");
    }
}

/* Keeping the effective batch when the batch goes down. */
static void advise_accumulation(struct advice *a, enum cmdline_family fam)
{
    struct advice_rec *batch = find_rec(a, "batch");
    const struct memmodel_obs *o = a->o;
    if (!batch || !o->batch.found || batch->value >= o->batch.value || fam == CMDLINE_YOLO)
        return;
    if (fam == CMDLINE_ULTRALYTICS) {
        sb_add(&batch->note,
               "; Ultralytics accumulates gradients up to its nominal batch of 64 (nbs) by itself: "
               "no accumulation setting is needed");
        return;
    }
    struct cmdline_flag acc;
    cmdline_find(a->r->process.argv, a->r->process.argc, CMDLINE_ACCUM, &acc);
    int64_t cur_acc = acc.found ? acc.value : 1;
    int64_t effective = o->batch.value * cur_acc;
    /* the fewest steps that bring the batch within the recommended one, and the batch that makes
     * the effective batch whole again (or as close below it as the division allows) */
    int64_t steps = (effective + batch->value - 1) / batch->value;
    int64_t per_step = effective / steps;
    if (per_step < 1)
        return;
    int64_t img = o->image.found ? o->image.value : 0;
    struct advice_rec *x = add_rec(a, "accumulation");
    x->value = steps;
    x->has_value = true;
    x->predicted = memmodel_predict(&a->m, per_step, img);
    x->has_predicted = batch->has_predicted;
    x->fits = batch->has_predicted ? fits_of(a, per_step, img) : batch->fits;
    /* a generic script that defines an accumulation option of its own, though not given here */
    static const char *const acc_options[] = { "--accumulate",
                                               "--grad-accum",
                                               "--grad_accum",
                                               "--gradient-accumulation-steps",
                                               "--gradient_accumulation_steps",
                                               "--accumulation-steps",
                                               "--accumulation_steps",
                                               "--accum-steps" };
    const char *defined = fam == CMDLINE_GENERIC && !acc.found
                                  ? script_option(&a->script, a->r, acc_options,
                                                  sizeof acc_options / sizeof acc_options[0])
                                  : NULL;
    if (defined) {
        x->flag = defined;
        struct cmdline_edit e[2] = { { &o->batch, NULL, per_step }, { &acc, defined, steps } };
        x->command =
                cmdline_with_edits(a->r->process.argv, a->r->process.argc, e, 2, &x->command_n);
    } else if (fam == CMDLINE_HF || acc.found) {
        x->flag = "--gradient_accumulation_steps";
        if (acc.found) {
            /* the flag's spelling, without the "=" of an attached form */
            snprintf(a->acc_name, sizeof a->acc_name, "%s", acc.name);
            size_t len = strlen(a->acc_name);
            if (len && a->acc_name[len - 1] == '=')
                a->acc_name[len - 1] = 0;
            x->flag = a->acc_name;
        }
        struct cmdline_edit e[2] = { { &o->batch, NULL, per_step },
                                     { &acc, "--gradient_accumulation_steps", steps } };
        x->command =
                cmdline_with_edits(a->r->process.argv, a->r->process.argc, e, 2, &x->command_n);
    }
    sb_printf(&x->note,
              "batch %" PRId64 " over %" PRId64
              " accumulation steps: an effective batch of %" PRId64 " (now %" PRId64 ")",
              per_step, steps, per_step * steps, effective);
    sb_add(&x->note, ", so the optimiser sees the same batch; the memory is that of batch ");
    sb_printf(&x->note, "%" PRId64, per_step);
    if (defined)
        sb_printf(&x->note, "; the script defines %s, though this command line does not give it",
                  defined);
    if (!x->command)
        sb_printf(
                &x->note,
                "; no accumulation flag was found on this command line: the script has to support it "
                "(and %s %" PRId64 ")",
                o->batch.name, per_step);
}

/* Whether the card supports bfloat16 well (compute capability 8.0 or later), from its name. */
static bool card_has_bf16(const struct model_device *d)
{
    static const char *const names[] = { "A100",        "A800",   "H100",   "H200",   "H800",
                                         "H20",         "B100",   "B200",   "GH200",  "GB200",
                                         "L4",          "L40",    "A10",    "A16",    "A30",
                                         "A40",         "RTX 30", "RTX 40", "RTX 50", "RTX A",
                                         "RTX 6000 Ada",
                                         /* the simulator's default device: compute capability
                                          * 9.0 (docs/simgpu.md), bfloat16 in PyTorch's eyes */
                                         "vramwatch simulated GPU" };
    if (!d->name)
        return false;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strstr(d->name, names[i]))
            return true;
    return false;
}

/* Typical savings, not measured on this job: they are labelled as such and never claim a fit. */
#define AMP_ACTIVATIONS_KEPT 0.55  /* half-precision activations, some fp32 buffers remain */
#define CKPT_ACTIVATIONS_KEPT 0.35 /* checkpoints at layer boundaries, one segment recomputed */

/* The last argument that starts with this prefix (Ultralytics' key=value, with or without
 * leading dashes, which it strips), or -1. */
static long find_key(const char *const *argv, size_t argc, const char *key)
{
    long at = -1;
    size_t n = strlen(key);
    for (size_t i = 1; i < argc; i++) {
        const char *s = argv[i] ? argv[i] : "";
        while (*s == '-')
            s++;
        if (strncmp(s, key, n) == 0)
            at = (long)i;
    }
    return at;
}

static bool false_word(const char *v)
{
    static const char *const no[] = { "False", "false", "0", "no", "No", "off", "f", "n" };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (strcmp(v, no[i]) == 0)
            return true;
    return false;
}

/* A copy of argv with one argument replaced (at < argc) or appended (at == argc). */
static char **argv_set(const char *const *argv, size_t argc, size_t at, const char *value,
                       size_t *out_n)
{
    size_t n = at < argc ? argc : argc + 1;
    char **c = util_xcalloc(n + 1, sizeof *c);
    for (size_t i = 0; i < argc; i++)
        c[i] = util_xstrdup(i == at ? value : argv[i] ? argv[i] : "");
    if (at >= argc)
        c[argc] = util_xstrdup(value);
    *out_n = n;
    return c;
}

/* Whether the job as it ran does not fit: only then are changes that cost speed worth proposing
 * to scripts that are not Hugging Face's (whose switches are cheap to try and always shown). */
static bool must_shrink(const struct advice *a)
{
    return a->o->oom || (double)a->o->need > (double)a->usable;
}

/* A prediction of a switch that was not measured on this job: it may fit, or is known not to. */
static void set_switch_prediction(struct advice *a, struct advice_rec *x, double predicted)
{
    x->predicted = predicted;
    x->has_predicted = true;
    x->fits = x->predicted > (double)a->usable ? ADVICE_TRI_FALSE : ADVICE_TRI_NULL;
}

static void typical_prediction(struct advice *a, struct advice_rec *x, double kept)
{
    const struct memmodel *m = &a->m;
    int64_t b = a->o->batch.found ? a->o->batch.value : 1;
    int64_t img = a->o->image.found ? a->o->image.value : 0;
    double batch_part = memmodel_predict(m, b, img) - m->static_bytes;
    set_switch_prediction(a, x, m->static_bytes + batch_part * kept);
}

/* The end of every such note: what the prediction is not, and how to measure it. */
static void add_not_measured(struct advice *a, struct advice_rec *x, const char *with)
{
    sb_printf(&x->note, " (not measured%s on this job", with);
    if (a->m.lower_bound)
        sb_add(&x->note, ", and the model is a lower bound");
    sb_add(&x->note, "): measure it with vramwatch run");
}

static void typical_note(struct advice *a, struct advice_rec *x, double kept)
{
    int64_t b = a->o->batch.found ? a->o->batch.value : 1;
    sb_printf(&x->note,
              "; at batch %" PRId64
              " the prediction assumes the typical %.0f%% of the batch's memory "
              "kept",
              b, kept * 100);
    add_not_measured(a, x, "");
}

/* A recommendation that turns a switch on (flag added to the command line as it ran). */
static struct advice_rec *add_switch_rec(struct advice *a, const char *kind, const char *flag)
{
    struct advice_rec *x = add_rec(a, kind);
    x->flag = flag;
    struct cmdline_edit e = { NULL, flag, 0 };
    x->command = cmdline_with_edits(a->r->process.argv, a->r->process.argc, &e, 1, &x->command_n);
    return x;
}

static void advise_typical(struct advice *a, const char *kind, const char *flag, double kept,
                           const char *why)
{
    struct advice_rec *x = add_switch_rec(a, kind, flag);
    typical_prediction(a, x, kept);
    sb_add(&x->note, why);
    typical_note(a, x, kept);
}

/* ---- Gradient checkpointing in Hugging Face's terms. Transformers checkpoints its layers (each a
 * GradientCheckpointingLayer: GPT2Block, LlamaDecoderLayer, BertLayer, T5Block...) and nothing
 * else: under --gradient_checkpointing each layer keeps only its input, and its activations are
 * recomputed in the backward one layer at a time, while the embeddings, the LM head's logits, the
 * loss and their gradients are never recomputed. For a causal LM those are batch x sequence x
 * vocabulary floats, as much as all of GPT-2 small's layers together, so a share of the batch's
 * memory cannot say what is kept: the report's call sites, by their Python frames, can. ---- */

/* The wrapper GradientCheckpointingLayer puts around each layer's forward (transformers 4.52 on):
 * exactly what --gradient_checkpointing checkpoints. */
static bool ckpt_wrapper_frame(const struct model_frame *f)
{
    return f->python && f->function && strncmp(f->function, "GradientCheckpointingLayer.", 27) == 0;
}

/* A layer's own forward by its class's name, in a transformers file: "<X>Block.forward",
 * "<X>Layer.forward" (DecoderLayer, EncoderLayer...). The class name is copied into name. */
static bool hf_layer_frame(const struct model_frame *f, char *name, size_t name_len)
{
    if (!f->python || !f->function || !f->file || !strstr(f->file, "transformers/"))
        return false;
    const char *dot = strchr(f->function, '.');
    if (!dot || strcmp(dot, ".forward") != 0 || dot == f->function)
        return false;
    size_t n = (size_t)(dot - f->function);
    char cls[128];
    if (n >= sizeof cls)
        return false;
    memcpy(cls, f->function, n);
    cls[n] = 0;
    if (!util_has_suffix(cls, "Block") && !util_has_suffix(cls, "Layer"))
        return false;
    if (name)
        snprintf(name, name_len, "%s", cls);
    return true;
}

/* Whether a call site runs in the backward pass: no Python frame at all (the autograd engine's
 * device threads) in a report that has them, or under torch's backward(). */
static bool backward_site(const struct model_report *r, const struct model_callsite *cs)
{
    bool python = false;
    for (size_t k = 0; k < cs->n_frames; k++) {
        const struct model_frame *f = &cs->frames[k];
        if (!f->python)
            continue;
        python = true;
        if (f->function && f->file && strstr(f->file, "torch/") &&
            (strcmp(f->function, "backward") == 0 || strcmp(f->function, "Tensor.backward") == 0))
            return true;
    }
    return !python && r->python == 1 && cs->n_frames > 0;
}

/* The memory of the step that failed, split by the checkpointed layers. */
struct ckpt_split {
    double inside;   /* live in the checkpointed layers' forward */
    double outside;  /* live outside them, before the backward, the static part left out */
    double backward; /* the backward's first allocation: the failed request */
    int64_t layers;  /* how many layers: the most common allocation count at a layer's call site */
    int64_t hidden;  /* one layer's input: the most common allocation size at a layer's call site */
    char layer_name[128];
    const char *why_not; /* NULL when the split holds, else why it does not */
};

/* The most common value of v[0..n) (ties to the smaller); 0 when n is 0. */
static int64_t most_common(const int64_t *v, size_t n)
{
    int64_t best = 0;
    size_t best_n = 0;
    for (size_t i = 0; i < n; i++) {
        size_t c = 0;
        for (size_t j = 0; j < n; j++)
            c += v[j] == v[i];
        if (c > best_n || (c == best_n && v[i] < best)) {
            best = v[i];
            best_n = c;
        }
    }
    return best;
}

static void ckpt_split(const struct advice *a, struct ckpt_split *s)
{
    const struct model_report *r = a->r;
    memset(s, 0, sizeof *s);
    const struct model_failure *f = model_real_oom(r);
    if (r->python != 1) {
        s->why_not = "the report has no Python frames to tell the layers from the rest";
        return;
    }
    /* At a failure the call sites' segments are the tensors of the step that failed. A run that
     * did not fail peaked in a later step as often as not, where the caching allocator serves the
     * layers and the head from the segments of the step before: a call site's memory then is not
     * its own tensors'. */
    if (!f) {
        s->why_not = "the run did not run out of memory, and at the peak of a later step the caching "
                     "allocator's segments are not the tensors of the call sites that made them";
        return;
    }
    /* the wrapper when the report has it (it names exactly what is checkpointed), else the layers'
     * class names (transformers before 4.52 checkpointed its layers from the model's loop) */
    bool wrapper = false;
    for (size_t i = 0; i < r->n_callsites && !wrapper; i++)
        for (size_t k = 0; k < r->callsites[i].n_frames && !wrapper; k++)
            wrapper = ckpt_wrapper_frame(&r->callsites[i].frames[k]);
    int64_t *counts = util_xcalloc(r->n_callsites + 1, sizeof *counts);
    int64_t *sizes = util_xcalloc(r->n_callsites + 1, sizeof *sizes);
    size_t n_votes = 0;
    double outside = 0;
    for (size_t i = 0; i < r->n_callsites; i++) {
        const struct model_callsite *cs = &r->callsites[i];
        model_int v = cs->live_bytes_at_failure;
        if (!v.known || v.v <= 0)
            continue;
        bool inside = false;
        char name[128] = "";
        for (size_t k = 0; k < cs->n_frames; k++) {
            const struct model_frame *fr = &cs->frames[k];
            if (!name[0])
                hf_layer_frame(fr, name, sizeof name);
            inside |= wrapper ? ckpt_wrapper_frame(fr) : hf_layer_frame(fr, NULL, 0);
        }
        if (inside) {
            s->inside += (double)v.v;
            if (!s->layer_name[0] && name[0])
                snprintf(s->layer_name, sizeof s->layer_name, "%s", name);
            /* a layer's call site allocates once per layer, each time the same size: its
             * average allocation, and how many of them it held at the failure */
            if (cs->alloc_calls > 0 && cs->alloc_bytes_total > 0) {
                int64_t each = cs->alloc_bytes_total / cs->alloc_calls;
                counts[n_votes] = each > 0 ? llround((double)v.v / (double)each) : 0;
                sizes[n_votes] = each;
                n_votes += counts[n_votes] > 0;
            }
        } else if (backward_site(r, cs))
            s->backward += (double)v.v;
        else
            outside += (double)v.v;
    }
    s->layers = most_common(counts, n_votes);
    s->hidden = most_common(sizes, n_votes);
    free(counts);
    free(sizes);
    if (s->inside <= 0) {
        s->why_not = "no call site passes through Hugging Face's checkpointed layers";
        return;
    }
    if (s->layers < 1) {
        s->why_not = "the report does not tell how many layers there are";
        return;
    }
    const struct model_callsite *fcs = model_callsite(r, f->callsite);
    if (!fcs || !backward_site(r, fcs)) {
        s->why_not = "the card ran out before the backward, so the part outside the layers was "
                     "never seen whole";
        return;
    }
    /* Only the backward's first allocation shows the step whole: the forward's tensors all held,
     * none of the backward's yet. Memory already held by the backward's call sites means a later
     * point of the backward, or a later step, whose tensors sit in segments other call sites made. */
    if (s->backward > 0) {
        s->why_not = "the failure came after the backward's first allocation (later in the backward, "
                     "or in a later step), where the caching allocator's segments are not the tensors "
                     "of the call sites that made them";
        return;
    }
    s->backward = (double)f->size;
    s->outside = outside - weights_part(a);
    if (s->outside < 0)
        s->outside = 0;
}

/* The part outside the layers with its gradients: each tensor the loss is computed from gets a
 * gradient of its size in the backward, so as much again, or what the backward was seen to hold
 * on top of it when that is more. */
static double ckpt_outside_kept(const struct ckpt_split *s)
{
    double with_grads = 2 * s->outside, seen = s->outside + s->backward;
    return with_grads > seen ? with_grads : seen;
}

/* One layer's activations (recomputed in the backward, one layer at a time) and every layer's
 * input. */
static double ckpt_layers_kept(const struct ckpt_split *s)
{
    return s->inside / (double)s->layers + (double)s->layers * (double)s->hidden;
}

static void advise_hf_checkpointing(struct advice *a, const char *why)
{
    struct ckpt_split s;
    ckpt_split(a, &s);
    if (s.why_not) {
        advise_typical(a, "checkpointing", "--gradient_checkpointing", CKPT_ACTIVATIONS_KEPT, why);
        sb_printf(&find_rec(a, "checkpointing")->note,
                  "; the typical share, not the layers' split: %s", s.why_not);
        return;
    }
    struct advice_rec *x = add_switch_rec(a, "checkpointing", "--gradient_checkpointing");
    double outside = ckpt_outside_kept(&s), layers = ckpt_layers_kept(&s);
    set_switch_prediction(a, x, a->m.static_bytes + outside + layers);
    sb_add(&x->note, why);
    int64_t b = a->o->batch.found ? a->o->batch.value : 1;
    sb_printf(&x->note, "; at batch %" PRId64 " the prediction is built from the report's call sites at the failure: ",
              b);
    sb_printf(&x->note, "the %" PRId64 " checkpointed layers (%s) held ", s.layers,
              s.layer_name[0] ? s.layer_name : "GradientCheckpointingLayer");
    add_size(&x->note, s.inside);
    sb_add(&x->note, ", of which checkpointing keeps one layer's activations at a time (");
    add_size(&x->note, s.inside / (double)s.layers);
    sb_printf(&x->note, ", recomputed in the backward) and each layer's input (%" PRId64 " x ",
              s.layers);
    add_size(&x->note, (double)s.hidden);
    sb_add(&x->note, ", the most common allocation in a layer); the part outside the layers "
                     "(embeddings, the LM head's logits, the loss: ");
    add_size(&x->note, s.outside);
    sb_add(&x->note, ") is not recomputed and is kept with its gradients (");
    add_size(&x->note, outside);
    sb_add(&x->note, "), on top of the static part (");
    add_size(&x->note, a->m.static_bytes);
    sb_add(&x->note, ")");
    add_not_measured(a, x, " with checkpointing");
}

#define AMP_COST                                                                                    \
    "; typically as accurate (float16 needs loss scaling, GradScaler) and faster on Tensor Cores; " \
    "mixed precision saved about 40% of the memory in the measurements people report for YOLOv9 "   \
    "(12.1 GB in fp32, 9.6 GB with AMP at batch 32 on a 16 GB V100)"
#define CKPT_COST                                                                                  \
    "; the cost is time, not accuracy: typically 20-30% slower per step (Chen et al., \"Training " \
    "Deep Nets with Sublinear Memory Cost\", 2016; YOLOv9 reports: 290 s to 410 s per epoch at batch 32)"

/* Mixed precision and gradient checkpointing, in each family's terms: a switch where the
 * command has one, else the two or three lines of code that turn it on. */
/* Hugging Face's Trainer: its own switches for mixed precision and checkpointing. */
static void advise_hf_precision(struct advice *a, bool bf16)
{
    const char *const *argv = a->r->process.argv;
    size_t argc = a->r->process.argc;
    if (!a->o->batch.found)
        return;
    if (!cmdline_switch_on(argv, argc, "--fp16") && !cmdline_switch_on(argv, argc, "--bf16")) {
        advise_typical(
                a, "amp", bf16 ? "--bf16" : "--fp16", AMP_ACTIVATIONS_KEPT,
                bf16 ? "mixed precision in bfloat16 (this card supports it): activations in half the bytes"
                     : "mixed precision in float16: activations in half the bytes");
        sb_add(&find_rec(a, "amp")->note, AMP_COST);
    }
    if (!cmdline_switch_on(argv, argc, "--gradient_checkpointing"))
        advise_hf_checkpointing(
                a, "gradient checkpointing keeps a few activations and recomputes the rest in the backward "
                   "pass, typically about 20% slower per step (Hugging Face's guide to training on one GPU; "
                   "Chen et al. 2016, sublinear memory cost)");
}

/* Ultralytics has amp=True by default: amp=False on the command line means fp32. */
static void advise_ultralytics_amp(struct advice *a)
{
    const char *const *argv = a->r->process.argv;
    size_t argc = a->r->process.argc;
    long at = find_key(argv, argc, "amp=");
    if (at >= 0 && false_word(strchr(argv[at], '=') + 1)) {
        struct advice_rec *x = add_rec(a, "amp");
        x->flag = "amp=";
        x->command = argv_set(argv, argc, (size_t)at, "amp=True", &x->command_n);
        typical_prediction(a, x, AMP_ACTIVATIONS_KEPT);
        sb_add(&x->note,
               "amp=False ran the job in fp32: amp=True (Ultralytics' default) runs it in mixed precision");
        typical_note(a, x, AMP_ACTIVATIONS_KEPT);
        sb_add(&x->note, AMP_COST);
    }
}

/* How to add autocast to a script with no AMP switch: the note, and the code as a block. */
static void add_amp_snippet(struct advice *a, struct advice_rec *x, bool bf16)
{
    const char *script = script_name(a->r);
    sb_printf(&x->note,
              "if %s runs in fp32 (no AMP switch on this command line), run the forward pass and "
              "the loss under autocast%s",
              script ? script : "the script",
              bf16 ? " in bfloat16 (this card supports it, no loss scaling needed)"
                   : " in float16, with a gradient scaler for the loss");
    struct strbuf *b = add_block(x, "in the training step", true);
    if (bf16) {
        sb_add(b, "with torch.autocast(\"cuda\", dtype=torch.bfloat16):\n"
                  "    loss = criterion(model(x), y)\n"
                  "loss.backward()");
        return;
    }
    sb_add(b, "scaler = torch.amp.GradScaler(\"cuda\")  # once, before the loop\n"
              "with torch.autocast(\"cuda\", dtype=torch.float16):\n"
              "    loss = criterion(model(x), y)\n"
              "scaler.scale(loss).backward()\n"
              "scaler.step(optimizer)\n"
              "scaler.update()");
}

/* A generic script: its AMP switch, one its source defines, or how to add autocast. */
static void advise_generic_amp(struct advice *a, bool bf16)
{
    const char *const *argv = a->r->process.argv;
    size_t argc = a->r->process.argc;
    const char *amp_options[] = { bf16 ? "--bf16" : "--fp16", "--amp", "--mixed-precision",
                                  bf16 ? "--fp16" : "--bf16" };
    long no_amp = -1, amp = -1;
    for (size_t i = 1; i < argc; i++) {
        const char *s = argv[i] ? argv[i] : "";
        if (strcmp(s, "--no-amp") == 0 || strcmp(s, "--no_amp") == 0)
            no_amp = (long)i;
        else if (strcmp(s, "--amp") == 0 || strcmp(s, "--fp16") == 0 ||
                 strcmp(s, "--bf16") == 0 || strncmp(s, "--mixed-precision", 17) == 0 ||
                 strncmp(s, "--mixed_precision", 17) == 0)
            amp = (long)i;
    }
    if (no_amp > amp || amp < 0) {
        struct advice_rec *x = add_rec(a, "amp");
        typical_prediction(a, x, AMP_ACTIVATIONS_KEPT);
        if (no_amp > amp) {
            x->flag = "--amp";
            x->command = argv_set(argv, argc, (size_t)no_amp, "--amp", &x->command_n);
            sb_printf(&x->note, "%s ran the job in fp32: --amp runs it in mixed precision",
                      argv[no_amp]);
        } else if ((x->flag = script_option(&a->script, a->r, amp_options,
                                            sizeof amp_options / sizeof amp_options[0])) !=
                   NULL) {
            struct cmdline_edit e = { NULL, x->flag, 0 };
            x->command = cmdline_with_edits(argv, argc, &e, 1, &x->command_n);
            sb_printf(
                    &x->note,
                    "the script defines %s, though this command line does not give it: it runs in "
                    "mixed precision with it",
                    x->flag);
        } else {
            add_amp_snippet(a, x, bf16);
        }
        typical_note(a, x, AMP_ACTIVATIONS_KEPT);
        sb_add(&x->note, AMP_COST);
    }
}

/* Where a script has no switch for checkpointing: the note, and the code as a block. */
static void add_ckpt_snippet(struct advice *a, struct advice_rec *x, enum cmdline_family fam)
{
    const char *script = script_name(a->r);
    if (fam == CMDLINE_YOLO) {
        sb_add(&x->note, "YOLOv5/v7/v9 have no switch for it: in models/common.py, checkpoint the "
                         "deep backbone blocks while training");
        sb_add(add_block(x, "in their forward", true),
               "if self.training:\n"
               "    return torch.utils.checkpoint.checkpoint(self.forward_impl, x, use_reentrant=False)\n"
               "return self.forward_impl(x)");
        return;
    }
    if (fam == CMDLINE_ULTRALYTICS) {
        sb_add(&x->note, "Ultralytics has no setting for it: checkpoint the backbone modules while "
                         "training (a patched or subclassed model)");
        sb_add(add_block(x, "in the model's forward", true),
               "if self.training:\n"
               "    x = torch.utils.checkpoint.checkpoint(module, x, use_reentrant=False)\n"
               "else:\n"
               "    x = module(x)");
        return;
    }
    sb_printf(&x->note,
              "if %s has a switch for it (--checkpoint, --gradient-checkpointing), add it; else "
              "checkpoint the deep blocks while training",
              script ? script : "the script");
    sb_add(add_block(x, "in the model's forward", true),
           "for block in self.blocks:\n"
           "    if self.training:\n"
           "        x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)\n"
           "    else:\n"
           "        x = block(x)");
}

static void advise_checkpointing(struct advice *a, enum cmdline_family fam)
{
    const char *const *argv = a->r->process.argv;
    size_t argc = a->r->process.argc;
    /* Checkpointing: no YOLO or Ultralytics flag for it exists; a generic script that has one
     * (examples/train_torch.py: --checkpoint) says so on its command line or in its source. */
    static const char *const ckpt_options[] = { "--checkpoint", "--gradient-checkpointing",
                                                "--gradient_checkpointing",
                                                "--activation-checkpointing" };
    bool on = false;
    for (size_t i = 1; i < argc; i++) {
        const char *s = argv[i] ? argv[i] : "";
        for (size_t k = 0; k < sizeof ckpt_options / sizeof ckpt_options[0]; k++)
            on |= strcmp(s, ckpt_options[k]) == 0;
    }
    if (on)
        return;
    struct advice_rec *x = add_rec(a, "checkpointing");
    typical_prediction(a, x, CKPT_ACTIVATIONS_KEPT);
    if (fam != CMDLINE_YOLO && fam != CMDLINE_ULTRALYTICS &&
        (x->flag = script_option(&a->script, a->r, ckpt_options,
                                 sizeof ckpt_options / sizeof ckpt_options[0])) != NULL) {
        struct cmdline_edit e = { NULL, x->flag, 0 };
        x->command = cmdline_with_edits(argv, argc, &e, 1, &x->command_n);
        sb_printf(&x->note, "the script defines %s, though this command line does not give it",
                  x->flag);
    } else
        add_ckpt_snippet(a, x, fam);
    typical_note(a, x, CKPT_ACTIVATIONS_KEPT);
    sb_add(&x->note, CKPT_COST);
}

static void advise_precision_and_checkpointing(struct advice *a, enum cmdline_family fam)
{
    bool bf16 = card_has_bf16(a->o->device);
    if (fam == CMDLINE_HF) {
        advise_hf_precision(a, bf16);
        return;
    }
    if (!must_shrink(a) || (a->static_large && a->m.static_bytes >= (double)a->usable))
        return; /* activations are not what fills the card when the static part alone does */
    /* AMP: YOLOv5/v7/v9 run it always under CUDA (check_amp), so it is never proposed there. */
    if (fam == CMDLINE_ULTRALYTICS)
        advise_ultralytics_amp(a);
    else if (fam == CMDLINE_GENERIC)
        advise_generic_amp(a, bf16);
    advise_checkpointing(a, fam);
}

/* The part that does not grow with the batch: weights, gradients, optimizer state, and the CUDA
 * context, as the model has it (from the markers' static level when there are any). */
static double weights_part(const struct advice *a)
{
    double w = a->m.static_bytes - (double)a->o->untracked;
    return w > 0 ? w : 0;
}

/* Whether the static part alone leaves no room for one sample: then no batch fits. Only trusted
 * when it was measured (a static level from the markers or from a fall of live memory). */
static bool static_too_large(const struct advice *a)
{
    return a->o->static_level >= 0 &&
           a->m.static_bytes + a->m.per_sample_bytes * memmodel_x(&a->m, 1, 0) > (double)a->usable;
}

static void add_static_share(struct advice *a, struct strbuf *b)
{
    sb_add(b, "the static part (weights, gradients, optimizer state, CUDA context) is ");
    add_size(b, a->m.static_bytes);
    sb_add(b, " of the ");
    add_size(b, (double)(a->usable > 0 ? a->usable : 0));
    sb_add(b, " usable");
}

/* A smaller variant of the same model: the size letter of YOLOv9's --cfg (yolov9-e.yaml) or of
 * Ultralytics' model= (yolov8x.pt), one step down to a size that typically fits a small card.
 * Returns the argument index and writes the new argument, or -1. */
/* A smaller variant of the model on the command line: the argument that names it (at argv[at]),
 * rewritten, and the variant letters from and to. */
struct variant {
    char arg[512];
    char from, to;
};

static long smaller_variant(const char *const *argv, size_t argc, enum cmdline_family fam,
                            struct variant *v)
{
    for (size_t i = argc; i-- > 1;) {
        const char *s = argv[i] ? argv[i] : "";
        const char *prev = argv[i - 1] ? argv[i - 1] : "";
        const char *name = NULL;
        if (fam == CMDLINE_YOLO && (strcmp(prev, "--cfg") == 0 || strncmp(s, "--cfg=", 6) == 0))
            name = strstr(s, "yolov9-");
        else if (fam == CMDLINE_ULTRALYTICS && strstr(s, "model="))
            name = strstr(s, "yolo");
        if (!name)
            continue;
        const char *p = name + 4;
        if (fam == CMDLINE_YOLO) {
            p = name + 7;
        } else {
            if (*p == 'v')
                p++;
            while (*p >= '0' && *p <= '9')
                p++;
        }
        if (!*p || (p[1] != '.' && p[1] != '-'))
            return -1;
        /* YOLOv9: -c, -e, -m go to -s, -s to -t; Ultralytics: l, x, m go to s, s to n */
        char c = *p, d = 0;
        if (fam == CMDLINE_YOLO)
            d = c == 'c' || c == 'e' || c == 'm' ? 's' : c == 's' ? 't' : 0;
        else
            d = c == 'l' || c == 'x' || c == 'm' ? 's' : c == 's' ? 'n' : 0;
        if (!d || strlen(s) >= sizeof v->arg)
            return -1;
        snprintf(v->arg, sizeof v->arg, "%s", s);
        v->arg[p - s] = d;
        v->from = c;
        v->to = d;
        return (long)i;
    }
    return -1;
}

static void advise_smaller_model(struct advice *a, enum cmdline_family fam)
{
    struct advice_rec *x = add_rec(a, "smaller_model");
    struct variant v = { .from = 0 };
    long at = smaller_variant(a->r->process.argv, a->r->process.argc, fam, &v);
    char from = v.from, to = v.to;
    if (at >= 0) {
        x->flag = fam == CMDLINE_YOLO ? "--cfg" : "model=";
        x->command =
                argv_set(a->r->process.argv, a->r->process.argc, (size_t)at, v.arg, &x->command_n);
        if (fam == CMDLINE_YOLO)
            sb_printf(
                    &x->note,
                    "yolov9-%c instead of yolov9-%c: typically far fewer parameters (the YOLOv9 README: "
                    "t 2.0M, s 7.1M, m 20.0M, c 25.3M, e 57.3M), so less of every static and per-sample part",
                    to, from);
        else
            sb_printf(
                    &x->note,
                    "the %c variant instead of %c: typically far fewer parameters (YOLOv8: n 3.2M, s 11.2M, "
                    "m 25.9M, l 43.7M, x 68.2M), so less of every static and per-sample part",
                    to, from);
    } else {
        sb_add(&x->note, "a smaller variant of the model (fewer layers or channels)");
    }
    sb_add(&x->note,
           "; the cost is accuracy: a smaller model scores lower (compare the variants' published "
           "accuracy); other options that keep the architecture's size on the card: pruning (removing "
           "channels, then fine-tuning) or knowledge distillation into a smaller student model; the memory "
           "is not predicted (another model): measure it with vramwatch run");
}

#define DS_OFFLOAD                                                                   \
    "{\n"                                                                           \
    "  \"zero_optimization\": {\n"                                                  \
    "    \"stage\": 2,\n"                                                            \
    "    \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}\n"          \
    "  },\n"                                                                         \
    "  \"bf16\": {\"enabled\": \"auto\"},\n"                                           \
    "  \"train_micro_batch_size_per_gpu\": \"auto\"\n"                                \
    "}"

/* ZeRO-Offload: the optimizer state (and optionally the parameters) in host memory. */
static void advise_offload(struct advice *a, enum cmdline_family fam)
{
    struct advice_rec *x = add_rec(a, "offload");
    /* Adam in mixed precision: 16 bytes per parameter, 12 of them fp32 master weights and
     * moments that ZeRO-Offload keeps on the CPU (Ren et al., "ZeRO-Offload", 2021). */
    double gpu_static = (double)a->o->untracked + weights_part(a) * 0.25;
    int64_t b = a->o->batch.found ? a->o->batch.value : 1;
    int64_t img = a->o->image.found ? a->o->image.value : 0;
    x->predicted = gpu_static + (memmodel_predict(&a->m, b, img) - a->m.static_bytes);
    x->has_predicted = true;
    x->fits = x->predicted > (double)a->usable ? ADVICE_TRI_FALSE : ADVICE_TRI_NULL;
    if (fam == CMDLINE_HF) {
        x->flag = "--deepspeed";
        struct cmdline_edit e = { NULL, "--deepspeed", 0 };
        size_t n = 0;
        char **c = cmdline_with_edits(a->r->process.argv, a->r->process.argc, &e, 1, &n);
        x->command = argv_set((const char *const *)c, n, n, "ds_offload.json", &x->command_n);
        cmdline_free(c, n);
    }
    add_static_share(a, &x->note);
    sb_add(&x->note, ": keep the optimizer state in host memory (DeepSpeed ZeRO-Offload)");
    sb_add(add_block(x, "ds_offload.json", true), DS_OFFLOAD);
    sb_add(&x->note,
           "; with \"offload_param\": {\"device\": \"cpu\"} and stage 3 the weights go to the host too");
    if (fam != CMDLINE_HF)
        sb_add(&x->note,
               fam == CMDLINE_GENERIC
                       ? "; the script has to be launched by deepspeed (deepspeed.initialize)"
                       : "; this trainer has no DeepSpeed integration: it needs code changes");
    sb_printf(&x->note,
              "; the prediction is at batch %" PRId64
              " with the typical static part after offload, ",
              b);
    add_size(&x->note, gpu_static);
    sb_add(&x->note,
           " (Adam in mixed precision: 12 of 16 bytes per parameter on the CPU; Ren et al., ZeRO-Offload, 2021), "
           "not measured; the cost is speed (the optimizer step runs on the CPU and every step moves gradients "
           "over PCIe) and host memory, not accuracy");
}

/* "accelerate launch --use_fsdp ... --num_processes N train.py ARGS": the script and its
 * arguments as they ran, where the command line runs a script without a launcher. */
static void add_fsdp_command(const struct advice *a, struct strbuf *b, int64_t gpus)
{
    const char *const *argv = a->r->process.argv;
    size_t argc = a->r->process.argc;
    struct cmdline_job job;
    cmdline_job_parse(argv, argc, &job);
    sb_printf(b, "accelerate launch --use_fsdp --fsdp_sharding_strategy FULL_SHARD --num_processes %" PRId64,
              gpus);
    if (job.launcher == CMDLINE_LAUNCH_NONE && !job.module && job.script < argc) {
        sb_add(b, " ");
        util_add_argv(b, argv + job.script, argc - job.script);
    } else {
        sb_add(b, " SCRIPT ARGS...");
    }
}

/* Sharding over more GPUs of this size when the static part dominates: ZeRO stage 2 shards the
 * gradients and optimizer state, stage 3 (and FSDP's FULL_SHARD) the weights too. */
static void advise_sharding(struct advice *a, enum cmdline_family fam)
{
    if (a->job || !(a->m.static_bytes > 0.5 * (double)a->usable))
        return;
    int64_t b = a->o->batch.found ? a->o->batch.value : 1;
    int64_t img = a->o->image.found ? a->o->image.value : 0;
    double act = memmodel_predict(&a->m, b, img) - a->m.static_bytes;
    int64_t gpus = 0;
    double per_gpu = 0;
    for (int64_t n = 2; n <= 8 && !gpus; n *= 2) {
        double s = (double)a->o->untracked + weights_part(a) / (double)n;
        if (s + act <= (double)a->usable || n == 8) {
            gpus = n;
            per_gpu = s + act;
        }
    }
    struct advice_rec *x = add_rec(a, "multi_gpu");
    x->flag = "--nproc_per_node";
    x->value = gpus;
    x->has_value = true;
    x->predicted = per_gpu;
    x->has_predicted = true;
    x->fits = per_gpu > (double)a->usable ? ADVICE_TRI_FALSE : ADVICE_TRI_NULL;
    add_static_share(a, &x->note);
    sb_printf(&x->note,
              ": shard it over %" PRId64
              " GPUs of this size: DeepSpeed ZeRO stage 3 ({\"zero_optimization\": "
              "{\"stage\": 3}}; stage 2, {\"stage\": 2}, shards only gradients and optimizer "
              "state), or FSDP (the accelerate command below%s)",
              gpus,
              fam == CMDLINE_HF
                      ? "; Hugging Face: --deepspeed ds_config.json or --fsdp \"full_shard auto_wrap\""
                      : "");
    sb_printf(&x->note,
              "; typically the static part falls to about 1/%" PRId64
              " per GPU (Rajbhandari et al., ZeRO, "
              "2020), not measured: the prediction is each GPU's at batch %" PRId64
              " per GPU; the cost is "
              "communication time, not accuracy",
              gpus, b);
    add_fsdp_command(a, add_block(x, "FSDP through accelerate", false), gpus);
}

/* When the static part is what does not fit, or large enough that sharing it out pays: offload,
 * sharding and a smaller model, in the order a family can use them (YOLO and Ultralytics have no
 * DeepSpeed integration, so a smaller model comes first there). */
static void advise_static(struct advice *a, enum cmdline_family fam)
{
    bool yolo = fam == CMDLINE_YOLO || fam == CMDLINE_ULTRALYTICS;
    size_t first = a->n_recs;
    if (a->static_large) {
        if (yolo)
            advise_smaller_model(a, fam);
        advise_offload(a, fam);
        advise_sharding(a, fam);
        if (!yolo)
            advise_smaller_model(a, fam);
        /* say first why no batch is proposed */
        struct strbuf b = { 0 };
        sb_add(&b, "no batch fits, not even 1 (one sample needs ");
        add_size(&b, a->m.per_sample_bytes);
        sb_add(&b, " above the static part): ");
        if (strncmp(sb_str(&a->recs[first].note), "the static part", 15) != 0) {
            add_static_share(a, &b);
            sb_add(&b, "; ");
        }
        sb_add(&b, sb_str(&a->recs[first].note));
        sb_free(&a->recs[first].note);
        a->recs[first].note = b;
        return;
    }
    if (a->no_batch_fits)
        advise_smaller_model(a, fam);
    /* YOLO and Ultralytics would need code changes for DeepSpeed or FSDP: while a batch still fits,
     * their own DDP (advise_more_gpus) is the option to show */
    if (!yolo && must_shrink(a) && a->m.static_bytes > 0.5 * (double)a->usable &&
        a->o->static_level >= 0) {
        advise_offload(a, fam);
        advise_sharding(a, fam);
    }
}

/* When validation, not training, sets the peak. */
static void advise_validation(struct advice *a, enum cmdline_family fam)
{
    const struct memmodel_obs *o = a->o;
    if (!o->phases || !memmodel_is_validation(o->phase) || o->training_need < 0 ||
        o->need <= o->training_need)
        return;
    struct advice_rec *x = add_rec(a, "validation");
    struct advice_rec *batch = find_rec(a, "batch");
    sb_printf(&x->note, "the peak is validation's (phase \"%s\": ", o->phase);
    add_size(&x->note, (double)o->need);
    sb_add(&x->note, o->oom ? " at least), " : "), ");
    add_size(&x->note, (double)(o->need - o->training_need));
    sb_add(&x->note, " above training's");
    if (fam == CMDLINE_YOLO)
        sb_add(&x->note, "; YOLOv5/v7/v9 validate at twice the training batch");
    if (batch && batch->has_value)
        sb_printf(&x->note, "; the batch recommended above is chosen so that validation fits too");
    if (fam == CMDLINE_HF) {
        x->flag = "--per_device_eval_batch_size";
        sb_add(&x->note,
               "; a smaller --per_device_eval_batch_size lowers it without touching training");
    } else {
        sb_add(&x->note,
               "; a smaller validation batch, where the script has one, lowers it without touching training");
    }
}

/* Other processes holding memory on the card: whose, how much, and what stopping them buys. */
static void advise_other_processes(struct advice *a)
{
    const struct model_device *d = a->o->device;
    if (a->others <= 0 ||
        (a->others < 256 * (1 << 20) && (double)a->others < 0.05 * (double)a->capacity))
        return;
    struct advice_rec *x = add_rec(a, "other_processes");
    sb_add(&x->note, "other processes held ");
    add_size(&x->note, (double)a->others);
    sb_add(&x->note, " of this card when it ran out:");
    for (size_t i = 0; i < d->n_procs; i++) {
        const struct model_proc *p = &d->procs[i];
        sb_printf(&x->note, "%s pid %" PRId64, i ? "," : "", p->pid);
        if (p->name)
            sb_printf(&x->note, " (%s)", p->name);
        if (p->used_bytes.known) {
            sb_add(&x->note, " ");
            add_size(&x->note, (double)p->used_bytes.v);
        }
    }
    sb_add(&x->note,
           "; see them with: nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv; "
           "stop one of yours with: kill");
    for (size_t i = 0; i < d->n_procs; i++)
        sb_printf(&x->note, " %" PRId64, d->procs[i].pid);
    /* what fits once they are gone */
    int64_t usable = a->usable, avail = a->avail;
    a->usable += a->others;
    a->avail += a->others;
    int64_t img = a->o->image.found ? a->o->image.value : 0;
    int64_t b = a->o->batch.found && a->m.basis != MEMMODEL_BOUND ? largest_batch(a, img) : 0;
    if (b >= 1) {
        set_value(x, a, &a->o->batch, b);
        set_predicted(x, a, b, img);
        sb_printf(&x->note,
                  "; with them stopped (or on another GPU, CUDA_VISIBLE_DEVICES), batch %" PRId64
                  " fits",
                  b);
    } else {
        sb_add(&x->note,
               "; stop them, or run on another GPU (CUDA_VISIBLE_DEVICES), to give the job the whole card");
    }
    a->usable = usable;
    a->avail = avail;
}

/* Live memory that grows phase after phase: no batch makes that fit for long. When the run ran
 * out of memory the leak is the likely cause, and goes first. */
/* Recommendations that only make a step need less: with a leak they postpone the failure. */
static bool only_postpones(const char *kind)
{
    return strcmp(kind, "leak") != 0 && strcmp(kind, "validation") != 0 &&
           strcmp(kind, "other_processes") != 0;
}

/* What a recommendation owns. */
static void rec_free(struct advice_rec *x)
{
    cmdline_free(x->command, x->command_n);
    sb_free(&x->note);
    for (size_t k = 0; k < x->n_blocks; k++)
        sb_free(&x->blocks[k].body);
}

static void drop_rec(struct advice *a, size_t i)
{
    rec_free(&a->recs[i]);
    memmove(&a->recs[i], &a->recs[i + 1], (a->n_recs - i - 1) * sizeof a->recs[0]);
    a->n_recs--;
}

static void advise_leak(struct advice *a)
{
    if (!a->has_leak)
        return;
    /* A leak that ran the card out, or will at its rate: no batch, no smaller step fits for long.
     * Said once, with what stops the growth, and nothing offered as "may fit". */
    bool fills = a->o->oom || a->leak.time_to_capacity_ns.known;
    a->leak_fills = fills;
    for (size_t i = a->n_recs; fills && i-- > 0;)
        if (only_postpones(a->recs[i].kind))
            drop_rec(a, i);
    struct advice_rec *x = add_rec(a, "leak");
    findings_describe_leak(&x->note, a->r, &a->leak);
    sb_add(&x->note,
           fills ? "; any batch, and any change that only makes a step smaller (AMP, checkpointing, a "
                   "smaller image), only postpones the failure, so none is proposed here. "
                 : "; a smaller batch only postpones the failure. ");
    sb_add(&x->note,
           "What stops the growth: find "
           "what keeps memory from one phase to the next at the call site above (vramwatch timeline "
           "shows when it grows) and keep numbers, not tensors: losses.append(loss.item()) rather "
           "than loss; .detach() what is kept for logging or metrics; del what the next phase does "
           "not need; bound caches that only grow. torch.cuda.empty_cache() and gc.collect() do not "
           "help while those tensors are referenced");
    if (a->o->oom && x != a->recs) {
        struct advice_rec tmp = *x;
        memmove(&a->recs[1], &a->recs[0], (size_t)(x - a->recs) * sizeof *x);
        a->recs[0] = tmp;
    }
}

/* A command run under torchrun with N processes, one per GPU; YOLO's --device lists the GPUs. */
/* The command on nproc GPUs: the launcher the command has, with its count changed, or torchrun
 * put in front of the script with the interpreter's own options kept before -m (cmdline.c).
 * YOLO scripts also need --device 0,1,...: they split --batch over the listed GPUs. */
static char **torchrun_command(const struct advice *a, const char *const *argv, int64_t nproc,
                               size_t *out_n)
{
    size_t argc = a->r->process.argc, n = 0;
    char **l = cmdline_with_launcher(argv, argc, nproc, &n);
    if (!l)
        return NULL;
    if (cmdline_family(argv, argc) != CMDLINE_YOLO) {
        *out_n = n;
        return l;
    }
    struct strbuf dev = { 0 };
    for (int64_t i = 0; i < nproc; i++)
        sb_printf(&dev, "%s%" PRId64, i ? "," : "", i);
    char **c = util_xcalloc(n + 3, sizeof *c);
    size_t k = 0;
    bool device_set = false;
    for (size_t i = 0; i < n; i++) {
        const char *x = l[i] ? l[i] : "";
        if (strcmp(x, "--device") == 0 && i + 1 < n) {
            c[k++] = util_xstrdup(x);
            c[k++] = util_xstrdup(sb_str(&dev));
            i++;
            device_set = true;
        } else if (strncmp(x, "--device=", 9) == 0) {
            struct strbuf d = { 0 };
            sb_printf(&d, "--device=%s", sb_str(&dev));
            c[k++] = util_xstrdup(sb_str(&d));
            sb_free(&d);
            device_set = true;
        } else {
            c[k++] = util_xstrdup(x);
        }
    }
    if (!device_set) {
        c[k++] = util_xstrdup("--device");
        c[k++] = util_xstrdup(sb_str(&dev));
    }
    sb_free(&dev);
    cmdline_free(l, n);
    *out_n = k;
    return c;
}

/* YOLOv5/v7/v9 split --batch over the GPUs: when the batch had to go down, the same batch over
 * more GPUs of this size keeps it. */
static void advise_more_gpus(struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    struct advice_rec *batch = find_rec(a, "batch");
    if (a->job || !batch || !batch->has_predicted || !o->batch.found ||
        batch->value >= o->batch.value ||
        cmdline_family(a->r->process.argv, a->r->process.argc) != CMDLINE_YOLO ||
        find_rec(a, "multi_gpu"))
        return;
    int64_t img = o->image.found ? o->image.value : 0;
    for (int64_t gpus = 2; gpus <= 8; gpus *= 2) {
        int64_t per_gpu = o->batch.value / gpus;
        if (per_gpu < 1 || memmodel_predict(&a->m, per_gpu, img) > (double)a->usable)
            continue;
        /* YOLOv9 asserts batch % WORLD_SIZE == 0 under DDP: round down to a multiple */
        int64_t total = per_gpu * gpus;
        struct advice_rec *x = add_rec(a, "multi_gpu");
        x->value = gpus;
        x->has_value = true;
        x->flag = "--nproc_per_node";
        char **with_batch =
                cmdline_with_value(a->r->process.argv, a->r->process.argc, &o->batch, total);
        x->command = torchrun_command(a, (const char *const *)with_batch, gpus, &x->command_n);
        cmdline_free(with_batch, a->r->process.argc);
        x->predicted = memmodel_predict(&a->m, per_gpu, img);
        x->has_predicted = true;
        x->fits = fits_of(a, per_gpu, img);
        if (total == o->batch.value)
            sb_printf(&x->note,
                      "keeps --batch %" PRId64 " on %" PRId64
                      " GPUs of this size: the script splits it, "
                      "%" PRId64 " per GPU; the predicted peak is each GPU's",
                      total, gpus, per_gpu);
        else
            sb_printf(&x->note,
                      "--batch %" PRId64 " (rounded down from %" PRId64
                      ": under DDP the script requires "
                      "the batch to divide by the number of GPUs) on %" PRId64
                      " GPUs of this size, %" PRId64 " per GPU; the predicted peak is each GPU's",
                      total, o->batch.value, gpus, per_gpu);
        sb_add(&x->note, total == o->batch.value
                                 ? "; the cost is the GPUs; the effective batch is unchanged"
                                 : "; the cost is the GPUs");
        return;
    }
}

/* The ranks of one job: what decides, who holds more than the others, and sharding when the
 * part that does not depend on the batch (weights, gradients, optimizer state) dominates. */
static void advise_job(struct advice *a)
{
    const struct job *j = a->job;
    if (!j)
        return;
    int64_t world = job_world_size(j);
    int64_t per_rank = 0, flag_value = 0;
    bool total = false;
    struct advice_rec *batch = find_rec(a, "batch");
    if (batch && job_rank_batch(j, &per_rank, &flag_value, &total)) {
        if (total)
            sb_printf(&batch->note,
                      "; %s is the job's total, split over its %" PRId64 " ranks: %" PRId64
                      " per rank",
                      batch->flag, world, batch->value / (world > 0 ? world : 1));
        else
            sb_printf(&batch->note,
                      "; %s is per rank: the job's batch is %" PRId64 " x %" PRId64 " ranks",
                      batch->flag, batch->value, world);
    }
    for (size_t i = 0; i < j->n_findings; i++) {
        const struct job_finding *f = &j->findings[i];
        if (f->kind != JOB_RANK_HIGH && f->kind != JOB_RANK0_EXTRA)
            continue;
        const struct model_report *r = j->procs[f->proc].r;
        struct advice_rec *x = add_rec(a, "multi_gpu");
        sb_add(&x->note, "rank ");
        if (r->process.rank.known)
            sb_printf(&x->note, "%" PRId64, r->process.rank.v);
        else
            sb_printf(&x->note, "pid %" PRId64, r->process.pid);
        sb_printf(&x->note, " peaked at ");
        add_size(&x->note, (double)f->bytes);
        sb_printf(&x->note, ", %" PRId64 "%% above the median rank (", f->excess_pct);
        add_size(&x->note, (double)f->median_bytes);
        sb_add(&x->note, "), and the batch is set by the rank that needs most");
        if (f->kind == JOB_RANK0_EXTRA)
            sb_add(&x->note,
                   ": rank 0 keeps what the others do not (evaluation, EMA, logging, checkpoint saving); "
                   "moving that off the GPU or to after training lets every rank run the batch the "
                   "median rank could");
        else
            sb_add(&x->note,
                   ": uneven data (longer sequences, larger images) or a different GPU on that rank");
        break;
    }
    /* Sharding: with Adam in mixed precision about 12 of every 16 bytes per parameter are the
     * optimizer's moments and fp32 master weights (Rajbhandari et al., ZeRO, 2020); ZeRO stage 2
     * shards them and the gradients over the ranks. */
    const struct memmodel *m = &a->m;
    if (world >= 2 && m->static_bytes > 0.5 * (double)a->usable) {
        double sharded = m->static_bytes * (0.25 + 0.75 / (double)world);
        int64_t b = a->o->batch.found ? a->o->batch.value : 1;
        int64_t img = a->o->image.found ? a->o->image.value : 0;
        struct advice_rec *x = add_rec(a, "multi_gpu");
        x->predicted = sharded + (memmodel_predict(m, b, img) - m->static_bytes);
        x->has_predicted = true;
        x->fits = x->predicted > (double)a->usable ? ADVICE_TRI_FALSE : ADVICE_TRI_NULL;
        sb_add(&x->note, "the part that does not grow with the batch (");
        add_size(&x->note, m->static_bytes);
        sb_printf(&x->note,
                  ": weights, gradients, optimizer state) is most of the card: shard the optimizer "
                  "state and gradients over the %" PRId64
                  " ranks (DeepSpeed ZeRO stage 2, PyTorch FSDP, "
                  "or ZeroRedundancyOptimizer); typically it falls to about ",
                  world);
        add_size(&x->note, sharded);
        sb_add(&x->note,
               " per rank (Adam in mixed precision: 12 of 16 bytes per parameter sharded), not measured");
    }
}

/* The cache carried into a repeated phase, largest over the reports, when it is large enough to
 * matter: more than 5% of what the job needs above its static part, and at least 64 MiB. */
static int64_t fragmentation_risk(const struct advice *a, const char **phase)
{
    int64_t worst = 0;
    *phase = NULL;
    for (size_t i = 0; i < a->n_obs; i++)
        if (a->obs[i].carried > worst) {
            worst = a->obs[i].carried;
            *phase = a->obs[i].carried_phase;
        }
    /* memory a leak keeps is carried too, but it is the leak's, not the allocator's cache */
    if (worst > 0 && a->has_leak)
        worst = worst > a->leak.growth_bytes ? worst - a->leak.growth_bytes : 0;
    double above = (double)a->o->need - a->m.static_bytes;
    if (worst < 64 * (1 << 20) || (double)worst < 0.05 * above)
        return 0;
    return worst;
}

static bool expandable_already(const struct model_report *r)
{
    const char *names[] = { "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF" };
    for (size_t i = 0; i < 2; i++) {
        const char *v = model_env(r, names[i]);
        if (v && strstr(v, "expandable_segments:True"))
            return true;
    }
    return false;
}

static void advise_allocator(struct advice *a)
{
    const struct model_report *r = a->r;
    const struct model_device *d = a->o->device;
    const char *carried_into = NULL;
    int64_t carried = fragmentation_risk(a, &carried_into);
    struct advice_rec *batch = find_rec(a, "batch");
    if (carried > 0 && batch && batch->fits == ADVICE_TRI_TRUE) {
        batch->fits = ADVICE_TRI_NULL;
        sb_add(&batch->note, "; the allocator carried ");
        add_size(&batch->note, (double)carried);
        sb_printf(
                &batch->note,
                " of other phases' cache into \"%s\", which fragments a full card: on its own this "
                "batch may not fit",
                carried_into ? carried_into : "?");
    }
    if (expandable_already(r))
        return;
    int64_t flushes = d->cache_flushes.known ? d->cache_flushes.v : 0;
    int64_t idle = -1;
    const struct model_framework *fw = &r->framework;
    if (fw->known && fw->reserved_unallocated_bytes.known && fw->reserved_unallocated_bytes.v > 0) {
        int64_t held = fw->reserved_unallocated_bytes.v;
        int64_t total = fw->allocated_bytes.known ? util_sat_add(fw->allocated_bytes.v, held) : 0;
        if (held >= GiB || (total > 0 && (double)held >= 0.1 * (double)total))
            idle = held;
    }
    if (flushes <= 0 && idle < 0 && carried <= 0)
        return;
    struct advice_rec *x = add_rec(a, "allocator");
    x->flag = "PYTORCH_CUDA_ALLOC_CONF";
    /* With a batch to change, the command carries both: the setting is what lets that batch fit. */
    char **base = batch && batch->command ? batch->command : NULL;
    x->command_n = r->process.argc + 2;
    x->command = util_xcalloc(x->command_n + 1, sizeof *x->command);
    x->command[0] = util_xstrdup("env");
    x->command[1] = util_xstrdup("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    for (size_t i = 0; i < r->process.argc; i++)
        x->command[i + 2] = util_xstrdup(base                 ? base[i]
                                         : r->process.argv[i] ? r->process.argv[i]
                                                              : "");
    sb_add(&x->note,
           "expandable segments let PyTorch grow segments instead of keeping many of fixed size");
    if (base)
        sb_printf(&x->note, ", together with %s%s%" PRId64, batch->flag,
                  advice_flag_gap(batch->flag), batch->value);
    if (base && batch->has_predicted) {
        x->predicted = batch->predicted;
        x->has_predicted = true;
        x->fits = fits_of(a, batch->value, a->o->image.found ? a->o->image.value : 0);
    } else if (idle >= 0) {
        double predicted = (double)a->o->need - (double)idle;
        x->predicted = predicted > 0 ? predicted : 0;
        x->has_predicted = true;
        x->fits = ADVICE_TRI_NULL;
    }
    if (carried > 0) {
        sb_add(&x->note, "; the allocator carried ");
        add_size(&x->note, (double)carried);
        sb_printf(&x->note,
                  " of other phases' cache into \"%s\" (fragmentation a full card would show)",
                  carried_into ? carried_into : "?");
    }
    if (idle >= 0) {
        sb_add(&x->note, "; PyTorch held ");
        add_size(&x->note, (double)idle);
        sb_add(&x->note,
               " reserved but unallocated (fragmentation) that this would recover at most");
    }
    if (flushes > 0) {
        sb_printf(&x->note, "; the caching allocator had to flush its cache %" PRId64 " time%s",
                  flushes, flushes == 1 ? "" : "s");
        /* what one flush gave back at most: cache held for nothing until the card was full */
        int64_t freed = 0;
        for (size_t i = 0; i < r->n_pressure; i++)
            if ((!r->pressure[i].device.known || !d->ordinal.known ||
                 r->pressure[i].device.v == d->ordinal.v) &&
                r->pressure[i].freed_bytes > freed)
                freed = r->pressure[i].freed_bytes;
        if (freed > 0) {
            sb_add(&x->note, ", releasing up to ");
            add_size(&x->note, (double)freed);
            sb_add(&x->note, " at once that it held but did not use");
        }
    }
    /* The remedy people are told to try first: it hands the cache back, never a live tensor, and
     * PyTorch's allocator already does as much by itself before it reports out of memory. */
    sb_add(&x->note,
           "; torch.cuda.empty_cache() releases only the cached blocks no tensor uses (to other processes, "
           "or to what nvidia-smi shows), never live tensors, and the caching allocator already releases "
           "its cache and retries before it gives up on an allocation: calling it does not make a larger batch "
           "fit, and between phases it costs the time of new cudaMalloc calls");
    if (carried > 0) {
        /* the batch alone is not to be trusted: this goes first */
        struct advice_rec tmp = *x;
        memmove(&a->recs[1], &a->recs[0], (size_t)(x - a->recs) * sizeof *x);
        a->recs[0] = tmp;
    }
}

/* A recommendation whose predicted peak is above what is usable does not fit, whatever its
 * kind: it says by how much it misses, and, for a change that keeps the batch, the batch to
 * combine it with (the change's own prediction scaled to a smaller batch). Other processes'
 * recommendation is left as it is: its prediction is for the card without them. */
static void settle_fits(struct advice *a)
{
    const struct memmodel_obs *o = a->o;
    int64_t img = o->image.found ? o->image.value : 0;
    for (size_t i = 0; i < a->n_recs; i++) {
        struct advice_rec *x = &a->recs[i];
        if (!x->has_predicted || x->predicted <= (double)a->usable ||
            strcmp(x->kind, "other_processes") == 0)
            continue;
        x->fits = ADVICE_TRI_FALSE;
        sb_add(&x->note, x->note.len ? "; " : "");
        sb_add(&x->note, "its predicted peak misses the ");
        add_size(&x->note, (double)a->usable);
        sb_add(&x->note, " usable by ");
        add_size(&x->note, x->predicted - (double)a->usable);
        bool keeps_batch = strcmp(x->kind, "batch") != 0 && strcmp(x->kind, "image_size") != 0 &&
                           strcmp(x->kind, "accumulation") != 0 && !x->has_value;
        double part = memmodel_predict(&a->m, o->batch.value, img) - a->m.static_bytes;
        double own = x->predicted - a->m.static_bytes;
        if (keeps_batch && o->batch.found && part > 0 && own > 0 &&
            (double)a->usable > a->m.static_bytes) {
            /* the change keeps own/part of the batch's memory: the batch at which it fits */
            int64_t b = (int64_t)floor((double)o->batch.value * ((double)a->usable - a->m.static_bytes) /
                                       own);
            b = job_batch(a, b < o->batch.value ? b : o->batch.value - 1);
            if (b >= 1) {
                sb_printf(&x->note, ": combine it with %s%s%" PRId64 " (predicted ", o->batch.name,
                          advice_flag_gap(o->batch.name), b);
                add_size(&x->note, a->m.static_bytes + own * (double)b / (double)o->batch.value);
                sb_add(&x->note, ")");
                continue;
            }
        }
        sb_add(&x->note, ": combine it with another change below");
    }
}

/* The card the advice is for: --target (target > 0), else the smallest emulated limit among the
 * reports that ran under one, else the smallest card. Every report is one run of the job, so the
 * answer must not depend on their order; a run without a limit on a big card says nothing of the
 * smaller one another run was held to, and the job has to fit the smallest card it met. False
 * when no report knows its capacity. */
static bool choose_capacity(struct advice *a, int64_t target)
{
    int64_t limit = 0, total = 0;
    for (size_t i = 0; i < a->n_obs; i++) {
        const struct model_device *d = a->obs[i].device;
        if (d->limit_bytes.known && d->limit_bytes.v > 0 && (!limit || d->limit_bytes.v < limit))
            limit = d->limit_bytes.v;
        if (d->total_bytes.known && d->total_bytes.v > 0 && (!total || d->total_bytes.v < total))
            total = d->total_bytes.v;
    }
    a->run_capacity = limit ? limit : total;
    a->capacity = a->run_capacity;
    a->capacity_from = limit ? "the emulated limit" : "the card's total";
    if (target > 0) {
        a->capacity = target;
        a->capacity_from = "--target";
    }
    return a->capacity > 0;
}

/* What a run may use of a card: the capacity less the headroom, less other processes' memory. */
static int64_t usable_of(int64_t capacity, double headroom, int64_t others)
{
    return (int64_t)floor((double)capacity * (1.0 - headroom / 100.0)) - others;
}

/* The largest batch one rank's own report leaves room for on its own card (its limit or total,
 * or the target, into *capacity), its static part and its cache included: the batch its model
 * proposes. -1 when the report cannot be modelled. */
static int64_t rank_room(const struct model_report *r, const struct advice_opts *opts,
                         int64_t *capacity)
{
    struct memmodel_obs o;
    struct strbuf err = { 0 };
    bool ok = memmodel_observe(r, 1, &o, &err);
    sb_free(&err);
    if (!ok || !o.batch.found)
        return -1;
    struct advice t = { .r = r, .o = &o, .obs = &o, .n_obs = 1, .headroom = opts->headroom };
    if (!choose_capacity(&t, opts->target))
        return -1;
    *capacity = t.capacity;
    t.usable = usable_of(t.capacity, opts->headroom, o.others);
    memmodel_build(&o, 1, &t.m);
    int64_t b = largest_batch(&t, o.image.found ? o.image.value : 0);
    if (t.m.basis == MEMMODEL_BOUND && b > o.batch.value / 2)
        b = o.batch.value / 2; /* a first-step failure: half, as advise_batch_on_bound does */
    return b;
}

/* The rank the advice is for: each rank measured on its own card, the one that leaves room for
 * the smallest batch (a rank on a smaller card, or holding more than the others). Where they
 * leave room for the same batch: the first to run out of memory, else the one that peaked
 * highest. */
static size_t deciding_rank(struct advice *a, const struct job *job,
                            const struct advice_opts *opts)
{
    size_t pick = 0;
    if (job->first_failure) {
        pick = job->first_failure_proc;
        a->decides_why = "the first to run out of memory";
    } else {
        for (size_t i = 1; i < job->n; i++)
            if (job->procs[i].peak_bytes > job->procs[pick].peak_bytes)
                pick = i;
        a->decides_why = "the one that peaked highest";
    }
    /* each rank modelled once */
    int64_t *room = util_xcalloc(job->n ? job->n : 1, sizeof *room);
    int64_t *cap = util_xcalloc(job->n ? job->n : 1, sizeof *cap);
    for (size_t i = 0; i < job->n; i++)
        room[i] = rank_room(job->procs[i].r, opts, &cap[i]);
    int64_t least = room[pick], most = least;
    bool moved = false;
    for (size_t i = 0; i < job->n; i++) {
        if (room[i] > most)
            most = room[i];
        if (room[i] >= 0 && (least < 0 || room[i] < least)) {
            least = room[i];
            pick = i;
            moved = true;
        }
    }
    if (moved) {
        char size[UTIL_SIZE_LEN] = "";
        if (opts->target <= 0)
            util_fmt_size(cap[pick], size);
        snprintf(a->decides_why_buf, sizeof a->decides_why_buf,
                 "whose %s%scard leaves room for the smallest batch of the ranks (%" PRId64
                 ", the others up to %" PRId64 ")",
                 size, *size ? " " : "", least, most);
        a->decides_why = a->decides_why_buf;
    }
    free(room);
    free(cap);
    return pick;
}

bool advice_build(struct advice *a, const struct model_report *reports, size_t n,
                  const struct advice_opts *opts, struct strbuf *err)
{
    memset(a, 0, sizeof *a);
    a->obs_owned = util_xcalloc(n ? n : 1, sizeof *a->obs_owned);
    /* Reports of different ranks are one job's processes, not runs at other batch sizes: the
     * model is built on the rank that decides (the first to run out of memory, else the one that
     * peaked highest), and the advice speaks of the job. Which is which is job_together's rule,
     * the one timeline applies too. */
    const struct model_report *model_reports = reports;
    size_t model_n = n;
    enum job_together together = job_together(reports, n, err);
    if (together == JOB_NEITHER)
        return false;
    if (together == JOB_RANKS && n >= 2) {
        struct job *job = &a->job_owned;
        job_build(job, reports, n);
        a->has_job = true;
        size_t pick = deciding_rank(a, job, opts);
        a->job = job;
        a->decides = pick;
        model_reports = job->procs[pick].r;
        model_n = 1;
    }
    if (!memmodel_observe(model_reports, model_n, a->obs_owned, err))
        return false;
    a->r = model_reports;
    a->o = &a->obs_owned[0];
    a->obs = a->obs_owned;
    a->n_obs = model_n;
    a->headroom = opts->headroom;
    if (!choose_capacity(a, opts->target)) {
        sb_printf(err, "%s: the card's capacity is not known; give --target SIZE", reports[0].path);
        return false;
    }
    a->others = a->o->others;
    a->usable = usable_of(a->capacity, opts->headroom, a->others);
    a->avail = a->capacity - a->others;
    memmodel_build(a->obs, model_n, &a->m);
    a->has_leak = findings_leaks(a->r, &a->leak, 1) > 0;
    enum cmdline_family fam = cmdline_family(a->r->process.argv, a->r->process.argc);
    if (advise_autobatch(a)) {
        /* no batch to scale: only what does not depend on it */
        advise_other_processes(a);
        advise_leak(a);
    } else {
        advise_batch_and_image(a);
        advise_accumulation(a, fam);
        advise_precision_and_checkpointing(a, fam);
        advise_static(a, fam);
        advise_validation(a, fam);
        advise_other_processes(a);
        advise_allocator(a);
        advise_more_gpus(a);
        advise_job(a);
        advise_leak(a);
    }
    settle_fits(a);
    find_fit_command(a);
    return true;
}

void advice_free(struct advice *a)
{
    for (size_t i = 0; i < a->n_recs; i++)
        rec_free(&a->recs[i]);
    sb_free(&a->fit_command);
    script_free(&a->script);
    if (a->has_job)
        job_free(&a->job_owned);
    free(a->obs_owned);
    memset(a, 0, sizeof *a);
}
