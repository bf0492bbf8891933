/* nvml.c: libnvidia-ml.so.1 of the simulated GPU, the few NVML calls a memory watcher makes.
 *
 * Devices and capacities come from the same SIMGPU_* variables as the simulated driver. The
 * memory in use is asked of that driver when it is loaded in this process (through
 * simgpu_device_used_bytes), so NVML, cuMemGetInfo and cudaMemGetInfo agree; without it only
 * SIMGPU_OTHER_BYTES is in use, as on a card this process has not touched.
 *
 * The running processes are this one (when its simulated driver holds memory on the device)
 * and, when SIMGPU_OTHER_PID names a process, that one holding SIMGPU_OTHER_BYTES: so a test
 * can put a real process on the card, whose name /proc tells. */
#include "simnvml.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "simconfig.h"

#define EXPORT __attribute__((visibility("default")))

/* What the PCI config space of an H200 SXM says (NVIDIA's vendor id 0x10DE, device 0x2335), in
 * NVML's packing: device id in the high half. */
#define SIM_PCI_DEVICE_ID ((0x2335u << 16) | 0x10DEu)

/* What the simulated driver's cuDriverGetVersion says. */
#define SIM_CUDA_DRIVER_VERSION 13000

/* A handle points at one of these; the index is all there is to a device. */
struct nvmlDevice_st {
    unsigned int index;
};

static struct {
    pthread_mutex_t lock;
    struct simgpu_config cfg;
    int ordinal[SIMGPU_MAX_DEVICES]; /* the CUDA ordinal of each NVML index, -1 if hidden */
    char libcuda[4096];              /* the file the simulated runtime loads (SIMGPU_LIBCUDA) */
    unsigned int refs;               /* nvmlInit calls not yet undone by nvmlShutdown */
    unsigned int count;
    unsigned int other_pid; /* SIMGPU_OTHER_PID: who holds SIMGPU_OTHER_BYTES; 0 none listed */
    struct nvmlDevice_st dev[SIMGPU_MAX_DEVICES];
} nv = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
    pthread_mutex_lock(&nv.lock);
}
static void atfork_release(void)
{
    pthread_mutex_unlock(&nv.lock);
}

/* Reads the environment once per process, like the driver. Quietly: the driver is the one
 * that reports a bad value, so a process using both sees each complaint once. */
static void load_once(void)
{
    simgpu_config_read(&nv.cfg, NULL, NULL);
    const char *path = getenv("SIMGPU_LIBCUDA");
    snprintf(nv.libcuda, sizeof nv.libcuda, "%s", path && *path ? path : "libcuda.so.1");
    nv.count = (unsigned int)nv.cfg.devices;
    const char *other = getenv("SIMGPU_OTHER_PID");
    char *end = NULL;
    unsigned long pid = other && *other ? strtoul(other, &end, 10) : 0;
    nv.other_pid = end && *end == 0 && pid > 0 && pid < 4194304 ? (unsigned int)pid : 0;
    /* NVML ignores CUDA_VISIBLE_DEVICES and numbers physical devices; the driver's figures are
     * asked by ordinal, so each index is mapped to the ordinal the driver gave it. */
    struct simgpu_config visible = nv.cfg;
    simgpu_config_visible(&visible);
    for (int p = 0; p < SIMGPU_MAX_DEVICES; p++)
        nv.ordinal[p] = -1;
    for (int i = 0; i < visible.devices; i++)
        nv.ordinal[visible.physical[i]] = i;
    for (unsigned int i = 0; i < SIMGPU_MAX_DEVICES; i++)
        nv.dev[i].index = i;
    pthread_atfork(atfork_prepare, atfork_release, atfork_release);
}

