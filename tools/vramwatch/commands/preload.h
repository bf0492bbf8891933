/* preload.h: finding libvramwatch.so, the Python companion and the simulated GPU's stand-ins, and
 * building LD_PRELOAD, for run, fit and sim. */
#ifndef VRAMWATCH_TOOL_PRELOAD_H
#define VRAMWATCH_TOOL_PRELOAD_H

#include "sb.h"
#include "util.h"

#define PRELOAD_LIBRARY "libvramwatch.so"
/* The file that tells the companion's folder (docs/companion.md) from any other. */
#define PRELOAD_COMPANION_MODULE "vramwatch_companion.py"

/* VRAMWATCH_LIB, else next to the executable, else the build tree (BUILD/tools/vramwatch/vramwatch
 * beside BUILD/lib/libvramwatch.so, or its soname BUILD/lib/libvramwatch.so.0), else the install
 * libdir. An absolute path (malloc'd), or
 * NULL with the reason in `why`. */
char *preload_find_library(struct strbuf *why);

/* The folder of the Python companion, for PYTHONPATH: beside the executable in the build tree
 * (BUILD/tools/vramwatch/python), in an installed tree's share/vramwatch/python beside its bin/,
 * else the install datadir's. An absolute path (malloc'd), or NULL when none holds it. */
char *preload_find_companion(void);

/* The folder of the simulated GPU's stand-in libraries (tools/simgpu): VRAMWATCH_SIMGPU_DIR, else
 * the build tree (BUILD/tools/simgpu beside BUILD/tools/vramwatch/vramwatch), else the install
 * folder (LIBDIR/vramwatch/simgpu). A folder counts when it holds a stand-in (simcard.h says
 * which files are). An absolute path (malloc'd), or NULL with the reason in `why`. */
char *preload_find_simgpu(struct strbuf *why);

/* The stand-ins in dir: every regular file (not a symbolic link) named lib*.so.*, as absolute
 * paths in the order of their names, so LD_PRELOAD is the same from run to run. *n is their
 * count; NULL when there is none or the folder cannot be read. */
char **preload_standins(const char *dir, size_t *n);
void preload_free_list(char **list, size_t n);

/* The LD_PRELOAD value with `lib` first, behind any sanitizer runtime of `old` that must stay
 * in front, the rest of `old` after it (malloc'd). */
char *preload_value(const char *lib, const char *old);

#endif
