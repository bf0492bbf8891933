/* jobview.c: `vramwatch report` on several reports (the ranks of one job): the job's header,
 * its processes, the physical GPUs, what differs between the processes, then each post-mortem. */
#include "jobview.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "json.h"

struct style {
    const char *bold, *red, *reset;
};

static const struct style plain = { "", "", "" };
static const struct style ansi = { "\033[1m", "\033[1;31m", "\033[0m" };

static void add_device_name(struct strbuf *b, model_int ordinal)
{
    if (ordinal.known)
        sb_printf(b, "device %" PRId64, ordinal.v);
    else
        sb_add(b, "an unknown device");
}

static void put_line(FILE *out, const char *indent, struct strbuf *b)
{
    fprintf(out, "%s%s\n", indent, sb_str(b));
    sb_truncate(b, 0);
}

static void add_process_name(struct strbuf *b, const struct model_report *r)
{
    if (r->process.rank.known)
        sb_printf(b, "rank %" PRId64 ", ", r->process.rank.v);
    sb_printf(b, "pid %" PRId64 " on ", r->process.pid);
    util_add_text(b, r->process.host);
}

/* "rank 3" or, without a rank, "pid 7004 on node-b". */
static void add_short_name(struct strbuf *b, const struct model_report *r)
{
    if (r->process.rank.known) {
        sb_printf(b, "rank %" PRId64, r->process.rank.v);
    } else {
        sb_printf(b, "pid %" PRId64 " on ", r->process.pid);
        util_add_text(b, r->process.host);
    }
}

static const char *job_when(const struct job *j, int64_t t, char buf[UTIL_TIME_LEN])
{
    return j->start_unix_ns.known ? util_fmt_reltime(t, j->start_unix_ns.v, buf)
                                  : util_fmt_abstime(t, buf);
}

static void print_job_header(FILE *out, const struct job *j, const struct style *st)
{
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN], t[UTIL_TIME_LEN];
    sb_printf(&b, "vramwatch job: %zu processes on %zu host%s", j->n, j->hosts,
              j->hosts == 1 ? "" : "s");
    if (j->world_size.known)
        sb_printf(&b, ", world size %" PRId64, j->world_size.v);
    sb_printf(&b, ", %zu GPU%s", j->n_gpus, j->n_gpus == 1 ? "" : "s");
    fprintf(out, "%s%s%s\n", st->bold, sb_str(&b), st->reset);
    if (j->start_unix_ns.known)
        fputs("  times count from the start of the first process\n", out);
    const struct model_failure *f = j->first_failure;
    if (f) {
        const struct job_process *p = &j->procs[j->first_failure_proc];
        sb_truncate(&b, 0);
        add_process_name(&b, p->r);
        sb_add(&b, ": ");
        util_add_text(&b, f->api);
        sb_printf(&b, " of %s on ", util_fmt_size(f->size, s1));
        add_device_name(&b, f->device);
        for (size_t d = 0; f->device.known && d < p->r->n_devices; d++)
            if (p->r->devices[d].ordinal.known && p->r->devices[d].ordinal.v == f->device.v &&
                p->gpus[d] != SIZE_MAX)
                sb_printf(&b, " (GPU %zu)", p->gpus[d]);
        sb_printf(&b, " at %s", job_when(j, f->time_unix_ns, t));
        fprintf(out, "  %sfirst out of memory:%s %s\n", st->red, st->reset, sb_str(&b));
        if (j->n_failed > 1)
            fprintf(out,
                    "  %zu processes ran out of memory; the others' failures may follow from the first\n",
                    j->n_failed);
    } else {
        fputs("  no process ran out of memory\n", out);
    }
    sb_free(&b);
}

static void print_job_ranks(FILE *out, const struct job *j)
{
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], t[UTIL_TIME_LEN];
    size_t host_w = 4;
    for (size_t i = 0; i < j->n; i++) {
        size_t len = strlen(j->procs[i].r->process.host);
        if (len > host_w)
            host_w = len < 32 ? len : 32;
    }
    fputs("\nProcesses (peak: the most each held at once, over its devices)\n", out);
    fprintf(out, "  %5s %8s  %-*s  %-6s %12s %12s\n", "rank", "pid", (int)host_w, "host", "GPU",
            "live", "peak");
    for (size_t i = 0; i < j->n; i++) {
        const struct job_process *p = &j->procs[i];
        const struct model_process *mp = &p->r->process;
        char rank[24] = "-";
        if (mp->rank.known)
            snprintf(rank, sizeof rank, "%" PRId64, mp->rank.v);
        sb_truncate(&b, 0);
        util_add_text(&b, mp->host);
        if (b.len > host_w)
            sb_truncate(&b, host_w);
        struct strbuf g = { 0 };
        for (size_t d = 0; d < p->r->n_devices; d++) {
            if (d)
                sb_addc(&g, ',');
            if (p->gpus[d] == SIZE_MAX)
                sb_addc(&g, '?');
            else
                sb_printf(&g, "%zu", p->gpus[d]);
        }
        if (!g.len)
            sb_addc(&g, '-');
        struct strbuf note = { 0 };
        for (size_t k = 0; k < j->n_findings; k++)
            if (j->findings[k].kind != JOB_SHARED_GPU && j->findings[k].proc == i)
                sb_printf(&note, "  %+" PRId64 "%% over the median", j->findings[k].excess_pct);
        const struct model_failure *f = model_real_oom(p->r);
        if (f)
            sb_printf(&note, "  out of memory at %s%s", job_when(j, f->time_unix_ns, t),
                      j->first_failure == f ? " (first)" : "");
        fprintf(out, "  %5s %8" PRId64 "  %-*s  %-6s %12s %12s%s\n", rank, mp->pid, (int)host_w,
                sb_str(&b), sb_str(&g), util_fmt_size(p->live_bytes, s1),
                util_fmt_size(p->peak_bytes, s2), sb_str(&note));
        sb_free(&g);
        sb_free(&note);
    }
    fprintf(out, "  median peak %s\n", util_fmt_size(j->median_peak_bytes, s1));
    sb_free(&b);
}

