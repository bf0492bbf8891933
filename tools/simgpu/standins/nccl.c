/* nccl.c: the hand-written part of the simulated libnccl.so.2. Each rank's communicator knows
 * its size and rank. Collectives cross no process: each rank acts as if every other rank had
 * sent what it sent itself, which is exact for what frameworks check through collectives (DDP
 * compares every rank's parameter shapes with an all-gather and a broadcast) and leaves the
 * memory untouched: every rank allocates exactly what it would on real cards. The simulated
 * device memory holds the bytes copies write (tools/simgpu/driver.c), so these copies are real. */

/* These functions are another library's API, declared in NVIDIA's headers, which the build does
 * not need: no prototype of ours to check them against. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, INVALID_ARGUMENT = 4, SYSTEM_ERROR = 2 };

/* NCCL 2.30.7, as the nvidia-nccl-cu13 wheel: major * 10000 + minor * 100 + patch. */
#define SIM_NCCL_VERSION 23007

struct sim_comm {
    int nranks, rank;
};

/* ncclUniqueId is 128 opaque bytes that rank 0 makes and every rank passes back. */
typedef struct {
    char bytes[128];
} unique_id;

EXPORT int ncclGetVersion(int *version)
{
    if (!version)
        return INVALID_ARGUMENT;
    *version = SIM_NCCL_VERSION;
    return OK;
}

EXPORT int ncclGetUniqueId(unique_id *id)
{
    if (!id)
        return INVALID_ARGUMENT;
    memset(id, 0, sizeof *id);
    snprintf(id->bytes, sizeof id->bytes, "simulated-nccl");
    return OK;
}

static int new_comm(struct sim_comm **comm, int nranks, int rank)
{
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
        return INVALID_ARGUMENT;
    *comm = calloc(1, sizeof **comm);
    if (!*comm)
        return SYSTEM_ERROR;
    (*comm)->nranks = nranks;
    (*comm)->rank = rank;
    return OK;
}

EXPORT int ncclCommInitRank(struct sim_comm **comm, int nranks, unique_id id, int rank)
{
    (void)id;
    return new_comm(comm, nranks, rank);
}

EXPORT int ncclCommInitRankConfig(struct sim_comm **comm, int nranks, unique_id id, int rank,
                                  void *config)
{
    (void)id, (void)config;
    return new_comm(comm, nranks, rank);
}

EXPORT int ncclCommInitRankScalable(struct sim_comm **comm, int nranks, int rank, int nIds,
                                    unique_id *ids, void *config)
{
    (void)nIds, (void)ids, (void)config;
    return new_comm(comm, nranks, rank);
}

EXPORT int ncclCommSplit(struct sim_comm *comm, int color, int key, struct sim_comm **newcomm,
                         void *config)
{
    (void)config;
    if (!comm || !newcomm)
        return INVALID_ARGUMENT;
    if (color < 0) { /* NCCL_SPLIT_NOCOLOR: this rank takes no part */
        *newcomm = NULL;
        return OK;
    }
    /* Every rank of the parent in one group: the simplest split that keeps rank < size. */
    return new_comm(newcomm, comm->nranks, key >= 0 && key < comm->nranks ? key : comm->rank);
}

EXPORT int ncclCommCount(const struct sim_comm *comm, int *count)
{
    if (!comm || !count)
        return INVALID_ARGUMENT;
    *count = comm->nranks;
    return OK;
}

EXPORT int ncclCommUserRank(const struct sim_comm *comm, int *rank)
{
    if (!comm || !rank)
        return INVALID_ARGUMENT;
    *rank = comm->rank;
    return OK;
}

EXPORT int ncclCommGetAsyncError(struct sim_comm *comm, int *asyncError)
{
    (void)comm;
    if (!asyncError)
        return INVALID_ARGUMENT;
    *asyncError = OK;
    return OK;
}

EXPORT int ncclCommDestroy(struct sim_comm *comm)
{
    free(comm);
    return OK;
}

EXPORT int ncclCommAbort(struct sim_comm *comm)
{
    free(comm);
    return OK;
}

EXPORT const char *ncclGetErrorString(int result)
{
    return result == OK ? "no error" : "simulated NCCL: unsupported call";
}

