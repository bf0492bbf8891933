/* script.c: which options the job's training script defines, read from its source.
 *
 * A switch that the command line does not carry (examples/train_torch.py's --checkpoint, its
 * --accumulate) is still the best advice when the script has it: one flag instead of code to
 * write. argparse, click and HfArgumentParser all name an option as a quoted string in the
 * script ("--checkpoint"), so the script's text says which it takes. It is read where the report
 * says the job ran (process.cwd), else from the folder advise runs in; a report read elsewhere, a
 * module (-m) or a script that cannot be read gives no answer, and the advice stays as without. */
#include "script.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmdline.h"

/* Training scripts are small; a larger file is not read (and a device or FIFO never). */
#define SCRIPT_MAX (4 << 20)

static char *read_regular(const char *path, size_t *len)
{
    /* A report names the script: it may name /dev/ptmx or a FIFO. Anything but a regular file
     * is skipped without being opened, as a missing script is. */
    struct stat st;
    const char *kind;
    int fd = util_open_regular(AT_FDCWD, path, 0, &st, &kind);
    if (fd < 0)
        return NULL;
    char *buf = NULL;
    if (st.st_size > 0 && st.st_size <= SCRIPT_MAX) {
        buf = util_xcalloc((size_t)st.st_size + 1, 1);
        ssize_t got = read(fd, buf, (size_t)st.st_size);
        if (got <= 0) {
            free(buf);
            buf = NULL;
        } else {
            *len = (size_t)got;
        }
    }
    close(fd);
    return buf;
}

static char *script_source(const struct model_report *r, size_t *len)
{
    const char *const *argv = r->process.argv;
    size_t argc = r->process.argc;
    struct cmdline_job job;
    cmdline_job_parse(argv, argc, &job);
    if (job.module || job.script >= argc || !argv[job.script] || !*argv[job.script])
        return NULL;
    const char *s = argv[job.script];
    if (s[0] == '/')
        return read_regular(s, len);
    char *text = NULL;
    if (r->process.cwd) {
        struct strbuf p = { 0 };
        sb_printf(&p, "%s/%s", r->process.cwd, s);
        text = read_regular(sb_str(&p), len);
        sb_free(&p);
    }
    return text ? text : read_regular(s, len);
}

static bool quoted_in(const char *text, size_t len, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; (p = memmem(p, len - (size_t)(p - text), name, n)) != NULL; p += n) {
        if (p == text || (size_t)(p - text) + n >= len)
            continue;
        char before = p[-1], after = p[n];
        if ((before == '"' || before == '\'') && after == before)
            return true;
    }
    return false;
}

const char *script_option(struct script *s, const struct model_report *r, const char *const *names,
                          size_t n)
{
    if (!s->read) {
        s->text = script_source(r, &s->len);
        s->read = true;
    }
    for (size_t i = 0; s->text && i < n; i++)
        if (quoted_in(s->text, s->len, names[i]))
            return names[i];
    return NULL;
}

void script_free(struct script *s)
{
    free(s->text);
    *s = (struct script){ 0 };
}

const char *script_name(const struct model_report *r)
{
    const char *const *argv = r->process.argv;
    struct cmdline_job job;
    cmdline_job_parse(argv, r->process.argc, &job);
    if (job.script >= r->process.argc || !argv[job.script] || !*argv[job.script])
        return NULL;
    return argv[job.script];
}