/* Takes the lock; every exported call but nvmlErrorString goes through here and leave(). */
static nvmlReturn_t enter(void)
{
    pthread_once(&nv_once, load_once);
    pthread_mutex_lock(&nv.lock);
    return nv.refs > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static nvmlReturn_t leave(nvmlReturn_t r)
{
    pthread_mutex_unlock(&nv.lock);
    return r;
}

/* The device a handle stands for, or NULL when it is not one of ours. */
static const struct nvmlDevice_st *device_of(nvmlDevice_t h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)nv.dev;
    if (p < base || p >= base + sizeof nv.dev || (p - base) % sizeof nv.dev[0] != 0)
        return NULL;
    const struct nvmlDevice_st *d = &nv.dev[(p - base) / sizeof nv.dev[0]];
    return d->index < nv.count ? d : NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Memory, from the simulated driver when it is here                                        */

typedef size_t (*used_fn)(int dev);

/* The driver's own count for the device, or `fallback` when no simulated driver is loaded. A
 * driver linked into the program is in the global scope; one the runtime dlopened with
 * RTLD_LOCAL is not, but RTLD_NOLOAD finds it by name without ever loading anything. */
static uint64_t driver_used_bytes(unsigned int index, uint64_t fallback)
{
    void *handle = NULL;
    void *sym = dlsym(RTLD_DEFAULT, "simgpu_device_used_bytes");
    if (!sym) {
        handle = dlopen(nv.libcuda, RTLD_NOW | RTLD_NOLOAD);
        if (handle)
            sym = dlsym(handle, "simgpu_device_used_bytes");
    }
    uint64_t used = fallback;
    if (sym) {
        used_fn f;
        memcpy(&f, &sym, sizeof f);
        used = f((int)index);
    }
    if (handle)
        dlclose(handle); /* whoever loaded the driver still holds it */
    return used;
}

struct mem_figures {
    uint64_t total, used, free;
};

/* Called without the lock held: the driver takes its own lock, and dlopen the loader's. The
 * configuration is never written after load_once. */
static void memory_of(unsigned int index, struct mem_figures *m)
{
    m->total = nv.cfg.memory[index];
    /* A device hidden from CUDA in this process holds nothing of ours: only the "other" bytes. */
    m->used = nv.ordinal[index] >= 0 ? driver_used_bytes((unsigned int)nv.ordinal[index],
                                                         nv.cfg.other_bytes[index])
                                     : nv.cfg.other_bytes[index];
    /* Another "process" may claim more than the card has; NVML never reports used > total. */
    if (m->used > m->total)
        m->used = m->total;
    m->free = m->total - m->used;
}

/* ---------------------------------------------------------------------------------------- */
/* Initialisation                                                                           */

static nvmlReturn_t do_init(void)
{
    if (nv.count == 0)
        return NVML_ERROR_DRIVER_NOT_LOADED; /* a machine without GPUs has no NVIDIA driver */
    if (nv.refs == UINT_MAX)
        return NVML_ERROR_UNKNOWN;
    nv.refs++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    enter();
    return leave(do_init());
}

/* The NVML 4.304 entry point; the simulated one behaves like nvmlInit_v2. */
EXPORT nvmlReturn_t nvmlInit(void)
{
    enter();
    return leave(do_init());
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS)
        nv.refs--;
    return leave(r);
}

/* ---------------------------------------------------------------------------------------- */
/* Devices                                                                                  */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        if (!deviceCount)
            r = NVML_ERROR_INVALID_ARGUMENT;
        else
            *deviceCount = nv.count;
    }
    return leave(r);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        if (!device || index >= nv.count)
            r = NVML_ERROR_INVALID_ARGUMENT;
        else
            *device = &nv.dev[index];
    }
    return leave(r);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        const struct nvmlDevice_st *d = device_of(device);
        if (!d || !index)
            r = NVML_ERROR_INVALID_ARGUMENT;
        else
            *index = d->index;
    }
    return leave(r);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        const struct nvmlDevice_st *d = device_of(device);
        /* The driver's name for the device (SIMGPU_NAME, else its card's). NVML promises that
         * NVML_DEVICE_NAME_V2_BUFFER_SIZE always suffices: longer SIMGPU_NAMEs are cut there
         * (cuDeviceGetName gives the whole name). */
        const char *full = d ? simgpu_device_name(&nv.cfg, (int)d->index) : "";
        size_t n = strnlen(full, NVML_DEVICE_NAME_V2_BUFFER_SIZE - 1);
        if (!d || !name)
            r = NVML_ERROR_INVALID_ARGUMENT;
        else if (length < n + 1)
            r = NVML_ERROR_INSUFFICIENT_SIZE;
        else {
            memcpy(name, full, n);
            name[n] = '\0';
        }
    }
    return leave(r);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        const struct nvmlDevice_st *d = device_of(device);
        if (!d || !pci) {
            r = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            /* The same address the simulated driver gives: domain 0, bus = ordinal + 1,
             * device 0, function 0 (cuDeviceGetPCIBusId prints it like busIdLegacy). */
            unsigned int bus = (d->index + 1) & 0xffu;
            memset(pci, 0, sizeof *pci);
            pci->domain = 0;
            pci->bus = bus;
            pci->device = 0;
            pci->pciDeviceId = SIM_PCI_DEVICE_ID;
            pci->pciSubSystemId = 0;
            snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
                     0u, bus, 0u);
            snprintf(pci->busId, sizeof pci->busId, NVML_DEVICE_PCI_BUS_ID_FMT, 0u, bus, 0u);
        }
    }
    return leave(r);
}

