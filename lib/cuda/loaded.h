/* Libraries already loaded into the process, found by file name, and the real dlsym: the lowest
 * layer of the CUDA side, which knows nothing of hooks (nvml_procs.c, cxa.c use it alone). */
#ifndef VW_LOADED_H
#define VW_LOADED_H

#include <stdbool.h>

/* Whether the file name of path starts with prefix; a prefix ending in '.' also matches a '-'
 * there (libcudart-<hash>.so.12 is libcudart). */
bool loaded_module_is(const char *path, const char *prefix);

/* `symbol` in the first loaded module whose file name starts with `module_prefix`, found even
 * when that module was loaded with RTLD_LOCAL; NULL if none. */
void *loaded_find(const char *module_prefix, const char *symbol);

/* The real dlsym (glibc's), found without going through our own exported dlsym (dlsym.c). */
void *dlsym_real(void *handle, const char *name);

#endif
