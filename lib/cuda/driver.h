/* The driver asked for our own purposes (the current device, free memory, device facts, pools):
 * real libcuda functions looked up once libcuda is loaded, never handed to the application. */
#ifndef VW_DRIVER_H
#define VW_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core.h"

/* Whether the driver's functions are known. Before the application has loaded libcuda this is
 * false, and it tries again only when a driver lookup was seen since (driver_hint) or now and
 * then. */
bool driver_ready(void);
/* A driver lookup was seen (dlsym of a cu* name, cuGetProcAddress): the next driver_ready tries. */
void driver_hint(void);

/* cuCtxGetDevice, published once the driver's functions are known (NULL before), so that the
 * allocation path asks it inline. The driver's own type, with CUresult (an enumeration of
 * unsigned values) and CUdevice (an int) written as what they are. */
extern unsigned (*driver_ctx_get_device)(int *device);
int driver_current_device_slow(void);
/* The device the calling thread's current context belongs to, or -1. */
static inline int driver_current_device(void)
{
    unsigned (*get)(int *) = __atomic_load_n(&driver_ctx_get_device, __ATOMIC_ACQUIRE);
    int d;
    if (__builtin_expect(get != NULL, 1))
        return get(&d) == 0 ? d : -1;
    return driver_current_device_slow();
}
/* The PCI bus id of a CUDA ordinal, as the driver writes it ("0000:3b:00.0"). */
bool driver_pci_bus_id(int device, char *out, int len);
bool driver_total_mem(int device, size_t *total);
bool driver_device_name(int device, char *out, int len);
/* As nvidia-smi and CUDA_VISIBLE_DEVICES spell it: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx. */
bool driver_device_uuid(int device, char out[48]);
/* Free and total memory of the current context's device. */
bool driver_mem_info(size_t *free, size_t *total);
/* Free and total memory of another device, through its primary context when that is already
 * active (never creating one); the thread's own context is put back. */
bool driver_mem_info_other(int device, size_t *free, size_t *total);
/* What the device's pools hold beyond what they handed out, and their reserved high-water
 * mark: the default and current pools and those in `d`. False when the pools cannot be asked. */
bool driver_pools(int device, const struct core_device *d, int64_t *extra, int64_t *high);

/* In a forked child: the lookup lock is made anew (another thread may have held it). */
void driver_after_fork_child(void);

#endif
