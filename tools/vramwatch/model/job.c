/* job.c: several processes' reports read as one job (see job.h), and the vramwatch.job/1 document. */
#include "job.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "json.h"

/* ---- order ---- */

/* Ranks in order, unranked processes after them, then by host and pid: a stable reading order. */
static int by_rank(const void *a, const void *b)
{
    const struct model_report *x = *(const struct model_report *const *)a;
    const struct model_report *y = *(const struct model_report *const *)b;
    if (x->process.rank.known != y->process.rank.known)
        return x->process.rank.known ? -1 : 1;
    if (x->process.rank.known && x->process.rank.v != y->process.rank.v)
        return x->process.rank.v < y->process.rank.v ? -1 : 1;
    int h = strcmp(x->process.host, y->process.host);
    if (h)
        return h;
    if (x->process.pid != y->process.pid)
        return x->process.pid < y->process.pid ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* ---- physical GPUs ---- */

/* The CUDA_VISIBLE_DEVICES entry an ordinal maps to, or NULL (malloc'd). */
static char *visible_entry(const struct model_report *r, int64_t ordinal)
{
    const char *p = model_env(r, "CUDA_VISIBLE_DEVICES");
    for (int64_t k = 0; p && k < ordinal; k++) {
        p = strchr(p, ',');
        if (p)
            p++;
    }
    if (!p)
        return NULL;
    size_t len = strcspn(p, ",");
    if (len == 0)
        return NULL;
    char *entry = util_xmalloc(len + 1);
    memcpy(entry, p, len);
    entry[len] = '\0';
    return entry;
}

/* device_ids name physical GPUs: the report's uuid or PCI bus id when it has one, else the
 * CUDA_VISIBLE_DEVICES entry the ordinal maps to, else (nothing remapped) the ordinal itself. */
static char *device_id(const struct model_report *r, const struct model_device *d)
{
    if (d->uuid || d->pci_bus_id)
        return util_xstrdup(d->uuid ? d->uuid : d->pci_bus_id);
    if (!d->ordinal.known)
        return NULL;
    if (model_env(r, "CUDA_VISIBLE_DEVICES"))
        return visible_entry(r, d->ordinal.v);
    char num[24];
    snprintf(num, sizeof num, "%" PRId64, d->ordinal.v);
    return util_xstrdup(num);
}

/* A UUID names one GPU anywhere; bus ids and ordinals repeat from host to host. */
static bool globally_unique(const char *id)
{
    return strncmp(id, "GPU-", 4) == 0 || strncmp(id, "MIG-", 4) == 0;
}

/* FNV-1a over the id, and the host for ids that only name a GPU on their host. */
static uint64_t gpu_hash(const char *host, const char *id)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *c = id; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    if (!globally_unique(id))
        for (const char *c = host; *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    return h;
}

/* The GPU index table: open addressing over job.gpus, at most half full. */
struct gpu_index {
    size_t *slot; /* index into job.gpus + 1; 0: empty */
    size_t cap;
};

static size_t *gpu_slot(struct job *j, struct gpu_index *ix, const char *host, const char *id)
{
    size_t k = (size_t)gpu_hash(host, id) & (ix->cap - 1);
    for (;; k = (k + 1) & (ix->cap - 1)) {
        size_t g = ix->slot[k];
        if (g == 0)
            return &ix->slot[k];
        const struct job_gpu *gpu = &j->gpus[g - 1];
        if (strcmp(gpu->id, id) == 0 && (globally_unique(id) || strcmp(gpu->host, host) == 0))
            return &ix->slot[k];
    }
}

static void add_to_gpu(struct job *j, struct gpu_index *ix, size_t p, size_t dev)
{
    struct job_process *jp = &j->procs[p];
    const struct model_device *d = &jp->r->devices[dev];
    const char *id = jp->device_ids[dev];
    jp->gpus[dev] = SIZE_MAX;
    if (!id)
        return;
    size_t *slot = gpu_slot(j, ix, jp->r->process.host, id);
    size_t g = *slot ? *slot - 1 : SIZE_MAX;
    if (g == SIZE_MAX) {
        j->gpus = util_xrealloc(j->gpus, (j->n_gpus + 1) * sizeof *j->gpus);
        g = j->n_gpus++;
        j->gpus[g] = (struct job_gpu){ .host = jp->r->process.host, .id = id };
        *slot = g + 1;
    }
    struct job_gpu *gpu = &j->gpus[g];
    jp->gpus[dev] = g;
    if (!gpu->name)
        gpu->name = d->name;
    if (!gpu->total_bytes.known)
        gpu->total_bytes = d->total_bytes;
    gpu->live_bytes = util_sat_add(gpu->live_bytes, d->live_bytes);
    gpu->peak_bytes = util_sat_add(gpu->peak_bytes, d->peak_live_bytes);
    /* A process with two ordinals on one GPU (it happens with repeated CUDA_VISIBLE_DEVICES
     * entries on other drivers) is still one process there. */
    if (gpu->n_procs == 0 || gpu->procs[gpu->n_procs - 1] != p) {
        gpu->procs = util_xrealloc(gpu->procs, (gpu->n_procs + 1) * sizeof *gpu->procs);
        gpu->procs[gpu->n_procs++] = p;
    }
}

/* ---- findings ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t median_peak(const struct job *j)
{
    if (j->n == 0)
        return 0;
    int64_t *v = util_xcalloc(j->n, sizeof *v);
    for (size_t i = 0; i < j->n; i++)
        v[i] = j->procs[i].peak_bytes;
    qsort(v, j->n, sizeof *v, cmp_i64);
    /* Even counts: the mean of the middle two, written so it cannot overflow (both >= 0). */
    int64_t m = j->n % 2 ? v[j->n / 2] : v[j->n / 2 - 1] + (v[j->n / 2] - v[j->n / 2 - 1]) / 2;
    free(v);
    return m;
}

