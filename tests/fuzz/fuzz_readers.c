/* fuzz_readers.c: a libFuzzer target on what the vramwatch command line reads: reports and job
 * files (json.c, model.c, job.c), the advice built from them (memmodel.c, cmd_advise.c) and every
 * view printed of them (report, advise, timeline, merge).
 *
 * The input is one file, or several separated by a line holding only "----", so that the
 * multi-report paths (a job view, advice over several runs, merge) are reached as well. Each
 * piece is written to a private folder and the commands are run on them as `vramwatch` would,
 * with their output going to /dev/null: the target is whatever the readers and printers do with
 * hostile bytes, not the text. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

#define MAX_PIECES 4

static char folder[64];
static char piece_path[MAX_PIECES][96];
static char out_svg[96], out_html[96], out_job[96];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* The views print to stdout; a fuzzing run wants none of it. libFuzzer's own lines and the
     * sanitizers' reports go to stderr, which stays (run.sh closes it with -close_fd_mask=2 so
     * the commands' one-line refusals do not flood the log). */
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDOUT_FILENO) < 0) {
        perror("fuzz: /dev/null");
        abort();
    }
    close(null);
    const char *tmp = getenv("TMPDIR");
    snprintf(folder, sizeof folder, "%s/vwfuzz-XXXXXX",
             tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
    if (!mkdtemp(folder)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    for (int i = 0; i < MAX_PIECES; i++)
        snprintf(piece_path[i], sizeof piece_path[i], "%s/r%d.json", folder, i);
    snprintf(out_svg, sizeof out_svg, "%s/t.svg", folder);
    snprintf(out_html, sizeof out_html, "%s/t.html", folder);
    snprintf(out_job, sizeof out_job, "%s/job.json", folder);
    return 0;
}

static void put_file(const char *path, const uint8_t *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror("fuzz: open");
        abort();
    }
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            perror("fuzz: write");
            abort();
        }
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

/* Splits the input at lines "----" into at most MAX_PIECES files; returns how many. */
static int split(const uint8_t *data, size_t size)
{
    static const char sep[] = "\n----\n";
    const size_t seplen = sizeof sep - 1;
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; n < MAX_PIECES - 1 && i + seplen <= size; i++) {
        if (memcmp(data + i, sep, seplen) == 0) {
            put_file(piece_path[n++], data + start, i + 1 - start);
            start = i + seplen;
            i = start - 1;
        }
    }
    put_file(piece_path[n++], data + start, size - start);
    return n;
}

/* Runs one command; argv is built fresh each time because commands may keep pointers into it. */
static void run(int (*cmd)(int, char **), const char *name, const char *opt1, const char *opt2,
                int pieces)
{
    char *argv[4 + MAX_PIECES + 1];
    int argc = 0;
    argv[argc++] = (char *)name;
    if (opt1)
        argv[argc++] = (char *)opt1;
    if (opt2)
        argv[argc++] = (char *)opt2;
    for (int i = 0; i < pieces; i++)
        argv[argc++] = piece_path[i];
    argv[argc] = NULL;
    int status = cmd(argc, argv);
    /* The contract allows 0, 1 or 2 and nothing else. */
    if (status < 0 || status > 2) {
        fprintf(stderr, "fuzz: %s returned %d\n", name, status);
        abort();
    }
    fflush(stdout);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int pieces = split(data, size);
    run(cmd_report, "report", NULL, NULL, pieces);
    run(cmd_report, "report", "--json", NULL, pieces);
    run(cmd_report, "report", "--full", NULL, pieces);
    run(cmd_advise, "advise", NULL, NULL, pieces);
    run(cmd_advise, "advise", "--json", NULL, pieces);
    run(cmd_timeline, "timeline", NULL, NULL, 1);
    /* The slower writers take turns, by a property of the input so a finding reproduces. */
    switch (size % 3) {
    case 0:
        run(cmd_timeline, "timeline", "-o", out_svg, 1);
        break;
    case 1:
        run(cmd_timeline, "timeline", "-o", out_html, 1);
        break;
    default:
        run(cmd_merge, "merge", "-o", out_job, pieces);
        break;
    }
    return 0;
}
