/* memmodel.h: what a job needs of the card as a function of its batch and image size, built from
 * one or more reports of that job. */
#ifndef VRAMWATCH_TOOL_MEMMODEL_H
#define VRAMWATCH_TOOL_MEMMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmdline.h"
#include "model.h"

enum memmodel_basis {
    MEMMODEL_RUNS,     /* a least-squares line through runs at different batch x image sizes */
    MEMMODEL_TIMELINE, /* one report: the level before training (markers) and the peak */
    MEMMODEL_BOUND,    /* one failure with nothing else: the need is only known from below */
};

/* What one report says about the need at its batch and image size. */
struct memmodel_obs {
    const struct model_report *report;
    const struct model_device *device; /* model_main_device: the one every view speaks of */
    struct cmdline_flag batch, image;
    double x; /* batch x (image / reference image)^2; the batch alone without an image flag */
    int64_t untracked; /* context and libraries (other processes left out), 0 when unknown */
    int64_t others; /* memory other processes held on the device (NVML), 0 when none or unknown */
    int64_t peak;   /* peak_reserved_bytes + untracked */
    int64_t need;   /* the estimate of the need at x */
    bool exact;     /* need is a measured point, not a lower bound (failures, observe mode) */
    bool oom, observe;     /* a real out-of-memory; an observe-mode run that crossed the limit */
    int64_t upper;         /* observe mode: the need is at most this (the uncapped peak) */
    int64_t static_level;  /* live before training from the markers, + untracked; -1 if none */
    bool phases;           /* need = static_level + the largest phase's working set (markers) */
    bool phase_complete;   /* at least one phase after the start of training ran to its end */
    const char *phase;     /* the label of the phase that decided the need; NULL if unknown */
    int64_t training_need; /* static + the largest training (not validation) phase; -1 if unknown */
    int64_t carried; /* cache of other phases carried into a repeated phase (fragmentation risk) */
    const char *carried_phase; /* the phase it was carried into */
    bool auto_phases;  /* the phases were found from the call sites, the report has no markers */
    bool static_floor; /* ...and static_level is only a floor: memory never fell back */
    /* The largest image side the job trains at, as a share of its image flag: 1.5 with a
     * multi-scale switch (YOLOv5/v7/v9's --multi-scale, Ultralytics' multi_scale=True), else 1.
     * x and need are then taken at that side. */
    double side_max;
    /* A failure after completed steps of its phase: the need those steps measured (the level
     * memory rested at before the climb that failed, + untracked) at the flag's own side,
     * x_steps; a multi-scale run that fit: its first step's. -1 when no completed step can be
     * told from the others. */
    int64_t steps_need;
    double x_steps;
    int64_t steps_climb; /* a multi-scale run that fit: the most one step added at once */
};

struct memmodel {
    enum memmodel_basis basis;
    double static_bytes, per_sample_bytes; /* per_sample at the reference image size */
    int64_t image_ref;                     /* 0: no image flag, no scaling */
    double side_max; /* the job's largest side as a share of its image flag (multi-scale: 1.5) */
    bool lower_bound;                      /* predictions are lower bounds (built on a failure) */
    double spread;                         /* uncertainty of a prediction, in bytes */
    /* observe mode: the same line through the uncapped peak, an upper bound of the need */
    bool has_upper;
    double upper_per_sample_bytes;
    size_t n_points, n_bounds;
    /* One measured run whose static part could not be told (no markers, no phase found): below
     * its x the need lies between the prediction and the run's own need (memmodel_range). */
    bool static_unknown;
    double known_x, known_need;
};

/* Whether a phase label names validation or evaluation ("epoch 0 val", "eval", "test"). */
bool memmodel_is_validation(const char *label);

/* Reads what each report says. Fails with a one-line reason when the reports are not runs of one
 * job at other settings (job_same_script) or say nothing usable. obs must hold n entries. */
bool memmodel_observe(const struct model_report *reports, size_t n, struct memmodel_obs *obs,
                      struct strbuf *err);
/* Builds the model from the observations. */
void memmodel_build(const struct memmodel_obs *obs, size_t n, struct memmodel *m);
/* The model's x for this batch and image size: batch x (largest side / reference)^2. */
double memmodel_x(const struct memmodel *m, int64_t batch, int64_t image);
/* The predicted need (bytes) at this batch and image size (image 0: the reference); for a
 * multi-scale job at the largest side it trains at with that image flag. */
double memmodel_predict(const struct memmodel *m, int64_t batch, int64_t image);
/* The upper bound where the model has one (observe mode), else the prediction. */
double memmodel_predict_upper(const struct memmodel *m, int64_t batch, int64_t image);
/* Where the need at this batch and image is only known between two figures: true with them in
 * *lo and *hi. */
bool memmodel_range(const struct memmodel *m, int64_t batch, int64_t image, double *lo, double *hi);
/* "runs", "timeline", "bound" */
const char *memmodel_basis_name(enum memmodel_basis b);

#endif
