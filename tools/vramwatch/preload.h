/* preload.h: finding libvramwatch.so and building LD_PRELOAD, for run and fit. */
#ifndef VRAMWATCH_TOOL_PRELOAD_H
#define VRAMWATCH_TOOL_PRELOAD_H

#include "util.h"

#define PRELOAD_LIBRARY "libvramwatch.so"

/* VRAMWATCH_LIB, else next to the executable, else the build tree (BUILD/tools/vramwatch/vramwatch
 * beside BUILD/lib/libvramwatch.so), else the install libdir. An absolute path (malloc'd), or
 * NULL with the reason in `why`. */
char *preload_find_library(struct strbuf *why);

/* The LD_PRELOAD value with `lib` first, behind any sanitizer runtime of `old` that must stay
 * in front, the rest of `old` after it (malloc'd). */
char *preload_value(const char *lib, const char *old);

#endif
