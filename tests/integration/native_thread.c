/* A thread that the Python interpreter never saw: allocates from a pthread created in C, so
 * its call site has native frames only (used by pyframes_workload.py). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>

int alloc_in_native_thread(size_t size);

static void *body(void *arg)
{
    void *p;
    return cudaMalloc(&p, *(size_t *)arg) == cudaSuccess ? NULL : (void *)1;
}

int alloc_in_native_thread(size_t size)
{
    pthread_t t;
    void *r = (void *)1;
    if (pthread_create(&t, NULL, body, &size) != 0)
        return -1;
    pthread_join(t, &r);
    return r == NULL ? 0 : -1;
}

int alloc_here(size_t size);

/* The same on the calling thread. */
int alloc_here(size_t size)
{
    void *p;
    return cudaMalloc(&p, size) == cudaSuccess ? 0 : -1;
}
