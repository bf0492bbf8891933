/* test_job.c: the job analysis of job.h on the recorded four-rank job, and its edges: findings,
 * per-rank batch, which reports are one job (job_split, job_mixed), and which are read together
 * as a job's ranks or as runs at other settings (job_together). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#include "job.h"

static int failures;

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

/* process.launcher.KEY of the report (what job.c reads), a string or null (NULL). */
static void set_launcher(struct model_report *r, const char *key, const char *value)
{
    struct model_launcher *l = &r->process.launcher;
    l->known = true;
    const char **field = strcmp(key, "torchrun_run_id") == 0 ? &l->torchrun_run_id
                         : strcmp(key, "slurm_job_id") == 0  ? &l->slurm_job_id
                         : strcmp(key, "slurm_step_id") == 0 ? &l->slurm_step_id
                         : strcmp(key, "mpi_job_id") == 0    ? &l->mpi_job_id
                                                             : &l->parent_name;
    *field = value;
}

static void set_launcher_int(struct model_report *r, const char *key, int64_t v)
{
    struct model_launcher *l = &r->process.launcher;
    l->known = true;
    *(strcmp(key, "parent_pid") == 0 ? &l->parent_pid : &l->parent_start_unix_ns) =
            (model_int){ v, true };
}

static void set_loaded(struct model_report *r, int64_t t)
{
    r->process.loaded_unix_ns = (model_int){ t, true };
}

static size_t runs(const struct model_report *reports, size_t n, size_t *run_of)
{
    return job_split(reports, n, run_of);
}

/* Which reports are one job: the launcher's ids, the parent, the time (docs/multi-process.md). */
static void check_split(struct model_report *reports, size_t n)
{
    size_t run_of[4];
    struct strbuf why = { 0 };
    /* Earlier reports without a launcher: one job, as before. */
    EXPECT(runs(reports, n, run_of) == 1);
    /* torchrun's default run id "none" tells nothing apart. */
    for (size_t i = 0; i < n; i++)
        set_launcher(&reports[i], "torchrun_run_id", "none");
    EXPECT(runs(reports, n, run_of) == 1);
    /* Two Slurm jobs: two runs, and merge's reason names them. */
    for (size_t i = 0; i < n; i++)
        set_launcher(&reports[i], "slurm_job_id", reports[i].process.rank.v < 2 ? "77" : "78");
    EXPECT(runs(reports, n, run_of) == 2 &&
          run_of[by_rank(reports, n, 0) - reports] == run_of[by_rank(reports, n, 1) - reports] &&
          run_of[by_rank(reports, n, 0) - reports] != run_of[by_rank(reports, n, 2) - reports]);
    EXPECT(job_mixed(reports, n, &why) &&
          strstr(sb_str(&why), "different Slurm jobs (78 and 77): not one job"));
    sb_truncate(&why, 0);
    for (size_t i = 0; i < n; i++)
        set_launcher(&reports[i], "slurm_job_id", NULL);

    /* One rank began a moment after another ended: still one job (a rank that failed while
     * starting)... */
    struct model_report *late = by_rank(reports, n, 3);
    set_loaded(late, by_rank(reports, n, 0)->time_unix_ns + 1000);
    for (size_t i = 0; i < n; i++)
        if (&reports[i] != late)
            set_loaded(&reports[i], reports[i].process.start_unix_ns.v);
    late->time_unix_ns = by_rank(reports, n, 0)->time_unix_ns + 5000000000LL;
    EXPECT(runs(reports, n, run_of) == 1 && !job_mixed(reports, n, &why));
    /* ...but one that began a minute after another ended is a run of its own... */
    set_loaded(late, by_rank(reports, n, 0)->time_unix_ns + 60000000000LL);
    late->time_unix_ns = by_rank(reports, n, 0)->time_unix_ns + 65000000000LL;
    for (size_t i = 0; i < n; i++)
        if (&reports[i] != late)
            set_loaded(&reports[i], reports[i].process.start_unix_ns.v);
    EXPECT(runs(reports, n, run_of) == 2);
    EXPECT(job_mixed(reports, n, &why) && strstr(sb_str(&why), "one ended before the other began"));
    sb_truncate(&why, 0);
    /* ...unless an id that names one job says they are one (an elastic restart of a rank). */
    for (size_t i = 0; i < n; i++)
        set_launcher(&reports[i], "torchrun_run_id", "4c1f");
    EXPECT(runs(reports, n, run_of) == 1 && !job_mixed(reports, n, &why));
    for (size_t i = 0; i < n; i++)
        set_launcher(&reports[i], "torchrun_run_id", NULL);
    set_loaded(late, late->process.start_unix_ns.v);

    /* Two parents on one host: ranks stay one job; processes without a rank are two runs. */
    set_launcher_int(by_rank(reports, n, 0), "parent_pid", 100);
    set_launcher_int(by_rank(reports, n, 1), "parent_pid", 200);
    EXPECT(runs(reports, n, run_of) == 1);
    model_int saved[4];
    for (size_t i = 0; i < n; i++) {
        saved[i] = reports[i].process.rank;
        reports[i].process.rank.known = false;
    }
    EXPECT(runs(reports, n, run_of) == 2);
    EXPECT(job_mixed(reports, n, &why) && strstr(sb_str(&why), "different parent processes"));
    sb_truncate(&why, 0);
    for (size_t i = 0; i < n; i++)
        reports[i].process.rank = saved[i];

    /* The launcher in words. */
    struct model_report *r0 = by_rank(reports, n, 0);
    set_launcher(r0, "slurm_job_id", "77");
    set_launcher(r0, "slurm_step_id", "0");
    set_launcher(r0, "parent_name", "srun");
    job_add_launcher(&why, r0, true);
    EXPECT(strcmp(sb_str(&why), "Slurm job 77 step 0") == 0);
    sb_truncate(&why, 0);
    set_launcher(r0, "slurm_job_id", NULL);
    job_add_launcher(&why, r0, true);
    EXPECT(strcmp(sb_str(&why), "started by srun, pid 100") == 0);
    sb_truncate(&why, 0);
    job_add_launcher(&why, r0, false);
    EXPECT(why.len == 0);
    sb_free(&why);
}

