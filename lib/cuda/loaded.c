/* Finding libraries already loaded into the process by file name, and symbols in them. */
#include "loaded.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

/* Whether the file name of `path` starts with `prefix`. When the prefix is a library's name
 * and a dot ("libcudart."), a '-' stands for the dot too: wheels bundle renamed copies
 * (PyTorch's torch/lib/libcudart-<hash>.so.12), which are the same library and must be
 * followed the same way. */
bool loaded_module_is(const char *path, const char *prefix)
{
    if (!path)
        return false;
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(prefix);
    if (n && prefix[n - 1] == '.')
        return strncmp(b, prefix, n - 1) == 0 && (b[n - 1] == '.' || b[n - 1] == '-');
    return strncmp(b, prefix, n) == 0;
}

struct find_ctx {
    const char *prefix;
    const void *self_base;
    char path[PATH_MAX];
};

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct find_ctx *c = arg;
    (void)size;
    if (!info->dlpi_name || !info->dlpi_name[0] || !loaded_module_is(info->dlpi_name, c->prefix))
        return 0;
    snprintf(c->path, sizeof(c->path), "%s", info->dlpi_name);
    return 1;
}

void *loaded_find(const char *module_prefix, const char *symbol)
{
    /* Libraries loaded with RTLD_LOCAL (a Python extension module's dependencies, a plugin)
     * are not in the global scope that RTLD_NEXT searches, yet their callers bind to our
     * exported symbols, which come first. Find the loaded module by file name, then the
     * symbol in it; the path is copied out so dlopen runs outside dl_iterate_phdr. */
    struct find_ctx c = { .prefix = module_prefix };
    if (!dl_iterate_phdr(find_module, &c))
        return NULL;
    void *lib = dlopen(c.path, RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        return NULL;
    void *p = dlsym_real(lib, symbol);
    dlclose(lib); /* still loaded: whoever loaded it holds it */
    return p;
}
