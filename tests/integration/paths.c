/* Integration workloads: each mode drives one allocation path of the simulated GPU the way an
 * application would. Run under the preload by run_case.py, whose checks.py asserts the exact
 * figures of the report each mode leaves. Exit status: 0, or a small number naming the step
 * that went wrong (printed on stderr). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Some hooked functions are deprecated in the CUDA 13 headers; they are still exported and used. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define MiB (1ull << 20)
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
                                         cudaStream_t stream);
cudaError_t cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                         unsigned long long flags,
                                         enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
        const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
        enum cudaDriverEntryPointQueryResult *driverStatus);

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*async_fn)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t,
                            CUdriverProcAddressQueryResult *);

/* Which shared object a function pointer lives in (basename), to tell shims from real ones. */
static const char *owner(void *p)
{
    Dl_info di;
    if (!p || !dladdr(p, &di) || !di.dli_fname)
        return "?";
    const char *b = strrchr(di.dli_fname, '/');
    return b ? b + 1 : di.dli_fname;
}

static int is_shim(void *p)
{
    return strncmp(owner(p), "libvramwatch", 12) == 0;
}

static void report_path(char *out, size_t n)
{
    char host[256];
    gethostname(host, sizeof(host));
    host[255] = 0;
    for (char *s = host; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '-' || *s == '_'))
            *s = '_';
    snprintf(out, n, "%s/vramwatch-%s-%d.json", getenv("VRAMWATCH_DIR"), host, (int)getpid());
}

static int file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, needle) != NULL;
}

static void drv_context(void)
{
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0) == CUDA_SUCCESS, 2);
    CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS, 2);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS, 2);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS, 2);
}

/* cudaMalloc x3, one freed: live 6 MiB, peak 7 MiB. */
static int rt_malloc(void)
{
    void *a, *b, *c;
    CHECK(cudaMalloc(&a, 1 * MiB) == cudaSuccess, 10);
    CHECK(cudaMalloc(&b, 2 * MiB) == cudaSuccess, 11);
    CHECK(cudaMalloc(&c, 4 * MiB) == cudaSuccess, 12);
    CHECK(cudaFree(a) == cudaSuccess, 13);
    CHECK(cudaFree(NULL) == cudaSuccess, 14);           /* not a free call */
    CHECK(cudaFree((void *)0x1234) != cudaSuccess, 15); /* unknown pointer */
    void *z = (void *)1;
    CHECK(cudaMalloc(&z, 0) == cudaSuccess && z == NULL, 16); /* nothing handed out */
    return 0;
}

static int rt_pitch(void)
{
    void *p;
    size_t pitch;
    CHECK(cudaMallocPitch(&p, &pitch, 1000, 100) == cudaSuccess, 20);
    CHECK(pitch == 1024, 21);
    struct cudaPitchedPtr pp;
    struct cudaExtent ext = { .width = 1000, .height = 10, .depth = 5 };
    CHECK(cudaMalloc3D(&pp, ext) == cudaSuccess, 22);
    CHECK(pp.pitch == 1024, 23);
    return 0;
}

static int rt_managed_host(void)
{
    char *m, *h1, *h2;
    CHECK(cudaMallocManaged((void **)&m, 1 * MiB, cudaMemAttachGlobal) == cudaSuccess, 30);
    memset(m, 7, 1 * MiB); /* managed memory is host-accessible */
    CHECK(cudaMallocHost((void **)&h1, 1 * MiB) == cudaSuccess, 31);
    CHECK(cudaHostAlloc((void **)&h2, 2 * MiB, cudaHostAllocDefault) == cudaSuccess, 32);
    memset(h2, 1, 2 * MiB);
    CHECK(cudaFreeHost(h1) == cudaSuccess, 33);
    return 0;
}

