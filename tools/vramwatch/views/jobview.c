/* jobview.c: `vramwatch report` on several reports. They are first told apart into separate
 * runs (job_split); each run of several processes gets the job view: its header, its processes
 * (a row each for a few, ranks that behave alike on one line for many), the physical GPUs, what
 * differs between the processes, then the post-mortem of the first to fail (every process's with
 * --full). Sized to stay short at thousands of ranks. */
#include "jobview.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "colour.h"
#include "job.h"
#include "json.h"

/* Up to this many processes (GPUs), a row each; beyond, alike ones share a line. */
#define TABLE_MAX 16
/* Outliers named one by one in the grouped view; findings of each kind listed in full. */
#define NAMED_MAX 8
#define FINDINGS_MAX 5
/* Rank ranges and names listed in one line before "and N more". */
#define LIST_MAX 8

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

static void print_job_header(FILE *out, const struct job *j, const struct colour_style *st)
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

/* "rank 3", "ranks 0 and 2", "ranks 0-511, 520-1022 and 1023": runs of three or more
 * consecutive ranks as a range, at most LIST_MAX items, then "and N more". Processes without a
 * rank by pid. procs are in rank order (job_build's). */
static void add_rank_list(struct strbuf *b, const struct job *j, const size_t *procs, size_t n)
{
    bool ranked = true;
    for (size_t k = 0; k < n; k++)
        ranked = ranked && j->procs[procs[k]].r->process.rank.known;
    sb_add(b, ranked ? (n == 1 ? "rank " : "ranks ") : (n == 1 ? "process " : "processes "));
    /* Items first, so that the last can be joined with "and". */
    size_t items = 0, k = 0, shown_procs = 0;
    struct strbuf item[LIST_MAX];
    memset(item, 0, sizeof item);
    while (k < n && items < LIST_MAX) {
        const struct model_report *r = j->procs[procs[k]].r;
        size_t run = 1;
        if (ranked)
            while (k + run < n &&
                   j->procs[procs[k + run]].r->process.rank.v == r->process.rank.v + (int64_t)run)
                run++;
        if (ranked && run >= 3) {
            sb_printf(&item[items], "%" PRId64 "-%" PRId64, r->process.rank.v,
                      r->process.rank.v + (int64_t)run - 1);
        } else {
            run = 1;
            if (ranked)
                sb_printf(&item[items], "%" PRId64, r->process.rank.v);
            else
                sb_printf(&item[items], "pid %" PRId64, r->process.pid);
        }
        items++;
        k += run;
        shown_procs += run;
    }
    size_t more = n - shown_procs;
    for (size_t i = 0; i < items; i++) {
        if (i)
            sb_add(b, i + 1 == items && !more ? " and " : ", ");
        sb_add(b, sb_str(&item[i]));
        sb_free(&item[i]);
    }
    if (more)
        sb_printf(b, " and %zu more", more);
}

