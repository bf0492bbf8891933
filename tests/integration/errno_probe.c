/* The host process sees no difference in errno (issue 24): every hooked call leaves errno as the
 * real function left it, and a call the library answers itself (VRAMWATCH_LIMIT refusing it)
 * leaves it as it was. The program runs itself twice per scenario, without the preload and with
 * it, and compares what it printed: errno after each call, set to 4242 before each.
 *
 * usage: errno_probe LIB [SANITIZER_RUNTIME]   (compare; exit 0 when the same, 1 otherwise)
 *        errno_probe --child plain|limit        (print the figures)
 * The simulated GPU comes from LD_LIBRARY_PATH, as the program is linked to it. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define MiB (1ull << 20)
#define PROBE(label, call)                                   \
    do {                                                     \
        errno = 4242;                                        \
        call;                                                \
        printf("%-28s errno=%d\n", label, errno);            \
    } while (0)

typedef CUresult (*gpa1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa2_fn)(const char *, void **, int, cuuint64_t,
                            CUdriverProcAddressQueryResult *);
typedef int (*nvml_init_fn)(void);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_mem_fn)(void *, unsigned long long *);

static int child(const char *scenario)
{
    bool limit = strcmp(scenario, "limit") == 0;
    void *a = NULL, *b = NULL, *big = NULL, *async = NULL;
    CUdeviceptr d = 0;
    size_t f = 0, t = 0;
    cudaError_t rc = cudaSuccess;
    PROBE("cudaMalloc first", rc = cudaMalloc(&a, MiB));
    PROBE("cudaMalloc second", cudaMalloc(&b, 2 * MiB));
    PROBE("cudaFree", cudaFree(b));
    PROBE("cudaFree(NULL)", cudaFree(NULL));
    PROBE("cudaFree unknown", cudaFree((void *)(uintptr_t)0x1000));
    PROBE("cuMemAlloc_v2", cuMemAlloc_v2(&d, MiB));
    PROBE("cuMemFree_v2", cuMemFree_v2(d));
    PROBE("cudaMallocAsync", cudaMallocAsync(&async, MiB, 0));
    PROBE("cudaFreeAsync", cudaFreeAsync(async, 0));
    PROBE("cudaMemGetInfo", cudaMemGetInfo(&f, &t));
    PROBE("cuMemGetInfo_v2", cuMemGetInfo_v2(&f, &t));
    PROBE("cuDeviceTotalMem_v2", cuDeviceTotalMem_v2(&f, 0));
    struct cudaDeviceProp prop;
    PROBE("cudaGetDeviceProperties", cudaGetDeviceProperties(&prop, 0));
    void *host = NULL, *managed = NULL, *pitched = NULL;
    size_t pitch = 0;
    PROBE("cudaMallocHost", cudaMallocHost(&host, 4096));
    PROBE("cudaFreeHost", cudaFreeHost(host));
    PROBE("cudaMallocManaged", cudaMallocManaged(&managed, MiB, cudaMemAttachGlobal));
    PROBE("cudaFree managed", cudaFree(managed));
    PROBE("cudaMallocPitch", cudaMallocPitch(&pitched, &pitch, 1000, 100));
    PROBE("cudaFree pitched", cudaFree(pitched));
    /* Virtual memory management: physical memory from cuMemCreate, address space apart. */
    CUmemAllocationProp vp;
    memset(&vp, 0, sizeof(vp));
    vp.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    vp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    vp.location.id = 0;
    size_t gran = 0;
    if (cuMemGetAllocationGranularity(&gran, &vp, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
                CUDA_SUCCESS &&
        gran) {
        CUmemGenericAllocationHandle vh = 0;
        CUdeviceptr va = 0;
        PROBE("cuMemCreate", cuMemCreate(&vh, gran, &vp, 0));
        PROBE("cuMemAddressReserve", cuMemAddressReserve(&va, gran, 0, 0, 0));
        PROBE("cuMemAddressFree", cuMemAddressFree(va, gran));
        PROBE("cuMemRelease", cuMemRelease(vh));
    } else {
        printf("no VMM granularity\n");
    }
    if (limit) {
        /* Over the emulated card (VRAMWATCH_LIMIT): the library refuses it without the real
         * call; without the library the real card has room. */
        PROBE("cudaMalloc over the limit", rc = cudaMalloc(&big, 48 * MiB));
        if (rc == cudaSuccess)
            cudaFree(big);
        PROBE("cuMemAlloc over the limit", cuMemAlloc_v2(&d, 48 * MiB));
    } else {
        /* Out of the simulated card's memory: the library writes its report in here. */
        PROBE("cudaMalloc out of memory", rc = cudaMalloc(&big, 1024 * MiB));
        PROBE("cudaMalloc retried", cudaMalloc(&big, 1024 * MiB));
        PROBE("cuMemAlloc out of memory", cuMemAlloc_v2(&d, 1024 * MiB));
    }
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *p = NULL;
    PROBE("dlsym cuMemAlloc_v2", p = dlsym(h, "cuMemAlloc_v2"));
    PROBE("dlsym cuInit", dlsym(h, "cuInit"));
    PROBE("dlsym missing name", dlsym(h, "cuNoSuchFunction"));
    PROBE("dlsym RTLD_NEXT", dlsym(RTLD_NEXT, "cuMemFree_v2"));
    if (p) {
        CUresult (*al)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))p;
        PROBE("cuMemAlloc_v2 via dlsym", al(&d, MiB));
        PROBE("cuMemFree_v2 direct", cuMemFree_v2(d));
    }
    gpa2_fn gpa2 = (gpa2_fn)dlsym(h, "cuGetProcAddress_v2");
    gpa1_fn gpa1 = (gpa1_fn)dlsym(h, "cuGetProcAddress");
    CUdriverProcAddressQueryResult st;
    if (gpa2) {
        PROBE("cuGetProcAddress_v2", gpa2("cuMemAlloc", &p, 12000, 0, &st));
        PROBE("cuGetProcAddress_v2 other", gpa2("cuInit", &p, 12000, 0, &st));
    }
    if (gpa1)
        PROBE("cuGetProcAddress", gpa1("cuMemFree", &p, 11030, 0));
    PROBE("cudaGetDriverEntryPoint",
          cudaGetDriverEntryPointByVersion("cuMemAlloc", &p, 12000, 0, NULL));
    void *nv = dlopen("libnvidia-ml.so.1", RTLD_LAZY);
    nvml_init_fn init = nv ? (nvml_init_fn)dlsym(nv, "nvmlInit_v2") : NULL;
    nvml_handle_fn handle = nv ? (nvml_handle_fn)dlsym(nv, "nvmlDeviceGetHandleByIndex_v2") : NULL;
    nvml_mem_fn mem = nv ? (nvml_mem_fn)dlsym(nv, "nvmlDeviceGetMemoryInfo") : NULL;
    void *dev = NULL;
    unsigned long long m[3];
    if (init && handle && mem && init() == 0 && handle(0, &dev) == 0)
        PROBE("nvmlDeviceGetMemoryInfo", mem(dev, m));
    else
        printf("no NVML\n");
    PROBE("cudaFree last", cudaFree(a));
    return 0;
}

