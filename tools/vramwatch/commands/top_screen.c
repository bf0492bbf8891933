/* top_screen.c: `vramwatch top` on a terminal: the physical GPUs with their memory bars, one row
 * per process named by its script, a selection that shows the whole command, sort keys, and a
 * footer that says how to quit (docs/top.md).
 *
 * The terminal is put in raw mode (no echo, keys one at a time, Ctrl-C a key rather than a
 * signal) on the alternate screen, and given back as it was on every way out: q, Ctrl-C, an
 * error (atexit, so util's exits on a failed allocation too) and the signals that end a program
 * (SIGTERM, SIGHUP, SIGINT, SIGQUIT from outside), which are caught, the terminal restored, and
 * then raised again so the parent sees what ended us. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "top.h"
#include "topview.h"
#include "util.h"

enum sort { SORT_MEMORY, SORT_GROWTH, SORT_PID, SORT_COUNT };
static const char *const sort_names[SORT_COUNT] = { "memory", "growth", "pid" };

/* The terminal as we found it, put back by restore() (from atexit too). */
static struct termios saved;
static bool raw, on_screen;
/* A terminal that hung up without a SIGHUP (not our controlling one) would have poll return at
 * once forever: it is no longer asked, and the view goes on with the time. */
static bool hung_up;
static volatile sig_atomic_t got_signal;

/* SIGWINCH is caught only to cut the wait short: the next paint asks the terminal's size. */
static void on_signal(int sig)
{
    if (sig != SIGWINCH)
        got_signal = sig;
}

static void restore(void)
{
    if (on_screen) {
        /* What stdio holds goes to the alternate screen first; then the cursor and the normal
         * screen come back. */
        fflush(stdout);
        static const char leave[] = "\033[?25h\033[?1049l";
        ssize_t w = write(STDOUT_FILENO, leave, sizeof(leave) - 1);
        (void)w;
        on_screen = false;
    }
    if (raw) {
        tcsetattr(STDIN_FILENO, TCSADRAIN, &saved);
        raw = false;
    }
}

static void enter(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH };
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: poll returns at once */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
    atexit(restore);
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios t = saved;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
        t.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        raw = tcsetattr(STDIN_FILENO, TCSADRAIN, &t) == 0;
    }
    fputs("\033[?1049h\033[?25l", stdout);
    on_screen = true;
}

/* What the screen remembers between refreshes: the order, the selection, and each process's
 * live bytes at its file's last update, for the growth. */
struct screen {
    enum sort sort;
    size_t sel;
    int64_t sel_pid;
    char sel_host[64];
    int cols, rows; /* the terminal's size at this paint */
    /* Where the last render put the process list and the selected process (lines from 0): a
     * selection below the screen's end scrolls the list, not the cards above it. */
    int list_at, sel_from, sel_to;
    struct seen {
        char host[64];
        int64_t pid, live, growth;
        uint64_t update_ns;
    } *seen;
    size_t nseen;
};

static int64_t live_of(const struct vw_live_file *f)
{
    int64_t sum = 0;
    for (uint32_t k = 0; k < f->ndevices; k++)
        sum += f->devices[k].live_bytes > 0 ? f->devices[k].live_bytes : 0;
    return sum;
}

/* Growth: the rise of the process's live bytes (all its devices) between the last two updates
 * of its file (the library writes it once a second). Measured between updates rather than
 * between our reads, so a refresh faster or slower than the writer neither shows zero nor
 * doubles. Unknown until the file has been seen updated once. */
static void track_growth(struct screen *s, struct top_proc *procs, size_t n)
{
    struct seen *next = n ? util_xcalloc(n, sizeof(*next)) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct vw_live_file *f = &procs[i].f;
        struct seen *o = NULL, *x = &next[i];
        for (size_t j = 0; j < s->nseen && !o; j++)
            if (s->seen[j].pid == f->pid && strcmp(s->seen[j].host, f->host) == 0)
                o = &s->seen[j];
        memcpy(x->host, f->host, sizeof(x->host));
        x->pid = f->pid;
        x->live = live_of(f);
        x->update_ns = f->update_unix_ns;
        x->growth = TOP_GROWTH_UNKNOWN;
        if (o && o->update_ns == f->update_unix_ns) {
            *x = *o; /* not updated since: the same growth */
        } else if (o) {
            x->growth = x->live - o->live;
        }
        procs[i].growth = x->growth;
    }
    free(s->seen);
    s->seen = next;
    s->nseen = n;
}

static enum sort sort_by;

static int compare(const void *a, const void *b)
{
    const struct top_proc *x = a, *y = b;
    int64_t u = 0, v = 0;
    if (sort_by == SORT_MEMORY) {
        u = live_of(&y->f);
        v = live_of(&x->f);
    } else if (sort_by == SORT_GROWTH) { /* largest first, unknown last */
        u = y->growth;
        v = x->growth;
    }
    if (u != v)
        return u < v ? -1 : 1;
    return x->f.pid < y->f.pid ? -1 : x->f.pid > y->f.pid;
}

