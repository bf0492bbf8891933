/* timeline_flame.c: in the timeline's HTML, flame graphs of live memory by call chain (native
 * and Python frames): at the device's peak, at the out-of-memory failure, and when the report was
 * written, as far as the report keeps each (docs/report-format.md: callsites[].live_bytes,
 * live_bytes_at_peak, live_bytes_at_failure). Chains start at their first frame of the
 * application (timeline_stacks_root), whole with --full.
 *
 * Each graph merges the call sites' chains from the outermost frame down (the outermost at the
 * top, the frame that allocated at the bottom of each tower), a frame's width its share of the
 * live bytes under it. Plain HTML boxes, no script of their own: hovering shows a frame's bytes
 * and share through the page's tooltip (data-tip). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "timeline_stacks.h"

#define FLAME_MAX_DEPTH 64
#define FLAME_MIN_SHARE 0.002 /* narrower frames are not drawn: under 0.2% of the graph */
#define FLAME_ROW_PX 18

struct node {
    char *name;
    bool python;
    int64_t bytes;
    size_t first_child, next_sibling; /* indices, 0: none (node 0 is the root) */
};

struct tree {
    struct node *n;
    size_t len, cap;
    int depth;
};

static size_t tree_add(struct tree *t, const char *name, bool python)
{
    if (t->len == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->n = util_xrealloc(t->n, t->cap * sizeof *t->n);
    }
    t->n[t->len] = (struct node){ .name = util_xstrdup(name), .python = python };
    return t->len++;
}

static size_t child(struct tree *t, size_t parent, const char *name, bool python)
{
    for (size_t c = t->n[parent].first_child; c; c = t->n[c].next_sibling)
        if (strcmp(t->n[c].name, name) == 0)
            return c;
    size_t c = tree_add(t, name, python);
    t->n[c].next_sibling = t->n[parent].first_child;
    t->n[parent].first_child = c;
    return c;
}

static void tree_free(struct tree *t)
{
    for (size_t i = 0; i < t->len; i++)
        free(t->n[i].name);
    free(t->n);
}

static void build(struct tree *t, const struct model_report *r, const int64_t *bytes, bool full)
{
    tree_add(t, "all", false);
    for (size_t i = 0; i < r->n_callsites; i++) {
        const struct model_callsite *cs = &r->callsites[i];
        if (bytes[i] <= 0)
            continue;
        size_t at = 0;
        t->n[0].bytes += bytes[i];
        if (cs->n_frames == 0) {
            at = child(t, 0,
                       cs->id == 0 ? "(call sites beyond the table's size)" : "(no stack recorded)",
                       false);
            t->n[at].bytes += bytes[i];
            continue;
        }
        int depth = 0;
        for (size_t k = timeline_stacks_root(cs, full) + 1; k-- > 0 && depth < FLAME_MAX_DEPTH;) {
            if (!timeline_stacks_shown(cs, k, full))
                continue;
            depth++;
            struct strbuf f = { 0 };
            model_add_frame(&f, r, &cs->frames[k], MODEL_NAME_SHORT);
            at = child(t, at, sb_str(&f), cs->frames[k].python);
            sb_free(&f);
            t->n[at].bytes += bytes[i];
        }
        if (depth > t->depth)
            t->depth = depth;
    }
}

