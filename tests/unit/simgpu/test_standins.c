/* test_standins.c: what a framework's training step asks of the simulated runtime besides
 * memory (launch configuration, streams, events, copies, attributes) and of the hand-written
 * stand-ins for cuBLAS, cuBLASLt and NCCL (tools/simgpu/standins), called as PyTorch calls
 * them. Linked like PyTorch's libraries: the runtime and the stand-ins, never the driver. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "helpers.h"
#include "standins/cublaslt.h"

#define OK(call) cr_assert_eq((call), cudaSuccess, "%s", #call)

/* The stand-ins' own API, declared as NVIDIA's headers do (the build has none of them). */
int cublasCreate_v2(void **handle);
int cublasDestroy_v2(void *handle);
int cublasSetStream_v2(void *handle, void *stream);
int cublasGetStream_v2(void *handle, void **stream);
int cublasSgemm_v2(void);
size_t cublasLtGetVersion(void);
int cublasLtMatmulDescCreate(void **desc, int computeType, int scaleType);
int cublasLtMatmulDescDestroy(void *desc);
int cublasLtMatmulAlgoGetHeuristic(void *handle, void *desc, void *a, void *b, void *c, void *d,
                                   void *pref, int requested, struct heuristic_result *results,
                                   int *returned);
typedef struct {
    char bytes[128];
} nccl_id;
int ncclGetUniqueId(nccl_id *id);
int ncclCommInitRank(void **comm, int nranks, nccl_id id, int rank);
int ncclCommCount(const void *comm, int *count);
int ncclCommUserRank(const void *comm, int *rank);
int ncclCommDestroy(void *comm);
int ncclAllGather(const void *send, void *recv, size_t count, int type, void *comm, void *stream);
int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, void *comm,
                  void *stream);
size_t cudnnGetVersion(void);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                       void *stream);
void **__cudaRegisterFatBinary(void *fatCubin);

static void setup(void)
{
    sim_env("1GiB", NULL, NULL);
}

TestSuite(standins, .init = setup);

Test(standins, launch_configuration_goes_from_push_to_pop)
{
    cr_assert_neq(__cudaRegisterFatBinary(NULL), NULL);
    dim3 g = { 7, 2, 1 }, b = { 128, 1, 1 }, g2, b2;
    size_t shm = 0;
    void *stream = NULL, *want = (void *)0x1234;
    cr_assert_eq(__cudaPushCallConfiguration(g, b, 4096, want), 0);
    OK(__cudaPopCallConfiguration(&g2, &b2, &shm, &stream));
    cr_assert(g2.x == 7 && g2.y == 2 && b2.x == 128 && shm == 4096 && stream == want);
    OK(cudaLaunchKernel((const void *)setup, g2, b2, NULL, shm, (cudaStream_t)stream));
}

Test(standins, streams_and_events_are_distinct_and_complete)
{
    cudaStream_t s1, s2;
    cudaEvent_t e;
    int least, greatest, prio;
    OK(cudaStreamCreateWithPriority(&s1, cudaStreamNonBlocking, -3));
    OK(cudaStreamCreate(&s2));
    cr_assert(s1 && s2 && s1 != s2);
    OK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cr_assert(greatest < least, "PyTorch needs a range of priorities");
    OK(cudaStreamGetPriority(s1, &prio));
    cr_assert_eq(prio, -3);
    OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    OK(cudaEventRecord(e, s1));
    OK(cudaStreamWaitEvent(s2, e, 0));
    OK(cudaEventQuery(e));
    OK(cudaStreamQuery(s2));
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
    OK(cudaStreamIsCapturing(s1, &st));
    cr_assert_eq(st, cudaStreamCaptureStatusNone);
    OK(cudaEventDestroy(e));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
}

static int host_fn_calls;
static void host_fn(void *arg)
{
    host_fn_calls += *(int *)arg;
}

Test(standins, host_functions_are_called)
{
    int three = 3;
    OK(cudaLaunchHostFunc(NULL, host_fn, &three));
    cr_assert_eq(host_fn_calls, 3);
}

Test(standins, occupancy_and_function_attributes_are_never_zero)
{
    int n = 0;
    struct cudaFuncAttributes fa;
    for (int bs = 32; bs <= 1024; bs *= 2) {
        OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, (const void *)setup, bs, 0));
        cr_assert(n >= 1, "block size %d: %d blocks", bs, n);
    }
    OK(cudaFuncGetAttributes(&fa, (const void *)setup));
    cr_assert(fa.maxThreadsPerBlock > 0);
}