/* Pools keep freed memory reserved while the release threshold allows it. */
static int rt_async(void)
{
    cudaMemPool_t def;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0) == cudaSuccess, 40);
    cuuint64_t thr = 1ull << 40;
    CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &thr) == cudaSuccess, 41);
    void *a, *b, *c, *d;
    CHECK(cudaMallocAsync(&a, 4 * MiB, 0) == cudaSuccess, 42);
    CHECK(cudaMallocAsync_ptsz(&b, 2 * MiB, 0) == cudaSuccess, 43);
    CHECK(cudaFreeAsync(a, 0) == cudaSuccess, 44);
    CHECK(cudaDeviceSynchronize() == cudaSuccess, 45);

    cudaMemPool_t pool;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof(props));
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CHECK(cudaMemPoolCreate(&pool, &props) == cudaSuccess, 46);
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr) == cudaSuccess, 47);
    CHECK(cudaMallocFromPoolAsync(&c, 8 * MiB, pool, 0) == cudaSuccess, 48);
    CHECK(cudaMallocFromPoolAsync_ptsz(&d, 2 * MiB, pool, 0) == cudaSuccess, 49);
    CHECK(cudaFreeAsync_ptsz(c, 0) == cudaSuccess, 50);
    CHECK(cudaStreamSynchronize(0) == cudaSuccess, 51);
    /* live: b 2 MiB + d 2 MiB; pools still hold a's 4 MiB and c's 8 MiB (pools hand out
     * 2 MiB granules, so the sizes here are multiples of 2 MiB) */
    return 0;
}

static int drv_direct(void)
{
    drv_context();
    CUdeviceptr a, b, m, as, ap;
    size_t pitch;
    CHECK(cuMemAlloc_v2(&a, 3 * MiB) == CUDA_SUCCESS, 60);
    CHECK(cuMemAllocPitch_v2(&b, &pitch, 1000, 10, 4) == CUDA_SUCCESS, 61);
    CHECK(cuMemAllocManaged(&m, 1 * MiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS, 62);
    CHECK(cuMemAllocAsync(&as, 2 * MiB, 0) == CUDA_SUCCESS, 63);
    CHECK(cuMemAllocAsync_ptsz(&ap, 1 * MiB, 0) == CUDA_SUCCESS, 64);
    CHECK(cuMemFreeAsync_ptsz(ap, 0) == CUDA_SUCCESS, 65);
    CHECK(cuMemFree_v2(a) == CUDA_SUCCESS, 66);
    CUmemoryPool pool;
    CUdeviceptr fp, fq;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == CUDA_SUCCESS, 76);
    CHECK(cuMemAllocFromPoolAsync(&fp, 2 * MiB, pool, 0) == CUDA_SUCCESS, 77);
    CHECK(cuMemAllocFromPoolAsync_ptsz(&fq, 4 * MiB, pool, 0) == CUDA_SUCCESS, 78);
    CHECK(cuMemFreeAsync(fq, 0) == CUDA_SUCCESS, 79);

    /* VMM: physical memory counts from create to release; address space is not memory. */
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
                  CUDA_SUCCESS,
          67);
    CUmemGenericAllocationHandle h1, h2;
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, 64 * gran, 0, 0, 0) == CUDA_SUCCESS, 68);
    CUdeviceptr va2;
    CHECK(cuMemAddressReserve(&va2, 8 * gran, 0, 0, 0) == CUDA_SUCCESS, 68);
    CHECK(cuMemAddressFree(va2, 8 * gran) == CUDA_SUCCESS, 68);
    CHECK(cuMemCreate(&h1, 4 * gran, &prop, 0) == CUDA_SUCCESS, 69);
    CHECK(cuMemCreate(&h2, 2 * gran, &prop, 0) == CUDA_SUCCESS, 70);
    CHECK(cuMemMap(va, 4 * gran, 0, h1, 0) == CUDA_SUCCESS, 71);
    CHECK(cuMemMap(va + 4 * gran, 2 * gran, 0, h2, 0) == CUDA_SUCCESS, 72);
    CHECK(cuMemUnmap(va + 4 * gran, 2 * gran) == CUDA_SUCCESS, 73);
    CHECK(cuMemRelease(h2) == CUDA_SUCCESS, 74);

    void *hp, *hq;
    CHECK(cuMemHostAlloc(&hp, 1 * MiB, 0) == CUDA_SUCCESS, 75);
    CHECK(cuMemAllocHost_v2(&hq, 3 * MiB) == CUDA_SUCCESS, 75);
    CHECK(cuMemFreeHost(hq) == CUDA_SUCCESS, 75);
    /* live: b pitch*10, m 1 MiB, as 2 MiB, fp 2 MiB, h1 4*gran */
    printf("pitch=%zu gran=%zu\n", pitch, gran);
    return 0;
}