static void add_finding(struct job *j, struct job_finding f)
{
    j->findings = util_xrealloc(j->findings, (j->n_findings + 1) * sizeof *j->findings);
    j->findings[j->n_findings++] = f;
}

static int by_excess_desc(const void *a, const void *b)
{
    const struct job_finding *x = a, *y = b;
    if (x->excess_pct != y->excess_pct)
        return x->excess_pct > y->excess_pct ? -1 : 1;
    return (x->proc > y->proc) - (x->proc < y->proc);
}

static void find_imbalance(struct job *j)
{
    /* With two processes the median is their mean, so one rank twice the other is still seen;
     * with one there is nothing to compare. */
    if (j->n < 2 || j->median_peak_bytes <= 0)
        return;
    int64_t m = j->median_peak_bytes;
    for (size_t i = 0; i < j->n; i++) {
        int64_t peak = j->procs[i].peak_bytes;
        int64_t over = peak - m;
        if (over < JOB_IMBALANCE_MIN_BYTES)
            continue;
        /* over * 100 / m without overflow: both are at most int64 byte counts. */
        int64_t pct = util_clamp_i64((double)over * 100.0 / (double)m + 0.5);
        if (pct < JOB_IMBALANCE_PCT)
            continue;
        const model_int *rank = &j->procs[i].r->process.rank;
        bool rank0 = rank->known && rank->v == 0;
        add_finding(j, (struct job_finding){ rank0 ? JOB_RANK0_EXTRA : JOB_RANK_HIGH, i, SIZE_MAX,
                                             peak, m, pct });
    }
    if (j->n_findings > 1) /* qsort wants a real array even for nothing to sort */
        qsort(j->findings, j->n_findings, sizeof *j->findings, by_excess_desc);
}

static void find_shared(struct job *j)
{
    for (size_t g = 0; g < j->n_gpus; g++) {
        const struct job_gpu *gpu = &j->gpus[g];
        if (gpu->n_procs < 2)
            continue;
        add_finding(j, (struct job_finding){ JOB_SHARED_GPU, gpu->procs[0], g, gpu->peak_bytes,
                                             gpu->total_bytes.known ? gpu->total_bytes.v : -1, 0 });
    }
}

/* ---- the job ---- */

static int by_host_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t count_hosts(const struct model_report *const *order, size_t n)
{
    if (n == 0)
        return 0;
    const char **names = util_xcalloc(n, sizeof *names);
    for (size_t i = 0; i < n; i++)
        names[i] = order[i]->process.host;
    qsort(names, n, sizeof *names, by_host_name);
    size_t hosts = 1;
    for (size_t i = 1; i < n; i++)
        hosts += strcmp(names[i], names[i - 1]) != 0;
    free(names);
    return hosts;
}

void job_build(struct job *j, const struct model_report *reports, size_t n)
{
    *j = (struct job){ 0 };
    const struct model_report **order = util_xcalloc(n ? n : 1, sizeof *order);
    for (size_t i = 0; i < n; i++)
        order[i] = &reports[i];
    qsort(order, n, sizeof *order, by_rank);
    j->procs = util_xcalloc(n ? n : 1, sizeof *j->procs);
    j->n = n;
    bool world_agrees = true;
    for (size_t i = 0; i < n; i++) {
        const struct model_report *r = order[i];
        struct job_process *p = &j->procs[i];
        p->r = r;
        p->live_bytes = model_total_live(r);
        for (size_t d = 0; d < r->n_devices; d++)
            p->peak_bytes = util_sat_add(p->peak_bytes, r->devices[d].peak_live_bytes);
        p->device_ids = util_xcalloc(r->n_devices ? r->n_devices : 1, sizeof *p->device_ids);
        p->gpus = util_xcalloc(r->n_devices ? r->n_devices : 1, sizeof *p->gpus);
        for (size_t d = 0; d < r->n_devices; d++)
            p->device_ids[d] = device_id(r, &r->devices[d]);

        model_int s = model_time_origin(r);
        if (s.known && (!j->start_unix_ns.known || s.v < j->start_unix_ns.v))
            j->start_unix_ns = s;

        const model_int *w = &r->process.world_size;
        if (w->known) {
            if (j->world_size.known && j->world_size.v != w->v)
                world_agrees = false;
            j->world_size = *w;
        }

        const struct model_failure *f = model_real_oom(r);
        if (f) {
            j->n_failed++;
            if (!j->first_failure || f->time_unix_ns < j->first_failure->time_unix_ns) {
                j->first_failure = f;
                j->first_failure_proc = i;
            }
        }
    }
    if (!world_agrees)
        j->world_size = (model_int){ 0, false };
    j->hosts = count_hosts(order, n);
    /* GPUs after all ids exist: they point into the processes' id strings. */
    size_t devices = 0;
    for (size_t i = 0; i < n; i++)
        devices += j->procs[i].r->n_devices;
    struct gpu_index ix = { NULL, 16 };
    while (ix.cap < 2 * devices)
        ix.cap *= 2;
    ix.slot = util_xcalloc(ix.cap, sizeof *ix.slot);
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < j->procs[i].r->n_devices; d++)
            add_to_gpu(j, &ix, i, d);
    free(ix.slot);
    j->median_peak_bytes = median_peak(j);
    find_imbalance(j);
    find_shared(j);
    free(order);
}