Test(standins, copies_read_back_what_was_written_and_zeros_elsewhere)
{
    void *d;
    char in[64], out[64];
    memset(in, 'x', sizeof in);
    OK(cudaMalloc(&d, 1 << 20));
    memset(out, 1, sizeof out);
    OK(cudaMemcpy(out, (char *)d + 4096, sizeof out, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sizeof out; i++)
        cr_assert_eq(out[i], 0, "memory nothing wrote reads as zeros");
    OK(cudaMemcpyAsync(d, in, sizeof in, cudaMemcpyHostToDevice, NULL));
    OK(cudaMemcpy(out, d, sizeof out, cudaMemcpyDefault));
    cr_assert_eq(memcmp(in, out, sizeof in), 0);
    OK(cudaMemsetAsync(d, 7, 16, NULL));
    OK(cudaMemcpy(out, d, 16, cudaMemcpyDeviceToHost));
    cr_assert_eq(out[0], 7);
    cr_assert_eq(out[15], 7);
    struct cudaPointerAttributes pa;
    OK(cudaPointerGetAttributes(&pa, d));
    cr_assert_eq(pa.type, cudaMemoryTypeDevice);
    OK(cudaPointerGetAttributes(&pa, in));
    cr_assert_eq(pa.type, cudaMemoryTypeUnregistered);
    OK(cudaFree(d));
}

Test(standins, device_attributes_are_the_drivers)
{
    int major = 0, sms = 0;
    struct cudaDeviceProp p;
    OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    OK(cudaGetDeviceProperties(&p, 0));
    cr_assert_eq(major, p.major);
    cr_assert_eq(sms, p.multiProcessorCount);
    char bus[32];
    OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
    cr_assert(strchr(bus, ':') != NULL, "%s", bus);
}

Test(standins, cublas_handles_and_the_long_tail)
{
    void *h1, *h2, *s = NULL;
    cr_assert_eq(cublasCreate_v2(&h1), 0);
    cr_assert_eq(cublasCreate_v2(&h2), 0);
    cr_assert(h1 && h2 && h1 != h2);
    cr_assert_eq(cublasSetStream_v2(h1, (void *)0x42), 0);
    cr_assert_eq(cublasGetStream_v2(h1, &s), 0);
    cr_assert_eq(s, (void *)0x42);
    cr_assert_eq(cublasSgemm_v2(), 0, "a generated stub succeeds and does nothing");
    cublasDestroy_v2(h1);
    cublasDestroy_v2(h2);
}

Test(standins, cublaslt_offers_one_algorithm_without_workspace)
{
    void *desc;
    struct heuristic_result r[4];
    int n = 0;
    memset(r, 0xff, sizeof r);
    cr_assert(cublasLtGetVersion() >= 130000);
    cr_assert_eq(cublasLtMatmulDescCreate(&desc, 68, 0), 0);
    cr_assert_eq(cublasLtMatmulAlgoGetHeuristic(NULL, desc, NULL, NULL, NULL, NULL, NULL, 4, r, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(r[0].state, 0);
    cr_assert_eq(r[0].workspace_bytes, 0);
    cublasLtMatmulDescDestroy(desc);
}

Test(standins, cudnn_reports_the_wheels_version)
{
    cr_assert_eq(cudnnGetVersion() / 10000, 9);
}

Test(standins, nccl_collectives_act_as_if_every_rank_sent_the_same)
{
    nccl_id id;
    void *comm;
    int count = 0, rank = -1;
    cr_assert_eq(ncclGetUniqueId(&id), 0);
    cr_assert_eq(ncclCommInitRank(&comm, 2, id, 1), 0);
    cr_assert_eq(ncclCommCount(comm, &count), 0);
    cr_assert_eq(ncclCommUserRank(comm, &rank), 0);
    cr_assert(count == 2 && rank == 1);
    /* DDP's shape check: every rank's parameter count gathered, then compared. */
    void *d;
    int64_t mine = 10, all[2] = { 0, 0 };
    OK(cudaMalloc(&d, 4096));
    OK(cudaMemcpy(d, &mine, sizeof mine, cudaMemcpyHostToDevice));
    cr_assert_eq(ncclAllGather(d, (char *)d + 64, 1, 4 /* int64 */, comm, NULL), 0);
    OK(cudaMemcpy(all, (char *)d + 64, sizeof all, cudaMemcpyDeviceToHost));
    cr_assert(all[0] == 10 && all[1] == 10);
    cr_assert_eq(ncclAllReduce(d, (char *)d + 256, 1, 4, 0, comm, NULL), 0);
    cr_assert_eq(ncclAllGather(d, d, 1, 99, comm, NULL), 4, "an unknown type is refused");
    OK(cudaFree(d));
    cr_assert_eq(ncclCommDestroy(comm), 0);
}