/* dlsym on a libcuda handle (how JAX and ctypes reach the driver). */
static int drv_dlsym(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(h, 80);
    CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
    CHECK(init && init(0) == CUDA_SUCCESS, 81);
    CUresult (*retain)(CUcontext *, CUdevice) =
            (CUresult(*)(CUcontext *, CUdevice))dlsym(h, "cuDevicePrimaryCtxRetain");
    CUresult (*setcur)(CUcontext) = (CUresult(*)(CUcontext))dlsym(h, "cuCtxSetCurrent");
    CUcontext ctx;
    CHECK(retain(&ctx, 0) == CUDA_SUCCESS && setcur(ctx) == CUDA_SUCCESS, 82);
    alloc_fn al = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    free_fn fr = (free_fn)dlsym(h, "cuMemFree_v2");
    CHECK(is_shim((void *)al) && is_shim((void *)fr), 83);
    CHECK(!is_shim(dlsym(h, "cuInit")), 84); /* not hooked: handed out as it is */
    CUdeviceptr p, q;
    CHECK(al(&p, 5 * MiB) == CUDA_SUCCESS, 85);
    CHECK(al(&q, 1 * MiB) == CUDA_SUCCESS, 86);
    CHECK(fr(q) == CUDA_SUCCESS, 87);
    return 0;
}

/* cuGetProcAddress in both signatures, version cut-offs and the per-thread-stream flag. */
static int drv_procaddr(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(h, 90);
    gpa1_fn gpa1 = (gpa1_fn)dlsym(h, "cuGetProcAddress");
    gpa2_fn gpa2 = (gpa2_fn)dlsym(h, "cuGetProcAddress_v2");
    CHECK(is_shim((void *)gpa1) && is_shim((void *)gpa2), 91);
    void *p = NULL;
    CUdriverProcAddressQueryResult st;
    /* The pointer returned for "cuGetProcAddress" itself is ours, in each signature. */
    CHECK(gpa2("cuGetProcAddress", &p, 12000, 0, &st) == CUDA_SUCCESS && p == (void *)gpa2, 92);
    CHECK(gpa2("cuGetProcAddress", &p, 11030, 0, &st) == CUDA_SUCCESS && p == (void *)gpa1, 93);
    CHECK(gpa1("cuGetProcAddress", &p, 12000, 0) == CUDA_SUCCESS && p == (void *)gpa2, 94);
    /* The empty-name probe and unknown names pass through untouched. */
    CHECK(gpa2("", &p, 12000, 0, &st) != CUDA_SUCCESS, 95);
    CHECK(gpa2("cuNoSuchThing", &p, 12000, 0, NULL) != CUDA_SUCCESS, 96);
    void *init = NULL;
    CHECK(gpa2("cuInit", &init, 12000, 0, NULL) == CUDA_SUCCESS && !is_shim(init), 97);
    CHECK(((CUresult(*)(unsigned))init)(0) == CUDA_SUCCESS, 98);
    drv_context();

    alloc_fn al;
    free_fn fr;
    async_fn leg, ptsz;
    CHECK(gpa2("cuMemAlloc", (void **)&al, 12000, 0, NULL) == CUDA_SUCCESS && is_shim((void *)al),
          100);
    CHECK(gpa1("cuMemFree", (void **)&fr, 11030, 0) == CUDA_SUCCESS && is_shim((void *)fr), 101);
    CHECK(gpa2("cuMemAllocAsync", (void **)&leg, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL) ==
                  CUDA_SUCCESS,
          102);
    CHECK(gpa2("cuMemAllocAsync", (void **)&ptsz, 12000,
               CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL) == CUDA_SUCCESS,
          103);
    CHECK(is_shim((void *)leg) && is_shim((void *)ptsz) && leg != ptsz, 104);
    /* Below 3020 the driver returns the 32-bit v1 function: never wrapped. */
    void *v1 = NULL;
    if (gpa2("cuMemAlloc", &v1, 3000, 0, NULL) == CUDA_SUCCESS)
        CHECK(!is_shim(v1), 105);

    CUdeviceptr a, b, c;
    CHECK(al(&a, 7 * MiB) == CUDA_SUCCESS, 106);
    CHECK(leg(&b, 2 * MiB, 0) == CUDA_SUCCESS, 107);
    CHECK(ptsz(&c, 1 * MiB, 0) == CUDA_SUCCESS, 108);
    CHECK(fr(a) == CUDA_SUCCESS, 109);
    /* live 3 MiB, peak 10 MiB, 3 allocation calls, 1 free */
    return 0;
}