/* "0-511,520-1023": the compact form for a group's line, cut after about max characters. */
static void add_rank_ranges(struct strbuf *b, const struct job *j, const size_t *procs, size_t n,
                            size_t max)
{
    size_t start = b->len, k = 0;
    while (k < n) {
        const struct model_report *r = j->procs[procs[k]].r;
        if (!r->process.rank.known)
            break;
        size_t run = 1;
        while (k + run < n && j->procs[procs[k + run]].r->process.rank.known &&
               j->procs[procs[k + run]].r->process.rank.v == r->process.rank.v + (int64_t)run)
            run++;
        if (b->len - start > max) {
            sb_printf(b, ",... (%zu more)", n - k);
            return;
        }
        if (k)
            sb_addc(b, ',');
        if (run >= 2)
            sb_printf(b, "%" PRId64 "-%" PRId64, r->process.rank.v,
                      r->process.rank.v + (int64_t)run - 1);
        else
            sb_printf(b, "%" PRId64, r->process.rank.v);
        k += run;
    }
    if (k < n) /* processes without a rank come last in job order */
        sb_printf(b, "%s%zu without a rank", k ? " and " : "", n - k);
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "on node-a", "on 3 hosts (a, b, c)", "on 128 hosts (node-000, node-001, ..., node-127)". */
static void add_hosts(struct strbuf *b, const struct job *j, const size_t *procs, size_t n)
{
    const char **names = util_xcalloc(n ? n : 1, sizeof *names);
    for (size_t k = 0; k < n; k++)
        names[k] = j->procs[procs[k]].r->process.host;
    qsort(names, n, sizeof *names, by_str);
    size_t u = 0;
    for (size_t k = 0; k < n; k++)
        if (u == 0 || strcmp(names[u - 1], names[k]) != 0)
            names[u++] = names[k];
    if (u == 1) {
        sb_add(b, "on ");
        util_add_text(b, names[0]);
    } else {
        sb_printf(b, "on %zu hosts (", u);
        for (size_t k = 0; k < u; k++) {
            if (u > 3 && k == 2) {
                sb_add(b, ", ..., ");
                k = u - 1;
            } else if (k) {
                sb_add(b, ", ");
            }
            util_add_text(b, names[k]);
        }
        sb_addc(b, ')');
    }
    free(names);
}

/* Many GPUs: one line per kind of card (name and capacity), and how many processes each has. */
static void print_gpu_summary(FILE *out, const struct job *j)
{
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN];
    bool *done = util_xcalloc(j->n_gpus, sizeof *done);
    for (size_t g = 0; g < j->n_gpus; g++) {
        if (done[g])
            continue;
        const struct job_gpu *a = &j->gpus[g];
        size_t count = 0, alone = 0, shared = 0;
        const char **hosts = util_xcalloc(j->n_gpus, sizeof *hosts);
        for (size_t k = g; k < j->n_gpus; k++) {
            const struct job_gpu *x = &j->gpus[k];
            if (done[k] || (a->name == NULL) != (x->name == NULL) ||
                (a->name && strcmp(a->name, x->name) != 0) ||
                a->total_bytes.known != x->total_bytes.known ||
                (a->total_bytes.known && a->total_bytes.v != x->total_bytes.v))
                continue;
            done[k] = true;
            hosts[count++] = x->host;
            if (x->n_procs > 1)
                shared++;
            else
                alone++;
        }
        qsort(hosts, count, sizeof *hosts, by_str);
        size_t n_hosts = 0;
        for (size_t k = 0; k < count; k++)
            n_hosts += k == 0 || strcmp(hosts[k], hosts[k - 1]) != 0;
        free(hosts);
        sb_printf(&b, "%zu x ", count);
        util_add_text(&b, a->name ? a->name : "an unknown GPU");
        if (a->total_bytes.known)
            sb_printf(&b, ", %s", util_fmt_size(a->total_bytes.v, s1));
        sb_printf(&b, ", on %zu host%s: %zu with one process", n_hosts, n_hosts == 1 ? "" : "s",
                  alone);
        if (shared)
            sb_printf(&b, ", %zu shared (below)", shared);
        put_line(out, "  ", &b);
    }
    free(done);
    sb_free(&b);
}

static void print_job_gpus(FILE *out, const struct job *j)
{
    if (!j->n_gpus)
        return;
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], s3[UTIL_SIZE_LEN];
    fputs("\nGPUs (physical: by UUID or PCI bus id, whatever CUDA_VISIBLE_DEVICES made of the ordinals)\n",
          out);
    if (j->n_gpus > TABLE_MAX) {
        print_gpu_summary(out, j);
        sb_free(&b);
        return;
    }
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

static void print_job_findings(FILE *out, const struct job *j, const struct colour_style *st,
                               bool shown_all, size_t shown)
{
    if (!j->n_findings)
        return;
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], s3[UTIL_SIZE_LEN];
    /* Findings beyond FINDINGS_MAX of a kind are counted and their processes listed in one line. */
    size_t *over = util_xcalloc(j->n_findings, sizeof *over), n_over = 0, n_shared = 0,
           shared_left = 0, over_left = 0;
    fprintf(out, "\n%sBetween the processes%s\n", st->bold, st->reset);
    for (size_t k = 0; k < j->n_findings; k++) {
        const struct job_finding *x = &j->findings[k];
        sb_truncate(&b, 0);
        if (x->kind == JOB_SHARED_GPU) {
            if (n_shared++ >= FINDINGS_MAX) {
                shared_left++;
                continue;
            }
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
            if (n_over >= FINDINGS_MAX) {
                over[n_over++] = x->proc;
                over_left++;
                continue;
            }
            over[n_over++] = x->proc;
            add_short_name(&b, j->procs[x->proc].r);
            sb_printf(&b, " peaked at %s, %" PRId64 "%% more than the median process (%s, +%s)",
                      util_fmt_size(x->bytes, s1), x->excess_pct,
                      util_fmt_size(x->median_bytes, s2),
                      util_fmt_size(x->bytes - x->median_bytes, s3));
            const char *where = shown_all || x->proc == shown
                                        ? "its post-mortem below names the call sites"
                                        : "its post-mortem (--full) names the call sites";
            if (x->kind == JOB_RANK0_EXTRA)
                sb_printf(&b,
                          ": buffers only rank 0 keeps (evaluation, EMA weights, logging, gathered "
                          "outputs, checkpoint saving); %s",
                          where);
            else
                sb_printf(&b,
                          ": an uneven share of the data (longer sequences, larger images) or "
                          "state kept on this rank; %s",
                          where);
        }
        put_line(out, "  ", &b);
    }
    if (over_left) {
        /* In rank order, as the lists are. */
        size_t *rest = over + FINDINGS_MAX;
        for (size_t a = 1; a < over_left; a++)
            for (size_t c = a; c > 0 && rest[c - 1] > rest[c]; c--) {
                size_t t = rest[c];
                rest[c] = rest[c - 1];
                rest[c - 1] = t;
            }
        sb_printf(&b, "and %zu more peaked at least %d%% above the median: ", over_left,
                  JOB_IMBALANCE_PCT);
        add_rank_list(&b, j, rest, over_left);
        put_line(out, "  ", &b);
    }
    if (shared_left) {
        sb_printf(
                &b,
                "and %zu more GPUs shared by several processes (vramwatch report --json lists them)",
                shared_left);
        put_line(out, "  ", &b);
    }
    free(over);
    sb_free(&b);
}

