/* cudnn.c: the hand-written part of the simulated libcudnn.so.9: the version PyTorch checks
 * against the one it was built with, a handle, error strings. The simulated card does not
 * emulate cuDNN's graph API (docs/simgpu.md, "cuDNN"): PyTorch is told to leave cuDNN off, and
 * these exist so that importing it and asking for the version work as on a real card. */

/* These functions are another library's API, declared in NVIDIA's headers, which the build does
 * not need: no prototype of ours to check them against. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

enum { ST_OK = 0, ST_BAD_PARAM = 3, ST_NOT_SUPPORTED = 9 };

/* 9.24.0, the nvidia-cudnn-cu13 wheel PyTorch 2.14.1 asks for (major * 10000 + minor * 100). */
#define SIM_CUDNN_VERSION 92400

EXPORT size_t cudnnGetVersion(void)
{
    return SIM_CUDNN_VERSION;
}

EXPORT size_t cudnnGetCudartVersion(void)
{
    return 13000;
}

/* libraryPropertyType: 0 major, 1 minor, 2 patch level. */
EXPORT int cudnnGetProperty(int type, int *value)
{
    if (!value)
        return ST_BAD_PARAM;
    *value = type == 0 ? SIM_CUDNN_VERSION / 10000 : type == 1 ? SIM_CUDNN_VERSION / 100 % 100 : 0;
    return ST_OK;
}

EXPORT int cudnnCreate(void **handle)
{
    if (!handle)
        return ST_BAD_PARAM;
    *handle = calloc(1, 64);
    return *handle ? ST_OK : 4; /* CUDNN_STATUS_ALLOC_FAILED */
}

EXPORT int cudnnDestroy(void *handle)
{
    free(handle);
    return ST_OK;
}

EXPORT const char *cudnnGetErrorString(int status)
{
    return status == ST_OK ? "CUDNN_STATUS_SUCCESS"
                           : "CUDNN_STATUS_NOT_SUPPORTED (cuDNN is not emulated on the simulated card)";
}

EXPORT void cudnnGetLastErrorString(char *message, size_t max)
{
    if (message && max)
        message[0] = '\0';
}