EXPORT const char *ncclGetLastError(struct sim_comm *comm)
{
    (void)comm;
    return "";
}

/* ncclDataType_t: int8, uint8, int32, uint32, int64, uint64, float16, float32, float64,
 * bfloat16, float8e4m3, float8e5m2. */
static size_t type_size(int datatype)
{
    static const unsigned char sizes[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
    return datatype >= 0 && (size_t)datatype < sizeof sizes ? sizes[datatype] : 0;
}

/* The bytes of `count` elements of `datatype` for a collective on `comm`: 0 with *bytes set, or
 * INVALID_ARGUMENT for no communicator or an unknown type. */
static int span(const struct sim_comm *comm, size_t count, int datatype, size_t *bytes)
{
    size_t sz = type_size(datatype);
    if (!comm || !sz)
        return INVALID_ARGUMENT;
    *bytes = count * sz;
    return OK;
}

/* A collective's copy goes through the simulated driver's read-back rule (readback.c), like a
 * cudaMemcpy: what the rank put in its buffer arrives, and a kernel's output arrives as zeros.
 * The driver is in the process (the runtime loaded it) but not in the global scope. */
static void (*driver_copy)(void *dst, const void *src, size_t n);
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void find_driver_copy(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *sym = h ? dlsym(h, "simgpu_copy") : NULL;
    memcpy(&driver_copy, &sym, sizeof sym);
    /* the handle stays: the driver stays loaded as long as the runtime does */
}

static int replicate(const void *send, void *recv, size_t bytes, int copies)
{
    pthread_once(&driver_once, find_driver_copy);
    for (int i = 0; i < copies; i++) {
        char *dst = (char *)recv + (size_t)i * bytes;
        if (!bytes || dst == send)
            continue;
        if (driver_copy)
            driver_copy(dst, send, bytes);
        else
            memmove(dst, send, bytes);
    }
    return OK;
}

EXPORT int ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, int datatype,
                         struct sim_comm *comm, void *stream)
{
    (void)stream;
    size_t bytes;
    if (span(comm, sendcount, datatype, &bytes) != OK)
        return INVALID_ARGUMENT;
    return replicate(sendbuff, recvbuff, bytes, comm->nranks);
}

/* Every rank contributed the same: the average, the maximum and the minimum are this rank's
 * values, and a sum differs only in value, which nothing reads for memory. */
EXPORT int ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op,
                         struct sim_comm *comm, void *stream)
{
    (void)op, (void)stream;
    size_t bytes;
    if (span(comm, count, datatype, &bytes) != OK)
        return INVALID_ARGUMENT;
    return replicate(sendbuff, recvbuff, bytes, 1);
}

EXPORT int ncclReduce(const void *sendbuff, void *recvbuff, size_t count, int datatype, int op,
                      int root, struct sim_comm *comm, void *stream)
{
    (void)op, (void)stream;
    size_t bytes;
    if (span(comm, count, datatype, &bytes) != OK)
        return INVALID_ARGUMENT;
    return comm->rank == root ? replicate(sendbuff, recvbuff, bytes, 1) : OK;
}

EXPORT int ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, int datatype,
                         int root, struct sim_comm *comm, void *stream)
{
    (void)root, (void)stream;
    size_t bytes;
    if (span(comm, count, datatype, &bytes) != OK)
        return INVALID_ARGUMENT;
    return replicate(sendbuff, recvbuff, bytes, 1);
}

EXPORT int ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount, int datatype,
                             int op, struct sim_comm *comm, void *stream)
{
    (void)op, (void)stream;
    size_t bytes;
    if (span(comm, recvcount, datatype, &bytes) != OK)
        return INVALID_ARGUMENT;
    return replicate((const char *)sendbuff + (size_t)comm->rank * bytes, recvbuff,
                     bytes, 1);
}

EXPORT int ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, int datatype,
                        struct sim_comm *comm, void *stream)
{
    (void)stream;
    size_t bytes;
    if (span(comm, count, datatype, &bytes) != OK)
        return INVALID_ARGUMENT;
    return replicate(sendbuff, recvbuff, bytes * (size_t)comm->nranks, 1);
}
