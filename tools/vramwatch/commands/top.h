/* top.h: what `vramwatch top`'s two views share (top.c: the live-state files read, the rows both
 * print) and the interactive screen on a terminal (top_screen.c). */
#ifndef VW_TOP_H
#define VW_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "livefile.h"
#include "sb.h"

#define TOP_GROWTH_UNKNOWN INT64_MIN

struct top_proc {
    struct vw_live_file f;
    bool silent;    /* another host's file that has not been updated for a while */
    int64_t growth; /* the screen's: live bytes gained between its file's last two updates */
};

/* Every live file in the folder: those of running processes into *procs (sorted by rank);
 * those of processes gone from this host are counted in *exited. False, with why in err, when
 * the folder cannot be read. */
bool top_scan(const char *dir, struct top_proc **procs, size_t *n, size_t *exited,
              struct strbuf *err);

/* "vramwatch top: N processes in DIR, TIME" and the line of exited ones. */
void top_add_header(struct strbuf *b, const char *dir, size_t n, size_t exited);

/* The process's call sites holding the most live memory, one row each, `indent` spaces first. */
void top_add_sites(struct strbuf *b, const struct vw_live_file *f, int indent);

/* A size ("3.30 GiB") or a count right-aligned in `width` columns; "-" for a negative one. */
void top_add_size(struct strbuf *b, int64_t v, int width);
void top_add_int(struct strbuf *b, int64_t v, int width);

/* The bytes of the first `cols` columns of p[0..len) (UTF-8, a character a column). */
size_t top_cut(const char *p, size_t len, int cols);

/* The interactive view, until q, Ctrl-C or a signal: the exit status (a signal that ends a
 * program ends this one the same way, once the terminal is restored). */
int top_screen_run(const char *dir, double interval);

#endif
