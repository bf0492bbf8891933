/* advice.h: the advice engine: from loaded reports of one job, the changes to its command line
 * that make the next run fit, best first, each with its predicted peak (docs/advice.md). The
 * printers are advice_print.h; `vramwatch advise` (cmd_advise.c) and `vramwatch run` call both. */
#ifndef VRAMWATCH_TOOL_ADVICE_H
#define VRAMWATCH_TOOL_ADVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "findings.h"
#include "job.h"
#include "memmodel.h"
#include "model.h"
#include "script.h"

#define ADVICE_DEFAULT_HEADROOM 10.0 /* percent of the capacity kept free */
#define ADVICE_MAX_RECS 24           /* every kind once, multi_gpu up to four times */

/* Whether a recommendation fits: not known (null in JSON), no, yes. */
enum advice_tri { ADVICE_TRI_NULL = -1, ADVICE_TRI_FALSE = 0, ADVICE_TRI_TRUE = 1 };

/* A command to run or code to write that a note points to. The text view prints the intro as
 * prose and the body on lines of its own, never wrapped; the JSON note has it inline, after the
 * note's prose: "; INTRO: BODY". */
struct advice_block {
    const char *intro;  /* "find the largest batch that fits by measuring" */
    struct strbuf body; /* one command line, or lines of code separated by '\n' */
    bool code;          /* code to put in the script, not a command */
};
#define ADVICE_MAX_BLOCKS 3

/* One recommendation: a `recommendations[]` entry of vramwatch.advice/1. */
struct advice_rec {
    const char *kind;
    const char *flag; /* NULL: null */
    int64_t value;
    bool has_value;
    char **command; /* NULL: null */
    size_t command_n;
    double predicted;
    bool has_predicted;
    enum advice_tri fits;
    struct strbuf note; /* the prose; the blocks follow it */
    struct advice_block blocks[ADVICE_MAX_BLOCKS];
    size_t n_blocks;
};

/* What advise asks for. */
struct advice_opts {
    int64_t target;  /* the card to fit, in bytes; 0: the reports' own (the emulated limit) */
    double headroom; /* percent of the capacity kept free */
};

struct advice {
    const struct model_report *r;
    struct script script;         /* the training script's source, read when a question needs it */
    const struct memmodel_obs *o; /* of the first report */
    const struct memmodel_obs *obs; /* of every report */
    size_t n_obs;
    struct memmodel m;
    int64_t capacity, usable;
    int64_t run_capacity; /* the card the reports' runs met (the emulated limit, else the total) */
    int64_t avail;  /* the capacity less what other processes hold: the most the job can have */
    int64_t others; /* what other processes held on the card (NVML), 0 when none or unknown */
    const char *capacity_from;
    double headroom;
    struct advice_rec recs[ADVICE_MAX_RECS];
    size_t n_recs;
    char acc_name[40];        /* the accumulation flag as spelled, for its recommendation */
    struct leak_finding leak; /* the largest leak in the report, when has_leak */
    bool has_leak;
    bool leak_fills; /* ...that ran the card out or will: no batch is proposed */
    const struct job *job; /* the ranks of one job, or NULL for one process's reports */
    size_t decides;        /* job: the process whose report the model is built on */
    const char *decides_why;
    char decides_why_buf[160];
    bool static_large;  /* the static part alone leaves no room for one sample */
    bool no_batch_fits; /* not even batch 1 fits (static_large, or activations of one sample) */
    /* `vramwatch fit` for this job's batch flag, the measured search the answer names; "" when
     * there is no batch flag to search */
    struct strbuf fit_command;
    /* owned by the advice, freed by advice_free */
    struct memmodel_obs *obs_owned;
    struct job job_owned;
    bool has_job;
};

/* Builds the advice for these reports: the runs of one job (other batch or image sizes), or the
 * ranks of one job, or one report. False with a one-line reason in err when they cannot be
 * advised on (reports of different jobs, no device, an unknown capacity without a target); the
 * advice must then still be freed. The reports must outlive the advice. */
bool advice_build(struct advice *a, const struct model_report *reports, size_t n,
                  const struct advice_opts *opts, struct strbuf *err);
void advice_free(struct advice *a);

/* What stands between a flag as spelled and its value: nothing after "batch=" or
 * "--batch-size=", a space after "--batch". */
const char *advice_flag_gap(const char *flag);

/* A byte count computed in double, back to an integer without overflow (NaN and below 0: 0). */
int64_t advice_clamp_bytes(double v);

#endif