/* Driver functions got through the runtime count once, under the driver's name. */
static int rt_entrypoint(void)
{
    void *warm;
    CHECK(cudaMalloc(&warm, 1 * MiB) == cudaSuccess, 120); /* creates the context */
    alloc_fn al, al2;
    enum cudaDriverEntryPointQueryResult q;
    CHECK(cudaGetDriverEntryPoint("cuMemAlloc", (void **)&al, cudaEnableDefault, &q) == cudaSuccess,
          121);
    CHECK(cudaGetDriverEntryPointByVersion("cuMemAlloc", (void **)&al2, 12000, cudaEnableDefault,
                                           &q) == cudaSuccess,
          122);
    CHECK(is_shim((void *)al) && is_shim((void *)al2), 123);
    async_fn as1, as2;
    CHECK(cudaGetDriverEntryPoint_ptsz("cuMemAllocAsync", (void **)&as1,
                                       cudaEnablePerThreadDefaultStream, &q) == cudaSuccess,
          126);
    CHECK(cudaGetDriverEntryPointByVersion_ptsz("cuMemAllocAsync", (void **)&as2, 12000,
                                                cudaEnableLegacyStream, &q) == cudaSuccess,
          127);
    CHECK(is_shim((void *)as1) && is_shim((void *)as2) && as1 != as2, 128);
    CUdeviceptr a, b;
    CHECK(al(&a, 2 * MiB) == CUDA_SUCCESS, 124);
    CHECK(al2(&b, 4 * MiB) == CUDA_SUCCESS, 125);
    /* live 7 MiB in 3 calls: 1 cudaMalloc (its inner driver call not counted) + 2 cuMemAlloc_v2 */
    return 0;
}

/* Out of memory on a 1 GiB card (SIMGPU_MEMORY=1GiB, no context bytes): PyTorch's pattern. */
static int oom(void)
{
    char path[4096];
    report_path(path, sizeof(path));
    void *big1, *big2, *c1, *c2, *x;
    CHECK(cudaMalloc(&big1, 400 * MiB) == cudaSuccess, 130);
    CHECK(cudaMalloc(&c1, 100 * MiB) == cudaSuccess, 131);
    CHECK(cudaMalloc(&c2, 100 * MiB) == cudaSuccess, 132);
    /* 1: fails, the "cache" is released, the retry succeeds: a cache flush, not an OOM. */
    CHECK(cudaMalloc(&x, 500 * MiB) == cudaErrorMemoryAllocation, 133);
    CHECK(access(path, F_OK) == 0 && file_has(path, "\"reason\":\"oom\""), 134); /* before return */
    cudaGetLastError();
    CHECK(cudaFree(c1) == cudaSuccess && cudaFree(c2) == cudaSuccess, 135);
    CHECK(cudaMalloc(&x, 500 * MiB) == cudaSuccess, 136);
    /* 2: fails, the last 10 MiB of "cache" is released, the retry fails: the OOM, 10 MiB flushed
     * before its retry. */
    CHECK(cudaMalloc(&c1, 10 * MiB) == cudaSuccess, 131);
    CHECK(cudaMalloc(&big2, 300 * MiB) == cudaErrorMemoryAllocation, 137);
    CHECK(cudaFree(c1) == cudaSuccess, 135);
    CHECK(cudaMalloc(&big2, 300 * MiB) == cudaErrorMemoryAllocation, 138);
    CHECK(file_has(path, "\"retried\":\"failed\""), 139);
    return 0;
}