void job_free(struct job *j)
{
    for (size_t i = 0; i < j->n; i++) {
        for (size_t d = 0; d < j->procs[i].r->n_devices; d++)
            free(j->procs[i].device_ids[d]);
        free(j->procs[i].device_ids);
        free(j->procs[i].gpus);
    }
    for (size_t g = 0; g < j->n_gpus; g++)
        free(j->gpus[g].procs);
    free(j->procs);
    free(j->gpus);
    free(j->findings);
    *j = (struct job){ 0 };
}

/* ---- the document ---- */

static cJSON *opt_int(model_int v)
{
    return v.known ? json_new_int(v.v) : cJSON_CreateNull();
}

static const char *finding_kind(enum job_finding_kind k)
{
    switch (k) {
    case JOB_RANK_HIGH:
        return "rank_high";
    case JOB_RANK0_EXTRA:
        return "rank0_extra";
    case JOB_SHARED_GPU:
        return "shared_gpu";
    }
    return "?";
}

static cJSON *gpu_json(const struct job *j, size_t g)
{
    const struct job_gpu *gpu = &j->gpus[g];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "host", gpu->host);
    cJSON_AddStringToObject(o, "id", gpu->id);
    if (gpu->name)
        cJSON_AddStringToObject(o, "name", gpu->name);
    else
        cJSON_AddNullToObject(o, "name");
    cJSON_AddItemToObject(o, "total_bytes", opt_int(gpu->total_bytes));
    cJSON *procs = cJSON_AddArrayToObject(o, "processes");
    for (size_t k = 0; k < gpu->n_procs; k++)
        cJSON_AddItemToArray(procs, json_new_int((int64_t)gpu->procs[k]));
    cJSON_AddItemToObject(o, "live_bytes", json_new_int(gpu->live_bytes));
    cJSON_AddItemToObject(o, "peak_bytes_sum", json_new_int(gpu->peak_bytes));
    return o;
}

static size_t split(const struct model_report *reports, const struct model_report *const *ptrs,
                    size_t n, size_t *run_of);

cJSON *job_to_json(const struct job *j)
{
    cJSON *job = cJSON_CreateObject();
    cJSON_AddStringToObject(job, "schema", JOB_SCHEMA);
    cJSON *procs = cJSON_AddArrayToObject(job, "processes");
    for (size_t i = 0; i < j->n; i++) {
        const struct job_process *jp = &j->procs[i];
        const struct model_report *r = jp->r;
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "host", r->process.host);
        cJSON_AddItemToObject(p, "pid", json_new_int(r->process.pid));
        cJSON_AddItemToObject(p, "rank", opt_int(r->process.rank));
        cJSON_AddItemToObject(p, "local_rank", opt_int(r->process.local_rank));
        cJSON_AddItemToObject(p, "world_size", opt_int(r->process.world_size));
        cJSON *ids = cJSON_AddArrayToObject(p, "device_ids");
        for (size_t d = 0; d < r->n_devices; d++)
            cJSON_AddItemToArray(ids, jp->device_ids[d] ? cJSON_CreateString(jp->device_ids[d])
                                                        : cJSON_CreateNull());
        cJSON_AddItemToObject(p, "live_bytes", json_new_int(jp->live_bytes));
        cJSON_AddItemToObject(p, "peak_live_bytes", json_new_int(jp->peak_bytes));
        /* The report itself is shared with the loaded tree, not copied. */
        cJSON_AddItemToObject(p, "report", cJSON_CreateObjectReference(r->root->child));
        cJSON_AddItemToArray(procs, p);
    }
    const struct model_failure *f = j->first_failure;
    if (f) {
        const struct model_report *owner = j->procs[j->first_failure_proc].r;
        cJSON *ff = cJSON_CreateObject();
        cJSON_AddStringToObject(ff, "host", owner->process.host);
        cJSON_AddItemToObject(ff, "pid", json_new_int(owner->process.pid));
        cJSON_AddItemToObject(ff, "rank", opt_int(owner->process.rank));
        cJSON_AddItemToObject(ff, "time_unix_ns", json_new_int(f->time_unix_ns));
        cJSON_AddStringToObject(ff, "api", f->api);
        cJSON_AddItemToObject(ff, "device", opt_int(f->device));
        cJSON_AddItemToObject(ff, "size", json_new_int(f->size));
        cJSON_AddItemToObject(ff, "process", json_new_int((int64_t)j->first_failure_proc));
        cJSON_AddItemToObject(job, "first_failure", ff);
    } else {
        cJSON_AddNullToObject(job, "first_failure");
    }
    cJSON_AddItemToObject(job, "hosts", json_new_int((int64_t)j->hosts));
    cJSON_AddItemToObject(job, "world_size", opt_int(j->world_size));
    cJSON_AddItemToObject(job, "processes_out_of_memory", json_new_int((int64_t)j->n_failed));
    cJSON *gpus = cJSON_AddArrayToObject(job, "gpus");
    for (size_t g = 0; g < j->n_gpus; g++)
        cJSON_AddItemToArray(gpus, gpu_json(j, g));
    cJSON_AddItemToObject(job, "median_peak_bytes", json_new_int(j->median_peak_bytes));
    /* Separate runs among the processes (report --json on a folder of many; merge writes one). */
    const struct model_report **ptrs = util_xcalloc(j->n ? j->n : 1, sizeof *ptrs);
    size_t *run_of = util_xcalloc(j->n ? j->n : 1, sizeof *run_of);
    for (size_t i = 0; i < j->n; i++)
        ptrs[i] = j->procs[i].r;
    size_t n_runs = split(NULL, ptrs, j->n, run_of);
    cJSON *runs = cJSON_AddArrayToObject(job, "runs");
    for (size_t g = 0; g < n_runs; g++) {
        cJSON *members = cJSON_CreateArray();
        for (size_t i = 0; i < j->n; i++)
            if (run_of[i] == g)
                cJSON_AddItemToArray(members, json_new_int((int64_t)i));
        cJSON *run = cJSON_CreateObject();
        cJSON_AddItemToObject(run, "processes", members);
        cJSON_AddItemToArray(runs, run);
    }
    free(run_of);
    free(ptrs);
    cJSON *fs = cJSON_AddArrayToObject(job, "findings");
    for (size_t i = 0; i < j->n_findings; i++) {
        const struct job_finding *x = &j->findings[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", finding_kind(x->kind));
        cJSON_AddItemToObject(o, "process", json_new_int((int64_t)x->proc));
        cJSON_AddItemToObject(o, "rank", opt_int(j->procs[x->proc].r->process.rank));
        if (x->kind == JOB_SHARED_GPU) {
            cJSON_AddItemToObject(o, "gpu", json_new_int((int64_t)x->gpu));
            cJSON_AddItemToObject(o, "peak_bytes_sum", json_new_int(x->bytes));
            cJSON_AddItemToObject(o, "total_bytes",
                                  x->median_bytes >= 0 ? json_new_int(x->median_bytes)
                                                       : cJSON_CreateNull());
        } else {
            cJSON_AddItemToObject(o, "peak_bytes", json_new_int(x->bytes));
            cJSON_AddItemToObject(o, "median_peak_bytes", json_new_int(x->median_bytes));
            cJSON_AddItemToObject(o, "excess_pct", json_new_int(x->excess_pct));
        }
        cJSON_AddItemToArray(fs, o);
    }
    return job;
}