/* Children by bytes, most first (ties by name), so the graph reads the same every time. */
static int by_bytes(const void *a, const void *b, void *tree)
{
    const struct tree *t = tree;
    const struct node *x = &t->n[*(const size_t *)a], *y = &t->n[*(const size_t *)b];
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* One graph being written: its tree, the bytes of the whole graph, the moment it shows. */
struct flame {
    struct strbuf *o;
    struct tree *t;
    int64_t total;
    const char *moment;
};

/* A node's box at this depth and left edge (a share of the graph), then its children's. */
static void emit(const struct flame *g, size_t at, int depth, double left)
{
    struct strbuf *o = g->o;
    struct tree *t = g->t;
    int64_t total = g->total;
    const char *moment = g->moment;
    struct node *nd = &t->n[at];
    double width = (double)nd->bytes / (double)total;
    if (width < FLAME_MIN_SHARE)
        return;
    if (depth > 0) {
        /* a colour per frame name, Python frames blue, native ones orange */
        unsigned h = 2166136261u;
        for (const char *c = nd->name; *c; c++)
            h = (h ^ (unsigned char)*c) * 16777619u;
        char size[UTIL_SIZE_LEN];
        sb_printf(o,
                  "<div class=\"frame %s\" style=\"left:%.3f%%;width:%.3f%%;top:%dpx;"
                  "background:hsl(%u,%u%%,%u%%)\" data-tip=\"",
                  nd->python ? "py" : "native", left * 100, width * 100, (depth - 1) * FLAME_ROW_PX,
                  nd->python ? 205 + h % 20 : 20 + h % 25, 55 + (h >> 8) % 25, 68 + (h >> 16) % 14);
        timeline_view_add_xml(o, nd->name);
        sb_printf(o, "&#10;%s live %s, %.1f%% of the graph\">", util_fmt_size(nd->bytes, size),
                  moment, width * 100);
        timeline_view_add_xml(o, nd->name);
        sb_add(o, "</div>\n");
    }
    size_t n = 0;
    for (size_t c = nd->first_child; c; c = t->n[c].next_sibling)
        n++;
    size_t *kids = util_xcalloc(n ? n : 1, sizeof *kids);
    n = 0;
    for (size_t c = nd->first_child; c; c = t->n[c].next_sibling)
        kids[n++] = c;
    qsort_r(kids, n, sizeof *kids, by_bytes, t);
    double x = left;
    for (size_t i = 0; i < n; i++) {
        emit(g, kids[i], depth + 1, x);
        x += (double)t->n[kids[i]].bytes / (double)total;
    }
    free(kids);
}

static const char *moment_words(const struct model_report *r, int which)
{
    if (which == 1)
        return "at the peak";
    if (which == 2)
        return "at the out-of-memory failure";
    if (r->reason && strcmp(r->reason, "exit") == 0)
        return "at exit";
    if (r->reason && strcmp(r->reason, "oom") == 0)
        return "at the out-of-memory failure, when the report was written";
    return "when the report was written";
}

/* One graph, for the moments in `moments` (a bit per which) whose figures are the same. */
static void one_graph(struct strbuf *o, const struct view *v, size_t i, unsigned moments,
                      const int64_t *bytes)
{
    const struct model_report *r = v->reports[i];
    const char *who = v->who[i];
    struct tree t = { 0 };
    build(&t, r, bytes, v->full_frames);
    if (t.n[0].bytes <= 0) {
        tree_free(&t);
        return;
    }
    static const int order[] = { 1, 2, 0 };
    static const char *const ids[] = { "report", "peak", "failure" };
    struct strbuf m = { 0 }, id = { 0 };
    int k = 0, count = 0;
    for (int j = 0; j < 3; j++)
        count += (moments >> order[j]) & 1;
    for (int j = 0; j < 3; j++) {
        if (!((moments >> order[j]) & 1))
            continue;
        k++;
        sb_add(&m, k == 1 ? "" : k == count ? " and " : ", ");
        sb_add(&m, moment_words(r, order[j]));
        sb_printf(&id, "%s%s", k == 1 ? "" : " ", ids[order[j]]);
    }
    char size[UTIL_SIZE_LEN];
    sb_printf(o, "<section class=\"flame\" data-moment=\"%s\">\n<h2>", sb_str(&id));
    struct strbuf h = { 0 };
    if (who)
        sb_printf(&h, "%s: ", who);
    sb_printf(&h, "Live memory by call chain %s: %s", sb_str(&m),
              util_fmt_size(t.n[0].bytes, size));
    timeline_view_add_xml(o, sb_str(&h));
    sb_free(&h);
    sb_printf(o, "</h2>\n<div class=\"graph\" style=\"height:%dpx\">\n",
              (t.depth + 1) * FLAME_ROW_PX);
    emit(&(struct flame){ o, &t, t.n[0].bytes, sb_str(&m) }, 0, 0, 0);
    sb_add(o, "</div>\n</section>\n");
    sb_free(&m);
    sb_free(&id);
    tree_free(&t);
}

void timeline_flame_html(struct strbuf *o, const struct view *v)
{
    sb_add(o, "<div class=\"flames\">\n");
    if (!v->full_frames)
        /* the process's entry and the interpreter's frames are the first ten rows of every
         * tower otherwise, the same in every job */
        sb_add(o, "<p class=\"flame-note\">Each call chain starts at its first frame of the "
                  "application: the frames above it (the process's entry, the interpreter's) are "
                  "hidden; vramwatch timeline --full -o FILE.html shows them.</p>\n");
    /* a job's first four processes: more would be a page of graphs nobody reads */
    for (size_t i = 0; i < v->n_reports && i < 4; i++) {
        const struct model_report *r = v->reports[i];
        size_t n = r->n_callsites;
        int64_t *bytes[3];
        bool have[3];
        for (int w = 0; w < 3; w++) {
            bytes[w] = util_xcalloc(n ? n : 1, sizeof *bytes[w]);
            have[w] = timeline_stacks_site_bytes(r, (enum stacks_moment)w, bytes[w]);
        }
        /* the peak first (what people ask about), then the failure, then the report's moment;
         * moments with the same figures share one graph */
        static const int order[] = { 1, 2, 0 };
        unsigned done = 0;
        for (int k = 0; k < 3; k++) {
            int w = order[k];
            if (!have[w] || (done >> w) & 1)
                continue;
            unsigned moments = 1u << w;
            for (int j = k + 1; j < 3; j++) {
                int u = order[j];
                if (have[u] && memcmp(bytes[u], bytes[w], n * sizeof *bytes[w]) == 0)
                    moments |= 1u << u;
            }
            done |= moments;
            one_graph(o, v, i, moments, bytes[w]);
        }
        for (int w = 0; w < 3; w++)
            free(bytes[w]);
    }
    if (v->n_reports > 4)
        sb_printf(o,
                  "<p>The other %zu processes' graphs are left out: draw one alone with "
                  "vramwatch timeline -o FILE.html REPORT.</p>\n",
                  v->n_reports - 4);
    sb_add(o, "</div>\n");
}
