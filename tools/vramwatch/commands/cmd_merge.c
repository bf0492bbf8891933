/* cmd_merge.c: `vramwatch merge REPORT... -o FILE`: the reports of one job's processes as one
 * vramwatch.job/1 file, after checking that they are one job. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "common.h"
#include "job.h"
#include "json.h"
#include "sb.h"

static const char usage[] =
        "usage: vramwatch merge REPORT... -o FILE\n"
        "\n"
        "Writes the reports of one job's processes (the ranks under torchrun, Slurm, DeepSpeed or\n"
        "mpirun) as one vramwatch.job/1 file: every process's whole report, the physical GPUs, the\n"
        "first out-of-memory of the job and the ranks that hold much more than the others.\n"
        "vramwatch report reads it back. A REPORT may itself be a merged file.\n"
        "\n"
        "The reports must be one job: the same command line (apart from --local_rank), the same\n"
        "world size, the same launcher ids (torchrun run id, Slurm job and step, MPI job), no\n"
        "process twice (host and pid), no rank twice, one parent per host for processes without\n"
        "a rank, and lives that overlap in time (docs/multi-process.md: One job or several).\n"
        "Anything else is refused, with the reason. vramwatch report shows separate runs apart.\n"
        "\n"
        "  -o, --output FILE  where to write (replaced whole, mode 0600: reports hold command lines)\n"
        "  --help             this text\n"
        "\n"
        "Exit status: 0 written; 2 bad usage, an unreadable report, reports of different jobs, or a\n"
        "file that cannot be written.\n";

static void print_doc(FILE *f, const void *doc)
{
    json_print(f, doc);
}

static int merge_option(struct util_args *a, int c, void *opts)
{
    if (c != 'o')
        return EXIT_USAGE;
    *(const char **)opts = a->value;
    return -1;
}

/* "merged 4 processes into job.json; first out of memory: rank 2, pid 4242 on node1" */
static void print_merged(const struct job *j, const char *output)
{
    struct strbuf line = { 0 };
    sb_printf(&line, "merged %zu process%s into ", j->n, j->n == 1 ? "" : "es");
    util_add_text(&line, output);
    if (j->first_failure) {
        const struct model_report *r = j->procs[j->first_failure_proc].r;
        sb_add(&line, "; first out of memory: ");
        if (r->process.rank.known)
            sb_printf(&line, "rank %" PRId64 ", ", r->process.rank.v);
        sb_printf(&line, "pid %" PRId64 " on ", r->process.pid);
        util_add_text(&line, r->process.host);
    }
    printf("%s\n", sb_str(&line));
    sb_free(&line);
}

int cmd_merge(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "output", required_argument, NULL, 'o' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *output = NULL;
    const struct common_cmd cmd = { .name = "merge",
                                    .usage = usage,
                                    .shortopts = "ho:",
                                    .longopts = longopts,
                                    .option = merge_option,
                                    .opts = &output };
    struct common_opts o;
    int status = common_options(&cmd, argc, argv, &o);
    if (status >= 0)
        return status;
    if (o.n_operands == 0 || !output) {
        util_err("merge: %s (usage: vramwatch merge REPORT... -o FILE)",
                 o.n_operands == 0 ? "no report file given" : "no output file given with -o");
        return EXIT_USAGE;
    }

    struct common_reports r;
    status = common_load_reports(&o, "merge", &r);
    struct strbuf err = { 0 };
    if (status == EXIT_DONE && job_mixed(r.v, r.n, &err)) {
        util_err("merge: %s", sb_str(&err));
        status = EXIT_USAGE;
    }
    sb_free(&err);
    if (status == EXIT_DONE) {
        struct job j;
        job_build(&j, r.v, r.n);
        cJSON *doc = job_to_json(&j);
        /* Whole or not at all, mode 0600 (reports hold command lines), never through a link. */
        if (common_write_file("merge", output, print_doc, doc))
            print_merged(&j, output);
        else
            status = EXIT_USAGE;
        cJSON_Delete(doc);
        job_free(&j);
    }
    common_free_reports(&r);
    return common_flush("merge", status);
}
