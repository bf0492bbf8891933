/* nvml_procs.h: what the library asks NVML: other processes on a device (for out-of-memory
 * reports), a device's index (for the live-state file). */
#ifndef VW_NVML_PROCS_H
#define VW_NVML_PROCS_H

#include <stdbool.h>

#include "report.h"

/* The processes other than this one that hold memory on the device with this PCI bus id, at
 * most `max`. Returns how many, or -1 when NVML is not available or does not know the device. */
int nvml_procs_others(const char *pci_bus_id, struct report_proc *out, int max);

/* nvidia-smi's index of the device with this PCI bus id (NVML's enumeration, which ignores
 * CUDA_VISIBLE_DEVICES), or -1 when NVML is not available or does not know the device. With
 * `may_load` false only an NVML the application already loaded is asked. */
int nvml_device_index(const char *pci_bus_id, bool may_load);

#endif