/* Enough free bytes in total, no hole large enough: the failure is fragmentation. */
static int fragmentation(void)
{
    void *p[10];
    for (int i = 0; i < 10; i++)
        CHECK(cudaMalloc(&p[i], 100 * MiB) == cudaSuccess, 140);
    for (int i = 0; i < 10; i += 2)
        CHECK(cudaFree(p[i]) == cudaSuccess, 141);
    void *x;
    /* 1 GiB card: 500 MiB live, 524 MiB free, largest hole 100 MiB (or the 24 MiB tail) */
    CHECK(cudaMalloc(&x, 200 * MiB) == cudaErrorMemoryAllocation, 142);
    return 0;
}

struct thr {
    int id;
};

static void *thread_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        void *p;
        if (cudaMalloc(&p, 4096) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return (void *)1;
    }
    void *keep;
    if (cudaMalloc(&keep, 8192) != cudaSuccess)
        return (void *)1;
    return NULL;
}

static int threads(void)
{
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        CHECK(pthread_create(&t[i], NULL, thread_main, NULL) == 0, 150);
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECK(r == NULL, 151);
    }
    /* live 8 x 8192, 8 x 20001 allocations, 8 x 20000 frees */
    return 0;
}

/* Sixteen threads whose first CUDA calls are simultaneous allocations (the first_threads case
 * slows the library's driver lookup down so that they all race it). */
static pthread_barrier_t first_barrier;

static void *first_thread(void *arg)
{
    (void)arg;
    void *p;
    pthread_barrier_wait(&first_barrier);
    return cudaMalloc(&p, 4096) == cudaSuccess ? NULL : (void *)1;
}

static int first_threads(void)
{
    pthread_t t[16];
    CHECK(pthread_barrier_init(&first_barrier, NULL, 16) == 0, 155);
    for (int i = 0; i < 16; i++)
        CHECK(pthread_create(&t[i], NULL, first_thread, NULL) == 0, 156);
    for (int i = 0; i < 16; i++) {
        void *r;
        pthread_join(t[i], &r);
        CHECK(r == NULL, 157);
    }
    return 0;
}

/* A parent that allocates and forks: a child that does not allocate writes nothing, one that
 * execs a program writes nothing, one that allocates writes its own report with only its own
 * allocations. The children end with exit(), so the library's exit handler runs in each. */
static int fork_children(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 10 * MiB) == cudaSuccess, 160);
    pid_t quiet = fork();
    if (quiet == 0)
        exit(0);
    pid_t execd = fork();
    if (execd == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    pid_t busy = fork();
    if (busy == 0) {
        void *q;
        if (cudaMalloc(&q, 3 * MiB) != cudaSuccess)
            exit(5);
        exit(0);
    }
    int st;
    pid_t kids[3] = { quiet, execd, busy };
    for (int i = 0; i < 3; i++) {
        CHECK(waitpid(kids[i], &st, 0) == kids[i], 161);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, 162);
    }
    printf("busy_child=%d\n", (int)busy);
    return 0;
}

/* Two devices: allocations are counted where they were made, and the report asks each
 * device's own free memory although the thread ends on device 1. */
static int two_devices(void)
{
    void *a, *b, *c;
    CHECK(cudaSetDevice(0) == cudaSuccess && cudaMalloc(&a, 1 * MiB) == cudaSuccess, 190);
    CHECK(cudaSetDevice(1) == cudaSuccess && cudaMalloc(&b, 2 * MiB) == cudaSuccess, 191);
    CHECK(cudaMalloc(&c, 4 * MiB) == cudaSuccess && cudaFree(c) == cudaSuccess, 192);
    return 0;
}

/* Under VRAMWATCH_LIMIT=1GiB on a 4 GiB simulated card with a 100 MiB context: every query
 * describes a 1 GiB card, and allocations beyond it fail through every path as on that card
 * (enforce), or succeed and are recorded as crossings (observe, argv[2] == "observe"). */
