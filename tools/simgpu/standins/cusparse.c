/* cusparse.c: the hand-written part of the simulated libcusparse.so.12: a distinct handle per
 * create; every operation is in the generated long tail. */

/* These functions are another library's API, declared in NVIDIA's headers, which the build does
 * not need: no prototype of ours to check them against. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int cusparseCreate(void **handle)
{
    if (!handle)
        return 3; /* CUSPARSE_STATUS_INVALID_VALUE */
    *handle = calloc(1, 64);
    return *handle ? 0 : 2; /* CUSPARSE_STATUS_ALLOC_FAILED */
}

EXPORT int cusparseDestroy(void *handle)
{
    free(handle);
    return 0;
}