/* Checks the call under the lock; the figures are taken after it is dropped. */
static nvmlReturn_t memory_call(nvmlDevice_t device, const void *out, unsigned int *index)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        const struct nvmlDevice_st *d = device_of(device);
        if (!d || !out)
            r = NVML_ERROR_INVALID_ARGUMENT;
        else
            *index = d->index;
    }
    return leave(r);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    unsigned int index = 0;
    struct mem_figures m;
    nvmlReturn_t r = memory_call(device, memory, &index);
    if (r != NVML_SUCCESS)
        return r;
    memory_of(index, &m);
    memory->total = m.total;
    memory->free = m.free;
    memory->used = m.used;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    unsigned int index = 0;
    struct mem_figures m;
    nvmlReturn_t r = memory_call(device, memory, &index);
    if (r != NVML_SUCCESS)
        return r;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    /* The simulated card sets nothing aside for firmware: reserved is 0, so the v1 and v2
     * figures are the same. */
    memory_of(index, &m);
    memory->total = m.total;
    memory->reserved = 0;
    memory->free = m.free;
    memory->used = m.used;
    return NVML_SUCCESS;
}

/* The handle of the device with this bus id, in either of the forms NVML and the driver print
 * ("0000:01:00.0" or "00000000:01:00.0"), letters in either case. */
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    nvmlReturn_t r = enter();
    if (r != NVML_SUCCESS)
        return leave(r);
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    if (!pciBusId || !device || sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    /* the simulated devices sit on buses 1, 2, ... (see nvmlDeviceGetPciInfo_v3) */
    if (domain != 0 || dev != 0 || fn != 0 || bus < 1 || bus > nv.count)
        return leave(NVML_ERROR_NOT_FOUND);
    *device = &nv.dev[bus - 1];
    return leave(NVML_SUCCESS);
}

/* The processes on the device, at most two: this one and SIMGPU_OTHER_PID's. *room is the
 * caller's buffer size; it gets the count. Checks the call like memory_call. */
static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int *room,
                                      nvmlProcessInfo_t list[2], unsigned int *n)
{
    unsigned int index = 0;
    nvmlReturn_t r = memory_call(device, room, &index);
    if (r != NVML_SUCCESS)
        return r;
    uint64_t other = nv.cfg.other_bytes[index];
    /* NVML numbers physical devices; the driver is asked by the ordinal it gave this one */
    uint64_t used = nv.ordinal[index] >= 0
                            ? driver_used_bytes((unsigned int)nv.ordinal[index], other)
                            : other;
    *n = 0;
    if (used > other)
        list[(*n)++] = (nvmlProcessInfo_t){ (unsigned int)getpid(), used - other, 0xFFFFFFFFu,
                                            0xFFFFFFFFu };
    if (nv.other_pid && other > 0)
        list[(*n)++] = (nvmlProcessInfo_t){ nv.other_pid, other, 0xFFFFFFFFu, 0xFFFFFFFFu };
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                            unsigned int *infoCount,
                                                            nvmlProcessInfo_t *infos)
{
    nvmlProcessInfo_t list[2];
    unsigned int n = 0;
    nvmlReturn_t r = running_processes(device, infoCount, list, &n);
    if (r != NVML_SUCCESS)
        return r;
    unsigned int room = *infoCount;
    *infoCount = n;
    if (room < n || (n && !infos))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(infos, list, n * sizeof list[0]);
    return NVML_SUCCESS;
}