static int limit_mode(bool observe)
{
    size_t f = 0, t = 0, dt = 0;
    struct cudaDeviceProp prop;
    void *a, *b, *c;
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess, 200);
    CHECK(t == 1024 * MiB && f == 924 * MiB, 201);
    CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.totalGlobalMem == 1024 * MiB,
          202);
    CHECK(cuDeviceTotalMem_v2(&dt, 0) == CUDA_SUCCESS && dt == 1024 * MiB, 203);
    CHECK(cudaMalloc(&a, 900 * MiB) == cudaSuccess, 204);
    CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && t == 1024 * MiB && f == 24 * MiB, 205);
    if (!observe) {
        CUdeviceptr d;
        CUmemGenericAllocationHandle h;
        CUmemAllocationProp pr;
        memset(&pr, 0, sizeof(pr));
        pr.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        pr.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        pr.location.id = 0;
        CHECK(cudaMalloc(&b, 100 * MiB) == cudaErrorMemoryAllocation, 206);
        cudaGetLastError();
        CHECK(cuMemAlloc_v2(&d, 100 * MiB) == CUDA_ERROR_OUT_OF_MEMORY, 207);
        CHECK(cudaMallocAsync(&b, 100 * MiB, 0) == cudaErrorMemoryAllocation, 208);
        CHECK(cuMemCreate(&h, 64 * MiB, &pr, 0) == CUDA_ERROR_OUT_OF_MEMORY, 209);
        CHECK(cudaMallocManaged(&b, 100 * MiB, cudaMemAttachGlobal) == cudaErrorMemoryAllocation,
              210);
        CHECK(cudaMalloc(&c, 20 * MiB) == cudaSuccess, 211); /* still fits: 1020 of 1024 MiB */
        void *host;
        CHECK(cudaMallocHost(&host, 512 * MiB) == cudaSuccess, 212); /* host memory: no limit */
    } else {
        CHECK(cudaMalloc(&b, 200 * MiB) == cudaSuccess, 213);
        CHECK(cudaMalloc(&c, 300 * MiB) == cudaSuccess, 214);
        CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess && t == 1024 * MiB && f == 0, 215);
    }
    return 0;
}

/* NVML agrees with the CUDA queries, also under a limit: a tool asking NVML (pynvml, nvitop)
 * sees the same card as the application. Found with dlopen + dlsym, as pynvml does. */
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_mem_fn)(void *, unsigned long long *);
typedef int (*nvml_mem2_fn)(void *, void *);

static int nvml(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    CHECK(h, 220);
    nvml_init_fn init = (nvml_init_fn)dlsym(h, "nvmlInit_v2");
    nvml_handle_fn handle = (nvml_handle_fn)dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    nvml_mem_fn mem = (nvml_mem_fn)dlsym(h, "nvmlDeviceGetMemoryInfo");
    nvml_mem2_fn mem2 = (nvml_mem2_fn)dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
    CHECK(init && handle && mem && mem2 && is_shim((void *)mem) && is_shim((void *)mem2), 221);
    CHECK(init() == 0, 222);
    void *a;
    CHECK(cudaMalloc(&a, 300 * MiB) == cudaSuccess, 223);
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess, 224);
    void *dev;
    CHECK(handle(0, &dev) == 0, 225);
    unsigned long long m[3]; /* total, free, used */
    CHECK(mem(dev, m) == 0, 226);
    CHECK(m[0] == t && m[1] == f, 227);
    struct {
        unsigned int version;
        unsigned long long total, reserved, free, used;
    } m2;
    memset(&m2, 0, sizeof(m2));
    m2.version = (unsigned int)(sizeof(m2) | (2u << 24));
    CHECK(mem2(dev, &m2) == 0, 228);
    CHECK(m2.total == t && m2.free + m2.used + m2.reserved == t, 229);
    printf("nvml total=%llu free=%llu\n", m[0], m[1]);
    return 0;
}

static int limit_enforce(void)
{
    return limit_mode(false);
}

static int limit_observe(void)
{
    return limit_mode(true);
}

/* vramwatch_dump through the public API, found the way Python's ctypes.CDLL(None) finds it. A
 * dump on request is kept in a file of its own, numbered, never replaced (and written as the
 * process's report too): a file planted at the first number (an earlier process that had our
 * pid) stays as it was, and the dump takes the next. */