/* ---- many processes: alike ranks on one line ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "9.00 GiB / 9.25 GiB / 9.50 GiB": min, median and max of the processes' live or peak bytes;
 * one figure when they are all the same. */
static void add_spread(struct strbuf *b, const struct job *j, const size_t *procs, size_t n,
                       bool peak)
{
    int64_t *v = util_xcalloc(n ? n : 1, sizeof *v);
    for (size_t k = 0; k < n; k++)
        v[k] = peak ? j->procs[procs[k]].peak_bytes : j->procs[procs[k]].live_bytes;
    qsort(v, n, sizeof *v, cmp_i64);
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], s3[UTIL_SIZE_LEN];
    int64_t med = n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
    if (v[0] == v[n - 1])
        sb_add(b, util_fmt_size(v[0], s1));
    else
        sb_printf(b, "%s / %s / %s", util_fmt_size(v[0], s1), util_fmt_size(med, s2),
                  util_fmt_size(v[n - 1], s3));
    free(v);
}

/* A process far from the median: +1 above (a finding), -1 below (by as much), 0 neither. */
static int outlier(const struct job *j, size_t i)
{
    for (size_t k = 0; k < j->n_findings; k++)
        if (j->findings[k].kind != JOB_SHARED_GPU && j->findings[k].proc == i)
            return 1;
    int64_t m = j->median_peak_bytes, under = m - j->procs[i].peak_bytes;
    if (m > 0 && under >= JOB_IMBALANCE_MIN_BYTES &&
        (double)under * 100.0 / (double)m >= JOB_IMBALANCE_PCT)
        return -1;
    return 0;
}

static void print_named(FILE *out, const struct job *j, size_t i, int kind, struct strbuf *b)
{
    char s1[UTIL_SIZE_LEN], s2[UTIL_SIZE_LEN], t[UTIL_TIME_LEN];
    const struct job_process *p = &j->procs[i];
    add_process_name(b, p->r);
    sb_printf(b, ": live %s, peak %s", util_fmt_size(p->live_bytes, s1),
              util_fmt_size(p->peak_bytes, s2));
    for (size_t k = 0; k < j->n_findings; k++)
        if (j->findings[k].kind != JOB_SHARED_GPU && j->findings[k].proc == i)
            sb_printf(b, ", %+" PRId64 "%% over the median", j->findings[k].excess_pct);
    if (kind < 0)
        sb_add(b, ", far below the median");
    const struct model_failure *f = model_real_oom(p->r);
    if (f)
        sb_printf(b, ", out of memory at %s%s", job_when(j, f->time_unix_ns, t),
                  j->first_failure == f ? " (the first)" : "");
    put_line(out, "  ", b);
}

static void print_group(FILE *out, const struct job *j, const size_t *procs, size_t n,
                        const char *what, struct strbuf *b)
{
    if (n == 0)
        return;
    bool ranked = j->procs[procs[0]].r->process.rank.known;
    sb_add(b, ranked ? (n == 1 ? "rank " : "ranks ") : "");
    add_rank_ranges(b, j, procs, n, 48);
    sb_printf(b, ": %zu process%s ", n, n == 1 ? "" : "es");
    add_hosts(b, j, procs, n);
    sb_printf(b, ", %s", what);
    put_line(out, "  ", b);
    sb_add(b, "live ");
    add_spread(b, j, procs, n, false);
    sb_add(b, ", peak ");
    add_spread(b, j, procs, n, true);
    sb_add(b, " (min / median / max)");
    put_line(out, "    ", b);
}

