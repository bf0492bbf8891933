/* cublas.c: the hand-written part of the simulated libcublas.so.13: a handle that is a real,
 * distinct object (PyTorch keeps one per thread and device, and compares them), the settings a
 * framework reads back, and the version. Every compute call is in the generated long tail
 * (stubs/libcublas.so.13.c): it succeeds and does nothing, since nothing runs on the card. */

/* These functions are another library's API, declared in NVIDIA's headers, which the build does
 * not need: no prototype of ours to check them against. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

/* cuBLAS's status enum: 0 is success, 1 not initialised, 7 invalid value. */
enum { ST_OK = 0, ST_INVALID = 7 };

struct sim_cublas {
    void *stream;
    void *workspace;
    size_t workspace_bytes;
    int pointer_mode, atomics_mode, math_mode;
};

EXPORT int cublasCreate_v2(struct sim_cublas **handle)
{
    if (!handle)
        return ST_INVALID;
    *handle = calloc(1, sizeof **handle);
    return *handle ? ST_OK : 3; /* CUBLAS_STATUS_ALLOC_FAILED */
}

EXPORT int cublasDestroy_v2(struct sim_cublas *handle)
{
    free(handle);
    return ST_OK;
}

EXPORT int cublasSetStream_v2(struct sim_cublas *h, void *stream)
{
    if (!h)
        return 1;
    h->stream = stream;
    return ST_OK;
}

EXPORT int cublasGetStream_v2(struct sim_cublas *h, void **stream)
{
    if (!h || !stream)
        return h ? ST_INVALID : 1;
    *stream = h->stream;
    return ST_OK;
}

EXPORT int cublasSetWorkspace_v2(struct sim_cublas *h, void *workspace, size_t bytes)
{
    if (!h)
        return 1;
    h->workspace = workspace;
    h->workspace_bytes = bytes;
    return ST_OK;
}

#define SETTING(set, get, field)                   \
    EXPORT int set(struct sim_cublas *h, int mode) \
    {                                              \
        if (!h)                                    \
            return 1;                              \
        h->field = mode;                           \
        return ST_OK;                              \
    }                                              \
    EXPORT int get(struct sim_cublas *h, int *mode) \
    {                                              \
        if (!h || !mode)                           \
            return h ? ST_INVALID : 1;             \
        *mode = h->field;                          \
        return ST_OK;                              \
    }

SETTING(cublasSetPointerMode_v2, cublasGetPointerMode_v2, pointer_mode)
SETTING(cublasSetAtomicsMode, cublasGetAtomicsMode, atomics_mode)
SETTING(cublasSetMathMode, cublasGetMathMode, math_mode)

/* cuBLAS 13.1, as the wheel's library reports it (major * 10000 + minor * 100 + patch). */
EXPORT int cublasGetVersion_v2(struct sim_cublas *h, int *version)
{
    (void)h;
    if (!version)
        return ST_INVALID;
    *version = 130101;
    return ST_OK;
}

EXPORT const char *cublasGetStatusString(int status)
{
    return status == ST_OK ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_NOT_SUPPORTED (simulated card)";
}

EXPORT const char *cublasGetStatusName(int status)
{
    return status == ST_OK ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_NOT_SUPPORTED";
}
