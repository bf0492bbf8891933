/* test_job.c: the job analysis of job.h on the recorded four-rank job, and its edges. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

static int failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

#define MiB (1LL << 20)
#define GiB (1LL << 30)

static struct model_report *load(const char *dir, size_t *n)
{
    struct model_report *reports = NULL;
    *n = 0;
    /* Out of rank order on purpose: the job sorts them. */
    static const int order[] = { 2, 0, 3, 1 };
    for (int i = 0; i < 4; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/job4-rank%d.json", dir, order[i]);
        struct strbuf err = { 0 };
        if (!job_load_file(path, &reports, n, &err)) {
            fprintf(stderr, "%s: %s\n", path, sb_str(&err));
            exit(1);
        }
        sb_free(&err);
    }
    return reports;
}

static void set_peak(struct model_report *r, int64_t peak)
{
    r->devices[0].peak_live_bytes = peak;
}

static struct model_report *by_rank(struct model_report *reports, size_t n, int64_t rank)
{
    for (size_t i = 0; i < n; i++)
        if (reports[i].process.rank.v == rank)
            return &reports[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test-job DATA_DIR\n");
        return 2;
    }
    size_t n;
    struct model_report *reports = load(argv[1], &n);
    CHECK(n == 4);

    struct job j;
    job_build(&j, reports, n);
    CHECK(j.n == 4 && j.hosts == 1 && j.world_size.known && j.world_size.v == 4);
    for (size_t i = 0; i < j.n; i++)
        CHECK(j.procs[i].r->process.rank.v == (int64_t)i);
    CHECK(j.first_failure && j.procs[j.first_failure_proc].r->process.rank.v == 3);
    CHECK(j.n_failed == 2);
    CHECK(j.median_peak_bytes == 10 * GiB);
    CHECK(j.n_gpus == 2 && j.gpus[0].n_procs == 2 && j.gpus[0].procs[0] == 0 &&
          j.gpus[0].procs[1] == 2);
    CHECK(j.gpus[0].peak_bytes == 23 * GiB && j.gpus[1].peak_bytes == 20 * GiB);
    CHECK(j.n_findings == 3);
    CHECK(j.findings[0].kind == JOB_RANK0_EXTRA && j.findings[0].proc == 0 &&
          j.findings[0].excess_pct == 30);
    CHECK(j.findings[1].kind == JOB_SHARED_GPU && j.findings[1].gpu == 0);
    CHECK(j.findings[2].kind == JOB_SHARED_GPU && j.findings[2].gpu == 1);

    /* Per-rank batch: train.py --batch-size 32 is each rank's own batch. */
    int64_t per_rank = 0, value = 0;
    bool total = true;
    CHECK(job_rank_batch(&j, &per_rank, &value, &total) && per_rank == 32 && value == 32 && !total);
    job_free(&j);

    /* YOLOv9's --batch is the total over the GPUs: 64 over 4 ranks is 16 each. */
    const char *yolo[] = { "python", "train_dual.py", "--device", "0,1,2,3", "--batch", "64" };
    const char **saved[4];
    size_t saved_argc[4];
    for (size_t i = 0; i < n; i++) {
        saved[i] = reports[i].process.argv; /* each report owns its own; put back before freeing */
        saved_argc[i] = reports[i].process.argc;
        reports[i].process.argv = yolo;
        reports[i].process.argc = 6;
    }
    job_build(&j, reports, n);
    CHECK(job_rank_batch(&j, &per_rank, &value, &total) && per_rank == 16 && value == 64 && total);
    job_free(&j);
    struct strbuf why = { 0 };
    CHECK(!job_mixed(reports, n, &why));
    for (size_t i = 0; i < n; i++) {
        reports[i].process.argv = saved[i];
        reports[i].process.argc = saved_argc[i];
    }

    /* 15% over the median is not an imbalance; 20% is. A rank other than 0 is rank_high. */
    set_peak(by_rank(reports, n, 0), 10 * GiB);
    set_peak(by_rank(reports, n, 2), 11 * GiB + 512 * MiB);
    job_build(&j, reports, n);
    CHECK(j.n_findings == 2 && j.findings[0].kind == JOB_SHARED_GPU);
    job_free(&j);
    set_peak(by_rank(reports, n, 2), 12 * GiB);
    job_build(&j, reports, n);
    CHECK(j.n_findings == 3 && j.findings[0].kind == JOB_RANK_HIGH && j.findings[0].proc == 2 &&
          j.findings[0].excess_pct == 20);
    job_free(&j);
    /* Small jobs: a small excess in bytes is noise, whatever the share. */
    for (size_t i = 0; i < n; i++)
        set_peak(&reports[i], 100 * MiB);
    set_peak(by_rank(reports, n, 1), 150 * MiB);
    job_build(&j, reports, n);
    CHECK(j.n_findings == 2);
    job_free(&j);

    /* A rank twice is two runs mixed; the same process twice is refused too. */
    reports[1].process.rank = reports[0].process.rank;
    CHECK(job_mixed(reports, n, &why) && strstr(sb_str(&why), "the same rank twice"));
    sb_free(&why);

    for (size_t i = 0; i < n; i++)
        model_free(&reports[i]);
    free(reports);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