/* The v1 layout (pid and memory only), which PyTorch's out-of-memory message reads. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                         unsigned int *infoCount,
                                                         nvmlProcessInfo_v1_t *infos)
{
    nvmlProcessInfo_t list[2];
    unsigned int n = 0;
    nvmlReturn_t r = running_processes(device, infoCount, list, &n);
    if (r != NVML_SUCCESS)
        return r;
    unsigned int room = *infoCount;
    *infoCount = n;
    if (room < n || (n && !infos))
        return NVML_ERROR_INSUFFICIENT_SIZE;
    for (unsigned int i = 0; i < n; i++)
        infos[i] = (nvmlProcessInfo_v1_t){ list[i].pid, list[i].usedGpuMemory };
    return NVML_SUCCESS;
}

/* The driver's UUID for the device (NVML indices are physical devices, as the UUIDs). */
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        const struct nvmlDevice_st *d = device_of(device);
        char text[48];
        if (!d || !uuid) {
            r = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            simgpu_uuid_string((int)d->index, text);
            if (length < strlen(text) + 1)
                r = NVML_ERROR_INSUFFICIENT_SIZE;
            else
                memcpy(uuid, text, strlen(text) + 1);
        }
    }
    return leave(r);
}

/* No NVLink: every link of a valid device is NVML_ERROR_NOT_SUPPORTED, as on a PCIe card. */
static nvmlReturn_t nvlink_call(nvmlDevice_t device, unsigned int link, const void *out)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        if (!device_of(device) || !out || link >= NVML_NVLINK_MAX_LINKS)
            r = NVML_ERROR_INVALID_ARGUMENT;
        else
            r = NVML_ERROR_NOT_SUPPORTED;
    }
    return leave(r);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(
        nvmlDevice_t device, unsigned int link, nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
    return nvlink_call(device, link, pNvLinkDeviceType);
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                        nvmlPciInfo_t *pci)
{
    return nvlink_call(device, link, pci);
}

/* No NVLink fabric either: the call succeeds and says so (state NOT_SUPPORTED), which PyTorch
 * takes as "no fabric handles" without a warning. v2 and v3 of the struct are accepted. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device,
                                                nvmlGpuFabricInfoV_t *gpuFabricInfo)
{
    nvmlReturn_t r = enter();
    if (r != NVML_SUCCESS)
        return leave(r);
    if (!device_of(device) || !gpuFabricInfo)
        return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int version = gpuFabricInfo->version;
    if (version != nvmlGpuFabricInfo_v2 && version != nvmlGpuFabricInfo_v3)
        return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlGpuFabricInfo_v3_t info;
    memset(&info, 0, sizeof info);
    info.version = version;
    info.status = NVML_ERROR_NOT_SUPPORTED;
    info.state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
    memcpy(gpuFabricInfo, &info,
           version == nvmlGpuFabricInfo_v3 ? sizeof(nvmlGpuFabricInfo_v3_t)
                                           : sizeof(nvmlGpuFabricInfo_v2_t));
    return leave(NVML_SUCCESS);
}

/* The CUDA version of the simulated driver (cuDriverGetVersion's). */
static nvmlReturn_t cuda_driver_version(int *v)
{
    nvmlReturn_t r = enter();
    if (r == NVML_SUCCESS) {
        if (!v)
            r = NVML_ERROR_INVALID_ARGUMENT;
        else
            *v = SIM_CUDA_DRIVER_VERSION;
    }
    return leave(r);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    return cuda_driver_version(cudaDriverVersion);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    return cuda_driver_version(cudaDriverVersion);
}

/* ---------------------------------------------------------------------------------------- */
/* Errors                                                                                   */

EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
        return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
        return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
        return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
        return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
        return "GPU requires reset";
    case NVML_ERROR_OPERATING_SYSTEM:
        return "GPU access blocked by the operating system";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "Driver/library version mismatch";
    case NVML_ERROR_IN_USE:
        return "In use by another client";
    case NVML_ERROR_MEMORY:
        return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
        return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
        return "vGPU operation not available while ECC is on";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
        return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
        return "Deprecated";
    case NVML_ERROR_NOT_READY:
        return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
        return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
        return "Invalid state";
    case NVML_ERROR_UNKNOWN:
        return "Unknown Error";
    }
    return "Unknown Error";
}
