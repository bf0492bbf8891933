/* A program that does not link the CUDA runtime itself: it loads a library that does, with
 * RTLD_LOCAL, as Python loads an extension module. The library's cudaMalloc calls bind to the
 * preloaded shims (global scope first), which must still find the real runtime although it is
 * not in the global scope. Exit 0 when both allocations succeeded.
 * usage: local_scope LIB (its alloc_here and alloc_in_native_thread), or local_scope LIB SYMBOL
 * (its int SYMBOL(size_t), given 3 MiB). */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "local_scope: %s\n", dlerror());
        return 3;
    }
    if (argc == 3) {
        int (*named)(size_t) = (int (*)(size_t))dlsym(h, argv[2]);
        return !named ? 4 : named(3u << 20) != 0 ? 5 : 0;
    }
    int (*here)(size_t) = (int (*)(size_t))dlsym(h, "alloc_here");
    int (*thread)(size_t) = (int (*)(size_t))dlsym(h, "alloc_in_native_thread");
    if (!here || !thread)
        return 4;
    if (here(3u << 20) != 0 || thread(5u << 20) != 0)
        return 5;
    return 0;
}
