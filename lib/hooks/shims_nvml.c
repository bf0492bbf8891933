/* Exported shims of NVML's memory queries: under VRAMWATCH_LIMIT they describe the emulated
 * card, like the CUDA queries, so tools that read memory through NVML (pynvml, nvitop,
 * PyTorch's own process listing) agree with the rest of the process. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

#define NVML_ERROR_UNKNOWN 999
#define NVML_OK 0

typedef vw_nvml_return (*pci_fn)(vw_nvml_device, void *);
typedef vw_nvml_return (*index_fn)(vw_nvml_device, unsigned int *);

/* nvmlPciInfo_t: busIdLegacy[16], then domain, bus, device as unsigned ints. */
struct nvml_pci {
    char bus_id_legacy[16];
    unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};

/* A function of the NVML library that `real` lives in (the one the application uses). */
static void *nvml_sym(void *real, const char *name)
{
    Dl_info di;
    if (!dladdr(real, &di) || !di.dli_fname)
        return NULL;
    void *h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *p = dlsym_real(h, name);
    dlclose(h); /* still loaded: the application holds it */
    return p;
}

/* Reads a hexadecimal field of a PCI bus id ("0000:3b:00.0") ending at `end`; no stdio in a hook. */
static const char *hex_field(const char *p, char end, unsigned *out)
{
    unsigned v = 0;
    const char *start = p;
    for (; *p && *p != end; p++) {
        char c = *p;
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16 || p - start >= 8)
            return NULL;
        v = v * 16 + d;
    }
    if (p == start || *p != end)
        return NULL;
    *out = v;
    return end ? p + 1 : p;
}

static bool parse_bus_id(const char *bus, unsigned *d, unsigned *b, unsigned *s, unsigned *f)
{
    const char *p = bus;
    return (p = hex_field(p, ':', d)) && (p = hex_field(p, ':', b)) && (p = hex_field(p, '.', s)) &&
           hex_field(p, '\0', f);
}

/* The CUDA ordinal of an NVML device: matched by PCI location (NVML numbers every GPU of the
 * machine, CUDA only the visible ones, in its own order); by index when there is no
 * CUDA_VISIBLE_DEVICES and no PCI answer. -1 when unknown. */
static int cuda_ordinal(vw_nvml_device dev, void *real)
{
    pci_fn pci;
    void *p = nvml_sym(real, "nvmlDeviceGetPciInfo_v3");
    memcpy(&pci, &p, sizeof(pci));
    struct nvml_pci info;
    if (pci && pci(dev, &info) == NVML_OK) {
        for (int i = 0; i < VW_MAX_DEVICES; i++) {
            char bus[32];
            unsigned d, b, s, f;
            if (!driver_pci_bus_id(i, bus, sizeof(bus)))
                break;
            if (parse_bus_id(bus, &d, &b, &s, &f) && d == info.domain && b == info.bus &&
                s == info.device)
                return i;
        }
    }
    if (options_current.cuda_visible_set)
        return -1;
    index_fn idx;
    p = nvml_sym(real, "nvmlDeviceGetIndex");
    memcpy(&idx, &p, sizeof(idx));
    unsigned int n;
    return idx && idx(dev, &n) == NVML_OK ? (int)n : -1;
}

/* The emulated capacity of an NVML device, or 0 when it has none (or nothing is emulated). */
static uint64_t nvml_limit(vw_nvml_device device, void *real)
{
    if (!interpose_active() || VW_LIKELY(!limit_any))
        return 0;
    return limit_of(cuda_ordinal(device, real));
}

VW_EXPORT vw_nvml_return nvmlDeviceGetMemoryInfo(vw_nvml_device device, vw_nvml_memory *memory)
{
    __typeof__(resolve_real.nvmlDeviceGetMemoryInfo) real = VW_REAL(nvmlDeviceGetMemoryInfo);
    if (VW_UNLIKELY(!real))
        return NVML_ERROR_UNKNOWN;
    vw_nvml_return r = real(device, memory);
    uint64_t lim = 0;
    if (r == NVML_OK && memory)
        VW_KEEP_ERRNO(lim = nvml_limit(device, (void *)real));
    if (lim) {
        memory->total = lim;
        memory->free = memory->used < lim ? lim - memory->used : 0;
    }
    return r;
}

VW_EXPORT vw_nvml_return nvmlDeviceGetMemoryInfo_v2(vw_nvml_device device,
                                                    vw_nvml_memory_v2 *memory)
{
    __typeof__(resolve_real.nvmlDeviceGetMemoryInfo_v2) real = VW_REAL(nvmlDeviceGetMemoryInfo_v2);
    if (VW_UNLIKELY(!real))
        return NVML_ERROR_UNKNOWN;
    vw_nvml_return r = real(device, memory);
    uint64_t lim = 0;
    if (r == NVML_OK && memory)
        VW_KEEP_ERRNO(lim = nvml_limit(device, (void *)real));
    if (lim) {
        /* total = reserved + used + free on NVML's v2 figures */
        uint64_t held = memory->used + memory->reserved;
        memory->total = lim;
        memory->free = held < lim ? lim - held : 0;
    }
    return r;
}
