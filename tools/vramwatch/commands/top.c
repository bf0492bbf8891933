/* top.c: what `vramwatch top`'s two views share (top.h): the live-state files read with their
 * sequence lock (layout: lib/base/livefile.h), the header, the call-site rows, the figures. */
#include "top.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "redact.h"
#include "util.h"

/* The file's size and version go together: version 2 appended `where` (livefile.h). */
static bool known_layout(const struct vw_live_file *f, size_t got)
{
    if (memcmp(f->magic, VW_LIVE_MAGIC, 8) != 0)
        return false;
    return (f->version == VW_LIVE_VERSION && f->size == sizeof(*f) && got == sizeof(*f)) ||
           (f->version == VW_LIVE_VERSION_1 && f->size == VW_LIVE_V1_SIZE &&
            got == VW_LIVE_V1_SIZE);
}

/* A consistent copy of one live file, or false (not a live file of a version we know, or a
 * writer that kept changing it). */
static bool read_live(int dirfd, const char *name, struct vw_live_file *out)
{
    struct stat st;
    const char *kind;
    int fd = util_open_regular(dirfd, name, O_NOFOLLOW, &st, &kind);
    if (fd < 0)
        return false;
    size_t size = (size_t)st.st_size;
    if (st.st_size != (off_t)sizeof(*out) && st.st_size != (off_t)VW_LIVE_V1_SIZE) {
        close(fd);
        return false;
    }
    memset(out, 0, sizeof(*out));
    /* read, not a mapping: a file cut short meanwhile is a short read here, not SIGBUS. */
    bool ok = false;
    for (int tries = 0; tries < 200 && !ok; tries++) {
        uint64_t s2;
        if (pread(fd, out, size, 0) != (ssize_t)size)
            break;
        if (out->seq & 1) {
            struct timespec ts = { 0, 100000 };
            nanosleep(&ts, NULL);
            continue;
        }
        ok = pread(fd, &s2, sizeof(s2), (off_t)offsetof(struct vw_live_file, seq)) ==
                     (ssize_t)sizeof(s2) &&
             s2 == out->seq;
    }
    close(fd);
    if (!ok || !known_layout(out, size))
        return false;
    for (int k = 0; k < VW_LIVE_DEVICES; k++) {
        struct vw_live_where *w = &out->where[k];
        if (size == VW_LIVE_V1_SIZE) /* an older library's file: where is unknown */
            w->nvml_index = -1;
        w->pci_bus_id[sizeof(w->pci_bus_id) - 1] = 0;
        w->uuid[sizeof(w->uuid) - 1] = 0;
    }
    /* The strings end inside their fields whatever the file says; counts stay in range. */
    out->host[sizeof(out->host) - 1] = 0;
    out->cwd[sizeof(out->cwd) - 1] = 0;
    out->argv[sizeof(out->argv) - 1] = 0;
    /* The command line is shown with the reports' rule for secrets: a file written by an older
     * library holds it as the kernel had it. Only the arguments joined by spaces are here, so it
     * is redacted as such a line (redact_line, lib/base/redact.h: it may replace more than the
     * report's argv does, never less), then cut to the field, which only takes text away. */
    char work[2 * sizeof(out->argv) + 8], shown[4 * sizeof(out->argv) + 16];
    redact_line(out->argv, work, sizeof(work), shown, sizeof(shown));
    size_t n = strnlen(shown, sizeof(out->argv) - 1);
    memcpy(out->argv, shown, n);
    out->argv[n] = 0;
    if (out->ndevices > VW_LIVE_DEVICES)
        out->ndevices = VW_LIVE_DEVICES;
    if (out->nsites > VW_LIVE_SITES)
        out->nsites = VW_LIVE_SITES;
    for (uint32_t i = 0; i < out->nsites; i++) {
        struct vw_live_site *s = &out->sites[i];
        if (s->nframes > VW_LIVE_FRAMES)
            s->nframes = VW_LIVE_FRAMES;
        for (uint32_t j = 0; j < s->nframes; j++) {
            s->frames[j].file_or_module[sizeof(s->frames[j].file_or_module) - 1] = 0;
            s->frames[j].function_or_symbol[sizeof(s->frames[j].function_or_symbol) - 1] = 0;
        }
    }
    return true;
}

static int by_rank(const void *a, const void *b)
{
    const struct vw_live_file *x = &((const struct top_proc *)a)->f;
    const struct vw_live_file *y = &((const struct top_proc *)b)->f;
    int h = strcmp(x->host, y->host);
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (h)
        return h;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Every live file in the folder: those of running processes into *procs; those of processes
 * gone from this host are counted in *exited. False when the folder cannot be read. */
bool top_scan(const char *dir, struct top_proc **procs, size_t *n, size_t *exited,
              struct strbuf *err)
{
    *n = *exited = 0;
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dirfd >= 0 ? fdopendir(dirfd) : NULL;
    if (!d) {
        sb_printf(err, "%s: %s", dir, strerror(errno));
        if (dirfd >= 0)
            close(dirfd);
        return false;
    }
    char host[64];
    util_host_name(host, sizeof(host));
    uint64_t now = (uint64_t)time(NULL) * 1000000000ull;
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, VW_LIVE_PREFIX, strlen(VW_LIVE_PREFIX)) != 0)
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            *procs = util_xrealloc(*procs, cap * sizeof(**procs));
        }
        struct top_proc *p = &(*procs)[*n];
        memset(p, 0, sizeof(*p));
        p->growth = TOP_GROWTH_UNKNOWN;
        if (!read_live(dirfd, e->d_name, &p->f))
            continue;
        if (strcmp(p->f.host, host) == 0) {
            if (p->f.pid <= 0 || (kill((pid_t)p->f.pid, 0) != 0 && errno == ESRCH)) {
                (*exited)++;
                continue;
            }
        } else {
            /* Another host's process cannot be asked: one that stopped updating is marked. */
            uint64_t quiet = 10ull * 1000000000ull + 5ull * p->f.interval_ms * 1000000ull;
            p->silent = p->f.update_unix_ns + quiet < now;
        }
        (*n)++;
    }
    closedir(d);
    if (*n)
        qsort(*procs, *n, sizeof(**procs), by_rank);
    return true;
}