/* One run of this program as a child, its output into `out`. */
static int run(const char *self, const char *scenario, const char *preload, const char *dir,
               char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    char env_preload[4096], env_dir[4096];
    snprintf(env_preload, sizeof(env_preload), "LD_PRELOAD=%s", preload ? preload : "");
    snprintf(env_dir, sizeof(env_dir), "VRAMWATCH_DIR=%s", dir);
    char *env[256];
    int n = 0;
    for (char **e = environ; *e && n < 240; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0 && strncmp(*e, "VRAMWATCH_", 10) != 0 &&
            strncmp(*e, "SIMGPU_MEMORY=", 14) != 0)
            env[n++] = *e;
    if (preload)
        env[n++] = env_preload;
    env[n++] = env_dir;
    env[n++] = "SIMGPU_MEMORY=64MiB";
    env[n++] = "VRAMWATCH_STACK_DEPTH=8";
    char env_status[4200];
    snprintf(env_status, sizeof(env_status), "VRAMWATCH_STATUS=%s/status", dir);
    if (strcmp(scenario, "limit") == 0)
        env[n++] = "VRAMWATCH_LIMIT=32MiB";
    else
        env[n++] = env_status; /* the status file's updates on the way too */
    env[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    char *argv[] = { (char *)self, "--child", (char *)scenario, NULL };
    pid_t pid;
    int e = posix_spawn(&pid, self, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e != 0) {
        close(fds[0]);
        return -1;
    }
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], out + len, cap - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = 0;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child(argv[2]);
    if (argc < 2) {
        fprintf(stderr, "usage: errno_probe LIB [SANITIZER_RUNTIME]\n");
        return 2;
    }
    char preload[8192];
    if (argc > 2 && argv[2][0])
        snprintf(preload, sizeof(preload), "%s:%s", argv[2], argv[1]);
    else
        snprintf(preload, sizeof(preload), "%s", argv[1]);
    char dir[] = "/tmp/errno_probe.XXXXXX";
    if (!mkdtemp(dir))
        return 2;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (sl <= 0)
        return 2;
    self[sl] = 0;
    static char without[65536], with[65536];
    int bad = 0;
    const char *scenarios[] = { "plain", "limit" };
    for (int s = 0; s < 2; s++) {
        int r0 = run(self, scenarios[s], NULL, dir, without, sizeof(without));
        int r1 = run(self, scenarios[s], preload, dir, with, sizeof(with));
        printf("== %s: without the library (exit %d) | with it (exit %d)\n", scenarios[s], r0, r1);
        /* Line by line, side by side. */
        char *sa, *sb, *la = strtok_r(without, "\n", &sa), *lb = strtok_r(with, "\n", &sb);
        while (la || lb) {
            bool same = la && lb && strcmp(la, lb) == 0;
            printf("%s %-40s | %s\n", same ? " " : "!", la ? la : "", lb ? lb : "");
            bad |= !same;
            la = la ? strtok_r(NULL, "\n", &sa) : NULL;
            lb = lb ? strtok_r(NULL, "\n", &sb) : NULL;
        }
        bad |= r0 != 0 || r1 != 0;
    }
    /* The report the out-of-memory call wrote (the path that writes one must have run), then
     * the folder: the runs' only files. */
    int reports = 0;
    DIR *dd = opendir(dir);
    struct dirent *de;
    while (dd && (de = readdir(dd))) {
        if (de->d_name[0] == '.')
            continue;
        reports += strncmp(de->d_name, "vramwatch-", 10) == 0;
        unlinkat(dirfd(dd), de->d_name, 0);
    }
    if (dd)
        closedir(dd);
    rmdir(dir);
    if (!reports) {
        printf("errno_probe: no report was written: the out-of-memory path did not run\n");
        bad = 1;
    }
    printf(bad ? "errno_probe: errno differs with the library (lines marked !)\n"
               : "errno_probe: errno the same after every call\n");
    return bad;
}