/* ---- one job or several ---- */

/* Arguments the launcher gives each rank differently: DeepSpeed's and torch.distributed.launch's
 * --local_rank=N (or --local-rank=N, or the value as the next argument). */
static size_t skip_local_rank(const char *const *argv, size_t argc, size_t i)
{
    static const char *const names[] = { "--local_rank", "--local-rank" };
    for (size_t k = 0; k < 2; k++) {
        size_t len = strlen(names[k]);
        if (strncmp(argv[i], names[k], len) != 0)
            continue;
        if (argv[i][len] == '=')
            return i + 1;
        if (argv[i][len] == '\0')
            return i + 1 < argc ? i + 2 : i + 1;
    }
    return i;
}

static bool same_command(const struct model_process *a, const struct model_process *b)
{
    size_t i = 0, k = 0;
    for (;;) {
        size_t ni, nk;
        while (i < a->argc && (ni = skip_local_rank(a->argv, a->argc, i)) != i)
            i = ni;
        while (k < b->argc && (nk = skip_local_rank(b->argv, b->argc, k)) != k)
            k = nk;
        if (i == a->argc || k == b->argc)
            return i == a->argc && k == b->argc;
        if (strcmp(a->argv[i], b->argv[k]) != 0)
            return false;
        i++;
        k++;
    }
}

static void add_who(struct strbuf *b, const struct model_report *r)
{
    util_add_text(b, r->path);
    sb_printf(b, " (pid %" PRId64 " on ", r->process.pid);
    util_add_text(b, r->process.host);
    if (r->process.rank.known)
        sb_printf(b, ", rank %" PRId64, r->process.rank.v);
    sb_addc(b, ')');
}

/* What a report says of the job it was part of (process.launcher, process.loaded_unix_ns;
 * docs/report-format.md): reports of earlier versions have neither. */
struct ident {
    const struct model_report *r;
    const char *torchrun, *slurm_job, *slurm_step, *mpi; /* NULL: unknown */
    model_int parent_pid, parent_start;
    model_int begin, end; /* the process's life as far as the report knows it */
    size_t host;          /* interned: equal numbers, equal host names */
};

static void read_ident(const struct model_report *r, struct ident *id)
{
    *id = (struct ident){ .r = r };
    const struct model_launcher *l = &r->process.launcher;
    if (l->known) {
        id->torchrun = l->torchrun_run_id;
        /* torchrun's default --rdzv-id: every job without one has it, so it tells none apart. */
        if (id->torchrun && strcmp(id->torchrun, "none") == 0)
            id->torchrun = NULL;
        id->slurm_job = l->slurm_job_id;
        id->slurm_step = l->slurm_step_id;
        id->mpi = l->mpi_job_id;
        id->parent_pid = l->parent_pid;
        id->parent_start = l->parent_start_unix_ns;
    } else {
        /* An earlier report: its parent when it was written, without a start time. */
        id->parent_pid = r->process.ppid;
    }
    /* The life: from the library's load (precise) or the process start (to about a second), to
     * the last report it wrote. */
    id->begin = r->process.loaded_unix_ns;
    if (!id->begin.known)
        id->begin = r->process.start_unix_ns;
    id->end = (model_int){ r->time_unix_ns, true };
}

