/* job.h: the reports of one job's processes (ranks) read together: who holds what on which
 * physical GPU, who ran out of memory first, which rank holds more than the others; and the
 * vramwatch.job/1 document that merge writes and report --json prints for several reports. */
#ifndef VRAMWATCH_TOOL_JOB_H
#define VRAMWATCH_TOOL_JOB_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "util.h"

#define JOB_SCHEMA "vramwatch.job/1"

/* A rank is "high" when its peak is at least this share above the median rank's, and at least
 * JOB_IMBALANCE_MIN_BYTES above it (a few MiB over a small median is noise, not imbalance). */
#define JOB_IMBALANCE_PCT 20
#define JOB_IMBALANCE_MIN_BYTES (64LL << 20)

struct job_process {
    const struct model_report *r;
    int64_t live_bytes; /* over all its devices */
    int64_t peak_bytes; /* sum of its devices' peak_live_bytes */
    char **device_ids;  /* one per r->devices entry: the physical GPU's name, NULL when unknown */
    size_t *gpus;       /* one per r->devices entry: index into job.gpus, SIZE_MAX when unknown */
};

/* One physical GPU: a UUID is unique anywhere, a PCI bus id or an ordinal only on its host. */
struct job_gpu {
    const char *host;
    const char *id;   /* the device_ids entry that names it */
    const char *name; /* device name, NULL when unknown */
    model_int total_bytes;
    size_t *procs; /* indices into job.procs, in rank order */
    size_t n_procs;
    int64_t live_bytes; /* all its processes' live memory on it */
    int64_t peak_bytes; /* the sum of their peaks: an upper bound, the peaks need not coincide */
};

enum job_finding_kind {
    JOB_RANK_HIGH,   /* a rank (other than 0) peaked well above the median rank */
    JOB_RANK0_EXTRA, /* rank 0 did: buffers only rank 0 keeps (evaluation, EMA, logging, saving) */
    JOB_SHARED_GPU,  /* several processes on one physical GPU */
};

struct job_finding {
    enum job_finding_kind kind;
    size_t proc;          /* RANK_HIGH, RANK0_EXTRA: the process; SHARED_GPU: its first one */
    size_t gpu;           /* SHARED_GPU: the GPU; else SIZE_MAX */
    int64_t bytes;        /* the rank's peak; SHARED_GPU: the sum of the sharers' peaks */
    int64_t median_bytes; /* the median rank's peak; SHARED_GPU: the GPU's capacity, -1 unknown */
    int64_t excess_pct;   /* how far above the median, in percent; SHARED_GPU: 0 */
};

struct job {
    struct job_process *procs; /* in rank order: ranks, then unranked by host and pid */
    size_t n;
    struct job_gpu *gpus;
    size_t n_gpus;
    size_t hosts;
    model_int start_unix_ns;                   /* the earliest process start */
    model_int world_size;                      /* when every process that says agrees */
    const struct model_failure *first_failure; /* earliest real out-of-memory, NULL if none */
    size_t first_failure_proc;                 /* whose */
    size_t n_failed;                           /* processes with a real out-of-memory */
    int64_t median_peak_bytes;                 /* over the processes */
    struct job_finding *findings; /* imbalances first (largest first), then shared GPUs */
    size_t n_findings;
};

/* Reads the reports (borrowed: they must outlive the job) as one job. */
void job_build(struct job *j, const struct model_report *reports, size_t n);
void job_free(struct job *j);

/* The vramwatch.job/1 document. The reports are referenced, not copied: delete the result
 * before the reports. */
cJSON *job_to_json(const struct job *j);

/* Why these reports cannot be one job, in one line, or false. The rule (docs/multi-process.md,
 * "One job or several"): the same command line (apart from --local_rank/--local-rank, which
 * DeepSpeed and the old launcher give each rank), the same world size, the same launcher ids
 * (torchrun run id, Slurm job and step, MPI job), no process twice (host and pid), no rank
 * twice; and without a launcher id that both share, one parent process per host and lives
 * that overlap in time. */
bool job_mixed(const struct model_report *reports, size_t n, struct strbuf *why);

/* Whether the reports are runs of one script at other settings: every command line the same as
 * the first's, argument by argument, apart from the values of the batch and image-size flags
 * (cmdline_same_job), and no process twice. False with a one-line reason in why. */
bool job_same_script(const struct model_report *reports, size_t n, struct strbuf *why);

/* How several reports are read together: the one rule advise (which fits its model to runs and
 * speaks of a job's ranks) and timeline (which draws each run on its own time axis) share. */
enum job_together {
    JOB_NEITHER, /* refused: why says why */
    JOB_RANKS, /* one job's processes (or a single report): job_mixed finds nothing against them */
    JOB_RUNS,  /* runs of one script at other settings (job_same_script) */
};

/* Reports of which two or more say their rank are one job's ranks, by job_mixed's rule; other
 * reports are runs of one script at other settings, by job_same_script's. */
enum job_together job_together(const struct model_report *reports, size_t n, struct strbuf *why);

/* The separate runs (jobs, or single processes) among these reports, by job_mixed's rule:
 * run_of[i] (n entries) gets the run of reports[i], runs numbered from 0 in the order they began.
 * Returns how many runs there are. */
size_t job_split(const struct model_report *reports, size_t n, size_t *run_of);

/* The launcher a report names, for people: "torchrun run 4c1f", "Slurm job 77 step 0",
 * "MPI job 1234", else (with parent_too) "started by bash, pid 3001"; nothing when the report
 * says nothing. */
void job_add_launcher(struct strbuf *b, const struct model_report *r, bool parent_too);

/* The batch each rank ran: the batch flag of the command line, divided by the world size for
 * the YOLO scripts whose --batch is the total over all GPUs. False when no flag was found. */
/* The job's world size: as the launcher said (WORLD_SIZE), else the number of its processes. */
int64_t job_world_size(const struct job *j);
bool job_rank_batch(const struct job *j, int64_t *per_rank, int64_t *flag_value,
                    bool *flag_is_total);

/* Loads a file that is either one report or a job document (whose processes' reports are taken
 * out of it). Appends to *reports (n_reports entries, grown as needed). False with a one-line
 * reason (without the file name) in err. */
bool job_load_file(const char *path, struct model_report **reports, size_t *n_reports,
                   struct strbuf *err);

/* job_load_file for each path in order. At the first that cannot be read, one line on stderr
 * ("PREFIX: PATH: reason", or "PATH: reason" when prefix is NULL) and false; what was loaded
 * until then is in *reports either way. */
bool job_load_files(const char *prefix, char *const *paths, size_t n, struct model_report **reports,
                    size_t *n_reports);
/* Several reports of one process (its dumps on request, vramwatch-HOST-PID-request-N.json,
 * beside its own report) are moments of one process, not processes of a job: of each such set
 * only the latest written is kept, the others freed, and one line on stderr per set says which
 * were left out ("PREFIX: ..."). The same host, pid and start (the library's load, else the
 * process's start) make one process. Returns the number kept, in their order. */
size_t job_keep_latest(const char *prefix, struct model_report *reports, size_t n);

/* Frees the reports job_load_file(s) loaded, and the array. */
void job_free_reports(struct model_report *reports, size_t n);

#endif
