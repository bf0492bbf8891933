/* nccl.c: the hand-written part of the simulated libnccl.so.2. Each rank's communicator knows
 * its size and rank; collectives succeed and move nothing (the long tail, generated), which is
 * what a memory question needs: every rank allocates exactly as it would, nothing is summed. */

/* These functions are another library's API, declared in NVIDIA's headers, which the build does
 * not need: no prototype of ours to check them against. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
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