void job_add_launcher(struct strbuf *b, const struct model_report *r, bool parent_too)
{
    struct ident id;
    read_ident(r, &id);
    const struct model_launcher *l = &r->process.launcher;
    const char *parent = l->parent_name;
    size_t len = b->len;
    if (id.torchrun) {
        sb_add(b, "torchrun run ");
        util_add_text(b, id.torchrun);
    }
    if (id.slurm_job) {
        sb_add(b, b->len > len ? ", Slurm job " : "Slurm job ");
        util_add_text(b, id.slurm_job);
        if (id.slurm_step) {
            sb_add(b, " step ");
            util_add_text(b, id.slurm_step);
        }
    }
    if (id.mpi) {
        sb_add(b, b->len > len ? ", MPI job " : "MPI job ");
        util_add_text(b, id.mpi);
    }
    if (b->len == len && parent_too && l->known && id.parent_pid.known) {
        sb_add(b, "started by ");
        if (parent) {
            util_add_text(b, parent);
            sb_add(b, ", ");
        }
        sb_printf(b, "pid %" PRId64, id.parent_pid.v);
    }
}

static bool differ(const char *a, const char *b)
{
    return a && b && strcmp(a, b) != 0;
}

/* An id that the launcher gives every process of one job and no other: both reports have it and
 * it is the same, so they are one job whatever their parents and times. */
static bool same_job_id(const struct ident *a, const struct ident *b)
{
    return (a->torchrun && b->torchrun && strcmp(a->torchrun, b->torchrun) == 0) ||
           (a->mpi && b->mpi && strcmp(a->mpi, b->mpi) == 0) ||
           (a->slurm_job && b->slurm_job && a->slurm_step && b->slurm_step &&
            strcmp(a->slurm_job, b->slurm_job) == 0 && strcmp(a->slurm_step, b->slurm_step) == 0);
}

static void add_ids(struct strbuf *b, const char *what, const char *x, const char *y)
{
    sb_printf(b, "different %s (", what);
    util_add_text(b, x);
    sb_add(b, " and ");
    util_add_text(b, y);
    sb_add(b, "): not one job");
}

static bool same_parent(const struct ident *a, const struct ident *b)
{
    if (!a->parent_pid.known || !b->parent_pid.known)
        return true;
    if (a->parent_pid.v != b->parent_pid.v)
        return false;
    return !a->parent_start.known || !b->parent_start.known ||
           a->parent_start.v == b->parent_start.v;
}

/* Ranks of one job started without a launcher's id (by hand, by a script) begin within seconds
 * of each other, and a rank that fails while starting (an out-of-memory error loading the model)
 * can end before a slower one has even loaded the library. So between two ranked processes a
 * gap shorter than this is still one job; a second run of the same ranks is told apart by the
 * rank rule, which comes first. */
#define RANK_GAP_NS (30 * 1000000000LL)

static int64_t gap_allowed(const struct ident *a, const struct ident *b)
{
    return a->r->process.rank.known && b->r->process.rank.known ? RANK_GAP_NS : 0;
}

/* A job's processes run at the same time; one that ended before the other began is a run of its
 * own. Unknown times overlap everything. */
static bool overlap(const struct ident *a, const struct ident *b)
{
    int64_t gap = gap_allowed(a, b);
    return !a->begin.known || !b->begin.known ||
           (b->begin.v < a->end.v + gap && a->begin.v < b->end.v + gap);
}

static const char *const WHY_TWICE = "the same process twice (same host and pid)";
static const char *const WHY_RANK = "the same rank twice: two runs of the job?";
/* One job's processes on one host come from one launcher (torchrun's agent, mpirun's daemon, the
 * training process for its workers); separate runs from two shells do not. Applied where a
 * process has no rank: two ranks of one job may be started one by one (a script, a test), and
 * two jobs' ranks are told apart by their ranks, launcher ids and time. */
static const char *const WHY_PARENT =
        "started by different parent processes on one host: separate runs";
static const char *const WHY_TIME = "one ended before the other began: separate runs";

/* Why two reports cannot be of one job, into why (which must be empty), or false. The order of
 * the tests is the order of the reasons' weight: the same process, then what the command line
 * and the launcher say, then the rank, then the parent and the time. */
