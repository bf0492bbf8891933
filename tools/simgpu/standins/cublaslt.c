/* cublaslt.c: the hand-written part of the simulated libcublasLt.so.13. PyTorch's matmuls with
 * a bias (and its scaled matmuls) go through cuBLASLt: descriptors must be distinct objects,
 * and the heuristic must offer one algorithm that needs no workspace, or PyTorch gives up on
 * the call ("CUBLAS_STATUS_NOT_SUPPORTED"). The matmul itself is in the generated long tail. */

/* These functions are another library's API, declared in NVIDIA's headers, which the build does
 * not need: no prototype of ours to check them against. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cublaslt.h"

#define EXPORT __attribute__((visibility("default")))

enum { ST_OK = 0, ST_ALLOC_FAILED = 3, ST_INVALID = 7 };


static int new_object(void **out)
{
    if (!out)
        return ST_INVALID;
    *out = calloc(1, 64);
    return *out ? ST_OK : ST_ALLOC_FAILED;
}

EXPORT int cublasLtMatmulDescCreate(void **desc, int computeType, int scaleType)
{
    (void)computeType, (void)scaleType;
    return new_object(desc);
}

EXPORT int cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows, uint64_t cols,
                                      int64_t ld)
{
    (void)type, (void)rows, (void)cols, (void)ld;
    return new_object(layout);
}

EXPORT int cublasLtMatmulPreferenceCreate(void **pref)
{
    return new_object(pref);
}

#define DESTROY(name)              \
    EXPORT int name(void *object)  \
    {                              \
        free(object);              \
        return ST_OK;              \
    }
DESTROY(cublasLtMatmulDescDestroy)
DESTROY(cublasLtMatrixLayoutDestroy)
DESTROY(cublasLtMatmulPreferenceDestroy)

EXPORT int cublasLtMatmulAlgoGetHeuristic(void *handle, void *desc, void *a, void *b, void *c,
                                          void *d, void *pref, int requested,
                                          struct heuristic_result *results, int *returned)
{
    (void)handle, (void)desc, (void)a, (void)b, (void)c, (void)d, (void)pref;
    if (requested < 1 || !results || !returned)
        return ST_INVALID;
    memset(results, 0, sizeof *results);
    results[0].waves = 1.0f;
    *returned = 1;
    return ST_OK;
}

EXPORT size_t cublasLtGetVersion(void)
{
    return 130101;
}