/* Sorted as asked; the selection stays on its process when it is still there. */
static void order(struct screen *s, struct top_proc *procs, size_t n)
{
    sort_by = s->sort;
    if (n)
        qsort(procs, n, sizeof(*procs), compare);
    for (size_t i = 0; i < n; i++)
        if (procs[i].f.pid == s->sel_pid && strcmp(procs[i].f.host, s->sel_host) == 0)
            s->sel = i;
    if (s->sel >= n)
        s->sel = n ? n - 1 : 0;
    if (n) {
        s->sel_pid = procs[s->sel].f.pid;
        memcpy(s->sel_host, procs[s->sel].f.host, sizeof(s->sel_host));
    }
}

/* One physical GPU of the view: the devices of the processes that are the same card (same host
 * and bus id; a device whose bus id is unknown is a card of its own). */
struct card {
    const char *host;
    const struct vw_live_where *w;
    int64_t used, limit, cap;
};

static struct card *cards_of(const struct top_proc *procs, size_t n, size_t *ncards)
{
    struct card *c = util_xcalloc(n * VW_LIVE_DEVICES + 1, sizeof(*c));
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        const struct vw_live_file *f = &procs[i].f;
        for (uint32_t k = 0; k < f->ndevices; k++) {
            const struct vw_live_device *d = &f->devices[k];
            const struct vw_live_where *w = &f->where[k];
            size_t j = 0;
            while (j < m && !(w->pci_bus_id[0] && strcmp(c[j].host, f->host) == 0 &&
                              strcmp(c[j].w->pci_bus_id, w->pci_bus_id) == 0))
                j++;
            if (j == m)
                c[m++] = (struct card){ .host = f->host, .w = w, .limit = -1, .cap = -1 };
            c[j].used += d->live_bytes > 0 ? d->live_bytes : 0;
            /* The limit of a card several processes emulate: the smallest, the first to bite. */
            if (d->limit_bytes > 0 && (c[j].limit < 0 || d->limit_bytes < c[j].limit))
                c[j].limit = d->limit_bytes;
            if (d->total_bytes > c[j].cap)
                c[j].cap = d->total_bytes;
        }
    }
    *ncards = m;
    return c;
}

static int by_index(const void *a, const void *b)
{
    const struct card *x = a, *y = b;
    int h = strcmp(x->host, y->host);
    if (h)
        return h;
    if (x->w->nvml_index != y->w->nvml_index)
        return x->w->nvml_index < y->w->nvml_index ? -1 : 1;
    return strcmp(x->w->pci_bus_id, y->w->pci_bus_id);
}

/* The cards: nvidia-smi's index and bus id, the bar, used / limit / capacity, the host. */
static void add_cards(struct strbuf *b, const struct top_proc *procs, size_t n)
{
    size_t m;
    struct card *c = cards_of(procs, n, &m);
    if (m)
        qsort(c, m, sizeof(*c), by_index);
    sb_printf(b, "\n%4s  %-16s  %-22s  %10s   %10s   %10s  %s\n", "GPU", "BUS-ID", "MEMORY", "USED",
              "LIMIT", "CAPACITY", "HOST");
    for (size_t j = 0; j < m; j++) {
        top_add_int(b, c[j].w->nvml_index, 4);
        sb_add(b, "  ");
        struct strbuf t = { 0 };
        util_add_text(&t, c[j].w->pci_bus_id[0] ? c[j].w->pci_bus_id : "-");
        sb_printf(b, "%-16.16s  ", sb_str(&t));
        topview_bar(b, c[j].used, c[j].limit, c[j].cap, 22);
        sb_add(b, "  ");
        top_add_size(b, c[j].used, 10);
        sb_add(b, " / ");
        top_add_size(b, c[j].limit, 10);
        sb_add(b, " / ");
        top_add_size(b, c[j].cap, 10);
        sb_truncate(&t, 0);
        util_add_text(&t, c[j].host);
        sb_printf(b, "  %s\n", sb_str(&t));
        sb_free(&t);
    }
    free(c);
}

static void add_growth(struct strbuf *b, int64_t g)
{
    char s[UTIL_SIZE_LEN], t[UTIL_SIZE_LEN + 2];
    if (g == TOP_GROWTH_UNKNOWN) {
        sb_printf(b, " %10s", "-");
        return;
    }
    const char *sign = g < 0 ? "-" : "+";
    snprintf(t, sizeof(t), "%s%s", g ? sign : "", util_fmt_size(g < 0 ? -g : g, s));
    sb_printf(b, " %10s", t);
}