static bool conflict(const struct ident *a, const struct ident *b, struct strbuf *why)
{
    const struct model_process *p = &a->r->process, *q = &b->r->process;
    if (p->pid == q->pid && a->host == b->host)
        sb_add(why, WHY_TWICE);
    else if (!same_command(p, q))
        sb_add(why, "different command lines: not one job");
    else if (p->world_size.known && q->world_size.known && p->world_size.v != q->world_size.v)
        sb_add(why, "different world sizes: not one job");
    else if (differ(a->torchrun, b->torchrun))
        add_ids(why, "torchrun run ids", a->torchrun, b->torchrun);
    else if (differ(a->slurm_job, b->slurm_job))
        add_ids(why, "Slurm jobs", a->slurm_job, b->slurm_job);
    else if (differ(a->slurm_step, b->slurm_step))
        add_ids(why, "Slurm steps", a->slurm_step, b->slurm_step);
    else if (differ(a->mpi, b->mpi))
        add_ids(why, "MPI jobs", a->mpi, b->mpi);
    else if (p->rank.known && q->rank.known && p->rank.v == q->rank.v)
        sb_add(why, WHY_RANK);
    else if (same_job_id(a, b))
        return false;
    else if (!(p->rank.known && q->rank.known) && a->host == b->host && !same_parent(a, b))
        sb_add(why, WHY_PARENT);
    else if (!overlap(a, b))
        sb_add(why, WHY_TIME);
    else
        return false;
    return true;
}

static int by_host_of(const void *x, const void *y)
{
    const struct ident *a = *(const struct ident *const *)x, *b = *(const struct ident *const *)y;
    return strcmp(a->r->process.host, b->r->process.host);
}

static struct ident *read_idents(const struct model_report *reports,
                                 const struct model_report *const *ptrs, size_t n)
{
    struct ident *ids = util_xcalloc(n ? n : 1, sizeof *ids);
    struct ident **sorted = util_xcalloc(n ? n : 1, sizeof *sorted);
    for (size_t i = 0; i < n; i++) {
        read_ident(ptrs ? ptrs[i] : &reports[i], &ids[i]);
        sorted[i] = &ids[i];
    }
    qsort(sorted, n, sizeof *sorted, by_host_of);
    size_t host = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && by_host_of(&sorted[i - 1], &sorted[i]) != 0)
            host++;
        sorted[i]->host = host;
    }
    free(sorted);
    return ids;
}

/* A run being gathered: its members, and the member that began last and the one that ended
 * first (every member overlaps every other exactly when the last beginning is before the first
 * end). */
struct run {
    size_t *members;
    size_t n, cap;
    size_t last_begin, first_end; /* members' report indices; SIZE_MAX: none timed yet */
};

static void run_add(struct run *g, const struct ident *ids, size_t i)
{
    if (g->n == 0)
        g->last_begin = g->first_end = SIZE_MAX;
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 8;
        g->members = util_xrealloc(g->members, g->cap * sizeof *g->members);
    }
    g->members[g->n++] = i;
    const struct ident *x = &ids[i];
    if (!x->begin.known)
        return;
    if (g->last_begin == SIZE_MAX || x->begin.v > ids[g->last_begin].begin.v)
        g->last_begin = i;
    if (g->first_end == SIZE_MAX || x->end.v < ids[g->first_end].end.v)
        g->first_end = i;
}

/* Whether report i fits run g; if not, the reason in why and the member it conflicts with. The
 * command line, world size and launcher's ids are the same in every member, so the first one
 * stands for all in those; process, rank and parent are compared with each member as integers,
 * and the time with the run's span, so a job of thousands of processes is gathered quickly. */
static bool run_fits(const struct ident *ids, const struct run *g, size_t i, struct strbuf *why,
                     size_t *with)
{
    const struct ident *x = &ids[i];
    *with = g->members[0];
    if (conflict(&ids[g->members[0]], x, why))
        return false;
    bool pinned = same_job_id(&ids[g->members[0]], x);
    const model_int *rank = &x->r->process.rank;
    for (size_t k = 1; k < g->n; k++) {
        const struct ident *m = &ids[g->members[k]];
        const char *reason = NULL;
        if (m->host == x->host && m->r->process.pid == x->r->process.pid)
            reason = WHY_TWICE;
        else if (rank->known && m->r->process.rank.known && m->r->process.rank.v == rank->v)
            reason = WHY_RANK;
        else if (!pinned && !(rank->known && m->r->process.rank.known) && m->host == x->host &&
                 !same_parent(m, x))
            reason = WHY_PARENT;
        if (reason) {
            sb_add(why, reason);
            *with = g->members[k];
            return false;
        }
    }
    if (!pinned && x->begin.known && g->last_begin != SIZE_MAX) {
        size_t other = SIZE_MAX;
        int64_t gap = gap_allowed(&ids[g->members[0]], x);
        if (ids[g->last_begin].begin.v >= x->end.v + gap)
            other = g->last_begin;
        else if (x->begin.v >= ids[g->first_end].end.v + gap)
            other = g->first_end;
        if (other != SIZE_MAX) {
            sb_add(why, WHY_TIME);
            *with = other;
            return false;
        }
    }
    return true;
}

static int by_begin(const void *x, const void *y)
{
    const struct ident *a = *(const struct ident *const *)x, *b = *(const struct ident *const *)y;
    int64_t ta = a->begin.known ? a->begin.v : a->end.v,
            tb = b->begin.known ? b->begin.v : b->end.v;
    if (ta != tb)
        return ta < tb ? -1 : 1;
    return a < b ? -1 : a > b;
}

