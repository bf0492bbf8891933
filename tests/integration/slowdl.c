/* Preloaded in front of the library for the first_threads case: makes the library's own
 * lookup of the driver (dlopen of libcuda.so.1 with RTLD_NOLOAD) take 100 ms, so that threads
 * whose first CUDA calls race the one that looks the driver up always find it busy. Without
 * waiting for it, their allocations would land on no device; the case fails every time then. */
void *dlopen(const char *file, int mode);
#include <dlfcn.h>
#include <string.h>
#include <time.h>

void *dlopen(const char *file, int mode)
{
    static void *(*real)(const char *, int);
    if (!real)
        real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    if (file && (mode & RTLD_NOLOAD) && strstr(file, "libcuda.so")) {
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return real(file, mode);
}