static int dump(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 1 * MiB) == cudaSuccess, 170);
    int (*dumpf)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "vramwatch_dump");
    int (*mark)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "vramwatch_mark");
    CHECK(dumpf && mark, 171);
    CHECK(mark("epoch 1") == 0, 172);
    char path[4096], planted[4200], second[4200];
    report_path(path, sizeof(path));
    size_t n = strlen(path) - 5; /* less ".json" */
    snprintf(planted, sizeof(planted), "%.*s-request-1.json", (int)n, path);
    snprintf(second, sizeof(second), "%.*s-request-2.json", (int)n, path);
    FILE *f = fopen(planted, "w");
    CHECK(f && fputs("planted\n", f) >= 0 && fclose(f) == 0, 176);
    CHECK(dumpf("no such reason") == 0, 173);
    CHECK(file_has(planted, "planted") && !file_has(planted, "\"reason\""), 177);
    CHECK(file_has(second, "\"reason\":\"request\""), 174);
    struct stat sb;
    CHECK(stat(second, &sb) == 0 && (sb.st_mode & 0777) == 0600, 175);
    CHECK(file_has(path, "\"reason\":\"request\""), 178); /* the process's report as well */
    CHECK(cudaMalloc(&p, 1 * MiB) == cudaSuccess, 179);
    CHECK(dumpf("request") == 0, 169);
    unlink(planted);
    return 0;
}

/* A process that never allocates: it links CUDA and asks questions, but writes nothing. */
static int queries_only(void)
{
    int n = 0;
    size_t f, t, dt;
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceCount(&n) == cudaSuccess && n >= 1, 180);
    CHECK(cudaMemGetInfo(&f, &t) == cudaSuccess && t == 16ull << 30, 181);
    CHECK(cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.totalGlobalMem == t, 182);
    CHECK(cuDeviceTotalMem_v2(&dt, 0) == CUDA_SUCCESS && dt == t, 183);
    CUmemoryPool pool;
    cuuint64_t used = 1;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == CUDA_SUCCESS, 184);
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS &&
                  used == 0,
          185);
    return 0;
}

/* One rank of a multi-process job: allocates PATHS_MIB (a comma list of MiB), waits
 * PATHS_DELAY_MS, then, with PATHS_FAIL_MIB, asks for that much, which must run out of memory. */
static int rank_mode(void)
{
    const char *list = getenv("PATHS_MIB");
    const char *delay = getenv("PATHS_DELAY_MS");
    const char *fail = getenv("PATHS_FAIL_MIB");
    CHECK(list != NULL, 190);
    void *p;
    for (const char *s = list; *s;) {
        char *end;
        unsigned long long mib = strtoull(s, &end, 10);
        CHECK(end != s && mib > 0, 191);
        CHECK(cudaMalloc(&p, mib * MiB) == cudaSuccess, 192);
        s = *end == ',' ? end + 1 : end;
    }
    if (delay)
        usleep((useconds_t)strtoul(delay, NULL, 10) * 1000u);
    if (fail)
        CHECK(cudaMalloc(&p, strtoull(fail, NULL, 10) * MiB) == cudaErrorMemoryAllocation, 193);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(void);
    } modes[] = {
        { "rt_malloc", rt_malloc },
        { "rt_pitch", rt_pitch },
        { "rt_managed_host", rt_managed_host },
        { "rt_async", rt_async },
        { "drv_direct", drv_direct },
        { "drv_dlsym", drv_dlsym },
        { "drv_procaddr", drv_procaddr },
        { "rt_entrypoint", rt_entrypoint },
        { "oom", oom },
        { "fragmentation", fragmentation },
        { "threads", threads },
        { "first_threads", first_threads },
        { "fork", fork_children },
        { "dump", dump },
        { "queries_only", queries_only },
        { "two_devices", two_devices },
        { "limit_enforce", limit_enforce },
        { "limit_observe", limit_observe },
        { "nvml", nvml },
        { "rank", rank_mode },
    };
    if (argc != 2) {
        fprintf(stderr, "usage: paths MODE\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
        if (!strcmp(argv[1], modes[i].name))
            return modes[i].fn();
    fprintf(stderr, "paths: unknown mode %s\n", argv[1]);
    return 2;
}