static size_t split(const struct model_report *reports, const struct model_report *const *ptrs,
                    size_t n, size_t *run_of)
{
    if (n == 0)
        return 0;
    struct ident *ids = read_idents(reports, ptrs, n);
    struct ident **order = util_xcalloc(n, sizeof *order);
    for (size_t i = 0; i < n; i++)
        order[i] = &ids[i];
    /* In the order the processes began: runs are numbered as they started. */
    qsort(order, n, sizeof *order, by_begin);
    struct run *runs = NULL;
    size_t n_runs = 0, with;
    struct strbuf why = { 0 };
    for (size_t o = 0; o < n; o++) {
        size_t i = (size_t)(order[o] - ids);
        size_t g = 0;
        for (; g < n_runs; g++) {
            sb_truncate(&why, 0);
            if (run_fits(ids, &runs[g], i, &why, &with))
                break;
        }
        if (g == n_runs) {
            runs = util_xrealloc(runs, (n_runs + 1) * sizeof *runs);
            runs[n_runs++] = (struct run){ 0 };
        }
        run_add(&runs[g], ids, i);
        run_of[i] = g;
    }
    for (size_t g = 0; g < n_runs; g++)
        free(runs[g].members);
    free(runs);
    sb_free(&why);
    free(order);
    free(ids);
    return n_runs;
}

size_t job_split(const struct model_report *reports, size_t n, size_t *run_of)
{
    return split(reports, NULL, n, run_of);
}

bool job_mixed(const struct model_report *reports, size_t n, struct strbuf *why)
{
    struct ident *ids = read_idents(reports, NULL, n);
    struct run all = { 0 };
    bool mixed = false;
    struct strbuf reason = { 0 };
    for (size_t i = 0; i < n && !mixed; i++) {
        size_t with;
        if (all.n > 0 && !run_fits(ids, &all, i, &reason, &with)) {
            add_who(why, &reports[with]);
            sb_add(why, " and ");
            add_who(why, &reports[i]);
            sb_printf(why, ": %s", sb_str(&reason));
            mixed = true;
        }
        run_add(&all, ids, i);
    }
    sb_free(&reason);
    free(all.members);
    free(ids);
    return mixed;
}

bool job_same_script(const struct model_report *reports, size_t n, struct strbuf *why)
{
    const struct model_process *first = n ? &reports[0].process : NULL;
    for (size_t i = 1; i < n; i++) {
        const struct model_process *p = &reports[i].process;
        if (!cmdline_same_job((const char *const *)first->argv, first->argc,
                              (const char *const *)p->argv, p->argc)) {
            sb_printf(why,
                      "%s and %s are not the same job (their command lines differ beyond the batch "
                      "and image size)",
                      reports[0].path, reports[i].path);
            return false;
        }
    }
    /* A run is one process: the same one twice (a report given twice) is not two runs. */
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < i; k++) {
            const struct model_process *a = &reports[k].process, *b = &reports[i].process;
            if (a->pid == b->pid && strcmp(a->host, b->host) == 0 &&
                a->start_unix_ns.known == b->start_unix_ns.known &&
                (!a->start_unix_ns.known || a->start_unix_ns.v == b->start_unix_ns.v)) {
                add_who(why, &reports[k]);
                sb_add(why, " and ");
                add_who(why, &reports[i]);
                sb_printf(why, ": %s", WHY_TWICE);
                return false;
            }
        }
    return true;
}

enum job_together job_together(const struct model_report *reports, size_t n, struct strbuf *why)
{
    size_t ranked = 0;
    for (size_t i = 0; i < n; i++)
        ranked += reports[i].process.rank.known;
    if (n < 2)
        return JOB_RANKS;
    if (ranked >= 2)
        return job_mixed(reports, n, why) ? JOB_NEITHER : JOB_RANKS;
    return job_same_script(reports, n, why) ? JOB_RUNS : JOB_NEITHER;
}

int64_t job_world_size(const struct job *j)
{
    return j->world_size.known && j->world_size.v > 0 ? j->world_size.v : (int64_t)j->n;
}

bool job_rank_batch(const struct job *j, int64_t *per_rank, int64_t *flag_value,
                    bool *flag_is_total)
{
    if (j->n == 0)
        return false;
    const struct model_process *p = &j->procs[0].r->process;
    struct cmdline_flag f;
    cmdline_find(p->argv, p->argc, CMDLINE_BATCH, &f);
    if (!f.found)
        return false;
    *flag_value = f.value;
    /* YOLOv5/v7/v9 (batch_size // WORLD_SIZE) and Ultralytics split the batch over the GPUs;
     * other scripts, and Hugging Face's per_device flag, give each rank its own (cmdline.c). */
    *flag_is_total = cmdline_batch_scope(p->argv, p->argc) == CMDLINE_BATCH_TOTAL;
    int64_t world = job_world_size(j);
    *per_rank = *flag_is_total ? f.value / (world > 0 ? world : 1) : f.value;
    return true;
}

/* ---- reading job files ---- */

static void append(struct model_report **reports, size_t *n, const struct model_report *r)
{
    *reports = util_xrealloc(*reports, (*n + 1) * sizeof **reports);
    (*reports)[(*n)++] = *r;
}