/* The selected process: its whole command, wrapped to the screen, then where it runs and its
 * call sites. */
static void add_details(struct strbuf *b, const struct top_proc *p, int cols)
{
    const struct vw_live_file *f = &p->f;
    struct strbuf cmd = { 0 };
    util_add_text(&cmd, f->argv);
    topview_wrap(b, "  command: ", "           ", sb_str(&cmd), cols);
    sb_free(&cmd);
    struct strbuf h = { 0 };
    util_add_text(&h, f->host);
    sb_printf(b, "%10s %s\n", "host:", sb_str(&h));
    sb_free(&h);
    /* The process's own ordinal beside the card's index: CUDA_VISIBLE_DEVICES renumbers. */
    for (uint32_t k = 0; k < f->ndevices; k++) {
        char pk[UTIL_SIZE_LEN], rs[UTIL_SIZE_LEN];
        const struct vw_live_device *d = &f->devices[k];
        sb_printf(b, "%10s %d (GPU ", k ? "" : "device:", d->ordinal);
        top_add_int(b, f->where[k].nvml_index, 0);
        sb_printf(b, "): peak %s, reserved %s%s%s\n", util_fmt_size(d->peak_live_bytes, pk),
                  d->reserved_bytes < 0 ? "-" : util_fmt_size(d->reserved_bytes, rs),
                  f->where[k].uuid[0] ? ", " : "", f->where[k].uuid);
    }
    top_add_sites(b, f, 10);
}

/* A process's rows, one per device; the selected one marked with '>' and followed by details. */
static void add_proc(struct strbuf *b, const struct top_proc *p, bool selected, int cols)
{
    const struct vw_live_file *f = &p->f;
    char name[64];
    topview_script_name(f->argv, name, sizeof(name));
    uint32_t rows = f->ndevices ? f->ndevices : 1;
    for (uint32_t k = 0; k < rows; k++) {
        const struct vw_live_device *d = f->ndevices ? &f->devices[k] : NULL;
        if (k == 0) {
            sb_printf(b, "%c%7" PRId64 " ", selected ? '>' : ' ', f->pid);
            top_add_int(b, f->rank, 5);
        } else {
            sb_printf(b, "%8s %5s", "", "");
        }
        sb_addc(b, ' ');
        top_add_int(b, d ? f->where[k].nvml_index : -1, 4);
        sb_addc(b, ' ');
        top_add_size(b, d ? d->live_bytes : -1, 10);
        sb_addc(b, ' ');
        top_add_size(b, d ? d->peak_live_bytes : -1, 10);
        add_growth(b, k == 0 ? p->growth : TOP_GROWTH_UNKNOWN);
        sb_addc(b, ' ');
        top_add_size(b, d ? d->limit_bytes : -1, 10);
        if (k == 0) {
            sb_add(b, "  ");
            util_add_text(b, name);
            if (f->oom)
                sb_printf(b, "  [%u out of memory]", f->oom);
            if (p->silent)
                sb_add(b, "  [no update lately]");
        }
        sb_addc(b, '\n');
    }
    if (selected)
        add_details(b, p, cols);
}

static int lines_in(const struct strbuf *b)
{
    int n = 0;
    for (const char *p = sb_str(b); (p = strchr(p, '\n')); p++)
        n++;
    return n;
}

static void render(struct strbuf *b, struct screen *s, const char *dir,
                   const struct top_proc *procs, size_t n, size_t exited)
{
    top_add_header(b, dir, n, exited);
    s->list_at = s->sel_from = s->sel_to = 0;
    if (!n)
        return;
    add_cards(b, procs, n);
    sb_printf(b, "\n%8s %5s %4s %10s %10s %10s %10s  %s\n", "PID", "RANK", "GPU", "LIVE", "PEAK",
              "GROWTH", "LIMIT", "NAME");
    s->list_at = lines_in(b);
    for (size_t i = 0; i < n; i++) {
        if (i == s->sel)
            s->sel_from = lines_in(b);
        add_proc(b, &procs[i], i == s->sel, s->cols);
        if (i == s->sel)
            s->sel_to = lines_in(b);
    }
}

/* The view from the top left corner, each line cut to the terminal's width, the footer on its
 * last line; a redraw overwrites in place (no clearing first, so nothing flickers). */