static void print_job_groups(FILE *out, const struct job *j)
{
    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN];
    size_t *fit = util_xcalloc(j->n, sizeof *fit), *oom = util_xcalloc(j->n, sizeof *oom);
    size_t *odd = util_xcalloc(j->n, sizeof *odd);
    size_t n_fit = 0, n_oom = 0, n_odd = 0, named = 0;
    fprintf(out,
            "\nProcesses: %zu (alike ones on one line; peak: the most each held at once, over its "
            "devices)\n",
            j->n);
    /* Named one by one: the first failure, then the outliers, largest excess first (the findings'
     * order), then those far below, up to NAMED_MAX; the rest go to their group. */
    bool *is_named = util_xcalloc(j->n, sizeof *is_named);
    if (j->first_failure) {
        is_named[j->first_failure_proc] = true;
        print_named(out, j, j->first_failure_proc, outlier(j, j->first_failure_proc), &b);
        named++;
    }
    for (size_t k = 0; k < j->n_findings && named < NAMED_MAX; k++) {
        size_t i = j->findings[k].proc;
        if (j->findings[k].kind == JOB_SHARED_GPU || is_named[i])
            continue;
        is_named[i] = true;
        print_named(out, j, i, 1, &b);
        named++;
    }
    for (size_t i = 0; i < j->n && named < NAMED_MAX; i++) {
        if (is_named[i] || outlier(j, i) >= 0)
            continue;
        is_named[i] = true;
        print_named(out, j, i, -1, &b);
        named++;
    }
    for (size_t i = 0; i < j->n; i++) {
        if (is_named[i])
            continue;
        if (outlier(j, i))
            odd[n_odd++] = i;
        else if (model_real_oom(j->procs[i].r))
            oom[n_oom++] = i;
        else
            fit[n_fit++] = i;
    }
    print_group(out, j, fit, n_fit, "no out of memory", &b);
    print_group(out, j, oom, n_oom, "out of memory after the first", &b);
    print_group(out, j, odd, n_odd, "other processes far from the median", &b);
    fprintf(out, "  median peak %s\n", util_fmt_size(j->median_peak_bytes, s1));
    free(is_named);
    free(fit);
    free(oom);
    free(odd);
    sb_free(&b);
}

/* ---- one run ---- */

/* The process whose post-mortem is shown without --full: the first to run out of memory, else the
 * one that peaked highest. */
static size_t deciding_process(const struct job *j)
{
    if (j->first_failure)
        return j->first_failure_proc;
    size_t pick = 0;
    for (size_t i = 1; i < j->n; i++)
        if (j->procs[i].peak_bytes > j->procs[pick].peak_bytes)
            pick = i;
    return pick;
}

static void print_one_job(FILE *out, const struct model_report *reports, size_t n,
                          const struct report_opts *o)
{
    const struct colour_style *st = colour_style(o->color);
    struct job j;
    job_build(&j, reports, n);
    print_job_header(out, &j, st);
    struct strbuf b = { 0 };
    job_add_launcher(&b, j.procs[0].r, j.hosts == 1);
    if (b.len) {
        fprintf(out, "  launcher: %s\n", sb_str(&b));
        sb_truncate(&b, 0);
    }
    if (j.n > TABLE_MAX)
        print_job_groups(out, &j);
    else
        print_job_ranks(out, &j);
    print_job_gpus(out, &j);
    size_t pick = deciding_process(&j);
    print_job_findings(out, &j, st, o->full, pick);
    for (size_t i = 0; i < j.n; i++) {
        if (!o->full && i != pick)
            continue;
        sb_truncate(&b, 0);
        add_process_name(&b, j.procs[i].r);
        if (o->full)
            fprintf(out, "\n%s=== process %zu of %zu: %s ===%s\n", st->bold, i + 1, j.n, sb_str(&b),
                    st->reset);
        else
            fprintf(out, "\n%s=== %s: %s ===%s\n", st->bold,
                    j.first_failure ? "the first to run out of memory" : "the highest peak",
                    sb_str(&b), st->reset);
        postmortem_print(out, j.procs[i].r, o);
    }
    if (!o->full && j.n == 2)
        fputs("\nThe other process's post-mortem: vramwatch report --full\n", out);
    else if (!o->full && j.n > 2)
        fprintf(out, "\nThe other %zu processes' post-mortems: vramwatch report --full\n", j.n - 1);
    sb_free(&b);
    job_free(&j);
}