/* Which reports advise and timeline read together (job_together): one job's ranks, runs of one
 * script at other settings, or neither. The pair are shallow copies of two ranks' reports: never
 * freed. */
static void check_together(const struct model_report *reports, size_t n)
{
    struct strbuf why = { 0 };
    EXPECT(job_together(reports, n, &why) == JOB_RANKS && why.len == 0);
    EXPECT(job_together(reports, 1, &why) == JOB_RANKS);
    const char *b32[] = { "python", "train.py", "--batch-size", "32" };
    const char *b64[] = { "python", "train.py", "--batch-size", "64" };
    const char *other[] = { "python", "eval.py", "--batch-size", "32" };
    struct model_report pair[2] = { reports[0], reports[1] };
    pair[0].process.argv = b32;
    pair[1].process.argv = b64;
    pair[0].process.argc = pair[1].process.argc = 4;
    /* Ranked, at other batch sizes: two runs of ranks, which advise does not read together. */
    EXPECT(job_together(pair, 2, &why) == JOB_NEITHER &&
           strstr(sb_str(&why), "different command lines"));
    sb_truncate(&why, 0);
    /* Without ranks: runs at other settings. */
    pair[0].process.rank.known = pair[1].process.rank.known = false;
    EXPECT(job_together(pair, 2, &why) == JOB_RUNS && why.len == 0);
    /* Another script: neither, with advise's reason. */
    pair[1].process.argv = other;
    EXPECT(job_together(pair, 2, &why) == JOB_NEITHER && strstr(sb_str(&why), "not the same job"));
    sb_truncate(&why, 0);
    /* The same process twice is not two runs. */
    pair[1] = pair[0];
    EXPECT(job_together(pair, 2, &why) == JOB_NEITHER &&
           strstr(sb_str(&why), "the same process twice"));
    sb_free(&why);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test-job DATA_DIR\n");
        return 2;
    }
    size_t n;
    struct model_report *reports = load(argv[1], &n);
    EXPECT(n == 4);

    struct job j;
    job_build(&j, reports, n);
    EXPECT(j.n == 4 && j.hosts == 1 && j.world_size.known && j.world_size.v == 4);
    for (size_t i = 0; i < j.n; i++)
        EXPECT(j.procs[i].r->process.rank.v == (int64_t)i);
    EXPECT(j.first_failure && j.procs[j.first_failure_proc].r->process.rank.v == 3);
    EXPECT(j.n_failed == 2);
    EXPECT(j.median_peak_bytes == 10 * GiB);
    EXPECT(j.n_gpus == 2 && j.gpus[0].n_procs == 2 && j.gpus[0].procs[0] == 0 &&
          j.gpus[0].procs[1] == 2);
    EXPECT(j.gpus[0].peak_bytes == 23 * GiB && j.gpus[1].peak_bytes == 20 * GiB);
    EXPECT(j.n_findings == 3);
    EXPECT(j.findings[0].kind == JOB_RANK0_EXTRA && j.findings[0].proc == 0 &&
          j.findings[0].excess_pct == 30);
    EXPECT(j.findings[1].kind == JOB_SHARED_GPU && j.findings[1].gpu == 0);
    EXPECT(j.findings[2].kind == JOB_SHARED_GPU && j.findings[2].gpu == 1);

    /* Per-rank batch: train.py --batch-size 32 is each rank's own batch. */
    int64_t per_rank = 0, value = 0;
    bool total = true;
    EXPECT(job_rank_batch(&j, &per_rank, &value, &total) && per_rank == 32 && value == 32 && !total);
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
    EXPECT(job_rank_batch(&j, &per_rank, &value, &total) && per_rank == 16 && value == 64 && total);
    job_free(&j);
    struct strbuf why = { 0 };
    EXPECT(!job_mixed(reports, n, &why));
    for (size_t i = 0; i < n; i++) {
        reports[i].process.argv = saved[i];
        reports[i].process.argc = saved_argc[i];
    }

    /* 15% over the median is not an imbalance; 20% is. A rank other than 0 is rank_high. */
    set_peak(by_rank(reports, n, 0), 10 * GiB);
    set_peak(by_rank(reports, n, 2), 11 * GiB + 512 * MiB);
    job_build(&j, reports, n);
    EXPECT(j.n_findings == 2 && j.findings[0].kind == JOB_SHARED_GPU);
    job_free(&j);
    set_peak(by_rank(reports, n, 2), 12 * GiB);
    job_build(&j, reports, n);
    EXPECT(j.n_findings == 3 && j.findings[0].kind == JOB_RANK_HIGH && j.findings[0].proc == 2 &&
          j.findings[0].excess_pct == 20);
    job_free(&j);
    /* Small jobs: a small excess in bytes is noise, whatever the share. */
    for (size_t i = 0; i < n; i++)
        set_peak(&reports[i], 100 * MiB);
    set_peak(by_rank(reports, n, 1), 150 * MiB);
    job_build(&j, reports, n);
    EXPECT(j.n_findings == 2);
    job_free(&j);

    check_split(reports, n);
    check_together(reports, n);

    /* A rank twice is two runs mixed; the same process twice is refused too. */
    reports[1].process.rank = reports[0].process.rank;
    EXPECT(job_mixed(reports, n, &why) && strstr(sb_str(&why), "the same rank twice"));
    sb_free(&why);

    for (size_t i = 0; i < n; i++)
        model_free(&reports[i]);
    free(reports);
    if (failures)
        fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}