static bool load_job(const char *path, cJSON *root, struct model_report **reports,
                     size_t *n_reports, struct strbuf *err)
{
    const cJSON *procs = cJSON_GetObjectItemCaseSensitive(root, "processes");
    size_t first = *n_reports, i = 0;
    if (!cJSON_IsArray(procs)) {
        sb_add(err, "processes: expected an array");
        goto fail;
    }
    if (cJSON_GetArraySize(procs) == 0) {
        sb_add(err, "processes: empty: a job has at least one process");
        goto fail;
    }
    for (cJSON *e = procs->child; e; e = e->next, i++) {
        cJSON *rep =
                cJSON_IsObject(e) ? cJSON_DetachItemFromObjectCaseSensitive(e, "report") : NULL;
        if (!cJSON_IsObject(rep)) {
            cJSON_Delete(rep);
            sb_printf(err, "processes[%zu]: expected an object with the process's report", i);
            goto fail;
        }
        struct model_report r;
        struct strbuf inner = { 0 };
        char *where = util_xmalloc(strlen(path) + 48);
        sprintf(where, "%s, processes[%zu]", path, i);
        if (!model_load_tree(where, rep, &r, &inner)) {
            /* "devices[0].live_bytes: ..." continues the path; a bare reason follows a colon. */
            const char *m = sb_str(&inner);
            size_t colon = strcspn(m, ":"), space = strcspn(m, " ");
            sb_printf(err, "processes[%zu].report%s%s", i, colon < space ? "." : ": ", m);
            sb_free(&inner);
            free(where);
            goto fail;
        }
        sb_free(&inner);
        r.path_owned = where;
        append(reports, n_reports, &r);
        /* The entry's own names must be its report's: a hand-edited file is caught here. */
        int64_t pid;
        const cJSON *host = cJSON_GetObjectItemCaseSensitive(e, "host");
        const cJSON *pidj = cJSON_GetObjectItemCaseSensitive(e, "pid");
        if (!cJSON_IsString(host) || strcmp(host->valuestring, r.process.host) != 0 ||
            json_int(pidj, &pid) != JSON_INT_OK || pid != r.process.pid) {
            sb_printf(err, "processes[%zu]: host and pid are not those of its report", i);
            goto fail;
        }
    }
    cJSON_Delete(root);
    return true;
fail:
    while (*n_reports > first)
        model_free(&(*reports)[--*n_reports]);
    cJSON_Delete(root);
    return false;
}

bool job_load_file(const char *path, struct model_report **reports, size_t *n_reports,
                   struct strbuf *err)
{
    cJSON *root = json_load_file(path, err);
    if (!root)
        return false;
    const cJSON *schema =
            cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "schema") : NULL;
    if (cJSON_IsString(schema) && strcmp(schema->valuestring, JOB_SCHEMA) == 0)
        return load_job(path, root, reports, n_reports, err);
    struct model_report r;
    if (!model_load_tree(path, root, &r, err))
        return false;
    append(reports, n_reports, &r);
    return true;
}

/* One process's reports: the same host and pid, and the same start where both know it. */
static bool same_process(const struct model_report *a, const struct model_report *b)
{
    const struct model_process *p = &a->process, *q = &b->process;
    if (p->pid != q->pid || strcmp(p->host, q->host) != 0)
        return false;
    if (p->loaded_unix_ns.known && q->loaded_unix_ns.known)
        return p->loaded_unix_ns.v == q->loaded_unix_ns.v;
    return !p->start_unix_ns.known || !q->start_unix_ns.known ||
           p->start_unix_ns.v == q->start_unix_ns.v;
}

static const char *path_of(const struct model_report *r)
{
    return r->path ? r->path : r->path_owned ? r->path_owned : "a report";
}

size_t job_keep_latest(const char *prefix, struct model_report *reports, size_t n)
{
    bool *drop = util_xcalloc(n ? n : 1, sizeof *drop);
    for (size_t i = 0; i < n; i++) {
        if (drop[i])
            continue;
        size_t latest = i;
        for (size_t k = i + 1; k < n; k++)
            if (!drop[k] && same_process(&reports[i], &reports[k]) &&
                reports[k].time_unix_ns > reports[latest].time_unix_ns)
                latest = k;
        struct strbuf left = { 0 };
        for (size_t k = i; k < n; k++) {
            if (k == latest || drop[k] || !same_process(&reports[i], &reports[k]))
                continue;
            drop[k] = true;
            sb_printf(&left, "%s%s", left.len ? ", " : "", path_of(&reports[k]));
        }
        if (left.len)
            util_err("%s%s%s: earlier reports of the same process (pid %" PRId64
                     " on %s) left out, the latest read; give one alone to see it",
                     prefix ? prefix : "", prefix ? ": " : "", sb_str(&left),
                     reports[latest].process.pid, reports[latest].process.host);
        sb_free(&left);
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (drop[i])
            model_free(&reports[i]);
        else
            reports[kept++] = reports[i];
    }
    free(drop);
    return kept;
}

bool job_load_files(const char *prefix, char *const *paths, size_t n, struct model_report **reports,
                    size_t *n_reports)
{
    for (size_t i = 0; i < n; i++) {
        struct strbuf err = { 0 };
        bool ok = job_load_file(paths[i], reports, n_reports, &err);
        if (!ok && prefix)
            util_err("%s: %s: %s", prefix, paths[i], sb_str(&err));
        else if (!ok)
            util_err("%s: %s", paths[i], sb_str(&err));
        sb_free(&err);
        if (!ok)
            return false;
    }
    *n_reports = job_keep_latest(prefix, *reports, *n_reports);
    return true;
}

void job_free_reports(struct model_report *reports, size_t n)
{
    for (size_t i = 0; i < n; i++)
        model_free(&reports[i]);
    free(reports);
}