static void draw(const struct screen *s, const char *text, const char *footer)
{
    /* The selected process's lines end on the screen (above the footer): lines of the list
     * before it are left out, never its own first line. */
    int room = s->rows - 1, skip = 0;
    if (s->sel_to > room) {
        skip = s->sel_to - room;
        if (s->list_at + skip > s->sel_from)
            skip = s->sel_from - s->list_at;
    }
    fputs("\033[H", stdout);
    int row = 0, line = 0;
    for (const char *p = text; *p && row < room; line++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (line < s->list_at || line >= s->list_at + skip) {
            fwrite(p, 1, top_cut(p, len, s->cols), stdout);
            fputs("\033[K\n", stdout);
            row++;
        }
        p = nl ? nl + 1 : p + len;
    }
    printf("\033[J\033[%d;1H", s->rows);
    fwrite(footer, 1, top_cut(footer, strlen(footer), s->cols), stdout);
    fputs("\033[K", stdout);
    fflush(stdout);
}

static void paint(struct screen *s, const char *dir, const struct top_proc *procs, size_t n,
                  size_t exited)
{
    struct strbuf text = { 0 }, footer = { 0 };
    struct winsize ws;
    s->cols = 80;
    s->rows = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        s->cols = ws.ws_col;
        s->rows = ws.ws_row;
    }
    render(&text, s, dir, procs, n, exited);
    sb_printf(&footer, "q quit  ↑↓ select  s sort: %s", sort_names[s->sort]);
    draw(s, sb_str(&text), sb_str(&footer));
    sb_free(&text);
    sb_free(&footer);
}

static void select_row(struct screen *s, const struct top_proc *procs, size_t n, int step)
{
    if (!n)
        return;
    if (step < 0 && s->sel > 0)
        s->sel--;
    else if (step > 0 && s->sel + 1 < n)
        s->sel++;
    s->sel_pid = procs[s->sel].f.pid;
    memcpy(s->sel_host, procs[s->sel].f.host, sizeof(s->sel_host));
}

/* The keys typed since the last look: false for q or Ctrl-C. Arrows come as ESC [ A / ESC O A
 * (the latter in the terminal's application mode). */
static bool keys(struct screen *s, const struct top_proc *procs, size_t n)
{
    unsigned char buf[64];
    ssize_t got = read(STDIN_FILENO, buf, sizeof(buf));
    for (ssize_t i = 0; i < got; i++) {
        unsigned char c = buf[i];
        if (c == 0x1b && i + 2 < got && (buf[i + 1] == '[' || buf[i + 1] == 'O')) {
            c = buf[i + 2] == 'A' ? 'k' : buf[i + 2] == 'B' ? 'j' : 0;
            i += 2;
        }
        switch (c) {
        case 'q':
        case 'Q':
        case 0x03: /* Ctrl-C: a key in raw mode */
            return false;
        case 'j':
            select_row(s, procs, n, 1);
            break;
        case 'k':
            select_row(s, procs, n, -1);
            break;
        case 's':
            s->sort = (enum sort)((s->sort + 1) % SORT_COUNT);
            break;
        case 'm':
            s->sort = SORT_MEMORY;
            break;
        case 'g':
            s->sort = SORT_GROWTH;
            break;
        case 'p':
            s->sort = SORT_PID;
            break;
        default:
            break;
        }
    }
    return true;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Until the next refresh is due, a key comes or a signal: false when it is time to quit. */
static bool wait_input(struct screen *s, const struct top_proc *procs, size_t n, double due)
{
    double left = due - now_s();
    int ms = left > 0 ? (int)(left * 1000) + 1 : 0;
    struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
    /* Without raw mode stdin is not ours to read (a pipe, a file): only time and signals. */
    bool ask = raw && !hung_up;
    if (got_signal) /* came while painting */
        return true;
    int r = poll(ask ? &pfd : NULL, ask ? 1 : 0, ms);
    if (r <= 0)
        return true;
    /* What was typed before a hang-up still counts. */
    hung_up = (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
    return (pfd.revents & POLLIN) ? keys(s, procs, n) : true;
}

int top_screen_run(const char *dir, double interval)
{
    struct screen s = { .sort = SORT_MEMORY, .sel_pid = -1 };
    struct top_proc *procs = NULL;
    size_t n = 0, exited = 0;
    int status = EXIT_DONE;
    double due = 0;
    enter();
    for (bool go = true; go && !got_signal;) {
        if (now_s() >= due) {
            struct strbuf err = { 0 };
            if (!top_scan(dir, &procs, &n, &exited, &err)) {
                restore(); /* the message goes to the normal screen, where it stays */
                util_err("top: %s", sb_str(&err));
                sb_free(&err);
                status = EXIT_USAGE;
                break;
            }
            track_growth(&s, procs, n);
            due = now_s() + interval;
        }
        order(&s, procs, n);
        paint(&s, dir, procs, n, exited);
        go = wait_input(&s, procs, n, due);
    }
    restore();
    free(procs);
    free(s.seen);
    /* Ctrl-C is how people quit: 0, as q. A signal from elsewhere ends us as it would have. */
    if (got_signal && got_signal != SIGINT) {
        signal(got_signal, SIG_DFL);
        raise(got_signal);
    }
    return status;
}