void top_add_size(struct strbuf *b, int64_t v, int width)
{
    char s[UTIL_SIZE_LEN];
    sb_printf(b, "%*s", width, v < 0 ? "-" : util_fmt_size(v, s));
}

/* One call site of the file in the report model's terms. */
static void site_frames(struct model_frame *fr, const struct vw_live_site *s)
{
    for (uint32_t i = 0; i < s->nframes; i++) {
        const struct vw_live_frame *x = &s->frames[i];
        fr[i].python = x->python != 0;
        if (x->python) {
            fr[i].file = x->file_or_module;
            fr[i].function = x->function_or_symbol;
            fr[i].line = x->line_or_offset;
        } else {
            fr[i].module = x->file_or_module[0] ? x->file_or_module : NULL;
            fr[i].symbol = x->function_or_symbol[0] ? x->function_or_symbol : NULL;
            fr[i].offset = x->line_or_offset;
            fr[i].symbol_offset.known = x->symbol_offset >= 0;
            fr[i].symbol_offset.v = x->symbol_offset;
        }
    }
}

/* The names of the file's call sites by the report model's one rule (model.c), all of them in
 * one report: the rule looks at every call site (which lines reach an allocator function). */
static void name_sites(struct strbuf *names, const struct vw_live_file *f)
{
    struct model_frame fr[VW_LIVE_SITES][VW_LIVE_FRAMES];
    struct model_callsite cs[VW_LIVE_SITES];
    memset(fr, 0, sizeof(fr));
    memset(cs, 0, sizeof(cs));
    for (uint32_t j = 0; j < f->nsites; j++) {
        const struct vw_live_site *s = &f->sites[j];
        site_frames(fr[j], s);
        cs[j] = (struct model_callsite){
            .id = (int64_t)s->id,
            .frames = fr[j],
            .n_frames = s->nframes,
            .live_bytes = (int64_t)s->live_bytes,
            .live_count = (int64_t)s->live_count,
            .alloc_calls = (int64_t)s->alloc_calls,
        };
    }
    struct model_report r;
    memset(&r, 0, sizeof(r));
    r.process.cwd = f->cwd[0] ? f->cwd : NULL;
    r.callsites = cs;
    r.n_callsites = f->nsites;
    model_find_allocators(&r);
    for (uint32_t j = 0; j < f->nsites; j++)
        model_add_callsite(&names[j], &r, cs[j].id, MODEL_NAME_SHORT);
}

void top_add_int(struct strbuf *b, int64_t v, int width)
{
    if (v < 0)
        sb_printf(b, "%*s", width, "-");
    else
        sb_printf(b, "%*" PRId64, width, v);
}

void top_add_header(struct strbuf *b, const char *dir, size_t n, size_t exited)
{
    char when[UTIL_TIME_LEN];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    util_fmt_abstime((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, when);
    sb_printf(b, "vramwatch top: %zu process%s in ", n, n == 1 ? "" : "es");
    util_add_text(b, dir);
    sb_printf(b, ", %s\n", when);
    if (exited)
        sb_printf(b, "(%zu more left a file and exited: not shown)\n", exited);
    if (!n)
        sb_add(b, "no process under vramwatch is running with this folder\n");
}

void top_add_sites(struct strbuf *b, const struct vw_live_file *f, int indent)
{
    /* Call chains that end in the same line (one line reached along different paths) are one
     * row, as in the report's table; the file lists them largest first. */
    struct strbuf names[VW_LIVE_SITES] = { { 0 } }, site[VW_LIVE_SITES] = { { 0 } };
    uint64_t bytes[VW_LIVE_SITES], blocks[VW_LIVE_SITES];
    uint32_t rows_used = 0;
    name_sites(site, f);
    for (uint32_t j = 0; j < f->nsites; j++) {
        struct strbuf nm = site[j];
        uint32_t k = 0;
        while (k < rows_used && strcmp(sb_str(&names[k]), sb_str(&nm)) != 0)
            k++;
        if (k == rows_used) {
            names[rows_used] = nm;
            bytes[rows_used] = blocks[rows_used] = 0;
            rows_used++;
        } else {
            sb_free(&nm);
        }
        bytes[k] += f->sites[j].live_bytes;
        blocks[k] += f->sites[j].live_count;
    }
    for (uint32_t k = 0; k < rows_used; k++) {
        char sz[UTIL_SIZE_LEN];
        sb_printf(b, "%*s %10s in %" PRIu64 " block%s  %s\n", indent, "",
                  util_fmt_size((int64_t)bytes[k], sz), blocks[k], blocks[k] == 1 ? "" : "s",
                  sb_str(&names[k]));
        sb_free(&names[k]);
    }
}

size_t top_cut(const char *p, size_t len, int cols)
{
    size_t cut = 0;
    for (int c = 0; cut < len && c < cols; c++) {
        size_t step = util_utf8_len((const unsigned char *)p + cut, len - cut);
        cut += step ? step : 1;
    }
    return cut;
}