/* The command line, its arguments up to about max characters, then "...". Cut between
 * arguments, never inside one (nor inside the escapes util_add_text writes). */
static void add_command(struct strbuf *b, const struct model_report *r, size_t max)
{
    size_t start = b->len;
    for (size_t a = 0; a < r->process.argc; a++) {
        size_t before = b->len;
        if (a)
            sb_addc(b, ' ');
        util_add_text(b, r->process.argv[a]);
        if (a && b->len - start > max) {
            sb_truncate(b, before);
            sb_add(b, " ...");
            return;
        }
    }
}

struct run_view {
    struct model_report *reports; /* shallow copies: borrowed, never freed one by one */
    size_t n;
};

void jobview_print(FILE *out, struct model_report *reports, size_t n, const struct report_opts *o)
{
    size_t *run_of = util_xcalloc(n ? n : 1, sizeof *run_of);
    size_t n_runs = job_split(reports, n, run_of);
    if (n_runs <= 1) {
        free(run_of);
        if (n == 1)
            postmortem_print(out, &reports[0], o);
        else if (n > 1)
            print_one_job(out, reports, n, o);
        return;
    }
    const struct colour_style *st = colour_style(o->color);
    struct run_view *runs = util_xcalloc(n_runs, sizeof *runs);
    for (size_t i = 0; i < n; i++)
        runs[run_of[i]].n++;
    for (size_t g = 0; g < n_runs; g++) {
        runs[g].reports = util_xcalloc(runs[g].n, sizeof *runs[g].reports);
        runs[g].n = 0;
    }
    for (size_t i = 0; i < n; i++)
        runs[run_of[i]].reports[runs[run_of[i]].n++] = reports[i];

    struct strbuf b = { 0 };
    char s1[UTIL_SIZE_LEN], t[UTIL_TIME_LEN];
    fprintf(out,
            "%svramwatch: %zu separate runs in %zu reports%s (told apart by command line, "
            "launcher, rank, parent process and time)\n",
            st->bold, n_runs, n, st->reset);
    for (size_t g = 0; g < n_runs; g++) {
        const struct run_view *v = &runs[g];
        const struct model_report *first = &v->reports[0];
        int64_t peak = 0, began = INT64_MAX;
        size_t failed = 0;
        for (size_t k = 0; k < v->n; k++) {
            const struct model_report *r = &v->reports[k];
            int64_t p = 0;
            for (size_t d = 0; d < r->n_devices; d++)
                p = util_sat_add(p, r->devices[d].peak_live_bytes);
            if (p > peak)
                peak = p;
            failed += model_real_oom(r) != NULL;
            if (r->process.start_unix_ns.known && r->process.start_unix_ns.v < began)
                began = r->process.start_unix_ns.v;
        }
        sb_printf(&b, "run %zu: ", g + 1);
        if (v->n == 1) {
            sb_printf(&b, "pid %" PRId64 " on ", first->process.pid);
            util_add_text(&b, first->process.host);
        } else {
            sb_printf(&b, "%zu processes", v->n);
        }
        if (began != INT64_MAX)
            sb_printf(&b, ", began %s", util_fmt_abstime(began, t));
        sb_printf(&b, ", peak %s%s, ", util_fmt_size(peak, s1),
                  v->n > 1 ? " (highest process)" : "");
        if (!failed)
            sb_add(&b, "no out of memory");
        else if (v->n == 1)
            sb_add(&b, "out of memory");
        else
            sb_printf(&b, "%zu out of memory", failed);
        put_line(out, "  ", &b);
        /* The command, then the launcher: "python3 train.py  (torchrun run 4c1f)". */
        add_command(&b, first, 72);
        struct strbuf launcher = { 0 };
        job_add_launcher(&launcher, first, true);
        if (launcher.len)
            sb_printf(&b, "  (%s)", sb_str(&launcher));
        sb_free(&launcher);
        put_line(out, "    ", &b);
    }
    for (size_t g = 0; g < n_runs; g++) {
        fprintf(out, "\n%s=== run %zu of %zu ===%s\n", st->bold, g + 1, n_runs, st->reset);
        if (runs[g].n == 1)
            postmortem_print(out, &runs[g].reports[0], o);
        else
            print_one_job(out, runs[g].reports, runs[g].n, o);
    }
    for (size_t g = 0; g < n_runs; g++)
        free(runs[g].reports);
    free(runs);
    free(run_of);
    sb_free(&b);
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