static void add_rank_list(struct strbuf *b, const struct job *j, const size_t *procs, size_t n)
{
    bool ranked = true;
    for (size_t k = 0; k < n; k++)
        ranked = ranked && j->procs[procs[k]].r->process.rank.known;
    sb_add(b, ranked ? (n == 1 ? "rank " : "ranks ") : (n == 1 ? "process " : "processes "));
    for (size_t k = 0; k < n; k++) {
        const struct model_report *r = j->procs[procs[k]].r;
        if (k)
            sb_add(b, k + 1 == n ? " and " : ", ");
        if (ranked)
            sb_printf(b, "%" PRId64, r->process.rank.v);
        else
            sb_printf(b, "pid %" PRId64, r->process.pid);
    }
}

static void print_job_gpus(FILE *out, const struct job *j)
{
    if (!j->n_gpus)
        return;
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], s3[UTIL_SIZE_LEN];
    fputs("\nGPUs (physical: by UUID or PCI bus id, whatever CUDA_VISIBLE_DEVICES made of the ordinals)\n",
          out);
    for (size_t g = 0; g < j->n_gpus; g++) {
        const struct job_gpu *gpu = &j->gpus[g];
        sb_truncate(&b, 0);
        sb_printf(&b, "GPU %zu: ", g);
        /* A bare number is an ordinal or a CUDA_VISIBLE_DEVICES entry, not a bus id or UUID. */
        if (!strchr(gpu->id, ':') && !strchr(gpu->id, '-'))
            sb_add(&b, "device ");
        util_add_text(&b, gpu->id);
        sb_add(&b, " on ");
        util_add_text(&b, gpu->host);
        if (gpu->name) {
            sb_add(&b, ", ");
            util_add_text(&b, gpu->name);
        }
        if (gpu->total_bytes.known)
            sb_printf(&b, ", %s", util_fmt_size(gpu->total_bytes.v, s1));
        put_line(out, "  ", &b);
        sb_truncate(&b, 0);
        add_rank_list(&b, j, gpu->procs, gpu->n_procs);
        sb_printf(&b, ": live %s, peak %s", util_fmt_size(gpu->live_bytes, s2),
                  util_fmt_size(gpu->peak_bytes, s3));
        if (gpu->n_procs > 1)
            sb_add(&b, " (their peaks added: at most that at once)");
        put_line(out, "    ", &b);
    }
    sb_free(&b);
}

static void print_job_findings(FILE *out, const struct job *j, const struct style *st)
{
    if (!j->n_findings)
        return;
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], s3[UTIL_SIZE_LEN];
    fprintf(out, "\n%sBetween the processes%s\n", st->bold, st->reset);
    for (size_t k = 0; k < j->n_findings; k++) {
        const struct job_finding *x = &j->findings[k];
        sb_truncate(&b, 0);
        if (x->kind == JOB_SHARED_GPU) {
            const struct job_gpu *gpu = &j->gpus[x->gpu];
            add_rank_list(&b, j, gpu->procs, gpu->n_procs);
            sb_printf(&b, " share GPU %zu: their peaks add up to %s", x->gpu,
                      util_fmt_size(x->bytes, s1));
            if (x->median_bytes >= 0) {
                sb_printf(&b, " of its %s", util_fmt_size(x->median_bytes, s2));
                if (x->bytes > x->median_bytes)
                    sb_add(&b, ": more than it holds if they peak together");
            }
            sb_add(&b, "; each counts the others as used memory");
        } else {
            add_short_name(&b, j->procs[x->proc].r);
            sb_printf(&b, " peaked at %s, %" PRId64 "%% more than the median process (%s, +%s)",
                      util_fmt_size(x->bytes, s1), x->excess_pct,
                      util_fmt_size(x->median_bytes, s2),
                      util_fmt_size(x->bytes - x->median_bytes, s3));
            if (x->kind == JOB_RANK0_EXTRA)
                sb_add(&b,
                       ": buffers only rank 0 keeps (evaluation, EMA weights, logging, gathered "
                       "outputs, checkpoint saving); its post-mortem below names the call sites");
            else
                sb_add(&b,
                       ": an uneven share of the data (longer sequences, larger images) or state "
                       "kept on this rank; its post-mortem below names the call sites");
        }
        put_line(out, "  ", &b);
    }
    sb_free(&b);
}

void jobview_print(FILE *out, struct model_report *reports, size_t n, const struct report_opts *o)
{
    const struct style *st = o->color ? &ansi : &plain;
    struct job j;
    job_build(&j, reports, n);
    print_job_header(out, &j, st);
    print_job_ranks(out, &j);
    print_job_gpus(out, &j);
    print_job_findings(out, &j, st);
    struct strbuf b = { 0 };
    for (size_t i = 0; i < n; i++) {
        sb_truncate(&b, 0);
        add_process_name(&b, j.procs[i].r);
        fprintf(out, "\n%s=== process %zu of %zu: %s ===%s\n", st->bold, i + 1, n, sb_str(&b),
                st->reset);
        report_postmortem(out, j.procs[i].r, o);
    }
    sb_free(&b);
    job_free(&j);
}

void jobview_print_json(FILE *out, struct model_report *reports, size_t n)
{
    struct job j;
    job_build(&j, reports, n);
    cJSON *doc = job_to_json(&j);
    json_print(out, doc);
    cJSON_Delete(doc);
    job_free(&j);
}
